use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    postrender::cli::Cli::parse_from(postrender::cli::arguments()).run()
}
