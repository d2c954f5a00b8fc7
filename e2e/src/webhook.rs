//! The webhook under test, over real TLS: the release binaries `styrmin-certs` and
//! `styrmin-webhook` started in a scratch directory, a client that verifies the server as the
//! API server does (only the CA bundle that `styrmin-certs` wrote into the webhook
//! configuration, server name `<service>.<namespace>.svc`), and what the tests read from the
//! running process (metrics series, resident memory, CPU time).
//!
//! Needs `cargo build --release` first (`make build`); traffic stays on loopback.

#![allow(clippy::unwrap_used, clippy::missing_panics_doc)] // test harness: a failed unwrap is a failed test

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject as _;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt as _};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::{release_binary, webhook_data, workspace_root};

pub const SERVICE: &str = "styrmin-webhook";
pub const NAMESPACE: &str = "styrmin-system";
pub const SERVER_NAME: &str = "styrmin-webhook.styrmin-system.svc";
pub const TIMEOUT: Duration = Duration::from_secs(20);

/// The lines `from` writes (a child's stderr), each as `line` makes it, collected on a
/// thread of their own until `from` closes.
pub fn collect_lines<T: Send + 'static>(
    from: impl std::io::Read + Send + 'static,
    line: fn(String) -> T,
) -> Arc<Mutex<Vec<T>>> {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = lines.clone();
    std::thread::spawn(move || {
        for text in BufReader::new(from).lines().map_while(Result::ok) {
            sink.lock().unwrap().push(line(text));
        }
    });
    lines
}

/// Polls `check` until it is true or the timeout passes.
pub async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + TIMEOUT;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[derive(Debug)]
pub struct Certs {
    pub dir: PathBuf,
    pub webhook_config: PathBuf,
}

impl Certs {
    /// Runs `styrmin-certs` into `dir`, filling a copy of the committed webhook configuration.
    pub fn make(dir: &Path) -> Certs {
        let webhook_config = dir.join("mutatingwebhookconfiguration.yaml");
        if !webhook_config.exists() {
            std::fs::copy(
                workspace_root().join("manifests/overlays/self-signed/webhook-ca-bundle.yaml"),
                &webhook_config,
            )
            .unwrap();
        }
        let certs = Certs {
            dir: dir.join("certs"),
            webhook_config,
        };
        certs.rotate();
        certs
    }

    /// A new serving certificate from the same CA (what a rotation does).
    pub fn rotate(&self) {
        let status = Command::new(release_binary("styrmin-certs"))
            .args([
                "--service",
                SERVICE,
                "--namespace",
                NAMESPACE,
                "--days",
                "2",
            ])
            .arg("--out-dir")
            .arg(&self.dir)
            .arg("--webhook-config")
            .arg(&self.webhook_config)
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// The CA, read back from the webhook configuration's caBundle, as the API server does.
    pub fn bundle(&self) -> Vec<CertificateDer<'static>> {
        let text = std::fs::read_to_string(&self.webhook_config).unwrap();
        let bundles: Vec<&str> = text
            .lines()
            .filter_map(|line| line.trim().strip_prefix("caBundle: \""))
            .map(|rest| &rest[..rest.find('"').unwrap()])
            .collect();
        assert_eq!(bundles.len(), 2, "both webhooks get the bundle");
        assert_eq!(bundles[0], bundles[1]);
        assert!(
            text.contains("# filled in by styrmin-certs"),
            "comments are kept"
        );
        let pem = base64::engine::general_purpose::STANDARD
            .decode(bundles[0])
            .unwrap();
        assert_eq!(pem, std::fs::read(self.dir.join("ca.crt")).unwrap());
        CertificateDer::pem_slice_iter(&pem)
            .collect::<Result<_, _>>()
            .unwrap()
    }

    pub fn serving_cert(&self) -> CertificateDer<'static> {
        CertificateDer::from_pem_file(self.dir.join("tls.crt")).unwrap()
    }
}

/// The webhook process, killed when dropped.
#[derive(Debug)]
pub struct Webhook {
    pub child: Child,
    pub addr: SocketAddr,
    pub metrics_addr: SocketAddr,
    pub logs: Arc<Mutex<Vec<Value>>>,
}

impl Drop for Webhook {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Webhook {
    /// With `options` (`("--flag", "value")`) replacing or adding to the harness's own.
    pub async fn start_with(certs: &Certs, policy: &Path, options: &[(&str, &str)]) -> Webhook {
        let mut flags: Vec<(&str, &str)> = vec![
            ("--listen", "127.0.0.1:0"),
            ("--metrics-listen", "127.0.0.1:0"),
            ("--log-format", "json"),
            ("--log-filter", "info"),
            ("--reload-interval-ms", "100"),
            ("--drain-timeout-secs", "5"),
            ("--shutdown-delay-secs", "1"),
        ];
        for (flag, value) in options {
            match flags.iter_mut().find(|(f, _)| f == flag) {
                Some(slot) => slot.1 = value,
                None => flags.push((flag, value)),
            }
        }
        let mut command = Command::new(release_binary("styrmin-webhook"));
        for (flag, value) in flags {
            // A switch is given as ("--flag", "").
            command.arg(flag);
            if !value.is_empty() {
                command.arg(value);
            }
        }
        let mut child = command
            .arg("--tls-cert")
            .arg(certs.dir.join("tls.crt"))
            .arg("--tls-key")
            .arg(certs.dir.join("tls.key"))
            .arg("--policy-file")
            .arg(policy)
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let logs = collect_lines(stderr, |line| {
            serde_json::from_str(&line).unwrap_or_else(|_| json!({"raw": line}))
        });
        let logs_for_lookup = logs.clone();
        let listening = move |which: &str| {
            logs_for_lookup.lock().unwrap().iter().find_map(|line| {
                let fields = &line["fields"];
                (fields["message"] == "listening" && fields["listener"] == which).then(|| {
                    fields["address"]
                        .as_str()
                        .unwrap()
                        .parse::<SocketAddr>()
                        .unwrap()
                })
            })
        };
        let mut webhook = Webhook {
            child,
            addr: "127.0.0.1:1".parse().unwrap(),
            metrics_addr: "127.0.0.1:1".parse().unwrap(),
            logs,
        };
        eventually("the listening log lines", || {
            assert!(
                webhook.child.try_wait().unwrap().is_none(),
                "webhook exited: {:?}",
                webhook.logs.lock().unwrap()
            );
            listening("https").is_some() && listening("metrics").is_some()
        })
        .await;
        webhook.addr = listening("https").unwrap();
        webhook.metrics_addr = listening("metrics").unwrap();
        webhook
    }

    pub fn logged(&self, message: &str) -> usize {
        self.logs
            .lock()
            .unwrap()
            .iter()
            .filter(|line| line["fields"]["message"] == message)
            .count()
    }

    /// `GET path` over the plain-HTTP listener: the whole answer, status line first.
    pub fn get(&self, path: &str) -> String {
        let mut stream = std::net::TcpStream::connect(self.metrics_addr).unwrap();
        stream
            .write_all(
                format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                    .as_bytes(),
            )
            .unwrap();
        let mut text = String::new();
        stream.read_to_string(&mut text).unwrap();
        text
    }

    /// `/metrics` over the plain-HTTP listener.
    pub fn metrics(&self) -> String {
        let mut stream = std::net::TcpStream::connect(self.metrics_addr).unwrap();
        stream
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut text = String::new();
        stream.read_to_string(&mut text).unwrap();
        assert!(text.starts_with("HTTP/1.1 200"), "{text}");
        text
    }

    pub fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }
}

/// A client configuration that trusts only `roots` and presents no certificate.
pub fn tls_config(roots: &[CertificateDer<'static>]) -> Arc<rustls::ClientConfig> {
    client_config(roots, None)
}

/// A client configuration that trusts only `roots` and, with `identity` (a certificate chain
/// and its key), presents it as the API server does under mutual TLS.
pub fn client_config(
    roots: &[CertificateDer<'static>],
    identity: Option<(
        Vec<CertificateDer<'static>>,
        rustls_pki_types::PrivateKeyDer<'static>,
    )>,
) -> Arc<rustls::ClientConfig> {
    let mut store = rustls::RootCertStore::empty();
    for cert in roots {
        store.add(cert.clone()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(store);
    let mut config = match identity {
        Some((chain, key)) => config.with_client_auth_cert(chain, key).unwrap(),
        None => config.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    // Like the API server's Go client (no ClientSessionCache): a full handshake each time, so
    // that each new connection sees the certificate served now.
    config.resumption = rustls::client::Resumption::disabled();
    Arc::new(config)
}

/// One HTTP/1.1 connection over verified TLS, as the API server opens them.
#[derive(Debug)]
pub struct Connection {
    pub sender: hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    pub peer_cert: CertificateDer<'static>,
}

#[derive(Debug)]
pub enum ConnectError {
    /// TCP refused or reset before the TLS session was up: no request was sent.
    NotAccepted(String),
}

impl Connection {
    pub async fn open(
        addr: SocketAddr,
        config: Arc<rustls::ClientConfig>,
        name: &str,
    ) -> Result<Connection, ConnectError> {
        Self::open_from(None, addr, config, name).await
    }

    /// As [`Connection::open`], from the local address `from` (another loopback address is
    /// another peer to the webhook).
    pub async fn open_from(
        from: Option<IpAddr>,
        addr: SocketAddr,
        config: Arc<rustls::ClientConfig>,
        name: &str,
    ) -> Result<Connection, ConnectError> {
        let tcp = connect_from(from, addr)
            .await
            .map_err(|e| ConnectError::NotAccepted(e.to_string()))?;
        let name = ServerName::try_from(name.to_owned()).unwrap();
        let tls = TlsConnector::from(config)
            .connect(name, tcp)
            .await
            .map_err(|e| ConnectError::NotAccepted(e.to_string()))?;
        let peer_cert = tls.get_ref().1.peer_certificates().unwrap()[0]
            .clone()
            .into_owned();
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .unwrap();
        tokio::spawn(connection);
        Ok(Connection { sender, peer_cert })
    }

    /// POSTs a review; `Err` when the request was sent and no complete answer came back.
    pub async fn review(&mut self, body: &Value) -> Result<Value, String> {
        let (status, bytes) = self
            .post_raw(serde_json::to_vec(body).unwrap(), &[])
            .await?;
        if status != 200 {
            return Err(format!(
                "HTTP {status}: {}",
                String::from_utf8_lossy(&bytes)
            ));
        }
        let answer: Value =
            serde_json::from_slice(&bytes).map_err(|e| format!("answer is not JSON: {e}"))?;
        if answer["response"]["uid"] != body["request"]["uid"] {
            return Err(format!("uid not echoed: {answer}"));
        }
        Ok(answer)
    }

    pub fn is_closed(&self) -> bool {
        self.sender.is_closed()
    }
}

/// Every request of a load answered right: else how many failed, and the first five reasons.
pub fn assert_none_failed(ok: usize, failures: &[String]) {
    assert!(
        failures.is_empty(),
        "{} failed of {}: {:?}",
        failures.len(),
        ok + failures.len(),
        &failures[..failures.len().min(5)]
    );
}

pub fn review_in(name: &str, namespace: &str) -> Value {
    let text = std::fs::read_to_string(webhook_data(&format!("admission/{name}"))).unwrap();
    let value: Value = serde_json::from_str(&text).unwrap();
    let mut review = if name.ends_with(".request.json") {
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": value})
    } else {
        value
    };
    review["request"]["namespace"] = json!(namespace);
    review["request"]["object"]["metadata"]["namespace"] = json!(namespace);
    review
}

/// Applies the answer's patch to the request's object with an RFC 6902 implementation.
pub fn patched(body: &Value, answer: &Value) -> Value {
    let mut object = body["request"]["object"].clone();
    if let Some(patch) = answer["response"].get("patch") {
        assert_eq!(answer["response"]["patchType"], "JSONPatch");
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(patch.as_str().expect("a base64 string"))
            .unwrap();
        let patch: json_patch::Patch = serde_json::from_slice(&bytes).unwrap();
        json_patch::patch(&mut object, &patch).unwrap();
    }
    object
}

pub fn classes(object: &Value) -> (Option<String>, Option<String>) {
    let get = |pointer: &str| {
        object
            .pointer(pointer)
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    (
        get("/spec/ingressClassName"),
        get("/metadata/annotations/kubernetes.io~1ingress.class"),
    )
}

/// What every test of a running webhook starts from: a scratch directory with a CA, a serving
/// certificate and a policy file, and a client that trusts only the CA bundle in the webhook
/// configuration, as the API server does.
#[derive(Debug)]
pub struct Fixture {
    // Kept for its lifetime: the files are removed when the test ends.
    _dir: tempfile::TempDir,
    pub certs: Certs,
    pub policy: PathBuf,
    pub config: Arc<rustls::ClientConfig>,
}

impl Default for Fixture {
    fn default() -> Self {
        Self::new()
    }
}

impl Fixture {
    pub fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let certs = Certs::make(dir.path());
        let policy = dir.path().join("policy.yaml");
        std::fs::copy(webhook_data("admission/policy.yaml"), &policy).unwrap();
        let config = tls_config(&certs.bundle());
        Fixture {
            _dir: dir,
            certs,
            policy,
            config,
        }
    }

    /// The webhook on these files, with `options` as in [`Webhook::start_with`].
    pub async fn start(&self, options: &[(&str, &str)]) -> Webhook {
        Webhook::start_with(&self.certs, &self.policy, options).await
    }
}

pub const INGRESS: &str =
    "kubewarden-ingress-policy__ingress-v1-create__multi-backend-partial-tls.request.json";

impl Connection {
    /// POSTs `body` as it is, with extra header fields; the status and the answer's bytes.
    pub async fn post_raw(
        &mut self,
        body: Vec<u8>,
        extra_headers: &[(String, String)],
    ) -> Result<(u16, Bytes), String> {
        self.sender
            .ready()
            .await
            .map_err(|e| format!("connection not ready: {e}"))?;
        let mut request = hyper::Request::post("/mutate?timeout=10s")
            .header("host", SERVER_NAME)
            .header("content-type", "application/json");
        for (name, value) in extra_headers {
            request = request.header(name.as_str(), value.as_str());
        }
        let request = request.body(Full::new(Bytes::from(body))).unwrap();
        let response = self
            .sender
            .send_request(request)
            .await
            .map_err(|e| format!("no answer: {e}"))?;
        let status = response.status().as_u16();
        let bytes = response
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("truncated answer: {e}"))?
            .to_bytes();
        Ok((status, bytes))
    }
}

/// The resident memory of a process (`VmRSS` of `/proc/<pid>/status`), in KiB.
pub fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// A TLS session to the webhook with no HTTP client on top: for clients that misbehave.
pub async fn raw_tls(
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
) -> tokio_rustls::client::TlsStream<TcpStream> {
    raw_tls_from(None, addr, config).await.unwrap()
}

/// As [`raw_tls`], from the local address `from`; `Err` when the TCP connection or the
/// handshake fails.
pub async fn raw_tls_from(
    from: Option<IpAddr>,
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let tcp = connect_from(from, addr).await?;
    let name = ServerName::try_from(SERVER_NAME.to_owned()).unwrap();
    TlsConnector::from(config).connect(name, tcp).await
}

/// A TCP connection to `addr` from the local address `from` (any port), or from wherever the
/// system picks. All of 127.0.0.0/8 is local on Linux, so 127.0.0.2, 127.0.0.3 … are
/// distinct peers on loopback.
pub async fn connect_from(from: Option<IpAddr>, addr: SocketAddr) -> std::io::Result<TcpStream> {
    let Some(from) = from else {
        return TcpStream::connect(addr).await;
    };
    let socket = match from {
        IpAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        IpAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    socket.bind(SocketAddr::new(from, 0))?;
    socket.connect(addr).await
}

/// The head of a `POST /mutate` whose body is `length` bytes.
pub fn post_head(length: usize) -> String {
    format!(
        "POST /mutate?timeout=10s HTTP/1.1\r\nHost: {SERVER_NAME}\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    )
}

/// What the server sends until it closes the connection or `within` passes: the text (its
/// first 64 KiB), and whether the server closed the connection.
pub async fn read_until_closed<S: AsyncRead + Unpin>(
    stream: &mut S,
    within: Duration,
) -> (String, bool) {
    let mut answer = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    let closed = tokio::time::timeout(within, async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) if answer.len() < 64 * 1024 => answer.extend_from_slice(&buf[..n]),
                Ok(_) => {}
            }
        }
    })
    .await
    .is_ok();
    (String::from_utf8_lossy(&answer).into_owned(), closed)
}

/// The value of one series in the metrics text (0 when it is absent).
pub fn series(metrics: &str, name_and_labels: &str) -> f64 {
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(name_and_labels)?.strip_prefix(' '))
        .map_or(0.0, |v| v.trim().parse().unwrap())
}

pub fn rejected(metrics: &str, listener: &str, reason: &str) -> f64 {
    series(
        metrics,
        &format!(
            r#"styrmin_webhook_connections_rejected_total{{listener="{listener}",reason="{reason}"}}"#
        ),
    )
}

pub fn open_connections(metrics: &str, listener: &str) -> f64 {
    series(
        metrics,
        &format!(r#"styrmin_webhook_open_connections{{listener="{listener}"}}"#),
    )
}

/// Peak resident memory of a process (`VmHWM`), in KiB.
pub fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// CPU time a process has used (user + system), from `/proc/<pid>/stat`.
pub fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command (which may hold spaces): state is field 3, utime 14, stime 15.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // USER_HZ is 100 on Linux.
    Duration::from_millis(ticks * 10)
}
