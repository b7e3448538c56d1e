//! The `podline` binary: parses flags, starts tracing, dispatches to a subcommand and maps errors
//! to exit codes. Everything else lives in the library crates (`podline-sim`, `podline-launch`,
//! `podline-record`, `podline-store`, `podline-client`).

mod cli;

use std::process::ExitCode;

use clap::Parser;

/// mimalloc instead of glibc's malloc: the sim and the daemons free bursts of small objects
/// (watch history, pod versions) and glibc keeps such freed memory resident, so a sim that held
/// 100k pods' burst history would never shrink back. mimalloc returns freed pages to the OS.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    cli::init_tracing(&cli.global, &cli.command);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return ExitCode::from(cli::EXIT_USAGE);
        }
    };
    match runtime.block_on(cli::dispatch(cli)) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(cli::EXIT_ERROR)
        }
    }
}
