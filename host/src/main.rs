//! The `eddy` binary.

use clap::Parser;

fn main() -> std::process::ExitCode {
    match eddy::cli::Cli::parse().execute() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
