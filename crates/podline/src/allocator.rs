//! The process allocator: mimalloc, tuned to give freed memory back to the OS at once.
//!
//! Why mimalloc: the sim and the daemons free bursts of small objects (watch history, list pages,
//! pod versions), and glibc's malloc keeps such freed memory resident, so a sim that held 100k
//! pods' burst history would never shrink back.
//!
//! Why tuned: by default mimalloc keeps freed pages committed for a while and commits whole arenas
//! eagerly, which is right for throughput but shows as resident memory that a daemon no longer
//! uses: `podline record` after listing 10k pods stayed at 66 MiB, against 38 MiB with freed pages
//! purged at once from lazily committed arenas. Platform teams size memory requests and limits
//! from the resident set, so the daemons trade a few `madvise` calls for it. A user can still
//! choose otherwise with mimalloc's own environment variables, which win over these settings.
//! The sim and the benchmark keep mimalloc's purge delay (see [`favour_throughput`]).

#![allow(unsafe_code)] // the FFI calls into mimalloc below; see their SAFETY notes.

use std::ffi::{c_int, c_long};
use std::sync::atomic::{AtomicBool, Ordering};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_arena_eager_commit` in mimalloc.h (the same value in mimalloc v2 and v3).
const ARENA_EAGER_COMMIT: c_int = 4;
/// `mi_option_purge_delay` in mimalloc.h (the same value in mimalloc v2 and v3).
const PURGE_DELAY: c_int = 15;

/// mimalloc v2's default purge delay in milliseconds.
const DEFAULT_PURGE_DELAY: c_long = 10;

/// The options podline sets: (option, mimalloc v2's default, podline's value).
const TUNING: [(c_int, c_long, c_long); 2] = [
    // Commit arena memory as it is used, so that purged pages leave the resident set.
    (ARENA_EAGER_COMMIT, 2, 0),
    // Purge freed pages at once instead of after a delay.
    (PURGE_DELAY, DEFAULT_PURGE_DELAY, 0),
];

/// Whether [`tune`] ran.
static TUNED: AtomicBool = AtomicBool::new(false);

/// Whether the user chose the purge delay (then [`favour_throughput`] leaves it alone).
static PURGE_DELAY_CHOSEN: AtomicBool = AtomicBool::new(false);

/// Applies podline's allocator options, except where the user chose a value through mimalloc's
/// environment variables (`MIMALLOC_ARENA_EAGER_COMMIT`, `MIMALLOC_PURGE_DELAY`): mimalloc reads
/// them when the process loads, so an option that differs from mimalloc's default was chosen.
///
/// Must run before anything allocates (the first allocation reserves the first arena, with the
/// options of that moment; Rust's runtime allocates before `main`) and before any other thread
/// exists (mimalloc documents its option setters as not thread safe): on Linux it runs as a
/// load-time constructor, see [`TUNE_AT_LOAD`]. It allocates nothing itself.
pub fn tune() {
    if TUNED.swap(true, Ordering::Relaxed) {
        return; // the options now hold podline's values, which must not count as the user's
    }
    for (option, default, value) in TUNING {
        // SAFETY: reading and setting options with valid ids (see the constants); mimalloc's
        // option table is static, and no other thread exists yet (see above).
        unsafe {
            if libmimalloc_sys::mi_option_get(option) == default {
                libmimalloc_sys::mi_option_set(option, value);
            } else if option == PURGE_DELAY {
                PURGE_DELAY_CHOSEN.store(true, Ordering::Relaxed);
            }
        }
    }
}

/// Puts the purge delay back to mimalloc's default, for the commands whose figure of merit is
/// throughput rather than a daemon's resident set: the sim (and the benchmark that hosts it)
/// serves LISTs of 10k pods and fans events out to 100 watchers, and purging every freed page at
/// once doubled the LIST time and cost a tenth of the fan-out rate.
///
/// Must run before the async runtime starts its threads (see [`tune`]).
pub fn favour_throughput() {
    if !PURGE_DELAY_CHOSEN.load(Ordering::Relaxed) {
        // SAFETY: setting an option with a valid id while no other thread exists.
        unsafe { libmimalloc_sys::mi_option_set(PURGE_DELAY, DEFAULT_PURGE_DELAY) };
    }
}

/// Runs [`tune`] when the executable is loaded, before Rust's runtime and mimalloc's own
/// initialisation (a prioritised `.init_array` entry runs before unprioritised ones), so that the
/// first arena is reserved with podline's options.
#[cfg(target_os = "linux")]
#[used]
// SAFETY: the entry is a plain `extern "C" fn()`, what the loader expects in `.init_array`, and
// `tune` needs nothing initialised (it calls only mimalloc's option getters and setters).
#[unsafe(link_section = ".init_array.00200")]
pub static TUNE_AT_LOAD: extern "C" fn() = tune_at_load;

#[cfg(target_os = "linux")]
extern "C" fn tune_at_load() {
    tune();
}
