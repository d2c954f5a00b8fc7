//! What one class's controller wants an Ingress's status to be: pure functions of the
//! Ingress as last seen, so that every write can be tested without an API server.

use std::fmt;

use k8s_openapi::api::networking::v1::{Ingress, IngressLoadBalancerIngress};
use serde_json::{Value, json};

/// The legacy annotation that names the class when `spec.ingressClassName` does not.
pub const CLASS_ANNOTATION: &str = "kubernetes.io/ingress.class";

/// An Ingress's namespace and name, `namespace/name` when printed.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct IngressKey {
    pub namespace: String,
    pub name: String,
}

impl fmt::Display for IngressKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// What a controller reads of an Ingress: its class, the hosts it routes, and the addresses
/// in its status. The rest of the object is dropped, so that 10,000 Ingresses stay small.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct IngressSummary {
    /// The version read, sent back with a write so that a write based on an old read fails.
    pub resource_version: Option<String>,
    pub class: Option<String>,
    /// The rules' hosts, lower case, as written (`*.example.com` included).
    pub hosts: Vec<String>,
    /// Whether it routes every host: a rule without a host, or a default backend.
    pub catch_all: bool,
    /// `status.loadBalancer.ingress`, absent read as empty.
    pub addresses: Vec<IngressLoadBalancerIngress>,
}

/// The class of an Ingress: `spec.ingressClassName`, or else the annotation.
pub fn class_of(ingress: &Ingress) -> Option<&str> {
    let from_spec = ingress
        .spec
        .as_ref()
        .and_then(|spec| spec.ingress_class_name.as_deref())
        .filter(|class| !class.is_empty());
    from_spec.or_else(|| {
        ingress
            .metadata
            .annotations
            .as_ref()
            .and_then(|annotations| annotations.get(CLASS_ANNOTATION))
            .map(String::as_str)
    })
}

/// The key of an Ingress; `None` for one without a name (never sent by an API server).
pub fn key_of(ingress: &Ingress) -> Option<IngressKey> {
    Some(IngressKey {
        namespace: ingress.metadata.namespace.clone().unwrap_or_default(),
        name: ingress.metadata.name.clone()?,
    })
}

/// What a controller keeps of `ingress`.
pub fn summarize(ingress: &Ingress) -> IngressSummary {
    let spec = ingress.spec.as_ref();
    let rules = spec
        .and_then(|spec| spec.rules.as_deref())
        .unwrap_or_default();
    let hosts = rules
        .iter()
        .filter_map(|rule| rule.host.as_deref())
        .filter(|host| !host.is_empty())
        .map(str::to_ascii_lowercase)
        .collect();
    let catch_all = spec.is_some_and(|spec| spec.default_backend.is_some())
        || rules
            .iter()
            .any(|rule| rule.host.as_deref().is_none_or(str::is_empty));
    let addresses = ingress
        .status
        .as_ref()
        .and_then(|status| status.load_balancer.as_ref())
        .and_then(|load_balancer| load_balancer.ingress.clone())
        .unwrap_or_default();
    IngressSummary {
        resource_version: ingress.metadata.resource_version.clone(),
        class: class_of(ingress).map(str::to_owned),
        hosts,
        catch_all,
        addresses,
    }
}

/// The merge patch of the status subresource that the controller of `class`, serving at
/// `ip`, must send for `ingress`; `None` when the status is already as it wants.
///
/// An Ingress of `class` gets exactly `[{ip}]`, as a controller publishes its own address.
/// Any other Ingress loses the entries with `ip` and keeps the rest: a controller that does
/// not serve an Ingress takes its address away, and only its own.
///
/// The patch carries the version read: a merge patch replaces the whole list, so one based
/// on an old read would drop what another controller wrote since. The API server refuses it
/// (409), and the newer version comes with the watch.
pub fn status_patch(ingress: &IngressSummary, class: &str, ip: &str) -> Option<Value> {
    let is_ip = |entry: &IngressLoadBalancerIngress| entry.ip.as_deref() == Some(ip);
    let list = if ingress.class.as_deref() == Some(class) {
        let only_ours = match ingress.addresses.as_slice() {
            [entry] => is_ip(entry) && entry.hostname.is_none() && entry.ports.is_none(),
            _ => false,
        };
        if only_ours {
            return None;
        }
        json!([{"ip": ip}])
    } else {
        if !ingress.addresses.iter().any(is_ip) {
            return None;
        }
        let kept: Vec<&IngressLoadBalancerIngress> = ingress
            .addresses
            .iter()
            .filter(|entry| !is_ip(entry))
            .collect();
        // `null` removes the field: an empty list is not stored either, so the next read
        // matches.
        if kept.is_empty() {
            Value::Null
        } else {
            json!(kept)
        }
    };
    let mut patch = json!({"status": {"loadBalancer": {"ingress": list}}});
    if let Some(version) = &ingress.resource_version {
        patch["metadata"] = json!({"resourceVersion": version});
    }
    Some(patch)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

    use super::*;

    fn ingress(value: Value) -> Ingress {
        serde_json::from_value(value).unwrap()
    }

    fn summary(class: Option<&str>, ips: &[&str]) -> IngressSummary {
        IngressSummary {
            class: class.map(str::to_owned),
            addresses: ips
                .iter()
                .map(|ip| IngressLoadBalancerIngress {
                    ip: Some((*ip).to_owned()),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn the_spec_names_the_class_before_the_annotation() {
        let both = ingress(json!({
            "metadata": {"name": "a", "annotations": {CLASS_ANNOTATION: "old"}},
            "spec": {"ingressClassName": "new"}
        }));
        assert_eq!(class_of(&both), Some("new"));
        let annotation = ingress(json!({
            "metadata": {"name": "a", "annotations": {CLASS_ANNOTATION: "old"}},
            "spec": {}
        }));
        assert_eq!(class_of(&annotation), Some("old"));
        let empty_spec = ingress(json!({
            "metadata": {"name": "a", "annotations": {CLASS_ANNOTATION: "old"}},
            "spec": {"ingressClassName": ""}
        }));
        assert_eq!(class_of(&empty_spec), Some("old"));
        assert_eq!(class_of(&ingress(json!({"metadata": {"name": "a"}}))), None);
    }

    #[test]
    fn a_summary_holds_hosts_catch_all_and_addresses() {
        let read = summarize(&ingress(json!({
            "metadata": {"name": "a", "namespace": "n", "resourceVersion": "7"},
            "spec": {"ingressClassName": "x", "rules": [{"host": "A.example.com"}, {"host": "b.example.com"}]},
            "status": {"loadBalancer": {"ingress": [{"ip": "127.0.0.11"}]}}
        })));
        assert_eq!(read.class.as_deref(), Some("x"));
        assert_eq!(read.resource_version.as_deref(), Some("7"));
        assert_eq!(read.hosts, ["a.example.com", "b.example.com"]);
        assert!(!read.catch_all);
        assert_eq!(read.addresses.len(), 1);
        let hostless = summarize(&ingress(json!({
            "metadata": {"name": "a"}, "spec": {"rules": [{"http": {"paths": []}}]}
        })));
        assert!(hostless.catch_all);
        let default_backend = summarize(&ingress(json!({
            "metadata": {"name": "a"},
            "spec": {"defaultBackend": {"service": {"name": "s", "port": {"number": 80}}}}
        })));
        assert!(default_backend.catch_all);
        assert!(!summarize(&ingress(json!({"metadata": {"name": "a"}}))).catch_all);
    }

    #[test]
    fn an_ingress_of_the_class_gets_exactly_its_address() {
        let set = Some(json!({"status": {"loadBalancer": {"ingress": [{"ip": "127.0.0.11"}]}}}));
        assert_eq!(
            status_patch(&summary(Some("a"), &[]), "a", "127.0.0.11"),
            set
        );
        assert_eq!(
            status_patch(&summary(Some("a"), &["127.0.0.12"]), "a", "127.0.0.11"),
            set
        );
        assert_eq!(
            status_patch(
                &summary(Some("a"), &["127.0.0.11", "127.0.0.12"]),
                "a",
                "127.0.0.11"
            ),
            set
        );
        assert_eq!(
            status_patch(&summary(Some("a"), &["127.0.0.11"]), "a", "127.0.0.11"),
            None
        );
        let mut with_port = summary(Some("a"), &["127.0.0.11"]);
        with_port.addresses[0].ports = Some(Vec::new());
        assert_eq!(status_patch(&with_port, "a", "127.0.0.11"), set);
    }

    #[test]
    fn a_write_carries_the_version_read() {
        let mut read = summary(Some("b"), &["127.0.0.11"]);
        read.resource_version = Some("42".to_owned());
        assert_eq!(
            status_patch(&read, "a", "127.0.0.11"),
            Some(json!({"metadata": {"resourceVersion": "42"},
                        "status": {"loadBalancer": {"ingress": null}}}))
        );
        read.class = Some("a".to_owned());
        assert_eq!(status_patch(&read, "a", "127.0.0.11"), None);
        read.addresses.clear();
        assert_eq!(
            status_patch(&read, "a", "127.0.0.11"),
            Some(json!({"metadata": {"resourceVersion": "42"},
                        "status": {"loadBalancer": {"ingress": [{"ip": "127.0.0.11"}]}}}))
        );
    }

    #[test]
    fn an_ingress_of_another_class_loses_only_this_address() {
        assert_eq!(
            status_patch(&summary(Some("b"), &[]), "a", "127.0.0.11"),
            None
        );
        assert_eq!(
            status_patch(&summary(None, &["127.0.0.12"]), "a", "127.0.0.11"),
            None
        );
        assert_eq!(
            status_patch(&summary(Some("b"), &["127.0.0.11"]), "a", "127.0.0.11"),
            Some(json!({"status": {"loadBalancer": {"ingress": null}}}))
        );
        assert_eq!(
            status_patch(
                &summary(None, &["127.0.0.12", "127.0.0.11"]),
                "a",
                "127.0.0.11"
            ),
            Some(json!({"status": {"loadBalancer": {"ingress": [{"ip": "127.0.0.12"}]}}}))
        );
    }
}
