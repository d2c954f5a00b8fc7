//! `styrmin-postrender flux` as users and scripts run it: exit codes, stdout, stderr.

mod support;

use support::{run, text};

fn flux(args: &[&str], envs: &[(&str, &str)]) -> std::process::Output {
    let args: Vec<&str> = std::iter::once("flux")
        .chain(args.iter().copied())
        .collect();
    run(&args, envs, "")
}

#[test]
fn default_is_the_cluster_default_class() {
    let out = flux(&[], &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("\npostRenderers:\n"), "{stdout}");
    assert!(stdout.contains("ingressClassName: \"traefik\""), "{stdout}");
}

#[test]
fn global_flags_and_env_apply() {
    let out = flux(&["--dedicated-ingress"], &[]);
    assert!(text(&out.stdout).contains("ingressClassName: null"));
    let out = flux(&[], &[("STYRMIN_INGRESS_CLASS", "no")]);
    assert!(text(&out.stdout).contains("kubernetes.io/ingress.class: \"no\""));
    let out = flux(
        &["--name", "web"],
        &[("STYRMIN_FLUX_OUTPUT", "helmrelease-patch")],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("kind: HelmRelease\nmetadata:\n  name: \"web\"\n"));
}

#[test]
fn r5_prints_nothing_and_exits_3() {
    let out = flux(&["--ingress-class", ""], &[]);
    assert_eq!(out.status.code(), Some(3));
    assert!(out.stdout.is_empty());
    let stderr = text(&out.stderr);
    assert!(stderr.contains("R5"), "{stderr}");
    assert!(
        stderr.contains("decided by deployment.ingress_class"),
        "{stderr}"
    );
}

#[test]
fn errors_exit_1() {
    let out = flux(&["--output", "helmrelease-patch"], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("needs --name"));
    assert!(out.stdout.is_empty());
    // R9: a shared class on Kubernetes 1.26.
    let out = flux(&["--ingress-class", "nginx", "--kube-version", "1.26"], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("1.27"));
    assert!(out.stdout.is_empty());
}
