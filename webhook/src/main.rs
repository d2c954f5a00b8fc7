use std::process::ExitCode;

use clap::Parser;
use styrmin_webhook::audit::cli::AuditArgs;
use styrmin_webhook::cli::Args;

#[tokio::main]
async fn main() -> ExitCode {
    // One crypto provider for the process: ring.
    let _ = rustls::crypto::ring::default_provider().install_default();
    // `styrmin-webhook audit ...`: the one-shot audit; anything else serves.
    if std::env::args_os().nth(1).is_some_and(|a| a == "audit") {
        return AuditArgs::parse_from(std::env::args_os().skip(1))
            .run()
            .await;
    }
    match Args::parse().run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // The error and its causes on one line.
            eprintln!("styrmin-webhook: {error:#}");
            ExitCode::FAILURE
        }
    }
}
