//! The `podline` binary: parses flags, starts tracing, dispatches to a subcommand and maps errors
//! to exit codes (`cli::exit`: a usage error exits 2, any other 1). Everything else lives in the
//! library crates (`podline-sim`, `podline-launch`, `podline-record`, `podline-store`,
//! `podline-client`).

mod allocator;
mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    #[cfg(not(target_os = "linux"))]
    allocator::tune(); // on Linux it already ran when the executable was loaded
    let cli = cli::Cli::parse();
    if matches!(cli.command, cli::Command::Sim(_)) {
        allocator::favour_throughput();
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
