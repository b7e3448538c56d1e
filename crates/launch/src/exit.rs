//! Exit codes of `podline run`.
//!
//! When the task ran, podline exits with **the main container's exit code** (0 on success, the
//! program's own code otherwise, 137 for a SIGKILLed / OOM-killed container). When podline itself
//! could not run the task, it uses one of the codes below. Containers can exit with these numbers
//! too; the stderr report and `-o json` tell the two apart.
//!
//! | code | meaning |
//! |---|---|
//! | 0..=255 | the main container's exit code |
//! | 2 | usage or configuration error (bad flag, env var, template) — nothing was created |
//! | 3 | the API server rejected the create (400/401/403/404/422) or retries ran out |
//! | 4 | the pod did not start: schedule/startup timeout, a permanent image error, or the overall timeout expired first |
//! | 5 | a foreign pod already has the name (left untouched), or reattaching ([`crate::LaunchConfig::reattach`]) finds several live pods of the task |
//! | 6 | the pod was lost (deleted by someone else, or by a reaper once the run's Lease expired or vanished) or the API failed for good mid-run |
//! | 124 | the pod started but was still running when the overall timeout expired (pod deleted); as coreutils' `timeout` |
//! | 130 | interrupted by SIGINT (pod deleted) |
//! | 143 | interrupted by SIGTERM (pod deleted) |

/// Usage or configuration error; matches clap's own exit code for bad flags.
pub const USAGE: u8 = 2;
/// The create was rejected (not retryable) or retries were exhausted.
pub const CREATE_FAILED: u8 = 3;
/// Schedule timeout, startup timeout or permanent image error.
pub const START_FAILED: u8 = 4;
/// A foreign pod holds our name, or reattach found several candidates.
pub const NAME_CLASH: u8 = 5;
/// The pod vanished, or the API failed for good after the pod was created.
pub const LOST: u8 = 6;
/// The pod started and ran past the overall timeout; 124 as coreutils' `timeout(1)` exits, so
/// scripts that already know that convention read it the same way.
pub const TIMED_OUT: u8 = 124;
/// Interrupted by SIGINT (128 + 2), like a shell.
pub const SIGINT: u8 = 130;
/// Interrupted by SIGTERM (128 + 15), like a shell.
pub const SIGTERM: u8 = 143;

/// Maps a container exit code (an `i32` in the Kubernetes API) to a process exit code. Values
/// outside 0..=255 (which only a broken runtime reports) become 255 rather than wrapping to a
/// misleading small number.
pub fn from_container(code: i32) -> u8 {
    u8::try_from(code).unwrap_or(255)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn container_codes_map_one_to_one_and_clamp() {
        assert_eq!(from_container(0), 0);
        assert_eq!(from_container(1), 1);
        assert_eq!(from_container(137), 137);
        assert_eq!(from_container(-1), 255);
        assert_eq!(from_container(300), 255);
    }
}
