//! What one class's tasks share: the cache of Ingresses, the queue's members and the
//! counters.

use std::collections::HashSet;
use std::sync::atomic::AtomicU64;
use std::sync::{Mutex, MutexGuard};

use super::cache::Cache;
use super::status::IngressKey;

/// [`super::Counters`] as the tasks count them.
#[derive(Debug, Default)]
pub struct CounterCells {
    pub patches: AtomicU64,
    pub patch_errors: AtomicU64,
    pub conflicts: AtomicU64,
    pub answered: AtomicU64,
    pub not_found: AtomicU64,
}

/// What one class's tasks share: the cache, the queued writes and the counters.
#[derive(Debug)]
pub struct Shared {
    pub class: String,
    pub state: Mutex<State>,
    pub counters: CounterCells,
}

/// What the watch changes and the writers and the HTTP server read, under one lock.
#[derive(Debug)]
pub struct State {
    pub cache: Cache,
    /// Ingresses queued for a status write, so that each waits in the queue once.
    pub queued: HashSet<IngressKey>,
}

impl Shared {
    pub fn lock(&self) -> MutexGuard<'_, State> {
        // A panicked task left a cache that is still whole: every change is one insert.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
