use std::process::ExitCode;

use styrmin_webhook::cli::Cli;

#[tokio::main]
async fn main() -> ExitCode {
    // One crypto provider for the process: ring.
    let _ = rustls::crypto::ring::default_provider().install_default();
    Cli::parse_from_args(std::env::args_os()).run().await
}
