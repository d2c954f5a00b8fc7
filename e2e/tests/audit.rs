//! The audit of what is already in a cluster, against recorded API server responses
//! (`webhook/tests/data/apiserver/audit/`) served by the fake API server to a real `kube::Client`:
//!
//! - in the webhook (`--source kubernetes`): every reason produced, the counts in the
//!   metrics and `GET /debug/audit`, and a watch error that keeps the last audit and shows
//!   its age until the relist completes;
//! - the one-shot CLI (`styrmin-webhook audit`, the release binary) on the same responses:
//!   the table, `-o json`, and exit status 1.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use serde_json::Value;
use styrmin_e2e::{Scratch, release_binary, run, utf8};
use styrmin_fake_apiserver::{FakeApiServer, Request as ApiRequest, WatchItem};
use styrmin_test_support::recorded_cluster::{
    self, INGRESSES, SERVICES, STEP, answer_every_list, client, metric,
};
use styrmin_webhook::api::{AppState, metrics_router};
use styrmin_webhook::audit::AuditSettings;
use styrmin_webhook::kube_source::KubeSource;
use styrmin_webhook::view::ViewSource as _;

fn recorded(name: &str) -> String {
    recorded_cluster::recorded(&format!("audit/{name}"))
}

async fn get(state: &AppState, uri: &str) -> (StatusCode, String) {
    recorded_cluster::get(metrics_router(state.clone()), uri).await
}

async fn debug_audit(state: &AppState) -> Value {
    let (status, body) = get(state, "/debug/audit").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    serde_json::from_str(&body).unwrap()
}

/// Polls `/debug/audit` until `condition` holds.
async fn wait_for_audit(state: &AppState, what: &str, condition: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + STEP;
    loop {
        let (status, body) = get(state, "/debug/audit").await;
        if status == StatusCode::OK {
            let audit: Value = serde_json::from_str(&body).unwrap();
            if condition(&audit) {
                return audit;
            }
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {body}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `(reason, namespace/name)` of every finding.
fn findings(report: &Value) -> Vec<(String, String)> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["reason"].as_str().unwrap().to_owned(),
                format!(
                    "{}/{}",
                    f["namespace"].as_str().unwrap(),
                    f["name"].as_str().unwrap()
                ),
            )
        })
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect()
}

/// What the recorded cluster holds that is out of line (sorted by reason, then object).
const EXPECTED: &[(&str, &str)] = &[
    // prod is dedicated: nginx on both fields is wrong.
    ("wrong_class", "styrmin-web1/api"),
    // web2's record is class nginx, which Kubernetes 1.26 cannot take on both fields (R9).
    ("cannot_enforce", "styrmin-web2/web"),
    // No address, long past the grace period.
    ("not_served", "styrmin-web2/web"),
    ("not_served", "styrmin-web3/web"),
    // ingress-nginx was uninstalled: no IngressClass nginx is left.
    ("unknown_class", "styrmin-web1/api"),
    ("unknown_class", "styrmin-web2/web"),
    // ctl9 has had a deletion timestamp and kopf's finalizer since 2026-03-02.
    ("stuck_deleting", "styrmin-ctl9/styrmin-ctl9"),
    // Into namespaces that do not exist; web5 is RESTORING (the check says so).
    ("stale_alias", "styrmin-web1/cache"),
    ("stale_alias", "styrmin-web2/search"),
];

/// The first audit's report: every reason, the texts of a finding, the cluster level's note.
fn assert_first_report(report: &Value) {
    assert_eq!(findings(report), pairs(EXPECTED), "{report:#}");
    assert_eq!(
        report["ingresses"], 5,
        "the Ingress in `default` is not judged"
    );
    assert_eq!(report["conforming_ingresses"], 2, "web1/web and web3/admin");
    let wrong = &report["findings"][0];
    assert_eq!(wrong["has"], "class \"nginx\"");
    assert_eq!(
        wrong["wants"],
        "dedicated (annotation traefik, no ingressClassName)"
    );
    assert_eq!(wrong["why"], "levels: environment.dedicated_ingress");
    assert_eq!(wrong["settings"], "levels");
    assert_eq!(
        wrong["fix"],
        "kubectl -n styrmin-web1 patch ingress api --type=merge -p \
         '{\"metadata\":{\"annotations\":{\"kubernetes.io/ingress.class\":\"traefik\"}},\"spec\":{\"ingressClassName\":null}}'"
    );
    let search = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "search")
        .unwrap();
    assert!(
        search["why"]
            .as_str()
            .unwrap()
            .contains("deployment \"web5\" is still in the view (phase RESTORING)"),
        "{search}"
    );
    // The cluster level as stored: `ingressClass: null` applied client-side became the CRD's
    // default traefik; the last-applied configuration still says null (the null trap).
    assert_eq!(report["levels"][0]["ingress_class"], "\"traefik\"");
    assert_eq!(
        report["levels"][0]["resolves_to"],
        "class:traefik (cluster.ingress_class)"
    );
    assert_eq!(
        report["levels"][0]["note"],
        "ingressClass is stored as \"traefik\", but the StyrminCluster was last applied with \
         `ingressClass: null` (its kubectl.kubernetes.io/last-applied-configuration says so): \
         client-side `kubectl apply` drops a null and the CRD's default filled the field, so the \
         class is \"traefik\", not no class; write `ingressClass: \"\"` for no class"
    );
}

/// The first audit's metrics: the count of each reason, the Ingresses, the time it completed
/// (returned).
fn assert_first_metrics(metrics: &str, report: &Value) -> f64 {
    for (reason, count) in [
        ("wrong_class", 1.0),
        ("cannot_enforce", 1.0),
        ("not_served", 2.0),
        ("unknown_class", 2.0),
    ] {
        assert_eq!(
            metric(
                metrics,
                &format!("styrmin_webhook_audit_nonconforming_ingresses{{reason=\"{reason}\"}}")
            ),
            count,
            "{reason}"
        );
    }
    assert_eq!(
        metric(metrics, "styrmin_webhook_controllers_stuck_deleting"),
        1.0
    );
    assert_eq!(
        metric(metrics, "styrmin_webhook_stale_service_aliases"),
        2.0
    );
    assert_eq!(metric(metrics, "styrmin_webhook_audit_ingresses"), 5.0);
    let completed = metric(
        metrics,
        "styrmin_webhook_audit_last_complete_timestamp_seconds",
    );
    assert_eq!(completed, report["completed_at_unix"].as_f64().unwrap());
    completed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_reason_counted_and_a_watch_error_keeps_the_last_audit() {
    let api = FakeApiServer::scripted();
    answer_every_list(&api, "audit");
    let state = AppState::default();
    let (status, _) = get(&state, "/debug/audit").await;
    assert_eq!(
        status,
        StatusCode::SERVICE_UNAVAILABLE,
        "no audit before the first"
    );
    let source = KubeSource::new(client(&api))
        .with_confirm_interval(Duration::from_millis(100))
        .with_audit(
            state.audits().clone(),
            Duration::from_millis(200),
            AuditSettings::default(),
        );
    let task = tokio::spawn(source.run(state.view_sink()));

    // Step 1: every list answered: ready, and a complete audit.
    let audit = wait_for_audit(&state, "the first audit", |a| a["state"] == "complete").await;
    assert!(state.view().is_ready());
    let report = &audit["report"];
    assert_first_report(report);

    let (_, metrics) = get(&state, "/metrics").await;
    let completed = assert_first_metrics(&metrics, report);
    // A later audit that finds the same keeps the earlier findings, not a second copy.
    let first = state.audits().report().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let later = loop {
        let now = state.audits().report().unwrap();
        if !Arc::ptr_eq(&now, &first) {
            break now;
        }
        assert!(Instant::now() < deadline, "no second audit");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(Arc::ptr_eq(&first.findings, &later.findings));

    // The alias watch asks for the aliases only.
    let services = api.wait_for_request("the aliases' list", 1, STEP, |r: &ApiRequest| {
        r.path == SERVICES && !r.is_watch()
    });
    assert_eq!(
        services.param("labelSelector"),
        Some("styrmin.io%2Fservice-alias%3Dtrue"),
        "{services:?}"
    );

    // Step 2: the Ingress watch fails (410) and its relist is held back: the last audit
    // stays, marked stale, and gets older.
    api.watch_lines(INGRESSES, &recorded("ingresses.watch-1.jsonl"));
    api.watch(INGRESSES, [WatchItem::End]);
    let stale = wait_for_audit(&state, "a stale audit", |a| a["state"] == "stale").await;
    // Audits go on every 200 ms until the watch fails: the one kept may be later than the
    // first, with the same content.
    let without_time = |report: &Value| {
        let mut report = report.clone();
        for field in ["completed_at", "completed_at_unix"] {
            report.as_object_mut().unwrap().remove(field);
        }
        report
    };
    assert_eq!(
        without_time(&stale["report"]),
        without_time(report),
        "the last audit is kept as it was"
    );
    let first_at = stale["report"]["completed_at_unix"].as_i64().unwrap();
    let why = stale["stale_because"].as_str().unwrap();
    assert!(why.starts_with("the watch of ingresses failed"), "{why}");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let older = debug_audit(&state).await;
    assert_eq!(older["state"], "stale");
    assert!(older["age_seconds"].as_i64().unwrap() >= 1, "{older}");
    assert_eq!(older["report"]["completed_at_unix"], first_at);
    let (_, metrics) = get(&state, "/metrics").await;
    assert_eq!(
        metric(
            &metrics,
            "styrmin_webhook_audit_last_complete_timestamp_seconds"
        ),
        first_at as f64,
        "the timestamp stops moving"
    );

    // Step 3: the relist (web1/api fixed): a complete audit again, one reason fewer.
    api.answer(INGRESSES, 200, recorded("ingresses.relist.json"));
    let audit = wait_for_audit(&state, "the audit after the relist", |a| {
        a["state"] == "complete" && a["report"]["counts"]["wrong_class"] == 0
    })
    .await;
    let fixed: Vec<_> = EXPECTED
        .iter()
        .copied()
        .filter(|(_, object)| *object != "styrmin-web1/api")
        .collect();
    assert_eq!(findings(&audit["report"]), pairs(&fixed));
    let (_, metrics) = get(&state, "/metrics").await;
    assert_eq!(
        metric(
            &metrics,
            "styrmin_webhook_audit_nonconforming_ingresses{reason=\"wrong_class\"}"
        ),
        0.0
    );
    assert!(
        metric(
            &metrics,
            "styrmin_webhook_audit_last_complete_timestamp_seconds"
        ) >= completed
    );
    task.abort();
}

#[test]
fn the_cli_prints_a_table_and_json_and_exits_1() {
    let scratch = Scratch::new("audit-cli");
    let api = FakeApiServer::scripted();
    let config = scratch.join("kubeconfig");
    api.write_kubeconfig(&config, None);

    answer_every_list(&api, "audit");
    let output = run(
        Command::new(release_binary("styrmin-webhook"))
            .args(["audit", "--kubeconfig"])
            .arg(&config)
            .env_remove("KUBECONFIG"),
        None,
    );
    let table = utf8(output.stdout, "audit table");
    assert_eq!(
        output.status.code(),
        Some(1),
        "{table}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // Kept for docs/audit.md (`E2E_KEEP_SCRATCH=1` keeps it).
    scratch.write("audit.txt", &table);
    let lines: Vec<&str> = table.lines().collect();
    let header = lines[0];
    for column in [
        "NAMESPACE",
        "INGRESS",
        "REASON",
        "HAS",
        "WANTS",
        "WHY",
        "FIX",
    ] {
        assert!(header.contains(column), "{header}");
    }
    for (reason, object) in EXPECTED {
        let (namespace, name) = object.split_once('/').unwrap();
        assert!(
            lines.iter().any(|l| {
                let cells: Vec<&str> = l.split_whitespace().collect();
                cells.len() > 3 && cells[0] == namespace && cells[1] == name && cells[2] == *reason
            }),
            "no row {reason} {object} in:\n{table}"
        );
    }
    assert!(table.contains("STYRMINDEPLOYMENT"), "{table}");
    assert!(
        table.contains("finalizer styrmin.io/kopf-finalizer"),
        "{table}"
    );
    assert!(table.contains("SERVICE"), "{table}");
    assert!(
        table.contains("5 Ingresses in Styrmin namespaces, 2 conform; wrong_class 1, cannot_enforce 1, not_served 2, unknown_class 2, stuck_deleting 1, stale_alias 2"),
        "{table}"
    );

    answer_every_list(&api, "audit");
    let output = run(
        Command::new(release_binary("styrmin-webhook"))
            .args(["audit", "-o", "json", "--kubeconfig"])
            .arg(&config),
        None,
    );
    assert_eq!(output.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(findings(&report), pairs(EXPECTED));
    assert_eq!(report["counts"]["not_served"], 2);

    // A server that cannot be reached: exit 2, the error on stderr, nothing on stdout.
    let unreachable = scratch.write(
        "unreachable",
        "apiVersion: v1\nkind: Config\nclusters:\n- name: x\n  cluster:\n    server: http://127.0.0.1:9\n\
         users:\n- name: x\n  user: {}\ncontexts:\n- name: x\n  context: {cluster: x, user: x}\ncurrent-context: x\n",
    );
    let output = run(
        Command::new(release_binary("styrmin-webhook"))
            .args(["audit", "--kubeconfig"])
            .arg(&unreachable),
        None,
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(output.stdout.is_empty());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("cannot read /version"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
