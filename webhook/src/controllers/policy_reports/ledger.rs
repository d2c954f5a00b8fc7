//! What the writer knows the cluster holds: each report it wrote (or listed), the digest
//! of its content, the resource version it was left at, and when its results were first
//! made. Pure: the writes that bring the cluster to a [`ReportSet`] come out of it, and only
//! those: an unchanged report is not written again, a report whose object is gone is left
//! to the garbage collector (unless the object was only selected by a label: then it is
//! deleted), and a report whose write keeps failing waits on its own.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::content::{Digest, FirstSeen, ReportKey, ReportSet};
use crate::kube_calls::KeyedBackoff;

/// One planned write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReportWrite {
    /// Create or change the report at this index of the set (server-side apply).
    Apply(usize),
    /// The object conforms again: its report goes.
    Delete(ReportKey),
}

/// A report as the writer last knew it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KnownReport {
    /// `None`: not written by this version, or its annotation does not read: written again.
    pub digest: Option<Digest>,
    /// The `resourceVersion` it was left at: another at the next listing means someone else
    /// changed it, and it is written again.
    pub resource_version: Option<Box<str>>,
    pub first_seen: FirstSeen,
    /// Its object is watched through a label selector (a service alias): when the object
    /// leaves the round it may still exist (its label removed), so its owner reference
    /// deletes nothing and the writer deletes the report itself.
    pub selected_owner: bool,
}

/// The reports the cluster holds, as far as the writer knows; `None` until it has listed
/// them (a new leader lists first: another replica may have written).
#[derive(Debug)]
pub struct ReportLedger {
    known: Option<HashMap<ReportKey, KnownReport>>,
    /// The reports whose last write failed: each tried again when due, not before.
    failing: KeyedBackoff<ReportKey>,
}

impl Default for ReportLedger {
    fn default() -> Self {
        ReportLedger {
            known: None,
            failing: KeyedBackoff::new(RETRY_FIRST, RETRY_MAX),
        }
    }
}

/// A failed write is tried again after this, doubling up to [`RETRY_MAX`], per report.
pub const RETRY_FIRST: Duration = Duration::from_secs(1);
pub const RETRY_MAX: Duration = Duration::from_secs(60);

impl ReportLedger {
    /// Whether the reports in the cluster have been listed since the lease was taken.
    pub fn is_known(&self) -> bool {
        self.known.is_some()
    }

    /// The reports as listed. A report this writer left at another resource version was
    /// changed by someone else since: its digest no longer vouches for it.
    pub fn reconcile(&mut self, listed: impl IntoIterator<Item = (ReportKey, KnownReport)>) {
        let previous = self.known.take().unwrap_or_default();
        let known = listed
            .into_iter()
            .map(|(key, mut report)| {
                if let Some(ours) = previous.get(&key)
                    && ours.resource_version.is_some()
                    && ours.resource_version != report.resource_version
                {
                    report.digest = None;
                }
                (key, report)
            })
            .collect();
        self.known = Some(known);
    }

    /// Forgets everything (the lease was lost: another replica writes meanwhile).
    pub fn forget(&mut self) {
        self.known = None;
        self.failing.clear();
    }

    /// The writes that make the cluster hold exactly `desired` at `now`: applies first (in
    /// the set's order), then deletes (by key). Reports whose object is gone are dropped
    /// from the ledger without a write (the garbage collector removes them with their
    /// object), except those of a label-selected object, which are deleted; reports that
    /// failed and are not due yet wait. Empty when not known.
    pub fn plan(&mut self, desired: &ReportSet<'_>, now: Instant) -> Vec<ReportWrite> {
        let Some(known) = &mut self.known else {
            return Vec::new();
        };
        known.retain(|key, report| {
            desired.find(key).is_some() || desired.has_object(key) || report.selected_owner
        });
        let due = |key: &ReportKey| self.failing.is_due(key, now);
        let mut writes: Vec<ReportWrite> = desired
            .digests()
            .enumerate()
            .filter(|(_, (key, digest))| {
                known.get(*key).is_none_or(|k| k.digest != Some(*digest)) && due(key)
            })
            .map(|(index, _)| ReportWrite::Apply(index))
            .collect();
        let mut gone: Vec<ReportKey> = known
            .keys()
            .filter(|key| desired.find(key).is_none() && due(key))
            .cloned()
            .collect();
        gone.sort();
        writes.extend(gone.into_iter().map(ReportWrite::Delete));
        writes
    }

    /// How many reports of `desired` the cluster holds as they should be.
    pub fn unchanged(&self, desired: &ReportSet<'_>) -> usize {
        self.known.as_ref().map_or(0, |known| {
            desired
                .digests()
                .filter(|(key, digest)| known.get(*key).is_some_and(|k| k.digest == Some(*digest)))
                .count()
        })
    }

    /// What the ledger knows of `key` (for the first-seen times of a rewrite).
    pub fn get(&self, key: &ReportKey) -> Option<&KnownReport> {
        self.known.as_ref()?.get(key)
    }

    /// A write succeeded: the report is `report` now.
    pub fn written(&mut self, key: &ReportKey, report: KnownReport) {
        self.failing.succeeded(key);
        if let Some(known) = &mut self.known {
            known.insert(key.clone(), report);
        }
    }

    /// A delete succeeded (or the report was already gone).
    pub fn deleted(&mut self, key: &ReportKey) {
        self.failing.succeeded(key);
        if let Some(known) = &mut self.known {
            known.remove(key);
        }
    }

    /// A write of `key` failed at `now`: it waits, doubling from [`RETRY_FIRST`] to
    /// [`RETRY_MAX`]; the others do not. Returns how long.
    pub fn failed(&mut self, key: &ReportKey, now: Instant) -> Duration {
        self.failing.failed(key, now).1
    }

    /// The earliest time a failed write falls due, if any.
    pub fn next_retry(&self) -> Option<Instant> {
        self.failing.next_retry()
    }

    /// How many reports wait after a failed write.
    pub fn failing(&self) -> usize {
        self.failing.len()
    }

    /// How many reports the ledger knows.
    pub fn len(&self) -> usize {
        self.known.as_ref().map_or(0, HashMap::len)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests;
