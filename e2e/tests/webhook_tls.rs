//! End to end over real TLS: the release binaries `styrmin-certs` and `styrmin-webhook`, and a
//! client that verifies the server as the API server does (only the CA bundle that
//! `styrmin-certs` wrote into the webhook configuration, server name
//! `<service>.<namespace>.svc`). Also: the TLS versions and ciphers offered, no plaintext
//! listener but the metrics port, certificate rotation under load, SIGTERM under load, a policy
//! file replaced by garbage and then fixed, and one caught half-written. The budgets over the
//! same TLS are in `webhook_budgets.rs`.
//!
//! Needs `cargo build --release` first (`make build`); traffic stays on 127.0.0.1.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::io::{Read as _, Write as _};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustls_pki_types::CertificateDer;
use serde_json::{Value, json};
use styrmin_e2e::webhook::*;

#[tokio::test]
async fn tls_end_to_end_with_the_fixtures() {
    let fx = Fixture::new();
    let webhook = fx.start(&[]).await;
    let config = fx.config.clone();
    let mut conn = Connection::open(webhook.addr, config.clone(), SERVER_NAME)
        .await
        .unwrap();

    for (name, namespace, expected) in [
        (INGRESS, "styrmin-web1", (None, Some("traefik"))),
        (
            "kubewarden-safe-annotations-policy__ingress-v1-with-annotations.request.json",
            "styrmin-web1",
            (None, Some("traefik")),
        ),
        (
            "kubewarden-ingress-policy__ingress-v1-create__wildcard-host.request.json",
            "styrmin-web2",
            (Some("haproxy"), Some("haproxy")),
        ),
        (
            "kubewarden-unique-ingress-policy__ingress-v1-create.request.json",
            "styrmin-other",
            (Some("contour"), Some("contour")),
        ),
        (
            "crafted__ingress-extensions-v1beta1-create.json",
            "styrmin-web1",
            (None, Some("traefik")),
        ),
        (
            "crafted__ingress-v1-update__with-old-object.json",
            "styrmin-web2",
            (Some("haproxy"), Some("haproxy")),
        ),
    ] {
        let body = review_in(name, namespace);
        let answer = conn.review(&body).await.unwrap();
        assert_eq!(answer["response"]["allowed"], true, "{name}");
        let object = patched(&body, &answer);
        let expected = (expected.0.map(str::to_owned), expected.1.map(str::to_owned));
        assert_eq!(classes(&object), expected, "{name} in {namespace}");
        // R8: the patched object gets no patch.
        let mut again = body.clone();
        again["request"]["object"] = object;
        assert!(
            conn.review(&again).await.unwrap()["response"]
                .get("patch")
                .is_none(),
            "{name}"
        );
    }

    // Unmanaged namespace and a Pod: allowed, no patch.
    for (name, namespace) in [
        (INGRESS, "default"),
        ("kube-rs__pod-create-v1__gke-capture.json", "styrmin-web1"),
    ] {
        let body = review_in(name, namespace);
        let answer = conn.review(&body).await.unwrap();
        assert_eq!(
            answer["response"],
            json!({"uid": body["request"]["uid"], "allowed": true}),
            "{name}"
        );
    }

    // W2 over the wire.
    let body = review_in("crafted__helmrelease-v2-upgrade.json", "styrmin-web1");
    let answer = conn.review(&body).await.unwrap();
    assert_eq!(answer["response"]["allowed"], false);
    assert_eq!(answer["response"]["status"]["code"], 403);

    // The server is verified: a wrong name or another CA fails the handshake.
    let Err(ConnectError::NotAccepted(reason)) =
        Connection::open(webhook.addr, config.clone(), "other.styrmin-system.svc").await
    else {
        panic!("a wrong server name must fail verification");
    };
    assert!(reason.contains("certificate"), "{reason}");
    let other = tempfile::tempdir().unwrap();
    let other_certs = Certs::make(other.path());
    assert!(
        Connection::open(webhook.addr, tls_config(&other_certs.bundle()), SERVER_NAME)
            .await
            .is_err()
    );
    // The .svc.cluster.local name is in the certificate too.
    assert!(
        Connection::open(
            webhook.addr,
            config,
            "styrmin-webhook.styrmin-system.svc.cluster.local"
        )
        .await
        .is_ok()
    );

    let metrics = webhook.metrics();
    assert!(
        metrics.contains(r#"kind="Ingress",operation="CREATE",outcome="patched"}"#),
        "{metrics}"
    );
    assert!(
        metrics.contains("styrmin_webhook_certificate_expiry_timestamp_seconds"),
        "{metrics}"
    );
}

/// Workers that send reviews until told to stop, each on its own connection, reconnecting
/// every few requests so that new handshakes happen throughout.
struct Load {
    stop: Arc<AtomicBool>,
    ok: Arc<AtomicUsize>,
    failures: Arc<Mutex<Vec<String>>>,
    certs_seen: Arc<Mutex<Vec<CertificateDer<'static>>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Load {
    fn start(
        addr: SocketAddr,
        config: Arc<rustls::ClientConfig>,
        workers: usize,
        reconnect_every: usize,
    ) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let ok = Arc::new(AtomicUsize::new(0));
        let failures = Arc::new(Mutex::new(Vec::new()));
        let certs_seen = Arc::new(Mutex::new(Vec::new()));
        let body = review_in(INGRESS, "styrmin-web1");
        let tasks = (0..workers)
            .map(|_| {
                let (stop, ok, failures, certs_seen, config, body) = (
                    stop.clone(),
                    ok.clone(),
                    failures.clone(),
                    certs_seen.clone(),
                    config.clone(),
                    body.clone(),
                );
                tokio::spawn(async move {
                    let mut conn: Option<Connection> = None;
                    let mut on_this_connection = 0;
                    while !stop.load(Ordering::SeqCst) {
                        if conn.as_ref().is_none_or(Connection::is_closed)
                            || on_this_connection >= reconnect_every
                        {
                            match Connection::open(addr, config.clone(), SERVER_NAME).await {
                                Ok(c) => {
                                    let mut seen = certs_seen.lock().unwrap();
                                    if !seen.contains(&c.peer_cert) {
                                        seen.push(c.peer_cert.clone());
                                    }
                                    conn = Some(c);
                                    on_this_connection = 0;
                                }
                                // Refused: the server stopped accepting (SIGTERM); nothing was sent.
                                Err(ConnectError::NotAccepted(_)) => return,
                            }
                        }
                        let Some(c) = conn.as_mut() else { return };
                        match c.review(&body).await {
                            // web1's environment has a dedicated ingress (R3): the annotation
                            // `traefik` and no spec.ingressClassName; anything else is a failure.
                            Ok(answer)
                                if classes(&patched(&body, &answer))
                                    == (None, Some("traefik".to_owned())) =>
                            {
                                ok.fetch_add(1, Ordering::SeqCst);
                            }
                            Ok(answer) => failures
                                .lock()
                                .unwrap()
                                .push(format!("wrong answer {answer}")),
                            Err(error) => {
                                // A connection the server closed before we sent is not a drop;
                                // hyper reports that as "not ready".
                                if !error.starts_with("connection not ready") {
                                    failures.lock().unwrap().push(error);
                                }
                                conn = None;
                            }
                        }
                        on_this_connection += 1;
                    }
                })
            })
            .collect();
        Load {
            stop,
            ok,
            failures,
            certs_seen,
            tasks,
        }
    }

    async fn wait_for_more(&self, count: usize) {
        let target = self.ok.load(Ordering::SeqCst) + count;
        let ok = self.ok.clone();
        eventually("more answered requests", || {
            ok.load(Ordering::SeqCst) >= target
        })
        .await;
    }

    async fn finish(self) -> (usize, Vec<String>, Vec<CertificateDer<'static>>) {
        self.stop.store(true, Ordering::SeqCst);
        for task in self.tasks {
            tokio::time::timeout(TIMEOUT, task)
                .await
                .expect("load worker finishes")
                .unwrap();
        }
        let failures = self.failures.lock().unwrap().clone();
        let certs = self.certs_seen.lock().unwrap().clone();
        (self.ok.load(Ordering::SeqCst), failures, certs)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificate_rotation_under_load_fails_no_request() {
    let fx = Fixture::new();
    let config = fx.config.clone();
    let first = fx.certs.serving_cert();
    let webhook = fx.start(&[]).await;
    let load = Load::start(webhook.addr, config, 4, 3);
    load.wait_for_more(100).await;
    let mut served = vec![first];
    for rotation in 1..=3 {
        fx.certs.rotate();
        let new = fx.certs.serving_cert();
        assert!(!served.contains(&new));
        served.push(new.clone());
        eventually("the reload log line", || {
            webhook.logged("serving certificate reloaded") >= rotation
        })
        .await;
        let seen = load.certs_seen.clone();
        eventually("a handshake with the new certificate", || {
            seen.lock().unwrap().contains(&new)
        })
        .await;
        load.wait_for_more(100).await;
    }
    let (ok, failures, seen) = load.finish().await;
    assert_none_failed(ok, &failures);
    assert!(seen.iter().all(|cert| served.contains(cert)));
    assert!(
        webhook
            .metrics()
            .contains("styrmin_webhook_certificate_reloads_total 3")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_under_load_refuses_no_request_while_readyz_says_503() {
    let fx = Fixture::new();
    let config = fx.config.clone();
    let mut webhook = fx.start(&[("--shutdown-delay-secs", "2")]).await;
    // A keep-alive connection that stays idle through the shutdown.
    let mut idle = Connection::open(webhook.addr, config.clone(), SERVER_NAME)
        .await
        .unwrap();
    idle.review(&review_in(INGRESS, "styrmin-web1"))
        .await
        .unwrap();
    let load = Load::start(webhook.addr, config, 8, 1000);
    load.wait_for_more(300).await;
    assert!(webhook.get("/readyz").starts_with("HTTP/1.1 200"));
    webhook.terminate();
    eventually("/readyz to answer 503", || {
        webhook.get("/readyz").starts_with("HTTP/1.1 503")
    })
    .await;
    // Not ready, and still serving: every answer closes its connection, and the workers'
    // new connections are accepted and answered until the delay has passed.
    load.wait_for_more(100).await;
    // The workers end on their own once the listener refuses them.
    let deadline = Instant::now() + TIMEOUT;
    while !load.tasks.iter().all(tokio::task::JoinHandle::is_finished) {
        assert!(
            Instant::now() < deadline,
            "workers still running after SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (ok, failures, _) = load.finish().await;
    assert!(
        failures.is_empty(),
        "{} dropped of {}: {:?}",
        failures.len(),
        ok + failures.len(),
        &failures[..failures.len().min(5)]
    );
    let status = loop {
        if let Some(status) = webhook.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "webhook did not exit after SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(status.success(), "{status}");
    assert_eq!(webhook.logged("drained"), 1);
    // The idle connection was closed when the listener closed, not at the drain timeout.
    assert!(idle.is_closed());
    assert_eq!(
        webhook.logged("drain timeout: closing the connections still open"),
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policy_file_replaced_by_garbage_then_fixed() {
    let fx = Fixture::new();
    let config = fx.config.clone();
    let policy = fx.policy.clone();
    let webhook = fx.start(&[]).await;
    let body = review_in(INGRESS, "styrmin-web1");
    let mut conn = Connection::open(webhook.addr, config.clone(), SERVER_NAME)
        .await
        .unwrap();
    let class = |answer: &Value| classes(&patched(&body, answer));
    assert_eq!(
        class(&conn.review(&body).await.unwrap()),
        (None, Some("traefik".to_owned()))
    );

    // Under load while the file turns to garbage: every answer keeps the last good policy
    // (the load counts an answer other than `traefik` for web1 as a failure).
    let load = Load::start(webhook.addr, config.clone(), 4, 50);
    load.wait_for_more(100).await;
    std::fs::write(&policy, "environments: {prod: [garbage\n").unwrap();
    eventually("the invalid-policy log line", || {
        webhook.logged("policy file is invalid; keeping the last good policy") == 1
    })
    .await;
    load.wait_for_more(200).await;
    let (ok, failures, _) = load.finish().await;
    eprintln!(
        "policy garbage under load: {ok} answered as before, {} failed",
        failures.len()
    );
    assert_none_failed(ok, &failures);
    assert!(ok >= 300, "only {ok} requests under load");
    assert_eq!(
        class(&conn.review(&body).await.unwrap()),
        (None, Some("traefik".to_owned())),
        "last good policy"
    );
    let metrics = webhook.metrics();
    assert!(
        metrics.contains(r#"styrmin_webhook_view_update_failures_total{source="policy-file"} 1"#),
        "{metrics}"
    );
    assert!(
        metrics.contains("styrmin_webhook_view_source_valid 0"),
        "{metrics}"
    );

    // Fixed: prod loses its dedicated ingress, so web1 gets prod's class.
    std::fs::write(
        &policy,
        "environments: {prod: {ingress_class: nginx}}\ndeployments: {web1: {environment: prod}}\n",
    )
    .unwrap();
    eventually("the reload log line", || {
        webhook.logged("policy file reloaded") == 1
    })
    .await;
    assert_eq!(
        class(&conn.review(&body).await.unwrap()),
        (Some("nginx".to_owned()), Some("nginx".to_owned()))
    );
    assert!(
        webhook
            .metrics()
            .contains("styrmin_webhook_view_source_valid 1")
    );
}

// ---------------------------------------------------------------------------------------
// Fault drill: malformed bodies mixed into valid traffic. Security: TLS versions and
// ciphers, listeners, header limits (SECURITY.md).

/// Runs `openssl s_client` against the webhook; whether the handshake succeeded, and what
/// it printed.
fn s_client(addr: SocketAddr, args: &[&str]) -> (bool, String) {
    let output = Command::new("openssl")
        .arg("s_client")
        .arg("-connect")
        .arg(addr.to_string())
        .args(["-servername", SERVER_NAME])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("openssl (SECURITY.md: the TLS checks need the openssl command)");
    let text = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    (
        output.status.success() && !text.contains("Cipher is (NONE)"),
        text,
    )
}

#[tokio::test]
async fn tls_versions_and_ciphers_offered() {
    let fx = Fixture::new();
    let webhook = fx.start(&[]).await;
    let ca = fx.certs.dir.join("ca.crt");
    let ca = ca.to_str().unwrap();
    // SECLEVEL=0 lets the client offer TLS 1.0 and 1.1 at all: the server must refuse them.
    for (version, accepted) in [
        ("-tls1", false),
        ("-tls1_1", false),
        ("-tls1_2", true),
        ("-tls1_3", true),
    ] {
        let (ok, text) = s_client(
            webhook.addr,
            &[version, "-cipher", "ALL:@SECLEVEL=0", "-CAfile", ca],
        );
        assert_eq!(ok, accepted, "{version}: {text}");
        if accepted {
            assert!(text.contains("Verify return code: 0 (ok)"), "{text}");
        }
    }
    // Every TLS 1.2 cipher this openssl knows, one at a time: only ECDHE with AEAD.
    let list = Command::new("openssl")
        .args(["ciphers", "-s", "-tls1_2", "ALL:@SECLEVEL=0"])
        .output()
        .unwrap();
    let list = String::from_utf8(list.stdout).unwrap();
    let ciphers: Vec<&str> = list.trim().split(':').collect();
    assert!(ciphers.len() > 30, "{list}");
    let accepted: Vec<&str> = ciphers
        .iter()
        .copied()
        .filter(|c| {
            s_client(
                webhook.addr,
                &["-tls1_2", "-cipher", &format!("{c}:@SECLEVEL=0")],
            )
            .0
        })
        .collect();
    println!(
        "TLS 1.2: {} of {} ciphers accepted: {accepted:?}",
        accepted.len(),
        ciphers.len()
    );
    assert_eq!(
        accepted,
        [
            "ECDHE-ECDSA-AES256-GCM-SHA384",
            "ECDHE-ECDSA-CHACHA20-POLY1305",
            "ECDHE-ECDSA-AES128-GCM-SHA256"
        ]
        .iter()
        .filter(|c| ciphers.contains(c))
        .copied()
        .collect::<Vec<_>>()
    );
    for suite in [
        "TLS_AES_128_GCM_SHA256",
        "TLS_AES_256_GCM_SHA384",
        "TLS_CHACHA20_POLY1305_SHA256",
    ] {
        let (ok, text) = s_client(webhook.addr, &["-tls1_3", "-ciphersuites", suite]);
        assert!(ok, "{suite}: {text}");
    }
}

/// The listening TCP sockets of a process: its socket inodes in /proc/net/tcp{,6} in state
/// LISTEN (0A), as local `address:port` in hex.
fn listening_sockets(pid: u32) -> Vec<String> {
    let inodes: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|target| {
            let t = target.to_string_lossy().into_owned();
            Some(t.strip_prefix("socket:[")?.strip_suffix(']')?.to_owned())
        })
        .collect();
    let mut found = Vec::new();
    for table in [
        "/proc/net/tcp",
        "/proc/net/tcp6",
        "/proc/net/udp",
        "/proc/net/udp6",
    ] {
        let text = std::fs::read_to_string(table).unwrap_or_default();
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let listening = fields[3] == "0A" || table.contains("udp");
            if listening && inodes.iter().any(|i| i == fields[9]) {
                found.push(format!("{table} {}", fields[1]));
            }
        }
    }
    found
}

#[tokio::test]
async fn no_plaintext_listener_but_the_metrics_port() {
    let fx = Fixture::new();
    let webhook = fx.start(&[]).await;
    // Exactly two listening sockets: HTTPS and metrics; no UDP.
    let sockets = listening_sockets(webhook.child.id());
    let port = |addr: SocketAddr| format!(":{:04X}", addr.port());
    assert_eq!(sockets.len(), 2, "{sockets:?}");
    assert!(
        sockets.iter().any(|s| s.ends_with(&port(webhook.addr))),
        "{sockets:?}"
    );
    assert!(
        sockets
            .iter()
            .any(|s| s.ends_with(&port(webhook.metrics_addr))),
        "{sockets:?}"
    );
    // Plain HTTP to the HTTPS port gets no HTTP answer (a TLS alert, or nothing).
    let mut stream = std::net::TcpStream::connect(webhook.addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
        .write_all(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
        .unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    assert!(
        !String::from_utf8_lossy(&answer).contains("HTTP/1."),
        "{:?}",
        String::from_utf8_lossy(&answer)
    );
    // The metrics port serves only /metrics, /healthz, /readyz: no /mutate.
    let mut stream = std::net::TcpStream::connect(webhook.metrics_addr).unwrap();
    stream
        .write_all(
            b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}",
        )
        .unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    assert!(text.starts_with("HTTP/1.1 404"), "{text}");
}

// ---------------------------------------------------------------------------------------
// Budgets (SECURITY.md, "Budgets"): clients that stall, trickle, hoard connections, send
// alias bombs or megabyte strings; a policy file caught half-written; SIGTERM in a rollout.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_file_caught_half_written_is_never_published() {
    const ROUNDS: usize = 4;
    let fx = Fixture::new();
    let config = fx.config.clone();
    let policy = fx.policy.clone();
    let webhook = fx.start(&[("--reload-interval-ms", "200")]).await;
    let original = std::fs::read_to_string(&policy).unwrap();
    // Every prefix of the file that ends before `deployments:` is valid YAML that would give
    // web1 the cluster's class (contour): the load counts any answer but traefik a failure.
    let load = Load::start(webhook.addr, config, 4, 50);
    load.wait_for_more(100).await;
    for round in 1..=ROUNDS {
        let text = format!("{original}# round {round}\n");
        let path = policy.clone();
        // Written in place, 16 bytes at a time, as an editor or `cp` would: several polls
        // read it half-written. Every other round the writer pauses longer than the poll
        // interval, so that two polls read the same half-written file.
        let pause = Duration::from_millis(if round % 2 == 0 { 250 } else { 2 });
        tokio::task::spawn_blocking(move || {
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .truncate(true)
                .open(&path)
                .unwrap();
            for piece in text.as_bytes().chunks(16) {
                file.write_all(piece).unwrap();
                file.flush().unwrap();
                std::thread::sleep(pause);
            }
        })
        .await
        .unwrap();
        eventually("the complete version published", || {
            webhook.logged("policy file reloaded") >= round
        })
        .await;
        load.wait_for_more(50).await;
    }
    let (ok, failures, _) = load.finish().await;
    println!(
        "policy file written in place {ROUNDS} times under load: {ok} answered, {} wrong; {} versions published",
        failures.len(),
        webhook.logged("policy file reloaded")
    );
    assert_none_failed(ok, &failures);
    // Only the complete versions were published, once each; no half one, no error.
    assert_eq!(webhook.logged("policy file reloaded"), ROUNDS);
    assert_eq!(
        webhook.logged("policy file is invalid; keeping the last good policy"),
        0
    );
}
