//! API discovery for Helm: `/version`, `/api`, `/apis` and the resource lists of a fixed
//! set of resource types, enough for `helm install --dry-run` and `helm template
//! --validate` to map every kind a chart renders.

use serde_json::{Value, json};

/// (group, version, plural, kind, namespaced) the fake API server serves.
const RESOURCES: &[(&str, &str, &str, &str, bool)] = &[
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

/// The discovery document at `path`, or `None` when `path` is not a discovery path.
pub(crate) fn answer(path: &str) -> Option<String> {
    let resources = |group: &str, version: &str| -> Vec<Value> {
        RESOURCES
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
            for (group, version, ..) in RESOURCES.iter().filter(|r| !r.0.is_empty()) {
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
        _ => return None,
    };
    Some(answer.to_string())
}
