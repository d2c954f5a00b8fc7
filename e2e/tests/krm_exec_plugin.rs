//! `styrmin-postrender` as a kustomize exec plugin under kubectl's built-in kustomize
//! (`kubectl kustomize --enable-alpha-plugins`, which runs no KRM exec functions): the program
//! linked as `$XDG_CONFIG_HOME/kustomize/plugin/styrmin.io/v1alpha1/styrminpostrender/StyrminPostRender`,
//! a `StyrminPostRender` config in `transformers:`.
//!
//! - Over the real rendered streams of `postrender/tests/data/rendered/`: every Ingress equals
//!   what the post-renderer makes of the same stream with the same config, every other object
//!   equals kustomize's output without the plugin.
//! - Over `helm template` of the e2e chart (subcharts, a `List`): every Ingress equals
//!   Helm 3's `helm template --post-renderer styrmin-postrender`.
//! - A bad plugin config fails the build naming the field, with nothing on stdout.
//! - `examples/kustomize-plugin` builds as its README says, under the newest kubectl (1.36,
//!   kustomize 5.8) and the oldest supported one (`kubectl1.35`, kustomize 5.7): the smoke
//!   set of the oldest. Every other test runs the newest.
//!
//! Kustomize unwraps `List`s, re-sorts, drops comments and reformats, so objects are compared
//! parsed, never as bytes.

use std::path::Path;
use std::process::{Command, Output};

use rstest::rstest;

use styrmin_e2e::{Scratch, copy_dir, data, release_binary, run, tool, utf8};
use support::{
    RESOLUTION_TABLE, built, check_example_folder, helm_template, is_ingress, kustomization_with,
    objects_by_id, route_over_rendered_streams, styrmin_post_render, without_styrmin_variables,
};

mod support;

/// The plugin's config: a `StyrminPostRender` whose spec is the config file's sections (no
/// function annotation: kustomize looks the kind up among its plugins).
fn plugin_config(config_yaml: &str) -> String {
    styrmin_post_render(config_yaml, None)
}

/// The plugin installed the documented way, a link to the program, under `home`.
fn install_plugin(home: &Path) -> std::path::PathBuf {
    let xdg = home.join("xdg");
    let dir = xdg.join("kustomize/plugin/styrmin.io/v1alpha1/styrminpostrender");
    std::fs::create_dir_all(&dir).expect("plugin dir");
    let link = dir.join("StyrminPostRender");
    if !link.exists() {
        std::os::unix::fs::symlink(release_binary("styrmin-postrender"), &link).expect("link");
    }
    xdg
}

/// `kubectl kustomize --enable-alpha-plugins dir`, the plugin home set and no STYRMIN_
/// variables.
fn kubectl_kustomize(dir: &Path, home: &Path) -> Output {
    kubectl_kustomize_with("kubectl", dir, home)
}

/// [`kubectl_kustomize`] with the kubectl of `.tools/bin` named `kubectl`.
fn kubectl_kustomize_with(kubectl: &str, dir: &Path, home: &Path) -> Output {
    let mut cmd = Command::new(tool(kubectl));
    cmd.args(["kustomize", "--enable-alpha-plugins"]).arg(dir);
    without_styrmin_variables(&mut cmd)
        .env("XDG_CONFIG_HOME", install_plugin(home))
        .env("HOME", home)
        .env("KUBECONFIG", home.join("no-such-kubeconfig"));
    run(&mut cmd, None)
}

fn kubectl_kustomize_ok(dir: &Path, home: &Path) -> String {
    kubectl_kustomize_ok_with("kubectl", dir, home)
}

fn kubectl_kustomize_ok_with(kubectl: &str, dir: &Path, home: &Path) -> String {
    built(
        kubectl_kustomize_with(kubectl, dir, home),
        "kubectl kustomize",
        dir,
    )
}

/// `examples/kustomize-plugin`, built with its README's command, the plugin installed as the
/// README installs it; by the newest kubectl and by the oldest supported one.
#[rstest]
#[case::newest("kubectl")]
#[case::oldest_kubectl_1_35("kubectl1.35")]
fn the_example_folder_builds_as_its_readme_says(#[case] kubectl: &str) {
    let scratch = Scratch::new(&format!("exec-plugin-example-{kubectl}"));
    let compared = check_example_folder(
        "examples/kustomize-plugin",
        "exec plugin",
        "haproxy",
        &scratch,
        |dir| kubectl_kustomize_ok_with(kubectl, dir, scratch.path()),
    );
    assert_eq!(compared, 2, "the example's two Ingresses");
}

/// The default class, R5 (no class), classes YAML would misread, a dedicated ingress.
const SOME_CONFIGS: [usize; 5] = [0, 2, 9, 10, 11];

#[test]
fn plugin_over_rendered_streams_equals_the_post_renderer() {
    let scratch = Scratch::new("exec-plugin-plain");
    let compared = route_over_rendered_streams(
        "exec plugin",
        &scratch,
        |_| SOME_CONFIGS.to_vec(),
        plugin_config,
        |dir| kubectl_kustomize_ok(dir, scratch.path()),
    );
    assert!(compared >= 100, "only {compared} Ingresses compared");
}

/// `helm template` of the e2e chart through kubectl's kustomize and the plugin, against
/// Helm 3's `helm template --post-renderer styrmin-postrender` (Helm 4 runs the same program
/// through its plugin, tested with the Helm routes).
#[test]
fn plugin_over_helm_template_equals_helm_with_the_post_renderer() {
    let scratch = Scratch::new("exec-plugin-helm");
    let chart = scratch.join("chart");
    copy_dir(&data("charts/styrmin-e2e"), &chart);
    let helm = |helm: &str, extra: &[&str]| helm_template(helm, &chart, &scratch, extra);
    let dir = scratch.join("k");
    std::fs::create_dir_all(&dir).expect("dir");
    let mut compared = 0;
    for helm_name in ["helm3"] {
        // Hooks left out: Helm never hands them to a post-renderer.
        let rendered = helm(helm_name, &["--no-hooks"]);
        std::fs::write(dir.join("chart.yaml"), &rendered).expect("rendered");
        for c in SOME_CONFIGS {
            let config = &RESOLUTION_TABLE[c];
            let context = format!("{helm_name} with config {config:?}");
            let config_path = scratch.write(&format!("config-{c}.yaml"), &config.config_yaml());
            let config_arg = format!("--config={}", config_path.display());
            let post_renderer = release_binary("styrmin-postrender");
            let post_renderer = post_renderer.to_string_lossy();
            let helm_post_rendered = objects_by_id(
                &helm(
                    helm_name,
                    &[
                        "--no-hooks",
                        "--post-renderer",
                        &post_renderer,
                        "--post-renderer-args",
                        &config_arg,
                    ],
                ),
                &context,
            );
            std::fs::write(
                dir.join("styrmin.yaml"),
                plugin_config(&config.config_yaml()),
            )
            .expect("plugin config");
            std::fs::write(
                dir.join("kustomization.yaml"),
                "resources: [chart.yaml]\ntransformers: [styrmin.yaml]\n",
            )
            .expect("kustomization");
            let with_plugin = objects_by_id(&kubectl_kustomize_ok(&dir, scratch.path()), &context);
            let ingresses: Vec<_> = helm_post_rendered
                .iter()
                .filter(|(_, o)| is_ingress(o))
                .collect();
            assert!(
                ingresses.len() >= 5,
                "{context}: {} Ingresses",
                ingresses.len()
            );
            for (key, want) in ingresses {
                assert_eq!(with_plugin.get(key), Some(want), "{context}: {key}");
                compared += 1;
            }
        }
    }
    assert!(compared >= 25, "only {compared} Ingresses compared");
}

#[test]
fn a_bad_plugin_config_fails_the_build_naming_the_field() {
    let scratch = Scratch::new("exec-plugin-bad-config");
    let dir = scratch.join("k");
    kustomization_with(
        &dir,
        (
            "res.yaml",
            "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: web\nspec:\n  ingressClassName: nginx\n",
        ),
        &plugin_config("deployment: {ingress_class: nginx, dedicated_ingress: true}\n"),
    );
    let output = kubectl_kustomize(&dir, scratch.path());
    assert!(!output.status.success(), "kubectl kustomize succeeded");
    assert!(output.stdout.is_empty(), "{:?}", output.stdout);
    let stderr = utf8(output.stderr, "stderr");
    assert!(
        stderr.contains("spec.deployment.dedicated_ingress"),
        "{stderr}"
    );
}
