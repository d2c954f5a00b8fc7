use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    styrmin_postrender::cli::Cli::parse_from(styrmin_postrender::cli::arguments()).run()
}
