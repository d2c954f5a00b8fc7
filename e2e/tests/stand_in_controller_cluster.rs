//! The stand-in ingress controllers on a real kube-apiserver (`make test-cluster`, not `make
//! test`): the binaries come from `$KUBEBUILDER_ASSETS`, as in `policy_reports_cluster.rs`;
//! without it each test says so and returns.
//!
//! - In-process, two classes over 20 Ingresses in two namespaces: every Ingress gets its
//!   class's address and answers HTTP there for its host; one that changes class moves to
//!   the other address, and the old controller stops listing and answering it; a stopped
//!   class stops answering and leaves its statuses as they were.
//! - The binary `stand-in-ingress-controller`: it serves an Ingress, and once killed
//!   (SIGKILL) answers nothing while the status it wrote stays.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::net::{IpAddr, SocketAddr};
use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::networking::v1::Ingress;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use styrmin_e2e::control_plane::{self, ControlPlane, apply, eventually};
use styrmin_e2e::{Scratch, free_port, release_binary};
use styrmin_test_support::stand_in_controller::{self, StandIn};

const A: &str = "stand-in-a";
const B: &str = "stand-in-b";
const A_IP: &str = "127.0.0.31";
const B_IP: &str = "127.0.0.32";
const NAMESPACES: [&str; 2] = ["stand-in-1", "stand-in-2"];

fn skip() -> bool {
    let missing = control_plane::assets().is_none();
    if missing {
        eprintln!(
            "skipped: KUBEBUILDER_ASSETS is not set (a directory with etcd, kube-apiserver and \
             kube-controller-manager, as setup-envtest installs them); `make test-cluster` runs this"
        );
    }
    missing
}

/// The IngressClasses and the namespaces.
async fn classes_and_namespaces(client: &kube::Client, classes: &[&str]) {
    for class in classes {
        apply(
            client,
            &json!({"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
                    "metadata": {"name": class}, "spec": {"controller": "styrmin.io/stand-in"}}),
        )
        .await;
    }
    for namespace in NAMESPACES {
        apply(
            client,
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
        )
        .await;
    }
}

/// Ingress `web<i>` with host `web<i>.test`, its class in the spec or, when `annotated`, in
/// the annotation only.
fn ingress(i: usize, namespace: &str, class: &str, annotated: bool) -> Value {
    let mut object = json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": format!("web{i}"), "namespace": namespace},
        "spec": {"rules": [{"host": format!("web{i}.test"), "http": {"paths": [{
            "path": "/", "pathType": "Prefix",
            "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}
    });
    if annotated {
        object["metadata"]["annotations"] = json!({"kubernetes.io/ingress.class": class});
    } else {
        object["spec"]["ingressClassName"] = json!(class);
    }
    object
}

/// The addresses in an Ingress's status.
fn addresses(ingress: &Ingress) -> Vec<String> {
    let entries = ingress
        .status
        .as_ref()
        .and_then(|status| status.load_balancer.as_ref())
        .and_then(|load_balancer| load_balancer.ingress.clone())
        .unwrap_or_default();
    entries
        .into_iter()
        .map(|entry| entry.ip.unwrap_or_default())
        .collect()
}

/// Every Ingress of the two namespaces: `namespace/name` and its addresses.
async fn statuses(client: &kube::Client) -> Vec<(String, Vec<String>)> {
    let api: Api<Ingress> = Api::all(client.clone());
    let list = api.list(&ListParams::default()).await.unwrap();
    list.items
        .iter()
        .map(|ingress| {
            let namespace = ingress.metadata.namespace.clone().unwrap_or_default();
            let name = ingress.metadata.name.clone().unwrap_or_default();
            (format!("{namespace}/{name}"), addresses(ingress))
        })
        .collect()
}

/// Waits until every Ingress's status is the one `expected` gives for its key.
async fn until_statuses(client: &kube::Client, what: &str, expected: impl Fn(&str) -> Vec<String>) {
    eventually(what, async || {
        let now = statuses(client).await;
        now.iter()
            .all(|(key, ips)| *ips == expected(key))
            .then_some(())
    })
    .await;
}

/// HTTP: each host of `ips_of` answers on its class's address (on `port`), naming the
/// Ingress, and 404 on the other.
async fn assert_each_host_on_its_class(
    ips_of: &std::collections::BTreeMap<String, &str>,
    port: u16,
) {
    let at = |ip: &str| SocketAddr::new(ip.parse::<IpAddr>().unwrap(), port);
    for (key, ip) in ips_of {
        let (namespace, name) = key.split_once('/').unwrap();
        let host = format!("{name}.test");
        let class = if *ip == A_IP { A } else { B };
        let (status, body) = stand_in_controller::get(at(ip), &host).await.unwrap();
        assert_eq!(status, 200, "{host} on {ip}: {body}");
        assert_eq!(body, format!("class={class} ingress={namespace}/{name}\n"));
        let other = if *ip == A_IP { B_IP } else { A_IP };
        let (status, _) = stand_in_controller::get(at(other), &host).await.unwrap();
        assert_eq!(status, 404, "{host} on {other}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real API server: make test-cluster with KUBEBUILDER_ASSETS"]
async fn two_classes_publish_serve_move_and_stop() {
    if skip() {
        return;
    }
    let assets = control_plane::assets().unwrap();
    let dir = Scratch::new("stand-in-cluster");
    let plane = ControlPlane::start(&assets, dir.path(), &[]);
    let client = plane.ready().await;
    classes_and_namespaces(&client, &[A, B]).await;
    // 20 Ingresses over both namespaces and both classes, two named by the annotation.
    let class_of = |i: usize| if i % 4 < 2 { A } else { B };
    let mut ips_of = std::collections::BTreeMap::new();
    for i in 0..20 {
        let namespace = NAMESPACES[i % 2];
        apply(
            &client,
            &ingress(i, namespace, class_of(i), i == 0 || i == 19),
        )
        .await;
        let ip = if class_of(i) == A { A_IP } else { B_IP };
        ips_of.insert(format!("{namespace}/web{i}"), ip);
    }

    let stand_in = StandIn::new(
        [
            format!("{A}={A_IP}").parse().unwrap(),
            format!("{B}={B_IP}").parse().unwrap(),
        ],
        0,
    )
    .unwrap();
    let mut running = stand_in.start(client.clone()).await.unwrap();
    let port = running.port();
    let at = |ip: &str| SocketAddr::new(ip.parse::<IpAddr>().unwrap(), port);
    until_statuses(&client, "every Ingress with its class's address", |key| {
        vec![ips_of[key].to_owned()]
    })
    .await;

    assert_each_host_on_its_class(&ips_of, port).await;
    let settled = [A, B].map(|class| running.counters(class).unwrap().patches);
    assert_eq!(settled.iter().sum::<u64>(), 20, "one write per Ingress");

    // web0 (class A by the annotation) moves to B: B publishes it, A no longer lists it.
    let moved: Api<Ingress> = Api::namespaced(client.clone(), "stand-in-1");
    let patch = json!({"metadata": {"annotations": {"kubernetes.io/ingress.class": null}},
                       "spec": {"ingressClassName": B}});
    moved
        .patch("web0", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    ips_of.insert("stand-in-1/web0".to_owned(), B_IP);
    until_statuses(&client, "web0 with B's address only", |key| {
        vec![ips_of[key].to_owned()]
    })
    .await;
    eventually("web0 answered by B, not by A", async || {
        let on_b = stand_in_controller::get(at(B_IP), "web0.test").await.ok()?;
        let on_a = stand_in_controller::get(at(A_IP), "web0.test").await.ok()?;
        (on_b.0 == 200 && on_a.0 == 404).then_some(())
    })
    .await;

    // Settled: no more writes while nothing changes.
    let total = || {
        [A, B]
            .map(|class| running.counters(class).unwrap().patches)
            .iter()
            .sum::<u64>()
    };
    let after_move = total();
    assert!((21..=22).contains(&after_move), "{after_move} writes");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(total(), after_move, "writes while nothing changed");

    // B stops: its HTTP refuses, its statuses stay (a crashed controller's do), A goes on.
    assert!(running.stop(B).await);
    assert!(
        stand_in_controller::get(at(B_IP), "web0.test")
            .await
            .is_err()
    );
    assert_eq!(
        stand_in_controller::get(at(A_IP), "web1.test")
            .await
            .unwrap()
            .0,
        200
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    for (key, ips) in statuses(&client).await {
        assert_eq!(ips, [ips_of[key.as_str()]], "{key} after B stopped");
    }
    // An Ingress moving to the stopped class: A takes its address away, nobody gives one.
    moved
        .patch(
            "web4",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"ingressClassName": B}})),
        )
        .await
        .unwrap();
    eventually("web4 without an address", async || {
        let web4 = moved.get("web4").await.ok()?;
        addresses(&web4).is_empty().then_some(())
    })
    .await;
    assert_eq!(
        stand_in_controller::get(at(A_IP), "web4.test")
            .await
            .unwrap()
            .0,
        404
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real API server: make test-cluster with KUBEBUILDER_ASSETS"]
async fn the_binary_serves_until_killed() {
    if skip() {
        return;
    }
    let assets = control_plane::assets().unwrap();
    let dir = Scratch::new("stand-in-binary");
    let plane = ControlPlane::start(&assets, dir.path(), &[]);
    let client = plane.ready().await;
    classes_and_namespaces(&client, &[A]).await;
    apply(&client, &ingress(7, NAMESPACES[0], A, false)).await;
    let port = free_port();
    let mut child = Command::new(release_binary("stand-in-ingress-controller"))
        .args([
            "--class",
            &format!("{A}={A_IP}"),
            "--port",
            &port.to_string(),
        ])
        .env("KUBECONFIG", &plane.kubeconfig)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("stand-in.log")).unwrap())
        .spawn()
        .unwrap();
    let address = SocketAddr::new(A_IP.parse::<IpAddr>().unwrap(), port);
    let api: Api<Ingress> = Api::namespaced(client.clone(), NAMESPACES[0]);
    eventually("web7 with A's address", async || {
        (addresses(&api.get("web7").await.ok()?) == [A_IP]).then_some(())
    })
    .await;
    eventually("web7 answered", async || {
        let (status, body) = stand_in_controller::get(address, "web7.test").await.ok()?;
        (status == 200 && body == format!("class={A} ingress={}/web7\n", NAMESPACES[0]))
            .then_some(())
    })
    .await;
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        stand_in_controller::get(address, "web7.test")
            .await
            .is_err()
    );
    assert_eq!(addresses(&api.get("web7").await.unwrap()), [A_IP]);
}
