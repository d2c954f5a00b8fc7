//! One writer among the replicas: leader election on a `coordination.k8s.io/v1` Lease, as
//! client-go's `leaderelection` does it. Every replica reads the Lease each retry period; the
//! holder renews it with an update that carries the `resourceVersion` it read (so two
//! replicas can never both succeed: the second gets 409 Conflict), and the others take it
//! once its record has not changed for the lease duration, measured on their own clock from
//! when they saw it change (no trust in clocks across nodes).
//!
//! The holder counts itself the writer only until its last successful renewal plus the
//! renew deadline, shorter than the lease duration: a holder cut off from the API server
//! stops writing before anyone else may take the Lease.
//!
//! Every call times out at the renew deadline. On shutdown (SIGTERM) the holder stops
//! writing and gives the Lease back, as client-go's `ReleaseOnCancel` does (no holder, a
//! duration of one second), so that another replica takes it at its next retry instead of
//! waiting out the duration.
//!
//! Every replica of `styrmin-webhook controllers` takes part, whichever controllers are on
//! (and every replica of `serve` that still runs them). The Lease is [`LEASE_NAME`],
//! `styrmin-webhook-controllers`, in the controllers' namespace. The Lease of the version that
//! ran the controllers in the admission pods, [`LEGACY_LEASE_NAME`],
//! `styrmin-webhook-policy-reports`, is only read, never written: while another replica holds
//! it and renews it within its duration, this one neither creates nor takes the new Lease
//! ([`legacy_blocks`]); a legacy Lease that is gone, or that this replica may not read, blocks
//! nothing.
//!
//! [`decide`] and [`legacy_blocks`] are the pure part; [`run`] makes the calls (get, create,
//! update), each bounded in time ([`bounded`], which other callers share).

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Api;
use kube::api::PostParams;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::kube_calls::bounded;

/// The defaults of client-go's leader election (and of kube-controller-manager).
pub const LEASE_DURATION: Duration = Duration::from_secs(15);
pub const RENEW_DEADLINE: Duration = Duration::from_secs(10);
pub const RETRY_PERIOD: Duration = Duration::from_secs(2);
/// The Lease's name, in the controllers' namespace.
pub const LEASE_NAME: &str = "styrmin-webhook-controllers";
/// The name the Lease had while the controllers ran in the admission pods and the report
/// writer owned it. Until no replica of that version is left, a holder of it is followed
/// (see [`LeaseSettings::legacy_name`]): during an upgrade the old pods keep writing until
/// they stop and give it back, and only then do the new controllers start.
pub const LEGACY_LEASE_NAME: &str = "styrmin-webhook-policy-reports";

/// Where the Lease is and how it is held.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseSettings {
    pub namespace: String,
    pub name: String,
    /// This replica's name in `holderIdentity` (its pod name).
    pub identity: String,
    pub duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
    /// A Lease of an older version's election (same namespace) whose live holder keeps
    /// this one from being taken: read, never written. `None`: no such Lease.
    pub legacy_name: Option<String>,
}

/// Until when this replica may write, shared by the elector and the controllers it
/// elects; they are woken when it changes, so that a write in flight is cancelled the
/// moment the hold ends (see [`Leadership::while_held`]).
#[derive(Clone, Debug)]
pub struct Leadership(Arc<watch::Sender<Option<Instant>>>);

impl Default for Leadership {
    fn default() -> Self {
        Leadership(Arc::new(watch::Sender::new(None)))
    }
}

impl Leadership {
    /// Whether this replica may write now.
    pub fn holds(&self) -> bool {
        self.until().is_some_and(|until| Instant::now() < until)
    }

    /// When the hold ends, unless renewed.
    pub fn until(&self) -> Option<Instant> {
        *self.0.borrow()
    }

    pub(crate) fn hold_until(&self, until: Instant) {
        self.0.send_replace(Some(until));
    }

    /// The hold ends now (the Lease was lost or given back).
    pub(crate) fn release(&self) {
        self.0.send_replace(None);
    }

    /// Completes when the hold may have changed (taken, renewed, lost).
    pub async fn changed(&self) {
        let mut receiver = self.0.subscribe();
        receiver.mark_unchanged();
        let _ = receiver.changed().await;
    }

    /// Runs `call` while this replica holds the Lease: `None`, with the call dropped
    /// (cancelled), as soon as the hold ends, including one that ends at its renew deadline
    /// without news from the elector. A call is not started without the hold.
    pub async fn while_held<F: std::future::Future>(&self, call: F) -> Option<F::Output> {
        let mut receiver = self.0.subscribe();
        tokio::pin!(call);
        loop {
            let until = (*receiver.borrow_and_update())?;
            if Instant::now() >= until {
                return None;
            }
            tokio::select! {
                output = &mut call => return Some(output),
                () = tokio::time::sleep_until(until.into()) => {}
                changed = receiver.changed() => {
                    if changed.is_err() {
                        return None;
                    }
                }
            }
        }
    }
}

/// What to do with the Lease as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LeaseStep {
    /// Nobody holds it, or its holder has not renewed it for its duration: take it.
    Acquire,
    /// This replica holds it: renew it.
    Renew,
    /// Another replica holds it.
    Follow { holder: String },
}

/// What a replica last saw of the Lease, and when (on its own clock).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observed {
    record: (Option<String>, Option<String>, Option<i32>),
    at: Instant,
}

impl Observed {
    /// Notes the Lease as read at `now`; the time moves only when its record changed.
    pub fn note(previous: Option<Observed>, spec: &LeaseSpec, now: Instant) -> Observed {
        let record = (
            spec.holder_identity.clone(),
            spec.renew_time.as_ref().map(|t| t.0.to_string()),
            spec.lease_transitions,
        );
        match previous {
            Some(seen) if seen.record == record => seen,
            _ => Observed { record, at: now },
        }
    }
}

/// The step for the Lease's `spec` as read, `observed` as noted at this read.
pub fn decide(
    spec: &LeaseSpec,
    observed: &Observed,
    identity: &str,
    default_duration: Duration,
    now: Instant,
) -> LeaseStep {
    let holder = spec.holder_identity.as_deref().filter(|h| !h.is_empty());
    match holder {
        None => LeaseStep::Acquire,
        Some(holder) if holder == identity => LeaseStep::Renew,
        Some(holder) => {
            let duration = spec
                .lease_duration_seconds
                .and_then(|s| u64::try_from(s).ok())
                .map_or(default_duration, Duration::from_secs);
            if now.duration_since(observed.at) >= duration {
                LeaseStep::Acquire
            } else {
                LeaseStep::Follow {
                    holder: holder.to_owned(),
                }
            }
        }
    }
}

/// The Lease's spec after `step` (not `Follow`) by `identity`.
fn held_spec(previous: &LeaseSpec, step: &LeaseStep, settings: &LeaseSettings) -> LeaseSpec {
    let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
    let duration = i32::try_from(settings.duration.as_secs()).unwrap_or(i32::MAX);
    match step {
        LeaseStep::Renew => LeaseSpec {
            renew_time: Some(now),
            lease_duration_seconds: Some(duration),
            ..previous.clone()
        },
        _ => LeaseSpec {
            holder_identity: Some(settings.identity.clone()),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            lease_duration_seconds: Some(duration),
            lease_transitions: Some(
                previous.lease_transitions.unwrap_or(0)
                    + i32::from(previous.holder_identity.is_some()),
            ),
            ..LeaseSpec::default()
        },
    }
}

/// One round: read the Lease and take, renew or follow it. `Ok(true)` when this replica
/// holds it now.
async fn round(
    api: &Api<Lease>,
    settings: &LeaseSettings,
    observed: &mut Observations,
    now: Instant,
) -> Result<bool, kube::Error> {
    let Some(mut lease) = api.get_opt(&settings.name).await? else {
        if legacy_holder_is_live(api, settings, &mut observed.legacy, now).await? {
            return Ok(false);
        }
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(settings.name.clone()),
                namespace: Some(settings.namespace.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(held_spec(
                &LeaseSpec::default(),
                &LeaseStep::Acquire,
                settings,
            )),
        };
        return match api.create(&PostParams::default(), &lease).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
            Err(error) => Err(error),
        };
    };
    let spec = lease.spec.take().unwrap_or_default();
    let seen = Observed::note(observed.lease.take(), &spec, now);
    let step = decide(&spec, &seen, &settings.identity, settings.duration, now);
    observed.lease = Some(seen);
    match step {
        LeaseStep::Follow { .. } => return Ok(false),
        // Taking it over (not renewing) waits while the previous version's holder lives.
        LeaseStep::Acquire
            if legacy_holder_is_live(api, settings, &mut observed.legacy, now).await? =>
        {
            return Ok(false);
        }
        _ => {}
    }
    lease.spec = Some(held_spec(&spec, &step, settings));
    // `lease.metadata.resourceVersion` is the one read: a concurrent writer makes this 409.
    match api
        .replace(&settings.name, &PostParams::default(), &lease)
        .await
    {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
        Err(error) => Err(error),
    }
}

/// What a replica last saw of its Lease and of the legacy one.
#[derive(Debug, Default)]
struct Observations {
    lease: Option<Observed>,
    legacy: Option<Observed>,
}

/// Whether the legacy Lease (if any) has a holder other than this replica that renewed it
/// within its duration, as this replica has seen it: then nobody takes the new Lease yet.
/// A legacy Lease this replica may not read (403) or that does not exist blocks nothing.
async fn legacy_holder_is_live(
    api: &Api<Lease>,
    settings: &LeaseSettings,
    observed: &mut Option<Observed>,
    now: Instant,
) -> Result<bool, kube::Error> {
    let Some(name) = &settings.legacy_name else {
        return Ok(false);
    };
    let legacy = match api.get_opt(name).await {
        Ok(legacy) => legacy,
        Err(kube::Error::Api(status)) if status.code == 403 => None,
        Err(error) => return Err(error),
    };
    let Some(spec) = legacy.and_then(|l| l.spec) else {
        return Ok(false);
    };
    let seen = Observed::note(observed.take(), &spec, now);
    let blocked = legacy_blocks(&spec, &seen, &settings.identity, settings.duration, now);
    *observed = Some(seen);
    if blocked {
        tracing::info!(lease = %name, holder = ?spec.holder_identity,
            "a replica of the previous version holds the legacy lease: waiting until it gives it back or it expires");
    }
    Ok(blocked)
}

/// Whether the legacy Lease, as read and observed, keeps the new one from being taken: its
/// holder is another replica that has renewed it within its duration.
pub fn legacy_blocks(
    spec: &LeaseSpec,
    observed: &Observed,
    identity: &str,
    default_duration: Duration,
    now: Instant,
) -> bool {
    matches!(
        decide(spec, observed, identity, default_duration, now),
        LeaseStep::Follow { .. }
    )
}

/// The Lease's spec when its holder gives it back: no holder, and a duration of one second
/// (client-go's release), the transitions kept.
fn released_spec(previous: &LeaseSpec) -> LeaseSpec {
    let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
    LeaseSpec {
        holder_identity: None,
        lease_duration_seconds: Some(1),
        acquire_time: Some(now.clone()),
        renew_time: Some(now),
        lease_transitions: previous.lease_transitions,
        ..LeaseSpec::default()
    }
}

/// Gives the Lease back if this replica still holds it (read, then update with the
/// resourceVersion read: a Lease someone else took meanwhile is left alone).
async fn give_back(api: &Api<Lease>, settings: &LeaseSettings) -> Result<bool, kube::Error> {
    let Some(mut lease) = api.get_opt(&settings.name).await? else {
        return Ok(false);
    };
    let spec = lease.spec.take().unwrap_or_default();
    if spec.holder_identity.as_deref() != Some(settings.identity.as_str()) {
        return Ok(false);
    }
    lease.spec = Some(released_spec(&spec));
    api.replace(&settings.name, &PostParams::default(), &lease)
        .await
        .map(|_| true)
}

/// Takes part in the election until `shutdown` is cancelled, then gives the Lease back if
/// it is held; `leadership` says whether this replica holds it, and so does `held_gauge`
/// (`styrmin_webhook_controllers_lease_held`). Cancel `shutdown` only once the controllers
/// it elects have stopped: a Lease given back while one still writes lets a second writer in.
pub async fn run(
    client: kube::Client,
    settings: LeaseSettings,
    leadership: Leadership,
    held_gauge: Gauge,
    shutdown: CancellationToken,
) {
    let api: Api<Lease> = Api::namespaced(client, &settings.namespace);
    let mut observed = Observations::default();
    let mut held = false;
    while !shutdown.is_cancelled() {
        let started = Instant::now();
        let attempt = bounded(
            settings.renew_deadline,
            round(&api, &settings, &mut observed, started),
        );
        let outcome = tokio::select! {
            outcome = attempt => outcome,
            () = shutdown.cancelled() => break,
        };
        match outcome {
            Ok(true) => {
                leadership.hold_until(started + settings.renew_deadline);
                if !held {
                    tracing::info!(lease = %settings.name, identity = %settings.identity,
                        "took the lease: this replica runs the cluster-wide controllers");
                }
            }
            Ok(false) => {
                if held {
                    tracing::warn!(lease = %settings.name, "lost the lease: its controllers stop");
                }
                leadership.release();
            }
            Err(error) => {
                // The renew deadline ends the hold if this goes on.
                tracing::warn!(lease = %settings.name, %error, "cannot read or renew the lease");
            }
        }
        held = leadership.holds();
        held_gauge.set(i64::from(held));
        tokio::select! {
            () = tokio::time::sleep(settings.retry_period) => {}
            () = shutdown.cancelled() => break,
        }
        if held && !leadership.holds() {
            tracing::warn!(lease = %settings.name, "the lease was not renewed within the renew deadline: its controllers stop");
        }
    }
    let was_held = leadership.holds();
    leadership.release();
    held_gauge.set(0);
    if was_held {
        match bounded(settings.renew_deadline, give_back(&api, &settings)).await {
            Ok(true) => {
                tracing::info!(lease = %settings.name, "shutting down: gave the lease back")
            }
            Ok(false) => {}
            Err(error) => {
                tracing::warn!(lease = %settings.name, %error, "shutting down: cannot give the lease back; another replica takes it after its duration")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(holder: Option<&str>, renewed: i64, duration: Option<i32>) -> LeaseSpec {
        LeaseSpec {
            holder_identity: holder.map(str::to_owned),
            renew_time: Some(MicroTime(
                k8s_openapi::jiff::Timestamp::from_second(renewed).unwrap_or_default(),
            )),
            lease_duration_seconds: duration,
            ..LeaseSpec::default()
        }
    }

    #[test]
    fn a_free_lease_is_taken_and_ones_own_renewed() {
        let now = Instant::now();
        let free = spec(None, 0, None);
        let seen = Observed::note(None, &free, now);
        assert_eq!(
            decide(&free, &seen, "a", LEASE_DURATION, now),
            LeaseStep::Acquire
        );
        let mine = spec(Some("a"), 0, Some(15));
        let seen = Observed::note(None, &mine, now);
        assert_eq!(
            decide(&mine, &seen, "a", LEASE_DURATION, now),
            LeaseStep::Renew
        );
    }

    #[test]
    fn a_live_holder_of_the_legacy_lease_blocks_until_it_gives_it_back_or_expires() {
        let start = Instant::now();
        let at = |s| start + Duration::from_secs(s);
        // An old replica renews it: blocked for the duration of an unchanged record.
        let held = spec(Some("old-pod"), 100, Some(15));
        let seen = Observed::note(None, &held, start);
        assert!(legacy_blocks(
            &held,
            &seen,
            "new-pod",
            LEASE_DURATION,
            at(14)
        ));
        assert!(!legacy_blocks(
            &held,
            &seen,
            "new-pod",
            LEASE_DURATION,
            at(15)
        ));
        // Given back on SIGTERM (no holder): free at once.
        let released = released_spec(&held);
        let seen = Observed::note(Some(seen), &released, at(1));
        assert!(!legacy_blocks(
            &released,
            &seen,
            "new-pod",
            LEASE_DURATION,
            at(1)
        ));
        // Never blocked by oneself.
        let own = spec(Some("new-pod"), 100, Some(15));
        let seen = Observed::note(None, &own, start);
        assert!(!legacy_blocks(
            &own,
            &seen,
            "new-pod",
            LEASE_DURATION,
            start
        ));
    }

    #[test]
    fn another_holder_is_followed_until_its_record_stands_still_for_the_duration() {
        let start = Instant::now();
        let held = spec(Some("b"), 100, Some(15));
        let seen = Observed::note(None, &held, start);
        let at = |s| start + Duration::from_secs(s);
        assert_eq!(
            decide(&held, &seen, "a", LEASE_DURATION, at(14)),
            LeaseStep::Follow { holder: "b".into() }
        );
        // b renewed at 10 s: the clock starts again from when it was seen.
        let renewed = spec(Some("b"), 110, Some(15));
        let seen = Observed::note(Some(seen), &renewed, at(10));
        assert_eq!(seen.at, at(10));
        let same = Observed::note(Some(seen), &renewed, at(20));
        assert_eq!(same.at, at(10), "an unchanged record keeps its time");
        assert_eq!(
            decide(&renewed, &same, "a", LEASE_DURATION, at(24)),
            LeaseStep::Follow { holder: "b".into() }
        );
        assert_eq!(
            decide(&renewed, &same, "a", LEASE_DURATION, at(25)),
            LeaseStep::Acquire
        );
        // The Lease's own duration counts, not ours.
        let short = spec(Some("b"), 110, Some(3));
        let seen = Observed::note(None, &short, start);
        assert_eq!(
            decide(&short, &seen, "a", LEASE_DURATION, at(3)),
            LeaseStep::Acquire
        );
    }

    #[test]
    fn taking_over_counts_a_transition_and_renewing_does_not() {
        let settings = LeaseSettings {
            namespace: "styrmin-system".into(),
            name: LEASE_NAME.into(),
            identity: "a".into(),
            duration: LEASE_DURATION,
            renew_deadline: RENEW_DEADLINE,
            retry_period: RETRY_PERIOD,
            legacy_name: None,
        };
        let mut previous = spec(Some("b"), 100, Some(15));
        previous.lease_transitions = Some(3);
        let taken = held_spec(&previous, &LeaseStep::Acquire, &settings);
        assert_eq!(taken.holder_identity.as_deref(), Some("a"));
        assert_eq!(taken.lease_transitions, Some(4));
        assert_eq!(taken.lease_duration_seconds, Some(15));
        let renewed = held_spec(&taken, &LeaseStep::Renew, &settings);
        assert_eq!(renewed.lease_transitions, Some(4));
        assert_eq!(renewed.acquire_time, taken.acquire_time);
        let first = held_spec(&LeaseSpec::default(), &LeaseStep::Acquire, &settings);
        assert_eq!(first.lease_transitions, Some(0));
    }

    #[test]
    fn leadership_ends_at_its_deadline() {
        let leadership = Leadership::default();
        assert!(!leadership.holds());
        leadership.hold_until(Instant::now() + Duration::from_secs(60));
        assert!(leadership.holds());
        leadership.hold_until(Instant::now());
        assert!(!leadership.holds());
    }

    #[tokio::test]
    async fn a_call_is_dropped_when_the_hold_ends_and_not_started_without_it() {
        let ms = Duration::from_millis;
        let leadership = Leadership::default();
        assert_eq!(leadership.while_held(async { 1 }).await, None, "not held");
        leadership.hold_until(Instant::now() + ms(200));
        assert_eq!(leadership.while_held(async { 2 }).await, Some(2));
        // A call that outlives the hold's deadline is dropped at the deadline, although
        // nobody said anything.
        let started = Instant::now();
        let slow = leadership.while_held(tokio::time::sleep(Duration::from_secs(30)));
        assert_eq!(slow.await, None);
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        // A renewal during the call lets it finish.
        leadership.hold_until(Instant::now() + ms(200));
        let renewer = {
            let leadership = leadership.clone();
            tokio::spawn(async move {
                tokio::time::sleep(ms(100)).await;
                leadership.hold_until(Instant::now() + Duration::from_secs(30));
            })
        };
        let call = leadership.while_held(async {
            tokio::time::sleep(ms(400)).await;
            3
        });
        assert_eq!(call.await, Some(3));
        renewer.await.unwrap_or(());
        // A loss (409 on renewal, a give-back) drops the call at once.
        let losing = {
            let leadership = leadership.clone();
            tokio::spawn(async move {
                tokio::time::sleep(ms(100)).await;
                leadership.release();
            })
        };
        let started = Instant::now();
        let call = leadership.while_held(tokio::time::sleep(Duration::from_secs(30)));
        assert_eq!(call.await, None);
        assert!(started.elapsed() < Duration::from_secs(5));
        losing.await.unwrap_or(());
    }

    #[test]
    fn a_given_back_lease_has_no_holder_and_is_taken_at_once() {
        let mut held = spec(Some("a"), 100, Some(15));
        held.lease_transitions = Some(2);
        let released = released_spec(&held);
        assert_eq!(released.holder_identity, None);
        assert_eq!(released.lease_duration_seconds, Some(1));
        assert_eq!(released.lease_transitions, Some(2));
        let now = Instant::now();
        let seen = Observed::note(None, &released, now);
        assert_eq!(
            decide(&released, &seen, "b", LEASE_DURATION, now),
            LeaseStep::Acquire,
            "no waiting out the duration"
        );
    }
}
