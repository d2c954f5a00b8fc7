//! The decisions (rules W1, W2, W4, R9), as pure functions of the view and one request.

use std::borrow::Cow;
use std::time::{Duration, Instant};

use json_patch::PatchOperation;
use styrmin_ingress_rules::{
    AppliedSettings, ClassFields, Enforcement, EnforcementMode, IngressTarget, LevelName, Levels,
    NoClassWarning, Origin, ResolvedIngress, RuleError, enforce, is_ingress, resolve, resolve_mode,
    would_change,
};

use crate::admission::{
    AdmissionRequest, AdmissionResponse, KubeObject, Operation, Status, same_json,
};
use crate::patch::{ClassFieldsShape, build_class_patch, object_class_fields};
use crate::view::{Deployment, Phase, Role, View, namespace_owner};

/// The API group and kind of Styrmin's deployment objects (W2).
pub const STYRMIN_DEPLOYMENT_API_VERSION: &str = "styrmin.io/v1alpha1";
/// FluxCD's HelmRelease group (W2); every served version counts.
pub const HELM_RELEASE_GROUP: &str = "helm.toolkit.fluxcd.io";

/// What a request is about, for the decision and the metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReviewKind {
    Ingress,
    StyrminDeployment,
    HelmRelease,
    Other,
}

impl ReviewKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ReviewKind::Ingress => "Ingress",
            ReviewKind::StyrminDeployment => "StyrminDeployment",
            ReviewKind::HelmRelease => "HelmRelease",
            ReviewKind::Other => "other",
        }
    }

    /// Classifies a request by its object's `apiVersion` and `kind` (R6), or the request's
    /// `kind` where the object has none (a DELETE carries only the old object).
    pub fn of(request: &AdmissionRequest) -> ReviewKind {
        let (api_version, kind) = request.object_type();
        let requested_ingress = request
            .request_kind
            .as_ref()
            .is_some_and(|rk| is_ingress(&rk.api_version(), &rk.kind));
        if is_ingress(&api_version, &kind) || (requested_ingress && kind == "Ingress") {
            ReviewKind::Ingress
        } else if kind == "StyrminDeployment" && api_version == STYRMIN_DEPLOYMENT_API_VERSION {
            ReviewKind::StyrminDeployment
        } else if kind == "HelmRelease" && api_version.split('/').next() == Some(HELM_RELEASE_GROUP)
        {
            ReviewKind::HelmRelease
        } else {
            ReviewKind::Other
        }
    }
}

/// How a request was answered, for the metrics and the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RequestOutcome {
    /// Allowed with a patch.
    Patched,
    /// Allowed, the rules applied and nothing had to change.
    Conforming,
    /// Allowed without looking further: not the webhook's business.
    Allowed,
    Denied,
    /// `enforcement_mode: warn`: allowed unchanged, with a warning for each change the
    /// patch would have made.
    WouldPatch,
    /// `enforcement_mode: warn`: allowed, with a warning saying what the denial would be.
    WouldDeny,
}

impl RequestOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            RequestOutcome::Patched => "patched",
            RequestOutcome::Conforming => "conforming",
            RequestOutcome::Allowed => "allowed",
            RequestOutcome::Denied => "denied",
            RequestOutcome::WouldPatch => "would_patch",
            RequestOutcome::WouldDeny => "would_deny",
        }
    }
}

/// The answer to one request.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    pub outcome: RequestOutcome,
    /// JSON patch operations; empty when nothing changes (R8).
    pub patch: Vec<PatchOperation>,
    /// Admission warnings (W4).
    pub warnings: Vec<String>,
    /// Set when denied.
    pub status: Option<Status>,
    /// Why, in a few words, for the log.
    pub reason: Cow<'static, str>,
    /// For an Ingress (or a HelmRelease given Styrmin's post-renderer): the settings that
    /// applied and whether the deployment's record or its levels decided them (W5).
    pub settings: Option<AppliedSettings>,
    /// A HelmRelease whose post-renderers did not fit the time budget: allowed unchanged,
    /// with a warning ([`FLUX_OVER_BUDGET_REASON`]).
    pub flux_over_budget: bool,
}

impl Decision {
    fn allowed(reason: impl Into<Cow<'static, str>>) -> Self {
        Decision {
            outcome: RequestOutcome::Allowed,
            patch: Vec::new(),
            warnings: Vec::new(),
            status: None,
            reason: reason.into(),
            settings: None,
            flux_over_budget: false,
        }
    }

    fn denied(code: u16, reason: &'static str, message: String) -> Self {
        Decision {
            outcome: RequestOutcome::Denied,
            patch: Vec::new(),
            warnings: Vec::new(),
            status: Some(Status::failure(code, reason, message)),
            reason: Cow::Borrowed(reason),
            settings: None,
            flux_over_budget: false,
        }
    }

    /// The admission response for the request with this `uid`.
    pub fn into_response(self, uid: &str) -> AdmissionResponse {
        let mut response = match self.status {
            Some(status) => AdmissionResponse::deny(uid, status),
            None if self.patch.is_empty() => AdmissionResponse::allow(uid),
            None => AdmissionResponse::allow(uid).with_patch(&self.patch),
        };
        response.warnings = self.warnings;
        response
    }
}

/// Switches of the decisions that are off by default, and their thresholds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecideOptions {
    /// Put Styrmin's kustomize post-renderer into HelmReleases (`--flux-post-renderer`).
    pub flux_post_renderer: bool,
    /// After how long a controller removal counts as stuck: the W2 denial then says since
    /// when, which finalizer holds it and what to do (`--stuck-deleting-after-secs`).
    pub stuck_deleting_after: Duration,
}

/// The default of `--stuck-deleting-after-secs`: the product page's "more than a few minutes".
pub const STUCK_DELETING_AFTER: Duration = Duration::from_secs(5 * 60);

impl Default for DecideOptions {
    fn default() -> Self {
        DecideOptions {
            flux_post_renderer: false,
            stuck_deleting_after: STUCK_DELETING_AFTER,
        }
    }
}

/// The `reason` of a HelmRelease allowed unchanged because its post-renderers did not fit the
/// time budget ([`Decision::flux_over_budget`]).
pub const FLUX_OVER_BUDGET_REASON: &str = "flux post-renderers over the time budget";

/// One request to decide, and what it is about (classified once, when it arrives).
#[derive(Debug)]
pub struct Admission {
    request: AdmissionRequest,
    kind: ReviewKind,
}

impl Admission {
    pub fn new(request: AdmissionRequest) -> Self {
        let kind = ReviewKind::of(&request);
        Admission { request, kind }
    }

    pub fn request(&self) -> &AdmissionRequest {
        &self.request
    }

    pub fn kind(&self) -> ReviewKind {
        self.kind
    }
}

/// When a request is decided: the time (unix seconds; only the W2 message of a stuck
/// removal depends on it), and by when a HelmRelease's post-renderers must be classified,
/// else it is allowed unchanged with a warning ([`Decision::flux_over_budget`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecidedAt {
    pub now: i64,
    pub flux_deadline: Option<Instant>,
}

impl DecidedAt {
    /// Now, with no deadline.
    pub fn now() -> Self {
        DecidedAt {
            now: crate::clock::unix_now(),
            flux_deadline: None,
        }
    }

    /// Now, with this deadline for a HelmRelease's post-renderers.
    pub fn now_within(flux_deadline: Instant) -> Self {
        DecidedAt {
            flux_deadline: Some(flux_deadline),
            ..DecidedAt::now()
        }
    }
}

/// Decides one request.
pub fn decide(
    view: &View,
    admission: &Admission,
    options: &DecideOptions,
    at: DecidedAt,
) -> Decision {
    let (request, kind) = (&admission.request, admission.kind);
    if kind == ReviewKind::Other {
        return Decision::allowed("not an Ingress or a deployment object");
    }
    if !matches!(request.operation, Operation::Create | Operation::Update) {
        return Decision::allowed("operation is not CREATE or UPDATE");
    }
    if request
        .sub_resource
        .as_deref()
        .is_some_and(|s| !s.is_empty())
    {
        return Decision::allowed("subresource");
    }
    let Some(owner) = request.namespace().and_then(namespace_owner) else {
        return Decision::allowed("namespace not managed by Styrmin");
    };
    // The API server always sends an object here; anything else cannot be patched.
    let Some(object) = request.object() else {
        return Decision::allowed("no object");
    };
    let deploy = Deploy {
        view,
        request,
        kind,
        owner,
        object,
        options,
        now: at.now,
    };
    match kind {
        ReviewKind::Ingress => decide_ingress(view, owner, object),
        ReviewKind::HelmRelease if options.flux_post_renderer => {
            let decision = decide_deploy(&deploy);
            if decision.outcome == RequestOutcome::Denied {
                return decision;
            }
            decide_flux(view, owner, object, decision, at.flux_deadline)
        }
        ReviewKind::StyrminDeployment | ReviewKind::HelmRelease => decide_deploy(&deploy),
        ReviewKind::Other => Decision::allowed("not an Ingress or a deployment object"),
    }
}

/// What the rules make of an Ingress of deployment `owner` whose class fields are
/// `current`: the settings that apply (W5: its record, else its levels) and the enforcement
/// (R3–R5), or why the rules cannot be applied on this API server (R9).
///
/// Admission ([`decide`]) and the audit of the Ingresses already in the cluster
/// (`crate::audit`) both judge an Ingress with this one function.
#[derive(Clone, Debug, PartialEq)]
pub struct IngressJudgement {
    pub settings: AppliedSettings,
    pub enforcement: Result<Enforcement, RuleError>,
}

impl IngressJudgement {
    /// True when admission would let the Ingress through unchanged (no patch, no denial).
    pub fn conforms(&self) -> bool {
        self.enforcement
            .as_ref()
            .is_ok_and(|enforcement| enforcement.changes.is_empty())
    }
}

/// W1, W5, R3–R5, R9 for one Ingress: see [`IngressJudgement`].
pub fn judge_ingress(view: &View, owner: &str, current: &ClassFields) -> IngressJudgement {
    let settings = view.settings_for_deployment(owner);
    let enforcement = enforce(
        &settings.resolved.target,
        current,
        view.kubernetes_version(),
    );
    IngressJudgement {
        settings,
        enforcement,
    }
}

/// W1, W4, R9, W5: the rules for an Ingress of the deployment `owner`, with the settings it
/// was last deployed with when it has such a record, else its levels.
fn decide_ingress(view: &View, owner: &str, object: &KubeObject) -> Decision {
    let IngressJudgement {
        settings,
        enforcement,
    } = judge_ingress(view, owner, &object_class_fields(object));
    let target = &settings.resolved.target;
    let mode = resolve_mode(&view.levels_for_deployment(owner)).mode;
    let enforcement = match enforcement {
        Ok(enforcement) => enforcement,
        // R9: say so rather than produce an object the API server rejects.
        Err(RuleError::BothClassFieldsUnsupported { version, class })
            if mode == EnforcementMode::Warn =>
        {
            return Decision {
                outcome: RequestOutcome::WouldDeny,
                warnings: vec![format!(
                    "would deny (enforcement_mode warn): Kubernetes {version} rejects both class fields, which ingress class {class:?} sets (R9, 1.27 or later needed), decided by {}",
                    decided_by_words(view, owner, &settings.resolved)
                )],
                reason: Cow::Borrowed("warn: would deny (R9)"),
                settings: Some(settings),
                ..Decision::allowed("")
            };
        }
        Err(error) => {
            return Decision {
                settings: Some(settings.clone()),
                ..Decision::denied(422, "Invalid", error.to_string())
            };
        }
    };
    let patch = build_class_patch(ClassFieldsShape::of_object(object), &enforcement.changes);
    let mut warnings: Vec<String> = enforcement
        .warning
        .map(|_| NoClassWarning::MESSAGE.to_owned())
        .into_iter()
        .collect();
    if mode == EnforcementMode::Warn && !patch.is_empty() {
        // Warn: nothing is patched; each change is said instead, with what decided it.
        let current = object_class_fields(object);
        let by = decided_by_words(view, owner, &settings.resolved);
        let mut would: Vec<String> = enforcement
            .changes
            .iter()
            .map(|change| format!("{}, decided by {by}", would_change(change, &current)))
            .collect();
        would.append(&mut warnings);
        return Decision {
            outcome: RequestOutcome::WouldPatch,
            patch: Vec::new(),
            warnings: would,
            status: None,
            reason: Cow::Borrowed(match target {
                IngressTarget::Dedicated => "warn: would patch, dedicated ingress (R3)",
                IngressTarget::Class(_) => "warn: would patch, ingress class (R4)",
                IngressTarget::NoClass => "warn: would patch, no class (R5)",
            }),
            settings: Some(settings),
            flux_over_budget: false,
        };
    }
    let (outcome, reason) = match (target, patch.is_empty()) {
        (_, true) => (RequestOutcome::Conforming, "already conforms"),
        (IngressTarget::Dedicated, false) => (RequestOutcome::Patched, "dedicated ingress (R3)"),
        (IngressTarget::Class(_), false) => (RequestOutcome::Patched, "ingress class (R4)"),
        (IngressTarget::NoClass, false) => (RequestOutcome::Patched, "no class (R5)"),
    };
    Decision {
        outcome,
        patch,
        warnings,
        status: None,
        reason: Cow::Borrowed(reason),
        settings: Some(settings),
        flux_over_budget: false,
    }
}

/// `--flux-post-renderer`: Styrmin's post-renderer in a HelmRelease allowed by W2, for the
/// settings the deployment's Ingresses get (W5: its record, else its levels).
fn decide_flux(
    view: &View,
    owner: &str,
    object: &KubeObject,
    allowed: Decision,
    deadline: Option<Instant>,
) -> Decision {
    let settings = view.settings_for_deployment(owner);
    let flux = crate::helm_release::decide_helm_release_within(
        &settings.resolved.target,
        view.kubernetes_version(),
        object,
        deadline,
    );
    let mut warnings = allowed.warnings;
    warnings.extend(flux.warnings);
    if flux.over_budget {
        return Decision {
            warnings,
            reason: Cow::Borrowed(FLUX_OVER_BUDGET_REASON),
            settings: Some(settings),
            flux_over_budget: true,
            ..allowed
        };
    }
    if flux.patch.is_empty() {
        return Decision {
            warnings,
            settings: Some(settings),
            ..allowed
        };
    }
    if resolve_mode(&view.levels_for_deployment(owner)).mode == EnforcementMode::Warn {
        warnings.push(format!(
            "would add Styrmin's post-renderer to this HelmRelease ({}), decided by {}",
            settings.resolved.target,
            decided_by_words(view, owner, &settings.resolved)
        ));
        return Decision {
            outcome: RequestOutcome::WouldPatch,
            warnings,
            reason: Cow::Borrowed("warn: would add the flux post-renderer"),
            settings: Some(settings),
            ..allowed
        };
    }
    Decision {
        outcome: RequestOutcome::Patched,
        patch: flux.patch,
        warnings,
        status: None,
        reason: Cow::Borrowed("flux post-renderer"),
        settings: Some(settings),
        flux_over_budget: false,
    }
}

/// What decided an answer, in the words of an admission warning: `environment prod`,
/// `deployment web1`, `the cluster`, `the cluster default`, or the deployment's record.
pub fn decided_by_words(view: &View, owner: &str, resolved: &ResolvedIngress) -> String {
    match resolved.origin {
        Origin::Level(LevelName::Cluster) => "the cluster".to_owned(),
        Origin::Level(LevelName::Environment) => format!(
            "environment {}",
            view.deployment(owner)
                .and_then(|d| d.environment.as_deref())
                .unwrap_or("(unknown)")
        ),
        Origin::Level(LevelName::Deployment) => format!("deployment {owner}"),
        Origin::ClusterDefault => "the cluster default".to_owned(),
        Origin::LastDeployed => format!("the last-deployed record of deployment {owner}"),
    }
}

/// A deploy (a StyrminDeployment or a HelmRelease) of deployment `owner`, as W2 judges it.
struct Deploy<'a> {
    view: &'a View,
    request: &'a AdmissionRequest,
    kind: ReviewKind,
    owner: &'a str,
    object: &'a KubeObject,
    options: &'a DecideOptions,
    /// Unix seconds (the message of a stuck removal says for how long).
    now: i64,
}

/// W2: the deploy block while an environment's dedicated controller is being removed.
fn decide_deploy(deploy: &Deploy<'_>) -> Decision {
    let &Deploy {
        view,
        request,
        kind,
        owner,
        object,
        options,
        now,
    } = deploy;
    if request.operation == Operation::Update {
        // Status, finalizers and other metadata only: never denied. A missing old object
        // cannot show that, so it counts as a change.
        let old_spec = request
            .old_object
            .as_ref()
            .map(|o| o.as_object().and_then(|o| o.spec_json.as_deref()));
        let unchanged = match (old_spec, object.spec_json.as_deref()) {
            (Some(Some(old)), Some(new)) => same_json(old, new),
            (Some(None), None) => true,
            _ => false,
        };
        if unchanged {
            return Decision::allowed("spec unchanged");
        }
    }
    let owner_deployment = view.deployment(owner);
    // The controller's own objects: in its namespace, or a deployment object of that role.
    if owner_deployment.is_some_and(|d| d.role == Role::IngressController) {
        return Decision::allowed("object of an ingress controller");
    }
    let spec = object.spec.as_object();
    let environment = match kind {
        ReviewKind::StyrminDeployment => {
            if spec.and_then(|s| s.role.as_deref()) == Some("ingress-controller") {
                return Decision::allowed("object of an ingress controller");
            }
            spec.and_then(|s| s.environment_id.as_deref())
                .or_else(|| owner_deployment.and_then(|d| d.environment.as_deref()))
        }
        _ => owner_deployment.and_then(|d| d.environment.as_deref()),
    };
    let Some(environment) = environment else {
        return Decision::allowed("environment unknown");
    };
    if !resolve(&view.levels_for_environment(environment))
        .target
        .is_dedicated()
    {
        return Decision::allowed("environment has no dedicated ingress");
    }
    let Some((controller, deleting)) = view
        .controllers_of(environment)
        .find(|(_, d)| d.phase == Phase::Deleting)
    else {
        return Decision::allowed("no dedicated ingress controller is being removed");
    };
    let mode = resolve_mode(&Levels {
        deployment: owner_deployment.map(|d| &d.level),
        ..view.levels_for_environment(environment)
    });
    if mode.mode == EnforcementMode::Warn {
        return Decision {
            outcome: RequestOutcome::WouldDeny,
            warnings: vec![format!(
                "would deny (enforcement_mode warn, decided by {}): environment {environment:?}: its dedicated ingress \
                 controller {controller:?} is being removed (phase {}); in enforce, deploys wait until the removal completes",
                mode.decided_by(),
                Phase::Deleting
            )],
            reason: Cow::Borrowed(
                "warn: would deny, dedicated ingress controller being removed (W2)",
            ),
            ..Decision::allowed("")
        };
    }
    let mut message = format!(
        "environment {environment:?}: its dedicated ingress controller {controller:?} is being removed \
         (phase {phase}), so applications in this environment cannot be deployed, updated or upgraded \
         until the removal completes; try again after the removal completes, and Styrmin installs a new \
         ingress controller",
        phase = Phase::Deleting
    );
    if let Some(stuck) = stuck_removal(controller, deleting, options.stuck_deleting_after, now) {
        message.push_str(". ");
        message.push_str(&stuck);
    }
    Decision::denied(403, "Forbidden", message)
}

/// When controller `id`'s removal has gone on for `after` or longer at `now`: since when,
/// what holds it, and what the product page says to do ("A controller that stays
/// DELETING"). `None` while it is younger, or when nobody knows since when.
pub fn stuck_removal(
    id: &str,
    controller: &Deployment,
    after: Duration,
    now: i64,
) -> Option<String> {
    let removal = controller.removal.as_ref()?;
    let since = removal.since()?;
    let elapsed = u64::try_from(now.saturating_sub(since)).unwrap_or(0);
    if elapsed < after.as_secs() {
        return None;
    }
    let hold = removal.hold();
    let started = if removal.deletion_requested.is_some() {
        "deletion requested at"
    } else {
        "DELETING seen first at"
    };
    Some(format!(
        "The removal has not finished after {elapsed} ({started} {at}); {held}. {advice}",
        elapsed = crate::view::human_duration(elapsed),
        at = crate::view::rfc3339(since),
        held = hold.held(id),
        advice = hold.advice(id),
    ))
}
