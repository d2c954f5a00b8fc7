//! The custom resources the webhook watches in a cluster (rule W3), group `styrmin.io`,
//! version `v1alpha1`:
//!
//! - [`StyrminCluster`], cluster-scoped, one named `default`: the cluster level;
//! - [`StyrminEnvironment`], cluster-scoped, named by environment id: an environment level;
//! - [`StyrminMigration`], cluster-scoped: a change of the levels carried out step by step
//!   ([`migration`]);
//! - [`StyrminDeployment`], namespaced, `styrmin-<id>` in namespace `styrmin-<id>`: a
//!   deployment's environment, role, level, phase and last-deployed record (W5), which the
//!   view reads as the resolved [`styrmin_ingress_rules::IngressTarget`].
//!
//! `ingressClass` and `dedicatedIngress` keep the four states of docs/rules.md §1 through the
//! API server: both are `nullable` in the schema (so an explicit `null` is stored, not
//! pruned), and a `dedicatedIngress` object keeps whatever keys it has
//! (`x-kubernetes-preserve-unknown-fields`).
//! In Rust they are the rule crate's [`Setting`]: a left-out key is `Absent`, `null` is `Null`.
//!
//! The CRD manifests in `charts/styrmin-webhook/files/crds/` are generated from these types:
//! `cargo run -p styrmin-webhook --example crdgen -- charts/styrmin-webhook/files/crds` (a test compares them).

pub mod migration;

pub use migration::StyrminMigration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResource;
use kube::CustomResourceExt;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;
use styrmin_ingress_rules::{EnforcementMode, Setting};

/// The API group of Styrmin's resources.
pub const GROUP: &str = "styrmin.io";
/// Their version.
pub const VERSION: &str = "v1alpha1";
/// The name of the one StyrminCluster that counts.
pub const CLUSTER_NAME: &str = "default";

/// A cluster-scoped level's resource: its spec `$spec` holds `ingressClass`,
/// `dedicatedIngress` and `enforcementMode`, shown as three columns; `$transform` says what
/// a left-out or `null` key means at that level.
macro_rules! level_resource {
    (
        $(#[$meta:meta])*
        $spec:ident, kind = $kind:literal, doc = $doc:literal, transform = $transform:ident
    ) => {
        $(#[$meta])*
        // Several `printcolumn(type_ = "string", ..)` look like repeated attributes to clippy.
        #[allow(clippy::duplicated_attributes)]
        #[derive(
            CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema,
        )]
        #[kube(
            group = "styrmin.io",
            version = "v1alpha1",
            kind = $kind,
            doc = $doc,
            derive = "PartialEq",
            derive = "Default",
            printcolumn(name = "Class", type_ = "string", json_path = ".spec.ingressClass"),
            printcolumn(
                name = "Dedicated",
                type_ = "string",
                json_path = ".spec.dedicatedIngress"
            ),
            printcolumn(name = "Mode", type_ = "string", json_path = ".spec.enforcementMode")
        )]
        #[schemars(transform = $transform)]
        pub struct $spec {
            /// `ingressClass` and `dedicatedIngress`.
            #[serde(flatten)]
            pub settings: IngressSettings,
            /// `enforce` or `warn`.
            #[serde(
                rename = "enforcementMode",
                default,
                skip_serializing_if = "Option::is_none"
            )]
            #[schemars(schema_with = "enforcement_mode_schema")]
            pub enforcement_mode: Option<EnforcementMode>,
        }
    };
}

level_resource!(
    /// The cluster level (docs/rules.md §1): `ingressClass` absent means `traefik`, `null` or `""`
    /// no class.
    StyrminClusterSpec,
    kind = "StyrminCluster",
    doc = "Styrmin's cluster-wide ingress settings. Only the one named `default` counts.",
    transform = cluster_level_schema
);

level_resource!(
    /// An environment level (docs/rules.md §1): a left-out or `null` key is not set (inherited).
    StyrminEnvironmentSpec,
    kind = "StyrminEnvironment",
    doc = "The ingress settings of one Styrmin environment, named by its environment id.",
    transform = environment_level_schema
);

/// What a deployment is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum DeploymentRole {
    #[default]
    Application,
    IngressController,
}

/// A deployment's state (docs/rules.md §3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum DeploymentPhase {
    Pending,
    Deploying,
    Running,
    Failed,
    // A backup restore is re-creating the deployment's namespace (a plain comment: a doc
    // comment on one variant changes the generated schema's form).
    Restoring,
    Deleting,
}

/// One Styrmin deployment, named `styrmin-<id>` in its namespace `styrmin-<id>`.
// Several `printcolumn(type_ = "string", ..)` look like repeated attributes to clippy.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "styrmin.io",
    version = "v1alpha1",
    kind = "StyrminDeployment",
    namespaced,
    status = "StyrminDeploymentStatus",
    doc = "One Styrmin deployment: its environment, role and ingress settings.",
    derive = "PartialEq",
    derive = "Default",
    printcolumn(
        name = "Environment",
        type_ = "string",
        json_path = ".spec.environmentId"
    ),
    printcolumn(name = "Role", type_ = "string", json_path = ".spec.role"),
    printcolumn(name = "Mode", type_ = "string", json_path = ".spec.enforcementMode"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(
        name = "Deployed-Class",
        type_ = "string",
        json_path = ".status.lastDeployed.ingressClass"
    ),
    printcolumn(
        name = "Deployed-Dedicated",
        type_ = "string",
        json_path = ".status.lastDeployed.dedicatedIngress"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = deployment_level_schema)]
pub struct StyrminDeploymentSpec {
    /// The id of the deployment's environment (a StyrminEnvironment of that name).
    pub environment_id: String,
    /// `application` (the default) or `ingress-controller` (an environment's dedicated
    /// ingress controller).
    #[serde(default)]
    pub role: DeploymentRole,
    /// `ingressClass` and `dedicatedIngress`.
    #[serde(flatten)]
    pub settings: IngressSettings,
    /// `enforce` or `warn`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "enforcement_mode_schema")]
    pub enforcement_mode: Option<EnforcementMode>,
}

/// What Styrmin reports about a deployment.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StyrminDeploymentStatus {
    /// `PENDING`, `DEPLOYING`, `RUNNING`, `FAILED`, `RESTORING` or `DELETING`. A deletion
    /// timestamp counts as `DELETING` whatever this says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<DeploymentPhase>,
    /// W5: the ingress settings the deployment was last deployed with, resolved:
    /// `{dedicatedIngress: {}}` (the dedicated controller), `{ingressClass: nginx}` (a shared
    /// class) or `{ingressClass: ""}` (no class: the chart's own). Read like a cluster level
    /// (an object wins over a class; `{}` is `traefik`). When present it alone decides the
    /// deployment's Ingresses, whatever the cluster, environment and deployment levels say
    /// now; Styrmin writes it before the deploy that uses new settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_deployed: Option<IngressSettings>,
}

/// The two ingress keys of one level: each spec's (flattened into it, so they are `spec.ingressClass`
/// and `spec.dedicatedIngress`), and the record in `status.lastDeployed`. What a left-out or
/// `null` key means differs by level; each spec's schema says it (`*_level_schema`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IngressSettings {
    /// An IngressClass name, `""`, or `null`.
    #[serde(
        default,
        skip_serializing_if = "is_absent",
        serialize_with = "serialize_setting"
    )]
    #[schemars(schema_with = "ingress_class_schema")]
    pub ingress_class: Setting<String>,
    /// An object (dedicated ingress on) or `null`.
    #[serde(
        default,
        skip_serializing_if = "is_absent",
        serialize_with = "serialize_setting"
    )]
    #[schemars(schema_with = "dedicated_ingress_schema")]
    pub dedicated_ingress: Setting<Value>,
}

fn is_absent<T>(setting: &Setting<T>) -> bool {
    matches!(setting, Setting::Absent)
}

/// `Null` as `null`, `Value` as the value (`Absent` is skipped before this is called).
fn serialize_setting<T: Serialize, S: Serializer>(
    setting: &Setting<T>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    setting.value().serialize(serializer)
}

fn enforcement_mode_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "description": "`enforce` (rewrite Ingresses, deny deploys W2 refuses) or `warn` (change and deny nothing; say what enforce would do in admission warnings, metrics and the audit). The most specific level that sets it decides; left out or null: inherited (at the cluster: `enforce`).",
        "type": "string",
        "enum": ["enforce", "warn"],
        "nullable": true
    })
}

fn ingress_class_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "description": "An IngressClass name, \"\" for none, or null (see docs/rules.md §1 for what absent and null mean at each level).",
        "type": "string",
        "nullable": true
    })
}

/// The cluster level's schema: the descriptions of its two keys, and the default `traefik`
/// of `ingressClass`, which the API server stores when the key is left out (a `null` is
/// kept: the field is nullable), so the stored object and `kubectl get` show the class that
/// applies.
fn cluster_level_schema(schema: &mut schemars::Schema) {
    describe_level(
        schema,
        "The IngressClass of the cluster. Left out: `traefik` (the API server stores the\n\
         default, so `kubectl get` shows it); `\"\"` (or `null`): no class. Write `\"\"`: a `null`\n\
         applied with client-side `kubectl apply` is dropped and then reads as `traefik`.",
        "Any object turns the dedicated ingress controller on (its keys are the controller's\n\
         values); left out or `null`: off.",
    );
    if let Some(class) = schema
        .get_mut("properties")
        .and_then(|properties| properties.get_mut("ingressClass"))
        .and_then(Value::as_object_mut)
    {
        class.insert(
            "default".to_owned(),
            styrmin_ingress_rules::DEFAULT_CLUSTER_CLASS.into(),
        );
    }
}

fn environment_level_schema(schema: &mut schemars::Schema) {
    describe_level(
        schema,
        "The environment's IngressClass; left out or `null`: inherited from the cluster.",
        "Any object turns the dedicated ingress controller on; left out or `null`: inherited.",
    );
}

fn deployment_level_schema(schema: &mut schemars::Schema) {
    describe_level(
        schema,
        "The deployment's IngressClass; left out or `null`: inherited.",
        "Any object turns the dedicated ingress controller on; left out or `null`: inherited.",
    );
}

/// Sets the descriptions of a spec's `ingressClass` and `dedicatedIngress`.
fn describe_level(schema: &mut schemars::Schema, ingress_class: &str, dedicated_ingress: &str) {
    let Some(properties) = schema.get_mut("properties") else {
        return;
    };
    for (key, description) in [
        ("ingressClass", ingress_class),
        ("dedicatedIngress", dedicated_ingress),
    ] {
        if let Some(property) = properties.get_mut(key).and_then(Value::as_object_mut) {
            property.insert("description".to_owned(), description.into());
        }
    }
}

fn dedicated_ingress_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "description": "Any object (`{}` included) turns the dedicated ingress controller on; its keys are the controller's values. null: not set.",
        "type": "object",
        "nullable": true,
        "x-kubernetes-preserve-unknown-fields": true
    })
}

/// The CRDs, each with the file name it is committed under in `charts/styrmin-webhook/files/crds/`.
pub fn all_crds() -> Vec<(&'static str, CustomResourceDefinition)> {
    vec![
        ("styrminclusters.yaml", StyrminCluster::crd()),
        ("styrminenvironments.yaml", StyrminEnvironment::crd()),
        ("styrmindeployments.yaml", StyrminDeployment::crd()),
        ("styrminmigrations.yaml", migration::migration_crd()),
    ]
}

/// A CRD as the committed file holds it: YAML written by serde-saphyr, with a header.
pub fn crd_yaml(crd: &CustomResourceDefinition) -> Result<String, serde_saphyr::SerializeError> {
    let body = serde_saphyr::to_string(crd)?;
    Ok(format!(
        "# Generated from webhook/src/crd.rs: do not edit. Regenerate with\n\
         # cargo run -p styrmin-webhook --example crdgen -- charts/styrmin-webhook/files/crds\n{body}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_null_empty_and_value_survive_a_round_trip() {
        for json in [
            r#"{"environmentId":"prod"}"#,
            r#"{"environmentId":"prod","role":"application","ingressClass":null,"dedicatedIngress":null}"#,
            r#"{"environmentId":"prod","role":"application","ingressClass":""}"#,
            r#"{"environmentId":"prod","role":"ingress-controller","ingressClass":"nginx","dedicatedIngress":{"replicas":2}}"#,
        ] {
            let spec: StyrminDeploymentSpec = serde_json::from_str(json).unwrap();
            let back = serde_json::to_value(&spec).unwrap();
            let mut expected: Value = serde_json::from_str(json).unwrap();
            expected["role"] = back["role"].clone();
            assert_eq!(back, expected, "{json}");
        }
        let spec: StyrminClusterSpec = serde_json::from_str("{}").unwrap();
        assert_eq!(spec.settings.ingress_class, Setting::Absent);
        let spec: StyrminClusterSpec = serde_json::from_str(r#"{"ingressClass":null}"#).unwrap();
        assert_eq!(spec.settings.ingress_class, Setting::Null);
    }

    #[test]
    fn the_schema_keeps_null_and_any_object() {
        let crd = serde_json::to_value(StyrminEnvironment::crd()).unwrap();
        let spec = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
        assert_eq!(spec["ingressClass"]["nullable"], true);
        assert_eq!(spec["ingressClass"]["type"], "string");
        assert_eq!(spec["dedicatedIngress"]["nullable"], true);
        assert_eq!(spec["dedicatedIngress"]["type"], "object");
        assert_eq!(
            spec["dedicatedIngress"]["x-kubernetes-preserve-unknown-fields"],
            true
        );
    }

    #[test]
    fn the_cluster_class_defaults_to_traefik_and_keeps_null_and_empty() {
        let crd = serde_json::to_value(StyrminCluster::crd()).unwrap();
        let version = &crd["spec"]["versions"][0];
        let class = &version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["ingressClass"];
        assert_eq!(class["default"], "traefik");
        assert_eq!(class["nullable"], true, "null is kept, not defaulted");
        assert_eq!(class["type"], "string", "\"\" is a valid value");
        // Only the cluster level has a default: elsewhere absent means inherited.
        let environment = serde_json::to_value(StyrminEnvironment::crd()).unwrap();
        assert!(
            environment["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
                ["properties"]["ingressClass"]
                .get("default")
                .is_none()
        );
        let columns: Vec<&str> = version["additionalPrinterColumns"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|c| c["jsonPath"].as_str())
            .collect();
        assert_eq!(
            columns,
            [
                ".spec.ingressClass",
                ".spec.dedicatedIngress",
                ".spec.enforcementMode"
            ]
        );
    }

    #[test]
    fn every_level_has_the_enforcement_mode_and_its_column() {
        for crd in [
            StyrminCluster::crd(),
            StyrminEnvironment::crd(),
            StyrminDeployment::crd(),
        ] {
            let crd = serde_json::to_value(crd).unwrap();
            let version = &crd["spec"]["versions"][0];
            let mode = &version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["enforcementMode"];
            assert_eq!(
                mode["enum"],
                serde_json::json!(["enforce", "warn"]),
                "{crd}"
            );
            assert!(mode.get("default").is_none(), "left out inherits");
            let column = version["additionalPrinterColumns"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["name"] == "Mode")
                .cloned();
            assert_eq!(column.unwrap()["jsonPath"], ".spec.enforcementMode");
        }
        let spec: StyrminEnvironmentSpec =
            serde_json::from_str(r#"{"enforcementMode":"warn","ingressClass":"haproxy"}"#).unwrap();
        assert_eq!(spec.enforcement_mode, Some(EnforcementMode::Warn));
        let spec: StyrminDeploymentSpec =
            serde_json::from_str(r#"{"environmentId":"prod","enforcementMode":"enforce"}"#)
                .unwrap();
        assert_eq!(spec.enforcement_mode, Some(EnforcementMode::Enforce));
        assert_eq!(
            serde_json::to_value(&spec).unwrap()["enforcementMode"],
            "enforce"
        );
        assert!(
            serde_json::from_str::<StyrminClusterSpec>(r#"{"enforcementMode":"audit"}"#).is_err()
        );
    }

    #[test]
    fn scopes_and_names() {
        let scope = |crd: CustomResourceDefinition| (crd.metadata.name.unwrap(), crd.spec.scope);
        assert_eq!(
            scope(StyrminCluster::crd()),
            (
                "styrminclusters.styrmin.io".to_owned(),
                "Cluster".to_owned()
            )
        );
        assert_eq!(
            scope(StyrminEnvironment::crd()),
            (
                "styrminenvironments.styrmin.io".to_owned(),
                "Cluster".to_owned()
            )
        );
        assert_eq!(
            scope(StyrminDeployment::crd()),
            (
                "styrmindeployments.styrmin.io".to_owned(),
                "Namespaced".to_owned()
            )
        );
    }
}
