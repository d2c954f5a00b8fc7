//! What several end-to-end tests share: the resolution table and the real rendered streams
//! (both from `styrmin-test-support`), and the webhook answering in-process.
//!
//! Each test file that uses it says `mod support;`; not every file uses every item.
#![allow(dead_code)]

use std::path::Path;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use base64::Engine as _;
use http_body_util::BodyExt as _;
use serde_json::{Value, json};
use styrmin_webhook::api::{AppState, router};
use styrmin_webhook::policy_file::parse_policy;
use tower::ServiceExt as _;

#[allow(unused_imports)] // each test file uses some of them
pub use styrmin_test_support::rendered::{is_ingress, rendered_streams};
#[allow(unused_imports)]
pub use styrmin_test_support::resolution_table::{RESOLUTION_TABLE, TableConfig};

/// The Ingresses of a stream, in order, as JSON (List and IngressList items included).
/// The objects of a stream as kustomize sees them: blank documents dropped, a `List` (or
/// `<Kind>List`) with `items` unwrapped into its items.
pub fn kustomize_objects(stream: &str) -> Vec<Value> {
    let mut out = Vec::new();
    for doc in styrmin_e2e::split_documents(stream) {
        let value = doc.value();
        if value.is_null() {
            continue;
        }
        let is_list = value["kind"].as_str().is_some_and(|k| k.ends_with("List"));
        match value.get("items").and_then(Value::as_array) {
            Some(items) if is_list => out.extend(items.iter().cloned()),
            _ => out.push(value),
        }
    }
    out
}

/// Kustomize drops `metadata.annotations: null` and `metadata.labels: null` (measured with
/// v5.7.1 on the vault and traefik charts); for the API server a null map is no map. Both
/// sides of every comparison get the same treatment, and nothing else is normalized.
pub fn without_null_metadata_maps(mut object: Value) -> Value {
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        for key in ["annotations", "labels"] {
            if metadata.get(key).is_some_and(Value::is_null) {
                metadata.remove(key);
            }
        }
    }
    object
}

pub fn ingresses(text: &str) -> Vec<Value> {
    let mut found = Vec::new();
    for document in styrmin_postrender::documents::split(text) {
        let doc: Option<Value> = serde_saphyr::from_str(&text[document.range]).expect("YAML");
        let Some(doc) = doc else { continue };
        if is_ingress(&doc) {
            found.push(doc);
        } else if styrmin_ingress_rules::is_ingress_container_list(
            doc["apiVersion"].as_str().unwrap_or_default(),
            doc["kind"].as_str().unwrap_or_default(),
        ) {
            found.extend(
                doc["items"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|i| is_ingress(i))
                    .cloned(),
            );
        }
    }
    found
}

/// The webhook's router in-process (`oneshot`), with a view read from policy-file text.
pub struct Webhook {
    state: AppState,
}

/// The webhook's answer to an Ingress review, with its JSON patch applied (RFC 6902).
pub struct Admitted {
    pub object: Value,
    pub warnings: Vec<String>,
    pub patched: bool,
}

impl Webhook {
    pub fn new(policy: &str) -> Self {
        let state = AppState::default();
        let view = parse_policy(Path::new("policy.yaml"), policy).expect("policy");
        state.view_sink().publish(view);
        Webhook { state }
    }

    /// Sends `object` as the API server would, in the namespace of deployment `app`.
    pub async fn admit(&self, operation: &str, object: &Value, uid: &str) -> Admitted {
        let review = json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": uid,
                "kind": {"group": "networking.k8s.io", "version": "v1", "kind": "Ingress"},
                "resource": {"group": "networking.k8s.io", "version": "v1", "resource": "ingresses"},
                "name": object["metadata"]["name"].clone(),
                "namespace": "styrmin-app",
                "operation": operation,
                "userInfo": {"username": "system:serviceaccount:flux-system:helm-controller"},
                "object": object,
                "oldObject": if operation == "UPDATE" { object.clone() } else { Value::Null },
                "dryRun": false,
            }
        });
        let request = Request::post("/mutate?timeout=10s")
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(serde_json::to_vec(&review).expect("JSON")))
            .expect("request");
        let response = router(self.state.clone())
            .oneshot(request)
            .await
            .expect("answer");
        assert_eq!(response.status(), StatusCode::OK);
        let bytes = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        let answer: Value = serde_json::from_slice(&bytes).expect("an AdmissionReview");
        let response = &answer["response"];
        assert_eq!(response["uid"], uid);
        assert_eq!(response["allowed"], true, "{answer}");
        let mut object = object.clone();
        let patched = response.get("patch").is_some();
        if let Some(patch) = response.get("patch") {
            assert_eq!(response["patchType"], "JSONPatch");
            let text = patch.as_str().expect("the patch is a base64 string");
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(text)
                .expect("standard base64");
            let patch: json_patch::Patch =
                serde_json::from_slice(&bytes).expect("an RFC 6902 patch");
            json_patch::patch(&mut object, &patch).expect("the patch applies");
        }
        let warnings = response["warnings"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|w| w.as_str().expect("a warning is a string").to_owned())
            .collect();
        Admitted {
            object,
            warnings,
            patched,
        }
    }
}

/// The objects of a stream as kustomize sees them, by `apiVersion kind namespace/name`.
pub fn objects_by_id(stream: &str, what: &str) -> std::collections::BTreeMap<String, Value> {
    let mut map = std::collections::BTreeMap::new();
    for object in kustomize_objects(stream)
        .into_iter()
        .map(without_null_metadata_maps)
    {
        let field = |key: &str| object["metadata"][key].as_str().unwrap_or_default();
        let key = format!(
            "{} {} {}/{}",
            object["apiVersion"].as_str().unwrap_or_default(),
            object["kind"].as_str().unwrap_or_default(),
            field("namespace"),
            field("name")
        );
        assert!(
            map.insert(key.clone(), object).is_none(),
            "{what}: two objects with the id {key}"
        );
    }
    map
}

/// `cmd` without the caller's STYRMIN_ variables, so that only what a test gives configures
/// the program.
pub fn without_styrmin_variables(cmd: &mut std::process::Command) -> &mut std::process::Command {
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("STYRMIN_") {
            cmd.env_remove(&key);
        }
    }
    cmd
}

/// `styrmin-postrender --config config_path` over `stream`, without the caller's STYRMIN_
/// variables; its output.
pub fn post_render(stream: &[u8], config_path: &Path) -> String {
    let mut cmd = std::process::Command::new(styrmin_e2e::release_binary("styrmin-postrender"));
    cmd.arg("--config").arg(config_path);
    without_styrmin_variables(&mut cmd);
    let output = styrmin_e2e::run(&mut cmd, Some(stream));
    assert!(
        output.status.success(),
        "{} failed: {}",
        styrmin_e2e::describe(&cmd),
        String::from_utf8_lossy(&output.stderr)
    );
    styrmin_e2e::utf8(output.stdout, "post-renderer output")
}

/// `helm template web CHART --namespace apps EXTRA` with `helm` (a tool of `make tools`:
/// `helm3`, `helm4`), Helm's homes inside `scratch` and no STYRMIN_ variables; its output.
pub fn helm_template(
    helm: &str,
    chart: &Path,
    scratch: &styrmin_e2e::Scratch,
    extra: &[&str],
) -> String {
    let mut cmd = std::process::Command::new(styrmin_e2e::tool(helm));
    cmd.args(["template", "web"])
        .arg(chart)
        .args(["--namespace", "apps"])
        .args(extra)
        .env("HELM_CONFIG_HOME", scratch.join("config"))
        .env("HELM_CACHE_HOME", scratch.join("cache"))
        .env("HELM_DATA_HOME", scratch.join("data"))
        .env("KUBECONFIG", scratch.join("no-such-kubeconfig"));
    without_styrmin_variables(&mut cmd);
    let output = styrmin_e2e::run(&mut cmd, None);
    assert!(
        output.status.success(),
        "{}: {}",
        styrmin_e2e::describe(&cmd),
        String::from_utf8_lossy(&output.stderr)
    );
    styrmin_e2e::utf8(output.stdout, "helm template")
}

/// Writes a kustomization in `dir` whose `resources:` is `resources` (the file's name and
/// text) and whose one transformer is `transformer`, a `StyrminPostRender`.
pub fn kustomization_with(dir: &Path, resources: (&str, &str), transformer: &str) {
    std::fs::create_dir_all(dir).expect("dir");
    std::fs::write(dir.join(resources.0), resources.1).expect("resources");
    std::fs::write(dir.join("styrmin.yaml"), transformer).expect("transformer config");
    std::fs::write(
        dir.join("kustomization.yaml"),
        format!(
            "resources: [{}]\ntransformers: [styrmin.yaml]\n",
            resources.0
        ),
    )
    .expect("kustomization");
}

/// The output of a kustomize build of `dir` (`what` runs it), which must succeed.
pub fn built(output: std::process::Output, what: &str, dir: &Path) -> String {
    assert!(
        output.status.success(),
        "{what} {} failed: {}",
        dir.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    styrmin_e2e::utf8(output.stdout, what)
}

/// A `StyrminPostRender` whose spec is the config file's sections: run as an exec KRM
/// function when `exec` names the program, else looked up by kustomize among its exec
/// plugins by its kind.
pub fn styrmin_post_render(config_yaml: &str, exec: Option<&Path>) -> String {
    let spec: String = config_yaml.lines().map(|l| format!("  {l}\n")).collect();
    let annotations = exec.map_or(String::new(), |program| {
        format!(
            "  annotations:\n    config.kubernetes.io/function: |\n      exec:\n        path: {}\n",
            program.display()
        )
    });
    format!(
        "apiVersion: styrmin.io/v1alpha1\nkind: StyrminPostRender\nmetadata:\n  name: styrmin\n{annotations}spec:{}\n{spec}",
        if spec.is_empty() { " {}" } else { "" }
    )
}

/// A kustomize route (the KRM function, the exec plugin) over every rendered stream: each
/// stream the `resources:` of a kustomization built by `build`, without a transformer and
/// then with `transformer(config)` for each of `configs(stream's name)` of the resolution
/// table. Every Ingress must equal the post-renderer's output for the same config, every other
/// object kustomize's output without the transformer. The number of Ingresses compared.
pub fn route_over_rendered_streams(
    route: &str,
    scratch: &styrmin_e2e::Scratch,
    configs: impl Fn(&str) -> Vec<usize>,
    transformer: impl Fn(&str) -> String,
    build: impl Fn(&Path) -> String,
) -> usize {
    let mut compared = 0;
    let mut failures = Vec::new();
    for (s, (name, path)) in rendered_streams().iter().enumerate() {
        let stream = std::fs::read(path).expect("read stream");
        let dir = scratch.join(&format!("s{s}"));
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::write(dir.join("stream.yaml"), &stream).expect("stream");
        std::fs::write(dir.join("kustomization.yaml"), "resources: [stream.yaml]\n")
            .expect("kustomization");
        let without = objects_by_id(&build(&dir), name);
        for c in configs(name) {
            let config = &RESOLUTION_TABLE[c];
            let context = format!("{name} with config {config:?}");
            let config_path = scratch.write(&format!("config-{c}.yaml"), &config.config_yaml());
            let post_rendered = objects_by_id(&post_render(&stream, &config_path), &context);
            std::fs::write(dir.join("styrmin.yaml"), transformer(&config.config_yaml()))
                .expect("transformer config");
            std::fs::write(
                dir.join("kustomization.yaml"),
                "resources: [stream.yaml]\ntransformers: [styrmin.yaml]\n",
            )
            .expect("kustomization");
            let with_route = objects_by_id(&build(&dir), &context);
            match compare_with_post_renderer(&context, route, &with_route, &without, &post_rendered)
            {
                Ok(n) => compared += n,
                Err(e) => failures.push(e),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    compared
}

/// Ingresses equal the post-renderer's, everything else equals kustomize's output without
/// the `route` (the KRM function, the exec plugin); the number of Ingresses compared.
pub fn compare_with_post_renderer(
    context: &str,
    route: &str,
    with_route: &std::collections::BTreeMap<String, Value>,
    without: &std::collections::BTreeMap<String, Value>,
    post_rendered: &std::collections::BTreeMap<String, Value>,
) -> Result<usize, String> {
    let ids = |m: &std::collections::BTreeMap<String, Value>| m.keys().cloned().collect::<Vec<_>>();
    if ids(with_route) != ids(without) {
        return Err(format!(
            "{context}: objects {:?} with the {route}, {:?} without",
            ids(with_route),
            ids(without)
        ));
    }
    let mut compared = 0;
    for (key, plain) in without {
        let got = &with_route[key];
        if is_ingress(plain) {
            let want = post_rendered
                .get(key)
                .ok_or_else(|| format!("{context}: the post-renderer has no {key}"))?;
            if got != want {
                return Err(format!(
                    "{context}: {key}\n{route}: {got}\npost-renderer: {want}"
                ));
            }
            compared += 1;
        } else if got != plain {
            return Err(format!(
                "{context}: the {route} changed {key}\nwithout: {plain}\nwith:    {got}"
            ));
        }
    }
    Ok(compared)
}

/// A ready-to-run example folder of `examples/` (a kustomization, its `resources:` and a
/// `StyrminPostRender` in `transformers:`) built by `build` as its README says: every Ingress
/// equals the post-renderer's output for the same resources with the `StyrminPostRender`'s
/// spec as the config file, every other object equals `build`'s output without the
/// transformer, and every Ingress gets `class`. The number of Ingresses compared.
pub fn check_example_folder(
    example: &str,
    route: &str,
    class: &str,
    scratch: &styrmin_e2e::Scratch,
    build: impl Fn(&Path) -> String,
) -> usize {
    let dir = styrmin_e2e::workspace_root().join(example);
    let read = |name: &str| {
        std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{example}/{name}: {e}"))
    };
    let kustomization: Value =
        serde_saphyr::from_str(&read("kustomization.yaml")).expect("kustomization.yaml");
    let resources: Vec<String> = kustomization["resources"]
        .as_array()
        .expect("resources:")
        .iter()
        .map(|r| r.as_str().expect("a resource file").to_owned())
        .collect();
    let transformers = kustomization["transformers"]
        .as_array()
        .expect("transformers:");
    assert_eq!(transformers.len(), 1, "{example}: one transformer");
    let transformer: Value =
        serde_saphyr::from_str(&read(transformers[0].as_str().expect("a transformer file")))
            .expect("the transformer's config");
    assert_eq!(transformer["kind"], "StyrminPostRender", "{example}");

    let with_route = objects_by_id(&build(&dir), example);
    // The same folder without the transformer; JSON is YAML.
    let without_dir = scratch.join("without");
    styrmin_e2e::copy_dir(&dir, &without_dir);
    std::fs::write(
        without_dir.join("kustomization.yaml"),
        json!({ "resources": resources }).to_string(),
    )
    .expect("kustomization");
    let without = objects_by_id(&build(&without_dir), example);
    let stream: String = resources
        .iter()
        .map(|r| format!("---\n{}\n", read(r)))
        .collect();
    let config = scratch.write("config.yaml", &transformer["spec"].to_string());
    let post_rendered = objects_by_id(&post_render(stream.as_bytes(), &config), example);
    let compared =
        compare_with_post_renderer(example, route, &with_route, &without, &post_rendered)
            .unwrap_or_else(|e| panic!("{e}"));
    for object in with_route.values().filter(|o| is_ingress(o)) {
        assert_eq!(
            object["spec"]["ingressClassName"], class,
            "{example}: {object}"
        );
    }
    compared
}
