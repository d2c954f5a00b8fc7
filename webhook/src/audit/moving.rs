//! The Ingresses a migration step is moving now, as the migration executor tells the audit
//! in the same process: between the step's level change and its write, each of them has
//! the class the levels no longer give, and is counted as moving, not as `wrong_class`. A
//! PolicyReport is then neither created for it nor deleted again a moment later, and the
//! audit's `wrong_class` count says what is wrong, not what is on its way.
//!
//! The executor holds the set only while a step moves or rolls back ([`MovingGuard`]): a
//! paused, failed or finished step, or a replica that lost the Lease, moves nothing, and the
//! Ingresses it left behind are `wrong_class` again.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock};

/// The Ingresses of the step in flight, by namespace and name; empty when none moves.
#[derive(Debug, Default)]
pub struct MovingSet {
    /// `<migration>/<step>`, said in the audit.
    pub step: Box<str>,
    /// Names by namespace: the audit asks once per Ingress it judges, by borrowed names,
    /// without building a key.
    ingresses: HashMap<Box<str>, HashSet<Box<str>>>,
    len: usize,
}

impl MovingSet {
    pub fn contains(&self, namespace: &str, name: &str) -> bool {
        self.ingresses
            .get(namespace)
            .is_some_and(|names| names.contains(name))
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Shared between the executor (which sets it) and the audit (which reads it).
#[derive(Clone, Debug, Default)]
pub struct MovingIngresses(Arc<RwLock<Arc<MovingSet>>>);

impl MovingIngresses {
    /// The set now (cheap: shared).
    pub fn current(&self) -> Arc<MovingSet> {
        self.0.read().map(|set| set.clone()).unwrap_or_default()
    }

    /// Marks `ingresses` as moved by `step` until the guard goes.
    pub fn hold<'a>(
        &self,
        step: &str,
        ingresses: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> MovingGuard {
        let mut set = MovingSet {
            step: Box::from(step),
            ..MovingSet::default()
        };
        for (namespace, name) in ingresses {
            let names = set.ingresses.entry(Box::from(namespace)).or_default();
            set.len += usize::from(names.insert(Box::from(name)));
        }
        self.replace(set);
        MovingGuard(self.clone())
    }

    fn replace(&self, set: MovingSet) {
        if let Ok(mut current) = self.0.write() {
            *current = Arc::new(set);
        }
    }
}

/// While it lives, its step's Ingresses count as moving; dropped (the step returns, fails,
/// or its future is dropped with a lost Lease), none does.
#[derive(Debug)]
pub struct MovingGuard(MovingIngresses);

impl Drop for MovingGuard {
    fn drop(&mut self) {
        self.0.replace(MovingSet::default());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_marks_its_ingresses_while_its_guard_lives() {
        let moving = MovingIngresses::default();
        assert!(moving.current().is_empty());
        let guard = moving.hold(
            "to-haproxy/prod",
            [("styrmin-web1", "api"), ("styrmin-web2", "web")],
        );
        let now = moving.current();
        assert_eq!((now.len(), &*now.step), (2, "to-haproxy/prod"));
        assert!(now.contains("styrmin-web1", "api"));
        assert!(!now.contains("styrmin-web1", "web"));
        drop(guard);
        assert!(moving.current().is_empty());
        assert!(!moving.current().contains("styrmin-web1", "api"));
    }
}
