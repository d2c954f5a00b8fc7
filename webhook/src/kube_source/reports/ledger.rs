//! What the writer knows the cluster holds: each report it wrote (or found) and the digest of
//! its content. Pure: the writes that bring the cluster to a set of desired reports come
//! out of it, and only those: an unchanged report is not written again.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::audit::policy_report::{DesiredReport, ReportKey};

/// One write.
#[derive(Clone, Debug, PartialEq)]
pub enum ReportWrite<'a> {
    /// Create or change the report (server-side apply).
    Apply(&'a DesiredReport),
    /// The object conforms again (or is gone): its report goes.
    Delete(ReportKey),
}

/// The reports the cluster holds, as far as the writer knows; `None` until it has listed
/// them (a new leader lists first: another replica may have written).
#[derive(Debug, Default)]
pub struct ReportLedger {
    known: Option<HashMap<ReportKey, Option<String>>>,
}

impl ReportLedger {
    /// Whether the reports in the cluster have been listed since the lease was taken.
    pub fn is_known(&self) -> bool {
        self.known.is_some()
    }

    /// The reports listed, each with the digest its annotation holds (`None`: not written
    /// by this version, or edited: written again).
    pub fn seed(&mut self, listed: impl IntoIterator<Item = (ReportKey, Option<String>)>) {
        self.known = Some(listed.into_iter().collect());
    }

    /// Forgets everything (the lease was lost: another replica writes meanwhile).
    pub fn forget(&mut self) {
        self.known = None;
    }

    /// The writes that make the cluster hold exactly `desired`: applies first (by key), then
    /// deletes (by key). Empty when the ledger is not known.
    pub fn plan<'a>(&self, desired: &'a [DesiredReport]) -> Vec<ReportWrite<'a>> {
        let Some(known) = &self.known else {
            return Vec::new();
        };
        let mut writes: Vec<ReportWrite<'a>> = desired
            .iter()
            .filter(|d| {
                known
                    .get(&d.key)
                    .is_none_or(|digest| digest.as_deref() != Some(&d.digest))
            })
            .map(ReportWrite::Apply)
            .collect();
        let wanted: std::collections::HashSet<&ReportKey> =
            desired.iter().map(|d| &d.key).collect();
        let mut gone: Vec<ReportKey> = known
            .keys()
            .filter(|key| !wanted.contains(key))
            .cloned()
            .collect();
        gone.sort();
        writes.extend(gone.into_iter().map(ReportWrite::Delete));
        writes
    }

    /// How many reports the plan leaves as they are.
    pub fn unchanged(&self, desired: &[DesiredReport]) -> usize {
        self.known.as_ref().map_or(0, |known| {
            desired
                .iter()
                .filter(|d| {
                    known
                        .get(&d.key)
                        .is_some_and(|digest| digest.as_deref() == Some(&d.digest))
                })
                .count()
        })
    }

    /// A write succeeded.
    pub fn applied(&mut self, report: &DesiredReport) {
        if let Some(known) = &mut self.known {
            known.insert(report.key.clone(), Some(report.digest.clone()));
        }
    }

    /// A delete succeeded (or the report was already gone).
    pub fn deleted(&mut self, key: &ReportKey) {
        if let Some(known) = &mut self.known {
            known.remove(key);
        }
    }
}

/// When failed writes are tried again: doubling from `first` up to `max`, back to nothing
/// after a pass without failures.
#[derive(Debug)]
pub struct Backoff {
    first: Duration,
    max: Duration,
    next: Option<Duration>,
    retry_at: Option<Instant>,
}

impl Backoff {
    pub fn new(first: Duration, max: Duration) -> Self {
        Backoff {
            first,
            max,
            next: None,
            retry_at: None,
        }
    }

    /// A pass had failures at `now`: the next retry is due after the current delay.
    pub fn failed(&mut self, now: Instant) -> Duration {
        let delay = self.next.unwrap_or(self.first);
        self.next = Some((delay * 2).min(self.max));
        self.retry_at = Some(now + delay);
        delay
    }

    /// A pass without failures.
    pub fn succeeded(&mut self) {
        self.next = None;
        self.retry_at = None;
    }

    /// When a retry is due, if one is.
    pub fn retry_at(&self) -> Option<Instant> {
        self.retry_at
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    fn desired(name: &str, digest: &str) -> DesiredReport {
        DesiredReport {
            key: ReportKey {
                namespace: "styrmin-web1".to_owned(),
                name: name.to_owned(),
            },
            body: json!({}),
            digest: digest.to_owned(),
        }
    }

    fn names(writes: &[ReportWrite<'_>]) -> Vec<String> {
        writes
            .iter()
            .map(|w| match w {
                ReportWrite::Apply(d) => format!("apply {}", d.key.name),
                ReportWrite::Delete(key) => format!("delete {}", key.name),
            })
            .collect()
    }

    #[test]
    fn nothing_is_written_before_the_reports_are_listed() {
        let ledger = ReportLedger::default();
        assert!(!ledger.is_known());
        assert!(ledger.plan(&[desired("a", "1")]).is_empty());
    }

    #[test]
    fn only_new_changed_and_gone_reports_are_written() {
        let mut ledger = ReportLedger::default();
        ledger.seed([
            (desired("same", "1").key, Some("1".to_owned())),
            (desired("changed", "1").key, Some("1".to_owned())),
            (desired("foreign", "").key, None),
            (desired("fixed", "1").key, Some("1".to_owned())),
        ]);
        let want = [
            desired("same", "1"),
            desired("changed", "2"),
            desired("foreign", "3"),
            desired("new", "4"),
        ];
        assert_eq!(
            names(&ledger.plan(&want)),
            [
                "apply changed",
                "apply foreign",
                "apply new",
                "delete fixed"
            ]
        );
        assert_eq!(ledger.unchanged(&want), 1);
        for report in &want {
            ledger.applied(report);
        }
        ledger.deleted(&desired("fixed", "").key);
        assert!(ledger.plan(&want).is_empty(), "a steady cluster: no writes");
        assert_eq!(ledger.unchanged(&want), 4);
        ledger.forget();
        assert!(ledger.plan(&want).is_empty());
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
}
