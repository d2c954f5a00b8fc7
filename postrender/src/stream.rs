//! Splitting a rendered stream into documents, exactly, by bytes.
//!
//! YAML forbids a line that starts in column 0 with `---` or `...` followed by white space
//! or the end of the line inside any value, so a line scanner finds every document
//! boundary without parsing (STYLE.md: checked against libyaml on 20,000 documents).
//! Each document keeps every byte it had, its `---` line included, so the stream can be
//! written back by concatenation.

use std::ops::Range;

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
    let mut line_start = 0;
    while line_start < bytes.len() {
        let line_end = memchr_newline(bytes, line_start).map_or(bytes.len(), |i| i + 1);
        let line = &bytes[line_start..line_end];
        // A BOM may stand before the first marker of the stream.
        let marker_line = if line_start == 0 {
            line.strip_prefix("\u{feff}".as_bytes()).unwrap_or(line)
        } else {
            line
        };
        match marker(marker_line) {
            Some(Marker::Start) => cuts.push(line_start),
            Some(Marker::End) => cuts.push(line_end),
            None => {}
        }
        line_start = line_end;
    }

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

enum Marker {
    Start,
    End,
}

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

fn memchr_newline(bytes: &[u8], from: usize) -> Option<usize> {
    bytes[from..]
        .iter()
        .position(|&b| b == b'\n')
        .map(|i| from + i)
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
    document
        .lines()
        .find_map(|line| line.strip_prefix("# Source: "))
        .map(str::trim_end)
}

/// The path Helm 4 records on each document in the annotation
/// `postrenderer.helm.sh/postrender-filename`; found by a line scan so that it is
/// available even for a document that does not parse.
pub fn helm4_filename(document: &str) -> Option<&str> {
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
