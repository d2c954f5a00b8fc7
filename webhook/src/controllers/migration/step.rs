//! What one step of a migration does, as pure functions of what the executor read: the
//! levels before and after the step ([`Levels`]), the Ingresses it moves and where to
//! ([`movers`]), the record a deployment gets ([`record_of`]), and whether a moved Ingress
//! is served ([`judge_served`]).
//!
//! Nothing here remembers which Ingresses were written: an Ingress whose class fields are
//! already its target is moved, and is never written again. That is what lets any replica
//! resume a step from the status and the cluster alone.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::{Value, json};
use styrmin_ingress_rules::{ClassFields, EnforcementMode, IngressTarget, LevelName, Origin};

use crate::audit::objects::AuditedIngress;
use crate::crd::migration::{
    AddressMatch, FailingIngress, MAX_FAILING_LISTED, MigrationStep, StepStatus,
};
use crate::crd::{GROUP, StyrminCluster, StyrminDeployment, StyrminEnvironment, VERSION};
use crate::kube_source::{BuiltView, InvalidObject, build_view};
use crate::plan::{ChangeError, Proposal};
use crate::view::{View, namespace_owner};
use styrmin_ingress_rules::KubernetesVersion;

/// A level object a step sets, named as the API server names it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct LevelKey {
    pub kind: LevelKind,
    pub namespace: Option<String>,
    pub name: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum LevelKind {
    Cluster,
    Environment,
    Deployment,
}

impl LevelKind {
    pub fn kind(self) -> &'static str {
        match self {
            LevelKind::Cluster => "StyrminCluster",
            LevelKind::Environment => "StyrminEnvironment",
            LevelKind::Deployment => "StyrminDeployment",
        }
    }
}

impl std::fmt::Display for LevelKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(namespace) => write!(f, "{} {namespace}/{}", self.kind.kind(), self.name),
            None => write!(f, "{} {}", self.kind.kind(), self.name),
        }
    }
}

/// Why a step cannot be carried out as written.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    #[error("step {step:?}, change {index}: {source}")]
    Change {
        step: String,
        index: usize,
        #[source]
        source: ChangeError,
    },
    #[error("{key}: {source}")]
    Level {
        key: String,
        #[source]
        source: ChangeError,
    },
    #[error("step {step:?}, change {index}: {what}")]
    Key {
        step: String,
        index: usize,
        what: &'static str,
    },
    #[error("the levels {which} the step")]
    View {
        which: &'static str,
        #[source]
        source: InvalidObject,
    },
}

/// A step's changes as the executor carries them out.
#[derive(Clone, Debug, Default)]
pub struct CheckedStep {
    /// The level objects, as `plan -f` applies them.
    pub proposal: Proposal,
    /// Each object's key and the spec to set (exactly, `null`s included), in order.
    pub changes: Vec<(LevelKey, Value)>,
}

/// A step's level objects checked, as the executor checks them before it changes anything:
/// `migrate start` and `migrate plan -f` refuse what this refuses.
pub fn check_step(step: &MigrationStep) -> Result<CheckedStep, StepError> {
    let mut checked = CheckedStep::default();
    for (index, object) in step.changes.iter().enumerate() {
        checked
            .proposal
            .add_change(object.clone())
            .map_err(|source| StepError::Change {
                step: step.name.clone(),
                index: index + 1,
                source,
            })?;
        let key = level_key(object).ok_or(StepError::Key {
            step: step.name.clone(),
            index: index + 1,
            what: "no metadata.name, or a StyrminDeployment without metadata.namespace",
        })?;
        checked.changes.push((
            key,
            object.get("spec").cloned().unwrap_or_else(|| json!({})),
        ));
    }
    Ok(checked)
}

/// A step's level objects, checked ([`check_step`]), each with its key and the spec to set.
pub fn step_changes(step: &MigrationStep) -> Result<Vec<(LevelKey, Value)>, StepError> {
    check_step(step).map(|checked| checked.changes)
}

/// The key of a level object (`None`: not a level object, or unnamed).
pub fn level_key(object: &Value) -> Option<LevelKey> {
    let kind = match object.get("kind")?.as_str()? {
        "StyrminCluster" => LevelKind::Cluster,
        "StyrminEnvironment" => LevelKind::Environment,
        "StyrminDeployment" => LevelKind::Deployment,
        _ => return None,
    };
    let name = object.pointer("/metadata/name")?.as_str()?.to_owned();
    let namespace = object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .filter(|namespace| !namespace.is_empty())
        .map(str::to_owned);
    if kind == LevelKind::Deployment && namespace.is_none() {
        return None;
    }
    Some(LevelKey {
        kind,
        namespace: namespace.filter(|_| kind == LevelKind::Deployment),
        name,
    })
}

/// A level object as a step's status keeps it for a rollback: its spec, or none when the
/// object did not exist, and the `resourceVersion` it was read with.
pub fn previous_object(key: &LevelKey, spec: Option<&Value>, version: Option<&str>) -> Value {
    let mut metadata = json!({"name": key.name});
    if let Some(namespace) = &key.namespace {
        metadata["namespace"] = Value::from(namespace.as_str());
    }
    if let Some(version) = version {
        metadata["resourceVersion"] = Value::from(version);
    }
    let mut object = json!({
        "apiVersion": format!("{GROUP}/{VERSION}"),
        "kind": key.kind.kind(),
        "metadata": metadata,
    });
    if let Some(spec) = spec {
        object["spec"] = spec.clone();
    }
    object
}

/// The three resources' objects.
#[derive(Clone, Debug, Default)]
pub struct Levels {
    pub clusters: Vec<Arc<StyrminCluster>>,
    pub environments: Vec<Arc<StyrminEnvironment>>,
    pub deployments: Vec<Arc<StyrminDeployment>>,
}

impl Levels {
    /// These levels with `objects` set: one with a spec replaces (or adds) the object of its
    /// key, keeping a deployment's status; one without removes it.
    pub fn with(&self, objects: &[(LevelKey, Option<Value>)]) -> Result<Levels, StepError> {
        let mut proposal = Proposal::default();
        for (key, spec) in objects {
            if let Some(spec) = spec {
                proposal
                    .add_change(previous_object(key, Some(spec), None))
                    .map_err(|source| StepError::Level {
                        key: key.to_string(),
                        source,
                    })?;
            }
        }
        let after = proposal.apply_to(&self.clusters, &self.environments, &self.deployments);
        let absent: BTreeSet<&LevelKey> = objects
            .iter()
            .filter(|(_, spec)| spec.is_none())
            .map(|(key, _)| key)
            .collect();
        let kept = |kind: LevelKind, meta: &kube::api::ObjectMeta| {
            let key = LevelKey {
                kind,
                namespace: meta.namespace.clone(),
                name: meta.name.clone().unwrap_or_default(),
            };
            !absent.contains(&key)
        };
        use kube::Resource as _;
        Ok(Levels {
            clusters: keep(after.clusters, |o| kept(LevelKind::Cluster, o.meta())),
            environments: keep(after.environments, |o| {
                kept(LevelKind::Environment, o.meta())
            }),
            deployments: keep(after.deployments, |o| kept(LevelKind::Deployment, o.meta())),
        })
    }

    /// The view these levels make.
    pub fn view(
        &self,
        kubernetes: Option<KubernetesVersion>,
        which: &'static str,
    ) -> Result<View, StepError> {
        let BuiltView { view, .. } = build_view(
            &self.clusters,
            &self.environments,
            &self.deployments,
            kubernetes,
        )
        .map_err(|source| StepError::View { which, source })?;
        Ok(view)
    }
}

fn keep<T>(objects: Vec<Arc<T>>, keep: impl Fn(&T) -> bool) -> Vec<Arc<T>> {
    objects.into_iter().filter(|o| keep(o)).collect()
}

/// The annotation that keeps a deployment's record as it was before a migration moved it
/// (`{"migration": NAME, "lastDeployed": RECORD}`), so that a rollback by any replica puts
/// it back.
pub const RECORD_BEFORE_ANNOTATION: &str = "styrmin.io/record-before-migration";

/// The deployments with the records `migration` replaced put back (as they were before
/// the step), so that the levels before a step are read with the records they had.
pub fn with_kept_records(
    deployments: &[Arc<StyrminDeployment>],
    migration: &str,
) -> Vec<Arc<StyrminDeployment>> {
    deployments
        .iter()
        .map(|deployment| {
            let kept = deployment
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(RECORD_BEFORE_ANNOTATION))
                .and_then(|text| serde_json::from_str::<Value>(text).ok())
                .filter(|kept| kept["migration"] == migration);
            let Some(kept) = kept else {
                return Arc::clone(deployment);
            };
            let record = serde_json::from_value(kept["lastDeployed"].clone()).ok();
            let mut deployment = Arc::clone(deployment);
            Arc::make_mut(&mut deployment)
                .status
                .get_or_insert_with(Default::default)
                .last_deployed = record;
            deployment
        })
        .collect()
}

/// One Ingress a step moves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mover {
    pub namespace: String,
    pub name: String,
    /// Its deployment's id.
    pub deployment: String,
    /// Its class fields as they are.
    pub now: ClassFields,
    /// What admission gives it after the step: the levels' answer, as at a redeploy.
    pub to: ClassFields,
    /// What admission gives it under the levels before the step, with the records as they
    /// were: where a rollback takes it.
    pub back: ClassFields,
}

impl Mover {
    /// Already where the step takes it (moved, or never needed a write).
    pub fn is_moved(&self) -> bool {
        self.now == self.to
    }

    /// The class that serves it after the step.
    pub fn target_class(&self) -> Option<&str> {
        class_of(&self.to)
    }
}

/// Why the gates cannot check where this step moves its Ingresses (`None`: they can). A
/// move to an environment's dedicated controller (R3: the annotation alone) is served by a
/// controller that watches that environment's namespaces only: the canary, in the
/// webhook's namespace, would never be served, and the step would fail its canary gate
/// every time. Such a move happens at each deployment's next deploy instead (or by hand).
/// Moves to no class (R5) need no canary: admission leaves such an Ingress's fields as its
/// chart wrote them, so a step has nothing to write for it.
pub fn ungated_targets(movers: &Movers) -> Option<String> {
    let dedicated: Vec<&Mover> = movers
        .ingresses
        .iter()
        .filter(|m| !m.is_moved() && is_dedicated(&m.to))
        .collect();
    let first = dedicated.first()?;
    Some(format!(
        "{} Ingresses would move to their environment's dedicated controller ({}/{} among \
         them), which serves only its environment's namespaces: the canary gate cannot check \
         that target. Move them at their next deploy, or with a step to a class",
        dedicated.len(),
        first.namespace,
        first.name
    ))
}

/// The fields R3 gives: the dedicated controller's annotation, no `ingressClassName`.
fn is_dedicated(fields: &ClassFields) -> bool {
    fields.ingress_class_name.is_none()
        && fields.class_annotation.as_deref()
            == Some(styrmin_ingress_rules::DEDICATED_CONTROLLER_CLASS)
}

/// Whose a migration is, by its `status.executor` and this executor's Lease
/// (`<namespace>/<name>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ownership<'a> {
    /// No executor has picked it up (or what the status says is no Lease).
    Unclaimed,
    Ours,
    /// Another executor's, elected by the Lease `namespace/name`.
    Theirs {
        namespace: &'a str,
        name: &'a str,
    },
}

pub fn ownership<'a>(executor: Option<&'a str>, ours: &str) -> Ownership<'a> {
    match executor.map(|e| (e, e.split_once('/'))) {
        Some((e, _)) if e == ours => Ownership::Ours,
        Some((_, Some((namespace, name)))) if !namespace.is_empty() && !name.is_empty() => {
            Ownership::Theirs { namespace, name }
        }
        _ => Ownership::Unclaimed,
    }
}

/// The class a controller serves an Ingress with these fields by.
pub fn class_of(fields: &ClassFields) -> Option<&str> {
    fields
        .ingress_class_name
        .as_deref()
        .or(fields.class_annotation.as_deref())
}

/// What a step does to the Ingresses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Movers {
    /// By namespace and name.
    pub ingresses: Vec<Mover>,
    /// Deployment id → the new record of each deployment that has one and moves (W5).
    pub records: BTreeMap<String, IngressTarget>,
    /// Deployments left where they are: their own level decides their class, or they are
    /// in `warn`.
    pub left_in_place: BTreeSet<String>,
}

/// The Ingresses of Styrmin namespaces whose target differs between `before` and
/// `after`: an Ingress moves when the levels' answer for its deployment changes (whatever
/// a record says: a migration moves them the way a redeploy does), or when its deployment
/// goes from `warn` to `enforce`.
pub fn movers(before: &View, after: &View, ingresses: &[Arc<AuditedIngress>]) -> Movers {
    let kubernetes = after.kubernetes_version();
    let mut out = Movers::default();
    let mut changed_environments = BTreeSet::new();
    let mut own_level = BTreeMap::new();
    for ingress in ingresses {
        let Some(owner) = namespace_owner(ingress.namespace()) else {
            continue;
        };
        let then = before.settings_for_deployment(owner);
        let next = after.settings_for_deployment(owner);
        let environment = after
            .deployment(owner)
            .and_then(|d| d.environment.clone())
            .unwrap_or_default();
        let mode = styrmin_ingress_rules::resolve_mode(&after.levels_for_deployment(owner)).mode;
        let mode_then =
            styrmin_ingress_rules::resolve_mode(&before.levels_for_deployment(owner)).mode;
        // From `warn` to `enforce`, the rules start moving what they only warned about.
        let enforced_now = mode_then == EnforcementMode::Warn && mode == EnforcementMode::Enforce;
        if then.levels.target == next.levels.target && !enforced_now {
            if next.levels.origin == Origin::Level(LevelName::Deployment) {
                own_level.insert(owner.to_owned(), environment);
            }
            continue;
        }
        changed_environments.insert(environment);
        if mode == EnforcementMode::Warn {
            out.left_in_place.insert(owner.to_owned());
            continue;
        }
        let now = ingress.class_fields();
        let enforce = |target: &IngressTarget, fields: &ClassFields| {
            styrmin_ingress_rules::enforce(target, fields, kubernetes)
                .map_or_else(|_| fields.clone(), |e| e.fields)
        };
        let to = enforce(&next.levels.target, &now);
        // In `warn`, admission changes nothing: back is where it is.
        let back = match mode_then {
            EnforcementMode::Warn => now.clone(),
            EnforcementMode::Enforce => enforce(&then.resolved.target, &now),
        };
        if then.resolved.origin == Origin::LastDeployed {
            out.records
                .insert(owner.to_owned(), next.levels.target.clone());
        }
        out.ingresses.push(Mover {
            namespace: ingress.namespace().to_owned(),
            name: ingress.name().to_owned(),
            deployment: owner.to_owned(),
            now,
            to,
            back,
        });
    }
    for (owner, environment) in own_level {
        if changed_environments.contains(&environment) {
            out.left_in_place.insert(owner);
        }
    }
    out.ingresses
        .sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    out
}

/// The record (`status.lastDeployed`) of a deployment deployed with `target`.
pub fn record_of(target: &IngressTarget) -> Value {
    match target {
        IngressTarget::Dedicated => json!({"dedicatedIngress": {}}),
        IngressTarget::Class(class) => json!({"ingressClass": class.as_str()}),
        IngressTarget::NoClass => json!({"ingressClass": ""}),
    }
}

/// What the gates read of a moved Ingress.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServedIngress {
    pub fields: ClassFields,
    /// `status.loadBalancer.ingress`: each IP or hostname.
    pub addresses: Vec<String>,
    /// The hosts of its rules.
    pub hosts: Vec<String>,
}

/// Whether an Ingress is served where the step takes it: it has `to`'s class and, with
/// [`AddressMatch::Canary`], one of the addresses the canary of that class got from its
/// controller; with [`AddressMatch::Any`], any address. `Err` says what is missing.
pub fn judge_served(
    ingress: &ServedIngress,
    to: &ClassFields,
    canary: &[String],
    mode: AddressMatch,
) -> Result<String, String> {
    if ingress.fields != *to {
        return Err(format!(
            "its class fields are {} where the step wants {}",
            show(&ingress.fields),
            show(to)
        ));
    }
    let class = class_of(to).unwrap_or("(no class)");
    let found = match mode {
        AddressMatch::Canary => ingress.addresses.iter().find(|a| canary.contains(a)),
        AddressMatch::Any => ingress.addresses.first(),
    };
    match found {
        Some(address) => Ok(address.clone()),
        None if ingress.addresses.is_empty() => Err(format!("no address from class {class:?}")),
        None => Err(format!(
            "addresses {:?}, none of them the address of class {class:?} ({canary:?})",
            ingress.addresses
        )),
    }
}

/// Hosts probed per Ingress, at most: an Ingress's rules are its owner's to write (a
/// thousand hosts is a valid Ingress), and each probe may wait its whole timeout.
pub const MAX_PROBED_HOSTS: usize = 8;

/// The hosts of an Ingress that a probe asks: each once, no wildcard (no request can name
/// `*.example.com`), at most [`MAX_PROBED_HOSTS`].
pub fn hosts_to_probe(hosts: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for host in hosts {
        if !host.starts_with("*.") && !out.contains(host) {
            out.push(host.clone());
        }
        if out.len() == MAX_PROBED_HOSTS {
            break;
        }
    }
    out
}

/// Class fields as a person reads them.
pub fn show(fields: &ClassFields) -> String {
    crate::plan::Fields::from(fields).short()
}

/// Every address the step's canaries got: the target controllers' addresses.
pub fn canary_addresses(step: &StepStatus) -> Vec<String> {
    step.canary
        .iter()
        .flat_map(|c| c.addresses.iter().cloned())
        .collect()
}

/// Adds a failing Ingress to a step's status, keeping at most [`MAX_FAILING_LISTED`].
pub fn note_failing(step: &mut StepStatus, namespace: &str, name: &str, reason: String) {
    if let Some(known) = step
        .failing
        .iter_mut()
        .find(|f| f.namespace == namespace && f.name == name)
    {
        known.reason = reason;
        return;
    }
    if step.failing.len() < MAX_FAILING_LISTED {
        step.failing.push(FailingIngress {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            reason,
        });
    }
}

/// Whether `failed` of `total` is more than `max_percent` allows.
pub fn too_many_failed(failed: usize, total: usize, max_percent: u32) -> bool {
    // failed / total > max / 100, in integers.
    failed > 0 && (failed as u128) * 100 > (total as u128) * u128::from(max_percent)
}

pub use crate::crd::migration::MAX_NOTE;

/// `text` cut at [`MAX_NOTE`] bytes on a character boundary, with `…` when cut: the
/// messages quote what users wrote (class names, hosts), and a status stays small.
pub fn bounded_note(text: &str) -> String {
    crate::crd::migration::bounded(text, MAX_NOTE)
}

/// The status of each step of `spec`, in its order: the entry of `kept` of the same name,
/// or a new `Pending` one. A step that is added, removed or moved leaves the others' status
/// as it was.
pub fn match_steps(spec: &[MigrationStep], mut kept: Vec<StepStatus>) -> Vec<StepStatus> {
    spec.iter()
        .map(|step| match kept.iter().position(|s| s.name == step.name) {
            Some(found) => kept.swap_remove(found),
            None => StepStatus {
                name: step.name.clone(),
                ..StepStatus::default()
            },
        })
        .collect()
}

/// The action of a migration's event: `Migrate-` and a digest of its step and note.
///
/// kube-runtime's recorder merges an event into the last one of the same type, reason,
/// action and object (for six minutes), keeping the first one's note and counting up, so
/// with one action for all, a second step's `LevelsSet` or `StepDone` would only count the
/// first one's again. Keyed by step and note, each says what it says, and only the same
/// event told again is counted.
pub fn event_action(step: Option<&str>, note: &str) -> String {
    let digest = ring::digest::digest(
        &ring::digest::SHA256,
        format!("{}\n{note}", step.unwrap_or_default()).as_bytes(),
    );
    let hex: String = digest.as_ref()[..4]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("Migrate-{hex}")
}

/// The `Progressing` condition a status says, as `metav1.Condition` has it: whether the
/// executor is getting on, the reason (`Starting`, `Moving`, `Verifying`, `RollingBack`;
/// `Paused`, `Done`, `RolledBack`, `Failed` when it is not), and a message.
pub fn progressing(
    status: &crate::crd::migration::StyrminMigrationStatus,
) -> (bool, &'static str, String) {
    use crate::crd::migration::{MigrationPhase, StepPhase};
    let step = status
        .current_step
        .as_ref()
        .and_then(|name| status.steps.iter().find(|s| &s.name == name));
    let which = step.map_or_else(String::new, |s| format!("step {:?}: ", s.name));
    match status.phase {
        Some(MigrationPhase::Paused) => (false, "Paused", format!("{which}paused")),
        Some(MigrationPhase::Done) => (false, "Done", "every step is done".to_owned()),
        Some(MigrationPhase::RolledBack) => (false, "RolledBack", format!("{which}rolled back")),
        Some(MigrationPhase::Failed) => (false, "Failed", format!("{which}failed")),
        None | Some(MigrationPhase::Pending | MigrationPhase::Running) => {
            let reason = match step.map(|s| s.phase) {
                Some(StepPhase::SettingLevels) => "SettingLevels",
                Some(StepPhase::Moving) => "Moving",
                Some(StepPhase::Verifying) => "Verifying",
                Some(StepPhase::RolledBack) => "RollingBack",
                _ => "Starting",
            };
            let counts = step.map_or_else(String::new, |s| {
                format!(
                    "{} of {} moved, {} served, {} failed",
                    s.moved, s.planned, s.served, s.failed
                )
            });
            (true, reason, format!("{which}{counts}"))
        }
    }
}

/// The name and host of the canary Ingress of `class` in a migration: fixed by the two, so
/// that a replica that resumes finds the one already created.
pub fn canary_names(migration: &str, class: &str) -> (String, String) {
    let digest = ring::digest::digest(
        &ring::digest::SHA256,
        format!("{migration}\n{class}").as_bytes(),
    );
    let hex: String = digest.as_ref()[..6]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    (
        format!("styrmin-canary-{hex}"),
        format!("canary-{hex}.styrmin.invalid"),
    )
}

#[cfg(test)]
mod tests;
