//! A client that keeps asking every host of every Ingress of the Styrmin namespaces for an
//! answer, through the address its Ingress has at that moment, as a user behind DNS that
//! follows `status.loadBalancer` would: what a migration's "0 failed probes" is counted by.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use k8s_openapi::api::networking::v1::Ingress;
use kube::Api;
use kube::api::ListParams;
use styrmin_test_support::stand_in_controller::get;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What the probing saw.
#[derive(Clone, Debug, Default)]
pub struct ProbeCounts {
    pub rounds: u64,
    /// Requests answered 200.
    pub answered: u64,
    /// Requests not answered 200 while the Ingress still had the address probed:
    /// `namespace/name via address: what came back`.
    pub failed: Vec<String>,
    /// Requests not answered 200 because the Ingress had moved on meanwhile (its address
    /// changed between the read and the answer): not a failure of what it had then.
    pub stale: u64,
    /// Ingresses found without an address (not probed).
    pub unaddressed: u64,
}

/// The probing client, until [`Prober::stop`].
#[derive(Debug)]
pub struct Prober {
    stop: watch::Sender<bool>,
    task: JoinHandle<ProbeCounts>,
}

impl Prober {
    /// Starts probing every `pause`, each host on `port`.
    pub fn start(client: kube::Client, port: u16, pause: Duration) -> Prober {
        let (stop, mut stopped) = watch::channel(false);
        let task = tokio::spawn(async move {
            let mut counts = ProbeCounts::default();
            loop {
                round(&client, port, &mut counts).await;
                counts.rounds += 1;
                tokio::select! {
                    () = tokio::time::sleep(pause) => {}
                    _ = stopped.changed() => return counts,
                }
            }
        });
        Prober { stop, task }
    }

    /// Stops after the round in progress; what it saw.
    pub async fn stop(self) -> ProbeCounts {
        let _ = self.stop.send(true);
        self.task.await.unwrap()
    }
}

fn addressed(ingress: &Ingress) -> Option<(IpAddr, Vec<String>)> {
    let ip = ingress
        .status
        .as_ref()?
        .load_balancer
        .as_ref()?
        .ingress
        .as_ref()?
        .first()?
        .ip
        .as_ref()?
        .parse()
        .ok()?;
    let hosts = ingress
        .spec
        .as_ref()?
        .rules
        .iter()
        .flatten()
        .filter_map(|r| r.host.clone())
        .collect();
    Some((ip, hosts))
}

async fn round(client: &kube::Client, port: u16, counts: &mut ProbeCounts) {
    let api: Api<Ingress> = Api::all(client.clone());
    let Ok(list) = api.list(&ListParams::default()).await else {
        return;
    };
    let mut failures: BTreeMap<(String, String), (IpAddr, String)> = BTreeMap::new();
    for ingress in &list.items {
        let namespace = ingress.metadata.namespace.clone().unwrap_or_default();
        if !namespace.starts_with("styrmin-") || namespace == "styrmin-system" {
            continue;
        }
        let name = ingress.metadata.name.clone().unwrap_or_default();
        let Some((ip, hosts)) = addressed(ingress) else {
            counts.unaddressed += 1;
            continue;
        };
        for host in hosts {
            match get(SocketAddr::new(ip, port), &host).await {
                Ok((200, _)) => counts.answered += 1,
                Ok((status, body)) => {
                    failures.insert(
                        (namespace.clone(), name.clone()),
                        (ip, format!("{host}: {status} {}", body.trim())),
                    );
                }
                Err(error) => {
                    failures.insert(
                        (namespace.clone(), name.clone()),
                        (ip, format!("{host}: {error}")),
                    );
                }
            }
        }
    }
    // A failure counts only if the Ingress still has the address that was asked a moment
    // later, and the host is still not served there: the watches of the controllers and of
    // this client see a move a few milliseconds apart.
    if !failures.is_empty() {
        tokio::time::sleep(SETTLE).await;
    }
    for ((namespace, name), (ip, what)) in failures {
        let now = Api::<Ingress>::namespaced(client.clone(), &namespace)
            .get_opt(&name)
            .await
            .ok()
            .flatten();
        let Some((still, hosts)) = now.as_ref().and_then(addressed).filter(|(a, _)| *a == ip)
        else {
            counts.stale += 1;
            continue;
        };
        let mut served = true;
        for host in &hosts {
            served &= matches!(get(SocketAddr::new(still, port), host).await, Ok((200, _)));
        }
        if served {
            counts.stale += 1;
        } else {
            counts
                .failed
                .push(format!("{namespace}/{name} via {ip}: {what}"));
        }
    }
}

/// How long a failed probe waits before it is asked again.
const SETTLE: Duration = Duration::from_millis(300);
