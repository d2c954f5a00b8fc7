//! The release as a user consumes it (docs/releasing.md): what `scripts/release/dist.sh` writes,
//! pushed by `scripts/release/publish.sh` to a real OCI registry on 127.0.0.1 (Debian's
//! `docker-registry`, the CNCF distribution registry, plain HTTP), signed with a throwaway gpg
//! key. Then, as a newcomer would:
//!
//! - `sha256sum -c SHA256SUMS` passes, and each archive's binaries run from a clean directory
//!   and print the workspace version;
//! - `skopeo inspect --raw` of the tag gives the digest `make dist` wrote, with the expected
//!   architectures, and pulling by digest gives the bytes of the OCI archive;
//! - `helm template --verify oci://...` of the chart (Helm 3 and 4) with the public key renders
//!   the image `127.0.0.1:PORT/styrmin-webhook@sha256:...` = the pushed index; with another
//!   key it refuses;
//! - `helm plugin install oci://...` verifies the plugin's signature, and `helm template
//!   --post-renderer styrmin` with the archive's binary renders the test chart byte for byte
//!   as the plugin of the source tree with the source build does; a tampered tarball is
//!   refused;
//! - the README's install lines, as a Helm 3 user without Rust runs them, from a plain HTTP
//!   server on 127.0.0.1 that stands in for GitHub: the release key's lines make
//!   `styrmin.gpg` from a `KEYS` file of the test key, with which Helm 3 verifies the chart;
//!   the Helm 3 block downloads the host's archive and `SHA256SUMS`, checks them, puts the
//!   binary in `~/.local/bin` and post-renders the test chart with `helm install` (made a
//!   `--dry-run` against the stand-in API server). A changed archive stops it at `sha256sum`.
//!
//! In `make test` the release is the host's `make build` (DIST_PLATFORMS=native, one
//! architecture, no SBOM). `make test-dist` runs this test on the full `make dist` output:
//! `E2E_DIST_DIR` (its directory), `E2E_DIST_REGISTRY` (the 127.0.0.1:PORT it was made for)
//! and `E2E_DIST_KEYRING` (the public keyring); then both architectures must be there.
//! Needs `make build` and `make tools` (docker-registry, skopeo, gpg).
//!
//! With `E2E_NODE_KUBECONFIG` (`make test-cluster`), the kubeconfig of a cluster whose kubelet
//! runs on this machine, so that its container runtime reaches the registry on 127.0.0.1: the
//! chart is installed from the registry with `helm install --verify`, its Pods are started
//! from the pushed index and become Ready, and the API server calls the webhook, which sets
//! an Ingress's class. Without it that step says so and is skipped.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::collections::BTreeSet;
use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use styrmin_e2e::{
    HelmHome, Scratch, copy_dir, data, release_dir, run, run_ok, split_documents, tool, utf8,
    workspace_root, workspace_version,
};
use styrmin_fake_apiserver::FakeApiServer;

const KEY_NAME: &str = "Styrmin release test";
const SOURCE_DATE_EPOCH: &str = "1700000000";

fn host_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => panic!("no release platform for {other}"),
    }
}

/// A PGP key pair made by gpg in a home of its own: `secring.gpg` and `pubring.gpg` in the
/// legacy format Helm reads.
struct Keys {
    secret: PathBuf,
    public: PathBuf,
}

/// The release's public key as a `KEYS` file would publish it: the fingerprint, then the
/// ASCII-armored key, from the binary keyring.
fn keys_file(scratch: &Scratch, keyring: &Path) -> String {
    let home = scratch.join("gnupg-keys-file");
    std::fs::create_dir_all(&home).unwrap();
    let gpg = |args: &[&str]| {
        let mut cmd = Command::new("gpg");
        cmd.arg("--homedir").arg(&home).arg("--batch").args(args);
        cmd
    };
    run_ok(gpg(&["--import"]).arg(keyring), None);
    let fingerprints = utf8(
        run_ok(&mut gpg(&["--with-colons", "--fingerprint"]), None).stdout,
        "gpg --fingerprint",
    );
    let fingerprint = fingerprints
        .lines()
        .find_map(|line| line.strip_prefix("fpr:"))
        .map(|rest| rest.trim_matches(':').to_owned())
        .unwrap();
    let armored = utf8(
        run_ok(&mut gpg(&["--armor", "--export"]), None).stdout,
        "gpg --armor --export",
    );
    format!("# Styrmin release key, fingerprint {fingerprint}\n{armored}")
}

impl Keys {
    fn new(scratch: &Scratch, label: &str, name: &str) -> Keys {
        let home = scratch.join(&format!("gnupg-{label}"));
        std::fs::create_dir_all(&home).unwrap();
        let gpg = |args: &[&str]| {
            let mut cmd = Command::new("gpg");
            cmd.arg("--homedir").arg(&home).arg("--batch").args(args);
            run_ok(&mut cmd, None).stdout
        };
        gpg(&[
            "--passphrase",
            "",
            "--quick-gen-key",
            &format!("{name} <release@styrmin.test>"),
            "rsa3072",
            "sign",
            "never",
        ]);
        let keys = Keys {
            secret: home.join("secring.gpg"),
            public: home.join("pubring.gpg"),
        };
        std::fs::write(&keys.secret, gpg(&["--export-secret-keys"])).unwrap();
        std::fs::write(&keys.public, gpg(&["--export"])).unwrap();
        keys
    }
}

/// `docker-registry serve` on a port of 127.0.0.1, its storage in the scratch directory;
/// stopped on drop.
struct Registry {
    child: Child,
    address: String,
}

impl Registry {
    fn start(scratch: &Scratch, address: &str) -> Registry {
        let config = scratch.write(
            "registry.yaml",
            &format!(
                "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: {address}\n",
                scratch.join("registry").display()
            ),
        );
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(scratch.join("registry.log")).unwrap())
            .spawn()
            .expect("starting docker-registry (make tools installs it)");
        let registry = Registry {
            child,
            address: address.to_owned(),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while registry.get("/v2/") != Some(200) {
            assert!(
                Instant::now() < deadline,
                "docker-registry did not answer on {address}: {}",
                std::fs::read_to_string(scratch.join("registry.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        registry
    }

    /// The status of a plain HTTP GET, or None when nothing answers.
    fn get(&self, path: &str) -> Option<u16> {
        let mut stream = TcpStream::connect(&self.address).ok()?;
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            self.address
        )
        .ok()?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer).ok()?;
        answer.split_whitespace().nth(1)?.parse().ok()
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_loopback_address() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

fn script(name: &str) -> Command {
    let mut cmd = Command::new(workspace_root().join("scripts/release").join(name));
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs = vec![workspace_root().join(".tools/bin")];
    dirs.extend(std::env::split_paths(&path));
    cmd.env("PATH", std::env::join_paths(dirs).unwrap());
    cmd
}

fn skopeo(args: &[&str]) -> Vec<u8> {
    run_ok(
        Command::new("skopeo").arg("--insecure-policy").args(args),
        None,
    )
    .stdout
}

fn sha256_hex(bytes: &[u8]) -> String {
    let output = run_ok(&mut Command::new("sha256sum"), Some(bytes));
    utf8(output.stdout, "sha256sum")[..64].to_owned()
}

/// The release under test: its directory, the registry address it was made for, and the
/// public keyring that verifies it.
struct Release {
    dir: PathBuf,
    registry: String,
    keyring: PathBuf,
    architectures: BTreeSet<String>,
}

fn release(scratch: &Scratch) -> Release {
    if let Some(dir) = std::env::var_os("E2E_DIST_DIR").filter(|d| !d.is_empty()) {
        let var = |name: &str| std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set"));
        return Release {
            dir: PathBuf::from(dir),
            registry: var("E2E_DIST_REGISTRY"),
            keyring: PathBuf::from(var("E2E_DIST_KEYRING")),
            architectures: ["amd64", "arm64"].map(str::to_owned).into(),
        };
    }
    let keys = Keys::new(scratch, "release", KEY_NAME);
    let registry = free_loopback_address();
    let dir = scratch.join("dist");
    run_ok(
        script("dist.sh")
            .env("DIST_PLATFORMS", "native")
            .env("DIST_SBOM", "0")
            .env("DIST_DIR", &dir)
            .env("TARGET_DIR", release_dir().parent().unwrap())
            .env("REGISTRY", &registry)
            .env("SIGNING_KEY", KEY_NAME)
            .env("SIGNING_KEYRING", &keys.secret)
            .env("SOURCE_DATE_EPOCH", SOURCE_DATE_EPOCH),
        None,
    );
    Release {
        dir,
        registry,
        keyring: keys.public,
        architectures: [host_arch().to_owned()].into(),
    }
}

#[test]
fn the_published_release_installs_as_a_user_would() {
    let scratch = Scratch::new("release");
    let version = workspace_version();
    let release = release(&scratch);
    let registry = Registry::start(&scratch, &release.registry);
    run_ok(
        script("publish.sh")
            .env("REGISTRY", &registry.address)
            .env("DIST_DIR", &release.dir),
        None,
    );

    checksums_pass(&release);
    let archive_dir = archives_run(&scratch, &release, &version);
    let digest = image_is_the_index(&scratch, &release, &registry, &version);
    chart_pins_the_image(&release, &registry, &version, &digest, &scratch);
    plugin_renders_as_the_source_build(&scratch, &release, &registry, &version, &archive_dir);
    readme_installs_for_a_helm3_user(&scratch, &release, &registry, &version);
    installs_on_a_node(&scratch, &release, &registry, &version, &digest);
}

fn checksums_pass(release: &Release) {
    let sums = std::fs::read_to_string(release.dir.join("SHA256SUMS")).unwrap();
    let listed: BTreeSet<&str> = sums.lines().map(|l| &l[66..]).collect();
    let present: BTreeSet<String> = std::fs::read_dir(&release.dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|name| name != "SHA256SUMS")
        .collect();
    assert_eq!(
        listed,
        present.iter().map(String::as_str).collect(),
        "SHA256SUMS lists exactly the files of the release"
    );
    run_ok(
        Command::new("sha256sum")
            .args(["--strict", "-c", "SHA256SUMS"])
            .current_dir(&release.dir),
        None,
    );
}

/// Unpacks every archive; runs the binaries of the host's platform from a clean directory with
/// an empty environment. Returns the host platform's unpacked folder.
fn archives_run(scratch: &Scratch, release: &Release, version: &str) -> PathBuf {
    let host = format!("linux-{}", host_arch());
    let mut host_dir = None;
    for entry in std::fs::read_dir(&release.dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        let Some(platform) = name
            .strip_prefix(&format!("styrmin-{version}-"))
            .and_then(|rest| rest.strip_suffix(".tar.gz"))
        else {
            continue;
        };
        let unpacked = scratch.join(&format!("unpacked-{platform}"));
        std::fs::create_dir_all(&unpacked).unwrap();
        run_ok(
            Command::new("tar")
                .arg("-xzf")
                .arg(release.dir.join(&name))
                .arg("-C")
                .arg(&unpacked),
            None,
        );
        let top = unpacked.join(format!("styrmin-{version}-{platform}"));
        for file in [
            "LICENSE",
            "README.md",
            "CHANGELOG.md",
            "helm-plugin/plugin.yaml",
            "helm-plugin/styrmin-postrender.sh",
        ] {
            assert!(top.join(file).is_file(), "{name} has no {file}");
        }
        if platform == host {
            let clean = scratch.join("clean");
            std::fs::create_dir_all(&clean).unwrap();
            for program in ["styrmin-webhook", "styrmin-postrender", "styrmin-certs"] {
                let output = run_ok(
                    Command::new(top.join(program))
                        .arg("--version")
                        .env_clear()
                        .current_dir(&clean),
                    None,
                );
                assert_eq!(
                    utf8(output.stdout, "--version"),
                    format!("{program} {version}\n")
                );
            }
            // The plugin folder is wired to the binary next to it.
            assert_eq!(
                std::fs::canonicalize(top.join("helm-plugin/bin/styrmin-postrender")).unwrap(),
                std::fs::canonicalize(top.join("styrmin-postrender")).unwrap()
            );
            host_dir = Some(top);
        }
    }
    host_dir.unwrap_or_else(|| panic!("no {host} archive in {}", release.dir.display()))
}

/// The pushed tag is the index `make dist` built: same digest, the expected architectures,
/// and every blob pulled by digest equal to the OCI archive's. Returns the digest.
fn image_is_the_index(
    scratch: &Scratch,
    release: &Release,
    registry: &Registry,
    version: &str,
) -> String {
    let digest = std::fs::read_to_string(
        release
            .dir
            .join(format!("styrmin-webhook-{version}.digest")),
    )
    .unwrap()
    .trim()
    .to_owned();
    let reference = format!("docker://{}/styrmin-webhook", registry.address);
    let raw = skopeo(&[
        "inspect",
        "--tls-verify=false",
        "--raw",
        &format!("{reference}:{version}"),
    ]);
    assert_eq!(format!("sha256:{}", sha256_hex(&raw)), digest);
    let top: Value = serde_json::from_slice(&raw).unwrap();
    let architectures: BTreeSet<String> = match top["mediaType"].as_str() {
        Some("application/vnd.oci.image.index.v1+json") => top["manifests"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["platform"]["architecture"].as_str().unwrap().to_owned())
            .collect(),
        _ => {
            let config: Value = serde_json::from_slice(&skopeo(&[
                "inspect",
                "--tls-verify=false",
                "--config",
                &format!("{reference}@{digest}"),
            ]))
            .unwrap();
            [config["architecture"].as_str().unwrap().to_owned()].into()
        }
    };
    assert_eq!(architectures, release.architectures, "{top}");

    let archive = scratch.join("image-archive");
    std::fs::create_dir_all(&archive).unwrap();
    run_ok(
        Command::new("tar")
            .arg("-xf")
            .arg(
                release
                    .dir
                    .join(format!("styrmin-webhook-{version}.oci.tar")),
            )
            .arg("-C")
            .arg(&archive),
        None,
    );
    let pulled = scratch.join("pulled");
    skopeo(&[
        "copy",
        "--all",
        "--preserve-digests",
        "--quiet",
        "--src-tls-verify=false",
        &format!("{reference}@{digest}"),
        &format!("oci:{}:pulled", pulled.display()),
    ]);
    let blobs = |dir: &Path| -> BTreeSet<String> {
        std::fs::read_dir(dir.join("blobs/sha256"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect()
    };
    let pulled_blobs = blobs(&pulled);
    assert_eq!(pulled_blobs, blobs(&archive), "the pulled image's blobs");
    for blob in &pulled_blobs {
        let path = |dir: &Path| dir.join("blobs/sha256").join(blob);
        assert!(
            std::fs::read(path(&pulled)).unwrap() == std::fs::read(path(&archive)).unwrap(),
            "blob {blob} pulled by digest differs from the OCI archive's"
        );
    }
    digest
}

/// `helm template --verify` of the chart from the registry, by Helm 3 and Helm 4: the image is
/// pinned to the pushed index. Another key's keyring is refused.
fn chart_pins_the_image(
    release: &Release,
    registry: &Registry,
    version: &str,
    digest: &str,
    scratch: &Scratch,
) {
    let chart = format!("oci://{}/charts/styrmin-webhook", registry.address);
    let template = |helm: &HelmHome, name: &str, keyring: &Path| {
        let mut cmd = helm.helm(name);
        cmd.args(["template", "styrmin-webhook", &chart, "--version", version])
            .args(["--namespace", "styrmin-system", "--plain-http", "--verify"])
            .arg("--keyring")
            .arg(keyring);
        run(&mut cmd, None)
    };
    for name in ["helm3", "helm4"] {
        let helm = HelmHome::new(&format!("release-chart-{name}"));
        let output = template(&helm, name, &release.keyring);
        assert!(
            output.status.success(),
            "{name} template --verify {chart}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let manifests = without_pull_lines(&utf8(output.stdout, "helm template"));
        let images: Vec<String> = split_documents(&manifests)
            .iter()
            .map(|doc| doc.value())
            .filter(|value| value["kind"] == "Deployment")
            .flat_map(|value| {
                value["spec"]["template"]["spec"]["containers"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|c| c["image"].as_str().unwrap().to_owned())
                    .collect::<Vec<_>>()
            })
            .collect();
        // Admission and the controllers: one image, pinned by digest.
        let pinned = format!("{}/styrmin-webhook@{digest}", registry.address);
        assert_eq!(images, [pinned.clone(), pinned]);
    }
    let stranger = Keys::new(scratch, "stranger", "Someone else");
    let helm = HelmHome::new("release-chart-stranger");
    let output = template(&helm, "helm4", &stranger.public);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        !output.status.success() && without_pull_lines(&stdout).is_empty(),
        "helm4 template --verify accepted the chart with another key's keyring: {}\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}

/// `helm template oci://…`'s stdout without what Helm 4.2 prints there about the pull
/// (`Pulled:`, `Digest:`) before the manifests; Helm 3.17 and 4.1 print it on stderr.
fn without_pull_lines(stdout: &str) -> String {
    stdout
        .lines()
        .skip_while(|line| line.starts_with("Pulled: ") || line.starts_with("Digest: "))
        .map(|line| format!("{line}\n"))
        .collect()
}

/// `helm plugin install oci://...` with the signature checked; the plugin with the archive's
/// binary renders the test chart exactly as the source tree's plugin with the source build.
/// A tampered tarball is refused.
fn plugin_renders_as_the_source_build(
    scratch: &Scratch,
    release: &Release,
    registry: &Registry,
    version: &str,
    archive_dir: &Path,
) {
    let chart = data("charts/styrmin-e2e");
    let config = workspace_root().join("examples/styrmin.yaml");
    let render = |helm: &HelmHome, path: &Path| {
        let mut cmd = helm.helm("helm4");
        cmd.arg("template")
            .arg("web")
            .arg(&chart)
            .args(["--post-renderer", "styrmin", "--post-renderer-args"])
            .arg(format!("--config={}", config.display()));
        if path != release_dir() {
            let system = std::env::var_os("PATH").unwrap_or_default();
            let mut dirs = vec![path.to_path_buf()];
            dirs.extend(std::env::split_paths(&system));
            cmd.env("PATH", std::env::join_paths(dirs).unwrap());
        }
        utf8(run_ok(&mut cmd, None).stdout, "helm4 template")
    };

    let released = HelmHome::new("release-plugin");
    let mut install = released.helm("helm4");
    install
        .args(["plugin", "install", "--plain-http", "--keyring"])
        .arg(&release.keyring)
        .arg(format!(
            "oci://{}/helm-plugins/styrmin:{version}",
            registry.address
        ));
    run_ok(&mut install, None);
    let from_release = render(&released, archive_dir);

    let source = HelmHome::new("release-plugin-source");
    let mut install = source.helm("helm4");
    install
        .args(["plugin", "install"])
        .arg(workspace_root().join("postrender/helm-plugin"));
    run_ok(&mut install, None);
    let from_source = render(&source, &release_dir());
    assert!(
        from_release == from_source,
        "the released plugin and binary render the test chart otherwise than the source build"
    );
    let mut plain = source.helm("helm4");
    plain.arg("template").arg("web").arg(&chart);
    assert_ne!(
        utf8(run_ok(&mut plain, None).stdout, "helm4 template"),
        from_source,
        "the post-renderer changed nothing, so the comparison shows nothing"
    );

    // A tarball changed after signing, with the release's .prov beside it, is refused.
    let tampered = scratch.join("tampered");
    std::fs::create_dir_all(&tampered).unwrap();
    let name = format!("styrmin-{version}.tgz");
    let mut bytes = std::fs::read(release.dir.join(&name)).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    std::fs::write(tampered.join(&name), bytes).unwrap();
    std::fs::copy(
        release.dir.join(format!("{name}.prov")),
        tampered.join(format!("{name}.prov")),
    )
    .unwrap();
    let helm = HelmHome::new("release-plugin-tampered");
    let mut install = helm.helm("helm4");
    install
        .args(["plugin", "install", "--keyring"])
        .arg(&release.keyring)
        .arg(tampered.join(&name));
    let output = run(&mut install, None);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success() && stderr.contains("sha256 sum does not match"),
        "helm4 plugin install did not refuse a tampered tarball for its checksum: {stderr}"
    );
    assert!(
        !helm.data_home().join("plugins/styrmin").exists(),
        "the tampered plugin was installed"
    );
}

/// Uninstalls the release and deletes what the step created when dropped, so that a failed
/// run leaves the cluster as it found it.
struct Installed<'a> {
    helm: &'a HelmHome,
    kubeconfig: &'a Path,
}

impl Drop for Installed<'_> {
    fn drop(&mut self) {
        let mut uninstall = self.helm.helm("helm4");
        uninstall
            .args([
                "uninstall",
                "styrmin-webhook",
                "--namespace",
                NODE_NAMESPACE,
                "--wait",
            ])
            .env("KUBECONFIG", self.kubeconfig);
        let _ = run(&mut uninstall, None);
        let _ = run(
            kubectl(self.kubeconfig).args([
                "delete",
                "--ignore-not-found",
                "--timeout=180s",
                "namespace",
                NODE_NAMESPACE,
                NODE_APP_NAMESPACE,
            ]),
            None,
        );
        let _ = run(
            kubectl(self.kubeconfig).args([
                "delete",
                "--ignore-not-found",
                "styrminclusters.styrmin.io",
                "default",
            ]),
            None,
        );
    }
}

const NODE_NAMESPACE: &str = "styrmin-system";
const NODE_APP_NAMESPACE: &str = "styrmin-release-web1";

fn kubectl(kubeconfig: &Path) -> Command {
    let mut cmd = Command::new(tool("kubectl"));
    cmd.arg("--kubeconfig").arg(kubeconfig);
    cmd
}

/// The release's Pods on the node: every container of the image pinned by the registry's
/// `digest`, ready, started from what the runtime pulled by that digest.
fn assert_pods_pinned(kubeconfig: &Path, registry: &Registry, digest: &str) {
    let pods: Value = serde_json::from_slice(
        &run_ok(
            kubectl(kubeconfig).args([
                "get",
                "pods",
                "--namespace",
                NODE_NAMESPACE,
                "--selector",
                "app.kubernetes.io/instance=styrmin-webhook",
                "--output",
                "json",
            ]),
            None,
        )
        .stdout,
    )
    .unwrap();
    let pods = pods["items"].as_array().unwrap();
    assert!(!pods.is_empty(), "no Pods of the release");
    let pinned = format!("{}/styrmin-webhook@{digest}", registry.address);
    for pod in pods {
        for container in pod["spec"]["containers"].as_array().unwrap() {
            assert_eq!(container["image"], pinned.as_str(), "{container}");
        }
        // imageID: what the runtime pulled, by the registry's digest of the index.
        for container in pod["status"]["containerStatuses"].as_array().unwrap() {
            assert_eq!(container["ready"], true, "{container}");
            assert_eq!(container["imageID"], pinned.as_str(), "{container}");
        }
    }
}

/// The class the `ingress` file gets when created through the API server (a server-side dry
/// run), tried for a minute until it is haproxy; with the last attempt's stderr.
fn class_through_api_server(kubeconfig: &Path, ingress: &Path) -> (Option<String>, String) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let output = run(
            kubectl(kubeconfig)
                .args(["create", "--dry-run=server", "--output", "json", "-f"])
                .arg(ingress),
            None,
        );
        let created: Option<Value> = output
            .status
            .success()
            .then(|| serde_json::from_slice(&output.stdout).unwrap());
        let class = created
            .as_ref()
            .and_then(|ingress| ingress["spec"]["ingressClassName"].as_str())
            .map(str::to_owned);
        if class.as_deref() == Some("haproxy") || Instant::now() > deadline {
            break (class, String::from_utf8_lossy(&output.stderr).into_owned());
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The chart from the registry on a real node: `helm install --verify` with the release's
/// public key, the Deployment available with every container started from the pushed index
/// (`imageID` is the registry's digest, so the kubelet pulled it from there), and an Ingress
/// written through the API server gets the class the webhook sets.
fn installs_on_a_node(
    scratch: &Scratch,
    release: &Release,
    registry: &Registry,
    version: &str,
    digest: &str,
) {
    let Some(kubeconfig) = std::env::var_os("E2E_NODE_KUBECONFIG").filter(|k| !k.is_empty()) else {
        eprintln!(
            "release: E2E_NODE_KUBECONFIG is not set: the install on a node is skipped \
             (make test-cluster, docs/testing.md)"
        );
        return;
    };
    let kubeconfig = PathBuf::from(kubeconfig);
    // A run stopped before its clean-up finished leaves namespaces terminating.
    run_ok(
        kubectl(&kubeconfig).args([
            "wait",
            "--for=delete",
            "--timeout=180s",
            "namespace",
            NODE_NAMESPACE,
            NODE_APP_NAMESPACE,
        ]),
        None,
    );
    let helm = HelmHome::new("release-node");
    let installed = Installed {
        helm: &helm,
        kubeconfig: &kubeconfig,
    };
    let started = Instant::now();
    let mut install = helm.helm("helm4");
    install
        .args(["install", "styrmin-webhook"])
        .arg(format!("oci://{}/charts/styrmin-webhook", registry.address))
        .args(["--version", version, "--namespace", NODE_NAMESPACE])
        .args([
            "--create-namespace",
            "--plain-http",
            "--verify",
            "--keyring",
        ])
        .arg(&release.keyring)
        .args(["--wait", "--timeout", "5m"])
        .env("KUBECONFIG", &kubeconfig);
    run_ok(&mut install, None);
    eprintln!(
        "release: installed from the registry and Ready in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    assert_pods_pinned(&kubeconfig, registry, digest);

    // The webhook answers the API server: an Ingress without a class, in an environment's
    // namespace, gets the cluster's class. The view is fed by a watch, so the first writes
    // may come before it holds the StyrminCluster.
    let cluster = scratch.write(
        "node-cluster.yaml",
        "apiVersion: styrmin.io/v1alpha1\nkind: StyrminCluster\nmetadata: {name: default}\nspec: {ingressClass: haproxy}\n",
    );
    run_ok(
        kubectl(&kubeconfig).arg("apply").arg("-f").arg(&cluster),
        None,
    );
    run_ok(
        kubectl(&kubeconfig).args(["create", "namespace", NODE_APP_NAMESPACE]),
        None,
    );
    run_ok(
        kubectl(&kubeconfig).args([
            "label",
            "namespace",
            NODE_APP_NAMESPACE,
            "styrmin/environment_id=prod",
        ]),
        None,
    );
    let ingress = scratch.write(
        "node-ingress.yaml",
        &format!(
            "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: web, namespace: {NODE_APP_NAMESPACE}}}\nspec:\n  defaultBackend:\n    service: {{name: web, port: {{number: 80}}}}\n"
        ),
    );
    let class = class_through_api_server(&kubeconfig, &ingress);
    assert_eq!(
        class.0.as_deref(),
        Some("haproxy"),
        "the Ingress written through the API server did not get the cluster's class: {}",
        class.1
    );
    drop(installed);
}

/// `python3 -m http.server` serving a folder on a port of 127.0.0.1: GitHub's release
/// downloads and raw files, as far as `curl` can tell. Stopped on drop.
struct FileServer {
    child: Child,
    address: String,
}

impl FileServer {
    fn start(scratch: &Scratch, root: &Path) -> FileServer {
        let address = free_loopback_address();
        let port = address.rsplit(':').next().unwrap();
        let child = Command::new("python3")
            .args(["-m", "http.server", "--bind", "127.0.0.1", "--directory"])
            .arg(root)
            .arg(port)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(scratch.join("http.log")).unwrap())
            .spawn()
            .expect("starting python3 -m http.server");
        let server = FileServer { child, address };
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(&server.address).is_err() {
            assert!(
                Instant::now() < deadline,
                "python3 -m http.server did not answer on {}",
                server.address
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        server
    }
}

impl Drop for FileServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const README_RELEASES: &str = "https://github.com/styrmin/ingress-enforcement/releases/download";
const README_RAW: &str = "https://raw.githubusercontent.com/styrmin/ingress-enforcement/main";

/// The fenced block that follows `marker` in the README (the marker line itself excluded).
fn readme_block<'a>(readme: &'a str, marker: &str) -> &'a str {
    let after = &readme[readme
        .find(marker)
        .unwrap_or_else(|| panic!("the README has no {marker:?}"))..];
    let start = after.find("```").unwrap();
    let body = &after[start..];
    let body = &body[body.find('\n').unwrap() + 1..];
    &body[..body.find("```").unwrap()]
}

/// Runs `lines` with bash (`-eu -o pipefail`) in `dir`, with `helm` being Helm 3 and HOME in
/// the scratch directory.
fn run_as_user(helm: &HelmHome, home: &Path, dir: &Path, lines: &str) -> std::process::Output {
    let bin = home.join("test-bin");
    std::fs::create_dir_all(&bin).unwrap();
    if !bin.join("helm").exists() {
        std::os::unix::fs::symlink(tool("helm3"), bin.join("helm")).unwrap();
    }
    let mut cmd = Command::new("bash");
    // Helm's homes, no STYRMIN_ variables; PATH without the source build.
    for (key, value) in helm.helm("helm3").get_envs() {
        match value {
            Some(value) => cmd.env(key, value),
            None => cmd.env_remove(key),
        };
    }
    let system = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs = vec![bin];
    dirs.extend(std::env::split_paths(&system).filter(|d| *d != release_dir()));
    cmd.env("PATH", std::env::join_paths(dirs).unwrap())
        .env("HOME", home)
        .env_remove("GNUPGHOME")
        .args(["-eu", "-o", "pipefail", "-c", lines])
        .current_dir(dir);
    run(&mut cmd, None)
}

/// The class of every Ingress in a `helm install --dry-run`'s manifest, Lists' items too.
fn ingress_classes(manifest: &str) -> Vec<Value> {
    let mut classes = Vec::new();
    for doc in split_documents(manifest) {
        let value = doc.value();
        let items = match value["items"].as_array() {
            Some(items) => items.clone(),
            None => vec![value],
        };
        for object in items.iter().filter(|o| o["kind"] == "Ingress") {
            classes.push(object["spec"]["ingressClassName"].clone());
        }
    }
    classes
}

/// A work folder as the README's user has it: the chart and the README's `config`.
fn prepare_work(work: &Path, config: &str) {
    std::fs::create_dir_all(work).unwrap();
    copy_dir(&data("charts/styrmin-e2e"), &work.join("chart"));
    std::fs::write(work.join("styrmin.yaml"), config).unwrap();
}

/// A changed archive: the README's Helm 3 block (`lines`, served by `server`) stops at
/// sha256sum, before anything is installed.
fn assert_tampered_archive_stops(
    scratch: &Scratch,
    release: &Release,
    version: &str,
    server: &FileServer,
    helm: &HelmHome,
    lines: &str,
    config: &str,
) {
    let tampered = scratch.join(&format!("site/tampered/v{version}"));
    std::fs::create_dir_all(&tampered).unwrap();
    for entry in std::fs::read_dir(&release.dir).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), tampered.join(entry.file_name())).unwrap();
    }
    let archive = tampered.join(format!("styrmin-{version}-linux-{}.tar.gz", host_arch()));
    let mut bytes = std::fs::read(&archive).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    std::fs::write(&archive, bytes).unwrap();
    let lines = lines.replace(
        &format!("http://{}/releases", server.address),
        &format!("http://{}/tampered", server.address),
    );
    let other_home = scratch.join("user-home-tampered");
    let work = scratch.join("user-work-tampered");
    prepare_work(&work, config);
    let output = run_as_user(helm, &other_home, &work, &lines);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        !output.status.success() && stdout.contains("FAILED"),
        "the README's Helm 3 block went on with a changed archive: {stdout}"
    );
    assert!(
        !other_home.join(".local/bin/styrmin-postrender").exists(),
        "the changed archive's binary was installed"
    );
}

/// The README's release-key lines and its Helm 3 block against this release (see the module
/// comment).
fn readme_installs_for_a_helm3_user(
    scratch: &Scratch,
    release: &Release,
    registry: &Registry,
    version: &str,
) {
    let started = Instant::now();
    let readme = std::fs::read_to_string(workspace_root().join("README.md")).unwrap();
    let helm = HelmHome::new("release-readme");

    // What GitHub serves: the release's files, and KEYS at the repository's root.
    let site = scratch.join("site");
    let releases = site.join("releases");
    std::fs::create_dir_all(site.join("repo")).unwrap();
    std::fs::create_dir_all(&releases).unwrap();
    std::os::unix::fs::symlink(&release.dir, releases.join(format!("v{version}"))).unwrap();
    std::fs::write(site.join("repo/KEYS"), keys_file(scratch, &release.keyring)).unwrap();
    let server = FileServer::start(scratch, &site);
    let served = |lines: &str| {
        lines
            .replace(
                README_RELEASES,
                &format!("http://{}/releases", server.address),
            )
            .replace(README_RAW, &format!("http://{}/repo", server.address))
    };

    // The release key: the lines before the first Helm command make styrmin.gpg.
    let key_block = readme_block(&readme, "## Install");
    let key_lines: String = key_block
        .lines()
        .take_while(|line| !line.starts_with("helm "))
        .map(|line| format!("{line}\n"))
        .collect();
    assert!(key_lines.contains("KEYS"), "{key_block}");
    let user_home = scratch.join("user-home");
    let work = scratch.join("user-work");
    std::fs::create_dir_all(&work).unwrap();
    let output = run_as_user(&helm, &user_home, &work, &served(&key_lines));
    assert!(
        output.status.success(),
        "the README's release-key lines failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut verify = helm.helm("helm3");
    verify
        .args(["template", "styrmin-webhook"])
        .arg(format!("oci://{}/charts/styrmin-webhook", registry.address))
        .args([
            "--version",
            version,
            "--plain-http",
            "--verify",
            "--keyring",
        ])
        .arg(work.join("styrmin.gpg"));
    run_ok(&mut verify, None);

    // The Helm 3 block: the archive, the checksum, the binary in ~/.local/bin, helm install.
    let block = readme_block(&readme, "<!-- e2e/tests/release.rs runs");
    let first = format!("VERSION={version} PLATFORM=linux-amd64 ");
    assert!(
        block.starts_with(&first),
        "the README's Helm 3 block does not start with {first:?}:\n{block}"
    );
    let server_api = FakeApiServer::with_discovery();
    let kubeconfig = scratch.join("readme-kubeconfig");
    server_api.write_kubeconfig(&kubeconfig, Some("apps"));
    let install = "helm install web ./chart";
    assert!(block.contains(install), "{block}");
    let lines = served(block)
        .replace(
            &first,
            &format!("VERSION={version} PLATFORM=linux-{} ", host_arch()),
        )
        .replace(
            install,
            &format!(
                "KUBECONFIG={} {install} --dry-run --disable-openapi-validation",
                kubeconfig.display()
            ),
        );
    let config = readme_block(&readme, "```yaml\n# styrmin.yaml");
    let work = scratch.join("user-work-helm3");
    prepare_work(&work, config);
    let output = run_as_user(&helm, &user_home, &work, &lines);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the README's Helm 3 block failed: {}\n{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        user_home.join(".local/bin/styrmin-postrender").is_file(),
        "no ~/.local/bin/styrmin-postrender"
    );
    let manifest = stdout
        .split_once("\nMANIFEST:\n")
        .map(|(_, rest)| rest.split_once("\nNOTES:\n").map_or(rest, |(m, _)| m))
        .unwrap_or_else(|| panic!("no MANIFEST: in the helm install output:\n{stdout}"));
    let classes = ingress_classes(manifest);
    assert!(classes.len() >= 5, "{classes:?}\n{manifest}");
    assert!(
        classes.iter().all(|class| class == "haproxy"),
        "the README's config gives haproxy: {classes:?}"
    );
    let report = std::fs::read_to_string(work.join("styrmin-report.txt")).unwrap();
    assert!(
        report.contains(&format!("{} changed, 0 warnings", classes.len())),
        "{report}"
    );

    assert_tampered_archive_stops(scratch, release, version, &server, &helm, &lines, config);
    eprintln!(
        "release: the README's lines ran in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
