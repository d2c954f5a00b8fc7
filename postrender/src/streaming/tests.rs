//! The streaming pipeline's own parts: where a block is cut, the documents rendered apart,
//! and the splice in place. What the pipeline answers as a whole is tested through its public
//! functions in `tests/streaming.rs`.

use styrmin_ingress_rules::{IngressTarget, LevelName, Origin, ResolvedIngress};
use styrmin_test_support::rendered::{SMALL_INGRESS, mixed_stream};

use super::*;

/// The rules when the cluster level decides `target`. A test-shape pair with `rules_for` of
/// `tests/support/mod.rs`, which a unit test module cannot reach.
fn rules_for(target: IngressTarget, strict: bool) -> RenderRules {
    RenderRules {
        resolved: ResolvedIngress {
            target,
            origin: Origin::Level(LevelName::Cluster),
        },
        kubernetes: None,
        strict,
    }
}

/// The cut as the whole split of the block's complete lines finds it.
fn cut_by_the_whole_split(block: &[u8]) -> Option<usize> {
    let complete_lines = memchr::memrchr(b'\n', block)? + 1;
    let text = match std::str::from_utf8(&block[..complete_lines]) {
        Ok(text) => text,
        Err(e) => std::str::from_utf8(&block[..e.valid_up_to()]).ok()?,
    };
    let mut documents = documents::split(text);
    let last = documents.pop()?;
    (!documents.is_empty() && last.range.start > 0).then_some(last.range.start)
}

#[test]
fn the_cut_from_the_tail_is_the_cut_of_the_whole_split() {
    let mut streams = vec![
        mixed_stream(41),
        format!("\u{feff}# prologue\n%YAML 1.2\n{}", mixed_stream(9)),
        format!("{}...\n# only comments after an end\n", mixed_stream(9)),
        "a: 1\n...\nb: 2\n...\n# c\n---\nc: 3\n--- |\n  x\n---\n".to_owned(),
    ];
    for stream in &mut streams {
        stream.push_str("---\nlast: 1\n");
    }
    // (Text that is not UTF-8 may be cut elsewhere; the error it gives is the same,
    // see `invalid_utf8_is_reported_at_its_offset_in_the_stream`.)
    let blocks: Vec<Vec<u8>> = streams.into_iter().map(String::into_bytes).collect();
    for block in &blocks {
        for end in 0..=block.len() {
            let prefix = &block[..end];
            assert_eq!(
                last_complete_cut(prefix).map(|(cut, _)| cut),
                cut_by_the_whole_split(prefix),
                "{:?}",
                String::from_utf8_lossy(prefix)
            );
        }
    }
}

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
            .filter(|d| render::may_hold_ingress(&input.as_bytes()[d.range.clone()]))
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

/// The changed documents of a block from edits given as (start, end, text) over the
/// whole block, cut into documents at `cuts` (each edit inside one document).
fn changed_documents(
    len: usize,
    cuts: &[usize],
    edits: &[(usize, usize, String)],
) -> Vec<render::ChangedDocument> {
    let mut bounds = vec![0];
    bounds.extend(cuts.iter().copied().filter(|&c| c > 0 && c < len));
    bounds.push(len);
    bounds.dedup();
    if bounds.len() == 1 {
        bounds.push(len);
    }
    let mut changed: Vec<render::ChangedDocument> = Vec::new();
    for (start, end, text) in edits {
        // The document the edit starts in (an insertion at the very end: the last).
        let Some(index) = bounds
            .windows(2)
            .position(|b| b[0] <= *start && (*start < b[1] || b[1] == len))
        else {
            continue;
        };
        let range = bounds[index]..bounds[index + 1];
        if *end > range.end {
            continue;
        }
        let edit = crate::ingress_edit::Edit {
            range: start - range.start..end - range.start,
            text: text.as_str().into(),
        };
        match changed.last_mut() {
            Some(last) if last.document.index == index + 1 => last.edits.push(edit),
            _ => changed.push(render::ChangedDocument {
                document: Document {
                    index: index + 1,
                    range,
                },
                edits: smallvec::smallvec![edit],
            }),
        }
    }
    changed
}

/// Splices in place, and compares with the copying splice of the written stream.
fn spliced_in_place(block: &[u8], changed: &[render::ChangedDocument]) -> Vec<u8> {
    let mut expected = Vec::new();
    render::write_spliced([block], changed, &mut expected).expect("write to memory");
    let mut in_place = HeldBytes::copy_of(block);
    splice_in_place(&mut in_place, changed);
    assert_eq!(
        String::from_utf8_lossy(&in_place),
        String::from_utf8_lossy(&expected)
    );
    in_place.to_vec()
}

#[test]
fn splicing_in_place_gives_the_copied_splice() {
    let block = b"0123456789abcdefghij".as_slice();
    let edit = |start: usize, end: usize, text: &str| (start, end, text.to_owned());
    type Case = (Vec<(usize, usize, String)>, &'static str);
    let cases: Vec<Case> = vec![
        (vec![], "0123456789abcdefghij"),
        // Growing, at the start and at the end.
        (vec![edit(0, 0, "<<")], "<<0123456789abcdefghij"),
        (vec![edit(20, 20, ">>")], "0123456789abcdefghij>>"),
        (
            vec![edit(0, 1, "ZZZ"), edit(19, 20, "YYY")],
            "ZZZ123456789abcdefghiYYY",
        ),
        // Shrinking, at the start and at the end.
        (vec![edit(0, 3, "")], "3456789abcdefghij"),
        (vec![edit(17, 20, "")], "0123456789abcdefg"),
        (
            vec![edit(0, 2, "x"), edit(18, 20, "y")],
            "x23456789abcdefghy",
        ),
        // The same size.
        (
            vec![edit(2, 4, "AB"), edit(10, 12, "CD")],
            "01AB456789CDcdefghij",
        ),
        // Mixed: shrinking then growing, growing then shrinking.
        (
            vec![edit(1, 6, ""), edit(12, 12, "+++++++")],
            "06789ab+++++++cdefghij",
        ),
        (
            vec![edit(1, 1, "+++++++"), edit(12, 19, "")],
            "0+++++++123456789abj",
        ),
        (vec![edit(0, 20, "all")], "all"),
        (vec![edit(0, 20, "")], ""),
    ];
    for (edits, want) in cases {
        for cuts in [vec![], vec![5], vec![1, 10, 19]] {
            let changed = changed_documents(block.len(), &cuts, &edits);
            // An edit across a cut belongs to no document: only cuts all edits allow.
            let count: usize = changed.iter().map(|c| c.edits.len()).sum();
            if count != edits.len() {
                continue;
            }
            assert_eq!(
                spliced_in_place(block, &changed),
                want.as_bytes(),
                "{edits:?} {cuts:?}"
            );
        }
    }
}

proptest::proptest! {
    /// Many edits of every size, anywhere: the same bytes as the copying splice.
    #[test]
    fn splicing_in_place_gives_the_copied_splice_for_any_edits(
        len in 0usize..200,
        picks in proptest::collection::vec((0usize..200, 0usize..6, 0usize..9), 0..40),
        cuts in proptest::collection::vec(0usize..200, 0..4),
    ) {
        let block: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
        // Non-overlapping edits, in order: each starts at or after the last one's end.
        let mut starts: Vec<(usize, usize, usize)> = picks
            .into_iter()
            .map(|(at, removed, added)| (at.min(len), removed, added))
            .collect();
        starts.sort();
        let mut edits = Vec::new();
        let mut at = 0;
        for (n, (start, removed, added)) in starts.into_iter().enumerate() {
            if start < at || (n > 0 && start == at && removed == 0) {
                continue;
            }
            let end = (start + removed).min(len);
            edits.push((start, end, "+0123456789"[..added].to_owned()));
            at = end;
        }
        let mut cuts: Vec<usize> = cuts.into_iter().filter(|c| {
            edits.iter().all(|(s, e, _)| !(s < c && c < e || s == c && e == c))
        }).collect();
        cuts.sort_unstable();
        let changed = changed_documents(len, &cuts, &edits);
        let count: usize = changed.iter().map(|c| c.edits.len()).sum();
        proptest::prop_assert_eq!(count, edits.len());
        spliced_in_place(&block, &changed);
    }
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
        let edits: Vec<&crate::ingress_edit::Edit> =
            rendered.changed.iter().flat_map(|c| &c.edits).collect();
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
