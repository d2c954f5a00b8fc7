//! R1 and R2: from three levels to one answer.

use std::fmt;

use crate::classes::DEFAULT_CLUSTER_CLASS;
use crate::level::{Level, LevelName, Setting};
use crate::mode::EnforcementMode;
use crate::target::IngressTarget;

/// The three levels of one deployment. An unknown environment or deployment counts as
/// not set (rule W1), which is what `None` means here.
#[derive(Clone, Copy, Debug)]
pub struct Levels<'a> {
    pub cluster: &'a Level,
    pub environment: Option<&'a Level>,
    pub deployment: Option<&'a Level>,
}

/// Where an answer came from: the key that decided it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Origin {
    /// The most specific level that sets the deciding key (`dedicated_ingress` for a
    /// dedicated answer, else `ingress_class`; for no class, the level that set `""`, or the
    /// cluster's `null`).
    Level(LevelName),
    /// No level mentions `ingress_class`: the cluster default, `traefik`.
    ClusterDefault,
    /// The deployment's record of what it was last deployed with (rule W5), which decides
    /// alone when it exists (see [`crate::settings_for`]).
    LastDeployed,
}

/// What the rules say an application's Ingresses get, and what decided it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedIngress {
    pub target: IngressTarget,
    pub origin: Origin,
}

impl ResolvedIngress {
    /// The key that decided the answer, as `explain`, the webhook's log and its debug
    /// endpoint show it: `environment.dedicated_ingress`, `cluster.ingress_class`,
    /// `last_deployed.ingress_class`, or `the cluster default`.
    pub fn decided_by(&self) -> impl fmt::Display + '_ {
        DecidedBy(self)
    }
}

struct DecidedBy<'a>(&'a ResolvedIngress);

impl fmt::Display for DecidedBy<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = if self.0.target.is_dedicated() {
            "dedicated_ingress"
        } else {
            "ingress_class"
        };
        match self.0.origin {
            Origin::Level(level) => write!(f, "{level}.{key}"),
            Origin::LastDeployed => write!(f, "last_deployed.{key}"),
            Origin::ClusterDefault => f.write_str("the cluster default"),
        }
    }
}

/// R1 then R2.
pub fn resolve(levels: &Levels<'_>) -> ResolvedIngress {
    // Most specific first: the first level that sets a key decides it.
    let specific_first = [
        (LevelName::Deployment, levels.deployment),
        (LevelName::Environment, levels.environment),
        (LevelName::Cluster, Some(levels.cluster)),
    ];

    // R1: any object at any level turns it on; no level can turn it off again, because
    // `null` and absent both mean "inherit" (and "off" at the cluster).
    let dedicated = specific_first
        .iter()
        .find_map(|(name, level)| (*level)?.dedicated_ingress.value().map(|_| *name));
    if let Some(level) = dedicated {
        return ResolvedIngress {
            target: IngressTarget::Dedicated,
            origin: Origin::Level(level),
        };
    }

    // R2: the most specific level that sets a value, `""` (no class) included.
    let set = specific_first
        .iter()
        .find_map(|(name, level)| (*level)?.ingress_class.value().map(|class| (*name, class)));
    match set {
        Some((level, class)) => ResolvedIngress {
            target: IngressTarget::class(class.as_str()),
            origin: Origin::Level(level),
        },
        None => match levels.cluster.ingress_class {
            // Only the cluster tells `null` from absent.
            Setting::Null => ResolvedIngress {
                target: IngressTarget::NoClass,
                origin: Origin::Level(LevelName::Cluster),
            },
            Setting::Absent | Setting::Value(_) => ResolvedIngress {
                target: IngressTarget::class(DEFAULT_CLUSTER_CLASS),
                origin: Origin::ClusterDefault,
            },
        },
    }
}

/// The mode that applies to a deployment, and the level that set it (`None`: no level
/// does, the default `enforce`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ResolvedMode {
    pub mode: EnforcementMode,
    pub origin: Option<LevelName>,
}

impl ResolvedMode {
    /// `environment.enforcement_mode`, or `the default` when no level sets it.
    pub fn decided_by(&self) -> String {
        match self.origin {
            Some(level) => format!("{level}.enforcement_mode"),
            None => "the default".to_owned(),
        }
    }
}

/// The most specific level that sets `enforcement_mode` decides; `null` and a left-out key
/// inherit at every level (the cluster's inherit the default, `enforce`). A deployment's
/// last-deployed record (W5) plays no part: the mode says what is done now, not what the
/// Ingresses were rendered with.
pub fn resolve_mode(levels: &Levels<'_>) -> ResolvedMode {
    [
        (LevelName::Deployment, levels.deployment),
        (LevelName::Environment, levels.environment),
        (LevelName::Cluster, Some(levels.cluster)),
    ]
    .into_iter()
    .find_map(|(name, level)| {
        level?.enforcement_mode.value().map(|mode| ResolvedMode {
            mode: *mode,
            origin: Some(name),
        })
    })
    .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;
    use crate::level::DedicatedIngress;

    /// One cell of the resolution table: how a level writes `ingress_class`.
    #[derive(Clone, Copy, Debug)]
    enum C {
        Absent,
        Null,
        Empty,
        Named(&'static str),
    }

    fn level(class: C, dedicated: bool) -> Level {
        Level {
            ingress_class: match class {
                C::Absent => Setting::Absent,
                C::Null => Setting::Null,
                C::Empty => Setting::Value(String::new()),
                C::Named(n) => Setting::Value(n.to_owned()),
            },
            dedicated_ingress: if dedicated {
                Setting::Value(DedicatedIngress::default())
            } else {
                Setting::Absent
            },
            ..Level::default()
        }
    }

    fn class(class: &str, origin: Origin) -> ResolvedIngress {
        ResolvedIngress {
            target: IngressTarget::class(class),
            origin,
        }
    }

    fn no_class(level: LevelName) -> ResolvedIngress {
        ResolvedIngress {
            target: IngressTarget::NoClass,
            origin: Origin::Level(level),
        }
    }

    fn dedicated(level: LevelName) -> ResolvedIngress {
        ResolvedIngress {
            target: IngressTarget::Dedicated,
            origin: Origin::Level(level),
        }
    }

    const CLUSTER: Origin = Origin::Level(LevelName::Cluster);
    const ENV: Origin = Origin::Level(LevelName::Environment);
    const DEPL: Origin = Origin::Level(LevelName::Deployment);

    // R2: three levels × absent/null/""/value. Expected values come from the table of
    // docs/rules.md §1.
    #[rstest]
    #[case::all_absent(
        C::Absent,
        C::Absent,
        C::Absent,
        class("traefik", Origin::ClusterDefault)
    )]
    #[case::cluster_null(C::Null, C::Absent, C::Absent, no_class(LevelName::Cluster))]
    #[case::cluster_empty(C::Empty, C::Absent, C::Absent, no_class(LevelName::Cluster))]
    #[case::cluster_value(C::Named("nginx"), C::Absent, C::Absent, class("nginx", CLUSTER))]
    #[case::env_null_inherits_cluster_default(
        C::Absent,
        C::Null,
        C::Absent,
        class("traefik", Origin::ClusterDefault)
    )]
    #[case::env_null_inherits_cluster_value(
        C::Named("nginx"),
        C::Null,
        C::Absent,
        class("nginx", CLUSTER)
    )]
    #[case::env_null_inherits_cluster_null(
        C::Null,
        C::Null,
        C::Absent,
        no_class(LevelName::Cluster)
    )]
    #[case::env_empty_overrides_cluster(
        C::Named("nginx"),
        C::Empty,
        C::Absent,
        no_class(LevelName::Environment)
    )]
    #[case::env_value_overrides_cluster(
        C::Named("nginx"),
        C::Named("haproxy"),
        C::Absent,
        class("haproxy", ENV)
    )]
    #[case::env_value_overrides_cluster_null(
        C::Null,
        C::Named("haproxy"),
        C::Absent,
        class("haproxy", ENV)
    )]
    #[case::depl_absent_inherits_env(
        C::Null,
        C::Named("haproxy"),
        C::Absent,
        class("haproxy", ENV)
    )]
    #[case::depl_null_inherits_env(
        C::Named("nginx"),
        C::Named("haproxy"),
        C::Null,
        class("haproxy", ENV)
    )]
    #[case::depl_null_inherits_env_empty(
        C::Named("nginx"),
        C::Empty,
        C::Null,
        no_class(LevelName::Environment)
    )]
    #[case::depl_empty_overrides_all(
        C::Named("nginx"),
        C::Named("haproxy"),
        C::Empty,
        no_class(LevelName::Deployment)
    )]
    #[case::depl_value_overrides_all(
        C::Named("nginx"),
        C::Named("haproxy"),
        C::Named("contour"),
        class("contour", DEPL)
    )]
    #[case::depl_value_overrides_cluster_null(
        C::Null,
        C::Absent,
        C::Named("contour"),
        class("contour", DEPL)
    )]
    #[case::depl_value_over_env_empty(
        C::Absent,
        C::Empty,
        C::Named("contour"),
        class("contour", DEPL)
    )]
    #[case::depl_null_env_absent_cluster_null(
        C::Null,
        C::Absent,
        C::Null,
        no_class(LevelName::Cluster)
    )]
    #[case::yaml_bool_words_are_classes(C::Named("on"), C::Absent, C::Absent, class("on", CLUSTER))]
    fn r2_class_resolution(
        #[case] cluster: C,
        #[case] environment: C,
        #[case] deployment: C,
        #[case] expected: ResolvedIngress,
    ) {
        let (c, e, d) = (
            level(cluster, false),
            level(environment, false),
            level(deployment, false),
        );
        let got = resolve(&Levels {
            cluster: &c,
            environment: Some(&e),
            deployment: Some(&d),
        });
        assert_eq!(got, expected);
    }

    // R1: dedicated at each level, with classes that must be ignored (R3).
    #[rstest]
    #[case::off_everywhere(false, false, false, None)]
    #[case::cluster(true, false, false, Some(LevelName::Cluster))]
    #[case::environment(false, true, false, Some(LevelName::Environment))]
    #[case::deployment(false, false, true, Some(LevelName::Deployment))]
    #[case::env_over_cluster(true, true, false, Some(LevelName::Environment))]
    #[case::deployment_over_all(true, true, true, Some(LevelName::Deployment))]
    #[case::deployment_over_cluster(true, false, true, Some(LevelName::Deployment))]
    fn r1_dedicated_resolution(
        #[case] cluster: bool,
        #[case] environment: bool,
        #[case] deployment: bool,
        #[case] decided_by: Option<LevelName>,
    ) {
        let (c, e, d) = (
            level(C::Named("nginx"), cluster),
            level(C::Empty, environment),
            level(C::Named("contour"), deployment),
        );
        let got = resolve(&Levels {
            cluster: &c,
            environment: Some(&e),
            deployment: Some(&d),
        });
        match decided_by {
            Some(level) => assert_eq!(got, dedicated(level)),
            None => assert_eq!(got, class("contour", DEPL)),
        }
    }

    #[test]
    fn r1_environment_null_cannot_turn_off_the_clusters_dedicated_ingress() {
        let cluster = level(C::Absent, true);
        let env = Level {
            dedicated_ingress: Setting::Null,
            ..Level::default()
        };
        let deployment = Level {
            dedicated_ingress: Setting::Null,
            ..Level::default()
        };
        let got = resolve(&Levels {
            cluster: &cluster,
            environment: Some(&env),
            deployment: Some(&deployment),
        });
        assert_eq!(got, dedicated(LevelName::Cluster));
    }

    #[test]
    fn w1_unknown_levels_count_as_not_set() {
        let cluster = level(C::Named("nginx"), false);
        let got = resolve(&Levels {
            cluster: &cluster,
            environment: None,
            deployment: None,
        });
        assert_eq!(got, class("nginx", CLUSTER));
        let empty_cluster = Level::default();
        let got = resolve(&Levels {
            cluster: &empty_cluster,
            environment: None,
            deployment: None,
        });
        assert_eq!(got, class("traefik", Origin::ClusterDefault));
    }

    // The "decided by" text of `explain`, the webhook's log and its debug endpoint.
    #[rstest]
    #[case::dedicated_by_a_level(
        dedicated(LevelName::Environment),
        "environment.dedicated_ingress"
    )]
    #[case::class_by_a_level(class("nginx", CLUSTER), "cluster.ingress_class")]
    #[case::no_class_by_a_level(no_class(LevelName::Deployment), "deployment.ingress_class")]
    #[case::cluster_default(class("traefik", Origin::ClusterDefault), "the cluster default")]
    #[case::dedicated_record(
        ResolvedIngress { target: IngressTarget::Dedicated, origin: Origin::LastDeployed },
        "last_deployed.dedicated_ingress"
    )]
    #[case::class_record(
        ResolvedIngress { target: IngressTarget::class("nginx"), origin: Origin::LastDeployed },
        "last_deployed.ingress_class"
    )]
    #[case::no_class_record(
        ResolvedIngress { target: IngressTarget::NoClass, origin: Origin::LastDeployed },
        "last_deployed.ingress_class"
    )]
    fn decided_by_names_the_key(#[case] resolved: ResolvedIngress, #[case] expected: &str) {
        assert_eq!(resolved.decided_by().to_string(), expected);
    }
}
