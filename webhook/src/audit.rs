//! The audit of what is already in the cluster (`--source kubernetes` and
//! `styrmin-webhook audit`): every Ingress of a Styrmin namespace judged against the view
//! exactly as admission would judge it ([`judge_ingress`], the one function both use), the
//! Ingresses no controller serves, the controllers stuck `DELETING` and the service aliases
//! that point into a namespace that does not exist.
//!
//! [`audit`] is pure: the view, the watched objects and the time in, an [`CompletedAudit`] out.
//! The kube source runs it on its stores ([`crate::kube_source`]), keeps the last complete
//! one in the [`AuditStore`] while a watch fails, and the webhook exposes it as metrics and
//! `GET /debug/audit`; `styrmin-webhook audit` ([`crate::cli::audit`]) runs it once on lists
//! and prints a table ([`render`]).

pub mod moving;
pub mod objects;
pub mod render;
pub mod round;
pub mod text;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;

use arc_swap::ArcSwapOption;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde::Serialize;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use styrmin_ingress_rules::{
    ClassFields, DEDICATED_CONTROLLER_CLASS, IngressTarget, Level, ResolvedIngress, Setting,
    SettingsSource, resolve,
};

use crate::decide::{IngressJudgement, STUCK_DELETING_AFTER, judge_ingress};
use crate::ingress_controllers::{Carried, carried};
use crate::view::{NAMESPACE_PREFIX, Phase, Role, View, human_duration, namespace_owner, rfc3339};
use objects::{AliasService, AuditedIngress};
use text::Interner;
pub use text::Text;

/// Why something is out of line: a small fixed set (the metric's `reason` label).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// An Ingress whose class fields are not what admission would make them (R3–R5, W5).
    WrongClass,
    /// An Ingress the rules cannot be applied to on this API server (R9): admission denies
    /// its next write.
    CannotEnforce,
    /// An Ingress with no `status.loadBalancer.ingress` after the grace period: no
    /// controller serves it (the product page's R5 symptom).
    NotServed,
    /// An Ingress whose `spec.ingressClassName` names no IngressClass: no controller serves
    /// it (uninstalling a controller deletes its IngressClass).
    UnknownClass,
    /// An ingress controller deployment `DELETING` for longer than the threshold.
    StuckDeleting,
    /// A service alias that points into a namespace that does not exist.
    StaleAlias,
}

impl Reason {
    /// Every reason, in the order reports list them.
    pub const ALL: [Reason; 6] = [
        Reason::WrongClass,
        Reason::CannotEnforce,
        Reason::NotServed,
        Reason::UnknownClass,
        Reason::StuckDeleting,
        Reason::StaleAlias,
    ];
    /// The reasons of an Ingress (`styrmin_webhook_audit_nonconforming_ingresses{reason}`).
    pub const INGRESS: [Reason; 4] = [
        Reason::WrongClass,
        Reason::CannotEnforce,
        Reason::NotServed,
        Reason::UnknownClass,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Reason::WrongClass => "wrong_class",
            Reason::CannotEnforce => "cannot_enforce",
            Reason::NotServed => "not_served",
            Reason::UnknownClass => "unknown_class",
            Reason::StuckDeleting => "stuck_deleting",
            Reason::StaleAlias => "stale_alias",
        }
    }
}

/// Thresholds of the audit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AuditSettings {
    /// How long an Ingress may have no address before it counts as not served.
    pub not_served_grace: Duration,
    /// How long a controller may be `DELETING` before it counts as stuck.
    pub stuck_deleting_after: Duration,
}

/// The default of `--audit-not-served-grace-secs`.
pub const NOT_SERVED_GRACE: Duration = Duration::from_secs(5 * 60);

impl Default for AuditSettings {
    fn default() -> Self {
        AuditSettings {
            not_served_grace: NOT_SERVED_GRACE,
            stuck_deleting_after: STUCK_DELETING_AFTER,
        }
    }
}

/// One thing out of line. `kind`, `namespace` and `name` say which object; `has`, `wants`,
/// `why` and `fix` are one line each, for a person.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub reason: Reason,
    pub kind: &'static str,
    pub namespace: Text,
    pub name: Text,
    pub has: Text,
    pub wants: Text,
    pub why: Text,
    pub fix: Text,
    /// For an Ingress: `record` or `levels` (W5), and the key that decided.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub settings: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<Text>,
    /// `warn` for an Ingress whose deployment is in `enforcement_mode: warn`: admission only
    /// warns, so the finding is what enforcing will change, not a failure of admission.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<&'static str>,
}

impl Finding {
    /// Makes its texts one with equal texts met before (and makes them known, so that
    /// later equal texts become these).
    fn share_text(&mut self, interner: &mut Interner) {
        for text in [
            &mut self.namespace,
            &mut self.name,
            &mut self.has,
            &mut self.wants,
            &mut self.why,
            &mut self.fix,
        ]
        .into_iter()
        .chain(self.decided_by.as_mut())
        {
            interner.share(text);
        }
    }

    /// Its texts.
    fn texts(&self) -> impl Iterator<Item = &Text> {
        [
            &self.namespace,
            &self.name,
            &self.has,
            &self.wants,
            &self.why,
            &self.fix,
        ]
        .into_iter()
        .chain(self.decided_by.as_ref())
    }
}

/// One configuration level as stored, and what it resolves to (the `null` trap shows here).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LevelSummary {
    /// `cluster` or `environment <id>`.
    pub level: String,
    /// `ingressClass` as stored: `absent`, `null`, `""` or the quoted name.
    pub ingress_class: String,
    /// `dedicatedIngress` as stored: `absent`, `null` or `set`.
    pub dedicated_ingress: String,
    /// What a deployment of this level with no settings of its own gets.
    pub resolves_to: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A complete audit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CompletedAudit {
    /// When it was made (RFC 3339) and as unix seconds.
    pub completed_at: String,
    pub completed_at_unix: i64,
    /// Ingresses of Styrmin namespaces judged, and how many of them conform.
    pub ingresses: usize,
    pub conforming_ingresses: usize,
    /// Ingresses a migration step is moving now ([`moving`]): their class is not yet the
    /// one the levels give, and they are not counted `wrong_class` for it.
    pub moving_ingresses: usize,
    /// Per reason: the Ingresses, controllers or aliases found (every reason listed).
    pub counts: BTreeMap<Reason, usize>,
    /// Sorted by reason, namespace and name.
    /// Shared, so that an audit that finds what the last one found keeps the last one's
    /// findings rather than a second copy (at 100,000 Ingresses, tens of MiB).
    pub findings: Arc<[Finding]>,
    /// The cluster level and each environment's, as stored and resolved.
    pub levels: Vec<LevelSummary>,
}

impl CompletedAudit {
    /// True when nothing is out of line.
    pub fn is_clean(&self) -> bool {
        self.findings.is_empty()
    }

    pub fn count(&self, reason: Reason) -> usize {
        self.counts.get(&reason).copied().unwrap_or(0)
    }
}

/// What the audit reads besides the view.
#[derive(Clone, Copy, Debug)]
pub struct AuditInput<'a> {
    pub view: &'a View,
    pub ingresses: &'a [Arc<AuditedIngress>],
    pub aliases: &'a [Arc<AliasService>],
    pub namespaces: &'a HashSet<String>,
    /// The cluster's IngressClasses: each name and its `spec.controller` (empty when it
    /// has none).
    pub ingress_classes: &'a HashMap<String, String>,
    /// Unix seconds.
    pub now: i64,
    /// The audit before this one, if any: its texts are shared rather than made again.
    pub previous: Option<&'a CompletedAudit>,
    /// The Ingresses a migration step is moving now (none outside the controllers).
    pub moving: &'a moving::MovingSet,
}

/// Judges everything once.
pub fn audit(input: &AuditInput<'_>, settings: &AuditSettings) -> CompletedAudit {
    // Each Ingress's texts become the previous audit's equal ones as soon as they are made,
    // so that an audit of a large cluster that does not change allocates almost nothing that
    // outlives the Ingress being judged (at 100,000 Ingresses, all the texts at once would
    // be over 100 MiB, and the heap they leave behind would stay).
    let mut texts = Interner::default();
    for finding in input.previous.iter().flat_map(|p| p.findings.iter()) {
        finding.texts().for_each(|text| texts.learn(text));
    }
    let mut findings = Vec::with_capacity(input.previous.map_or(0, |p| p.findings.len()));
    let mut judged = 0;
    let mut conforming = 0;
    let mut moving = 0;
    let mut ingress_counts: BTreeMap<Reason, usize> = BTreeMap::new();
    for ingress in input.ingresses {
        let Some(owner) = namespace_owner(ingress.namespace()) else {
            continue;
        };
        judged += 1;
        let mut out_of_line = ingress_findings(input, owner, ingress, settings);
        out_of_line.extend(unknown_class(ingress, input.ingress_classes));
        let mut is_moving = false;
        if input.moving.contains(ingress.namespace(), ingress.name()) {
            let before = out_of_line.len();
            out_of_line.retain(|f| f.reason != Reason::WrongClass);
            is_moving = out_of_line.len() < before;
            moving += usize::from(is_moving);
        }
        if out_of_line.is_empty() && !is_moving {
            conforming += 1;
        }
        for finding in &mut out_of_line {
            *ingress_counts.entry(finding.reason).or_default() += 1;
            finding.share_text(&mut texts);
        }
        findings.append(&mut out_of_line);
    }
    let others = stuck_controllers(input.view, input.now, settings.stuck_deleting_after)
        .into_iter()
        .chain(stale_aliases(input.view, input.aliases, input.namespaces));
    for mut finding in others {
        finding.share_text(&mut texts);
        findings.push(finding);
    }
    drop(texts);
    findings
        .sort_by(|a, b| (a.reason, &a.namespace, &a.name).cmp(&(b.reason, &b.namespace, &b.name)));
    let mut counts: BTreeMap<Reason, usize> = Reason::ALL.iter().map(|r| (*r, 0)).collect();
    for reason in Reason::INGRESS {
        counts.insert(reason, ingress_counts.get(&reason).copied().unwrap_or(0));
    }
    for reason in [Reason::StuckDeleting, Reason::StaleAlias] {
        counts.insert(
            reason,
            findings.iter().filter(|f| f.reason == reason).count(),
        );
    }
    CompletedAudit {
        completed_at: rfc3339(input.now),
        completed_at_unix: input.now,
        ingresses: judged,
        conforming_ingresses: conforming,
        moving_ingresses: moving,
        counts,
        findings: findings.into(),
        levels: level_summaries(input.view),
    }
}

/// What an Ingress has: `class "nginx"` (both fields agree), `ingressClassName "a",
/// annotation "b"`, `annotation "traefik"`, or `no class`.
pub fn describe_fields(fields: &ClassFields) -> String {
    match (&fields.ingress_class_name, &fields.class_annotation) {
        (None, None) => "no class".to_owned(),
        (Some(a), Some(b)) if a == b => format!("class {a:?}"),
        (Some(a), None) => format!("ingressClassName {a:?}, no annotation"),
        (None, Some(b)) => format!("annotation {b:?}, no ingressClassName"),
        (Some(a), Some(b)) => format!("ingressClassName {a:?}, annotation {b:?}"),
    }
}

/// What the rules want: `dedicated (annotation traefik, no ingressClassName)`, `class
/// "nginx" (ingressClassName and annotation)`, or `no class (the chart's own fields)`.
pub fn describe_wanted(resolved: &ResolvedIngress) -> String {
    match &resolved.target {
        IngressTarget::Dedicated => {
            format!("dedicated (annotation {DEDICATED_CONTROLLER_CLASS}, no ingressClassName)")
        }
        IngressTarget::Class(class) => {
            format!(
                "class {:?} (ingressClassName and annotation)",
                class.as_str()
            )
        }
        IngressTarget::NoClass => "no class (the chart's own fields)".to_owned(),
    }
}

/// Which settings decided and by which key: `levels: environment.dedicated_ingress`, or
/// `record (status.lastDeployed)`, with the levels' newer answer when they differ.
fn describe_decision(judgement: &IngressJudgement) -> String {
    let settings = &judgement.settings;
    match settings.source() {
        SettingsSource::Levels => format!("levels: {}", settings.resolved.decided_by()),
        SettingsSource::Record if settings.waits_for_redeploy() => format!(
            "record (status.lastDeployed, W5); the levels give {} after a redeploy ({})",
            settings.levels.target,
            settings.levels.decided_by()
        ),
        SettingsSource::Record => "record (status.lastDeployed, W5)".to_owned(),
    }
}

/// The merge patch that gives the Ingress the wanted fields; any write of it goes through
/// the webhook, which makes the same change.
fn fix_command(namespace: &str, name: &str, wanted: &ClassFields) -> String {
    let patch = serde_json::json!({
        "metadata": {"annotations": {styrmin_ingress_rules::CLASS_ANNOTATION: wanted.class_annotation}},
        "spec": {"ingressClassName": wanted.ingress_class_name},
    });
    format!("kubectl -n {namespace} patch ingress {name} --type=merge -p '{patch}'")
}

fn ingress_findings(
    input: &AuditInput<'_>,
    owner: &str,
    ingress: &AuditedIngress,
    settings: &AuditSettings,
) -> Vec<Finding> {
    let (view, now) = (input.view, input.now);
    let current = ingress.class_fields();
    let judgement = judge_ingress(view, owner, &current);
    let warn = styrmin_ingress_rules::resolve_mode(&view.levels_for_deployment(owner))
        .mode
        .is_warn();
    let finding = |reason, wants: String, why: String, fix: String| Finding {
        reason,
        kind: "Ingress",
        namespace: ingress.namespace().into(),
        name: ingress.name().into(),
        has: describe_fields(&current).into(),
        wants: wants.into(),
        why: why.into(),
        fix: fix.into(),
        settings: Some(judgement.settings.source().as_str()),
        decided_by: Some(judgement.settings.resolved.decided_by().to_string().into()),
        mode: warn.then_some("warn"),
    };
    let mut findings = Vec::new();
    let wanted = describe_wanted(&judgement.settings.resolved);
    match &judgement.enforcement {
        Err(error) => findings.push(finding(
            Reason::CannotEnforce,
            wanted.clone(),
            format!("{}; {error}", describe_decision(&judgement)),
            "run Kubernetes 1.27 or later, or turn the dedicated ingress on for it (annotation only)"
                .to_owned(),
        )),
        Ok(enforcement) if !enforcement.changes.is_empty() => findings.push(finding(
            Reason::WrongClass,
            wanted.clone(),
            format!(
                "{}{}",
                describe_decision(&judgement),
                annotations_left_behind(ingress, &current, &enforcement.fields, input)
            ),
            fix_command(ingress.namespace(), ingress.name(), &enforcement.fields),
        )),
        Ok(_) => {}
    }
    let grace = i64::try_from(settings.not_served_grace.as_secs()).unwrap_or(i64::MAX);
    let old_enough = ingress
        .created()
        .is_none_or(|created| now.saturating_sub(created) >= grace);
    if !ingress.has_address() && old_enough {
        // No age: a finding's text depends on the objects only, never on the clock, so
        // that an audit of a cluster that does not change says the same thing again
        // (its PolicyReport is not rewritten).
        let created = ingress
            .created()
            .map(|c| format!("created {}", rfc3339(c)))
            .unwrap_or_else(|| "creation time unknown".to_owned());
        let served_by = match current
            .class_annotation
            .as_ref()
            .or(current.ingress_class_name.as_ref())
        {
            Some(class) => format!("no controller of class {class:?} has served it"),
            None => {
                "no class: no controller that serves class-less Ingresses has served it".to_owned()
            }
        };
        let fix = match &judgement.settings.resolved.target {
            IngressTarget::NoClass => "set ingress_class on the cluster, the environment or the deployment; Styrmin sets it on the Ingress at the next deploy".to_owned(),
            _ => "check that the controller of that class runs (kubectl get ingressclass; its pods and logs)".to_owned(),
        };
        findings.push(finding(
            Reason::NotServed,
            "an address in status.loadBalancer.ingress".to_owned(),
            format!(
                "no address ({created}; grace {}): {served_by}",
                human_duration(settings.not_served_grace.as_secs())
            ),
            fix,
        ));
    }
    findings
}

/// What a move to the wanted class leaves behind (`plan`'s `annotations_not_carried`, said
/// where the audit finds the Ingress will move): the annotations its current class's
/// controller reads and the wanted class's does not. Empty when both classes are the same
/// controller's, when either names no IngressClass, or when nothing is lost.
fn annotations_left_behind(
    ingress: &AuditedIngress,
    current: &ClassFields,
    wanted: &ClassFields,
    input: &AuditInput<'_>,
) -> String {
    let controller = |fields: &ClassFields| {
        let class = fields
            .class_annotation
            .as_ref()
            .or(fields.ingress_class_name.as_ref())?;
        input
            .ingress_classes
            .get(class)
            .filter(|c| !c.is_empty())
            .map(|c| (class.clone(), c.as_str()))
    };
    let (Some((_, from)), Some((class, to))) = (controller(current), controller(wanted)) else {
        return String::new();
    };
    if from == to {
        return String::new();
    }
    let keys = ingress.controller_annotations.iter().map(AsRef::as_ref);
    match carried(keys, from, to) {
        Carried::All | Carried::UnknownFrom => String::new(),
        Carried::Lost { from, to, keys } => format!(
            "; moving it to class {class:?} leaves {} annotations that {} reads and {} does not: {}{}",
            keys.len(),
            from.name,
            to.name,
            keys.join(", "),
            ingress.controller_annotations_note(),
        ),
        Carried::UnknownTo { from, keys } => format!(
            "; class {class:?} is served by {to}, which Styrmin does not know: whether it reads the {} annotations {} reads is not known: {}{}",
            keys.len(),
            from.name,
            keys.join(", "),
            ingress.controller_annotations_note(),
        ),
    }
}

/// An Ingress whose `spec.ingressClassName` names no IngressClass. Only that field is
/// matched against IngressClasses; a controller that reads the annotation needs none.
fn unknown_class(ingress: &AuditedIngress, classes: &HashMap<String, String>) -> Option<Finding> {
    let current = ingress.class_fields();
    let class = current.ingress_class_name.as_ref()?;
    if classes.contains_key(class) {
        return None;
    }
    Some(Finding {
        reason: Reason::UnknownClass,
        kind: "Ingress",
        namespace: ingress.namespace().into(),
        name: ingress.name().into(),
        has: describe_fields(&current).into(),
        wants: format!("an IngressClass named {class:?}").into(),
        why: format!(
            "spec.ingressClassName {class:?} names no IngressClass, so no controller serves it \
             (uninstalling a controller deletes its IngressClass)"
        )
        .into(),
        fix: format!(
            "create the IngressClass {class:?} for the controller that should serve it, or set \
             ingress_class on the cluster, the environment or the deployment to a class that \
             exists (kubectl get ingressclass); Styrmin sets it on the Ingress at the next deploy"
        )
        .into(),
        settings: None,
        decided_by: None,
        mode: None,
    })
}

fn stuck_controllers(view: &View, now: i64, after: Duration) -> Vec<Finding> {
    view.deployments()
        .filter(|(_, d)| d.role == Role::IngressController && d.phase == Phase::Deleting)
        .filter_map(|(id, d)| {
            let removal = d.removal.as_ref()?;
            let since = removal.since()?;
            let elapsed = u64::try_from(now.saturating_sub(since)).unwrap_or(0);
            if elapsed < after.as_secs() {
                return None;
            }
            let name = format!("{NAMESPACE_PREFIX}{id}");
            let hold = removal.hold();
            Some(Finding {
                reason: Reason::StuckDeleting,
                kind: "StyrminDeployment",
                namespace: name.as_str().into(),
                name: name.into(),
                // Since when, not for how long: the text does not move with the clock.
                has: format!("DELETING since {}, {}", rfc3339(since), hold.short()).into(),
                wants: "removed".into(),
                why: format!(
                    "environment {:?}: deploys are denied (W2) until the removal completes",
                    d.environment.as_deref().unwrap_or("")
                )
                .into(),
                fix: hold.advice(id).into(),
                settings: None,
                decided_by: None,
                mode: None,
            })
        })
        .collect()
}

fn stale_aliases(
    view: &View,
    aliases: &[Arc<AliasService>],
    namespaces: &HashSet<String>,
) -> Vec<Finding> {
    aliases
        .iter()
        .filter_map(|alias| {
            let target = alias.target_namespace()?;
            if namespaces.contains(target) {
                return None;
            }
            let namespace = alias.metadata.namespace.clone().unwrap_or_default();
            let name = alias.metadata.name.clone().unwrap_or_default();
            let owner = namespace_owner(target);
            let mut why = format!("namespace {target} does not exist");
            if let Some(deployment) = owner.and_then(|id| view.deployment(id)) {
                why.push_str(&format!(
                    "; deployment {:?} is still in the view (phase {}): a restore may be re-creating it, keep the alias",
                    owner.unwrap_or(""),
                    deployment.phase
                ));
            }
            let check = match owner {
                Some(id) => format!(
                    "first check that no deployment has the id {id} (styrminctl deployments get {id}): a restore deletes and re-creates its namespace"
                ),
                None => format!("first check that nothing re-creates the namespace {target}"),
            };
            Some(Finding {
                reason: Reason::StaleAlias,
                kind: "Service",
                has: format!(
                    "externalName {}",
                    alias.spec.external_name.as_deref().unwrap_or("")
                )
                .into(),
                wants: format!("namespace {target}").into(),
                why: why.into(),
                fix: format!("{check}; then kubectl delete service --namespace {namespace} {name}")
                    .into(),
                namespace: namespace.into(),
                name: name.into(),
                settings: None,
                decided_by: None,
                mode: None,
            })
        })
        .collect()
}

fn stored<T>(setting: &Setting<T>, value: impl Fn(&T) -> String) -> String {
    match setting {
        Setting::Absent => "absent".to_owned(),
        Setting::Null => "null".to_owned(),
        Setting::Value(v) => value(v),
    }
}

fn level_summary(
    name: String,
    level: &Level,
    resolved: &ResolvedIngress,
    note: Option<String>,
) -> LevelSummary {
    LevelSummary {
        level: name,
        ingress_class: stored(&level.ingress_class, |c| format!("{c:?}")),
        dedicated_ingress: stored(&level.dedicated_ingress, |_| "set".to_owned()),
        resolves_to: format!("{} ({})", resolved.target, resolved.decided_by()),
        note,
    }
}

/// The cluster level and every environment's, with what each resolves to; the cluster's
/// note explains an absent `ingressClass` (the `null` trap).
fn level_summaries(view: &View) -> Vec<LevelSummary> {
    let cluster = view.cluster();
    let resolved = resolve(&styrmin_ingress_rules::Levels {
        cluster,
        environment: None,
        deployment: None,
    });
    let note = match &cluster.ingress_class {
        Setting::Value(class) if view.cluster_class_applied_null() => Some(format!(
            "ingressClass is stored as {class:?}, but the StyrminCluster was last applied with \
             `ingressClass: null` (its kubectl.kubernetes.io/last-applied-configuration says so): \
             client-side `kubectl apply` drops a null and the CRD's default filled the field, so \
             the class is {class:?}, not no class; write `ingressClass: \"\"` for no class"
        )),
        Setting::Absent => Some(
            "ingressClass is not in the stored StyrminCluster, which means the default class traefik; \
             `ingressClass: null` applied with client-side `kubectl apply` was stored like this before \
             the CRD gave the field its default: write `ingressClass: \"\"` for no class"
                .to_owned(),
        ),
        _ => None,
    };
    let mut levels = vec![level_summary(
        "cluster".to_owned(),
        cluster,
        &resolved,
        note,
    )];
    for id in view.environment_ids() {
        if let Some(level) = view.environment(id) {
            let resolved = resolve(&view.levels_for_environment(id));
            levels.push(level_summary(
                format!("environment {id}"),
                level,
                &resolved,
                None,
            ));
        }
    }
    levels
}

/// The last complete audit, and the watch error that keeps it from being newer.
#[derive(Debug, Default)]
pub struct AuditStore {
    report: ArcSwapOption<CompletedAudit>,
    /// Set while a watch fails (the report then gets older); cleared by the next audit.
    stale_because: Mutex<Option<String>>,
}

impl AuditStore {
    pub fn report(&self) -> Option<Arc<CompletedAudit>> {
        self.report.load_full()
    }

    /// A new complete audit.
    pub fn publish(&self, report: CompletedAudit) {
        self.publish_shared(Arc::new(report));
    }

    /// A new complete audit, shared with its other readers (the PolicyReport writer).
    pub fn publish_shared(&self, report: Arc<CompletedAudit>) {
        self.report.store(Some(report));
        if let Ok(mut stale) = self.stale_because.lock() {
            *stale = None;
        }
    }

    /// The audit cannot be renewed (a watch fails): the last one stays, with why.
    pub fn mark_stale(&self, why: String) {
        if let Ok(mut stale) = self.stale_because.lock() {
            *stale = Some(why);
        }
    }

    pub fn stale_because(&self) -> Option<String> {
        self.stale_because.lock().ok().and_then(|s| s.clone())
    }

    /// What `GET /debug/audit` answers at `now`: the state (`none`, `complete`, `stale`),
    /// the report's age, why it is stale, and the report.
    pub fn debug(&self, now: i64) -> serde_json::Value {
        let report = self.report();
        let stale = self.stale_because();
        let state = match (&report, &stale) {
            (None, _) => "none",
            (Some(_), None) => "complete",
            (Some(_), Some(_)) => "stale",
        };
        serde_json::json!({
            "state": state,
            "age_seconds": report.as_ref().map(|r| now.saturating_sub(r.completed_at_unix)),
            "stale_because": stale,
            "report": report.as_deref(),
        })
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    pub reason: &'static str,
}

/// The audit's metrics (registered with the webhook's others, prefix `styrmin_webhook`).
#[derive(Debug, Default)]
pub struct AuditMetrics {
    pub nonconforming_ingresses: Family<ReasonLabels, Gauge>,
    pub ingresses: Gauge,
    pub moving_ingresses: Gauge,
    pub last_complete_timestamp_seconds: Gauge<f64, AtomicU64>,
    pub controllers_stuck_deleting: Gauge,
    pub stale_service_aliases: Gauge,
}

impl AuditMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = AuditMetrics::default();
        registry.register(
            "audit_nonconforming_ingresses",
            format!(
                "Ingresses of Styrmin namespaces out of line at the last complete audit, by reason ({})",
                Reason::INGRESS.map(Reason::as_str).join(", ")
            ),
            metrics.nonconforming_ingresses.clone(),
        );
        registry.register(
            "audit_ingresses",
            "Ingresses of Styrmin namespaces judged by the last complete audit",
            metrics.ingresses.clone(),
        );
        registry.register(
            "audit_moving_ingresses",
            "Ingresses a migration step is moving at the last complete audit: not yet of the class the levels give, and not counted wrong_class",
            metrics.moving_ingresses.clone(),
        );
        registry.register(
            "audit_last_complete_timestamp_seconds",
            "Unix time of the last complete audit (0: none yet); it stops moving while a watch fails",
            metrics.last_complete_timestamp_seconds.clone(),
        );
        registry.register(
            "controllers_stuck_deleting",
            "Ingress controller deployments DELETING for longer than --stuck-deleting-after-secs",
            metrics.controllers_stuck_deleting.clone(),
        );
        registry.register(
            "stale_service_aliases",
            "Service aliases (styrmin.io/service-alias=true) whose externalName points into a namespace that does not exist",
            metrics.stale_service_aliases.clone(),
        );
        metrics
    }

    /// Sets the gauges from the last complete audit (none: nothing is set).
    pub fn export(&self, store: &AuditStore) {
        let Some(report) = store.report() else {
            return;
        };
        let gauge = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        for reason in Reason::INGRESS {
            self.nonconforming_ingresses
                .get_or_create(&ReasonLabels {
                    reason: reason.as_str(),
                })
                .set(gauge(report.count(reason)));
        }
        self.ingresses.set(gauge(report.ingresses));
        self.moving_ingresses.set(gauge(report.moving_ingresses));
        self.last_complete_timestamp_seconds
            .set(report.completed_at_unix as f64);
        self.controllers_stuck_deleting
            .set(gauge(report.count(Reason::StuckDeleting)));
        self.stale_service_aliases
            .set(gauge(report.count(Reason::StaleAlias)));
    }
}

#[cfg(test)]
mod tests;
