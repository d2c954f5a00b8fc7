//! The three outputs of a splice agree: in place, written, and as a new string, for edits of
//! every size anywhere, over documents cut anywhere.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use styrmin_postrender::documents::Document;
use styrmin_postrender::held_memory::HeldBytes;
use styrmin_postrender::ingress_edit::Edit;
use styrmin_postrender::render::ChangedDocument;
use styrmin_postrender::render::splice::{splice_in_place, spliced_text, write_spliced};

/// The changed documents of a block from edits given as (start, end, text) over the
/// whole block, cut into documents at `cuts` (each edit inside one document).
fn changed_documents(
    len: usize,
    cuts: &[usize],
    edits: &[(usize, usize, String)],
) -> Vec<ChangedDocument> {
    let mut bounds = vec![0];
    bounds.extend(cuts.iter().copied().filter(|&c| c > 0 && c < len));
    bounds.push(len);
    bounds.dedup();
    if bounds.len() == 1 {
        bounds.push(len);
    }
    let mut changed: Vec<ChangedDocument> = Vec::new();
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
        let edit = Edit {
            range: start - range.start..end - range.start,
            text: text.as_str().into(),
        };
        match changed.last_mut() {
            Some(last) if last.document.index == index + 1 => last.edits.push(edit),
            _ => changed.push(ChangedDocument {
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

/// Splices in place, and compares with the copying splice of the written stream and with
/// the new string.
fn spliced_in_place(block: &[u8], changed: &[ChangedDocument]) -> Vec<u8> {
    let mut expected = Vec::new();
    write_spliced([block], changed, &mut expected).expect("write to memory");
    let mut in_place = HeldBytes::copy_of(block);
    splice_in_place(&mut in_place, changed);
    assert_eq!(
        String::from_utf8_lossy(&in_place),
        String::from_utf8_lossy(&expected)
    );
    // The same edits counted in the whole block, spliced into a new string.
    let whole: Vec<Edit> = changed
        .iter()
        .flat_map(|c| {
            let start = c.document.range.start;
            c.edits.iter().map(move |e| Edit {
                range: start + e.range.start..start + e.range.end,
                text: e.text.clone(),
            })
        })
        .collect();
    let text = std::str::from_utf8(block).unwrap();
    assert_eq!(spliced_text(text, &whole).as_bytes(), &expected[..]);
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
