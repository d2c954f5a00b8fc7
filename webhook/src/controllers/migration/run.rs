//! The executor: while this replica holds the Lease, it carries out the oldest unfinished
//! [`StyrminMigration`], one step after the other. Every call runs under the hold
//! ([`Leadership::while_held`]); what it has done is in the status before it goes on, so a
//! replica that takes over resumes from there.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use tokio_util::sync::CancellationToken;

use super::calls::{self, CallError};
use super::metrics::MigrationMetrics;
use super::step::{self, LevelKey, Levels, Mover, Movers, Ownership, StepError};
use crate::audit::moving::MovingIngresses;
use crate::controllers::lease::{self, Leadership, LeaseStep, Observed};
use crate::crd::migration::{
    CanaryAddress, ExecutorError, MigrationCondition, MigrationPhase, OnGateFailure, ProbeGate,
    StatusTooLarge, StepPhase, StepStatus, StyrminMigration, StyrminMigrationSpec,
    StyrminMigrationStatus, steps_digest,
};
use crate::kube_calls::{CallBudget, KeyedBackoff};
use crate::kube_source::{Snapshot, SnapshotError, WatchedClusterFeed};
use crate::plan::{ClassInfo, PlanInput, PreflightReason};
use crate::view::View;

/// The condition a blocking pre-flight sets `False` (until the spec changes).
const PREFLIGHT: &str = "PreflightPassed";
/// The condition that says whether the executor gets on, and if not why.
const PROGRESSING: &str = "Progressing";
/// How often the executor looks for a migration to carry out, and at a paused one.
pub const POLL_EVERY: Duration = Duration::from_secs(2);
/// How often a gate looks again at what it waits for.
const GATE_POLL: Duration = Duration::from_secs(2);
/// How often a step under way reads its migration for `abort` and `paused`: they take
/// effect within this, during the writes and the gate's waits too.
const STOP_POLL: Duration = Duration::from_secs(1);

/// `abort` or `paused`, read every [`STOP_POLL`] while a step moves: the waves and the gate
/// stop at the next write or poll. Dropped, it stops reading.
struct StopRequests {
    requested: tokio::sync::watch::Receiver<bool>,
    reader: tokio::task::JoinHandle<()>,
}

impl StopRequests {
    fn start(client: Client, name: String) -> StopRequests {
        let (tell, requested) = tokio::sync::watch::channel(false);
        let reader = tokio::spawn(async move {
            loop {
                tokio::time::sleep(STOP_POLL).await;
                // A read that fails is the waves' own read's to report.
                if let Ok(Some(latest)) = calls::read_migration(&client, &name).await
                    && (latest.spec.abort || latest.spec.paused)
                {
                    tell.send_replace(true);
                    return;
                }
            }
        });
        StopRequests { requested, reader }
    }

    fn requested(&self) -> bool {
        *self.requested.borrow()
    }

    /// Sleeps `wait`, or less when a stop is asked for meanwhile; `true` when it was.
    async fn sleep(&mut self, wait: Duration) -> bool {
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            _ = self.requested.wait_for(|asked| *asked) => {}
        }
        self.requested()
    }
}

impl Drop for StopRequests {
    fn drop(&mut self) {
        self.reader.abort();
    }
}
/// How often a write back that admission did not change is tried again (a replica whose
/// view has not yet seen the new levels answered it).
const WRITE_BACK_TRIES: u32 = 5;
/// Ingresses probed at once during a gate: each probe may wait its whole timeout, so one
/// after the other a wave of unanswered hosts would hold the gate for hours.
const PROBES_IN_FLIGHT: usize = 16;
/// How long a wave waits for admission to give its first Ingress the target.
const VIEW_WAIT: Duration = Duration::from_secs(10);
/// The wait before a migration is tried again after an error, per migration: doubling
/// from this up to [`RETRY_LONGEST`], forgotten once a pass over it ends without one.
pub const RETRY_FIRST: Duration = Duration::from_secs(2);
/// The longest wait: an error that lasts is tried again every five minutes.
pub const RETRY_LONGEST: Duration = Duration::from_secs(300);

/// What the executor needs besides the client.
#[derive(Clone, Debug)]
pub struct MigrationSettings {
    /// The webhook's own namespace, where the canaries are created (empty: the Lease's).
    pub namespace: String,
    /// This replica's name, in events.
    pub identity: String,
    pub metrics: MigrationMetrics,
    /// The controllers' watch stores, which each step reads its movers from; `None`: each
    /// step lists the cluster (a process that keeps no stores).
    pub watched: Option<WatchedClusterFeed>,
    /// Where the step in flight says which Ingresses it moves (the audit counts them as
    /// moving, not `wrong_class`).
    pub moving: MovingIngresses,
    /// `<namespace>/<name>` of the Lease that elects this executor (`status.executor`).
    pub lease: String,
}

/// How long another executor's Lease may go unrenewed before its migrations are taken
/// over, when the Lease does not say (its own duration counts when it does).
const OTHER_LEASE: Duration = Duration::from_secs(15);

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Call(#[from] CallError),
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    #[error(transparent)]
    Step(#[from] StepError),
    #[error(transparent)]
    TooLarge(#[from] StatusTooLarge),
}

impl RunError {
    /// The error's kind, one of [`super::metrics::EXECUTOR_ERRORS`].
    pub fn kind(&self) -> &'static str {
        match self {
            RunError::Call(error) if error.code() == Some(409) => "conflict",
            RunError::Call(CallError::Timeout { .. }) => "timeout",
            RunError::Call(_) => "api",
            RunError::Snapshot(_) => "cluster_read",
            RunError::Step(_) => "levels",
            RunError::TooLarge(_) => "status_too_large",
        }
    }
}

/// How a step ended, for now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StepEnd {
    Done,
    /// Paused, or rolled back, or failed: the migration stops here.
    Stopped,
}

struct Executor {
    client: Client,
    settings: MigrationSettings,
    /// What this replica last saw of each other executor's Lease, and when (its own clock):
    /// a Lease is live while its record keeps changing within its duration.
    other_leases: std::sync::Mutex<HashMap<String, Observed>>,
    leadership: Leadership,
    recorder: Recorder,
    stored: std::sync::Mutex<Stored>,
}

/// The migration's `resourceVersion` the next status write carries, and its status as read
/// or written with it: a write that meets a newer version (409) fails, and the next pass
/// reads the migration again instead of overwriting what another writer stored.
#[derive(Debug, Default)]
struct Stored {
    resource_version: Option<String>,
    status: Option<StyrminMigrationStatus>,
}

/// Runs until `shutdown`: carries out migrations while this replica holds the Lease.
pub async fn run_migrations(
    client: Client,
    settings: MigrationSettings,
    leadership: Leadership,
    shutdown: CancellationToken,
) {
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "styrmin-webhook".to_owned(),
            instance: Some(settings.identity.clone()),
        },
    );
    let executor = Executor {
        client,
        settings,
        leadership,
        recorder,
        other_leases: std::sync::Mutex::default(),
        stored: std::sync::Mutex::default(),
    };
    let mut backoff = KeyedBackoff::new(RETRY_FIRST, RETRY_LONGEST);
    loop {
        if executor.leadership.holds() {
            // A hold that ends during a pass drops it: the next holder goes on from the status.
            let _ = executor
                .leadership
                .while_held(executor.next(&mut backoff))
                .await;
        } else {
            executor.settings.metrics.running.set(0);
            executor.settings.metrics.count_phases([]);
        }
        tokio::select! {
            () = tokio::time::sleep(POLL_EVERY) => {}
            () = executor.leadership.changed() => {}
            () = shutdown.cancelled() => return,
        }
    }
}

/// Whether a migration has ended.
pub fn is_finished(migration: &StyrminMigration) -> bool {
    matches!(
        migration.status.as_ref().and_then(|s| s.phase),
        Some(MigrationPhase::Done | MigrationPhase::RolledBack | MigrationPhase::Failed)
    )
}

/// The phase a migration is counted in (`Pending` until it is picked up).
fn phase_label(migration: &StyrminMigration) -> &'static str {
    match migration.status.as_ref().and_then(|s| s.phase) {
        None | Some(MigrationPhase::Pending) => "Pending",
        Some(MigrationPhase::Running) => "Running",
        Some(MigrationPhase::Paused) => "Paused",
        Some(MigrationPhase::Done) => "Done",
        Some(MigrationPhase::RolledBack) => "RolledBack",
        Some(MigrationPhase::Failed) => "Failed",
    }
}

/// The key the listing of the migrations backs off under (no migration's name is empty).
const LISTING: &str = "";

impl Executor {
    /// Carries out the oldest unfinished migration as far as it goes now, unless it waits
    /// after an error; an error is reported and backs that migration off.
    async fn next(&self, backoff: &mut KeyedBackoff<String>) {
        let metrics = &self.settings.metrics;
        if !backoff.is_due(LISTING, Instant::now()) {
            return;
        }
        let migrations = match calls::list_migrations(&self.client).await {
            Ok(migrations) => migrations,
            Err(error) => {
                let error = RunError::from(error);
                let (count, wait) = backoff.failed(LISTING, Instant::now());
                metrics.executor_error(error.kind());
                tracing::warn!(%error, count, ?wait, "migration: cannot list the migrations; trying again after a backoff");
                return;
            }
        };
        metrics.count_phases(migrations.iter().map(phase_label));
        backoff.keep_only(
            migrations
                .iter()
                .filter(|m| !is_finished(m))
                .filter_map(|m| m.metadata.name.as_deref()),
        );
        let mut unfinished = migrations.into_iter().filter(|m| !is_finished(m));
        // The oldest that no other live executor carries out.
        let migration = loop {
            let Some(migration) = unfinished.next() else {
                metrics.running.set(0);
                return;
            };
            if !self.owned_elsewhere(&migration).await {
                break migration;
            }
        };
        let paused = migration.spec.paused && !migration.spec.abort;
        metrics.running.set(i64::from(!paused));
        let name = migration.metadata.name.clone().unwrap_or_default();
        if !backoff.is_due(&name, Instant::now()) {
            return;
        }
        match self.drive(migration).await {
            Ok(()) => backoff.succeeded(&name),
            Err(error) => {
                let (count, wait) = backoff.failed(&name, Instant::now());
                self.report(&name, &error, count, wait).await;
            }
        }
    }

    /// Whether `migration` is carried out by another executor whose Lease is live (a read
    /// that fails counts as live: two executors must never move one fleet).
    async fn owned_elsewhere(&self, migration: &StyrminMigration) -> bool {
        let executor = migration
            .status
            .as_ref()
            .and_then(|s| s.executor.as_deref());
        let Ownership::Theirs { namespace, name } = step::ownership(executor, &self.settings.lease)
        else {
            return false;
        };
        let read = calls::read_lease(&self.client, namespace, name).await;
        let key = format!("{namespace}/{name}");
        let live = match read {
            Ok(None) => None,
            Ok(Some(spec)) => {
                let now = Instant::now();
                let mut seen = self.other_leases.lock().unwrap_or_else(|e| e.into_inner());
                let observed = Observed::note(seen.remove(&key), &spec, now);
                let step =
                    lease::decide(&spec, &observed, &self.settings.identity, OTHER_LEASE, now);
                seen.insert(key.clone(), observed);
                match step {
                    LeaseStep::Follow { holder } => Some(holder),
                    _ => None,
                }
            }
            Err(error) => Some(format!("unknown ({error})")),
        };
        let name_of = migration.metadata.name.as_deref().unwrap_or_default();
        match live {
            Some(holder) => {
                tracing::info!(migration = name_of, lease = %key, %holder,
                    "migration: carried out by another executor, whose Lease is held; left alone");
                true
            }
            None => {
                tracing::warn!(migration = name_of, lease = %key,
                    "migration: the executor that carried it out no longer holds its Lease; taking it over");
                false
            }
        }
    }

    /// An error that stopped a pass: counted, logged, and kept in the migration's status
    /// (`lastError`, condition `Progressing` with reason `ExecutorError`) and an event, as
    /// far as the API server takes them.
    async fn report(&self, name: &str, error: &RunError, count: u32, wait: Duration) {
        self.settings.metrics.executor_error(error.kind());
        tracing::warn!(migration = name, %error, count, ?wait, "migration: cannot go on; trying again after a backoff");
        let message = step::bounded_note(&format!(
            "{error} (error {count} in a row; tried again in {} s)",
            wait.as_secs()
        ));
        let latest = match calls::read_migration(&self.client, name).await {
            Ok(Some(latest)) => latest,
            Ok(None) => return,
            Err(error) => {
                tracing::debug!(%error, "migration: cannot read it to report an error");
                return;
            }
        };
        self.adopt(&latest);
        let mut status = latest.status.clone().unwrap_or_default();
        status.last_error = Some(ExecutorError {
            message: message.clone(),
            time: crate::view::rfc3339(crate::clock::unix_now()),
            count,
        });
        set_condition(&mut status, PROGRESSING, false, "ExecutorError", &message);
        if let Err(error) = self.store(&latest, &mut status).await {
            tracing::debug!(%error, "migration: cannot write the error into its status");
        }
        // The note leaves the count out: the same error again is counted by the recorder.
        let note = step::bounded_note(&error.to_string());
        self.event(&latest, EventType::Warning, "ExecutorError", None, &note)
            .await;
    }

    /// Takes `migration`'s version and status as the ones the next status write carries.
    fn adopt(&self, migration: &StyrminMigration) {
        let mut stored = self.stored.lock().unwrap_or_else(|p| p.into_inner());
        stored.resource_version = migration.metadata.resource_version.clone();
        stored.status = migration.status.clone();
    }

    /// Takes the version of `migration`, read again, when its status is the one last read or
    /// written: a change of its spec (`paused`, `abort`) is no conflict, another writer's
    /// status is.
    fn reread(&self, migration: &StyrminMigration) {
        let mut stored = self.stored.lock().unwrap_or_else(|p| p.into_inner());
        if stored.status == migration.status {
            stored.resource_version = migration.metadata.resource_version.clone();
        }
    }

    async fn drive(&self, migration: StyrminMigration) -> Result<(), RunError> {
        self.adopt(&migration);
        let mut status = migration.status.clone().unwrap_or_default();
        // Claimed (or taken over from an executor whose Lease lapsed) at once, with the
        // resourceVersion read: of two executors claiming at once, one gets a 409 and then
        // finds the other's claim.
        let before = status.executor.replace(self.settings.lease.clone());
        if before.as_deref() != Some(self.settings.lease.as_str()) {
            self.store(&migration, &mut status).await?;
            if let Some(before) = before {
                let note = format!(
                    "taken over from the executor of the Lease {before}, which is no longer held"
                );
                self.event(&migration, EventType::Normal, "TakenOver", None, &note)
                    .await;
            }
        }
        let digest = steps_digest(&migration.spec.steps);
        if status
            .steps_digest
            .as_ref()
            .is_some_and(|kept| *kept != digest)
        {
            return self.steps_changed(&migration, &mut status).await;
        }
        status.steps_digest = Some(digest);
        status.steps = step::match_steps(&migration.spec.steps, std::mem::take(&mut status.steps));
        if let Some(index) = status.steps.iter().position(|s| s.phase != StepPhase::Done)
            && self.holds_still(&migration, &mut status, index).await?
        {
            return Ok(());
        }
        if status.phase.is_none() || status.phase == Some(MigrationPhase::Pending) {
            status.phase = Some(MigrationPhase::Running);
            self.event(
                &migration,
                EventType::Normal,
                "Started",
                None,
                "carrying out the migration",
            )
            .await;
        }
        for index in 0..status.steps.len() {
            match status.steps[index].phase {
                StepPhase::Done => continue,
                StepPhase::Failed => {
                    return self
                        .finish(&migration, &mut status, MigrationPhase::Failed)
                        .await;
                }
                StepPhase::RolledBack if status.steps[index].finished_at.is_some() => {
                    return self
                        .finish(&migration, &mut status, MigrationPhase::RolledBack)
                        .await;
                }
                _ => {}
            }
            status.current_step = Some(status.steps[index].name.clone());
            if self.run_step(&migration, &mut status, index).await? == StepEnd::Stopped {
                return Ok(());
            }
        }
        self.event(
            &migration,
            EventType::Normal,
            "Done",
            None,
            "every step is done",
        )
        .await;
        self.finish(&migration, &mut status, MigrationPhase::Done)
            .await
    }

    /// What the spec asks before step `index` goes on: `true` when the migration holds
    /// still (paused, or blocked by its pre-flight until the spec changes), or ended
    /// (aborted before the step started: nothing to roll back).
    async fn holds_still(
        &self,
        migration: &StyrminMigration,
        status: &mut StyrminMigrationStatus,
        index: usize,
    ) -> Result<bool, RunError> {
        let spec = &migration.spec;
        let generation = migration.metadata.generation;
        let blocked = status.conditions.iter().any(|c| {
            c.type_ == PREFLIGHT && c.status == "False" && c.observed_generation == generation
        });
        if blocked && !spec.abort {
            return Ok(true);
        }
        status.observed_generation = generation;
        let pending = status.steps[index].phase == StepPhase::Pending;
        if spec.abort && pending {
            let step = &mut status.steps[index];
            step.phase = StepPhase::RolledBack;
            step.message = Some("aborted before it started: nothing was changed".to_owned());
            step.finished_at = Some(crate::view::rfc3339(crate::clock::unix_now()));
            self.finish(migration, status, MigrationPhase::RolledBack)
                .await?;
            return Ok(true);
        }
        let paused = status.phase == Some(MigrationPhase::Paused);
        if spec.paused && !spec.abort {
            if !paused && pending {
                // Nothing of the step is done yet: it stops before its pre-flight.
                self.pause(migration, status, index, "paused by spec.paused")
                    .await?;
            }
            // A step under way stops at its next wave ([`Self::waves`]).
            return Ok(paused || pending);
        }
        if paused {
            status.phase = Some(MigrationPhase::Running);
            if status.steps[index].phase == StepPhase::Paused {
                status.steps[index].phase = StepPhase::Moving;
            }
            let step = Some(status.steps[index].name.as_str());
            self.event(migration, EventType::Normal, "Resumed", step, "going on")
                .await;
        }
        Ok(false)
    }

    async fn finish(
        &self,
        migration: &StyrminMigration,
        status: &mut StyrminMigrationStatus,
        phase: MigrationPhase,
    ) -> Result<(), RunError> {
        status.phase = Some(phase);
        set_condition(
            status,
            "Ready",
            phase == MigrationPhase::Done,
            &format!("{phase:?}"),
            "",
        );
        self.write(migration, status).await
    }

    /// Writes the status, its `Progressing` condition set from its phases: the executor got
    /// on.
    async fn write(
        &self,
        migration: &StyrminMigration,
        status: &mut StyrminMigrationStatus,
    ) -> Result<(), RunError> {
        let (ok, reason, message) = step::progressing(status);
        set_condition(status, PROGRESSING, ok, reason, &message);
        self.store(migration, status).await?;
        self.settings.metrics.progressed();
        self.settings.metrics.set_counts(
            status.planned,
            status.moved,
            status.served,
            status.failed,
        );
        Ok(())
    }

    /// Writes the status with `Progressing` false for `reason`: the executor holds still
    /// until a person acts.
    async fn write_held(
        &self,
        migration: &StyrminMigration,
        status: &mut StyrminMigrationStatus,
        reason: &str,
        message: &str,
    ) -> Result<(), RunError> {
        set_condition(status, PROGRESSING, false, reason, message);
        self.store(migration, status).await
    }

    /// Writes the status, bounded ([`StyrminMigrationStatus::fit`]), with the version last
    /// read or written ([`Stored`]).
    async fn store(
        &self,
        migration: &StyrminMigration,
        status: &mut StyrminMigrationStatus,
    ) -> Result<(), RunError> {
        status.fit()?;
        let name = migration.metadata.name.as_deref().unwrap_or_default();
        let version = self
            .stored
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .resource_version
            .clone();
        let written = calls::write_status(&self.client, name, version.as_deref(), status).await?;
        self.adopt(&written);
        Ok(())
    }

    /// The spec's steps differ from those the executor picked up: nothing goes on until they
    /// are put back (said once, in the condition and an event).
    async fn steps_changed(
        &self,
        migration: &StyrminMigration,
        status: &mut StyrminMigrationStatus,
    ) -> Result<(), RunError> {
        const REASON: &str = "StepsChanged";
        if status
            .conditions
            .iter()
            .any(|c| c.type_ == PROGRESSING && c.reason == REASON)
        {
            return Ok(());
        }
        let why = "spec.steps differ from the steps the executor picked up (status.stepsDigest): nothing goes on until they are put back as they were; for other steps create another StyrminMigration";
        self.write_held(migration, status, REASON, why).await?;
        self.event(migration, EventType::Warning, REASON, None, why)
            .await;
        Ok(())
    }

    /// Records an event of the migration, for `step` when it is one step's
    /// ([`step::event_action`]).
    async fn event(
        &self,
        migration: &StyrminMigration,
        type_: EventType,
        reason: &str,
        step: Option<&str>,
        note: &str,
    ) {
        use kube::Resource as _;
        let event = step_event(type_, reason, step, note);
        let reference = migration.object_ref(&());
        if let Err(error) = self.recorder.publish(&event, &reference).await {
            tracing::debug!(%error, "migration: cannot record an event");
        }
    }

    /// One step, from where its status says it is.
    async fn run_step(
        &self,
        migration: &StyrminMigration,
        status: &mut StyrminMigrationStatus,
        index: usize,
    ) -> Result<StepEnd, RunError> {
        let spec_step = &migration.spec.steps[index];
        let changes = match step::step_changes(spec_step) {
            Ok(changes) => changes,
            Err(error) => {
                return self
                    .fail_step(migration, status, index, &error.to_string())
                    .await;
            }
        };
        if status.steps[index].previous.is_empty()
            && let Err(error) = self.keep_previous(status, index, &changes).await?
        {
            let why = format!(
                "the level objects the step changes cannot be kept for a rollback: {error}"
            );
            return self.fail_step(migration, status, index, &why).await;
        }
        let previous: Vec<(LevelKey, Option<serde_json::Value>)> = status.steps[index]
            .previous
            .iter()
            .filter_map(|o| Some((step::level_key(o)?, o.get("spec").cloned())))
            .collect();
        let wanted: Vec<(LevelKey, Option<serde_json::Value>)> = changes
            .iter()
            .map(|(k, spec)| (k.clone(), Some(spec.clone())))
            .collect();
        let migration_name = migration.metadata.name.as_deref().unwrap_or_default();
        let (snapshot, before, after, movers) =
            self.what_moves(migration_name, &previous, &wanted).await?;
        // Until this pass over the step returns (or is dropped), the audit counts its
        // movers as moving rather than `wrong_class`.
        let _moving = self.settings.moving.hold(
            &format!("{migration_name}/{}", spec_step.name),
            movers
                .ingresses
                .iter()
                .map(|m| (m.namespace.as_str(), m.name.as_str())),
        );
        if status.steps[index].phase == StepPhase::Pending
            && let Some(why) = step::ungated_targets(&movers)
        {
            // Not something `force` goes past: the canary would fail every time.
            let why = format!("pre-flight: {why}");
            return self.fail_step(migration, status, index, &why).await;
        }
        let step_status = &mut status.steps[index];
        if step_status.phase == StepPhase::Pending {
            step_status.planned = count(movers.ingresses.len());
            step_status.left_in_place = count(movers.left_in_place.len());
            step_status.started_at = Some(crate::view::rfc3339(crate::clock::unix_now()));
            if let Some(blocking) = self
                .preflight(&snapshot, &before, &after, status, index, &migration.spec)
                .await
                && !migration.spec.force
            {
                status.steps[index].message = Some(blocking.clone());
                self.write_held(migration, status, "PreflightBlocked", &blocking)
                    .await?;
                self.event(
                    migration,
                    EventType::Warning,
                    "PreflightBlocked",
                    Some(&spec_step.name),
                    &blocking,
                )
                .await;
                return Ok(StepEnd::Stopped);
            }
        }
        // The movers are all the waves need: the cluster's copy goes before they start.
        drop((snapshot, before, after));
        mirror_counts(status, index);
        self.write(migration, status).await?;
        if status.steps[index].phase == StepPhase::Pending {
            if !self.canary(migration, status, index, &movers).await? {
                return Ok(StepEnd::Stopped);
            }
            // In the status before the first level changes: `Pending` means unchanged.
            status.steps[index].phase = StepPhase::SettingLevels;
            self.write(migration, status).await?;
        }
        // Aborted here, the waves roll the step back at once.
        if status.steps[index].phase == StepPhase::SettingLevels && !migration.spec.abort {
            self.set_levels(migration, status, index, &wanted).await?;
            status.steps[index].phase = StepPhase::Moving;
            self.write(migration, status).await?;
            self.event(
                migration,
                EventType::Normal,
                "LevelsSet",
                Some(&spec_step.name),
                &format!(
                    "step {:?}: levels set, moving {} Ingresses",
                    spec_step.name,
                    movers.ingresses.len()
                ),
            )
            .await;
        }
        if status.steps[index].phase == StepPhase::RolledBack {
            return self
                .roll_back(migration, status, index, &movers, &previous)
                .await;
        }
        self.waves(migration, status, index, movers, &previous)
            .await
    }

    /// The cluster as the step reads it: from the watch stores when there are any (no list
    /// call, no copy), else one listing.
    async fn read_cluster(&self) -> Result<Snapshot, SnapshotError> {
        let Some(feed) = &self.settings.watched else {
            return Snapshot::read(&self.client).await;
        };
        let watched = feed.borrow().clone();
        match watched {
            Some(watched) => watched.snapshot(&self.client).await,
            None => Err(SnapshotError::NotListed(
                "anything (the watches have not started)",
            )),
        }
    }

    /// The cluster now, the views of the levels before the step (`previous`, with the
    /// records kept) and after it (`wanted`), and what moves between the two.
    async fn what_moves(
        &self,
        migration_name: &str,
        previous: &[(LevelKey, Option<serde_json::Value>)],
        wanted: &[(LevelKey, Option<serde_json::Value>)],
    ) -> Result<(Snapshot, View, View, Movers), RunError> {
        let snapshot = self.read_cluster().await?;
        let now = Levels {
            clusters: snapshot.clusters.clone(),
            environments: snapshot.environments.clone(),
            deployments: snapshot.deployments.clone(),
        };
        let then = Levels {
            deployments: step::with_kept_records(&now.deployments, migration_name),
            ..now.clone()
        };
        let before = then.with(previous)?.view(snapshot.kubernetes, "before")?;
        let after = now.with(wanted)?.view(snapshot.kubernetes, "after")?;
        let movers = step::movers(&before, &after, &snapshot.ingresses);
        Ok((snapshot, before, after, movers))
    }

    /// Reads the level objects step `index` changes into its `previous`, each with its
    /// `resourceVersion`; `Err` (and nothing kept) when the status could not hold them.
    async fn keep_previous(
        &self,
        status: &mut StyrminMigrationStatus,
        index: usize,
        changes: &[(LevelKey, serde_json::Value)],
    ) -> Result<Result<(), StatusTooLarge>, RunError> {
        let mut previous = Vec::new();
        for (key, _) in changes {
            let read = calls::read_level(&self.client, key).await?;
            previous.push(step::previous_object(
                key,
                read.as_ref().map(|r| &r.spec),
                read.as_ref().and_then(|r| r.resource_version.as_deref()),
            ));
        }
        status.steps[index].previous = previous;
        let fits = status.clone().fit();
        if fits.is_err() {
            status.steps[index].previous.clear();
        }
        Ok(fits)
    }

    /// Sets the levels of step `index`, each written with the `resourceVersion` it was read
    /// with just before. One already as the step sets it is left alone (a pass that resumes
    /// does not write it twice). One that changed since the step kept it (someone else
    /// wrote it) is kept again, in the status first, so that a rollback puts back what was
    /// there last; a write that meets a change made meanwhile fails with 409, and the next
    /// pass reads again.
    async fn set_levels(
        &self,
        migration: &StyrminMigration,
        status: &mut StyrminMigrationStatus,
        index: usize,
        wanted: &[(LevelKey, Option<serde_json::Value>)],
    ) -> Result<(), RunError> {
        for (key, spec) in wanted {
            let read = calls::read_level(&self.client, key).await?;
            if read.as_ref().map(|r| &r.spec) == spec.as_ref() {
                continue;
            }
            let version = read.as_ref().and_then(|r| r.resource_version.clone());
            let kept = status.steps[index]
                .previous
                .iter_mut()
                .find(|o| step::level_key(o).as_ref() == Some(key));
            if let Some(kept) = kept
                && kept
                    .pointer("/metadata/resourceVersion")
                    .and_then(serde_json::Value::as_str)
                    != version.as_deref()
            {
                *kept =
                    step::previous_object(key, read.as_ref().map(|r| &r.spec), version.as_deref());
                self.write(migration, status).await?;
            }
            calls::write_level(&self.client, key, spec.as_ref(), version.as_deref()).await?;
        }
        Ok(())
    }

    /// Puts `levels` back, each written with the version it was read with just before, and
    /// only when it is not already as it should be.
    async fn put_levels(
        &self,
        levels: &[(LevelKey, Option<serde_json::Value>)],
    ) -> Result<(), RunError> {
        for (key, spec) in levels {
            let read = calls::read_level(&self.client, key).await?;
            if read.as_ref().map(|r| &r.spec) == spec.as_ref() {
                continue;
            }
            let version = read.and_then(|r| r.resource_version);
            calls::write_level(&self.client, key, spec.as_ref(), version.as_deref()).await?;
        }
        Ok(())
    }

    /// The pre-flight of a step: its findings go into a condition (passed when nothing
    /// blocks, or `force`) and the step's notes; returns the blocking ones, in one line.
    async fn preflight(
        &self,
        snapshot: &Snapshot,
        before: &View,
        after: &View,
        status: &mut StyrminMigrationStatus,
        index: usize,
        spec: &StyrminMigrationSpec,
    ) -> Option<String> {
        let force = spec.force;
        let classes: Vec<ClassInfo> = snapshot
            .ingress_classes
            .iter()
            .map(|c| ClassInfo::of(c))
            .collect();
        let issuers = crate::acme_issuers::read(&self.client)
            .await
            .unwrap_or_default();
        let plan = crate::plan::plan(&PlanInput {
            current: before,
            proposed: after,
            ingresses: &snapshot.ingresses,
            ingress_classes: &classes,
            acme_issuers: &issuers,
        });
        let mut by_reason: BTreeMap<&str, usize> = BTreeMap::new();
        let mut blocking = Vec::new();
        let mut notes = BTreeSet::new();
        for finding in &plan.preflight {
            *by_reason.entry(finding.reason.as_str()).or_default() += 1;
            if is_blocking(finding.reason) {
                blocking.push(format!(
                    "{}: {} ({})",
                    finding.reason.as_str(),
                    finding.subject,
                    finding.detail
                ));
            }
            if matches!(
                finding.reason,
                PreflightReason::AcmeSolverClass | PreflightReason::AnnotationsNotCarried
            ) && notes.len() < 20
            {
                notes.insert(format!(
                    "{}: {}: {}",
                    finding.reason.as_str(),
                    finding.subject,
                    finding.detail
                ));
            }
        }
        if let Some(held) = plan.held_by_annotations(spec.preflight.unsupported_annotations) {
            *by_reason.entry("unsupported_annotations").or_default() += 1;
            blocking.push(held);
        }
        let summary = by_reason
            .iter()
            .map(|(reason, n)| format!("{reason} ×{n}"))
            .collect::<Vec<_>>()
            .join(", ");
        let step = &mut status.steps[index];
        step.message = Some(step::bounded_note(&if summary.is_empty() {
            "pre-flight: nothing found".to_owned()
        } else {
            format!("pre-flight: {summary}")
        }));
        step.preflight = notes.into_iter().collect();
        set_condition(
            status,
            PREFLIGHT,
            blocking.is_empty() || force,
            match (blocking.is_empty(), force) {
                (true, _) => "NothingBlocks",
                (false, true) => "Forced",
                (false, false) => "Blocked",
            },
            &summary,
        );
        if blocking.is_empty() {
            None
        } else {
            Some(step::bounded_note(&format!(
                "blocking pre-flight findings (fix them, or set spec.force: true to go on anyway): {}",
                blocking.join("; ")
            )))
        }
    }

    async fn fail_step(
        &self,
        migration: &StyrminMigration,
        status: &mut StyrminMigrationStatus,
        index: usize,
        why: &str,
    ) -> Result<StepEnd, RunError> {
        self.settings.metrics.step_ended("failed");
        let step = &mut status.steps[index];
        step.phase = StepPhase::Failed;
        step.message = Some(step::bounded_note(why));
        step.finished_at = Some(crate::view::rfc3339(crate::clock::unix_now()));
        let name = migration.spec.steps.get(index).map(|s| s.name.as_str());
        self.event(migration, EventType::Warning, "StepFailed", name, why)
            .await;
        self.finish(migration, status, MigrationPhase::Failed)
            .await?;
        Ok(StepEnd::Stopped)
    }

    /// The canary gate: every target class serves an Ingress of the executor's own (and it
    /// answers the probe). `false`: the gate failed, and the status says what follows.
    async fn canary(
        &self,
        migration: &StyrminMigration,
        status: &mut StyrminMigrationStatus,
        index: usize,
        movers: &Movers,
    ) -> Result<bool, RunError> {
        let classes: BTreeSet<String> = movers
            .ingresses
            .iter()
            .filter_map(|m| m.target_class().map(str::to_owned))
            .collect();
        let gates = &migration.spec.gates;
        let deadline = Instant::now() + Duration::from_secs(gates.canary.timeout_seconds.into());
        let migration_name = migration.metadata.name.as_deref().unwrap_or_default();
        let mut stop = StopRequests::start(self.client.clone(), migration_name.to_owned());
        for class in classes {
            if status.steps[index].canary.iter().any(|c| c.class == class) {
                continue;
            }
            let (name, host) = step::canary_names(migration_name, &class);
            let namespace = &self.settings.namespace;
            calls::create_canary(&self.client, namespace, &name, &class, &host).await?;
            let outcome = loop {
                let read = calls::read_canary(&self.client, namespace, &name).await?;
                if let Some(found) = &read
                    && step::class_of(&found.fields) != Some(class.as_str())
                {
                    // Admission moved it: its address would be another controller's.
                    break Err(format!(
                        "admission gave it {} (exclude the webhook's namespace from the webhook)",
                        step::show(&found.fields)
                    ));
                }
                let addresses = read.map(|r| r.addresses).unwrap_or_default();
                let probed = match (&gates.probe, addresses.first()) {
                    (Some(probe), Some(address)) => {
                        let timeout = Duration::from_secs(probe.timeout_seconds.into());
                        // The canary has no backend (a controller answers 503 or 404 for
                        // it): any HTTP answer through the address shows it is served.
                        calls::probe(address, probe.port, &host, &probe.path, timeout)
                            .await
                            .map(|_| ())
                    }
                    (None, Some(_)) => Ok(()),
                    (_, None) => Err("no address".to_owned()),
                };
                match probed {
                    Ok(()) => break Ok(addresses),
                    Err(why) if Instant::now() >= deadline => break Err(why),
                    Err(_) if stop.sleep(GATE_POLL).await => {
                        // Nothing changed yet: the next pass pauses, or ends the step
                        // as aborted before it started.
                        calls::delete_canary(&self.client, namespace, &name).await?;
                        return Ok(false);
                    }
                    Err(_) => {}
                }
            };
            calls::delete_canary(&self.client, namespace, &name).await?;
            match outcome {
                Ok(addresses) => status.steps[index]
                    .canary
                    .push(CanaryAddress { class, addresses }),
                Err(why) => {
                    let why = format!(
                        "canary gate: the canary Ingress of class {class:?} was not served in {}s ({why}); nothing was moved",
                        gates.canary.timeout_seconds
                    );
                    return self.gate_failed_early(migration, status, index, &why).await;
                }
            }
            self.write(migration, status).await?;
        }
        Ok(true)
    }

    /// A gate that failed before anything moved: nothing to roll back.
    async fn gate_failed_early(
        &self,
        migration: &StyrminMigration,
        status: &mut StyrminMigrationStatus,
        index: usize,
        why: &str,
    ) -> Result<bool, RunError> {
        set_condition(status, "GatePassed", false, "CanaryNotServed", why);
        self.settings.metrics.gate_failed("canary");
        match migration.spec.on_gate_failure {
            OnGateFailure::Pause => {
                self.pause(migration, status, index, why).await?;
            }
            OnGateFailure::Rollback => {
                self.fail_step(migration, status, index, why).await?;
            }
        }
        Ok(false)
    }

    async fn pause(
        &self,
        migration: &StyrminMigration,
        status: &mut StyrminMigrationStatus,
        index: usize,
        why: &str,
    ) -> Result<(), RunError> {
        self.settings.metrics.step_ended("paused");
        // A step not started stays `Pending`: going on runs its pre-flight and canary.
        if status.steps[index].phase != StepPhase::Pending {
            status.steps[index].phase = StepPhase::Paused;
        }
        status.steps[index].message = Some(step::bounded_note(why));
        status.phase = Some(MigrationPhase::Paused);
        // A gate that pauses sets `spec.paused` itself, so that going on is a person's
        // `paused: false` (`migrate resume`), not the next poll.
        if !migration.spec.paused {
            let name = migration.metadata.name.as_deref().unwrap_or_default();
            let paused = calls::set_paused(&self.client, name).await?;
            self.reread(&paused);
        }
        let name = migration.spec.steps.get(index).map(|s| s.name.as_str());
        self.event(migration, EventType::Normal, "Paused", name, why)
            .await;
        self.write(migration, status).await
    }

    /// The waves of a step whose levels are set, then its end.
    async fn waves(
        &self,
        migration: &StyrminMigration,
        status: &mut StyrminMigrationStatus,
        index: usize,
        movers: Movers,
        previous: &[(LevelKey, Option<serde_json::Value>)],
    ) -> Result<StepEnd, RunError> {
        let name = migration
            .metadata
            .name
            .as_deref()
            .unwrap_or_default()
            .to_owned();
        let spec = &migration.spec;
        let mut budget = CallBudget::new(f64::from(spec.pace.ingresses_per_second.max(1)));
        let batch = usize::try_from(spec.pace.batch_size.max(1)).unwrap_or(usize::MAX);
        // Moved before this replica came: verified once more as the first wave.
        let mut wave: Vec<&Mover> = movers.ingresses.iter().filter(|m| m.is_moved()).collect();
        let mut pending: std::collections::VecDeque<&Mover> =
            movers.ingresses.iter().filter(|m| !m.is_moved()).collect();
        let (mut served, mut failed) = (0usize, 0usize);
        let mut stop = StopRequests::start(self.client.clone(), name.clone());
        loop {
            let latest = calls::read_migration(&self.client, &name).await?;
            let Some(latest) = latest else {
                return Ok(StepEnd::Stopped);
            };
            self.reread(&latest);
            if latest.spec.abort {
                status.steps[index].message = Some("aborted: moving back".to_owned());
                return self
                    .roll_back(&latest, status, index, &movers, previous)
                    .await;
            }
            if latest.spec.paused {
                if status.steps[index].phase != StepPhase::Paused {
                    self.pause(&latest, status, index, "paused by spec.paused")
                        .await?;
                }
                return Ok(StepEnd::Stopped);
            }
            if stop.requested() {
                // Asked for and then taken back before this read: go on watching.
                stop = StopRequests::start(self.client.clone(), name.clone());
            }
            if wave.is_empty() {
                wave = pending.drain(..batch.min(pending.len())).collect();
                if wave.is_empty() {
                    break;
                }
                let written = self
                    .move_wave(
                        &name,
                        &movers,
                        &wave,
                        &mut budget,
                        &mut status.steps[index],
                        &stop,
                    )
                    .await;
                status.steps[index].waves += 1;
                // Stopped in the middle: what was not written waits for the next wave.
                for mover in wave.split_off(written).into_iter().rev() {
                    pending.push_front(mover);
                }
            }
            status.steps[index].moved = count(movers.ingresses.len() - pending.len());
            status.steps[index].phase = StepPhase::Verifying;
            mirror_counts(status, index);
            self.write(&latest, status).await?;
            let Some(failures) = self
                .verify(&latest, &wave, status, index, &mut stop)
                .await?
            else {
                // Stopped during the gate: the loop reads the migration again at once.
                continue;
            };
            served += wave.len() - failures;
            failed += failures;
            status.steps[index].served = count(served);
            status.steps[index].failed = count(failed);
            status.steps[index].phase = StepPhase::Moving;
            mirror_counts(status, index);
            if step::too_many_failed(failures, wave.len(), spec.gates.max_failed_percent) {
                let why = format!(
                    "served gate: {failures} of {} Ingresses of wave {} not served",
                    wave.len(),
                    status.steps[index].waves
                );
                return self
                    .served_gate_failed(&latest, status, index, &movers, previous, why)
                    .await;
            }
            self.write(&latest, status).await?;
            wave.clear();
        }
        for id in movers.records.keys() {
            calls::forget_record(&self.client, id).await?;
        }
        self.settings.metrics.step_ended("done");
        let step = &mut status.steps[index];
        step.phase = StepPhase::Done;
        step.finished_at = Some(crate::view::rfc3339(crate::clock::unix_now()));
        let note = format!(
            "step {:?} done: {} moved, {} served, {} failed",
            step.name, step.moved, step.served, step.failed
        );
        set_condition(status, "GatePassed", true, "Served", &note);
        mirror_counts(status, index);
        self.write(migration, status).await?;
        let name = migration.spec.steps.get(index).map(|s| s.name.as_str());
        self.event(migration, EventType::Normal, "StepDone", name, &note)
            .await;
        Ok(StepEnd::Done)
    }

    /// A wave the served gate failed: said, then rolled back or paused as the spec says.
    async fn served_gate_failed(
        &self,
        latest: &StyrminMigration,
        status: &mut StyrminMigrationStatus,
        index: usize,
        movers: &Movers,
        previous: &[(LevelKey, Option<serde_json::Value>)],
        why: String,
    ) -> Result<StepEnd, RunError> {
        set_condition(status, "GatePassed", false, "NotServed", &why);
        self.settings.metrics.gate_failed("served");
        let step_name = latest.spec.steps.get(index).map(|s| s.name.as_str());
        self.event(latest, EventType::Warning, "GateFailed", step_name, &why)
            .await;
        match latest.spec.on_gate_failure {
            OnGateFailure::Rollback => {
                status.steps[index].message = Some(why);
                self.roll_back(latest, status, index, movers, previous)
                    .await
            }
            OnGateFailure::Pause => {
                self.pause(latest, status, index, &why).await?;
                Ok(StepEnd::Stopped)
            }
        }
    }

    /// Writes one wave: each deployment's record first (W5), then its Ingresses, at the
    /// pace. A write that admission does not move is tried again, then counted as failing.
    async fn move_wave(
        &self,
        migration: &str,
        movers: &Movers,
        wave: &[&Mover],
        budget: &mut CallBudget,
        step: &mut StepStatus,
        stop: &StopRequests,
    ) -> usize {
        if let Some(first) = wave
            .iter()
            .find(|m| !movers.records.contains_key(&m.deployment))
        {
            self.until_admission_agrees(first, budget).await;
        }
        let mut recorded = BTreeSet::new();
        let mut unrecorded = BTreeSet::new();
        for (done, mover) in wave.iter().enumerate() {
            if stop.requested() {
                return done;
            }
            if unrecorded.contains(&mover.deployment) {
                // Its record could not be written: moving it would go around W5.
                step::note_failing(
                    step,
                    &mover.namespace,
                    &mover.name,
                    "its deployment's record could not be written".to_owned(),
                );
                continue;
            }
            if let Some(target) = movers.records.get(&mover.deployment)
                && recorded.insert(mover.deployment.clone())
                && let Err(error) = calls::set_record(
                    &self.client,
                    &mover.deployment,
                    migration,
                    &step::record_of(target),
                )
                .await
            {
                step::note_failing(
                    step,
                    &mover.namespace,
                    &mover.name,
                    format!("its record: {error}"),
                );
                unrecorded.insert(mover.deployment.clone());
                continue;
            }
            if let Some(why) = self.move_one(mover, budget).await {
                step::note_failing(step, &mover.namespace, &mover.name, why);
            }
        }
        wave.len()
    }

    /// Writes one Ingress back until it has `target` (`None`) or the tries run out.
    async fn move_one_to(
        &self,
        namespace: &str,
        name: &str,
        target: &styrmin_ingress_rules::ClassFields,
        budget: &mut CallBudget,
    ) -> Option<String> {
        let mut last = String::new();
        for _ in 0..WRITE_BACK_TRIES {
            tokio::time::sleep(budget.take(Instant::now())).await;
            match calls::write_back(&self.client, namespace, name, false).await {
                Ok(fields) if fields == *target => {
                    self.settings.metrics.write("moved");
                    self.settings.metrics.progressed();
                    return None;
                }
                Ok(fields) => {
                    self.settings.metrics.write("not_moved");
                    last = format!(
                        "admission gave it {} where the step wants {} (is every webhook replica's view current?)",
                        step::show(&fields),
                        step::show(target)
                    );
                }
                // Deleted meanwhile: nothing left to move.
                Err(error) if error.code() == Some(404) => return None,
                Err(error) => {
                    self.settings.metrics.write("failed");
                    last = error.to_string();
                }
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        Some(last)
    }

    /// Waits (at most [`VIEW_WAIT`]) until admission gives `mover` its target in a dry run:
    /// right after the levels are set, a replica's view may not have them yet, and a write
    /// it answers would move nothing and be written again.
    async fn until_admission_agrees(&self, mover: &Mover, budget: &mut CallBudget) {
        let deadline = Instant::now() + VIEW_WAIT;
        while Instant::now() < deadline {
            tokio::time::sleep(budget.take(Instant::now())).await;
            match calls::write_back(&self.client, &mover.namespace, &mover.name, true).await {
                Ok(fields) if fields == mover.to => return,
                Ok(_) | Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
            }
        }
    }

    async fn move_one(&self, mover: &Mover, budget: &mut CallBudget) -> Option<String> {
        self.move_one_to(&mover.namespace, &mover.name, &mover.to, budget)
            .await
    }

    /// The served gate (and the probe) on one wave; returns how many failed, and lists them.
    async fn verify(
        &self,
        migration: &StyrminMigration,
        wave: &[&Mover],
        status: &mut StyrminMigrationStatus,
        index: usize,
        stop: &mut StopRequests,
    ) -> Result<Option<usize>, RunError> {
        let gates = &migration.spec.gates;
        let canary = step::canary_addresses(&status.steps[index]);
        let deadline = Instant::now() + Duration::from_secs(gates.served.timeout_seconds.into());
        let mut waiting: BTreeMap<(&str, &str), (&Mover, String)> = wave
            .iter()
            .map(|m| ((m.namespace.as_str(), m.name.as_str()), (*m, String::new())))
            .collect();
        loop {
            let read =
                calls::served_in_each(&self.client, waiting.keys().map(|(ns, _)| *ns)).await?;
            let mut done = Vec::new();
            let mut to_probe = Vec::new();
            for (key, (mover, why)) in &mut waiting {
                let Some(ingress) = read.get(key.0).and_then(|ns| ns.get(key.1)) else {
                    done.push(*key);
                    continue;
                };
                match step::judge_served(ingress, &mover.to, &canary, gates.served.address) {
                    Ok(_) if gates.probe.is_none() => done.push(*key),
                    Ok(address) => {
                        to_probe.push((*key, address, step::hosts_to_probe(&ingress.hosts)))
                    }
                    Err(reason) => *why = reason,
                }
            }
            if let Some(probe) = &gates.probe {
                for chunk in to_probe.chunks(PROBES_IN_FLIGHT) {
                    let outcomes = futures::future::join_all(
                        chunk
                            .iter()
                            .map(|(_, address, hosts)| probe_hosts(probe, address, hosts)),
                    )
                    .await;
                    for ((key, _, _), outcome) in chunk.iter().zip(outcomes) {
                        match outcome {
                            Ok(()) => done.push(*key),
                            Err(why) => {
                                if let Some(waiting) = waiting.get_mut(key) {
                                    waiting.1 = why;
                                }
                            }
                        }
                    }
                }
            }
            for key in done {
                waiting.remove(&key);
            }
            if waiting.is_empty() || Instant::now() >= deadline {
                break;
            }
            if stop.sleep(GATE_POLL).await {
                return Ok(None);
            }
        }
        for ((namespace, name), (_, why)) in &waiting {
            step::note_failing(
                &mut status.steps[index],
                namespace,
                name,
                format!("not served after {}s: {why}", gates.served.timeout_seconds),
            );
        }
        Ok(Some(waiting.len()))
    }

    /// Puts the levels and the records back, writes the step's Ingresses back where they
    /// were, and checks that they are served again.
    async fn roll_back(
        &self,
        migration: &StyrminMigration,
        status: &mut StyrminMigrationStatus,
        index: usize,
        movers: &Movers,
        previous: &[(LevelKey, Option<serde_json::Value>)],
    ) -> Result<StepEnd, RunError> {
        status.steps[index].phase = StepPhase::RolledBack;
        mirror_counts(status, index);
        self.write(migration, status).await?;
        self.event(
            migration,
            EventType::Warning,
            "RollingBack",
            migration.spec.steps.get(index).map(|s| s.name.as_str()),
            "putting the levels and records back",
        )
        .await;
        self.put_levels(previous).await?;
        for id in movers.records.keys() {
            calls::restore_record(&self.client, id).await?;
        }
        let mut budget =
            CallBudget::new(f64::from(migration.spec.pace.ingresses_per_second.max(1)));
        // The fields as they are now: the movers were read before the waves moved them.
        let current = calls::served_in_each(
            &self.client,
            movers.ingresses.iter().map(|m| m.namespace.as_str()),
        )
        .await?;
        let (mut written, mut not_back) = (0usize, 0usize);
        for mover in &movers.ingresses {
            let now = current
                .get(mover.namespace.as_str())
                .and_then(|ns| ns.get(&mover.name));
            if now.is_none_or(|ingress| ingress.fields == mover.back) {
                continue;
            }
            written += 1;
            if let Some(why) = self
                .move_one_to(&mover.namespace, &mover.name, &mover.back, &mut budget)
                .await
            {
                not_back += 1;
                step::note_failing(
                    &mut status.steps[index],
                    &mover.namespace,
                    &mover.name,
                    format!("not moved back: {why}"),
                );
            }
        }
        let unserved = self.verify_back(migration, movers, status, index).await?;
        let step = &mut status.steps[index];
        step.finished_at = Some(crate::view::rfc3339(crate::clock::unix_now()));
        let note = format!(
            "rolled back: {written} Ingresses written back, {not_back} could not be, {unserved} not served again"
        );
        step.message = Some(step::bounded_note(&match &step.message {
            Some(why) => format!("{why}; {note}"),
            None => note.clone(),
        }));
        let name = migration.spec.steps.get(index).map(|s| s.name.as_str());
        self.event(migration, EventType::Warning, "RolledBack", name, &note)
            .await;
        self.settings.metrics.step_ended("rolled_back");
        let phase = if not_back + unserved == 0 {
            MigrationPhase::RolledBack
        } else {
            MigrationPhase::Failed
        };
        self.finish(migration, status, phase).await?;
        Ok(StepEnd::Stopped)
    }

    /// After a rollback: every Ingress of the step has its old class and an address that
    /// is not the target's (served by the controller it came from).
    async fn verify_back(
        &self,
        migration: &StyrminMigration,
        movers: &Movers,
        status: &mut StyrminMigrationStatus,
        index: usize,
    ) -> Result<usize, RunError> {
        let target = step::canary_addresses(&status.steps[index]);
        let deadline = Instant::now()
            + Duration::from_secs(migration.spec.gates.served.timeout_seconds.into());
        let mut waiting: BTreeSet<(&str, &str)> = movers
            .ingresses
            .iter()
            .map(|m| (m.namespace.as_str(), m.name.as_str()))
            .collect();
        let by_key: BTreeMap<(&str, &str), &Mover> = movers
            .ingresses
            .iter()
            .map(|m| ((m.namespace.as_str(), m.name.as_str()), m))
            .collect();
        loop {
            let read =
                calls::served_in_each(&self.client, waiting.iter().map(|(ns, _)| *ns)).await?;
            waiting.retain(|key| {
                let Some(ingress) = read.get(key.0).and_then(|ns| ns.get(key.1)) else {
                    return false;
                };
                let mover = by_key[key];
                !(ingress.fields == mover.back
                    && ingress.addresses.iter().any(|a| !target.contains(a)))
            });
            if waiting.is_empty() || Instant::now() >= deadline {
                break;
            }
            tokio::time::sleep(GATE_POLL).await;
        }
        for (namespace, name) in &waiting {
            step::note_failing(
                &mut status.steps[index],
                namespace,
                name,
                "not served again after the rollback".to_owned(),
            );
        }
        Ok(waiting.len())
    }
}

/// The event a migration records: its note bounded, its action keyed by step and note
/// ([`step::event_action`]), so that the recorder does not merge it into another.
pub fn step_event(type_: EventType, reason: &str, step: Option<&str>, note: &str) -> Event {
    let note = step::bounded_note(note);
    Event {
        type_,
        reason: reason.to_owned(),
        action: step::event_action(step, &note),
        note: Some(note),
        secondary: None,
    }
}

/// Probes `hosts` through `address` side by side: `Err` says the first that is not served.
async fn probe_hosts(probe: &ProbeGate, address: &str, hosts: &[String]) -> Result<(), String> {
    let timeout = Duration::from_secs(probe.timeout_seconds.into());
    let answers = futures::future::join_all(
        hosts
            .iter()
            .map(|host| calls::probe(address, probe.port, host, &probe.path, timeout)),
    )
    .await;
    for (host, answer) in hosts.iter().zip(answers) {
        match answer {
            Ok(code) if probe.accepts(code) => {}
            Ok(code) => {
                return Err(format!(
                    "the probe of {host} through {address} answered {code}"
                ));
            }
            Err(error) => return Err(error),
        }
    }
    Ok(())
}

/// The pre-flight findings that stop a step: they leave Ingresses served by nobody.
pub fn is_blocking(reason: PreflightReason) -> bool {
    matches!(
        reason,
        PreflightReason::MissingIngressClass
            | PreflightReason::ControllerNotRunning
            | PreflightReason::CannotEnforce
            | PreflightReason::DefaultClassPicksUp
            | PreflightReason::UnknownTargetController
            | PreflightReason::UngatedTarget
    )
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The migration's counts are those of the step in progress.
fn mirror_counts(status: &mut StyrminMigrationStatus, index: usize) {
    let step = &status.steps[index];
    (status.planned, status.moved, status.served, status.failed) =
        (step.planned, step.moved, step.served, step.failed);
}

/// Sets a condition, its transition time changed only when its status changes.
fn set_condition(
    status: &mut StyrminMigrationStatus,
    type_: &str,
    ok: bool,
    reason: &str,
    message: &str,
) {
    let value = if ok { "True" } else { "False" };
    let now = crate::view::rfc3339(crate::clock::unix_now());
    let generation = status.observed_generation;
    match status.conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(condition) => {
            if condition.status != value {
                condition.last_transition_time = now;
            }
            condition.status = value.to_owned();
            condition.reason = reason.to_owned();
            condition.message = step::bounded_note(message);
            condition.observed_generation = generation;
        }
        None => status.conditions.push(MigrationCondition {
            type_: type_.to_owned(),
            status: value.to_owned(),
            reason: reason.to_owned(),
            message: step::bounded_note(message),
            last_transition_time: now,
            observed_generation: generation,
        }),
    }
}

#[cfg(test)]
mod tests;
