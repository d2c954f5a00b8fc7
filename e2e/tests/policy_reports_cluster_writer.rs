//! The PolicyReport writer against a real kube-apiserver when things go wrong (`make
//! test-cluster`, not `make test`): the binaries come from `$KUBEBUILDER_ASSETS`, as in
//! `policy_reports_cluster.rs`; without it each test says so and returns.
//!
//! - Garbage collection with the writer stopped: a report goes with its Ingress because of
//!   its ownerReference alone, not because a writer deletes it.
//! - Warn mode end to end: an Ingress whose environment is in `enforcementMode: warn` gets
//!   `warn` results, one in an enforcing environment `fail`.
//! - A partition: a pausable TCP proxy between the Lease holder and the API server. Paused,
//!   the holder stops counting itself the writer within the renew deadline and the other
//!   replica takes over; resumed, the API server's audit log shows no write of the old
//!   holder. Then SIGTERM to the new holder: it gives the Lease back and the old one takes
//!   over at once, not after the lease duration.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::networking::v1::Ingress;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams};
use serde_json::{Value, json};
use styrmin_e2e::control_plane::{
    self, ControlPlane, Processes, apply, eventually, install_crds, lease_holder, open_reports,
    report_of, scrape_value, until_lease_held_by,
};
use styrmin_e2e::{Scratch, free_port, release_binary};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::sync::watch;

/// The Lease the replicas share (docs/audit.md names it).
const LEASE_NAME: &str = "styrmin-webhook-controllers";
/// The replicas' Lease: short, so that a hand-over takes seconds.
const LEASE: Duration = Duration::from_secs(3);
const RENEW_DEADLINE: Duration = Duration::from_secs(2);
const RETRY_PERIOD: Duration = Duration::from_millis(500);
/// How long an Ingress may go without an address: a finding that appears while the holder
/// is cut off, after its renew deadline.
const NOT_SERVED_GRACE: Duration = Duration::from_secs(5);

/// A `styrmin-webhook controllers --policy-reports openreports` process with
/// `identity` in the Lease, its metrics on `metrics`, the cluster through `kubeconfig`.
fn replica(dir: &Path, kubeconfig: &Path, identity: &str, metrics: u16) -> Child {
    Command::new(release_binary("styrmin-webhook"))
        .arg("controllers")
        .args(["--audit-interval-secs", "1"])
        .arg(format!(
            "--audit-not-served-grace-secs={}",
            NOT_SERVED_GRACE.as_secs()
        ))
        .args(["--policy-reports", "openreports"])
        .args(["--leader-election-namespace", "styrmin-system"])
        .args(["--leader-election-identity", identity])
        .arg(format!(
            "--leader-election-lease-duration-ms={}",
            LEASE.as_millis()
        ))
        .arg(format!(
            "--leader-election-renew-deadline-ms={}",
            RENEW_DEADLINE.as_millis()
        ))
        .arg(format!(
            "--leader-election-retry-period-ms={}",
            RETRY_PERIOD.as_millis()
        ))
        .arg(format!("--metrics-listen=127.0.0.1:{metrics}"))
        .env("KUBECONFIG", kubeconfig)
        .arg("--log-filter=debug,kube_client=error,hyper_util=info,tower=info,rustls=info,h2=info")
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join(format!("replica-{identity}.log"))).unwrap())
        .spawn()
        .unwrap()
}

fn log_of(dir: &Path, identity: &str) -> String {
    std::fs::read_to_string(dir.join(format!("replica-{identity}.log"))).unwrap_or_default()
}

/// The Styrmin objects of the tests: the cluster's class `traefik` (and IngressClasses for
/// the classes the Ingresses use, so that no finding is `unknown_class`), an enforcing
/// environment `prod` and a warning one `trial`, and for each `(id, environment)` a
/// namespace `styrmin-<id>` with its StyrminDeployment.
async fn styrmin_objects(client: &kube::Client, deployments: &[(&str, &str)]) {
    for object in [
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "styrmin-system"}}),
        json!({"apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminCluster", "metadata": {"name": "default"},
               "spec": {"ingressClass": "traefik"}}),
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass", "metadata": {"name": "traefik"},
               "spec": {"controller": "traefik.io/ingress-controller"}}),
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass", "metadata": {"name": "nginx"},
               "spec": {"controller": "k8s.io/ingress-nginx"}}),
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass", "metadata": {"name": "haproxy"},
               "spec": {"controller": "haproxy.org/ingress-controller"}}),
        json!({"apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminEnvironment", "metadata": {"name": "prod"},
               "spec": {}}),
        json!({"apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminEnvironment", "metadata": {"name": "trial"},
               "spec": {"enforcementMode": "warn"}}),
    ] {
        apply(client, &object).await;
    }
    for (id, environment) in deployments {
        let name = format!("styrmin-{id}");
        apply(
            client,
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
        )
        .await;
        apply(
            client,
            &json!({"apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminDeployment",
                    "metadata": {"name": name, "namespace": name},
                    "spec": {"environmentId": environment, "role": "application"}}),
        )
        .await;
    }
}

/// An Ingress `name` in `namespace` with class `class` (the levels give `traefik`), no
/// address.
fn ingress(namespace: &str, name: &str, class: &str) -> Value {
    json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
           "metadata": {"name": name, "namespace": namespace},
           "spec": {"ingressClassName": class,
                    "defaultBackend": {"service": {"name": "web", "port": {"number": 80}}}}})
}

fn results_of(report: &DynamicObject) -> Vec<(String, String)> {
    report.data["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["rule"].as_str().unwrap().to_owned(),
                r["result"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real API server: make test-cluster with KUBEBUILDER_ASSETS"]
async fn warn_mode_and_garbage_collection_with_the_writer_stopped() {
    let Some(assets) = control_plane::assets() else {
        eprintln!("skipped: KUBEBUILDER_ASSETS is not set; `make test-cluster` runs this");
        return;
    };
    let dir = Scratch::new("policy-reports-writer-gc");
    let plane = ControlPlane::start(&assets, dir.path(), &[]);
    let client = plane.ready().await;
    install_crds(&client).await;
    styrmin_objects(&client, &[("warn1", "trial"), ("enf1", "prod")]).await;
    apply(&client, &ingress("styrmin-warn1", "web", "nginx")).await;
    apply(&client, &ingress("styrmin-enf1", "web", "nginx")).await;
    apply(&client, &ingress("styrmin-enf1", "gone", "nginx")).await;

    let metrics = free_port();
    let writer = Processes(vec![replica(
        dir.path(),
        &plane.kubeconfig,
        "writer",
        metrics,
    )]);
    let warned = eventually("the warn environment's report", async || {
        let report = report_of(&client, "styrmin-warn1", "web").await?;
        results_of(&report)
            .iter()
            .any(|(rule, _)| rule == "not_served")
            .then_some(report)
    })
    .await;
    let enforced = eventually("the enforcing environment's report", async || {
        let report = report_of(&client, "styrmin-enf1", "web").await?;
        results_of(&report)
            .iter()
            .any(|(rule, _)| rule == "not_served")
            .then_some(report)
    })
    .await;
    let gone = eventually("the report of the Ingress to delete", async || {
        report_of(&client, "styrmin-enf1", "gone").await
    })
    .await;

    // Warn mode: every result of the warning environment's Ingress is `warn`, and the
    // summary counts them; the same Ingress in an enforcing environment fails.
    let warn_results = results_of(&warned);
    assert!(
        warn_results.iter().any(|(rule, _)| rule == "wrong_class"),
        "{warn_results:?}"
    );
    assert!(
        warn_results.iter().all(|(_, result)| result == "warn"),
        "an Ingress of an environment in enforcementMode warn: {warn_results:?}\n--- writer ---\n{}",
        log_of(dir.path(), "writer")
    );
    assert_eq!(
        warned.data["summary"]["warn"].as_u64(),
        Some(warn_results.len() as u64),
        "{}",
        warned.data["summary"]
    );
    assert_eq!(warned.data["summary"]["fail"].as_u64().unwrap_or(0), 0);
    let enforced_results = results_of(&enforced);
    assert!(
        enforced_results.iter().all(|(_, result)| result == "fail"),
        "an Ingress of an enforcing environment: {enforced_results:?}"
    );

    // The writer stopped for good (SIGKILL), then the Ingress deleted: only the garbage
    // collector, following the report's ownerReference, can delete the report now.
    assert!(
        gone.metadata
            .owner_references
            .as_ref()
            .is_some_and(|owners| owners
                .iter()
                .any(|o| o.kind == "Ingress" && o.name == "gone")),
        "the report has no ownerReference to its Ingress: {:?}",
        gone.metadata
    );
    drop(writer);
    if !plane.garbage_collector {
        eprintln!(
            "garbage collection not checked: no kube-controller-manager in KUBEBUILDER_ASSETS"
        );
        return;
    }
    let ingresses: Api<Ingress> = Api::namespaced(client.clone(), "styrmin-enf1");
    ingresses
        .delete("gone", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the garbage collector deleting the report", async || {
        let list = open_reports(&client)
            .list(&ListParams::default())
            .await
            .ok()?;
        (!list
            .items
            .iter()
            .any(|r| r.metadata.uid == gone.metadata.uid))
        .then_some(())
    })
    .await;
    // Nothing else went: no writer runs that could have deleted reports.
    assert!(report_of(&client, "styrmin-enf1", "web").await.is_some());
    assert!(report_of(&client, "styrmin-warn1", "web").await.is_some());
}

/// A TCP proxy from a port of loopback to `upstream` that can be paused: while paused it
/// moves no byte either way and keeps what it has read; resumed, it delivers it. A
/// connection whose client gives up while paused is lost with what it held, as in a
/// partition that outlasts the connection.
struct PausableProxy {
    port: u16,
    paused: watch::Sender<bool>,
}

impl PausableProxy {
    async fn start(upstream: String) -> PausableProxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (paused, watching) = watch::channel(false);
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(relay(client, upstream.clone(), watching.clone()));
            }
        });
        PausableProxy { port, paused }
    }

    fn pause(&self) {
        self.paused.send_replace(true);
    }

    fn resume(&self) {
        self.paused.send_replace(false);
    }
}

/// One connection through the proxy.
async fn relay(
    mut client: tokio::net::TcpStream,
    upstream: String,
    mut paused: watch::Receiver<bool>,
) {
    let mut held_up = Vec::new();
    let mut client_done = false;
    // Connect only while not paused; what the client sends meanwhile is held.
    let mut server = loop {
        if !*paused.borrow() {
            match tokio::net::TcpStream::connect(&upstream).await {
                Ok(server) => break server,
                Err(_) => return,
            }
        }
        let mut buffer = [0u8; 16384];
        tokio::select! {
            read = client.read(&mut buffer), if !client_done => match read {
                Ok(0) | Err(_) => return, // gave up while paused: lost
                Ok(n) => held_up.extend_from_slice(&buffer[..n]),
            },
            _ = paused.changed() => {}
        }
    };
    let mut held_down = Vec::new();
    let mut server_done = false;
    let (mut up, mut down) = ([0u8; 16384], [0u8; 16384]);
    loop {
        if !*paused.borrow() {
            if !held_up.is_empty() {
                if server.write_all(&held_up).await.is_err() {
                    return;
                }
                held_up.clear();
            }
            if !held_down.is_empty() {
                if client.write_all(&held_down).await.is_err() {
                    return;
                }
                held_down.clear();
            }
            if client_done || server_done {
                return;
            }
        }
        tokio::select! {
            read = client.read(&mut up), if !client_done => match read {
                Ok(0) | Err(_) if *paused.borrow() => return, // gave up while paused: lost
                Ok(0) | Err(_) => client_done = true,
                Ok(n) => held_up.extend_from_slice(&up[..n]),
            },
            read = server.read(&mut down), if !server_done => match read {
                Ok(0) | Err(_) => server_done = true,
                Ok(n) => held_down.extend_from_slice(&down[..n]),
            },
            _ = paused.changed() => {}
        }
    }
}

/// The API server's audit policy of the partition test: who read and wrote reports and the
/// Lease, nothing else.
const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  resources:
  - group: openreports.io
    resources: [reports]
  - group: coordination.k8s.io
    resources: [leases]
- level: None
";

/// A ServiceAccount `name` in styrmin-system bound to cluster-admin, and a kubeconfig with a
/// token of it for the API server at `url`: the audit log names each replica's requests.
async fn service_account(client: &kube::Client, dir: &Path, name: &str, url: &str) -> PathBuf {
    // The API server creates its default ClusterRoles a moment after it answers.
    let roles: Api<k8s_openapi::api::rbac::v1::ClusterRole> = Api::all(client.clone());
    eventually("the ClusterRole cluster-admin", async || {
        roles.get_opt("cluster-admin").await.ok()?
    })
    .await;
    apply(
        client,
        &json!({"apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": name, "namespace": "styrmin-system"}}),
    )
    .await;
    apply(
        client,
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": name},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
                "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": "styrmin-system"}]}),
    )
    .await;
    let token = control_plane::service_account_token(client, "styrmin-system", name).await;
    let kubeconfig = dir.join(format!("{name}.kubeconfig"));
    std::fs::write(&kubeconfig, control_plane::kubeconfig_text(url, &token)).unwrap();
    kubeconfig
}

/// One request in the API server's audit log.
#[derive(Debug)]
struct Audited {
    user: String,
    verb: String,
    resource: String,
    code: u64,
    received: Timestamp,
}

fn audited(log: &Path) -> Vec<Audited> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|line| {
            let event: Value = serde_json::from_str(line).unwrap();
            Audited {
                user: event["user"]["username"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                verb: event["verb"].as_str().unwrap_or_default().to_owned(),
                resource: event["objectRef"]["resource"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                code: event["responseStatus"]["code"].as_u64().unwrap_or(0),
                received: event["requestReceivedTimestamp"]
                    .as_str()
                    .unwrap()
                    .parse()
                    .unwrap(),
            }
        })
        .collect()
}

const WRITE_VERBS: [&str; 5] = ["create", "update", "patch", "delete", "deletecollection"];

/// Healed: whatever replica-a (`user_a`) held or tried, the API server took no write of it
/// after `fenced`, though it took some before; replica-b holds the Lease and web's report.
async fn assert_fenced(
    client: &kube::Client,
    dir: &Path,
    audit_log: &Path,
    user_a: &str,
    fenced: Timestamp,
) {
    let late: Vec<_> = audited(audit_log)
        .into_iter()
        .filter(|event| {
            event.user == user_a
                && WRITE_VERBS.contains(&event.verb.as_str())
                && (200..300).contains(&event.code)
                && event.received > fenced
        })
        .collect();
    assert!(
        late.is_empty(),
        "replica-a wrote after its renew deadline had passed in the partition: {late:#?}\n--- replica-a ---\n{}",
        log_of(dir, "replica-a")
    );
    assert!(
        audited(audit_log)
            .iter()
            .any(|e| e.user == user_a && e.resource == "reports" && e.verb == "patch"),
        "the audit log shows no report write of replica-a at all: it cannot tell"
    );
    assert_eq!(
        lease_holder(client, "styrmin-system", LEASE_NAME)
            .await
            .as_deref(),
        Some("replica-b")
    );
    assert!(
        report_of(client, "styrmin-p1", "web").await.unwrap().data["results"]
            .to_string()
            .contains("haproxy"),
        "the report is no longer replica-b's"
    );
}

/// A control plane under `dir` whose API server writes every request to its audit log
/// (returned with it), blocking.
fn start_audited(assets: &Path, dir: &Scratch) -> (ControlPlane, PathBuf) {
    let policy = dir.write("audit-policy.yaml", AUDIT_POLICY);
    let audit_log = dir.join("audit.log");
    let plane = ControlPlane::start(
        assets,
        dir.path(),
        &[
            format!("--audit-policy-file={}", policy.display()),
            format!("--audit-log-path={}", audit_log.display()),
            "--audit-log-mode=blocking".to_owned(),
        ],
    );
    (plane, audit_log)
}

/// A rolling update: SIGTERM to the holder (`b`, replica-b), which gives the Lease back;
/// replica-a takes it within a retry period or two, not after the lease duration.
async fn assert_hands_over_on_sigterm(client: &kube::Client, dir: &Path, mut b: Processes) {
    let terminated = Instant::now();
    let status = Command::new("kill")
        .args(["-TERM", &b.0[0].id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    until_lease_held_by(client, "styrmin-system", LEASE_NAME, "replica-a").await;
    let handed_over = terminated.elapsed();
    println!("hand-over after SIGTERM: {handed_over:?} (lease {LEASE:?})");
    assert!(
        handed_over < Duration::from_secs(2),
        "replica-a took {handed_over:?} to take over from a replica stopped with SIGTERM (lease {LEASE:?}): was the Lease released?\n--- replica-b ---\n{}",
        log_of(dir, "replica-b")
    );
    let _ = b.0[0].wait();
    b.0.clear();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real API server: make test-cluster with KUBEBUILDER_ASSETS"]
async fn a_partitioned_holder_stops_writing_and_a_terminated_one_hands_over_at_once() {
    let Some(assets) = control_plane::assets() else {
        eprintln!("skipped: KUBEBUILDER_ASSETS is not set; `make test-cluster` runs this");
        return;
    };
    let dir = Scratch::new("policy-reports-writer-partition");
    let (plane, audit_log) = start_audited(&assets, &dir);
    let client = plane.ready().await;
    install_crds(&client).await;
    styrmin_objects(&client, &[("p1", "prod")]).await;
    // Unserved from the start: past the one-second grace, a not_served finding.
    apply(&client, &ingress("styrmin-p1", "web", "nginx")).await;

    let proxy = PausableProxy::start(plane.url.trim_start_matches("https://").to_owned()).await;
    let through_proxy = service_account(
        &client,
        dir.path(),
        "replica-a",
        &format!("https://127.0.0.1:{}", proxy.port),
    )
    .await;
    let direct = service_account(&client, dir.path(), "replica-b", &plane.url).await;
    let user_a = "system:serviceaccount:styrmin-system:replica-a";

    let (metrics_a, metrics_b) = (free_port(), free_port());
    let _a = Processes(vec![replica(
        dir.path(),
        &through_proxy,
        "replica-a",
        metrics_a,
    )]);
    until_lease_held_by(&client, "styrmin-system", LEASE_NAME, "replica-a").await;
    eventually("web's report with its not_served result", async || {
        let report = report_of(&client, "styrmin-p1", "web").await?;
        results_of(&report)
            .iter()
            .any(|(rule, _)| rule == "not_served")
            .then_some(())
    })
    .await;
    let b = Processes(vec![replica(dir.path(), &direct, "replica-b", metrics_b)]);
    eventually("replica-b following", async || {
        (scrape_value(metrics_b, "styrmin_webhook_controllers_lease_held") == Some(0.0))
            .then_some(())
    })
    .await;
    tokio::time::sleep(LEASE).await;
    assert_eq!(
        lease_holder(&client, "styrmin-system", LEASE_NAME)
            .await
            .as_deref(),
        Some("replica-a")
    );

    // The partition: replica-a reaches nothing, and nothing reaches it.
    // An Ingress whose not_served finding appears only after replica-a's renew deadline
    // has passed in the partition: replica-a has it in its view and would want to write.
    apply(&client, &ingress("styrmin-p1", "late", "traefik")).await;
    eventually("replica-a auditing the late Ingress", async || {
        (scrape_value(metrics_a, "styrmin_webhook_audit_ingresses") == Some(2.0)).then_some(())
    })
    .await;
    proxy.pause();
    let paused = Instant::now();
    let fenced = Timestamp::now() + RENEW_DEADLINE;
    eventually(
        "replica-a no longer counting itself the writer",
        async || {
            (scrape_value(metrics_a, "styrmin_webhook_controllers_lease_held") == Some(0.0))
                .then_some(())
        },
    )
    .await;
    let stopped = paused.elapsed();
    println!(
        "replica-a stopped writing {stopped:?} after the partition (renew deadline {RENEW_DEADLINE:?})"
    );
    assert!(
        stopped <= RENEW_DEADLINE + RETRY_PERIOD * 2,
        "replica-a counted itself the writer {stopped:?} after it was cut off, past the renew deadline {RENEW_DEADLINE:?}\n--- replica-a ---\n{}",
        log_of(dir.path(), "replica-a")
    );
    until_lease_held_by(&client, "styrmin-system", LEASE_NAME, "replica-b").await;
    let took_over = paused.elapsed();
    println!("replica-b took over {took_over:?} after the partition (lease {LEASE:?})");
    assert!(took_over <= LEASE + Duration::from_secs(3), "{took_over:?}");
    // A change that only replica-b can see: the class changes, the report follows.
    apply(&client, &ingress("styrmin-p1", "web", "haproxy")).await;
    eventually("replica-b writing the changed report", async || {
        let report = report_of(&client, "styrmin-p1", "web").await?;
        report.data["results"]
            .to_string()
            .contains("haproxy")
            .then_some(())
    })
    .await;

    eventually("replica-b writing the late Ingress's report", async || {
        report_of(&client, "styrmin-p1", "late").await
    })
    .await;
    assert!(
        paused.elapsed() > RENEW_DEADLINE,
        "the late Ingress's finding appeared before replica-a's renew deadline"
    );

    // Healed: whatever replica-a held or tries now, the API server takes no write of it.
    proxy.resume();
    tokio::time::sleep(LEASE * 2).await;
    assert_fenced(&client, dir.path(), &audit_log, user_a, fenced).await;

    assert_hands_over_on_sigterm(&client, dir.path(), b).await;
}
