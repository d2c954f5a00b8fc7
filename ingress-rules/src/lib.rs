//! The rule set that decides which ingress controller serves an Ingress.
//!
//! This crate is the one place where the rules' decisions are written down as code (which
//! rules: docs/rules.md, "Which part applies which rules"). Both
//! `styrmin-postrender` (which turns the answer into a byte splice of the rendered
//! YAML) and `styrmin-webhook` (which turns it into a JSON patch) call these
//! functions, so the two can never disagree. It does no I/O and knows nothing of
//! YAML or HTTP, except for one fixed text: the kustomize patch of a FluxCD HelmRelease
//! post-renderer ([`flux_post_renderer`]), which both print and inject verbatim.
//!
//! An answer is a [`ResolvedIngress`]: its [`IngressTarget`] (dedicated, a non-empty
//! [`ClassName`], or no class) and its [`Origin`] (the level whose key decided, the cluster
//! default, or the deployment's last-deployed record). Which settings apply to a deployment
//! is [`settings_for`]: its record of what it was last deployed with (an [`IngressTarget`],
//! rule W5) when it has one, else [`resolve`] over its three levels.
//!
//! ```
//! use styrmin_ingress_rules::{ClassFields, IngressTarget, Level, Levels, Origin, Setting, enforce, resolve};
//! use styrmin_ingress_rules::LevelName;
//!
//! let cluster = Level { ingress_class: Setting::Value("nginx".into()), ..Level::default() };
//! let resolved = resolve(&Levels { cluster: &cluster, environment: None, deployment: None });
//! assert_eq!(resolved.target, IngressTarget::class("nginx"));
//! assert_eq!(resolved.origin, Origin::Level(LevelName::Cluster));
//! assert_eq!(resolved.decided_by().to_string(), "cluster.ingress_class");
//!
//! let chart = ClassFields { ingress_class_name: Some("haproxy".into()), class_annotation: None };
//! let outcome = enforce(&resolved.target, &chart, None).unwrap();
//! assert_eq!(outcome.fields.ingress_class_name.as_deref(), Some("nginx"));
//! assert_eq!(outcome.fields.class_annotation.as_deref(), Some("nginx"));
//! ```

mod classes;
mod enforce;
mod flux_patch;
mod kube_version;
mod level;
mod mode;
mod record;
mod resolve;
mod target;

pub use classes::{CLASS_ANNOTATION, DEDICATED_CONTROLLER_CLASS, DEFAULT_CLUSTER_CLASS};
pub use enforce::{
    ClassFields, Enforcement, FieldChange, NoClassWarning, RuleError, SHOWN_VALUE_CHARS,
    changes_between, enforce, would_change,
};
pub use flux_patch::{
    FLUX_PATCH_NAME, FLUX_PATCH_TARGET_KIND, FluxPostRenderer, KustomizePatch, PatchTarget,
    double_quoted, flux_post_renderer,
};
pub use kube_version::{KubernetesVersion, ParseVersionError};
pub use level::{DedicatedIngress, Level, LevelName, Setting};
pub use mode::{EnforcementMode, ParseModeError};
pub use record::{AppliedSettings, SettingsSource, settings_for};
pub use resolve::{Levels, Origin, ResolvedIngress, ResolvedMode, resolve, resolve_mode};
pub use target::{ClassName, IngressTarget, ParseTargetError};

/// `(group/version, kind)` pairs that are Ingresses (R6). Anything else is left alone (R7).
pub const INGRESS_API_VERSIONS: [&str; 3] = [
    "networking.k8s.io/v1",
    "networking.k8s.io/v1beta1",
    "extensions/v1beta1",
];

/// Whether an object of this `apiVersion` and `kind` is an Ingress that the rules apply to (R6).
/// A `kind: Ingress` of any other group (a CRD that happens to share the name) is not (R7).
pub fn is_ingress(api_version: &str, kind: &str) -> bool {
    kind == "Ingress" && INGRESS_API_VERSIONS.contains(&api_version)
}

/// Whether an object is a list whose `items` may hold Ingresses (R6): `v1 List`, or an
/// `IngressList` of an Ingress group.
pub fn is_ingress_container_list(api_version: &str, kind: &str) -> bool {
    (kind == "List" && api_version == "v1")
        || (kind == "IngressList" && INGRESS_API_VERSIONS.contains(&api_version))
}

/// Short constructors of targets, and of the class fields an Ingress has, for the rule tables
/// of this crate's tests and of the crates that use it (the `test-support` feature, enabled
/// from their dev-dependencies).
#[cfg(any(test, feature = "test-support"))]
pub mod example_targets {
    use crate::{ClassFields, IngressTarget};

    /// An Ingress's `spec.ingressClassName` and class annotation (`None`: not there).
    pub fn fields(class_name: Option<&str>, annotation: Option<&str>) -> ClassFields {
        ClassFields {
            ingress_class_name: class_name.map(str::to_owned),
            class_annotation: annotation.map(str::to_owned),
        }
    }

    /// R3: the environment's dedicated controller.
    pub fn dedicated() -> IngressTarget {
        IngressTarget::Dedicated
    }

    /// R4: a shared controller of this class (`""` is [`no_class`]).
    pub fn shared(class: &str) -> IngressTarget {
        IngressTarget::class(class)
    }

    /// R5: no class; the chart's own is kept.
    pub fn no_class() -> IngressTarget {
        IngressTarget::NoClass
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn r6_every_ingress_api_version_counts() {
        for v in INGRESS_API_VERSIONS {
            assert!(is_ingress(v, "Ingress"), "{v}");
        }
    }

    #[test]
    fn r7_other_groups_and_kinds_do_not() {
        assert!(!is_ingress("voyager.appscode.com/v1beta1", "Ingress"));
        assert!(!is_ingress("traefik.io/v1alpha1", "IngressRoute"));
        assert!(!is_ingress("networking.k8s.io/v1", "IngressClass"));
        assert!(!is_ingress("gateway.networking.k8s.io/v1", "HTTPRoute"));
        assert!(!is_ingress("networking.k8s.io/v1", "ingress"));
    }

    #[test]
    fn r6_lists_that_may_hold_ingresses() {
        assert!(is_ingress_container_list("v1", "List"));
        assert!(is_ingress_container_list(
            "networking.k8s.io/v1",
            "IngressList"
        ));
        assert!(!is_ingress_container_list("v1", "ConfigMapList"));
        assert!(!is_ingress_container_list("example.com/v1", "List"));
    }

    #[test]
    fn r6_a_list_is_v1_list_or_an_ingress_group_ingress_list() {
        // Both halves of each condition count: `List` only in `v1`, `IngressList` only in an
        // Ingress group.
        assert!(!is_ingress_container_list("networking.k8s.io/v1", "List"));
        assert!(!is_ingress_container_list("example.com/v1", "IngressList"));
        assert!(!is_ingress_container_list("v1", "IngressList"));
        assert!(is_ingress_container_list(
            "extensions/v1beta1",
            "IngressList"
        ));
    }
}
