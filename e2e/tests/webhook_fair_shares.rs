//! One client cannot make the fail-closed webhook refuse the API server: each attack shape
//! runs against the release build over real TLS on loopback, next to a client that behaves
//! like the API server (16 keep-alive connections, idle between requests) and a prober that
//! behaves like the kubelet (a new connection for each probe, on the metrics port). Each
//! test asserts: no request of either failed, the webhook's peak resident memory (VmHWM)
//! stayed under the chart's memory limit, and the attacker got no more than its share (its
//! own connections closed or its bodies refused while the others were served).
//!
//! Peers are told apart by source address: the API server connects from 127.0.0.2, the
//! prober from 127.0.0.3, the attacker from 127.0.0.4 (all of 127.0.0.0/8 is local on
//! Linux).
//!
//! Scaled for a test run: a shape runs for about 20 s, not minutes, and the caps and the body
//! pool are set lower than their defaults so that a few hundred connections reach them. The
//! share rule does not depend on the sizes: a peer's share is the cap (or pool) divided by
//! the peers present. The API server's idle times (up to 6 s here, 90 s in a cluster) are
//! kept longer than the attacker's refresh period (2 s), which is what made an idle API
//! server connection the first one evicted before the shares.
//!
//! The time limits are generous (a request may take up to 30 s, the longest webhook timeout
//! Kubernetes allows; a probe 10 s): they catch a request that never gets an answer, not a
//! slow one. The shapes run one at a time (the machine running them may be small).
//!
//! Needs `cargo build --release` first (`make build`).

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use styrmin_e2e::webhook::*;
use tokio::io::AsyncWriteExt as _;
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

const API_SERVER: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
const KUBELET: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 3));
const ATTACKER: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 4));
/// The chart's memory limit (`resources.limits.memory`, 256Mi), in KiB.
const MEMORY_LIMIT_KIB: u64 = 256 * 1024;
/// How long one shape's attack runs while the API server and the prober are measured.
const ATTACK: Duration = Duration::from_secs(20);
/// The longest the API server waits for an answer (Kubernetes allows 30 s at most).
const REQUEST_LIMIT: Duration = Duration::from_secs(30);
/// The longest a probe waits.
const PROBE_LIMIT: Duration = Duration::from_secs(10);
/// The API server's connections and the longest it idles between two requests on one.
const API_CONNECTIONS: usize = 16;
const API_LONGEST_IDLE: Duration = Duration::from_secs(6);
/// How often the attacker refreshes what it holds.
const REFRESH: Duration = Duration::from_secs(2);

/// The shapes run one at a time.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Sleeps `period`, or less once `stop` is set.
async fn pause(period: Duration, stop: &AtomicBool) {
    let step = Duration::from_millis(50);
    let mut slept = Duration::ZERO;
    while slept < period && !stop.load(Ordering::SeqCst) {
        tokio::time::sleep(step.min(period - slept)).await;
        slept += step;
    }
}

/// What one well-behaved client saw: answers right, and the failures (with why).
#[derive(Debug, Default)]
struct Seen {
    ok: usize,
    failures: Vec<String>,
}

impl Seen {
    fn add(&mut self, other: Seen) {
        self.ok += other.ok;
        self.failures.extend(other.failures);
    }
}

/// The API server: 16 keep-alive connections from its own address, each sending a valid
/// Ingress review and idling between requests (a quarter, half, three quarters or all of
/// the longest idle, in turn). A connection the webhook closed while it idled is a failure
/// too (the webhook's idle timeout, 120 s, is far longer than these idles).
fn api_server(
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
    stop: Arc<AtomicBool>,
) -> JoinHandle<Seen> {
    tokio::spawn(async move {
        let body = review_in(INGRESS, "styrmin-web1");
        let expected = (None, Some("traefik".to_owned()));
        let connections: Vec<JoinHandle<Seen>> = (0..API_CONNECTIONS)
            .map(|i| {
                let (config, stop, body, expected) =
                    (config.clone(), stop.clone(), body.clone(), expected.clone());
                tokio::spawn(async move {
                    let mut seen = Seen::default();
                    let open = || {
                        Connection::open_from(Some(API_SERVER), addr, config.clone(), SERVER_NAME)
                    };
                    let mut conn = None;
                    let mut round = 0u32;
                    while !stop.load(Ordering::SeqCst) {
                        match &conn {
                            Some(c) if Connection::is_closed(c) => {
                                seen.failures
                                    .push("closed by the webhook while idle".into());
                                conn = None;
                            }
                            _ => {}
                        }
                        if conn.is_none() {
                            match tokio::time::timeout(REQUEST_LIMIT, open()).await {
                                Ok(Ok(c)) => conn = Some(c),
                                other => {
                                    seen.failures.push(format!("connect: {other:?}"));
                                    pause(Duration::from_millis(200), &stop).await;
                                    continue;
                                }
                            }
                        }
                        let Some(c) = conn.as_mut() else { continue };
                        match tokio::time::timeout(REQUEST_LIMIT, c.review(&body)).await {
                            Ok(Ok(answer)) if classes(&patched(&body, &answer)) == expected => {
                                seen.ok += 1;
                            }
                            Ok(Ok(answer)) => seen.failures.push(format!("wrong answer {answer}")),
                            Ok(Err(error)) => {
                                seen.failures.push(error);
                                conn = None;
                            }
                            Err(_) => {
                                seen.failures
                                    .push(format!("no answer within {REQUEST_LIMIT:?}"));
                                conn = None;
                            }
                        }
                        let quarters = (i as u32 + round) % 4 + 1;
                        pause(API_LONGEST_IDLE * quarters / 4, &stop).await;
                        round += 1;
                    }
                    seen
                })
            })
            .collect();
        let mut seen = Seen::default();
        for connection in connections {
            seen.add(connection.await.unwrap());
        }
        seen
    })
}

/// `GET path` on a new connection from the kubelet's address, as its HTTP probes do.
async fn probe(metrics_addr: SocketAddr, path: &str) -> Result<(), String> {
    let mut tcp = connect_from(Some(KUBELET), metrics_addr)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    tcp.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await
    .map_err(|e| format!("write: {e}"))?;
    let (answer, closed) = read_until_closed(&mut tcp, PROBE_LIMIT).await;
    match answer.lines().next() {
        Some(line) if line.starts_with("HTTP/1.1 200") && closed => Ok(()),
        first => Err(format!("{path}: {first:?} (closed: {closed})")),
    }
}

/// The kubelet: `/readyz` and `/healthz` every 250 ms, each on a new connection.
fn kubelet(metrics_addr: SocketAddr, stop: Arc<AtomicBool>) -> JoinHandle<Seen> {
    tokio::spawn(async move {
        let mut seen = Seen::default();
        while !stop.load(Ordering::SeqCst) {
            for path in ["/readyz", "/healthz"] {
                match probe(metrics_addr, path).await {
                    Ok(()) => seen.ok += 1,
                    Err(error) => seen.failures.push(error),
                }
            }
            pause(Duration::from_millis(250), &stop).await;
        }
        seen
    })
}

/// A TCP connection from the attacker's address whose receive buffer is small, so that
/// answers it does not read fill the webhook's side quickly.
async fn attacker_tcp(addr: SocketAddr, small_receive_buffer: bool) -> std::io::Result<TcpStream> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(ATTACKER, 0))?;
    if small_receive_buffer {
        socket.set_recv_buffer_size(4096)?;
    }
    socket.connect(addr).await
}

/// What every shape checks at its end.
struct Measurement {
    api: Seen,
    kubelet: Seen,
    peak_kib: u64,
    metrics: String,
}

impl Measurement {
    fn assert_fair(&self, shape: &str) {
        println!(
            "{shape}: API server {} answered, {} failed; kubelet {} probes answered, {} failed; \
             webhook peak RSS {} MiB",
            self.api.ok,
            self.api.failures.len(),
            self.kubelet.ok,
            self.kubelet.failures.len(),
            self.peak_kib / 1024
        );
        assert!(
            self.api.failures.is_empty(),
            "{shape}: {} of the API server's requests failed: {:?}",
            self.api.failures.len(),
            &self.api.failures[..self.api.failures.len().min(5)]
        );
        assert!(
            self.kubelet.failures.is_empty(),
            "{shape}: {} probes failed: {:?}",
            self.kubelet.failures.len(),
            &self.kubelet.failures[..self.kubelet.failures.len().min(5)]
        );
        // Both kept working throughout (at least one request per connection, one probe a
        // second): a client that got nothing at all has not been served fairly either.
        assert!(self.api.ok >= API_CONNECTIONS, "{shape}: {}", self.api.ok);
        assert!(
            self.kubelet.ok >= ATTACK.as_secs() as usize,
            "{shape}: {}",
            self.kubelet.ok
        );
        assert!(
            self.peak_kib < MEMORY_LIMIT_KIB,
            "{shape}: peak RSS {} KiB over the chart's limit",
            self.peak_kib
        );
    }
}

/// Starts the API server and the kubelet next to an attack already under way,
/// lets them run for [`ATTACK`], stops them and reads the webhook.
async fn measure(webhook: &Webhook, config: &Arc<rustls::ClientConfig>) -> Measurement {
    let stop = Arc::new(AtomicBool::new(false));
    let api = api_server(webhook.addr, config.clone(), stop.clone());
    let probes = kubelet(webhook.metrics_addr, stop.clone());
    tokio::time::sleep(ATTACK).await;
    stop.store(true, Ordering::SeqCst);
    let api = api.await.unwrap();
    let kubelet = probes.await.unwrap();
    Measurement {
        api,
        kubelet,
        peak_kib: peak_rss_kib(webhook.child.id()),
        metrics: webhook.metrics(),
    }
}

/// Shape 1: answers nobody reads. 10 connections on the HTTPS port pipeline 80 reviews with a
/// 64 KiB uid each and never read; 10 on the metrics port pipeline 1,000 `GET /metrics` and
/// never read (either is more than the socket buffers on both sides hold).
/// The answers they leave unread are closed after the write timeout; their connections count
/// against the cap until then, and the cap's share keeps them from the API server's places.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn answers_nobody_reads_are_closed_and_count_until_closed() {
    let _one = ONE_AT_A_TIME.lock().await;
    const CAP: usize = 64;
    // How long the attacker leaves its answers unread: four write timeouts.
    const UNREAD: Duration = Duration::from_secs(8);
    let fx = Fixture::new();
    let config = fx.config.clone();
    let webhook = fx
        .start(&[
            ("--max-connections", "64"),
            ("--metrics-max-connections", "32"),
            ("--write-timeout-ms", "2000"),
        ])
        .await;
    let stop = Arc::new(AtomicBool::new(false));
    let mut review = review_in(INGRESS, "styrmin-web1");
    review["request"]["uid"] = json!("u".repeat(64 * 1024));
    let review = Arc::new(serde_json::to_vec(&review).unwrap());
    let peak_open = Arc::new(AtomicUsize::new(0));
    let mut attackers = Vec::new();
    for _ in 0..10 {
        let (config, stop, review) = (config.clone(), stop.clone(), review.clone());
        let addr = webhook.addr;
        attackers.push(tokio::spawn(async move {
            let mut closed = 0usize;
            while !stop.load(Ordering::SeqCst) {
                let Ok(tcp) = attacker_tcp(addr, true).await else {
                    pause(REFRESH, &stop).await;
                    continue;
                };
                let name = rustls::pki_types::ServerName::try_from(SERVER_NAME).unwrap();
                let Ok(mut tls) = tokio_rustls::TlsConnector::from(config.clone())
                    .connect(name, tcp)
                    .await
                else {
                    continue;
                };
                for _ in 0..80 {
                    if tls
                        .write_all(post_head(review.len()).as_bytes())
                        .await
                        .is_err()
                        || tls.write_all(&review).await.is_err()
                    {
                        break;
                    }
                }
                // Reads nothing for four write timeouts; then whether the webhook closed it.
                pause(UNREAD, &stop).await;
                let (_, was_closed) = read_until_closed(&mut tls, TIMEOUT).await;
                closed += usize::from(was_closed);
            }
            closed
        }));
    }
    for _ in 0..10 {
        let stop = stop.clone();
        let addr = webhook.metrics_addr;
        attackers.push(tokio::spawn(async move {
            let mut closed = 0usize;
            while !stop.load(Ordering::SeqCst) {
                let Ok(mut tcp) = attacker_tcp(addr, true).await else {
                    pause(REFRESH, &stop).await;
                    continue;
                };
                let pipeline = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n".repeat(1000);
                let _ = tcp.write_all(pipeline.as_bytes()).await;
                pause(UNREAD, &stop).await;
                let (_, was_closed) = read_until_closed(&mut tcp, TIMEOUT).await;
                closed += usize::from(was_closed);
            }
            closed
        }));
    }
    let watcher = {
        let (stop, peak_open) = (stop.clone(), peak_open.clone());
        let metrics_addr = webhook.metrics_addr;
        tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                if let Ok(text) =
                    tokio::time::timeout(PROBE_LIMIT, metrics_text(metrics_addr)).await
                {
                    let open = open_connections(&text, "https") as usize;
                    peak_open.fetch_max(open, Ordering::SeqCst);
                }
                pause(Duration::from_millis(500), &stop).await;
            }
        })
    };
    let outcome = measure(&webhook, &config).await;
    stop.store(true, Ordering::SeqCst);
    watcher.await.unwrap();
    let mut closed_by_webhook = 0;
    for attacker in attackers {
        closed_by_webhook += attacker.await.unwrap();
    }
    let metrics = webhook.metrics();
    let write_timeouts = rejected(&metrics, "https", "write_timeout")
        + rejected(&metrics, "metrics", "write_timeout");
    println!(
        "unread answers: attacker connections closed by the webhook {closed_by_webhook}, \
         write timeouts {write_timeouts}, most HTTPS connections open at once {}",
        peak_open.load(Ordering::SeqCst)
    );
    outcome.assert_fair("unread answers");
    // The attacker's connections were closed under it (it never closed one itself), and the
    // cap held: a connection counts until its socket is closed.
    assert!(closed_by_webhook >= 20, "{closed_by_webhook}");
    // Which listener's unread answers reach the timeout first depends on the machine's load;
    // the closed connections above are the guarantee.
    assert!(write_timeouts >= 1.0, "{metrics}");
    // An evicted connection is closed at its task's next poll: the gauge may count a few of
    // them for a moment. Before the write timeout, 80 stayed open against a cap of 20.
    assert!(
        peak_open.load(Ordering::SeqCst) <= CAP + CAP / 4,
        "{}",
        peak_open.load(Ordering::SeqCst)
    );
}

/// `/metrics` on a new connection (from the test's own address, not a peer under test).
async fn metrics_text(metrics_addr: SocketAddr) -> String {
    let mut tcp = TcpStream::connect(metrics_addr).await.unwrap();
    tcp.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    read_until_closed(&mut tcp, PROBE_LIMIT).await.0
}

/// Shape 2: the body pool held by one client. 160 keep-alive connections hold 64 KiB bodies
/// (each sends all but the last byte, then, every refresh, the last byte and the next body
/// but its last byte), and 40 send chunked bodies that grow and never end: more than the
/// whole pool (8 MiB here). The API server's small reviews take their bytes back from the
/// attacker, which is over its share.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_body_pool_cannot_be_held_against_another_peer() {
    let _one = ONE_AT_A_TIME.lock().await;
    const BODY: usize = 64 * 1024;
    let fx = Fixture::new();
    let config = fx.config.clone();
    let webhook = fx.start(&[("--body-budget-mib", "8")]).await;
    let stop = Arc::new(AtomicBool::new(false));
    let mut attackers = Vec::new();
    for _ in 0..160 {
        let (config, stop) = (config.clone(), stop.clone());
        let addr = webhook.addr;
        attackers.push(tokio::spawn(async move {
            let body = vec![b' '; BODY];
            while !stop.load(Ordering::SeqCst) {
                let Ok(mut tls) = raw_tls_from(Some(ATTACKER), addr, config.clone()).await else {
                    pause(Duration::from_millis(100), &stop).await;
                    continue;
                };
                let mut first = true;
                loop {
                    let mut bytes = Vec::new();
                    if !first {
                        bytes.push(b' ');
                    }
                    bytes.extend_from_slice(post_head(BODY).as_bytes());
                    bytes.extend_from_slice(&body[..BODY - 1]);
                    first = false;
                    if tls.write_all(&bytes).await.is_err() || stop.load(Ordering::SeqCst) {
                        break;
                    }
                    pause(REFRESH, &stop).await;
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                }
            }
        }));
    }
    for _ in 0..40 {
        let (config, stop) = (config.clone(), stop.clone());
        let addr = webhook.addr;
        attackers.push(tokio::spawn(async move {
            let chunk = format!("{:x}\r\n{}\r\n", BODY, " ".repeat(BODY));
            while !stop.load(Ordering::SeqCst) {
                let Ok(mut tls) = raw_tls_from(Some(ATTACKER), addr, config.clone()).await else {
                    pause(Duration::from_millis(100), &stop).await;
                    continue;
                };
                let head = format!(
                    "POST /mutate HTTP/1.1\r\nHost: {SERVER_NAME}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                );
                if tls.write_all(head.as_bytes()).await.is_err() {
                    continue;
                }
                while !stop.load(Ordering::SeqCst) {
                    if tls.write_all(chunk.as_bytes()).await.is_err() {
                        break;
                    }
                    pause(REFRESH / 4, &stop).await;
                }
            }
        }));
    }
    // The attacker first fills the pool.
    eventually("the attacker to fill the pool", || {
        series(
            &webhook.metrics(),
            "styrmin_webhook_request_body_bytes_in_flight",
        ) >= (7 * 1024 * 1024) as f64
    })
    .await;
    let outcome = measure(&webhook, &config).await;
    stop.store(true, Ordering::SeqCst);
    for attacker in attackers {
        attacker.abort();
    }
    let metrics = &outcome.metrics;
    let taken_back = rejected(metrics, "https", "body_share");
    let refused = rejected(metrics, "https", "body_budget");
    println!(
        "body pool: attacker's bodies cut for another peer {taken_back}, refused over its share {refused}"
    );
    outcome.assert_fair("body pool");
    // The attacker was held to its share: its bodies were cut for the API server's.
    assert!(taken_back >= 1.0, "{metrics}");
}

/// Shape 3: every connection place busy. 150 connections keep a request in flight (a body
/// byte every refresh), and 5 more connect each second, against a cap of 100. The API server
/// connects after the cap is full: it is within its share, so it takes the places of the
/// attacker's connections, busy ones too.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn busy_connections_cannot_keep_another_peer_out() {
    let _one = ONE_AT_A_TIME.lock().await;
    const CAP: usize = 100;
    let fx = Fixture::new();
    let config = fx.config.clone();
    let webhook = fx.start(&[("--max-connections", "100")]).await;
    let stop = Arc::new(AtomicBool::new(false));
    let busy = |stop: Arc<AtomicBool>, config: Arc<rustls::ClientConfig>, addr: SocketAddr| async move {
        while !stop.load(Ordering::SeqCst) {
            let Ok(mut tls) = raw_tls_from(Some(ATTACKER), addr, config.clone()).await else {
                pause(Duration::from_millis(200), &stop).await;
                continue;
            };
            if tls.write_all(post_head(1000).as_bytes()).await.is_err() {
                continue;
            }
            while !stop.load(Ordering::SeqCst) {
                if tls.write_all(b" ").await.is_err() {
                    break;
                }
                pause(REFRESH, &stop).await;
            }
        }
    };
    let mut attackers: Vec<JoinHandle<()>> = (0..150)
        .map(|_| tokio::spawn(busy(stop.clone(), config.clone(), webhook.addr)))
        .collect();
    {
        let (stop, config, addr) = (stop.clone(), config.clone(), webhook.addr);
        attackers.push(tokio::spawn(async move {
            let mut more = Vec::new();
            while !stop.load(Ordering::SeqCst) && more.len() < 150 {
                for _ in 0..5 {
                    more.push(tokio::spawn(busy(stop.clone(), config.clone(), addr)));
                }
                pause(Duration::from_secs(1), &stop).await;
            }
            for task in more {
                task.abort();
            }
        }));
    }
    eventually("the attacker to fill the cap", || {
        open_connections(&webhook.metrics(), "https") >= CAP as f64
    })
    .await;
    let outcome = measure(&webhook, &config).await;
    stop.store(true, Ordering::SeqCst);
    for attacker in attackers {
        attacker.abort();
    }
    let metrics = &outcome.metrics;
    let busy_closed = rejected(metrics, "https", "cap_busy_closed");
    let own_closed =
        rejected(metrics, "https", "cap_idle_closed") + rejected(metrics, "https", "cap");
    println!(
        "busy places: attacker's busy connections closed for another peer {busy_closed}, \
         its new ones refused or closed among its own {own_closed}"
    );
    outcome.assert_fair("busy places");
    // The attacker reached its share and went on at its own expense (its connections were
    // the ones closed or refused; whether busy or just connected depends on the moment).
    assert!(own_closed + busy_closed >= 1.0, "{metrics}");
}

/// Shape 5: the metrics port flooded. 80 keep-alive connections send `GET /healthz` every
/// refresh and 50 new ones connect each second (and stay), against the metrics cap of 64:
/// the kubelet's new connections are within its share and never the ones closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn probes_cannot_be_starved_on_the_metrics_port() {
    let _one = ONE_AT_A_TIME.lock().await;
    let fx = Fixture::new();
    let config = fx.config.clone();
    let webhook = fx.start(&[]).await;
    let stop = Arc::new(AtomicBool::new(false));
    let addr = webhook.metrics_addr;
    let keep_alive = |stop: Arc<AtomicBool>| async move {
        while !stop.load(Ordering::SeqCst) {
            let Ok(mut tcp) = attacker_tcp(addr, false).await else {
                pause(Duration::from_millis(100), &stop).await;
                continue;
            };
            while !stop.load(Ordering::SeqCst) {
                if tcp
                    .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                    .await
                    .is_err()
                {
                    break;
                }
                pause(REFRESH, &stop).await;
            }
        }
    };
    let mut attackers: Vec<JoinHandle<()>> = (0..80)
        .map(|_| tokio::spawn(keep_alive(stop.clone())))
        .collect();
    {
        let stop = stop.clone();
        attackers.push(tokio::spawn(async move {
            let mut held = Vec::new();
            while !stop.load(Ordering::SeqCst) && held.len() < 1500 {
                for _ in 0..50 {
                    if let Ok(mut tcp) = attacker_tcp(addr, false).await {
                        let _ = tcp
                            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                            .await;
                        held.push(tcp);
                    }
                }
                pause(Duration::from_secs(1), &stop).await;
            }
        }));
    }
    let outcome = measure(&webhook, &config).await;
    stop.store(true, Ordering::SeqCst);
    for attacker in attackers {
        attacker.abort();
    }
    let metrics = &outcome.metrics;
    let own_closed = rejected(metrics, "metrics", "cap_idle_closed")
        + rejected(metrics, "metrics", "cap_busy_closed")
        + rejected(metrics, "metrics", "cap");
    println!("probes: attacker's connections closed or refused at the metrics cap {own_closed}");
    outcome.assert_fair("probes");
    assert!(own_closed >= 1.0, "{metrics}");
}

/// Shape 6: the cap's evictions. 250 keep-alive connections send `GET /healthz` every
/// refresh and 50 new ones connect each second, against a cap of 200: each new connection
/// of the attacker closes one of its own, never one of the API server's idle connections.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_cap_never_evicts_the_api_servers_connections() {
    let _one = ONE_AT_A_TIME.lock().await;
    let fx = Fixture::new();
    let config = fx.config.clone();
    let webhook = fx.start(&[("--max-connections", "200")]).await;
    let stop = Arc::new(AtomicBool::new(false));
    let addr = webhook.addr;
    let get = format!("GET /healthz HTTP/1.1\r\nHost: {SERVER_NAME}\r\n\r\n");
    let keep_alive = |stop: Arc<AtomicBool>, config: Arc<rustls::ClientConfig>, get: String| async move {
        while !stop.load(Ordering::SeqCst) {
            let Ok(mut tls) = raw_tls_from(Some(ATTACKER), addr, config.clone()).await else {
                pause(Duration::from_millis(100), &stop).await;
                continue;
            };
            while !stop.load(Ordering::SeqCst) {
                if tls.write_all(get.as_bytes()).await.is_err() {
                    break;
                }
                pause(REFRESH, &stop).await;
            }
        }
    };
    let mut attackers: Vec<JoinHandle<()>> = (0..250)
        .map(|_| tokio::spawn(keep_alive(stop.clone(), config.clone(), get.clone())))
        .collect();
    let new_connections = Arc::new(AtomicUsize::new(0));
    {
        let (stop, config, get, count) = (
            stop.clone(),
            config.clone(),
            get.clone(),
            new_connections.clone(),
        );
        attackers.push(tokio::spawn(async move {
            let held = Arc::new(Mutex::new(Vec::new()));
            while !stop.load(Ordering::SeqCst) && count.load(Ordering::SeqCst) < 1500 {
                for _ in 0..50 {
                    if let Ok(mut tls) = raw_tls_from(Some(ATTACKER), addr, config.clone()).await {
                        let _ = tls.write_all(get.as_bytes()).await;
                        held.lock().unwrap().push(tls);
                        count.fetch_add(1, Ordering::SeqCst);
                    }
                }
                pause(Duration::from_secs(1), &stop).await;
            }
        }));
    }
    let outcome = measure(&webhook, &config).await;
    stop.store(true, Ordering::SeqCst);
    for attacker in attackers {
        attacker.abort();
    }
    let metrics = &outcome.metrics;
    let own_closed = rejected(metrics, "https", "cap_idle_closed")
        + rejected(metrics, "https", "cap_busy_closed");
    println!(
        "cap evictions: {} new attacker connections; attacker's connections closed at the cap {own_closed}",
        new_connections.load(Ordering::SeqCst)
    );
    outcome.assert_fair("cap evictions");
    assert!(own_closed >= 1.0, "{metrics}");
}

/// A client CA (written to `dir/client-ca.crt`) and a client certificate it signed, like the
/// one an API server presents to webhooks (`kubeConfigFile` with `client-certificate-data`):
/// CN `kube-apiserver`, extended key usage clientAuth. Made with rcgen, as `styrmin-certs`
/// makes its certificates.
fn client_pki(
    dir: &std::path::Path,
    name: &str,
) -> (
    std::path::PathBuf,
    Vec<rustls_pki_types::CertificateDer<'static>>,
    rustls_pki_types::PrivateKeyDer<'static>,
) {
    use rcgen::{
        BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose,
        IsCa, Issuer, KeyPair, KeyUsagePurpose,
    };
    use rustls_pki_types::pem::PemObject as _;
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, format!("{name} webhook client CA"));
    ca.distinguished_name = dn;
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let ca_path = dir.join(format!("{name}-client-ca.crt"));
    std::fs::write(&ca_path, ca_cert.pem()).unwrap();
    let issuer = Issuer::from_ca_cert_pem(&ca_cert.pem(), ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let mut leaf = CertificateParams::new(Vec::<String>::new()).unwrap();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, "kube-apiserver");
    leaf.distinguished_name = dn;
    leaf.is_ca = IsCa::ExplicitNoCa;
    leaf.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    leaf.use_authority_key_identifier_extension = true;
    let cert = leaf.signed_by(&key, &issuer).unwrap();
    let key =
        rustls_pki_types::PrivateKeyDer::from_pem_slice(key.serialize_pem().as_bytes()).unwrap();
    (ca_path, vec![cert.der().clone()], key)
}

/// With `--client-ca-file`, an attacker without a client certificate never gets past the TLS
/// handshake: its stalled bodies and busy connections never reach HTTP and spend nothing,
/// while the API server with its certificate is served. A certificate from another CA is
/// refused as well.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn under_mutual_tls_clients_without_a_certificate_never_reach_http() {
    let _one = ONE_AT_A_TIME.lock().await;
    let fx = Fixture::new();
    let scratch = tempfile::tempdir().unwrap();
    let (ca_path, chain, key) = client_pki(scratch.path(), "api-server");
    let webhook = fx
        .start(&[("--client-ca-file", ca_path.to_str().unwrap())])
        .await;
    let with_cert = client_config(&fx.certs.bundle(), Some((chain, key)));
    let (_, other_chain, other_key) = client_pki(scratch.path(), "other");
    let other_ca = client_config(&fx.certs.bundle(), Some((other_chain, other_key)));

    let stop = Arc::new(AtomicBool::new(false));
    let http_answers = Arc::new(AtomicUsize::new(0));
    let attempts = Arc::new(AtomicUsize::new(0));
    let attackers: Vec<JoinHandle<()>> = (0..100)
        .map(|i| {
            let config = if i % 10 == 0 {
                other_ca.clone()
            } else {
                fx.config.clone()
            };
            let (stop, http_answers, attempts) =
                (stop.clone(), http_answers.clone(), attempts.clone());
            let addr = webhook.addr;
            tokio::spawn(async move {
                while !stop.load(Ordering::SeqCst) {
                    attempts.fetch_add(1, Ordering::SeqCst);
                    // TLS 1.3: the client may finish its side of the handshake before the
                    // webhook has checked its certificate; the webhook then aborts.
                    let Ok(mut tls) = raw_tls_from(Some(ATTACKER), addr, config.clone()).await
                    else {
                        pause(Duration::from_millis(100), &stop).await;
                        continue;
                    };
                    // A stalled 64 KiB body, or a busy request: whatever gets through.
                    let _ = tls.write_all(post_head(64 * 1024).as_bytes()).await;
                    let _ = tls.write_all(&[b' '; 1000]).await;
                    let (answer, _) = read_until_closed(&mut tls, Duration::from_secs(2)).await;
                    if answer.contains("HTTP/1.") {
                        http_answers.fetch_add(1, Ordering::SeqCst);
                    }
                }
            })
        })
        .collect();
    let outcome = measure(&webhook, &with_cert).await;
    stop.store(true, Ordering::SeqCst);
    for attacker in attackers {
        attacker.await.unwrap();
    }
    let metrics = &outcome.metrics;
    println!(
        "mutual TLS: {} attacker connections without a valid client certificate, {} HTTP answers to them",
        attempts.load(Ordering::SeqCst),
        http_answers.load(Ordering::SeqCst)
    );
    outcome.assert_fair("mutual TLS");
    assert!(attempts.load(Ordering::SeqCst) >= 100);
    assert_eq!(http_answers.load(Ordering::SeqCst), 0);
    // Nothing of theirs reached the body budget or the router.
    for reason in ["body_budget", "body_share", "body_timeout"] {
        assert_eq!(
            rejected(metrics, "https", reason),
            0.0,
            "{reason}: {metrics}"
        );
    }
    assert!(!metrics.contains(r#"outcome="bad_request""#), "{metrics}");
}

/// The client CA bundle is re-read when its file changes, like the serving certificate: after
/// a swap, new handshakes need a certificate from the new CA, and a bundle that is not PEM
/// keeps the last good one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_ca_bundle_is_reloaded() {
    let _one = ONE_AT_A_TIME.lock().await;
    let fx = Fixture::new();
    let scratch = tempfile::tempdir().unwrap();
    let (ca_path, chain, key) = client_pki(scratch.path(), "first");
    let (second_ca, second_chain, second_key) = client_pki(scratch.path(), "second");
    let webhook = fx
        .start(&[("--client-ca-file", ca_path.to_str().unwrap())])
        .await;
    let first = client_config(&fx.certs.bundle(), Some((chain, key)));
    let second = client_config(&fx.certs.bundle(), Some((second_chain, second_key)));
    let body = review_in(INGRESS, "styrmin-web1");
    let served = |config: Arc<rustls::ClientConfig>| {
        let body = body.clone();
        let addr = webhook.addr;
        async move {
            match Connection::open(addr, config, SERVER_NAME).await {
                Ok(mut conn) => conn.review(&body).await.is_ok(),
                Err(_) => false,
            }
        }
    };
    assert!(served(first.clone()).await);
    assert!(!served(second.clone()).await);
    // A bundle that is not PEM: the current one is kept.
    std::fs::write(&ca_path, "not a certificate\n").unwrap();
    eventually("the refusal log line", || {
        webhook.logged("new client CA bundle is not usable; keeping the current one") == 1
    })
    .await;
    assert!(served(first.clone()).await);
    // The second CA: its certificate is served, the first one's no longer.
    std::fs::copy(&second_ca, &ca_path).unwrap();
    eventually("the reload log line", || {
        webhook.logged("client CA bundle reloaded") == 1
    })
    .await;
    assert!(served(second).await);
    assert!(!served(first).await);
}
