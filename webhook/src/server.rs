//! The HTTPS accept loop: TLS 1.2+, HTTP/1.1, and a graceful shutdown that drains.
//!
//! On shutdown the listener closes at once (new connections are refused), `/readyz` turns 503,
//! every response carries `Connection: close`, and the loop waits for open connections to end
//! (each is served until its client has had its answer) up to the drain timeout; then it closes
//! what is left gracefully (in-flight requests finish, idle connections close).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::AppState;

/// How long a client may take for its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// After the drain timeout, how long in-flight requests still get.
const FINAL_GRACE: Duration = Duration::from_secs(5);
/// The most header fields a request may carry (the API server sends about ten); more get 431.
pub const MAX_HEADERS: usize = 64;
/// The largest request head (request line and header fields); a larger one gets 431.
pub const MAX_HEADER_BYTES: usize = 16 * 1024;

struct ActiveGuard(Arc<AtomicUsize>);

impl ActiveGuard {
    fn new(count: &Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::SeqCst);
        ActiveGuard(count.clone())
    }
}

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Serves `app` over TLS on `listener` until `shutdown` completes, then drains.
pub async fn serve_tls(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    app: Router,
    state: AppState,
    shutdown: impl Future<Output = ()>,
    drain_timeout: Duration,
) {
    let graceful = GracefulShutdown::new();
    let active = Arc::new(AtomicUsize::new(0));
    tokio::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            biased;
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                Err(error) => {
                    // Out of file descriptors and the like: wait rather than spin.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = tcp.set_nodelay(true);
        let guard = ActiveGuard::new(&active);
        let acceptor = acceptor.clone();
        let service = TowerToHyperService::new(app.clone());
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let _guard = guard;
            let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(tls)) => tls,
                Ok(Err(error)) => {
                    tracing::debug!(%peer, %error, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(%peer, "TLS handshake timed out");
                    return;
                }
            };
            let connection = hyper::server::conn::http1::Builder::new()
                .keep_alive(true)
                .max_headers(MAX_HEADERS)
                .max_header_size(MAX_HEADER_BYTES)
                .serve_connection(TokioIo::new(tls), service);
            if let Err(error) = watcher.watch(connection).await {
                tracing::debug!(%peer, %error, "connection ended with an error");
            }
        });
    }
    drop(listener);
    state.start_draining();
    tracing::info!(
        connections = active.load(Ordering::SeqCst),
        "shutting down: draining connections"
    );
    let deadline = tokio::time::Instant::now() + drain_timeout;
    while active.load(Ordering::SeqCst) > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let left = active.load(Ordering::SeqCst);
    if left > 0 {
        tracing::info!(
            connections = left,
            "drain timeout: closing idle connections"
        );
    }
    if tokio::time::timeout(FINAL_GRACE, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("connections still open after the final grace period");
    }
    tracing::info!("drained");
}

/// Completes on SIGTERM or SIGINT.
pub async fn shutdown_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(error) => {
                tracing::error!(%error, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        () = terminate => tracing::info!("SIGTERM received"),
        result = tokio::signal::ctrl_c() => match result {
            Ok(()) => tracing::info!("SIGINT received"),
            Err(_) => std::future::pending::<()>().await,
        },
    }
}
