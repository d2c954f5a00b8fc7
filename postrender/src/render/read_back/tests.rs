//! The local read-back proof against the full re-parse check: over every generated
//! Ingress layout, the resolution table, the rendered fixtures and the YAML edge cases,
//! both give the same bytes, outcomes and errors; a splice the local proof accepts is one
//! the full check accepts; and a wrong splice is caught by whichever check runs.

use std::ops::Range;
use std::path::Path;

use proptest::prelude::*;
use styrmin_ingress_rules::{Level, LevelName, Origin, resolve};
use styrmin_test_support::ingress_gen::{self, WORDS};
use styrmin_test_support::rendered::rendered_streams;
use styrmin_test_support::resolution_table::RESOLUTION_TABLE;

use styrmin_ingress_rules::{ClassFields, IngressTarget, ResolvedIngress};

use crate::config::StyrminConfig;
use crate::go_readers::{self, Anchors};
use crate::render::document::*;
use crate::render::enforce::enforce_one;
use crate::render::go_lines::go_lines;
use crate::render::read_back;
use crate::render::read_back::{Checked, ReadBack, Tally};
use crate::render::splice::{spliced_text, write_spliced};
use crate::render::verify::*;
use crate::render::*;
use std::sync::Arc;

use crate::ingress_edit::Edit;
use crate::{documents, yaml_tree};

fn rules(target: IngressTarget) -> RenderRules {
    RenderRules {
        resolved: ResolvedIngress {
            target,
            origin: Origin::Level(LevelName::Cluster),
        },
        kubernetes: None,
        strict: false,
    }
}

/// Every target the rules can give: R3, R4 with classes YAML would misread, R5.
fn targets() -> Vec<RenderRules> {
    let mut out = vec![
        rules(IngressTarget::Dedicated),
        rules(IngressTarget::NoClass),
    ];
    out.extend(WORDS.iter().map(|w| rules(IngressTarget::class(*w))));
    out
}

/// What a render gives that a user or the report can see: the output bytes and each
/// Ingress's outcome, or the error's message.
type Seen = Result<(String, Vec<String>), String>;

/// Renders `input` (one block) with `read_back`; what is seen, and how the edited documents
/// were read back.
fn render_with(input: &str, rules: &RenderRules, read_back: ReadBack) -> (Seen, Tally) {
    let mut tally = Tally::default();
    let documents = documents::split(input);
    let seen = render_documents(input, &documents, rules, read_back, &mut tally)
        .map_err(|e| e.to_string())
        .map(|rendered| {
            let mut out = Vec::new();
            write_spliced([input.as_bytes()], &rendered.changed, &mut out)
                .expect("write to memory");
            (
                String::from_utf8(out).expect("UTF-8 in, UTF-8 out"),
                rendered
                    .ingresses
                    .iter()
                    .map(|o| format!("{o:?}"))
                    .collect(),
            )
        });
    (seen, tally)
}

/// Renders both ways, asserts the same result, and returns the local way's tally.
fn agree(input: &str, rules: &RenderRules) -> Tally {
    let (local, tally) = render_with(input, rules, ReadBack::Local);
    let (full, full_tally) = render_with(input, rules, ReadBack::Full);
    assert_eq!(local, full, "{input}");
    assert_eq!(full_tally.locally, 0);
    assert_eq!(
        tally.locally + tally.fully,
        full_tally.fully,
        "both ways read back the same documents: {input}"
    );
    tally
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 400,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Every generated layout (block with 2 or 4 spaces, flow, JSON-style, LF or CRLF;
    /// fields absent, null, empty, plain, quoted; Lists; other documents) under every target.
    #[test]
    fn local_and_full_read_back_agree_on_generated_streams(stream in ingress_gen::stream(false)) {
        let (text, _) = stream.text();
        for rules in targets() {
            agree(&text, &rules);
        }
    }

    /// A splice the local proof accepts is one the full check accepts, for the planned
    /// edits and for every slip of them by a byte or a character.
    #[test]
    fn local_proof_accepts_only_what_the_full_check_accepts(
        doc in ingress_gen::document(false),
        layout in ingress_gen::layout(),
        class in prop::sample::select(WORDS.to_vec()),
    ) {
        let text = doc.text(&layout);
        for rules in [rules(IngressTarget::class(class)), rules(IngressTarget::Dedicated)] {
            slips_are_caught(&text, &rules);
        }
    }
}

/// One Ingress as the benchmark and most charts write it: R4 replaces `nginx` and inserts
/// the annotation.
const HELM_INGRESS: &str = "---\n# Source: c/templates/ing.yaml\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: web\n  labels:\n    app: web\nspec:\n  ingressClassName: nginx\n  rules:\n  - host: a.example.com\n    http:\n      paths:\n      - path: /\n        pathType: Prefix\n        backend:\n          service: {name: web, port: {number: 80}}\n";

#[test]
fn the_usual_edits_are_proven_in_place() {
    let cases = [
        // R4: a value replaced, an annotation inserted with its `annotations:` line.
        (HELM_INGRESS.to_owned(), rules(IngressTarget::class("on"))),
        // R3: `ingressClassName` removed, the annotation inserted.
        (HELM_INGRESS.to_owned(), rules(IngressTarget::Dedicated)),
        // CRLF, four spaces, a comment after the value.
        (
            "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n    name: web\n    annotations:\n        a: \"off\"\nspec:\n    ingressClassName: nginx  # chart default\n    rules:\n        -   host: a.example.com\n"
                .replace('\n', "\r\n"),
            rules(IngressTarget::class("haproxy")),
        ),
        // A List in the plain form, read item by item.
        (
            format!(
                "apiVersion: v1\nkind: List\nitems:\n{}{}",
                HELM_INGRESS
                    .lines()
                    .skip(2)
                    .enumerate()
                    .map(|(i, l)| if i == 0 { format!("- {l}\n") } else { format!("  {l}\n") })
                    .collect::<String>(),
                "- {apiVersion: v1, kind: ConfigMap, metadata: {name: c}}\n"
            ),
            rules(IngressTarget::class("123")),
        ),
    ];
    for (text, rules) in cases {
        let tally = agree(&text, &rules);
        let seen = render_with(&text, &rules, ReadBack::Local).0;
        assert_eq!(
            tally,
            Tally {
                locally: 1,
                fully: 0
            },
            "{text}{seen:?}"
        );
    }
}

#[test]
fn edits_the_local_proof_does_not_cover_get_the_full_check() {
    let cases = [
        // A flow mapping gets a new entry.
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: a}\nspec: {rules: []}\n",
        // An empty value is rewritten whole.
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: a\n  annotations:\nspec:\n  ingressClassName:\n  rules: []\n",
        // An alias anywhere in the document.
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: &n a\n  labels: {x: *n}\nspec:\n  ingressClassName: nginx\n",
        // A tab in a quoted value.
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: \"a\tb\"\nspec:\n  ingressClassName: nginx\n",
        // A block scalar class.
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: a\n  annotations:\n    kubernetes.io/ingress.class: |\n      x\nspec:\n  ingressClassName: nginx\n",
        // A Unicode line break (NEL) in a comment.
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\n# a\u{85}# b\nmetadata:\n  name: a\nspec:\n  ingressClassName: nginx\n",
    ];
    for text in cases {
        let tally = agree(text, &rules(IngressTarget::class("haproxy")));
        assert_eq!(
            tally,
            Tally {
                locally: 0,
                fully: 1
            },
            "{text}"
        );
    }
    // A plain List whose second Ingress item is a flow mapping that gets a new entry: the
    // first item's proof does not spare the List its full check (its digests are read then).
    let list = "apiVersion: v1\nkind: List\nitems:\n- apiVersion: networking.k8s.io/v1\n  kind: Ingress\n  metadata:\n    name: a\n  spec:\n    ingressClassName: nginx\n- {apiVersion: networking.k8s.io/v1, kind: Ingress, metadata: {name: b}, spec: {}}\n";
    assert!(yaml_tree::plain_list(list).expect("parses").is_some());
    let tally = agree(list, &rules(IngressTarget::class("haproxy")));
    assert_eq!(
        tally,
        Tally {
            locally: 0,
            fully: 1
        },
        "{list}"
    );
}

#[test]
fn local_and_full_read_back_agree_on_the_resolution_table_and_fixtures() {
    let default = Level::default();
    let mut inputs: Vec<String> = rendered_streams()
        .into_iter()
        .map(|(_, path)| std::fs::read_to_string(path).expect("a rendered fixture"))
        .collect();
    let edges = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/yaml-edges");
    for entry in std::fs::read_dir(edges).expect("tests/data/yaml-edges") {
        inputs.push(std::fs::read_to_string(entry.expect("an entry").path()).expect("an edge"));
    }
    inputs.push(HELM_INGRESS.to_owned());
    let mut tally = Tally::default();
    for table in RESOLUTION_TABLE {
        let config = StyrminConfig::from_yaml(&table.config_yaml(), "test").expect("config");
        let rules = RenderRules {
            resolved: resolve(&config.levels(&default)),
            kubernetes: None,
            strict: false,
        };
        for input in &inputs {
            let t = agree(input, &rules);
            tally.locally += t.locally;
            tally.fully += t.fully;
        }
    }
    // The test means something only if both ways run.
    assert!(tally.locally > 0 && tally.fully > 0, "{tally:?}");
}

/// Plans the edits of every Ingress of `text` as the renderer does, then checks the planned
/// edits and every slip of them by one byte or one character: where the local proof
/// accepts, the full check must accept too, and must read back what the local proof says.
fn slips_are_caught(text: &str, rules: &RenderRules) {
    let Ok(Some((root, has_alias))) = yaml_tree::parse_document_noting_aliases(text) else {
        return;
    };
    let mut anchors = Anchors::new(&root);
    let ty = go_readers::go_type(&root, "the top level", &mut anchors);
    let Ok(ingresses) = ingress_nodes(&root, &ty, &mut anchors) else {
        return;
    };
    let name = DocumentName {
        index: 1,
        source: None,
        first_line: 1,
    };
    // Each Ingress's outcome on its own, the last of its own outcomes.
    let mut outcomes = Vec::new();
    let mut planned = Vec::new();
    let mut desired = Vec::new();
    for ingress in &ingresses {
        let mut edits = Vec::new();
        let mut outcome = Outcomes::default();
        let Ok(fields) = enforce_one(text, ingress, &name, rules, &mut outcome, &mut edits) else {
            return;
        };
        outcomes.push(outcome);
        planned.push(edits);
        desired.push(fields);
    }
    let allowed = go_lines(text).is_none() && read_back::document_allows(text, has_alias);
    let check = |edits: &[Vec<Edit>]| {
        let local = allowed
            && ingresses
                .iter()
                .zip(edits)
                .enumerate()
                .all(|(i, (ingress, e))| {
                    proven_as_desired(text, ingress, &outcomes[i], e, &desired[i])
                });
        let mut sorted: Vec<Edit> = edits.iter().flatten().cloned().collect();
        sorted.sort_by_key(|e| (e.range.start, e.range.end));
        let valid = sorted
            .windows(2)
            .all(|p| p[0].range.end <= p[1].range.start)
            && sorted.iter().all(|e| {
                text.is_char_boundary(e.range.start) && text.is_char_boundary(e.range.end)
            });
        if !valid {
            return;
        }
        let full = check_edits(text, &root, &ingresses, &sorted, &desired, false);
        match check_edits(text, &root, &ingresses, &sorted, &desired, local) {
            Ok(Checked::Locally) => assert!(
                full.is_ok(),
                "the local proof accepted what the full check refuses ({full:?}):\n{}",
                spliced_text(text, &sorted)
            ),
            other => assert_eq!(other.is_ok(), full.is_ok()),
        }
    };
    check(&planned);
    for (i, edits) in planned.iter().enumerate() {
        for (j, edit) in edits.iter().enumerate() {
            for slip in slips(text, edit) {
                let mut slipped = planned.clone();
                slipped[i][j] = slip;
                check(&slipped);
            }
        }
    }
}

/// `edit` moved or stretched by one byte at either end, and its text with one character
/// more, less or changed.
fn slips(text: &str, edit: &Edit) -> Vec<Edit> {
    let r = &edit.range;
    let mut out = Vec::new();
    let mut with = |range: Range<usize>, text: String| {
        out.push(Edit {
            range,
            text: text.into(),
        });
    };
    for (start, end) in [
        (r.start.wrapping_sub(1), r.end),
        (r.start + 1, r.end),
        (r.start, r.end.wrapping_sub(1)),
        (r.start, r.end + 1),
        (r.start.wrapping_sub(1), r.end.wrapping_sub(1)),
        (r.start + 1, r.end + 1),
    ] {
        if start <= end && end <= text.len() {
            with(start..end, edit.text.to_string());
        }
    }
    let t = &edit.text;
    if let Some(last) = t.chars().last() {
        with(r.clone(), t[..t.len() - last.len_utf8()].to_owned());
    }
    if let Some(first) = t.chars().next() {
        with(r.clone(), t[first.len_utf8()..].to_owned());
    }
    for extra in [" ", "\n", "x", "\"", "#"] {
        with(r.clone(), format!("{t}{extra}"));
        with(r.clone(), format!("{extra}{t}"));
    }
    with(r.clone(), t.replacen('"', "", 2));
    with(r.clone(), t.replacen(' ', "", 1));
    with(r.clone(), t.replacen(':', "", 1));
    out
}

#[test]
fn an_edit_off_by_one_is_caught_by_either_check() {
    let text = HELM_INGRESS;
    let (root, has_alias) = yaml_tree::parse_document_noting_aliases(text)
        .expect("parses")
        .expect("a node");
    let ingresses = [&root];
    let desired = [Arc::new(styrmin_ingress_rules::example_targets::fields(
        Some("on"),
        Some("on"),
    ))];
    let value = text.find("nginx").expect("the class");
    let good = Edit {
        range: value..value + "nginx".len(),
        text: "\"on\"".into(),
    };
    let at = text.find("  name: web").expect("metadata's first key");
    let insert = Edit {
        range: at..at,
        text: "  annotations:\n    kubernetes.io/ingress.class: \"on\"\n".into(),
    };
    let before = ClassFields {
        ingress_class_name: Some("nginx".to_owned()),
        class_annotation: None,
    };
    let proven = |edits: &[Edit]| {
        // What the renderer asks of the document too.
        read_back::document_allows(text, has_alias)
            && read_back::proven_as(text, &root, &before, &desired[0], edits)
    };
    let both = [insert.clone(), good.clone()];
    assert!(proven(&both));
    assert_eq!(
        check_edits(text, &root, &ingresses, &both, &desired, true),
        Ok(Checked::Locally)
    );
    for wrong in [
        // Eats the space after the `:`: `ingressClassName:"on"` is one plain scalar.
        value - 1..value + 5,
        // Eats the line break: the next key joins the value's line.
        value..value + 6,
        // Leaves the `x` of `nginx`.
        value..value + 4,
    ] {
        let slipped = [
            insert.clone(),
            Edit {
                range: wrong,
                text: good.text.clone(),
            },
        ];
        assert!(!proven(&slipped));
        for local in [true, false] {
            let local = local && proven(&slipped);
            let checked = check_edits(text, &root, &ingresses, &slipped, &desired, local);
            assert!(checked.is_err(), "{checked:?}");
        }
    }
    // An insertion one line too late lands inside `name`'s entry line.
    let late = text.find("  labels:").expect("labels");
    let slipped = [
        Edit {
            range: late + 1..late + 1,
            text: insert.text.clone(),
        },
        good,
    ];
    assert!(!proven(&slipped));
    for local in [proven(&slipped), false] {
        assert!(check_edits(text, &root, &ingresses, &slipped, &desired, local).is_err());
    }
}
