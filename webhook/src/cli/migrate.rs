//! `styrmin-webhook migrate`: StyrminMigrations from the command line, a thin layer over the
//! custom resource (docs/rollout.md, "Migrate step by step"). `plan` and `start` read a
//! migration from a file ([`file`](mod@file)); `status` reads and watches one
//! ([`render`]); `pause`, `resume` and `abort` set a switch of its spec ([`calls`]). The
//! holder of the controllers' Lease carries migrations out (`styrmin-webhook controllers
//! --migrations`); nothing here does.
//!
//! Exit status, as `plan`'s: 0 done (for `plan`: nothing moves in any step and nothing found),
//! 1 for `plan` something moves or a finding, for `status --watch` the migration ended
//! `RolledBack` or `Failed`; 2 it could not be done. On an error stdout is left empty.

pub mod calls;
pub mod file;
pub mod render;
pub mod steps;

use std::io::{IsTerminal as _, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use futures::StreamExt as _;
use kube::Client;

use super::shared::{ClusterArgs, Output, OutputArgs, warn_ignored};
use crate::crd::StyrminMigration;
use crate::crd::migration::{MigrationPhase, StyrminMigrationSpec};
use crate::kube_source::Snapshot;
use crate::plan::{ClassInfo, Proposal};
use calls::Switch;
use file::{ValidMigration, read_migration};
use steps::{Cluster, StepPlan, plan_steps};

/// The options of `migrate`.
#[derive(Debug, Args)]
pub struct MigrateArgs {
    #[command(subcommand)]
    pub command: MigrateCommand,
}

/// The subcommands of `migrate`.
#[derive(Debug, Subcommand)]
pub enum MigrateCommand {
    /// Shows what each step of a migration would do, in order, each on top of the steps
    /// before it, as `plan` shows one change. Read-only. Exit status: 0 nothing moves and
    /// nothing found, 1 something moves or a finding, 2 the plan could not be made.
    Plan(PlanArgs),
    /// Checks a migration as `migrate plan` does and creates it; the holder of the
    /// controllers' Lease (`styrmin-webhook controllers --migrations`) carries it out. Exit
    /// status: 0 created, or it already exists with the same steps and settings; 2 not.
    Start(StartArgs),
    /// Shows a migration: its phase and, per step, its progress, counts and failing
    /// Ingresses. Exit status: 0, or with `--watch` 0 once it is Done and 1 once it is
    /// RolledBack or Failed; 2 it could not be read.
    Status(StatusArgs),
    /// Pauses a migration between waves (`spec.paused: true`).
    Pause(NameArgs),
    /// Lets a paused migration go on (`spec.paused: false`).
    Resume(NameArgs),
    /// Rolls back the step in progress and stops the migration (`spec.abort: true`); steps
    /// already Done stay.
    Abort(NameArgs),
}

/// The file of a migration.
#[derive(Debug, Args)]
pub struct FileArgs {
    /// A file holding one StyrminMigration, YAML or JSON.
    #[arg(short = 'f', long = "filename", value_name = "FILE")]
    pub file: PathBuf,
}

/// The options of `migrate plan`.
#[derive(Debug, Args)]
pub struct PlanArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub file: FileArgs,
}

/// The options of `migrate start`.
#[derive(Debug, Args)]
pub struct StartArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    #[command(flatten)]
    pub file: FileArgs,
}

/// The options of `migrate status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    #[command(flatten)]
    pub output: OutputArgs,
    /// The migration's name.
    pub name: String,
    /// Show it again each time it changes, until it is Done, RolledBack or Failed (`-o
    /// json`: one line of JSON each time).
    #[arg(short = 'w', long)]
    pub watch: bool,
}

/// The options of `migrate pause`, `resume` and `abort`.
#[derive(Debug, Args)]
pub struct NameArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// The migration's name.
    pub name: String,
}

impl MigrateArgs {
    /// Runs the subcommand: what it shows on stdout, an error on stderr.
    pub async fn run(self) -> ExitCode {
        let (verb, result) = match self.command {
            MigrateCommand::Plan(args) => ("plan", args.run().await),
            MigrateCommand::Start(args) => ("start", args.run().await),
            MigrateCommand::Status(args) => ("status", args.run().await),
            MigrateCommand::Pause(args) => ("pause", args.run(Switch::Pause).await),
            MigrateCommand::Resume(args) => ("resume", args.run(Switch::Resume).await),
            MigrateCommand::Abort(args) => ("abort", args.run(Switch::Abort).await),
        };
        match result {
            Ok(code) => code,
            Err(error) => {
                eprintln!("styrmin-webhook migrate {verb}: {error:#}");
                ExitCode::from(2)
            }
        }
    }
}

/// Reads and checks the migration of `path`.
pub fn read_file(path: &Path) -> anyhow::Result<ValidMigration> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(read_migration(&path.display().to_string(), &text)?)
}

/// Writes `text` to stdout at once: an error never leaves half of it there.
fn print(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .context("writing to stdout")
}

impl PlanArgs {
    async fn run(self) -> anyhow::Result<ExitCode> {
        let migration = read_file(&self.file.file)?;
        let client = self.cluster.client().await?;
        let plans = plan_migration(&client, &migration).await?;
        let text = match self.output.output {
            Output::Table => steps::render_table(&plans),
            Output::Json => {
                let mut text = Vec::new();
                steps::write_json(&plans, &mut text)?;
                String::from_utf8(text)?
            }
        };
        print(&text)?;
        Ok(if steps::all_quiet(&plans) {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        })
    }
}

/// Reads the cluster as `plan` does and plans every step of `migration`.
pub async fn plan_migration(
    client: &Client,
    migration: &ValidMigration,
) -> anyhow::Result<Vec<StepPlan>> {
    let snapshot = Snapshot::read(client).await?;
    warn_ignored(&snapshot.ignored);
    let classes: Vec<ClassInfo> = snapshot
        .ingress_classes
        .iter()
        .map(|class| ClassInfo::of(class))
        .collect();
    let acme_issuers = crate::acme_issuers::read(client)
        .await
        .context("cannot read cert-manager's Issuers")?;
    let levels = Proposal {
        clusters: snapshot.clusters.clone(),
        environments: snapshot.environments.clone(),
        deployments: snapshot.deployments.clone(),
    };
    let cluster = Cluster {
        levels: &levels,
        kubernetes: snapshot.kubernetes,
        ingresses: &snapshot.ingresses,
        ingress_classes: &classes,
        acme_issuers: &acme_issuers,
    };
    let named: Vec<(&str, &Proposal)> = migration
        .migration
        .spec
        .steps
        .iter()
        .map(|step| step.name.as_str())
        .zip(&migration.steps)
        .collect();
    Ok(plan_steps(&cluster, &named)?)
}

impl StartArgs {
    async fn run(self) -> anyhow::Result<ExitCode> {
        let migration = read_file(&self.file.file)?;
        let client = self.cluster.client().await?;
        let text = match start(&client, &migration.migration).await? {
            Started::Created(created) => {
                let name = created.metadata.name.as_deref().unwrap_or_default();
                format!(
                    "styrminmigration {name} created: {} steps; follow it with `styrmin-webhook migrate status {name} --watch`\n",
                    created.spec.steps.len()
                )
            }
            Started::Exists(existing) => {
                let name = existing.metadata.name.as_deref().unwrap_or_default();
                let phase = existing
                    .status
                    .as_ref()
                    .and_then(|s| s.phase)
                    .map_or("not picked up yet", render::phase_name);
                format!(
                    "styrminmigration {name} already exists with these steps and settings (phase {phase}); follow it with `styrmin-webhook migrate status {name} --watch`\n"
                )
            }
        };
        print(&text)?;
        Ok(ExitCode::SUCCESS)
    }
}

/// What `migrate start` did.
#[derive(Debug)]
pub enum Started {
    Created(StyrminMigration),
    /// It existed with the same steps and settings ([`same_migration`]): a start tried
    /// again, whose first answer was lost, finds what it created.
    Exists(StyrminMigration),
}

/// Creates `migration`, or finds it created with the same steps and settings;
/// [`calls::MigrateCallError::Differs`] when one of its name exists with others.
pub async fn start(
    client: &Client,
    migration: &StyrminMigration,
) -> Result<Started, calls::MigrateCallError> {
    match calls::create(client, migration).await {
        Ok(created) => Ok(Started::Created(created)),
        Err(calls::MigrateCallError::AlreadyExists { name }) => {
            let existing = calls::get(client, &name).await?;
            if same_migration(&existing.spec, &migration.spec) {
                Ok(Started::Exists(existing))
            } else {
                Err(calls::MigrateCallError::Differs { name })
            }
        }
        Err(error) => Err(error),
    }
}

/// Whether two specs ask for the same migration: the same steps, pace, gates and what a
/// failed gate does. The switches a person or a gate flips (`paused`, `abort`, `force`) do
/// not count.
pub fn same_migration(stored: &StyrminMigrationSpec, file: &StyrminMigrationSpec) -> bool {
    let switches_off = |spec: &StyrminMigrationSpec| StyrminMigrationSpec {
        paused: false,
        abort: false,
        force: false,
        ..spec.clone()
    };
    switches_off(stored) == switches_off(file)
}

impl NameArgs {
    async fn run(self, switch: Switch) -> anyhow::Result<ExitCode> {
        let client = self.cluster.client().await?;
        let migration = calls::flip(&client, &self.name, switch).await?;
        print(&switched(&migration, switch))?;
        Ok(ExitCode::SUCCESS)
    }
}

/// What `pause`, `resume` or `abort` did, and the phase the migration is in.
pub fn switched(migration: &StyrminMigration, switch: Switch) -> String {
    let (field, value) = switch.field();
    let name = migration.metadata.name.as_deref().unwrap_or_default();
    let phase = migration
        .status
        .as_ref()
        .and_then(|s| s.phase)
        .map_or("not picked up yet", render::phase_name);
    let note = if render::finished(migration) {
        "; it is finished, so this changes nothing"
    } else {
        ""
    };
    format!("styrminmigration {name}: spec.{field} set to {value} (phase {phase}){note}\n")
}

impl StatusArgs {
    async fn run(self) -> anyhow::Result<ExitCode> {
        let client = self.cluster.client().await?;
        let mut out = std::io::stdout().lock();
        let clear = self.watch && self.output.output == Output::Table && out.is_terminal();
        let last = show_status(
            &client,
            &self.name,
            self.output.output,
            self.watch,
            &mut out,
            clear,
        )
        .await?;
        let failed = matches!(
            last.status.and_then(|s| s.phase),
            Some(MigrationPhase::RolledBack | MigrationPhase::Failed)
        );
        Ok(if self.watch && failed {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        })
    }
}

/// Writes the migration `name` to `out`, and with `watch` again each time what is shown
/// changes, until it is finished (`clear`: clear the terminal before each). Returns it as
/// last read. A watch error is told on stderr and the watch goes on.
pub async fn show_status(
    client: &Client,
    name: &str,
    output: Output,
    watch: bool,
    out: &mut impl Write,
    clear: bool,
) -> anyhow::Result<StyrminMigration> {
    let mut migration = calls::get(client, name).await?;
    let mut shown = frame(&migration, output, watch)?;
    draw(out, &shown, clear)?;
    if !watch || render::finished(&migration) {
        return Ok(migration);
    }
    let mut changes = std::pin::pin!(calls::watch(client, name));
    while let Some(change) = changes.next().await {
        match change {
            Ok(changed) => migration = changed,
            Err(error @ calls::MigrateCallError::Deleted { .. }) => return Err(error.into()),
            Err(error) => {
                eprintln!("warning: {:#}", anyhow::Error::from(error));
                continue;
            }
        }
        let next = frame(&migration, output, watch)?;
        if next != shown {
            shown = next;
            // Frames one after another are told apart by a blank line.
            if !clear && output == Output::Table {
                draw(out, "\n", false)?;
            }
            draw(out, &shown, clear)?;
        }
        if render::finished(&migration) {
            break;
        }
    }
    Ok(migration)
}

/// What is shown of `migration`: the text, or its status as JSON (one line each when
/// watching).
fn frame(migration: &StyrminMigration, output: Output, watch: bool) -> anyhow::Result<String> {
    Ok(match output {
        Output::Table => render::render_status(migration),
        Output::Json => {
            let status = serde_json::to_value(&migration.status)?;
            let status = if status.is_null() {
                serde_json::json!({})
            } else {
                status
            };
            let mut text = if watch {
                serde_json::to_string(&status)?
            } else {
                serde_json::to_string_pretty(&status)?
            };
            text.push('\n');
            text
        }
    })
}

fn draw(out: &mut impl Write, text: &str, clear: bool) -> anyhow::Result<()> {
    // Home, then clear the screen: the new frame replaces the last.
    let clear = if clear { "\x1b[H\x1b[2J" } else { "" };
    out.write_all(clear.as_bytes())
        .and_then(|()| out.write_all(text.as_bytes()))
        .and_then(|()| out.flush())
        .context("writing to stdout")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_migration_ignores_the_switches_and_nothing_else() {
        let text = "apiVersion: styrmin.io/v1alpha1\nkind: StyrminMigration\nmetadata: {name: m}\nspec:\n  steps:\n  - name: staging\n    changes:\n    - {apiVersion: styrmin.io/v1alpha1, kind: StyrminEnvironment, metadata: {name: staging}, spec: {ingressClass: haproxy}}\n";
        let file = read_migration("m.yaml", text).unwrap().migration.spec;
        let mut stored = file.clone();
        stored.paused = true;
        stored.force = true;
        assert!(same_migration(&stored, &file));
        stored.pace.batch_size = 1;
        assert!(!same_migration(&stored, &file));
        let mut other = file.clone();
        other.steps[0].changes[0]["spec"]["ingressClass"] = serde_json::Value::from("traefik");
        assert!(!same_migration(&other, &file));
    }
}
