//! The bodies of the fuzz targets, as plain functions: `fuzz/fuzz_targets/*.rs` hand them
//! libFuzzer's input, and `e2e/tests/fuzz_bodies.rs` runs them over the seed corpus in
//! `cargo test`, so they keep compiling and their properties keep holding without a fuzzer.
//!
//! Each body panics when a property fails; anything that returns is a pass.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a panic is a finding

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::LazyLock;

use base64::Engine as _;
use serde_json::Value;
use styrmin_ingress_rules::{
    INGRESS_API_VERSIONS, IngressTarget, Level, is_ingress_container_list,
};
use styrmin_postrender::config::StyrminConfig;
use styrmin_postrender::render::RenderRules;
use styrmin_postrender::{documents, streaming};
use styrmin_webhook::admission::{encode_review, parse_review};
use styrmin_webhook::decide::{
    Admission, DecideOptions, DecidedAt, RequestOutcome, ReviewKind, decide,
};
use styrmin_webhook::policy_file::parse_policy;
use styrmin_webhook::telemetry::ErrorChain;
use styrmin_webhook::view::View;

/// The configurations `rendered_stream` runs each input under: R3, R4 (a plain word, a
/// YAML 1.1 boolean, a number), R5, R5 with `--strict`, and R4 on Kubernetes 1.24 (R9).
const STREAM_CONFIGS: [(&str, Option<&str>, bool); 7] = [
    ("cluster: {dedicated_ingress: {}}", None, false),
    ("cluster: {ingress_class: nginx}", None, false),
    ("deployment: {ingress_class: \"on\"}", None, false),
    ("environment: {ingress_class: \"123\"}", None, false),
    ("cluster: {ingress_class: null}", None, false),
    ("cluster: {ingress_class: \"\"}", None, true),
    ("cluster: {ingress_class: nginx}", Some("1.24"), false),
];

fn stream_rules(choice: u8) -> RenderRules {
    let (config, kubernetes, strict) = STREAM_CONFIGS[usize::from(choice) % STREAM_CONFIGS.len()];
    let config = StyrminConfig::from_yaml(config, "fuzz").expect("fixed config");
    let default = Level::default();
    RenderRules {
        resolved: styrmin_ingress_rules::resolve(&config.levels(&default)),
        kubernetes: kubernetes.map(|v| v.parse().expect("fixed version")),
        strict,
    }
}

fn is_ingress_value(v: &Value) -> bool {
    v["kind"] == "Ingress"
        && INGRESS_API_VERSIONS.contains(&v["apiVersion"].as_str().unwrap_or_default())
}

/// Whether a document, read by a second parser (serde-saphyr), may hold an Ingress. `None`
/// when that parser cannot read it (then the document is not judged).
fn may_hold_ingress(document: &str) -> Option<bool> {
    let value: Option<Value> = serde_saphyr::from_str(document).ok()?;
    let value = value.unwrap_or(Value::Null);
    Some(
        is_ingress_value(&value)
            || is_ingress_container_list(
                value["apiVersion"].as_str().unwrap_or_default(),
                value["kind"].as_str().unwrap_or_default(),
            ),
    )
}

/// The pipeline's block sizes `rendered_stream` runs with: the filter's, and one small
/// enough that most inputs are cut into several blocks (the answer must not change).
const BLOCK_SIZES: [usize; 2] = [streaming::BLOCK_BYTES, 96];

/// Runs the post-renderer's one pipeline on `input`; the output, or `None` on error.
fn run_pipeline(
    input: &[u8],
    rules: &RenderRules,
    block: usize,
) -> Option<(streaming::StreamRendered, Vec<u8>)> {
    let rendered = streaming::render_stream(input, rules, block).ok()?;
    let mut output = Vec::new();
    rendered.write(&mut output).expect("writing to a Vec");
    Some((rendered, output))
}

/// `rendered_stream`: the first byte picks a configuration and a block size, the rest is
/// the stream.
///
/// On `Ok`: the output has the same documents; every document that was not changed is
/// byte-for-byte the input's; a changed document is an Ingress or a List (when a second
/// parser can read it); the output renders to itself (R8). On `Err`: nothing to check
/// (nothing is written).
pub fn rendered_stream(data: &[u8]) {
    let Some((&choice, input)) = data.split_first() else {
        return;
    };
    let rules = stream_rules(choice);
    let block = BLOCK_SIZES[usize::from(choice) / STREAM_CONFIGS.len() % BLOCK_SIZES.len()];
    let Some((stream, output)) = run_pipeline(input, &rules, block) else {
        return;
    };
    let rendered = &stream.rendered;
    let text_in = std::str::from_utf8(input).expect("render accepted a stream that is not UTF-8");
    let text_out = std::str::from_utf8(&output).expect("the output is not UTF-8");
    let (docs_in, docs_out) = (documents::split(text_in), documents::split(text_out));
    assert_eq!(
        docs_in.len(),
        docs_out.len(),
        "the document count changed\n--- input:\n{text_in}\n--- output:\n{text_out}"
    );
    assert_eq!(rendered.documents, docs_in.len());
    let changed: BTreeSet<usize> = rendered.changed.iter().map(|c| c.document.index).collect();
    for (a, b) in docs_in.iter().zip(&docs_out) {
        let (before, after) = (&text_in[a.range.clone()], &text_out[b.range.clone()]);
        if changed.contains(&a.index) {
            assert_ne!(
                may_hold_ingress(before),
                Some(false),
                "a document that is not an Ingress changed:\n{before}\n--- to:\n{after}"
            );
        } else {
            assert_eq!(before, after, "an unchanged document's bytes differ");
        }
    }
    // R8: the output is a fixed point, with the same Ingresses.
    let (again, output_again) = run_pipeline(&output, &rules, block).unwrap_or_else(|| {
        let e = streaming::render_stream(&output[..], &rules, block)
            .err()
            .map(|e| e.to_string());
        panic!("the output does not render: {e:?}\n--- input:\n{text_in}\n--- output:\n{text_out}")
    });
    let again = again.rendered;
    assert!(
        again.changed.is_empty(),
        "not a fixed point\n--- input:\n{text_in}\n--- output:\n{text_out}\n--- again:\n{}",
        String::from_utf8_lossy(&output_again)
    );
    assert_eq!(again.ingresses.len(), rendered.ingresses.len());
    for (first, second) in rendered.ingresses.iter().zip(&again.ingresses) {
        assert_eq!(first.after, second.before, "{}", first.ingress);
        assert_eq!(second.before, second.after, "{}", first.ingress);
        match &rules.resolved.target {
            IngressTarget::Dedicated => {
                assert_eq!(first.after.ingress_class_name, None);
                assert_eq!(first.after.class_annotation.as_deref(), Some("traefik"));
            }
            IngressTarget::Class(class) => {
                assert_eq!(
                    first.after.ingress_class_name.as_deref(),
                    Some(class.as_str())
                );
                assert_eq!(
                    first.after.class_annotation.as_deref(),
                    Some(class.as_str())
                );
            }
            IngressTarget::NoClass => assert_eq!(first.after, first.before),
        }
    }
}

/// `postrender_config`: `StyrminConfig::from_yaml` never panics; an error is one line (Helm
/// shows only the first line of a failing post-renderer); a config resolves.
pub fn postrender_config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match StyrminConfig::from_yaml(text, "file fuzz.yaml") {
        Ok(config) => {
            let default = Level::default();
            let resolved = styrmin_ingress_rules::resolve(&config.levels(&default));
            // R1: dedicated at any level that sets it wins over every class.
            let dedicated_set = config
                .named_levels()
                .iter()
                .any(|(_, level)| level.is_some_and(|l| l.dedicated_ingress.value().is_some()));
            assert_eq!(resolved.target.is_dedicated(), dedicated_set, "{text:?}");
        }
        Err(e) => {
            let message = e.to_string();
            assert!(
                !message.contains('\n'),
                "a config error over several lines: {message:?}"
            );
        }
    }
}

const POLICY: &str = include_str!("../data/policy.yaml");

/// The views `admission_review` decides with: the test policy, and the same on Kubernetes
/// 1.24 (where R4 is denied, R9).
static VIEWS: LazyLock<[View; 2]> = LazyLock::new(|| {
    [
        parse_policy(Path::new("policy.yaml"), POLICY).expect("test policy"),
        parse_policy(
            Path::new("policy.yaml"),
            &format!("{POLICY}\nkubernetes_version: \"1.24\"\n"),
        )
        .expect("test policy on 1.24"),
    ]
});

/// `admission_review`: a body the webhook cannot read is a 400 (an `Err` here); every other
/// answer, under each view and with `--flux-post-renderer` off and on, is a valid
/// AdmissionReview of the request's version and uid, denied with a status or allowed, and
/// its patch applies to the object; a patched object needs no second patch (R8).
pub fn admission_review(data: &[u8]) {
    let Ok(review) = parse_review(data) else {
        return;
    };
    let api_version = review.api_version;
    let admission = Admission::new(review.request);
    for view in VIEWS.iter() {
        for flux_post_renderer in [false, true] {
            let options = DecideOptions {
                flux_post_renderer,
                ..DecideOptions::default()
            };
            check_answer(view, data, api_version, &admission, &options);
        }
    }
}

fn check_answer(
    view: &View,
    data: &[u8],
    api_version: &str,
    admission: &Admission,
    options: &DecideOptions,
) {
    let request = admission.request();
    let decision = decide(view, admission, options, DecidedAt::now());
    let outcome = decision.outcome;
    let body = encode_review(api_version, &decision.into_response(&request.uid));
    let answer: Value = serde_json::from_slice(&body).expect("the answer is not JSON");
    assert_eq!(answer["apiVersion"], api_version);
    assert_eq!(answer["kind"], "AdmissionReview");
    let response = &answer["response"];
    assert_eq!(response["uid"].as_str(), Some(request.uid.as_str()));
    let allowed = response["allowed"].as_bool().expect("allowed is a bool");
    assert_eq!(allowed, outcome != RequestOutcome::Denied);
    if !allowed {
        let code = response["status"]["code"]
            .as_u64()
            .expect("a denial has a code");
        assert!((400..600).contains(&code), "{code}");
        assert!(response.get("patch").is_none(), "a denial with a patch");
        return;
    }
    if let Some(warnings) = response.get("warnings") {
        for w in warnings.as_array().expect("warnings are a list") {
            let w = w.as_str().expect("a warning is a string");
            assert!(w.len() <= 256 && !w.contains('\n'), "{w:?}");
        }
    }
    let Some(patch) = response.get("patch") else {
        return;
    };
    assert_eq!(outcome, RequestOutcome::Patched);
    assert_eq!(response["patchType"], "JSONPatch");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(patch.as_str().expect("the patch is a string"))
        .expect("the patch is base64");
    let patch: json_patch::Patch = serde_json::from_slice(&bytes).expect("the patch is RFC 6902");
    assert!(!patch.0.is_empty(), "an empty patch");
    // The review read whole, for the object to apply the patch to.
    let mut whole: Value = serde_json::from_slice(data).expect("a parsed review is JSON");
    let object = whole
        .pointer_mut("/request/object")
        .expect("a patch for a request without object");
    json_patch::patch(object, &patch)
        .unwrap_or_else(|e| panic!("the patch does not apply: {e}\n{object}"));
    // R8: deciding again on the patched object patches nothing.
    if admission.kind() == ReviewKind::Ingress {
        let again = parse_review(whole.to_string().as_bytes())
            .expect("the patched review parses")
            .request;
        let second = decide(view, &Admission::new(again), options, DecidedAt::now());
        assert!(
            second.patch.is_empty(),
            "a second patch: {:?}",
            second.patch
        );
    }
}

/// `policy_file`: `parse_policy` never panics; a policy that parses resolves every
/// deployment's and environment's levels; an error's chain can be printed.
pub fn policy_file(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match parse_policy(Path::new("fuzz.yaml"), text) {
        Ok(view) => {
            let _ = view.kubernetes_version();
            for namespace in ["styrmin-web1", "styrmin-web2", "styrmin-ctl9", "styrmin-"] {
                if let Some(owner) = styrmin_webhook::view::namespace_owner(namespace) {
                    let _ = styrmin_ingress_rules::resolve(&view.levels_for_deployment(owner));
                }
            }
            for environment in ["prod", "stage", ""] {
                let _ = styrmin_ingress_rules::resolve(&view.levels_for_environment(environment));
                let _ = view.controllers_of(environment).count();
            }
        }
        Err(e) => {
            let _ = ErrorChain(&e).to_string();
        }
    }
}

/// `deep_nesting`: each pair of bytes opens `(second + 1) × 64` collections of one kind
/// (flow sequence, flow mapping, block mapping, block sequence, by the first byte), so
/// that a few bytes nest an Ingress's `spec.rules` tens of thousands deep; a mutation-based
/// fuzzer that grows inputs a byte at a time never gets there from ordinary YAML. Block
/// levels stop at 2,000 (each costs its indentation in bytes).
///
/// The stream renders when it nests at most `MAX_NESTING` deep (root counted) and is
/// refused with the nesting error past it; never a crash.
pub fn deep_nesting(data: &[u8]) {
    use styrmin_postrender::yaml_tree::MAX_NESTING;
    const BLOCK_LEVELS: usize = 2_000;
    let mut text = String::from(
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: deep\nspec:\n  rules:",
    );
    // Root mapping and `spec`.
    let mut depth = 2;
    let mut closers = String::new();
    let mut in_flow = false;
    let mut indent = 4;
    let mut blocks = 0;
    for pair in data.chunks_exact(2) {
        let count = (usize::from(pair[1]) + 1) * 64;
        let kind = pair[0] % 4;
        for _ in 0..count {
            match kind {
                0 | 1 if !in_flow => {
                    text.push(' ');
                    in_flow = true;
                    text.push_str(if kind == 0 { "[" } else { "{a: " });
                    closers.push(if kind == 0 { ']' } else { '}' });
                }
                0 => {
                    text.push('[');
                    closers.push(']');
                }
                1 => {
                    text.push_str("{a: ");
                    closers.push('}');
                }
                _ if in_flow || blocks >= BLOCK_LEVELS => continue,
                2 => {
                    text.push('\n');
                    text.push_str(&" ".repeat(indent));
                    text.push_str("a:");
                    indent += 1;
                    blocks += 1;
                }
                _ => {
                    text.push('\n');
                    text.push_str(&" ".repeat(indent));
                    text.push('-');
                    indent += 2;
                    blocks += 1;
                }
            }
            depth += 1;
        }
    }
    text.push_str(if in_flow { "b" } else { " b" });
    text.extend(closers.chars().rev());
    text.push('\n');
    let rules = stream_rules(0);
    let result = streaming::render_stream(text.as_bytes(), &rules, streaming::BLOCK_BYTES);
    // `rules:` itself holds the value: a document with nothing opened is 2 deep.
    match result {
        Ok(_) => assert!(depth <= MAX_NESTING, "{depth} levels were rendered"),
        Err(e) if depth > MAX_NESTING => {
            let message = e.to_string();
            assert!(message.contains("nested more than"), "{message}");
        }
        Err(e) => panic!("{depth} levels were refused: {e}"),
    }
}
