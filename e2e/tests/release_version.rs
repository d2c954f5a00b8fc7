//! One version (docs/releasing.md): `[workspace.package] version` in Cargo.toml is the source;
//! every crate takes it, the chart's `version` and `appVersion`, the Helm 4 plugin's `version`
//! and `--version` of every released binary say the same (the image tag and the archives'
//! names are made from it by scripts/image/build-image.sh and scripts/release/dist.sh). CHANGELOG.md has an
//! `Unreleased` section.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::process::Command;

use serde_json::Value;
use styrmin_e2e::{release_binary, run_ok, utf8, workspace_root, workspace_version};

fn read(rel: &str) -> String {
    std::fs::read_to_string(workspace_root().join(rel)).unwrap()
}

fn yaml(rel: &str) -> Value {
    serde_saphyr::from_str(&read(rel)).unwrap()
}

#[test]
fn every_crate_takes_the_workspace_version() {
    let members = ["ingress-rules", "postrender", "webhook", "certs", "e2e"];
    for member in members {
        let manifest = read(&format!("{member}/Cargo.toml"));
        assert!(
            manifest
                .lines()
                .any(|l| l.trim() == "version.workspace = true"),
            "{member}/Cargo.toml sets a version of its own"
        );
    }
}

#[test]
fn the_chart_and_the_plugin_carry_the_workspace_version() {
    let version = workspace_version();
    let chart = yaml("charts/styrmin-webhook/Chart.yaml");
    assert_eq!(chart["version"], version.as_str(), "the chart's version");
    assert_eq!(
        chart["appVersion"],
        version.as_str(),
        "the chart's appVersion"
    );
    let plugin = yaml("postrender/helm-plugin/plugin.yaml");
    assert_eq!(
        plugin["version"],
        version.as_str(),
        "the Helm 4 plugin's version"
    );
}

#[test]
fn every_binary_prints_the_workspace_version() {
    let version = workspace_version();
    for program in ["styrmin-webhook", "styrmin-postrender", "styrmin-certs"] {
        let output = run_ok(Command::new(release_binary(program)).arg("--version"), None);
        assert_eq!(
            utf8(output.stdout, "--version"),
            format!("{program} {version}\n")
        );
    }
}

#[test]
fn the_changelog_has_an_unreleased_section() {
    let changelog = read("CHANGELOG.md");
    assert!(
        changelog.lines().any(|l| l == "## [Unreleased]"),
        "CHANGELOG.md has no `## [Unreleased]` section"
    );
}
