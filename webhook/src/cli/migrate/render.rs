//! `migrate status`: a migration as a person reads it, a pure function of the object, so that
//! `--watch` redraws only when what is shown changes. Every string the cluster gave (names,
//! reasons, messages) is shown without control characters and clipped: the status is written
//! by the executor, but the names and reasons in it come from other people's objects.

use std::fmt::Write as _;

use crate::client_text::clip;
use crate::crd::StyrminMigration;
use crate::crd::migration::{MigrationPhase, StepPhase, StepStatus};

/// Cells of a progress bar.
const BAR: usize = 20;

/// Whether a migration's phase is one it does not leave: `Done`, `RolledBack` or `Failed`.
pub fn finished(migration: &StyrminMigration) -> bool {
    matches!(
        migration.status.as_ref().and_then(|s| s.phase),
        Some(MigrationPhase::Done | MigrationPhase::RolledBack | MigrationPhase::Failed)
    )
}

/// The migration as text: its phase, a row per step with a progress bar and the counts,
/// then what failed and why.
pub fn render_status(migration: &StyrminMigration) -> String {
    let mut out = String::new();
    let status = migration.status.clone().unwrap_or_default();
    let steps = &migration.spec.steps;
    let phase = status
        .phase
        .map_or("Pending (not picked up yet)", phase_name);
    let _ = write!(
        out,
        "StyrminMigration {}: {phase}",
        shown(migration.metadata.name.as_deref().unwrap_or_default())
    );
    if let Some(current) = &status.current_step {
        match steps.iter().position(|s| &s.name == current) {
            Some(index) => {
                let _ = write!(
                    out,
                    ", step {} of {} ({})",
                    index + 1,
                    steps.len(),
                    shown(current)
                );
            }
            None => {
                let _ = write!(out, ", step {}", shown(current));
            }
        }
    }
    out.push('\n');
    let asked: Vec<&str> = [
        (migration.spec.paused, "pause"),
        (migration.spec.abort, "abort"),
        (migration.spec.force, "force"),
    ]
    .into_iter()
    .filter_map(|(set, name)| set.then_some(name))
    .collect();
    if !asked.is_empty() {
        let _ = writeln!(out, "asked for: {}", asked.join(", "));
    }
    let rows: Vec<(String, StepStatus)> = steps
        .iter()
        .map(|step| {
            let found = status.steps.iter().find(|s| s.name == step.name);
            (shown(&step.name), found.cloned().unwrap_or_default())
        })
        .collect();
    out.push_str(&table(&rows));
    for (name, step) in &rows {
        details(&mut out, name, step);
    }
    for condition in &status.conditions {
        if condition.status == "True" && !condition.message.is_empty() {
            let _ = writeln!(
                out,
                "{} ({}): {}",
                shown(&condition.type_),
                shown(&condition.reason),
                shown(&condition.message)
            );
        }
    }
    out
}

/// The steps' rows, in columns.
fn table(rows: &[(String, StepStatus)]) -> String {
    let header = [
        "STEP", "PHASE", "PROGRESS", "PLANNED", "MOVED", "SERVED", "FAILED",
    ];
    let cells: Vec<[String; 7]> = rows
        .iter()
        .map(|(name, step)| {
            [
                name.clone(),
                step_phase_name(step.phase).to_owned(),
                bar(step),
                step.planned.to_string(),
                step.moved.to_string(),
                step.served.to_string(),
                step.failed.to_string(),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &cells {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: &[&str]| {
        let mut text = String::new();
        for (column, (cell, width)) in cells.iter().zip(widths).enumerate() {
            // Names and phases to the left, numbers to the right.
            if column < 3 {
                let _ = write!(text, "  {cell:<width$}");
            } else {
                let _ = write!(text, "  {cell:>width$}");
            }
        }
        let _ = writeln!(out, "{}", text.trim_end());
    };
    line(&header);
    for row in &cells {
        let cells: Vec<&str> = row.iter().map(String::as_str).collect();
        line(&cells);
    }
    out
}

/// `[#########-----------]  45%`: moved of planned; a step `Done` with nothing planned is
/// whole.
fn bar(step: &StepStatus) -> String {
    let percent = match (step.planned, step.phase) {
        (0, StepPhase::Done) => 100,
        (0, _) => 0,
        (planned, _) => (u64::from(step.moved.min(planned)) * 100 / u64::from(planned)) as usize,
    };
    let filled = percent * BAR / 100;
    format!(
        "[{}{}] {percent:>3}%",
        "#".repeat(filled),
        "-".repeat(BAR - filled)
    )
}

/// A step's message, pre-flight findings and failing Ingresses, when it has any.
fn details(out: &mut String, name: &str, step: &StepStatus) {
    if let Some(message) = &step.message {
        let _ = writeln!(out, "{name}: {}", shown(message));
    }
    for finding in &step.preflight {
        let _ = writeln!(out, "{name}: pre-flight: {}", shown(finding));
    }
    if step.failed == 0 && step.failing.is_empty() {
        return;
    }
    let listed = step.failing.len();
    let failed = (step.failed as usize).max(listed);
    let _ = write!(out, "{name}: {failed} failing");
    if listed < failed {
        let _ = write!(out, " ({listed} listed)");
    }
    out.push('\n');
    for ingress in &step.failing {
        let _ = writeln!(
            out,
            "  {}/{}: {}",
            shown(&ingress.namespace),
            shown(&ingress.name),
            shown(&ingress.reason)
        );
    }
}

/// `text` clipped, with control characters (a terminal's escapes, line breaks) as `?`.
fn shown(text: &str) -> String {
    clip(text)
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// The phase as the API writes it.
pub fn phase_name(phase: MigrationPhase) -> &'static str {
    match phase {
        MigrationPhase::Pending => "Pending",
        MigrationPhase::Running => "Running",
        MigrationPhase::Paused => "Paused",
        MigrationPhase::Done => "Done",
        MigrationPhase::RolledBack => "RolledBack",
        MigrationPhase::Failed => "Failed",
    }
}

fn step_phase_name(phase: StepPhase) -> &'static str {
    match phase {
        StepPhase::Pending => "Pending",
        StepPhase::SettingLevels => "SettingLevels",
        StepPhase::Moving => "Moving",
        StepPhase::Verifying => "Verifying",
        StepPhase::Done => "Done",
        StepPhase::RolledBack => "RolledBack",
        StepPhase::Paused => "Paused",
        StepPhase::Failed => "Failed",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recorded(text: &str) -> StyrminMigration {
        serde_json::from_str(text).unwrap()
    }

    const RUNNING: &str = include_str!("../../../tests/data/migrations/running.json");
    const PAUSED: &str = include_str!("../../../tests/data/migrations/paused-gate-failed.json");
    const ROLLED_BACK: &str = include_str!("../../../tests/data/migrations/rolled-back.json");

    #[test]
    fn a_step_paused_by_its_gate_shows_what_failed_and_why() {
        let migration = recorded(PAUSED);
        assert!(!finished(&migration));
        assert_eq!(
            render_status(&migration),
            "\
StyrminMigration leave-nginx: Paused, step 2 of 2 (cluster)
  STEP     PHASE   PROGRESS                     PLANNED  MOVED  SERVED  FAILED
  staging  Done    [####################] 100%     1200   1200    1200       0
  cluster  Paused  [#-------------------]   6%     4100    250     226      24
cluster: 24 of 250 Ingresses of wave 1 failed the served gate (max 0%): paused
cluster: pre-flight: Ingress styrmin-api3/api-internal: moves from k8s.io/ingress-nginx to haproxy.org/ingress-controller and leaves behind nginx.ingress.kubernetes.io/rewrite-target
cluster: 24 failing (2 listed)
  styrmin-shop7/shop: no address from class haproxy after 300s
  styrmin-api3/api-internal: probe GET http://10.20.0.15:80/ with host api3.apps.example.com: 503
GateFailed (ServedGate): wave 1 of step cluster: 24 Ingresses not served
"
        );
    }

    #[test]
    fn a_running_step_shows_its_progress_and_the_steps_after_it_pending() {
        let migration = recorded(RUNNING);
        assert!(!finished(&migration));
        let text = render_status(&migration);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "StyrminMigration leave-nginx: Running, step 1 of 2 (staging)"
        );
        assert!(
            lines[2].starts_with("  staging  Moving   [#########-----------]  45%"),
            "{text}"
        );
        assert!(
            lines[3].starts_with("  cluster  Pending  [--------------------]   0%"),
            "{text}"
        );
        // Nothing failing, and a condition without a message is not shown.
        assert_eq!(lines.len(), 4, "{text}");
    }

    #[test]
    fn a_rolled_back_migration_is_finished_and_says_what_was_asked() {
        let migration = recorded(ROLLED_BACK);
        assert!(finished(&migration));
        let text = render_status(&migration);
        assert!(
            text.starts_with(
                "StyrminMigration prod-to-traefik: RolledBack, step 1 of 1 (prod)\nasked for: abort\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("prod: aborted: 500 Ingresses moved back to nginx and served\n"),
            "{text}"
        );
    }

    #[test]
    fn a_migration_not_picked_up_yet_has_every_step_pending() {
        let mut migration = recorded(RUNNING);
        migration.status = None;
        assert!(!finished(&migration));
        let text = render_status(&migration);
        assert!(
            text.starts_with("StyrminMigration leave-nginx: Pending (not picked up yet)\n"),
            "{text}"
        );
        assert_eq!(
            text.matches("Pending  [--------------------]   0%").count(),
            2,
            "{text}"
        );
        for phase in [MigrationPhase::Done, MigrationPhase::Failed] {
            migration.status = Some(crate::crd::migration::StyrminMigrationStatus {
                phase: Some(phase),
                ..Default::default()
            });
            assert!(finished(&migration));
        }
    }

    #[test]
    fn a_step_done_with_nothing_planned_is_whole_and_counts_above_planned_stop_at_100() {
        let step = |phase, planned, moved| StepStatus {
            phase,
            planned,
            moved,
            ..StepStatus::default()
        };
        assert_eq!(
            bar(&step(StepPhase::Done, 0, 0)),
            "[####################] 100%"
        );
        assert_eq!(
            bar(&step(StepPhase::Moving, 0, 0)),
            "[--------------------]   0%"
        );
        assert_eq!(
            bar(&step(StepPhase::Moving, 10, 12)),
            "[####################] 100%"
        );
        assert_eq!(
            bar(&step(StepPhase::Moving, 3, 1)),
            "[######--------------]  33%"
        );
    }

    #[test]
    fn names_and_reasons_from_the_cluster_carry_no_control_characters() {
        let mut migration = recorded(PAUSED);
        let status = migration.status.as_mut().unwrap();
        status.steps[1].failing[0].reason = "bad\x1b[2J\nnext".to_owned();
        status.steps[1].failing[0].name = "x".repeat(10_000);
        let text = render_status(&migration);
        assert!(text.contains(": bad?[2J?next\n"), "{text}");
        assert!(!text.contains('\x1b'));
        assert!(text.len() < 2_000, "{}", text.len());
    }
}
