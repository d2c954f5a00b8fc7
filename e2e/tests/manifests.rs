//! `manifests/` and the Helm chart `charts/styrmin-webhook` (the base is rendered from it,
//! `e2e/tests/helm_chart.rs` holds them equal): the committed CRDs are the Rust types' CRDs;
//! every overlay builds with the real `kubectl kustomize` (`make tools`) and the chart renders
//! under the real Helm 3 and Helm 4 in each certificate mode, and every object either yields is
//! a valid object of its Kubernetes API type (k8s-openapi, unknown fields rejected: a typo fails
//! here) or of its CRD's schema (cert-manager, prometheus-operator); the ClusterRole grants
//! exactly the calls the code makes; the webhook configuration, the Deployment and the
//! Dockerfile are what `docs/webhook.md` ("In a cluster") says — for the base and the chart.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use base64::Engine as _;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use styrmin_e2e::crd_schema::{crd_version_schema, schema_errors};
use styrmin_e2e::{
    HelmHome, Scratch, copy_dir, data, release_binary, run_ok, split_documents, tool, utf8,
    workspace_root,
};
use styrmin_webhook::acme_issuers::ISSUER_CALLS;
use styrmin_webhook::controllers::LEASE_CALLS;
use styrmin_webhook::controllers::migration::{CANARY_CALLS, MIGRATION_CALLS, MOVE_CALLS};
use styrmin_webhook::controllers::policy_reports::content::ReportApi;
use styrmin_webhook::controllers::policy_reports::report_call;
use styrmin_webhook::crd::{all_crds, crd_yaml};
use styrmin_webhook::kube_source::{ADMISSION_API_CALLS, API_CALLS, ApiCall};

/// The controllers' objects' name (Deployment, service account, ClusterRole).
const CONTROLLERS: &str = "styrmin-webhook-controllers";
/// The Role of the controllers' election Lease.
const ELECTION_ROLE: &str = "styrmin-webhook-controllers-election";

const WEBHOOK_UID: i64 = 65532;

/// `kubectl kustomize <dir>`, as parsed objects.
fn kustomize(dir: &Path) -> Vec<Value> {
    let output = run_ok(
        Command::new(tool("kubectl")).arg("kustomize").arg(dir),
        None,
    );
    let text = utf8(output.stdout, "kubectl kustomize output");
    split_documents(&text)
        .iter()
        .map(|doc| doc.value())
        .collect()
}

/// The self-signed overlay, built in a copy of `manifests/` after `styrmin-certs` wrote the
/// certificates and the CA bundle into it (what a user does).
struct SelfSigned {
    scratch: Scratch,
    objects: Vec<Value>,
}

fn self_signed() -> SelfSigned {
    let scratch = Scratch::new("manifests");
    let manifests = scratch.join("manifests");
    copy_dir(&workspace_root().join("manifests"), &manifests);
    // Its defaults, run from the root of the copy.
    run_ok(
        Command::new(release_binary("styrmin-certs")).current_dir(scratch.path()),
        None,
    );
    let objects = kustomize(&manifests.join("overlays/self-signed"));
    SelfSigned { scratch, objects }
}

fn base() -> Vec<Value> {
    kustomize(&workspace_root().join("manifests/base"))
}

fn cert_manager() -> Vec<Value> {
    kustomize(&workspace_root().join("manifests/overlays/cert-manager"))
}

/// `<helm> template styrmin-webhook charts/styrmin-webhook -n styrmin-system <args>`, as
/// parsed objects (comment-only documents left out).
fn chart(helm: &str, args: &[&str]) -> Vec<Value> {
    let home = HelmHome::new(&format!("manifests-{helm}"));
    let output = run_ok(
        home.helm(helm)
            .args(["template", "styrmin-webhook"])
            .arg(workspace_root().join("charts/styrmin-webhook"))
            .args(["--namespace", "styrmin-system"])
            .args(args),
        None,
    );
    let text = utf8(output.stdout, "helm template output");
    split_documents(&text)
        .iter()
        .map(|doc| doc.value())
        .filter(|v| !v.is_null())
        .collect()
}

/// What `kubectl apply -k manifests/base` and `helm install` with the default values apply
/// (Helm 3 and Helm 4): every check of the webhook's objects runs over each.
fn installations() -> Vec<(&'static str, Vec<Value>)> {
    vec![
        ("manifests/base", base()),
        ("chart defaults (helm3)", chart("helm3", &[])),
        ("chart defaults (helm4)", chart("helm4", &[])),
    ]
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

fn typed<T: DeserializeOwned>(object: &Value) -> T {
    serde_json::from_value(as_the_api_server_reads_it(object)).unwrap()
}

// ---- the CRDs -------------------------------------------------------------------------

/// Where the CRDs are committed: the chart's files, which the base is rendered from.
const CRD_DIR: &str = "charts/styrmin-webhook/files/crds";

#[test]
fn committed_crds_are_generated_from_the_types() {
    for (file, crd) in all_crds() {
        let path = workspace_root().join(CRD_DIR).join(file);
        let committed =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let regenerate =
            format!("regenerate with `cargo run -p styrmin-webhook --example crdgen -- {CRD_DIR}`");
        // Same meaning (a hand edit that only reformats still fails the text check below).
        let parsed: Value = serde_saphyr::from_str(&committed).unwrap();
        assert_eq!(
            parsed,
            serde_json::to_value(&crd).unwrap(),
            "{file} is not the CRD of the types: {regenerate}"
        );
        let generated = crd_yaml(&crd).unwrap();
        assert_eq!(
            committed, generated,
            "{file} is not as generated: {regenerate}"
        );
    }
    // What the chart renders (and with it the base) is these CRDs, plus labels and the keep
    // annotation.
    for (name, objects) in installations() {
        for (_, crd) in all_crds() {
            let crd_name = crd.metadata.name.clone().unwrap();
            let mut rendered = find(&objects, "CustomResourceDefinition", &crd_name).clone();
            let metadata = rendered["metadata"].as_object_mut().unwrap();
            assert_eq!(
                metadata["annotations"]["helm.sh/resource-policy"], "keep",
                "{name}: {crd_name}"
            );
            metadata.remove("annotations");
            metadata.remove("labels");
            // Helm's `toYaml` writes a bound of 3600.0 as 3600.
            let mut generated = serde_json::to_value(&crd).unwrap();
            whole_numbers_as_integers(&mut generated);
            assert_eq!(rendered, generated, "{name}: {crd_name}");
        }
    }
}

// ---- every object is a valid Kubernetes object ------------------------------------------

/// Keys of `input` that `back` (the object after a round trip through its type) lost: fields
/// the type does not have.
fn unknown_fields(input: &Value, back: &Value, path: &str, found: &mut Vec<String>) {
    match (input, back) {
        (Value::Object(input), Value::Object(back)) => {
            for (key, value) in input {
                let here = format!("{path}.{key}");
                match back.get(key) {
                    Some(back_value) => unknown_fields(value, back_value, &here, found),
                    None => found.push(here),
                }
            }
        }
        (Value::Array(input), Value::Array(back)) => {
            for (i, (value, back_value)) in input.iter().zip(back).enumerate() {
                unknown_fields(value, back_value, &format!("{path}[{i}]"), found);
            }
        }
        _ => {}
    }
}

/// Deserialises into `T` (naming the path of a wrong type) and rejects unknown fields.
fn check_as<T: DeserializeOwned + Serialize>(object: &Value, what: &str) {
    let typed: T = serde_path_to_error::deserialize(object.clone())
        .unwrap_or_else(|e| panic!("{what}: {} at `{}`", e.inner(), e.path()));
    let back = serde_json::to_value(&typed).unwrap();
    let mut unknown = Vec::new();
    unknown_fields(object, &back, "", &mut unknown);
    assert!(
        unknown.is_empty(),
        "{what}: fields its API type does not have (a typo?): {unknown:?}"
    );
}

/// The fields of cert-manager `v1` this repository uses; anything else is a typo here.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct CertManagerObject<S> {
    api_version: String,
    kind: String,
    metadata: ObjectMeta,
    spec: S,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct IssuerSpec {
    self_signed: serde_json::Map<String, Value>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct CertificateSpec {
    secret_name: String,
    dns_names: Vec<String>,
    duration: Option<String>,
    renew_before: Option<String>,
    private_key: Option<PrivateKey>,
    usages: Option<Vec<String>>,
    issuer_ref: IssuerRef,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PrivateKey {
    algorithm: String,
    size: u32,
    rotation_policy: String,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct IssuerRef {
    name: String,
    kind: String,
    group: String,
}

/// kustomize writes long base64 values (a Secret's `data`) as block scalars, with line
/// breaks; the API server's decoder (Go's `encoding/base64`) skips `\r` and `\n`, so the
/// check does too before k8s-openapi's strict decoder sees them.
fn as_the_api_server_reads_it(object: &Value) -> Value {
    let mut object = object.clone();
    if object["apiVersion"] == "v1"
        && object["kind"] == "Secret"
        && let Some(data) = object.get_mut("data").and_then(Value::as_object_mut)
    {
        for value in data.values_mut() {
            if let Some(text) = value.as_str() {
                *value = Value::from(text.replace(['\r', '\n'], ""));
            }
        }
    }
    object
}

/// Checks `object` against version `version` of the CRD in `e2e/tests/data/crds/<file>`.
fn check_against_crd(object: &Value, file: &str, version: &str, what: &str) {
    let schema = crd_version_schema(&data(&format!("crds/{file}")), version);
    let errors = schema_errors(&schema, object);
    assert!(
        errors.is_empty(),
        "{what}: not valid for its CRD: {errors:#?}"
    );
}

fn check_object(object: &Value) {
    let object = &as_the_api_server_reads_it(object);
    let api_version = object["apiVersion"].as_str().unwrap_or("");
    let kind = object["kind"].as_str().unwrap_or("");
    let what = format!(
        "{api_version} {kind} {}",
        object["metadata"]["name"].as_str().unwrap_or("?")
    );
    match (api_version, kind) {
        ("v1", "Namespace") => check_as::<Namespace>(object, &what),
        ("v1", "ServiceAccount") => check_as::<ServiceAccount>(object, &what),
        ("v1", "Service") => check_as::<Service>(object, &what),
        ("v1", "Secret") => check_as::<Secret>(object, &what),
        ("v1", "ConfigMap") => check_as::<ConfigMap>(object, &what),
        ("networking.k8s.io/v1", "NetworkPolicy") => check_as::<NetworkPolicy>(object, &what),
        ("apps/v1", "Deployment") => check_as::<Deployment>(object, &what),
        ("policy/v1", "PodDisruptionBudget") => check_as::<PodDisruptionBudget>(object, &what),
        ("rbac.authorization.k8s.io/v1", "ClusterRole") => check_as::<ClusterRole>(object, &what),
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => {
            check_as::<ClusterRoleBinding>(object, &what)
        }
        ("rbac.authorization.k8s.io/v1", "Role") => check_as::<Role>(object, &what),
        ("rbac.authorization.k8s.io/v1", "RoleBinding") => check_as::<RoleBinding>(object, &what),
        ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration") => {
            check_as::<MutatingWebhookConfiguration>(object, &what)
        }
        ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy") => {
            check_as::<ValidatingAdmissionPolicy>(object, &what)
        }
        ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding") => {
            check_as::<ValidatingAdmissionPolicyBinding>(object, &what)
        }
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition") => {
            check_as::<CustomResourceDefinition>(object, &what)
        }
        ("cert-manager.io/v1", "Issuer") => {
            check_as::<CertManagerObject<IssuerSpec>>(object, &what);
            check_against_crd(object, "cert-manager.io_issuers.yaml", "v1", &what);
        }
        ("cert-manager.io/v1", "Certificate") => {
            check_as::<CertManagerObject<CertificateSpec>>(object, &what);
            check_against_crd(object, "cert-manager.io_certificates.yaml", "v1", &what);
        }
        ("monitoring.coreos.com/v1", "PrometheusRule") => check_against_crd(
            object,
            "monitoring.coreos.com_prometheusrules.yaml",
            "v1",
            &what,
        ),
        ("monitoring.coreos.com/v1", "ServiceMonitor") => check_against_crd(
            object,
            "monitoring.coreos.com_servicemonitors.yaml",
            "v1",
            &what,
        ),
        ("monitoring.coreos.com/v1", "PodMonitor") => check_against_crd(
            object,
            "monitoring.coreos.com_podmonitors.yaml",
            "v1",
            &what,
        ),
        _ => panic!("{what}: no API type to check it against; add one here"),
    }
}

/// Every optional object of the chart turned on, with an existing Issuer.
const CHART_EVERYTHING: &[&str] = &[
    "--set=certificate.mode=certManager",
    "--set=certificate.certManager.issuerRef.name=cluster-ca",
    "--set=certificate.certManager.issuerRef.kind=ClusterIssuer",
    "--set=networkPolicy.enabled=true",
    "--set=serviceMonitor.enabled=true",
    "--set=podMonitor.enabled=true",
    "--set=prometheusRule.enabled=true",
    "--set=dashboard.enabled=true",
    "--set=podAntiAffinity=hard",
    "--set=fluxPostRenderer=true",
];

/// What was built, its objects, and the kinds it lacks and adds compared with the base.
type BuildCase = (
    String,
    Vec<Value>,
    &'static [&'static str],
    &'static [&'static str],
);
/// A chart mode: its name, `helm template` arguments, kinds it lacks and adds.
type ChartMode = (
    &'static str,
    &'static [&'static str],
    &'static [&'static str],
    &'static [&'static str],
);

#[test]
fn every_overlay_and_chart_mode_builds_into_valid_kubernetes_objects() {
    let self_signed = self_signed();
    let mut cases: Vec<BuildCase> = vec![
        ("base".into(), base(), &[], &[]),
        (
            "overlays/self-signed".into(),
            self_signed.objects,
            &[],
            &["Secret"],
        ),
        (
            "overlays/cert-manager".into(),
            cert_manager(),
            &[],
            &["Issuer", "Certificate"],
        ),
    ];
    for helm in ["helm3", "helm4"] {
        let modes: [ChartMode; 5] = [
            (
                "defaults (generated certificate)",
                &[],
                &["Namespace"],
                &["Secret"],
            ),
            (
                "certManager",
                &["--set=certificate.mode=certManager"],
                &["Namespace"],
                &["Issuer", "Certificate"],
            ),
            (
                "existingSecret",
                &[
                    "--set=certificate.mode=existingSecret",
                    "--set=certificate.existingSecret.name=my-tls",
                    "--set=certificate.existingSecret.caBundle=Q0E=",
                ],
                &["Namespace"],
                &[],
            ),
            (
                "everything",
                CHART_EVERYTHING,
                &["Namespace"],
                &[
                    "Certificate",
                    "ConfigMap",
                    "NetworkPolicy",
                    "ServiceMonitor",
                    "PodMonitor",
                    "PrometheusRule",
                ],
            ),
            (
                "policy-file source",
                &[
                    "--set=view.source=policy-file",
                    "--set=view.policy=environments: []",
                ],
                &[
                    "Namespace",
                    "ClusterRole",
                    "ClusterRoleBinding",
                    "Role",
                    "RoleBinding",
                ],
                &["Secret", "ConfigMap"],
            ),
        ];
        for (mode, args, removed, extra) in modes {
            cases.push((
                format!("chart {mode} ({helm})"),
                chart(helm, args),
                removed,
                extra,
            ));
        }
    }
    for (name, objects, removed, extra) in cases {
        for object in &objects {
            check_object(object);
        }
        let kinds: BTreeSet<&str> = objects.iter().filter_map(|o| o["kind"].as_str()).collect();
        let mut expected: BTreeSet<&str> = [
            "Namespace",
            "CustomResourceDefinition",
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
            "Deployment",
            "PodDisruptionBudget",
            "Service",
            "MutatingWebhookConfiguration",
        ]
        .into();
        for kind in removed {
            expected.remove(kind);
        }
        expected.extend(extra);
        assert_eq!(kinds, expected, "{name}");
        let crds = objects
            .iter()
            .filter(|o| o["kind"] == "CustomResourceDefinition")
            .count();
        assert_eq!(crds, all_crds().len(), "{name}");
    }
}

#[test]
fn the_prometheus_rule_component_is_valid_for_its_crd() {
    let path = workspace_root().join("manifests/components/prometheus-rule/prometheusrule.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let objects: Vec<Value> = split_documents(&text)
        .iter()
        .map(|d| d.value())
        .filter(|v| !v.is_null())
        .collect();
    assert_eq!(objects.len(), 1, "{}", path.display());
    assert_eq!(objects[0]["kind"], "PrometheusRule");
    check_object(&objects[0]);
}

#[test]
fn a_typo_in_a_manifest_fails_the_check() {
    let mut deployment = find(&base(), "Deployment", "styrmin-webhook").clone();
    deployment["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = Value::Null;
    let typo = std::panic::catch_unwind(|| check_object(&deployment));
    assert!(typo.is_err(), "readinesProbe was accepted");
    let mut wrong_type = find(&base(), "Service", "styrmin-webhook").clone();
    wrong_type["spec"]["ports"][0]["port"] = Value::from("443x");
    assert!(std::panic::catch_unwind(|| check_object(&wrong_type)).is_err());
    // Kinds checked against a CRD's schema: an unknown field and a wrong type fail too.
    let everything = chart("helm4", CHART_EVERYTHING);
    let mut monitor = find(&everything, "ServiceMonitor", "styrmin-webhook").clone();
    monitor["spec"]["endpoints"][0]["intervall"] = Value::from("30s");
    assert!(std::panic::catch_unwind(|| check_object(&monitor)).is_err());
    let mut rule = find(&everything, "PrometheusRule", "styrmin-webhook").clone();
    rule["spec"]["groups"][0]["rules"] = Value::from("not a list");
    assert!(std::panic::catch_unwind(|| check_object(&rule)).is_err());
}

// ---- RBAC --------------------------------------------------------------------------------

#[test]
fn the_cluster_role_grants_exactly_the_calls_the_code_makes() {
    // No other RBAC object anywhere.
    for overlay in [
        base(),
        cert_manager(),
        chart("helm4", &[]),
        chart("helm4", CHART_EVERYTHING),
    ] {
        let rbac = overlay
            .iter()
            .filter(|o| {
                o["apiVersion"]
                    .as_str()
                    .is_some_and(|v| v.starts_with("rbac."))
            })
            .count();
        // Two ClusterRoles with their bindings, and the election's Role with its binding.
        assert_eq!(rbac, 6);
    }
    for (name, objects) in installations() {
        let checked = std::panic::catch_unwind(|| {
            check_the_cluster_role_grants_exactly_the_calls_the_code_makes(&objects)
        });
        assert!(checked.is_ok(), "{name}: see the failure above");
    }
}

/// `group resource verb` (or `url verb`) of every grant of `rules`, with ` names=a,b` when
/// the rule is limited to those objects; no wildcards, nothing on Secrets.
fn grants(rules: Vec<PolicyRule>) -> BTreeSet<String> {
    let mut granted = BTreeSet::new();
    for rule in rules {
        let names = rule
            .resource_names
            .as_ref()
            .filter(|n| !n.is_empty())
            .map(|n| format!(" names={}", n.join(",")))
            .unwrap_or_default();
        for verb in &rule.verbs {
            assert_ne!(verb, "*", "no wildcard verbs");
            for group in rule.api_groups.iter().flatten() {
                for resource in rule.resources.iter().flatten() {
                    assert_ne!(resource, "*", "no wildcard resources");
                    assert_ne!(resource, "secrets", "nothing on Secrets");
                    granted.insert(format!("{group} {resource} {verb}{names}"));
                }
            }
            for url in rule.non_resource_urls.iter().flatten() {
                granted.insert(format!("{url} {verb}"));
            }
        }
    }
    granted
}

/// The same form for calls the code makes.
fn calls<'a>(calls: impl IntoIterator<Item = &'a ApiCall>) -> BTreeSet<String> {
    let mut called = BTreeSet::new();
    for call in calls {
        match *call {
            ApiCall::Resource {
                group,
                resource,
                verbs,
                names,
                ..
            } => called.extend(verbs.iter().map(|v| {
                let mut grant = format!("{group} {resource} {v}");
                if !names.is_empty() {
                    grant.push_str(&format!(" names={}", names.join(",")));
                }
                grant
            })),
            ApiCall::NonResource { path, verbs } => {
                called.extend(verbs.iter().map(|v| format!("{path} {v}")))
            }
        }
    }
    called
}

fn check_the_cluster_role_grants_exactly_the_calls_the_code_makes(objects: &[Value]) {
    // Admission: read-only, the levels and /version.
    check_cluster_role(
        objects,
        "styrmin-webhook",
        "styrmin-webhook",
        calls(ADMISSION_API_CALLS),
    );
    // The controllers: the audit's reads and the pre-flight's Issuers.
    check_cluster_role(
        objects,
        CONTROLLERS,
        CONTROLLERS,
        calls(API_CALLS.iter().chain(&ISSUER_CALLS)),
    );
    check_election_role(objects);
}

/// The ClusterRole `name` grants exactly `called`, and is bound to the service account of
/// the Deployment `deployment`.
fn check_cluster_role(objects: &[Value], name: &str, deployment: &str, called: BTreeSet<String>) {
    let role: ClusterRole = typed(find(objects, "ClusterRole", name));
    assert_eq!(
        grants(role.rules.unwrap_or_default()),
        called,
        "ClusterRole {name} vs the calls of the code"
    );
    let binding: ClusterRoleBinding = typed(find(objects, "ClusterRoleBinding", name));
    assert_eq!(binding.role_ref.name, name);
    let subject = &binding.subjects.unwrap()[0];
    let deployment: Deployment = typed(find(objects, "Deployment", deployment));
    let pod = deployment.spec.template.spec.unwrap();
    assert_eq!(
        (
            subject.kind.as_str(),
            Some(subject.name.as_str()),
            subject.namespace.as_deref()
        ),
        (
            "ServiceAccount",
            pod.service_account_name.as_deref(),
            Some("styrmin-system")
        ),
        "ClusterRoleBinding {name}"
    );
}

/// The election's Role grants exactly `LEASE_CALLS`, to the controllers only.
fn check_election_role(objects: &[Value]) {
    let lease: Role = typed(find(objects, "Role", ELECTION_ROLE));
    assert_eq!(lease.metadata.namespace.as_deref(), Some("styrmin-system"));
    assert_eq!(
        grants(lease.rules.unwrap_or_default()),
        calls(&LEASE_CALLS),
        "Role vs LEASE_CALLS"
    );
    let binding: RoleBinding = typed(find(objects, "RoleBinding", ELECTION_ROLE));
    assert_eq!(binding.role_ref.name, ELECTION_ROLE);
    assert_eq!(binding.subjects.unwrap()[0].name, CONTROLLERS);
}

/// The controllers' container: its arguments and environment variable names.
fn controllers_container(objects: &[Value]) -> (Vec<String>, Vec<String>) {
    let deployment: Deployment = typed(find(objects, "Deployment", CONTROLLERS));
    let container = &deployment.spec.template.spec.unwrap().containers[0];
    // What the benchmarks measure is what the chart deploys.
    for (name, value) in styrmin_e2e::CONTROLLERS_ENV {
        let set = container.env.iter().flatten().find(|e| e.name == name);
        assert_eq!(set.and_then(|e| e.value.as_deref()), Some(value), "{name}");
    }
    let env = container
        .env
        .iter()
        .flatten()
        .map(|e| e.name.clone())
        .filter(|name| !styrmin_e2e::CONTROLLERS_ENV.iter().any(|(n, _)| n == name))
        .collect();
    (container.args.clone().unwrap_or_default(), env)
}

/// Admission's container arguments.
fn admission_args(objects: &[Value]) -> Vec<String> {
    let deployment: Deployment = typed(find(objects, "Deployment", "styrmin-webhook"));
    deployment.spec.template.spec.unwrap().containers[0]
        .args
        .clone()
        .unwrap_or_default()
}

#[test]
fn policy_reports_add_exactly_the_writers_calls_to_the_controllers() {
    for (mode, apis) in [
        ("auto", &[ReportApi::OpenReports, ReportApi::WgPolicy][..]),
        ("openreports", &[ReportApi::OpenReports][..]),
        ("wgpolicyk8s", &[ReportApi::WgPolicy][..]),
    ] {
        let objects = chart("helm4", &[&format!("--set=policyReports.mode={mode}")]);
        let writer: Vec<ApiCall> = apis.iter().map(|api| report_call(*api)).collect();
        check_cluster_role(
            &objects,
            CONTROLLERS,
            CONTROLLERS,
            calls(API_CALLS.iter().chain(&ISSUER_CALLS).chain(&writer)),
        );
        // Admission stays read-only whatever the mode.
        check_cluster_role(
            &objects,
            "styrmin-webhook",
            "styrmin-webhook",
            calls(ADMISSION_API_CALLS),
        );
        check_election_role(&objects);
        let (args, env) = controllers_container(&objects);
        assert_eq!(args[0], "controllers");
        assert!(
            args.contains(&format!("--policy-reports={mode}")),
            "{args:?}"
        );
        assert_eq!(
            env,
            [
                "STYRMIN_WEBHOOK_LEADER_ELECTION_NAMESPACE",
                "STYRMIN_WEBHOOK_LEADER_ELECTION_IDENTITY"
            ]
        );
        assert!(
            !admission_args(&objects)
                .iter()
                .any(|a| a.starts_with("--policy-reports")),
            "admission runs no writer"
        );
        for object in &objects {
            check_object(object);
        }
    }
    // No reports without the kubernetes source.
    let refused = HelmHome::new("manifests-helm4")
        .helm("helm4")
        .args(["template", "styrmin-webhook"])
        .arg(workspace_root().join("charts/styrmin-webhook"))
        .args([
            "--set=policyReports.mode=auto",
            "--set=view.source=policy-file",
            "--set=view.policy=x",
        ])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr)
            .contains("policyReports.mode needs view.source=kubernetes"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
}

#[test]
fn migrations_add_exactly_the_executors_calls_a_canary_role_and_a_fence() {
    let objects = chart("helm4", &["--set=migrations.enabled=true"]);
    let executor = MIGRATION_CALLS.iter().chain(&MOVE_CALLS);
    check_cluster_role(
        &objects,
        CONTROLLERS,
        CONTROLLERS,
        calls(API_CALLS.iter().chain(&ISSUER_CALLS).chain(executor)),
    );
    check_cluster_role(
        &objects,
        "styrmin-webhook",
        "styrmin-webhook",
        calls(ADMISSION_API_CALLS),
    );
    check_election_role(&objects);
    let canary = "styrmin-webhook-migration-canary";
    let role: Role = typed(find(&objects, "Role", canary));
    assert_eq!(role.metadata.namespace.as_deref(), Some("styrmin-system"));
    assert_eq!(grants(role.rules.unwrap_or_default()), calls(&CANARY_CALLS));
    let binding: RoleBinding = typed(find(&objects, "RoleBinding", canary));
    assert_eq!(binding.role_ref.name, canary);
    assert_eq!(binding.subjects.unwrap()[0].name, CONTROLLERS);
    assert_eq!(objects.iter().filter(|o| o["kind"] == "Role").count(), 2);
    let (args, _) = controllers_container(&objects);
    assert!(args.contains(&"--migrations".to_owned()), "{args:?}");
    assert!(!admission_args(&objects).contains(&"--migrations".to_owned()));
    // The fence matches the controllers' service account, and is bound.
    let fence: ValidatingAdmissionPolicy = typed(find(
        &objects,
        "ValidatingAdmissionPolicy",
        "styrmin-webhook-controllers-write-fence",
    ));
    let conditions = fence.spec.unwrap().match_conditions.unwrap();
    assert_eq!(
        conditions[0].expression,
        "request.userInfo.username == \"system:serviceaccount:styrmin-system:styrmin-webhook-controllers\""
    );
    let bound: ValidatingAdmissionPolicyBinding = typed(find(
        &objects,
        "ValidatingAdmissionPolicyBinding",
        "styrmin-webhook-controllers-write-fence",
    ));
    assert_eq!(bound.spec.validation_actions, vec!["Deny".to_owned()]);
    for object in &objects {
        check_object(object);
    }
    let unfenced = chart(
        "helm4",
        &[
            "--set=migrations.enabled=true",
            "--set=migrations.writeFence=false",
        ],
    );
    assert!(
        !unfenced
            .iter()
            .any(|o| o["kind"] == "ValidatingAdmissionPolicy")
    );

    // Without it: none of the executor's grants, no canary Role, no flag, no fence.
    let executor_only: BTreeSet<String> = calls(MIGRATION_CALLS.iter().chain(&MOVE_CALLS))
        .difference(&calls(API_CALLS.iter().chain(&ISSUER_CALLS)))
        .cloned()
        .collect();
    assert!(!executor_only.is_empty());
    for values in [&[][..], &["--set=policyReports.mode=auto"][..]] {
        let objects = chart("helm4", values);
        for name in ["styrmin-webhook", CONTROLLERS] {
            let role: ClusterRole = typed(find(&objects, "ClusterRole", name));
            let granted = grants(role.rules.unwrap_or_default());
            assert!(
                granted.is_disjoint(&executor_only),
                "{values:?} {name}: {:?}",
                granted.intersection(&executor_only).collect::<Vec<_>>()
            );
        }
        let roles: Vec<&Value> = objects
            .iter()
            .filter(|o| o["kind"] == "Role" || o["kind"] == "RoleBinding")
            .map(|o| &o["metadata"]["name"])
            .collect();
        assert!(
            roles.iter().all(|name| *name == ELECTION_ROLE),
            "{values:?}: {roles:?}"
        );
        let (args, _) = controllers_container(&objects);
        assert!(!args.contains(&"--migrations".to_owned()), "{values:?}");
        assert!(
            !objects
                .iter()
                .any(|o| o["kind"] == "ValidatingAdmissionPolicy")
        );
    }
    let refused = HelmHome::new("manifests-helm4")
        .helm("helm4")
        .args(["template", "styrmin-webhook"])
        .arg(workspace_root().join("charts/styrmin-webhook"))
        .args([
            "--set=migrations.enabled=true",
            "--set=view.source=policy-file",
            "--set=view.policy=x",
        ])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr)
            .contains("migrations.enabled needs view.source=kubernetes"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
}

// ---- the webhook configuration -----------------------------------------------------------

#[test]
fn the_controllers_network_policy_admits_only_metrics_from_monitoring() {
    let objects = chart("helm4", &["--set=networkPolicy.enabled=true"]);
    let policy: NetworkPolicy = typed(find(&objects, "NetworkPolicy", CONTROLLERS));
    let spec = policy.spec.unwrap();
    let deployment: Deployment = typed(find(&objects, "Deployment", CONTROLLERS));
    assert_eq!(
        spec.pod_selector.and_then(|s| s.match_labels),
        deployment.spec.selector.match_labels,
        "it selects the controllers' pods"
    );
    let ingress = spec.ingress.unwrap();
    assert_eq!(
        ingress.len(),
        1,
        "no webhook port: the controllers serve none"
    );
    let ports: Vec<_> = ingress[0]
        .ports
        .iter()
        .flatten()
        .map(|p| p.port.clone())
        .collect();
    assert_eq!(
        ports,
        [Some(
            k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(9090)
        )]
    );
    let from = ingress[0].from.clone().unwrap();
    assert_eq!(
        from[0]
            .namespace_selector
            .as_ref()
            .and_then(|s| s.match_labels.as_ref())
            .and_then(|l| l.get("kubernetes.io/metadata.name"))
            .map(String::as_str),
        Some("monitoring")
    );
}

#[test]
fn the_webhook_configuration_is_as_documented() {
    for (name, objects) in installations() {
        let checked =
            std::panic::catch_unwind(|| check_the_webhook_configuration_is_as_documented(&objects));
        assert!(checked.is_ok(), "{name}: see the failure above");
    }
}

fn check_the_webhook_configuration_is_as_documented(objects: &[Value]) {
    let config: MutatingWebhookConfiguration = typed(find(
        objects,
        "MutatingWebhookConfiguration",
        "styrmin-webhook",
    ));
    let service: Service = typed(find(objects, "Service", "styrmin-webhook"));
    let webhooks = config.webhooks.unwrap();
    let mut covered = BTreeSet::new();
    for webhook in &webhooks {
        let name = &webhook.name;
        assert_eq!(webhook.side_effects, "None", "{name}");
        assert_eq!(
            webhook.match_policy.as_deref(),
            Some("Equivalent"),
            "{name}"
        );
        assert_eq!(
            webhook.reinvocation_policy.as_deref(),
            Some("IfNeeded"),
            "{name}"
        );
        assert!(
            webhook
                .timeout_seconds
                .is_some_and(|t| (1..=10).contains(&t)),
            "{name}"
        );
        assert_eq!(webhook.admission_review_versions, ["v1"], "{name}");
        let selector = webhook.namespace_selector.as_ref().unwrap();
        let expressions = selector.match_expressions.as_ref().unwrap();
        assert!(
            expressions
                .iter()
                .any(|e| e.key == "styrmin/environment_id" && e.operator == "Exists"),
            "{name}"
        );
        let excluded = expressions
            .iter()
            .find(|e| e.key == "kubernetes.io/metadata.name" && e.operator == "NotIn")
            .and_then(|e| e.values.clone())
            .unwrap_or_default();
        for namespace in ["kube-system", "styrmin-system"] {
            assert!(
                excluded.iter().any(|n| n == namespace),
                "{name}: {namespace} not excluded"
            );
        }
        let client = webhook.client_config.service.as_ref().unwrap();
        assert_eq!(Some(client.name.as_str()), service.metadata.name.as_deref());
        assert_eq!(
            Some(client.namespace.as_str()),
            service.metadata.namespace.as_deref()
        );
        assert_eq!(client.path.as_deref(), Some("/mutate"));
        let port = client.port.unwrap_or(443);
        assert!(
            service
                .spec
                .as_ref()
                .unwrap()
                .ports
                .as_ref()
                .unwrap()
                .iter()
                .any(|p| p.port == port)
        );
        for rule in webhook.rules.iter().flatten() {
            assert_eq!(
                rule.operations.as_deref(),
                Some(&["CREATE".to_owned(), "UPDATE".to_owned()][..])
            );
            for group in rule.api_groups.iter().flatten() {
                for version in rule.api_versions.iter().flatten() {
                    for resource in rule.resources.iter().flatten() {
                        covered.insert((
                            format!("{group}/{version} {resource}"),
                            webhook.failure_policy.clone().unwrap_or_default(),
                        ));
                    }
                }
            }
        }
    }
    let expected: BTreeSet<(String, String)> = [
        ("networking.k8s.io/v1 ingresses", "Fail"),
        ("styrmin.io/v1alpha1 styrmindeployments", "Ignore"),
        ("helm.toolkit.fluxcd.io/v2 helmreleases", "Ignore"),
    ]
    .iter()
    .map(|(r, p)| (r.to_string(), p.to_string()))
    .collect();
    assert_eq!(covered, expected);
    // The namespace the webhook runs in is never labelled as an environment (the chart
    // renders it only with namespace.create, as the base does; the test of the base's
    // values says so).
    if let Some(namespace) = objects
        .iter()
        .find(|o| o["kind"] == "Namespace" && o["metadata"]["name"] == "styrmin-system")
    {
        let namespace: Namespace = typed(namespace);
        let labels = namespace.metadata.labels.unwrap_or_default();
        assert!(!labels.contains_key("styrmin/environment_id"));
        assert_eq!(
            labels
                .get("pod-security.kubernetes.io/enforce")
                .map(String::as_str),
            Some("restricted")
        );
    }
}

#[test]
fn the_base_has_its_namespace() {
    find(&base(), "Namespace", "styrmin-system");
}

#[test]
fn the_self_signed_overlay_carries_the_ca_and_the_serving_pair() {
    let built = self_signed();
    let certs = built.scratch.join("manifests/overlays/self-signed/certs");
    let ca = std::fs::read_to_string(certs.join("ca.crt")).unwrap();
    let bundle = base64::engine::general_purpose::STANDARD.encode(ca.as_bytes());
    let config: MutatingWebhookConfiguration = typed(find(
        &built.objects,
        "MutatingWebhookConfiguration",
        "styrmin-webhook",
    ));
    for webhook in config.webhooks.unwrap() {
        let got = webhook
            .client_config
            .ca_bundle
            .map(|b| b.0)
            .unwrap_or_default();
        assert_eq!(got, ca.as_bytes(), "{}: caBundle is the CA", webhook.name);
    }
    assert!(!bundle.is_empty());
    let secret: Secret = typed(find(&built.objects, "Secret", "styrmin-webhook-tls"));
    assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
    assert_eq!(secret.metadata.namespace.as_deref(), Some("styrmin-system"));
    let data = secret.data.unwrap();
    assert_eq!(
        data["tls.crt"].0,
        std::fs::read(certs.join("tls.crt")).unwrap()
    );
    assert_eq!(
        data["tls.key"].0,
        std::fs::read(certs.join("tls.key")).unwrap()
    );
    assert!(
        !data.contains_key("ca.key"),
        "the CA's key stays out of the cluster"
    );
    let ignore =
        std::fs::read_to_string(workspace_root().join("manifests/overlays/self-signed/.gitignore"))
            .unwrap();
    assert!(
        ignore.lines().any(|l| l.trim() == "certs/"),
        "private keys are never committed"
    );
}

#[test]
fn the_cert_manager_overlay_injects_the_ca_of_the_mounted_certificate() {
    let objects = cert_manager();
    let config = find(&objects, "MutatingWebhookConfiguration", "styrmin-webhook");
    let inject = config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
        .as_str()
        .unwrap();
    let certificate = find(&objects, "Certificate", "styrmin-webhook");
    assert_eq!(
        inject,
        format!(
            "{}/{}",
            certificate["metadata"]["namespace"].as_str().unwrap(),
            certificate["metadata"]["name"].as_str().unwrap()
        )
    );
    let deployment: Deployment = typed(find(&objects, "Deployment", "styrmin-webhook"));
    let pod = deployment.spec.template.spec.unwrap();
    let secret_name = pod.volumes.unwrap()[0]
        .secret
        .as_ref()
        .unwrap()
        .secret_name
        .clone();
    assert_eq!(
        certificate["spec"]["secretName"].as_str(),
        secret_name.as_deref()
    );
    let names: Vec<&str> = certificate["spec"]["dnsNames"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        names.contains(&"styrmin-webhook.styrmin-system.svc"),
        "{names:?}"
    );
    let issuer = find(
        &objects,
        "Issuer",
        certificate["spec"]["issuerRef"]["name"].as_str().unwrap(),
    );
    assert_eq!(
        issuer["metadata"]["namespace"],
        certificate["metadata"]["namespace"]
    );
}

// ---- the Deployment ------------------------------------------------------------------------

#[test]
fn the_deployment_is_highly_available_and_locked_down() {
    for (name, objects) in installations() {
        let checked = std::panic::catch_unwind(|| {
            check_the_deployment_is_highly_available_and_locked_down(&objects)
        });
        assert!(checked.is_ok(), "{name}: see the failure above");
    }
}

fn check_the_deployment_is_highly_available_and_locked_down(objects: &[Value]) {
    let deployment: Deployment = typed(find(objects, "Deployment", "styrmin-webhook"));
    let spec = deployment.spec;
    assert!(spec.replicas.unwrap_or(1) >= 2);
    let labels = spec.selector.match_labels.clone().unwrap();
    let pod = spec.template.spec.unwrap();
    let anti = pod.affinity.clone().unwrap().pod_anti_affinity.unwrap();
    let term = &anti
        .preferred_during_scheduling_ignored_during_execution
        .unwrap()[0];
    assert_eq!(
        term.pod_affinity_term.topology_key,
        "kubernetes.io/hostname"
    );
    assert_eq!(
        term.pod_affinity_term
            .label_selector
            .as_ref()
            .unwrap()
            .match_labels
            .as_ref(),
        Some(&labels)
    );
    let pdb: PodDisruptionBudget = typed(find(objects, "PodDisruptionBudget", "styrmin-webhook"));
    let pdb = pdb.spec.unwrap();
    assert_eq!(pdb.selector.unwrap().match_labels.as_ref(), Some(&labels));
    assert!(pdb.min_available.is_some() || pdb.max_unavailable.is_some());

    check_locked_down(&pod);
    let container = &pod.containers[0];
    let args = container.args.clone().unwrap();
    assert!(args.contains(&"--source=kubernetes".to_owned()), "{args:?}");
    let metrics_port = container
        .ports
        .iter()
        .flatten()
        .find(|p| p.name.as_deref() == Some("metrics"))
        .unwrap()
        .container_port;
    assert!(
        args.contains(&format!("--metrics-listen=0.0.0.0:{metrics_port}")),
        "{args:?}"
    );
    let probe_path = |probe: Option<&k8s_openapi::api::core::v1::Probe>| {
        let get = probe.unwrap().http_get.clone().unwrap();
        assert_eq!(
            get.port,
            k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String("metrics".into())
        );
        get.path.unwrap()
    };
    assert_eq!(probe_path(container.readiness_probe.as_ref()), "/readyz");
    assert_eq!(probe_path(container.liveness_probe.as_ref()), "/healthz");
    // The TLS files the args name are in the mounted Secret volume.
    let mount = &container.volume_mounts.clone().unwrap()[0];
    assert!(args.contains(&format!("--tls-cert={}/tls.crt", mount.mount_path)));
    assert!(args.contains(&format!("--tls-key={}/tls.key", mount.mount_path)));
    assert_eq!(mount.read_only, Some(true));
    // The shutdown delay (--shutdown-delay-secs, 10 by default) and the drain
    // (--drain-timeout-secs, 20 by default) fit in the grace period.
    let flag = |name: &str, default: i64| {
        args.iter()
            .find_map(|a| a.strip_prefix(&format!("--{name}=")))
            .map_or(default, |v| v.parse().unwrap())
    };
    let stopping = flag("shutdown-delay-secs", 10) + flag("drain-timeout-secs", 20);
    assert!(
        pod.termination_grace_period_seconds.unwrap_or(30) > stopping,
        "grace {:?} <= {stopping}",
        pod.termination_grace_period_seconds
    );
}

/// A pod of the chart: non-root, read-only, no capabilities, seccomp, and resources with a
/// memory limit.
fn check_locked_down(pod: &k8s_openapi::api::core::v1::PodSpec) {
    let pod_security = pod.security_context.clone().unwrap();
    assert_eq!(pod_security.run_as_non_root, Some(true));
    assert_eq!(pod_security.run_as_user, Some(WEBHOOK_UID));
    assert_eq!(
        pod_security.seccomp_profile.unwrap().type_,
        "RuntimeDefault"
    );
    let container = &pod.containers[0];
    let security = container.security_context.clone().unwrap();
    assert_eq!(security.allow_privilege_escalation, Some(false));
    assert_eq!(security.read_only_root_filesystem, Some(true));
    assert_eq!(security.run_as_user, Some(WEBHOOK_UID));
    assert_eq!(security.capabilities.unwrap().drop.unwrap(), ["ALL"]);
    assert_eq!(security.seccomp_profile.unwrap().type_, "RuntimeDefault");
    let resources = container.resources.clone().unwrap();
    assert!(
        resources
            .requests
            .is_some_and(|r| r.contains_key("cpu") && r.contains_key("memory"))
    );
    assert!(resources.limits.is_some_and(|l| l.contains_key("memory")));
}

#[test]
fn the_controllers_are_replicated_and_locked_down() {
    for objects in [base(), chart("helm4", &[])] {
        let deployment: Deployment = typed(find(&objects, "Deployment", CONTROLLERS));
        let spec = deployment.spec;
        assert!(spec.replicas.unwrap_or(1) >= 2, "a warm standby");
        let labels = spec.selector.match_labels.clone().unwrap();
        // Admission's selector must not pick a controllers pod.
        let admission: Deployment = typed(find(&objects, "Deployment", "styrmin-webhook"));
        let admission_labels = admission.spec.selector.match_labels.unwrap();
        assert!(
            admission_labels
                .iter()
                .any(|(k, v)| labels.get(k).is_some_and(|ours| ours != v)),
            "{admission_labels:?} selects {labels:?}"
        );
        let pdb: PodDisruptionBudget = typed(find(&objects, "PodDisruptionBudget", CONTROLLERS));
        assert_eq!(
            pdb.spec.unwrap().selector.unwrap().match_labels.as_ref(),
            Some(&labels)
        );
        let pod = spec.template.spec.unwrap();
        check_locked_down(&pod);
        assert_eq!(pod.service_account_name.as_deref(), Some(CONTROLLERS));
        // They stop within the renew deadline (10 s) before SIGKILL.
        assert!(pod.termination_grace_period_seconds.unwrap_or(30) > 10);
        let container = &pod.containers[0];
        assert!(container.readiness_probe.is_some() && container.liveness_probe.is_some());
        assert!(
            container
                .ports
                .iter()
                .flatten()
                .all(|p| p.name.as_deref() == Some("metrics")),
            "no webhook port"
        );
    }
}

// ---- the Dockerfile (building it needs Docker: what can be checked without one) -----------

#[test]
fn the_dockerfile_copies_what_make_builds_and_runs_as_the_manifests_user() {
    let root = workspace_root();
    let dockerfile = std::fs::read_to_string(root.join("Dockerfile")).unwrap();
    let makefile = std::fs::read_to_string(root.join("Makefile")).unwrap();
    let toolchain = std::fs::read_to_string(root.join("rust-toolchain.toml")).unwrap();

    // `make build` builds every binary of the workspace in release mode...
    let build_recipe: Vec<&str> = makefile
        .lines()
        .skip_while(|l| !l.starts_with("build:"))
        .skip(1)
        .take_while(|l| l.starts_with('\t'))
        .collect();
    assert!(
        build_recipe
            .iter()
            .any(|l| l.contains("build --release") && l.contains("--bins")),
        "make build: {build_recipe:?}"
    );
    // ... which puts the webhook at target/release/styrmin-webhook; the image copies that path.
    release_binary("styrmin-webhook");
    assert!(
        dockerfile.contains("cargo build --release --locked --bin styrmin-webhook"),
        "the image builds the binary as `make build` does"
    );
    assert!(dockerfile.contains("target/release/styrmin-webhook"));
    // The same toolchain.
    let channel = toolchain
        .lines()
        .find_map(|l| l.strip_prefix("channel = "))
        .unwrap()
        .trim_matches('"');
    assert!(
        dockerfile.contains(&format!("rust:{channel}-")),
        "builder image is Rust {channel}"
    );
    // Multi-stage, distroless, non-root, the manifests' UID.
    assert_eq!(
        dockerfile
            .lines()
            .filter(|l| l.starts_with("FROM "))
            .count(),
        2
    );
    assert!(dockerfile.contains("FROM gcr.io/distroless/cc-debian12:nonroot"));
    let user = dockerfile
        .lines()
        .find_map(|l| l.strip_prefix("USER "))
        .unwrap()
        .trim();
    assert_eq!(user, format!("{WEBHOOK_UID}:{WEBHOOK_UID}"));
    let entrypoint = dockerfile
        .lines()
        .find_map(|l| l.strip_prefix("ENTRYPOINT "))
        .unwrap();
    let copied_to = dockerfile
        .lines()
        .find(|l| l.starts_with("COPY --from=build"))
        .and_then(|l| l.split_whitespace().last())
        .unwrap();
    assert_eq!(entrypoint, format!("[\"{copied_to}\"]"));
    let dockerignore = std::fs::read_to_string(root.join(".dockerignore")).unwrap();
    assert!(
        dockerignore
            .lines()
            .any(|l| l.trim() == "manifests/overlays/self-signed/certs/")
    );
}

/// Every number with no fraction written as an integer, as Go's YAML writer does.
fn whole_numbers_as_integers(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Number(number) => {
            if let Some(float) = number
                .as_f64()
                .filter(|f| f.fract() == 0.0 && !number.is_i64())
                && float.abs() < 9.0e15
            {
                // Whole and within i64: the cast is exact.
                #[allow(clippy::cast_possible_truncation)]
                let whole = float as i64;
                *value = serde_json::Value::from(whole);
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(whole_numbers_as_integers),
        serde_json::Value::Object(map) => map.values_mut().for_each(whole_numbers_as_integers),
        _ => {}
    }
}
