//! The streaming pipeline gives the answer of one pass over the whole stream, whatever the
//! block size and whatever it keeps: output, Ingress names, document numbers and the first
//! error in stream order (blocks as small as one byte, read a few bytes at a time).

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::io::{self, Read};

use styrmin_ingress_rules::IngressTarget;
use styrmin_postrender::render::RenderRules;
use styrmin_postrender::streaming::{BLOCK_BYTES, Keep, render_stream, render_stream_keeping};
use styrmin_test_support::rendered::{SMALL_INGRESS, mixed_stream};

mod support;

use support::{class, rules_for};

/// One pass over the stream held in memory: the output and the Ingresses' names.
fn whole(input: &str, rules: &RenderRules) -> Result<(String, Vec<String>), String> {
    let stream = render_stream(input.as_bytes(), rules, BLOCK_BYTES).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    stream.write(&mut out).map_err(|e| e.to_string())?;
    let rendered = stream.into_rendered();
    let names = rendered
        .ingresses
        .iter()
        .map(|o| format!("{} {}", o.document, o.ingress))
        .collect();
    Ok((String::from_utf8(out).map_err(|e| e.to_string())?, names))
}

/// The stream read a few bytes at a time in blocks of `block` bytes, keeping the input and
/// then only the output (which must agree): the output and the Ingresses' names.
fn streamed(
    input: &str,
    rules: &RenderRules,
    block: usize,
) -> Result<(String, Vec<String>), String> {
    // A reader that hands out a few bytes at a time, as a pipe does.
    struct Trickle<'a>(&'a [u8]);
    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.0.len().min(buf.len()).min(7);
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }
    let answer = |keep: Keep| -> Result<(String, Vec<String>), String> {
        let rendered = render_stream_keeping(Trickle(input.as_bytes()), rules, block, keep)
            .map_err(|e| e.to_string())?;
        let mut out = Vec::new();
        rendered.write(&mut out).map_err(|e| e.to_string())?;
        assert_eq!(rendered.bytes, input.len());
        if keep == Keep::Output {
            assert!(rendered.rendered.changed.is_empty());
        }
        let names = rendered
            .rendered
            .ingresses
            .iter()
            .map(|o| format!("{} {}", o.document, o.ingress))
            .collect();
        Ok((String::from_utf8(out).map_err(|e| e.to_string())?, names))
    };
    let kept_input = answer(Keep::Input);
    // Keeping the output alone gives what keeping the input and the edits gives.
    assert_eq!(answer(Keep::Output), kept_input, "block {block}");
    kept_input
}

#[test]
fn same_answer_as_rendering_the_whole_stream_for_any_block_size() {
    let input = mixed_stream(41);
    let expected = whole(&input, &class("nginx")).unwrap();
    for block in [1, 2, 17, 64, 300, 1 << 20] {
        assert_eq!(
            streamed(&input, &class("nginx"), block).unwrap(),
            expected,
            "block {block}"
        );
    }
}

#[test]
fn same_first_error_with_the_same_document_name() {
    let mut input = mixed_stream(30);
    input.push_str("---\n# Source: c/templates/bad.yaml\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: [\n");
    input.push_str(&mixed_stream(9));
    input.push_str("---\n# Source: c/templates/bad2.yaml\napiVersion: networking.k8s.io/v1\nkind: Ingress\nspec: [\n");
    let expected = whole(&input, &class("nginx")).unwrap_err();
    assert!(expected.contains("bad.yaml"), "{expected}");
    for block in [1, 64, 1 << 20] {
        assert_eq!(
            streamed(&input, &class("nginx"), block).unwrap_err(),
            expected,
            "block {block}"
        );
    }
}

#[test]
fn strict_mode_names_the_same_ingress() {
    let input = format!(
        "{}---\n{}",
        mixed_stream(10),
        SMALL_INGRESS.replace("rules: []", "rules: []\n  ingressClassName: x")
    );
    let no_class = rules_for(IngressTarget::NoClass, true);
    let expected = whole(&input, &no_class).unwrap_err();
    assert_eq!(streamed(&input, &no_class, 50).unwrap_err(), expected);
}

#[test]
fn strict_and_syntax_errors_keep_stream_order() {
    let no_class = rules_for(IngressTarget::NoClass, true);
    let bad = "---\n# Source: c/templates/bad.yaml\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: [\n";
    let input = format!("{}{bad}", mixed_stream(12));
    let expected = whole(&input, &no_class).unwrap_err();
    assert!(
        expected.contains("R5 (--strict)"),
        "the first error in the stream: {expected}"
    );
    for block in [1, 64, 1 << 20] {
        assert_eq!(
            streamed(&input, &no_class, block).unwrap_err(),
            expected,
            "block {block}"
        );
    }
}

#[test]
fn invalid_utf8_is_reported_at_its_offset_in_the_stream() {
    let mut input = mixed_stream(20).into_bytes();
    input.extend_from_slice(b"---\nkind: Ingress\nx: \xff\n");
    let stream = mixed_stream(20).into_bytes();
    // A byte that is not UTF-8 early, in the middle and at the end of the stream, read
    // in blocks of every size: the same error, at the same offset, in the same document.
    let mut inputs = vec![input];
    for at in [40, stream.len() / 2, stream.len() - 3] {
        let mut bad = stream.clone();
        bad.insert(at, 0xff);
        inputs.push(bad);
    }
    for input in &inputs {
        let whole = render_stream(&input[..], &class("nginx"), BLOCK_BYTES)
            .unwrap_err()
            .to_string();
        for block in [1, 17, 64, 300] {
            let streamed = render_stream(&input[..], &class("nginx"), block)
                .unwrap_err()
                .to_string();
            assert_eq!(streamed, whole, "block {block}");
        }
    }
}
