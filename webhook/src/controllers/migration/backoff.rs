//! How long the executor waits before it tries a migration again after an error: per
//! migration, doubling from [`FIRST`] up to [`LONGEST`], forgotten once a pass over it ends
//! without an error. A pure clock-free record: the caller passes the time.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// The wait after a first error.
pub const FIRST: Duration = Duration::from_secs(2);
/// The longest wait: an error that lasts is tried again every five minutes.
pub const LONGEST: Duration = Duration::from_secs(300);

/// The wait after `errors` errors in a row (from 1).
pub fn delay(errors: u32) -> Duration {
    let doublings = errors.saturating_sub(1).min(16);
    FIRST.saturating_mul(1 << doublings).min(LONGEST)
}

/// Errors in a row, and when to try again, by migration name.
#[derive(Clone, Debug, Default)]
pub struct Backoff {
    by_name: BTreeMap<String, (u32, Instant)>,
}

impl Backoff {
    /// Whether `name` may be tried at `now`.
    pub fn is_due(&self, name: &str, now: Instant) -> bool {
        self.by_name.get(name).is_none_or(|(_, at)| now >= *at)
    }

    /// Records an error of `name` at `now`: the errors in a row so far, and the wait.
    pub fn failed(&mut self, name: &str, now: Instant) -> (u32, Duration) {
        let errors = self.by_name.get(name).map_or(0, |(n, _)| *n) + 1;
        let wait = delay(errors);
        self.by_name.insert(name.to_owned(), (errors, now + wait));
        (errors, wait)
    }

    /// A pass over `name` ended without an error.
    pub fn succeeded(&mut self, name: &str) {
        self.by_name.remove(name);
    }

    /// Forgets the migrations not in `names` (deleted, or ended).
    pub fn keep_only<'a>(&mut self, names: impl IntoIterator<Item = &'a str>) {
        let names: std::collections::BTreeSet<&str> = names.into_iter().collect();
        self.by_name.retain(|name, _| names.contains(name.as_str()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_doubles_from_two_seconds_up_to_five_minutes() {
        let waits: Vec<u64> = (1..=10).map(|n| delay(n).as_secs()).collect();
        assert_eq!(waits, [2, 4, 8, 16, 32, 64, 128, 256, 300, 300]);
        assert_eq!(delay(u32::MAX), LONGEST);
    }

    #[test]
    fn each_migration_backs_off_alone_until_a_pass_succeeds() {
        let start = Instant::now();
        let mut backoff = Backoff::default();
        assert!(backoff.is_due("a", start));
        assert_eq!(backoff.failed("a", start), (1, FIRST));
        assert!(!backoff.is_due("a", start + Duration::from_secs(1)));
        assert!(backoff.is_due("a", start + FIRST));
        assert!(
            backoff.is_due("b", start),
            "another migration is not held back"
        );
        let later = start + FIRST;
        assert_eq!(backoff.failed("a", later).1, Duration::from_secs(4));
        assert!(!backoff.is_due("a", later + Duration::from_secs(3)));
        backoff.succeeded("a");
        assert!(backoff.is_due("a", later));
        assert_eq!(backoff.failed("a", later).0, 1, "counted again from one");
        backoff.keep_only(["b"]);
        assert!(backoff.is_due("a", later));
    }
}
