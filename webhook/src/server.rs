//! The accept loops of the HTTPS (admission) listener and the plain-HTTP metrics listener:
//! HTTP/1.1, TLS 1.2+ on the admission port, and a budget per listener so that no client can
//! take the webhook down:
//!
//! - **a cap on open connections, shared per peer** (a [`Peer`] is a source address). A
//!   connection counts against the cap from its accept until its socket is closed, whatever
//!   its request is doing. At the cap, with `n` peers connected (the new one's included), each
//!   peer's share is `cap / n`:
//!   - a peer at or over its share makes room among its own connections: the first one that
//!     never finished a request, else the one idle longest; when all of its own are busy with a
//!     request, the new one is refused (`cap_idle_closed`, `cap`);
//!   - a peer within its share takes the place of a connection of the peer holding the most
//!     (idle first, else busy: that peer is over its share), closed at once
//!     (`cap_idle_closed`, `cap_busy_closed`).
//!
//!   So a peer that floods connections closes its own, never those of a peer within its
//!   share (the API server, the kubelet's probes).
//! - **a head timeout**: the TLS handshake, and each request head from its first byte, must
//!   arrive within it; a connection that trickles one is closed (`head_timeout`,
//!   `handshake_timeout`). It does not run while a connection waits idle between requests.
//! - **an idle timeout** for keep-alive connections (`idle`). Its default, 120 s, is longer
//!   than the API server's own idle timeout (90 s, Go's default), so the API server closes
//!   its idle connections first and a close never crosses one of its requests.
//! - **a write timeout**: an answer must be written out (taken by the peer's socket) within
//!   it, from its first byte; a peer that does not read its answers is closed
//!   (`write_timeout`), so an unread answer pins neither memory nor a place under the cap.
//! - head limits (field count and size; 431) on both listeners.
//!
//! The body budget and body timeout are the request's ([`crate::budget`]).
//!
//! Shutdown ([`shutdown_signal`]): on SIGTERM `/readyz` turns 503 and every answer carries
//! `Connection: close`, while the listener keeps accepting for the shutdown delay (endpoints
//! are removed meanwhile); then the listener closes, idle connections are closed at once,
//! in-flight requests finish, up to the drain timeout.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulConnection;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt as _;

use crate::api::AppState;
use crate::budget::Peer;
use crate::client_text::clip;
use crate::metrics::{ListenerLabels, Metrics, RejectReason};

/// The most header fields a request may carry (the API server sends about ten); more get 431.
pub const MAX_HEADERS: usize = 64;
/// The largest request head (request line and header fields); a larger one gets 431.
pub const MAX_HEADER_BYTES: usize = 16 * 1024;
/// hyper's read and write buffer per connection (its default is about 400 KiB).
const MAX_BUFFER_BYTES: usize = 64 * 1024;
/// Default of `--max-connections` (HTTPS listener).
pub const DEFAULT_MAX_CONNECTIONS: usize = 1000;
/// Default of `--metrics-max-connections` (Prometheus and the kubelet's probes need a few).
pub const DEFAULT_METRICS_MAX_CONNECTIONS: usize = 64;
/// Default of `--head-timeout-ms`.
pub const DEFAULT_HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// Default of `--idle-timeout-secs`: longer than the API server's 90 s.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(120);
/// Default of `--write-timeout-ms`.
pub const DEFAULT_WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// The connection budget of one listener.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    pub max_connections: usize,
    /// For the TLS handshake, and for each request head from its first byte.
    pub head_timeout: Duration,
    pub idle_timeout: Duration,
    /// For each answer, from its first byte until the peer's socket has taken all of it.
    pub write_timeout: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            head_timeout: DEFAULT_HEAD_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            write_timeout: DEFAULT_WRITE_TIMEOUT,
        }
    }
}

/// A listener to serve: its name (the `listener` label: `https`, `metrics`), the socket, TLS
/// or not, the routes and the budget.
pub struct Listener {
    pub name: &'static str,
    pub tcp: TcpListener,
    pub tls: Option<TlsAcceptor>,
    pub app: Router,
    pub limits: ConnectionLimits,
}

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listener")
            .field("name", &self.name)
            .field("tcp", &self.tcp)
            .field("tls", &self.tls.is_some())
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

/// What one connection is doing, shared by its reader, its service and its driver.
#[derive(Debug)]
struct Activity {
    peer: Peer,
    in_flight: AtomicBool,
    /// It has finished a request (the cap closes connections that never did first).
    served: AtomicBool,
    /// Milliseconds since the registry's epoch.
    last_active: AtomicU64,
    /// When the first byte of a request head arrived, in milliseconds since the epoch + 1;
    /// 0 while no head is being read.
    head_started: AtomicU64,
    /// When the first byte of an answer not yet written out was written, in milliseconds
    /// since the epoch + 1; 0 while everything written has been flushed.
    write_started: AtomicU64,
    changed: Notify,
    /// Cancelled to close the connection gracefully (cap, shutdown).
    close: CancellationToken,
    /// Closed to make room at the cap (rather than by the shutdown).
    evicted: AtomicBool,
    epoch: Instant,
}

impl Activity {
    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn at(&self, ms: u64) -> Instant {
        self.epoch + Duration::from_millis(ms)
    }

    fn head_started_at(&self) -> Option<Instant> {
        match self.head_started.load(Ordering::SeqCst) {
            0 => None,
            ms => Some(self.at(ms - 1)),
        }
    }

    fn write_started_at(&self) -> Option<Instant> {
        match self.write_started.load(Ordering::SeqCst) {
            0 => None,
            ms => Some(self.at(ms - 1)),
        }
    }

    /// An answer's bytes are being written: the write timeout runs from the first.
    fn writing(&self) {
        if self.write_started.load(Ordering::SeqCst) == 0 {
            self.write_started
                .store(self.now_ms() + 1, Ordering::SeqCst);
            self.changed.notify_one();
        }
    }

    /// Everything written has been taken by the socket.
    fn flushed(&self) {
        self.write_started.store(0, Ordering::SeqCst);
    }

    fn write_deadline(&self, limits: &ConnectionLimits) -> Option<Instant> {
        self.write_started_at()
            .map(|started| started + limits.write_timeout)
    }

    /// Bytes arrived: when no request is being served, a head (or a handshake) has begun.
    fn bytes_arrived(&self) {
        if !self.in_flight.load(Ordering::SeqCst) && self.head_started.load(Ordering::SeqCst) == 0 {
            self.head_started.store(self.now_ms() + 1, Ordering::SeqCst);
            self.changed.notify_one();
        }
    }

    /// Idle from now: after the handshake, after each request.
    fn idle_from_now(&self) {
        self.head_started.store(0, Ordering::SeqCst);
        self.last_active.store(self.now_ms(), Ordering::SeqCst);
        self.changed.notify_one();
    }

    /// When the driver must look again, if no request is in flight.
    fn next_deadline(&self, limits: &ConnectionLimits, closing: bool) -> Option<Instant> {
        if self.in_flight.load(Ordering::SeqCst) {
            return None;
        }
        match self.head_started_at() {
            Some(started) => Some(started + limits.head_timeout),
            None if closing => None,
            None => Some(self.at(self.last_active.load(Ordering::SeqCst)) + limits.idle_timeout),
        }
    }

    fn expired(&self, limits: &ConnectionLimits) -> Option<Expired> {
        if self.in_flight.load(Ordering::SeqCst) {
            return None;
        }
        let now = Instant::now();
        match self.head_started_at() {
            Some(started) if now >= started + limits.head_timeout => Some(Expired::Head),
            Some(_) => None,
            None if now
                >= self.at(self.last_active.load(Ordering::SeqCst)) + limits.idle_timeout =>
            {
                Some(Expired::Idle)
            }
            None => None,
        }
    }
}

enum Expired {
    Head,
    Idle,
}

/// Marks a request in flight while it lives.
struct InFlight(Arc<Activity>);

impl InFlight {
    fn enter(activity: &Arc<Activity>) -> Self {
        activity.in_flight.store(true, Ordering::SeqCst);
        activity.head_started.store(0, Ordering::SeqCst);
        InFlight(activity.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.served.store(true, Ordering::SeqCst);
        self.0.in_flight.store(false, Ordering::SeqCst);
        self.0.idle_from_now();
    }
}

/// A socket that tells its connection's [`Activity`] when bytes arrive (under TLS, so that a
/// trickled TLS record starts the head timeout as a trickled head does).
struct Watched<I> {
    inner: I,
    activity: Arc<Activity>,
}

impl<I: AsyncRead + Unpin> AsyncRead for Watched<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let result = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(result, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.bytes_arrived();
        }
        result
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Watched<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.activity.writing();
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let result = Pin::new(&mut self.inner).poll_flush(cx);
        if matches!(result, Poll::Ready(Ok(()))) {
            self.activity.flushed();
        }
        result
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.activity.writing();
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// The open connections of one listener.
#[derive(Debug)]
struct Connections {
    listener: &'static str,
    max: usize,
    open: Mutex<HashMap<u64, Arc<Activity>>>,
    next_id: AtomicU64,
    metrics: Arc<Metrics>,
    epoch: Instant,
}

/// A connection's place in the registry; dropping it frees the place.
struct Place {
    id: u64,
    activity: Arc<Activity>,
    connections: Arc<Connections>,
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut open = self
            .connections
            .open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        open.remove(&self.id);
        self.connections.set_gauge(open.len());
    }
}

impl Connections {
    fn set_gauge(&self, open: usize) {
        self.metrics
            .open_connections
            .get_or_create(&ListenerLabels {
                listener: self.listener,
            })
            .set(i64::try_from(open).unwrap_or(i64::MAX));
    }

    fn len(&self) -> usize {
        self.open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len()
    }

    /// A place for a new connection from `peer`, closing another at the cap under the share
    /// rule (see the module); `None` when the peer is at its share and all of its own
    /// connections are busy.
    fn take_place(self: &Arc<Self>, peer: Peer, close_all: &CancellationToken) -> Option<Place> {
        let mut open = self
            .open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Evicted connections are closed at their next poll: they no longer hold a place.
        let evicted = open
            .values()
            .filter(|a| a.evicted.load(Ordering::SeqCst))
            .count();
        if open.len() - evicted >= self.max {
            let mut held: HashMap<Peer, usize> = HashMap::new();
            for activity in open.values() {
                if !activity.evicted.load(Ordering::SeqCst) {
                    *held.entry(activity.peer).or_default() += 1;
                }
            }
            let peers = held.len() + usize::from(!held.contains_key(&peer));
            let share = (self.max / peers).max(1);
            let own = held.get(&peer).copied().unwrap_or(0);
            // At or over its share: room among its own; else from the peer holding the most.
            let (from, busy_allowed) = if own >= share {
                (peer, false)
            } else {
                let largest = held
                    .iter()
                    .max_by_key(|(_, count)| **count)
                    .map_or(peer, |(p, _)| *p);
                (largest, true)
            };
            let candidates = open.values().filter(|a| {
                a.peer == from && !a.evicted.load(Ordering::SeqCst) && !a.close.is_cancelled()
            });
            let idle = candidates
                .clone()
                .filter(|a| !a.in_flight.load(Ordering::SeqCst))
                .min_by_key(|a| {
                    (
                        a.served.load(Ordering::SeqCst),
                        a.last_active.load(Ordering::SeqCst),
                    )
                });
            let (victim, reason) = match idle {
                Some(victim) => (Some(victim), RejectReason::CapIdleClosed),
                None if busy_allowed => (
                    candidates.min_by_key(|a| a.last_active.load(Ordering::SeqCst)),
                    RejectReason::CapBusyClosed,
                ),
                None => (None, RejectReason::Cap),
            };
            match victim {
                Some(victim) => {
                    victim.evicted.store(true, Ordering::SeqCst);
                    victim.close.cancel();
                    self.metrics.reject(self.listener, reason);
                }
                None => {
                    self.metrics.reject(self.listener, RejectReason::Cap);
                    return None;
                }
            }
        }
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let epoch = self.epoch;
        let activity = Arc::new(Activity {
            peer,
            in_flight: AtomicBool::new(false),
            served: AtomicBool::new(false),
            last_active: AtomicU64::new(0),
            head_started: AtomicU64::new(0),
            write_started: AtomicU64::new(0),
            changed: Notify::new(),
            close: close_all.child_token(),
            evicted: AtomicBool::new(false),
            epoch,
        });
        activity
            .last_active
            .store(activity.now_ms(), Ordering::SeqCst);
        open.insert(id, activity.clone());
        self.set_gauge(open.len());
        Some(Place {
            id,
            activity,
            connections: self.clone(),
        })
    }
}

/// A running listener.
#[derive(Debug)]
pub struct Serving {
    name: &'static str,
    stop_accepting: CancellationToken,
    close_all: CancellationToken,
    abort_all: CancellationToken,
    connections: Arc<Connections>,
    /// The connection tasks: the drain waits for them.
    tasks: TaskTracker,
    accept_task: JoinHandle<()>,
}

impl Serving {
    /// Starts accepting on `listener`.
    pub fn start(listener: Listener, metrics: Arc<Metrics>) -> Serving {
        let connections = Arc::new(Connections {
            listener: listener.name,
            max: listener.limits.max_connections.max(1),
            open: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
            metrics,
            epoch: Instant::now(),
        });
        connections.set_gauge(0);
        let stop_accepting = CancellationToken::new();
        let close_all = CancellationToken::new();
        let abort_all = CancellationToken::new();
        let tasks = TaskTracker::new();
        let accept_task = tokio::spawn(accept_loop(
            listener,
            connections.clone(),
            tasks.clone(),
            stop_accepting.clone(),
            close_all.clone(),
            abort_all.clone(),
        ));
        Serving {
            name: connections.listener,
            stop_accepting,
            close_all,
            abort_all,
            connections,
            tasks,
            accept_task,
        }
    }

    /// Stops accepting (the socket closes), closes idle connections at once, lets in-flight
    /// requests finish up to `drain_timeout`, then closes what is left. Returns how many
    /// connections were still open at the drain timeout.
    pub async fn drain(self, drain_timeout: Duration) -> usize {
        self.stop_accepting.cancel();
        let _ = self.accept_task.await;
        // No connection task starts after this: `wait` ends once the open ones have.
        self.tasks.close();
        self.close_all.cancel();
        tracing::info!(
            listener = self.name,
            connections = self.connections.len(),
            "closing idle connections; in-flight requests finish"
        );
        if tokio::time::timeout(drain_timeout, self.tasks.wait())
            .await
            .is_ok()
        {
            return 0;
        }
        let left = self.tasks.len();
        tracing::warn!(
            listener = self.name,
            connections = left,
            "drain timeout: closing the connections still open"
        );
        self.abort_all.cancel();
        // The connection tasks drop their sockets on the next poll.
        let _ = tokio::time::timeout(Duration::from_secs(1), self.tasks.wait()).await;
        left
    }
}

async fn accept_loop(
    listener: Listener,
    connections: Arc<Connections>,
    tasks: TaskTracker,
    stop_accepting: CancellationToken,
    close_all: CancellationToken,
    abort_all: CancellationToken,
) {
    let Listener {
        name,
        tcp,
        tls,
        app,
        limits,
    } = listener;
    loop {
        let (stream, peer) = tokio::select! {
            biased;
            () = stop_accepting.cancelled() => break,
            accepted = tcp.accept() => match accepted {
                Ok(conn) => conn,
                Err(error) => {
                    // Out of file descriptors and the like: wait rather than spin.
                    tracing::warn!(listener = name, %error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Some(place) = connections.take_place(Peer::of(peer), &close_all) else {
            tracing::debug!(listener = name, %peer, "connection refused: at its share, every connection of this peer is busy");
            continue;
        };
        let _ = stream.set_nodelay(true);
        tasks.spawn(serve_connection(
            stream,
            peer,
            place,
            tls.clone(),
            app.clone(),
            limits,
            abort_all.clone(),
        ));
    }
}

fn http1() -> hyper::server::conn::http1::Builder {
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .keep_alive(true)
        .max_headers(MAX_HEADERS)
        .max_header_size(MAX_HEADER_BYTES)
        .max_buf_size(MAX_BUFFER_BYTES)
        // Ours instead (see the module): hyper's would also run while a connection is idle.
        .header_read_timeout(None);
    builder
}

async fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    place: Place,
    tls: Option<TlsAcceptor>,
    app: Router,
    limits: ConnectionLimits,
    abort: CancellationToken,
) {
    let activity = place.activity.clone();
    let metrics = place.connections.metrics.clone();
    let listener = place.connections.listener;
    let io = Watched {
        inner: stream,
        activity: activity.clone(),
    };
    let activity_for_service = activity.clone();
    let peer_key = activity.peer;
    let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
        let in_flight = InFlight::enter(&activity_for_service);
        request.extensions_mut().insert(peer_key);
        let app = app.clone();
        async move {
            let response = app.oneshot(request).await;
            drop(in_flight);
            response
        }
    });
    let ended = match tls {
        Some(acceptor) => {
            // At shutdown a handshake is finished, not cut: a TLS 1.3 client sends its request
            // before the server has read its last handshake message.
            let evicted = async {
                activity.close.cancelled().await;
                if !activity.evicted.load(Ordering::SeqCst) {
                    std::future::pending::<()>().await;
                }
            };
            let handshake = tokio::select! {
                result = tokio::time::timeout(limits.head_timeout, acceptor.accept(io)) => result,
                () = abort.cancelled() => return,
                () = evicted => return,
            };
            let tls = match handshake {
                Ok(Ok(tls)) => tls,
                Ok(Err(error)) => {
                    tracing::debug!(%peer, error = %clip(&error.to_string()), "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    metrics.reject(listener, RejectReason::HandshakeTimeout);
                    tracing::debug!(%peer, "TLS handshake timed out");
                    return;
                }
            };
            activity.idle_from_now();
            // The handshake's own writes are done (the handshake has completed).
            activity.flushed();
            let connection = http1().serve_connection(TokioIo::new(tls), service);
            drive(connection, &activity, &limits, &abort).await
        }
        None => {
            let connection = http1().serve_connection(TokioIo::new(io), service);
            drive(connection, &activity, &limits, &abort).await
        }
    };
    match ended {
        Ended::Closed => {}
        Ended::Failed(error) => {
            tracing::debug!(%peer, listener, error = %clip(&error), "connection ended with an error");
        }
        Ended::HeadTimeout => {
            metrics.reject(listener, RejectReason::HeadTimeout);
            tracing::debug!(%peer, listener, "request head timed out");
        }
        Ended::Idle => metrics.reject(listener, RejectReason::Idle),
        Ended::WriteTimeout => {
            metrics.reject(listener, RejectReason::WriteTimeout);
            tracing::debug!(%peer, listener, "answer not taken within the write timeout");
        }
        Ended::Dropped => {}
    }
    drop(place);
}

enum Ended {
    Closed,
    Failed(String),
    HeadTimeout,
    Idle,
    /// An answer was not written out within the write timeout.
    WriteTimeout,
    /// Closed without a word: evicted at the cap, or at the drain timeout.
    Dropped,
}

/// Runs one HTTP connection under its head and idle timeouts until it ends or is closed.
///
/// At shutdown a connection is closed at its first quiet moment: no request in flight and no
/// head begun (a head whose bytes have arrived is served; its answer carries
/// `Connection: close`). A connection that has not had its first request yet is given the
/// head timeout for it: its client connected to send one, and closing it would fail that.
async fn drive<C>(
    connection: C,
    activity: &Activity,
    limits: &ConnectionLimits,
    abort: &CancellationToken,
) -> Ended
where
    C: GracefulConnection,
    C::Error: std::fmt::Display,
{
    tokio::pin!(connection);
    let mut closing = false;
    let mut idle_closed = false;
    let mut shutdown_pending = false;
    // A connection that has not had its first request at shutdown waits for it until then.
    let mut first_request_until: Option<Instant> = None;
    loop {
        if shutdown_pending {
            let quiet =
                !activity.in_flight.load(Ordering::SeqCst) && activity.head_started_at().is_none();
            let awaiting_first = !activity.served.load(Ordering::SeqCst)
                && first_request_until.is_some_and(|until| Instant::now() < until);
            if quiet && !awaiting_first {
                shutdown_pending = false;
                first_request_until = None;
                connection.as_mut().graceful_shutdown();
            }
        }
        let deadline = [
            activity.next_deadline(limits, closing),
            first_request_until,
            activity.write_deadline(limits),
        ]
        .into_iter()
        .flatten()
        .min();
        let wake = async {
            match deadline {
                Some(deadline) => tokio::time::sleep_until(deadline).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            result = connection.as_mut() => {
                return match result {
                    Ok(()) if idle_closed => Ended::Idle,
                    Ok(()) => Ended::Closed,
                    Err(error) => Ended::Failed(error.to_string()),
                };
            }
            () = abort.cancelled() => return Ended::Dropped,
            () = activity.changed.notified() => {}
            () = activity.close.cancelled(), if !closing => {
                closing = true;
                if activity.evicted.load(Ordering::SeqCst) {
                    // Closed at once: a graceful close would wait for a peer that may never
                    // read, and the place is needed now.
                    return Ended::Dropped;
                } else {
                    shutdown_pending = true;
                    if !activity.served.load(Ordering::SeqCst) {
                        first_request_until = Some(Instant::now() + limits.head_timeout);
                    }
                }
            }
            () = wake => match activity.expired(limits) {
                _ if activity
                    .write_deadline(limits)
                    .is_some_and(|deadline| Instant::now() >= deadline) =>
                {
                    return Ended::WriteTimeout;
                }
                Some(Expired::Head) => return Ended::HeadTimeout,
                Some(Expired::Idle) if !closing => {
                    closing = true;
                    idle_closed = true;
                    connection.as_mut().graceful_shutdown();
                }
                _ => {}
            },
        }
    }
}

/// The shutdown sequence of [`serve`] after its signal.
#[derive(Debug, Clone, Copy)]
pub struct ShutdownTimes {
    /// How long the listener keeps accepting after `/readyz` turned 503.
    pub delay: Duration,
    /// How long in-flight requests may take once the listener is closed.
    pub drain: Duration,
}

/// Serves the admission listener (and the metrics listener, if any) until `shutdown`
/// completes; then: not ready, the delay, stop accepting and drain; the metrics listener
/// stops last, so that probes are answered throughout.
pub async fn serve(
    https: Listener,
    metrics_listener: Option<Listener>,
    state: AppState,
    shutdown: impl Future<Output = ()>,
    times: ShutdownTimes,
) {
    let admission = Serving::start(https, state.metrics().clone());
    let operations = metrics_listener.map(|l| Serving::start(l, state.metrics().clone()));
    shutdown.await;
    state.start_draining();
    tracing::info!(
        delay_seconds = times.delay.as_secs_f64(),
        "shutting down: /readyz answers 503; still serving until the delay has passed"
    );
    tokio::time::sleep(times.delay).await;
    tracing::info!(
        connections = admission.connections.len(),
        "shutting down: no new connections; draining"
    );
    admission.drain(times.drain).await;
    if let Some(operations) = operations {
        operations.drain(Duration::from_secs(2)).await;
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

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};

    use super::*;

    fn peer(n: u8) -> Peer {
        Peer(IpAddr::V4(Ipv4Addr::new(127, 0, 0, n)))
    }

    fn connections(max: usize) -> Arc<Connections> {
        Arc::new(Connections {
            listener: "https",
            max,
            open: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
            metrics: Arc::new(Metrics::new()),
            epoch: Instant::now(),
        })
    }

    /// Evicted connections close at their next poll; here they are dropped at once.
    fn settle(held: &mut Vec<Place>) -> Vec<Peer> {
        let evicted: Vec<Peer> = held
            .iter()
            .filter(|a| a.activity.evicted.load(Ordering::SeqCst))
            .map(|a| a.activity.peer)
            .collect();
        held.retain(|a| !a.activity.evicted.load(Ordering::SeqCst));
        evicted
    }

    fn count(held: &[Place], p: Peer) -> usize {
        held.iter().filter(|a| a.activity.peer == p).count()
    }

    #[tokio::test]
    async fn at_the_cap_a_peer_at_its_share_closes_its_own_and_one_within_takes_from_the_largest() {
        let all = CancellationToken::new();
        let cap = connections(8);
        let mut held = Vec::new();
        // The API server's two connections, served and idle for the longest.
        for _ in 0..2 {
            let a = cap.take_place(peer(2), &all).unwrap();
            a.activity.served.store(true, Ordering::SeqCst);
            held.push(a);
        }
        // The attacker fills the rest.
        for _ in 0..6 {
            held.push(cap.take_place(peer(4), &all).unwrap());
        }
        // More from the attacker (over its share of 4): each closes one of its own.
        for _ in 0..20 {
            held.push(cap.take_place(peer(4), &all).unwrap());
            assert_eq!(settle(&mut held), vec![peer(4)]);
        }
        assert_eq!(count(&held, peer(2)), 2);
        // The kubelet (within its share of 8 / 3) takes the attacker's place, not the API
        // server's.
        held.push(cap.take_place(peer(3), &all).unwrap());
        assert_eq!(settle(&mut held), vec![peer(4)]);
        assert_eq!(count(&held, peer(2)), 2);
    }

    #[tokio::test]
    async fn busy_connections_are_kept_from_their_own_peer_but_not_from_a_peer_within_its_share() {
        let all = CancellationToken::new();
        let cap = connections(4);
        let mut held = Vec::new();
        for _ in 0..4 {
            let a = cap.take_place(peer(4), &all).unwrap();
            a.activity.in_flight.store(true, Ordering::SeqCst);
            held.push(a);
        }
        // The attacker's own new connection: all of its own are busy, refused.
        assert!(cap.take_place(peer(4), &all).is_none());
        assert!(settle(&mut held).is_empty());
        // Another peer, within its share: a busy connection of the attacker makes room.
        held.push(cap.take_place(peer(2), &all).unwrap());
        assert_eq!(settle(&mut held), vec![peer(4)]);
        assert_eq!(count(&held, peer(2)), 1);
        assert_eq!(count(&held, peer(4)), 3);
    }
}
