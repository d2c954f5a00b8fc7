//! Writing the audit as PolicyReports (`--policy-reports`): which report API the API server
//! serves ([`detect`]), one writer among the replicas ([`lease`]), and the writer itself
//! ([`run_writer`]), which brings the cluster's reports to the audit's
//! ([`crate::audit::policy_report`]) with as few writes as the [`ReportLedger`] allows:
//!
//! - a new leader lists the reports it owns (label `app.kubernetes.io/managed-by`,
//!   metadata only: each carries its content's digest in an annotation), then applies only
//!   the reports whose digest differs and deletes those whose object conforms again;
//! - server-side apply with one field manager, forced (the webhook owns these objects);
//! - at most `qps` writes a second; a failed write is retried at the next pass, passes after
//!   failures backing off from 1 s to 60 s. The writer runs in its own task on the last
//!   desired set: admission and the audit never wait for it.

pub mod lease;
pub mod ledger;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::api::{ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::{Api, Client};
use tokio::sync::watch;

use crate::audit::objects::{AliasService, AuditedIngress};
use crate::audit::policy_report::{
    DIGEST_ANNOTATION, DesiredReport, MANAGED_BY, MANAGED_BY_LABEL, ObjectKey, ReportApi,
    ReportInput, ReportKey, ReportResults, policy_reports,
};
use crate::audit::report_metrics::{ApiLabels, PolicyReportMetrics};
use crate::audit::{AuditReport, AuditStore};
use crate::crd::StyrminDeployment;
use lease::{Leadership, LeaseSettings};
pub use ledger::{Backoff, ReportLedger, ReportWrite};

/// The field manager of every report write.
pub const FIELD_MANAGER: &str = "styrmin-webhook";
/// The default of `--policy-reports-qps`.
pub const DEFAULT_QPS: f64 = 20.0;
/// A pass after failures waits this long at first, doubling up to [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_secs(1);
const RETRY_MAX: Duration = Duration::from_secs(60);
/// How often the writer looks at the lease while it has nothing else to do.
const LEASE_CHECK: Duration = Duration::from_millis(500);

/// Which report API to write in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReportTarget {
    /// Open Reports when the API server serves it, else wgpolicyk8s, else none.
    Auto,
    Api(ReportApi),
}

/// What `--policy-reports` and its companions say.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicyReportSettings {
    pub target: ReportTarget,
    pub results: ReportResults,
    /// Writes a second, at most.
    pub qps: f64,
    pub lease: LeaseSettings,
    /// With `auto` and neither report API served: how often discovery is asked again, so
    /// that reports start when Kyverno or Policy Reporter installs the CRDs later.
    pub rediscover_every: Duration,
}

/// The default of [`PolicyReportSettings::rediscover_every`].
pub const REDISCOVER_EVERY: Duration = Duration::from_secs(60);

/// What the last complete audit found, and what the reports are built from: the audit
/// hands it over and goes on; the writer builds the reports in its own task.
#[derive(Debug)]
pub struct AuditSnapshot {
    pub report: Arc<AuditReport>,
    pub ingresses: Vec<Arc<AuditedIngress>>,
    pub uids: HashMap<ObjectKey, String>,
}

/// The last snapshot (none before the first audit).
pub type Snapshots = watch::Receiver<Option<Arc<AuditSnapshot>>>;

/// Whether the API server serves `api`'s report resource (API discovery).
async fn serves(client: &Client, api: ReportApi) -> Result<bool, kube::Error> {
    let group_version = format!("{}/{}", api.group(), api.version());
    match client.list_api_group_resources(&group_version).await {
        Ok(list) => Ok(list.resources.iter().any(|r| r.name == api.plural())),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
        Err(error) => Err(error),
    }
}

/// The report API to write in: the one asked for, or for `auto` the first of
/// [`ReportApi::ALL`] the API server serves (`None`: neither). Discovery that fails is
/// tried again with backoff.
pub async fn detect(client: &Client, target: ReportTarget) -> Option<ReportApi> {
    if let ReportTarget::Api(api) = target {
        return Some(api);
    }
    let mut backoff = Backoff::new(RETRY_FIRST, RETRY_MAX);
    'retry: loop {
        for api in ReportApi::ALL {
            match serves(client, api).await {
                Ok(true) => return Some(api),
                Ok(false) => {}
                Err(error) => {
                    let delay = backoff.failed(Instant::now());
                    tracing::warn!(%error, ?delay, "cannot discover the report APIs; retrying");
                    tokio::time::sleep(delay).await;
                    continue 'retry;
                }
            }
        }
        return None;
    }
}

fn resource(api: ReportApi) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(api.group(), api.version(), api.kind()),
        api.plural(),
    )
}

/// The reports this webhook wrote, with their digests (metadata only).
async fn list_own(
    client: &Client,
    api: ReportApi,
) -> Result<Vec<(ReportKey, Option<String>)>, kube::Error> {
    let reports: Api<DynamicObject> = Api::all_with(client.clone(), &resource(api));
    let params = ListParams::default().labels(&format!("{MANAGED_BY_LABEL}={MANAGED_BY}"));
    let mut found = Vec::new();
    let mut continue_token: Option<String> = None;
    loop {
        let page_params = match &continue_token {
            Some(token) => params.clone().limit(500).continue_token(token),
            None => params.clone().limit(500),
        };
        let page = reports.list_metadata(&page_params).await?;
        for item in page.items {
            let meta = item.metadata;
            let digest = meta
                .annotations
                .as_ref()
                .and_then(|a| a.get(DIGEST_ANNOTATION))
                .cloned();
            if let (Some(namespace), Some(name)) = (meta.namespace, meta.name) {
                found.push((ReportKey { namespace, name }, digest));
            }
        }
        continue_token = page.metadata.continue_.filter(|t| !t.is_empty());
        if continue_token.is_none() {
            return Ok(found);
        }
    }
}

/// One write; a delete of a report already gone succeeds.
async fn write(
    client: &Client,
    api: ReportApi,
    write: &ReportWrite<'_>,
) -> Result<(), kube::Error> {
    match write {
        ReportWrite::Apply(report) => {
            let reports: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), &report.key.namespace, &resource(api));
            let body = report.stamped(crate::clock::unix_now());
            reports
                .patch(
                    &report.key.name,
                    &PatchParams::apply(FIELD_MANAGER).force(),
                    &Patch::Apply(&body),
                )
                .await
                .map(|_| ())
        }
        ReportWrite::Delete(key) => {
            let reports: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), &key.namespace, &resource(api));
            match reports.delete(&key.name, &DeleteParams::default()).await {
                Ok(_) => Ok(()),
                Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
                Err(error) => Err(error),
            }
        }
    }
}

/// Spaces writes `1/qps` apart.
#[derive(Debug)]
struct RateLimit {
    interval: Duration,
    next: Instant,
}

impl RateLimit {
    fn new(qps: f64) -> Self {
        let interval = if qps > 0.0 && qps.is_finite() {
            Duration::from_secs_f64(1.0 / qps)
        } else {
            Duration::ZERO
        };
        RateLimit {
            interval,
            next: Instant::now(),
        }
    }

    async fn wait(&mut self) {
        let now = Instant::now();
        if self.next > now {
            tokio::time::sleep(self.next - now).await;
        }
        self.next = self.next.max(now) + self.interval;
    }
}

/// The writer: on each new desired set, and on a retry that falls due, brings the cluster's
/// reports to it while this replica holds the lease. Runs until the task is dropped.
pub async fn run_writer(
    client: Client,
    api: ReportApi,
    settings: &PolicyReportSettings,
    mut snapshots: Snapshots,
    leadership: Leadership,
    audits: Arc<AuditStore>,
) {
    let mut ledger = ReportLedger::default();
    let mut backoff = Backoff::new(RETRY_FIRST, RETRY_MAX);
    let mut limit = RateLimit::new(settings.qps);
    let mut pending = true;
    loop {
        let retry = backoff.retry_at();
        let wait = retry.map_or(LEASE_CHECK, |at| {
            at.saturating_duration_since(Instant::now())
                .min(LEASE_CHECK)
        });
        tokio::select! {
            changed = snapshots.changed() => {
                if changed.is_err() {
                    return;
                }
                pending = true;
            }
            _ = tokio::time::sleep(wait) => {}
        }
        let metrics = audits.policy_report_metrics();
        let held = leadership.holds();
        metrics.lease_held.set(i64::from(held));
        if !held {
            ledger.forget();
            pending = true;
            continue;
        }
        if retry.is_some_and(|at| Instant::now() < at) || !(pending || retry.is_some()) {
            continue;
        }
        let Some(snapshot) = snapshots.borrow_and_update().clone() else {
            continue;
        };
        if !ledger.is_known() {
            match list_own(&client, api).await {
                Ok(listed) => ledger.seed(listed),
                Err(error) => {
                    let delay = backoff.failed(Instant::now());
                    tracing::warn!(%error, ?delay, "cannot list the PolicyReports; retrying");
                    continue;
                }
            }
        }
        let reports = policy_reports(
            &ReportInput {
                report: &snapshot.report,
                ingresses: &snapshot.ingresses,
                uids: &snapshot.uids,
            },
            api,
            settings.results,
        );
        pending = false;
        let failures = write_pass(
            &client,
            api,
            &reports,
            &mut ledger,
            &mut limit,
            &leadership,
            &metrics,
        )
        .await;
        if failures == 0 {
            backoff.succeeded();
        } else {
            let delay = backoff.failed(Instant::now());
            tracing::warn!(failures, ?delay, "PolicyReport writes failed; retrying");
        }
    }
}

/// One pass over the plan; the failures counted (their reports stay due).
async fn write_pass(
    client: &Client,
    api: ReportApi,
    reports: &[DesiredReport],
    ledger: &mut ReportLedger,
    limit: &mut RateLimit,
    leadership: &Leadership,
    metrics: &PolicyReportMetrics,
) -> usize {
    let writes = ledger.plan(reports);
    metrics
        .unchanged
        .inc_by(u64::try_from(ledger.unchanged(reports)).unwrap_or(u64::MAX));
    let mut failures = 0;
    for planned in &writes {
        limit.wait().await;
        if !leadership.holds() {
            tracing::info!("the PolicyReport lease is no longer held: writing stops");
            break;
        }
        let operation = match planned {
            ReportWrite::Apply(_) => "apply",
            ReportWrite::Delete(_) => "delete",
        };
        match write(client, api, planned).await {
            Ok(()) => {
                metrics.write(operation, true);
                match planned {
                    ReportWrite::Apply(report) => ledger.applied(report),
                    ReportWrite::Delete(key) => ledger.deleted(key),
                }
            }
            Err(error) => {
                metrics.write(operation, false);
                failures += 1;
                let (namespace, name) = match planned {
                    ReportWrite::Apply(report) => (&report.key.namespace, &report.key.name),
                    ReportWrite::Delete(key) => (&key.namespace, &key.name),
                };
                tracing::warn!(%namespace, %name, operation, %error, "PolicyReport write failed");
            }
        }
    }
    failures
}

impl AuditSnapshot {
    /// The audit's report and the uids of the objects it can name, from the watches' stores.
    pub fn new(
        report: Arc<AuditReport>,
        ingresses: Vec<Arc<AuditedIngress>>,
        aliases: &[Arc<AliasService>],
        deployments: &[Arc<StyrminDeployment>],
    ) -> Self {
        let key = |kind, namespace: Option<&String>, name: Option<&String>| ObjectKey {
            kind,
            namespace: namespace.cloned().unwrap_or_default(),
            name: name.cloned().unwrap_or_default(),
        };
        let mut uids = HashMap::new();
        for ingress in &ingresses {
            if let Some(uid) = ingress.uid() {
                uids.insert(
                    key(
                        "Ingress",
                        ingress.metadata.namespace.as_ref(),
                        ingress.metadata.name.as_ref(),
                    ),
                    uid.to_owned(),
                );
            }
        }
        for (kind, meta) in aliases.iter().map(|a| ("Service", &a.metadata)).chain(
            deployments
                .iter()
                .map(|d| ("StyrminDeployment", &d.metadata)),
        ) {
            if let Some(uid) = &meta.uid {
                uids.insert(
                    key(kind, meta.namespace.as_ref(), meta.name.as_ref()),
                    uid.clone(),
                );
            }
        }
        AuditSnapshot {
            report,
            ingresses,
            uids,
        }
    }
}

/// Starts the election and the writer on `tasks` (they end with it): the report API is
/// detected first, said in the log and in `styrmin_webhook_policy_report_api`. With `auto`
/// and neither API served, discovery is asked again every `rediscover_every` (the API
/// chosen once is kept: switching would leave the first API's reports behind).
pub fn start(
    tasks: &mut tokio::task::JoinSet<()>,
    client: &Client,
    settings: PolicyReportSettings,
    snapshots: Snapshots,
    audits: Arc<AuditStore>,
) {
    let leadership = Leadership::default();
    tasks.spawn(lease::run(
        client.clone(),
        settings.lease.clone(),
        leadership.clone(),
    ));
    let client = client.clone();
    tasks.spawn(async move {
        let metrics = audits.policy_report_metrics();
        let mut said_none = false;
        let api = loop {
            if let Some(api) = detect(&client, settings.target).await {
                break api;
            }
            set_chosen_api(&metrics, "none");
            if !said_none {
                tracing::warn!(
                    every = ?settings.rediscover_every,
                    "the API server serves neither openreports.io/v1alpha1 reports nor \
                     wgpolicyk8s.io/v1alpha2 policyreports: no PolicyReports are written until \
                     one is served"
                );
                said_none = true;
            }
            tokio::time::sleep(settings.rediscover_every).await;
        };
        set_chosen_api(&metrics, api.as_str());
        tracing::info!(api = %api.api_version(), kind = api.kind(), results = ?settings.results,
            lease = %settings.lease.name, "writing the audit as PolicyReports");
        run_writer(client, api, &settings, snapshots, leadership, audits).await;
    });
}

/// `styrmin_webhook_policy_report_api`: 1 for the API written in (or `none`), 0 for the others.
fn set_chosen_api(metrics: &PolicyReportMetrics, chosen: &str) {
    for label in ["openreports", "wgpolicyk8s", "none"] {
        metrics
            .api
            .get_or_create(&ApiLabels { api: label })
            .set(i64::from(label == chosen));
    }
}
