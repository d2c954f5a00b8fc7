//! The request budget: how many request-body bytes the webhook holds at once, how long a body
//! may take to arrive, and how long a HelmRelease's post-renderers may take to decide.
//!
//! A body is read only once its bytes are reserved in one global budget (a semaphore of
//! bytes): a body that would pass the budget is refused at once with 503, never buffered.
//! Bodies larger than [`SMALL_BODY_BYTES`] may not take the last eighth of the budget, so that
//! large bodies together never lock out the small reviews the API server sends.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, HttpBody as _};
use futures::StreamExt as _;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The largest AdmissionReview read; larger bodies get 413.
pub const MAX_BODY_BYTES: usize = 7 * 1024 * 1024;
/// A body up to this size may use the whole budget; a larger one leaves the reserve.
pub const SMALL_BODY_BYTES: usize = 64 * 1024;
/// Default of `--body-budget-mib`.
pub const DEFAULT_BODY_BUDGET_BYTES: usize = 32 * 1024 * 1024;
/// Default of `--body-timeout-ms`.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(10);
/// Default of `--flux-budget-ms`.
pub const DEFAULT_FLUX_BUDGET: Duration = Duration::from_secs(1);
/// How many HelmRelease post-renderer decisions run at once (each on a blocking thread), so
/// that they never take every core from the Ingress reviews.
pub const FLUX_DECISIONS_AT_ONCE: usize = 1;

/// The budgets a request is held to.
#[derive(Debug)]
pub struct RequestBudget {
    body_bytes: Arc<Semaphore>,
    body_total: usize,
    body_reserve: usize,
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
    #[error("the webhook holds as many request bodies as its memory budget allows; try again")]
    OverBudget,
    #[error("the request body did not arrive within {0:?}")]
    Timeout(Duration),
    #[error("the request body could not be read")]
    Broken,
}

impl BodyRefusal {
    /// The `reason` label of `connections_rejected_total`, where the refusal is a budget's.
    pub fn reason(&self) -> Option<&'static str> {
        match self {
            BodyRefusal::OverBudget => Some("body_budget"),
            BodyRefusal::Timeout(_) => Some("body_timeout"),
            BodyRefusal::TooLarge | BodyRefusal::Broken => None,
        }
    }
}

/// A body that was read whole, and its reservation in the budget (released when dropped).
#[derive(Debug)]
pub struct BudgetedBody {
    pub bytes: Vec<u8>,
    _reservation: OwnedSemaphorePermit,
}

impl RequestBudget {
    /// `body_bytes`: the budget for bodies held at once (at least [`MAX_BODY_BYTES`] plus the
    /// reserve, so that the largest body can pass on a quiet server).
    pub fn new(body_bytes: usize, body_timeout: Duration, flux_budget: Duration) -> Self {
        let body_reserve = body_bytes / 8;
        let body_total = body_bytes.max(MAX_BODY_BYTES + body_reserve);
        RequestBudget {
            body_bytes: Arc::new(Semaphore::new(body_total)),
            body_total,
            body_reserve,
            body_timeout,
            flux_budget,
            flux_decisions: Arc::new(Semaphore::new(FLUX_DECISIONS_AT_ONCE)),
        }
    }

    /// Bytes reserved by bodies being read or decided.
    pub fn body_bytes_in_use(&self) -> usize {
        self.body_total - self.body_bytes.available_permits()
    }

    fn reserve(&self, bytes: usize) -> Option<OwnedSemaphorePermit> {
        let take = |n: usize| {
            self.body_bytes
                .clone()
                .try_acquire_many_owned(u32::try_from(n).ok()?)
                .ok()
        };
        if bytes <= SMALL_BODY_BYTES {
            return take(bytes);
        }
        // A large body must leave the reserve free: take it with the body, give it back.
        let mut permit = take(bytes + self.body_reserve)?;
        drop(permit.split(self.body_reserve));
        Some(permit)
    }

    /// Reads `body` whole within the body timeout, holding its bytes in the budget. The
    /// declared length (`Content-Length`) is reserved before the first byte is read; a body of
    /// unknown length reserves as it grows.
    pub async fn read_body(&self, body: Body) -> Result<BudgetedBody, BodyRefusal> {
        let declared = body.size_hint().exact();
        if declared.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
            return Err(BodyRefusal::TooLarge);
        }
        let initial = declared.map_or(SMALL_BODY_BYTES.min(16 * 1024), |n| n as usize);
        let mut reservation = self.reserve(initial).ok_or(BodyRefusal::OverBudget)?;
        let mut bytes: Vec<u8> = Vec::with_capacity(initial);
        let read = async {
            let mut stream = body.into_data_stream();
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(|_| BodyRefusal::Broken)?;
                let needed = bytes.len() + chunk.len();
                if needed > MAX_BODY_BYTES {
                    return Err(BodyRefusal::TooLarge);
                }
                if needed > reservation.num_permits() {
                    // Unknown length: grow by doubling, each step reserved first.
                    let grown = needed
                        .max(reservation.num_permits() * 2)
                        .min(MAX_BODY_BYTES);
                    let more = self
                        .body_bytes
                        .clone()
                        .try_acquire_many_owned(
                            u32::try_from(grown - reservation.num_permits())
                                .map_err(|_| BodyRefusal::TooLarge)?,
                        )
                        .map_err(|_| BodyRefusal::OverBudget)?;
                    reservation.merge(more);
                    bytes.reserve_exact(grown - bytes.len());
                }
                bytes.extend_from_slice(&chunk);
            }
            Ok(())
        };
        match tokio::time::timeout(self.body_timeout, read).await {
            Ok(Ok(())) => Ok(BudgetedBody {
                bytes,
                _reservation: reservation,
            }),
            Ok(Err(refusal)) => Err(refusal),
            Err(_) => Err(BodyRefusal::Timeout(self.body_timeout)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(bytes: usize) -> RequestBudget {
        RequestBudget::new(bytes, Duration::from_secs(5), DEFAULT_FLUX_BUDGET)
    }

    #[tokio::test]
    async fn bodies_are_reserved_while_held_and_released_when_dropped() {
        let budget = budget(32 * 1024 * 1024);
        let body = budget
            .read_body(Body::from(vec![b'x'; 1000]))
            .await
            .unwrap();
        assert_eq!(body.bytes.len(), 1000);
        assert_eq!(budget.body_bytes_in_use(), 1000);
        drop(body);
        assert_eq!(budget.body_bytes_in_use(), 0);
    }

    #[tokio::test]
    async fn a_body_that_would_pass_the_budget_is_refused_and_small_ones_keep_the_reserve() {
        let budget = budget(32 * 1024 * 1024);
        let big = 7 * 1024 * 1024;
        let mut held = Vec::new();
        for _ in 0..4 {
            held.push(budget.read_body(Body::from(vec![b'x'; big])).await.unwrap());
        }
        // 28 MiB held: a fifth 7 MiB body would pass 32 MiB.
        assert_eq!(
            budget
                .read_body(Body::from(vec![b'x'; big]))
                .await
                .unwrap_err(),
            BodyRefusal::OverBudget
        );
        // A 1 MiB body would leave less than the reserve (4 MiB): refused too.
        assert_eq!(
            budget
                .read_body(Body::from(vec![b'x'; 1024 * 1024]))
                .await
                .unwrap_err(),
            BodyRefusal::OverBudget
        );
        // Small reviews still pass.
        for _ in 0..10 {
            held.push(
                budget
                    .read_body(Body::from(vec![b'x'; 3000]))
                    .await
                    .unwrap(),
            );
        }
        held.clear();
        assert_eq!(budget.body_bytes_in_use(), 0);
    }

    #[tokio::test]
    async fn bodies_of_unknown_length_reserve_as_they_grow() {
        let budget = budget(32 * 1024 * 1024);
        let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
            (0..100).map(|_| Ok(vec![b'y'; 10_000])).collect();
        let body = Body::from_stream(futures::stream::iter(chunks));
        let read = budget.read_body(body).await.unwrap();
        assert_eq!(read.bytes.len(), 1_000_000);
        assert!(budget.body_bytes_in_use() >= 1_000_000);
        assert!(budget.body_bytes_in_use() <= 2 * 1_000_000);
        drop(read);
        assert_eq!(budget.body_bytes_in_use(), 0);
        // Too large, whatever the length says.
        let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
            (0..8).map(|_| Ok(vec![b'y'; 1024 * 1024])).collect();
        assert_eq!(
            budget
                .read_body(Body::from_stream(futures::stream::iter(chunks)))
                .await
                .unwrap_err(),
            BodyRefusal::TooLarge
        );
        assert_eq!(budget.body_bytes_in_use(), 0);
    }

    #[tokio::test]
    async fn a_body_that_stalls_times_out_and_gives_its_bytes_back() {
        let budget = RequestBudget::new(
            32 * 1024 * 1024,
            Duration::from_millis(50),
            DEFAULT_FLUX_BUDGET,
        );
        let stalled = futures::stream::iter([Ok::<_, std::io::Error>(vec![b'z'; 100])])
            .chain(futures::stream::pending());
        assert_eq!(
            budget
                .read_body(Body::from_stream(stalled))
                .await
                .unwrap_err(),
            BodyRefusal::Timeout(Duration::from_millis(50))
        );
        assert_eq!(budget.body_bytes_in_use(), 0);
    }
}
