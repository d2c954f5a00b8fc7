//! What every controller's calls to the API server share: a limit on how long one call may
//! take ([`bounded`]), the waits after errors ([`Backoff`] for one kind of call,
//! [`KeyedBackoff`] for each object on its own), and the pace of a run of calls
//! ([`CallBudget`], a token bucket). Pure but for [`bounded`] and [`CallBudget::wait`]:
//! the caller passes the time.

use std::borrow::Borrow;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How long one call may take, unless its caller says otherwise.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// A call that had no answer within its limit.
#[derive(Debug, thiserror::Error)]
#[error("no answer from the API server within {0:?}")]
pub struct NoAnswer(pub Duration);

impl NoAnswer {
    /// Whether `error` is that of a call [`bounded`] gave up on.
    pub fn is(error: &kube::Error) -> bool {
        matches!(error, kube::Error::Service(source) if source.is::<NoAnswer>())
    }
}

/// A call that gives up after `limit`, as a [`kube::Error`] like any other failure (one
/// that [`NoAnswer::is`] tells apart).
pub async fn bounded<T>(
    limit: Duration,
    call: impl std::future::Future<Output = Result<T, kube::Error>>,
) -> Result<T, kube::Error> {
    match tokio::time::timeout(limit, call).await {
        Ok(result) => result,
        Err(_) => Err(kube::Error::Service(Box::new(NoAnswer(limit)))),
    }
}

/// Waits that double from `first` up to `max`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Doubling {
    pub first: Duration,
    pub max: Duration,
}

impl Doubling {
    /// The wait after `errors` errors in a row (from 1).
    pub fn delay(self, errors: u32) -> Duration {
        let doublings = errors.saturating_sub(1).min(16);
        self.first.saturating_mul(1 << doublings).min(self.max)
    }
}

/// When a failed kind of call is tried again: doubling from `first` up to `max`, back to
/// nothing after a pass without failures.
#[derive(Debug)]
pub struct Backoff {
    waits: Doubling,
    errors: u32,
    retry_at: Option<Instant>,
}

impl Backoff {
    pub fn new(first: Duration, max: Duration) -> Self {
        Backoff {
            waits: Doubling { first, max },
            errors: 0,
            retry_at: None,
        }
    }

    /// A pass had failures at `now`: the next retry is due after the current delay.
    pub fn failed(&mut self, now: Instant) -> Duration {
        self.errors = self.errors.saturating_add(1);
        let delay = self.waits.delay(self.errors);
        self.retry_at = Some(now + delay);
        delay
    }

    /// A pass without failures.
    pub fn succeeded(&mut self) {
        self.errors = 0;
        self.retry_at = None;
    }

    /// When a retry is due, if one is.
    pub fn retry_at(&self) -> Option<Instant> {
        self.retry_at
    }
}

/// A [`Backoff`] for each key (an object, a migration) on its own: errors in a row, and
/// when to try again; a key that fails holds no other back.
#[derive(Clone, Debug)]
pub struct KeyedBackoff<K> {
    waits: Doubling,
    by_key: BTreeMap<K, (u32, Instant)>,
}

impl<K: Ord> KeyedBackoff<K> {
    pub fn new(first: Duration, max: Duration) -> Self {
        KeyedBackoff {
            waits: Doubling { first, max },
            by_key: BTreeMap::new(),
        }
    }

    /// Whether `key` may be tried at `now`.
    pub fn is_due<Q>(&self, key: &Q, now: Instant) -> bool
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.by_key.get(key).is_none_or(|(_, at)| now >= *at)
    }

    /// Records an error of `key` at `now`: the errors in a row so far, and the wait.
    pub fn failed<Q>(&mut self, key: &Q, now: Instant) -> (u32, Duration)
    where
        K: Borrow<Q>,
        Q: Ord + ToOwned<Owned = K> + ?Sized,
    {
        let errors = self
            .by_key
            .get(key)
            .map_or(0, |(n, _)| *n)
            .saturating_add(1);
        let wait = self.waits.delay(errors);
        self.by_key.insert(key.to_owned(), (errors, now + wait));
        (errors, wait)
    }

    /// A call of `key` succeeded: its errors are forgotten.
    pub fn succeeded<Q>(&mut self, key: &Q)
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.by_key.remove(key);
    }

    /// Forgets the keys not in `keys` (deleted, or ended).
    pub fn keep_only<'a, Q>(&mut self, keys: impl IntoIterator<Item = &'a Q>)
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized + 'a,
    {
        let keys: std::collections::BTreeSet<&Q> = keys.into_iter().collect();
        self.by_key.retain(|key, _| keys.contains(key.borrow()));
    }

    /// Forgets every key.
    pub fn clear(&mut self) {
        self.by_key.clear();
    }

    /// The earliest time a key falls due, if one waits.
    pub fn next_retry(&self) -> Option<Instant> {
        self.by_key.values().map(|(_, at)| *at).min()
    }

    /// How many keys wait after an error.
    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }
}

/// The burst of the call budget: one second of calls, at least one.
pub fn burst(qps: f64) -> f64 {
    qps.ceil().max(1.0)
}

/// A budget of `qps` calls a second with a burst of [`burst`] (a token bucket).
#[derive(Debug)]
pub struct CallBudget {
    qps: f64,
    burst: f64,
    tokens: f64,
    at: Instant,
}

impl CallBudget {
    pub fn new(qps: f64) -> Self {
        let burst = burst(qps);
        CallBudget {
            qps,
            burst,
            tokens: burst,
            at: Instant::now(),
        }
    }

    /// How long to wait at `now` before the next call may start; takes its token.
    pub fn take(&mut self, now: Instant) -> Duration {
        if !(self.qps > 0.0 && self.qps.is_finite()) {
            return Duration::ZERO;
        }
        let earned = now.saturating_duration_since(self.at).as_secs_f64() * self.qps;
        self.tokens = (self.tokens + earned).min(self.burst);
        self.at = now;
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / self.qps)
        }
    }

    /// Waits until the next call may start; takes its token.
    pub async fn wait(&mut self) {
        let delay = self.take(Instant::now());
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_call_without_an_answer_fails_as_no_answer() {
        let never = std::future::pending::<Result<(), kube::Error>>();
        let answer = bounded(Duration::from_millis(10), never).await;
        assert!(answer.as_ref().is_err_and(NoAnswer::is), "{answer:?}");
        let answered = bounded(Duration::from_secs(3), async { Ok(7) }).await;
        assert_eq!(answered.ok(), Some(7));
    }

    #[test]
    fn the_wait_doubles_from_its_first_up_to_its_max() {
        let waits = Doubling {
            first: Duration::from_secs(2),
            max: Duration::from_secs(300),
        };
        let secs: Vec<u64> = (1..=10).map(|n| waits.delay(n).as_secs()).collect();
        assert_eq!(secs, [2, 4, 8, 16, 32, 64, 128, 256, 300, 300]);
        assert_eq!(waits.delay(u32::MAX), waits.max);
    }

    #[test]
    fn backoff_doubles_to_its_cap_and_resets() {
        let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(5));
        let now = Instant::now();
        let delays: Vec<_> = (0..5).map(|_| backoff.failed(now).as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 5, 5]);
        assert_eq!(backoff.retry_at(), Some(now + Duration::from_secs(5)));
        backoff.succeeded();
        assert_eq!(backoff.retry_at(), None);
        assert_eq!(backoff.failed(now), Duration::from_secs(1));
    }

    #[test]
    fn each_key_backs_off_alone_until_it_succeeds() {
        const FIRST: Duration = Duration::from_secs(2);
        let start = Instant::now();
        let mut backoff = KeyedBackoff::<String>::new(FIRST, Duration::from_secs(300));
        assert!(backoff.is_due("a", start));
        assert_eq!(backoff.failed("a", start), (1, FIRST));
        assert!(!backoff.is_due("a", start + Duration::from_secs(1)));
        assert!(backoff.is_due("a", start + FIRST));
        assert!(backoff.is_due("b", start), "another key is not held back");
        assert_eq!(backoff.next_retry(), Some(start + FIRST));
        let later = start + FIRST;
        assert_eq!(backoff.failed("a", later).1, Duration::from_secs(4));
        assert!(!backoff.is_due("a", later + Duration::from_secs(3)));
        backoff.succeeded("a");
        assert!(backoff.is_due("a", later));
        assert_eq!(backoff.failed("a", later).0, 1, "counted again from one");
        backoff.keep_only(["b"]);
        assert!(backoff.is_due("a", later));
        assert!(backoff.is_empty());
    }

    #[test]
    fn the_budget_allows_a_burst_of_one_second_then_paces_at_qps() {
        let start = Instant::now();
        let mut budget = CallBudget::new(20.0);
        let waits: Vec<Duration> = (0..22).map(|_| budget.take(start)).collect();
        assert!(waits[..20].iter().all(|w| w.is_zero()), "{waits:?}");
        assert_eq!(waits[20], Duration::from_millis(50));
        assert_eq!(waits[21], Duration::from_millis(100));
        // Time earns tokens back, never more than the burst.
        let mut budget = CallBudget::new(20.0);
        let later = start + Duration::from_secs(3600);
        let free = (0..40).filter(|_| budget.take(later).is_zero()).count();
        assert_eq!(free, 20);
        // 0: no limit.
        let mut unlimited = CallBudget::new(0.0);
        assert!((0..1000).all(|_| unlimited.take(start).is_zero()));
        // A fraction of a call a second still allows one call.
        let mut slow = CallBudget::new(0.5);
        assert!(slow.take(start).is_zero());
        assert_eq!(slow.take(start), Duration::from_secs(2));
    }
}
