use clap::Parser;
use styrmin_webhook::cli::Args;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // One crypto provider for the process: ring.
    let _ = rustls::crypto::ring::default_provider().install_default();
    Args::parse().run().await
}
