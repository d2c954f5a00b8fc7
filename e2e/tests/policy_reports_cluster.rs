//! PolicyReports against a real kube-apiserver (`make test-cluster`, not `make test`): what the
//! fake API server cannot show. The binaries come from `$KUBEBUILDER_ASSETS` (the
//! `setup-envtest` layout: `etcd`, `kube-apiserver`, and `kube-controller-manager` for the
//! garbage collection step); without it the test says so and returns.
//!
//! It checks that the API server accepts the reports (the real CRD schemas, server-side
//! apply), that a finding's report appears and goes when fixed, and, with
//! kube-controller-manager, that deleting an Ingress deletes its report (ownerReferences).
//! With the Open Reports CRD removed and the `wgpolicyk8s.io` one installed, the writer finds
//! its API gone, discovers the other, and writes every report there.
//! Then two `styrmin-webhook controllers` processes, each with a token of the chart's
//! controllers' ServiceAccount and the chart's RBAC (so that what the chart grants is what they use):
//! only the Lease holder writes, and when it is
//! killed (SIGKILL, so it cannot give the Lease back) the other takes over within the lease
//! duration and deletes the report of an Ingress fixed after the hand-over.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams};
use serde_json::json;
use styrmin_e2e::control_plane::{
    self, ControlPlane, Processes, WAIT, apply, eventually, install_crds, lease_holder,
    open_reports, report_of, scrape_value, until_lease_held_by,
};
use styrmin_e2e::{Scratch, data, free_port, release_binary};
use styrmin_webhook::api::AppState;
use styrmin_webhook::audit::AuditSettings;
use styrmin_webhook::controllers::WithControllers;
use styrmin_webhook::controllers::lease::{LEASE_NAME, LeaseSettings};
use styrmin_webhook::controllers::policy_reports::content::ReportResults;
use styrmin_webhook::controllers::policy_reports::{
    PolicyReportSettings, RESYNC_EVERY, ReportTarget,
};
use styrmin_webhook::kube_source::KubeSource;
use styrmin_webhook::view::ViewSource as _;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real API server: make test-cluster with KUBEBUILDER_ASSETS"]
async fn reports_on_a_real_api_server() {
    let Some(assets) = control_plane::assets() else {
        eprintln!(
            "skipped: KUBEBUILDER_ASSETS is not set (a directory with etcd, kube-apiserver and \
             kube-controller-manager, as setup-envtest installs them); `make test-cluster` runs this"
        );
        return;
    };
    let dir = Scratch::new("policy-reports-cluster");
    let plane = ControlPlane::start(&assets, dir.path(), &[]);
    let client = plane.ready().await;

    // The CRDs of Styrmin and of Open Reports, and a cluster with one finding.
    install_crds(&client).await;
    for object in [
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "styrmin-system"}}),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "styrmin-web1"}}),
        json!({"apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminCluster", "metadata": {"name": "default"},
               "spec": {"ingressClass": "traefik"}}),
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass", "metadata": {"name": "traefik"},
               "spec": {"controller": "traefik.io/ingress-controller"}}),
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
               "metadata": {"name": "web", "namespace": "styrmin-web1"},
               "spec": {"ingressClassName": "nginx", "defaultBackend": {"service": {"name": "web", "port": {"number": 80}}}}}),
    ] {
        apply(&client, &object).await;
    }

    let state = AppState::default();
    let source = KubeSource::new(client.clone()).with_audit(
        state.audits().clone(),
        Duration::from_secs(1),
        AuditSettings::default(),
    );
    let report_settings = Some(PolicyReportSettings {
        target: ReportTarget::Auto,
        results: ReportResults::Findings,
        qps: 0.0,
        rediscover_every: Duration::from_secs(1),
        resync_every: RESYNC_EVERY,
    });
    let source = WithControllers {
        source,
        election: LeaseSettings {
            namespace: "styrmin-system".to_owned(),
            name: LEASE_NAME.to_owned(),
            identity: "cluster-test".to_owned(),
            duration: Duration::from_secs(3),
            renew_deadline: Duration::from_secs(2),
            retry_period: Duration::from_millis(500),
            legacy_name: None,
        },
        policy_reports: report_settings,
        metrics: state.metrics().controllers.policy_reports.clone(),
        lease_held: state.metrics().controllers.lease_held.clone(),
        migrations: None,
        shutdown: tokio_util::sync::CancellationToken::new(),
    };
    let task = tokio::spawn(source.run(state.view_sink()));

    // The wrong class is reported, accepted by the API server as the CRD defines it.
    let report = eventually("the Ingress's report", async || {
        let list = open_reports(&client)
            .list(&ListParams::default())
            .await
            .ok()?;
        list.items
            .into_iter()
            .find(|r| r.data["scope"]["name"] == "web")
    })
    .await;
    let rules: Vec<_> = report.data["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["rule"].as_str().unwrap().to_owned())
        .collect();
    assert!(rules.contains(&"wrong_class".to_owned()), "{report:?}");

    // Deleting the Ingress: the garbage collector deletes its report.
    let ingresses: Api<k8s_openapi::api::networking::v1::Ingress> =
        Api::namespaced(client.clone(), "styrmin-web1");
    ingresses
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    if plane.garbage_collector {
        eventually("the report's garbage collection", async || {
            let list = open_reports(&client)
                .list(&ListParams::default())
                .await
                .ok()?;
            list.items.is_empty().then_some(())
        })
        .await;
    } else {
        eprintln!(
            "garbage collection not checked: no kube-controller-manager in KUBEBUILDER_ASSETS"
        );
    }
    the_report_api_removed_then_another_served_is_discovered_again(&client).await;
    task.abort();
    // The replicas below write Open Reports.
    install_crds(&client).await;

    two_replicas_one_writes_and_the_other_takes_over_when_it_is_killed(
        &client,
        &plane.url,
        dir.path(),
    )
    .await;
}

/// The Open Reports CRD removed (its reports go with it), then the older `wgpolicyk8s.io`
/// one installed: the writer's next write meets a 404, it finds its API gone, discovers the
/// other one and writes every report there, the report of the Ingress it had already
/// written included (a writer that kept its API and its ledger would never write it again).
async fn the_report_api_removed_then_another_served_is_discovered_again(client: &kube::Client) {
    let ingress = |name: &str| {
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
               "metadata": {"name": name, "namespace": "styrmin-web1"},
               "spec": {"ingressClassName": "nginx", "defaultBackend": {"service": {"name": name, "port": {"number": 80}}}}})
    };
    apply(client, &ingress("api")).await;
    eventually("the report of api in openreports.io", async || {
        let list = open_reports(client)
            .list(&ListParams::default())
            .await
            .ok()?;
        list.items
            .iter()
            .any(|r| r.data["scope"]["name"] == "api")
            .then_some(())
    })
    .await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.delete("reports.openreports.io", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the Open Reports API gone", async || {
        crds.get_opt("reports.openreports.io")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    // A second finding: a round, and a write into the API that is gone.
    apply(client, &ingress("db")).await;
    let crd = std::fs::read_to_string(data("crds/wgpolicyk8s.io_policyreports.yaml")).unwrap();
    control_plane::apply_all(client, &crd).await;
    let policy_reports: Api<kube::api::DynamicObject> = Api::all_with(
        client.clone(),
        &kube::api::ApiResource {
            group: "wgpolicyk8s.io".to_owned(),
            version: "v1alpha2".to_owned(),
            api_version: "wgpolicyk8s.io/v1alpha2".to_owned(),
            kind: "PolicyReport".to_owned(),
            plural: "policyreports".to_owned(),
        },
    );
    eventually("both reports in wgpolicyk8s.io", async || {
        let list = policy_reports.list(&ListParams::default()).await.ok()?;
        let mut names: Vec<String> = list
            .items
            .iter()
            .filter_map(|r| r.data["scope"]["name"].as_str().map(str::to_owned))
            .collect();
        names.sort();
        (names == ["api", "db"]).then_some(())
    })
    .await;
    let ingresses: Api<k8s_openapi::api::networking::v1::Ingress> =
        Api::namespaced(client.clone(), "styrmin-web1");
    for name in ["api", "db"] {
        ingresses
            .delete(name, &DeleteParams::default())
            .await
            .unwrap();
    }
}

/// The lease of the replica processes: short, so that a hand-over takes a few seconds.
const REPLICA_LEASE: Duration = Duration::from_secs(3);

/// A `styrmin-webhook controllers` process writing reports, with the identity
/// `identity` in the Lease.
fn replica(dir: &Path, identity: &str, metrics: u16) -> Child {
    let kubeconfig = dir.join("replica-kubeconfig");
    let mut command = Command::new(release_binary("styrmin-webhook"));
    command
        .arg("controllers")
        .args(["--audit-interval-secs", "1"])
        .args(["--policy-reports", "openreports"])
        .args(["--leader-election-namespace", "styrmin-system"])
        .args(["--leader-election-identity", identity])
        .arg(format!(
            "--leader-election-lease-duration-ms={}",
            REPLICA_LEASE.as_millis()
        ))
        .args(["--leader-election-renew-deadline-ms", "2000"])
        .args(["--leader-election-retry-period-ms", "500"])
        .arg(format!("--metrics-listen=127.0.0.1:{metrics}"))
        .env("KUBECONFIG", &kubeconfig)
        .arg("--log-filter=debug,kube_client=error,hyper_util=info,tower=info,rustls=info,h2=info")
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join(format!("replica-{identity}.log"))).unwrap());
    command.spawn().unwrap()
}

/// The chart's ServiceAccount and RBAC with `policyReports.mode=openreports`, applied as
/// `helm template` renders them, and `replica-kubeconfig` in `dir` with a token of that
/// ServiceAccount: the replicas run with exactly what the chart grants.
async fn as_the_charts_service_account(client: &kube::Client, url: &str, dir: &Path) {
    let applied = control_plane::apply_the_charts(
        client,
        "policy-reports-cluster-chart",
        &["policyReports.mode=openreports"],
        &[
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
        ],
    )
    .await;
    assert!(
        applied.iter().any(|k| k == "Role") && applied.iter().any(|k| k == "ClusterRole"),
        "the chart rendered no Role and ClusterRole for the reports: {applied:?}"
    );
    let token = control_plane::service_account_token(
        client,
        "styrmin-system",
        "styrmin-webhook-controllers",
    )
    .await;
    std::fs::write(
        dir.join("replica-kubeconfig"),
        control_plane::kubeconfig_text(url, &token),
    )
    .unwrap();
}

/// Two replica processes: only the Lease holder writes; killed with SIGKILL (no release of
/// the Lease), the other takes over within the lease duration and writes the next change.
async fn two_replicas_one_writes_and_the_other_takes_over_when_it_is_killed(
    client: &kube::Client,
    url: &str,
    dir: &Path,
) {
    as_the_charts_service_account(client, url, dir).await;
    // R4: both class fields, so that the Ingress conforms once its class is traefik.
    let wrong = |class: &str| {
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
               "metadata": {"name": "web2", "namespace": "styrmin-web1",
                            "annotations": {"kubernetes.io/ingress.class": class}},
               "spec": {"ingressClassName": class, "defaultBackend": {"service": {"name": "web", "port": {"number": 80}}}}})
    };
    apply(client, &wrong("nginx")).await;

    let (metrics_a, metrics_b) = (free_port(), free_port());
    let a = Processes(vec![replica(dir, "replica-a", metrics_a)]);
    until_lease_held_by(client, "styrmin-system", LEASE_NAME, "replica-a").await;
    eventually("web2's report, written by replica-a", async || {
        report_of(client, "styrmin-web1", "web2").await
    })
    .await;
    let _b = Processes(vec![replica(dir, "replica-b", metrics_b)]);
    eventually("replica-b's metrics", async || {
        scrape_value(metrics_b, "styrmin_webhook_controllers_lease_held")
    })
    .await;
    tokio::time::sleep(REPLICA_LEASE * 2).await;
    assert_eq!(
        lease_holder(client, "styrmin-system", LEASE_NAME)
            .await
            .as_deref(),
        Some("replica-a")
    );
    assert_eq!(
        scrape_value(metrics_a, "styrmin_webhook_controllers_lease_held"),
        Some(1.0)
    );
    assert_eq!(
        scrape_value(metrics_b, "styrmin_webhook_controllers_lease_held"),
        Some(0.0)
    );

    // SIGKILL: replica-a cannot give the Lease back; replica-b waits out its duration.
    let killed = Instant::now();
    drop(a);
    until_lease_held_by(client, "styrmin-system", LEASE_NAME, "replica-b").await;
    let took_over = killed.elapsed();
    println!("hand-over between processes after {took_over:?} (lease duration {REPLICA_LEASE:?})");
    assert!(
        took_over <= REPLICA_LEASE + Duration::from_secs(2),
        "replica-b took {took_over:?} to take over a {REPLICA_LEASE:?} lease"
    );
    // The gauge follows once replica-b's update of the Lease has been answered.
    eventually("replica-b's lease_held gauge at 1", async || {
        (scrape_value(metrics_b, "styrmin_webhook_controllers_lease_held") == Some(1.0))
            .then_some(())
    })
    .await;

    // The new writer deletes the report once the Ingress conforms.
    apply(client, &wrong("traefik")).await;
    let deadline = Instant::now() + WAIT;
    while let Some(report) = report_of(client, "styrmin-web1", "web2").await {
        assert!(
            Instant::now() < deadline,
            "replica-b did not delete web2's report once it conformed: {}\n--- replica-b ---\n{}",
            serde_json::to_string_pretty(&report).unwrap(),
            std::fs::read_to_string(dir.join("replica-replica-b.log")).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
