//! The binary as Helm and users run it: exit codes, stdout, stderr, report file, env vars.

mod support;

use support::{INGRESS, config_file, run, text};

const BARE: &str = "---\n# Source: web/templates/bare.yaml\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: bare\nspec:\n  rules: []\n";

#[test]
fn no_config_gives_the_cluster_default_traefik() {
    let out = run(&[], &[], INGRESS);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("ingressClassName: \"traefik\""), "{stdout}");
    assert!(
        stdout.contains("kubernetes.io/ingress.class: \"traefik\""),
        "{stdout}"
    );
}

#[test]
fn config_file_by_flag_and_by_environment_variable() {
    let config = config_file("environment:\n  ingress_class: haproxy\n");
    let path = config.path().to_str().expect("path");
    for out in [
        run(&["--config", path], &[], INGRESS),
        run(&[], &[("STYRMIN_CONFIG", path)], INGRESS),
    ] {
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert!(text(&out.stdout).contains("ingressClassName: \"haproxy\""));
    }
}

#[test]
fn shortcut_flags() {
    let out = run(&["--dedicated-ingress"], &[], INGRESS);
    let stdout = text(&out.stdout);
    assert!(!stdout.contains("ingressClassName"), "{stdout}");
    assert!(stdout.contains("kubernetes.io/ingress.class: \"traefik\""));
    let out = run(&["--ingress-class", "contour"], &[], INGRESS);
    assert!(text(&out.stdout).contains("ingressClassName: \"contour\""));
    let out = run(&[], &[("STYRMIN_INGRESS_CLASS", "")], BARE);
    assert_eq!(
        text(&out.stdout),
        BARE,
        "empty class leaves the chart alone (R5)"
    );
    assert!(text(&out.stderr).contains(
        "warning: document 1 (web/templates/bare.yaml): Ingress bare: Ingress has no class"
    ));
}

#[test]
fn bad_config_names_the_key_and_writes_nothing() {
    let config = config_file("environment:\n  dedicated_ingress: true\n");
    let out = run(
        &["--config", config.path().to_str().expect("path")],
        &[],
        INGRESS,
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert_eq!(
        text(&out.stderr),
        format!(
            "styrmin-postrender: error: config file {}, line 2 column 3: environment.dedicated_ingress: expected an object of the dedicated controller's values (`{{}}` for the defaults), or null, found the boolean true\n",
            config.path().display()
        )
    );

    let out = run(&["--config", "/nonexistent/styrmin.yaml"], &[], INGRESS);
    assert_eq!(out.status.code(), Some(1));
    // The cause once, not repeated by the error chain.
    assert_eq!(
        text(&out.stderr),
        "styrmin-postrender: error: cannot read config file /nonexistent/styrmin.yaml: No such file or directory (os error 2)\n"
    );
}

#[test]
fn a_report_that_cannot_be_written_fails_before_stdout() {
    // A directory where the report file should be: nothing on stdout, exit 1, one line.
    let dir = tempfile::tempdir().expect("temp dir");
    let report_arg = format!("--report={}", dir.path().display());
    let out = run(&[&report_arg], &[], INGRESS);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    assert_eq!(
        text(&out.stderr),
        format!(
            "styrmin-postrender: error: cannot write the report {}: Is a directory (os error 21)\n",
            dir.path().display()
        )
    );
}

/// `styrmin-postrender … | true`: a reader that is gone before the stream is written must not
/// look like a success. (A descriptor 1 closed with `>&-` is not this case: Rust's runtime
/// opens /dev/null in its place before `main`, as for `> /dev/null`.)
#[test]
fn a_reader_that_is_gone_fails_the_run() {
    let dir = tempfile::tempdir().expect("temp dir");
    let input = dir.path().join("in.yaml");
    // Larger than a pipe's buffer, so the write meets the closed reader.
    std::fs::write(&input, INGRESS.repeat(2000)).expect("write input");
    let binary = env!("CARGO_BIN_EXE_styrmin-postrender");
    let out = std::process::Command::new("bash")
        .args(["-o", "pipefail", "-c"])
        .arg(format!("'{binary}' < '{}' | true", input.display()))
        .env_remove("STYRMIN_CONFIG")
        .output()
        .expect("bash");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stderr),
        "styrmin-postrender: error: writing the stream to stdout: Broken pipe (os error 32)\n"
    );
}

#[test]
fn bad_yaml_names_the_document_and_writes_nothing() {
    let input = format!(
        "{INGRESS}---\n# Source: web/templates/broken.yaml\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: [\n"
    );
    let out = run(&[], &[], &input);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        out.stdout.is_empty(),
        "half-written output: {}",
        text(&out.stdout)
    );
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("document 2 (web/templates/broken.yaml)"),
        "{stderr}"
    );
}

#[test]
fn report_file_for_helm4_users() {
    let dir = tempfile::tempdir().expect("tmp");
    let report = dir.path().join("report.txt");
    let report_arg = format!("--report={}", report.display());
    let out = run(
        &[&report_arg, "--ingress-class="],
        &[],
        &format!("{INGRESS}{BARE}"),
    );
    assert!(out.status.success());
    let first = std::fs::read_to_string(&report).expect("report");
    assert!(
        first.contains("warning: document 2 (web/templates/bare.yaml): Ingress bare"),
        "{first}"
    );
    assert!(
        first.ends_with("2 Ingresses, 0 changed, 1 warnings\n"),
        "{first}"
    );

    // Each run appends its lines after the earlier runs' lines.
    let out = run(&[&report_arg, "--ingress-class=", "--strict"], &[], BARE);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let written = std::fs::read_to_string(&report).expect("report");
    let second = written
        .strip_prefix(first.as_str())
        .unwrap_or_else(|| panic!("the first run's lines were not kept:\n{written}"));
    assert!(
        second.starts_with(
            "error: document 1 (web/templates/bare.yaml): R5 (--strict): Ingress bare"
        ),
        "{written}"
    );

    let out = run(&[&report_arg], &[], INGRESS);
    assert!(out.status.success());
    let third = std::fs::read_to_string(&report).expect("report");
    let third = third
        .strip_prefix(written.as_str())
        .unwrap_or_else(|| panic!("the earlier runs' lines were not kept:\n{third}"));
    assert!(third.starts_with("changed: document 1 (web/templates/ingress.yaml): Ingress web: spec.ingressClassName \"nginx\" -> \"traefik\""), "{third}");
}

/// Helm 4.2's `separate` PostRenderStrategy (used by SDK callers) runs the post-renderer twice
/// per release with the same arguments: the manifests, then the hooks. The report holds both
/// calls, in that order, each ending with its own summary.
#[test]
fn two_calls_for_one_release_both_stay_in_the_report() {
    let hook = "---\n# Source: web/templates/hook.yaml\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: hook\n  annotations:\n    helm.sh/hook: pre-install\nspec:\n  rules: []\n";
    let dir = tempfile::tempdir().expect("tmp");
    let report = dir.path().join("report.txt");
    let report_arg = format!("--report={}", report.display());
    for (stream, document) in [(INGRESS, "web"), (hook, "hook")] {
        let out = run(&[&report_arg, "--ingress-class=haproxy"], &[], stream);
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert!(
            text(&out.stdout).contains("ingressClassName: \"haproxy\""),
            "{document}: {}",
            text(&out.stdout)
        );
    }
    let written = std::fs::read_to_string(&report).expect("report");
    let lines: Vec<&str> = written.lines().collect();
    assert_eq!(lines.len(), 4, "{written}");
    assert!(
        lines[0].starts_with("changed: document 1 (web/templates/ingress.yaml): Ingress web:"),
        "{written}"
    );
    assert_eq!(
        lines[1],
        "styrmin-postrender: 1 documents, 1 Ingresses, 1 changed, 0 warnings"
    );
    assert!(
        lines[2].starts_with("changed: document 1 (web/templates/hook.yaml): Ingress hook:"),
        "{written}"
    );
    assert_eq!(lines[3], lines[1]);
}

#[test]
fn check_exit_codes_and_diff() {
    let out = run(&["check", "--ingress-class", "nginx"], &[], INGRESS);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let diff = text(&out.stdout);
    assert!(
        diff.contains("+  annotations:\n+    kubernetes.io/ingress.class: \"nginx\"\n"),
        "{diff}"
    );
    // An unambiguous plain `nginx` already is the class: that line stays.
    assert!(diff.contains("\n   ingressClassName: nginx\n"), "{diff}");

    let conforming = run(&["--ingress-class", "nginx"], &[], INGRESS);
    let out = run(
        &["check", "--ingress-class", "nginx"],
        &[],
        &text(&conforming.stdout),
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    assert!(out.stdout.is_empty());

    let out = run(
        &["check"],
        &[],
        "kind: Ingress\napiVersion: networking.k8s.io/v1\nmetadata: [\n",
    );
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn explain_names_the_deciding_level() {
    let config =
        config_file("cluster: {ingress_class: nginx}\nenvironment: {dedicated_ingress: {}}\n");
    let out = run(
        &["explain", "--config", config.path().to_str().expect("path")],
        &[],
        "",
    );
    assert!(out.status.success());
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("dedicated ingress controller (R3)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("decided by: environment.dedicated_ingress"),
        "{stdout}"
    );
    let out = run(&["explain"], &[], "");
    assert!(text(&out.stdout).contains("decided by: the cluster default"));
}

#[test]
fn kube_version_below_1_27_refuses_a_shared_class() {
    let out = run(
        &["--kube-version", "v1.26.5", "--ingress-class", "nginx"],
        &[],
        INGRESS,
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert!(
        text(&out.stderr).contains("Kubernetes 1.26 rejects"),
        "{}",
        text(&out.stderr)
    );
    let out = run(
        &["--kube-version", "1.26", "--dedicated-ingress"],
        &[],
        INGRESS,
    );
    assert!(
        out.status.success(),
        "R3 sets the annotation only: fine on 1.26"
    );
}

#[test]
fn empty_input_is_empty_output() {
    let out = run(&[], &[], "");
    assert!(out.status.success());
    assert!(out.stdout.is_empty());
}
