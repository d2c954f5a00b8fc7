//! One whole migration, as a platform team runs it: a cluster whose Ingresses are on class
//! `nginx` moves to `haproxy`. First cluster-wide in `warn` (admission warns, patches
//! nothing; the audit lists what enforcing will change, marked `mode=warn`; `plan` shows
//! nothing moving), then enforced environment by environment, each step planned first, with
//! the deployments that hold a last-deployed record moving only at their next deploy.
//!
//! The cluster is the recording of `webhook/tests/data/apiserver/migration/` served by the
//! fake API server to the release binary's `plan` and `audit`; admission is the webhook's
//! router in-process, answering real AdmissionReview JSON from the view of the same objects.
//! Each step's objects (`step*.yaml` there) are applied to the served lists as `kubectl
//! apply` would apply them.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, header};
use http_body_util::BodyExt as _;
use serde_json::{Value, json};
use styrmin_e2e::{Scratch, release_binary, run, utf8};
use styrmin_fake_apiserver::FakeApiServer;
use styrmin_test_support::recorded_cluster;
use styrmin_test_support::recorded_cluster::{
    CLUSTERS, DEPLOYMENTS, ENVIRONMENTS, INGRESSES, LISTS,
};
use styrmin_webhook::api::{AppState, router};
use styrmin_webhook::kube_source::build_view;
use tower::ServiceExt as _;

fn recorded(name: &str) -> String {
    recorded_cluster::recorded(&format!("migration/{name}"))
}

/// cert-manager's Issuers of the migration cluster: one names `nginx` for its HTTP01
/// solver, as does one of the ClusterIssuer's two.
const CERT_MANAGER: [(&str, &str); 2] = [
    ("/apis/cert-manager.io/v1/issuers", "issuers.list.json"),
    (
        "/apis/cert-manager.io/v1/clusterissuers",
        "clusterissuers.list.json",
    ),
];

fn step_file(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../webhook/tests/data/apiserver/migration")
        .join(name)
}

/// The cluster as the fake API server serves it.
struct Cluster {
    api: FakeApiServer,
    kubeconfig: PathBuf,
    lists: Vec<(&'static str, Value)>,
    _scratch: Scratch,
}

impl Cluster {
    fn recorded() -> Self {
        let scratch = Scratch::new("migration");
        let api = FakeApiServer::scripted();
        let kubeconfig = scratch.join("kubeconfig");
        api.write_kubeconfig(&kubeconfig, None);
        let mut lists = Vec::new();
        for (path, file) in [("/version", "version.json")]
            .into_iter()
            .chain(LISTS)
            .chain(CERT_MANAGER)
        {
            lists.push((path, serde_json::from_str(&recorded(file)).unwrap()));
        }
        // The API server serves cert-manager's API: plan reads its Issuers.
        lists.push((
            "/apis/cert-manager.io/v1",
            json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "cert-manager.io/v1", "resources": [
                {"name": "issuers", "singularName": "issuer", "namespaced": true, "kind": "Issuer", "verbs": ["get", "list", "watch"]},
                {"name": "clusterissuers", "singularName": "clusterissuer", "namespaced": false, "kind": "ClusterIssuer", "verbs": ["get", "list", "watch"]}
            ]}),
        ));
        let cluster = Cluster {
            api,
            kubeconfig,
            lists,
            _scratch: scratch,
        };
        cluster.serve();
        cluster
    }

    fn serve(&self) {
        for (path, body) in &self.lists {
            self.api.serve_object(path, body);
        }
    }

    fn list(&mut self, path: &str) -> &mut Vec<Value> {
        let (_, list) = self.lists.iter_mut().find(|(p, _)| *p == path).unwrap();
        list["items"].as_array_mut().unwrap()
    }

    /// `kubectl apply -f FILE`: each object's spec replaces the stored one's.
    fn apply(&mut self, file: &str) {
        let text = std::fs::read_to_string(step_file(file)).unwrap();
        let objects: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
        for object in objects {
            let path = match object["kind"].as_str().unwrap() {
                "StyrminCluster" => CLUSTERS,
                "StyrminEnvironment" => ENVIRONMENTS,
                kind => panic!("{kind} in {file}"),
            };
            let name = object["metadata"]["name"].clone();
            let stored = self
                .list(path)
                .iter_mut()
                .find(|o| o["metadata"]["name"] == name)
                .unwrap();
            stored["spec"] = object["spec"].clone();
        }
        self.serve();
    }

    /// Styrmin redeploys `id`: its record becomes what its levels give now.
    fn redeploy(&mut self, id: &str, record: Value) {
        let name = format!("styrmin-{id}");
        let stored = self
            .list(DEPLOYMENTS)
            .iter_mut()
            .find(|o| o["metadata"]["name"] == name.as_str())
            .unwrap();
        stored["status"]["lastDeployed"] = record;
        self.serve();
    }

    /// The Ingress of `namespace` as the API server stores it after admission's patch.
    fn store_class(&mut self, namespace: &str, class: &str) {
        let stored = self
            .list(INGRESSES)
            .iter_mut()
            .find(|o| o["metadata"]["namespace"] == namespace)
            .unwrap();
        stored["spec"]["ingressClassName"] = json!(class);
        stored["metadata"]["annotations"]["kubernetes.io/ingress.class"] = json!(class);
        self.serve();
    }

    /// `styrmin-webhook ARGS --kubeconfig …`: exit code and stdout.
    fn webhook_cli(&self, args: &[&str]) -> (Option<i32>, String) {
        let output = run(
            Command::new(release_binary("styrmin-webhook"))
                .args(args)
                .arg("--kubeconfig")
                .arg(&self.kubeconfig)
                .env_remove("KUBECONFIG"),
            None,
        );
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        let stdout = utf8(output.stdout, "stdout");
        assert!(!stderr.contains("error"), "{args:?}: {stderr}\n{stdout}");
        (output.status.code(), stdout)
    }

    fn plan(&self, file: &str) -> (Option<i32>, Value, String) {
        let path = step_file(file);
        let path = path.to_str().unwrap();
        let (code, json) = self.webhook_cli(&["plan", "-o", "json", "-f", path]);
        let (table_code, table) = self.webhook_cli(&["plan", "-f", path]);
        assert_eq!(code, table_code);
        (code, serde_json::from_str(&json).unwrap(), table)
    }

    /// The objects served at `path`, typed.
    fn items<K: serde::de::DeserializeOwned>(&self, path: &str) -> Vec<Arc<K>> {
        let (_, list) = self.lists.iter().find(|(p, _)| *p == path).unwrap();
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| Arc::new(serde_json::from_value(o.clone()).unwrap()))
            .collect()
    }

    /// The webhook's admission, from the view of the objects served now.
    fn admission(&self) -> AppState {
        let view = build_view(
            &self.items(CLUSTERS),
            &self.items(ENVIRONMENTS),
            &self.items(DEPLOYMENTS),
            "1.33".parse().ok(),
        )
        .unwrap()
        .view;
        let state = AppState::default();
        state.view_sink().publish(view);
        state
    }
}

/// A real AdmissionReview (the benchmark's 3 KB Ingress) creating Ingress `name` in namespace
/// `styrmin-<id>` with class `nginx` in both fields, as the charts render it.
fn ingress_review(id: &str, name: &str) -> Value {
    let text = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../webhook/tests/data/admission/crafted__ingress-v1-create__bench-3kb.json"),
    )
    .unwrap();
    let mut review: Value = serde_json::from_str(&text).unwrap();
    let namespace = format!("styrmin-{id}");
    review["request"]["namespace"] = json!(namespace);
    review["request"]["name"] = json!(name);
    let object = &mut review["request"]["object"];
    object["metadata"]["namespace"] = json!(namespace);
    object["metadata"]["name"] = json!(name);
    object["metadata"]["annotations"] = json!({"kubernetes.io/ingress.class": "nginx"});
    object["spec"]["ingressClassName"] = json!("nginx");
    review
}

/// Admission's answer to `id`'s Ingress: `(patched, warnings)`.
async fn admit(state: &AppState, id: &str, name: &str) -> (bool, Vec<String>) {
    let review = ingress_review(id, name);
    let request = Request::post("/mutate?timeout=10s")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(serde_json::to_vec(&review).unwrap()))
        .unwrap();
    let response = router(state.clone()).oneshot(request).await.unwrap();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let answer: Value = serde_json::from_slice(&bytes).unwrap();
    let response = &answer["response"];
    assert_eq!(response["allowed"], true, "{answer}");
    let warnings = response["warnings"]
        .as_array()
        .map(|w| w.iter().map(|w| w.as_str().unwrap().to_owned()).collect())
        .unwrap_or_default();
    (response.get("patch").is_some(), warnings)
}

/// `(environment, namespace, moves)` of every Ingress of a plan.
fn moves(plan: &Value) -> Vec<(String, String, String)> {
    let mut rows = Vec::new();
    for (environment, ingresses) in plan["environments"].as_object().unwrap() {
        for ingress in ingresses.as_array().unwrap() {
            rows.push((
                environment.clone(),
                ingress["namespace"].as_str().unwrap().to_owned(),
                ingress["moves"].as_str().unwrap().to_owned(),
            ));
        }
    }
    rows
}

fn row(environment: &str, namespace: &str, moves: &str) -> (String, String, String) {
    (
        environment.to_owned(),
        namespace.to_owned(),
        moves.to_owned(),
    )
}

/// `(reason, name, mode)` of every audit finding.
fn audit_findings(report: &Value) -> Vec<(String, String, String)> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["reason"].as_str().unwrap().to_owned(),
                f["namespace"].as_str().unwrap().to_owned(),
                f["mode"].as_str().unwrap_or("enforce").to_owned(),
            )
        })
        .collect()
}

/// Step 2's plan (`plan`, as JSON, and `table`): the pre-flight findings, the same hash
/// again, and `--fail-on` exiting 3 on an annotation HAProxy does not read, and only then.
fn assert_step2_plan(cluster: &Cluster, plan: &Value, table: &str) {
    let changes: Vec<(&str, &str)> = plan["preflight"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["reason"].as_str().unwrap(),
                f["subject"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        changes,
        [
            ("changes_controller", "Ingress styrmin-web1/web"),
            ("changes_controller", "Ingress styrmin-web2/web"),
            ("annotations_not_carried", "Ingress styrmin-web2/web"),
            ("acme_solver_class", "Issuer styrmin-web2/letsencrypt"),
            ("acme_solver_class", "ClusterIssuer letsencrypt-prod"),
        ]
    );
    assert!(
        table.contains("annotations_not_carried  Ingress styrmin-web2/web: ingress-nginx -> HAProxy Kubernetes Ingress (version not given: judged at 1.5.0, the newest the catalog has): 1 unsupported: nginx.ingress.kubernetes.io/proxy-body-size; 1 renamed: nginx.ingress.kubernetes.io/ssl-redirect -> haproxy.org/ssl-redirect"),
        "{table}"
    );
    // The same plan gives the same hash; --fail-on exits 3 on proxy-body-size, which HAProxy
    // does not read, and only then.
    let step2 = step_file("step2-enforce-prod.yaml");
    let step2 = step2.to_str().unwrap();
    let (_, again) = cluster.webhook_cli(&["plan", "-o", "json", "-f", step2]);
    let again: Value = serde_json::from_str(&again).unwrap();
    assert_eq!(again["hash"], plan["hash"]);
    assert_eq!(plan["hash"].as_str().map(str::len), Some(64));
    assert_eq!(
        plan["annotations"][0]["unsupported"][0]["annotation"],
        "nginx.ingress.kubernetes.io/proxy-body-size"
    );
    let fail_on = |verdict: &str| {
        cluster
            .webhook_cli(&["plan", "-o", "json", "--fail-on", verdict, "-f", step2])
            .0
    };
    assert_eq!(fail_on("unsupported"), Some(3));
    assert_eq!(fail_on("unknown"), Some(3));
    // Nothing moves in warn: nothing to fail on.
    let step1 = step_file("step1-warn-cluster-wide.yaml");
    let (code, _) = cluster.webhook_cli(&[
        "plan",
        "--fail-on",
        "unknown",
        "-f",
        step1.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0));
}

#[tokio::test(flavor = "multi_thread")]
async fn nginx_to_haproxy_warn_cluster_wide_then_enforce_environment_by_environment() {
    let mut cluster = Cluster::recorded();

    // Before: everything on nginx, in line.
    let (code, report) = cluster.webhook_cli(&["audit", "-o", "json"]);
    assert_eq!(code, Some(0), "{report}");

    // Step 1, planned: the class cluster-wide in warn. Nothing moves, nothing is found.
    let (code, plan, table) = cluster.plan("step1-warn-cluster-wide.yaml");
    assert_eq!(code, Some(0), "{table}");
    assert!(moves(&plan).iter().all(|(_, _, m)| m == "no"), "{plan}");
    assert_eq!(moves(&plan).len(), 4, "{plan}");
    assert!(table.contains("warn (would: haproxy)"), "{table}");
    cluster.apply("step1-warn-cluster-wide.yaml");

    // In warn, admission patches nothing and says what it would do and what decided it.
    let admission = cluster.admission();
    let (patched, warnings) = admit(&admission, "web2", "web").await;
    assert!(!patched);
    assert_eq!(
        warnings,
        [
            "would set spec.ingressClassName \"haproxy\" (now \"nginx\"), decided by the cluster",
            "would set annotation kubernetes.io/ingress.class \"haproxy\" (now \"nginx\"), decided by the cluster",
        ]
    );
    // web1 was last deployed with nginx: its record decides, there is nothing to say.
    assert_eq!(admit(&admission, "web1", "web").await, (false, Vec::new()));

    // The audit lists what enforcing will change, marked mode=warn: the two deployments
    // without a record.
    let (code, report) = cluster.webhook_cli(&["audit", "-o", "json"]);
    assert_eq!(code, Some(1));
    let report: Value = serde_json::from_str(&report).unwrap();
    assert_eq!(
        audit_findings(&report),
        [
            (
                "wrong_class".to_owned(),
                "styrmin-api1".to_owned(),
                "warn".to_owned()
            ),
            (
                "wrong_class".to_owned(),
                "styrmin-web2".to_owned(),
                "warn".to_owned()
            ),
        ]
    );
    let (_, table) = cluster.webhook_cli(&["audit"]);
    assert!(table.contains("mode=warn: "), "{table}");

    // Step 2, planned: enforce prod. web2 moves right after, web1 at its next deploy; both
    // change controller, web2's nginx annotations mean nothing to HAProxy, and two Issuers'
    // HTTP01 solvers still create their challenge Ingresses with nginx. Staging stays in
    // warn.
    let (code, plan, table) = cluster.plan("step2-enforce-prod.yaml");
    assert_eq!(code, Some(1), "{table}");
    assert_eq!(
        moves(&plan),
        [
            row("prod", "styrmin-web1", "next_deploy"),
            row("prod", "styrmin-web2", "right_after"),
            row("staging", "styrmin-api1", "no"),
            row("staging", "styrmin-shop1", "no"),
        ]
    );
    assert_step2_plan(&cluster, &plan, &table);
    cluster.apply("step2-enforce-prod.yaml");

    let admission = cluster.admission();
    assert!(
        admit(&admission, "web2", "web").await.0,
        "prod without a record: patched"
    );
    assert_eq!(
        admit(&admission, "web1", "web").await,
        (false, Vec::new()),
        "prod with a record: keeps nginx until its next deploy"
    );
    let (patched, warnings) = admit(&admission, "api1", "api").await;
    assert!(!patched);
    assert_eq!(warnings.len(), 2, "staging still warns");

    // Styrmin redeploys web1 with what its levels give now: it moves at that deploy.
    cluster.redeploy("web1", json!({"ingressClass": "haproxy"}));
    assert!(admit(&cluster.admission(), "web1", "web").await.0);
    // The API server stores what admission made of both prod Ingresses.
    cluster.store_class("styrmin-web1", "haproxy");
    cluster.store_class("styrmin-web2", "haproxy");

    // Step 3, planned: enforce everywhere. In staging api1 moves right after, shop1 at its
    // next deploy; prod's Ingresses are where the rules put them.
    let (code, plan, table) = cluster.plan("step3-enforce-everywhere.yaml");
    assert_eq!(code, Some(1), "{table}");
    assert_eq!(
        moves(&plan),
        [
            row("prod", "styrmin-web1", "no"),
            row("prod", "styrmin-web2", "no"),
            row("staging", "styrmin-api1", "right_after"),
            row("staging", "styrmin-shop1", "next_deploy"),
        ]
    );
    cluster.apply("step3-enforce-everywhere.yaml");
    let admission = cluster.admission();
    assert!(admit(&admission, "api1", "api").await.0);
    assert_eq!(
        admit(&admission, "shop1", "shop").await,
        (false, Vec::new())
    );
}

#[test]
fn plan_exits_2_when_it_cannot_be_made_and_reads_a_policy_file_proposal() {
    let cluster = Cluster::recorded();
    let scratch = Scratch::new("plan-errors");
    let plan = |args: &[&str]| {
        run(
            Command::new(release_binary("styrmin-webhook"))
                .arg("plan")
                .args(args)
                .arg("--kubeconfig")
                .arg(&cluster.kubeconfig),
            None,
        )
    };
    let not_a_proposal = scratch.write(
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
    );
    let output = plan(&["-f", not_a_proposal.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    assert!(output.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cm.yaml, document 1: v1 ConfigMap is not a proposal"),
        "{stderr}"
    );
    let output = plan(&["-f", "/nonexistent/proposal.yaml"]);
    assert_eq!(output.status.code(), Some(2));
    // Neither -f nor --policy-file: a usage error.
    assert_eq!(plan(&[]).status.code(), Some(2));

    // A policy file is a whole proposal: haproxy enforced everywhere moves every Ingress
    // without a record right after, and those with one at their next deploy.
    let policy = scratch.write(
        "policy.yaml",
        "cluster: {ingress_class: haproxy}\nenvironments: {prod: {}, staging: {}}\ndeployments:\n  \
         web1: {environment: prod, last_deployed: {ingress_class: nginx}}\n  web2: {environment: prod}\n  \
         api1: {environment: staging}\n  shop1: {environment: staging, last_deployed: {ingress_class: nginx}}\n",
    );
    let output = plan(&["-o", "json", "--policy-file", policy.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    let plan: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        moves(&plan),
        [
            row("prod", "styrmin-web1", "next_deploy"),
            row("prod", "styrmin-web2", "right_after"),
            row("staging", "styrmin-api1", "right_after"),
            row("staging", "styrmin-shop1", "next_deploy"),
        ]
    );
}

/// The rows of the Ingresses that move.
fn moving(plan: &Value) -> Vec<(String, String, String)> {
    let mut rows = moves(plan);
    rows.retain(|(_, _, moves)| moves != "no");
    rows
}

/// The three steps above as one StyrminMigration, for `migrate plan`.
fn three_step_migration(scratch: &Scratch, first_change: Option<Value>) -> PathBuf {
    let mut steps = Vec::new();
    for (name, file) in [
        ("warn", "step1-warn-cluster-wide.yaml"),
        ("prod", "step2-enforce-prod.yaml"),
        ("everywhere", "step3-enforce-everywhere.yaml"),
    ] {
        let text = std::fs::read_to_string(step_file(file)).unwrap();
        let changes: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
        steps.push(json!({"name": name, "changes": changes}));
    }
    if let Some(change) = first_change {
        steps[0]["changes"][0] = change;
    }
    let migration = json!({
        "apiVersion": "styrmin.io/v1alpha1",
        "kind": "StyrminMigration",
        "metadata": {"name": "leave-nginx"},
        "spec": {"steps": steps}
    });
    scratch.write("leave-nginx.json", &migration.to_string())
}

#[test]
fn migrate_plan_plans_each_step_on_the_ones_before_and_refuses_a_bad_file() {
    let cluster = Cluster::recorded();
    let scratch = Scratch::new("migrate-plan");
    let file = three_step_migration(&scratch, None);
    let file = file.to_str().unwrap();
    let (code, json) = cluster.webhook_cli(&["migrate", "plan", "-o", "json", "-f", file]);
    assert_eq!(code, Some(1), "Ingresses move");
    let plans: Value = serde_json::from_str(&json).unwrap();
    let steps = plans["steps"].as_array().unwrap();
    let names: Vec<&str> = steps.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["warn", "prod", "everywhere"]);
    let warned = moving(&steps[0]["plan"]);
    assert!(warned.is_empty(), "in warn nothing moves: {warned:?}");
    assert_eq!(
        moving(&steps[1]["plan"]),
        [
            row("prod", "styrmin-web1", "next_deploy"),
            row("prod", "styrmin-web2", "right_after"),
        ]
    );
    // Prod's moved in the step before: only staging's are left.
    assert_eq!(
        moving(&steps[2]["plan"]),
        [
            row("staging", "styrmin-api1", "right_after"),
            row("staging", "styrmin-shop1", "next_deploy"),
        ]
    );
    let (table_code, table) = cluster.webhook_cli(&["migrate", "plan", "-f", file]);
    assert_eq!(table_code, Some(1));
    assert!(table.starts_with("STEP 1 of 3: warn\n"), "{table}");

    // A change that is not a level object: exit 2, nothing on stdout, the error names it.
    let bad = three_step_migration(
        &scratch,
        Some(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}})),
    );
    let output = run(
        Command::new(release_binary("styrmin-webhook"))
            .args(["migrate", "plan", "-f"])
            .arg(&bad)
            .arg("--kubeconfig")
            .arg(&cluster.kubeconfig),
        None,
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(output.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(
            "leave-nginx.json, document 1, step 1 (warn), change 1: v1 ConfigMap is not a level object"
        ),
        "{stderr}"
    );
}
