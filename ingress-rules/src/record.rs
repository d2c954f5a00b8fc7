//! rule W5: which settings apply to a deployment's Ingresses — the record of what it was
//! last deployed with, or the three levels when it has none.
//!
//! Styrmin never moves an application onto a dedicated controller that is not `RUNNING`
//! with the new values: the applications stay on their current ingress until Styrmin
//! redeploys them. So what an Ingress of a deployment gets is decided by what that
//! deployment was last deployed with, not by the newest cluster or environment values; the
//! levels decide only for a deployment that has no record ([`settings_for`]).
//!
//! The record is the *resolved* answer, an [`IngressTarget`] (dedicated, a class, or no
//! class), not a level: it says what the deployment's Ingresses were rendered with, and
//! nothing in it can be inherited.

use std::fmt;

use serde::{Deserialize, Deserializer};

use crate::level::Level;
use crate::resolve::{Levels, Origin, ResolvedIngress, resolve};
use crate::target::IngressTarget;

/// The level form of a record ([`IngressTarget::as_level`] writes it).
impl IngressTarget {
    /// Reads a record written as one level, read like a cluster level: any
    /// `dedicated_ingress` object is [`Dedicated`](Self::Dedicated) (whatever the class),
    /// `ingress_class: ""` or `null` is [`NoClass`](Self::NoClass), a name is that class,
    /// and `{}` is the cluster default `traefik`.
    pub fn from_record_level(level: &Level) -> Self {
        resolve(&Levels {
            cluster: level,
            environment: None,
            deployment: None,
        })
        .target
    }
}

/// Deserialises the level form of a record (see [`IngressTarget::from_record_level`]).
impl<'de> Deserialize<'de> for IngressTarget {
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
    /// What the rules enforce ([`enforce`](crate::enforce) takes its target); its origin is
    /// [`Origin::LastDeployed`] when the record decided.
    pub resolved: ResolvedIngress,
    /// What the levels resolve to now. With a record that differs from it, the deployment
    /// moves to this when Styrmin next redeploys it, not before.
    pub levels: ResolvedIngress,
}

impl AppliedSettings {
    /// Whether the record or the levels decided.
    pub fn source(&self) -> SettingsSource {
        match self.resolved.origin {
            Origin::LastDeployed => SettingsSource::Record,
            Origin::Level(_) | Origin::ClusterDefault => SettingsSource::Levels,
        }
    }

    /// The applied settings without their origin.
    pub fn applied(&self) -> &IngressTarget {
        &self.resolved.target
    }

    /// True when the record holds the deployment on other settings than the levels give
    /// now: it waits for Styrmin to redeploy it (a transition is under way). Without a
    /// record the two are the same answer.
    pub fn waits_for_redeploy(&self) -> bool {
        self.resolved.target != self.levels.target
    }

    /// One sentence: which settings applied and why.
    pub fn why(&self) -> String {
        let applied = self.applied();
        let levels = &self.levels.target;
        let by = self.levels.decided_by();
        match self.source() {
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
pub fn settings_for(record: Option<&IngressTarget>, levels: &Levels<'_>) -> AppliedSettings {
    let from_levels = resolve(levels);
    match record {
        Some(record) => AppliedSettings {
            resolved: ResolvedIngress {
                target: record.clone(),
                origin: Origin::LastDeployed,
            },
            levels: from_levels,
        },
        None => AppliedSettings {
            resolved: from_levels.clone(),
            levels: from_levels,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classes::DEFAULT_CLUSTER_CLASS;
    use crate::level::{DedicatedIngress, LevelName, Setting};

    #[test]
    fn the_level_form_reads_like_a_cluster_level_and_round_trips() {
        let read = |yaml: &str| serde_saphyr::from_str::<IngressTarget>(yaml).unwrap();
        assert_eq!(read("dedicated_ingress: {}"), IngressTarget::Dedicated);
        assert_eq!(
            read("{dedicated_ingress: {replicas: 2}, ingress_class: nginx}"),
            IngressTarget::Dedicated
        );
        assert_eq!(read("ingress_class: nginx"), IngressTarget::class("nginx"));
        assert_eq!(read("ingress_class: \"\""), IngressTarget::NoClass);
        assert_eq!(read("ingress_class: null"), IngressTarget::NoClass);
        assert_eq!(read("{}"), IngressTarget::class(DEFAULT_CLUSTER_CLASS));
        assert!(serde_saphyr::from_str::<IngressTarget>("dedicated_ingress: true").is_err());
        assert!(serde_saphyr::from_str::<IngressTarget>("ingres_class: x").is_err());
        for record in [
            IngressTarget::Dedicated,
            IngressTarget::class("nginx"),
            IngressTarget::NoClass,
        ] {
            assert_eq!(IngressTarget::from_record_level(&record.as_level()), record);
        }
    }

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

    fn cluster_only(cluster: &Level) -> Levels<'_> {
        Levels {
            cluster,
            environment: None,
            deployment: None,
        }
    }

    #[test]
    fn w5_the_record_decides_whatever_the_levels_say() {
        let cluster = dedicated_level();
        let record = IngressTarget::class("nginx");
        let applied = settings_for(Some(&record), &cluster_only(&cluster));
        assert_eq!(applied.source(), SettingsSource::Record);
        assert_eq!(
            applied.resolved,
            ResolvedIngress {
                target: IngressTarget::class("nginx"),
                origin: Origin::LastDeployed
            }
        );
        assert_eq!(applied.resolved.target.enforced_class(), Some("nginx"));
        assert!(applied.levels.target.is_dedicated());
        assert!(applied.waits_for_redeploy());
        assert_eq!(applied.applied(), &record);
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
        assert_eq!(applied.source(), SettingsSource::Levels);
        assert_eq!(
            applied.resolved,
            ResolvedIngress {
                target: IngressTarget::Dedicated,
                origin: Origin::Level(LevelName::Environment)
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
        let applied = settings_for(Some(&IngressTarget::Dedicated), &cluster_only(&cluster));
        assert_eq!(applied.source(), SettingsSource::Record);
        assert!(!applied.waits_for_redeploy());
        assert_eq!(
            applied.resolved,
            ResolvedIngress {
                target: IngressTarget::Dedicated,
                origin: Origin::LastDeployed
            }
        );
    }

    #[test]
    fn w5_settings_source_names() {
        assert_eq!(SettingsSource::Record.as_str(), "record");
        assert_eq!(SettingsSource::Levels.as_str(), "levels");
        assert_eq!(SettingsSource::Record.to_string(), "record");
        assert_eq!(SettingsSource::Levels.to_string(), "levels");
    }

    #[test]
    fn w5_why_says_whether_the_record_and_the_levels_agree() {
        let cluster = class_level("nginx");
        let levels = cluster_only(&cluster);
        let same = settings_for(Some(&IngressTarget::class("nginx")), &levels).why();
        assert!(same.contains("also what the levels give now"), "{same}");
        let other = settings_for(Some(&IngressTarget::Dedicated), &levels).why();
        assert!(other.contains("only when Styrmin redeploys it"), "{other}");
        assert!(!other.contains("also what the levels give now"), "{other}");
    }
}
