//! W5: the ingress settings a deployment was last deployed with, and which settings
//! apply to its Ingresses — that record, or the three levels when it has none.
//!
//! Styrmin never moves an application onto a dedicated controller that is not `RUNNING`
//! with the new values: the applications stay on their current ingress until Styrmin
//! redeploys them. So what an Ingress of a deployment gets is decided by what that
//! deployment was last deployed with ([`DeployedIngress`]), not by the newest cluster or
//! environment values; the levels decide only for a deployment that has no record
//! ([`settings_for`]).
//!
//! The record is the *resolved* answer (dedicated, a class, or no class), not a level: it
//! says what the deployment's Ingresses were rendered with, and nothing in it can be
//! inherited. It is written (policy file `last_deployed:`, StyrminDeployment
//! `status.lastDeployed`, post-renderer config `last_deployed:`) in the shape of one level,
//! read like a cluster level: `{dedicated_ingress: {}}`, `{ingress_class: nginx}`,
//! `{ingress_class: ""}` (or `null`) for no class; [`DeployedIngress::as_level`] gives that
//! form back.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer};

use crate::DEDICATED_CONTROLLER_CLASS;
use crate::level::{DedicatedIngress, Level, LevelName, Setting};
use crate::resolve::{ClassOrigin, Levels, ResolvedIngress, resolve};

/// The ingress settings a deployment was last deployed with (rule W5).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum DeployedIngress {
    /// Served by the environment's dedicated controller (R3).
    Dedicated,
    /// Served by this shared class (R4). An empty one counts as [`NoClass`](Self::NoClass).
    Class(String),
    /// No class: the chart's own class was kept (R5).
    NoClass,
}

impl DeployedIngress {
    /// The settings an answer of the rules stands for.
    pub fn from_resolved(resolved: &ResolvedIngress) -> Self {
        match resolved {
            ResolvedIngress::Dedicated { .. } => DeployedIngress::Dedicated,
            ResolvedIngress::Class { class, .. } => DeployedIngress::Class(class.clone()),
            ResolvedIngress::NoClass { .. } => DeployedIngress::NoClass,
        }
    }

    /// Reads a record written as one level, read like a cluster level: any
    /// `dedicated_ingress` object is [`Dedicated`](Self::Dedicated) (whatever the class),
    /// `ingress_class: ""` or `null` is [`NoClass`](Self::NoClass), a name is that class,
    /// and `{}` is the cluster default `traefik`.
    pub fn from_record_level(level: &Level) -> Self {
        Self::from_resolved(&resolve(&Levels {
            cluster: level,
            environment: None,
            deployment: None,
        }))
    }

    /// The record as one level, the form it is written in (the inverse of
    /// [`from_record_level`](Self::from_record_level)).
    pub fn as_level(&self) -> Level {
        match self {
            DeployedIngress::Dedicated => Level {
                dedicated_ingress: Setting::Value(DedicatedIngress::default()),
                ..Level::default()
            },
            DeployedIngress::Class(class) => Level {
                ingress_class: Setting::Value(class.clone()),
                ..Level::default()
            },
            DeployedIngress::NoClass => Level {
                ingress_class: Setting::Value(String::new()),
                ..Level::default()
            },
        }
    }

    /// The answer the rules enforce for this record; `decided_by` names the record
    /// ([`LevelName::LastDeployed`]).
    pub fn resolved(&self) -> ResolvedIngress {
        match self {
            DeployedIngress::Dedicated => ResolvedIngress::Dedicated {
                decided_by: LevelName::LastDeployed,
            },
            DeployedIngress::Class(class) if !class.is_empty() => ResolvedIngress::Class {
                class: class.clone(),
                decided_by: ClassOrigin::Level(LevelName::LastDeployed),
            },
            DeployedIngress::Class(_) | DeployedIngress::NoClass => ResolvedIngress::NoClass {
                decided_by: LevelName::LastDeployed,
            },
        }
    }

    /// The class an Ingress is served by: the dedicated controller's implementation or the
    /// shared class; `None` for no class.
    pub fn enforced_class(&self) -> Option<&str> {
        match self {
            DeployedIngress::Dedicated => Some(DEDICATED_CONTROLLER_CLASS),
            DeployedIngress::Class(class) if !class.is_empty() => Some(class),
            DeployedIngress::Class(_) | DeployedIngress::NoClass => None,
        }
    }

    pub fn is_dedicated(&self) -> bool {
        matches!(self, DeployedIngress::Dedicated)
    }
}

/// `dedicated`, `class:<name>` or `no-class`: the form of `--last-deployed`, the webhook's
/// log and its debug endpoint.
impl fmt::Display for DeployedIngress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeployedIngress::Dedicated => f.write_str("dedicated"),
            DeployedIngress::Class(class) => write!(f, "class:{class}"),
            DeployedIngress::NoClass => f.write_str("no-class"),
        }
    }
}

/// A `--last-deployed` value that is none of `dedicated`, `class:<name>`, `no-class`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "{0:?} is not a last-deployed setting: expected `dedicated`, `class:<name>` (e.g. class:nginx) or `no-class`"
)]
pub struct ParseDeployedError(String);

impl FromStr for DeployedIngress {
    type Err = ParseDeployedError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim() {
            "dedicated" => Ok(DeployedIngress::Dedicated),
            "no-class" | "class:" => Ok(DeployedIngress::NoClass),
            other => match other.strip_prefix("class:") {
                Some(class) => Ok(DeployedIngress::Class(class.to_owned())),
                None => Err(ParseDeployedError(text.to_owned())),
            },
        }
    }
}

/// Deserialises the level form (see [`DeployedIngress::from_record_level`]).
impl<'de> Deserialize<'de> for DeployedIngress {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Level::deserialize(deserializer).map(|level| Self::from_record_level(&level))
    }
}

/// Which settings applied to a deployment's Ingresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SettingsSource {
    /// Its record of what it was last deployed with (W5).
    Record,
    /// Cluster, environment and deployment levels: it has no record.
    Levels,
}

impl SettingsSource {
    pub fn as_str(self) -> &'static str {
        match self {
            SettingsSource::Record => "record",
            SettingsSource::Levels => "levels",
        }
    }
}

impl fmt::Display for SettingsSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The settings that apply to a deployment's Ingresses, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppliedSettings {
    /// What the rules enforce ([`enforce`](crate::enforce) takes this).
    pub resolved: ResolvedIngress,
    /// Whether the record or the levels decided.
    pub source: SettingsSource,
    /// What the levels resolve to now. With a record that differs from it, the deployment
    /// moves to this when Styrmin next redeploys it, not before.
    pub levels: ResolvedIngress,
}

impl AppliedSettings {
    /// The applied settings without their origin.
    pub fn applied(&self) -> DeployedIngress {
        DeployedIngress::from_resolved(&self.resolved)
    }

    /// True when the record holds the deployment on other settings than the levels give
    /// now: it waits for Styrmin to redeploy it (a transition is under way).
    pub fn waits_for_redeploy(&self) -> bool {
        self.source == SettingsSource::Record
            && DeployedIngress::from_resolved(&self.levels) != self.applied()
    }
}

/// The key that decided a resolved answer: `environment.dedicated_ingress`,
/// `cluster.ingress_class`, `last_deployed.ingress_class`, or `the cluster default`.
pub fn decided_by_key(resolved: &ResolvedIngress) -> String {
    match resolved {
        ResolvedIngress::Dedicated { decided_by } => format!("{decided_by}.dedicated_ingress"),
        ResolvedIngress::Class {
            decided_by: ClassOrigin::Level(level),
            ..
        }
        | ResolvedIngress::NoClass { decided_by: level } => format!("{level}.ingress_class"),
        ResolvedIngress::Class {
            decided_by: ClassOrigin::ClusterDefault,
            ..
        } => "the cluster default".to_owned(),
    }
}

impl AppliedSettings {
    /// One sentence: which settings applied and why.
    pub fn why(&self) -> String {
        let applied = self.applied();
        let levels = DeployedIngress::from_resolved(&self.levels);
        let by = decided_by_key(&self.levels);
        match self.source {
            SettingsSource::Levels => {
                format!("no last-deployed record: the levels decide, {applied} (decided by {by})")
            }
            SettingsSource::Record if applied == levels => format!(
                "the last-deployed record decides (W5): {applied}, which is also what the levels give now (decided by {by})"
            ),
            SettingsSource::Record => format!(
                "the last-deployed record decides (W5): {applied}; the levels now give {levels} (decided by {by}), \
                 which the deployment gets only when Styrmin redeploys it"
            ),
        }
    }
}

/// W5: the deployment's record decides when it has one; otherwise R1 and R2 over its levels.
pub fn settings_for(record: Option<&DeployedIngress>, levels: &Levels<'_>) -> AppliedSettings {
    let from_levels = resolve(levels);
    match record {
        Some(record) => AppliedSettings {
            resolved: record.resolved(),
            source: SettingsSource::Record,
            levels: from_levels,
        },
        None => AppliedSettings {
            resolved: from_levels.clone(),
            source: SettingsSource::Levels,
            levels: from_levels,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DEFAULT_CLUSTER_CLASS;

    fn dedicated_level() -> Level {
        Level {
            dedicated_ingress: Setting::Value(DedicatedIngress::default()),
            ..Level::default()
        }
    }

    fn class_level(class: &str) -> Level {
        Level {
            ingress_class: Setting::Value(class.to_owned()),
            ..Level::default()
        }
    }

    #[test]
    fn w5_the_record_decides_whatever_the_levels_say() {
        let cluster = dedicated_level();
        let levels = Levels {
            cluster: &cluster,
            environment: None,
            deployment: None,
        };
        let record = DeployedIngress::Class("nginx".into());
        let applied = settings_for(Some(&record), &levels);
        assert_eq!(applied.source, SettingsSource::Record);
        assert_eq!(applied.resolved.enforced_class(), Some("nginx"));
        assert!(applied.levels.is_dedicated());
        assert!(applied.waits_for_redeploy());
        assert_eq!(applied.applied(), record);
        assert_eq!(
            applied.why(),
            "the last-deployed record decides (W5): class:nginx; the levels now give dedicated \
             (decided by cluster.dedicated_ingress), which the deployment gets only when Styrmin redeploys it"
        );
    }

    #[test]
    fn w5_without_a_record_the_levels_decide() {
        let cluster = class_level("contour");
        let env = dedicated_level();
        let levels = Levels {
            cluster: &cluster,
            environment: Some(&env),
            deployment: None,
        };
        let applied = settings_for(None, &levels);
        assert_eq!(applied.source, SettingsSource::Levels);
        assert_eq!(
            applied.resolved,
            ResolvedIngress::Dedicated {
                decided_by: LevelName::Environment
            }
        );
        assert!(!applied.waits_for_redeploy());
        assert_eq!(
            applied.why(),
            "no last-deployed record: the levels decide, dedicated (decided by environment.dedicated_ingress)"
        );
    }

    #[test]
    fn a_record_equal_to_the_levels_waits_for_nothing() {
        let cluster = dedicated_level();
        let levels = Levels {
            cluster: &cluster,
            environment: None,
            deployment: None,
        };
        let applied = settings_for(Some(&DeployedIngress::Dedicated), &levels);
        assert_eq!(applied.source, SettingsSource::Record);
        assert!(!applied.waits_for_redeploy());
        assert_eq!(
            applied.resolved,
            ResolvedIngress::Dedicated {
                decided_by: LevelName::LastDeployed
            }
        );
    }

    #[test]
    fn the_level_form_reads_like_a_cluster_level_and_round_trips() {
        let read = |yaml: &str| serde_saphyr::from_str::<DeployedIngress>(yaml).unwrap();
        assert_eq!(read("dedicated_ingress: {}"), DeployedIngress::Dedicated);
        assert_eq!(
            read("{dedicated_ingress: {replicas: 2}, ingress_class: nginx}"),
            DeployedIngress::Dedicated
        );
        assert_eq!(
            read("ingress_class: nginx"),
            DeployedIngress::Class("nginx".into())
        );
        assert_eq!(read("ingress_class: \"\""), DeployedIngress::NoClass);
        assert_eq!(read("ingress_class: null"), DeployedIngress::NoClass);
        assert_eq!(
            read("{}"),
            DeployedIngress::Class(DEFAULT_CLUSTER_CLASS.into())
        );
        assert!(serde_saphyr::from_str::<DeployedIngress>("dedicated_ingress: true").is_err());
        assert!(serde_saphyr::from_str::<DeployedIngress>("ingres_class: x").is_err());
        for record in [
            DeployedIngress::Dedicated,
            DeployedIngress::Class("nginx".into()),
            DeployedIngress::NoClass,
        ] {
            assert_eq!(
                DeployedIngress::from_record_level(&record.as_level()),
                record
            );
            assert_eq!(DeployedIngress::from_resolved(&record.resolved()), record);
        }
    }

    #[test]
    fn the_text_form_round_trips() {
        for (text, record) in [
            ("dedicated", DeployedIngress::Dedicated),
            ("class:nginx", DeployedIngress::Class("nginx".into())),
            ("no-class", DeployedIngress::NoClass),
        ] {
            assert_eq!(text.parse::<DeployedIngress>().unwrap(), record);
            assert_eq!(record.to_string(), text);
        }
        assert_eq!(
            "class:".parse::<DeployedIngress>().unwrap(),
            DeployedIngress::NoClass
        );
        let err = "nginx".parse::<DeployedIngress>().unwrap_err().to_string();
        assert!(err.contains("class:<name>"), "{err}");
    }

    #[test]
    fn enforced_class_of_a_record() {
        assert_eq!(
            DeployedIngress::Dedicated.enforced_class(),
            Some(DEDICATED_CONTROLLER_CLASS)
        );
        assert_eq!(
            DeployedIngress::Class("kong".into()).enforced_class(),
            Some("kong")
        );
        assert_eq!(DeployedIngress::NoClass.enforced_class(), None);
    }
}
