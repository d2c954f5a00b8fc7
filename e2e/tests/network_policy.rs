//! `manifests/components/network-policy` with the real `kubectl kustomize` (`make tools`): the
//! component builds onto the base into a NetworkPolicy that the Kubernetes types accept (no
//! field lost), admits the webhook port from anywhere and the metrics port only from the
//! monitoring namespace named in one place; and the Deployment's grace period holds the
//! webhook's shutdown delay and drain.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::process::Command;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::Value;
use styrmin_e2e::{Scratch, copy_dir, run_ok, split_documents, tool, utf8, workspace_root};

/// The base with the component, built in a copy of `manifests/` whose monitoring namespace
/// was edited where the component's comment says.
fn build_with_component(monitoring_namespace: &str) -> Vec<Value> {
    let scratch = Scratch::new("network-policy");
    let manifests = scratch.join("manifests");
    copy_dir(&workspace_root().join("manifests"), &manifests);
    let component = manifests.join("components/network-policy/kustomization.yaml");
    let text = std::fs::read_to_string(&component).unwrap();
    assert_eq!(text.matches("MONITORING_NAMESPACE=monitoring").count(), 1);
    std::fs::write(
        &component,
        text.replace(
            "MONITORING_NAMESPACE=monitoring",
            &format!("MONITORING_NAMESPACE={monitoring_namespace}"),
        ),
    )
    .unwrap();
    let overlay = manifests.join("overlays/with-network-policy");
    std::fs::create_dir_all(&overlay).unwrap();
    std::fs::write(
        overlay.join("kustomization.yaml"),
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\
         resources:\n  - ../../base\ncomponents:\n  - ../../components/network-policy\n",
    )
    .unwrap();
    let output = run_ok(
        Command::new(tool("kubectl")).arg("kustomize").arg(&overlay),
        None,
    );
    split_documents(&utf8(output.stdout, "kubectl kustomize output"))
        .iter()
        .map(|doc| doc.value())
        .collect()
}

fn find<'a>(objects: &'a [Value], kind: &str) -> &'a Value {
    // Admission's, by name: the controllers have a Deployment (and no NetworkPolicy) too.
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == "styrmin-webhook")
        .unwrap_or_else(|| panic!("no {kind} styrmin-webhook"))
}

/// Parsed as its Kubernetes type, and written back unchanged: no field was unknown.
fn typed<T: serde::de::DeserializeOwned + serde::Serialize>(object: &Value) -> T {
    let typed: T = serde_json::from_value(object.clone()).unwrap();
    assert_eq!(
        &serde_json::to_value(&typed).unwrap(),
        object,
        "a field is unknown"
    );
    typed
}

#[test]
fn the_component_admits_the_webhook_port_and_metrics_only_from_monitoring() {
    let objects = build_with_component("observability");
    // The settings ConfigMap is the build's, not the cluster's.
    assert!(!objects.iter().any(|o| o["kind"] == "ConfigMap"));
    let policy: NetworkPolicy = typed(find(&objects, "NetworkPolicy"));
    let deployment: Deployment =
        serde_json::from_value(find(&objects, "Deployment").clone()).unwrap();
    let pod = deployment.spec.template;
    assert_eq!(
        policy.metadata.namespace, deployment.metadata.namespace,
        "the policy is in the webhook's namespace"
    );
    let spec = policy.spec.unwrap();
    // It selects the webhook's pods.
    let pod_labels = pod.metadata.unwrap().labels.unwrap();
    for (key, value) in spec.pod_selector.unwrap().match_labels.unwrap() {
        assert_eq!(pod_labels.get(&key), Some(&value));
    }
    assert_eq!(spec.policy_types, Some(vec!["Ingress".to_owned()]));
    let rules = spec.ingress.unwrap();
    assert_eq!(rules.len(), 2);
    let port_of = |rule: &k8s_openapi::api::networking::v1::NetworkPolicyIngressRule| {
        let ports = rule.ports.clone().unwrap();
        assert_eq!(ports.len(), 1);
        ports[0].port.clone().unwrap()
    };
    // The container's ports are the ones the rules name.
    let container_ports: Vec<i32> = pod.spec.unwrap().containers[0]
        .ports
        .clone()
        .unwrap()
        .iter()
        .map(|p| p.container_port)
        .collect();
    assert_eq!(container_ports, vec![8443, 9090]);
    // 8443 from anywhere: no `from`.
    let webhook = rules
        .iter()
        .find(|r| port_of(r) == IntOrString::Int(8443))
        .unwrap();
    assert!(webhook.from.is_none());
    // 9090 only from the namespace named in the component.
    let metrics = rules
        .iter()
        .find(|r| port_of(r) == IntOrString::Int(9090))
        .unwrap();
    let from = metrics.from.clone().unwrap();
    assert_eq!(from.len(), 1);
    assert!(from[0].pod_selector.is_none() && from[0].ip_block.is_none());
    let namespaces = from[0]
        .namespace_selector
        .clone()
        .unwrap()
        .match_labels
        .unwrap();
    assert_eq!(
        namespaces.into_iter().collect::<Vec<_>>(),
        vec![(
            "kubernetes.io/metadata.name".to_owned(),
            "observability".to_owned()
        )]
    );
}

#[test]
fn the_grace_period_holds_the_shutdown_delay_and_the_drain() {
    let objects = build_with_component("monitoring");
    let deployment: Deployment =
        serde_json::from_value(find(&objects, "Deployment").clone()).unwrap();
    let pod = deployment.spec.template.spec.unwrap();
    let args = pod.containers[0].args.clone().unwrap();
    let flag = |name: &str, default: i64| {
        args.iter()
            .find_map(|a| a.strip_prefix(&format!("--{name}=")))
            .map_or(default, |v| v.parse().unwrap())
    };
    // The webhook's defaults unless the args set them (webhook/src/cli/serve.rs).
    let delay = flag("shutdown-delay-secs", 10);
    let drain = flag("drain-timeout-secs", 20);
    let grace = pod.termination_grace_period_seconds.unwrap();
    assert!(
        grace >= delay + drain + 5,
        "grace {grace} s for delay {delay} s + drain {drain} s"
    );
    // No exec preStop (the image has no shell or sleep); the delay is the webhook's own.
    assert!(pod.containers[0].lifecycle.is_none());
}
