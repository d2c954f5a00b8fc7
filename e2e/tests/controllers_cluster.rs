//! `styrmin-webhook controllers` on a real kube-apiserver (`make test-cluster`, not `make
//! test`): the hand-over from the version that ran the controllers inside the admission pods.
//! A Lease `styrmin-webhook-policy-reports` held and renewed by an "old pod" (the test, renewing
//! it as that version's election does) keeps the new controllers from taking their own Lease;
//! once the old pod gives it back, they take it within a retry period. Then SIGTERM: the
//! controllers stop before the Lease is given back, and the process exits. The binaries come
//! from `$KUBEBUILDER_ASSETS`; without it the test says so and returns.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, PostParams};
use serde_json::json;
use styrmin_e2e::control_plane::{
    self, ControlPlane, Processes, apply, install_crds, lease_holder, scrape_value,
    until_lease_held_by,
};
use styrmin_e2e::{Scratch, free_port, release_binary};

const SYSTEM: &str = "styrmin-system";
const LEGACY: &str = "styrmin-webhook-policy-reports";
const LEASE: &str = "styrmin-webhook-controllers";

/// Renews (or, with `holder` `None`, gives back) the legacy Lease as the old version does.
async fn old_pod_writes(leases: &Api<Lease>, holder: Option<&str>) {
    let mut lease = leases.get(LEGACY).await.unwrap();
    let spec = lease.spec.get_or_insert_with(Default::default);
    spec.holder_identity = holder.map(str::to_owned);
    spec.renew_time = Some(MicroTime(k8s_openapi::jiff::Timestamp::now()));
    spec.lease_duration_seconds = Some(if holder.is_some() { 3 } else { 1 });
    leases
        .replace(LEGACY, &PostParams::default(), &lease)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real API server: make test-cluster with KUBEBUILDER_ASSETS"]
async fn new_controllers_wait_for_the_old_holder_then_stop_before_giving_back() {
    let Some(assets) = control_plane::assets() else {
        eprintln!("skipped: KUBEBUILDER_ASSETS is not set; `make test-cluster` runs this");
        return;
    };
    let dir = Scratch::new("controllers-cluster");
    let plane = ControlPlane::start(&assets, dir.path(), &[]);
    let client = plane.ready().await;
    install_crds(&client).await;
    apply(
        &client,
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM}}),
    )
    .await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), SYSTEM);
    leases
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": LEGACY, "namespace": SYSTEM},
                "spec": {"holderIdentity": "old-pod", "leaseDurationSeconds": 3}
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    old_pod_writes(&leases, Some("old-pod")).await;

    let metrics = free_port();
    let log = dir.join("controllers.log");
    let mut controllers = Processes(vec![
        Command::new(release_binary("styrmin-webhook"))
            .arg("controllers")
            .args(["--leader-election-namespace", SYSTEM])
            .args(["--leader-election-identity", "new-pod"])
            .args([
                "--leader-election-lease-duration-ms=3000",
                "--leader-election-renew-deadline-ms=2000",
                "--leader-election-retry-period-ms=500",
            ])
            .arg(format!("--metrics-listen=127.0.0.1:{metrics}"))
            .env("KUBECONFIG", &plane.kubeconfig)
            .env("NO_COLOR", "1")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    ]);

    // The old pod renews for three lease durations: the new Lease is never taken meanwhile.
    let until = Instant::now() + Duration::from_secs(9);
    while Instant::now() < until {
        old_pod_writes(&leases, Some("old-pod")).await;
        assert_eq!(
            lease_holder(&client, SYSTEM, LEASE).await,
            None,
            "taken while a replica of the previous version holds {LEGACY}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(
        scrape_value(metrics, "styrmin_webhook_controllers_running"),
        Some(1.0)
    );
    assert_eq!(
        scrape_value(metrics, "styrmin_webhook_controllers_lease_held"),
        Some(0.0)
    );

    // It stops and gives the legacy Lease back: the new controllers take theirs at once.
    let released = Instant::now();
    old_pod_writes(&leases, None).await;
    until_lease_held_by(&client, SYSTEM, LEASE, "new-pod").await;
    let handover = released.elapsed();
    assert!(handover < Duration::from_secs(3), "took {handover:?}");
    assert_eq!(
        lease_holder(&client, SYSTEM, LEGACY).await,
        None,
        "the legacy Lease is read, never written"
    );

    // SIGTERM: the controllers stop, then the Lease is given back, then the process exits.
    let pid = controllers.0[0].id();
    let killed = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = controllers.0[0].wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert_eq!(lease_holder(&client, SYSTEM, LEASE).await, None);
    let text = std::fs::read_to_string(&log).unwrap();
    let stopped = text.find("the controllers have stopped").expect(&text);
    let gave_back = text.find("gave the lease back").expect(&text);
    assert!(stopped < gave_back, "{text}");
    controllers.0.clear();
    println!("hand-over after the old pod gave the legacy Lease back: {handover:?}");
}
