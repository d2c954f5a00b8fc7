//! The objects the audit watches, trimmed to what it reads: each is a `kube::Resource` of
//! its own whose type holds only those fields (anything else in the API server's JSON is
//! skipped while reading), and the metadata it does not read is dropped before the
//! reflector stores it.
//!
//! An Ingress is stored smaller still: the watcher reads an [`IngressAsRead`] (a resource,
//! with the `resourceVersion` it resumes from) and the store keeps an [`AuditedIngress`], a
//! record of a few boxed strings with no `ObjectMeta` and no annotation map. At 100,000
//! Ingresses the difference is about a hundred megabytes.

use std::borrow::Cow;

use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::Deserialize;
use serde::de::IgnoredAny;
use styrmin_ingress_rules::{CLASS_ANNOTATION, ClassFields};

use crate::ingress_controllers::is_controller_annotation;

/// The label of Styrmin's service aliases (product page, "Service aliases").
pub const SERVICE_ALIAS_LABEL: &str = "styrmin.io/service-alias";
/// The label selector of the alias watch.
pub const SERVICE_ALIAS_SELECTOR: &str = "styrmin.io/service-alias=true";

/// An Ingress (`networking.k8s.io/v1`) as the audit keeps it: name, namespace, uid, creation
/// time, the two class fields, whether it has an address, the hosts of its rules and the
/// keys (not the values) of the annotations a known controller reads.
///
/// Not a `kube::Resource`: it has no `ObjectMeta` (about 350 bytes, empty) and no annotation
/// map (a B-tree node of about 540 bytes for the one class annotation). The reflector stores
/// it through [`Lookup`](kube::runtime::reflector::Lookup), keyed by namespace and name only.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(from = "SlimIngress")]
pub struct AuditedIngress {
    pub namespace: Box<str>,
    pub name: Box<str>,
    /// `metadata.uid` (a PolicyReport is owned by its object).
    pub uid: Option<Box<str>>,
    /// Unix seconds of `metadata.creationTimestamp`.
    pub created: Option<i64>,
    pub ingress_class_name: Option<Box<str>>,
    /// The `kubernetes.io/ingress.class` annotation.
    pub class_annotation: Option<Box<str>>,
    /// Whether a controller has written an address into `status.loadBalancer.ingress`.
    pub has_address: bool,
    /// The hosts of its rules, each once, at most [`MAX_HOSTS`]: `plan` judges the
    /// annotations whose effect spans a host across the Ingresses of that host.
    pub hosts: Box<[Box<str>]>,
    /// The keys of its annotations that a controller of
    /// [`crate::ingress_controllers::KNOWN_CONTROLLERS`] reads, sorted; what `plan` says a
    /// move to another controller leaves behind.
    pub controller_annotations: Box<[Box<str>]>,
    /// How many more such keys it has beyond the first [`MAX_CONTROLLER_ANNOTATIONS`].
    pub controller_annotations_left_out: usize,
}

/// An Ingress as the watcher and the command line's lists read it: a resource, whose
/// metadata holds name, namespace, uid, creation time and the `resourceVersion` the watcher
/// resumes from. Each becomes an [`AuditedIngress`] as it arrives; none is stored.
/// The metadata is read field by field ([`SlimMetadata`]): managed fields, labels and the
/// other annotations are skipped while reading, never built.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Resource)]
#[serde(from = "SlimIngress")]
#[resource(inherit = "Ingress")]
pub struct IngressAsRead {
    pub metadata: ObjectMeta,
    /// The rest of what is kept (its name, namespace, uid and time are the metadata's).
    pub audited: AuditedIngress,
}

impl From<IngressAsRead> for AuditedIngress {
    fn from(read: IngressAsRead) -> Self {
        read.audited
    }
}

/// The most controller annotation keys kept of one Ingress. Whoever may write an Ingress
/// may give it annotations up to the API server's 256 KiB; the webhook keeps every Ingress of
/// the cluster, so without a bound one tenant's Ingresses could take its memory. 32 keys of
/// at most 317 bytes (a 253-byte prefix and a 63-byte name) are under 10 KiB.
pub const MAX_CONTROLLER_ANNOTATIONS: usize = 32;

/// An Ingress as read, before its metadata is split.
#[derive(Deserialize)]
struct SlimIngress {
    metadata: SlimMetadata,
    #[serde(default)]
    spec: SlimSpec,
    #[serde(default)]
    status: SlimStatus,
}

impl From<SlimIngress> for IngressAsRead {
    fn from(read: SlimIngress) -> Self {
        let slim = read.metadata;
        let SlimAnnotations {
            class,
            mut controller_keys,
            left_out,
        } = slim.annotations.unwrap_or_default();
        controller_keys.sort();
        let boxed = |text: &Option<String>| text.as_deref().map(Box::from);
        let audited = AuditedIngress {
            namespace: boxed(&slim.namespace).unwrap_or_default(),
            name: boxed(&slim.name).unwrap_or_default(),
            uid: boxed(&slim.uid),
            created: slim.creation_timestamp.as_ref().map(|t| t.0.as_second()),
            ingress_class_name: read.spec.ingress_class_name.map(String::into_boxed_str),
            class_annotation: class.map(String::into_boxed_str),
            has_address: read
                .status
                .load_balancer
                .and_then(|lb| lb.ingress)
                .is_some_and(|addresses| !addresses.is_empty()),
            hosts: read.spec.hosts,
            controller_annotations: controller_keys.into_boxed_slice(),
            controller_annotations_left_out: left_out,
        };
        IngressAsRead {
            metadata: ObjectMeta {
                name: slim.name,
                namespace: slim.namespace,
                resource_version: slim.resource_version,
                uid: slim.uid,
                creation_timestamp: slim.creation_timestamp,
                ..ObjectMeta::default()
            },
            audited,
        }
    }
}

impl From<SlimIngress> for AuditedIngress {
    fn from(read: SlimIngress) -> Self {
        IngressAsRead::from(read).audited
    }
}

/// `spec` as read: the class name and the hosts of the rules.
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SlimSpec {
    #[serde(default)]
    ingress_class_name: Option<String>,
    #[serde(default, rename = "rules", deserialize_with = "rule_hosts")]
    hosts: Box<[Box<str>]>,
}

/// The most hosts kept of one Ingress (a host-wide annotation is judged on these). An
/// Ingress may have thousands of rules; 16 hosts of at most 253 bytes are 4 KiB.
pub const MAX_HOSTS: usize = 16;

/// `spec.rules[].host`, each once, the first [`MAX_HOSTS`]; the rest of each rule skipped.
fn rule_hosts<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Box<[Box<str>]>, D::Error> {
    #[derive(Deserialize)]
    struct Rule {
        #[serde(default)]
        host: Option<String>,
    }
    struct Hosts;
    impl<'de> serde::de::Visitor<'de> for Hosts {
        type Value = Box<[Box<str>]>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a list of rules")
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(Box::default())
        }
        fn visit_none<E>(self) -> Result<Self::Value, E> {
            Ok(Box::default())
        }
        fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_seq(self)
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            let mut hosts: Vec<Box<str>> = Vec::new();
            while let Some(rule) = seq.next_element::<Rule>()? {
                if let Some(host) = rule.host
                    && hosts.len() < MAX_HOSTS
                    && !hosts.iter().any(|h| **h == *host)
                {
                    hosts.push(host.into_boxed_str());
                }
            }
            Ok(hosts.into_boxed_slice())
        }
    }
    deserializer.deserialize_option(Hosts)
}

/// What the audit and the watcher read of an Ingress's metadata (the watcher resumes from
/// `resourceVersion`).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SlimMetadata {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    resource_version: Option<String>,
    /// For the PolicyReport's owner reference and scope.
    #[serde(default)]
    uid: Option<String>,
    #[serde(default)]
    creation_timestamp: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    #[serde(default, deserialize_with = "slim_annotations")]
    annotations: Option<SlimAnnotations>,
}

/// What is kept of the annotations: the class annotation's value, and the keys a known
/// controller reads.
#[derive(Default)]
struct SlimAnnotations {
    class: Option<String>,
    controller_keys: Vec<Box<str>>,
    /// Controller keys beyond [`MAX_CONTROLLER_ANNOTATIONS`], counted only.
    left_out: usize,
}

/// The annotations map, read without building it.
fn slim_annotations<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<SlimAnnotations>, D::Error> {
    struct ClassOnly;
    impl<'de> serde::de::Visitor<'de> for ClassOnly {
        type Value = Option<SlimAnnotations>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a map of annotations")
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_none<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_map(self)
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut map: A,
        ) -> Result<Self::Value, A::Error> {
            let mut kept = SlimAnnotations::default();
            while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                if key == CLASS_ANNOTATION {
                    kept.class = Some(map.next_value::<String>()?);
                } else {
                    if is_controller_annotation(&key) {
                        if kept.controller_keys.len() < MAX_CONTROLLER_ANNOTATIONS {
                            kept.controller_keys.push(Box::from(key.as_ref()));
                        } else {
                            kept.left_out += 1;
                        }
                    }
                    map.next_value::<IgnoredAny>()?;
                }
            }
            Ok(Some(kept))
        }
    }
    deserializer.deserialize_option(ClassOnly)
}

/// `status.loadBalancer.ingress`, counted: a controller that serves the Ingress writes its
/// address there.
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SlimStatus {
    #[serde(default)]
    load_balancer: Option<LoadBalancer>,
}

#[derive(Default, Deserialize)]
struct LoadBalancer {
    #[serde(default)]
    ingress: Option<Vec<Address>>,
}

/// One address; what it says does not matter, only that there is one.
struct Address;

impl<'de> Deserialize<'de> for Address {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        IgnoredAny::deserialize(deserializer).map(|_| Address)
    }
}

impl AuditedIngress {
    /// The two class fields, as admission reads them from the object it is sent.
    pub fn class_fields(&self) -> ClassFields {
        ClassFields {
            ingress_class_name: self.ingress_class_name.as_deref().map(str::to_owned),
            class_annotation: self.class_annotation.as_deref().map(str::to_owned),
        }
    }

    /// Gives it `fields` (what a move writes).
    pub fn set_class_fields(&mut self, fields: &ClassFields) {
        self.ingress_class_name = fields.ingress_class_name.as_deref().map(Box::from);
        self.class_annotation = fields.class_annotation.as_deref().map(Box::from);
    }

    /// Whether a controller has written an address into its status.
    pub fn has_address(&self) -> bool {
        self.has_address
    }

    /// Unix seconds of `metadata.creationTimestamp`.
    pub fn created(&self) -> Option<i64> {
        self.created
    }

    /// The hosts of its rules (at most [`MAX_HOSTS`]).
    pub fn hosts(&self) -> impl Iterator<Item = &str> {
        self.hosts.iter().map(AsRef::as_ref)
    }

    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// `metadata.uid` (a PolicyReport is owned by its object).
    pub fn uid(&self) -> Option<&str> {
        self.uid.as_deref()
    }

    /// What a finding on its controller annotations adds about the keys not kept (beyond
    /// [`MAX_CONTROLLER_ANNOTATIONS`]); empty when all were kept.
    pub fn controller_annotations_note(&self) -> String {
        match self.controller_annotations_left_out {
            0 => String::new(),
            more => format!(
                " (and {more} more controller annotations, not read: only the first \
                 {MAX_CONTROLLER_ANNOTATIONS} are kept)"
            ),
        }
    }
}

/// The reflector stores an [`AuditedIngress`] by namespace and name. Its key carries no
/// resource version and no uid: nothing reads them from the key (the store is looked up by
/// name, and a report's owner uid is the record's own), and the watcher resumes from the
/// [`IngressAsRead`] it read, never from the store.
impl kube::runtime::reflector::Lookup for AuditedIngress {
    type DynamicType = ();

    fn kind(dyntype: &()) -> Cow<'_, str> {
        <Ingress as Resource>::kind(dyntype)
    }

    fn group(dyntype: &()) -> Cow<'_, str> {
        <Ingress as Resource>::group(dyntype)
    }

    fn version(dyntype: &()) -> Cow<'_, str> {
        <Ingress as Resource>::version(dyntype)
    }

    fn plural(dyntype: &()) -> Cow<'_, str> {
        <Ingress as Resource>::plural(dyntype)
    }

    fn name(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Borrowed(&self.name))
    }

    fn namespace(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Borrowed(&self.namespace))
    }

    fn resource_version(&self) -> Option<Cow<'_, str>> {
        None
    }

    fn uid(&self) -> Option<Cow<'_, str>> {
        None
    }
}

/// A Service with the alias label: name, namespace and `spec.externalName`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Resource)]
#[resource(inherit = "Service")]
pub struct AliasService {
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: AliasServiceSpec,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AliasServiceSpec {
    #[serde(default)]
    pub external_name: Option<String>,
}

impl AliasService {
    /// The namespace the alias points into: the second label of
    /// `<service>.<namespace>.svc.cluster.local`, as the product page's loop reads it.
    pub fn target_namespace(&self) -> Option<&str> {
        self.spec
            .external_name
            .as_deref()?
            .split('.')
            .nth(1)
            .filter(|ns| !ns.is_empty())
    }

    /// Keeps name, namespace, uid and resource version of the metadata.
    pub fn trim(&mut self) {
        let meta = std::mem::take(&mut self.metadata);
        self.metadata = ObjectMeta {
            name: meta.name,
            namespace: meta.namespace,
            uid: meta.uid,
            resource_version: meta.resource_version,
            ..ObjectMeta::default()
        };
    }
}

/// The annotation that makes an IngressClass the cluster's default (Ingresses without a
/// class get it).
pub const DEFAULT_CLASS_ANNOTATION: &str = "ingressclass.kubernetes.io/is-default-class";

/// Keeps of an IngressClass what the audit reads: its name, the default-class annotation and
/// the controller that serves it.
pub fn trim_ingress_class(class: &mut IngressClass) {
    let name = class.metadata.name.take();
    let annotations = class.metadata.annotations.take().map(|mut all| {
        all.retain(|key, _| key == DEFAULT_CLASS_ANNOTATION);
        all
    });
    class.metadata = ObjectMeta {
        name,
        annotations: annotations.filter(|kept| !kept.is_empty()),
        ..ObjectMeta::default()
    };
    if let Some(spec) = class.spec.as_mut() {
        spec.parameters = None;
    }
}

/// A Namespace, by name only (a `Terminating` one still exists).
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Resource)]
#[resource(inherit = "Namespace")]
pub struct NamespaceName {
    pub metadata: ObjectMeta,
}

impl NamespaceName {
    /// Keeps the name.
    pub fn trim(&mut self) {
        let name = self.metadata.name.take();
        self.metadata = ObjectMeta {
            name,
            ..ObjectMeta::default()
        };
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn each_trimmed_type_is_read_where_its_full_type_is() {
        assert_eq!(
            IngressAsRead::url_path(&(), None),
            "/apis/networking.k8s.io/v1/ingresses"
        );
        assert_eq!(IngressAsRead::kind(&()), "Ingress");
        assert_eq!(
            (
                <AuditedIngress as kube::runtime::reflector::Lookup>::group(&()),
                <AuditedIngress as kube::runtime::reflector::Lookup>::version(&()),
                <AuditedIngress as kube::runtime::reflector::Lookup>::plural(&())
            ),
            ("networking.k8s.io".into(), "v1".into(), "ingresses".into())
        );
        assert_eq!(
            AliasService::url_path(&(), Some("styrmin-web1")),
            "/api/v1/namespaces/styrmin-web1/services"
        );
        assert_eq!(AliasService::kind(&()), "Service");
        assert_eq!(NamespaceName::url_path(&(), None), "/api/v1/namespaces");
        assert_eq!(NamespaceName::kind(&()), "Namespace");
    }

    #[test]
    fn an_ingress_keeps_only_what_the_rules_read() {
        let read: IngressAsRead = serde_json::from_value(json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {
                "name": "web", "namespace": "styrmin-web1", "resourceVersion": "7",
                "uid": "0b7c", "creationTimestamp": "2026-12-03T08:00:00Z",
                "labels": {"app": "web"},
                "annotations": {
                    "kubernetes.io/ingress.class": "nginx",
                    "nginx.ingress.kubernetes.io/ssl-redirect": "true",
                    "kubectl.kubernetes.io/last-applied-configuration": "{...}",
                    "alb.ingress.kubernetes.io/scheme": "internal"
                },
                "managedFields": [{"manager": "kubectl"}]
            },
            "spec": {"ingressClassName": "haproxy", "rules": [{"host": "a.example.com"}]},
            "status": {"loadBalancer": {"ingress": [{"ip": "10.0.0.1"}]}}
        }))
        .unwrap();
        // Read slim: the watcher's resourceVersion kept, the rest never built.
        assert_eq!(read.metadata.resource_version.as_deref(), Some("7"));
        assert!(read.metadata.managed_fields.is_none());
        assert!(read.metadata.labels.is_none());
        assert!(read.metadata.annotations.is_none());
        let ingress = AuditedIngress::from(read);
        assert_eq!(
            ingress.class_fields(),
            ClassFields {
                ingress_class_name: Some("haproxy".into()),
                class_annotation: Some("nginx".into())
            }
        );
        assert!(ingress.has_address());
        assert_eq!(
            (ingress.namespace(), ingress.name()),
            ("styrmin-web1", "web")
        );
        assert_eq!(ingress.uid(), Some("0b7c"), "the report's owner");
        assert_eq!(ingress.created(), Some(1_796_284_800));
        assert_eq!(ingress.hosts().collect::<Vec<_>>(), ["a.example.com"]);
        // The keys a known controller reads, sorted, without their values.
        assert_eq!(
            ingress.controller_annotations.as_ref(),
            [
                Box::from("alb.ingress.kubernetes.io/scheme"),
                Box::from("nginx.ingress.kubernetes.io/ssl-redirect")
            ]
        );
        // Stored by namespace and name; the key holds nothing else.
        let key = kube::runtime::reflector::Lookup::to_object_ref(&ingress, ());
        assert_eq!(
            (key.namespace.as_deref(), key.name.as_str()),
            (Some("styrmin-web1"), "web")
        );
        assert_eq!((key.extra.resource_version, key.extra.uid), (None, None));

        let bare: AuditedIngress = serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "styrmin-web1"},
            "status": {"loadBalancer": {}}
        }))
        .unwrap();
        assert!(!bare.has_address());
        assert_eq!(bare.class_fields(), ClassFields::default());
    }

    /// The store holds one of these per Ingress of the cluster: an `ObjectMeta` or a map
    /// back in it costs hundreds of bytes each, tens of megabytes at 100,000 Ingresses.
    #[test]
    fn a_stored_ingress_is_a_small_record() {
        assert!(
            std::mem::size_of::<AuditedIngress>() <= 160,
            "{} bytes",
            std::mem::size_of::<AuditedIngress>()
        );
        assert!(
            std::mem::size_of::<ObjectMeta>() > 160,
            "the bound above means something"
        );
    }

    #[test]
    fn an_ingress_full_of_controller_annotations_keeps_a_bounded_few() {
        let annotations: serde_json::Map<String, serde_json::Value> = (0..5_000)
            .map(|n| (format!("nginx.ingress.kubernetes.io/x{n:05}"), json!("v")))
            .collect();
        let ingress: AuditedIngress = serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "styrmin-web1", "annotations": annotations}
        }))
        .unwrap();
        assert_eq!(
            ingress.controller_annotations.len(),
            MAX_CONTROLLER_ANNOTATIONS
        );
        assert_eq!(
            ingress.controller_annotations_left_out,
            5_000 - MAX_CONTROLLER_ANNOTATIONS
        );
        assert_eq!(
            &*ingress.controller_annotations[0],
            "nginx.ingress.kubernetes.io/x00000"
        );
    }

    #[test]
    fn an_alias_points_into_the_second_label() {
        let alias: AliasService = serde_json::from_value(json!({
            "metadata": {"name": "db", "namespace": "styrmin-web1"},
            "spec": {"type": "ExternalName", "externalName": "db.styrmin-gone.svc.cluster.local"}
        }))
        .unwrap();
        assert_eq!(alias.target_namespace(), Some("styrmin-gone"));
        let odd: AliasService = serde_json::from_value(
            json!({"metadata": {"name": "x"}, "spec": {"externalName": "x"}}),
        )
        .unwrap();
        assert_eq!(odd.target_namespace(), None);
    }
}
