//! The audit as PolicyReports (`--policy-reports`), against the recorded cluster of
//! `webhook/tests/data/apiserver/audit/` served by the fake API server, which keeps what is
//! written under the report and Lease APIs:
//!
//! - `auto` finds the report API by discovery (Open Reports, else wgpolicyk8s, else none);
//! - one report per object out of line, valid for the real CRD's schema; updated and deleted
//!   as findings change and go; a steady cluster costs no writes; failed writes are retried;
//! - two webhooks on one Lease: one writes; when it dies the other takes over within the
//!   lease duration, and their writes never interleave;
//! - the cost of 10,000 Ingresses (printed; docs/audit.md has the numbers), written with
//!   [`WRITES_IN_FLIGHT`] writes at once and never more.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use styrmin_e2e::crd_schema::{crd_version_schema, schema_errors};
use styrmin_e2e::data;
use styrmin_fake_apiserver::{FakeApiServer, Request as ApiRequest, WatchItem};
use styrmin_test_support::recorded_cluster::{self, INGRESSES, answer_every_list, metric};
use styrmin_webhook::api::{AppState, metrics_router};
use styrmin_webhook::audit::AuditSettings;
use styrmin_webhook::controllers::WithControllers;
use styrmin_webhook::controllers::lease::{LEASE_NAME, LeaseSettings};
use styrmin_webhook::controllers::policy_reports::content::{ReportApi, ReportResults};
use styrmin_webhook::controllers::policy_reports::{
    PolicyReportSettings, RESYNC_EVERY, ReportTarget, WRITES_IN_FLIGHT,
};
use styrmin_webhook::kube_source::KubeSource;
use styrmin_webhook::view::ViewSource as _;
use tokio_util::sync::CancellationToken;

const OPEN_REPORTS: &str = "/apis/openreports.io/v1alpha1";
const WG_POLICY: &str = "/apis/wgpolicyk8s.io/v1alpha2";
const LEASES: &str = "/apis/coordination.k8s.io/v1/";
const WAIT: Duration = Duration::from_secs(20);
/// The lease of the tests: short, so that a hand-over takes a few seconds.
const LEASE_DURATION: Duration = Duration::from_millis(1500);

fn discovery(api: ReportApi) -> Value {
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": api.api_version(),
           "resources": [{"name": api.plural(), "singularName": api.kind().to_lowercase(),
                          "namespaced": true, "kind": api.kind(),
                          "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]}]})
}

/// A fake with the recorded cluster's lists (`replicas` times, one set per webhook), the
/// report APIs in `served` discoverable and writable, and the Lease API writable.
fn cluster(served: &[ReportApi], replicas: usize) -> FakeApiServer {
    let api = FakeApiServer::scripted();
    for _ in 0..replicas {
        answer_every_list(&api, "audit");
    }
    for report_api in ReportApi::ALL {
        let path = format!("/apis/{}", report_api.api_version());
        if served.contains(&report_api) {
            api.serve_object(&path, &discovery(report_api));
            api.accept_writes(&format!("{path}/"));
        } else {
            for _ in 0..replicas {
                api.answer(
                    &path,
                    404,
                    json!({"kind": "Status", "code": 404}).to_string(),
                );
            }
        }
    }
    api.accept_writes(LEASES);
    api
}

/// One replica's writer and its place in the election.
struct Replica {
    reports: PolicyReportSettings,
    election: LeaseSettings,
}

fn settings(target: ReportTarget, identity: &str, results: ReportResults, qps: f64) -> Replica {
    Replica {
        reports: PolicyReportSettings {
            target,
            results,
            qps,
            rediscover_every: REDISCOVER,
            resync_every: RESYNC_EVERY,
        },
        election: LeaseSettings {
            namespace: "styrmin-system".to_owned(),
            name: LEASE_NAME.to_owned(),
            identity: identity.to_owned(),
            duration: LEASE_DURATION,
            renew_deadline: Duration::from_millis(1000),
            retry_period: Duration::from_millis(200),
            legacy_name: None,
        },
    }
}

/// How often `auto` asks discovery again in these tests.
const REDISCOVER: Duration = Duration::from_millis(300);

/// A client whose requests carry `x-replica: <replica>`.
fn client(api: &FakeApiServer, replica: &str) -> kube::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut config = kube::Config::new(api.url().parse().unwrap());
    config
        .headers
        .push(("x-replica".parse().unwrap(), replica.parse().unwrap()));
    kube::Client::try_from(config).unwrap()
}

/// One webhook's view source with the writer, in-process: its state and task.
fn webhook(
    api: &FakeApiServer,
    replica: &str,
    reports: Replica,
) -> (AppState, tokio::task::AbortHandle) {
    webhook_until(api, replica, reports, CancellationToken::new())
}

/// [`webhook`], with the token its SIGTERM would cancel.
fn webhook_until(
    api: &FakeApiServer,
    replica: &str,
    reports: Replica,
    shutdown: CancellationToken,
) -> (AppState, tokio::task::AbortHandle) {
    let state = AppState::default();
    let source = KubeSource::new(client(api, replica))
        .with_confirm_interval(Duration::from_millis(100))
        .with_audit(
            state.audits().clone(),
            Duration::from_millis(200),
            AuditSettings::default(),
        );
    let source = WithControllers {
        source,
        election: reports.election,
        policy_reports: Some(reports.reports),
        metrics: state.metrics().controllers.policy_reports.clone(),
        lease_held: state.metrics().controllers.lease_held.clone(),
        migrations: None,
        shutdown,
    };
    let task = tokio::spawn(source.run(state.view_sink()));
    (state, task.abort_handle())
}

async fn metrics(state: &AppState) -> String {
    recorded_cluster::get(metrics_router(state.clone()), "/metrics")
        .await
        .1
}

/// Waits until `condition` holds for the reports stored under `prefix`.
async fn wait_for_reports(
    api: &FakeApiServer,
    prefix: &str,
    what: &str,
    condition: impl Fn(&BTreeMap<String, Value>) -> bool,
) -> BTreeMap<String, Value> {
    let deadline = Instant::now() + WAIT;
    loop {
        let stored = api.stored(prefix);
        if condition(&stored) {
            return stored;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what} ({} reports): {:#?}",
            stored.len(),
            stored.keys().take(10).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until `count` reports are stored (counted only: 10,000 are not copied each time).
async fn wait_for_count(api: &FakeApiServer, what: &str, count: usize) {
    let deadline = Instant::now() + Duration::from_secs(300);
    while api.stored_count(OPEN_REPORTS) != count {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {} reports",
            api.stored_count(OPEN_REPORTS)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `kind namespace/name: rule result, ...` of every report, by its scope.
fn summary(stored: &BTreeMap<String, Value>) -> Vec<String> {
    let mut lines: Vec<String> = stored
        .values()
        .map(|report| {
            let results: Vec<String> = report["results"]
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
            format!(
                "{} {}/{}: {}",
                report["scope"]["kind"].as_str().unwrap(),
                report["scope"]["namespace"].as_str().unwrap(),
                report["scope"]["name"].as_str().unwrap(),
                results.join(", ")
            )
        })
        .collect();
    lines.sort();
    lines
}

fn report_writes(api: &FakeApiServer, prefix: &str) -> Vec<ApiRequest> {
    api.requests()
        .into_iter()
        .filter(|r| r.method != "GET" && r.path.starts_with(prefix))
        .collect()
}

/// The recorded Ingress `namespace/name`, as a watch event of `kind` after `change`.
fn ingress_event(
    kind: &str,
    namespace: &str,
    name: &str,
    version: u64,
    change: impl Fn(&mut Value),
) -> WatchItem {
    let list: Value =
        serde_json::from_str(&recorded_cluster::recorded("audit/ingresses.list.json")).unwrap();
    let mut object = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["metadata"]["namespace"] == namespace && i["metadata"]["name"] == name)
        .unwrap()
        .clone();
    object["metadata"]["resourceVersion"] = Value::from(version.to_string());
    change(&mut object);
    WatchItem::Line(json!({"type": kind, "object": object}).to_string())
}

const EXPECTED: &[&str] = &[
    "Ingress styrmin-web1/api: wrong_class fail, unknown_class fail",
    "Ingress styrmin-web2/web: cannot_enforce fail, not_served fail, unknown_class fail",
    "Ingress styrmin-web3/web: not_served fail",
    "Service styrmin-web1/cache: stale_alias fail",
    "Service styrmin-web2/search: stale_alias fail",
    "StyrminDeployment styrmin-ctl9/styrmin-ctl9: stuck_deleting fail",
];

/// Each stored report valid for the Open Reports CRD, owned by its scope, its results
/// stamped with a time.
fn assert_valid_open_reports(stored: &BTreeMap<String, Value>) {
    let schema = crd_version_schema(&data("crds/openreports.io_reports.yaml"), "v1alpha1");
    for (path, report) in stored {
        let errors = schema_errors(&schema, report);
        assert!(
            errors.is_empty(),
            "{path}: not valid for the Open Reports CRD: {errors:#?}"
        );
        assert_eq!(
            report["metadata"]["ownerReferences"][0]["uid"],
            report["scope"]["uid"]
        );
        assert!(
            report["results"][0]["timestamp"]["seconds"]
                .as_i64()
                .unwrap()
                > 1_700_000_000
        );
    }
}

/// The writes since the `first`: one delete (web1/api's report), one apply (web2/web's).
fn assert_one_delete_one_apply(writes: &[ApiRequest], first: usize) {
    let changes: Vec<String> = writes[first..]
        .iter()
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert_eq!(changes.len(), 2, "one delete, one apply: {changes:#?}");
    assert!(
        changes
            .iter()
            .any(|c| c.starts_with("DELETE ") && c.ends_with("/styrmin-uid-styrmin-web1-api"))
    );
    assert!(
        changes
            .iter()
            .any(|c| c.starts_with("PATCH ") && c.ends_with("/styrmin-uid-styrmin-web2-web"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reports_follow_the_findings_with_only_the_writes_they_need() {
    let api = cluster(&[ReportApi::OpenReports, ReportApi::WgPolicy], 1);
    api.fail_writes(OPEN_REPORTS, 2, 500);
    let (state, task) = webhook(
        &api,
        "a",
        settings(ReportTarget::Auto, "a", ReportResults::Findings, 0.0),
    );

    // Open Reports is preferred; the two failed writes are retried.
    let stored = wait_for_reports(&api, OPEN_REPORTS, "the first reports", |s| {
        s.len() == EXPECTED.len()
    })
    .await;
    assert_eq!(summary(&stored), EXPECTED);
    assert_valid_open_reports(&stored);
    assert!(
        api.requests()
            .iter()
            .all(|r| !r.path.starts_with(WG_POLICY)),
        "one API only"
    );
    let first = report_writes(&api, OPEN_REPORTS).len();
    assert_eq!(
        first,
        EXPECTED.len() + 2,
        "each report once, and the two failed writes again"
    );
    let text = metrics(&state).await;
    for (name, value) in [
        (
            "styrmin_webhook_policy_report_writes_total{operation=\"apply\",outcome=\"failed\"}",
            2.0,
        ),
        (
            "styrmin_webhook_policy_report_api{api=\"openreports\"}",
            1.0,
        ),
        ("styrmin_webhook_controllers_lease_held", 1.0),
    ] {
        assert_eq!(metric(&text, name), value, "{name}");
    }
    let lease = api.stored(LEASES);
    assert_eq!(lease.len(), 1);
    assert_eq!(
        lease.values().next().unwrap()["spec"]["holderIdentity"],
        "a"
    );

    // Steady: several audits later, no write, and not even a pass of the writer: the audit
    // hands it no new round while nothing changes.
    let unchanged = |text: &str| metric(text, "styrmin_webhook_policy_reports_unchanged_total");
    let before = unchanged(&metrics(&state).await);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        report_writes(&api, OPEN_REPORTS).len(),
        first,
        "a steady cluster costs no writes"
    );
    let text = metrics(&state).await;
    assert_eq!(unchanged(&text), before, "no pass over an unchanged round");
    assert_eq!(
        metric(&text, "styrmin_webhook_policy_reports"),
        EXPECTED.len() as f64
    );
    assert_eq!(metric(&text, "styrmin_webhook_policy_reports_failing"), 0.0);

    // web1/api is fixed (its report goes); web2/web gets an address (its report changes).
    // The list's version is 320; the watch resumes from there.
    api.wait_for_request("the Ingress watch", 1, WAIT, |r| {
        r.path == INGRESSES && r.is_watch()
    });
    api.watch(
        INGRESSES,
        [
            ingress_event("MODIFIED", "styrmin-web1", "api", 330, |i| {
                i["metadata"]["annotations"]["kubernetes.io/ingress.class"] =
                    Value::from("traefik");
                i["spec"]
                    .as_object_mut()
                    .unwrap()
                    .remove("ingressClassName");
            }),
            ingress_event("MODIFIED", "styrmin-web2", "web", 331, |i| {
                i["status"] = json!({"loadBalancer": {"ingress": [{"ip": "203.0.113.20"}]}});
            }),
        ],
    );
    let stored = wait_for_reports(&api, OPEN_REPORTS, "the changed reports", |s| {
        s.len() == EXPECTED.len() - 1
            && summary(s)
                .iter()
                .any(|l| l == "Ingress styrmin-web2/web: cannot_enforce fail, unknown_class fail")
    })
    .await;
    assert!(
        !summary(&stored)
            .iter()
            .any(|l| l.contains("styrmin-web1/api"))
    );
    tokio::time::sleep(Duration::from_millis(600)).await;
    let writes = report_writes(&api, OPEN_REPORTS);
    assert_one_delete_one_apply(&writes, first);
    let apply = writes.iter().find(|r| r.method == "PATCH").unwrap();
    assert!(
        apply.query.contains("fieldManager=styrmin-webhook") && apply.query.contains("force=true"),
        "{apply:?}"
    );
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_falls_back_to_wgpolicyk8s_then_to_none_until_one_is_served() {
    let api = cluster(&[ReportApi::WgPolicy], 1);
    let (_state, task) = webhook(
        &api,
        "a",
        settings(ReportTarget::Auto, "a", ReportResults::All, 0.0),
    );
    let stored = wait_for_reports(&api, WG_POLICY, "the reports", |s| s.len() == 8).await;
    let schema = crd_version_schema(&data("crds/wgpolicyk8s.io_policyreports.yaml"), "v1alpha2");
    for (path, report) in &stored {
        let errors = schema_errors(&schema, report);
        assert!(
            errors.is_empty(),
            "{path}: not valid for the PolicyReport CRD: {errors:#?}"
        );
    }
    // `all`: the two conforming Ingresses have reports of `pass` results.
    let lines = summary(&stored);
    assert!(
        lines.contains(&"Ingress styrmin-web1/web: wrong_class pass, cannot_enforce pass, not_served pass, unknown_class pass".to_owned()),
        "{lines:#?}"
    );
    task.abort();

    let api = cluster(&[], 1);
    let (state, task) = webhook(
        &api,
        "a",
        settings(ReportTarget::Auto, "a", ReportResults::Findings, 0.0),
    );
    let deadline = Instant::now() + WAIT;
    while !metrics(&state)
        .await
        .contains("styrmin_webhook_policy_report_api{api=\"none\"} 1")
    {
        assert!(Instant::now() < deadline, "no metric says none");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let writes: Vec<_> = api
        .writes()
        .into_iter()
        .filter(|r| !r.path.starts_with(LEASES))
        .collect();
    assert!(writes.is_empty(), "{writes:#?}");

    // The Open Reports CRDs installed later (Kyverno, Policy Reporter): discovery is asked
    // again, and the reports follow without a restart.
    let path = format!("/apis/{}", ReportApi::OpenReports.api_version());
    api.serve_object(&path, &discovery(ReportApi::OpenReports));
    api.accept_writes(&format!("{path}/"));
    wait_for_reports(
        &api,
        OPEN_REPORTS,
        "the reports once Open Reports is served",
        |s| s.len() == EXPECTED.len(),
    )
    .await;
    assert!(
        metrics(&state)
            .await
            .contains("styrmin_webhook_policy_report_api{api=\"openreports\"} 1"),
        "the metric does not say openreports"
    );
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_two_webhooks_one_writes_and_the_other_takes_over_when_it_dies() {
    let api = cluster(&[ReportApi::OpenReports], 2);
    let reports = |id| {
        settings(
            ReportTarget::Api(ReportApi::OpenReports),
            id,
            ReportResults::Findings,
            0.0,
        )
    };
    let (state_a, task_a) = webhook(&api, "a", reports("a"));
    wait_for_reports(&api, OPEN_REPORTS, "a's reports", |s| {
        s.len() == EXPECTED.len()
    })
    .await;
    let (state_b, task_b) = webhook(&api, "b", reports("b"));
    tokio::time::sleep(LEASE_DURATION * 2).await;
    assert_eq!(
        metric(
            &metrics(&state_a).await,
            "styrmin_webhook_controllers_lease_held"
        ),
        1.0
    );
    assert_eq!(
        metric(
            &metrics(&state_b).await,
            "styrmin_webhook_controllers_lease_held"
        ),
        0.0
    );
    let writer = |r: &ApiRequest| r.header("x-replica").unwrap_or("?").to_owned();
    assert!(
        report_writes(&api, OPEN_REPORTS)
            .iter()
            .all(|r| writer(r) == "a"),
        "b wrote while a held the lease"
    );

    // a dies: b takes the lease within its duration (and one retry period) of a's last renewal.
    let last_renewal = Instant::now();
    task_a.abort();
    drop(state_a);
    let deadline = last_renewal + LEASE_DURATION + Duration::from_secs(2);
    loop {
        let holder = api.stored(LEASES).values().next().unwrap()["spec"]["holderIdentity"].clone();
        if holder == "b" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "b did not take over within the lease duration"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let took_over = last_renewal.elapsed();
    println!("hand-over after {took_over:?} (lease duration {LEASE_DURATION:?})");

    // b lists the reports a wrote and finds them current; it writes the next change.
    // A report deleted by someone else (the garbage collector) is not b's business until
    // its object changes: b writes only what changed in the audit.
    let before = report_writes(&api, OPEN_REPORTS).len();
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(
        report_writes(&api, OPEN_REPORTS).len(),
        before,
        "the new leader rewrote current reports"
    );
    api.wait_for_request("b's Ingress watch", 2, WAIT, |r| {
        r.path == INGRESSES && r.is_watch()
    });
    api.watch(
        INGRESSES,
        [ingress_event("MODIFIED", "styrmin-web3", "web", 330, |i| {
            i["status"] = json!({"loadBalancer": {"ingress": [{"ip": "203.0.113.30"}]}});
        })],
    );
    wait_for_reports(&api, OPEN_REPORTS, "b's delete", |s| {
        s.len() == EXPECTED.len() - 1
    })
    .await;
    let writes = report_writes(&api, OPEN_REPORTS);
    let first_b = writes.iter().position(|r| writer(r) == "b").unwrap();
    assert!(
        writes[first_b..].iter().all(|r| writer(r) == "b"),
        "a and b wrote in turn: {writes:#?}"
    );
    assert!(writes[..first_b].iter().all(|r| writer(r) == "a"));
    assert_eq!(
        metric(
            &metrics(&state_b).await,
            "styrmin_webhook_controllers_lease_held"
        ),
        1.0
    );
    task_b.abort();
}

/// The Lease holder's name in the fake's stored Lease.
fn holder(api: &FakeApiServer) -> Value {
    api.stored(LEASES)
        .values()
        .next()
        .map(|lease| lease["spec"]["holderIdentity"].clone())
        .unwrap_or(Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resync_repairs_deleted_reports_and_a_stopping_holder_gives_the_lease_back() {
    let api = cluster(&[ReportApi::OpenReports], 2);
    let reports = |id| {
        let mut settings = settings(
            ReportTarget::Api(ReportApi::OpenReports),
            id,
            ReportResults::Findings,
            0.0,
        );
        settings.reports.resync_every = Duration::from_millis(500);
        settings
    };
    let shutdown_a = CancellationToken::new();
    let (_state_a, task_a) = webhook_until(&api, "a", reports("a"), shutdown_a.clone());
    let stored = wait_for_reports(&api, OPEN_REPORTS, "a's reports", |s| {
        s.len() == EXPECTED.len()
    })
    .await;

    // Someone deletes a report (or its CRD was installed again): the next listing finds it
    // missing and writes it again, and only it.
    let (path, _) = stored.iter().next().unwrap();
    let writes_before = report_writes(&api, OPEN_REPORTS).len();
    api.remove_stored(path).unwrap();
    wait_for_reports(&api, OPEN_REPORTS, "the deleted report again", |s| {
        s.contains_key(path)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(
        report_writes(&api, OPEN_REPORTS).len(),
        writes_before + 1,
        "one write for the report that was gone; listings find the rest as written"
    );
    let lists = api
        .requests()
        .iter()
        .filter(|r| {
            r.method == "GET" && r.path.starts_with(OPEN_REPORTS) && r.path.ends_with("/reports")
        })
        .count();
    assert!(lists >= 3, "a listing every resync: {lists}");

    // b follows while a holds; a is told to stop (SIGTERM): it gives the Lease back, and b
    // takes it at its next retry instead of waiting out the lease duration.
    let (state_b, task_b) = webhook(&api, "b", reports("b"));
    tokio::time::sleep(LEASE_DURATION).await;
    assert_eq!(holder(&api), "a");
    let stopped = Instant::now();
    shutdown_a.cancel();
    while holder(&api) != "b" {
        assert!(
            stopped.elapsed() < LEASE_DURATION,
            "b did not take over before the lease duration: {:?}",
            holder(&api)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!("hand-over after a give-back: {:?}", stopped.elapsed());
    assert_eq!(
        metric(
            &metrics(&state_b).await,
            "styrmin_webhook_controllers_lease_held"
        ),
        1.0
    );
    task_a.abort();
    task_b.abort();
}

/// 10,000 Ingresses in Styrmin namespaces, every one out of line (class nginx where the
/// environment is dedicated, and no IngressClass nginx): the writes of the first audit, of a
/// steady second one, and after 100 of them are fixed. Prints the numbers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_ingresses_cost_one_write_each_once_then_only_the_changes() {
    const COUNT: usize = 10_000;
    const FIXED: usize = 100;
    let ingress = |n: usize, class: Option<&str>| {
        let mut object = json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": format!("app-{n}"), "namespace": "styrmin-web1", "uid": format!("uid-app-{n}"),
                         "resourceVersion": "400", "creationTimestamp": "2026-03-02T09:16:21Z",
                         "annotations": {"kubernetes.io/ingress.class": "nginx"}},
            "spec": {"ingressClassName": "nginx"},
            "status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.10"}]}}
        });
        if let Some(class) = class {
            object["metadata"]["annotations"]["kubernetes.io/ingress.class"] = Value::from(class);
            object["spec"]
                .as_object_mut()
                .unwrap()
                .remove("ingressClassName");
        }
        object
    };
    let items: Vec<Value> = (0..COUNT).map(|n| ingress(n, None)).collect();
    let list = json!({"apiVersion": "networking.k8s.io/v1", "kind": "IngressList",
                      "metadata": {"resourceVersion": "400"}, "items": items});
    // The recorded lists, with the Ingresses replaced by the generated ones.
    let api = FakeApiServer::scripted();
    api.answer(
        "/version",
        200,
        recorded_cluster::recorded("audit/version.json"),
    );
    for (path, file) in [
        (recorded_cluster::CLUSTERS, "styrminclusters.list.json"),
        (
            recorded_cluster::ENVIRONMENTS,
            "styrminenvironments.list.json",
        ),
        (
            recorded_cluster::DEPLOYMENTS,
            "styrmindeployments.list.json",
        ),
        (recorded_cluster::SERVICES, "services.list.json"),
        (recorded_cluster::NAMESPACES, "namespaces.list.json"),
        (
            recorded_cluster::INGRESS_CLASSES,
            "ingressclasses.list.json",
        ),
    ] {
        api.answer(
            path,
            200,
            recorded_cluster::recorded(&format!("audit/{file}")),
        );
    }
    api.answer(INGRESSES, 200, list.to_string());
    api.serve_object(OPEN_REPORTS, &discovery(ReportApi::OpenReports));
    api.accept_writes(&format!("{OPEN_REPORTS}/"));
    api.accept_writes(LEASES);
    // Each write takes a while, as on a loaded API server: the writer keeps several going.
    api.delay_writes(OPEN_REPORTS, Duration::from_millis(2));
    // The other objects out of line in the recording: the stuck controller and two aliases.
    let others = 3;
    let started = Instant::now();
    let (_state, task) = webhook(
        &api,
        "a",
        settings(ReportTarget::Auto, "a", ReportResults::Findings, 0.0),
    );
    wait_for_count(&api, "the first audit's reports", COUNT + others).await;
    let first_audit = started.elapsed();
    let first = report_writes(&api, OPEN_REPORTS).len();
    let lists = api
        .requests()
        .iter()
        .filter(|r| r.method == "GET" && r.path == format!("{OPEN_REPORTS}/reports"))
        .count();

    tokio::time::sleep(Duration::from_secs(2)).await;
    let steady = report_writes(&api, OPEN_REPORTS).len() - first;

    api.wait_for_request("the Ingress watch", 1, WAIT, |r| {
        r.path == INGRESSES && r.is_watch()
    });
    api.watch(
        INGRESSES,
        (0..FIXED).map(|n| {
            let mut object = ingress(n, Some("traefik"));
            object["metadata"]["resourceVersion"] = Value::from((500 + n).to_string());
            WatchItem::Line(json!({"type": "MODIFIED", "object": object}).to_string())
        }),
    );
    wait_for_count(
        &api,
        "the fixed Ingresses' reports gone",
        COUNT + others - FIXED,
    )
    .await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    let after_changes = report_writes(&api, OPEN_REPORTS).len() - first - steady;
    println!(
        "10,000 Ingresses: first audit {first} writes ({lists} list of the reports, {first_audit:?} to write them all, no rate limit); \
         steady audits {steady} writes; after {FIXED} Ingresses fixed {after_changes} writes"
    );
    assert_eq!(first, COUNT + others);
    assert_eq!(api.most_writes_in_flight(), WRITES_IN_FLIGHT);
    // One listing on taking the Lease, and one after each relist of the watches (the fake
    // ends its watches, so they list again): listings cost list calls, never writes.
    assert!(lists >= 1);
    assert_eq!(steady, 0);
    assert_eq!(after_changes, FIXED);
    task.abort();
}

/// One report whose writes are slow (a slow webhook on reports, an overloaded etcd member)
/// takes one of the writer's slots, not the writer: the other reports are written while it
/// is still in flight. It is the first in the writer's order (its namespace sorts first), so
/// a writer that waited for each write would write nothing else until it came back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_report_takes_one_slot_and_the_others_are_written_meanwhile() {
    let api = cluster(&[ReportApi::OpenReports], 1);
    let slow = format!("{OPEN_REPORTS}/namespaces/styrmin-ctl9/");
    api.delay_writes(&slow, Duration::from_secs(3));
    let (_state, task) = webhook(
        &api,
        "a",
        settings(ReportTarget::Auto, "a", ReportResults::Findings, 0.0),
    );
    wait_for_reports(&api, OPEN_REPORTS, "every report but the slow one", |s| {
        s.len() == EXPECTED.len() - 1
    })
    .await;
    assert_eq!(
        api.stored_count(&slow),
        0,
        "the slow write is still in flight"
    );
    let stored = wait_for_reports(&api, OPEN_REPORTS, "the slow report too", |s| {
        s.len() == EXPECTED.len()
    })
    .await;
    assert_eq!(summary(&stored), EXPECTED);
    assert_eq!(
        api.most_writes_in_flight(),
        1,
        "only the slow one is counted"
    );
    task.abort();
}
