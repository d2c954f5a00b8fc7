//! One class's view of the cluster's Ingresses, fed by watch events: the summaries, which of
//! them need a status write, and which Ingress of the class a `Host` header reaches.

use std::collections::{BTreeSet, HashMap, HashSet};

use k8s_openapi::api::networking::v1::Ingress;
use kube::runtime::watcher;
use serde_json::Value;

use super::status::{IngressKey, IngressSummary, key_of, status_patch, summarize};

/// The Ingresses of every class as one class's controller last saw them.
#[derive(Debug)]
pub struct Cache {
    class: String,
    ip: String,
    ingresses: HashMap<IngressKey, IngressSummary>,
    routes: Routes,
    /// The keys listed since a relist began: what is not among them at its end is gone.
    relisting: Option<HashSet<IngressKey>>,
}

impl Cache {
    pub fn new(class: &str, ip: &str) -> Self {
        Self {
            class: class.to_owned(),
            ip: ip.to_owned(),
            ingresses: HashMap::new(),
            routes: Routes::default(),
            relisting: None,
        }
    }

    /// Applies one watch event; returns the Ingresses whose status this class must write.
    pub fn apply(&mut self, event: watcher::Event<Ingress>) -> Vec<IngressKey> {
        match event {
            watcher::Event::Init => {
                self.relisting = Some(HashSet::new());
                Vec::new()
            }
            watcher::Event::InitApply(ingress) => {
                let key = key_of(&ingress);
                if let (Some(seen), Some(key)) = (self.relisting.as_mut(), key) {
                    seen.insert(key);
                }
                self.upsert(&ingress).into_iter().collect()
            }
            watcher::Event::Apply(ingress) => self.upsert(&ingress).into_iter().collect(),
            watcher::Event::Delete(ingress) => {
                if let Some(key) = key_of(&ingress) {
                    self.remove(&key);
                }
                Vec::new()
            }
            watcher::Event::InitDone => {
                if let Some(seen) = self.relisting.take() {
                    let gone: Vec<IngressKey> = self
                        .ingresses
                        .keys()
                        .filter(|key| !seen.contains(*key))
                        .cloned()
                        .collect();
                    for key in gone {
                        self.remove(&key);
                    }
                }
                Vec::new()
            }
        }
    }

    /// The status patch `key` needs now, if any (`None` also when it is gone).
    pub fn patch_for(&self, key: &IngressKey) -> Option<Value> {
        status_patch(self.ingresses.get(key)?, &self.class, &self.ip)
    }

    /// The Ingress of this class that serves `host` (a `Host` header: port, case and a
    /// final dot do not matter).
    pub fn route(&self, host: &str) -> Option<&IngressKey> {
        self.routes.route(host)
    }

    /// How many Ingresses are known, of any class.
    pub fn known(&self) -> usize {
        self.ingresses.len()
    }

    fn upsert(&mut self, ingress: &Ingress) -> Option<IngressKey> {
        let key = key_of(ingress)?;
        let summary = summarize(ingress);
        if let Some(old) = self.ingresses.get(&key) {
            self.routes.remove(&key, old);
        }
        if summary.class.as_deref() == Some(self.class.as_str()) {
            self.routes.add(&key, &summary);
        }
        let needs_write = status_patch(&summary, &self.class, &self.ip).is_some();
        self.ingresses.insert(key.clone(), summary);
        needs_write.then_some(key)
    }

    fn remove(&mut self, key: &IngressKey) {
        if let Some(old) = self.ingresses.remove(key) {
            self.routes.remove(key, &old);
        }
    }
}

/// Hosts to the Ingresses of one class that name them. Several Ingresses may name one host:
/// the first by namespace and name answers, so that the answer does not depend on the order
/// of events.
#[derive(Debug, Default)]
struct Routes {
    exact: HashMap<String, BTreeSet<IngressKey>>,
    /// `*.example.com` under `example.com`: a wildcard matches exactly one more label.
    wildcard: HashMap<String, BTreeSet<IngressKey>>,
    catch_all: BTreeSet<IngressKey>,
}

impl Routes {
    fn add(&mut self, key: &IngressKey, ingress: &IngressSummary) {
        for host in &ingress.hosts {
            let (map, host) = self.table(host);
            map.entry(host.to_owned()).or_default().insert(key.clone());
        }
        if ingress.catch_all {
            self.catch_all.insert(key.clone());
        }
    }

    fn remove(&mut self, key: &IngressKey, ingress: &IngressSummary) {
        for host in &ingress.hosts {
            let (map, host) = self.table(host);
            if let Some(keys) = map.get_mut(host) {
                keys.remove(key);
                if keys.is_empty() {
                    map.remove(host);
                }
            }
        }
        self.catch_all.remove(key);
    }

    fn table<'h>(
        &mut self,
        host: &'h str,
    ) -> (&mut HashMap<String, BTreeSet<IngressKey>>, &'h str) {
        match host.strip_prefix("*.") {
            Some(domain) => (&mut self.wildcard, domain),
            None => (&mut self.exact, host),
        }
    }

    fn route(&self, host: &str) -> Option<&IngressKey> {
        let host = normalize_host(host);
        self.exact
            .get(&host)
            .and_then(BTreeSet::first)
            .or_else(|| {
                let (_, domain) = host.split_once('.')?;
                self.wildcard.get(domain).and_then(BTreeSet::first)
            })
            .or_else(|| self.catch_all.first())
    }
}

/// A `Host` header as a rule's host is written: no port, lower case, no final dot.
fn normalize_host(host: &str) -> String {
    let host = host.trim();
    let without_port = if host.starts_with('[') {
        // An IPv6 literal keeps its brackets; only what follows `]` can be a port.
        host.find(']').map_or(host, |end| &host[..=end])
    } else {
        host.rsplit_once(':').map_or(host, |(name, _)| name)
    };
    without_port.trim_end_matches('.').to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

    use serde_json::json;

    use super::*;

    fn ingress(namespace: &str, name: &str, class: &str, hosts: &[&str], ips: &[&str]) -> Ingress {
        let rules: Vec<Value> = hosts.iter().map(|host| json!({"host": host})).collect();
        let addresses: Vec<Value> = ips.iter().map(|ip| json!({"ip": ip})).collect();
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"ingressClassName": class, "rules": rules},
            "status": {"loadBalancer": {"ingress": addresses}}
        }))
        .unwrap()
    }

    fn key(namespace: &str, name: &str) -> IngressKey {
        IngressKey {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
    }

    #[test]
    fn events_say_which_ingresses_need_a_write() {
        let mut cache = Cache::new("a", "127.0.0.11");
        assert!(cache.apply(watcher::Event::Init).is_empty());
        let unserved = ingress("n", "new", "a", &["new.test"], &[]);
        assert_eq!(
            cache.apply(watcher::Event::InitApply(unserved)),
            [key("n", "new")]
        );
        let served = ingress("n", "served", "a", &["s.test"], &["127.0.0.11"]);
        assert!(cache.apply(watcher::Event::InitApply(served)).is_empty());
        let left = ingress("n", "left", "b", &["l.test"], &["127.0.0.11"]);
        assert_eq!(
            cache.apply(watcher::Event::InitApply(left)),
            [key("n", "left")]
        );
        let other = ingress("n", "other", "b", &["o.test"], &["127.0.0.12"]);
        assert!(cache.apply(watcher::Event::InitApply(other)).is_empty());
        assert!(cache.apply(watcher::Event::InitDone).is_empty());
        assert_eq!(cache.known(), 4);
        assert!(cache.patch_for(&key("n", "served")).is_none());
        assert!(cache.patch_for(&key("n", "new")).is_some());
        // Its own write seen back: nothing more to write.
        let written = ingress("n", "new", "a", &["new.test"], &["127.0.0.11"]);
        assert!(cache.apply(watcher::Event::Apply(written)).is_empty());
        assert!(cache.patch_for(&key("n", "new")).is_none());
        assert!(cache.patch_for(&key("n", "gone")).is_none());
    }

    #[test]
    fn hosts_route_to_the_ingresses_of_the_class_only() {
        let mut cache = Cache::new("a", "127.0.0.11");
        cache.apply(watcher::Event::Apply(ingress(
            "n",
            "web",
            "a",
            &["web.test"],
            &[],
        )));
        cache.apply(watcher::Event::Apply(ingress(
            "n",
            "any",
            "a",
            &["*.wild.test"],
            &[],
        )));
        cache.apply(watcher::Event::Apply(ingress(
            "n",
            "b",
            "b",
            &["b.test"],
            &[],
        )));
        assert_eq!(cache.route("web.test"), Some(&key("n", "web")));
        assert_eq!(cache.route("WEB.test.:8080"), Some(&key("n", "web")));
        assert_eq!(cache.route("x.wild.test"), Some(&key("n", "any")));
        assert_eq!(
            cache.route("y.x.wild.test"),
            None,
            "a wildcard is one label"
        );
        assert_eq!(cache.route("wild.test"), None);
        assert_eq!(cache.route("b.test"), None, "another class's host");
        assert_eq!(cache.route("unknown.test"), None);
        // The class changes: the host goes with it.
        cache.apply(watcher::Event::Apply(ingress(
            "n",
            "web",
            "b",
            &["web.test"],
            &[],
        )));
        assert_eq!(cache.route("web.test"), None);
        cache.apply(watcher::Event::Apply(ingress(
            "n",
            "b",
            "a",
            &["b.test"],
            &[],
        )));
        assert_eq!(cache.route("b.test"), Some(&key("n", "b")));
        cache.apply(watcher::Event::Delete(ingress(
            "n",
            "b",
            "a",
            &["b.test"],
            &[],
        )));
        assert_eq!(cache.route("b.test"), None);
    }

    #[test]
    fn one_host_of_two_ingresses_goes_to_the_first_by_name() {
        let mut cache = Cache::new("a", "127.0.0.11");
        cache.apply(watcher::Event::Apply(ingress(
            "z",
            "web",
            "a",
            &["web.test"],
            &[],
        )));
        cache.apply(watcher::Event::Apply(ingress(
            "m",
            "web",
            "a",
            &["web.test"],
            &[],
        )));
        assert_eq!(cache.route("web.test"), Some(&key("m", "web")));
        cache.apply(watcher::Event::Delete(ingress(
            "m",
            "web",
            "a",
            &["web.test"],
            &[],
        )));
        assert_eq!(cache.route("web.test"), Some(&key("z", "web")));
    }

    #[test]
    fn a_hostless_rule_catches_what_no_host_matches() {
        let mut cache = Cache::new("a", "127.0.0.11");
        cache.apply(watcher::Event::Apply(ingress(
            "n",
            "web",
            "a",
            &["web.test"],
            &[],
        )));
        cache.apply(watcher::Event::Apply(ingress("n", "all", "a", &[""], &[])));
        assert_eq!(cache.route("web.test"), Some(&key("n", "web")));
        assert_eq!(cache.route("else.test"), Some(&key("n", "all")));
    }

    #[test]
    fn a_relist_forgets_what_it_does_not_list() {
        let mut cache = Cache::new("a", "127.0.0.11");
        cache.apply(watcher::Event::Apply(ingress(
            "n",
            "kept",
            "a",
            &["k.test"],
            &[],
        )));
        cache.apply(watcher::Event::Apply(ingress(
            "n",
            "gone",
            "a",
            &["g.test"],
            &[],
        )));
        cache.apply(watcher::Event::Init);
        cache.apply(watcher::Event::InitApply(ingress(
            "n",
            "kept",
            "a",
            &["k.test"],
            &[],
        )));
        // Until the relist ends, what it has not listed yet still answers.
        assert_eq!(cache.route("g.test"), Some(&key("n", "gone")));
        cache.apply(watcher::Event::InitDone);
        assert_eq!(cache.known(), 1);
        assert_eq!(cache.route("g.test"), None);
        assert_eq!(cache.route("k.test"), Some(&key("n", "kept")));
    }

    #[test]
    fn hosts_are_read_without_port_case_or_final_dot() {
        assert_eq!(normalize_host("Web.Test:80"), "web.test");
        assert_eq!(normalize_host("web.test."), "web.test");
        assert_eq!(normalize_host("[::1]:80"), "[::1]");
        assert_eq!(normalize_host("127.0.0.11"), "127.0.0.11");
    }
}
