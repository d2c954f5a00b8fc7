//! `styrmin-webhook plan`: what a proposed change of the cluster, environment or deployment
//! levels does to the Ingresses already in the cluster, before it is made.
//!
//! [`plan`] is pure, like the audit: the view as it is, the view as proposed, the Ingresses
//! of Styrmin namespaces and the IngressClasses in; a [`Plan`] out. For each Ingress it gives
//! its class fields now, right after the change (what admission makes of it at its next
//! write under the proposed view: a deployment with a last-deployed record keeps what the
//! record says, W5) and at its next deploy (the record gives way to the levels), grouped by
//! environment. The pre-flight findings are what would leave an Ingress served by nobody or
//! by another controller: a resolved class that names no IngressClass, a dedicated controller
//! that is not `RUNNING`, a default IngressClass that picks up class-less Ingresses (R5),
//! every Ingress whose controller, and so its address, changes, and the annotations such a
//! move does to its annotations, judged by the annotation catalog ([`annotations`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::sync::Arc;

use k8s_openapi::api::networking::v1::IngressClass;
use serde::Serialize;
use styrmin_ingress_rules::{ClassFields, EnforcementMode, IngressTarget, resolve, resolve_mode};

use crate::acme_issuers::AcmeIssuer;
use crate::audit::objects::AuditedIngress;
use crate::crd::migration::AnnotationPolicy;
use crate::crd::{StyrminCluster, StyrminDeployment, StyrminEnvironment};
use crate::ingress_controllers::known;
use crate::view::{Phase, View, namespace_owner};

pub mod annotations;

pub use annotations::{AnnotationReport, HostReport, Targets};
use annotations::{HostEntry, host_reports, judge_keys};

/// The annotation that marks an IngressClass as the cluster's default: the API server gives
/// it to an Ingress created without a class.
pub const DEFAULT_CLASS_ANNOTATION: &str = "ingressclass.kubernetes.io/is-default-class";

/// What the plan reads of an IngressClass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassInfo {
    pub name: String,
    /// `spec.controller`, e.g. `k8s.io/ingress-nginx`.
    pub controller: Option<String>,
    /// Marked `ingressclass.kubernetes.io/is-default-class: "true"`.
    pub is_default: bool,
}

impl ClassInfo {
    pub fn of(class: &IngressClass) -> Self {
        ClassInfo {
            name: class.metadata.name.clone().unwrap_or_default(),
            controller: class.spec.as_ref().and_then(|s| s.controller.clone()),
            is_default: class
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(DEFAULT_CLASS_ANNOTATION))
                .is_some_and(|v| v.eq_ignore_ascii_case("true")),
        }
    }
}

/// Everything a plan is made of.
#[derive(Clone, Copy, Debug)]
pub struct PlanInput<'a> {
    pub current: &'a View,
    pub proposed: &'a View,
    pub ingresses: &'a [Arc<AuditedIngress>],
    pub ingress_classes: &'a [ClassInfo],
    /// cert-manager's Issuers and ClusterIssuers with HTTP01 Ingress solvers (none when the
    /// API server does not serve cert-manager's API).
    pub acme_issuers: &'a [AcmeIssuer],
}

/// An Ingress's two class fields, as the plan shows them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Fields {
    #[serde(rename = "ingressClassName")]
    pub ingress_class_name: Option<String>,
    #[serde(rename = "annotation")]
    pub class_annotation: Option<String>,
}

impl From<&ClassFields> for Fields {
    fn from(fields: &ClassFields) -> Self {
        Fields {
            ingress_class_name: fields.ingress_class_name.clone(),
            class_annotation: fields.class_annotation.clone(),
        }
    }
}

impl Fields {
    /// `haproxy` when both name it, `spec:a annotation:b` when they differ, `(none)`.
    pub fn short(&self) -> String {
        match (&self.ingress_class_name, &self.class_annotation) {
            (Some(a), Some(b)) if a == b => a.clone(),
            (Some(a), Some(b)) => format!("spec:{a} annotation:{b}"),
            (Some(a), None) => format!("spec:{a}"),
            (None, Some(b)) => format!("annotation:{b}"),
            (None, None) => "(none)".to_owned(),
        }
    }

    /// The class a controller serves the Ingress by: `spec.ingressClassName`, else the
    /// annotation.
    fn class(&self) -> Option<&str> {
        self.ingress_class_name
            .as_deref()
            .or(self.class_annotation.as_deref())
    }
}

/// When an Ingress moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Move {
    /// Its class fields stay as they are.
    No,
    /// At its next write after the change (its deployment has no last-deployed record).
    RightAfter,
    /// Only when Styrmin next deploys it (its record holds it where it is, W5).
    NextDeploy,
}

impl Move {
    pub fn as_str(self) -> &'static str {
        match self {
            Move::No => "no",
            Move::RightAfter => "right after",
            Move::NextDeploy => "at next deploy",
        }
    }
}

/// One Ingress of the plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PlannedIngress {
    pub namespace: String,
    pub name: String,
    pub deployment: String,
    /// The enforcement mode the proposed levels give its deployment: in `warn` nothing is
    /// changed, so it does not move (what `enforce` would do is still shown in `would`).
    pub mode: EnforcementMode,
    /// Whether its deployment has a last-deployed record (W5).
    pub record: bool,
    pub now: Fields,
    pub right_after: Fields,
    pub next_deploy: Fields,
    pub moves: Move,
    /// In `warn`: where `enforce` would take it at its next deploy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub would: Option<Fields>,
    /// The key that decides its class after the change.
    pub decided_by: String,
}

/// Why the plan warns before the change is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PreflightReason {
    /// A class the Ingresses would get names no IngressClass: nothing serves them.
    MissingIngressClass,
    /// An environment would use its dedicated controller, which is not `RUNNING`.
    ControllerNotRunning,
    /// Ingresses would have no class and an IngressClass marked default picks them up (R5).
    DefaultClassPicksUp,
    /// The change would rules R9 refuse on this API server.
    CannotEnforce,
    /// An Ingress would be served by another controller, at another address: DNS follows.
    ChangesController,
    /// An Ingress that changes controller carries annotations its current controller reads
    /// that the target, by the annotation catalog, does not read as they are: unsupported,
    /// unknown, or read under another key (or one of the two controllers is not known).
    AnnotationsNotCarried,
    /// A cert-manager Issuer's HTTP01 solver creates its challenge Ingresses with a class
    /// the change moves Ingresses off.
    AcmeSolverClass,
    /// Ingresses would move to an IngressClass whose `spec.controller` is no controller the
    /// catalog knows (nor named by `--target`): what it does with them is not known.
    UnknownTargetController,
    /// Two IngressClasses a move involves name the same `spec.controller`: a controller that
    /// selects its classes by that string serves both.
    SharedController,
    /// A host one of whose Ingresses carries an annotation that spans the host in its
    /// current controller, while some Ingress of the host changes controller.
    HostWideAnnotation,
    /// A migration step would move Ingresses to their environment's dedicated controller
    /// (R3), which its canary gate cannot check: the step is refused (`migrate plan` only;
    /// [`crate::controllers::migration::step::ungated_targets`]).
    UngatedTarget,
}

impl PreflightReason {
    pub fn as_str(self) -> &'static str {
        match self {
            PreflightReason::MissingIngressClass => "missing_ingress_class",
            PreflightReason::ControllerNotRunning => "controller_not_running",
            PreflightReason::DefaultClassPicksUp => "default_class_picks_up",
            PreflightReason::CannotEnforce => "cannot_enforce",
            PreflightReason::ChangesController => "changes_controller",
            PreflightReason::AnnotationsNotCarried => "annotations_not_carried",
            PreflightReason::AcmeSolverClass => "acme_solver_class",
            PreflightReason::UnknownTargetController => "unknown_target_controller",
            PreflightReason::SharedController => "shared_controller",
            PreflightReason::HostWideAnnotation => "host_wide_annotation",
            PreflightReason::UngatedTarget => "ungated_target",
        }
    }
}

/// One pre-flight finding: what it is about, and one line for a person.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Preflight {
    pub reason: PreflightReason,
    pub subject: String,
    pub detail: String,
}

/// The whole plan.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Plan {
    /// Environment id (`(none)` for a deployment whose environment is unknown) → its
    /// Ingresses, by namespace and name.
    pub environments: BTreeMap<String, Vec<PlannedIngress>>,
    pub preflight: Vec<Preflight>,
    /// Every Ingress that changes controller between two known controllers: its
    /// annotations by the catalog's verdict, by namespace and name.
    pub annotations: Vec<AnnotationReport>,
    /// Hosts where an annotation that spans the host meets a move.
    pub hosts: Vec<HostReport>,
}

/// What `--fail-on` fails a plan on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FailOn {
    /// An annotation the target does not read.
    Unsupported,
    /// An annotation the target does not read, or whose support is not known.
    Unknown,
}

impl Plan {
    /// How many Ingresses move right after the change, and how many at their next deploy.
    pub fn moves(&self) -> (usize, usize) {
        let all = self.environments.values().flatten();
        all.fold((0, 0), |(now, later), i| match i.moves {
            Move::RightAfter => (now + 1, later),
            Move::NextDeploy => (now, later + 1),
            Move::No => (now, later),
        })
    }

    /// Nothing moves and nothing was found: exit 0.
    pub fn is_quiet(&self) -> bool {
        self.moves() == (0, 0) && self.preflight.is_empty()
    }

    /// Why a migration step whose `spec.preflight.unsupportedAnnotations` is `policy` waits
    /// for this plan (`None`: it does not): with `block`, the Ingresses that move carrying
    /// annotations their target does not read, the first few named.
    pub fn held_by_annotations(&self, policy: AnnotationPolicy) -> Option<String> {
        if policy == AnnotationPolicy::Warn {
            return None;
        }
        let carrying: Vec<&AnnotationReport> = self
            .annotations
            .iter()
            .filter(|r| !r.unsupported.is_empty())
            .collect();
        let first = carrying.first()?;
        let keys: Vec<&str> = first
            .unsupported
            .iter()
            .map(|j| j.annotation.as_str())
            .collect();
        Some(format!(
            "unsupported_annotations: {} moving Ingresses carry annotations {} does not read, \
             {}/{} among them ({}); spec.preflight.unsupportedAnnotations is block",
            carrying.len(),
            first.target,
            first.namespace,
            first.name,
            keys.join(", ")
        ))
    }

    /// Whether a moving Ingress carries an annotation `fail_on` fails on (a target not
    /// known counts as unknown).
    pub fn fails_on(&self, fail_on: FailOn) -> bool {
        let unknown_target = self
            .preflight
            .iter()
            .any(|f| f.reason == PreflightReason::UnknownTargetController);
        (fail_on == FailOn::Unknown && unknown_target)
            || self.annotations.iter().any(|r| {
                !r.unsupported.is_empty() || (fail_on == FailOn::Unknown && !r.unknown.is_empty())
            })
    }
}

const NO_ENVIRONMENT: &str = "(none)";

/// The cluster's IngressClasses, by name, and those marked default; and which catalog
/// target each is.
struct Classes<'a> {
    all: &'a [ClassInfo],
    by_name: HashMap<&'a str, &'a ClassInfo>,
    defaults: Vec<&'a ClassInfo>,
    targets: &'a Targets,
}

impl<'a> Classes<'a> {
    fn of(classes: &'a [ClassInfo], targets: &'a Targets) -> Self {
        Classes {
            all: classes,
            by_name: classes.iter().map(|c| (c.name.as_str(), c)).collect(),
            defaults: classes.iter().filter(|c| c.is_default).collect(),
            targets,
        }
    }

    /// The name of the IngressClass an Ingress with these fields is served by.
    fn class_name(&self, fields: &Fields) -> Option<&'a str> {
        match fields.class() {
            Some(class) => self.by_name.get(class).map(|c| c.name.as_str()),
            None => self.defaults.first().map(|c| c.name.as_str()),
        }
    }

    /// The `spec.controller` of the IngressClass an Ingress with these fields is served by
    /// (with no class, the default class's); `None` when there is no such IngressClass or
    /// it names no controller.
    fn spec_controller(&self, fields: &Fields) -> Option<&'a str> {
        let class = match fields.class() {
            Some(class) => self.by_name.get(class).copied(),
            None => self.defaults.first().copied(),
        }?;
        class.controller.as_deref()
    }

    /// The controller that serves an Ingress with these fields: its IngressClass's
    /// `spec.controller`, else the class name itself; with no class, the default class's.
    fn controller_of(&self, fields: &Fields) -> Option<String> {
        let class = fields
            .class()
            .map(str::to_owned)
            .or_else(|| self.defaults.first().map(|c| c.name.clone()))?;
        Some(
            match self
                .by_name
                .get(class.as_str())
                .and_then(|c| c.controller.clone())
            {
                Some(controller) => controller,
                None => format!("class {class}"),
            },
        )
    }
}

/// What the Ingresses show that the preflight reports, gathered while they are planned.
#[derive(Default)]
struct Findings {
    /// Class names that no IngressClass has → the environments whose Ingresses get them.
    missing: BTreeMap<String, BTreeSet<String>>,
    /// Ingresses left with no class.
    classless: Vec<String>,
    /// Targets the API server rejects for an Ingress (R9) → how many Ingresses.
    cannot_enforce: BTreeMap<String, usize>,
    changes_controller: Vec<Preflight>,
    /// One per Ingress whose move leaves annotations behind.
    not_carried: Vec<Preflight>,
    /// Current controllers the table does not know → the Ingresses that move off them.
    unknown_from: BTreeMap<String, Vec<String>>,
    /// Target classes whose controller the catalog does not know → their controller and
    /// how many Ingresses move to them.
    unknown_targets: BTreeMap<String, (String, usize)>,
    /// Classes Ingresses move off or to.
    involved: BTreeSet<String>,
    reports: Vec<AnnotationReport>,
    /// Host → the planned Ingresses with a rule for it.
    hosts: BTreeMap<String, Vec<HostEntry>>,
}

impl Findings {
    /// In namespace and name order, whatever order the API server listed the Ingresses in,
    /// so that the same cluster gives the same plan (and `-o json` the same hash).
    fn sort(&mut self) {
        self.classless.sort();
        self.changes_controller.sort();
        self.not_carried.sort();
        for ingresses in self.unknown_from.values_mut() {
            ingresses.sort();
        }
        for entries in self.hosts.values_mut() {
            entries.sort_by(|a, b| a.ingress.cmp(&b.ingress));
        }
    }
}

/// Makes the plan, every target judged at the newest version the catalog has for it
/// ([`plan_with`]).
pub fn plan(input: &PlanInput<'_>) -> Plan {
    plan_with(input, &Targets::default())
}

/// Makes the plan, with which catalog target each class is and its version.
pub fn plan_with(input: &PlanInput<'_>, targets: &Targets) -> Plan {
    let classes = Classes::of(input.ingress_classes, targets);
    let mut plan = Plan::default();
    let mut findings = Findings::default();
    for ingress in input.ingresses {
        let Some(owner) = namespace_owner(ingress.namespace()) else {
            continue;
        };
        let (environment, planned) = plan_ingress(input, ingress, owner, &classes, &mut findings);
        plan.environments
            .entry(environment)
            .or_default()
            .push(planned);
    }
    for ingresses in plan.environments.values_mut() {
        ingresses.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    }
    let leaving = leaving_classes(&plan);
    findings.sort();
    plan.hosts = host_reports(&findings.hosts);
    findings
        .reports
        .sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    plan.annotations = std::mem::take(&mut findings.reports);
    plan.preflight = preflight(findings, &classes, input.proposed, &leaving);
    plan.preflight
        .extend(plan.hosts.iter().map(|host| Preflight {
            reason: PreflightReason::HostWideAnnotation,
            subject: format!("host {}", host.host),
            detail: host.detail(),
        }));
    plan.preflight
        .extend(acme_solver_class(input.acme_issuers, &leaving));
    plan
}

/// The Issuers whose HTTP01 solvers name a class the change moves Ingresses off: the
/// Ingress cert-manager creates for each challenge keeps that class, so once its controller
/// goes, challenges are answered by nobody and certificates stop renewing.
pub fn acme_solver_class(
    issuers: &[AcmeIssuer],
    leaving: &BTreeMap<String, Leaving>,
) -> Vec<Preflight> {
    let mut out = Vec::new();
    for issuer in issuers {
        for class in &issuer.classes {
            if let Some(how) = leaving.get(class) {
                out.push(Preflight {
                    reason: PreflightReason::AcmeSolverClass,
                    subject: issuer.subject(),
                    detail: format!(
                        "its HTTP01 solver creates challenge Ingresses of class {class:?}, and {}: point the solver at the new class once its controller serves, or certificates stop renewing when the old one goes",
                        how.as_str()
                    ),
                });
            }
        }
    }
    out
}

/// How a change takes Ingresses off a class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Leaving {
    /// Some of its Ingresses move to another class.
    Moved,
    /// Every one of them moves: no Ingress of a Styrmin namespace is on it at next deploy,
    /// so its controller may be removed.
    Emptied,
}

impl Leaving {
    pub fn as_str(self) -> &'static str {
        match self {
            Leaving::Moved => "the change moves Ingresses off it",
            Leaving::Emptied => "the change moves every Ingress off it",
        }
    }
}

/// The classes whose Ingresses move to another class by their next deploy.
pub fn leaving_classes(plan: &Plan) -> BTreeMap<String, Leaving> {
    let ingresses = || plan.environments.values().flatten();
    let staying: BTreeSet<&str> = ingresses().filter_map(|i| i.next_deploy.class()).collect();
    let mut leaving = BTreeMap::new();
    for ingress in ingresses() {
        if let Some(class) = ingress.now.class()
            && ingress.next_deploy.class() != Some(class)
        {
            let how = if staying.contains(class) {
                Leaving::Moved
            } else {
                Leaving::Emptied
            };
            leaving.insert(class.to_owned(), how);
        }
    }
    leaving
}

/// One Ingress of deployment `owner`: its environment and what happens to it. What the
/// preflight reports of it goes to `findings`.
fn plan_ingress(
    input: &PlanInput<'_>,
    ingress: &AuditedIngress,
    owner: &str,
    classes: &Classes<'_>,
    findings: &mut Findings,
) -> (String, PlannedIngress) {
    let current = ingress.class_fields();
    let settings = input.proposed.settings_for_deployment(owner);
    let mode = resolve_mode(&input.proposed.levels_for_deployment(owner)).mode;
    let record = settings.source() == styrmin_ingress_rules::SettingsSource::Record;
    let kubernetes = input.proposed.kubernetes_version();
    let mut enforced =
        |target: &IngressTarget| match styrmin_ingress_rules::enforce(target, &current, kubernetes)
        {
            Ok(enforcement) => Fields::from(&enforcement.fields),
            Err(_) => {
                *findings
                    .cannot_enforce
                    .entry(target.to_string())
                    .or_default() += 1;
                Fields::from(&current)
            }
        };
    let now = Fields::from(&current);
    let after = enforced(&settings.resolved.target);
    let next = if record {
        enforced(&settings.levels.target)
    } else {
        after.clone()
    };
    let (right_after, next_deploy, would) = match mode {
        EnforcementMode::Enforce => (after, next, None),
        EnforcementMode::Warn => (now.clone(), now.clone(), Some(next)),
    };
    let moves = if right_after != now {
        Move::RightAfter
    } else if next_deploy != now {
        Move::NextDeploy
    } else {
        Move::No
    };
    let environment = input
        .proposed
        .deployment(owner)
        .and_then(|d| d.environment.clone())
        .unwrap_or_else(|| NO_ENVIRONMENT.to_owned());
    let subject = format!("Ingress {}/{}", ingress.namespace(), ingress.name());
    for fields in [&right_after, &next_deploy] {
        if let Some(class) = &fields.ingress_class_name
            && !classes.by_name.contains_key(class.as_str())
        {
            findings
                .missing
                .entry(class.clone())
                .or_default()
                .insert(environment.clone());
        }
    }
    if next_deploy.class().is_none() {
        findings.classless.push(subject.clone());
    }
    note_controller_change(
        findings,
        classes,
        ingress,
        subject,
        (&now, &next_deploy),
        moves,
    );
    let decided_by = if record {
        settings.levels.decided_by().to_string()
    } else {
        settings.resolved.decided_by().to_string()
    };
    let planned = PlannedIngress {
        namespace: ingress.namespace().to_owned(),
        name: ingress.name().to_owned(),
        deployment: owner.to_owned(),
        mode,
        record,
        now,
        right_after,
        next_deploy,
        moves,
        would,
        decided_by,
    };
    (environment, planned)
}

/// What the preflight reports of an Ingress that changes controller between `now` and
/// `next`: the change itself, and what the move does to its annotations. Every Ingress is
/// also noted under its hosts, for the host-wide annotations.
fn note_controller_change(
    findings: &mut Findings,
    classes: &Classes<'_>,
    ingress: &AuditedIngress,
    subject: String,
    (now, next): (&Fields, &Fields),
    moves: Move,
) {
    let mut entry = HostEntry {
        ingress: format!("{}/{}", ingress.namespace(), ingress.name()),
        carries: Vec::new(),
        moves_to: None,
    };
    note_move(
        findings,
        classes,
        ingress,
        subject,
        (now, next),
        moves,
        &mut entry,
    );
    for host in ingress.hosts() {
        findings
            .hosts
            .entry(host.to_owned())
            .or_default()
            .push(entry.clone());
    }
}

/// The move of one Ingress, if it changes controller; `entry` gets what the host judgement
/// needs.
fn note_move(
    findings: &mut Findings,
    classes: &Classes<'_>,
    ingress: &AuditedIngress,
    subject: String,
    (now, next): (&Fields, &Fields),
    moves: Move,
    entry: &mut HostEntry,
) {
    let keys = || ingress.controller_annotations.iter().map(AsRef::as_ref);
    let from = classes.spec_controller(now);
    if let Some(from) = from.and_then(known) {
        entry.carries = keys()
            .filter(|k| {
                from.reads(k) && crate::annotation_catalog::catalog().host_wide(k).is_some()
            })
            .map(str::to_owned)
            .collect();
    }
    let (class_now, class_next) = (classes.class_name(now), classes.class_name(next));
    if class_now != class_next {
        // Also between two classes of one controller string: shared_controller says so.
        findings.involved.extend(class_now.map(str::to_owned));
        findings.involved.extend(class_next.map(str::to_owned));
    }
    let (before, after) = (classes.controller_of(now), classes.controller_of(next));
    if before == after {
        return;
    }
    findings.changes_controller.push(Preflight {
        reason: PreflightReason::ChangesController,
        subject: subject.clone(),
        detail: format!(
            "served by {} now, by {} {}: its address changes, and DNS must follow",
            before.as_deref().unwrap_or("nobody"),
            after.as_deref().unwrap_or("nobody"),
            moves.as_str(),
        ),
    });
    // Only between two IngressClasses that name their controllers: a class with no
    // IngressClass is already reported (missing_ingress_class), and is served by nobody.
    let (Some(from), Some(to), Some(class)) = (from, classes.spec_controller(next), class_next)
    else {
        return;
    };
    let Some(target) = classes.targets.target(class, to) else {
        let unknown = findings
            .unknown_targets
            .entry(class.to_owned())
            .or_insert_with(|| (to.to_owned(), 0));
        unknown.1 += 1;
        note_unknown_target(findings, ingress, subject, from, to);
        return;
    };
    let Some(source) = known(from) else {
        findings
            .unknown_from
            .entry(from.to_owned())
            .or_default()
            .push(subject);
        return;
    };
    if source.id == target.id {
        return;
    }
    let (version, version_note) = classes.targets.version(class, target);
    entry.moves_to = Some((target, version));
    let read: Vec<&str> = keys().filter(|k| source.reads(k)).collect();
    if read.is_empty() {
        return;
    }
    let mut report = AnnotationReport {
        namespace: ingress.namespace().to_owned(),
        name: ingress.name().to_owned(),
        from: from.to_owned(),
        to: to.to_owned(),
        target: target.id.to_owned(),
        version,
        version_note,
        left_out: ingress.controller_annotations_left_out,
        ..AnnotationReport::default()
    };
    judge_keys(read, target, version, &mut report);
    if !report.all_supported() {
        findings.not_carried.push(Preflight {
            reason: PreflightReason::AnnotationsNotCarried,
            subject,
            detail: format!(
                "{}{}",
                report.summary(source.name, target.name),
                ingress.controller_annotations_note()
            ),
        });
    }
    findings.reports.push(report);
}

/// An Ingress moving to a controller the catalog does not know: the annotations its current
/// controller reads, which the target may or may not read.
fn note_unknown_target(
    findings: &mut Findings,
    ingress: &AuditedIngress,
    subject: String,
    from: &str,
    to: &str,
) {
    let Some(source) = known(from) else { return };
    let keys: Vec<&str> = ingress
        .controller_annotations
        .iter()
        .map(AsRef::as_ref)
        .filter(|k| source.reads(k))
        .collect();
    if keys.is_empty() {
        return;
    }
    findings.not_carried.push(Preflight {
        reason: PreflightReason::AnnotationsNotCarried,
        subject,
        detail: format!(
            "{} reads {} annotations; {to} is not a controller Styrmin knows, so whether it reads them is not known: {}{}",
            source.name,
            keys.len(),
            keys.join(", "),
            ingress.controller_annotations_note(),
        ),
    });
}

/// IngressClasses that share one `spec.controller`, where a move involves one of them.
fn shared_controllers(classes: &Classes<'_>, involved: &BTreeSet<String>) -> Vec<Preflight> {
    let mut by_controller: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for class in classes.all {
        if let Some(controller) = &class.controller {
            by_controller
                .entry(controller.as_str())
                .or_default()
                .push(class.name.as_str());
        }
    }
    by_controller
        .into_iter()
        .filter(|(_, names)| names.len() > 1 && names.iter().any(|n| involved.contains(*n)))
        .map(|(controller, mut names)| {
            names.sort_unstable();
            Preflight {
                reason: PreflightReason::SharedController,
                subject: format!("controller {controller}"),
                detail: format!(
                    "IngressClasses {} name the same spec.controller: a controller that selects its classes by it serves all of them, so an Ingress moved between them may stay where it is, annotations and all",
                    names.join(", ")
                ),
            }
        })
        .collect()
}

/// The preflight findings, in the order they are reported.
fn preflight(
    findings: Findings,
    classes: &Classes<'_>,
    proposed: &View,
    leaving: &BTreeMap<String, Leaving>,
) -> Vec<Preflight> {
    let Findings {
        missing,
        classless,
        cannot_enforce,
        changes_controller,
        not_carried,
        unknown_from,
        unknown_targets,
        involved,
        reports: _,
        hosts: _,
    } = findings;
    let mut out = Vec::new();
    for (class, environments) in missing {
        out.push(Preflight {
            reason: PreflightReason::MissingIngressClass,
            subject: format!("IngressClass {class}"),
            detail: format!(
                "Ingresses of environment {} would get class {class:?}, which names no IngressClass: nothing serves them",
                environments.into_iter().collect::<Vec<_>>().join(", ")
            ),
        });
    }
    out.extend(controllers_not_running(proposed));
    if !classless.is_empty() {
        for class in &classes.defaults {
            out.push(default_class_picks_up(class, &classless, leaving));
        }
    }
    for (target, count) in cannot_enforce {
        out.push(Preflight {
            reason: PreflightReason::CannotEnforce,
            subject: target.clone(),
            detail: format!(
                "{count} Ingresses: this API server rejects an Ingress with both class fields (R9); admission would deny their next write"
            ),
        });
    }
    out.extend(changes_controller);
    out.extend(not_carried);
    for (controller, ingresses) in unknown_from {
        out.push(Preflight {
            reason: PreflightReason::AnnotationsNotCarried,
            subject: format!("controller {controller}"),
            detail: format!(
                "not a controller Styrmin knows: which annotations of the {} Ingresses moving off it it reads is not known (first: {})",
                ingresses.len(),
                ingresses[0],
            ),
        });
    }
    for (class, (controller, count)) in unknown_targets {
        out.push(Preflight {
            reason: PreflightReason::UnknownTargetController,
            subject: format!("IngressClass {class}"),
            detail: format!(
                "{count} Ingresses would move to it, and its spec.controller {controller:?} is no controller the annotation catalog knows: what it does with their annotations is not known (name its catalog id with --target {class}=ID, or fix the class)"
            ),
        });
    }
    out.extend(shared_controllers(classes, &involved));
    out
}

/// The default class `class` serves the `classless` Ingresses. When the change moves
/// Ingresses off it, they stay: the API server gives an Ingress the default class only when
/// it is created.
fn default_class_picks_up(
    class: &ClassInfo,
    classless: &[String],
    leaving: &BTreeMap<String, Leaving>,
) -> Preflight {
    let controller = class.controller.as_deref().unwrap_or("its controller");
    let detail = match leaving.get(&class.name) {
        None => format!(
            "marked {DEFAULT_CLASS_ANNOTATION}: the {} Ingresses left with no class (R5) are served by {controller} (first: {})",
            classless.len(),
            classless[0],
        ),
        Some(how) => format!(
            "marked {DEFAULT_CLASS_ANNOTATION}, and {}: the {} Ingresses left with no class (R5) stay on it, served by {controller}; a default class is given only when an Ingress is created, so they do not follow (first: {})",
            how.as_str(),
            classless.len(),
            classless[0],
        ),
    };
    Preflight {
        reason: PreflightReason::DefaultClassPicksUp,
        subject: format!("IngressClass {}", class.name),
        detail,
    }
}

/// Environments whose proposed levels turn the dedicated controller on while it is not
/// `RUNNING` (or there is none).
fn controllers_not_running(proposed: &View) -> Vec<Preflight> {
    let mut environments: BTreeSet<&str> = proposed.environment_ids().into_iter().collect();
    environments.extend(
        proposed
            .deployments()
            .filter_map(|(_, d)| d.environment.as_deref()),
    );
    let mut findings = Vec::new();
    for environment in environments {
        if !resolve(&proposed.levels_for_environment(environment))
            .target
            .is_dedicated()
        {
            continue;
        }
        let controllers: Vec<_> = proposed.controllers_of(environment).collect();
        if controllers.is_empty() {
            findings.push(Preflight {
                reason: PreflightReason::ControllerNotRunning,
                subject: format!("environment {environment}"),
                detail: "dedicated ingress on, but no ingress-controller deployment in it: its Ingresses would be served by nobody".to_owned(),
            });
        }
        for (id, controller) in controllers {
            if controller.phase != Phase::Running {
                findings.push(Preflight {
                    reason: PreflightReason::ControllerNotRunning,
                    subject: format!("deployment {id}"),
                    detail: format!(
                        "the dedicated ingress controller of environment {environment} is {}, not RUNNING",
                        controller.phase
                    ),
                });
            }
        }
    }
    findings
}

/// The plan as a table: one block per environment, then the pre-flight findings and a
/// summary line.
pub fn render_table(plan: &Plan) -> String {
    let mut out = String::new();
    for (environment, ingresses) in &plan.environments {
        let _ = writeln!(out, "ENVIRONMENT {environment}");
        let rows: Vec<[String; 7]> = ingresses
            .iter()
            .map(|i| {
                [
                    format!("{}/{}", i.namespace, i.name),
                    if i.record {
                        "record".to_owned()
                    } else {
                        "levels".to_owned()
                    },
                    match &i.would {
                        Some(would) => format!("warn (would: {})", would.short()),
                        None => i.mode.to_string(),
                    },
                    i.now.short(),
                    i.right_after.short(),
                    i.next_deploy.short(),
                    i.moves.as_str().to_owned(),
                ]
            })
            .collect();
        let header = [
            "INGRESS",
            "SETTINGS",
            "MODE",
            "NOW",
            "RIGHT AFTER",
            "NEXT DEPLOY",
            "MOVES",
        ];
        let mut widths = header.map(str::len);
        for row in &rows {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.chars().count());
            }
        }
        let line = |cells: &[&str]| {
            let mut text = String::from(" ");
            for (cell, width) in cells.iter().zip(widths) {
                let _ = write!(text, " {cell:<width$}");
            }
            text.trim_end().to_owned()
        };
        let _ = writeln!(out, "{}", line(&header));
        for row in &rows {
            let cells: Vec<&str> = row.iter().map(String::as_str).collect();
            let _ = writeln!(out, "{}", line(&cells));
        }
    }
    if !plan.preflight.is_empty() {
        let _ = writeln!(out, "PRE-FLIGHT");
        for finding in &plan.preflight {
            let _ = writeln!(
                out,
                "  {}  {}: {}",
                finding.reason.as_str(),
                finding.subject,
                finding.detail
            );
        }
    }
    let (now, later) = plan.moves();
    let total: usize = plan.environments.values().map(Vec::len).sum();
    let _ = writeln!(
        out,
        "{total} Ingresses: {now} move right after the change, {later} at their next deploy; {} pre-flight findings",
        plan.preflight.len()
    );
    out
}

/// The JSON form: the plan by reference, serialized as it is written (no tree of values).
#[derive(Debug, Serialize)]
pub struct JsonPlan<'a> {
    #[serde(flatten)]
    content: JsonContent<'a>,
    /// SHA-256 of the rest, as written: the same cluster, proposal and catalog give the
    /// same hash (the plan holds no clock), so CI can tell a changed plan from a rerun.
    hash: String,
}

/// What the hash covers: everything but the hash.
#[derive(Debug, Serialize)]
struct JsonContent<'a> {
    environments: &'a BTreeMap<String, Vec<PlannedIngress>>,
    preflight: &'a [Preflight],
    moves: JsonMoves,
    annotations: &'a [AnnotationReport],
    hosts: &'a [HostReport],
    /// The annotation catalog's revision the verdicts come from.
    catalog_revision: u32,
}

#[derive(Debug, Serialize)]
struct JsonMoves {
    right_after: usize,
    next_deploy: usize,
}

impl<'a> JsonPlan<'a> {
    /// `{"environments": {...}, "preflight": [...], "moves": {...}, "annotations": [...],
    /// "hosts": [...], "catalog_revision": N, "hash": "..."}` of `plan`.
    pub fn of(plan: &'a Plan) -> Self {
        let (right_after, next_deploy) = plan.moves();
        let content = JsonContent {
            environments: &plan.environments,
            preflight: &plan.preflight,
            moves: JsonMoves {
                right_after,
                next_deploy,
            },
            annotations: &plan.annotations,
            hosts: &plan.hosts,
            catalog_revision: crate::annotation_catalog::catalog().revision,
        };
        // Serializing these types to a Vec does not fail.
        let bytes = serde_json::to_vec(&content).unwrap_or_default();
        let digest = ring::digest::digest(&ring::digest::SHA256, &bytes);
        let hash = digest
            .as_ref()
            .iter()
            .fold(String::with_capacity(64), |mut hex, byte| {
                let _ = write!(hex, "{byte:02x}");
                hex
            });
        JsonPlan { content, hash }
    }
}

/// Writes the plan as JSON ([`JsonPlan`]).
pub fn write_json(plan: &Plan, out: &mut impl std::io::Write) -> std::io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, &JsonPlan::of(plan))?;
    out.write_all(b"\n")
}

/// The plan as JSON text (see [`write_json`]).
pub fn render_json(plan: &Plan) -> String {
    let mut text = Vec::new();
    // Writing to a Vec fails only if serializing does, which these types never do.
    let _ = write_json(plan, &mut text);
    String::from_utf8_lossy(&text).into_owned()
}

/// The proposed objects of `plan -f`, as `kubectl apply -f` takes them.
#[derive(Clone, Debug, Default)]
pub struct Proposal {
    pub clusters: Vec<Arc<StyrminCluster>>,
    pub environments: Vec<Arc<StyrminEnvironment>>,
    pub deployments: Vec<Arc<StyrminDeployment>>,
}

#[derive(Debug, thiserror::Error)]
pub enum ProposalError {
    #[error("{origin}: not YAML or JSON")]
    Parse {
        origin: String,
        #[source]
        source: Box<serde_saphyr::Error>,
    },
    #[error(
        "{origin}, document {document}: {kind} is not a proposal: expected a StyrminCluster, StyrminEnvironment or StyrminDeployment of styrmin.io/v1alpha1 (or a List of them)"
    )]
    NotStyrmin {
        origin: String,
        document: usize,
        kind: String,
    },
    #[error("{origin}, document {document}: {kind} {name}")]
    Invalid {
        origin: String,
        document: usize,
        kind: String,
        name: String,
        #[source]
        source: serde_json::Error,
    },
}

/// What is wrong with one proposed object, wherever it was read.
#[derive(Debug, thiserror::Error)]
pub enum ChangeError {
    #[error(
        "{kind} is not a level object: expected a StyrminCluster, StyrminEnvironment or StyrminDeployment of styrmin.io/v1alpha1"
    )]
    NotStyrmin { kind: String },
    #[error("{kind} {name}")]
    Invalid {
        kind: String,
        name: String,
        #[source]
        source: serde_json::Error,
    },
}

impl Proposal {
    /// Adds the objects of one file (YAML documents or JSON; `List`s are opened).
    pub fn add_file(&mut self, origin: &str, text: &str) -> Result<(), ProposalError> {
        let documents: Vec<Option<serde_json::Value>> =
            serde_saphyr::from_multiple(text).map_err(|source| ProposalError::Parse {
                origin: origin.to_owned(),
                source: Box::new(source),
            })?;
        for (index, document) in documents.into_iter().enumerate() {
            let Some(document) = document else { continue };
            let items = match document.get("kind").and_then(serde_json::Value::as_str) {
                Some("List") => document
                    .get("items")
                    .and_then(serde_json::Value::as_array)
                    .cloned()
                    .unwrap_or_default(),
                _ => vec![document],
            };
            for item in items {
                self.add_object(origin, index + 1, item)?;
            }
        }
        Ok(())
    }

    fn add_object(
        &mut self,
        origin: &str,
        document: usize,
        object: serde_json::Value,
    ) -> Result<(), ProposalError> {
        self.add_change(object).map_err(|error| match error {
            ChangeError::NotStyrmin { kind } => ProposalError::NotStyrmin {
                origin: origin.to_owned(),
                document,
                kind,
            },
            ChangeError::Invalid { kind, name, source } => ProposalError::Invalid {
                origin: origin.to_owned(),
                document,
                kind,
                name,
                source,
            },
        })
    }

    /// Adds one proposed object (not a `List`); the error says what is wrong with it, the
    /// caller where it was read.
    pub fn add_change(&mut self, object: serde_json::Value) -> Result<(), ChangeError> {
        let text = |key: &str| {
            object
                .get(key)
                .and_then(serde_json::Value::as_str)
                .unwrap_or("")
                .to_owned()
        };
        let (api_version, kind) = (text("apiVersion"), text("kind"));
        let name = object
            .pointer("/metadata/name")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("(no name)")
            .to_owned();
        let invalid = |source| ChangeError::Invalid {
            kind: kind.clone(),
            name: name.clone(),
            source,
        };
        let not_styrmin = || ChangeError::NotStyrmin {
            kind: format!("{api_version} {kind}").trim().to_owned(),
        };
        if api_version != format!("{}/{}", crate::crd::GROUP, crate::crd::VERSION) {
            return Err(not_styrmin());
        }
        match kind.as_str() {
            "StyrminCluster" => self
                .clusters
                .push(Arc::new(serde_json::from_value(object).map_err(invalid)?)),
            "StyrminEnvironment" => self
                .environments
                .push(Arc::new(serde_json::from_value(object).map_err(invalid)?)),
            "StyrminDeployment" => self
                .deployments
                .push(Arc::new(serde_json::from_value(object).map_err(invalid)?)),
            _ => return Err(not_styrmin()),
        }
        Ok(())
    }

    /// The cluster's objects with the proposed ones applied: an object of the same kind,
    /// namespace and name is replaced, a new one added. A proposed StyrminDeployment
    /// without a status keeps the status of the one it replaces (`kubectl apply` does not
    /// write status), so its last-deployed record stays.
    pub fn apply_to(
        &self,
        clusters: &[Arc<StyrminCluster>],
        environments: &[Arc<StyrminEnvironment>],
        deployments: &[Arc<StyrminDeployment>],
    ) -> Proposal {
        let mut deployments_after = replace(deployments, &self.deployments);
        for proposed in &mut deployments_after {
            if proposed.status.is_none() {
                let key = key_of(proposed.as_ref());
                if let Some(old) = deployments.iter().find(|d| key_of(d.as_ref()) == key) {
                    Arc::make_mut(proposed).status = old.status.clone();
                }
            }
        }
        Proposal {
            clusters: replace(clusters, &self.clusters),
            environments: replace(environments, &self.environments),
            deployments: deployments_after,
        }
    }
}

fn key_of<K: kube::Resource>(object: &K) -> (Option<String>, Option<String>) {
    (object.meta().namespace.clone(), object.meta().name.clone())
}

fn replace<K: kube::Resource + Clone>(current: &[Arc<K>], proposed: &[Arc<K>]) -> Vec<Arc<K>> {
    let mut out: Vec<Arc<K>> = current
        .iter()
        .filter(|object| {
            let key = key_of(object.as_ref());
            !proposed.iter().any(|p| key_of(p.as_ref()) == key)
        })
        .cloned()
        .collect();
    out.extend(proposed.iter().cloned());
    out
}
