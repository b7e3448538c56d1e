//! The `podline` executable: [`podline::run_cli`] with the process's tuned allocator.

mod allocator;

use std::process::ExitCode;

fn main() -> ExitCode {
    #[cfg(not(target_os = "linux"))]
    allocator::tune(); // on Linux it already ran when the executable was loaded
    podline::run_cli(std::env::args_os(), allocator::favour_throughput)
}
