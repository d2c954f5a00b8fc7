//! The release webhook over real TLS on loopback, against bodies built to make parsing
//! expensive: valid 7 MiB reviews of millions of zeros and bare 7 MiB JSON lists, several at
//! once from several peers (peak memory stays under the chart's limit), and a HelmRelease of
//! tens of thousands of marked patch texts in one post-renderer entry (its CPU time stays
//! within a small multiple of the Flux budget). Meanwhile a client that behaves like the API
//! server gets every answer.
//!
//! The bounds are generous (the chart's 256 MiB limit, whole seconds of CPU): the webhook
//! that parsed the JSON into a tree took 240 MiB for one such review, 440 MiB for two, and
//! burnt the whole entry's CPU past the deadline.
//!
//! Needs `cargo build --release` first (`make build`).

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use styrmin_e2e::webhook::*;

/// The chart's memory limit (`charts/styrmin-webhook/values.yaml`, `resources.limits`).
const CHART_MEMORY_LIMIT_KIB: u64 = 256 * 1024;

/// A review of `object` in namespace `styrmin-web2` (rules give it a class: it is patched).
fn review_of(kind: Value, object: Value) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "0d2f1a3c-7b4e-4f5a-9c1d-2e3f4a5b6c7d", "kind": kind,
            "namespace": "styrmin-web2", "operation": "CREATE", "object": object},
    })
}

/// A valid Ingress review just under the 7 MiB body limit, holding about 3.6 million zeros
/// in a member that nothing reads.
fn ingress_of_zeros() -> Vec<u8> {
    let object = json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": "big", "namespace": "styrmin-web2"},
        "spec": {"rules": [{"host": "a.example.com"}], "x": vec![0; 3_600_000]},
    });
    let kind = json!({"group": "networking.k8s.io", "version": "v1", "kind": "Ingress"});
    let body = serde_json::to_vec(&review_of(kind, object)).unwrap();
    assert!(body.len() > 7_000_000 && body.len() < 7 * 1024 * 1024);
    body
}

/// A bare JSON list just under the body limit: not a review (400).
fn list_of_zeros() -> Vec<u8> {
    let body = serde_json::to_vec(&vec![0; 3_600_000]).unwrap();
    assert!(body.len() > 7_000_000 && body.len() < 7 * 1024 * 1024);
    body
}

/// A HelmRelease with one post-renderer entry of `n` marked 161-byte patch texts, each a
/// small alias expansion that its own parse budget allows.
fn flux_bomb(n: usize) -> Vec<u8> {
    let mut text = String::from(
        "a: &a [x,x,x,x,x,x,x,x,x,x,x,x,x,x,x,x,x,x,x]\nb: [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\nmetadata: {name: styrmin-ingress-class}\n",
    );
    while text.len() < 160 {
        text.push('#');
    }
    text.push('\n');
    assert_eq!(text.len(), 161);
    let patches = vec![json!({"target": {"kind": "Ingress"}, "patch": text}); n];
    let object = json!({
        "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
        "metadata": {"name": "web", "namespace": "styrmin-web2"},
        "spec": {"interval": "10m", "postRenderers": [{"kustomize": {"patches": patches}}]},
    });
    let kind = json!({"group": "helm.toolkit.fluxcd.io", "version": "v2", "kind": "HelmRelease"});
    serde_json::to_vec(&review_of(kind, object)).unwrap()
}

/// A client like the API server: keep-alive connections from 127.0.0.1, a small Ingress
/// review after another until `stop`; how many were answered right, and the failures.
async fn api_server_like(
    webhook: &Webhook,
    fx: &Fixture,
    stop: Arc<AtomicBool>,
) -> (usize, Vec<String>) {
    let review = review_in(INGRESS, "styrmin-web2");
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let (addr, config, review, stop) = (
            webhook.addr,
            fx.config.clone(),
            review.clone(),
            stop.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let (mut ok, mut failures) = (0, Vec::new());
            let mut conn = Connection::open(addr, config.clone(), SERVER_NAME)
                .await
                .unwrap();
            while !stop.load(Ordering::SeqCst) {
                match conn.review(&review).await {
                    Ok(answer) if answer["response"]["allowed"] == true => ok += 1,
                    Ok(answer) => failures.push(format!("not allowed: {answer}")),
                    Err(error) => {
                        failures.push(error);
                        conn = Connection::open(addr, config.clone(), SERVER_NAME)
                            .await
                            .unwrap();
                    }
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            (ok, failures)
        }));
    }
    let (mut ok, mut failures) = (0, Vec::new());
    for task in tasks {
        let (n, f) = task.await.unwrap();
        ok += n;
        failures.extend(f);
    }
    (ok, failures)
}

/// Sends `body` `times` times from the loopback address `from`, each on a new connection;
/// the HTTP statuses.
async fn send_from(
    from: IpAddr,
    webhook_addr: std::net::SocketAddr,
    config: Arc<rustls::ClientConfig>,
    body: Arc<Vec<u8>>,
    times: usize,
) -> Vec<u16> {
    let mut statuses = Vec::new();
    for _ in 0..times {
        let Ok(mut conn) =
            Connection::open_from(Some(from), webhook_addr, config.clone(), SERVER_NAME).await
        else {
            statuses.push(0);
            continue;
        };
        statuses.push(match conn.post_raw(body.to_vec(), &[]).await {
            Ok((status, _)) => status,
            Err(_) => 0,
        });
    }
    statuses
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn large_reviews_at_once_stay_under_the_charts_memory_limit() {
    let fx = Fixture::new();
    let webhook = fx.start(&[]).await;
    let pid = webhook.child.id();
    let stop = Arc::new(AtomicBool::new(false));
    let (zeros, list) = (Arc::new(ingress_of_zeros()), Arc::new(list_of_zeros()));

    let client = {
        let stop = stop.clone();
        let (webhook, fx) = (&webhook, &fx);
        async move { api_server_like(webhook, fx, stop).await }
    };
    let attack = async {
        let mut senders = Vec::new();
        for i in 0..6u8 {
            let body = if i % 3 == 2 {
                list.clone()
            } else {
                zeros.clone()
            };
            senders.push(tokio::spawn(send_from(
                IpAddr::from([127, 0, 0, 10 + i]),
                webhook.addr,
                fx.config.clone(),
                body,
                3,
            )));
        }
        let mut statuses = Vec::new();
        for sender in senders {
            statuses.extend(sender.await.unwrap());
        }
        stop.store(true, Ordering::SeqCst);
        statuses
    };
    let ((ok, failures), statuses) = tokio::join!(client, attack);

    // The large reviews were read and answered, or refused by the body budget (503, or the
    // connection closed while its body was taken back for another peer: 0); the lists
    // refused as not reviews.
    assert!(
        statuses.iter().all(|s| [0, 200, 400, 503].contains(s)),
        "{statuses:?}"
    );
    assert!(
        statuses.iter().filter(|s| **s == 200).count() >= 2,
        "{statuses:?}"
    );
    assert!(statuses.contains(&400), "{statuses:?}");
    assert_none_failed(ok, &failures);
    assert!(ok > 0);
    let peak = peak_rss_kib(pid);
    assert!(
        peak < CHART_MEMORY_LIMIT_KIB,
        "peak RSS {} MiB, the chart's limit is {} MiB",
        peak / 1024,
        CHART_MEMORY_LIMIT_KIB / 1024
    );
    eprintln!(
        "peak RSS {} MiB with 6 peers sending 7 MiB bodies",
        peak / 1024
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_flux_bomb_costs_cpu_within_the_flux_budget() {
    let fx = Fixture::new();
    // The default budget, 1 s: the webhook that checked it between entries only answered
    // in time but went on burning the whole entry's CPU (2 s for this one).
    let webhook = fx.start(&[("--flux-post-renderer", "")]).await;
    let pid = webhook.child.id();
    const BOMBS: usize = 3;
    let bomb = Arc::new(flux_bomb(34_925));
    assert!(bomb.len() < 7 * 1024 * 1024);
    let stop = Arc::new(AtomicBool::new(false));

    let before = cpu_time(pid);
    let client = {
        let stop = stop.clone();
        let (webhook, fx) = (&webhook, &fx);
        async move { api_server_like(webhook, fx, stop).await }
    };
    let attack = async {
        let mut statuses = Vec::new();
        for _ in 0..BOMBS {
            statuses.extend(
                send_from(
                    IpAddr::from([127, 0, 0, 20]),
                    webhook.addr,
                    fx.config.clone(),
                    bomb.clone(),
                    1,
                )
                .await,
            );
            // Whatever the decision still does after its answer shows in the CPU time by
            // then (and the next bomb gets its turn at a blocking thread).
            let settle = Instant::now();
            let mut last = cpu_time(pid);
            while settle.elapsed() < Duration::from_secs(20) {
                tokio::time::sleep(Duration::from_secs(1)).await;
                let now = cpu_time(pid);
                if now.saturating_sub(last) < Duration::from_millis(150) {
                    break;
                }
                last = now;
            }
        }
        stop.store(true, Ordering::SeqCst);
        statuses
    };
    let ((ok, failures), statuses) = tokio::join!(client, attack);
    let spent = cpu_time(pid).saturating_sub(before);

    assert_eq!(statuses, vec![200; BOMBS]);
    assert_none_failed(ok, &failures);
    // Three bombs, 1 s of budget each, plus reading 20 MiB over TLS and the well-behaved
    // client's requests: under 3 s, the three budgets together (the count of patch texts
    // stops each bomb long before its deadline). The webhook that checked the deadline
    // between entries only spent about 2 s on each bomb.
    assert!(
        spent < Duration::from_secs(3),
        "{spent:?} of CPU for {BOMBS} Flux bombs and {ok} small reviews"
    );
    eprintln!("{spent:?} of CPU for {BOMBS} Flux bombs and {ok} small reviews");
}
