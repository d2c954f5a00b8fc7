//! The fuzz targets' bodies (the `styrmin-fuzz-bodies` crate, which `cargo fuzz` runs under libFuzzer)
//! over the seed corpus and every input a fuzzer once failed on (`fuzz/regressions/`), in a
//! plain `cargo test`: the targets keep compiling in the workspace, and their properties keep
//! holding on the project's own data, without nightly flags or a fuzzer (`make fuzz` runs the
//! fuzzer; `fuzz/README.md`).

use std::path::{Path, PathBuf};
use styrmin_fuzz_bodies as bodies;

fn files(dir: &Path, extension: Option<&str>) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .filter(|p| extension.is_none_or(|x| p.extension().is_some_and(|e| e == x)))
        .collect();
    files.sort();
    files
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn regressions(target: &str) -> Vec<Vec<u8>> {
    let dir = styrmin_e2e::workspace_root()
        .join("fuzz/regressions")
        .join(target);
    files(&dir, None).iter().map(|p| read(p)).collect()
}

#[test]
fn rendered_stream_on_every_fixture_and_configuration() {
    let streams = files(&styrmin_e2e::postrender_data("rendered"), Some("yaml"));
    assert!(streams.len() >= 20, "{} streams", streams.len());
    let mut runs = 0;
    for path in &streams {
        let text = read(path);
        for choice in 0..7u8 {
            let mut input = vec![choice];
            input.extend_from_slice(&text);
            bodies::rendered_stream(&input);
            runs += 1;
        }
    }
    for input in regressions("rendered_stream") {
        bodies::rendered_stream(&input);
        runs += 1;
    }
    assert!(runs >= 140, "{runs}");
}

#[test]
fn postrender_config_on_the_examples() {
    let root = styrmin_e2e::workspace_root();
    let mut inputs: Vec<Vec<u8>> = files(&root.join("examples"), Some("yaml"))
        .iter()
        .map(|p| read(p))
        .collect();
    assert!(!inputs.is_empty());
    inputs.extend(regressions("postrender_config"));
    inputs.push(b"environment: {dedicated_ingress: true}\n".to_vec());
    inputs.push(b"cluster: [a]\n".to_vec());
    for input in inputs {
        bodies::postrender_config(&input);
    }
}

#[test]
fn admission_review_on_every_fixture_in_every_namespace() {
    let reviews = files(&styrmin_e2e::webhook_data("admission"), Some("json"));
    assert!(reviews.len() >= 15, "{} reviews", reviews.len());
    let mut runs = 0;
    for path in &reviews {
        let text = String::from_utf8(read(path)).expect("UTF-8 fixture");
        bodies::admission_review(text.as_bytes());
        let review: serde_json::Value = serde_json::from_str(&text).expect("JSON fixture");
        // The same request in the namespaces of the test policy's deployments, so that the
        // rules, the deploy block and the Flux post-renderer all answer.
        for namespace in ["styrmin-web1", "styrmin-web2", "styrmin-ctl9"] {
            let mut review = review.clone();
            if let Some(request) = review.get_mut("request").and_then(|r| r.as_object_mut()) {
                request.insert("namespace".into(), namespace.into());
            }
            bodies::admission_review(&serde_json::to_vec(&review).expect("JSON"));
            runs += 1;
        }
    }
    for input in regressions("admission_review") {
        bodies::admission_review(&input);
    }
    // What the router answers 400: the body does nothing here.
    bodies::admission_review(b"{\"kind\": \"AdmissionReview\"}");
    assert!(runs >= 45, "{runs}");
}

#[test]
fn policy_file_on_the_test_policy() {
    let root = styrmin_e2e::workspace_root();
    let mut inputs = vec![read(&root.join("fuzz-bodies/data/policy.yaml"))];
    inputs.extend(
        files(&root.join("examples"), Some("yaml"))
            .iter()
            .map(|p| read(p)),
    );
    inputs.extend(regressions("policy_file"));
    inputs.push(b"kubernetes_version: banana\n".to_vec());
    for input in inputs {
        bodies::policy_file(&input);
    }
}

#[test]
fn deep_nesting_below_at_and_past_the_bound() {
    // (kind, count) pairs: flow sequence 0, flow mapping 1, block mapping 2, block sequence 3;
    // each pair opens (count + 1) × 64 collections.
    let inputs: [&[u8]; 8] = [
        &[],
        &[0, 100],
        &[1, 150],
        &[0, 155],
        &[0, 160],
        &[2, 30, 0, 120],
        &[3, 40, 1, 200],
        &[
            0, 255, 1, 255, 0, 255, 1, 255, 0, 255, 1, 255, 0, 255, 1, 255,
        ],
    ];
    for input in inputs {
        bodies::deep_nesting(input);
    }
    for input in regressions("deep_nesting") {
        bodies::deep_nesting(&input);
    }
}
