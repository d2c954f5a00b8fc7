//! The resolution table (docs/rules.md §1), written once: each level × absent / null / "" /
//! value, and dedicated at each level, for the post-renderer's tests and the end-to-end ones.

use std::fmt;

use serde_json::{Value, json};

/// One configuration: the `cluster`, `environment` and `deployment` sections as flow
/// mappings; `None` leaves a section out.
#[derive(Clone, Copy)]
pub struct TableConfig {
    pub cluster: Option<&'static str>,
    pub environment: Option<&'static str>,
    pub deployment: Option<&'static str>,
}

const fn config(
    cluster: Option<&'static str>,
    environment: Option<&'static str>,
    deployment: Option<&'static str>,
) -> TableConfig {
    TableConfig {
        cluster,
        environment,
        deployment,
    }
}

/// The resolution table (docs/rules.md §1): each level × absent / null / "" / value, and
/// dedicated at each level, with classes that YAML would misread if written plain.
pub const RESOLUTION_TABLE: &[TableConfig] = &[
    config(None, None, None),
    config(Some("{ingress_class: null}"), None, None),
    config(Some("{ingress_class: \"\"}"), None, None),
    config(Some("{ingress_class: nginx}"), None, None),
    config(
        Some("{ingress_class: nginx}"),
        Some("{ingress_class: null}"),
        None,
    ),
    config(
        Some("{ingress_class: nginx}"),
        Some("{ingress_class: \"\"}"),
        None,
    ),
    config(
        Some("{ingress_class: null}"),
        Some("{ingress_class: haproxy}"),
        None,
    ),
    config(
        Some("{ingress_class: nginx}"),
        Some("{ingress_class: haproxy}"),
        Some("{ingress_class: null}"),
    ),
    config(
        Some("{ingress_class: nginx}"),
        Some("{ingress_class: haproxy}"),
        Some("{ingress_class: \"\"}"),
    ),
    config(
        None,
        Some("{ingress_class: haproxy}"),
        Some("{ingress_class: \"on\"}"),
    ),
    config(None, None, Some("{ingress_class: \"123\"}")),
    config(Some("{dedicated_ingress: {}}"), None, None),
    config(
        Some("{ingress_class: nginx}"),
        Some("{dedicated_ingress: {replicas: 2}}"),
        None,
    ),
    config(
        None,
        Some("{ingress_class: \"\"}"),
        Some("{dedicated_ingress: {}}"),
    ),
    config(
        Some("{dedicated_ingress: {}}"),
        Some("{dedicated_ingress: null, ingress_class: nginx}"),
        Some("{ingress_class: contour}"),
    ),
];

impl TableConfig {
    /// The post-renderer's config file.
    pub fn config_yaml(&self) -> String {
        [
            ("cluster", self.cluster),
            ("environment", self.environment),
            ("deployment", self.deployment),
        ]
        .into_iter()
        .filter_map(|(name, section)| section.map(|s| format!("{name}: {s}\n")))
        .collect()
    }

    /// The same levels as the webhook's policy file: deployment `app` of environment
    /// `env`. Written as JSON (which is YAML), so `null` and `""` stay what they are.
    pub fn policy_yaml(&self) -> String {
        let section = |s: Option<&str>| -> Value {
            s.map_or(json!({}), |s| serde_saphyr::from_str(s).expect("section"))
        };
        let mut deployment = section(self.deployment);
        deployment["environment"] = json!("env");
        json!({
            "cluster": section(self.cluster),
            "environments": {"env": section(self.environment)},
            "deployments": {"app": deployment},
        })
        .to_string()
    }
}

impl fmt::Debug for TableConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.config_yaml())
    }
}
