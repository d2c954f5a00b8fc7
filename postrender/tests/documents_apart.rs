//! Documents rendered apart, each where it lies (the KRM route's items), give the answer of
//! the stream they are documents of, and share their edits' texts.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use styrmin_ingress_rules::IngressTarget;
use styrmin_postrender::documents::{self, Document};
use styrmin_postrender::ingress_edit::Edit;
use styrmin_postrender::render::threads::MAX_BLOCKS_IN_FLIGHT;
use styrmin_postrender::render::{Rendered, may_hold_ingress, render_documents_apart};
use styrmin_postrender::streaming::{BLOCK_BYTES, StreamRendered, render_stream};
use styrmin_test_support::rendered::{SMALL_INGRESS, mixed_stream};

mod support;

use support::rules_for;

/// What a rendering found, as text: each changed document's number and new text, the
/// Ingresses' names, or the first error; every line number written as `line _` (the
/// documents rendered apart count their own lines).
fn answer(text: &str, rendered: Result<Rendered, String>) -> String {
    let out = match rendered {
        Ok(rendered) => {
            let mut out = String::new();
            for changed in &rendered.changed {
                let before = &text[changed.document.range.clone()];
                out.push_str(&format!(
                    "{}: {}\n",
                    changed.document.index,
                    changed.text(before)
                ));
            }
            for o in rendered.ingresses.iter() {
                out.push_str(&format!("{} {}\n", o.document, o.ingress));
            }
            out
        }
        Err(error) => format!("error: {error}"),
    };
    let mut masked = String::new();
    let mut rest = out.as_str();
    while let Some(at) = rest.find("line ") {
        masked.push_str(&rest[..at + "line ".len()]);
        rest = rest[at + "line ".len()..].trim_start_matches(|c: char| c.is_ascii_digit());
        masked.push('_');
    }
    masked.push_str(rest);
    masked
}

#[test]
fn documents_rendered_apart_give_the_streams_answer() {
    let mut bad = mixed_stream(30);
    bad.push_str("---\n# Source: c/templates/bad.yaml\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: [\n");
    bad.push_str(&mixed_stream(9));
    let no_class = rules_for(IngressTarget::NoClass, true);
    let strict = format!(
        "{}---\n{}",
        mixed_stream(10),
        SMALL_INGRESS.replace("rules: []", "rules: []\n  ingressClassName: x")
    );
    let not_utf8 = format!("{}---\nkind: Service\nx: \u{e9}\n", mixed_stream(6));
    for (input, rules) in [
        (
            mixed_stream(41),
            rules_for(IngressTarget::class("nginx"), false),
        ),
        (bad, rules_for(IngressTarget::class("nginx"), false)),
        (strict, no_class),
        (
            not_utf8.clone(),
            rules_for(IngressTarget::class("nginx"), false),
        ),
    ] {
        let expected = answer(
            &input,
            render_stream(input.as_bytes(), &rules, BLOCK_BYTES)
                .map(StreamRendered::into_rendered)
                .map_err(|e| e.to_string()),
        );
        let all = documents::split(&input);
        let got = render_documents_apart(input.as_bytes(), &all, &rules).map_err(|e| e.to_string());
        assert_eq!(answer(&input, got), expected);
        // Set aside the documents that cannot hold an Ingress: the same answer.
        let candidates: Vec<Document> = all
            .iter()
            .filter(|d| may_hold_ingress(&input.as_bytes()[d.range.clone()]))
            .cloned()
            .collect();
        assert!(candidates.len() < all.len());
        let got = render_documents_apart(input.as_bytes(), &candidates, &rules)
            .map_err(|e| e.to_string());
        assert_eq!(answer(&input, got), expected);
    }
    // A byte that is not UTF-8 is named by its offset in the text.
    let mut bytes = not_utf8.into_bytes();
    let at = bytes.len() - 3;
    bytes[at] = 0xff;
    let mut all = documents::split(std::str::from_utf8(&bytes[..at]).unwrap_or_default());
    if let Some(last) = all.last_mut() {
        last.range.end = bytes.len();
    }
    let error = render_documents_apart(
        &bytes,
        &all,
        &rules_for(IngressTarget::class("nginx"), false),
    )
    .map(|_| ())
    .map_err(|e| e.to_string());
    assert!(
        error
            .as_ref()
            .is_err_and(|e| e.contains(&format!("offset {at}"))),
        "{error:?}"
    );
}

#[test]
fn the_ingresses_of_a_list_and_of_documents_apart_share_their_edit_texts() {
    let ingress = |i: usize, indent: &str| {
        format!(
            "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: web-{i}\nspec:\n  ingressClassName: nginx\n"
        )
        .lines()
        .map(|line| format!("{indent}{line}\n"))
        .collect::<String>()
    };
    let items: String = (0..200)
        .map(|i| format!("- {}", &ingress(i, "  ")[2..]))
        .collect();
    let list = format!("apiVersion: v1\nkind: List\nitems:\n{items}");
    let rules = rules_for(IngressTarget::class("haproxy"), false);
    // The distinct texts kept, against the edits.
    let texts = |rendered: &Rendered| {
        let edits: Vec<&Edit> = rendered.changed.iter().flat_map(|c| &c.edits).collect();
        let mut kept: Vec<*const u8> = edits.iter().map(|e| e.text.as_ptr()).collect();
        kept.sort();
        kept.dedup();
        (edits.len(), kept.len())
    };
    let list = render_stream(list.as_bytes(), &rules, BLOCK_BYTES).expect("renders");
    // The annotation added and the class replaced, for every item: two texts in all.
    assert_eq!(texts(&list.rendered), (400, 2));

    let stream: String = (0..200)
        .map(|i| format!("---\n{}", ingress(i, "")))
        .collect();
    let documents = documents::split(&stream);
    let apart = render_documents_apart(stream.as_bytes(), &documents, &rules).expect("renders");
    // Two texts for each thread that rendered some of them.
    let (edits, kept) = texts(&apart);
    assert_eq!(edits, 400);
    assert!(kept <= 2 * MAX_BLOCKS_IN_FLIGHT, "{kept} texts kept");
}
