//! The `--source kubernetes` view source against recorded API server responses
//! (`webhook/tests/data/apiserver/`), served by an in-process fake API server to a real
//! `kube::Client`: initial lists (one paginated), watch events, a bookmark, a dropped
//! connection, a `410 Gone` with its relist. The view, readiness and metrics are checked after
//! each step, through the webhook's own router.
//!
//! What needs a live cluster is at the end, `#[ignore = "needs cluster"]`.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt as _;
use serde_json::{Value, json};
use styrmin_fake_apiserver::{FakeApiServer, Request as ApiRequest, WatchItem};
use styrmin_ingress_rules::IngressTarget;
use styrmin_test_support::recorded_cluster::{
    CLUSTERS, DEPLOYMENTS, ENVIRONMENTS, INGRESS_CLASSES, INGRESSES, NAMESPACES, SERVICES, STEP,
    client, metric, recorded,
};
use styrmin_webhook::api::{AppState, router};
use styrmin_webhook::kube_source::{
    ADMISSION_API_CALLS, API_CALLS, ApiCall, KubeSource, WatchScope,
};
use styrmin_webhook::view::{Phase, View, ViewSource as _, ViewStore};
use support::data::webhook_data;
use support::state::unready_state;
use tower::ServiceExt as _;

mod support;

/// What an Ingress of deployment `id` gets from the view: a class, "" or "dedicated".
fn class_of(view: &View, id: &str) -> String {
    match view.settings_for_deployment(id).resolved.target {
        IngressTarget::Dedicated => "dedicated".to_owned(),
        other => other.enforced_class().unwrap_or("").to_owned(),
    }
}

async fn get(state: &AppState, uri: &str) -> (StatusCode, String) {
    styrmin_test_support::recorded_cluster::get(router(state.clone()), uri).await
}

/// Polls `condition` on the view store until it holds; fails with `what` after `STEP`.
async fn wait_until(store: &ViewStore, what: &str, condition: impl Fn(&ViewStore) -> bool) {
    let deadline = Instant::now() + STEP;
    while !condition(store) {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for: {what}; view: {:#?}",
            store.load()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// An Ingress review in `styrmin-<id>` with the chart's class `chart`.
fn ingress_review(id: &str) -> Value {
    let namespace = format!("styrmin-{id}");
    json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": format!("uid-{id}"),
            "kind": {"group": "networking.k8s.io", "version": "v1", "kind": "Ingress"},
            "resource": {"group": "networking.k8s.io", "version": "v1", "resource": "ingresses"},
            "namespace": namespace, "name": "web", "operation": "CREATE",
            "userInfo": {"username": "kubectl"},
            "object": {
                "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
                "metadata": {"name": "web", "namespace": namespace},
                "spec": {"rules": [{"host": "example.com"}]}
            }
        }
    })
}

async fn mutate(state: &AppState, review: &Value) -> Value {
    let response = router(state.clone())
        .oneshot(
            Request::post("/mutate")
                .header("content-type", "application/json")
                .body(Body::from(serde_json::to_vec(review).unwrap()))
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    serde_json::from_slice(&body).unwrap()
}

/// Every request was a GET that `calls` (named `table`) holds, and every entry of it was made:
/// the ClusterRole checked against the table is exactly what the source needs.
fn every_call_in_and_every_entry_used(calls: &[ApiCall], table: &str, requests: &[ApiRequest]) {
    let mut used = vec![false; calls.len()];
    for request in requests {
        assert_eq!(request.method, "GET", "{request:?}");
        let entry = entry_of(calls, request)
            .unwrap_or_else(|| panic!("{} {} is not in {table}", request.method, request.path));
        used[entry] = true;
    }
    assert!(
        used.iter().all(|u| *u),
        "unused entries of {table}: {used:?}"
    );
}

/// Which entry of `calls` a request of the source is, or `None`.
fn entry_of(calls: &[ApiCall], request: &ApiRequest) -> Option<usize> {
    let verb = if request.path == "/version" {
        "get"
    } else if request.is_watch() {
        "watch"
    } else {
        "list"
    };
    calls.iter().position(|call| match *call {
        ApiCall::Resource {
            group,
            version,
            resource,
            verbs,
            ..
        } => {
            let path = if group.is_empty() {
                format!("/api/{version}/{resource}")
            } else {
                format!("/apis/{group}/{version}/{resource}")
            };
            request.path == path && verbs.contains(&verb)
        }
        ApiCall::NonResource { path, verbs } => request.path == path && verbs.contains(&verb),
    })
}

/// Admission's source watches the levels only: it is ready and decides without ever asking
/// for an Ingress, a Service, a Namespace or an IngressClass (which the fake API server here
/// does not even answer), so its memory does not grow with them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admissions_source_watches_only_the_levels() {
    let api = FakeApiServer::scripted();
    api.answer("/version", 200, recorded("version.json"));
    api.answer(CLUSTERS, 200, recorded("styrminclusters.list.json"));
    api.answer(ENVIRONMENTS, 200, recorded("styrminenvironments.list.json"));
    api.answer(
        DEPLOYMENTS,
        200,
        recorded("styrmindeployments.list-page1.json"),
    );
    api.answer(
        DEPLOYMENTS,
        200,
        recorded("styrmindeployments.list-page2.json"),
    );
    let state = unready_state();
    let source = KubeSource::new(client(&api))
        .with_confirm_interval(Duration::from_millis(100))
        .with_scope(WatchScope::Admission);
    let task = tokio::spawn(source.run(state.view_sink()));
    let store = state.view().clone();
    wait_until(&store, "ready on the levels alone", ViewStore::is_ready).await;
    assert_eq!(get(&state, "/readyz").await.0, StatusCode::OK);
    let answer = mutate(&state, &ingress_review("web1")).await;
    assert_eq!(answer["response"]["allowed"], true);
    assert!(answer["response"]["patch"].is_string(), "{answer}");
    // Every watch is up (and would have shown a request for the audit's resources by now).
    for path in [CLUSTERS, ENVIRONMENTS, DEPLOYMENTS] {
        api.wait_for_request("a watch of the levels", 1, STEP, |r| {
            r.path == path && r.is_watch()
        });
    }
    task.abort();

    let requests = api.requests();
    for audited in [INGRESSES, SERVICES, NAMESPACES, INGRESS_CLASSES] {
        assert!(
            !requests.iter().any(|r| r.path == audited),
            "admission asked for {audited}: {requests:#?}"
        );
    }
    every_call_in_and_every_entry_used(ADMISSION_API_CALLS, "ADMISSION_API_CALLS", &requests);
    // The everything-scope table is a superset: admission needs nothing the controllers lack.
    assert!(ADMISSION_API_CALLS.iter().all(|c| API_CALLS.contains(c)));
}

/// A list of `path`, not a watch.
fn is_list(path: &'static str) -> impl Fn(&ApiRequest) -> bool {
    move |r: &ApiRequest| r.path == path && !r.is_watch()
}

/// Step 1: two of three lists done, the third pending: not ready.
async fn assert_not_ready_before_every_list(api: &FakeApiServer, state: &AppState) {
    api.wait_for_request("the clusters' list", 1, STEP, is_list(CLUSTERS));
    api.wait_for_request("the environments' list", 1, STEP, is_list(ENVIRONMENTS));
    api.wait_for_request("the deployments' list", 1, STEP, is_list(DEPLOYMENTS));
    api.wait_for_request("the clusters' watch", 1, STEP, |r| {
        r.path == CLUSTERS && r.is_watch()
    });
    api.wait_for_request("the environments' watch", 1, STEP, |r| {
        r.path == ENVIRONMENTS && r.is_watch()
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!state.view().is_ready(), "ready before every initial list");
    assert_eq!(
        get(state, "/readyz").await.0,
        StatusCode::SERVICE_UNAVAILABLE
    );
}

/// The view of the lists: the version, the deployments and their classes, the controllers.
fn assert_view_of_the_lists(view: &View) {
    assert_eq!(
        view.kubernetes_version().map(|v| v.to_string()).as_deref(),
        Some("1.30")
    );
    assert_eq!(
        view.deployment_count(),
        3,
        "web1, web2, ctl9 (odd is in team-a)"
    );
    assert_eq!(class_of(view, "web1"), "haproxy");
    assert_eq!(
        class_of(view, "web2"),
        "nginx",
        "W5: its lastDeployed record"
    );
    assert_eq!(
        class_of(view, "nobody"),
        "nginx",
        "W1: unknown deployment, cluster level"
    );
    assert_eq!(view.controllers_of("prod").count(), 1);
}

/// deployment events and a bookmark, then the connection drops.
async fn deployment_events_then_a_drop(api: &FakeApiServer, state: &AppState, store: &ViewStore) {
    api.watch_lines(DEPLOYMENTS, &recorded("styrmindeployments.watch-1.jsonl"));
    // Both events applied (they may come in two batches): web3 added, web1 modified.
    wait_until(store, "web3 added and web1 modified", |s| {
        let view = s.load();
        view.deployment("web3").is_some()
            && class_of(&view, "web1") == "dedicated"
            && view.deployment("web1").is_some_and(|d| {
                d.level.ingress_class.value().map(String::as_str) == Some("contour")
            })
    })
    .await;
    let web3 = store.load().deployment("web3").cloned().unwrap();
    assert_eq!(web3.phase, Phase::Pending, "no status yet");
    let before_drop = store.load();
    while !api.drained(DEPLOYMENTS) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    api.watch(DEPLOYMENTS, [WatchItem::Drop]);
    // The watcher resumes from the bookmark's version, after a backoff.
    let rewatch = api.wait_for_request("the watch after the drop", 2, STEP, |r| {
        r.path == DEPLOYMENTS && r.is_watch()
    });
    assert_eq!(rewatch.param("resourceVersion"), Some("140"), "{rewatch:?}");
    assert!(state.view().is_ready());
    assert_eq!(
        *store.load(),
        *before_drop,
        "the view survives the dropped connection"
    );
}

/// W2: a deploy in prod is denied while its controller is being deleted.
async fn assert_deploy_denied(state: &AppState) {
    let mut deploy = serde_json::from_str::<Value>(
        &std::fs::read_to_string(webhook_data(
            "admission/crafted__styrmindeployment-create.json",
        ))
        .unwrap(),
    )
    .unwrap();
    deploy["request"]["uid"] = json!("deploy-while-deleting");
    let answer = mutate(state, &deploy).await;
    assert_eq!(answer["response"]["allowed"], false, "{answer}");
}

/// The relist's view: web3 gone, web2 deploying, web1 dedicated, prod without controllers.
fn assert_relisted_view(view: &View) {
    assert!(
        view.deployment("web3").is_none(),
        "deleted while the watch was away"
    );
    assert_eq!(view.deployment("web2").unwrap().phase, Phase::Deploying);
    assert_eq!(class_of(view, "web1"), "dedicated");
    assert_eq!(view.controllers_of("prod").count(), 0);
}

/// 410 Gone (the `gone` line), a relist, and that relist failing: the view stays, and ready,
/// with both failures counted and the source not valid.
async fn gone_then_a_failed_relist(
    api: &FakeApiServer,
    state: &AppState,
    store: &ViewStore,
    gone: &str,
) {
    let before_gone = store.load();
    api.watch_lines(DEPLOYMENTS, gone);
    api.watch(DEPLOYMENTS, [WatchItem::End]);
    let relist = api.wait_for_request("the relist after 410", 3, STEP, is_list(DEPLOYMENTS));
    assert!(relist.param("continue").is_none(), "{relist:?}");
    // The first relist fails (the API server is busy); the watcher retries after a backoff.
    api.answer(DEPLOYMENTS, 500, recorded("status-500.json"));
    api.wait_for_request("the retried relist", 4, STEP, is_list(DEPLOYMENTS));
    assert!(state.view().is_ready(), "still ready while relisting");
    assert_eq!(
        *store.load(),
        *before_gone,
        "the view survives the 410 until the relist is complete"
    );
    let (_, metrics) = get(state, "/metrics").await;
    let failures = metric(
        &metrics,
        "styrmin_webhook_view_update_failures_total{source=\"kubernetes\"}",
    );
    assert!(
        failures >= 2.0,
        "the 410 and the 500 are counted: {metrics}"
    );
    assert_eq!(
        metric(&metrics, "styrmin_webhook_view_source_valid"),
        0.0,
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_watches_bookmark_drop_and_410_keep_a_correct_view() {
    let api = FakeApiServer::scripted();
    api.answer("/version", 200, recorded("version.json"));
    api.answer(CLUSTERS, 200, recorded("styrminclusters.list.json"));
    api.answer(ENVIRONMENTS, 200, recorded("styrminenvironments.list.json"));
    // The audit's watches (e2e/tests/audit.rs has their content).
    api.answer(INGRESSES, 200, recorded("ingresses.list.json"));
    api.answer(SERVICES, 200, recorded("services.list.json"));
    api.answer(NAMESPACES, 200, recorded("namespaces.list.json"));
    api.answer(INGRESS_CLASSES, 200, recorded("ingressclasses.list.json"));
    // The deployments' list is held back for now.

    let state = unready_state();
    let source = KubeSource::new(client(&api)).with_confirm_interval(Duration::from_millis(100));
    let sink = state.view_sink();
    let task = tokio::spawn(source.run(sink));

    assert_not_ready_before_every_list(&api, &state).await;

    // Step 2: the deployments' list, in two pages: ready, and the view is the lists'.
    api.answer(
        DEPLOYMENTS,
        200,
        recorded("styrmindeployments.list-page1.json"),
    );
    api.answer(
        DEPLOYMENTS,
        200,
        recorded("styrmindeployments.list-page2.json"),
    );
    let store = state.view().clone();
    wait_until(
        &store,
        "ready after every initial list",
        ViewStore::is_ready,
    )
    .await;
    assert_eq!(get(&state, "/readyz").await.0, StatusCode::OK);
    let page2 = api.wait_for_request("the second page", 2, STEP, is_list(DEPLOYMENTS));
    assert!(page2.param("continue").is_some(), "{page2:?}");
    let view = store.load();
    assert_view_of_the_lists(&view);
    // The decision code reads this view: an Ingress of web1 is patched to haproxy.
    let answer = mutate(&state, &ingress_review("web1")).await;
    assert_eq!(answer["response"]["allowed"], true);
    assert!(answer["response"]["patch"].is_string(), "{answer}");

    // Step 3: an environment turns its dedicated ingress on.
    api.watch_lines(ENVIRONMENTS, &recorded("styrminenvironments.watch-1.jsonl"));
    wait_until(&store, "prod's dedicated ingress", |s| {
        class_of(&s.load(), "web1") == "dedicated"
    })
    .await;

    // Step 4: deployment events and a bookmark, then the connection drops.
    deployment_events_then_a_drop(&api, &state, &store).await;
    // kube-rs reads a cut chunked stream as its end (as after a watch timeout), not as an
    // error: nothing to report, the watch just resumes.

    // Step 5: the controller is being deleted; then 410 Gone, and a relist.
    let lines = recorded("styrmindeployments.watch-2.jsonl");
    let (deleting, gone) = lines.split_once('\n').unwrap();
    api.watch_lines(DEPLOYMENTS, deleting);
    wait_until(&store, "ctl9 DELETING", |s| {
        s.load()
            .deployment("ctl9")
            .is_some_and(|d| d.phase == Phase::Deleting)
    })
    .await;
    assert_deploy_denied(&state).await;

    gone_then_a_failed_relist(&api, &state, &store, gone).await;
    api.answer(DEPLOYMENTS, 200, recorded("styrmindeployments.relist.json"));
    wait_until(&store, "the relist's view", |s| {
        s.load().deployment("ctl9").is_none()
    })
    .await;
    assert_relisted_view(&store.load());
    let rewatch = api.wait_for_request("the watch after the relist", 3, STEP, |r| {
        r.path == DEPLOYMENTS && r.is_watch()
    });
    assert_eq!(rewatch.param("resourceVersion"), Some("170"), "{rewatch:?}");

    // The view's age: confirmed while healthy; the source is valid again after the relist.
    let (_, metrics) = get(&state, "/metrics").await;
    assert!(
        metric(&metrics, "styrmin_webhook_view_age_seconds") < 5.0,
        "{metrics}"
    );
    for name in [
        "styrmin_webhook_view_source_valid",
        "styrmin_webhook_view_ready",
    ] {
        assert_eq!(metric(&metrics, name), 1.0, "{name}: {metrics}");
    }

    // Every call made is in the table the ClusterRole is checked against, and every entry
    // of the table was used.
    let requests = api.requests();
    every_call_in_and_every_entry_used(API_CALLS, "API_CALLS", &requests);
    assert_eq!(
        requests.iter().filter(|r| r.path == "/version").count(),
        1,
        "/version is read once"
    );
    task.abort();
}

/// The same against a real API server (kind), for what a recording cannot show: that the
/// CRDs are accepted and keep `null`, that the ClusterRole is enough, that the webhook is
/// called with the configuration's selectors. Recipe (needs a cluster and Docker, so
/// `make test` skips it):
///
/// ```sh
/// kind create cluster --name styrmin --image kindest/node:v1.30.4
/// make build && docker build -t styrmin-webhook:0.1.0 . && kind load docker-image styrmin-webhook:0.1.0 --name styrmin
/// target/release/styrmin-certs && kubectl apply -k manifests/overlays/self-signed
/// kubectl -n styrmin-system rollout status deploy/styrmin-webhook --timeout=120s
/// cargo test -p styrmin-webhook --test kube_source -- --ignored   # with the kind context current
/// ```
#[tokio::test]
#[ignore = "needs cluster"]
async fn against_a_kind_cluster() {
    let client = kube::Client::try_default().await.unwrap();
    let state = unready_state();
    let store = state.view().clone();
    let task = tokio::spawn(KubeSource::new(client).run(state.view_sink()));
    wait_until(&store, "ready", ViewStore::is_ready).await;
    assert!(store.load().kubernetes_version().is_some());
    task.abort();
}
