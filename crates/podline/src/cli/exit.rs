//! The binary's exit-code policy, in one place: every code a subcommand exits with that is not a
//! task's own result, the usage error subcommands raise with `?`, the mapping of an error to its
//! code, and the `Exit codes:` tables the subcommands' `--help` ends with, written from the
//! constants below so that a table cannot say another number than the code.
//!
//! `podline run`'s launch outcomes (3 to 6, 124, 130, 143) are the launch library's
//! ([`podline_launch::exit`]), because its results carry them; they are re-exported here as
//! [`launch`] so the binary names every code through this module.

use std::fmt;
use std::process::ExitCode;

/// The launch library's outcome codes of `podline run` (create refused, start failed, name
/// clash, pod lost, timed out, interrupted), documented in its table.
pub use podline_launch::exit as launch;

/// Everything went as asked.
pub const SUCCESS: u8 = 0;
/// An error podline could not attribute to a task and no retry can fix (a 401 or 403, a missing
/// namespace, an unusable store, an address in use): 1, the usual code of a failed command, and
/// not [`USAGE`], so a script can tell a mistyped flag from a refusal by the cluster.
pub const ERROR: u8 = 1;
/// Invalid usage (a bad flag, environment variable or file; nothing was started): 2 in every
/// subcommand, the code clap itself exits with for a usage error, so a script sees one convention.
pub const USAGE: u8 = launch::USAGE;
/// Some of the tasks of a `podline run --count`/`-f` failed, or a check of `podline demo` did.
pub const FAILED: u8 = 1;
/// `podline gc --wait` passed before some Leases were seen renewed or expired.
pub const UNDECIDED: u8 = 3;

/// A usage error: what the user typed is wrong and nothing was started. Raised with `?` through
/// [`usage`]; [`code_of`] maps it to [`USAGE`], any other error to [`ERROR`].
#[derive(Debug)]
pub struct Usage(String);

impl fmt::Display for Usage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// Marks `err` as a usage error (its whole chain in one message, as `{:#}` prints it), for
/// `.map_err(usage)?` and `Err(usage(..))?`.
pub fn usage(err: impl fmt::Display) -> anyhow::Error {
    anyhow::Error::new(Usage(format!("{err:#}")))
}

/// The exit code of an error that ended a subcommand: [`USAGE`] for a [`Usage`] error, else
/// [`ERROR`].
pub fn code_of(err: &anyhow::Error) -> u8 {
    if err.is::<Usage>() { USAGE } else { ERROR }
}

/// `code` as the process's exit status.
pub fn code(code: u8) -> ExitCode {
    ExitCode::from(code)
}

/// The exit-code policy of the daemons (`record`, `ui`), shown at the end of their `--help`.
pub fn daemon_codes() -> String {
    format!(
        "\
Exit codes:
  {SUCCESS}  stopped by SIGINT (Ctrl-C) or SIGTERM after a clean shutdown
  {ERROR}  an error no retry can fix (e.g. 401, 403, a missing namespace, an unusable store, an
     address in use)
  {USAGE}  bad usage (an invalid flag, environment variable or file): nothing was started"
    )
}

/// The exit-code policy of the store queries (`runs`, `pods`, `show`).
pub fn query_codes() -> String {
    format!(
        "\
Exit codes:
  {SUCCESS}  printed
  {ERROR}  a store that cannot be read, or (show) no such recorded pod
  {USAGE}  bad usage (an invalid flag, environment variable or file, a --db that does not exist)"
    )
}

/// The exit-code policy of `demo`.
pub fn demo_codes() -> String {
    format!(
        "\
Exit codes:
  {SUCCESS}  every check on the store passed
  {FAILED}  a check failed (the summary says which), or an error stopped the demo
  {USAGE}  bad usage (an invalid flag, environment variable or file)"
    )
}

/// The exit-code policy of `sim`.
pub fn sim_codes() -> String {
    format!(
        "\
Exit codes:
  {SUCCESS}  stopped by SIGINT (Ctrl-C) or SIGTERM
  {ERROR}  the server could not start (e.g. an address in use), or the ground-truth file could
     not be written on shutdown
  {USAGE}  bad usage (an invalid flag, environment variable or faults file, or a --kubeconfig-out
     or --ground-truth-out file that cannot be written at start): nothing was served"
    )
}

/// The exit-code policy of `gc`.
pub fn gc_codes() -> String {
    format!(
        "\
Exit codes:
  {SUCCESS}  every podline Lease in scope was seen alive or expired (and reaped), or there was none
  {ERROR}  gc failed: an API error no later list fixes (e.g. 403: see deploy/README.md for RBAC), or
     no list answered within --wait; with --finalizers, also when the finalizer could not be
     removed from some pod, or a pod's metadata does not decode (it is named; the rest are
     released)
  {USAGE}  bad usage (an invalid flag): nothing was done
  {UNDECIDED}  --wait passed before some Leases were seen renewed or expired (listed on stderr): they
     were left alone; run gc again, or with a longer --wait"
    )
}

/// The exit-code policy of `run`: the container's code, or one of the launch outcomes.
pub fn run_codes() -> String {
    use launch::{CREATE_FAILED, LOST, NAME_CLASH, SIGINT, SIGTERM, START_FAILED, TIMED_OUT};
    format!(
        "\
Exit codes:
  0-255  the main container's exit code (137 = killed, e.g. OOM)
  {ERROR:<5}  (also) an error before any pod was created that no retry can fix (e.g. the liveness
         Lease refused with 403, a kubeconfig whose credentials cannot be read)
  {USAGE:<5}  usage or configuration error (bad flag, env var, template); nothing created
  {CREATE_FAILED:<5}  the API server rejected the create (400/401/403/404/422) or create retries ran out
  {START_FAILED:<5}  the pod did not start: schedule/startup timeout, a permanent image error, or --timeout
         expired before it started (pod deleted)
  {NAME_CLASH:<5}  a pod not created by this run holds the name (left untouched), or --reattach is ambiguous
  {LOST:<5}  the pod was lost (deleted by someone else, or by a reaper once this run's Lease
         expired or vanished) or the API failed for good mid-run
  {TIMED_OUT:<5}  the pod started but was still running when --timeout expired (pod deleted), as timeout(1)
  {SIGINT:<5}  interrupted by SIGINT (pod deleted)      {SIGTERM}  interrupted by SIGTERM (pod deleted)
         (at any stage: while connecting or waiting for the API server too)
With --count/-f: {SUCCESS} if every task succeeded, else {FAILED}; {SIGINT}/{SIGTERM} when interrupted (pods deleted).
The summary (-o json|yaml too) keeps the results of the first 1000 failed tasks and counts
the rest: a run's memory does not grow with --count."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The complaint: a bad flag and a refusal by the cluster exited alike.
    #[test]
    fn a_usage_error_and_a_runtime_error_should_exit_differently() {
        assert_ne!(USAGE, ERROR);
        assert_eq!(code_of(&usage("--grace: bad")), USAGE);
        assert_eq!(code_of(&anyhow::anyhow!("403 Forbidden")), ERROR);
        // Context added on the way up keeps it a usage error.
        assert_eq!(code_of(&usage("bad").context("record")), USAGE);
    }

    #[test]
    fn a_usage_error_should_print_the_whole_chain_once() {
        let err = anyhow::anyhow!("inner").context("outer");
        assert_eq!(usage(err).to_string(), "outer: inner");
    }

    /// Every table names the usage code, and no code twice for different meanings at the start
    /// of a row.
    #[test]
    fn every_table_should_list_the_usage_code() {
        for table in [
            daemon_codes(),
            query_codes(),
            demo_codes(),
            sim_codes(),
            gc_codes(),
            run_codes(),
        ] {
            assert!(table.starts_with("Exit codes:\n"), "{table}");
            assert!(
                table
                    .lines()
                    .any(|line| line.trim_start().starts_with(&format!("{USAGE} "))),
                "{table}"
            );
        }
    }
}
