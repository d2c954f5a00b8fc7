//! The wall clock, in the units the view and the audit keep: unix seconds and milliseconds.

use std::time::{SystemTime, UNIX_EPOCH};

/// Unix seconds now.
pub fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// Unix milliseconds now.
pub fn unix_now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unix_now_reads_the_system_clock() {
        let seconds = || {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap()
        };
        let before = seconds();
        let now = u64::try_from(unix_now()).unwrap();
        assert!(before <= now && now <= seconds(), "{before} {now}");
        let ms = unix_now_ms();
        assert!(
            before * 1000 <= ms && ms <= (seconds() + 1) * 1000,
            "{before} {ms}"
        );
    }
}
