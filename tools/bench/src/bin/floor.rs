//! The benchmark's floor: a minimal axum + rustls server that parses the AdmissionReview and
//! returns a fixed answer. `make bench-webhook` compares `styrmin-webhook` against it.
//!
//! `cargo run --release -p styrmin-webhook-bench --bin floor -- ADDR:PORT CERT KEY`

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;

async fn mutate(body: Bytes) -> Response {
    let Ok(review) = serde_json::from_slice::<serde_json::Value>(&body) else {
        return (StatusCode::BAD_REQUEST, "not JSON").into_response();
    };
    let uid = review.pointer("/request/uid").cloned().unwrap_or_default();
    let answer = serde_json::json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "response": {"uid": uid, "allowed": true},
    });
    (
        [(header::CONTENT_TYPE, "application/json")],
        answer.to_string(),
    )
        .into_response()
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [addr, cert, key] = args.as_slice() else {
        anyhow::bail!("usage: floor ADDR:PORT CERT KEY");
    };
    let certs = CertificateDer::pem_file_iter(cert)?.collect::<Result<Vec<_>, _>>()?;
    let key = PrivateKeyDer::from_pem_file(key)?;
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
    .with_no_client_auth()
    .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let app = Router::new().route("/mutate", post(mutate));
    let listener = TcpListener::bind(addr.as_str()).await?;
    eprintln!("floor listening on {}", listener.local_addr()?);
    loop {
        let (tcp, _) = listener.accept().await?;
        let _ = tcp.set_nodelay(true);
        let (acceptor, service) = (acceptor.clone(), TowerToHyperService::new(app.clone()));
        tokio::spawn(async move {
            if let Ok(tls) = acceptor.accept(tcp).await {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            }
        });
    }
}
