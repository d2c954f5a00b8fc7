//! `styrmin-postrender` as a KRM function under the real kustomize: kustomize 4.5.4 (installed
//! by `make tools`; kubectl's built-in kustomize has no `--enable-exec`), `kustomize build
//! --enable-alpha-plugins --enable-exec` with the function in `transformers:`.
//!
//! - Over plain resources (the real rendered streams of `postrender/tests/data/rendered/`):
//!   every Ingress that comes out equals what `styrmin-postrender` makes of the same stream
//!   with the same config, and every other object equals kustomize's output without the
//!   function.
//! - Over `helmCharts:` with `--enable-helm --helm-command <Helm 3>` (the route Argo CD users
//!   take with `kustomize.buildOptions`), on the e2e chart (subcharts two deep, a `List`, a
//!   hook): the same, against `helm template` through the post-renderer.
//! - A bad functionConfig and a refusal fail the build, with the field named and nothing
//!   written.
//! - `examples/kustomize-krm` builds as its README says.
//!
//! Kustomize unwraps `List`s, re-sorts, drops comments and reformats, so objects are compared
//! parsed, never as bytes.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;
use styrmin_e2e::{Scratch, copy_dir, data, release_binary, release_dir, run, tool, utf8};
use support::{
    RESOLUTION_TABLE, built, check_example_folder, compare_with_post_renderer, helm_template,
    is_ingress, kustomization_with, objects_by_id, post_render, route_over_rendered_streams,
    styrmin_post_render, without_styrmin_variables,
};

mod support;

/// The function's config: a `StyrminPostRender` whose spec is the config file's sections,
/// run as an exec function.
fn function_config(config_yaml: &str) -> String {
    styrmin_post_render(config_yaml, Some(&release_binary("styrmin-postrender")))
}

/// `kustomize build` of `dir`, with Helm's homes inside `home` and no STYRMIN_ variables.
fn kustomize(dir: &Path, home: &Path, helm: bool) -> Output {
    let mut cmd = Command::new(tool("kustomize"));
    cmd.arg("build")
        .arg("--enable-alpha-plugins")
        .arg("--enable-exec");
    if helm {
        cmd.arg("--enable-helm")
            .arg("--helm-command")
            .arg(tool("helm3"));
    }
    cmd.arg(dir);
    without_styrmin_variables(&mut cmd);
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("HELM_") {
            cmd.env_remove(&key);
        }
    }
    // The release binaries first on PATH: examples/kustomize-krm names the program by its name.
    let path = std::env::var_os("PATH").unwrap_or_default();
    let path =
        std::env::join_paths(std::iter::once(release_dir()).chain(std::env::split_paths(&path)))
            .expect("PATH");
    cmd.env("PATH", path)
        .env("HOME", home)
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_DATA_HOME", home.join("data"))
        .env("KUBECONFIG", home.join("no-such-kubeconfig"));
    run(&mut cmd, None)
}

fn kustomize_ok(dir: &Path, home: &Path, helm: bool) -> String {
    built(kustomize(dir, home, helm), "kustomize build", dir)
}

/// Configurations for every stream: the default class, R5 (no class), classes YAML would
/// misread, and a dedicated ingress. The whole table runs on one stream.
const SOME_CONFIGS: [usize; 5] = [0, 2, 9, 10, 11];

#[test]
fn transformer_over_plain_resources_equals_the_post_renderer() {
    let scratch = Scratch::new("krm-plain");
    let configs = |name: &str| -> Vec<usize> {
        if name == "umbrella-mix.yaml" {
            (0..RESOLUTION_TABLE.len()).collect()
        } else {
            SOME_CONFIGS.to_vec()
        }
    };
    let compared =
        route_over_rendered_streams("KRM function", &scratch, configs, function_config, |dir| {
            kustomize_ok(dir, scratch.path(), false)
        });
    assert!(compared >= 100, "only {compared} Ingresses compared");
}

/// The e2e chart (subcharts, a `List`, a hook) inflated by kustomize's `helmCharts:` with
/// Helm 3, the function in `transformers:`. kustomize hands the hook to the function like any
/// object; Helm 3 never gives hooks to a post-renderer, so the expected hook Ingress is
/// `helm template`'s whole output through `styrmin-postrender` (and the other Ingresses are
/// also checked against `helm template --post-renderer`).
#[test]
fn transformer_over_helm_charts_equals_helm_template_with_the_post_renderer() {
    let scratch = Scratch::new("krm-helm");
    let chart = scratch.join("app/charts/styrmin-e2e");
    copy_dir(&data("charts/styrmin-e2e"), &chart);
    let app = scratch.join("app");
    let helm_charts = "helmGlobals:\n  chartHome: charts\nhelmCharts:\n- name: styrmin-e2e\n  releaseName: web\n  namespace: apps\n";
    std::fs::write(app.join("kustomization.yaml"), helm_charts).expect("kustomization");
    let without = objects_by_id(&kustomize_ok(&app, scratch.path(), true), "helmCharts");
    assert!(
        without.keys().any(|k| k.contains("/web-hook")),
        "the hook Ingress is in kustomize's output"
    );
    assert!(
        without.keys().any(|k| k.contains("/web-list-item")),
        "the List's Ingress is in kustomize's output"
    );
    let helm = |extra: &[&str]| helm_template("helm3", &chart, &scratch, extra);
    let rendered = helm(&[]);
    let mut compared = 0;
    for (c, config) in RESOLUTION_TABLE.iter().enumerate() {
        let context = format!("helmCharts with config {config:?}");
        let config_path = scratch.write(&format!("config-{c}.yaml"), &config.config_yaml());
        let post_rendered =
            objects_by_id(&post_render(rendered.as_bytes(), &config_path), &context);
        // Helm's own post-renderer route gives the same Ingresses (hooks aside).
        let config_arg = format!("--config={}", config_path.display());
        let helm_post_rendered = objects_by_id(
            &helm(&[
                "--post-renderer",
                &release_binary("styrmin-postrender").to_string_lossy(),
                "--post-renderer-args",
                &config_arg,
            ]),
            &context,
        );
        for (key, object) in &helm_post_rendered {
            let hook = object["metadata"]["annotations"]["helm.sh/hook"].is_string();
            if is_ingress(object) && !hook {
                assert_eq!(Some(object), post_rendered.get(key), "{context}: {key}");
            }
        }
        std::fs::write(
            app.join("styrmin.yaml"),
            function_config(&config.config_yaml()),
        )
        .expect("function config");
        std::fs::write(
            app.join("kustomization.yaml"),
            format!("{helm_charts}transformers: [styrmin.yaml]\n"),
        )
        .expect("kustomization");
        let with_function = objects_by_id(&kustomize_ok(&app, scratch.path(), true), &context);
        compared += compare_with_post_renderer(
            &context,
            "KRM function",
            &with_function,
            &without,
            &post_rendered,
        )
        .unwrap_or_else(|e| panic!("{e}"));
    }
    assert!(
        compared >= 7 * RESOLUTION_TABLE.len(),
        "only {compared} Ingresses compared"
    );
}

/// `examples/kustomize-krm`, built with its README's command (the program found on PATH).
#[test]
fn the_example_folder_builds_as_its_readme_says() {
    let scratch = Scratch::new("krm-example");
    let compared = check_example_folder(
        "examples/kustomize-krm",
        "KRM function",
        "haproxy",
        &scratch,
        |dir| kustomize_ok(dir, scratch.path(), false),
    );
    assert_eq!(compared, 2, "the example's two Ingresses");
}

fn failing_build(scratch: &Scratch, resources: &str, function_config: &str) -> (String, String) {
    let dir = scratch.join("k");
    kustomization_with(&dir, ("res.yaml", resources), function_config);
    let output = kustomize(&dir, scratch.path(), false);
    assert!(!output.status.success(), "kustomize build succeeded");
    (utf8(output.stdout, "stdout"), utf8(output.stderr, "stderr"))
}

const WEB: &str = "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: web\nspec:\n  ingressClassName: nginx\n";

#[test]
fn a_bad_function_config_fails_the_build_naming_the_field() {
    let scratch = Scratch::new("krm-bad-config");
    let config = function_config("deployment: {ingress_class: nginx, dedicated_ingress: true}\n");
    let (stdout, stderr) = failing_build(&scratch, WEB, &config);
    assert!(stdout.is_empty(), "{stdout}");
    assert!(
        stderr.contains("functionConfig.spec.deployment.dedicated_ingress"),
        "{stderr}"
    );
    // The function alone: exit 1, a result naming the field, no items.
    let list = format!(
        "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- {}functionConfig:\n{}",
        WEB.replace('\n', "\n  ").trim_end_matches(' '),
        config
            .lines()
            .map(|l| format!("  {l}\n"))
            .collect::<String>()
    );
    let output = run(
        Command::new(release_binary("styrmin-postrender")).arg("krm"),
        Some(list.as_bytes()),
    );
    assert_eq!(output.status.code(), Some(1));
    let out: Value = serde_saphyr::from_str(&utf8(output.stdout, "stdout")).expect("YAML");
    assert_eq!(out["kind"], "ResourceList");
    assert_eq!(out["items"], serde_json::json!([]));
    assert_eq!(out["results"][0]["severity"], "error");
    assert_eq!(
        out["results"][0]["field"]["path"],
        "functionConfig.spec.deployment.dedicated_ingress"
    );
}

/// An Ingress the post-renderer refuses fails the build with the post-renderer's own words.
#[test]
fn a_refusal_fails_the_build_with_the_post_renderers_message() {
    let scratch = Scratch::new("krm-refusal");
    let bad = WEB.replace("ingressClassName: nginx", "ingressClassName: [nginx]");
    let (stdout, stderr) = failing_build(
        &scratch,
        &bad,
        &function_config("deployment: {ingress_class: haproxy}\n"),
    );
    assert!(stdout.is_empty(), "{stdout}");
    let output = run(
        Command::new(release_binary("styrmin-postrender")).args(["--ingress-class", "haproxy"]),
        Some(bad.as_bytes()),
    );
    assert!(!output.status.success());
    let post_renderer = utf8(output.stderr, "stderr");
    let why = "Ingress web: spec.ingressClassName must be a string";
    assert!(post_renderer.contains(why), "{post_renderer}");
    assert!(stderr.contains(why), "{stderr}");
}
