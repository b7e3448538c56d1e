//! The `podline` command as a library: [`run_cli`] parses the arguments, starts tracing,
//! dispatches to a subcommand and maps errors to exit codes (`cli::exit`: a usage error exits 2,
//! any other 1). Everything else lives in the
//! library crates (`podline-sim`, `podline-launch`, `podline-record`, `podline-store`,
//! `podline-client`).
//!
//! Two programs run it: the `podline` executable (`main.rs`, with its tuned allocator) and the
//! Python distribution's `podline` command, whose native extension (`podline-pyext`) calls
//! [`run_cli`] so that `pip install podline` still gives the command (docs/ARCHITECTURE.md).

mod cli;

use std::ffi::OsString;
use std::process::ExitCode;

use clap::Parser;

/// Runs the `podline` command with `args` (the program name first, as in `std::env::args_os`)
/// on a runtime of its own, and returns its exit code. `favour_throughput` is called before a
/// `podline sim` starts (the executable's allocator trades resident memory for speed there).
///
/// Argument errors, `--help` and `--version` print and exit the process, as clap does.
pub fn run_cli<I, T>(args: I, favour_throughput: fn()) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = cli::Cli::parse_from(args);
    if matches!(cli.command, cli::Command::Sim(_)) {
        favour_throughput();
    }
    cli::init_tracing(cli.verbosity, &cli.command);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return cli::exit::code(cli::exit::ERROR);
        }
    };
    match runtime.block_on(cli::dispatch(cli)) {
        Ok(code) => code,
        Err(err) => {
            // Each cause once: many errors (kube's among them) print their cause in their own
            // message and return it from source() too, which `{:#}` would repeat.
            let message = podline_client::error::once_each(
                err.to_string(),
                err.chain().skip(1).map(ToString::to_string),
            );
            eprintln!("error: {message}");
            cli::exit::code(cli::exit::code_of(&err))
        }
    }
}

/// The number behind an [`ExitCode`] (std keeps it opaque; every code podline returns is made
/// with `ExitCode::from(u8)` or is `SUCCESS`/`FAILURE`, 0 and 1 on every platform podline
/// supports), for a caller that must hand it on as a number, such as a Python entry point.
pub fn exit_code_number(code: ExitCode) -> u8 {
    (0..=u8::MAX)
        .find(|&n| ExitCode::from(n) == code)
        .unwrap_or(1)
}
