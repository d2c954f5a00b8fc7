//! The container image of `scripts/image/build-image.sh` (`make image`): built twice to the same
//! bytes, read back from its OCI archive (exactly the binaries, the libraries `ldd` names, the
//! user 65532; the paths, user, entrypoint, ports and labels of the Dockerfile), loaded by
//! podman from both archives, and run by podman the way the chart's Deployment runs it: the
//! user, read-only root filesystem, dropped capabilities, no privilege escalation and the
//! seccomp profile of the rendered pod; the chart's generated Secret and policy ConfigMap
//! mounted where its volumeMounts say; its args. Then the probes answer, a client that trusts
//! only the chart's caBundle gets the right patch, and SIGTERM to PID 1 drains and exits 0.
//!
//! Needs `make build` and `make tools` (podman, skopeo); runs as root (CI does). Two
//! adaptations, printed when they apply: the listen addresses of the args are moved from
//! `0.0.0.0:<containerPort>` to free ports on 127.0.0.1 (the container shares the host's
//! network); and on a host with hybrid cgroups (v1 controllers and a v2 hierarchy), where crun
//! refuses to start, podman runs in a mount namespace of its own without the v2 hierarchy.
//! Containers run without cgroups (`--cgroups=disabled`): resource limits are not tested here.
//!
//! Where podman cannot run a container at all (or with `E2E_IMAGE_RUNNER=rootfs`), the test
//! says so on stderr, passing or not, and runs the image's entrypoint from its unpacked root
//! filesystem instead: chrooted in mount and PID namespaces as PID 1, the same user, no new
//! privileges, a read-only root and volumes; no seccomp filter, and the capability bounding
//! set is not cleared (a non-root UID holds no capabilities either way), so neither is checked.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read as _, Write as _};
use std::net::SocketAddr;
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
use styrmin_e2e::webhook::collect_lines;
use styrmin_e2e::{
    HelmHome, Scratch, free_port, release_binary, release_dir, run, run_ok, split_documents, utf8,
    webhook_data, workspace_root, workspace_version,
};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

const BINARIES: [&str; 2] = ["styrmin-webhook", "styrmin-postrender"];
const SOURCE_DATE_EPOCH: &str = "1700000000";
const CREATED: &str = "2023-11-14T22:13:20Z";
const USER: &str = "65532:65532";
const RELEASE: &str = "styrmin-webhook";
const NAMESPACE: &str = "styrmin-system";
const TIMEOUT: Duration = Duration::from_secs(30);
const INGRESS: &str =
    "kubewarden-ingress-policy__ingress-v1-create__multi-backend-partial-tls.request.json";

/// What `scripts/image/build-image.sh` wrote into one directory.
struct Image {
    oci: PathBuf,
    docker: PathBuf,
    digest: String,
    /// The OCI archive unpacked: `index.json`, `blobs/sha256/...`.
    layout: PathBuf,
}

impl Image {
    /// Runs the script with a fixed SOURCE_DATE_EPOCH, writing into `<scratch>/<name>`.
    fn build(scratch: &Scratch, name: &str) -> Image {
        let out = scratch.join(name);
        run_ok(
            Command::new(workspace_root().join("scripts/image/build-image.sh"))
                .env("SOURCE_DATE_EPOCH", SOURCE_DATE_EPOCH)
                .env("RELEASE_DIR", release_dir())
                .env("IMAGE_DIR", &out),
            None,
        );
        let version = workspace_version();
        let image = Image {
            oci: out.join(format!("styrmin-webhook-{version}.oci.tar")),
            docker: out.join(format!("styrmin-webhook-{version}.docker.tar")),
            digest: std::fs::read_to_string(out.join(format!("styrmin-webhook-{version}.digest")))
                .unwrap()
                .trim()
                .to_owned(),
            layout: out.join("layout"),
        };
        std::fs::create_dir_all(&image.layout).unwrap();
        run_ok(
            Command::new("tar")
                .arg("-xf")
                .arg(&image.oci)
                .arg("-C")
                .arg(&image.layout),
            None,
        );
        image
    }

    fn blob(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").unwrap();
        self.layout.join("blobs/sha256").join(hex)
    }

    fn json_blob(&self, digest: &str) -> Value {
        serde_json::from_slice(&std::fs::read(self.blob(digest)).unwrap()).unwrap()
    }

    fn manifest(&self) -> Value {
        let index: Value =
            serde_json::from_slice(&std::fs::read(self.layout.join("index.json")).unwrap())
                .unwrap();
        let manifests = index["manifests"].as_array().unwrap();
        assert_eq!(manifests.len(), 1, "{index}");
        assert_eq!(manifests[0]["digest"], self.digest.as_str());
        self.json_blob(&self.digest)
    }

    fn config(&self) -> Value {
        self.json_blob(self.manifest()["config"]["digest"].as_str().unwrap())
    }

    fn layer(&self) -> PathBuf {
        let layers = self.manifest()["layers"].as_array().unwrap().clone();
        assert_eq!(layers.len(), 1);
        assert_eq!(
            layers[0]["mediaType"],
            "application/vnd.oci.image.layer.v1.tar+gzip"
        );
        self.blob(layers[0]["digest"].as_str().unwrap())
    }
}

/// One entry of the layer, from `tar --numeric-owner -tvzf`.
#[derive(Debug)]
struct Entry {
    mode: String,
    owner: String,
    size: u64,
    date: String,
}

fn layer_entries(layer: &Path) -> BTreeMap<String, Entry> {
    let output = run_ok(
        Command::new("tar")
            .args(["--numeric-owner", "--utc", "-tvzf"])
            .arg(layer),
        None,
    );
    utf8(output.stdout, "tar listing")
        .lines()
        .map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            assert_eq!(fields.len(), 6, "a listing line without links: {line}");
            let name = fields[5].trim_start_matches("./").trim_end_matches('/');
            (
                format!("/{name}"),
                Entry {
                    mode: fields[0].to_owned(),
                    owner: fields[1].to_owned(),
                    size: fields[2].parse().unwrap(),
                    date: format!("{} {}", fields[3], fields[4]),
                },
            )
        })
        .collect()
}

/// The shared libraries and the loader `ldd` names for the release binaries.
fn ldd_libraries() -> BTreeSet<String> {
    let mut libraries = BTreeSet::new();
    for bin in BINARIES {
        let output = run_ok(Command::new("ldd").arg(release_binary(bin)), None);
        for line in utf8(output.stdout, "ldd").lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            match fields.as_slice() {
                [_, "=>", path, ..] if path.starts_with('/') => {
                    libraries.insert((*path).to_owned());
                }
                [path, ..] if path.starts_with('/') => {
                    libraries.insert((*path).to_owned());
                }
                _ => {}
            }
        }
    }
    libraries
}

/// `LABEL`, `USER`, `EXPOSE`, `ENTRYPOINT` and the `COPY --from=build` destinations of the
/// Dockerfile's final stage.
struct Dockerfile {
    copied_to: Vec<String>,
    labels: BTreeMap<String, String>,
    user: String,
    exposed: BTreeSet<String>,
    entrypoint: Value,
}

fn dockerfile() -> Dockerfile {
    let text = std::fs::read_to_string(workspace_root().join("Dockerfile")).unwrap();
    let last_stage: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("FROM gcr.io/distroless/"))
        .collect();
    let argument = |instruction: &str| {
        last_stage
            .iter()
            .find_map(|l| l.strip_prefix(instruction))
            .unwrap_or_else(|| panic!("the Dockerfile has no {instruction}"))
            .trim()
            .to_owned()
    };
    Dockerfile {
        copied_to: last_stage
            .iter()
            .filter(|l| l.starts_with("COPY --from=build "))
            .map(|l| l.split_whitespace().last().unwrap().to_owned())
            .collect(),
        labels: last_stage
            .iter()
            .filter_map(|l| l.strip_prefix("LABEL "))
            .map(|l| {
                let (key, value) = l.split_once('=').unwrap();
                (key.to_owned(), value.trim_matches('"').to_owned())
            })
            .collect(),
        user: argument("USER "),
        exposed: argument("EXPOSE ")
            .split_whitespace()
            .map(|port| format!("{port}/tcp"))
            .collect(),
        entrypoint: serde_json::from_str(&argument("ENTRYPOINT ")).unwrap(),
    }
}

/// The layer holds exactly the binaries, what ldd names and the user's files, each dated the
/// epoch, owned by root (the user's home by the user), the binaries the release's.
fn assert_layer_entries(entries: &BTreeMap<String, Entry>) {
    let files: BTreeSet<String> = entries
        .iter()
        .filter(|(_, e)| !e.mode.starts_with('d'))
        .map(|(name, _)| name.clone())
        .collect();
    let mut expected: BTreeSet<String> = ldd_libraries();
    expected.extend(BINARIES.map(|b| format!("/usr/local/bin/{b}")));
    expected.extend(["/etc/passwd".to_owned(), "/etc/group".to_owned()]);
    assert_eq!(files, expected);
    for (name, entry) in entries {
        assert!(
            entry.mode.starts_with('-') || entry.mode.starts_with('d'),
            "{name}: only files and directories: {entry:?}"
        );
        assert_eq!(entry.date, "2023-11-14 22:13", "{name}");
        let owner = if name == "/home/nonroot" {
            "65532/65532"
        } else {
            "0/0"
        };
        assert_eq!(entry.owner, owner, "{name}");
    }
    assert_eq!(entries["/tmp"].mode, "drwxrwxrwt");
    assert_eq!(entries["/home/nonroot"].mode, "drwx------");
    for bin in BINARIES {
        let entry = &entries[&format!("/usr/local/bin/{bin}")];
        assert_eq!(entry.mode, "-rwxr-xr-x");
        assert_eq!(
            entry.size,
            std::fs::metadata(release_binary(bin)).unwrap().len()
        );
    }
}

/// The user the chart runs as has a name in the unpacked `layer`, as in distroless (the
/// Dockerfile's base), and the binaries are the release's.
fn assert_unpacked_root(scratch: &Scratch, layer: &Path) {
    let unpacked_dir = scratch.join("rootfs");
    std::fs::create_dir_all(&unpacked_dir).unwrap();
    run_ok(
        Command::new("tar")
            .args(["--no-same-owner", "-xzf"])
            .arg(layer)
            .arg("-C")
            .arg(&unpacked_dir),
        None,
    );
    let passwd = std::fs::read_to_string(unpacked_dir.join("etc/passwd")).unwrap();
    assert!(
        passwd
            .lines()
            .any(|l| l == "nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin"),
        "{passwd}"
    );
    for bin in BINARIES {
        assert!(
            std::fs::read(unpacked_dir.join("usr/local/bin").join(bin)).unwrap()
                == std::fs::read(release_binary(bin)).unwrap(),
            "{bin} is the release binary"
        );
    }
}

#[test]
fn the_image_is_reproducible_small_and_laid_out_as_the_dockerfile_says() {
    let scratch = Scratch::new("image-build");
    let first = Image::build(&scratch, "first");
    let second = Image::build(&scratch, "second");

    // The same inputs, the same bytes: both archives, so the same digest.
    assert!(first.digest.starts_with("sha256:"), "{}", first.digest);
    assert_eq!(first.digest, second.digest);
    for (a, b) in [(&first.oci, &second.oci), (&first.docker, &second.docker)] {
        assert!(
            std::fs::read(a).unwrap() == std::fs::read(b).unwrap(),
            "{} and {} differ",
            a.display(),
            b.display()
        );
    }

    // The config: the chart's user, the webhook as entrypoint, its ports, the version.
    let version = workspace_version();
    let config = first.config();
    assert_eq!(config["os"], "linux");
    assert_eq!(config["created"], CREATED);
    let run_config = &config["config"];
    assert_eq!(run_config["User"], USER);
    assert_eq!(
        run_config["Entrypoint"],
        json!(["/usr/local/bin/styrmin-webhook"])
    );
    let labels = &run_config["Labels"];
    assert_eq!(labels["org.opencontainers.image.version"], version.as_str());
    assert_eq!(labels["org.opencontainers.image.created"], CREATED);
    let revision = utf8(
        run_ok(
            Command::new("git")
                .arg("-C")
                .arg(workspace_root())
                .args(["rev-parse", "HEAD"]),
            None,
        )
        .stdout,
        "git rev-parse",
    );
    assert_eq!(labels["org.opencontainers.image.revision"], revision.trim());

    // The layer: exactly the binaries, what ldd names, the user's files; every time the epoch.
    let entries = layer_entries(&first.layer());
    assert_layer_entries(&entries);
    // Under 32 MB unpacked (what a node stores), so the compressed layer is smaller still:
    // 30.4 MB with the migration executor and `migrate`, 11.0 MB compressed.
    let unpacked: u64 = entries.values().map(|e| e.size).sum();
    println!(
        "image: {unpacked} bytes unpacked, {} bytes compressed, {}",
        std::fs::metadata(first.layer()).unwrap().len(),
        first.digest
    );
    assert!(unpacked < 32_000_000, "{unpacked} bytes");

    // The user the chart runs as has a name, as in distroless (the Dockerfile's base).
    assert_unpacked_root(&scratch, &first.layer());

    // The Dockerfile's image has the same paths, user, entrypoint, ports and labels.
    let docker = dockerfile();
    assert_eq!(
        docker.copied_to,
        BINARIES.map(|b| format!("/usr/local/bin/{b}"))
    );
    assert_eq!(run_config["User"], docker.user.as_str());
    assert_eq!(run_config["Entrypoint"], docker.entrypoint);
    let exposed: BTreeSet<String> = run_config["ExposedPorts"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(exposed, docker.exposed);
    assert!(docker.labels.len() >= 4, "{:?}", docker.labels);
    for (key, value) in &docker.labels {
        assert_eq!(labels[key], value.as_str(), "label {key}");
    }

    // skopeo (the library of podman, buildah and CRI-O) reads both archives as this image.
    for transport in [
        format!("oci-archive:{}", first.oci.display()),
        format!("docker-archive:{}", first.docker.display()),
    ] {
        let output = run_ok(Command::new("skopeo").args(["inspect", &transport]), None);
        let inspected: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(inspected["Labels"], *labels, "{transport}");
        assert_eq!(inspected["Architecture"], config["architecture"]);
        if transport.starts_with("oci-archive:") {
            assert_eq!(inspected["Digest"], first.digest.as_str());
        }
    }
    // `docker load` names the image from the docker-archive's manifest.
    let output = run_ok(
        Command::new("tar")
            .arg("-xOf")
            .arg(&first.docker)
            .arg("manifest.json"),
        None,
    );
    let docker_manifest: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        docker_manifest[0]["RepoTags"],
        json!([format!("docker.io/library/styrmin-webhook:{version}")])
    );
}

// ---- running it -----------------------------------------------------------------------------

/// The chart rendered by Helm 3 with the policy-file source, as objects.
fn render_chart() -> Vec<Value> {
    let home = HelmHome::new("image-chart");
    let mut cmd = home.helm("helm3");
    cmd.args(["template", RELEASE])
        .arg(workspace_root().join("charts/styrmin-webhook"))
        .args(["--namespace", NAMESPACE])
        .args(["--set", "view.source=policy-file"])
        .arg(format!(
            "--set-file=view.policy={}",
            webhook_data("admission/policy.yaml").display()
        ))
        // A shorter delay than the default 10 s, so the test does not wait it out.
        .args([
            "--set",
            "shutdownDelaySeconds=2",
            "--set",
            "drainTimeoutSeconds=5",
        ]);
    let text = utf8(run_ok(&mut cmd, None).stdout, "helm template output");
    split_documents(&text)
        .iter()
        .filter(|d| !d.is_blank())
        .map(|d| d.value())
        .collect()
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("the chart renders no {kind} {name}"))
}

/// `(soft, hard)` of a limit of this process, from /proc/self/limits.
fn limit(name: &str) -> (String, String) {
    let text = std::fs::read_to_string("/proc/self/limits").unwrap();
    let line = text.lines().find(|l| l.starts_with(name)).unwrap();
    let fields: Vec<&str> = line[name.len()..].split_whitespace().collect();
    let value = |v: &str| if v == "unlimited" { "-1" } else { v }.to_owned();
    (value(fields[0]), value(fields[1]))
}

/// Whether cgroup v2 is mounted beside v1 controllers (hybrid), which crun refuses.
fn hybrid_cgroups() -> bool {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .any(|l| l.contains(" /sys/fs/cgroup/unified ") && l.contains(" - cgroup2 "))
}

/// A line on the test process's stderr, shown even when the test passes (the harness captures
/// only `print!` and `eprint!`): which way the image ran.
fn notice(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// podman with storage of its own in a scratch directory.
struct Podman {
    scratch: Scratch,
    hybrid: bool,
}

impl Podman {
    fn new() -> Podman {
        let podman = Podman {
            scratch: Scratch::new("image-podman"),
            hybrid: hybrid_cgroups(),
        };
        if podman.hybrid {
            notice(
                "image: hybrid cgroups here: podman runs in a mount namespace without \
                 /sys/fs/cgroup/unified (crun refuses hybrid hierarchies)",
            );
        }
        podman
    }

    fn command(&self) -> Command {
        let mut cmd = if self.hybrid {
            let mut cmd = Command::new("unshare");
            cmd.args(["--mount", "--propagation", "private", "sh", "-c"])
                .arg(r#"umount /sys/fs/cgroup/unified && exec "$@""#)
                .args(["sh", "podman"]);
            cmd
        } else {
            Command::new("podman")
        };
        cmd.arg("--root")
            .arg(self.scratch.join("storage"))
            .arg("--runroot")
            .arg(self.scratch.join("run"))
            // Libpod's own state too: another run of these tests has another.
            .arg("--tmpdir")
            .arg(self.scratch.join("tmp"))
            .args([
                "--storage-driver",
                "vfs",
                "--cgroup-manager",
                "cgroupfs",
                "--events-backend",
                "none",
            ]);
        cmd
    }

    /// Why podman cannot run a container here (its error), or `None` when it can: the image's
    /// `--version` with the flags the test runs it with.
    fn cannot_run(&self, image_name: &str) -> Option<String> {
        let (soft, hard) = limit("Max open files");
        let output = run(
            self.command()
                .args([
                    "run",
                    "--rm",
                    "--pull=never",
                    "--network=host",
                    "--cgroups=disabled",
                ])
                .arg(format!("--ulimit=nofile={soft}:{hard}"))
                .args(["--ulimit=nproc=4096:4096", image_name, "--version"]),
            None,
        );
        (!output.status.success())
            .then(|| String::from_utf8_lossy(&output.stderr).trim().to_owned())
    }

    /// Loads an archive; the image ID it reports.
    fn load(&self, archive: &Path) -> String {
        let output = run_ok(self.command().arg("load").arg("--input").arg(archive), None);
        let text = utf8(output.stdout, "podman load");
        let name = text
            .lines()
            .find_map(|l| l.strip_prefix("Loaded image: "))
            .unwrap_or_else(|| panic!("podman load said: {text}"))
            .trim()
            .to_owned();
        let output = run_ok(
            self.command()
                .args(["image", "inspect", "--format", "{{.Id}}"])
                .arg(&name),
            None,
        );
        utf8(output.stdout, "podman image inspect")
            .trim()
            .to_owned()
    }
}

impl Drop for Podman {
    fn drop(&mut self) {
        let _ = self
            .command()
            .args(["rm", "--all", "--force"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// The securityContext of the rendered pod: the container's settings over the pod's.
struct Security {
    uid: u64,
    gid: u64,
    read_only_root: bool,
    no_new_privileges: bool,
    drop_all_capabilities: bool,
}

/// A volume written out as the kubelet writes it, and where the container mounts it.
struct Mount {
    source: PathBuf,
    target: String,
}

/// How the image is run: by podman, or (where podman cannot run containers) its entrypoint
/// from the unpacked root filesystem, chrooted, under the same user.
enum Runner {
    Podman(Podman),
    Rootfs(PathBuf),
}

impl Runner {
    fn start(
        &self,
        image_name: &str,
        security: &Security,
        mounts: &[Mount],
        args: &[String],
    ) -> Container {
        let name = format!("styrmin-image-test-{}", std::process::id());
        let mut command = match self {
            Runner::Podman(podman) => {
                let mut run_args: Vec<String> = vec![
                    "run".into(),
                    "--pull=never".into(),
                    "--network=host".into(),
                    "--cgroups=disabled".into(),
                    format!("--user={}:{}", security.uid, security.gid),
                    format!("--name={name}"),
                ];
                if security.read_only_root {
                    // The kubelet mounts no tmpfs the pod does not ask for.
                    run_args.extend(["--read-only".into(), "--read-only-tmpfs=false".into()]);
                }
                if security.no_new_privileges {
                    run_args.push("--security-opt=no-new-privileges".into());
                }
                if security.drop_all_capabilities {
                    run_args.push("--cap-drop=ALL".into());
                }
                // RuntimeDefault seccomp: podman's default profile (CRI-O's too), named by no flag.
                // podman's default limits (a million open files, the host's process limit) can
                // exceed what the runtime may set under a lower hard limit: this process's open
                // files, and enough processes for the webhook's handful of threads.
                let (soft, hard) = limit("Max open files");
                run_args.push(format!("--ulimit=nofile={soft}:{hard}"));
                run_args.push("--ulimit=nproc=4096:4096".into());
                for mount in mounts {
                    run_args.push(format!(
                        "--volume={}:{}:ro",
                        mount.source.display(),
                        mount.target
                    ));
                }
                run_args.push(image_name.to_owned());
                let mut command = podman.command();
                command.args(run_args).args(args);
                command
            }
            Runner::Rootfs(root) => {
                // A mount and PID namespace: the root bind-mounted read-only, the volumes
                // read-only, /proc; then the entrypoint as PID 1, without new privileges, under
                // the user (a non-root UID holds no capabilities).
                assert!(security.read_only_root && security.no_new_privileges);
                let mut script = String::from(
                    "set -eu\nroot=$1\nshift\nmount --bind \"$root\" \"$root\"\n\
                     mount -t proc proc \"$root/proc\"\n",
                );
                std::fs::create_dir_all(root.join("proc")).unwrap();
                for mount in mounts {
                    std::fs::create_dir_all(root.join(mount.target.trim_start_matches('/')))
                        .unwrap();
                    script.push_str(&format!(
                        "mount --bind '{}' \"$root{}\"\nmount -o remount,bind,ro \"$root{}\"\n",
                        mount.source.display(),
                        mount.target,
                        mount.target
                    ));
                }
                script.push_str(&format!(
                    "mount -o remount,bind,ro \"$root\"\n\
                     exec setpriv --no-new-privs chroot --userspec={}:{} \"$root\" \"$@\"\n",
                    security.uid, security.gid
                ));
                let mut command = Command::new("unshare");
                command
                    .args([
                        "--mount",
                        "--pid",
                        "--fork",
                        "--propagation",
                        "private",
                        "sh",
                        "-c",
                    ])
                    .arg(script)
                    .arg("sh")
                    .arg(root)
                    .arg("/usr/local/bin/styrmin-webhook")
                    .args(args);
                command
            }
        };
        let mut child = command
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let logs = collect_lines(child.stderr.take().unwrap(), |line| line);
        Container { child, name, logs }
    }

    /// The host's PID of the container's first process.
    fn host_pid(&self, container: &Container) -> String {
        match self {
            Runner::Podman(podman) => {
                let output = run_ok(
                    podman.command().args([
                        "inspect",
                        "--format",
                        "{{.State.Pid}}",
                        &container.name,
                    ]),
                    None,
                );
                utf8(output.stdout, "podman inspect").trim().to_owned()
            }
            Runner::Rootfs(_) => {
                // unshare --fork's only child is PID 1 of the new namespace.
                let unshare = container.child.id();
                std::fs::read_to_string(format!("/proc/{unshare}/task/{unshare}/children"))
                    .unwrap()
                    .trim()
                    .to_owned()
            }
        }
    }

    /// SIGTERM to the container's PID 1, as the kubelet's runtime sends it.
    fn terminate(&self, container: &Container) {
        match self {
            Runner::Podman(podman) => {
                run_ok(
                    podman
                        .command()
                        .args(["kill", "--signal", "TERM", &container.name]),
                    None,
                );
            }
            Runner::Rootfs(_) => {
                run_ok(
                    Command::new("kill").args(["-TERM", &self.host_pid(container)]),
                    None,
                );
            }
        }
    }
}

/// The running container (`podman run` in the foreground, or `unshare`), its stderr (the
/// webhook's log).
struct Container {
    child: Child,
    name: String,
    logs: Arc<Mutex<Vec<String>>>,
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Container {
    fn logged(&self, message: &str) -> usize {
        self.logs
            .lock()
            .unwrap()
            .iter()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|l| l["fields"]["message"] == message)
            .count()
    }
}

/// `GET path` over plain HTTP: the status line, or the error.
fn get(addr: SocketAddr, path: &str) -> String {
    let attempt = || -> std::io::Result<String> {
        let mut stream = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
        stream.set_read_timeout(Some(Duration::from_secs(5)))?;
        stream.write_all(
            format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )?;
        let mut text = String::new();
        stream.read_to_string(&mut text)?;
        Ok(text.lines().next().unwrap_or_default().to_owned())
    };
    attempt().unwrap_or_else(|e| format!("error: {e}"))
}

fn eventually(what: &str, container: &mut Container, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + TIMEOUT;
    while !check() {
        if let Some(status) = container.child.try_wait().unwrap() {
            panic!(
                "the container exited ({status}) before {what}: {:?}",
                container.logs.lock().unwrap()
            );
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Where and how the API server calls the webhook: the chart's caBundle (the only root it
/// trusts), the Service's DNS name and the path of the webhook configuration.
struct ClientConfig {
    ca: Vec<u8>,
    server_name: String,
    path: String,
}

/// One AdmissionReview POSTed over TLS as the API server does; the answer.
async fn review(addr: SocketAddr, client: &ClientConfig, body: &Value) -> Value {
    let (ca, server_name) = (&client.ca, client.server_name.as_str());
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca) {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tcp = TcpStream::connect(addr).await.unwrap();
    let tls = TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from(server_name.to_owned()).unwrap(), tcp)
        .await
        .unwrap();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .unwrap();
    tokio::spawn(connection);
    let request = hyper::Request::post(client.path.as_str())
        .header("content-type", "application/json")
        .header("host", server_name)
        .body(Full::new(Bytes::from(serde_json::to_vec(body).unwrap())))
        .unwrap();
    let answer = sender.send_request(request).await.unwrap();
    assert_eq!(answer.status(), 200);
    let bytes = answer.into_body().collect().await.unwrap().to_bytes();
    serde_json::from_slice(&bytes).unwrap()
}

/// The webhook's client configuration in the chart's MutatingWebhookConfiguration.
fn client_of(webhooks: &[Value]) -> ClientConfig {
    let client_config = &webhooks[0]["clientConfig"];
    ClientConfig {
        ca: base64::engine::general_purpose::STANDARD
            .decode(client_config["caBundle"].as_str().unwrap())
            .unwrap(),
        server_name: format!(
            "{}.{}.svc",
            client_config["service"]["name"].as_str().unwrap(),
            client_config["service"]["namespace"].as_str().unwrap()
        ),
        path: client_config["service"]["path"]
            .as_str()
            .unwrap()
            .to_owned(),
    }
}

/// The Deployment's volumes, as the kubelet writes them: one file per key, 0644.
fn volume_mounts(
    scratch: &Scratch,
    objects: &[Value],
    pod: &Value,
    container: &Value,
) -> Vec<Mount> {
    let mut mounts = Vec::new();
    for mount in container["volumeMounts"].as_array().unwrap() {
        let volume = pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == mount["name"])
            .unwrap();
        let (data, decode) = if let Some(secret) = volume.get("secret") {
            let name = secret["secretName"].as_str().unwrap();
            (find(objects, "Secret", name)["data"].clone(), true)
        } else if let Some(config_map) = volume.get("configMap") {
            let name = config_map["name"].as_str().unwrap();
            (find(objects, "ConfigMap", name)["data"].clone(), false)
        } else {
            panic!("a volume this test cannot make: {volume}");
        };
        let dir = scratch.join(&format!("volume-{}", mount["name"].as_str().unwrap()));
        std::fs::create_dir_all(&dir).unwrap();
        for (key, value) in data.as_object().unwrap() {
            let text = value.as_str().unwrap();
            let bytes = if decode {
                base64::engine::general_purpose::STANDARD
                    .decode(text)
                    .unwrap()
            } else {
                text.as_bytes().to_vec()
            };
            std::fs::write(dir.join(key), bytes).unwrap();
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(dir.join(key), std::fs::Permissions::from_mode(0o644))
                .unwrap();
        }
        assert_eq!(mount["readOnly"], true, "{mount}");
        mounts.push(Mount {
            source: dir,
            target: mount["mountPath"].as_str().unwrap().to_owned(),
        });
    }
    mounts
}

/// The security context: the container's, over the pod's.
fn security_of(pod: &Value, container: &Value) -> Security {
    let pod_security = &pod["securityContext"];
    let container_security = &container["securityContext"];
    let setting = |key: &str| {
        container_security
            .get(key)
            .or_else(|| pod_security.get(key))
            .cloned()
            .unwrap_or(Value::Null)
    };
    assert_eq!(setting("runAsNonRoot"), true);
    assert!(container_security["capabilities"].get("add").is_none());
    assert_eq!(setting("seccompProfile")["type"], "RuntimeDefault");
    Security {
        uid: setting("runAsUser").as_u64().unwrap(),
        gid: setting("runAsGroup").as_u64().unwrap(),
        read_only_root: setting("readOnlyRootFilesystem") == true,
        no_new_privileges: setting("allowPrivilegeEscalation") == false,
        drop_all_capabilities: container_security["capabilities"]["drop"] == json!(["ALL"]),
    }
}

/// The args, with the listen addresses moved to free ports on 127.0.0.1.
fn moved_ports(container: &Value) -> (BTreeMap<String, SocketAddr>, Vec<String>) {
    let mut ports: BTreeMap<String, SocketAddr> = BTreeMap::new();
    let mut args: Vec<String> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect();
    for port in container["ports"].as_array().unwrap() {
        let from = format!("0.0.0.0:{}", port["containerPort"]);
        let to: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let moved = args
            .iter_mut()
            .filter(|a| a.ends_with(&from))
            .map(|a| *a = a.replace(&from, &to.to_string()))
            .count();
        assert_eq!(moved, 1, "{from} in {args:?}");
        ports.insert(port["name"].as_str().unwrap().to_owned(), to);
    }
    println!("image: the chart's args, listening on {ports:?} instead: {args:?}");
    assert!(args.iter().any(|a| a == "--source=policy-file"));
    (ports, args)
}

/// What was applied, seen from the host: PID 1 of its PID namespace, the user, no
/// capabilities, no new privileges, a seccomp filter (podman), a read-only root.
fn assert_confined(pid: &str, security: &Security, runner: &Runner) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{key}:")))
            .unwrap_or_else(|| panic!("no {key} in {status}"))
            .split_whitespace()
            .collect::<Vec<_>>()
    };
    assert_eq!(field("NSpid").last(), Some(&"1"), "PID 1 in the container");
    assert_eq!(field("Uid"), vec![security.uid.to_string(); 4]);
    assert_eq!(field("Gid"), vec![security.gid.to_string(); 4]);
    assert_eq!(field("NoNewPrivs"), vec!["1"]);
    let mut capability_sets = vec!["CapInh", "CapPrm", "CapEff", "CapAmb"];
    if let Runner::Podman(_) = *runner {
        capability_sets.push("CapBnd");
        assert_eq!(field("Seccomp"), vec!["2"], "a seccomp filter");
    }
    for caps in capability_sets {
        assert_eq!(field(caps), vec!["0000000000000000"], "{caps}");
    }
    let mountinfo = std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).unwrap();
    let root = mountinfo
        .lines()
        .find(|l| l.split_whitespace().nth(4) == Some("/"))
        .unwrap();
    let options = root.split_whitespace().nth(5).unwrap();
    assert!(options.split(',').any(|o| o == "ro"), "root mount: {root}");
}

/// podman if it can run containers here, else the entrypoint from the image's unpacked root
/// (also when `E2E_IMAGE_RUNNER=rootfs`).
fn runner_for(
    scratch: &Scratch,
    image: &Image,
    podman: Podman,
    image_name: &str,
    security: &Security,
) -> Runner {
    match podman.cannot_run(image_name) {
        None if std::env::var_os("E2E_IMAGE_RUNNER").is_none_or(|r| r != "rootfs") => {
            notice("image: run by podman");
            Runner::Podman(podman)
        }
        reason => {
            let reason = reason.unwrap_or_else(|| "E2E_IMAGE_RUNNER=rootfs".to_owned());
            let root = scratch.join("rootfs");
            std::fs::create_dir_all(&root).unwrap();
            run_ok(
                Command::new("tar")
                    .arg("-xzf")
                    .arg(image.layer())
                    .arg("-C")
                    .arg(&root),
                None,
            );
            notice(&format!(
                "image: NOT RUN BY A CONTAINER RUNTIME ({reason}): the image's entrypoint runs \
                 from its unpacked root filesystem instead, chrooted in mount and PID \
                 namespaces, as UID {}, without new privileges, on a read-only root with \
                 read-only volumes; no seccomp filter and the capability bounding set is kept",
                security.uid
            ));
            Runner::Rootfs(root)
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_image_runs_as_the_charts_deployment_runs_it() {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    assert!(
        status.lines().any(|l| l.starts_with("Uid:\t0\t")),
        "running the image needs root (podman, or mount and PID namespaces); CI runs as root"
    );
    let scratch = Scratch::new("image-run");
    let image = Image::build(&scratch, "image");
    let podman = Podman::new();
    // Both archives load, as the same image (the ID is the config's digest).
    let config_digest = image.manifest()["config"]["digest"]
        .as_str()
        .unwrap()
        .to_owned();
    let from_docker_archive = podman.load(&image.docker);
    let from_oci_archive = podman.load(&image.oci);
    assert_eq!(from_oci_archive, from_docker_archive);
    assert_eq!(format!("sha256:{from_oci_archive}"), config_digest);

    // The chart: its Deployment, generated Secret, policy ConfigMap and webhook configuration.
    let objects = render_chart();
    let deployment = find(&objects, "Deployment", RELEASE);
    let pod = &deployment["spec"]["template"]["spec"];
    let containers = pod["containers"].as_array().unwrap();
    assert_eq!(containers.len(), 1);
    let container = &containers[0];
    let webhooks = find(&objects, "MutatingWebhookConfiguration", RELEASE)["webhooks"]
        .as_array()
        .unwrap()
        .clone();
    let client = client_of(&webhooks);

    // The volumes, as the kubelet writes them: one file per key, 0644.
    let mounts = volume_mounts(&scratch, &objects, pod, container);

    // The security context: the container's, over the pod's.
    let security = security_of(pod, container);

    // The args, with the listen addresses moved to free ports on 127.0.0.1.
    let (ports, args) = moved_ports(container);

    let image_name = format!("docker.io/library/styrmin-webhook:{}", workspace_version());
    let runner = runner_for(&scratch, &image, podman, &image_name, &security);

    let started = Instant::now();
    let mut running = runner.start(&image_name, &security, &mounts, &args);

    // The probes of the Deployment, on the ports they name.
    let probe = |which: &str| {
        let http = &containers[0][which]["httpGet"];
        let addr = ports[http["port"].as_str().unwrap()];
        (addr, http["path"].as_str().unwrap().to_owned())
    };
    let (ready_addr, ready_path) = probe("readinessProbe");
    let (live_addr, live_path) = probe("livenessProbe");
    eventually("the readiness probe", &mut running, || {
        get(ready_addr, &ready_path).starts_with("HTTP/1.1 200")
    });
    println!(
        "image: readiness probe answered 200 {} ms after the runner was started",
        started.elapsed().as_millis()
    );
    assert!(get(live_addr, &live_path).starts_with("HTTP/1.1 200"));

    // What was applied, seen from the host: PID 1 of its PID namespace, the user, no
    // capabilities, no new privileges, a seccomp filter (podman), a read-only root.
    let pid = runner.host_pid(&running);
    assert_confined(&pid, &security, &runner);

    // An Ingress review over TLS, trusting only the chart's caBundle: the right patch.
    let mut body: Value = serde_json::from_str(
        &std::fs::read_to_string(webhook_data(&format!("admission/{INGRESS}"))).unwrap(),
    )
    .unwrap();
    body = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": body});
    body["request"]["namespace"] = json!("styrmin-web1");
    body["request"]["object"]["metadata"]["namespace"] = json!("styrmin-web1");
    let https = ports["https"];
    let answer = review(https, &client, &body).await;
    assert_eq!(answer["response"]["uid"], body["request"]["uid"]);
    assert_eq!(answer["response"]["allowed"], true, "{answer}");
    let patch = base64::engine::general_purpose::STANDARD
        .decode(answer["response"]["patch"].as_str().unwrap())
        .unwrap();
    let patch: json_patch::Patch = serde_json::from_slice(&patch).unwrap();
    let mut object = body["request"]["object"].clone();
    json_patch::patch(&mut object, &patch).unwrap();
    assert_eq!(
        object.pointer("/metadata/annotations/kubernetes.io~1ingress.class"),
        Some(&json!("traefik")),
        "{answer}"
    );

    // SIGTERM to PID 1: not ready, still serving during the shutdown delay, then drained and
    // exit 0.
    runner.terminate(&running);
    eventually("/readyz to answer 503", &mut running, || {
        get(ready_addr, &ready_path).starts_with("HTTP/1.1 503")
    });
    let answer = review(https, &client, &body).await;
    assert_eq!(
        answer["response"]["allowed"], true,
        "still answering: {answer}"
    );
    let deadline = Instant::now() + TIMEOUT;
    let exit = loop {
        if let Some(exit) = running.child.try_wait().unwrap() {
            break exit;
        }
        assert!(Instant::now() < deadline, "no exit after SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    // The log thread has the last lines once the pipe closes.
    std::thread::sleep(Duration::from_millis(200));
    assert!(exit.success(), "{exit}: {:?}", running.logs.lock().unwrap());
    assert_eq!(running.logged("drained"), 1, "{:?}", running.logs);
}
