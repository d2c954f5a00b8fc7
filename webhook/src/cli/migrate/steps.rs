//! `migrate plan`: the plan of each step, in order, each made on top of the steps before it.
//! The levels after a step are the levels before the next, and what the executor moves in a
//! step ([`movers`]: every Ingress whose levels' answer changes, those of deployments with a
//! last-deployed record too, whose record it rewrites) is, for the next step, where the step
//! took it, so that a move is shown in the step that makes it and not again.

use std::fmt::Write as _;
use std::sync::Arc;

use serde::Serialize;

use crate::acme_issuers::AcmeIssuer;
use crate::audit::objects::AuditedIngress;
use crate::controllers::migration::step::{Movers, movers, record_of, ungated_targets};
use crate::kube_source::{BuiltView, InvalidObject, build_view};
use crate::plan::{
    ClassInfo, JsonPlan, Plan, PlanInput, Preflight, PreflightReason, Proposal, plan,
};
use styrmin_ingress_rules::KubernetesVersion;

/// What the steps are planned against: the cluster as read.
#[derive(Clone, Copy, Debug)]
pub struct Cluster<'a> {
    /// The three Styrmin resources as they are.
    pub levels: &'a Proposal,
    pub kubernetes: Option<KubernetesVersion>,
    pub ingresses: &'a [Arc<AuditedIngress>],
    pub ingress_classes: &'a [ClassInfo],
    pub acme_issuers: &'a [AcmeIssuer],
}

/// One step's plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepPlan {
    pub name: String,
    pub plan: Plan,
}

/// A step whose levels the view cannot be built from.
#[derive(Debug, thiserror::Error)]
#[error("step {step} ({name}): the levels after it")]
pub struct StepPlanError {
    /// From 1.
    pub step: usize,
    pub name: String,
    #[source]
    pub source: InvalidObject,
}

/// The plan of each of `steps` (name and changes), in order.
pub fn plan_steps(
    cluster: &Cluster<'_>,
    steps: &[(&str, &Proposal)],
) -> Result<Vec<StepPlan>, StepPlanError> {
    let view_of = |levels: &Proposal, step: usize, name: &str| {
        build_view(
            &levels.clusters,
            &levels.environments,
            &levels.deployments,
            cluster.kubernetes,
        )
        .map(|BuiltView { view, .. }| view)
        .map_err(|source| StepPlanError {
            step,
            name: name.to_owned(),
            source,
        })
    };
    let mut levels = cluster.levels.clone();
    let mut current = view_of(&levels, 0, "before the first")?;
    let mut ingresses = cluster.ingresses.to_vec();
    let mut plans = Vec::with_capacity(steps.len());
    for (index, (name, changes)) in steps.iter().enumerate() {
        let mut after =
            changes.apply_to(&levels.clusters, &levels.environments, &levels.deployments);
        let proposed = view_of(&after, index + 1, name)?;
        let step_plan = plan(&PlanInput {
            current: &current,
            proposed: &proposed,
            ingresses: &ingresses,
            ingress_classes: cluster.ingress_classes,
            acme_issuers: cluster.acme_issuers,
        });
        let moved = movers(&current, &proposed, &ingresses);
        let mut step_plan = step_plan;
        if let Some(why) = ungated_targets(&moved) {
            step_plan.preflight.push(Preflight {
                reason: PreflightReason::UngatedTarget,
                subject: format!("step {name}"),
                detail: why,
            });
        }
        carry_out(&mut ingresses, &mut after, &moved);
        plans.push(StepPlan {
            name: (*name).to_owned(),
            plan: step_plan,
        });
        let proposed = view_of(&after, index + 1, name)?;
        (levels, current) = (after, proposed);
    }
    Ok(plans)
}

/// What the executor does in a step: each Ingress it moves gets the fields it moves it to,
/// and each deployment whose record it rewrites gets that record.
fn carry_out(ingresses: &mut [Arc<AuditedIngress>], levels: &mut Proposal, movers: &Movers) {
    for mover in &movers.ingresses {
        let found = ingresses
            .iter_mut()
            .find(|i| i.namespace() == mover.namespace && i.name() == mover.name);
        if let Some(ingress) = found {
            Arc::make_mut(ingress).set_class_fields(&mover.to);
        }
    }
    for (id, target) in &movers.records {
        let name = format!("styrmin-{id}");
        let found = levels.deployments.iter_mut().find(|d| {
            d.metadata.name.as_deref() == Some(&name)
                && d.metadata.namespace.as_deref() == Some(&name)
        });
        if let Some(deployment) = found {
            Arc::make_mut(deployment)
                .status
                .get_or_insert_with(Default::default)
                .last_deployed = serde_json::from_value(record_of(target)).ok();
        }
    }
}

/// Whether every step's plan is quiet: nothing moves and nothing found (exit 0).
pub fn all_quiet(plans: &[StepPlan]) -> bool {
    plans.iter().all(|step| step.plan.is_quiet())
}

/// The plans as tables, one block per step under its name.
pub fn render_table(plans: &[StepPlan]) -> String {
    let mut out = String::new();
    for (index, step) in plans.iter().enumerate() {
        if index > 0 {
            out.push('\n');
        }
        let _ = writeln!(out, "STEP {} of {}: {}", index + 1, plans.len(), step.name);
        out.push_str(&crate::plan::render_table(&step.plan));
    }
    out
}

#[derive(Serialize)]
struct JsonStep<'a> {
    name: &'a str,
    plan: JsonPlan<'a>,
}

/// The plans as JSON: `{"steps": [{"name": ..., "plan": {...as plan -o json...}}]}`.
pub fn write_json(plans: &[StepPlan], out: &mut impl std::io::Write) -> std::io::Result<()> {
    #[derive(Serialize)]
    struct Steps<'a> {
        steps: Vec<JsonStep<'a>>,
    }
    let steps = Steps {
        steps: plans
            .iter()
            .map(|step| JsonStep {
                name: &step.name,
                plan: JsonPlan::of(&step.plan),
            })
            .collect(),
    };
    serde_json::to_writer_pretty(&mut *out, &steps)?;
    out.write_all(b"\n")
}
