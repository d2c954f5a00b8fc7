//! `manifests/examples/flux/`: the HelmRelease is valid for helm-controller v1.6.3's CRD
//! (`e2e/tests/data/crds/helm.toolkit.fluxcd.io_helmreleases.yaml`), its post-renderer and the
//! Component are exactly what `styrmin-postrender flux` prints for `styrmin.yaml`, and the
//! Component and the HelmRelease patch do what they say under the real kustomize.
//!
//! The schema check is a small structural validator of the CRD's OpenAPI v3 schema (no
//! `jsonschema` crate): types, `enum`, `required`, `minLength`/`maxLength`, `items`,
//! `additionalProperties`, `x-kubernetes-int-or-string`, and unknown fields rejected
//! except under `x-kubernetes-preserve-unknown-fields` — the API server's pruning would
//! silently drop them, which for a post-renderer means it silently does nothing. Not
//! checked: `pattern` and `format` (this checker has no regex engine) and the CEL rules
//! (`x-kubernetes-validations`), of which the one that concerns the example, "either
//! chart or chartRef must be set", is checked by hand.

use std::process::Command;

use serde_json::{Value, json};
use styrmin_e2e::crd_schema::{self, crd_version_schema};
use styrmin_e2e::{Scratch, data, parse_yaml, release_binary, run_ok, tool, utf8, workspace_root};

fn example(file: &str) -> String {
    let path = workspace_root().join("manifests/examples/flux").join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The `v2` schema of the HelmRelease CRD.
fn helm_release_schema() -> Value {
    crd_version_schema(&data("crds/helm.toolkit.fluxcd.io_helmreleases.yaml"), "v2")
}

fn schema_errors(object: &Value) -> Vec<String> {
    let mut errors = crd_schema::schema_errors(&helm_release_schema(), object);
    // The CEL rule of spec: "either chart or chartRef must be set".
    let spec = &object["spec"];
    if spec.get("chart").is_some() == spec.get("chartRef").is_some() {
        errors.push(".spec: either chart or chartRef must be set".to_owned());
    }
    errors
}

fn example_helm_release() -> Value {
    parse_yaml(&example("helmrelease.yaml"))
}

fn flux_cli(args: &[&str]) -> String {
    let config = workspace_root().join("manifests/examples/flux/styrmin.yaml");
    let output = run_ok(
        Command::new(release_binary("styrmin-postrender"))
            .arg("flux")
            .arg("--config")
            .arg(config)
            .args(args),
        None,
    );
    utf8(output.stdout, "flux output")
}

#[test]
fn example_helmrelease_is_valid_for_the_crd() {
    let release = example_helm_release();
    assert_eq!(release["apiVersion"], "helm.toolkit.fluxcd.io/v2");
    let errors = schema_errors(&release);
    assert!(errors.is_empty(), "{errors:#?}");
    let repository = parse_yaml(&example("helmrepository.yaml"));
    assert_eq!(repository["apiVersion"], "source.toolkit.fluxcd.io/v1");
    assert_eq!(repository["kind"], "HelmRepository");
    assert_eq!(
        release["spec"]["chart"]["spec"]["sourceRef"],
        json!({"kind": "HelmRepository", "name": repository["metadata"]["name"]})
    );
    assert_eq!(
        release["metadata"]["namespace"],
        repository["metadata"]["namespace"]
    );
}

#[test]
fn the_validator_rejects_what_the_api_server_would_drop_or_refuse() {
    let base = example_helm_release();
    let broken = |f: &dyn Fn(&mut Value)| {
        let mut object = base.clone();
        f(&mut object);
        schema_errors(&object)
    };
    // v2 has no patchesStrategicMerge / patchesJson6902 any more.
    let errors = broken(&|o| {
        o["spec"]["postRenderers"][0]["kustomize"]["patchesStrategicMerge"] = json!([{}]);
    });
    assert!(
        errors
            .iter()
            .any(|e| e.contains("patchesStrategicMerge: unknown field")),
        "{errors:?}"
    );
    let errors = broken(&|o| o["spec"]["postRenderers"] = json!({"kustomize": {}}));
    assert!(
        errors.iter().any(|e| e.contains("expected array")),
        "{errors:?}"
    );
    let errors = broken(&|o| {
        o["spec"]["postRenderers"][0]["kustomize"]["patches"][0]["patch"] = json!({"a": 1});
    });
    assert!(
        errors.iter().any(|e| e.contains("expected string")),
        "{errors:?}"
    );
    let errors = broken(&|o| o["spec"]["postRenderStrategy"] = json!("always"));
    assert!(
        errors.iter().any(|e| e.contains("not one of")),
        "{errors:?}"
    );
    let errors = broken(&|o| {
        o["spec"].as_object_mut().expect("spec").remove("interval");
    });
    assert!(errors.iter().any(|e| e.contains("interval")), "{errors:?}");
    let errors = broken(&|o| o["spec"]["chartRef"] = json!({"kind": "OCIRepository", "name": "x"}));
    assert!(errors.iter().any(|e| e.contains("chartRef")), "{errors:?}");
    // Values are free-form.
    assert!(broken(&|o| o["spec"]["values"]["anything"] = json!({"x": [1]})).is_empty());
}

#[test]
fn example_post_renderer_and_component_are_what_the_cli_prints() {
    let printed: Value = parse_yaml(&flux_cli(&[]));
    assert_eq!(
        example_helm_release()["spec"]["postRenderers"],
        printed["postRenderers"],
        "helmrelease.yaml is stale: regenerate with `styrmin-postrender flux --config manifests/examples/flux/styrmin.yaml`"
    );
    assert_eq!(
        example("component/kustomization.yaml"),
        flux_cli(&["--output", "component"]),
        "component/kustomization.yaml is stale: regenerate with `--output component`"
    );
}

/// The Component and the HelmRelease patch under the real kustomize: the HelmRelease comes
/// out with the post-renderer, still valid for the CRD.
#[test]
fn component_and_helmrelease_patch_under_kustomize() {
    let scratch = Scratch::new("flux-example");
    let expected = parse_yaml(&flux_cli(&[]))["postRenderers"].clone();
    let mut bare = example_helm_release();
    bare["spec"]
        .as_object_mut()
        .expect("spec")
        .remove("postRenderers");
    // JSON is YAML.
    let bare = serde_json::to_string_pretty(&bare).expect("json");

    for dir in ["component", "app", "patched"] {
        std::fs::create_dir_all(scratch.join(dir)).expect("dir");
    }
    scratch.write(
        "component/kustomization.yaml",
        &flux_cli(&["--output", "component"]),
    );
    scratch.write("app/helmrelease.yaml", &bare);
    scratch.write(
        "app/kustomization.yaml",
        "resources: [helmrelease.yaml]\ncomponents: [../component]\n",
    );
    scratch.write("patched/helmrelease.yaml", &bare);
    scratch.write(
        "patched/patch.yaml",
        &flux_cli(&[
            "--output",
            "helmrelease-patch",
            "--name",
            "podinfo",
            "--namespace",
            "styrmin-web1",
        ]),
    );
    scratch.write(
        "patched/kustomization.yaml",
        "resources: [helmrelease.yaml]\npatches:\n  - path: patch.yaml\n",
    );
    for dir in ["app", "patched"] {
        let output = run_ok(
            Command::new(tool("kubectl"))
                .arg("kustomize")
                .arg(scratch.join(dir)),
            None,
        );
        let built = parse_yaml(&utf8(output.stdout, "kustomize output"));
        assert_eq!(built["spec"]["postRenderers"], expected, "{dir}");
        assert_eq!(built["metadata"]["name"], "podinfo", "{dir}");
        let errors = schema_errors(&built);
        assert!(errors.is_empty(), "{dir}: {errors:#?}");
    }
}
