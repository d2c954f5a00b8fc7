//! The Helm chart `charts/styrmin-webhook` under the real Helm 3.17 and Helm 4.2:
//! `helm lint --strict` in every certificate mode; the values schema refusing bad values with
//! a message naming the key; every key of `values.yaml` documented; the kustomize manifests
//! rendered from the chart (`scripts/generate-base.sh`) equal to the committed ones, and the
//! same objects as `helm install` with the defaults; `helm install --dry-run` against the
//! stand-in API server; and the generated certificate kept across upgrades (`lookup` finds the
//! existing Secret: rendered with `--dry-run=server` against a stand-in API server that holds
//! it). The objects themselves are checked against the Kubernetes API types in
//! `e2e/tests/manifests.rs`.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use base64::Engine as _;
use serde_json::Value;
use styrmin_e2e::{
    HelmHome, Scratch, run, run_fails, run_ok, split_documents, tool, utf8, workspace_root,
};
use styrmin_fake_apiserver::FakeApiServer;

const HELMS: [&str; 2] = ["helm3", "helm4"];
const RELEASE: &str = "styrmin-webhook";
const NAMESPACE: &str = "styrmin-system";
const SECRET_PATH: &str = "/api/v1/namespaces/styrmin-system/secrets/styrmin-webhook-tls";

/// The values of each certificate mode.
const CERTIFICATE_MODES: [(&str, &[&str]); 3] = [
    ("generated", &[]),
    ("certManager", &["--set=certificate.mode=certManager"]),
    (
        "existingSecret",
        &[
            "--set=certificate.mode=existingSecret",
            "--set=certificate.existingSecret.name=my-tls",
        ],
    ),
];

fn chart_dir() -> PathBuf {
    workspace_root().join("charts/styrmin-webhook")
}

/// `<helm> <args>` in a Helm home of its own, with the chart as the last argument.
fn helm_on_chart(home: &HelmHome, helm: &str, args: &[&str]) -> Command {
    let mut cmd = home.helm(helm);
    cmd.args(args).arg(chart_dir());
    cmd
}

fn objects(stream: &str) -> Vec<Value> {
    split_documents(stream)
        .iter()
        .map(|d| d.value())
        .filter(|v| !v.is_null())
        .collect()
}

fn template(helm: &str, args: &[&str]) -> Vec<Value> {
    let home = HelmHome::new("chart-template");
    let mut cmd = home.helm(helm);
    cmd.args(["template", RELEASE])
        .arg(chart_dir())
        .args(["--namespace", NAMESPACE])
        .args(args);
    objects(&utf8(run_ok(&mut cmd, None).stdout, "helm template output"))
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

// ---- lint and schema -------------------------------------------------------------------------

#[test]
fn helm_lint_strict_passes_in_every_certificate_mode() {
    for helm in HELMS {
        for (mode, args) in CERTIFICATE_MODES {
            let home = HelmHome::new("chart-lint");
            let mut cmd = helm_on_chart(&home, helm, &[&["lint", "--strict"], args].concat());
            let output = run(&mut cmd, None);
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
            assert!(output.status.success(), "{helm} lint {mode}:\n{text}");
            assert!(
                text.contains("1 chart(s) linted, 0 chart(s) failed"),
                "{helm} lint {mode}:\n{text}"
            );
            // --strict turns warnings into failures; only the icon hint (INFO) is left.
            assert!(!text.contains("[WARNING]"), "{helm} lint {mode}:\n{text}");
        }
    }
}

#[test]
fn bad_values_are_refused_with_a_message_naming_the_key() {
    let cases: [(&str, &str); 8] = [
        ("--set=replicaCount=two", "replicaCount"),
        ("--set=replicas=3", "replicas"),
        ("--set=certificate.mode=vault", "certificate"),
        ("--set=certificate.modee=generated", "modee"),
        ("--set=webhooks.ingress.timeoutSeconds=60", "timeoutSeconds"),
        ("--set=webhooks.ingress.failurePolicy=fail", "failurePolicy"),
        (
            "--set=prometheusRule.latencyP99Seconds=3",
            "latencyP99Seconds",
        ),
        ("--set-string=crds.keep=yes", "keep"),
    ];
    for helm in HELMS {
        for (value, key) in cases {
            let home = HelmHome::new("chart-schema");
            let mut cmd = home.helm(helm);
            cmd.args(["template", RELEASE]).arg(chart_dir()).arg(value);
            run_fails(&mut cmd, value, &["schema", key]);
        }
    }
    // What the template checks itself: the grace period must cover the shutdown.
    let home = HelmHome::new("chart-grace");
    let mut cmd = home.helm("helm4");
    cmd.args(["template", RELEASE])
        .arg(chart_dir())
        .arg("--set=terminationGracePeriodSeconds=25");
    let output = run(&mut cmd, None);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("terminationGracePeriodSeconds"));
}

/// Every key of `values.yaml` whose value is not a map of documented keys has a comment line
/// right above it; and every key the schema knows is in `values.yaml` (a default for each).
#[test]
fn every_value_is_documented_and_in_the_schema() {
    let text = std::fs::read_to_string(chart_dir().join("values.yaml")).unwrap();
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(chart_dir().join("values.schema.json")).unwrap(),
    )
    .unwrap();
    let values = styrmin_e2e::parse_yaml(&text);
    let mut undocumented = Vec::new();
    let mut path: Vec<(usize, String)> = Vec::new();
    let mut previous = "";
    for line in text.lines() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        if let Some((key, _)) = trimmed.split_once(':')
            && !trimmed.starts_with('#')
            && !trimmed.starts_with('-')
            && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            while path.last().is_some_and(|(i, _)| *i >= indent) {
                path.pop();
            }
            path.push((indent, key.to_owned()));
            let keys: Vec<&str> = path.iter().map(|(_, k)| k.as_str()).collect();
            // A key under a free-form value (resources, labels) is documented with it.
            let mut node = &schema;
            let mut known = true;
            for k in &keys {
                match node["properties"].get(*k) {
                    Some(child) => node = child,
                    None => known = false,
                }
            }
            let is_group = node["properties"].is_object();
            if known && !is_group && !previous.trim_start().starts_with('#') {
                undocumented.push(keys.join("."));
            }
        }
        if !trimmed.is_empty() {
            previous = line;
        }
    }
    assert!(
        undocumented.is_empty(),
        "values without a comment: {undocumented:?}"
    );

    fn schema_keys(schema: &Value, values: &Value, path: &str, missing: &mut Vec<String>) {
        for (key, child) in schema["properties"].as_object().into_iter().flatten() {
            let here = format!("{path}{key}");
            match values.get(key) {
                None => missing.push(here),
                // An empty map ({}) is an optional group: its keys have no default.
                Some(value)
                    if child["properties"].is_object()
                        && value.as_object().is_some_and(|m| !m.is_empty()) =>
                {
                    schema_keys(child, value, &format!("{here}."), missing)
                }
                Some(_) => {}
            }
        }
    }
    let mut missing = Vec::new();
    schema_keys(&schema, &values, "", &mut missing);
    assert!(
        missing.is_empty(),
        "schema keys without a default in values.yaml: {missing:?}"
    );
}

// ---- one source of truth -----------------------------------------------------------------------

/// The files `scripts/generate-base.sh` writes.
const GENERATED: [&str; 2] = [
    "manifests/base/styrmin-webhook.yaml",
    "manifests/components/prometheus-rule/prometheusrule.yaml",
];

#[test]
fn the_committed_kustomize_manifests_are_the_rendered_chart() {
    let scratch = Scratch::new("generate-base");
    run_ok(
        Command::new(workspace_root().join("scripts/generate-base.sh"))
            .arg(scratch.path())
            .env("HELM", tool("helm4")),
        None,
    );
    for file in GENERATED {
        let generated = std::fs::read_to_string(scratch.join(file)).unwrap();
        let committed = std::fs::read_to_string(workspace_root().join(file)).unwrap();
        assert!(
            generated == committed,
            "{file} is not the rendered chart: run `make manifests` and commit it"
        );
    }
}

/// Helm 3 renders the base's values into the same objects as Helm 4 (which the script uses).
#[test]
fn helm3_renders_the_same_base() {
    let values = workspace_root().join("manifests/base/values.yaml");
    let values = values.to_str().unwrap();
    assert_eq!(
        template("helm3", &["--values", values]),
        template("helm4", &["--values", values])
    );
}

/// An object as both install paths would apply it, minus what differs by design: Helm's own
/// labels (helmLabels) and the certificate, which the base leaves to its overlays.
fn comparable(object: &Value) -> Value {
    let mut object = object.clone();
    if let Some(labels) = object["metadata"]["labels"].as_object_mut() {
        labels.remove("helm.sh/chart");
        labels.remove("app.kubernetes.io/managed-by");
    }
    if object["kind"] == "MutatingWebhookConfiguration" {
        for webhook in object["webhooks"].as_array_mut().into_iter().flatten() {
            if let Some(client) = webhook["clientConfig"].as_object_mut() {
                client.remove("caBundle");
            }
        }
    }
    object
}

fn keyed(objects: &[Value]) -> BTreeMap<String, Value> {
    objects
        .iter()
        .map(|o| {
            (
                format!(
                    "{} {}",
                    o["kind"].as_str().unwrap_or(""),
                    o["metadata"]["name"]
                ),
                comparable(o),
            )
        })
        .collect()
}

/// `kubectl apply -k manifests/base` and `helm install styrmin-webhook charts/styrmin-webhook`
/// apply the same objects, but for the Namespace (the base carries it; Helm users create it
/// with `--create-namespace`) and the certificate (the chart generates one; the base leaves it
/// to overlays/self-signed or overlays/cert-manager).
#[test]
fn kustomize_base_and_helm_defaults_apply_the_same_objects() {
    let output = run_ok(
        Command::new(tool("kubectl"))
            .arg("kustomize")
            .arg(workspace_root().join("manifests/base")),
        None,
    );
    let mut base = keyed(&objects(&utf8(output.stdout, "kubectl kustomize output")));
    for helm in HELMS {
        let mut chart = keyed(&template(helm, &[]));
        let namespace = base.remove("Namespace \"styrmin-system\"");
        assert!(namespace.is_some(), "the base has its Namespace");
        let secret = chart.remove("Secret \"styrmin-webhook-tls\"");
        assert!(
            secret.is_some(),
            "{helm}: the chart generates the certificate"
        );
        let base_keys: Vec<&String> = base.keys().collect();
        let chart_keys: Vec<&String> = chart.keys().collect();
        assert_eq!(base_keys, chart_keys, "{helm}: the objects");
        for (key, object) in &base {
            assert_eq!(object, &chart[key], "{helm}: {key}");
        }
        if let Some(namespace) = namespace {
            base.insert("Namespace \"styrmin-system\"".into(), namespace);
        }
    }
}

// ---- install against the stand-in API server ----------------------------------------------------

/// The documents of `helm install --dry-run` output (its MANIFEST section; hooks: none).
fn install_manifest(output: &str) -> String {
    let start = output
        .find("\nMANIFEST:\n")
        .map(|i| i + "\nMANIFEST:\n".len())
        .unwrap_or_else(|| panic!("no MANIFEST: in\n{output}"));
    let end = output[start..]
        .find("\nNOTES:\n")
        .map_or(output.len(), |i| start + i);
    output[start..end].to_owned()
}

fn notes(output: &str) -> &str {
    output
        .split_once("\nNOTES:\n")
        .map(|(_, notes)| notes)
        .unwrap_or_else(|| panic!("no NOTES: in\n{output}"))
}

/// `helm install <dry_run>` of the chart against `server`.
fn install(server: &FakeApiServer, helm: &str, dry_run: &str, args: &[&str]) -> String {
    let home = HelmHome::new("chart-install");
    let kubeconfig = home.scratch().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig, Some(NAMESPACE));
    let mut cmd = home.helm(helm);
    cmd.env("KUBECONFIG", &kubeconfig)
        .args(["install", RELEASE])
        .arg(chart_dir())
        .args([
            "--namespace",
            NAMESPACE,
            dry_run,
            "--disable-openapi-validation",
        ])
        .args(args);
    utf8(run_ok(&mut cmd, None).stdout, "helm install output")
}

#[test]
fn helm_install_dry_run_against_the_stand_in_api_server() {
    let server = FakeApiServer::with_discovery();
    for helm in HELMS {
        for (mode, args) in CERTIFICATE_MODES {
            for dry_run in ["--dry-run=client", "--dry-run=server"] {
                let output = install(&server, helm, dry_run, args);
                let rendered = objects(&install_manifest(&output));
                find(&rendered, "Deployment", "styrmin-webhook");
                find(&rendered, "MutatingWebhookConfiguration", "styrmin-webhook");
                let notes = notes(&output);
                assert!(
                    notes.contains(
                        "kubectl -n styrmin-system rollout status deployment/styrmin-webhook"
                    ),
                    "{helm} {mode} {dry_run}: NOTES:\n{notes}"
                );
                assert!(notes.contains(&format!("{mode} certificate")), "{notes}");
            }
        }
    }
    // --dry-run=server looked the certificate's Secret up (the chart's `lookup`).
    server.assert_dry_run(
        |path| path == SECRET_PATH,
        "no lookup of the Secret reached the API server",
    );
}

// ---- the generated certificate across upgrades ---------------------------------------------------

/// The generated certificate in a render: the Secret's `data` and the caBundle of both webhooks.
fn generated_certificate(objects: &[Value]) -> (Value, Vec<String>) {
    let secret = find(objects, "Secret", "styrmin-webhook-tls");
    let config = find(objects, "MutatingWebhookConfiguration", "styrmin-webhook");
    let bundles = config["webhooks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["clientConfig"]["caBundle"].as_str().unwrap().to_owned())
        .collect();
    (secret["data"].clone(), bundles)
}

fn pem(data: &Value, key: &str) -> String {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data[key].as_str().unwrap())
        .unwrap();
    String::from_utf8(bytes).unwrap()
}

/// `helm template` cannot read the cluster (`lookup` returns nothing), so every render makes a
/// new CA; an install against an API server that holds the Secret — what `helm upgrade` sees —
/// reuses it, and the caBundle stays the CA that signed it. Helm 3 and Helm 4, `--dry-run=server`
/// (the mode in which Helm runs `lookup` without writing).
#[test]
fn an_upgrade_keeps_the_generated_certificate() {
    for helm in HELMS {
        let server = FakeApiServer::with_discovery();
        let first = objects(&install_manifest(&install(
            &server,
            helm,
            "--dry-run=server",
            &[],
        )));
        let (data, bundles) = generated_certificate(&first);
        assert!(pem(&data, "tls.crt").starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(pem(&data, "tls.key").contains("PRIVATE KEY-----"));
        assert!(
            bundles
                .iter()
                .all(|b| b == data["ca.crt"].as_str().unwrap())
        );

        // Without the Secret in the cluster, a second render issues another certificate.
        let again = objects(&install_manifest(&install(
            &server,
            helm,
            "--dry-run=server",
            &[],
        )));
        assert_ne!(
            generated_certificate(&again).0,
            data,
            "{helm}: a fresh render reuses nothing"
        );

        // The first install's Secret exists now, with the ownership Helm gives what it installs.
        let mut secret = find(&first, "Secret", "styrmin-webhook-tls").clone();
        secret["metadata"]["annotations"] = serde_json::json!({
            "meta.helm.sh/release-name": RELEASE,
            "meta.helm.sh/release-namespace": NAMESPACE,
        });
        let secret = &secret;
        server.serve_object(SECRET_PATH, secret);
        let upgrade = objects(&install_manifest(&install(
            &server,
            helm,
            "--dry-run=server",
            &[],
        )));
        let (kept, kept_bundles) = generated_certificate(&upgrade);
        assert_eq!(kept, data, "{helm}: the upgrade re-issued the certificate");
        assert_eq!(kept_bundles, bundles, "{helm}: the caBundle changed");

        // A Secret without the CA (not one the chart made) is not half-reused.
        let mut foreign = secret.clone();
        foreign["data"].as_object_mut().unwrap().remove("ca.crt");
        server.serve_object(SECRET_PATH, &foreign);
        let replaced = objects(&install_manifest(&install(
            &server,
            helm,
            "--dry-run=server",
            &[],
        )));
        let (new_data, new_bundles) = generated_certificate(&replaced);
        assert_ne!(new_data["tls.crt"], data["tls.crt"], "{helm}");
        assert!(
            new_bundles
                .iter()
                .all(|b| b == new_data["ca.crt"].as_str().unwrap())
        );
    }
}
