//! W5 through the binary: the config's `last_deployed:` section and `--last-deployed`
//! decide alone, and `explain` says whether the record or the levels applied.

mod support;

use support::{INGRESS, config_file, run, text};

/// The cluster has just turned dedicated_ingress on; the application was last deployed
/// with the shared class `contour` and keeps it until Styrmin redeploys it.
const MID_TRANSITION: &str = "cluster: {ingress_class: contour, dedicated_ingress: {}}\nlast_deployed: {ingress_class: contour}\n";

#[test]
fn w5_the_last_deployed_section_decides_the_rendered_class() {
    let config = config_file(MID_TRANSITION);
    let path = config.path().to_str().expect("path");
    let out = run(&["--config", path], &[], INGRESS);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("ingressClassName: \"contour\""), "{stdout}");
    assert!(
        stdout.contains("kubernetes.io/ingress.class: \"contour\""),
        "{stdout}"
    );

    // The redeploy onto the controller: Styrmin passes the new record.
    for out in [
        run(
            &["--config", path, "--last-deployed", "dedicated"],
            &[],
            INGRESS,
        ),
        run(
            &["--config", path],
            &[("STYRMIN_LAST_DEPLOYED", "dedicated")],
            INGRESS,
        ),
    ] {
        assert!(out.status.success(), "{}", text(&out.stderr));
        let stdout = text(&out.stdout);
        assert!(!stdout.contains("ingressClassName"), "{stdout}");
        assert!(
            stdout.contains("kubernetes.io/ingress.class: \"traefik\""),
            "{stdout}"
        );
    }
}

#[test]
fn explain_says_the_record_decided_and_what_the_levels_give() {
    let config = config_file(MID_TRANSITION);
    let path = config.path().to_str().expect("path");
    let out = run(&["explain", "--config", path], &[], "");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    for needle in [
        "shared ingress class \"contour\" (R4)",
        "decided by: last_deployed.ingress_class",
        "settings: record — the last-deployed record decides (W5): class:contour; the levels now give dedicated (decided by cluster.dedicated_ingress)",
        "cluster:     ingress_class \"contour\", dedicated_ingress {} (on)",
    ] {
        assert!(stdout.contains(needle), "{needle} missing in\n{stdout}");
    }
    let out = run(
        &["explain", "--config", path, "--last-deployed", "no-class"],
        &[],
        "",
    );
    assert!(
        text(&out.stdout).contains("no class (R5)"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn explain_without_a_record_says_the_levels_decided() {
    let out = run(&["explain", "--dedicated-ingress"], &[], "");
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("settings: levels — no last-deployed record: the levels decide, dedicated (decided by deployment.dedicated_ingress)"),
        "{stdout}"
    );
}

#[test]
fn a_bad_last_deployed_value_is_an_error() {
    let out = run(&["--last-deployed", "nginx"], &[], INGRESS);
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    assert!(
        text(&out.stderr).contains("class:<name>"),
        "{}",
        text(&out.stderr)
    );
    let config = config_file("last_deployed: {dedicated_ingress: true}\n");
    let out = run(
        &["--config", config.path().to_str().expect("path")],
        &[],
        INGRESS,
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("last_deployed.dedicated_ingress"),
        "{}",
        text(&out.stderr)
    );
}
