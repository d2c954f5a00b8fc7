//! A real Kubernetes control plane from `$KUBEBUILDER_ASSETS` (the `setup-envtest` layout:
//! `etcd`, `kube-apiserver`, and `kube-controller-manager` for garbage collection), as
//! `make test-cluster` and `make bench-scale` start it: RBAC, a static admin token, a
//! ServiceAccount signing key, everything on loopback and in one scratch directory.

#![allow(clippy::unwrap_used, clippy::missing_panics_doc)] // test harness: a failed unwrap is a failed test

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::Value;

use crate::{data, free_port, split_documents, workspace_root};

/// The admin's bearer token (group `system:masters`).
pub const ADMIN_TOKEN: &str = "styrmin-test-admin";

/// `$KUBEBUILDER_ASSETS`, when set and not empty.
pub fn assets() -> Option<PathBuf> {
    std::env::var_os("KUBEBUILDER_ASSETS")
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
}

/// Child processes, killed (SIGKILL) when dropped.
#[derive(Debug, Default)]
pub struct Processes(pub Vec<Child>);

impl Drop for Processes {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Starts `binary` with `args`, its stderr into `log`.
pub fn spawn(binary: &Path, args: &[String], log: &Path) -> Child {
    let log = std::fs::File::create(log).unwrap();
    Command::new(binary)
        .args(args)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}", binary.display()))
}

/// etcd, kube-apiserver and, when its binary is there, kube-controller-manager (garbage
/// collector only), running until dropped.
#[derive(Debug)]
pub struct ControlPlane {
    pub processes: Processes,
    /// The API server's `https://127.0.0.1:PORT` (self-signed: clients skip verification).
    pub url: String,
    /// etcd's client URL (plain HTTP: its `/metrics` and its v3 JSON gateway).
    pub etcd_url: String,
    /// A kubeconfig with the admin token, for the processes a test starts.
    pub kubeconfig: PathBuf,
    /// Whether kube-controller-manager runs (garbage collection of owned objects).
    pub garbage_collector: bool,
}

impl ControlPlane {
    /// Starts the control plane in `dir` with the binaries of `assets`; `apiserver_args` are
    /// added to kube-apiserver's own.
    pub fn start(assets: &Path, dir: &Path, apiserver_args: &[String]) -> ControlPlane {
        let etcd_port = free_port();
        let api_port = free_port();
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let etcd = spawn(
            &assets.join("etcd"),
            &[
                format!("--data-dir={}", dir.join("etcd").display()),
                format!("--listen-client-urls={etcd_url}"),
                format!("--advertise-client-urls={etcd_url}"),
                format!("--listen-peer-urls=http://127.0.0.1:{}", free_port()),
                // A larger backend than the default 2 GiB, for the 100,000-Ingress benchmark.
                "--quota-backend-bytes=8589934592".to_owned(),
            ],
            &dir.join("etcd.log"),
        );
        let key = rcgen::KeyPair::generate().unwrap();
        std::fs::write(dir.join("sa.key"), key.serialize_pem()).unwrap();
        std::fs::write(dir.join("sa.pub"), key.public_key_pem()).unwrap();
        std::fs::write(
            dir.join("tokens.csv"),
            format!("{ADMIN_TOKEN},admin,admin,system:masters\n"),
        )
        .unwrap();
        let mut args = vec![
            format!("--etcd-servers={etcd_url}"),
            "--bind-address=127.0.0.1".to_owned(),
            format!("--secure-port={api_port}"),
            format!("--cert-dir={}", dir.join("certs").display()),
            format!("--token-auth-file={}", dir.join("tokens.csv").display()),
            "--authorization-mode=RBAC".to_owned(),
            format!(
                "--service-account-key-file={}",
                dir.join("sa.pub").display()
            ),
            format!(
                "--service-account-signing-key-file={}",
                dir.join("sa.key").display()
            ),
            "--service-account-issuer=https://styrmin.test".to_owned(),
            "--service-cluster-ip-range=10.96.0.0/16".to_owned(),
        ];
        args.extend_from_slice(apiserver_args);
        let apiserver = spawn(
            &assets.join("kube-apiserver"),
            &args,
            &dir.join("kube-apiserver.log"),
        );
        let url = format!("https://127.0.0.1:{api_port}");
        let mut processes = Processes(vec![etcd, apiserver]);
        let kubeconfig = dir.join("kubeconfig");
        std::fs::write(&kubeconfig, kubeconfig_text(&url, ADMIN_TOKEN)).unwrap();
        let manager = assets.join("kube-controller-manager");
        let garbage_collector = manager.exists();
        if garbage_collector {
            processes.0.push(spawn(
                &manager,
                &[
                    format!("--kubeconfig={}", kubeconfig.display()),
                    "--controllers=garbagecollector".to_owned(),
                    "--bind-address=127.0.0.1".to_owned(),
                    format!("--secure-port={}", free_port()),
                ],
                &dir.join("kube-controller-manager.log"),
            ));
        }
        ControlPlane {
            processes,
            url,
            etcd_url,
            kubeconfig,
            garbage_collector,
        }
    }

    /// A client of the API server as the admin.
    pub fn client(&self) -> kube::Client {
        client(&self.url, ADMIN_TOKEN)
    }

    /// Waits until the API server answers (at most two minutes).
    pub async fn ready(&self) -> kube::Client {
        let client = self.client();
        for _ in 0..480 {
            if client.apiserver_version().await.is_ok() {
                return client;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        panic!("the API server at {} did not answer", self.url);
    }
}

/// A kubeconfig for `url` (TLS not verified) with the bearer token `token`.
pub fn kubeconfig_text(url: &str, token: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: t\n  cluster:\n    server: {url}\n    insecure-skip-tls-verify: true\nusers:\n- name: t\n  user:\n    token: {token}\ncontexts:\n- name: t\n  context: {{cluster: t, user: t}}\ncurrent-context: t\n"
    )
}

/// A client of the API server at `url` (TLS not verified) with the bearer token `token`.
pub fn client(url: &str, token: &str) -> kube::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut config = kube::Config::new(url.parse().unwrap());
    config.accept_invalid_certs = true;
    config.auth_info.token = Some(token.to_owned().into());
    kube::Client::try_from(config).unwrap()
}

/// Server-side applies every document of `yaml`.
pub async fn apply_all(client: &kube::Client, yaml: &str) {
    for document in split_documents(yaml) {
        let object = document.value();
        if object.is_null() {
            continue;
        }
        apply(client, &object).await;
    }
}

/// The resource of `object` (its kind's plural: the lower-case kind + `s`, `y` as `ies`, or
/// the CRD's).
pub fn resource_of(object: &Value) -> ApiResource {
    let api_version = object["apiVersion"].as_str().unwrap();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let kind = object["kind"].as_str().unwrap();
    let plural = match kind {
        "Ingress" => "ingresses".to_owned(),
        "IngressClass" => "ingressclasses".to_owned(),
        _ => match kind.to_lowercase().strip_suffix('y') {
            // ValidatingAdmissionPolicy: validatingadmissionpolicies.
            Some(stem) => format!("{stem}ies"),
            None => format!("{}s", kind.to_lowercase()),
        },
    };
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), &plural)
}

/// Server-side applies `object`, retrying for ten seconds (a CRD's resources are served a
/// moment after the CRD is created).
pub async fn apply(client: &kube::Client, object: &Value) {
    let resource = resource_of(object);
    let name = object["metadata"]["name"].as_str().unwrap();
    let api: Api<DynamicObject> = match object["metadata"]["namespace"].as_str() {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    let params = PatchParams::apply("styrmin-test").force();
    let mut tries = 0;
    while let Err(error) = api.patch(name, &params, &Patch::Apply(object)).await {
        tries += 1;
        assert!(tries < 40, "applying {} {name}: {error}", resource.kind);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The CRDs of Styrmin (the chart's) and of Open Reports (`openreports.io/v1alpha1` Report).
pub async fn install_crds(client: &kube::Client) {
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(workspace_root().join("charts/styrmin-webhook/files/crds"))
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .collect();
    files.sort();
    files.push(data("crds/openreports.io_reports.yaml"));
    for file in files {
        apply_all(client, &std::fs::read_to_string(file).unwrap()).await;
    }
}

/// How long [`eventually`] waits.
pub const WAIT: Duration = Duration::from_secs(60);

/// Polls `probe` every 250 ms until it gives a value; panics after [`WAIT`].
pub async fn eventually<T>(what: &str, mut probe: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        if let Some(found) = probe().await {
            return found;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The Open Reports `Report`s (`openreports.io/v1alpha1`) of every namespace.
pub fn open_reports(client: &kube::Client) -> Api<DynamicObject> {
    Api::all_with(
        client.clone(),
        &resource_of(
            &serde_json::json!({"apiVersion": "openreports.io/v1alpha1", "kind": "Report"}),
        ),
    )
}

/// The report whose scope is the Ingress `name` in `namespace`.
pub async fn report_of(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Option<DynamicObject> {
    let list = open_reports(client)
        .list(&kube::api::ListParams::default())
        .await
        .ok()?;
    list.items
        .into_iter()
        .find(|r| r.data["scope"]["name"] == name && r.data["scope"]["namespace"] == namespace)
}

/// Renders the chart as `helm4 template` does in styrmin-system with `sets` (`key=value`),
/// and applies the objects of `kinds`; returns the kind of each object applied.
pub async fn apply_the_charts(
    client: &kube::Client,
    label: &str,
    sets: &[&str],
    kinds: &[&str],
) -> Vec<String> {
    let helm = crate::HelmHome::new(label);
    let mut template = helm.helm("helm4");
    template
        .args(["template", "styrmin-webhook"])
        .arg(crate::workspace_root().join("charts/styrmin-webhook"))
        .args(["--namespace", "styrmin-system"]);
    for set in sets {
        template.args(["--set", set]);
    }
    let rendered = crate::utf8(crate::run_ok(&mut template, None).stdout, "helm4 template");
    let mut applied = Vec::new();
    for document in crate::split_documents(&rendered) {
        let object = document.value();
        let kind = object["kind"].as_str().unwrap_or_default().to_owned();
        if kinds.contains(&kind.as_str()) {
            apply(client, &object).await;
            applied.push(kind);
        }
    }
    applied
}

/// A token (valid an hour) of the service account `name` in `namespace`, through the
/// TokenRequest API: a process or client then runs with exactly what RBAC grants it.
pub async fn service_account_token(client: &kube::Client, namespace: &str, name: &str) -> String {
    let accounts: Api<k8s_openapi::api::core::v1::ServiceAccount> =
        Api::namespaced(client.clone(), namespace);
    let request = k8s_openapi::api::authentication::v1::TokenRequest {
        spec: Some(k8s_openapi::api::authentication::v1::TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..Default::default()
        }),
        ..Default::default()
    };
    accounts
        .create_token_request(name, &Default::default(), &request)
        .await
        .unwrap()
        .status
        .and_then(|status| status.token)
        .unwrap_or_else(|| panic!("no token for the service account {namespace}/{name}"))
}

/// The holder of the Lease `name` in `namespace`.
pub async fn lease_holder(client: &kube::Client, namespace: &str, name: &str) -> Option<String> {
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client.clone(), namespace);
    leases.get_opt(name).await.ok()??.spec?.holder_identity
}

/// The value of an unlabelled series on a metrics listener of loopback (plain HTTP).
pub fn scrape_value(port: u16, name: &str) -> Option<f64> {
    use std::io::{Read as _, Write as _};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    // HTTP/1.0: the answer is not chunked, and ends with the connection.
    write!(stream, "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    answer.lines().find_map(|line| {
        let (metric, value) = line.split_once(' ')?;
        (metric == name).then(|| value.trim().parse().ok())?
    })
}

/// Waits (at most [`WAIT`]) until `identity` holds the Lease `name` in `namespace`.
pub async fn until_lease_held_by(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    identity: &str,
) {
    eventually(
        &format!("{identity} holding the Lease {namespace}/{name}"),
        async || {
            (lease_holder(client, namespace, name).await.as_deref() == Some(identity)).then_some(())
        },
    )
    .await;
}
