//! `make bench-scale`: the audit and its PolicyReports at cluster scale, against a real etcd
//! and kube-apiserver from `$KUBEBUILDER_ASSETS` (docs/benchmarks-scale.md).
//!
//! It creates Ingresses over Styrmin namespaces, all without an address and half with a class
//! the levels do not give (so each has a `not_served` finding, and half also `wrong_class`),
//! waits past the not-served grace, then runs `styrmin-webhook controllers` and measures what
//! the API server and etcd see: writes to converge, writes in a steady window (nothing changes
//! in the cluster), requests by verb, the reports' stored size, and the controllers' resident
//! memory with reports off and on; and admission's (`serve --source kubernetes` alone) with no
//! Ingress and with every Ingress, which must be the same within 2 MiB.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, anyhow, bail};
use clap::Parser;
use futures::StreamExt as _;
use kube::api::ListParams;
use serde_json::{Value, json};
use styrmin_e2e::control_plane::{
    self, ControlPlane, Processes, apply, install_crds, open_reports, resource_of,
};
use styrmin_e2e::webhook::Certs;
use styrmin_e2e::{Scratch, free_port, release_binary, workspace_root};
use styrmin_webhook_bench::fleet::{PlannedIngress, create_ingresses};
use styrmin_webhook_bench::measure::{
    Memory, Requests, apiserver_requests, difference, http, memory_of, metric, series,
};

#[derive(Parser, Debug)]
#[command(about = "Styrmin's audit and PolicyReports at cluster scale, on a real API server")]
struct Args {
    /// Ingresses to create (all unserved, half with the wrong class).
    #[arg(long, env = "BENCH_SCALE_INGRESSES", default_value_t = 10_000)]
    ingresses: usize,
    /// Styrmin namespaces (`styrmin-bNNN`) the Ingresses are spread over.
    #[arg(long, env = "BENCH_SCALE_NAMESPACES", default_value_t = 500)]
    namespaces: usize,
    /// Seconds of steady state measured after the reports converge.
    #[arg(long, env = "BENCH_SCALE_STEADY_SECS", default_value_t = 120)]
    steady_secs: u64,
    /// The writer's `--policy-reports-qps`.
    #[arg(long, env = "BENCH_SCALE_QPS", default_value_t = 200.0)]
    qps: f64,
    /// The webhook's `--audit-not-served-grace-secs`; the writer starts once every Ingress
    /// is past it.
    #[arg(long, env = "BENCH_SCALE_GRACE_SECS", default_value_t = 10)]
    grace_secs: u64,
    /// Seconds to wait for the reports to converge before giving up.
    #[arg(
        long,
        env = "BENCH_SCALE_CONVERGE_TIMEOUT_SECS",
        default_value_t = 1800
    )]
    converge_timeout_secs: u64,
    /// Parallel requests when creating the Ingresses.
    #[arg(long, default_value_t = 64)]
    parallel: usize,
    /// Where the Markdown table goes (default `target/bench-scale/<ingresses>.md`).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Fail (exit 1) unless the writes are what the writer promises: one per report to
    /// converge, none in the steady window (`make test-cluster` runs it so).
    #[arg(long, env = "BENCH_SCALE_CHECK")]
    check: bool,
}

const NAMESPACE: &str = "styrmin-system";

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let args = Args::parse();
    let Some(assets) = control_plane::assets() else {
        println!(
            "bench-scale skipped: KUBEBUILDER_ASSETS is not set (a directory with etcd, \
             kube-apiserver and kube-controller-manager, as setup-envtest installs them)"
        );
        return Ok(());
    };
    let scratch = Scratch::new("bench-scale");
    let dir = scratch.path();
    // Compaction only when the benchmark asks for it, so that sizes are read at known points.
    let plane = ControlPlane::start(&assets, dir, &["--etcd-compaction-interval=0".to_owned()]);
    let client = plane.ready().await;
    let etcd = Etcd(plane.etcd_url.trim_start_matches("http://").to_owned());
    install_crds(&client).await;
    base_objects(&client, args.namespaces).await;
    let certs = Certs::make(dir);
    let bench = Bench {
        args: &args,
        dir,
        certs: &certs,
        plane: &plane,
    };
    let mut results = Results::default();

    let empty = etcd.compacted_in_use()?;
    results
        .admission
        .push((0, bench.admission_memory(0).await?));
    for reports in [false, true] {
        let memory = bench.idle_memory(reports, 0).await?;
        results
            .memory
            .push((run_label(0, reports, "first audit"), memory));
    }

    let created = Instant::now();
    create_ingresses(&client, args.ingresses, args.parallel, |i| PlannedIngress {
        namespace: namespace(i % args.namespaces),
        // The odd ones have class `nginx` where the levels give `traefik`.
        class: if i % 2 == 1 { "nginx" } else { "traefik" },
        host: format!("web-{i}.example.test"),
    })
    .await?;
    results.create_secs = created.elapsed().as_secs_f64();
    println!(
        "created {} Ingresses in {:.1} s",
        args.ingresses, results.create_secs
    );
    let grace_left = Duration::from_secs(args.grace_secs + 2).saturating_sub(created.elapsed());
    tokio::time::sleep(grace_left).await;
    let with_ingresses = etcd.compacted_in_use()?;
    results.ingresses_in_etcd = with_ingresses.saturating_sub(empty);

    results.admission.push((
        args.ingresses,
        bench.admission_memory(args.ingresses).await?,
    ));
    let memory = bench.idle_memory(false, args.ingresses).await?;
    results
        .memory
        .push((run_label(args.ingresses, false, "first audit"), memory));
    let before = etcd.metric("etcd_mvcc_db_total_size_in_bytes")?;
    bench
        .converge_and_steady(&client, args.ingresses, &mut results)
        .await?;
    results.etcd_growth = (etcd.metric("etcd_mvcc_db_total_size_in_bytes")? - before) as u64;
    results.reports_in_etcd = etcd.compacted_in_use()?.saturating_sub(with_ingresses);
    results.reports_json = reports_json_size(&client).await?;

    let table = results.markdown(&args);
    println!("{table}");
    let out = args.out.clone().unwrap_or_else(|| {
        workspace_root()
            .join("target/bench-scale")
            .join(format!("{}.md", args.ingresses))
    });
    if let Some(parent) = out.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(&out, table).with_context(|| format!("writing {}", out.display()))?;
    let sample = out.with_extension("report.json");
    std::fs::write(
        &sample,
        serde_json::to_string_pretty(&results.reports_json.sample)?,
    )
    .with_context(|| format!("writing {}", sample.display()))?;
    println!("written to {}", out.display());
    if args.check {
        results.check(args.ingresses)?;
        println!("check passed: one write per report to converge, none in the steady window");
    }
    Ok(())
}

/// The cluster's Styrmin objects: one StyrminCluster (class `traefik`), one environment, a
/// deployment in each namespace, and IngressClasses for both classes the Ingresses use (so
/// the findings are `wrong_class` and `not_served`, not `unknown_class`).
async fn base_objects(client: &kube::Client, namespaces: usize) {
    let mut objects = vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}),
        json!({"apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminCluster", "metadata": {"name": "default"},
               "spec": {"ingressClass": "traefik"}}),
        json!({"apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminEnvironment", "metadata": {"name": "prod"},
               "spec": {}}),
    ];
    for (class, controller) in [
        ("traefik", "traefik.io/ingress-controller"),
        ("nginx", "k8s.io/ingress-nginx"),
    ] {
        objects.push(
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
                            "metadata": {"name": class}, "spec": {"controller": controller}}),
        );
    }
    for n in 0..namespaces {
        let name = namespace(n);
        objects.push(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}));
        objects.push(
            json!({"apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminDeployment",
                            "metadata": {"name": name, "namespace": name},
                            "spec": {"environmentId": "prod", "role": "application"}}),
        );
    }
    // Namespaces before what lives in them; the rest in parallel.
    let (first, rest): (Vec<_>, Vec<_>) = objects
        .into_iter()
        .partition(|o| o["kind"] == "Namespace" || resource_of(o).group == "styrmin.io");
    let (namespaced, cluster): (Vec<_>, Vec<_>) = first
        .into_iter()
        .partition(|o| o["kind"] == "StyrminDeployment");
    for batch in [cluster, namespaced, rest] {
        futures::stream::iter(batch.iter().map(|o| apply(client, o)))
            .buffer_unordered(32)
            .collect::<Vec<()>>()
            .await;
    }
}

/// The controllers' command: the release binary, or with `BENCH_SCALE_PROFILER` (say
/// `heaptrack -o target/bench-scale/controllers`) that profiler running it. Profiled runs
/// are for reading where the memory goes: the RSS the table shows is then the profiler's.
fn controllers_command() -> Command {
    let binary = release_binary("styrmin-webhook");
    match std::env::var("BENCH_SCALE_PROFILER") {
        Ok(profiler) if !profiler.trim().is_empty() => {
            let mut words = profiler.split_whitespace();
            let mut command = Command::new(words.next().unwrap_or("env"));
            command.args(words).arg(binary);
            command
        }
        _ => Command::new(binary),
    }
}

fn namespace(n: usize) -> String {
    format!("styrmin-b{n:03}")
}

/// Everything one run needs to start a webhook.
struct Bench<'a> {
    args: &'a Args,
    dir: &'a Path,
    certs: &'a Certs,
    plane: &'a ControlPlane,
}

/// A running `styrmin-webhook serve`, killed when dropped.
struct Webhook {
    process: Processes,
    metrics: u16,
    started: Instant,
}

impl Bench<'_> {
    /// `styrmin-webhook controllers`: the audit, and with `reports` the writer.
    fn controllers(&self, reports: bool, label: &str) -> Result<Webhook> {
        let metrics = free_port();
        let log = std::fs::File::create(self.dir.join(format!("controllers-{label}.log")))?;
        let child: Child = controllers_command()
            .arg("controllers")
            .envs(styrmin_e2e::CONTROLLERS_ENV)
            .args([
                "--policy-reports",
                if reports { "openreports" } else { "off" },
            ])
            .arg(format!("--policy-reports-qps={}", self.args.qps))
            .args(["--leader-election-namespace", NAMESPACE])
            .args(["--leader-election-identity", "bench-scale"])
            .arg(format!(
                "--audit-not-served-grace-secs={}",
                self.args.grace_secs
            ))
            .arg(format!("--metrics-listen=127.0.0.1:{metrics}"))
            .env("KUBECONFIG", &self.plane.kubeconfig)
            .env("NO_COLOR", "1")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .context("starting styrmin-webhook controllers")?;
        Ok(Webhook {
            process: Processes(vec![child]),
            metrics,
            started: Instant::now(),
        })
    }

    /// `styrmin-webhook serve --source kubernetes`: admission alone.
    fn admission(&self, label: &str) -> Result<Webhook> {
        let metrics = free_port();
        let log = std::fs::File::create(self.dir.join(format!("admission-{label}.log")))?;
        let child: Child = Command::new(release_binary("styrmin-webhook"))
            .arg("serve")
            .args(["--source", "kubernetes"])
            .arg(format!("--listen=127.0.0.1:{}", free_port()))
            .arg(format!("--metrics-listen=127.0.0.1:{metrics}"))
            .arg("--tls-cert")
            .arg(self.certs.dir.join("tls.crt"))
            .arg("--tls-key")
            .arg(self.certs.dir.join("tls.key"))
            .env("KUBECONFIG", &self.plane.kubeconfig)
            .env("NO_COLOR", "1")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .context("starting styrmin-webhook serve")?;
        Ok(Webhook {
            process: Processes(vec![child]),
            metrics,
            started: Instant::now(),
        })
    }

    /// Admission's memory once its view is loaded and it has had five seconds more, with
    /// `ingresses` Ingresses in the cluster (which it must not read).
    async fn admission_memory(&self, ingresses: usize) -> Result<Memory> {
        let label = format!("admission-{ingresses}");
        let admission = self.admission(&label)?;
        admission
            .wait_for("its view", Duration::from_secs(120), |m| {
                metric(m, "styrmin_webhook_view_ready") == Some(1.0)
            })
            .await?;
        tokio::time::sleep(Duration::from_secs(5)).await;
        let memory = admission.memory()?;
        println!("{label}: {memory:?}");
        Ok(memory)
    }

    /// The webhook's memory once its first audit of `ingresses` Ingresses is complete (and,
    /// with reports, its Lease held) and it has had five seconds more.
    async fn idle_memory(&self, reports: bool, ingresses: usize) -> Result<Memory> {
        let label = format!("{}-{ingresses}", if reports { "on" } else { "off" });
        let webhook = self.controllers(reports, &label)?;
        webhook
            .wait_for("its first complete audit", Duration::from_secs(600), |m| {
                metric(m, "styrmin_webhook_audit_last_complete_timestamp_seconds")
                    .is_some_and(|t| t > 0.0)
                    && metric(m, "styrmin_webhook_audit_ingresses") == Some(ingresses as f64)
                    && (!reports
                        || metric(m, "styrmin_webhook_controllers_lease_held") == Some(1.0))
            })
            .await?;
        tokio::time::sleep(Duration::from_secs(5)).await;
        let memory = webhook.memory()?;
        println!("{label}: {memory:?}");
        Ok(memory)
    }

    /// Reports on: time and writes until every Ingress has its report, then a steady window.
    async fn converge_and_steady(
        &self,
        client: &kube::Client,
        expected: usize,
        results: &mut Results,
    ) -> Result<()> {
        let api = open_reports(client);
        let apiserver_start = apiserver_requests(client).await?;
        let webhook = self.controllers(true, &format!("on-{expected}"))?;
        let deadline = Duration::from_secs(self.args.converge_timeout_secs);
        let mut polls = 0u64;
        loop {
            polls += 1;
            let page = api.list_metadata(&ListParams::default().limit(1)).await?;
            let stored =
                page.items.len() as u64 + page.metadata.remaining_item_count.unwrap_or(0) as u64;
            if stored >= expected as u64 {
                break;
            }
            if webhook.started.elapsed() > deadline {
                bail!("{stored} of {expected} reports after {deadline:?}");
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        results.converge_secs = webhook.started.elapsed().as_secs_f64();
        let apiserver_converged = apiserver_requests(client).await?;
        results.converge_writes = webhook_writes(&webhook.scrape()?);
        results.converge_requests = difference(&apiserver_converged, &apiserver_start);
        // The benchmark's own polls of the report count are not the writer's.
        *results
            .converge_requests
            .entry(("reports".to_owned(), "LIST".to_owned(), "200".to_owned()))
            .or_default() -= polls as f64;
        results.memory.push((
            run_label(expected, true, "every report written"),
            webhook.memory()?,
        ));
        println!(
            "converged in {:.1} s, {} writes",
            results.converge_secs, results.converge_writes
        );

        let steady_start = webhook.scrape()?;
        tokio::time::sleep(Duration::from_secs(self.args.steady_secs)).await;
        let apiserver_end = apiserver_requests(client).await?;
        results.steady_writes = webhook_writes(&webhook.scrape()?) - webhook_writes(&steady_start);
        results.steady_requests = difference(&apiserver_end, &apiserver_converged);
        results.memory.push((
            run_label(expected, true, "after the steady window"),
            webhook.memory()?,
        ));
        println!("steady: {} writes", results.steady_writes);
        drop(webhook);
        Ok(())
    }
}

impl Webhook {
    fn pid(&self) -> u32 {
        self.process.0[0].id()
    }

    fn scrape(&self) -> Result<String> {
        http(
            &format!("127.0.0.1:{}", self.metrics),
            "GET",
            "/metrics",
            "",
        )
    }

    async fn wait_for(
        &self,
        what: &str,
        timeout: Duration,
        done: impl Fn(&str) -> bool,
    ) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(text) = self.scrape()
                && done(&text)
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "the webhook (pid {}) timed out waiting for {what}",
                    self.pid()
                );
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// VmRSS and VmHWM of the webhook.
    fn memory(&self) -> Result<Memory> {
        memory_of(self.pid())
    }
}

/// The bytes of every stored report's JSON, read in pages of 500.
async fn reports_json_size(client: &kube::Client) -> Result<ReportsJson> {
    let api = open_reports(client);
    let mut sizes = ReportsJson::default();
    let mut params = ListParams::default().limit(500);
    loop {
        let page = api.list(&params).await?;
        for report in &page.items {
            sizes.count += 1;
            sizes.findings += report.data["results"].as_array().map_or(0, Vec::len);
            sizes.bytes += serde_json::to_vec(report)?.len() as u64;
            sizes.managed_fields_bytes +=
                serde_json::to_vec(&report.metadata.managed_fields)?.len() as u64;
            if sizes.sample.is_null() {
                sizes.sample = serde_json::to_value(report)?;
            }
        }
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => return Ok(sizes),
        }
    }
}

/// The reports as the API server returns them.
#[derive(Default)]
struct ReportsJson {
    count: usize,
    bytes: u64,
    /// Of `bytes`, the server-side apply's `metadata.managedFields`.
    managed_fields_bytes: u64,
    /// Results (findings) in every report.
    findings: usize,
    /// The first report listed, whole.
    sample: Value,
}

/// `styrmin_webhook_policy_report_writes_total`, all operations and outcomes.
fn webhook_writes(text: &str) -> u64 {
    series(text, "styrmin_webhook_policy_report_writes_total")
        .map(|(_, value)| value)
        .sum::<f64>() as u64
}

/// etcd through its HTTP endpoints: `/metrics` and the v3 JSON gateway.
struct Etcd(String);

impl Etcd {
    fn metric(&self, name: &str) -> Result<f64> {
        metric(&http(&self.0, "GET", "/metrics", "")?, name)
            .ok_or_else(|| anyhow!("etcd reports no {name}"))
    }

    /// Compacts every revision older than the current one, defragments, and reads the
    /// database size in use.
    fn compacted_in_use(&self) -> Result<u64> {
        let answer: Value = serde_json::from_str(&http(
            &self.0,
            "POST",
            "/v3/kv/range",
            r#"{"key":"Lw==","limit":1}"#,
        )?)?;
        let revision = answer["header"]["revision"]
            .as_str()
            .ok_or_else(|| anyhow!("etcd's range answer has no revision: {answer}"))?;
        http(
            &self.0,
            "POST",
            "/v3/kv/compaction",
            &format!(r#"{{"revision":"{revision}","physical":true}}"#),
        )?;
        http(&self.0, "POST", "/v3/maintenance/defragment", "{}")?;
        Ok(self.metric("etcd_mvcc_db_total_size_in_use_in_bytes")? as u64)
    }
}

#[derive(Default)]
struct Results {
    create_secs: f64,
    ingresses_in_etcd: u64,
    /// (what was running, memory).
    memory: Vec<(String, Memory)>,
    converge_secs: f64,
    converge_writes: u64,
    converge_requests: Requests,
    steady_writes: u64,
    steady_requests: Requests,
    etcd_growth: u64,
    reports_in_etcd: u64,
    reports_json: ReportsJson,
    /// Admission's memory (`serve` alone) with no Ingress and with every Ingress.
    admission: Vec<(usize, Memory)>,
}

/// How much admission's RSS may grow between no Ingress and every Ingress: it reads none.
const ADMISSION_GROWTH_KIB: u64 = 2 * 1024;

/// The stored size of a report, at most (2.1 KiB).
const REPORT_BYTES_GOAL: f64 = 2.1 * 1024.0;

fn run_label(ingresses: usize, reports: bool, when: &str) -> String {
    let reports = if reports { "on" } else { "off" };
    format!("{ingresses} Ingresses, reports {reports}, {when}")
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

fn kib_as_mib(kib: u64) -> String {
    mib(kib * 1024)
}

impl Results {
    /// The writer's promises at this scale: every Ingress reported, at most one write per
    /// report to converge, no write while nothing changes.
    fn check(&self, reports: usize) -> Result<()> {
        let mut broken = Vec::new();
        if self.reports_json.count != reports {
            broken.push(format!(
                "{} reports stored, {reports} expected",
                self.reports_json.count
            ));
        }
        if let [(_, empty), (_, full)] = self.admission.as_slice()
            && full.rss_kib > empty.rss_kib + ADMISSION_GROWTH_KIB
        {
            broken.push(format!(
                "admission's RSS grew from {} KiB to {} KiB with the Ingresses",
                empty.rss_kib, full.rss_kib
            ));
        }
        let each = self.reports_json.bytes as f64 / self.reports_json.count.max(1) as f64;
        if each > REPORT_BYTES_GOAL {
            broken.push(format!(
                "{each:.0} bytes a report, over {REPORT_BYTES_GOAL}"
            ));
        }
        let converge = writes(&self.converge_requests);
        if converge > reports as u64 {
            broken.push(format!(
                "{converge} writes to converge to {reports} reports"
            ));
        }
        let steady = writes(&self.steady_requests);
        if self.steady_writes > 0 || steady > 0 {
            broken.push(format!(
                "{steady} writes in the steady window ({} by the webhook's count)",
                self.steady_writes
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
            "Ingresses (namespaces)",
            format!("{} ({})", args.ingresses, args.namespaces),
        );
        row("created in", format!("{:.1} s", self.create_secs));
        row("Ingresses in etcd (compacted)", mib(self.ingresses_in_etcd));
        row(
            "converged in (qps)",
            format!("{:.1} s ({})", self.converge_secs, args.qps),
        );
        row(
            "writes to converge (webhook / API server)",
            format!(
                "{} / {}",
                self.converge_writes,
                writes(&self.converge_requests)
            ),
        );
        row(
            &format!(
                "writes in {} s of steady state (webhook / API server)",
                args.steady_secs
            ),
            format!("{} / {}", self.steady_writes, writes(&self.steady_requests)),
        );
        for (ingresses, memory) in &self.admission {
            row(
                &format!("admission RSS (peak), {ingresses} Ingresses, view loaded"),
                format!(
                    "{} ({})",
                    kib_as_mib(memory.rss_kib),
                    kib_as_mib(memory.peak_kib)
                ),
            );
        }
        for (what, memory) in &self.memory {
            row(
                &format!("controllers RSS (peak), {what}"),
                format!(
                    "{} ({})",
                    kib_as_mib(memory.rss_kib),
                    kib_as_mib(memory.peak_kib)
                ),
            );
        }
        let ReportsJson {
            count,
            bytes,
            managed_fields_bytes,
            findings,
            ..
        } = self.reports_json;
        row(
            "bytes per report / per finding",
            format!(
                "{:.0} / {:.0} ({findings} findings)",
                bytes as f64 / count.max(1) as f64,
                bytes as f64 / findings.max(1) as f64
            ),
        );
        row(
            "reports' JSON (each)",
            format!(
                "{} ({} reports, {:.2} KiB each)",
                mib(bytes),
                count,
                bytes as f64 / 1024.0 / count.max(1) as f64
            ),
        );
        row(
            "of which `metadata.managedFields` (each)",
            format!(
                "{} ({:.2} KiB each)",
                mib(managed_fields_bytes),
                managed_fields_bytes as f64 / 1024.0 / count.max(1) as f64
            ),
        );
        row(
            "reports in etcd (compacted, defragmented)",
            mib(self.reports_in_etcd),
        );
        row(
            "etcd growth while the writer ran (not compacted)",
            mib(self.etcd_growth),
        );
        out.push('\n');
        out.push_str("| API server requests (response code) | to converge | steady window |\n|---|---|---|\n");
        let keys: std::collections::BTreeSet<_> = self
            .converge_requests
            .keys()
            .chain(self.steady_requests.keys())
            // Watches are long-running (their count is reconnections, most of them
            // kube-controller-manager's); calls without a resource are the metrics scrapes.
            .filter(|(resource, verb, _)| !resource.is_empty() && verb != "WATCH")
            .collect();
        for key in keys {
            let get = |map: &Requests| map.get(key).copied().unwrap_or(0.0);
            out.push_str(&format!(
                "| {} {} ({}) | {} | {} |\n",
                key.1,
                key.0,
                key.2,
                get(&self.converge_requests),
                get(&self.steady_requests)
            ));
        }
        out
    }
}

/// Write verbs on reports, as the API server counted them.
fn writes(requests: &Requests) -> u64 {
    requests
        .iter()
        .filter(|((resource, verb, _), _)| {
            resource == "reports"
                && ["APPLY", "PATCH", "POST", "PUT", "DELETE"].contains(&verb.as_str())
        })
        .map(|(_, value)| value)
        .sum::<f64>() as u64
}
