#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::audit::objects::AuditedIngress;
use crate::audit::{CompletedAudit, Finding, Reason};

fn finding(reason: Reason, kind: &'static str, namespace: &str, name: &str) -> Finding {
    Finding {
        reason,
        kind,
        namespace: namespace.into(),
        name: name.into(),
        has: "class \"nginx\"".into(),
        wants: "class \"traefik\"".into(),
        why: format!("why {}", reason.as_str()).into(),
        fix: "kubectl patch".into(),
        settings: (kind == "Ingress").then_some("levels"),
        decided_by: (kind == "Ingress").then(|| "cluster.ingress_class".into()),
        mode: None,
    }
}

fn completed(findings: Vec<Finding>) -> CompletedAudit {
    CompletedAudit {
        completed_at: "2026-12-05T10:00:00Z".to_owned(),
        completed_at_unix: 1_796_464_800,
        ingresses: 2,
        conforming_ingresses: 1,
        moving_ingresses: 0,
        counts: BTreeMap::new(),
        findings: findings.into(),
        levels: Vec::new(),
    }
}

fn ingress(namespace: &str, name: &str, class: &str) -> Arc<AuditedIngress> {
    Arc::new(
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": namespace, "uid": format!("uid-{name}"),
                         "resourceVersion": "41"},
            "spec": {"ingressClassName": class},
        }))
        .unwrap(),
    )
}

fn round(findings: Vec<Finding>) -> AuditRound {
    round_with(findings, ingress("styrmin-web1", "api", "nginx"))
}

fn round_with(findings: Vec<Finding>, api: Arc<AuditedIngress>) -> AuditRound {
    AuditRound {
        audit: Arc::new(completed(findings)),
        ingresses: vec![
            api,
            ingress("styrmin-web1", "web", "traefik"),
            ingress("default", "other", "nginx"),
        ],
        aliases: vec![Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": "cache", "namespace": "styrmin-web1", "uid": "uid-cache"},
                "spec": {"externalName": "cache.styrmin-gone.svc.cluster.local"},
            }))
            .unwrap(),
        )],
        deployments: vec![Arc::new(
            serde_json::from_value(json!({
                "apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminDeployment",
                "metadata": {"name": "styrmin-ctl9", "namespace": "styrmin-ctl9",
                             "uid": "uid-styrmin-ctl9"},
                "spec": {"environmentId": "prod", "role": "ingress-controller"},
            }))
            .unwrap(),
        )],
        relists: 0,
    }
}

fn build(findings: Vec<Finding>, results: ReportResults, api: ReportApi) -> Vec<DesiredReport> {
    policy_reports(&round(findings), api, results)
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
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "namespace": "styrmin-web1",
               "name": "api", "uid": "uid-api"})
    );
    assert_eq!(
        api["metadata"]["ownerReferences"],
        json!([{"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "name": "api", "uid": "uid-api"}])
    );
    assert_eq!(api["metadata"]["labels"][MANAGED_BY_LABEL], MANAGED_BY);
    assert_eq!(api["summary"], json!({"fail": 2}));
    let wrong = &api["results"][0];
    assert_eq!(wrong["policy"], INGRESS_POLICY);
    assert_eq!(wrong["rule"], "wrong_class");
    assert_eq!(wrong["result"], "fail");
    assert_eq!(wrong["severity"], "medium");
    assert_eq!(wrong["message"], "why wrong_class");
    assert_eq!(
        wrong["properties"],
        json!({"has": "class \"nginx\"", "wants": "class \"traefik\"", "fix": "kubectl patch"})
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
        reports[0].digest.to_string()
    );
    assert_eq!(wrong["scored"], true);
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
    changed.has = "class \"haproxy\"".into();
    let other = build(
        vec![changed],
        ReportResults::Findings,
        ReportApi::OpenReports,
    );
    assert_ne!(one[0].digest, other[0].digest);
    let hex = one[0].digest.to_string();
    assert_eq!(hex.len(), 32);
    assert_eq!(Digest::parse(&hex), Some(one[0].digest));
    assert_eq!(Digest::parse("not a digest"), None);
    // An earlier version's whole SHA-256: not read, so that report is written once more.
    assert_eq!(Digest::parse(&format!("{hex}{hex}")), None);
}

#[test]
fn results_keep_the_time_their_finding_was_first_made() {
    let reports = build(
        vec![
            finding(Reason::WrongClass, "Ingress", "styrmin-web1", "api"),
            finding(Reason::NotServed, "Ingress", "styrmin-web1", "api"),
        ],
        ReportResults::Findings,
        ReportApi::OpenReports,
    );
    let first = reports[0].stamped(&FirstSeen::default(), 1_000);
    for result in first.body["results"].as_array().unwrap() {
        assert_eq!(result["timestamp"], json!({"seconds": 1_000, "nanos": 0}));
    }
    let annotation = first.body["metadata"]["annotations"][FIRST_SEEN_ANNOTATION]
        .as_str()
        .unwrap();
    assert_eq!(annotation, "not_served/fail=1000,wrong_class/fail=1000");
    // Rewritten later (say a third finding came): the two keep their time, read back from
    // the annotation as a new leader reads it.
    let again = reports[0].stamped(&FirstSeen::parse(annotation), 9_000);
    assert_eq!(again.body, first.body);
    assert_eq!(again.first_seen.get("wrong_class/fail"), Some(1_000));
    // A finding that is new gets the time of the write.
    let partial = FirstSeen::parse("wrong_class/fail=500, garbage, x=y");
    let mixed = reports[0].stamped(&partial, 9_000);
    let times: Vec<_> = mixed.body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["timestamp"]["seconds"].as_i64().unwrap())
        .collect();
    assert_eq!(times, [500, 9_000]);
    assert_eq!(
        reports[0].body["results"][0].get("timestamp"),
        None,
        "not in the digest"
    );
}

#[test]
fn a_write_that_leaves_the_findings_as_they_are_leaves_the_report_as_it_is() {
    let findings = || {
        vec![finding(
            Reason::WrongClass,
            "Ingress",
            "styrmin-web1",
            "api",
        )]
    };
    let one = policy_reports(
        &round(findings()),
        ReportApi::OpenReports,
        ReportResults::Findings,
    );
    let same = policy_reports(
        &round(findings()),
        ReportApi::OpenReports,
        ReportResults::Findings,
    );
    assert_eq!(one[0].digest, same[0].digest);
    let mut changed = (*ingress("styrmin-web1", "api", "nginx")).clone();
    changed.has_address = true;
    let other = policy_reports(
        &round_with(findings(), Arc::new(changed)),
        ReportApi::OpenReports,
        ReportResults::Findings,
    );
    // A status write (a new address, a new resourceVersion, which the record does not even
    // keep) changes the Ingress, not the findings: the report is not written again.
    assert_eq!(one[0].digest, other[0].digest);
    assert_eq!(other[0].body["scope"].get("resourceVersion"), None);
}

#[test]
fn a_huge_class_is_cut_and_the_report_stays_within_its_bound() {
    let huge = "c".repeat(256 * 1024);
    let mut findings = Vec::new();
    for reason in Reason::INGRESS {
        let mut f = finding(reason, "Ingress", "styrmin-web1", "api");
        f.has = format!("class {huge:?}").into();
        f.wants = format!("class {huge:?}").into();
        f.why = format!("spec.ingressClassName {huge:?} names no IngressClass").into();
        f.fix = format!("kubectl patch ... {huge}").into();
        f.decided_by = Some(huge.as_str().into());
        findings.push(f);
    }
    let reports = build(findings, ReportResults::All, ReportApi::OpenReports);
    let body = reports[0].stamped(&FirstSeen::default(), 1).body;
    let size = body.to_string().len();
    assert!(size <= MAX_REPORT_BYTES, "{size} bytes");
    let message = body["results"][0]["message"].as_str().unwrap();
    assert!(message.ends_with(CUT_MARKER), "{message}");
    assert!(message.len() <= MAX_TEXT);
    // A cut never splits a character.
    let wide = "é".repeat(MAX_TEXT);
    let cut = bounded(&wide);
    assert!(cut.len() <= MAX_TEXT && cut.ends_with(CUT_MARKER));
    assert_eq!(bounded("short"), "short");
}

#[test]
fn a_report_key_names_its_objects_uid() {
    let reports = build(
        vec![finding(
            Reason::WrongClass,
            "Ingress",
            "styrmin-web1",
            "api",
        )],
        ReportResults::Findings,
        ReportApi::OpenReports,
    );
    assert_eq!(reports[0].key.uid(), Some("uid-api"));
    let set_round = round(vec![finding(
        Reason::WrongClass,
        "Ingress",
        "styrmin-web1",
        "api",
    )]);
    let set = ReportSet::new(&set_round, ReportApi::OpenReports, ReportResults::Findings);
    assert!(set.has_object(&reports[0].key));
    let gone = ReportKey {
        namespace: "styrmin-web1".to_owned(),
        name: report_name("uid-deleted"),
    };
    assert!(!set.has_object(&gone));
    assert_eq!(set.find(&reports[0].key), Some(0));
    assert_eq!(set.find(&gone), None);
}

#[test]
fn every_rule_and_result_has_its_first_seen_key() {
    for reason in Reason::ALL {
        for result in ["fail", "warn", "pass"] {
            let key = format!("{}/{result}", reason.as_str());
            assert!(RULE_RESULTS.contains(&key.as_str()), "{key}");
        }
    }
    assert_eq!(RULE_RESULTS.len(), Reason::ALL.len() * 3);
}
