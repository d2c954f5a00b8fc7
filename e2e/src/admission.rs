//! The webhook as a real API server's mutating admission webhook, as
//! `e2e/tests/migration_cluster.rs` and `make bench-scale` (`bench_migrate`) run it: a
//! serving certificate for `127.0.0.1`, `serve --source kubernetes --migrations` replicas
//! registered in a MutatingWebhookConfiguration, and the API server's audit log of the
//! writes to Ingresses.

#![allow(clippy::unwrap_used, clippy::missing_panics_doc)] // test harness: a failed unwrap is a failed test

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use base64::Engine as _;
use serde_json::{Value, json};

use crate::control_plane::apply;
use crate::{free_port, release_binary};

/// The API server's audit policy: every write to an Ingress, with who made it.
pub const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  resources: [{group: networking.k8s.io, resources: [ingresses]}]
  verbs: [update, patch, create, delete]
- level: Metadata
  resources: [{group: styrmin.io, resources: [styrmindeployments/status]}]
  verbs: [patch]
- level: None
";

/// Writes [`AUDIT_POLICY`] into `dir`: the API server's arguments that log with it, and the
/// log's path.
pub fn audit_log_args(dir: &Path) -> (Vec<String>, PathBuf) {
    let policy = dir.join("audit-policy.yaml");
    std::fs::write(&policy, AUDIT_POLICY).unwrap();
    let log = dir.join("audit.log");
    let args = vec![
        format!("--audit-policy-file={}", policy.display()),
        format!("--audit-log-path={}", log.display()),
        "--audit-log-format=json".to_owned(),
        "--audit-log-mode=blocking".to_owned(),
    ];
    (args, log)
}

/// A serving certificate for `127.0.0.1` signed by a new CA: the API server checks the
/// webhook's certificate against the `caBundle` and the URL's IP, as for any webhook.
pub fn serving_pki(dir: &Path) -> (PathBuf, PathBuf, String) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, SanType};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::from_ca_cert_pem(&ca_cert.pem(), ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let mut leaf = CertificateParams::new(Vec::<String>::new()).unwrap();
    leaf.subject_alt_names = vec![SanType::IpAddress([127, 0, 0, 1].into())];
    let cert = leaf.signed_by(&key, &issuer).unwrap();
    let (cert_path, key_path) = (dir.join("tls.crt"), dir.join("tls.key"));
    std::fs::write(&cert_path, cert.pem()).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();
    let bundle = base64::engine::general_purpose::STANDARD.encode(ca_cert.pem());
    (cert_path, key_path, bundle)
}

/// `serve --source kubernetes` alone (admission, no controllers), named `name` in its log.
pub fn admission(
    dir: &Path,
    kubeconfig: &Path,
    name: &str,
    listen: u16,
    tls: &(PathBuf, PathBuf, String),
) -> Child {
    Command::new(release_binary("styrmin-webhook"))
        .args(["serve", "--source", "kubernetes"])
        .arg(format!("--listen=127.0.0.1:{listen}"))
        .arg(format!("--metrics-listen=127.0.0.1:{}", free_port()))
        .arg("--tls-cert")
        .arg(&tls.0)
        .arg("--tls-key")
        .arg(&tls.1)
        .env("KUBECONFIG", kubeconfig)
        .arg("--log-filter=info,kube_client=error")
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join(format!("admission-{name}.log"))).unwrap())
        .spawn()
        .unwrap()
}

/// The election of the test replicas: the Lease in `styrmin-system`, held 3 s, so that a
/// hand-over takes a few seconds.
const SHORT_ELECTION: [&str; 5] = [
    "--leader-election-namespace",
    "styrmin-system",
    "--leader-election-lease-duration-ms=3000",
    "--leader-election-renew-deadline-ms=2000",
    "--leader-election-retry-period-ms=500",
];

/// `controllers --migrations`, named `identity` in the Lease (short timings, as `replica`).
pub fn controllers(dir: &Path, kubeconfig: &Path, identity: &str) -> Child {
    Command::new(release_binary("styrmin-webhook"))
        .args(["controllers", "--migrations"])
        .envs(crate::CONTROLLERS_ENV)
        .args(SHORT_ELECTION)
        .args(["--leader-election-identity", identity])
        .arg(format!("--metrics-listen=127.0.0.1:{}", free_port()))
        .env("KUBECONFIG", kubeconfig)
        .arg("--log-filter=info,styrmin_webhook=debug,kube_client=error")
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join(format!("controllers-{identity}.log"))).unwrap())
        .spawn()
        .unwrap()
}

/// A `serve --source kubernetes --migrations` replica named `identity`: admission and the
/// controllers in one process, the form `serve` keeps for one release.
pub fn replica(
    dir: &Path,
    kubeconfig: &Path,
    identity: &str,
    listen: u16,
    tls: &(PathBuf, PathBuf, String),
) -> Child {
    Command::new(release_binary("styrmin-webhook"))
        .args(["serve", "--source", "kubernetes", "--migrations"])
        .args(SHORT_ELECTION)
        .args(["--leader-election-identity", identity])
        .arg(format!("--listen=127.0.0.1:{listen}"))
        .arg(format!("--metrics-listen=127.0.0.1:{}", free_port()))
        .arg("--tls-cert")
        .arg(&tls.0)
        .arg("--tls-key")
        .arg(&tls.1)
        .env("KUBECONFIG", kubeconfig)
        .arg("--log-filter=info,styrmin_webhook=debug,kube_client=error")
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join(format!("replica-{identity}.log"))).unwrap())
        .spawn()
        .unwrap()
}

/// Registers the replicas (each its own entry: the API server calls one after the other
/// with `reinvocationPolicy: IfNeeded`, and a killed one is skipped with `Ignore`).
pub async fn register(client: &kube::Client, ports: &[u16], bundle: &str) {
    let webhooks: Vec<Value> = ports
        .iter()
        .enumerate()
        .map(|(n, port)| {
            json!({
                "name": format!("ingress-class-{n}.styrmin.io"),
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": "Ignore",
                "timeoutSeconds": 5,
                "reinvocationPolicy": "IfNeeded",
                // As the chart: never the webhook's own namespace (the canaries are there).
                "namespaceSelector": {"matchExpressions": [
                    {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["styrmin-system"]}]},
                "rules": [{"apiGroups": ["networking.k8s.io"], "apiVersions": ["v1"],
                           "operations": ["CREATE", "UPDATE"], "resources": ["ingresses"]}],
                "clientConfig": {"url": format!("https://127.0.0.1:{port}/mutate"), "caBundle": bundle},
            })
        })
        .collect();
    apply(
        client,
        &json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
                "metadata": {"name": "styrmin-migration-test"}, "webhooks": webhooks}),
    )
    .await;
}

/// `update`s of Ingresses in the audit log, by namespace/name (the executor's write backs:
/// the test and the stand-ins apply and patch), without the dry runs that ask admission.
pub fn updates(audit_log: &Path) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for line in std::fs::read_to_string(audit_log)
        .unwrap_or_default()
        .lines()
    {
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let object = &event["objectRef"];
        if event["verb"] == "update"
            && object["resource"] == "ingresses"
            && object.get("subresource").is_none()
            && event["stage"] == "ResponseComplete"
            && !event["requestURI"]
                .as_str()
                .unwrap_or("")
                .contains("dryRun")
        {
            let key = format!(
                "{}/{}",
                object["namespace"].as_str().unwrap_or(""),
                object["name"].as_str().unwrap_or("")
            );
            *out.entry(key).or_default() += 1;
        }
    }
    out
}

/// When the completed requests of the audit log that `matches` were received, in order.
pub fn received(audit_log: &Path, matches: impl Fn(&Value) -> bool) -> Vec<String> {
    let mut times: Vec<String> = std::fs::read_to_string(audit_log)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|e| e["stage"] == "ResponseComplete" && matches(e))
        .filter_map(|e| e["requestReceivedTimestamp"].as_str().map(str::to_owned))
        .collect();
    times.sort();
    times
}
