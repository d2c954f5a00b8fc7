//! The PolicyReport writer against a real kube-apiserver when things go wrong (`make
//! test-cluster`, not `make test`): the binaries come from `$KUBEBUILDER_ASSETS`, as in
//! `policy_reports_cluster.rs`; without it each test says so and returns.
//!
//! - Garbage collection with the writer stopped: a report goes with its Ingress because of
//!   its ownerReference alone, not because a writer deletes it.
//! - Warn mode end to end: an Ingress whose environment is in `enforcementMode: warn` gets
//!   `warn` results, one in an enforcing environment `fail`.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::networking::v1::Ingress;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams};
use serde_json::{Value, json};
use styrmin_e2e::control_plane::{
    self, ControlPlane, Processes, apply, eventually, install_crds, open_reports, report_of,
};
use styrmin_e2e::webhook::Certs;
use styrmin_e2e::{Scratch, free_port, release_binary};

/// The replicas' Lease: short, so that a hand-over takes seconds.
const LEASE: Duration = Duration::from_secs(3);
const RENEW_DEADLINE: Duration = Duration::from_secs(2);
const RETRY_PERIOD: Duration = Duration::from_millis(500);

/// A `styrmin-webhook serve --source kubernetes --policy-reports openreports` process with
/// `identity` in the Lease, its metrics on `metrics`, the cluster through `kubeconfig`.
fn replica(dir: &Path, kubeconfig: &Path, identity: &str, metrics: u16) -> Child {
    let certs = Certs::make(dir);
    Command::new(release_binary("styrmin-webhook"))
        .arg("serve")
        .args(["--source", "kubernetes", "--audit-interval-secs", "1"])
        .args(["--audit-not-served-grace-secs", "1"])
        .args(["--policy-reports", "openreports"])
        .args(["--policy-reports-lease-namespace", "styrmin-system"])
        .args(["--policy-reports-lease-identity", identity])
        .arg(format!(
            "--policy-reports-lease-duration-ms={}",
            LEASE.as_millis()
        ))
        .arg(format!(
            "--policy-reports-renew-deadline-ms={}",
            RENEW_DEADLINE.as_millis()
        ))
        .arg(format!(
            "--policy-reports-retry-period-ms={}",
            RETRY_PERIOD.as_millis()
        ))
        .arg(format!("--listen=127.0.0.1:{}", free_port()))
        .arg(format!("--metrics-listen=127.0.0.1:{metrics}"))
        .arg("--tls-cert")
        .arg(certs.dir.join("tls.crt"))
        .arg("--tls-key")
        .arg(certs.dir.join("tls.key"))
        .env("KUBECONFIG", kubeconfig)
        .arg("--log-filter=debug,kube_client=error,hyper_util=info,tower=info,rustls=info,h2=info")
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join(format!("replica-{identity}.log"))).unwrap())
        .spawn()
        .unwrap()
}

fn log_of(dir: &Path, identity: &str) -> String {
    std::fs::read_to_string(dir.join(format!("replica-{identity}.log"))).unwrap_or_default()
}

/// The Styrmin objects of the tests: the cluster's class `traefik` (and IngressClasses for
/// the classes the Ingresses use, so that no finding is `unknown_class`), an enforcing
/// environment `prod` and a warning one `trial`, and for each `(id, environment)` a
/// namespace `styrmin-<id>` with its StyrminDeployment.
async fn styrmin_objects(client: &kube::Client, deployments: &[(&str, &str)]) {
    for object in [
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "styrmin-system"}}),
        json!({"apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminCluster", "metadata": {"name": "default"},
               "spec": {"ingressClass": "traefik"}}),
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass", "metadata": {"name": "traefik"},
               "spec": {"controller": "traefik.io/ingress-controller"}}),
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass", "metadata": {"name": "nginx"},
               "spec": {"controller": "k8s.io/ingress-nginx"}}),
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass", "metadata": {"name": "haproxy"},
               "spec": {"controller": "haproxy.org/ingress-controller"}}),
        json!({"apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminEnvironment", "metadata": {"name": "prod"},
               "spec": {}}),
        json!({"apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminEnvironment", "metadata": {"name": "trial"},
               "spec": {"enforcementMode": "warn"}}),
    ] {
        apply(client, &object).await;
    }
    for (id, environment) in deployments {
        let name = format!("styrmin-{id}");
        apply(
            client,
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
        )
        .await;
        apply(
            client,
            &json!({"apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminDeployment",
                    "metadata": {"name": name, "namespace": name},
                    "spec": {"environmentId": environment, "role": "application"}}),
        )
        .await;
    }
}

/// An Ingress `name` in `namespace` with class `class` (the levels give `traefik`), no
/// address.
fn ingress(namespace: &str, name: &str, class: &str) -> Value {
    json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
           "metadata": {"name": name, "namespace": namespace},
           "spec": {"ingressClassName": class,
                    "defaultBackend": {"service": {"name": "web", "port": {"number": 80}}}}})
}

fn results_of(report: &DynamicObject) -> Vec<(String, String)> {
    report.data["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["rule"].as_str().unwrap().to_owned(),
                r["result"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real API server: make test-cluster with KUBEBUILDER_ASSETS"]
async fn warn_mode_and_garbage_collection_with_the_writer_stopped() {
    let Some(assets) = control_plane::assets() else {
        eprintln!("skipped: KUBEBUILDER_ASSETS is not set; `make test-cluster` runs this");
        return;
    };
    let dir = Scratch::new("policy-reports-writer-gc");
    let plane = ControlPlane::start(&assets, dir.path(), &[]);
    let client = plane.ready().await;
    install_crds(&client).await;
    styrmin_objects(&client, &[("warn1", "trial"), ("enf1", "prod")]).await;
    apply(&client, &ingress("styrmin-warn1", "web", "nginx")).await;
    apply(&client, &ingress("styrmin-enf1", "web", "nginx")).await;
    apply(&client, &ingress("styrmin-enf1", "gone", "nginx")).await;

    let metrics = free_port();
    let writer = Processes(vec![replica(
        dir.path(),
        &plane.kubeconfig,
        "writer",
        metrics,
    )]);
    let warned = eventually("the warn environment's report", async || {
        let report = report_of(&client, "styrmin-warn1", "web").await?;
        results_of(&report)
            .iter()
            .any(|(rule, _)| rule == "not_served")
            .then_some(report)
    })
    .await;
    let enforced = eventually("the enforcing environment's report", async || {
        let report = report_of(&client, "styrmin-enf1", "web").await?;
        results_of(&report)
            .iter()
            .any(|(rule, _)| rule == "not_served")
            .then_some(report)
    })
    .await;
    let gone = eventually("the report of the Ingress to delete", async || {
        report_of(&client, "styrmin-enf1", "gone").await
    })
    .await;

    // Warn mode: every result of the warning environment's Ingress is `warn`, and the
    // summary counts them; the same Ingress in an enforcing environment fails.
    let warn_results = results_of(&warned);
    assert!(
        warn_results.iter().any(|(rule, _)| rule == "wrong_class"),
        "{warn_results:?}"
    );
    assert!(
        warn_results.iter().all(|(_, result)| result == "warn"),
        "an Ingress of an environment in enforcementMode warn: {warn_results:?}\n--- writer ---\n{}",
        log_of(dir.path(), "writer")
    );
    assert_eq!(
        warned.data["summary"]["warn"].as_u64(),
        Some(warn_results.len() as u64),
        "{}",
        warned.data["summary"]
    );
    assert_eq!(warned.data["summary"]["fail"].as_u64().unwrap_or(0), 0);
    let enforced_results = results_of(&enforced);
    assert!(
        enforced_results.iter().all(|(_, result)| result == "fail"),
        "an Ingress of an enforcing environment: {enforced_results:?}"
    );

    // The writer stopped for good (SIGKILL), then the Ingress deleted: only the garbage
    // collector, following the report's ownerReference, can delete the report now.
    assert!(
        gone.metadata
            .owner_references
            .as_ref()
            .is_some_and(|owners| owners
                .iter()
                .any(|o| o.kind == "Ingress" && o.name == "gone")),
        "the report has no ownerReference to its Ingress: {:?}",
        gone.metadata
    );
    drop(writer);
    if !plane.garbage_collector {
        eprintln!(
            "garbage collection not checked: no kube-controller-manager in KUBEBUILDER_ASSETS"
        );
        return;
    }
    let ingresses: Api<Ingress> = Api::namespaced(client.clone(), "styrmin-enf1");
    ingresses
        .delete("gone", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the garbage collector deleting the report", async || {
        let list = open_reports(&client)
            .list(&ListParams::default())
            .await
            .ok()?;
        (!list
            .items
            .iter()
            .any(|r| r.metadata.uid == gone.metadata.uid))
        .then_some(())
    })
    .await;
    // Nothing else went: no writer runs that could have deleted reports.
    assert!(report_of(&client, "styrmin-enf1", "web").await.is_some());
    assert!(report_of(&client, "styrmin-warn1", "web").await.is_some());
}
