//! The binary's exit-code policy: the codes every subcommand exits with for what is not a task's
//! own result, and the `Exit codes:` texts the subcommands' `--help` ends with.

/// Exit code for errors podline could not attribute to a task (bad config, unreachable API...).
pub const EXIT_ERROR: u8 = 2;
/// Exit code for invalid usage (bad flag or environment value): 2 in every subcommand, the code
/// clap itself exits with for a usage error, so a script sees one convention.
pub const EXIT_USAGE: u8 = 2;

/// The exit-code policy of the daemons (`record`, `ui`), shown at the end of their `--help`.
pub(super) const EXIT_CODES_DAEMON: &str = "\
Exit codes:
  0  stopped by SIGINT (Ctrl-C) or SIGTERM after a clean shutdown
  2  bad usage (an invalid flag, environment variable or file: nothing was started), or an
     error no retry can fix (e.g. 401, 403, a missing namespace, an unusable store)";

/// The exit-code policy of the store queries (`runs`, `pods`, `show`).
pub(super) const EXIT_CODES_QUERY: &str = "\
Exit codes:
  0  printed
  2  bad usage (an invalid flag, environment variable or file), a store that cannot be read,
     or (show) no such recorded pod";

/// The exit-code policy of `demo`.
pub(super) const EXIT_CODES_DEMO: &str = "\
Exit codes:
  0  every check on the store passed
  1  a check failed (the summary says which)
  2  bad usage (an invalid flag, environment variable or file) or an error that stopped the demo";
