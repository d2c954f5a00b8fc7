//! File descriptors: raise the soft limit to the hard one at start (a container's default
//! soft limit is often 1,024), and fit the connection caps under it with a reserve, so that
//! connections can never take the descriptors that certificate and policy reloads need.

use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

/// Descriptors kept for everything but connections: the runtime, the listeners, the
/// certificate and policy files read on reload, the Kubernetes watches, logging.
pub const RESERVE: u64 = 64;
/// Never ask for more than this, even where the hard limit is unlimited.
const CEILING: u64 = 1 << 20;

/// Raises the soft `RLIMIT_NOFILE` to the hard limit where allowed; returns the soft limit in
/// force afterwards (`None` when it is unlimited).
pub fn raise_limit() -> Option<u64> {
    let limit = getrlimit(Resource::Nofile);
    let wanted = limit.maximum.unwrap_or(CEILING).min(CEILING);
    if limit.current.is_some_and(|current| current < wanted) {
        match setrlimit(
            Resource::Nofile,
            Rlimit {
                current: Some(wanted),
                maximum: limit.maximum,
            },
        ) {
            Ok(()) => tracing::info!(
                from = limit.current,
                to = wanted,
                "raised the open file limit"
            ),
            Err(error) => tracing::warn!(%error, "cannot raise the open file limit"),
        }
    }
    getrlimit(Resource::Nofile).current
}

/// The connection caps `(https, metrics)` that fit under `limit` with [`RESERVE`] kept free:
/// the metrics listener keeps its cap where it can, the HTTPS listener gets the rest.
pub fn fit_caps(limit: Option<u64>, https: usize, metrics: usize) -> (usize, usize) {
    let Some(limit) = limit else {
        return (https, metrics);
    };
    let available = usize::try_from(limit.saturating_sub(RESERVE)).unwrap_or(usize::MAX);
    let metrics = metrics.min(available / 4).max(1);
    let https = https.min(available.saturating_sub(metrics)).max(1);
    (https, metrics)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_fit_under_the_limit_with_the_reserve() {
        assert_eq!(fit_caps(Some(1_048_576), 1000, 64), (1000, 64));
        assert_eq!(fit_caps(None, 1000, 64), (1000, 64));
        let (https, metrics) = fit_caps(Some(1024), 1000, 64);
        assert_eq!(metrics, 64);
        assert_eq!(https as u64 + metrics as u64 + RESERVE, 1024);
        let (https, metrics) = fit_caps(Some(256), 1000, 64);
        assert!(https as u64 + metrics as u64 + RESERVE <= 256);
        assert!(https >= 1 && metrics >= 1);
    }

    #[test]
    fn the_limit_is_raised_to_the_hard_limit_where_allowed() {
        let before = getrlimit(Resource::Nofile);
        let now = raise_limit();
        if let (Some(now), Some(current)) = (now, before.current) {
            assert!(now >= current, "lowered from {current} to {now}");
            if let Some(hard) = before.maximum {
                assert!(
                    now >= hard.min(CEILING),
                    "{now} below the hard limit {hard}"
                );
            }
        }
    }
}
