#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use super::*;
use crate::audit::round::AuditRound;
use crate::audit::{CompletedAudit, Finding, Reason};
use crate::controllers::policy_reports::content::{ReportApi, ReportResults, report_name};

/// A round of Ingresses `styrmin-web1/<name>` (uid `uid-<name>`); those in `wrong` have a
/// finding with `has` as given.
fn round(names: &[&str], wrong: &[(&str, &str)]) -> AuditRound {
    let findings = wrong
        .iter()
        .map(|(name, has)| Finding {
            reason: Reason::WrongClass,
            kind: "Ingress",
            namespace: "styrmin-web1".into(),
            name: (*name).into(),
            has: (*has).into(),
            wants: "class \"traefik\"".into(),
            why: "levels: cluster.ingress_class".into(),
            fix: "kubectl patch".into(),
            settings: Some("levels"),
            decided_by: None,
            mode: None,
        })
        .collect();
    AuditRound {
        audit: Arc::new(CompletedAudit {
            completed_at: String::new(),
            completed_at_unix: 0,
            ingresses: names.len(),
            conforming_ingresses: 0,
            moving_ingresses: 0,
            counts: BTreeMap::new(),
            findings,
            levels: Vec::new(),
        }),
        ingresses: names
            .iter()
            .map(|name| {
                Arc::new(
                    serde_json::from_value(json!({"metadata": {
                        "name": name, "namespace": "styrmin-web1", "uid": format!("uid-{name}")}}))
                    .unwrap(),
                )
            })
            .collect(),
        aliases: Vec::new(),
        deployments: Vec::new(),
        relists: 0,
    }
}

fn key(name: &str) -> ReportKey {
    ReportKey {
        namespace: "styrmin-web1".to_owned(),
        name: report_name(&format!("uid-{name}")),
    }
}

fn set(round: &AuditRound) -> ReportSet<'_> {
    ReportSet::new(round, ReportApi::OpenReports, ReportResults::Findings)
}

/// The planned writes, by the report's object.
fn names(set: &ReportSet<'_>, writes: &[ReportWrite]) -> Vec<String> {
    writes
        .iter()
        .map(|w| match w {
            ReportWrite::Apply(i) => format!("apply {}", set.report(*i).unwrap().key.name),
            ReportWrite::Delete(key) => format!("delete {}", key.name),
        })
        .map(|s| s.replace("styrmin-uid-", ""))
        .collect()
}

/// Writes everything planned, as the writer does when every call succeeds.
fn write_all(ledger: &mut ReportLedger, set: &ReportSet<'_>, now: Instant) -> usize {
    let writes = ledger.plan(set, now);
    for write in &writes {
        match write {
            ReportWrite::Apply(i) => {
                let report = set.report(*i).unwrap();
                ledger.written(
                    &report.key,
                    KnownReport {
                        digest: Some(report.digest),
                        resource_version: Some("7".into()),
                        first_seen: FirstSeen::default(),
                        selected_owner: report.body["metadata"]["ownerReferences"][0]["kind"]
                            == "Service",
                    },
                );
            }
            ReportWrite::Delete(key) => ledger.deleted(key),
        }
    }
    writes.len()
}

#[test]
fn nothing_is_written_before_the_reports_are_listed() {
    let round = round(&["a"], &[("a", "x")]);
    let mut ledger = ReportLedger::default();
    assert!(!ledger.is_known());
    assert!(ledger.plan(&set(&round), Instant::now()).is_empty());
}

#[test]
fn writes_follow_changes_only() {
    let now = Instant::now();
    let mut ledger = ReportLedger::default();
    ledger.reconcile([]);
    let first = round(&["a", "b", "c"], &[("a", "x"), ("b", "x"), ("c", "x")]);
    assert_eq!(
        write_all(&mut ledger, &set(&first), now),
        3,
        "one write per report"
    );
    assert_eq!(write_all(&mut ledger, &set(&first), now), 0, "steady: none");
    assert_eq!(ledger.unchanged(&set(&first)), 3);
    // b changes, c conforms again (its object stays): one write each.
    let second = round(&["a", "b", "c"], &[("a", "x"), ("b", "y")]);
    let desired = set(&second);
    assert_eq!(
        names(&desired, &ledger.plan(&desired, now)),
        ["apply b", "delete c"]
    );
    assert_eq!(write_all(&mut ledger, &desired, now), 2);
    // a is deleted: its report is the garbage collector's, no write.
    let third = round(&["b", "c"], &[("b", "y")]);
    assert!(ledger.plan(&set(&third), now).is_empty());
    assert_eq!(ledger.len(), 1, "forgotten, not deleted");
}

#[test]
fn the_report_of_an_alias_that_loses_its_label_is_deleted_not_left_to_the_collector() {
    let now = Instant::now();
    let mut ledger = ReportLedger::default();
    ledger.reconcile([]);
    // An Ingress's report and a stale alias's.
    let mut first = round(&["a"], &[("a", "x")]);
    let alias: Arc<crate::audit::objects::AliasService> = Arc::new(
        serde_json::from_value(json!({"metadata": {
            "name": "old", "namespace": "styrmin-web1", "uid": "uid-old"}}))
        .unwrap(),
    );
    first.aliases.push(alias);
    let mut findings = first.audit.findings.to_vec();
    let mut stale = findings[0].clone();
    stale.reason = Reason::StaleAlias;
    stale.kind = "Service";
    stale.name = "old".into();
    findings.push(stale);
    Arc::get_mut(&mut first.audit).unwrap().findings = findings.into();
    assert_eq!(write_all(&mut ledger, &set(&first), now), 2);
    // Both objects leave the round: the Ingress was deleted (its report is the garbage
    // collector's), the Service lost its label (it still exists: its report is deleted).
    let second = round(&[], &[]);
    let desired = set(&second);
    assert_eq!(names(&desired, &ledger.plan(&desired, now)), ["delete old"]);
    assert_eq!(write_all(&mut ledger, &desired, now), 1);
    assert!(ledger.is_empty());
}

#[test]
fn a_listing_repairs_what_others_deleted_or_changed() {
    let now = Instant::now();
    let round = round(&["a", "b", "c"], &[("a", "x"), ("b", "x"), ("c", "x")]);
    let desired = set(&round);
    let mut ledger = ReportLedger::default();
    ledger.reconcile([]);
    write_all(&mut ledger, &desired, now);
    let written: Vec<KnownReport> = ["a", "b", "c"]
        .iter()
        .map(|name| ledger.get(&key(name)).unwrap().clone())
        .collect();
    let listed = |name: &str, version: &str| {
        let index = ["a", "b", "c"].iter().position(|n| *n == name).unwrap();
        let mut known = written[index].clone();
        known.resource_version = Some(version.into());
        (key(name), known)
    };
    // a as written, b changed by someone else (another resource version, digest kept),
    // c deleted by someone else.
    let listing = vec![listed("a", "7"), listed("b", "8")];
    ledger.reconcile(listing.clone());
    assert_eq!(
        names(&desired, &ledger.plan(&desired, now)),
        ["apply b", "apply c"]
    );
    write_all(&mut ledger, &desired, now);
    // A listing that finds everything as written costs no write.
    let listing = vec![listed("a", "7"), listed("b", "7"), listed("c", "7")];
    ledger.reconcile(listing);
    assert!(ledger.plan(&desired, now).is_empty());
    // A new leader trusts the digests it lists (it has written nothing yet).
    let mut fresh = ReportLedger::default();
    fresh.reconcile(vec![listed("a", "9"), listed("b", "9"), listed("c", "9")]);
    assert!(fresh.plan(&desired, now).is_empty());
    ledger.forget();
    assert!(ledger.plan(&desired, now).is_empty());
}

#[test]
fn a_failing_report_waits_alone_and_backs_off() {
    let now = Instant::now();
    let round = round(&["a", "b"], &[("a", "x"), ("b", "x")]);
    let desired = set(&round);
    let mut ledger = ReportLedger::default();
    ledger.reconcile([]);
    assert_eq!(ledger.failed(&key("a"), now), Duration::from_secs(1));
    assert_eq!(names(&desired, &ledger.plan(&desired, now)), ["apply b"]);
    assert_eq!(ledger.failing(), 1);
    assert_eq!(ledger.next_retry(), Some(now + Duration::from_secs(1)));
    let later = now + Duration::from_secs(1);
    assert_eq!(
        names(&desired, &ledger.plan(&desired, later)),
        ["apply a", "apply b"]
    );
    let delays: Vec<_> = (0..8)
        .map(|_| ledger.failed(&key("a"), now).as_secs())
        .collect();
    assert_eq!(delays, [2, 4, 8, 16, 32, 60, 60, 60]);
    write_all(&mut ledger, &desired, now + Duration::from_secs(61));
    assert_eq!(ledger.failing(), 0, "a success ends the backoff");
    assert_eq!(ledger.next_retry(), None);
}
