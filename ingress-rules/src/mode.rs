//! The enforcement mode: whether the rules' answer is applied (`enforce`) or only reported
//! (`warn`), set at the cluster, environment and deployment levels and resolved like the
//! class: the most specific level that sets it decides; none does, `enforce`.
//!
//! `warn` is the harmless first stage of a rollout: what enforcing would change is said
//! (an admission warning, the post-renderer's report), and nothing is changed or denied.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// `enforce` (the default) or `warn`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EnforcementMode {
    /// The rules' answer is applied: Ingresses are rewritten, deploys can be denied.
    #[default]
    Enforce,
    /// Nothing is changed or denied; what enforcing would do is reported.
    Warn,
}

impl EnforcementMode {
    /// Both modes, in the order the docs list them.
    pub const ALL: [EnforcementMode; 2] = [EnforcementMode::Enforce, EnforcementMode::Warn];

    pub fn as_str(self) -> &'static str {
        match self {
            EnforcementMode::Enforce => "enforce",
            EnforcementMode::Warn => "warn",
        }
    }

    pub fn is_warn(self) -> bool {
        self == EnforcementMode::Warn
    }
}

impl fmt::Display for EnforcementMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A mode that is neither `enforce` nor `warn`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not an enforcement mode: expected `enforce` or `warn`")]
pub struct ParseModeError(String);

impl FromStr for EnforcementMode {
    type Err = ParseModeError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim() {
            "enforce" => Ok(EnforcementMode::Enforce),
            "warn" => Ok(EnforcementMode::Warn),
            _ => Err(ParseModeError(text.to_owned())),
        }
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;
    use crate::enforce::{ClassFields, FieldChange, SHOWN_VALUE_CHARS, would_change};
    use crate::example_targets::fields;
    use crate::level::{Level, LevelName, Setting};
    use crate::resolve::{Levels, ResolvedMode, resolve_mode};

    fn level(mode: Setting<EnforcementMode>) -> Level {
        Level {
            enforcement_mode: mode,
            ..Level::default()
        }
    }

    use EnforcementMode::{Enforce, Warn};
    use Setting::{Absent, Null, Value};

    // Three levels × absent/null/enforce/warn where it matters: the most specific level
    // that sets a value decides, null and absent inherit, nothing set is `enforce`.
    #[rstest]
    #[case::nothing_set(Absent, Absent, Absent, Enforce, None)]
    #[case::all_null(Null, Null, Null, Enforce, None)]
    #[case::cluster_warn(Value(Warn), Absent, Absent, Warn, Some(LevelName::Cluster))]
    #[case::cluster_warn_env_null(Value(Warn), Null, Null, Warn, Some(LevelName::Cluster))]
    #[case::env_enforce_over_cluster_warn(
        Value(Warn),
        Value(Enforce),
        Absent,
        Enforce,
        Some(LevelName::Environment)
    )]
    #[case::env_warn_over_cluster_enforce(
        Value(Enforce),
        Value(Warn),
        Null,
        Warn,
        Some(LevelName::Environment)
    )]
    #[case::deployment_over_all(
        Value(Warn),
        Value(Warn),
        Value(Enforce),
        Enforce,
        Some(LevelName::Deployment)
    )]
    #[case::deployment_warn_alone(Absent, Absent, Value(Warn), Warn, Some(LevelName::Deployment))]
    fn the_most_specific_level_that_sets_the_mode_decides(
        #[case] cluster: Setting<EnforcementMode>,
        #[case] environment: Setting<EnforcementMode>,
        #[case] deployment: Setting<EnforcementMode>,
        #[case] mode: EnforcementMode,
        #[case] origin: Option<LevelName>,
    ) {
        let (c, e, d) = (level(cluster), level(environment), level(deployment));
        let got = resolve_mode(&Levels {
            cluster: &c,
            environment: Some(&e),
            deployment: Some(&d),
        });
        assert_eq!(got, ResolvedMode { mode, origin });
    }

    #[test]
    fn unknown_levels_inherit_and_the_default_is_enforce() {
        let cluster = level(Value(Warn));
        let got = resolve_mode(&Levels {
            cluster: &cluster,
            environment: None,
            deployment: None,
        });
        assert_eq!(got.mode, Warn);
        assert_eq!(got.decided_by(), "cluster.enforcement_mode");
        let got = resolve_mode(&Levels {
            cluster: &Level::default(),
            environment: None,
            deployment: None,
        });
        assert_eq!(got, ResolvedMode::default());
        assert_eq!(got.mode, Enforce);
        assert_eq!(got.decided_by(), "the default");
    }

    #[test]
    fn the_mode_does_not_touch_the_class() {
        let warn = Level {
            ingress_class: Value("nginx".into()),
            enforcement_mode: Value(Warn),
            ..Level::default()
        };
        let resolved = crate::resolve(&Levels {
            cluster: &warn,
            environment: None,
            deployment: None,
        });
        assert_eq!(resolved.target, crate::IngressTarget::class("nginx"));
    }

    #[test]
    fn written_as_text_yaml_and_json() {
        for mode in EnforcementMode::ALL {
            assert_eq!(mode.as_str().parse::<EnforcementMode>().unwrap(), mode);
            assert_eq!(mode.to_string(), mode.as_str());
            assert_eq!(serde_json::to_string(&mode).unwrap(), format!("\"{mode}\""));
        }
        assert!(Warn.is_warn() && !Enforce.is_warn());
        let err = "Warn".parse::<EnforcementMode>().unwrap_err().to_string();
        assert!(err.contains("`enforce` or `warn`"), "{err}");
        let parsed: Level = serde_saphyr::from_str("enforcement_mode: warn").unwrap();
        assert_eq!(parsed.enforcement_mode, Value(Warn));
        let parsed: Level = serde_saphyr::from_str("enforcement_mode: null").unwrap();
        assert_eq!(parsed.enforcement_mode, Null);
        let err = serde_saphyr::from_str::<Level>("enforcement_mode: audit")
            .unwrap_err()
            .to_string();
        assert!(err.contains("enforce") && err.contains("warn"), "{err}");
    }

    #[rstest]
    #[case::set_name(
        FieldChange::SetClassName("haproxy".into()),
        fields(Some("nginx"), None),
        r#"would set spec.ingressClassName "haproxy" (now "nginx")"#
    )]
    #[case::set_name_from_nothing(
        FieldChange::SetClassName("haproxy".into()),
        fields(None, None),
        r#"would set spec.ingressClassName "haproxy" (now not set)"#
    )]
    #[case::remove_name(
        FieldChange::RemoveClassName,
        fields(Some("nginx"), None),
        r#"would remove spec.ingressClassName (now "nginx")"#
    )]
    #[case::set_annotation(
        FieldChange::SetClassAnnotation("traefik".into()),
        fields(None, Some("nginx")),
        r#"would set annotation kubernetes.io/ingress.class "traefik" (now "nginx")"#
    )]
    #[case::remove_annotation(
        FieldChange::RemoveClassAnnotation,
        fields(None, Some("nginx")),
        r#"would remove annotation kubernetes.io/ingress.class (now "nginx")"#
    )]
    fn a_would_be_change_names_the_field_the_new_and_the_old_value(
        #[case] change: FieldChange,
        #[case] current: ClassFields,
        #[case] expected: &str,
    ) {
        assert_eq!(would_change(&change, &current), expected);
    }

    #[test]
    fn a_long_value_is_cut_so_the_line_fits_a_warning() {
        let long = "x".repeat(5000);
        let line = would_change(
            &FieldChange::SetClassName(long.clone()),
            &fields(None, Some(&long)),
        );
        assert!(line.chars().count() < 200, "{line}");
        assert!(
            line.contains(&format!("\"{}\"…", "x".repeat(SHOWN_VALUE_CHARS))),
            "{line}"
        );
        let exact = "y".repeat(SHOWN_VALUE_CHARS);
        let line = would_change(
            &FieldChange::RemoveClassAnnotation,
            &fields(None, Some(&exact)),
        );
        assert!(line.ends_with(&format!("(now \"{exact}\")")), "{line}");
    }
}
