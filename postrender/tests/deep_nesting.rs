//! Deeply nested documents: accepted up to the depth Go's readers accept
//! (`yaml_tree::MAX_NESTING`, the root counted), refused one past it and far past it with an
//! error naming the document, never a signal, never a byte on stdout. Each shape runs on the
//! Helm route (stdin stream), alone and behind other documents (so that it renders on a
//! worker thread), on the KRM route (a `ResourceList` item) and on the kustomize exec plugin
//! route (the `kustomize-plugin` subcommand, a stream on stdin and a config file).
//!
//! The far-past inputs are what catches a recursion added without a bound: any walk that
//! runs before the bound is checked dies on a million levels. The program runs with a main
//! thread of 1 MiB of stack, as on Windows: a walk on the main thread (a refused KRM item's
//! reference did one) overflows there at the bound.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use styrmin_postrender::yaml_tree::MAX_NESTING;

const FAR_PAST: usize = 1_000_000;

/// An Ingress whose `spec.rules` nests so that the document holds `depth` collections in
/// all, the root mapping counted.
fn ingress(shape: Shape, depth: usize) -> String {
    let head =
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: deep\nspec:\n  rules:";
    // The root mapping and `spec` enclose `rules`.
    let k = depth - 2;
    let body = match shape {
        Shape::FlowSequence => format!(" {}{}", "[".repeat(k), "]".repeat(k)),
        Shape::FlowMapping => format!(" {}b{}", "{a: ".repeat(k), "}".repeat(k)),
        Shape::BlockMapping => block_mappings(k, "a: b"),
        Shape::Mixed => {
            // Block levels cost their indentation in bytes (n² / 2 in all): a few hundred,
            // then flow collections.
            let block = (k / 2).min(500);
            let flow = k - block;
            block_mappings(
                block,
                &format!("a: {}{}", "[".repeat(flow), "]".repeat(flow)),
            )
        }
    };
    format!("{head}{body}\n")
}

/// `levels` block mappings under `rules:`, the innermost holding `last`.
fn block_mappings(levels: usize, last: &str) -> String {
    let mut out = String::from("\n");
    for i in 0..levels - 1 {
        out.push_str(&" ".repeat(4 + i));
        out.push_str("a:\n");
    }
    out.push_str(&" ".repeat(4 + levels - 1));
    out.push_str(last);
    out
}

/// A `List` whose `items` nest `depth` deep in all.
fn list(depth: usize) -> String {
    let k = depth - 1;
    format!(
        "apiVersion: v1\nkind: List\nitems: {}{}\n",
        "[".repeat(k),
        "]".repeat(k)
    )
}

#[derive(Debug, Clone, Copy)]
enum Shape {
    FlowSequence,
    FlowMapping,
    BlockMapping,
    Mixed,
}

const SHAPES: [Shape; 4] = [
    Shape::FlowSequence,
    Shape::FlowMapping,
    Shape::BlockMapping,
    Shape::Mixed,
];

/// Enough other documents before and after that the deep one renders in a block of its
/// own, on a worker thread.
fn among_others(document: &str) -> String {
    let other = |i| {
        format!(
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c{i}\ndata:\n  k: {}\n",
            "v".repeat(200)
        )
    };
    let filler: String = (0..12_000).map(other).collect();
    format!("{filler}---\n{document}{filler}")
}

/// The document as the only item of a `ResourceList`.
fn resource_list(document: &str) -> String {
    let mut items = String::new();
    for (i, line) in document.lines().enumerate() {
        items.push_str(if i == 0 { "- " } else { "  " });
        items.push_str(line);
        items.push('\n');
    }
    format!(
        "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n{items}functionConfig:\n  apiVersion: styrmin.io/v1alpha1\n  kind: StyrminPostRender\n  metadata:\n    name: styrmin\n  spec:\n    deployment:\n      ingress_class: haproxy\n"
    )
}

/// The program with `args` and `input` on stdin, its main thread given 1 MiB of stack (what
/// Windows gives a program; Linux gives 8 MiB): no walk may depend on the main thread's
/// stack.
fn run(input: &str, args: &[&str]) -> Output {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg("ulimit -s 1024 && exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_styrmin-postrender"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the post-renderer starts");
    let mut stdin = child.stdin.take().expect("stdin is piped");
    let bytes = input.as_bytes().to_vec();
    let writer = std::thread::spawn(move || {
        // A refusal may come before the whole input is read: a broken pipe is fine.
        let _ = stdin.write_all(&bytes);
    });
    let out = child.wait_with_output().expect("the post-renderer ends");
    writer.join().expect("the writer ends");
    out
}

fn helm(input: &str) -> Output {
    run(input, &["--ingress-class", "haproxy"])
}

fn krm(input: &str) -> Output {
    run(&resource_list(input), &[])
}

/// The kustomize exec plugin route: what `kubectl kustomize --enable-alpha-plugins` runs, with
/// the plugin's config file as its argument. (kubectl's kustomize itself reads at most
/// 10,000 levels and writes them back in block style, n²/2 bytes of indentation, so the real
/// kustomize in front adds nothing at these depths but minutes.)
fn kustomize_plugin(input: &str) -> Output {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("styrmin.yaml");
    std::fs::write(
        &config,
        "apiVersion: styrmin.io/v1alpha1\nkind: StyrminPostRender\nmetadata:\n  name: styrmin\nspec:\n  deployment:\n    ingress_class: haproxy\n",
    )
    .expect("plugin config");
    let config = config.to_str().expect("a UTF-8 temp path");
    run(input, &["kustomize-plugin", config])
}

fn assert_accepted(out: &Output, what: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{what}: {stderr}");
    assert!(!out.stdout.is_empty(), "{what}: nothing written");
}

/// Exit 1 (not a signal), nothing on stdout for the Helm route, and a message that names
/// the document and the depth.
fn assert_refused(out: &Output, what: &str, names: &str, stdout_empty: bool) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{what}: {:?} {stderr}",
        out.status
    );
    assert!(stderr.contains(names), "{what}: no {names:?} in {stderr}");
    assert!(
        stderr.contains(&format!("nested more than {MAX_NESTING} deep")),
        "{what}: {stderr}"
    );
    assert!(!stderr.contains("overflow"), "{what}: {stderr}");
    if stdout_empty {
        assert!(out.stdout.is_empty(), "{what}: stdout was written");
    }
}

#[test]
fn the_bound_is_what_go_accepts() {
    // Measured with kubectl 1.35 (go-yaml v2 and kyaml/go-yaml v3, then JSON): 10,000
    // nested collections pass, 10,001 are refused.
    assert_eq!(MAX_NESTING, 10_000);
}

#[test]
fn helm_route_accepts_the_bound_and_refuses_past_it() {
    for shape in SHAPES {
        let what = format!("{shape:?}");
        assert_accepted(&helm(&ingress(shape, MAX_NESTING)), &what);
        assert_refused(
            &helm(&ingress(shape, MAX_NESTING + 1)),
            &what,
            "document 1",
            true,
        );
    }
    assert_accepted(&helm(&list(MAX_NESTING)), "List");
    assert_refused(&helm(&list(MAX_NESTING + 1)), "List", "document 1", true);
}

#[test]
fn helm_route_refuses_far_past_the_bound() {
    for shape in [Shape::FlowSequence, Shape::FlowMapping, Shape::Mixed] {
        let what = format!("{shape:?}");
        assert_refused(&helm(&ingress(shape, FAR_PAST)), &what, "document 1", true);
    }
    // A million block levels would be 500 GB of indentation; a thousand past the bound
    // (55 MB) is far enough.
    let deep_block = ingress(Shape::BlockMapping, MAX_NESTING + 1_000);
    assert_refused(&helm(&deep_block), "BlockMapping", "document 1", true);
    assert_refused(&helm(&list(FAR_PAST)), "List", "document 1", true);
}

#[test]
fn worker_threads_render_the_bound_too() {
    for shape in SHAPES {
        let what = format!("{shape:?} among others");
        assert_accepted(&helm(&among_others(&ingress(shape, MAX_NESTING))), &what);
        let past = among_others(&ingress(Shape::FlowSequence, FAR_PAST));
        assert_refused(&helm(&past), &what, "document 12001", true);
    }
}

#[test]
fn krm_route_accepts_the_bound_and_refuses_past_it() {
    // The KRM route reads items line by line: flow collections beyond `[]`/`{}` are refused
    // before any parse, whatever their depth; block nesting goes to the parser.
    assert_accepted(
        &krm(&ingress(Shape::BlockMapping, MAX_NESTING)),
        "KRM block",
    );
    for depth in [MAX_NESTING + 1, MAX_NESTING + 1_000] {
        let out = krm(&ingress(Shape::BlockMapping, depth));
        // The ResourceList's results carry the refusal on stdout, as for every refusal.
        assert_refused(&out, "KRM block", "items[0]", false);
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("severity: error"),
            "no error result"
        );
    }
    for shape in [Shape::FlowSequence, Shape::FlowMapping, Shape::Mixed] {
        let out = krm(&ingress(shape, FAR_PAST));
        assert_eq!(out.status.code(), Some(1), "KRM {shape:?}");
    }
}

#[test]
fn kustomize_plugin_route_accepts_the_bound_and_refuses_past_it() {
    for shape in SHAPES {
        let what = format!("exec plugin {shape:?}");
        let out = kustomize_plugin(&ingress(shape, MAX_NESTING));
        assert_accepted(&out, &what);
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("ingressClassName: \"haproxy\""),
            "{what}: the Ingress was not edited"
        );
        let past = kustomize_plugin(&ingress(shape, MAX_NESTING + 1));
        assert_refused(&past, &what, "document 1", true);
    }
    for shape in [Shape::FlowSequence, Shape::FlowMapping, Shape::Mixed] {
        let what = format!("exec plugin {shape:?} far past");
        let far = kustomize_plugin(&among_others(&ingress(shape, FAR_PAST)));
        assert_refused(&far, &what, "document 12001", true);
    }
    let list_far = kustomize_plugin(&list(FAR_PAST));
    assert_refused(&list_far, "exec plugin List", "document 1", true);
}
