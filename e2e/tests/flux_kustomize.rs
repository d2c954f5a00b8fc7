//! The FluxCD post-renderer under the real kustomize (`kubectl kustomize`, kustomize 5.8 of
//! kubectl 1.36, installed by `make tools`; the oldest supported, kustomize 5.7 of
//! `kubectl1.35`, on one stream as a smoke test): for every stream in `postrender/tests/data/rendered/` and every
//! configuration of the resolution table, the Ingresses kustomize produces with the patches
//! `styrmin-postrender flux` prints equal the Ingresses `styrmin-postrender` itself
//! produces, as JSON values matched by apiVersion, kind, namespace and name; every other
//! object comes out of kustomize semantically unchanged (R7).
//!
//! helm-controller does what this test does: it takes `spec.postRenderers[].kustomize
//! .patches` from the HelmRelease (here: from the YAML the CLI prints, parsed), builds a
//! kustomization over the rendered stream with them, and runs kustomize. Kustomize unwraps
//! `List`/`IngressList`, re-sorts, drops comments and reformats, so the comparison is of
//! parsed objects, never of bytes. It aborts on two objects with the same id (a hook and a
//! template of the same name, which Helm 4's combined stream can hold); none of the
//! fixtures has such a pair (asserted below), so no stream is skipped.
//!
//! Runs are memoized by their input: configurations with the same resolved class give the
//! same patch text and so the same kustomize run.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::process::Command;
use std::sync::Mutex;

use serde_json::{Value, json};
use styrmin_e2e::{Scratch, describe, release_binary, run, run_ok, tool, utf8};
use support::{
    RESOLUTION_TABLE, compare_with_post_renderer, objects_by_id, rendered_streams as streams,
};

mod support;

/// `styrmin-postrender flux`'s exit code for R5 (nothing to patch).
const FLUX_NO_CLASS_EXIT: i32 = 3;

/// The kustomize `patches` entries of the CLI's output for `config`, or `None` for R5.
fn flux_patches(scratch: &Scratch, config: &str, index: usize) -> Option<Vec<Value>> {
    let config_path = scratch.write(&format!("config-{index}.yaml"), config);
    let mut cmd = Command::new(release_binary("styrmin-postrender"));
    cmd.arg("flux").arg("--config").arg(&config_path);
    let output = run(&mut cmd, None);
    if output.status.code() == Some(FLUX_NO_CLASS_EXIT) {
        let stderr = utf8(output.stderr, "stderr");
        assert!(output.stdout.is_empty(), "R5 printed something");
        assert!(stderr.contains("R5"), "{stderr}");
        return None;
    }
    assert!(
        output.status.success(),
        "{} failed: {}",
        describe(&cmd),
        String::from_utf8_lossy(&output.stderr)
    );
    let text = utf8(output.stdout, "flux output");
    let value: Value = serde_saphyr::from_str(&text)
        .unwrap_or_else(|e| panic!("the CLI's output is not YAML: {e}\n{text}"));
    let renderers = value["postRenderers"]
        .as_array()
        .unwrap_or_else(|| panic!("no postRenderers list:\n{text}"));
    Some(
        renderers
            .iter()
            .flat_map(|r| {
                r["kustomize"]["patches"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .collect(),
    )
}

/// `kubectl kustomize` over a directory with the stream and a kustomization with `patches`,
/// by the kubectl of `.tools/bin` named `kubectl`.
fn kustomize(kubectl: &str, dir: &Path, stream: &Path, patches: &[Value]) -> String {
    std::fs::create_dir_all(dir).expect("kustomization dir");
    std::fs::copy(stream, dir.join("stream.yaml")).expect("copy the stream");
    // JSON is YAML: no YAML writer needed for the kustomization.
    let kustomization = json!({
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": ["stream.yaml"],
        "patches": patches,
    });
    std::fs::write(
        dir.join("kustomization.yaml"),
        serde_json::to_string_pretty(&kustomization).expect("json"),
    )
    .expect("write kustomization");
    let output = run_ok(Command::new(tool(kubectl)).arg("kustomize").arg(dir), None);
    utf8(output.stdout, "kustomize output")
}

fn post_render(stream: &Path, config_path: &Path) -> String {
    let input = std::fs::read(stream).expect("read stream");
    let output = run_ok(
        Command::new(release_binary("styrmin-postrender"))
            .arg("--config")
            .arg(config_path),
        Some(&input),
    );
    utf8(output.stdout, "post-renderer output")
}

#[test]
fn kustomize_with_the_flux_patch_equals_the_post_renderer() {
    let scratch = Scratch::new("flux-kustomize");
    let streams = streams();
    let patches: Vec<Option<Vec<Value>>> = RESOLUTION_TABLE
        .iter()
        .enumerate()
        .map(|(i, config)| flux_patches(&scratch, &config.config_yaml(), i))
        .collect();
    assert!(patches.iter().any(Option::is_none), "R5 is in the table");
    assert!(
        patches.iter().filter(|p| p.is_some()).count() >= 8,
        "R3 and R4 are in the table"
    );

    // One job per stream; two at a time (kustomize is the slow part, ~0.2 s a run).
    let next = Mutex::new(0_usize);
    let checked = Mutex::new(0_usize);
    let failures = Mutex::new(Vec::<String>::new());
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                loop {
                    let i = {
                        let mut n = next.lock().expect("lock");
                        *n += 1;
                        *n - 1
                    };
                    let Some((name, path)) = streams.get(i) else {
                        break;
                    };
                    match check_stream("kubectl", &scratch, i, name, path, &patches) {
                        Ok(n) => *checked.lock().expect("lock") += n,
                        Err(e) => failures.lock().expect("lock").push(e),
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().expect("lock");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    let checked = checked.into_inner().expect("lock");
    assert!(
        checked >= 20 * RESOLUTION_TABLE.len(),
        "only {checked} Ingresses compared"
    );
}

/// The oldest supported kustomize (kubectl 1.35's) on one stream with every configuration:
/// the newest runs every stream above.
#[test]
fn oldest_kustomize_with_the_flux_patch_equals_the_post_renderer() {
    let scratch = Scratch::new("flux-kustomize-oldest");
    let patches: Vec<Option<Vec<Value>>> = RESOLUTION_TABLE
        .iter()
        .enumerate()
        .map(|(i, config)| flux_patches(&scratch, &config.config_yaml(), i))
        .collect();
    let streams = streams();
    let (name, path) = streams
        .iter()
        .find(|(name, _)| name == "umbrella-mix.helm4-postrenderer-stdin.yaml")
        .unwrap_or_else(|| panic!("no umbrella-mix stream among {streams:?}"));
    let compared = check_stream("kubectl1.35", &scratch, 0, name, path, &patches)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        compared >= RESOLUTION_TABLE.len(),
        "only {compared} Ingresses compared"
    );
}

/// Every configuration on one stream; the number of Ingresses compared, or what differed.
fn check_stream(
    kubectl: &str,
    scratch: &Scratch,
    index: usize,
    name: &str,
    path: &Path,
    patches: &[Option<Vec<Value>>],
) -> Result<usize, String> {
    let input = std::fs::read_to_string(path).map_err(|e| format!("{name}: {e}"))?;
    let input_objects = objects_by_id(&input, name);
    let mut kustomized: HashMap<String, BTreeMap<String, Value>> = HashMap::new();
    let mut compared = 0;
    for (c, config) in RESOLUTION_TABLE.iter().enumerate() {
        let context = format!("{name} with config {config:?}");
        let config_path = scratch.join(&format!("config-{c}.yaml"));
        let rendered = objects_by_id(&post_render(path, &config_path), &context);
        let these = patches[c].clone().unwrap_or_default();
        let key = serde_json::to_string(&these).expect("json");
        let n = kustomized.len();
        let out = kustomized.entry(key).or_insert_with(|| {
            let dir = scratch.join(&format!("k-{index}-{n}"));
            objects_by_id(&kustomize(kubectl, &dir, path, &these), &context)
        });

        // The same objects come out of both, by id; Ingresses as the post-renderer's, the
        // rest unchanged (R7; semantically: kustomize reformats).
        compared += compare_with_post_renderer(
            &context,
            "kustomize patches",
            out,
            &input_objects,
            &rendered,
        )?;
    }
    Ok(compared)
}

/// Why a stream with the same object twice (a hook and a template of one name, possible in
/// Helm 4's combined stream) cannot be post-rendered by one kustomize run: kustomize
/// refuses it. `postRenderStrategy: separate` sends hooks and templates as two streams.
#[test]
fn kustomize_refuses_a_stream_with_one_object_twice() {
    let scratch = Scratch::new("flux-duplicate");
    let object = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: same\n";
    let stream = scratch.write(
        "twice.yaml",
        &format!("{object}---\n{object}  annotations:\n    helm.sh/hook: pre-install\n"),
    );
    let dir = scratch.join("k");
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::copy(&stream, dir.join("stream.yaml")).expect("copy");
    std::fs::write(dir.join("kustomization.yaml"), "resources: [stream.yaml]\n").expect("write");
    let output = run(
        Command::new(tool("kubectl")).arg("kustomize").arg(&dir),
        None,
    );
    assert!(!output.status.success(), "kustomize accepted a duplicate");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("already registered id"), "{stderr}");
}
