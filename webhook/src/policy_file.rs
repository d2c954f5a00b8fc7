//! The `--policy-file` source: a YAML file with the cluster, environments and deployments,
//! re-read when it changes. An invalid new version leaves the last good view in force.
//!
//! ```yaml
//! cluster: {ingress_class: traefik, dedicated_ingress: null}
//! environments:
//!   prod: {ingress_class: nginx, dedicated_ingress: {}}
//! deployments:
//!   web1: {environment: prod, ingress_class: haproxy}     # role application, phase RUNNING
//!   ctl9: {environment: prod, role: ingress-controller, phase: DELETING}
//! ```
//!
//! Every level (the cluster, an environment, a deployment) may also set
//! `enforcement_mode: enforce | warn`; the most specific level that sets it decides, and none
//! does, `enforce`.
//!
//! Optional keys: `kubernetes_version: "1.26"` at the top (R9), and per deployment
//! `last_deployed: {...}`, the ingress settings it was last deployed with (rule W5), written
//! as one level read like a cluster level: `{dedicated_ingress: {}}`, `{ingress_class: nginx}`
//! or `{ingress_class: ""}` (no class). A deployment without it resolves from its levels.
//!
//! A changed version is published only once its bytes have stayed the same for [`SETTLE`] (or
//! one poll interval, if longer), timed on the webhook's own clock: a file caught half-written
//! (an editor or `cp` writing in place, however slowly) is never published, even when the part
//! written so far is valid YAML. Writers should still write a temporary file and rename it into
//! place (what a ConfigMap volume does): a writer that stops mid-file for longer than that
//! cannot be told from a finished one.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use styrmin_ingress_rules::{
    DedicatedIngress, EnforcementMode, IngressTarget, KubernetesVersion, Level, Setting,
};

use crate::telemetry::ErrorChain;
use crate::view::{Deployment, Phase, Role, View, ViewSink, ViewSource};

#[derive(Debug, thiserror::Error)]
pub enum PolicyFileError {
    #[error("cannot read policy file {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("policy file {path} is not valid")]
    Parse {
        path: PathBuf,
        #[source]
        source: Box<serde_saphyr::Error>,
    },
    #[error(
        "policy file {path} kept changing while it was read; write it to a temporary file and \
         rename it into place"
    )]
    Unsettled { path: PathBuf },
    #[error("policy file {path}: kubernetes_version")]
    Version {
        path: PathBuf,
        #[source]
        source: styrmin_ingress_rules::ParseVersionError,
    },
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    #[serde(default)]
    cluster: Option<Level>,
    #[serde(default)]
    environments: Option<HashMap<String, Option<Level>>>,
    #[serde(default)]
    deployments: Option<HashMap<String, Option<PolicyDeployment>>>,
    #[serde(default)]
    kubernetes_version: Option<String>,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyDeployment {
    #[serde(default)]
    environment: Option<String>,
    #[serde(default)]
    role: Role,
    #[serde(default)]
    phase: Phase,
    #[serde(default)]
    ingress_class: Setting<String>,
    #[serde(default)]
    dedicated_ingress: Setting<DedicatedIngress>,
    #[serde(default)]
    enforcement_mode: Setting<EnforcementMode>,
    #[serde(default)]
    last_deployed: Option<IngressTarget>,
}

/// Parses the text of a policy file into a view. `path` is only used in error messages.
pub fn parse_policy(path: &Path, text: &str) -> Result<View, PolicyFileError> {
    let file: PolicyFile = if text.trim().is_empty() {
        PolicyFile::default()
    } else {
        serde_saphyr::from_str(text).map_err(|source| PolicyFileError::Parse {
            path: path.to_owned(),
            source: Box::new(source),
        })?
    };
    let kubernetes_version = file
        .kubernetes_version
        .map(|v| v.parse::<KubernetesVersion>())
        .transpose()
        .map_err(|source| PolicyFileError::Version {
            path: path.to_owned(),
            source,
        })?;
    let environments = file
        .environments
        .unwrap_or_default()
        .into_iter()
        .map(|(id, level)| (id, level.unwrap_or_default()))
        .collect();
    let deployments = file
        .deployments
        .unwrap_or_default()
        .into_iter()
        .map(|(id, d)| {
            let d = d.unwrap_or_default();
            let deployment = Deployment {
                environment: d.environment,
                role: d.role,
                phase: d.phase,
                level: Level {
                    ingress_class: d.ingress_class,
                    dedicated_ingress: d.dedicated_ingress,
                    enforcement_mode: d.enforcement_mode,
                },
                last_deployed: d.last_deployed,
                removal: None,
            };
            (id, deployment)
        })
        .collect();
    Ok(View::new(
        file.cluster.unwrap_or_default(),
        environments,
        deployments,
        kubernetes_version,
    ))
}

/// Reads and parses a policy file.
pub fn load_policy(path: &Path) -> Result<(Vec<u8>, View), PolicyFileError> {
    let bytes = std::fs::read(path).map_err(|source| PolicyFileError::Read {
        path: path.to_owned(),
        source,
    })?;
    let text = String::from_utf8_lossy(&bytes);
    let view = parse_policy(path, &text)?;
    Ok((bytes, view))
}

/// Polls a policy file and publishes each new valid version.
#[derive(Debug)]
pub struct PolicyFileSource {
    path: PathBuf,
    interval: Duration,
    /// The content of the version last read (valid or not), so that an unchanged file is not
    /// parsed again and an invalid one is reported once.
    last_seen: Vec<u8>,
    last_valid: bool,
    /// The view read by `open`, published when the source starts.
    pending: Option<View>,
    /// A changed content and when it was first read; published once it has not changed for
    /// the settle time.
    candidate: Option<(Vec<u8>, Instant)>,
}

/// How long a changed policy file must stay unchanged before it is published. A fixed time,
/// not a number of polls: with a short poll interval, two polls can fall between two writes of
/// a slow writer and read the same half-written file.
pub const SETTLE: Duration = Duration::from_secs(2);

/// How many times `open` reads a file that keeps changing before it gives up.
const OPEN_ATTEMPTS: usize = 20;

impl PolicyFileSource {
    /// Loads the file once, so that a server never starts on an invalid policy; like a poll, it
    /// takes the content only when two reads a short while apart agree.
    pub fn open(path: PathBuf, interval: Duration) -> Result<Self, PolicyFileError> {
        let settle = interval.min(Duration::from_millis(100));
        let read = |path: &Path| {
            std::fs::read(path).map_err(|source| PolicyFileError::Read {
                path: path.to_owned(),
                source,
            })
        };
        let mut bytes = read(&path)?;
        let mut settled = false;
        for _ in 0..OPEN_ATTEMPTS {
            std::thread::sleep(settle);
            let again = read(&path)?;
            if again == bytes {
                settled = true;
                break;
            }
            bytes = again;
        }
        if !settled {
            return Err(PolicyFileError::Unsettled { path });
        }
        let view = parse_policy(&path, &String::from_utf8_lossy(&bytes))?;
        Ok(PolicyFileSource {
            path,
            interval,
            last_seen: bytes,
            last_valid: true,
            pending: Some(view),
            candidate: None,
        })
    }

    /// How long a changed file must stay unchanged: [`SETTLE`], or one poll if that is longer.
    fn settle(&self) -> Duration {
        SETTLE.max(self.interval)
    }

    /// One poll: re-reads the file and publishes, confirms or reports.
    pub fn poll_once(&mut self, sink: &ViewSink) {
        self.poll_at(sink, Instant::now());
    }

    fn poll_at(&mut self, sink: &ViewSink, now: Instant) {
        let bytes = match std::fs::read(&self.path) {
            Ok(bytes) => bytes,
            Err(error) => {
                tracing::error!(path = %self.path.display(), %error, "cannot read policy file; keeping the last good policy");
                sink.report_error(self.name());
                return;
            }
        };
        if bytes == self.last_seen {
            // Unchanged. After an invalid version, the view stays stale until a fix.
            self.candidate = None;
            if self.last_valid {
                sink.confirm();
            }
            return;
        }
        match &self.candidate {
            Some((seen, since)) if *seen == bytes => {
                if now.saturating_duration_since(*since) < self.settle() {
                    // Unchanged since last read, but not for long enough yet.
                    return;
                }
            }
            _ => {
                // Changed since the last poll: maybe still being written.
                tracing::debug!(path = %self.path.display(), "policy file changed; published once it has stayed unchanged for the settle time");
                self.candidate = Some((bytes, now));
                return;
            }
        }
        self.candidate = None;
        self.last_seen = bytes;
        let text = String::from_utf8_lossy(&self.last_seen);
        match parse_policy(&self.path, &text) {
            Ok(view) => {
                tracing::info!(
                    path = %self.path.display(),
                    deployments = view.deployment_count(),
                    "policy file reloaded"
                );
                sink.publish(view);
                self.last_valid = true;
            }
            Err(error) => {
                tracing::error!(
                    path = %self.path.display(),
                    error = %ErrorChain(&error),
                    "policy file is invalid; keeping the last good policy"
                );
                sink.report_error(self.name());
                self.last_valid = false;
            }
        }
    }
}

impl ViewSource for PolicyFileSource {
    fn name(&self) -> &'static str {
        "policy-file"
    }

    async fn run(mut self, sink: ViewSink) -> anyhow::Result<()> {
        if let Some(view) = self.pending.take() {
            sink.publish(view);
        }
        let mut ticker = tokio::time::interval(self.interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            let mut this = self;
            // File I/O off the request threads.
            let sink_clone = sink.clone();
            self = tokio::task::spawn_blocking(move || {
                this.poll_once(&sink_clone);
                this
            })
            .await?;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use styrmin_ingress_rules::resolve;

    use super::*;
    use crate::view::ViewStore;

    const ISSUE_EXAMPLE: &str = "\
cluster: {ingress_class: traefik, dedicated_ingress: null}
environments:
  prod: {ingress_class: nginx, dedicated_ingress: {}}
deployments:
  web1: {environment: prod, ingress_class: haproxy}            # role: application, phase: RUNNING by default
  ctl9: {environment: prod, role: ingress-controller, phase: DELETING}
";

    fn parse(text: &str) -> Result<View, PolicyFileError> {
        parse_policy(Path::new("policy.yaml"), text)
    }

    #[test]
    fn the_issue_example_parses() {
        let view = parse(ISSUE_EXAMPLE).unwrap();
        let web1 = view.deployment("web1").unwrap();
        assert_eq!(web1.role, Role::Application);
        assert_eq!(web1.phase, Phase::Running);
        let ctl9 = view.deployment("ctl9").unwrap();
        assert_eq!(
            (ctl9.role, ctl9.phase),
            (Role::IngressController, Phase::Deleting)
        );
        // R1: prod's dedicated ingress wins over web1's class.
        assert!(
            resolve(&view.levels_for_deployment("web1"))
                .target
                .is_dedicated()
        );
        assert!(view.kubernetes_version().is_none());
    }

    #[test]
    fn empty_file_is_the_default_cluster() {
        let view = parse("").unwrap();
        assert_eq!(
            resolve(&view.levels_for_deployment("x"))
                .target
                .enforced_class(),
            Some("traefik")
        );
        let view = parse("environments: {}\ndeployments:\n  a:\n").unwrap();
        assert!(view.deployment("a").is_some());
    }

    #[test]
    fn optional_keys() {
        let view = parse("kubernetes_version: v1.26.3\ndeployments:\n  a: {last_deployed: {ingress_class: nginx}}\n").unwrap();
        assert_eq!(view.kubernetes_version().map(|v| v.minor), Some(26));
        assert_eq!(
            view.settings_for_deployment("a")
                .resolved
                .target
                .enforced_class(),
            Some("nginx")
        );
        assert_eq!(
            view.deployment("a").unwrap().last_deployed,
            Some(IngressTarget::class("nginx"))
        );
    }

    #[test]
    fn errors_name_the_file_and_the_problem() {
        for (bad, needle) in [
            (
                "cluster: {dedicated_ingress: true}",
                "object of the dedicated controller's values",
            ),
            ("deployments: {a: {role: boss}}", "boss"),
            ("deployments: {a: {phase: running}}", "running"),
            (
                "deployments: {a: {last_deployed: {dedicated_ingress: true}}}",
                "object of the dedicated controller's values",
            ),
            ("clusters: {}", "clusters"),
            ("kubernetes_version: latest", "latest"),
            ("{{{{ not yaml", "policy.yaml"),
            ("- a list", "policy.yaml"),
        ] {
            let err = parse(bad).unwrap_err();
            let text = ErrorChain(&err).to_string();
            assert!(text.contains("policy.yaml"), "{bad}: {text}");
            assert!(text.contains(needle), "{bad}: {text}");
        }
    }

    #[test]
    fn reload_keeps_the_last_good_view_and_reports() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("policy.yaml");
        std::fs::write(&path, ISSUE_EXAMPLE).unwrap();
        let mut source = PolicyFileSource::open(path.clone(), Duration::from_secs(1)).unwrap();
        let first = source.pending.take().unwrap();
        let store = Arc::new(ViewStore::default());
        let errors = Arc::new(AtomicUsize::new(0));
        let counted = errors.clone();
        let sink = ViewSink::new(
            store.clone(),
            Arc::new(move |_| {
                counted.fetch_add(1, Ordering::Relaxed);
            }),
        );
        sink.publish(first.clone());

        let t0 = Instant::now();
        std::fs::write(&path, "cluster: [garbage").unwrap();
        source.poll_at(&sink, t0);
        source.poll_at(&sink, t0 + SETTLE);
        source.poll_at(&sink, t0 + SETTLE * 2);
        assert_eq!(*store.load(), first, "the last good view stays");
        assert_eq!(
            errors.load(Ordering::Relaxed),
            1,
            "an invalid version is reported once"
        );

        std::fs::write(&path, "cluster: {ingress_class: nginx}").unwrap();
        source.poll_at(&sink, t0 + SETTLE * 3);
        source.poll_at(&sink, t0 + SETTLE * 4);
        assert_eq!(
            resolve(&store.load().levels_for_deployment("web1"))
                .target
                .enforced_class(),
            Some("nginx")
        );

        std::fs::remove_file(&path).unwrap();
        source.poll_at(&sink, t0 + SETTLE * 5);
        assert_eq!(
            errors.load(Ordering::Relaxed),
            2,
            "a missing file is reported"
        );
        assert_eq!(
            resolve(&store.load().levels_for_deployment("web1"))
                .target
                .enforced_class(),
            Some("nginx")
        );
    }

    #[test]
    fn a_version_is_published_only_once_it_has_stayed_unchanged_for_the_settle_time() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("policy.yaml");
        std::fs::write(&path, ISSUE_EXAMPLE).unwrap();
        // A poll interval far shorter than the writer's pauses.
        let mut source = PolicyFileSource::open(path.clone(), Duration::from_millis(10)).unwrap();
        let first = source.pending.take().unwrap();
        let store = Arc::new(ViewStore::default());
        let sink = ViewSink::new(store.clone(), Arc::new(|_| {}));
        sink.publish(first.clone());
        let t0 = Instant::now();
        let pause = Duration::from_millis(250);
        // A slow writer in place: a valid YAML prefix without `deployments:`, read by every
        // poll between two of its writes.
        let complete =
            "cluster: {ingress_class: nginx}\ndeployments:\n  web1: {ingress_class: haproxy}\n";
        std::fs::write(&path, &complete[..31]).unwrap();
        source.poll_at(&sink, t0);
        source.poll_at(&sink, t0 + pause / 2);
        source.poll_at(&sink, t0 + pause - Duration::from_millis(1));
        assert_eq!(
            *store.load(),
            first,
            "a prefix read the same by several polls within the settle time is not published"
        );
        // The writer goes on; the finished file starts its own settle time.
        std::fs::write(&path, complete).unwrap();
        source.poll_at(&sink, t0 + pause);
        source.poll_at(&sink, t0 + pause + SETTLE - Duration::from_millis(1));
        assert_eq!(
            *store.load(),
            first,
            "not yet unchanged for the settle time"
        );
        source.poll_at(&sink, t0 + pause + SETTLE);
        assert_eq!(
            resolve(&store.load().levels_for_deployment("web1"))
                .target
                .enforced_class(),
            Some("haproxy"),
            "unchanged for the settle time: published"
        );
    }

    #[test]
    fn the_settle_time_is_at_least_one_poll() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("policy.yaml");
        std::fs::write(&path, ISSUE_EXAMPLE).unwrap();
        let fast = PolicyFileSource::open(path.clone(), Duration::from_millis(10)).unwrap();
        assert_eq!(fast.settle(), SETTLE);
        let slow = PolicyFileSource::open(path, SETTLE * 3).unwrap();
        assert_eq!(slow.settle(), SETTLE * 3);
    }
}
