//! The common ingress controllers: the `spec.controller` of their IngressClasses and the
//! Ingress annotations each one reads. `plan` uses it to say which annotations an Ingress
//! loses when it moves to another controller (`annotations_not_carried`).
//!
//! One table, [`KNOWN_CONTROLLERS`]; where each entry comes from is in `docs/rollout.md`
//! ("Annotations a move leaves behind"). A controller that is not in it is reported as
//! unknown: nothing here guesses what it reads.

/// One controller of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KnownController {
    /// Its id in the annotation catalog (`webhook/src/annotation_catalog.json`).
    pub id: &'static str,
    /// How people call it.
    pub name: &'static str,
    /// The `spec.controller` values of its IngressClasses. A value also matches with a
    /// `/suffix` (HAProxy Kubernetes Ingress writes `haproxy.org/ingress-controller/<class>`,
    /// haproxy-ingress's `--controller-class` appends one).
    pub controllers: &'static [&'static str],
    /// Annotation key prefixes it reads (`nginx.ingress.kubernetes.io/`).
    pub prefixes: &'static [&'static str],
    /// Whole annotation keys it reads besides those.
    pub keys: &'static [&'static str],
}

impl KnownController {
    /// Whether an IngressClass with this `spec.controller` is served by it.
    pub fn serves(&self, controller: &str) -> bool {
        self.controllers.iter().any(|known| {
            controller
                .strip_prefix(known)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
        })
    }

    /// Whether it reads the annotation `key`.
    pub fn reads(&self, key: &str) -> bool {
        self.prefixes.iter().any(|prefix| key.starts_with(prefix)) || self.keys.contains(&key)
    }
}

/// The table. Istio reads no annotation of its own on an Ingress (only the class).
pub const KNOWN_CONTROLLERS: &[KnownController] = &[
    KnownController {
        id: "ingress-nginx",
        name: "ingress-nginx",
        controllers: &["k8s.io/ingress-nginx"],
        prefixes: &["nginx.ingress.kubernetes.io/"],
        keys: &[],
    },
    KnownController {
        id: "traefik",
        name: "Traefik",
        controllers: &["traefik.io/ingress-controller"],
        prefixes: &["traefik.ingress.kubernetes.io/"],
        keys: &[],
    },
    KnownController {
        id: "traefik-ingress-nginx",
        name: "Traefik (Kubernetes Ingress NGINX provider)",
        // Its `controllerClass` option: by default `k8s.io/ingress-nginx`, ingress-nginx's own
        // string, so a class of it cannot be told apart from ingress-nginx's by
        // `spec.controller`; `plan --target CLASS=traefik-ingress-nginx` names it.
        controllers: &[],
        prefixes: &["nginx.ingress.kubernetes.io/"],
        keys: &[],
    },
    KnownController {
        id: "haproxy",
        name: "HAProxy Kubernetes Ingress",
        controllers: &["haproxy.org/ingress-controller"],
        prefixes: &["haproxy.org/"],
        keys: &[],
    },
    KnownController {
        id: "haproxy-ingress",
        name: "haproxy-ingress",
        controllers: &["haproxy-ingress.github.io/controller"],
        prefixes: &["haproxy-ingress.github.io/", "ingress.kubernetes.io/"],
        keys: &[],
    },
    KnownController {
        id: "contour",
        name: "Contour",
        controllers: &["projectcontour.io/ingress-controller"],
        prefixes: &["projectcontour.io/", "contour.heptio.com/"],
        keys: &[
            "ingress.kubernetes.io/force-ssl-redirect",
            "kubernetes.io/ingress.allow-http",
        ],
    },
    KnownController {
        id: "aws-load-balancer-controller",
        name: "AWS Load Balancer Controller",
        controllers: &["ingress.k8s.aws/alb", "eks.amazonaws.com/alb"],
        prefixes: &["alb.ingress.kubernetes.io/"],
        keys: &[],
    },
    KnownController {
        id: "gke",
        name: "GKE Ingress",
        controllers: &["k8s.io/ingress-gce"],
        prefixes: &["ingress.gcp.kubernetes.io/", "networking.gke.io/"],
        keys: &[
            "kubernetes.io/ingress.allow-http",
            "kubernetes.io/ingress.global-static-ip-name",
        ],
    },
    KnownController {
        id: "kong",
        name: "Kong",
        controllers: &["ingress-controllers.konghq.com/kong"],
        prefixes: &["konghq.com/"],
        keys: &[],
    },
    KnownController {
        id: "cilium",
        name: "Cilium",
        controllers: &["cilium.io/ingress-controller"],
        prefixes: &["ingress.cilium.io/"],
        keys: &[],
    },
    KnownController {
        id: "istio",
        name: "Istio",
        controllers: &["istio.io/ingress-controller"],
        prefixes: &[],
        keys: &[],
    },
    KnownController {
        id: "f5-nginx",
        name: "NGINX Ingress Controller (F5 NGINX)",
        controllers: &["nginx.org/ingress-controller"],
        prefixes: &["nginx.org/", "nginx.com/"],
        keys: &[],
    },
];

/// The table's entry with this catalog id.
pub fn by_id(id: &str) -> Option<&'static KnownController> {
    KNOWN_CONTROLLERS.iter().find(|c| c.id == id)
}

/// The table's entry for an IngressClass's `spec.controller`.
pub fn known(controller: &str) -> Option<&'static KnownController> {
    KNOWN_CONTROLLERS.iter().find(|c| c.serves(controller))
}

/// Whether some controller of the table reads the annotation `key`: the annotations an
/// Ingress keeps for the plan (their keys only).
pub fn is_controller_annotation(key: &str) -> bool {
    KNOWN_CONTROLLERS.iter().any(|c| c.reads(key))
}

/// What of an Ingress's annotations survives a move from one controller to another.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Carried<'a> {
    /// Everything the current controller reads, the target reads too (or there is nothing).
    All,
    /// The annotations the current controller reads and the target does not.
    Lost {
        from: &'static KnownController,
        to: &'static KnownController,
        keys: Vec<&'a str>,
    },
    /// The current controller is not in the table: what it reads is not known.
    UnknownFrom,
    /// The target is not in the table: whether it reads these annotations, which the
    /// current controller reads, is not known.
    UnknownTo {
        from: &'static KnownController,
        keys: Vec<&'a str>,
    },
}

/// The annotation `keys` of an Ingress that move from controller `from` to controller `to`
/// (both `spec.controller` values), judged by the table.
pub fn carried<'a>(keys: impl IntoIterator<Item = &'a str>, from: &str, to: &str) -> Carried<'a> {
    let Some(from) = known(from) else {
        return Carried::UnknownFrom;
    };
    let read: Vec<&str> = keys.into_iter().filter(|k| from.reads(k)).collect();
    match known(to) {
        None if read.is_empty() => Carried::All,
        None => Carried::UnknownTo { from, keys: read },
        Some(to) => {
            let lost: Vec<&str> = read.into_iter().filter(|k| !to.reads(k)).collect();
            if lost.is_empty() {
                Carried::All
            } else {
                Carried::Lost {
                    from,
                    to,
                    keys: lost,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_controller_matches_with_a_suffix_but_not_a_longer_name() {
        assert_eq!(
            known("haproxy.org/ingress-controller/haproxy").map(|c| c.name),
            Some("HAProxy Kubernetes Ingress")
        );
        assert_eq!(
            known("haproxy-ingress.github.io/controller/staging").map(|c| c.name),
            Some("haproxy-ingress")
        );
        assert_eq!(known("k8s.io/ingress-nginx-fork"), None);
        assert_eq!(known("example.com/ingress"), None);
        assert_eq!(
            known("eks.amazonaws.com/alb").map(|c| c.name),
            Some("AWS Load Balancer Controller")
        );
    }

    #[test]
    fn ids_are_unique_and_found() {
        for entry in KNOWN_CONTROLLERS {
            assert_eq!(by_id(entry.id), Some(entry), "{}", entry.id);
        }
        assert_eq!(by_id("nobody"), None);
    }

    #[test]
    fn every_entry_is_reachable_and_only_once() {
        for entry in KNOWN_CONTROLLERS {
            for controller in entry.controllers {
                assert_eq!(known(controller), Some(entry), "{controller}");
            }
        }
    }

    #[test]
    fn nginx_annotations_are_lost_on_haproxy_and_shared_keys_are_carried() {
        let keys = [
            "nginx.ingress.kubernetes.io/rewrite-target",
            "nginx.ingress.kubernetes.io/ssl-redirect",
            "kubernetes.io/ingress.allow-http",
        ];
        match carried(
            keys,
            "k8s.io/ingress-nginx",
            "haproxy.org/ingress-controller/haproxy",
        ) {
            Carried::Lost { from, to, keys } => {
                assert_eq!(
                    (from.name, to.name),
                    ("ingress-nginx", "HAProxy Kubernetes Ingress")
                );
                assert_eq!(
                    keys,
                    [
                        "nginx.ingress.kubernetes.io/rewrite-target",
                        "nginx.ingress.kubernetes.io/ssl-redirect"
                    ]
                );
            }
            other => panic!("{other:?}"),
        }
        // GKE and Contour both read kubernetes.io/ingress.allow-http.
        assert_eq!(
            carried(
                ["kubernetes.io/ingress.allow-http"],
                "k8s.io/ingress-gce",
                "projectcontour.io/ingress-controller"
            ),
            Carried::All
        );
        // Istio reads none of Contour's.
        assert!(matches!(
            carried(
                ["projectcontour.io/response-timeout"],
                "projectcontour.io/ingress-controller",
                "istio.io/ingress-controller"
            ),
            Carried::Lost { .. }
        ));
    }

    #[test]
    fn an_unknown_controller_is_reported_never_guessed() {
        assert_eq!(
            carried(
                ["nginx.ingress.kubernetes.io/rewrite-target"],
                "example.com/ingress",
                "k8s.io/ingress-nginx"
            ),
            Carried::UnknownFrom
        );
        match carried(
            [
                "nginx.ingress.kubernetes.io/rewrite-target",
                "traefik.ingress.kubernetes.io/router.priority",
            ],
            "k8s.io/ingress-nginx",
            "example.com/ingress",
        ) {
            Carried::UnknownTo { from, keys } => {
                assert_eq!(from.name, "ingress-nginx");
                assert_eq!(keys, ["nginx.ingress.kubernetes.io/rewrite-target"]);
            }
            other => panic!("{other:?}"),
        }
        // Nothing the current controller reads: nothing to lose, even to an unknown one.
        assert_eq!(
            carried(
                ["example.com/x"],
                "k8s.io/ingress-nginx",
                "example.com/ingress"
            ),
            Carried::All
        );
        assert!(is_controller_annotation("konghq.com/strip-path"));
        assert!(!is_controller_annotation("kubernetes.io/ingress.class"));
        assert!(!is_controller_annotation("example.com/x"));
    }
}
