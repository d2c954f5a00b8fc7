//! `stand-in-ingress-controller`: the stand-in ingress controllers of
//! `test-support/src/stand_in_controller.rs` as a process of their own, so that a test or
//! `make bench-scale` can kill (SIGKILL) or pause (SIGSTOP) them as a controller crashes or
//! hangs. The cluster comes from the usual places (`KUBECONFIG`, `~/.kube/config`, in-cluster).
//!
//! `stand-in-ingress-controller --class nginx=127.0.0.11 --class haproxy=127.0.0.12 --port 8080`
//!
//! It prints `ready port=PORT` on stdout once every address listens, logs to stderr, and
//! stops on SIGTERM or SIGINT, leaving every status as it is.

use anyhow::{Context as _, Result};
use clap::Parser;
use styrmin_test_support::stand_in_controller::{ClassAddress, StandIn};
use tokio::signal::unix::{SignalKind, signal};

#[derive(Parser, Debug)]
#[command(
    about = "Stand-in ingress controllers for tests: each class's address in the status of its \
             Ingresses, and HTTP answered by host on that address"
)]
struct Args {
    /// A class and the address its controller publishes and listens on (NAME=IP, a loopback
    /// address such as 127.0.0.11); repeat for more classes, each with its own address.
    #[arg(
        long = "class",
        value_name = "NAME=IP",
        required = true,
        env = "STAND_IN_CLASSES",
        value_delimiter = ','
    )]
    classes: Vec<ClassAddress>,
    /// The HTTP port, the same on every address; 0 picks a free one (printed).
    #[arg(long, env = "STAND_IN_PORT", default_value_t = 8080)]
    port: u16,
    /// What to log, in tracing's filter syntax (`info`, `debug,kube_client=info`).
    #[arg(long, env = "STAND_IN_LOG_FILTER", default_value = "info")]
    log_filter: String,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let Args {
        classes,
        port,
        log_filter,
    } = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_new(&log_filter)
                .with_context(|| format!("--log-filter {log_filter:?}"))?,
        )
        .with_writer(std::io::stderr)
        .init();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let stand_in = StandIn::new(classes, port)?;
    let client = kube::Client::try_default()
        .await
        .context("a client of the cluster (KUBECONFIG or in-cluster)")?;
    let mut terminate = signal(SignalKind::terminate()).context("listening for SIGTERM")?;
    let running = stand_in.start(client).await?;
    println!("ready port={}", running.port());
    tokio::select! {
        _ = terminate.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    drop(running);
    Ok(())
}
