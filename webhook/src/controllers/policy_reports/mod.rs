//! Writing the audit as PolicyReports (`--policy-reports`): which report API the API server
//! serves ([`detect`]), and the writer ([`run_writer`]), which brings the cluster's reports
//! to the audit's ([`content`]) with writes in proportion to what changed:
//!
//! - a report's content depends on the findings and the objects, never on the clock, and
//!   carries its digest; the writer's [`ReportLedger`] knows the digest of every report it
//!   holds, so an unchanged report is never written again, and a steady cluster costs no
//!   write at all;
//! - reaching a full set costs one write per report; a changed object at most one; a
//!   deleted object none (the garbage collector removes its report by its owner reference);
//! - the writer lists its reports (metadata only, paged) when it takes the Lease, every
//!   `resync_every` and after the watches list again, and repairs what someone else
//!   deleted or changed; when all is as written, that costs the list calls and nothing else;
//! - writes (and list pages) share one budget of `qps` a second with a burst of
//!   [`burst`](crate::kube_calls::burst); a write that fails waits on its own, doubling
//!   from 1 s to 60 s, and holds no other back;
//! - every call has a timeout, and none runs without the Lease: a write in flight is
//!   dropped the moment the hold ends ([`Leadership::while_held`]).

pub mod calls;
pub mod content;
pub mod ledger;
pub mod metrics;

use std::time::{Duration, Instant};

use kube::Client;
use tokio_util::sync::CancellationToken;

use super::lease::Leadership;
use crate::audit::round::{AuditFeed, AuditRound};
use crate::clock::unix_now;
use crate::kube_calls::{Backoff, CALL_TIMEOUT, CallBudget};
use crate::kube_source::ApiCall;
use content::{
    Digest, FirstSeen, ReportApi, ReportKey, ReportResults, ReportSet, StampedReport,
    owned_through_a_selector,
};
use futures::StreamExt as _;
use futures::stream::FuturesUnordered;
pub use ledger::{KnownReport, ReportLedger, ReportWrite};
use metrics::PolicyReportMetrics;

/// What the writer does to its reports: lists its own (metadata only), applies them
/// server-side (`patch`, and `create` for one that does not exist yet) and deletes them.
pub const REPORT_VERBS: &[&str] = &["list", "create", "patch", "delete"];

/// The calls of the writer in `api`, in every namespace. The ClusterRole grants them only
/// when the chart's `policyReports.mode` is not `off`, for the APIs that mode may write in
/// (a test compares them). Discovering which API is served needs no grant: every
/// authenticated client may read discovery (`system:discovery`).
pub const fn report_call(api: ReportApi) -> ApiCall {
    ApiCall::Resource {
        group: api.group(),
        version: api.version(),
        resource: api.plural(),
        verbs: REPORT_VERBS,
        names: &[],
    }
}

/// The default of `--policy-reports-qps`.
pub const DEFAULT_QPS: f64 = 20.0;
/// The default of `--policy-reports-resync-secs`.
pub const RESYNC_EVERY: Duration = Duration::from_secs(600);
/// Writes in flight at once. One at a time, the writer's pace is one write per round trip
/// (about 100 a second against an API server on two cores, whatever `--policy-reports-qps`
/// allows); a few side by side let it reach the budget. Bounded, so that a pass holds at
/// most this many report bodies and the API server sees at most this many of its requests.
pub const WRITES_IN_FLIGHT: usize = 8;
/// Discovery that fails is tried again after this, doubling up to a minute.
const DISCOVERY_RETRY_FIRST: Duration = Duration::from_secs(1);
const DISCOVERY_RETRY_MAX: Duration = Duration::from_secs(60);

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
    /// Calls a second, at most (writes and list pages; 0: no limit).
    pub qps: f64,
    /// With `auto` and neither report API served: how often discovery is asked again, so
    /// that reports start when Kyverno or Policy Reporter installs the CRDs later.
    pub rediscover_every: Duration,
    /// How often the writer lists its reports to repair what others changed.
    pub resync_every: Duration,
}

/// The default of [`PolicyReportSettings::rediscover_every`].
pub const REDISCOVER_EVERY: Duration = Duration::from_secs(60);

/// The report API to write in: the one asked for, or for `auto` the first of
/// [`ReportApi::ALL`] the API server serves (`None`: neither). Discovery that fails is
/// tried again with backoff.
pub async fn detect(client: &Client, target: ReportTarget) -> Option<ReportApi> {
    if let ReportTarget::Api(api) = target {
        return Some(api);
    }
    let mut backoff = Backoff::new(DISCOVERY_RETRY_FIRST, DISCOVERY_RETRY_MAX);
    'retry: loop {
        for api in ReportApi::ALL {
            match calls::serves(client, api, CALL_TIMEOUT).await {
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

/// The writer's state between passes.
struct Writer {
    client: Client,
    api: ReportApi,
    results: ReportResults,
    resync_every: Duration,
    ledger: ReportLedger,
    budget: CallBudget,
    leadership: Leadership,
    metrics: PolicyReportMetrics,
    /// When the reports were last listed, and at which relist of the watches.
    listed: Option<(Instant, u64)>,
    /// A failed list is tried again after this.
    list_backoff: Backoff,
    /// A call answered 404 for the report resource: whether the API is still served is
    /// asked before the next pass.
    api_in_doubt: bool,
}

/// Why the writer returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriterEnd {
    /// `shutdown`, or the audit feed closed.
    Stopped,
    /// The API server no longer serves the report API (its CRD was removed, or no longer
    /// serves that version): the API is discovered again.
    ApiGone,
}

/// Whether a failed call says the report resource itself is not served (a list, or a
/// write whose 404 is not about its namespace), rather than that one object is missing.
pub fn says_api_gone(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(status) => {
            status.code == 404
                && status
                    .details
                    .as_ref()
                    .is_none_or(|details| details.kind != "namespaces")
        }
        _ => false,
    }
}

/// How a pass ended.
enum PassEnd {
    /// Every planned write was made or failed.
    Done,
    /// A newer audit round came: plan again on it.
    NewRound,
    /// The hold ended.
    LostLease,
}

/// One write to make, with everything it needs, so that several can be in flight while
/// the writer keeps its ledger.
enum ReportCall {
    Apply {
        key: ReportKey,
        digest: Digest,
        stamped: StampedReport,
    },
    Delete {
        key: ReportKey,
    },
}

/// A finished write.
enum CallOutcome {
    Applied {
        key: ReportKey,
        digest: Digest,
        first_seen: FirstSeen,
        selected_owner: bool,
        result: Result<Option<Box<str>>, kube::Error>,
    },
    Deleted {
        key: ReportKey,
        result: Result<(), kube::Error>,
    },
}

impl ReportCall {
    /// Makes the call while the hold lasts; `None` when it ended first (the call dropped).
    async fn run(
        self,
        client: Client,
        api: ReportApi,
        leadership: Leadership,
    ) -> Option<CallOutcome> {
        match self {
            ReportCall::Apply {
                key,
                digest,
                stamped,
            } => {
                let selected_owner = stamped.body["metadata"]["ownerReferences"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|owner| owned_through_a_selector(owner["kind"].as_str().unwrap_or("")));
                let call = calls::apply(&client, api, &key, &stamped.body, CALL_TIMEOUT);
                let result = leadership.while_held(call).await?;
                Some(CallOutcome::Applied {
                    key,
                    digest,
                    first_seen: stamped.first_seen,
                    selected_owner,
                    result,
                })
            }
            ReportCall::Delete { key } => {
                let call = calls::delete(&client, api, &key, CALL_TIMEOUT);
                let result = leadership.while_held(call).await?;
                Some(CallOutcome::Deleted { key, result })
            }
        }
    }
}

impl Writer {
    /// Lists the reports (every page on the budget) and reconciles the ledger with them.
    async fn list(&mut self, relists: u64) -> Result<(), kube::Error> {
        let mut listed = Vec::new();
        let mut token: Option<String> = None;
        loop {
            self.budget.wait().await;
            let page = calls::list_page(&self.client, self.api, token.as_deref(), CALL_TIMEOUT);
            let Some(result) = self.leadership.while_held(page).await else {
                return Ok(());
            };
            self.metrics.list_page(result.is_ok());
            let (items, next) = result?;
            listed.extend(items);
            match next {
                Some(next) => token = Some(next),
                None => break,
            }
        }
        tracing::debug!(reports = listed.len(), "listed the PolicyReports");
        self.ledger.reconcile(listed);
        self.listed = Some((Instant::now(), relists));
        Ok(())
    }

    /// Whether the reports should be listed before the next pass: never listed under this
    /// hold, the resync is due, or the watches listed again since.
    fn list_due(&self, round: &AuditRound, now: Instant) -> bool {
        match self.listed {
            None => true,
            Some((at, relists)) => {
                relists != round.relists || now.duration_since(at) >= self.resync_every
            }
        }
    }

    /// One pass: the writes that bring the cluster to `round`, at the budget's pace, up to
    /// [`WRITES_IN_FLIGHT`] at once. A newer round stops new writes from starting; those in
    /// flight are seen through, so that the ledger knows what they left.
    async fn pass(&mut self, round: &AuditRound, feed: &AuditFeed) -> PassEnd {
        let desired = ReportSet::new(round, self.api, self.results);
        let mut planned = self.ledger.plan(&desired, Instant::now()).into_iter();
        self.metrics
            .set_counts(desired.len(), self.ledger.failing());
        self.metrics
            .unchanged
            .inc_by(u64::try_from(self.ledger.unchanged(&desired)).unwrap_or(u64::MAX));
        let mut in_flight = FuturesUnordered::new();
        let mut end = PassEnd::Done;
        // The next call, with its budget token taken, and when the budget lets it start.
        let mut next: Option<(ReportCall, Instant)> = None;
        loop {
            while next.is_none()
                && in_flight.len() < WRITES_IN_FLIGHT
                && matches!(end, PassEnd::Done)
            {
                let Some(write) = planned.next() else { break };
                if feed.has_changed().unwrap_or(false) {
                    end = PassEnd::NewRound;
                    break;
                }
                if let Some(call) = self.call_for(&desired, write) {
                    let now = Instant::now();
                    match self.budget.take(now) {
                        wait if wait.is_zero() => in_flight.push(call.run(
                            self.client.clone(),
                            self.api,
                            self.leadership.clone(),
                        )),
                        wait => next = Some((call, now + wait)),
                    }
                }
            }
            let start_at = next.as_ref().map(|(_, at)| *at);
            if start_at.is_none() && in_flight.is_empty() {
                break;
            }
            // The calls in flight are polled while the next one waits for the budget, so
            // that a hold that ends meanwhile cancels them at once.
            tokio::select! {
                Some(done) = in_flight.next(), if !in_flight.is_empty() => {
                    let Some(outcome) = done else {
                        // The hold ended: the other calls in flight are dropped (cancelled)
                        // with `in_flight`.
                        tracing::info!("the lease is no longer held: report writing stops");
                        return PassEnd::LostLease;
                    };
                    self.record(outcome);
                }
                () = tokio::time::sleep_until(start_at.unwrap_or_else(Instant::now).into()),
                    if start_at.is_some() =>
                {
                    if let Some((call, _)) = next.take() {
                        let run = call.run(self.client.clone(), self.api, self.leadership.clone());
                        in_flight.push(run);
                    }
                }
            }
        }
        self.metrics
            .set_counts(desired.len(), self.ledger.failing());
        end
    }

    /// The call that makes `write`, with the report built and stamped now.
    fn call_for(&self, desired: &ReportSet<'_>, write: ReportWrite) -> Option<ReportCall> {
        match write {
            ReportWrite::Apply(index) => {
                let report = desired.report(index)?;
                let first_seen = self
                    .ledger
                    .get(&report.key)
                    .map(|known| known.first_seen.clone())
                    .unwrap_or_default();
                let stamped = report.stamped(&first_seen, unix_now());
                Some(ReportCall::Apply {
                    key: report.key,
                    digest: report.digest,
                    stamped,
                })
            }
            ReportWrite::Delete(key) => Some(ReportCall::Delete { key }),
        }
    }

    /// What a finished call leaves: the ledger learns it, a failure waits on its own.
    fn record(&mut self, outcome: CallOutcome) {
        let (operation, key, failure) = match outcome {
            CallOutcome::Applied {
                key,
                digest,
                first_seen,
                selected_owner,
                result,
            } => match result {
                Ok(resource_version) => {
                    let report = KnownReport {
                        digest: Some(digest),
                        resource_version,
                        first_seen,
                        selected_owner,
                    };
                    self.ledger.written(&key, report);
                    ("apply", key, None)
                }
                Err(error) => ("apply", key, Some(error)),
            },
            CallOutcome::Deleted { key, result } => {
                if result.is_ok() {
                    self.ledger.deleted(&key);
                }
                ("delete", key, result.err())
            }
        };
        self.metrics.write(operation, failure.is_none());
        if let Some(error) = failure {
            self.api_in_doubt |= operation == "apply" && says_api_gone(&error);
            let delay = self.ledger.failed(&key, Instant::now());
            tracing::warn!(namespace = %key.namespace, name = %key.name, %error, ?delay,
                operation, "PolicyReport write failed; this report is tried again later");
        }
    }

    /// When the writer has something to do without news: a retry or a resync.
    fn next_wake(&self) -> Option<Instant> {
        let resync = self.listed.map(|(at, _)| at + self.resync_every);
        let retry = self.ledger.next_retry();
        let list_retry = self.list_backoff.retry_at();
        [resync, retry, list_retry].into_iter().flatten().min()
    }
}

/// The writer: on each new audit round, each due retry and each resync, brings the
/// cluster's reports to the last round while this replica holds the Lease. Returns when
/// `shutdown` is cancelled or the feed closes.
pub async fn run_writer(
    client: Client,
    api: ReportApi,
    settings: &PolicyReportSettings,
    mut feed: AuditFeed,
    leadership: Leadership,
    metrics: PolicyReportMetrics,
    shutdown: CancellationToken,
) -> WriterEnd {
    let mut writer = Writer {
        client,
        api,
        results: settings.results,
        resync_every: settings.resync_every,
        ledger: ReportLedger::default(),
        budget: CallBudget::new(settings.qps),
        leadership,
        metrics,
        listed: None,
        list_backoff: Backoff::new(DISCOVERY_RETRY_FIRST, DISCOVERY_RETRY_MAX),
        api_in_doubt: false,
    };
    let mut pending = true;
    loop {
        let held = writer.leadership.holds();
        if !held {
            writer.ledger.forget();
            writer.listed = None;
            // The holder's counts are the holder's: a follower shows none.
            writer.metrics.set_counts(0, 0);
            pending = true;
        }
        if held && writer.api_in_doubt {
            writer.api_in_doubt = false;
            if let Ok(false) = calls::serves(&writer.client, writer.api, CALL_TIMEOUT).await {
                return WriterEnd::ApiGone;
            }
        }
        if held && pending {
            pending = !step(&mut writer, &mut feed).await;
        }
        // A hold can end at its deadline without news from the elector: wake then too.
        let wake = writer
            .next_wake()
            .into_iter()
            .chain(writer.leadership.until())
            .min()
            .filter(|_| held);
        let sleep = async {
            match wake {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            changed = feed.changed() => {
                if changed.is_err() {
                    return WriterEnd::Stopped;
                }
                pending = true;
            }
            () = sleep => pending = true,
            () = writer.leadership.changed() => {}
            () = shutdown.cancelled() => return WriterEnd::Stopped,
        }
    }
}

/// Lists if due, then one pass on the last round; `true` when the cluster holds the round's
/// reports as far as they can be written now (failed ones wait for their retry).
async fn step(writer: &mut Writer, feed: &mut AuditFeed) -> bool {
    let Some(round) = feed.borrow_and_update().clone() else {
        return true;
    };
    let now = Instant::now();
    if writer.list_due(&round, now) {
        if writer.list_backoff.retry_at().is_some_and(|at| now < at) {
            return false;
        }
        if let Err(error) = writer.list(round.relists).await {
            writer.api_in_doubt |= says_api_gone(&error);
            let delay = writer.list_backoff.failed(Instant::now());
            tracing::warn!(%error, ?delay, "cannot list the PolicyReports; retrying");
            return false;
        }
        writer.list_backoff.succeeded();
        if !writer.ledger.is_known() {
            return false;
        }
    }
    match writer.pass(&round, feed).await {
        PassEnd::Done => true,
        PassEnd::NewRound | PassEnd::LostLease => false,
    }
}

/// Starts the report writer on `tasks` (it ends with them or with `shutdown`): the report
/// API is detected first, said in the log and in `styrmin_webhook_policy_report_api`; then
/// the writer follows `leadership` (the controllers' election). With `auto` and neither API
/// served, discovery is asked again every `rediscover_every`. The API chosen is kept while
/// it is served (switching would leave its reports behind); once a list or a write says it
/// is gone (its CRD removed, or that version no longer served, [`WriterEnd::ApiGone`]), the
/// metric says `none`, the log says why, and discovery starts again.
pub fn start(
    tasks: &mut tokio::task::JoinSet<()>,
    client: &Client,
    settings: PolicyReportSettings,
    feed: AuditFeed,
    metrics: PolicyReportMetrics,
    leadership: Leadership,
    shutdown: CancellationToken,
) {
    let client = client.clone();
    tasks.spawn(async move {
        loop {
            let Some(api) = discover(&client, &settings, &metrics, &shutdown).await else {
                return;
            };
            metrics.set_chosen_api(api.as_str());
            tracing::info!(api = %api.api_version(), kind = api.kind(), results = ?settings.results,
                "writing the audit as PolicyReports");
            let end = run_writer(
                client.clone(),
                api,
                &settings,
                feed.clone(),
                leadership.clone(),
                metrics.clone(),
                shutdown.clone(),
            )
            .await;
            if end == WriterEnd::Stopped {
                return;
            }
            // Its CRD went with its reports: there is nothing of that API left to keep.
            metrics.set_chosen_api("none");
            tracing::warn!(api = %api.api_version(), kind = api.kind(),
                every = ?settings.rediscover_every,
                "the API server no longer serves the report API: discovering it again");
            tokio::select! {
                () = tokio::time::sleep(settings.rediscover_every) => {}
                () = shutdown.cancelled() => return,
            }
        }
    });
}

/// The report API to write in, asked again every `rediscover_every` while neither is
/// served (`None`: shutdown).
async fn discover(
    client: &Client,
    settings: &PolicyReportSettings,
    metrics: &PolicyReportMetrics,
    shutdown: &CancellationToken,
) -> Option<ReportApi> {
    let mut said_none = false;
    loop {
        let detected = tokio::select! {
            detected = detect(client, settings.target) => detected,
            () = shutdown.cancelled() => return None,
        };
        if detected.is_some() {
            return detected;
        }
        metrics.set_chosen_api("none");
        if !said_none {
            tracing::warn!(
                every = ?settings.rediscover_every,
                "the API server serves neither openreports.io/v1alpha1 reports nor \
                 wgpolicyk8s.io/v1alpha2 policyreports: no PolicyReports are written until \
                 one is served"
            );
            said_none = true;
        }
        tokio::select! {
            () = tokio::time::sleep(settings.rediscover_every) => {}
            () = shutdown.cancelled() => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16, kind: Option<&str>) -> kube::Error {
        let details = kind.map(|kind| kube::core::response::StatusDetails {
            name: "x".to_owned(),
            group: String::new(),
            kind: kind.to_owned(),
            uid: String::new(),
            causes: Vec::new(),
            retry_after_seconds: 0,
        });
        kube::Error::Api(Box::new(kube::core::Status {
            code,
            details,
            ..Default::default()
        }))
    }

    #[test]
    fn only_a_404_for_the_resource_itself_says_the_api_is_gone() {
        // A list or an apply of a resource the API server does not serve.
        assert!(says_api_gone(&status(404, None)));
        assert!(says_api_gone(&status(404, Some("reports"))));
        // An apply into a namespace deleted meanwhile: the API is there.
        assert!(!says_api_gone(&status(404, Some("namespaces"))));
        for code in [403, 409, 422, 500, 503] {
            assert!(!says_api_gone(&status(code, None)), "{code}");
        }
    }
}
