//! The stand-in ingress controllers (`test-support/src/stand_in_controller.rs`) against the
//! fake API server: what they write on the initial list, that they stop writing once the
//! watch shows the status right, the HTTP answers by host, and a stop that closes the port.
//! `stand_in_controller_cluster.rs` runs them on a real kube-apiserver.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use styrmin_fake_apiserver::{FakeApiServer, Request, WatchItem};
use styrmin_test_support::recorded_cluster::{INGRESSES, STEP, client};
use styrmin_test_support::stand_in_controller::{self, StandIn};

const IP: &str = "127.0.0.21";

fn ingress(name: &str, class: &str, host: &str, ips: &[&str]) -> Value {
    let addresses: Vec<Value> = ips.iter().map(|ip| json!({"ip": ip})).collect();
    json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": name, "namespace": "shop", "resourceVersion": "5"},
        "spec": {"ingressClassName": class, "rules": [{"host": host}]},
        "status": {"loadBalancer": {"ingress": addresses}}
    })
}

fn status_path(name: &str) -> String {
    format!("/apis/networking.k8s.io/v1/namespaces/shop/ingresses/{name}/status")
}

fn patches(api: &FakeApiServer, name: &str) -> Vec<Request> {
    let path = status_path(name);
    api.writes()
        .into_iter()
        .filter(|r| r.path == path)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_what_differs_once_and_answers_by_host_until_stopped() {
    let api = FakeApiServer::scripted();
    let list = json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "IngressList",
        "metadata": {"resourceVersion": "10"},
        "items": [
            ingress("new", "a", "new.test", &[]),
            ingress("served", "a", "served.test", &[IP]),
            ingress("left", "b", "left.test", &[IP, "127.0.0.22"]),
            ingress("other", "b", "other.test", &["127.0.0.22"]),
        ]
    });
    api.answer(INGRESSES, 200, list.to_string());
    let stand_in = StandIn::new([format!("a={IP}").parse().unwrap()], 0).unwrap();
    let mut running = stand_in.start(client(&api)).await.unwrap();
    let address = running.address("a").unwrap();

    // The unserved Ingress of the class gets the address, the one of another class loses
    // it and keeps the other; the fake refuses writes (405), so each is tried again.
    let set = api.wait_for_request("the status of shop/new", 1, STEP, |r| {
        r.method == "PATCH" && r.path == status_path("new")
    });
    let body: Value = serde_json::from_str(&set.body).unwrap();
    assert_eq!(
        body,
        json!({"metadata": {"resourceVersion": "5"},
               "status": {"loadBalancer": {"ingress": [{"ip": IP}]}}})
    );
    assert_eq!(
        set.header("content-type"),
        Some("application/merge-patch+json")
    );
    let cleared = api.wait_for_request("the status of shop/left", 1, STEP, |r| {
        r.method == "PATCH" && r.path == status_path("left")
    });
    let body: Value = serde_json::from_str(&cleared.body).unwrap();
    assert_eq!(
        body,
        json!({"metadata": {"resourceVersion": "5"},
               "status": {"loadBalancer": {"ingress": [{"ip": "127.0.0.22"}]}}})
    );
    api.wait_for_request("a second try of shop/new", 2, STEP, |r| {
        r.method == "PATCH" && r.path == status_path("new")
    });
    assert!(running.counters("a").unwrap().patch_errors >= 2);

    // The watch shows both right (as if another writer fixed them): the writes stop.
    let events = [
        ingress("new", "a", "new.test", &[IP]),
        ingress("left", "b", "left.test", &["127.0.0.22"]),
    ]
    .map(|object| WatchItem::Line(json!({"type": "MODIFIED", "object": object}).to_string()));
    api.watch(INGRESSES, events);
    let deadline = Instant::now() + STEP;
    while !api.drained(INGRESSES) {
        assert!(Instant::now() < deadline, "the watch events were not read");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Longer than a retry's wait: a write queued before the events may still go out once.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let before = api.writes().len();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(api.writes().len(), before, "{:#?}", api.writes());
    for name in ["served", "other"] {
        assert!(patches(&api, name).is_empty(), "{name} was written");
    }
    assert_eq!(running.known_ingresses("a"), Some(4));

    // HTTP by host: the class's hosts answer, another class's do not.
    let (status, body) = stand_in_controller::get(address, "new.test").await.unwrap();
    assert_eq!((status, body.as_str()), (200, "class=a ingress=shop/new\n"));
    assert_eq!(
        stand_in_controller::get(address, "Served.Test:80")
            .await
            .unwrap()
            .0,
        200
    );
    for host in ["other.test", "left.test", "unknown.test"] {
        let (status, _) = stand_in_controller::get(address, host).await.unwrap();
        assert_eq!(status, 404, "{host}");
    }
    let counters = running.counters("a").unwrap();
    assert_eq!((counters.answered, counters.not_found), (2, 3));

    // Stopped: the port refuses, the counters stay readable.
    assert!(running.stop("a").await);
    assert!(!running.is_running("a"));
    assert!(stand_in_controller::get(address, "new.test").await.is_err());
    assert!(!running.stop("a").await);
    assert_eq!(running.counters("a").unwrap().answered, 2);
}
