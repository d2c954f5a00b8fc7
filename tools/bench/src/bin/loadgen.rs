//! The benchmark's load generator: HTTP/1.1 over TLS (verified against a CA, with a server
//! name), at a fixed rate or as fast as it goes, one POST body. Prints one JSON line:
//! requests, errors, seconds, throughput, p50/p99/max in milliseconds.
//!
//! At a fixed rate, a request that waited for a slow answer before it counts from when it was
//! due, so a server that falls behind is not flattered (no coordinated omission); one that
//! only waited for the generator's own timer counts from when it was sent.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, ServerName};

#[derive(Debug, Parser)]
struct Args {
    #[arg(long)]
    addr: SocketAddr,
    #[arg(long)]
    ca: PathBuf,
    #[arg(long, default_value = "styrmin-webhook.styrmin-system.svc")]
    server_name: String,
    #[arg(long)]
    body: PathBuf,
    /// Requests per second in total; 0 = as fast as it goes.
    #[arg(long, default_value_t = 0)]
    rate: u64,
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    #[arg(long, default_value_t = 16)]
    connections: u64,
}

struct Worker {
    latencies_us: Vec<u32>,
    errors: u64,
}

async fn connect(
    args: &Args,
    config: Arc<rustls::ClientConfig>,
) -> anyhow::Result<hyper::client::conn::http1::SendRequest<Full<Bytes>>> {
    let tcp = tokio::net::TcpStream::connect(args.addr).await?;
    tcp.set_nodelay(true)?;
    let name = ServerName::try_from(args.server_name.clone())?;
    let tls = tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await?;
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await?;
    tokio::spawn(connection);
    Ok(sender)
}

async fn worker(
    args: Arc<Args>,
    config: Arc<rustls::ClientConfig>,
    body: Bytes,
    start: Instant,
    index: u64,
) -> Worker {
    let mut out = Worker {
        latencies_us: Vec::new(),
        errors: 0,
    };
    let end = start + Duration::from_secs(args.seconds);
    let mut sender = None;
    let mut previous_done = start;
    // Fixed rate: this connection's share, staggered.
    let mut ticker = (args.rate > 0).then(|| {
        let period = Duration::from_secs_f64(args.connections as f64 / args.rate as f64);
        let first = start + period.mul_f64(index as f64 / args.connections as f64);
        let mut t = tokio::time::interval_at(first.into(), period);
        t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
        t
    });
    loop {
        let due = match ticker.as_mut() {
            Some(t) => t.tick().await.into_std(),
            None => Instant::now(),
        };
        if due >= end {
            break;
        }
        if sender
            .as_ref()
            .is_none_or(|s: &hyper::client::conn::http1::SendRequest<_>| s.is_closed())
        {
            match connect(&args, config.clone()).await {
                Ok(s) => sender = Some(s),
                Err(_) => {
                    out.errors += 1;
                    continue;
                }
            }
        }
        let Some(s) = sender.as_mut() else { continue };
        // Late because the previous answer on this connection came late: count from when the
        // request was due. Late only because the timer fired late (1 ms wheel): count from now.
        let from = if previous_done > due {
            due
        } else {
            Instant::now()
        };
        let request = hyper::Request::post("/mutate?timeout=10s")
            .header("host", &args.server_name)
            .header("content-type", "application/json")
            .body(Full::new(body.clone()));
        let ok = match request {
            Ok(request) => match s.send_request(request).await {
                Ok(response) => {
                    let status = response.status();
                    response.into_body().collect().await.is_ok() && status == 200
                }
                Err(_) => false,
            },
            Err(_) => false,
        };
        previous_done = Instant::now();
        if ok {
            out.latencies_us
                .push(u32::try_from(from.elapsed().as_micros()).unwrap_or(u32::MAX));
        } else {
            out.errors += 1;
            sender = None;
        }
    }
    out
}

fn percentile(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    f64::from(sorted[rank.clamp(1, sorted.len()) - 1]) / 1000.0
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args = Arc::new(Args::parse());
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(&args.ca)? {
        roots.add(cert?)?;
    }
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let config = Arc::new(config);
    let body = Bytes::from(std::fs::read(&args.body)?);
    let start = Instant::now() + Duration::from_millis(50);
    let tasks: Vec<_> = (0..args.connections)
        .map(|i| tokio::spawn(worker(args.clone(), config.clone(), body.clone(), start, i)))
        .collect();
    let mut latencies = Vec::new();
    let mut errors = 0;
    for task in tasks {
        let w = task.await?;
        latencies.extend(w.latencies_us);
        errors += w.errors;
    }
    let seconds = start
        .elapsed()
        .as_secs_f64()
        .min(args.seconds as f64)
        .max(0.001);
    latencies.sort_unstable();
    println!(
        "{}",
        serde_json::json!({
            "rate": args.rate, "requests": latencies.len(), "errors": errors, "seconds": seconds,
            "throughput": latencies.len() as f64 / seconds,
            "p50_ms": percentile(&latencies, 50.0), "p99_ms": percentile(&latencies, 99.0),
            "max_ms": percentile(&latencies, 100.0),
        })
    );
    Ok(())
}
