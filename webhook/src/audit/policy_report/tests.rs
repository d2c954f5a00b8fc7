#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::audit::objects::AuditedIngress;
use crate::audit::{AuditReport, Finding, Reason};

fn finding(reason: Reason, kind: &'static str, namespace: &str, name: &str) -> Finding {
    Finding {
        reason,
        kind,
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        has: "class \"nginx\"".to_owned(),
        wants: "class \"traefik\"".to_owned(),
        why: format!("why {}", reason.as_str()),
        fix: "kubectl patch".to_owned(),
        settings: (kind == "Ingress").then_some("levels"),
        decided_by: (kind == "Ingress").then(|| "cluster.ingress_class".to_owned()),
        mode: None,
    }
}

fn audit_report(findings: Vec<Finding>) -> AuditReport {
    AuditReport {
        completed_at: "2026-12-05T10:00:00Z".to_owned(),
        completed_at_unix: 1_796_464_800,
        ingresses: 2,
        conforming_ingresses: 1,
        counts: BTreeMap::new(),
        findings,
        levels: Vec::new(),
    }
}

fn ingress(namespace: &str, name: &str, class: &str) -> Arc<AuditedIngress> {
    Arc::new(
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": namespace, "uid": format!("uid-{name}")},
            "spec": {"ingressClassName": class},
        }))
        .unwrap(),
    )
}

fn uids() -> HashMap<ObjectKey, String> {
    [
        ("Ingress", "styrmin-web1", "api"),
        ("Ingress", "styrmin-web1", "web"),
        ("StyrminDeployment", "styrmin-ctl9", "styrmin-ctl9"),
        ("Service", "styrmin-web1", "cache"),
    ]
    .into_iter()
    .map(|(kind, namespace, name)| {
        (
            ObjectKey {
                kind,
                namespace: namespace.to_owned(),
                name: name.to_owned(),
            },
            format!("uid-{name}"),
        )
    })
    .collect()
}

fn build(findings: Vec<Finding>, results: ReportResults, api: ReportApi) -> Vec<DesiredReport> {
    let report = audit_report(findings);
    let ingresses = [
        ingress("styrmin-web1", "api", "nginx"),
        ingress("styrmin-web1", "web", "traefik"),
        ingress("default", "other", "nginx"),
    ];
    let uids = uids();
    policy_reports(
        &ReportInput {
            report: &report,
            ingresses: &ingresses,
            uids: &uids,
        },
        api,
        results,
    )
}

#[test]
fn one_report_per_object_scoped_to_it_and_owned_by_it() {
    let reports = build(
        vec![
            finding(Reason::WrongClass, "Ingress", "styrmin-web1", "api"),
            finding(Reason::UnknownClass, "Ingress", "styrmin-web1", "api"),
            finding(
                Reason::StuckDeleting,
                "StyrminDeployment",
                "styrmin-ctl9",
                "styrmin-ctl9",
            ),
            finding(Reason::StaleAlias, "Service", "styrmin-web1", "cache"),
        ],
        ReportResults::Findings,
        ReportApi::OpenReports,
    );
    let names: Vec<_> = reports
        .iter()
        .map(|r| format!("{}/{}", r.key.namespace, r.key.name))
        .collect();
    assert_eq!(
        names,
        [
            "styrmin-ctl9/styrmin-uid-styrmin-ctl9",
            "styrmin-web1/styrmin-uid-api",
            "styrmin-web1/styrmin-uid-cache"
        ]
    );
    let api = &reports[1].body;
    assert_eq!(api["apiVersion"], "openreports.io/v1alpha1");
    assert_eq!(api["kind"], "Report");
    assert_eq!(api["source"], "styrmin");
    assert_eq!(
        api["scope"],
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "namespace": "styrmin-web1", "name": "api", "uid": "uid-api"})
    );
    assert_eq!(
        api["metadata"]["ownerReferences"],
        json!([{"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "name": "api", "uid": "uid-api"}])
    );
    assert_eq!(api["metadata"]["labels"][MANAGED_BY_LABEL], MANAGED_BY);
    assert_eq!(
        api["summary"],
        json!({"pass": 0, "fail": 2, "warn": 0, "error": 0, "skip": 0})
    );
    let wrong = &api["results"][0];
    assert_eq!(wrong["policy"], INGRESS_POLICY);
    assert_eq!(wrong["rule"], "wrong_class");
    assert_eq!(wrong["result"], "fail");
    assert_eq!(wrong["severity"], "medium");
    assert_eq!(wrong["message"], "why wrong_class");
    assert_eq!(
        wrong["properties"],
        json!({"has": "class \"nginx\"", "wants": "class \"traefik\"", "fix": "kubectl patch",
               "decidedBy": "cluster.ingress_class", "settings": "levels"})
    );
    assert!(
        wrong.get("timestamp").is_none(),
        "stamped only when written"
    );
    let stuck = &reports[0].body;
    assert_eq!(stuck["scope"]["apiVersion"], "styrmin.io/v1alpha1");
    assert_eq!(stuck["results"][0]["policy"], REMOVAL_POLICY);
    assert_eq!(reports[2].body["scope"]["kind"], "Service");
    assert_eq!(
        reports[0].body["metadata"]["annotations"][DIGEST_ANNOTATION],
        reports[0].digest.as_str()
    );
}

#[test]
fn warn_mode_gives_warn_and_the_policy_working_group_format_has_no_report_source() {
    let mut warned = finding(Reason::WrongClass, "Ingress", "styrmin-web1", "api");
    warned.mode = Some("warn");
    let reports = build(vec![warned], ReportResults::Findings, ReportApi::WgPolicy);
    let body = &reports[0].body;
    assert_eq!(body["apiVersion"], "wgpolicyk8s.io/v1alpha2");
    assert_eq!(body["kind"], "PolicyReport");
    assert!(body.get("source").is_none());
    assert_eq!(body["results"][0]["result"], "warn");
    assert_eq!(body["summary"]["warn"], 1);
}

#[test]
fn pass_results_only_when_asked_and_only_for_styrmin_namespaces() {
    let findings = || {
        vec![finding(
            Reason::WrongClass,
            "Ingress",
            "styrmin-web1",
            "api",
        )]
    };
    let only = build(findings(), ReportResults::Findings, ReportApi::OpenReports);
    assert_eq!(only.len(), 1, "the conforming Ingress has no report");
    let all = build(findings(), ReportResults::All, ReportApi::OpenReports);
    let names: Vec<_> = all.iter().map(|r| r.key.name.as_str()).collect();
    assert_eq!(
        names,
        ["styrmin-uid-api", "styrmin-uid-web"],
        "not `default`"
    );
    let api: Vec<_> = all[0].body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            format!(
                "{} {}",
                r["rule"].as_str().unwrap(),
                r["result"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        api,
        [
            "wrong_class fail",
            "cannot_enforce pass",
            "not_served pass",
            "unknown_class pass"
        ]
    );
    assert_eq!(all[1].body["summary"]["pass"], 4);
    assert_eq!(
        all[1].body["results"][0]["message"],
        "ingressClassName \"traefik\", no annotation: as the rules want"
    );
}

#[test]
fn an_object_without_a_uid_gets_no_report() {
    let reports = build(
        vec![finding(
            Reason::NotServed,
            "Ingress",
            "styrmin-web9",
            "gone",
        )],
        ReportResults::Findings,
        ReportApi::OpenReports,
    );
    assert!(reports.is_empty());
}

#[test]
fn equal_audits_give_equal_digests_and_a_change_a_new_one() {
    let one = build(
        vec![finding(
            Reason::WrongClass,
            "Ingress",
            "styrmin-web1",
            "api",
        )],
        ReportResults::Findings,
        ReportApi::OpenReports,
    );
    let again = build(
        vec![finding(
            Reason::WrongClass,
            "Ingress",
            "styrmin-web1",
            "api",
        )],
        ReportResults::Findings,
        ReportApi::OpenReports,
    );
    assert_eq!(one, again);
    let mut changed = finding(Reason::WrongClass, "Ingress", "styrmin-web1", "api");
    changed.has = "class \"haproxy\"".to_owned();
    let other = build(
        vec![changed],
        ReportResults::Findings,
        ReportApi::OpenReports,
    );
    assert_ne!(one[0].digest, other[0].digest);
    assert_eq!(one[0].digest.len(), 64);
}

#[test]
fn stamping_sets_every_result_timestamp() {
    let reports = build(
        vec![
            finding(Reason::WrongClass, "Ingress", "styrmin-web1", "api"),
            finding(Reason::NotServed, "Ingress", "styrmin-web1", "api"),
        ],
        ReportResults::Findings,
        ReportApi::OpenReports,
    );
    let stamped = reports[0].stamped(1_796_464_800);
    for result in stamped["results"].as_array().unwrap() {
        assert_eq!(
            result["timestamp"],
            json!({"seconds": 1_796_464_800, "nanos": 0})
        );
    }
}
