//! The common-layout reader against the general parser: wherever the reader gives a tree,
//! it is the general parser's tree, node for node (values, styles, spans, lines, columns);
//! and it does give one for the documents charts render.

use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use styrmin_test_support::ingress_gen;

use crate::documents;
use crate::yaml_tree::{Node, NodeValue, common_layout, parse_with_parser};

/// Checks one document; whether the reader took it.
fn agrees(text: &str) -> bool {
    plain_list_agrees(text);
    let Some(fast) = common_layout::read(text) else {
        return false;
    };
    match parse_with_parser(text) {
        Ok(Some((general, false))) if same(&fast, &general) => {}
        Ok(Some((general, false))) => {
            let (fast, general) = (format!("{fast:#?}"), format!("{general:#?}"));
            if let Some(at) = fast.lines().zip(general.lines()).position(|(a, b)| a != b) {
                let around = |tree: &str| {
                    tree.lines()
                        .skip(at.saturating_sub(12))
                        .take(14)
                        .collect::<Vec<_>>()
                        .join("\n")
                };
                panic!(
                    "the two trees differ for {text:?}\nreader:\n{}\nparser:\n{}",
                    around(&fast),
                    around(&general)
                );
            }
            panic!("the two trees differ for {text:?}");
        }
        other => panic!(
            "the reader took {text:?}, the general parser gives {}",
            match other {
                Ok(Some((_, aliases))) => format!("a tree (aliases: {aliases})"),
                Ok(None) => "no tree".to_owned(),
                Err(e) => e.to_string(),
            }
        ),
    }
    true
}

/// Where the common layout reads a document's top level as a List (or as not one), the
/// parser reads it the same.
fn plain_list_agrees(text: &str) {
    let quick = match common_layout::plain_list_read_once(text, &mut |_, _| true) {
        crate::yaml_tree::ReadOnce::Plain(list) => Some(Some(list)),
        crate::yaml_tree::ReadOnce::NotPlain => Some(None),
        crate::yaml_tree::ReadOnce::Unsettled => None,
    };
    if let Some(quick) = quick {
        assert_eq!(
            Ok(quick),
            crate::yaml_tree::plain_list_parsed(text),
            "{text:?}"
        );
    }
}

/// Node for node the same tree.
fn same(a: &Node<'_>, b: &Node<'_>) -> bool {
    let facts = |n: &Node<'_>| {
        (
            n.span.clone(),
            n.start_with_tag,
            n.anchor,
            n.anchored,
            n.line,
            n.column,
        )
    };
    facts(a) == facts(b)
        && match (&a.value, &b.value) {
            (
                NodeValue::Scalar { text, style, tag },
                NodeValue::Scalar {
                    text: t,
                    style: s,
                    tag: g,
                },
            ) => text == t && style == s && tag == g,
            (
                NodeValue::Mapping { flow, entries },
                NodeValue::Mapping {
                    flow: f,
                    entries: e,
                },
            ) => {
                flow == f
                    && entries.len() == e.len()
                    && entries
                        .iter()
                        .zip(e)
                        .all(|((k, v), (l, w))| same(k, l) && same(v, w))
            }
            (NodeValue::Sequence { flow, items }, NodeValue::Sequence { flow: f, items: i }) => {
                flow == f && items.len() == i.len() && items.iter().zip(i).all(|(x, y)| same(x, y))
            }
            (NodeValue::Alias(x), NodeValue::Alias(y)) => x == y,
            _ => false,
        }
}

/// The documents of a stream, as the post-renderer hands them to the parse.
fn documents_of(stream: &str) -> Vec<&str> {
    documents::split(stream)
        .into_iter()
        .map(|d| &stream[d.range])
        .collect()
}

/// Ingresses as the benchmark generator and Helm render them.
const INGRESSES: [&str; 3] = [
    "---\n# Source: umbrella/charts/app1/templates/ingress.yaml\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: app1-20\n  labels:\n    app.kubernetes.io/name: app1\n    app.kubernetes.io/instance: demo\n  annotations:\n    nginx.ingress.kubernetes.io/proxy-buffering: \"off\"\nspec:\n  ingressClassName: nginx\n  tls:\n    - hosts: [\"app1.example.com\"]\n      secretName: app1-tls\n  rules:\n    - host: \"app1.example.com\"\n      http:\n        paths:\n          - path: /\n            pathType: Prefix\n            backend:\n              service:\n                name: app1-20\n                port:\n                  number: 80\n",
    "---\n# Source: c/templates/ing7.yaml\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: web-7\n  labels:\n    app: web\nspec:\n  ingressClassName: nginx\n  rules:\n  - host: a7.example.com\n    http:\n      paths:\n      - path: /\n        pathType: Prefix\n        backend:\n          service: {name: web, port: {number: 80}}\n",
    "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: 'web'   # a comment\n  annotations:\n    kubernetes.io/ingress.class: nginx\n    note: two words and more # c\n    url: http://example.com:8080/a?b=c&d=e\n\n# between\nspec:\n  rules: []\n  tls: [{hosts: [a, 'b', \"c\"], secretName: s}]\n  defaultBackend: {}\n",
];

#[test]
fn the_reader_takes_the_ingresses_charts_render() {
    for text in INGRESSES {
        assert!(agrees(text), "not taken: {text}");
    }
}

#[test]
fn rendered_charts_read_the_same() {
    let (mut taken, mut ingresses, mut ingresses_taken) = (0, 0, 0);
    for (name, path) in styrmin_test_support::rendered::rendered_streams() {
        let stream = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        for text in documents_of(&stream) {
            let took = agrees(text);
            taken += usize::from(took);
            if text.contains("\nkind: Ingress") {
                ingresses += 1;
                ingresses_taken += usize::from(took);
                if !took {
                    eprintln!("NOT TAKEN {name}:\n{text}");
                }
            }
        }
    }
    // Most of what charts render is in the common layout, their Ingresses above all.
    assert!(taken > 100, "only {taken} documents taken");
    assert!(
        ingresses_taken * 10 >= ingresses * 9,
        "{ingresses_taken} of {ingresses} Ingresses taken"
    );
}

#[test]
fn yaml_edge_files_read_the_same() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/yaml-edges");
    for entry in std::fs::read_dir(dir).expect("yaml-edges") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "yaml") {
            let stream = std::fs::read_to_string(&path).expect("read");
            for text in documents_of(&stream) {
                agrees(text);
            }
        }
    }
}

#[test]
fn the_yaml_test_suite_reads_the_same() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../e2e/tests/data/yaml-test-suite/cases.json");
    let cases: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(path).expect("cases.json")).expect("json");
    let mut taken = 0;
    for case in &cases {
        let yaml = case["yaml"].as_str().expect("yaml");
        for text in documents_of(yaml) {
            taken += usize::from(agrees(text));
        }
    }
    assert!(taken > 50, "only {taken} cases taken");
}

/// Calls `each` with every document of 3,000 generated streams (every layout).
fn generated_documents(seed: u8, mut each: impl FnMut(&str)) {
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &[seed; 32]),
    );
    let strategy = ingress_gen::stream(true);
    for _ in 0..3000 {
        let (text, _) = strategy
            .new_tree(&mut runner)
            .expect("a stream")
            .current()
            .text();
        documents_of(&text).into_iter().for_each(&mut each);
    }
}

#[test]
fn generated_layouts_read_the_same() {
    let mut taken = 0;
    generated_documents(7, |document| taken += usize::from(agrees(document)));
    assert!(taken > 1000, "only {taken} generated documents taken");
}

/// Bytes that change how YAML reads a line.
const CHANGES: &[u8] = b" \n\t#:-,'\"{}[]&*!|>?%@`.a0\\";

/// Every one-byte change of a document: each byte removed, replaced and preceded by each
/// byte of [`CHANGES`].
fn one_byte_changes(text: &str) -> impl Iterator<Item = String> + '_ {
    let bytes = text.as_bytes();
    (0..=bytes.len()).flat_map(move |i| {
        let removed = (i < bytes.len()).then(|| [&bytes[..i], &bytes[i + 1..]].concat());
        let edits = CHANGES.iter().flat_map(move |&c| {
            let inserted = [&bytes[..i], &[c], &bytes[i..]].concat();
            let replaced = (i < bytes.len()).then(|| [&bytes[..i], &[c], &bytes[i + 1..]].concat());
            std::iter::once(inserted).chain(replaced)
        });
        removed
            .into_iter()
            .chain(edits)
            .filter_map(|b| String::from_utf8(b).ok())
    })
}

#[test]
fn every_one_byte_change_reads_the_same_or_is_left_to_the_parser() {
    let mut taken = 0;
    let mut left = 0;
    for text in INGRESSES {
        for changed in one_byte_changes(text) {
            if agrees(&changed) {
                taken += 1;
            } else {
                left += 1;
            }
        }
    }
    // Both sides are reached: many changes keep the layout, many leave it.
    assert!(taken > 1000 && left > 1000, "taken {taken}, left {left}");
}

/// The items a List hands over, with their indexes, and whether it ended without error:
/// by the common layout first (`quick`), or by the general parser alone.
fn list_items(text: &str, quick: bool) -> (Vec<(usize, Node<'_>)>, bool) {
    let mut items = Vec::new();
    let collect = |index, item| {
        items.push((index, item));
        Ok::<(), ()>(())
    };
    let ended = if quick {
        crate::yaml_tree::for_each_list_item(text, collect)
    } else {
        crate::yaml_tree::for_each_list_item_parsed(text, 0, collect)
    };
    (items, ended.is_ok())
}

/// Checks a List; whether the common layout read all of it.
fn list_agrees(text: &str) -> bool {
    plain_list_agrees(text);
    if !matches!(crate::yaml_tree::plain_list(text), Ok(Some(_))) {
        return false;
    }
    let (quick, quick_ended) = list_items(text, true);
    let (parsed, parsed_ended) = list_items(text, false);
    assert_eq!(quick_ended, parsed_ended, "{text:?}");
    assert_eq!(quick.len(), parsed.len(), "{text:?}");
    for ((i, a), (j, b)) in quick.iter().zip(&parsed) {
        assert!(i == j && same(a, b), "item {i} differs for {text:?}");
    }
    common_layout::for_each_list_item(text, &mut |_| true).is_ok()
}

/// A List of Ingresses as the benchmark generator writes it, with an item between.
fn bench_list(between: &str) -> String {
    let item = |i: usize| {
        format!(
            "- apiVersion: networking.k8s.io/v1\n  kind: Ingress\n  metadata:\n    name: web-{i}\n  spec:\n    ingressClassName: nginx\n    rules:\n    - host: a{i}.example.com\n      http:\n        paths:\n        - path: /\n          pathType: Prefix\n          backend:\n            service: {{name: web, port: {{number: 80}}}}\n"
        )
    };
    format!(
        "# Source: c/templates/list.yaml\napiVersion: v1\nkind: List\nitems:\n{}{between}{}metadata:\n  resourceVersion: \"\"\n",
        item(0) + &item(1),
        item(2)
    )
}

#[test]
fn lists_hand_over_the_same_items() {
    assert!(
        list_agrees(&bench_list("")),
        "the common List is read whole"
    );
    // The common layout stops at a block scalar in the middle: the parser hands over the
    // rest, each item once, in order.
    let stopped = bench_list("- kind: ConfigMap\n  data:\n    a: |\n      text\n");
    assert!(!list_agrees(&stopped));
    assert_eq!(list_items(&stopped, true).0.len(), 4);
    // Indented items, a flow `items`, comments between.
    let indented = bench_list("")
        .replace("items:\n", "items: # c\n\n")
        .replace("\n- ", "\n  - ");
    list_agrees(&indented);
    list_agrees("apiVersion: v1\nkind: List\nitems: [{kind: Ingress}, {kind: Service}]\n");
}

#[test]
fn generated_lists_hand_over_the_same_items() {
    let mut taken = 0;
    generated_documents(11, |document| taken += usize::from(list_agrees(document)));
    assert!(taken > 50, "only {taken} generated Lists read whole");
}

#[test]
fn every_one_byte_change_of_a_list_hands_over_the_same_items() {
    let list = bench_list("");
    let mut whole = 0;
    for changed in one_byte_changes(&list) {
        whole += usize::from(list_agrees(&changed));
    }
    assert!(whole > 1000, "only {whole} changed Lists read whole");
}
