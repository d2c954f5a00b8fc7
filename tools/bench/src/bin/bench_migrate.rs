//! `make bench-scale`, the migration: a StyrminMigration carried out by `styrmin-webhook
//! controllers --migrations` (with `serve --source kubernetes` apart, as admission) on a real
//! etcd and kube-apiserver from `$KUBEBUILDER_ASSETS` (docs/benchmarks-scale.md).
//!
//! Every Ingress starts on class `nginx` (the cluster's class, both class fields as admission
//! writes them) and served by the `stand-in-ingress-controller` process; one replica is the
//! API server's mutating admission webhook, another runs the controllers; a migration of one step (the StyrminCluster to
//! `haproxy`) at the default pace and gates moves them all. It measures the time to `Done`,
//! the executor's writes (the API server's audit log, each Ingress's own), the API server's
//! requests by verb, and the controllers' resident memory while it runs (and admission's).

use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, anyhow, bail};
use clap::Parser;
use futures::StreamExt as _;
use k8s_openapi::api::networking::v1::Ingress;
use kube::api::{Api, DynamicObject, ListParams};
use serde_json::{Value, json};
use styrmin_e2e::admission::{
    admission, audit_log_args, controllers, register, serving_pki, updates,
};
use styrmin_e2e::control_plane::{
    self, ControlPlane, Processes, apply, install_crds, resource_of, until_lease_held_by,
};
use styrmin_e2e::{Scratch, free_port, release_binary, workspace_root};
use styrmin_webhook_bench::fleet::{PlannedIngress, create_ingresses};
use styrmin_webhook_bench::measure::{Memory, Requests, apiserver_requests, difference, memory_of};

#[derive(Parser, Debug)]
#[command(about = "A StyrminMigration of every Ingress, on a real API server")]
struct Args {
    /// Ingresses to create and move.
    #[arg(long, env = "BENCH_SCALE_INGRESSES", default_value_t = 10_000)]
    ingresses: usize,
    /// Styrmin namespaces (`styrmin-mNNN`) the Ingresses are spread over.
    #[arg(long, env = "BENCH_SCALE_NAMESPACES", default_value_t = 500)]
    namespaces: usize,
    /// The probe gate (an HTTP request per host through the stand-in's address) besides the
    /// served gate.
    #[arg(long, env = "BENCH_MIGRATE_PROBE", default_value_t = true, action = clap::ArgAction::Set)]
    probe: bool,
    /// Seconds to wait for the migration to end (default: three times its writes at the
    /// default pace, and ten minutes more).
    #[arg(long, env = "BENCH_MIGRATE_TIMEOUT_SECS")]
    timeout_secs: Option<u64>,
    /// Parallel requests when creating the Ingresses.
    #[arg(long, default_value_t = 64)]
    parallel: usize,
    /// Where the Markdown table goes (default `target/bench-scale/migrate-<ingresses>.md`).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Fail (exit 1) unless the migration is `Done`, every Ingress is on `haproxy` with its
    /// address, and the executor wrote each Ingress once.
    #[arg(long, env = "BENCH_SCALE_CHECK")]
    check: bool,
}

const OLD: &str = "nginx";
const NEW: &str = "haproxy";
const OLD_IP: &str = "127.0.0.41";
const NEW_IP: &str = "127.0.0.42";
const ENVIRONMENTS: [&str; 3] = ["dev", "staging", "prod"];
const SYSTEM: &str = "styrmin-system";
const IDENTITY: &str = "bench-migrate";
const MIGRATION: &str = "leave-nginx";
/// The default pace (`Pace` of the CRD): Ingresses written a second.
const PACE: u64 = 50;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let args = Args::parse();
    let Some(assets) = control_plane::assets() else {
        println!(
            "bench-migrate skipped: KUBEBUILDER_ASSETS is not set (a directory with etcd, \
             kube-apiserver and kube-controller-manager, as setup-envtest installs them)"
        );
        return Ok(());
    };
    let scratch = Scratch::new("bench-migrate");
    let dir = scratch.path();
    let (audit_args, audit_log) = audit_log_args(dir);
    let plane = ControlPlane::start(&assets, dir, &audit_args);
    let client = plane.ready().await;
    install_crds(&client).await;
    fleet(&client, args.namespaces).await;
    let mut results = Results::default();
    let created = Instant::now();
    create_ingresses(&client, args.ingresses, args.parallel, |i| {
        let namespace = namespace(i % args.namespaces);
        PlannedIngress {
            host: format!("web-{i}.{namespace}.test"),
            namespace,
            class: OLD,
        }
    })
    .await?;
    results.create_secs = created.elapsed().as_secs_f64();
    println!(
        "created {} Ingresses in {:.1} s",
        args.ingresses, results.create_secs
    );
    let (_stand_in, port) = stand_in(dir, &plane.kubeconfig)?;
    let started = Instant::now();
    until_served(&client, OLD, OLD_IP, args.ingresses).await?;
    results.served_old_secs = started.elapsed().as_secs_f64();
    println!(
        "every Ingress served by {OLD} in {:.1} s",
        results.served_old_secs
    );

    let tls = serving_pki(dir);
    let listen = free_port();
    // Admission and the controllers apart, as the chart runs them: the memory measured is
    // the controllers' (the executor's), admission's is read at the end.
    let webhook = Processes(vec![
        controllers(dir, &plane.kubeconfig, IDENTITY),
        admission(dir, &plane.kubeconfig, IDENTITY, listen, &tls),
    ]);
    register(&client, &[listen], &tls.2).await;
    until_lease_held_by(&client, SYSTEM, "styrmin-webhook-controllers", IDENTITY).await;
    // Its view and first audit of every Ingress, before the migration reads more.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let pid = webhook.0[0].id();
    let admission_pid = webhook.0[1].id();
    results.memory_idle = memory_of(pid)?;
    let apiserver_pid = plane.processes.0[1].id();
    let cpu_start = (cpu_secs(pid)?, cpu_secs(apiserver_pid)?);

    let requests_start = apiserver_requests(&client).await?;
    let timeout = Duration::from_secs(
        args.timeout_secs
            .unwrap_or(3 * args.ingresses as u64 / PACE + 600),
    );
    start_migration(&client, args.probe.then_some(port)).await;
    watch_migration(&client, pid, timeout, &mut results).await?;
    results.requests = difference(&apiserver_requests(&client).await?, &requests_start);
    results.cpu_webhook = cpu_secs(pid)? - cpu_start.0;
    results.cpu_apiserver = cpu_secs(apiserver_pid)? - cpu_start.1;
    results.memory_end = memory_of(pid)?;
    results.admission_end = memory_of(admission_pid)?;
    results.finish(&client, &audit_log).await?;
    drop(webhook);

    let table = results.markdown(&args);
    println!("{table}");
    let out = args.out.clone().unwrap_or_else(|| {
        workspace_root()
            .join("target/bench-scale")
            .join(format!("migrate-{}.md", args.ingresses))
    });
    if let Some(parent) = out.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(&out, table).with_context(|| format!("writing {}", out.display()))?;
    println!("written to {}", out.display());
    if args.check {
        results.check(args.ingresses)?;
        println!("check passed: Done, every Ingress on {NEW} with its address, each written once");
    }
    Ok(())
}

fn namespace(n: usize) -> String {
    format!("styrmin-m{n:03}")
}

/// The levels (the cluster's class `nginx`, three environments without a class of their
/// own), the IngressClasses, and 500 namespaces each with its deployment.
async fn fleet(client: &kube::Client, namespaces: usize) {
    let mut objects = vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM}}),
        json!({"apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminCluster", "metadata": {"name": "default"},
               "spec": {"ingressClass": OLD}}),
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass", "metadata": {"name": OLD},
               "spec": {"controller": "k8s.io/ingress-nginx"}}),
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass", "metadata": {"name": NEW},
               "spec": {"controller": "haproxy.org/ingress-controller"}}),
    ];
    for environment in ENVIRONMENTS {
        objects.push(
            json!({"apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminEnvironment",
                            "metadata": {"name": environment}, "spec": {}}),
        );
    }
    for n in 0..namespaces {
        let name = namespace(n);
        objects.push(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}));
        objects.push(
            json!({"apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminDeployment",
                   "metadata": {"name": name, "namespace": name},
                   "spec": {"environmentId": ENVIRONMENTS[n % ENVIRONMENTS.len()], "role": "application"}}),
        );
    }
    // Namespaces and the cluster's objects before what lives in the namespaces.
    let (namespaced, cluster): (Vec<_>, Vec<_>) = objects
        .into_iter()
        .partition(|o| o["kind"] == "StyrminDeployment");
    for batch in [cluster, namespaced] {
        futures::stream::iter(batch.iter().map(|o| apply(client, o)))
            .buffer_unordered(32)
            .collect::<Vec<()>>()
            .await;
    }
}

/// The `stand-in-ingress-controller` process for `nginx` and `haproxy`, and its HTTP port.
fn stand_in(dir: &Path, kubeconfig: &Path) -> Result<(Processes, u16)> {
    let mut child = Command::new(release_binary("stand-in-ingress-controller"))
        .args(["--class", &format!("{OLD}={OLD_IP}")])
        .args(["--class", &format!("{NEW}={NEW_IP}")])
        .args(["--port", "0"])
        .env("KUBECONFIG", kubeconfig)
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(dir.join("stand-in.log"))?)
        .spawn()
        .context("starting stand-in-ingress-controller")?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| anyhow!("the stand-in's stdout"))?;
    let processes = Processes(vec![child]);
    let mut line = String::new();
    std::io::BufReader::new(stdout).read_line(&mut line)?;
    let port = line
        .trim()
        .strip_prefix("ready port=")
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| anyhow!("the stand-in said {line:?}, not `ready port=PORT`"))?;
    Ok((processes, port))
}

/// Every Ingress of the cluster, read in pages of 500.
async fn all_ingresses(client: &kube::Client) -> Result<Vec<Ingress>> {
    let api: Api<Ingress> = Api::all(client.clone());
    let mut params = ListParams::default().limit(500);
    let mut all = Vec::new();
    loop {
        let page = api.list(&params).await?;
        all.extend(page.items);
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => return Ok(all),
        }
    }
}

/// The Ingresses of the benchmark's namespaces that have `class` in both fields and exactly
/// the address `ip`.
fn count_served(ingresses: &[Ingress], class: &str, ip: &str) -> usize {
    ingresses
        .iter()
        .filter(|i| {
            i.metadata
                .namespace
                .as_deref()
                .is_some_and(|n| n.starts_with("styrmin-m"))
        })
        .filter(|i| {
            let spec = i
                .spec
                .as_ref()
                .and_then(|s| s.ingress_class_name.as_deref());
            let annotation = i
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get("kubernetes.io/ingress.class"))
                .map(String::as_str);
            let addresses: Vec<&str> = i
                .status
                .as_ref()
                .and_then(|s| s.load_balancer.as_ref())
                .and_then(|lb| lb.ingress.as_ref())
                .into_iter()
                .flatten()
                .filter_map(|a| a.ip.as_deref())
                .collect();
            spec == Some(class) && annotation == Some(class) && addresses == [ip]
        })
        .count()
}

/// Waits (at most ten minutes) until `count` Ingresses have `class` and the address `ip`.
async fn until_served(client: &kube::Client, class: &str, ip: &str, count: usize) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let served = count_served(&all_ingresses(client).await?, class, ip);
        if served >= count {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("{served} of {count} Ingresses served by {class} after ten minutes");
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// The migration of one step, the StyrminCluster to `haproxy`, at the default pace and
/// gates, with the probe on the stand-in's `port` when given.
async fn start_migration(client: &kube::Client, probe: Option<u16>) {
    let mut spec = json!({
        "steps": [{"name": "cluster", "changes": [
            {"apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminCluster",
             "metadata": {"name": "default"}, "spec": {"ingressClass": NEW}}]}],
    });
    if let Some(port) = probe {
        spec["gates"] = json!({"probe": {"port": port, "expectedStatus": [200]}});
    }
    apply(
        client,
        &json!({"apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminMigration",
                "metadata": {"name": MIGRATION}, "spec": spec}),
    )
    .await;
}

/// Polls the migration's status every second until it ends (or `timeout`), sampling the
/// webhook's memory.
async fn watch_migration(
    client: &kube::Client,
    pid: u32,
    timeout: Duration,
    results: &mut Results,
) -> Result<()> {
    let api: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &resource_of(&json!({"apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminMigration"})),
    );
    let started = Instant::now();
    let mut shown = 0;
    loop {
        let memory = memory_of(pid)?;
        results.rss_max_kib = results.rss_max_kib.max(memory.rss_kib);
        let status = api
            .get(MIGRATION)
            .await
            .ok()
            .and_then(|m| m.data.get("status").cloned())
            .unwrap_or(Value::Null);
        let elapsed = started.elapsed().as_secs_f64();
        let moved = status["moved"].as_u64().unwrap_or(0);
        let step = status["steps"][0]["phase"].as_str().unwrap_or("");
        if matches!(step, "Moving" | "Verifying" | "Done") && results.levels_set_secs == 0.0 {
            results.levels_set_secs = elapsed;
        }
        if elapsed as u64 / 30 > shown {
            shown = elapsed as u64 / 30;
            println!(
                "{elapsed:.0} s: {} moved, {} served, RSS {} KiB",
                moved, status["served"], memory.rss_kib
            );
        }
        let phase = status["phase"].as_str().unwrap_or("").to_owned();
        if matches!(phase.as_str(), "Done" | "Failed" | "RolledBack") {
            results.done_secs = elapsed;
            results.status = status;
            return Ok(());
        }
        if started.elapsed() > timeout {
            results.done_secs = elapsed;
            results.status = status;
            println!("the migration did not end in {timeout:?}");
            return Ok(());
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// User and system CPU seconds of process `pid` (`/proc/PID/stat`, at 100 ticks a second).
fn cpu_secs(pid: u32) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The fields after the command's closing parenthesis; utime and stime are the 14th and
    // 15th of the whole line.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .ok_or_else(|| anyhow!("/proc/{pid}/stat: {stat}"))?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |n: usize| -> Result<f64> {
        Ok(fields
            .get(n)
            .ok_or_else(|| anyhow!("/proc/{pid}/stat: {stat}"))?
            .parse::<f64>()?)
    };
    Ok((ticks(11)? + ticks(12)?) / 100.0)
}

#[derive(Default)]
struct Results {
    create_secs: f64,
    served_old_secs: f64,
    memory_idle: Memory,
    /// The largest VmRSS sampled (every second) while the migration ran.
    rss_max_kib: u64,
    memory_end: Memory,
    /// Admission's, after the migration.
    admission_end: Memory,
    /// From the migration's creation to its levels set (pre-flight, canary gate).
    levels_set_secs: f64,
    done_secs: f64,
    status: Value,
    requests: Requests,
    cpu_webhook: f64,
    cpu_apiserver: f64,
    /// Ingresses on `haproxy` with its address at the end.
    on_new: usize,
    /// The executor's writes (updates in the audit log): Ingresses written, writes, the
    /// Ingresses written more than once.
    written: usize,
    writes: usize,
    written_twice: Vec<String>,
}

impl Results {
    async fn finish(&mut self, client: &kube::Client, audit_log: &Path) -> Result<()> {
        self.on_new = count_served(&all_ingresses(client).await?, NEW, NEW_IP);
        let updates = updates(audit_log);
        self.written = updates.len();
        self.writes = updates.values().sum();
        self.written_twice = updates
            .iter()
            .filter(|(_, n)| **n > 1)
            .map(|(key, n)| format!("{key} ×{n}"))
            .collect();
        Ok(())
    }

    fn check(&self, ingresses: usize) -> Result<()> {
        let mut broken = Vec::new();
        if self.status["phase"] != "Done" {
            broken.push(format!(
                "the migration is {} after {:.0} s: {:#}",
                self.status["phase"], self.done_secs, self.status
            ));
        }
        if self.on_new != ingresses {
            broken.push(format!(
                "{} of {ingresses} Ingresses on {NEW} with {NEW_IP}",
                self.on_new
            ));
        }
        if !self.written_twice.is_empty() {
            broken.push(format!(
                "{} Ingresses written more than once: {}",
                self.written_twice.len(),
                self.written_twice
                    .iter()
                    .take(10)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if broken.is_empty() {
            Ok(())
        } else {
            bail!("check failed: {}", broken.join("; "))
        }
    }

    fn markdown(&self, args: &Args) -> String {
        let mut out = String::new();
        let mut row = |what: &str, value: String| out.push_str(&format!("| {what} | {value} |\n"));
        row(
            "Ingresses (namespaces, environments)",
            format!(
                "{} ({}, {})",
                args.ingresses,
                args.namespaces,
                ENVIRONMENTS.len()
            ),
        );
        row(
            "gates",
            if args.probe {
                "canary, served, probe (defaults)".to_owned()
            } else {
                "canary, served (defaults)".to_owned()
            },
        );
        row("created in", format!("{:.1} s", self.create_secs));
        row(
            &format!("served by {OLD} (stand-in) in"),
            format!("{:.1} s", self.served_old_secs),
        );
        row(
            "phase (waves)",
            format!(
                "{} ({})",
                self.status["phase"], self.status["steps"][0]["waves"]
            ),
        );
        row("created to Done", format!("{:.1} s", self.done_secs));
        row(
            "created to the levels set (pre-flight, canary gate)",
            format!("{:.1} s", self.levels_set_secs),
        );
        let moving = self.done_secs - self.levels_set_secs;
        let moved = self.status["moved"].as_u64().unwrap_or(0);
        row(
            "moving (Ingresses a second)",
            format!("{moving:.1} s ({:.1})", moved as f64 / moving.max(1.0)),
        );
        row(
            "moved / served / failed",
            format!(
                "{} / {} / {}",
                self.status["moved"], self.status["served"], self.status["failed"]
            ),
        );
        row(
            &format!("on {NEW} with its address at the end"),
            self.on_new.to_string(),
        );
        row(
            "executor's writes (audit log: Ingresses, writes, written more than once)",
            format!(
                "{} / {} / {}",
                self.written,
                self.writes,
                self.written_twice.len()
            ),
        );
        row(
            "stand-in's status writes (PATCH ingresses)",
            format!("{}", requests_of(&self.requests, "ingresses", "PATCH")),
        );
        row(
            "CPU, webhook / kube-apiserver",
            format!("{:.1} s / {:.1} s", self.cpu_webhook, self.cpu_apiserver),
        );
        let mib = |kib: u64| format!("{:.1} MiB", kib as f64 / 1024.0);
        row(
            "controllers RSS before the migration",
            mib(self.memory_idle.rss_kib),
        );
        row(
            "controllers RSS, largest sampled while it ran / after",
            format!(
                "{} / {}",
                mib(self.rss_max_kib),
                mib(self.memory_end.rss_kib)
            ),
        );
        row(
            "controllers peak RSS (VmHWM)",
            mib(self.memory_end.peak_kib),
        );
        row(
            "admission RSS after / peak",
            format!(
                "{} / {}",
                mib(self.admission_end.rss_kib),
                mib(self.admission_end.peak_kib)
            ),
        );
        out.push_str(
            "\n| API server requests (response code) | while the migration ran |\n|---|---|\n",
        );
        for ((resource, verb, code), n) in &self.requests {
            // Watches are long-running (their count is reconnections); calls without a
            // resource are the metrics scrapes.
            if !resource.is_empty() && verb != "WATCH" {
                out.push_str(&format!("| {verb} {resource} ({code}) | {n} |\n"));
            }
        }
        out
    }
}

fn requests_of(requests: &Requests, resource: &str, verb: &str) -> u64 {
    requests
        .iter()
        .filter(|((r, v, _), _)| r == resource && v == verb)
        .map(|(_, n)| n)
        .sum::<f64>() as u64
}
