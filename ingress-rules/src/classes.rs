//! The class names the rules fix: the annotation the dedicated controller reads, its class,
//! and the class of a cluster that names none.

/// The annotation that names an Ingress's class, read by the dedicated controller (R3)
/// and set next to `spec.ingressClassName` by R4.
pub const CLASS_ANNOTATION: &str = "kubernetes.io/ingress.class";

/// The class of the dedicated controller: the implementation it runs (Traefik), which
/// serves Ingresses by the annotation only (R3).
pub const DEDICATED_CONTROLLER_CLASS: &str = "traefik";

/// The class a cluster gets when its config does not mention `ingress_class` (docs/rules.md §1).
pub const DEFAULT_CLUSTER_CLASS: &str = "traefik";
