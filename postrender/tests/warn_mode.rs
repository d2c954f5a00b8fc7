//! `enforcement_mode: warn` through the binary: the stream passes byte for byte, what
//! `enforce` would change goes to stderr and `--report`, and `--strict` turns it into a
//! failing CI gate.

mod support;

use support::{INGRESS, config_file, run, text};

/// A real rendered chart with six Ingresses (parent chart, subcharts and List items).
const UMBRELLA: &str = include_str!("data/rendered/umbrella-mix.helm4-postrenderer-stdin.yaml");

const WARN_HAPROXY: &str = "cluster: {ingress_class: nginx, enforcement_mode: warn}\nenvironment: {ingress_class: haproxy}\n";

#[test]
fn warn_passes_the_stream_byte_for_byte_and_reports_what_enforce_would_change() {
    let config = config_file(WARN_HAPROXY);
    let path = config.path().to_str().expect("path");
    let report = tempfile::NamedTempFile::new().expect("temp");
    let report_path = report.path().to_str().expect("path");
    let out = run(&["--config", path, "--report", report_path], &[], UMBRELLA);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        out.stdout,
        UMBRELLA.as_bytes(),
        "warn must not change a byte"
    );

    // The same config in enforce changes Ingresses: warn reports exactly those.
    let enforce =
        config_file("cluster: {ingress_class: nginx}\nenvironment: {ingress_class: haproxy}\n");
    let enforced = run(
        &["--config", enforce.path().to_str().expect("path")],
        &[],
        UMBRELLA,
    );
    assert!(enforced.status.success(), "{}", text(&enforced.stderr));
    assert_ne!(enforced.stdout, UMBRELLA.as_bytes());

    let stderr = text(&out.stderr);
    let report = std::fs::read_to_string(report.path()).expect("report");
    let would: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("would change: "))
        .collect();
    assert!(!would.is_empty(), "{stderr}");
    for line in &would {
        assert!(
            line.ends_with(", decided by environment.ingress_class"),
            "{line}"
        );
        assert!(
            report.contains(line),
            "{line} missing in the report:\n{report}"
        );
    }
    assert!(
        would
            .iter()
            .any(|l| l.contains(r#"would set spec.ingressClassName "haproxy" (now "#)),
        "{stderr}"
    );
    assert!(
        report.contains("enforcement_mode warn: ") && report.contains(" would change, "),
        "{report}"
    );
    assert!(!report.contains("changed: "), "{report}");
}

#[test]
fn warn_with_strict_fails_on_a_would_be_change_and_writes_nothing() {
    let config = config_file(WARN_HAPROXY);
    let path = config.path().to_str().expect("path");
    let out = run(&["--config", path, "--strict"], &[], INGRESS);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(
            r#"would change: document 1 (web/templates/ingress.yaml): Ingress web: would set spec.ingressClassName "haproxy" (now "nginx"), decided by environment.ingress_class"#
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("--strict: enforcement_mode warn (decided by cluster.enforcement_mode)"),
        "{stderr}"
    );

    // An Ingress that already conforms passes the gate.
    let conforming = INGRESS
        .replace(
            "  ingressClassName: nginx\n",
            "  ingressClassName: haproxy\n",
        )
        .replace(
            "  name: web\n",
            "  name: web\n  annotations:\n    kubernetes.io/ingress.class: haproxy\n",
        );
    let out = run(&["--config", path, "--strict"], &[], &conforming);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), conforming);
}

#[test]
fn the_command_line_and_the_environment_set_the_deployment_level_mode() {
    let config = config_file("environment: {ingress_class: haproxy, enforcement_mode: enforce}\n");
    let path = config.path().to_str().expect("path");
    for out in [
        run(
            &["--config", path, "--enforcement-mode", "warn"],
            &[],
            INGRESS,
        ),
        run(
            &["--config", path],
            &[("STYRMIN_ENFORCEMENT_MODE", "warn")],
            INGRESS,
        ),
    ] {
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert_eq!(text(&out.stdout), INGRESS);
    }
    // The environment's `enforce` alone: the class is set.
    let out = run(&["--config", path], &[], INGRESS);
    assert!(text(&out.stdout).contains("ingressClassName: \"haproxy\""));
    let out = run(&["--enforcement-mode", "audit"], &[], INGRESS);
    assert_eq!(out.status.code(), Some(2), "clap's usage error");
    assert!(
        text(&out.stderr).contains("`enforce` or `warn`"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn warn_has_no_flux_post_renderer_and_the_krm_function_refuses_it() {
    let out = run(&["flux", "--enforcement-mode", "warn"], &[], "");
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert!(
        text(&out.stderr).contains("there is none to print in warn mode"),
        "{}",
        text(&out.stderr)
    );
    let list = "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\n";
    let out = run(&["krm", "--enforcement-mode", "warn"], &[], list);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("not supported by the KRM function"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn explain_says_which_mode_applies_and_which_level_set_it() {
    let config = config_file(WARN_HAPROXY);
    let path = config.path().to_str().expect("path");
    let out = run(&["explain", "--config", path], &[], "");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    for needle in [
        "enforcement_mode: warn (decided by cluster.enforcement_mode): the stream passes unchanged",
        "cluster:     ingress_class \"nginx\", dedicated_ingress absent, enforcement_mode warn",
    ] {
        assert!(stdout.contains(needle), "{needle} missing in\n{stdout}");
    }
    let out = run(&["explain"], &[], "");
    assert!(
        text(&out.stdout).contains("enforcement_mode: enforce (decided by the default)\n"),
        "{}",
        text(&out.stdout)
    );
}

/// The kustomize exec plugin filters a stream as Helm's post-renderer does, so its config's
/// `warn` passes the stream byte for byte too (the KRM function, which edits items, refuses it).
#[test]
fn the_exec_plugin_in_warn_passes_the_stream_byte_for_byte() {
    let spec: String = WARN_HAPROXY.lines().map(|l| format!("  {l}\n")).collect();
    let plugin = config_file(&format!(
        "apiVersion: styrmin.io/v1alpha1\nkind: StyrminPostRender\nmetadata:\n  name: styrmin\nspec:\n{spec}"
    ));
    let path = plugin.path().to_str().expect("path");
    let out = run(&["kustomize-plugin", path], &[], UMBRELLA);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        out.stdout,
        UMBRELLA.as_bytes(),
        "warn must not change a byte"
    );
    assert!(
        text(&out.stderr).contains("would change: "),
        "{}",
        text(&out.stderr)
    );

    let enforce: String = spec.replace(", enforcement_mode: warn", "");
    let plugin = config_file(&format!(
        "apiVersion: styrmin.io/v1alpha1\nkind: StyrminPostRender\nmetadata:\n  name: styrmin\nspec:\n{enforce}"
    ));
    let out = run(
        &["kustomize-plugin", plugin.path().to_str().expect("path")],
        &[],
        UMBRELLA,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_ne!(
        out.stdout,
        UMBRELLA.as_bytes(),
        "enforce edits the Ingresses"
    );
}
