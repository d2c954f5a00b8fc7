//! StyrminMigrations on a real API server (`make test-cluster`, `KUBEBUILDER_ASSETS`): the
//! webhook registered as the API server's mutating admission webhook (so the executor's
//! writes go through the rules), stand-in ingress controllers for two classes publishing
//! addresses and answering HTTP, and the API server's audit log to count every write.
//!
//! - `migrate start -f` with two steps (staging, then the cluster) moves 200 Ingresses of
//!   10 namespaces and 3 environments to the new class, served and answering the probe,
//!   while a client asks every host through the address its Ingress has at that moment:
//!   no request fails; the pre-flight names the annotations and the Issuer left behind; a
//!   deployment with a record moves after its record is updated, after the canary.
//! - The target controller stopped in the middle of a step: the gate fails and everything
//!   rolls back (levels, records, Ingresses, served again by the old controller).
//! - The holder SIGKILLed mid-step: the other replica resumes, and no Ingress is written
//!   twice.
//! - Pause and resume through the spec; an abort mid-step rolls the step back.
//! - A migration another release's executor owns is left alone while that executor's Lease
//!   is renewed, and taken over and carried out once it lapses: each Ingress written once.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Child;
use std::time::Duration;

use k8s_openapi::api::networking::v1::Ingress;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use styrmin_e2e::admission::{audit_log_args, received, register, replica, serving_pki, updates};
use styrmin_e2e::control_plane::{
    self, ControlPlane, Processes, apply, install_crds, lease_holder, resource_of,
};
#[path = "support/probing.rs"]
mod probing;

use probing::Prober;
use styrmin_e2e::{Scratch, free_port};
use styrmin_test_support::stand_in_controller::{ClassAddress, Running, StandIn};

const OLD: &str = "nginx";
const NEW: &str = "haproxy";
const LEASE_NAME: &str = "styrmin-webhook-controllers";

/// The levels (cluster class nginx, environments staging and prod), two IngressClasses,
/// `per_namespace` Ingresses in each deployment's namespace (hosts `NAME.NS.test`, some with
/// nginx annotations), and deployment `rec` with a record of nginx.
async fn fleet(client: &kube::Client, deployments: &[(&str, &str)], per_namespace: usize) {
    for object in [
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "styrmin-system"}}),
        json!({"apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminCluster", "metadata": {"name": "default"},
               "spec": {"ingressClass": OLD}}),
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass", "metadata": {"name": OLD},
               "spec": {"controller": "k8s.io/ingress-nginx"}}),
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass", "metadata": {"name": NEW},
               "spec": {"controller": "haproxy.org/ingress-controller"}}),
        json!({"apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminEnvironment", "metadata": {"name": "staging"}, "spec": {}}),
        json!({"apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminEnvironment", "metadata": {"name": "prod"}, "spec": {}}),
        json!({"apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminEnvironment", "metadata": {"name": "edge"}, "spec": {}}),
        // cert-manager's HTTP01 solver names the old class: the pre-flight says so.
        json!({"apiVersion": "cert-manager.io/v1", "kind": "Issuer", "metadata": {"name": "letsencrypt", "namespace": "styrmin-system"},
               "spec": {"acme": {"server": "https://acme.test/directory", "privateKeySecretRef": {"name": "letsencrypt"},
                                 "solvers": [{"http01": {"ingress": {"ingressClassName": OLD}}}]}}}),
    ] {
        apply(client, &object).await;
    }
    for (id, environment) in deployments {
        let namespace = format!("styrmin-{id}");
        apply(
            client,
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
        )
        .await;
        apply(
            client,
            &json!({"apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminDeployment",
                    "metadata": {"name": namespace, "namespace": namespace},
                    "spec": {"environmentId": environment}}),
        )
        .await;
        if *id == "rec" {
            let api: Api<DynamicObject> = Api::namespaced_with(
                client.clone(),
                &namespace,
                &resource_of(
                    &json!({"apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminDeployment"}),
                ),
            );
            let patch = json!({"status": {"lastDeployed": {"ingressClass": OLD}}});
            api.patch_status(&namespace, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .unwrap();
        }
        for n in 0..per_namespace {
            let name = format!("web{n}");
            let mut annotations = json!({"kubernetes.io/ingress.class": OLD});
            if n == 0 {
                annotations["nginx.ingress.kubernetes.io/rewrite-target"] = json!("/");
            }
            apply(
                client,
                &json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
                        "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
                        "spec": {"ingressClassName": OLD, "rules": [{"host": format!("{name}.{namespace}.test"),
                            "http": {"paths": [{"path": "/", "pathType": "Prefix",
                                "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}}),
            )
            .await;
        }
    }
}

fn migrations(client: &kube::Client) -> Api<DynamicObject> {
    Api::all_with(
        client.clone(),
        &resource_of(&json!({"apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminMigration"})),
    )
}

/// Creates a migration of `steps` ((name, level object)) with the probe on `port`.
async fn start_migration(
    client: &kube::Client,
    name: &str,
    steps: &[(&str, Value)],
    extra: Value,
    port: u16,
) {
    let steps: Vec<Value> = steps
        .iter()
        .map(|(step, change)| json!({"name": step, "changes": [change]}))
        .collect();
    let mut spec = json!({
        "steps": steps,
        "pace": {"ingressesPerSecond": 50, "batchSize": 10},
        "gates": {"canary": {"timeoutSeconds": 30}, "served": {"timeoutSeconds": 10},
                  "probe": {"port": port, "expectedStatus": [200]}},
    });
    for (key, value) in extra.as_object().unwrap() {
        spec[key] = value.clone();
    }
    apply(
        client,
        &json!({"apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminMigration",
                "metadata": {"name": name}, "spec": spec}),
    )
    .await;
}

fn environment(name: &str, class: &str) -> Value {
    json!({"apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminEnvironment", "metadata": {"name": name},
           "spec": {"ingressClass": class}})
}

fn cluster_level(class: &str) -> Value {
    json!({"apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminCluster", "metadata": {"name": "default"},
           "spec": {"ingressClass": class}})
}

/// The migration's status once `done` says so (at most `limit`).
async fn status_when(
    client: &kube::Client,
    name: &str,
    limit: Duration,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if let Ok(object) = migrations(client).get(name).await {
            let status = object.data.get("status").cloned().unwrap_or(Value::Null);
            if done(&status) {
                return status;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "timed out; the status is {status:#}"
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

fn phase_is(phase: &'static str) -> impl Fn(&Value) -> bool {
    move |status| status["phase"] == phase
}

/// Every Ingress of the Styrmin namespaces: (namespace/name → (class, addresses)).
async fn classes(client: &kube::Client) -> BTreeMap<String, (String, Vec<String>)> {
    let api: Api<Ingress> = Api::all(client.clone());
    api.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|i| {
            i.metadata
                .namespace
                .as_deref()
                .is_some_and(|n| n.starts_with("styrmin-") && n != "styrmin-system")
        })
        .map(|i| {
            let key = format!(
                "{}/{}",
                i.metadata.namespace.clone().unwrap(),
                i.metadata.name.clone().unwrap()
            );
            let class = i
                .spec
                .as_ref()
                .and_then(|s| s.ingress_class_name.clone())
                .unwrap_or_default();
            let addresses = i
                .status
                .and_then(|s| s.load_balancer)
                .and_then(|lb| lb.ingress)
                .unwrap_or_default()
                .into_iter()
                .filter_map(|a| a.ip)
                .collect();
            (key, (class, addresses))
        })
        .collect()
}

/// A control plane with the audit log, the fleet, the stand-ins and `replicas` webhooks.
struct Cluster {
    plane: ControlPlane,
    client: kube::Client,
    dir: PathBuf,
    audit_log: PathBuf,
    stand_ins: Running,
    replicas: Vec<(String, Child)>,
    _scratch: Scratch,
}

impl Cluster {
    async fn start(
        label: &str,
        deployments: &[(&str, &str)],
        per_namespace: usize,
        replicas: &[&str],
    ) -> Option<Cluster> {
        let Some(assets) = control_plane::assets() else {
            eprintln!("skipped: KUBEBUILDER_ASSETS is not set; `make test-cluster` runs this");
            return None;
        };
        let scratch = Scratch::new(label);
        let dir = scratch.path().to_owned();
        let (audit_args, audit_log) = audit_log_args(&dir);
        let plane = ControlPlane::start(&assets, &dir, &audit_args);
        let client = plane.ready().await;
        install_crds(&client).await;
        control_plane::apply_all(
            &client,
            &std::fs::read_to_string(styrmin_e2e::data("crds/cert-manager.io_issuers.yaml"))
                .unwrap(),
        )
        .await;
        fleet(&client, deployments, per_namespace).await;
        let stand_ins = StandIn::new(
            [(OLD, "127.0.0.41"), (NEW, "127.0.0.42")].map(|(class, ip)| ClassAddress {
                class: class.to_owned(),
                ip: ip.parse().unwrap(),
            }),
            0,
        )
        .unwrap()
        .start(client.clone())
        .await
        .unwrap();
        let tls = serving_pki(&dir);
        let ports: Vec<u16> = replicas.iter().map(|_| free_port()).collect();
        let children = replicas
            .iter()
            .zip(&ports)
            .map(|(identity, port)| {
                (
                    (*identity).to_owned(),
                    replica(&dir, &plane.kubeconfig, identity, *port, &tls),
                )
            })
            .collect();
        register(&client, &ports, &tls.2).await;
        let cluster = Cluster {
            plane,
            client,
            dir,
            audit_log,
            stand_ins,
            replicas: children,
            _scratch: scratch,
        };
        cluster.until_served(OLD).await;
        Some(cluster)
    }

    /// Until every Ingress has `class` and that class's address.
    async fn until_served(&self, class: &str) {
        let address = self.stand_ins.address(class).unwrap().ip().to_string();
        control_plane::eventually(&format!("every Ingress served by {class}"), async || {
            let all = classes(&self.client).await;
            all.values()
                .all(|(c, a)| c == class && a == std::slice::from_ref(&address))
                .then_some(())
        })
        .await;
    }

    fn log(&self, identity: &str) -> String {
        std::fs::read_to_string(self.dir.join(format!("replica-{identity}.log")))
            .unwrap_or_default()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let children = self.replicas.drain(..).map(|(_, c)| c).collect();
        drop(Processes(children));
    }
}

/// 10 namespaces over 3 environments.
const FLEET: &[(&str, &str)] = &[
    ("s1", "staging"),
    ("s2", "staging"),
    ("rec", "staging"),
    ("p1", "prod"),
    ("p2", "prod"),
    ("p3", "prod"),
    ("e1", "edge"),
    ("e2", "edge"),
    ("e3", "edge"),
    ("e4", "edge"),
];

/// `styrmin-webhook migrate start -f`, as a person starts a migration.
fn migrate_start(cluster: &Cluster, migration: &Value) {
    let file = cluster.dir.join("migration.yaml");
    std::fs::write(&file, serde_json::to_string_pretty(migration).unwrap()).unwrap();
    let out = std::process::Command::new(styrmin_e2e::release_binary("styrmin-webhook"))
        .args(["migrate", "start", "-f"])
        .arg(&file)
        .env("KUBECONFIG", &cluster.plane.kubeconfig)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

const DEPLOYMENTS: &[(&str, &str)] = &[
    ("s1", "staging"),
    ("s2", "staging"),
    ("rec", "staging"),
    ("p1", "prod"),
    ("p2", "prod"),
    ("p3", "prod"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a real API server: make test-cluster with KUBEBUILDER_ASSETS"]
async fn two_steps_move_every_ingress_served_and_each_written_once() {
    let Some(cluster) = Cluster::start("migration-two-steps", FLEET, 20, &["a"]).await else {
        return;
    };
    let client = &cluster.client;
    let port = cluster.stand_ins.port();
    let prober = Prober::start(client.clone(), port, Duration::from_millis(100));
    let started = std::time::Instant::now();
    migrate_start(
        &cluster,
        &json!({"apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminMigration",
                "metadata": {"name": "leave-nginx"},
                "spec": {"steps": [
                    {"name": "staging", "changes": [environment("staging", NEW)]},
                    {"name": "cluster", "changes": [cluster_level(NEW)]}],
                  "pace": {"ingressesPerSecond": 50, "batchSize": 50},
                  "gates": {"canary": {"timeoutSeconds": 30}, "served": {"timeoutSeconds": 20},
                            "probe": {"port": port, "expectedStatus": [200]}}}}),
    );
    let status = status_when(client, "leave-nginx", Duration::from_secs(300), |s| {
        s["phase"] == "Done" || s["phase"] == "Failed" || s["phase"] == "RolledBack"
    })
    .await;
    let took = started.elapsed();
    let probed = prober.stop().await;
    eprintln!("migration: 200 Ingresses in two steps in {took:?}; probes: {probed:?}");
    assert_eq!(status["phase"], "Done", "{status:#}\n{}", cluster.log("a"));
    assert!(probed.failed.is_empty(), "{probed:?}");
    assert!(probed.answered >= 200 && probed.rounds >= 10, "{probed:?}");
    let steps = status["steps"].as_array().unwrap();
    // Staging: s1, s2, rec (60 Ingresses); then the cluster: prod's and edge's 140.
    assert_eq!(
        steps
            .iter()
            .map(|s| (
                s["phase"].clone(),
                s["planned"].clone(),
                s["moved"].clone(),
                s["served"].clone(),
                s["failed"].clone()
            ))
            .collect::<Vec<_>>(),
        [
            (json!("Done"), json!(60), json!(60), json!(60), json!(0)),
            (json!("Done"), json!(140), json!(140), json!(140), json!(0)),
        ],
        "{status:#}"
    );
    // The pre-flight named the Issuer whose solver names the class the step leaves.
    let preflight = steps[0]["preflight"].to_string();
    assert!(
        preflight.contains("acme_solver_class") && preflight.contains("letsencrypt"),
        "{preflight}"
    );
    // The pre-flight named the annotations an nginx → haproxy move leaves behind.
    let preflight = steps[0]["preflight"].to_string();
    assert!(
        preflight.contains("annotations_not_carried") && preflight.contains("rewrite-target"),
        "{preflight}"
    );
    let address = cluster.stand_ins.address(NEW).unwrap().ip().to_string();
    let all = classes(client).await;
    assert_eq!(all.len(), 200);
    for (key, (class, addresses)) in &all {
        assert_eq!(
            (class.as_str(), addresses.as_slice()),
            (NEW, &[address.clone()][..]),
            "{key}"
        );
    }
    // Every Ingress written once by the executor (the API server's audit log).
    let written = updates(&cluster.audit_log);
    assert_eq!(written.len(), 200, "{written:?}");
    assert!(written.values().all(|n| *n == 1), "{written:?}");
    // The record follows the move, and nothing is kept to put back once the step is done.
    let deployments: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "styrmin-rec",
        &resource_of(&json!({"apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminDeployment"})),
    );
    let rec = deployments.get("styrmin-rec").await.unwrap();
    assert_eq!(
        rec.data["status"]["lastDeployed"],
        json!({"ingressClass": NEW})
    );
    assert!(rec.metadata.annotations.unwrap_or_default().is_empty());
    // In order: the canary served (then deleted), the record (the second write of its
    // status: the first is the test's own), then its Ingresses.
    let canary_done = received(&cluster.audit_log, |e| {
        e["verb"] == "delete" && e["objectRef"]["namespace"] == "styrmin-system"
    });
    let records = received(&cluster.audit_log, |e| {
        e["objectRef"]["subresource"] == "status" && e["objectRef"]["namespace"] == "styrmin-rec"
    });
    let moved = received(&cluster.audit_log, |e| {
        e["verb"] == "update"
            && e["objectRef"]["namespace"] == "styrmin-rec"
            && !e["requestURI"].as_str().unwrap_or("").contains("dryRun")
    });
    assert_eq!((canary_done.len(), records.len(), moved.len()), (2, 2, 20));
    assert!(
        canary_done[0] < records[1] && records[1] < moved[0],
        "{canary_done:?} {records:?} {moved:?}"
    );
    // Every host answers through the new address.
    let counters = cluster.stand_ins.counters(NEW).unwrap();
    assert!(counters.answered >= 200, "{counters:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a real API server: make test-cluster with KUBEBUILDER_ASSETS"]
async fn a_target_stopped_mid_step_rolls_everything_back() {
    let Some(mut cluster) = Cluster::start("migration-rollback", DEPLOYMENTS, 5, &["a"]).await
    else {
        return;
    };
    let client = cluster.client.clone();
    until_a_wave_is_served(&cluster).await;
    assert!(cluster.stand_ins.stop(NEW).await);
    let status = status_when(&client, "leave-nginx", Duration::from_secs(120), |s| {
        s["phase"] == "RolledBack" || s["phase"] == "Failed" || s["phase"] == "Done"
    })
    .await;
    assert_eq!(
        status["phase"],
        "RolledBack",
        "{status:#}\n{}",
        cluster.log("a")
    );
    assert_eq!(status["steps"][0]["phase"], "RolledBack");
    assert!(
        !status["steps"][0]["failing"].as_array().unwrap().is_empty(),
        "{status:#}"
    );
    as_before(&cluster).await;
}

/// Starts a one-step migration (the cluster to haproxy) in waves of 5 at 5 a second, and
/// waits until its first wave is served.
async fn until_a_wave_is_served(cluster: &Cluster) {
    start_migration(
        &cluster.client,
        "leave-nginx",
        &[("all", cluster_level(NEW))],
        json!({"pace": {"ingressesPerSecond": 5, "batchSize": 5}}),
        cluster.stand_ins.port(),
    )
    .await;
    status_when(
        &cluster.client,
        "leave-nginx",
        Duration::from_secs(60),
        |s| s["steps"][0]["served"].as_u64().is_some_and(|n| n >= 5),
    )
    .await;
}

/// Back on nginx and served by it again; the levels and the record as they were.
async fn as_before(cluster: &Cluster) {
    let client = &cluster.client;
    cluster.until_served(OLD).await;
    let levels: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &resource_of(&json!({"apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminCluster"})),
    );
    assert_eq!(
        levels.get("default").await.unwrap().data["spec"]["ingressClass"],
        OLD
    );
    let deployments: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "styrmin-rec",
        &resource_of(&json!({"apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminDeployment"})),
    );
    let rec = deployments.get("styrmin-rec").await.unwrap();
    assert_eq!(
        rec.data["status"]["lastDeployed"],
        json!({"ingressClass": OLD})
    );
    assert!(rec.metadata.annotations.unwrap_or_default().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a real API server: make test-cluster with KUBEBUILDER_ASSETS"]
async fn an_abort_mid_step_rolls_everything_back() {
    let Some(cluster) = Cluster::start("migration-abort", DEPLOYMENTS, 5, &["a"]).await else {
        return;
    };
    let client = cluster.client.clone();
    until_a_wave_is_served(&cluster).await;
    migrations(&client)
        .patch(
            "leave-nginx",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"abort": true}})),
        )
        .await
        .unwrap();
    let status = status_when(&client, "leave-nginx", Duration::from_secs(120), |s| {
        s["phase"] == "RolledBack" || s["phase"] == "Failed" || s["phase"] == "Done"
    })
    .await;
    assert_eq!(
        status["phase"],
        "RolledBack",
        "{status:#}\n{}",
        cluster.log("a")
    );
    let message = status["steps"][0]["message"].as_str().unwrap_or("");
    assert!(message.starts_with("aborted"), "{message}");
    assert!(
        status["steps"][0]["failing"]
            .as_array()
            .is_none_or(Vec::is_empty),
        "{status:#}"
    );
    as_before(&cluster).await;
}

/// The served gate waits up to five minutes for a wave the target no longer serves; an
/// abort during that wait rolls the step back at once, not when the gate gives up.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a real API server: make test-cluster with KUBEBUILDER_ASSETS"]
async fn an_abort_during_a_long_gate_rolls_back_at_once() {
    let Some(mut cluster) = Cluster::start("migration-abort-gate", DEPLOYMENTS, 5, &["a"]).await
    else {
        return;
    };
    let client = cluster.client.clone();
    let port = cluster.stand_ins.port();
    start_migration(
        &client,
        "leave-nginx",
        &[("all", cluster_level(NEW))],
        json!({"pace": {"ingressesPerSecond": 5, "batchSize": 5},
               "gates": {"canary": {"timeoutSeconds": 30}, "served": {"timeoutSeconds": 300},
                         "probe": {"port": port, "expectedStatus": [200]}}}),
        port,
    )
    .await;
    status_when(&client, "leave-nginx", Duration::from_secs(60), |s| {
        s["steps"][0]["served"].as_u64().is_some_and(|n| n >= 5)
    })
    .await;
    // The target stops: the next wave's gate waits (up to 300 s).
    assert!(cluster.stand_ins.stop(NEW).await);
    status_when(&client, "leave-nginx", Duration::from_secs(60), |s| {
        s["steps"][0]["phase"] == "Verifying" && s["steps"][0]["waves"].as_u64() >= Some(2)
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let asked = std::time::Instant::now();
    migrations(&client)
        .patch(
            "leave-nginx",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"abort": true}})),
        )
        .await
        .unwrap();
    status_when(&client, "leave-nginx", Duration::from_secs(60), |s| {
        s["steps"][0]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("aborted"))
    })
    .await;
    let took = asked.elapsed();
    let status = status_when(&client, "leave-nginx", Duration::from_secs(120), |s| {
        s["phase"] == "RolledBack" || s["phase"] == "Failed" || s["phase"] == "Done"
    })
    .await;
    let rolled_back = asked.elapsed();
    eprintln!(
        "abort during the gate: rolling back after {took:?}, rolled back after {rolled_back:?}"
    );
    assert_eq!(
        status["phase"],
        "RolledBack",
        "{status:#}\n{}",
        cluster.log("a")
    );
    // At once: the gate would have waited minutes more. (The bound is loose for a loaded
    // machine; the time measured is printed above.)
    assert!(took < Duration::from_secs(30), "{took:?}");
    as_before(&cluster).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a real API server: make test-cluster with KUBEBUILDER_ASSETS"]
async fn a_killed_holder_is_resumed_by_the_other_and_pause_holds_it() {
    let Some(mut cluster) = Cluster::start("migration-resume", DEPLOYMENTS, 10, &["a", "b"]).await
    else {
        return;
    };
    let client = cluster.client.clone();
    let port = cluster.stand_ins.port();
    start_migration(
        &client,
        "leave-nginx",
        &[("all", cluster_level(NEW))],
        json!({"pace": {"ingressesPerSecond": 5, "batchSize": 10}}),
        port,
    )
    .await;
    // Pause once a wave is served: nothing more is written while paused.
    status_when(&client, "leave-nginx", Duration::from_secs(60), |s| {
        s["steps"][0]["served"].as_u64().is_some_and(|n| n >= 10)
    })
    .await;
    let pause = |paused: bool| json!({"spec": {"paused": paused}});
    migrations(&client)
        .patch(
            "leave-nginx",
            &PatchParams::default(),
            &Patch::Merge(&pause(true)),
        )
        .await
        .unwrap();
    let paused = status_when(
        &client,
        "leave-nginx",
        Duration::from_secs(60),
        phase_is("Paused"),
    )
    .await;
    let written = updates(&cluster.audit_log).len();
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(
        updates(&cluster.audit_log).len(),
        written,
        "paused: {paused:#}"
    );
    // Resume, then kill the holder in the middle of the step.
    migrations(&client)
        .patch(
            "leave-nginx",
            &PatchParams::default(),
            &Patch::Merge(&pause(false)),
        )
        .await
        .unwrap();
    status_when(&client, "leave-nginx", Duration::from_secs(60), |s| {
        s["phase"] == "Running" && s["steps"][0]["moved"].as_u64().is_some_and(|n| n >= 30)
    })
    .await;
    let holder = lease_holder(&client, "styrmin-system", LEASE_NAME)
        .await
        .unwrap();
    let index = cluster
        .replicas
        .iter()
        .position(|(id, _)| *id == holder)
        .unwrap();
    let (_, mut child) = cluster.replicas.remove(index);
    child.kill().unwrap();
    child.wait().unwrap();
    let status = status_when(&client, "leave-nginx", Duration::from_secs(180), |s| {
        s["phase"] == "Done" || s["phase"] == "Failed" || s["phase"] == "RolledBack"
    })
    .await;
    let other = &cluster.replicas[0].0;
    assert_eq!(
        status["phase"],
        "Done",
        "{status:#}\n{}",
        cluster.log(other)
    );
    assert_ne!(
        lease_holder(&client, "styrmin-system", LEASE_NAME)
            .await
            .unwrap(),
        holder
    );
    cluster.until_served(NEW).await;
    // 60 Ingresses, each written once: the new holder wrote none the old one had moved.
    let written = updates(&cluster.audit_log);
    assert_eq!(written.len(), 60, "{written:?}");
    assert!(written.values().all(|n| *n == 1), "{written:?}");
}

/// Renews the Lease `namespace/styrmin-webhook-controllers` as holder `old` every 500 ms
/// (a lease of 3 s), as the executor of another release of the chart would, until dropped.
struct OtherRelease(tokio::task::JoinHandle<()>);

impl OtherRelease {
    async fn start(client: &kube::Client, namespace: &str) -> OtherRelease {
        apply(
            client,
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
        )
        .await;
        let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
            Api::namespaced(client.clone(), namespace);
        let renew = move || {
            json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                   "metadata": {"name": "styrmin-webhook-controllers"},
                   "spec": {"holderIdentity": "old", "leaseDurationSeconds": 3,
                            "renewTime": k8s_openapi::jiff::Timestamp::now()
                                .strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()}})
        };
        let params = PatchParams::apply("other-release").force();
        leases
            .patch(
                "styrmin-webhook-controllers",
                &params,
                &Patch::Apply(renew()),
            )
            .await
            .unwrap();
        OtherRelease(tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(500)).await;
                let _ = leases
                    .patch(
                        "styrmin-webhook-controllers",
                        &params,
                        &Patch::Apply(renew()),
                    )
                    .await;
            }
        }))
    }
}

impl Drop for OtherRelease {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a real API server: make test-cluster with KUBEBUILDER_ASSETS"]
async fn another_releases_live_executor_keeps_its_migration_until_its_lease_lapses() {
    let Some(cluster) = Cluster::start("migration-two-releases", DEPLOYMENTS, 5, &["a"]).await
    else {
        return;
    };
    let client = cluster.client.clone();
    // Paused from the start: this release's executor claims it and moves nothing yet.
    start_migration(
        &client,
        "leave-nginx",
        &[("all", cluster_level(NEW))],
        json!({"paused": true}),
        cluster.stand_ins.port(),
    )
    .await;
    status_when(&client, "leave-nginx", Duration::from_secs(60), |s| {
        s["executor"] == "styrmin-system/styrmin-webhook-controllers"
    })
    .await;
    // Another release's executor, live, owns it (as if it had claimed it first).
    let other = OtherRelease::start(&client, "release-b").await;
    let theirs = "release-b/styrmin-webhook-controllers";
    migrations(&client)
        .patch_status(
            "leave-nginx",
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": {"executor": theirs}})),
        )
        .await
        .unwrap();
    migrations(&client)
        .patch(
            "leave-nginx",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"paused": false}})),
        )
        .await
        .unwrap();
    control_plane::eventually("a leaves it alone", async || {
        cluster
            .log("a")
            .contains("carried out by another executor")
            .then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let status = migrations(&client).get("leave-nginx").await.unwrap().data["status"].clone();
    assert_eq!(status["executor"], theirs, "{status:#}");
    assert!(
        updates(&cluster.audit_log).is_empty(),
        "an Ingress was moved"
    );

    // The other release's executor stops renewing: once its Lease lapses, a takes over.
    drop(other);
    let status = status_when(&client, "leave-nginx", Duration::from_secs(180), |s| {
        s["phase"] == "Done" || s["phase"] == "Failed" || s["phase"] == "RolledBack"
    })
    .await;
    assert_eq!(status["phase"], "Done", "{status:#}\n{}", cluster.log("a"));
    assert_eq!(
        status["executor"],
        "styrmin-system/styrmin-webhook-controllers"
    );
    assert!(cluster.log("a").contains("taking it over"));
    cluster.until_served(NEW).await;
    let written = updates(&cluster.audit_log);
    assert_eq!(written.len(), 30, "{written:?}");
    assert!(written.values().all(|n| *n == 1), "{written:?}");
}
