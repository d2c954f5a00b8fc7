//! Shared harness for the end-to-end tests in `e2e/tests/`: where the release binaries,
//! the installed tools (`make tools`) and the test data are; scratch directories; isolated
//! Helm homes; running commands; splitting and parsing rendered YAML streams.

use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Value;

pub mod admission;
pub mod control_plane;
pub mod crd_schema;
pub mod webhook;

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

/// `[workspace.package] version` of Cargo.toml: the version of every crate, binary, image,
/// chart and plugin (docs/releasing.md).
pub fn workspace_version() -> String {
    let manifest = workspace_root().join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest)
        .unwrap_or_else(|e| panic!("reading {}: {e}", manifest.display()));
    let version = text
        .lines()
        .skip_while(|l| l.trim() != "[workspace.package]")
        .find_map(|l| l.strip_prefix("version = "))
        .unwrap_or_else(|| panic!("{} has no [workspace.package] version", manifest.display()));
    version.trim_matches('"').to_owned()
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

/// The environment the chart gives the controllers' container besides the election's
/// (`charts/styrmin-webhook/templates/controllers.yaml`; a test compares them): the
/// benchmarks run the controllers with it, so that they measure what the chart deploys.
pub const CONTROLLERS_ENV: [(&str, &str); 1] = [("MALLOC_MMAP_THRESHOLD_", "131072")];

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

/// Runs `cmd` (no stdin), which must fail, because of `what`, without printing anything on
/// stdout, and name each of `names` on stderr.
pub fn run_fails(cmd: &mut Command, what: &str, names: &[&str]) {
    let output = run(cmd, None);
    assert!(
        !output.status.success(),
        "{} succeeded with {what}",
        describe(cmd)
    );
    assert!(
        output.stdout.is_empty(),
        "{} printed on stdout although it failed with {what}",
        describe(cmd)
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    for name in names {
        assert!(
            stderr.contains(name),
            "{} failed with {what}, but its error does not name {name}:\n{stderr}",
            describe(cmd)
        );
    }
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

/// A port of 127.0.0.1 that was free a moment ago, for a server a test starts.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .unwrap_or_else(|e| panic!("finding a free port of 127.0.0.1: {e}"))
}
