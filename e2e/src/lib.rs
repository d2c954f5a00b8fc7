//! Shared harness for the end-to-end tests in `e2e/tests/`: where the release binaries,
//! the installed tools (`make tools`) and the test data are; scratch directories; isolated
//! Helm homes; running commands; splitting and parsing rendered YAML streams.

use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Value;

pub mod crd_schema;
pub mod fake_kube;

/// Copies the folder `from` into `to`, recursively (a scratch copy of `manifests/`, say).
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap_or_else(|e| panic!("creating {}: {e}", to.display()));
    let entries =
        std::fs::read_dir(from).unwrap_or_else(|e| panic!("reading {}: {e}", from.display()));
    for entry in entries {
        let entry = entry.unwrap_or_else(|e| panic!("reading {}: {e}", from.display()));
        let target = to.join(entry.file_name());
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if is_dir {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target)
                .unwrap_or_else(|e| panic!("copying to {}: {e}", target.display()));
        }
    }
}

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}

/// `e2e/tests/data/<rel>`: the data only the end-to-end tests read (the test chart, vendored
/// CRDs, the alert rules' test).
pub fn data(rel: &str) -> PathBuf {
    workspace_root().join("e2e/tests/data").join(rel)
}

/// `postrender/tests/data/<rel>`: the real rendered streams (`rendered/`) live with the
/// post-renderer's tests.
pub fn postrender_data(rel: &str) -> PathBuf {
    workspace_root().join("postrender/tests/data").join(rel)
}

/// `webhook/tests/data/<rel>`: the real AdmissionReviews (`admission/`) and the recorded API
/// server responses (`apiserver/`) live with the webhook's tests.
pub fn webhook_data(rel: &str) -> PathBuf {
    workspace_root().join("webhook/tests/data").join(rel)
}

/// Where the binaries under test are: `target/release`, or the directory in
/// `E2E_RELEASE_DIR` (to test another build, or a stand-in that misbehaves on purpose).
pub fn release_dir() -> PathBuf {
    match std::env::var_os("E2E_RELEASE_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => workspace_root().join("target").join("release"),
    }
}

/// A binary built by `cargo build --release` (`make build` runs before the tests).
pub fn release_binary(name: &str) -> PathBuf {
    let path = release_dir().join(name);
    assert!(
        path.exists(),
        "{} is missing: run `make build` (or `cargo build --release`) first",
        path.display()
    );
    path
}

/// A tool installed by `make tools` under `.tools/bin` (helm3, helm4, kubectl).
pub fn tool(name: &str) -> PathBuf {
    let path = workspace_root().join(".tools").join("bin").join(name);
    assert!(
        path.exists(),
        "{} is missing: run `make tools` first",
        path.display()
    );
    path
}

/// A scratch directory under the system temp dir, removed on drop (kept when the
/// environment variable `E2E_KEEP_SCRATCH` is set, to look at after a failure).
#[derive(Debug)]
pub struct Scratch {
    path: PathBuf,
}

impl Scratch {
    /// A new empty directory whose name starts with `styrmin-e2e-<label>-`.
    pub fn new(label: &str) -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("styrmin-e2e-{label}-{}-{n}", std::process::id()));
        if path.exists() {
            std::fs::remove_dir_all(&path)
                .unwrap_or_else(|e| panic!("removing old scratch {}: {e}", path.display()));
        }
        std::fs::create_dir_all(&path)
            .unwrap_or_else(|e| panic!("creating scratch {}: {e}", path.display()));
        Self { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `<scratch>/<rel>`.
    pub fn join(&self, rel: &str) -> PathBuf {
        self.path.join(rel)
    }

    /// Write `contents` to `<scratch>/<rel>` and return its path.
    pub fn write(&self, rel: &str, contents: &str) -> PathBuf {
        let path = self.join(rel);
        std::fs::write(&path, contents)
            .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::env::var_os("E2E_KEEP_SCRATCH").is_none() {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// A Helm home of its own, so tests never read or write the user's Helm configuration
/// and never reach a cluster: `HELM_CONFIG_HOME`, `HELM_CACHE_HOME`, `HELM_DATA_HOME` in a
/// scratch directory, `KUBECONFIG` pointing to a file that does not exist.
///
/// Helm 4 installs plugins under `$HELM_DATA_HOME/plugins` but looks them up in
/// `HELM_PLUGINS`, so for Helm 4 `HELM_PLUGINS` is exactly that folder; Helm 3 gets a folder
/// of its own, because a Helm 4 plugin in its folder breaks it
/// (`docs/helm.md`).
#[derive(Debug)]
pub struct HelmHome {
    scratch: Scratch,
}

impl HelmHome {
    pub fn new(label: &str) -> Self {
        let scratch = Scratch::new(label);
        for dir in ["config", "cache", "data/plugins", "plugins3"] {
            std::fs::create_dir_all(scratch.join(dir))
                .unwrap_or_else(|e| panic!("creating {dir} in {}: {e}", scratch.path().display()));
        }
        Self { scratch }
    }

    pub fn scratch(&self) -> &Scratch {
        &self.scratch
    }

    pub fn data_home(&self) -> PathBuf {
        self.scratch.join("data")
    }

    /// `helm3` or `helm4` from `.tools/bin`, with this home's environment. The PATH starts
    /// with [`release_dir`], where the Helm 4 plugin's wrapper finds `styrmin-postrender`.
    /// `STYRMIN_*` variables of the caller are removed (the post-renderer reads its flags from
    /// them), and `STYRMIN_TTY=0` keeps the plugin from writing to the terminal.
    pub fn helm(&self, name: &str) -> Command {
        let mut cmd = Command::new(tool(name));
        let plugins = match name {
            "helm3" => self.scratch.join("plugins3"),
            _ => self.scratch.join("data/plugins"),
        };
        for (key, _) in std::env::vars_os() {
            let key_str = key.to_string_lossy();
            if key_str.starts_with("HELM_") || key_str.starts_with("STYRMIN_") {
                cmd.env_remove(&key);
            }
        }
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut dirs = vec![release_dir()];
        dirs.extend(std::env::split_paths(&path));
        let path = std::env::join_paths(dirs).unwrap_or(path);
        cmd.env("HELM_CONFIG_HOME", self.scratch.join("config"))
            .env("HELM_CACHE_HOME", self.scratch.join("cache"))
            .env("HELM_DATA_HOME", self.data_home())
            .env("HELM_PLUGINS", plugins)
            .env("KUBECONFIG", self.scratch.join("no-such-kubeconfig"))
            .env("PATH", path)
            .env("STYRMIN_TTY", "0")
            .current_dir(self.scratch.path());
        cmd
    }
}

/// Run `cmd` with `stdin` (or no stdin) and return what it did.
pub fn run(cmd: &mut Command, stdin: Option<&[u8]>) -> Output {
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}", describe(cmd)));
    if let Some(input) = stdin {
        let mut pipe = child.stdin.take().expect("stdin is piped");
        let input = input.to_vec();
        // A writer thread: the child may fill its stdout pipe before reading all of stdin.
        let writer = std::thread::spawn(move || pipe.write_all(&input));
        let output = child
            .wait_with_output()
            .unwrap_or_else(|e| panic!("waiting for {}: {e}", describe(cmd)));
        // A child that exits early closes stdin: that is its business, judged by its output.
        let _ = writer.join();
        output
    } else {
        child
            .wait_with_output()
            .unwrap_or_else(|e| panic!("waiting for {}: {e}", describe(cmd)))
    }
}

/// Run `cmd`, fail the test with its stderr unless it exits 0, and return its stdout.
pub fn run_ok(cmd: &mut Command, stdin: Option<&[u8]>) -> Output {
    let output = run(cmd, stdin);
    assert!(
        output.status.success(),
        "{} failed ({}):\n--- stderr ---\n{}\n--- stdout ---\n{}",
        describe(cmd),
        output.status,
        String::from_utf8_lossy(&output.stderr),
        String::from_utf8_lossy(&output.stdout),
    );
    output
}

/// The command line, for messages.
pub fn describe(cmd: &Command) -> String {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(OsStr::to_string_lossy)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Bytes as UTF-8, or a test failure that says what they were.
pub fn utf8(bytes: Vec<u8>, what: &str) -> String {
    String::from_utf8(bytes).unwrap_or_else(|e| panic!("{what} is not UTF-8: {e}"))
}

/// One document of a YAML stream: the text between two document-start lines (`---` in
/// column 0 followed by a blank or the end of the line), without them.
#[derive(Debug, Clone, PartialEq)]
pub struct Doc {
    pub text: String,
}

impl Doc {
    /// The document parsed with `serde_saphyr` (a comment-only document is `Null`).
    pub fn value(&self) -> Value {
        parse_yaml(&self.text)
    }

    /// The path of the first `# Source: <path>` comment line, as Helm writes it.
    pub fn source(&self) -> Option<&str> {
        self.text
            .lines()
            .find_map(|line| line.strip_prefix("# Source: "))
            .map(str::trim_end)
    }

    /// Whether the document holds nothing but blanks and comments.
    pub fn is_blank(&self) -> bool {
        self.text.lines().all(|line| {
            let line = line.trim();
            line.is_empty() || line.starts_with('#')
        })
    }
}

/// Split a YAML stream at its document-start lines. Text before the first `---` is a
/// document too when it is not blank (Helm 4 writes no `---` before the first document).
/// Blank documents are dropped.
pub fn split_documents(stream: &str) -> Vec<Doc> {
    let mut docs = Vec::new();
    let mut current = String::new();
    for line in stream.split_inclusive('\n') {
        let is_start = line
            .strip_prefix("---")
            .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t', '\r', '\n']));
        if is_start {
            docs.push(Doc {
                text: std::mem::take(&mut current),
            });
        } else {
            current.push_str(line);
        }
    }
    docs.push(Doc { text: current });
    docs.retain(|doc| !doc.is_blank());
    docs
}

/// Parse one YAML document with `serde_saphyr`, or fail the test with the text.
pub fn parse_yaml(text: &str) -> Value {
    serde_saphyr::from_str::<Value>(text)
        .unwrap_or_else(|e| panic!("not valid YAML: {e}\n--- document ---\n{text}"))
}

/// `value` at `path` (object keys), if every step exists.
pub fn get<'a>(value: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(value, |v, key| v.get(key))
}

/// A string field at `path`, or "" when it is absent or not a string.
pub fn get_str<'a>(value: &'a Value, path: &[&str]) -> &'a str {
    get(value, path).and_then(Value::as_str).unwrap_or("")
}

/// A stand-in for a Kubernetes API server, just enough for `helm install --dry-run` (Helm 3
/// needs a reachable cluster even for a client-side dry run): `/version`, API discovery for a
/// fixed set of resource types, and 404 for every object, so nothing "exists" yet. It
/// answers GET only; any other method gets 405 and is recorded, so a test can assert that a
/// dry run wrote nothing. Helm must run with `--disable-openapi-validation` (no OpenAPI
/// schema is served). [`FakeApiServer::serve_object`] makes one object exist (for Helm's
/// `lookup`).
#[derive(Debug)]
pub struct FakeApiServer {
    addr: std::net::SocketAddr,
    requests: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    objects: ObjectStore,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

/// Objects the fake API server answers with, by path (`/api/v1/namespaces/x/secrets/y`).
type ObjectStore = std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, String>>>;

/// (group, version, plural, kind, namespaced) the fake API server serves.
const FAKE_RESOURCES: &[(&str, &str, &str, &str, bool)] = &[
    ("", "v1", "configmaps", "ConfigMap", true),
    ("", "v1", "secrets", "Secret", true),
    ("", "v1", "services", "Service", true),
    ("", "v1", "serviceaccounts", "ServiceAccount", true),
    ("", "v1", "pods", "Pod", true),
    (
        "",
        "v1",
        "persistentvolumeclaims",
        "PersistentVolumeClaim",
        true,
    ),
    ("", "v1", "namespaces", "Namespace", false),
    ("apps", "v1", "deployments", "Deployment", true),
    ("apps", "v1", "statefulsets", "StatefulSet", true),
    ("apps", "v1", "daemonsets", "DaemonSet", true),
    ("batch", "v1", "jobs", "Job", true),
    ("networking.k8s.io", "v1", "ingresses", "Ingress", true),
    (
        "networking.k8s.io",
        "v1",
        "ingressclasses",
        "IngressClass",
        false,
    ),
    ("networking.k8s.io", "v1beta1", "ingresses", "Ingress", true),
    ("extensions", "v1beta1", "ingresses", "Ingress", true),
    ("rbac.authorization.k8s.io", "v1", "roles", "Role", true),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "rolebindings",
        "RoleBinding",
        true,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "clusterroles",
        "ClusterRole",
        false,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "clusterrolebindings",
        "ClusterRoleBinding",
        false,
    ),
    (
        "traefik.io",
        "v1alpha1",
        "ingressroutes",
        "IngressRoute",
        true,
    ),
    (
        "gateway.networking.k8s.io",
        "v1",
        "httproutes",
        "HTTPRoute",
        true,
    ),
    (
        "gateway.networking.k8s.io",
        "v1",
        "grpcroutes",
        "GRPCRoute",
        true,
    ),
    // What the styrmin-webhook chart renders.
    (
        "policy",
        "v1",
        "poddisruptionbudgets",
        "PodDisruptionBudget",
        true,
    ),
    (
        "networking.k8s.io",
        "v1",
        "networkpolicies",
        "NetworkPolicy",
        true,
    ),
    (
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        false,
    ),
    (
        "admissionregistration.k8s.io",
        "v1",
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        false,
    ),
    ("cert-manager.io", "v1", "certificates", "Certificate", true),
    ("cert-manager.io", "v1", "issuers", "Issuer", true),
    (
        "monitoring.coreos.com",
        "v1",
        "servicemonitors",
        "ServiceMonitor",
        true,
    ),
    (
        "monitoring.coreos.com",
        "v1",
        "podmonitors",
        "PodMonitor",
        true,
    ),
    (
        "monitoring.coreos.com",
        "v1",
        "prometheusrules",
        "PrometheusRule",
        true,
    ),
];

impl FakeApiServer {
    /// Listen on a free port of 127.0.0.1.
    pub fn start() -> Self {
        use std::sync::atomic::AtomicBool;
        use std::sync::{Arc, Mutex};

        let listener = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap_or_else(|e| panic!("binding the fake API server: {e}"));
        let addr = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("the fake API server's address: {e}"));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let objects: ObjectStore = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (log, stopping, store) = (
            Arc::clone(&requests),
            Arc::clone(&stop),
            Arc::clone(&objects),
        );
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopping.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let (log, store) = (Arc::clone(&log), Arc::clone(&store));
                std::thread::spawn(move || serve_connection(stream, &log, &store));
            }
        });
        Self {
            addr,
            requests,
            objects,
            stop,
        }
    }

    /// From now on, a GET of `path` answers `object` (JSON) instead of 404.
    pub fn serve_object(&self, path: &str, object: &Value) {
        if let Ok(mut objects) = self.objects.lock() {
            objects.insert(path.to_owned(), object.to_string());
        }
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Write a kubeconfig for this server (context namespace `namespace`) to `path`.
    pub fn write_kubeconfig(&self, path: &Path, namespace: &str) {
        let config = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: {}\n\
             users:\n- name: fake\n  user: {{}}\ncontexts:\n- name: fake\n  context:\n    \
             cluster: fake\n    user: fake\n    namespace: {namespace}\ncurrent-context: fake\n",
            self.url()
        );
        std::fs::write(path, config)
            .unwrap_or_else(|e| panic!("writing kubeconfig {}: {e}", path.display()));
    }

    /// Every request so far, as `METHOD /path?query`.
    pub fn requests(&self) -> Vec<String> {
        self.requests
            .lock()
            .map(|r| r.clone())
            .unwrap_or_else(|poisoned| poisoned.into_inner().clone())
    }
}

impl Drop for FakeApiServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wake the accept loop so it sees the flag.
        let _ = std::net::TcpStream::connect(self.addr);
    }
}

/// Reads one HTTP/1.1 request (its request line and its body, by `Content-Length`) from a
/// connection of the fake API servers; `None` when the client closed it.
pub(crate) fn read_http_request(reader: &mut impl std::io::BufRead) -> Option<(String, Vec<u8>)> {
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
        return None;
    }
    let mut content_length = 0usize;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).unwrap_or(0) == 0 {
            return None;
        }
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            content_length = value.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0u8; content_length];
    reader.read_exact(&mut body).ok()?;
    Some((request_line, body))
}

fn serve_connection(
    stream: std::net::TcpStream,
    log: &std::sync::Mutex<Vec<String>>,
    objects: &ObjectStore,
) {
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = std::io::BufReader::new(stream);
    while let Some((request_line, _body)) = read_http_request(&mut reader) {
        let mut parts = request_line.split_whitespace();
        let method = parts.next().unwrap_or("").to_owned();
        let target = parts.next().unwrap_or("").to_owned();
        if let Ok(mut log) = log.lock() {
            log.push(format!("{method} {target}"));
        }
        let path = target.split('?').next().unwrap_or("");
        let stored = objects.lock().ok().and_then(|o| o.get(path).cloned());
        let (status, body) = if let (true, Some(object)) = (method == "GET", stored) {
            (200, object)
        } else if method == "GET" {
            fake_api_answer(path)
        } else {
            (405, status_json(405, "MethodNotAllowed"))
        };
        let reason = match status {
            200 => "OK",
            404 => "Not Found",
            _ => "Method Not Allowed",
        };
        let response = format!(
            "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        if writer.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}

fn status_json(code: u16, reason: &str) -> String {
    serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason, "code": code
    })
    .to_string()
}

fn fake_api_answer(path: &str) -> (u16, String) {
    use serde_json::json;

    let resources = |group: &str, version: &str| -> Vec<Value> {
        FAKE_RESOURCES
            .iter()
            .filter(|(g, v, ..)| *g == group && *v == version)
            .map(|(_, _, plural, kind, namespaced)| {
                json!({
                    "name": plural, "singularName": "", "namespaced": namespaced, "kind": kind,
                    "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]
                })
            })
            .collect()
    };
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let answer = match segments.as_slice() {
        ["version"] => json!({
            "major": "1", "minor": "30", "gitVersion": "v1.30.0", "platform": "linux/amd64"
        }),
        ["api"] => json!({"kind": "APIVersions", "versions": ["v1"]}),
        ["api", "v1"] => json!({
            "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "v1",
            "resources": resources("", "v1")
        }),
        ["apis"] => {
            let mut groups: Vec<(&str, Vec<&str>)> = Vec::new();
            for (group, version, ..) in FAKE_RESOURCES.iter().filter(|r| !r.0.is_empty()) {
                match groups.iter_mut().find(|(g, _)| g == group) {
                    Some((_, versions)) if !versions.contains(version) => versions.push(version),
                    Some(_) => {}
                    None => groups.push((group, vec![version])),
                }
            }
            let groups: Vec<Value> = groups
                .iter()
                .map(|(group, versions)| {
                    let versions: Vec<Value> = versions
                        .iter()
                        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
                        .collect();
                    json!({"name": group, "versions": versions, "preferredVersion": versions[0]})
                })
                .collect();
            json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
        }
        ["apis", group, version] if !resources(group, version).is_empty() => json!({
            "kind": "APIResourceList", "apiVersion": "v1",
            "groupVersion": format!("{group}/{version}"),
            "resources": resources(group, version)
        }),
        _ => return (404, status_json(404, "NotFound")),
    };
    (200, answer.to_string())
}
