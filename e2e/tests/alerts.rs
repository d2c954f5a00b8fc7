//! The webhook's alerts and dashboard against the real tools and the real binary:
//! `promtool check rules` and `promtool test rules` (Prometheus's own, Debian's `prometheus`
//! package, installed by `make tools`) over the PrometheusRule the chart renders — every alert
//! fires for one series and stays quiet for another (`e2e/tests/data/alerts/`) — and every metric an
//! alert or a dashboard panel names is one the `styrmin-webhook` binary exports (read from its
//! `/metrics`, not from a hand-written list): with `--source policy-file`, and for the audit's
//! metrics with `--source kubernetes` against the fake API server and the audit's recorded
//! responses (`webhook/tests/data/apiserver/audit/`), with `--policy-reports=openreports` for
//! the report writer's.
//!
//! promtool missing fails these tests (run `make tools`); they are never skipped.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use styrmin_e2e::webhook::collect_lines;
use styrmin_e2e::{
    HelmHome, Scratch, data, parse_yaml, release_binary, run, run_ok, split_documents, utf8,
    webhook_data, workspace_root,
};
use styrmin_fake_apiserver::FakeApiServer;
use styrmin_test_support::recorded_cluster::answer_every_list;

/// `promtool` on the PATH, or a failure that says how to get it.
fn promtool() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join("promtool"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "promtool is not on the PATH: run `make tools` (scripts/install/install-tools.sh installs \
                 Debian's prometheus package), or install Prometheus's promtool"
            )
        })
}

/// The PrometheusRule of the kustomize component (the chart's, with default thresholds;
/// `e2e/tests/helm_chart.rs` holds it equal to the chart).
fn component_rule() -> Value {
    let path = workspace_root().join("manifests/components/prometheus-rule/prometheusrule.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    split_documents(&text)
        .iter()
        .map(|d| d.value())
        .find(|v| v["kind"] == "PrometheusRule")
        .unwrap_or_else(|| panic!("{}: no PrometheusRule", path.display()))
}

/// The chart's PrometheusRule with `args`, rendered by Helm 4.
fn chart_rule(args: &[&str]) -> Value {
    let home = HelmHome::new("alerts-chart");
    let mut cmd = home.helm("helm4");
    cmd.args(["template", "styrmin-webhook"])
        .arg(workspace_root().join("charts/styrmin-webhook"))
        .args(["--namespace", "styrmin-system"])
        .args(["--set=prometheusRule.enabled=true"])
        .args(["--show-only", "templates/prometheusrule.yaml"])
        .args(args);
    let text = utf8(run_ok(&mut cmd, None).stdout, "helm template output");
    split_documents(&text)
        .iter()
        .map(|d| d.value())
        .find(|v| v["kind"] == "PrometheusRule")
        .expect("a PrometheusRule")
}

/// Every rule of a PrometheusRule.
fn rules(rule: &Value) -> Vec<&Value> {
    rule["spec"]["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|g| g["rules"].as_array().into_iter().flatten())
        .collect()
}

/// The PrometheusRule's `spec` as a Prometheus rules file (JSON is YAML).
fn write_rules_file(rule: &Value, path: &Path) {
    std::fs::write(path, serde_json::to_string_pretty(&rule["spec"]).unwrap()).unwrap();
}

fn promtool_ok(args: &[&str], file: &Path) -> String {
    let output = run(Command::new(promtool()).args(args).arg(file), None);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "promtool {args:?} {}:\n{text}",
        file.display()
    );
    text
}

#[test]
fn promtool_check_rules_accepts_the_rules_with_and_without_a_selector() {
    let scratch = Scratch::new("alerts-check");
    let values = scratch.write(
        "values.yaml",
        "prometheusRule:\n  selector: 'namespace=\"styrmin-system\",job=\"styrmin-webhook\"'\n  \
         additionalAlertLabels: {team: platform}\n  viewStaleSeconds: 120\n",
    );
    let values = format!("--values={}", values.display());
    for (name, rule) in [
        ("component", component_rule()),
        (
            "chart with a selector and extra labels",
            chart_rule(&[&values]),
        ),
    ] {
        let file = scratch.join(&format!("{}.yaml", name.replace(' ', "-")));
        write_rules_file(&rule, &file);
        let text = promtool_ok(&["check", "rules"], &file);
        let count = rules(&rule).len();
        assert!(
            text.contains(&format!("SUCCESS: {count} rules found")),
            "{name}:\n{text}"
        );
    }
    // The selector reaches every styrmin_webhook_ selector.
    let rule = chart_rule(&[r#"--set=prometheusRule.selector=namespace="x""#]);
    for alert in rules(&rule) {
        let expr = alert["expr"].as_str().unwrap();
        let selectors = expr.matches("styrmin_webhook_").count();
        assert_eq!(
            expr.matches(r#"namespace="x""#).count(),
            selectors,
            "{}: {expr}",
            alert["alert"]
        );
    }
}

#[test]
fn promtool_check_rules_refuses_a_broken_rule() {
    // The check above can fail: a broken expression is refused.
    let scratch = Scratch::new("alerts-broken");
    let mut rule = component_rule();
    rule["spec"]["groups"][0]["rules"][0]["expr"] = Value::from("sum(styrmin_webhook_view_ready");
    let file = scratch.join("broken.yaml");
    write_rules_file(&rule, &file);
    let output = run(
        Command::new(promtool()).args(["check", "rules"]).arg(&file),
        None,
    );
    assert!(!output.status.success());
}

/// Every alert has a case that fires and a case that stays quiet in the promtool tests.
#[test]
fn promtool_test_rules_every_alert_fires_and_stays_quiet() {
    let rule = component_rule();
    let alerts: BTreeSet<String> = rules(&rule)
        .iter()
        .filter_map(|r| r["alert"].as_str().map(str::to_owned))
        .collect();
    assert!(alerts.len() >= 7, "{alerts:?}");
    let test_file = data("alerts/styrmin-webhook.test.yaml");
    let tests = parse_yaml(&std::fs::read_to_string(&test_file).unwrap());
    let (mut fires, mut quiet) = (BTreeSet::new(), BTreeSet::new());
    for case in tests["tests"].as_array().unwrap() {
        for check in case["alert_rule_test"].as_array().into_iter().flatten() {
            let name = check["alertname"].as_str().unwrap().to_owned();
            assert!(
                alerts.contains(&name),
                "{name} is not an alert of the rules"
            );
            if check["exp_alerts"]
                .as_array()
                .is_some_and(|a| !a.is_empty())
            {
                fires.insert(name);
            } else {
                quiet.insert(name);
            }
        }
    }
    assert_eq!(fires, alerts, "alerts without a firing case");
    assert_eq!(quiet, alerts, "alerts without a quiet case");

    // The rules next to the test file, descriptions left out: they are plain text (Helm fills
    // in the thresholds; no Prometheus template), while the summaries' templates are compared.
    let scratch = Scratch::new("alerts-test");
    let mut without_descriptions = rule.clone();
    for group in without_descriptions["spec"]["groups"]
        .as_array_mut()
        .unwrap()
    {
        for alert in group["rules"].as_array_mut().unwrap() {
            let annotations = alert["annotations"].as_object_mut().unwrap();
            let description = annotations.remove("description").unwrap();
            let description = description.as_str().unwrap();
            assert!(!description.contains("{{"), "{description}");
            assert!(
                description.len() > 100,
                "a runbook, not a line: {description}"
            );
        }
    }
    write_rules_file(&without_descriptions, &scratch.join("rules.yaml"));
    let copy = scratch.join("styrmin-webhook.test.yaml");
    std::fs::copy(&test_file, &copy).unwrap();
    let text = promtool_ok(&["test", "rules"], &copy);
    assert!(text.contains("SUCCESS"), "{text}");

    // And the tests can fail: with one alert's expression always true, its quiet cases break.
    let mut always = without_descriptions.clone();
    always["spec"]["groups"][0]["rules"][2]["expr"] = Value::from("vector(1)");
    write_rules_file(&always, &scratch.join("rules.yaml"));
    let output = run(
        Command::new(promtool()).args(["test", "rules"]).arg(&copy),
        None,
    );
    assert!(
        !output.status.success(),
        "a rule that always fires passed the quiet cases"
    );
}

// ---- metric names against the binary ------------------------------------------------------------

/// The webhook binary with a policy file, killed when dropped.
struct Webhook {
    child: Child,
    _scratch: Scratch,
}

impl Drop for Webhook {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Where the started webhook listens (from its "listening" log lines) and its CA.
struct Listening {
    https: SocketAddr,
    metrics: SocketAddr,
    ca: PathBuf,
}

/// Starts `styrmin-webhook --source policy-file` on loopback.
fn start_webhook() -> (Webhook, Listening) {
    start_webhook_with(|cmd| {
        cmd.args(["--source", "policy-file", "--policy-file"])
            .arg(webhook_data("admission/policy.yaml"));
    })
}

/// Starts `styrmin-webhook` on loopback with the view source `source` sets up.
fn start_webhook_with(source: impl FnOnce(&mut Command)) -> (Webhook, Listening) {
    let scratch = Scratch::new("alerts-webhook");
    let config = scratch.join("webhook-ca-bundle.yaml");
    std::fs::copy(
        workspace_root().join("manifests/overlays/self-signed/webhook-ca-bundle.yaml"),
        &config,
    )
    .unwrap();
    run_ok(
        Command::new(release_binary("styrmin-certs"))
            .args([
                "--service",
                "styrmin-webhook",
                "--namespace",
                "styrmin-system",
            ])
            .arg("--out-dir")
            .arg(scratch.join("certs"))
            .arg("--webhook-config")
            .arg(&config),
        None,
    );
    let mut cmd = Command::new(release_binary("styrmin-webhook"));
    cmd.args(["--listen", "127.0.0.1:0"])
        .args(["--metrics-listen", "127.0.0.1:0", "--log-format", "json"])
        .arg("--tls-cert")
        .arg(scratch.join("certs/tls.crt"))
        .arg("--tls-key")
        .arg(scratch.join("certs/tls.key"));
    source(&mut cmd);
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = collect_lines(child.stderr.take().unwrap(), |line| line);
    let ca = scratch.join("certs/ca.crt");
    let webhook = Webhook {
        child,
        _scratch: scratch,
    };
    let address = |listener: &str| -> Option<SocketAddr> {
        lines.lock().unwrap().iter().find_map(|line| {
            let value: Value = serde_json::from_str(line).ok()?;
            let fields = &value["fields"];
            (fields["message"] == "listening" && fields["listener"] == listener)
                .then(|| fields["address"].as_str()?.parse().ok())
                .flatten()
        })
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let (Some(https), Some(metrics)) = (address("https"), address("metrics")) {
            return (webhook, Listening { https, metrics, ca });
        }
        assert!(
            Instant::now() < deadline,
            "the webhook did not log its metrics address: {:?}",
            lines.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// POSTs `body` to /mutate over TLS, verifying the serving certificate against `ca` for the
/// Service's name as the API server does; returns the HTTP status line.
fn admit(listening: &Listening, body: &[u8]) -> String {
    use rustls_pki_types::pem::PemObject as _;
    use rustls_pki_types::{CertificateDer, ServerName};

    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(&listening.ca).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let name = ServerName::try_from("styrmin-webhook.styrmin-system.svc").unwrap();
    let connection = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let tcp = TcpStream::connect(listening.https).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut tls = rustls::StreamOwned::new(connection, tcp);
    write!(
        tls,
        "POST /mutate HTTP/1.1\r\nHost: styrmin-webhook.styrmin-system.svc\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .unwrap();
    tls.write_all(body).unwrap();
    tls.flush().unwrap();
    let mut response = Vec::new();
    // The server may close without a TLS close_notify after the response: what was read counts.
    let _ = tls.read_to_end(&mut response);
    let response = String::from_utf8_lossy(&response);
    response.lines().next().unwrap_or("").to_owned()
}

/// GET /metrics over plain HTTP.
fn scrape(addr: SocketAddr) -> String {
    http_request(addr, "GET /metrics HTTP/1.1")
}

fn http_request(addr: SocketAddr, request_line: &str) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "{request_line}\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    body.to_owned()
}

/// Every series name the exposition can carry: the sample names it shows, and for each
/// `# TYPE` the names the OpenMetrics text format gives that type's samples (a counter family
/// with no labels set yet shows no sample, but its `_total` is what Prometheus stores).
fn exported_names(exposition: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in exposition.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut parts = rest.split_whitespace();
            let (Some(name), Some(kind)) = (parts.next(), parts.next()) else {
                continue;
            };
            let suffixes: &[&str] = match kind {
                "counter" => &["_total", "_created"],
                "histogram" => &["_bucket", "_sum", "_count", "_created"],
                "summary" => &["", "_sum", "_count", "_created"],
                "info" => &["_info"],
                _ => &[""],
            };
            names.extend(suffixes.iter().map(|s| format!("{name}{s}")));
        } else if !line.starts_with('#') && !line.is_empty() {
            let end = line.find(['{', ' ']).unwrap_or(line.len());
            names.insert(line[..end].to_owned());
        }
    }
    names
}

/// The metric names a PromQL expression selects: identifiers followed by `{` or `[`, and every
/// `styrmin_` identifier.
fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let bytes: Vec<char> = expr.chars().collect();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            let start = i;
            while i < bytes.len()
                && (bytes[i].is_ascii_alphanumeric() || bytes[i] == '_' || bytes[i] == ':')
            {
                i += 1;
            }
            let word: String = bytes[start..i].iter().collect();
            // Label matchers ({outcome="denied"}) are words inside braces: skip to the end.
            let next = bytes[i..].iter().find(|c| !c.is_whitespace()).copied();
            let selected = word.starts_with("styrmin_") || next == Some('{') || next == Some('[');
            if selected && !(next == Some('=') || next == Some('!')) {
                names.insert(word);
            }
            if next == Some('{') {
                while i < bytes.len() && bytes[i] != '}' {
                    i += 1;
                }
            }
        } else if c == '"' {
            i += 1;
            while i < bytes.len() && bytes[i] != '"' {
                i += 1;
            }
            i += 1;
        } else {
            i += 1;
        }
    }
    names
}

#[test]
fn metric_names_are_found_in_expressions() {
    let names = metric_names(
        r#"sum(rate(styrmin_webhook_a_total{outcome="denied",x=~"y{"}[5m])) / up{job="j"} > 0 and absent(styrmin_webhook_b)"#,
    );
    let expected: BTreeSet<String> = ["styrmin_webhook_a_total", "up", "styrmin_webhook_b"]
        .into_iter()
        .map(str::to_owned)
        .collect();
    assert_eq!(names, expected);
}

/// Every query of the alerts and the dashboard, with where it is.
fn queries() -> Vec<(String, String)> {
    let mut queries = Vec::new();
    for alert in rules(&chart_rule(&[])) {
        queries.push((
            format!("alert {}", alert["alert"].as_str().unwrap_or("?")),
            alert["expr"].as_str().unwrap().to_owned(),
        ));
    }
    let dashboard = dashboard();
    for variable in dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        if variable["type"] == "query" {
            queries.push((
                format!("variable {:?}", variable["name"].as_str().unwrap_or("?")),
                variable["definition"].as_str().unwrap_or("").to_owned(),
            ));
        }
    }
    let mut panels: Vec<&Value> = dashboard["panels"].as_array().unwrap().iter().collect();
    while let Some(panel) = panels.pop() {
        panels.extend(panel["panels"].as_array().into_iter().flatten());
        for target in panel["targets"].as_array().into_iter().flatten() {
            queries.push((
                format!("panel {:?}", panel["title"].as_str().unwrap_or("?")),
                target["expr"].as_str().unwrap_or("").to_owned(),
            ));
        }
    }
    queries
}

fn dashboard() -> Value {
    let path =
        workspace_root().join("charts/styrmin-webhook/files/dashboards/styrmin-webhook.json");
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn alerts_and_dashboard_name_only_metrics_the_webhook_exports() {
    let (webhook, listening) = start_webhook();
    // One admission and one unreadable request, so that the labelled families have samples
    // (a family shows in the exposition only once a label set has been counted).
    let review = std::fs::read(webhook_data(
        "admission/crafted__ingress-v1-update__with-old-object.json",
    ))
    .unwrap();
    let status = admit(&listening, &review);
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    let status = admit(&listening, b"not an AdmissionReview");
    assert!(status.starts_with("HTTP/1.1 400"), "{status}");
    let exposition = scrape(listening.metrics);
    drop(webhook);
    let mut exported = exported_names(&exposition);
    // The families the alerts rely on are there (a broken scrape would pass nothing).
    for name in [
        "styrmin_webhook_view_ready",
        "styrmin_webhook_admission_requests_total",
        "styrmin_webhook_admission_duration_seconds_bucket",
    ] {
        assert!(exported.contains(name), "{name} not in:\n{exposition}");
    }
    // The audit runs only with --source kubernetes, and prometheus-client leaves a labelled
    // family without samples out of the exposition entirely, `# HELP` and `# TYPE` included
    // (styrmin_webhook_audit_nonconforming_ingresses is absent above). So the audit's names
    // are read from a webhook that has completed an audit, against the fake API server, and
    // the report writer's from the same webhook once it has written its PolicyReports.
    let audit_exposition = scrape_after_an_audit();
    let audited = exported_names(&audit_exposition);
    for name in [
        "styrmin_webhook_audit_nonconforming_ingresses",
        "styrmin_webhook_audit_last_complete_timestamp_seconds",
        "styrmin_webhook_controllers_stuck_deleting",
        "styrmin_webhook_stale_service_aliases",
        "styrmin_webhook_policy_report_api",
        "styrmin_webhook_controllers_lease_held",
        "styrmin_webhook_controllers_running",
        "styrmin_webhook_policy_reports_failing",
        "styrmin_webhook_policy_report_writes_total",
    ] {
        assert!(audited.contains(name), "{name} not in:\n{audit_exposition}");
    }
    exported.extend(audited);
    let queries = queries();
    let (unknown, used) = unknown_metrics(&exported, &queries);
    assert!(
        unknown.is_empty(),
        "metrics the webhook does not export: {unknown:#?}\nexported: {exported:#?}"
    );
    assert!(used.len() >= 8, "{used:?}");
    // The check can fail: a misspelt name in a panel is caught.
    let mut typo = queries.clone();
    typo.push((
        "panel \"typo\"".into(),
        "sum(styrmin_webhook_view_readyy)".into(),
    ));
    assert_eq!(
        unknown_metrics(&exported, &typo).0,
        ["panel \"typo\": styrmin_webhook_view_readyy"]
    );
}

/// `/metrics` of `styrmin-webhook --source kubernetes --policy-reports=openreports` once its
/// first audit is complete and it holds the Lease and has written the reports: the fake API
/// server answers its lists with the recorded responses of `webhook/tests/data/apiserver/audit/`
/// (an Ingress of each reason, a controller stuck DELETING, stale aliases; `e2e/tests/audit.rs`
/// checks the findings), holds its watches open, serves the Open Reports API and stores the
/// reports and the Lease (the report writer's labelled families have samples only then).
fn scrape_after_an_audit() -> String {
    let api = FakeApiServer::scripted();
    answer_every_list(&api, "audit");
    api.serve_object(
        "/apis/openreports.io/v1alpha1",
        &serde_json::json!({"kind": "APIResourceList", "apiVersion": "v1",
            "groupVersion": "openreports.io/v1alpha1",
            "resources": [{"name": "reports", "singularName": "report", "namespaced": true,
                           "kind": "Report",
                           "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]}]}),
    );
    api.accept_writes("/apis/openreports.io/v1alpha1/");
    api.accept_writes("/apis/coordination.k8s.io/v1/");
    let scratch = Scratch::new("alerts-kubeconfig");
    let kubeconfig = scratch.join("kubeconfig");
    api.write_kubeconfig(&kubeconfig, None);
    let (webhook, listening) = start_webhook_with(|cmd| {
        cmd.args(["--source", "kubernetes", "--policy-reports", "openreports"])
            .args(["--leader-election-namespace", "styrmin-system"])
            .args(["--leader-election-identity", "alerts-test"])
            .env("KUBECONFIG", &kubeconfig);
    });
    let sample = |exposition: &str, series: &str| -> Option<f64> {
        exposition.lines().find_map(|line| {
            line.strip_prefix(series)?
                .strip_prefix(' ')?
                .trim()
                .parse::<f64>()
                .ok()
        })
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let exposition = scrape(listening.metrics);
        let audited = sample(
            &exposition,
            "styrmin_webhook_audit_last_complete_timestamp_seconds",
        )
        .is_some_and(|v| v > 0.0);
        let written = sample(&exposition, "styrmin_webhook_controllers_lease_held") == Some(1.0)
            && sample(
                &exposition,
                r#"styrmin_webhook_policy_report_writes_total{operation="apply",outcome="ok"}"#,
            )
            .is_some_and(|v| v > 0.0);
        if audited && written {
            drop(webhook);
            return exposition;
        }
        assert!(
            Instant::now() < deadline,
            "no complete audit and no reports written within 30 s:\n{exposition}\nrequests: {:#?}",
            api.requests()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The metric names of `queries` that are not `exported` (as `place: name`), and every name used.
fn unknown_metrics(
    exported: &BTreeSet<String>,
    queries: &[(String, String)],
) -> (Vec<String>, BTreeSet<String>) {
    let mut unknown = Vec::new();
    let mut used = BTreeSet::new();
    for (place, expr) in queries {
        assert!(!expr.is_empty(), "{place}: no query");
        for name in metric_names(expr) {
            if !exported.contains(&name) {
                unknown.push(format!("{place}: {name}"));
            }
            used.insert(name);
        }
    }
    (unknown, used)
}

/// The dashboard: every panel has a query and a unique id, uses the datasource variable, and the
/// chart's optional ConfigMap carries it unchanged with the Grafana sidecar's label.
#[test]
fn the_dashboard_is_complete_and_in_the_charts_configmap() {
    let dashboard = dashboard();
    let mut ids = BTreeSet::new();
    let panels = dashboard["panels"].as_array().unwrap();
    for panel in panels {
        assert!(
            ids.insert(panel["id"].as_i64().unwrap()),
            "duplicate id {}",
            panel["id"]
        );
        if panel["type"] == "row" {
            continue;
        }
        let title = panel["title"].as_str().unwrap();
        assert!(
            panel["targets"].as_array().is_some_and(|t| !t.is_empty()),
            "{title}"
        );
        assert_eq!(panel["datasource"]["uid"], "${datasource}", "{title}");
    }
    let titles: Vec<&str> = panels.iter().filter_map(|p| p["title"].as_str()).collect();
    for wanted in [
        "Requests by outcome",
        "Decision time against the API server's timeout",
        "View age",
        "Ready admission replicas",
        "Serving certificate expires in",
        "Denials",
        "Non-conforming Ingresses by reason",
        "Audit age",
        "Controllers stuck DELETING",
        "Stale service aliases",
        "Controllers replicas running",
        "Lease held",
    ] {
        assert!(titles.contains(&wanted), "no panel {wanted:?}: {titles:?}");
    }

    let home = HelmHome::new("alerts-dashboard");
    let mut cmd = home.helm("helm4");
    cmd.args(["template", "styrmin-webhook"])
        .arg(workspace_root().join("charts/styrmin-webhook"))
        .args([
            "--namespace",
            "styrmin-system",
            "--set=dashboard.enabled=true",
        ])
        .args(["--set=dashboard.namespace=grafana"])
        .args(["--show-only", "templates/dashboard.yaml"]);
    let text = utf8(run_ok(&mut cmd, None).stdout, "helm template output");
    let config_map = split_documents(&text)
        .iter()
        .map(|d| d.value())
        .find(|v| v["kind"] == "ConfigMap")
        .expect("the dashboard ConfigMap");
    assert_eq!(config_map["metadata"]["labels"]["grafana_dashboard"], "1");
    assert_eq!(config_map["metadata"]["namespace"], "grafana");
    let carried: Value =
        serde_json::from_str(config_map["data"]["styrmin-webhook.json"].as_str().unwrap()).unwrap();
    assert_eq!(carried, dashboard);
}
