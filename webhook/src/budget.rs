//! The request budget: how many request-body bytes the webhook holds at once, how they are
//! shared between peers, how long a body may take to arrive, and how long a HelmRelease's
//! post-renderers may take to decide.
//!
//! A body is read only once its bytes are reserved in one pool (the declared length before the
//! first byte; a body of unknown length as it grows). The pool is shared **per peer** (a
//! [`Peer`] is a source address): with `n` peers holding or asking for bytes, each one's fair
//! share is `pool / n`. A reservation that fits in the free bytes is granted at once, whoever
//! asks, so a lone client may use the whole pool. When the pool is short:
//!
//! - a peer over its share is refused at once (503, the body never read);
//! - a peer within its share takes the bytes back from the peers over theirs: their bodies
//!   still arriving are cut (503, largest holder first) until enough is free, and the request
//!   waits (within its body timeout) for those bytes.
//!
//! So no peer can hold more than its share while another waits, whatever its body sizes and
//! framing (`Content-Length` or chunked): a client that keeps the pool full only ever holds
//! bytes that the next peer within its share takes back.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use axum::body::{Body, HttpBody as _};
use futures::StreamExt as _;
use tokio::sync::{Notify, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::metrics::RejectReason;

/// The largest AdmissionReview read; larger bodies get 413.
pub const MAX_BODY_BYTES: usize = 7 * 1024 * 1024;
/// What a body of unknown length (chunked) reserves before its first byte; it then doubles.
const FIRST_CHUNKED_RESERVATION: usize = 16 * 1024;
/// Default of `--body-budget-mib`.
pub const DEFAULT_BODY_BUDGET_BYTES: usize = 32 * 1024 * 1024;
/// Default of `--body-timeout-ms`.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(10);
/// Default of `--flux-budget-ms`.
pub const DEFAULT_FLUX_BUDGET: Duration = Duration::from_secs(1);
/// How many HelmRelease post-renderer decisions run at once (each on a blocking thread), so
/// that they never take every core from the Ingress reviews.
pub const FLUX_DECISIONS_AT_ONCE: usize = 1;

/// Who sent a request, as far as the budgets are concerned: its source address (an IPv4
/// address mapped into IPv6 counts as the IPv4 address).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Peer(pub IpAddr);

impl Peer {
    /// The peer of a connection from `addr`.
    pub fn of(addr: SocketAddr) -> Peer {
        Peer(addr.ip().to_canonical())
    }

    /// Requests that reach the router without a connection (tests calling it in-process).
    pub const LOCAL: Peer = Peer(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST));
}

impl std::fmt::Display for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// The budgets a request is held to.
#[derive(Debug)]
pub struct RequestBudget {
    bodies: Arc<BodyPool>,
    /// The whole body must arrive within this time once its head has been read.
    pub body_timeout: Duration,
    /// The time a HelmRelease's post-renderer decision may take, from the end of its body.
    pub flux_budget: Duration,
    /// Decisions that parse patch texts run one at a time (see [`FLUX_DECISIONS_AT_ONCE`]).
    pub flux_decisions: Arc<Semaphore>,
}

impl Default for RequestBudget {
    fn default() -> Self {
        Self::new(
            DEFAULT_BODY_BUDGET_BYTES,
            DEFAULT_BODY_TIMEOUT,
            DEFAULT_FLUX_BUDGET,
        )
    }
}

/// Why a body was not read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BodyRefusal {
    #[error("the request body is larger than {MAX_BODY_BYTES} bytes")]
    TooLarge,
    #[error(
        "the webhook holds as many request bodies from this client as its share of the memory budget allows; try again"
    )]
    OverBudget,
    #[error(
        "this client held more than its share of the request-body budget while another client needed it; try again"
    )]
    TakenBack,
    #[error("the request body did not arrive within {0:?}")]
    Timeout(Duration),
    #[error("the request body could not be read")]
    Broken,
}

impl BodyRefusal {
    /// The `reason` label of `connections_rejected_total`, where the refusal is a budget's.
    pub fn reason(&self) -> Option<RejectReason> {
        match self {
            BodyRefusal::OverBudget => Some(RejectReason::BodyBudget),
            BodyRefusal::TakenBack => Some(RejectReason::BodyShare),
            BodyRefusal::Timeout(_) => Some(RejectReason::BodyTimeout),
            BodyRefusal::TooLarge | BodyRefusal::Broken => None,
        }
    }
}

/// A body that was read whole, and its reservation in the budget (released when dropped).
#[derive(Debug)]
pub struct BudgetedBody {
    pub bytes: Vec<u8>,
    _reservation: Reservation,
}

/// The pool of body bytes and who holds what.
#[derive(Debug)]
struct BodyPool {
    total: usize,
    state: Mutex<PoolState>,
    /// Notified whenever bytes go back to the pool.
    freed: Notify,
}

#[derive(Debug, Default)]
struct PoolState {
    used: usize,
    /// Bytes of bodies cut to make room, not yet given back.
    taking_back: usize,
    next_id: u64,
    peers: HashMap<Peer, PeerBodies>,
}

/// What one peer holds: its reservations, and the bodies among them still arriving (the
/// ones that can be cut).
#[derive(Debug, Default)]
struct PeerBodies {
    bytes: usize,
    reservations: usize,
    arriving: HashMap<u64, Arriving>,
}

#[derive(Debug)]
struct Arriving {
    bytes: usize,
    cut: CancellationToken,
}

/// Bytes one request holds in the pool, given back when dropped.
#[derive(Debug)]
struct Reservation {
    pool: Arc<BodyPool>,
    peer: Peer,
    id: u64,
    bytes: usize,
    /// Cancelled when a peer within its share takes these bytes back.
    cut: CancellationToken,
}

impl BodyPool {
    fn lock(&self) -> MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Reservation {
    /// A reservation of no bytes yet: from now on `peer` counts among the peers sharing.
    fn open(pool: &Arc<BodyPool>, peer: Peer) -> Reservation {
        let mut state = pool.lock();
        let id = state.next_id;
        state.next_id += 1;
        let cut = CancellationToken::new();
        let bodies = state.peers.entry(peer).or_default();
        bodies.reservations += 1;
        bodies.arriving.insert(
            id,
            Arriving {
                bytes: 0,
                cut: cut.clone(),
            },
        );
        Reservation {
            pool: pool.clone(),
            peer,
            id,
            bytes: 0,
            cut,
        }
    }

    /// Takes `extra` more bytes: at once when they are free; when the pool is short and the
    /// peer within its share, by cutting the bodies still arriving of the peers over theirs
    /// and waiting (until `deadline`) for their bytes. Refused when the peer is over its share
    /// and the pool is short.
    async fn grow(&mut self, extra: usize, deadline: Instant) -> Result<(), BodyRefusal> {
        loop {
            let freed = self.pool.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            {
                let mut state = self.pool.lock();
                let total = self.pool.total;
                if state.used + extra <= total {
                    state.used += extra;
                    let bodies = state.peers.entry(self.peer).or_default();
                    bodies.bytes += extra;
                    if let Some(arriving) = bodies.arriving.get_mut(&self.id) {
                        arriving.bytes += extra;
                    }
                    self.bytes += extra;
                    return Ok(());
                }
                let share = total / state.peers.len().max(1);
                let mine = state.peers.get(&self.peer).map_or(0, |b| b.bytes);
                if mine + extra > share {
                    return Err(BodyRefusal::OverBudget);
                }
                let short = (state.used + extra)
                    .saturating_sub(total)
                    .saturating_sub(state.taking_back);
                if short > 0 {
                    let cut = state.cut_over_share(self.peer, share, short);
                    state.taking_back += cut;
                }
            }
            // The cut bodies give their bytes back as their requests end; bodies already
            // read give theirs back when decided. Either way within the body timeout.
            if tokio::time::timeout_at(deadline, freed).await.is_err() {
                return Err(BodyRefusal::OverBudget);
            }
        }
    }

    /// The body has arrived whole: it can no longer be cut.
    fn arrived(&self) {
        let mut state = self.pool.lock();
        if let Some(bodies) = state.peers.get_mut(&self.peer)
            && let Some(arriving) = bodies.arriving.remove(&self.id)
            && arriving.cut.is_cancelled()
        {
            // Cut as it completed: its bytes are no longer counted as coming back early.
            state.taking_back = state.taking_back.saturating_sub(arriving.bytes);
        }
    }
}

impl PoolState {
    /// Cuts bodies still arriving, of the peers over `share` other than `asking`, largest
    /// holder first, until `short` bytes are coming back. Returns the bytes coming back.
    fn cut_over_share(&mut self, asking: Peer, share: usize, short: usize) -> usize {
        let mut over: Vec<(Peer, usize)> = self
            .peers
            .iter()
            .filter(|(peer, bodies)| **peer != asking && bodies.bytes > share)
            .map(|(peer, bodies)| (*peer, bodies.bytes))
            .collect();
        over.sort_by_key(|holder| std::cmp::Reverse(holder.1));
        let mut coming_back = 0;
        for (peer, _) in over {
            let Some(bodies) = self.peers.get_mut(&peer) else {
                continue;
            };
            let mut arriving: Vec<&Arriving> = bodies
                .arriving
                .values()
                .filter(|a| !a.cut.is_cancelled() && a.bytes > 0)
                .collect();
            arriving.sort_by_key(|body| std::cmp::Reverse(body.bytes));
            let mut held = bodies.bytes;
            for body in arriving {
                if coming_back >= short || held <= share {
                    break;
                }
                body.cut.cancel();
                coming_back += body.bytes;
                held -= body.bytes;
            }
            if coming_back >= short {
                break;
            }
        }
        coming_back
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut state = self.pool.lock();
        state.used = state.used.saturating_sub(self.bytes);
        if self.cut.is_cancelled()
            && let Some(bodies) = state.peers.get(&self.peer)
            && bodies.arriving.contains_key(&self.id)
        {
            state.taking_back = state.taking_back.saturating_sub(self.bytes);
        }
        if let Some(bodies) = state.peers.get_mut(&self.peer) {
            bodies.bytes = bodies.bytes.saturating_sub(self.bytes);
            bodies.arriving.remove(&self.id);
            bodies.reservations = bodies.reservations.saturating_sub(1);
            if bodies.reservations == 0 {
                state.peers.remove(&self.peer);
            }
        }
        drop(state);
        self.pool.freed.notify_waiters();
    }
}

impl RequestBudget {
    /// `body_bytes`: the pool for bodies held at once (at least [`MAX_BODY_BYTES`], so that
    /// the largest body can pass on a quiet server).
    pub fn new(body_bytes: usize, body_timeout: Duration, flux_budget: Duration) -> Self {
        RequestBudget {
            bodies: Arc::new(BodyPool {
                total: body_bytes.max(MAX_BODY_BYTES),
                state: Mutex::new(PoolState::default()),
                freed: Notify::new(),
            }),
            body_timeout,
            flux_budget,
            flux_decisions: Arc::new(Semaphore::new(FLUX_DECISIONS_AT_ONCE)),
        }
    }

    /// Bytes reserved by bodies being read or decided.
    pub fn body_bytes_in_use(&self) -> usize {
        self.bodies.lock().used
    }

    /// Bytes `peer` holds now.
    pub fn body_bytes_of(&self, peer: Peer) -> usize {
        self.bodies.lock().peers.get(&peer).map_or(0, |b| b.bytes)
    }

    /// Reads `body` from `peer` whole within the body timeout, holding its bytes in the
    /// pool under the share rule (see the module). The declared length (`Content-Length`) is
    /// reserved before the first byte is read; a body of unknown length reserves as it grows.
    pub async fn read_body(&self, body: Body, peer: Peer) -> Result<BudgetedBody, BodyRefusal> {
        let declared = body.size_hint().exact();
        if declared.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
            return Err(BodyRefusal::TooLarge);
        }
        let deadline = Instant::now() + self.body_timeout;
        let initial = declared.map_or(FIRST_CHUNKED_RESERVATION, |n| n as usize);
        let mut reservation = Reservation::open(&self.bodies, peer);
        reservation.grow(initial, deadline).await?;
        let cut = reservation.cut.clone();
        let mut bytes: Vec<u8> = Vec::with_capacity(initial);
        let read = async {
            let mut stream = body.into_data_stream();
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(|_| BodyRefusal::Broken)?;
                let needed = bytes.len() + chunk.len();
                if needed > MAX_BODY_BYTES {
                    return Err(BodyRefusal::TooLarge);
                }
                if needed > reservation.bytes {
                    // Unknown length: grow by doubling, each step reserved first.
                    let grown = needed.max(reservation.bytes * 2).min(MAX_BODY_BYTES);
                    reservation
                        .grow(grown - reservation.bytes, deadline)
                        .await?;
                    bytes.reserve_exact(grown - bytes.len());
                }
                bytes.extend_from_slice(&chunk);
            }
            Ok(())
        };
        let result = tokio::select! {
            biased;
            () = cut.cancelled() => Err(BodyRefusal::TakenBack),
            read = tokio::time::timeout_at(deadline, read) => match read {
                Ok(result) => result,
                Err(_) => Err(BodyRefusal::Timeout(self.body_timeout)),
            },
        };
        result?;
        reservation.arrived();
        Ok(BudgetedBody {
            bytes,
            _reservation: reservation,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1024 * 1024;

    fn budget(bytes: usize) -> RequestBudget {
        RequestBudget::new(bytes, Duration::from_secs(5), DEFAULT_FLUX_BUDGET)
    }

    fn peer(n: u8) -> Peer {
        Peer(IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, n)))
    }

    /// A body that declares `length` bytes and sends `sent` of them, then stalls.
    fn stalled(length: usize, sent: usize) -> Body {
        let chunks = futures::stream::iter([Ok::<_, std::io::Error>(vec![b'z'; sent])])
            .chain(futures::stream::pending());
        Body::new(Sized::new(Body::from_stream(chunks), length as u64))
    }

    /// A body with an exact size hint (`Content-Length`).
    struct Sized {
        inner: Body,
        length: u64,
    }

    impl Sized {
        fn new(inner: Body, length: u64) -> Self {
            Sized { inner, length }
        }
    }

    impl hyper::body::Body for Sized {
        type Data = axum::body::Bytes;
        type Error = axum::Error;

        fn poll_frame(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
            std::pin::Pin::new(&mut self.inner).poll_frame(cx)
        }

        fn size_hint(&self) -> hyper::body::SizeHint {
            hyper::body::SizeHint::with_exact(self.length)
        }
    }

    #[tokio::test]
    async fn bodies_are_reserved_while_held_and_released_when_dropped() {
        let budget = budget(32 * MIB);
        let body = budget
            .read_body(Body::from(vec![b'x'; 1000]), peer(1))
            .await
            .unwrap();
        assert_eq!(body.bytes.len(), 1000);
        assert_eq!(budget.body_bytes_in_use(), 1000);
        assert_eq!(budget.body_bytes_of(peer(1)), 1000);
        drop(body);
        assert_eq!(budget.body_bytes_in_use(), 0);
        assert_eq!(budget.body_bytes_of(peer(1)), 0);
    }

    #[tokio::test]
    async fn a_lone_peer_may_fill_the_pool_and_is_refused_beyond_it() {
        let budget = budget(32 * MIB);
        let mut held = Vec::new();
        for _ in 0..4 {
            held.push(
                budget
                    .read_body(Body::from(vec![b'x'; 7 * MIB]), peer(1))
                    .await
                    .unwrap(),
            );
        }
        // 28 MiB held: a fifth 7 MiB body would pass 32 MiB.
        assert_eq!(
            budget
                .read_body(Body::from(vec![b'x'; 7 * MIB]), peer(1))
                .await
                .unwrap_err(),
            BodyRefusal::OverBudget
        );
        held.clear();
        assert_eq!(budget.body_bytes_in_use(), 0);
    }

    #[tokio::test]
    async fn a_peer_within_its_share_takes_bytes_back_from_one_over_it() {
        let budget = Arc::new(budget(8 * MIB));
        // Peer 1 fills the pool with bodies that never finish (small and large alike).
        let mut hogs = Vec::new();
        for size in [64 * 1024; 64].into_iter().chain([4 * MIB]) {
            let budget = budget.clone();
            hogs.push(tokio::spawn(async move {
                budget.read_body(stalled(size, 10), peer(1)).await
            }));
        }
        let full = 64 * 64 * 1024 + 4 * MIB;
        while budget.body_bytes_in_use() < full {
            tokio::task::yield_now().await;
        }
        // Peer 1 asks for more: over its share (the whole pool, alone) and short: refused.
        assert_eq!(
            budget
                .read_body(Body::from(vec![b'x'; 3000]), peer(1))
                .await
                .unwrap_err(),
            BodyRefusal::OverBudget
        );
        // Peer 2, within its share (half): gets its bytes; peer 1 loses a body for it.
        let small = budget
            .read_body(Body::from(vec![b'y'; 3000]), peer(2))
            .await
            .unwrap();
        assert_eq!(small.bytes.len(), 3000);
        // The largest arriving body was cut first.
        let mut cut = 0;
        for hog in hogs {
            if hog.is_finished() {
                assert_eq!(hog.await.unwrap().unwrap_err(), BodyRefusal::TakenBack);
                cut += 1;
            } else {
                hog.abort();
            }
        }
        assert_eq!(cut, 1);
        // A large body within peer 2's share (4 MiB) gets in as well.
        let large = budget
            .read_body(Body::from(vec![b'y'; 3 * MIB]), peer(2))
            .await
            .unwrap();
        assert_eq!(large.bytes.len(), 3 * MIB);
        // Beyond its share, peer 2 is refused like anyone else.
        assert_eq!(
            budget
                .read_body(Body::from(vec![b'y'; 2 * MIB]), peer(2))
                .await
                .unwrap_err(),
            BodyRefusal::OverBudget
        );
    }

    #[tokio::test]
    async fn bodies_of_unknown_length_reserve_as_they_grow() {
        let budget = budget(32 * MIB);
        let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
            (0..100).map(|_| Ok(vec![b'y'; 10_000])).collect();
        let body = Body::from_stream(futures::stream::iter(chunks));
        let read = budget.read_body(body, peer(1)).await.unwrap();
        assert_eq!(read.bytes.len(), 1_000_000);
        assert!(budget.body_bytes_in_use() >= 1_000_000);
        assert!(budget.body_bytes_in_use() <= 2 * 1_000_000);
        drop(read);
        assert_eq!(budget.body_bytes_in_use(), 0);
        // Too large, whatever the length says.
        let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
            (0..8).map(|_| Ok(vec![b'y'; MIB])).collect();
        assert_eq!(
            budget
                .read_body(Body::from_stream(futures::stream::iter(chunks)), peer(1))
                .await
                .unwrap_err(),
            BodyRefusal::TooLarge
        );
        assert_eq!(budget.body_bytes_in_use(), 0);
    }

    #[tokio::test]
    async fn a_body_that_stalls_times_out_and_gives_its_bytes_back() {
        let budget = RequestBudget::new(32 * MIB, Duration::from_millis(50), DEFAULT_FLUX_BUDGET);
        let stalled = futures::stream::iter([Ok::<_, std::io::Error>(vec![b'z'; 100])])
            .chain(futures::stream::pending());
        assert_eq!(
            budget
                .read_body(Body::from_stream(stalled), peer(1))
                .await
                .unwrap_err(),
            BodyRefusal::Timeout(Duration::from_millis(50))
        );
        assert_eq!(budget.body_bytes_in_use(), 0);
    }
}
