//! Stand-in ingress controllers, for tests that need an Ingress to be *served*: one per
//! class, each watching every Ingress of the cluster, publishing its own loopback address in
//! the status of the Ingresses of its class (and taking it away from the others), and
//! answering HTTP on that address for the hosts of those Ingresses.
//!
//! What they imitate of a real controller: the class read from `spec.ingressClassName`, or
//! else the annotation `kubernetes.io/ingress.class`; `status.loadBalancer.ingress` set to
//! exactly `[{ip}]` through the status subresource, written only when it differs; the
//! address removed from an Ingress that moves away; routing by `Host` (exact, one-label
//! `*.` wildcards, a hostless rule or default backend catching the rest). What they do not:
//! paths, backends, TLS, the default IngressClass for class-less Ingresses, leader election.
//! A stopped controller leaves every status as it was, as a crashed one would.
//!
//! ```no_run
//! # async fn example(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
//! use styrmin_test_support::stand_in_controller::{ClassAddress, StandIn};
//! let stand_in = StandIn::new(
//!     ["nginx=127.0.0.11".parse::<ClassAddress>()?, "haproxy=127.0.0.12".parse()?],
//!     0, // a free port, the same on every address
//! )?;
//! let mut running = stand_in.start(client).await?;
//! let port = running.port();
//! // ... GET http://127.0.0.12:{port}/ with `Host: web.example.com` ...
//! running.stop("haproxy").await;
//! # Ok(()) }
//! ```
//!
//! The binary `stand-in-ingress-controller` (`tools/bench`) runs the same controllers as a
//! process of their own, for tests that kill or pause it.

use std::collections::HashSet;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use tokio::net::TcpListener;
use tokio::sync::{Mutex as AsyncMutex, mpsc};
use tokio::task::JoinSet;

mod cache;
mod http;
mod run;
mod shared;
pub mod status;

use cache::Cache;
pub use http::get;
use shared::{CounterCells, Shared, State};

/// What can go wrong in configuring or starting the controllers.
#[derive(Debug, thiserror::Error)]
pub enum StandInError {
    #[error("{0:?} is not NAME=IP (a class name and an IP address)")]
    NotClassAddress(String),
    #[error("no class is given")]
    NoClass,
    #[error("the class {0:?} is given twice")]
    ClassTwice(String),
    #[error("the classes {first:?} and {second:?} have the same address {ip}")]
    SharedAddress {
        first: String,
        second: String,
        ip: IpAddr,
    },
    #[error("listening on {address} for the class {class:?}")]
    Listen {
        class: String,
        address: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// One class and the address its controller publishes and listens on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassAddress {
    pub class: String,
    pub ip: IpAddr,
}

/// `NAME=IP`, as the binary's `--class` takes it.
impl FromStr for ClassAddress {
    type Err = StandInError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let not = || StandInError::NotClassAddress(text.to_owned());
        let (class, ip) = text.split_once('=').ok_or_else(not)?;
        let ip = ip.trim().parse().map_err(|_| not())?;
        let class = class.trim();
        if class.is_empty() {
            return Err(not());
        }
        Ok(Self {
            class: class.to_owned(),
            ip,
        })
    }
}

impl fmt::Display for ClassAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.class, self.ip)
    }
}

/// The controllers to start: a class per address, one HTTP port for all.
#[derive(Clone, Debug)]
pub struct StandIn {
    classes: Vec<ClassAddress>,
    port: u16,
}

/// What one class's controller has done so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Status writes the API server accepted.
    pub patches: u64,
    /// Status writes that failed (each tried again a second later).
    pub patch_errors: u64,
    /// Status writes refused because the Ingress changed since it was read (not tried
    /// again: the watch brings the change).
    pub conflicts: u64,
    /// HTTP requests answered 200 (a host of an Ingress of the class).
    pub answered: u64,
    /// HTTP requests answered 404.
    pub not_found: u64,
}

impl StandIn {
    /// Checks that there is at least one class, and that no class or address is given twice
    /// (two controllers with one address could not tell their Ingresses apart). Port 0 picks
    /// a free port, then the same one on every address.
    pub fn new(
        classes: impl IntoIterator<Item = ClassAddress>,
        port: u16,
    ) -> Result<Self, StandInError> {
        let classes: Vec<ClassAddress> = classes.into_iter().collect();
        if classes.is_empty() {
            return Err(StandInError::NoClass);
        }
        for (i, one) in classes.iter().enumerate() {
            for other in &classes[..i] {
                if other.class == one.class {
                    return Err(StandInError::ClassTwice(one.class.clone()));
                }
                if other.ip == one.ip {
                    return Err(StandInError::SharedAddress {
                        first: other.class.clone(),
                        second: one.class.clone(),
                        ip: one.ip,
                    });
                }
            }
        }
        Ok(Self { classes, port })
    }

    /// Listens on every class's address, then starts each class's watch, status writers and
    /// HTTP server on the current tokio runtime.
    pub async fn start(&self, client: kube::Client) -> Result<Running, StandInError> {
        let mut port = self.port;
        let mut listeners = Vec::with_capacity(self.classes.len());
        for ClassAddress { class, ip } in &self.classes {
            let address = SocketAddr::new(*ip, port);
            let listener =
                TcpListener::bind(address)
                    .await
                    .map_err(|source| StandInError::Listen {
                        class: class.clone(),
                        address,
                        source,
                    })?;
            let bound = listener
                .local_addr()
                .map_err(|source| StandInError::Listen {
                    class: class.clone(),
                    address,
                    source,
                })?;
            port = bound.port();
            listeners.push((bound, listener));
        }
        let classes = self
            .classes
            .iter()
            .zip(listeners)
            .map(|(class, (address, listener))| ClassRun::start(&client, class, address, listener))
            .collect();
        Ok(Running { port, classes })
    }
}

/// Running controllers. Dropping this stops them all (their tasks are aborted).
#[derive(Debug)]
pub struct Running {
    port: u16,
    classes: Vec<ClassRun>,
}

#[derive(Debug)]
struct ClassRun {
    class: String,
    address: SocketAddr,
    shared: Arc<Shared>,
    /// `None` once stopped.
    tasks: Option<JoinSet<()>>,
}

impl ClassRun {
    fn start(
        client: &kube::Client,
        class: &ClassAddress,
        address: SocketAddr,
        listener: TcpListener,
    ) -> Self {
        let shared = Arc::new(Shared {
            class: class.class.clone(),
            state: Mutex::new(State {
                cache: Cache::new(&class.class, &class.ip.to_string()),
                queued: HashSet::new(),
            }),
            counters: CounterCells::default(),
        });
        let (queue, receiver) = mpsc::unbounded_channel();
        let receiver = Arc::new(AsyncMutex::new(receiver));
        let mut tasks = JoinSet::new();
        tasks.spawn(run::watch(
            client.clone(),
            Arc::clone(&shared),
            queue.clone(),
        ));
        for _ in 0..run::WRITERS {
            tasks.spawn(run::write_statuses(
                client.clone(),
                Arc::clone(&shared),
                Arc::clone(&receiver),
                queue.clone(),
            ));
        }
        tasks.spawn(http::serve(listener, Arc::clone(&shared)));
        tracing::info!(class = %class.class, %address, "stand-in ingress controller started");
        Self {
            class: class.class.clone(),
            address,
            shared,
            tasks: Some(tasks),
        }
    }
}

impl Running {
    /// The HTTP port, the same on every class's address.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The classes, in the order given.
    pub fn classes(&self) -> impl Iterator<Item = &str> {
        self.classes.iter().map(|run| run.class.as_str())
    }

    /// Where `class` answers HTTP (while it runs).
    pub fn address(&self, class: &str) -> Option<SocketAddr> {
        self.class(class).map(|run| run.address)
    }

    /// Whether `class`'s controller runs.
    pub fn is_running(&self, class: &str) -> bool {
        self.class(class).is_some_and(|run| run.tasks.is_some())
    }

    /// What `class`'s controller has done, stopped or not.
    pub fn counters(&self, class: &str) -> Option<Counters> {
        let cells = &self.class(class)?.shared.counters;
        Some(Counters {
            patches: cells.patches.load(Ordering::Relaxed),
            patch_errors: cells.patch_errors.load(Ordering::Relaxed),
            conflicts: cells.conflicts.load(Ordering::Relaxed),
            answered: cells.answered.load(Ordering::Relaxed),
            not_found: cells.not_found.load(Ordering::Relaxed),
        })
    }

    /// How many Ingresses, of any class, `class`'s controller knows of.
    pub fn known_ingresses(&self, class: &str) -> Option<usize> {
        Some(self.class(class)?.shared.lock().cache.known())
    }

    /// Stops `class`'s controller as a crash would: its watch, its writes and its HTTP
    /// server end (open connections are cut, the port refuses new ones once this returns),
    /// and the statuses it wrote stay. False when it was not running.
    pub async fn stop(&mut self, class: &str) -> bool {
        let Some(mut tasks) = self
            .classes
            .iter_mut()
            .find(|run| run.class == class)
            .and_then(|run| run.tasks.take())
        else {
            return false;
        };
        tasks.abort_all();
        // Wait for the tasks to be dropped, so that the listener is closed.
        while tasks.join_next().await.is_some() {}
        tracing::info!(class, "stand-in ingress controller stopped");
        true
    }

    fn class(&self, class: &str) -> Option<&ClassRun> {
        self.classes.iter().find(|run| run.class == class)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

    use super::*;

    fn class(text: &str) -> ClassAddress {
        text.parse().unwrap()
    }

    #[test]
    fn a_class_address_is_name_equals_ip() {
        assert_eq!(
            class("nginx=127.0.0.11"),
            ClassAddress {
                class: "nginx".to_owned(),
                ip: IpAddr::from([127, 0, 0, 11])
            }
        );
        assert_eq!(class("nginx=127.0.0.11").to_string(), "nginx=127.0.0.11");
        assert_eq!(
            class("v6=::1").ip,
            IpAddr::from([0u16, 0, 0, 0, 0, 0, 0, 1])
        );
        for wrong in ["nginx", "=127.0.0.1", "nginx=localhost", "nginx=", ""] {
            assert!(
                matches!(
                    wrong.parse::<ClassAddress>(),
                    Err(StandInError::NotClassAddress(_))
                ),
                "{wrong:?}"
            );
        }
    }

    #[test]
    fn classes_and_addresses_are_each_given_once() {
        assert!(matches!(StandIn::new([], 0), Err(StandInError::NoClass)));
        let twice = StandIn::new([class("a=127.0.0.11"), class("a=127.0.0.12")], 0);
        assert!(matches!(twice, Err(StandInError::ClassTwice(c)) if c == "a"));
        let shared = StandIn::new([class("a=127.0.0.11"), class("b=127.0.0.11")], 0);
        assert!(matches!(shared, Err(StandInError::SharedAddress { .. })));
        assert!(StandIn::new([class("a=127.0.0.11"), class("b=127.0.0.12")], 0).is_ok());
    }
}
