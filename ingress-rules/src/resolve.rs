//! R1 and R2: from three levels to one answer.

use crate::level::{Level, LevelName, Setting};
use crate::{DEDICATED_CONTROLLER_CLASS, DEFAULT_CLUSTER_CLASS};

/// The three levels of one deployment. An unknown environment or deployment counts as
/// not set (rule W1), which is what `None` means here.
#[derive(Clone, Copy, Debug)]
pub struct Levels<'a> {
    pub cluster: &'a Level,
    pub environment: Option<&'a Level>,
    pub deployment: Option<&'a Level>,
}

/// Where a resolved class came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClassOrigin {
    /// The most specific level that sets `ingress_class`.
    Level(LevelName),
    /// No level mentions `ingress_class`: the cluster default, `traefik`.
    ClusterDefault,
}

/// What the rules say an application's Ingresses get.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResolvedIngress {
    /// R1 on: the environment's dedicated controller serves them (R3).
    Dedicated { decided_by: LevelName },
    /// R1 off, R2 non-empty: this shared class serves them (R4).
    Class {
        class: String,
        decided_by: ClassOrigin,
    },
    /// R1 off, R2 empty: the chart's own class is kept (R5). `decided_by` is the level that
    /// set `""`, or the cluster's `null` when no level set a class.
    NoClass { decided_by: LevelName },
}

impl ResolvedIngress {
    /// The class an Ingress is served by, when the rules decide one: the dedicated
    /// controller's implementation or the shared class.
    pub fn enforced_class(&self) -> Option<&str> {
        match self {
            ResolvedIngress::Dedicated { .. } => Some(DEDICATED_CONTROLLER_CLASS),
            ResolvedIngress::Class { class, .. } => Some(class),
            ResolvedIngress::NoClass { .. } => None,
        }
    }

    /// True when the dedicated controller serves the application (R1).
    pub fn is_dedicated(&self) -> bool {
        matches!(self, ResolvedIngress::Dedicated { .. })
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
    if let Some(decided_by) = dedicated {
        return ResolvedIngress::Dedicated { decided_by };
    }

    // R2: the most specific level that sets a value, `""` included.
    let set = specific_first
        .iter()
        .find_map(|(name, level)| (*level)?.ingress_class.value().map(|class| (*name, class)));
    match set {
        Some((decided_by, class)) if class.is_empty() => ResolvedIngress::NoClass { decided_by },
        Some((decided_by, class)) => ResolvedIngress::Class {
            class: class.clone(),
            decided_by: ClassOrigin::Level(decided_by),
        },
        None => match levels.cluster.ingress_class {
            // Only the cluster tells `null` from absent.
            Setting::Null => ResolvedIngress::NoClass {
                decided_by: LevelName::Cluster,
            },
            Setting::Absent | Setting::Value(_) => ResolvedIngress::Class {
                class: DEFAULT_CLUSTER_CLASS.to_owned(),
                decided_by: ClassOrigin::ClusterDefault,
            },
        },
    }
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
        }
    }

    fn class(class: &str, decided_by: ClassOrigin) -> ResolvedIngress {
        ResolvedIngress::Class {
            class: class.to_owned(),
            decided_by,
        }
    }

    const CLUSTER: ClassOrigin = ClassOrigin::Level(LevelName::Cluster);
    const ENV: ClassOrigin = ClassOrigin::Level(LevelName::Environment);
    const DEPL: ClassOrigin = ClassOrigin::Level(LevelName::Deployment);

    // R2: three levels × absent/null/""/value. Expected values come from the table of
    // docs/rules.md §1.
    #[rstest]
    #[case::all_absent(
        C::Absent,
        C::Absent,
        C::Absent,
        class("traefik", ClassOrigin::ClusterDefault)
    )]
    #[case::cluster_null(C::Null, C::Absent, C::Absent, ResolvedIngress::NoClass { decided_by: LevelName::Cluster })]
    #[case::cluster_empty(C::Empty, C::Absent, C::Absent, ResolvedIngress::NoClass { decided_by: LevelName::Cluster })]
    #[case::cluster_value(C::Named("nginx"), C::Absent, C::Absent, class("nginx", CLUSTER))]
    #[case::env_null_inherits_cluster_default(
        C::Absent,
        C::Null,
        C::Absent,
        class("traefik", ClassOrigin::ClusterDefault)
    )]
    #[case::env_null_inherits_cluster_value(
        C::Named("nginx"),
        C::Null,
        C::Absent,
        class("nginx", CLUSTER)
    )]
    #[case::env_null_inherits_cluster_null(C::Null, C::Null, C::Absent, ResolvedIngress::NoClass { decided_by: LevelName::Cluster })]
    #[case::env_empty_overrides_cluster(C::Named("nginx"), C::Empty, C::Absent, ResolvedIngress::NoClass { decided_by: LevelName::Environment })]
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
    #[case::depl_null_inherits_env_empty(C::Named("nginx"), C::Empty, C::Null, ResolvedIngress::NoClass { decided_by: LevelName::Environment })]
    #[case::depl_empty_overrides_all(C::Named("nginx"), C::Named("haproxy"), C::Empty, ResolvedIngress::NoClass { decided_by: LevelName::Deployment })]
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
    #[case::depl_null_env_absent_cluster_null(C::Null, C::Absent, C::Null, ResolvedIngress::NoClass { decided_by: LevelName::Cluster })]
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
            Some(decided_by) => assert_eq!(got, ResolvedIngress::Dedicated { decided_by }),
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
        assert_eq!(
            got,
            ResolvedIngress::Dedicated {
                decided_by: LevelName::Cluster
            }
        );
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
        assert_eq!(got, class("traefik", ClassOrigin::ClusterDefault));
    }

    #[test]
    fn enforced_class_names_the_controller() {
        assert_eq!(
            ResolvedIngress::Dedicated {
                decided_by: LevelName::Cluster
            }
            .enforced_class(),
            Some("traefik")
        );
        assert_eq!(class("nginx", CLUSTER).enforced_class(), Some("nginx"));
        assert_eq!(
            ResolvedIngress::NoClass {
                decided_by: LevelName::Cluster
            }
            .enforced_class(),
            None
        );
    }
}
