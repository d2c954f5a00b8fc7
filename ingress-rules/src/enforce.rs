//! R3–R5 and R9: what an Ingress's two class fields become.

use crate::classes::{CLASS_ANNOTATION, DEDICATED_CONTROLLER_CLASS};
use crate::kube_version::KubernetesVersion;
use crate::target::IngressTarget;

/// The two fields that name an Ingress's class. `None` is a field that is not there
/// (an explicit `null` in the object counts as not there, as it does for the API server).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ClassFields {
    /// `spec.ingressClassName`.
    pub ingress_class_name: Option<String>,
    /// `metadata.annotations["kubernetes.io/ingress.class"]`.
    pub class_annotation: Option<String>,
}

/// One change to one class field, in the order an editor should apply them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FieldChange {
    SetClassName(String),
    RemoveClassName,
    SetClassAnnotation(String),
    RemoveClassAnnotation,
}

/// R5's warning: the Ingress has no class after the rules ran.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoClassWarning;

impl NoClassWarning {
    /// One line, no newline, short enough for an admission warning (the API server
    /// truncates warnings longer than 256 characters).
    pub const MESSAGE: &'static str = "Ingress has no class: its URL may not respond unless the cluster has a default IngressClass or a controller that serves class-less Ingresses; set ingress_class on the cluster, the environment or the deployment";
}

/// What the rules did to one Ingress.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Enforcement {
    /// The class fields the Ingress has after the rules.
    pub fields: ClassFields,
    /// How to get there from the fields it had: empty when it already conforms (R8).
    pub changes: Vec<FieldChange>,
    /// Set when R5 leaves the Ingress with no class at all.
    pub warning: Option<NoClassWarning>,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    /// R9: the rules would set both class fields on a server that rejects that.
    #[error(
        "Kubernetes {version} rejects an Ingress that sets both spec.ingressClassName and the {CLASS_ANNOTATION} annotation \
         (allowed from 1.27 when they are equal); ingress_class {class:?} needs Kubernetes 1.27 or later, \
         or a dedicated ingress, which sets the annotation only"
    )]
    BothClassFieldsUnsupported {
        version: KubernetesVersion,
        class: String,
    },
}

/// Applies R3–R5 to an Ingress whose class fields are `current`, for the `target` the
/// rules resolved to (or the deployment's record, W5).
///
/// `kubernetes` is the API server's version where it is known: R4 sets both fields, which
/// 1.18–1.26 reject, so on those the answer is an error rather than an object the API
/// server will refuse (R9).
pub fn enforce(
    target: &IngressTarget,
    current: &ClassFields,
    kubernetes: Option<KubernetesVersion>,
) -> Result<Enforcement, RuleError> {
    let (fields, warning) = match target {
        // R3: the dedicated controller reads the annotation only, and ignores an Ingress
        // that names a class in the spec, whatever the value.
        IngressTarget::Dedicated => (
            ClassFields {
                ingress_class_name: None,
                class_annotation: Some(DEDICATED_CONTROLLER_CLASS.to_owned()),
            },
            None,
        ),
        // R4: both fields, whatever the chart set.
        IngressTarget::Class(class) => {
            if let Some(version) = kubernetes.filter(|v| !v.accepts_both_class_fields()) {
                return Err(RuleError::BothClassFieldsUnsupported {
                    version,
                    class: class.as_str().to_owned(),
                });
            }
            (
                ClassFields {
                    ingress_class_name: Some(class.as_str().to_owned()),
                    class_annotation: Some(class.as_str().to_owned()),
                },
                None,
            )
        }
        // R5: the chart's fields as they are; a warning when that is no class at all.
        IngressTarget::NoClass => {
            let classless =
                current.ingress_class_name.is_none() && current.class_annotation.is_none();
            (current.clone(), classless.then_some(NoClassWarning))
        }
    };
    let changes = changes_between(current, &fields);
    Ok(Enforcement {
        fields,
        changes,
        warning,
    })
}

/// The field changes that turn `from` into `to`.
pub fn changes_between(from: &ClassFields, to: &ClassFields) -> Vec<FieldChange> {
    let mut changes = Vec::new();
    if from.ingress_class_name != to.ingress_class_name {
        changes.push(match &to.ingress_class_name {
            Some(class) => FieldChange::SetClassName(class.clone()),
            None => FieldChange::RemoveClassName,
        });
    }
    if from.class_annotation != to.class_annotation {
        changes.push(match &to.class_annotation {
            Some(class) => FieldChange::SetClassAnnotation(class.clone()),
            None => FieldChange::RemoveClassAnnotation,
        });
    }
    changes
}

/// What one field change would do, for a `warn` report: `would set spec.ingressClassName
/// "haproxy" (now "nginx")`, `would remove annotation kubernetes.io/ingress.class (now
/// "nginx")`. `current` is the Ingress's fields before the change.
///
/// A value longer than [`SHOWN_VALUE_CHARS`] is cut there (`"…"` marks it), so that the line
/// fits an admission warning, which the API server may cut at 256 characters.
pub fn would_change(change: &FieldChange, current: &ClassFields) -> String {
    let now = |value: &Option<String>| match value {
        Some(value) => shown(value),
        None => "not set".to_owned(),
    };
    let class_name = "spec.ingressClassName";
    let annotation = format!("annotation {CLASS_ANNOTATION}");
    match change {
        FieldChange::SetClassName(class) => format!(
            "would set {class_name} {} (now {})",
            shown(class),
            now(&current.ingress_class_name)
        ),
        FieldChange::RemoveClassName => format!(
            "would remove {class_name} (now {})",
            now(&current.ingress_class_name)
        ),
        FieldChange::SetClassAnnotation(class) => format!(
            "would set {annotation} {} (now {})",
            shown(class),
            now(&current.class_annotation)
        ),
        FieldChange::RemoveClassAnnotation => format!(
            "would remove {annotation} (now {})",
            now(&current.class_annotation)
        ),
    }
}

/// The longest value [`would_change`] shows whole.
pub const SHOWN_VALUE_CHARS: usize = 64;

/// `value` quoted, cut at [`SHOWN_VALUE_CHARS`] characters.
fn shown(value: &str) -> String {
    if value.chars().count() <= SHOWN_VALUE_CHARS {
        format!("{value:?}")
    } else {
        let cut: String = value.chars().take(SHOWN_VALUE_CHARS).collect();
        format!("{cut:?}…")
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;
    use crate::example_targets::{dedicated, fields, no_class, shared};

    // Every combination of what a chart may write, under each of R3, R4, R5.
    #[rstest]
    #[case::r3_from_nothing(dedicated(), fields(None, None), fields(None, Some("traefik")))]
    #[case::r3_removes_class_name(
        dedicated(),
        fields(Some("nginx"), None),
        fields(None, Some("traefik"))
    )]
    #[case::r3_removes_class_name_even_traefik(
        dedicated(),
        fields(Some("traefik"), Some("traefik")),
        fields(None, Some("traefik"))
    )]
    #[case::r3_overwrites_annotation(
        dedicated(),
        fields(None, Some("nginx")),
        fields(None, Some("traefik"))
    )]
    #[case::r4_from_nothing(
        shared("nginx"),
        fields(None, None),
        fields(Some("nginx"), Some("nginx"))
    )]
    #[case::r4_overwrites_both(
        shared("nginx"),
        fields(Some("haproxy"), Some("traefik")),
        fields(Some("nginx"), Some("nginx"))
    )]
    #[case::r4_adds_missing_annotation(
        shared("nginx"),
        fields(Some("nginx"), None),
        fields(Some("nginx"), Some("nginx"))
    )]
    #[case::r4_adds_missing_class_name(
        shared("nginx"),
        fields(None, Some("nginx")),
        fields(Some("nginx"), Some("nginx"))
    )]
    #[case::r5_keeps_class_name(
        no_class(),
        fields(Some("nginx"), None),
        fields(Some("nginx"), None)
    )]
    #[case::r5_keeps_annotation(
        no_class(),
        fields(None, Some("haproxy")),
        fields(None, Some("haproxy"))
    )]
    #[case::r5_keeps_both_even_unequal(
        no_class(),
        fields(Some("a"), Some("b")),
        fields(Some("a"), Some("b"))
    )]
    #[case::r5_keeps_nothing(no_class(), fields(None, None), fields(None, None))]
    fn r3_r4_r5_resulting_fields(
        #[case] target: IngressTarget,
        #[case] chart: ClassFields,
        #[case] expected: ClassFields,
    ) {
        let out = enforce(&target, &chart, None).unwrap();
        assert_eq!(out.fields, expected);
        // R8: the result of the rules is a fixed point.
        let again = enforce(&target, &out.fields, None).unwrap();
        assert_eq!(again.fields, expected);
        assert!(again.changes.is_empty(), "{:?}", again.changes);
    }

    #[test]
    fn r5_warns_only_when_no_class_is_left() {
        assert_eq!(
            enforce(&no_class(), &fields(None, None), None)
                .unwrap()
                .warning,
            Some(NoClassWarning)
        );
        assert_eq!(
            enforce(&no_class(), &fields(Some("x"), None), None)
                .unwrap()
                .warning,
            None
        );
        assert_eq!(
            enforce(&no_class(), &fields(None, Some("x")), None)
                .unwrap()
                .warning,
            None
        );
        assert_eq!(
            enforce(&shared("x"), &fields(None, None), None)
                .unwrap()
                .warning,
            None
        );
        assert_eq!(
            enforce(&dedicated(), &fields(None, None), None)
                .unwrap()
                .warning,
            None
        );
    }

    #[test]
    fn r5_warning_fits_an_admission_warning() {
        let message = NoClassWarning::MESSAGE;
        assert!(message.len() <= 256, "{}", message.len());
        assert!(!message.contains('\n'));
        assert!(message.contains("default IngressClass"));
        assert!(message.contains("ingress_class"));
    }

    #[test]
    fn changes_are_listed_in_field_order() {
        let out = enforce(&dedicated(), &fields(Some("nginx"), Some("nginx")), None).unwrap();
        assert_eq!(
            out.changes,
            vec![
                FieldChange::RemoveClassName,
                FieldChange::SetClassAnnotation("traefik".into())
            ]
        );
        let out = enforce(&shared("on"), &fields(None, None), None).unwrap();
        assert_eq!(
            out.changes,
            vec![
                FieldChange::SetClassName("on".into()),
                FieldChange::SetClassAnnotation("on".into())
            ]
        );
    }

    #[test]
    fn r9_r4_on_an_old_server_is_an_error_not_an_invalid_object() {
        let old: KubernetesVersion = "1.26".parse().unwrap();
        let err = enforce(&shared("nginx"), &fields(None, None), Some(old)).unwrap_err();
        let message = err.to_string();
        assert!(message.contains("Kubernetes 1.26"), "{message}");
        assert!(message.contains("1.27"), "{message}");
        // R3 and R5 set at most one field: fine on any version.
        assert!(enforce(&dedicated(), &fields(Some("x"), None), Some(old)).is_ok());
        assert!(enforce(&no_class(), &fields(None, None), Some(old)).is_ok());
        assert!(
            enforce(
                &shared("nginx"),
                &fields(None, None),
                Some("1.27".parse().unwrap())
            )
            .is_ok()
        );
    }

    #[test]
    fn r9_result_never_sets_two_different_classes() {
        for target in [dedicated(), shared("nginx")] {
            for chart in [
                fields(None, None),
                fields(Some("a"), Some("b")),
                fields(Some("a"), None),
            ] {
                let f = enforce(&target, &chart, None).unwrap().fields;
                if let (Some(a), Some(b)) = (&f.ingress_class_name, &f.class_annotation) {
                    assert_eq!(a, b);
                }
            }
        }
    }
}
