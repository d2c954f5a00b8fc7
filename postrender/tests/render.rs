//! The rules on small streams through the filter's pipeline: only the Ingress changes (R3,
//! R7), the output is a fixed point (R8), Ingresses inside a List (R6), R5 and R9, and errors
//! that name the document and its source.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use styrmin_postrender::render::{RenderRules, Rendered};
use styrmin_postrender::streaming::{BLOCK_BYTES, StreamError, StreamRendered, render_stream};
use styrmin_postrender::yaml_tree;

mod support;

use support::{class, dedicated, no_class};

/// A stream already in memory, through the filter's pipeline.
fn render(input: &[u8], rules: &RenderRules) -> Result<Rendered, StreamError> {
    render_stream(input, rules, BLOCK_BYTES).map(StreamRendered::into_rendered)
}

/// What the filter writes for `input`.
fn run(input: &str, rules: &RenderRules) -> String {
    let stream = render_stream(input.as_bytes(), rules, BLOCK_BYTES).unwrap();
    let mut out = Vec::new();
    stream.write(&mut out).unwrap();
    String::from_utf8(out).unwrap()
}

/// A ConfigMap whose value mentions an Ingress, an Ingress of class `nginx`, and a Traefik
/// IngressRoute with the class annotation.
const STREAM: &str = "---\n# Source: c/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\ndata:\n  x: |\n    kind: Ingress\n    ingressClassName: nope\n---\n# Source: c/templates/ing.yaml\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: web\nspec:\n  ingressClassName: nginx\n  rules: []\n---\n# Source: c/templates/route.yaml\napiVersion: traefik.io/v1alpha1\nkind: IngressRoute\nmetadata:\n  annotations:\n    kubernetes.io/ingress.class: traefik-internal\n";

#[test]
fn r3_r7_only_the_ingress_changes() {
    let out = run(STREAM, &dedicated());
    let expected = STREAM.replace(
        "metadata:\n  name: web\nspec:\n  ingressClassName: nginx\n  rules: []\n",
        "metadata:\n  annotations:\n    kubernetes.io/ingress.class: \"traefik\"\n  name: web\nspec:\n  rules: []\n",
    );
    assert_eq!(out, expected);
}

#[test]
fn r8_output_is_a_fixed_point() {
    for rules in [dedicated(), class("nginx"), class("on"), no_class()] {
        let once = run(STREAM, &rules);
        let rendered = render(once.as_bytes(), &rules).unwrap();
        assert!(rendered.changed.is_empty(), "{once}");
    }
}

#[test]
fn r6_ingress_inside_a_list() {
    let input = "apiVersion: v1\nkind: List\nitems:\n  - apiVersion: extensions/v1beta1\n    kind: Ingress\n    metadata:\n      name: a\n    spec:\n      backend: {serviceName: a, servicePort: 80}\n  - apiVersion: v1\n    kind: ConfigMap\n    metadata:\n      name: a\n";
    let out = run(input, &class("nginx"));
    assert!(out.contains("    metadata:\n      annotations:\n        kubernetes.io/ingress.class: \"nginx\"\n      name: a\n    spec:\n      ingressClassName: \"nginx\"\n"), "{out}");
    assert!(
        out.ends_with("  - apiVersion: v1\n    kind: ConfigMap\n    metadata:\n      name: a\n")
    );
}

/// A List read item by item (in one reading where it is in the common layout) gives what the
/// whole-tree way gives: edits, outcomes and errors alike. A tab anywhere sends a List the
/// whole-tree way; `ingresses` is how many Ingresses both must find.
fn assert_list_ways_agree(plain: &str, ingresses: usize) {
    let tree = format!("#\tread whole\n{plain}");
    for rules in [class("on"), dedicated(), no_class()] {
        let out = run(plain, &rules);
        assert_eq!(format!("#\tread whole\n{out}"), run(&tree, &rules));
        let a = render(plain.as_bytes(), &rules).unwrap();
        let b = render(tree.as_bytes(), &rules).unwrap();
        let names = |r: &Rendered| {
            r.ingresses
                .iter()
                .map(|o| {
                    (
                        o.ingress.0.to_owned(),
                        o.before.clone(),
                        o.after.clone(),
                        o.edited,
                    )
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(names(&a), names(&b), "{plain}");
        assert_eq!(a.ingresses.len(), ingresses, "{plain}");
    }
    let bad = plain.replace("ingressClassName: old", "ingressClassName: {x: 1}");
    let err = |t: &str| render(t.as_bytes(), &class("on")).map(|r| r.ingresses.len());
    match (err(&bad), err(&format!("#\tx\n{bad}"))) {
        (Err(a), Err(b)) => assert_eq!(
            a.to_string().replace("line 1", "line 2"),
            b.to_string().replace("line 1", "line 2")
        ),
        (a, b) => assert_eq!(a.unwrap(), b.unwrap(), "{bad}"),
    }
}

#[test]
fn r6_list_read_item_by_item_gives_the_whole_tree_answer() {
    let items: String = (0..6)
        .map(|i| match i % 3 {
            0 => format!("  - apiVersion: networking.k8s.io/v1\n    kind: Ingress\n    metadata: {{name: a{i}}}\n    spec:\n      ingressClassName: old\n"),
            1 => format!("  - {{apiVersion: v1, kind: ConfigMap, metadata: {{name: c{i}}}}}\n"),
            _ => format!("  - apiVersion: extensions/v1beta1\n    kind: Ingress\n    metadata:\n      name: b{i}\n      annotations: {{kubernetes.io/ingress.class: x}}\n    spec: {{}}\n"),
        })
        .collect();
    let plain = format!("apiVersion: v1\nkind: List\nitems:\n{items}metadata: {{}}\n");
    assert!(yaml_tree::plain_list(&plain).unwrap().is_some());
    assert_list_ways_agree(&plain, 4);
    // The kind known only after the items: they are rendered while read, provisionally.
    assert_list_ways_agree(
        &format!("items:\n{items}metadata: {{}}\nkind: List\napiVersion: v1\n"),
        4,
    );
    // A List whose items hold no Ingress by Go's readers: what was read provisionally goes.
    for top in [
        "apiVersion: v1\nkind: ConfigMapList\n",
        "apiVersion: v2\nkind: List\n",
    ] {
        assert_list_ways_agree(&format!("items:\n{items}{top}"), 0);
        assert_list_ways_agree(&format!("{top}items:\n{items}"), 0);
    }
    // Not a plain List (two `kind`s): the whole-tree way for both.
    let twice = format!("apiVersion: v1\nkind: List\nitems:\n{items}kind: List\n");
    assert!(render(twice.as_bytes(), &class("on")).is_err());
    // Past the common layout (a block scalar), the general parser reads the items.
    let block =
        "  - apiVersion: v1\n    kind: ConfigMap\n    data:\n      x: |\n        - kind: Ingress\n";
    assert_list_ways_agree(
        &format!("apiVersion: v1\nkind: List\nitems:\n{items}{block}{items}"),
        8,
    );
}

#[test]
fn r6_escaped_kind_is_still_an_ingress() {
    // The pre-filter must not skip a kind spelled with a double-quoted escape.
    let input = "apiVersion: networking.k8s.io/v1\nkind: \"\\x49ngress\"\nmetadata: {name: a}\nspec: {rules: []}\n";
    assert!(!input.contains("Ingress"));
    let out = run(input, &class("nginx"));
    assert!(out.contains("ingressClassName: \"nginx\""), "{out}");
    let list = "apiVersion: v1\nkind: \"L\\x69st\"\nitems:\n- {apiVersion: networking.k8s.io/v1, kind: \"\\u0049ngress\", metadata: {name: a}, spec: {rules: []}}\n";
    let out = run(list, &class("nginx"));
    assert!(out.contains("ingressClassName: \"nginx\""), "{out}");
}

#[test]
fn r7_other_groups_named_ingress_are_untouched() {
    let input =
        "apiVersion: voyager.appscode.com/v1beta1\nkind: Ingress\nspec:\n  ingressClassName: x\n";
    assert_eq!(run(input, &dedicated()), input);
}

#[test]
fn r5_keeps_plain_ambiguous_values_as_written() {
    // Found by the property tests: R5 re-quoted a plain `on` or `123` (a YAML 1.1
    // boolean or a number to Helm's reader) although it leaves the chart's fields exactly
    // as they are. R4 still writes its class double-quoted.
    for value in ["on", "no", "123", "true"] {
        let input = format!(
            "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: a\n  annotations:\n    kubernetes.io/ingress.class: {value}\nspec:\n  ingressClassName: {value}\n"
        );
        let rendered = render(input.as_bytes(), &no_class()).unwrap();
        assert!(rendered.changed.is_empty(), "{value}");
        assert!(
            rendered.ingresses.iter().next().is_some_and(|o| !o.edited),
            "{value}"
        );
        assert_eq!(run(&input, &no_class()), input);
        let out = run(&input, &class(value));
        assert!(
            out.contains(&format!("ingressClassName: \"{value}\"")),
            "{out}"
        );
    }
}

#[test]
fn r5_leaves_the_chart_alone_and_warns_only_without_class() {
    let rendered = render(STREAM.as_bytes(), &no_class()).unwrap();
    assert!(rendered.changed.is_empty());
    assert_eq!(rendered.warnings().count(), 0);
    let classless = "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: bare\nspec:\n  rules: []\n";
    let rendered = render(classless.as_bytes(), &no_class()).unwrap();
    let warned: Vec<_> = rendered
        .warnings()
        .map(|o| o.ingress.0.to_owned())
        .collect();
    assert_eq!(warned, vec!["bare".to_owned()]);
    let strict = RenderRules {
        strict: true,
        ..no_class()
    };
    let err = render(classless.as_bytes(), &strict)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("document 1") && err.contains("bare") && err.contains("default IngressClass"),
        "{err}"
    );
}

#[test]
fn errors_name_the_document_and_its_source() {
    let input = "---\n# Source: c/templates/ok.yaml\nkind: ConfigMap\n---\n# Source: c/templates/bad.yaml\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: [unclosed\n";
    let err = render(input.as_bytes(), &dedicated())
        .unwrap_err()
        .to_string();
    assert!(err.contains("document 2 (c/templates/bad.yaml)"), "{err}");
    assert!(err.contains("line 8"), "{err}");
}

#[test]
fn errors_name_the_helm4_filename() {
    let input = "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: x\n  annotations:\n    postrenderer.helm.sh/postrender-filename: c/templates/ing.yaml\nspec:\n  ingressClassName: {bad: 1}\n";
    let err = render(input.as_bytes(), &dedicated())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(
            "document 1 (c/templates/ing.yaml): Ingress x: spec.ingressClassName must be a string"
        ),
        "{err}"
    );
}

#[test]
fn invalid_utf8_is_an_error() {
    let mut input = b"---\nkind: A\n---\nkind: B\n".to_vec();
    input.push(0xff);
    let err = render(&input, &dedicated()).unwrap_err().to_string();
    assert!(err.contains("UTF-8") && err.contains("document 2"), "{err}");
}

#[test]
fn r9_old_kubernetes_is_an_error() {
    let rules = RenderRules {
        kubernetes: Some("1.26".parse().unwrap()),
        ..class("nginx")
    };
    let input =
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: a}\nspec: {rules: []}\n";
    let err = render(input.as_bytes(), &rules).unwrap_err().to_string();
    assert!(err.contains("Kubernetes 1.26"), "{err}");
}
