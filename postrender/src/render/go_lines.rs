//! Go's readers take NEL, LS and PS for line breaks, YAML 1.2 does not: a document that has
//! one is read as Go reads it, byte offsets kept.

use super::error::RenderError;
use super::outcomes::DocumentName;

/// NEL, LS and PS: line breaks to go-yaml (v2 and v3), ordinary characters to YAML 1.2.
const UNICODE_LINE_BREAKS: [(char, &str, char); 3] = [
    ('\u{85}', "a NEL character (U+0085)", 'N'),
    ('\u{2028}', "a LINE SEPARATOR (U+2028)", 'L'),
    ('\u{2029}', "a PARAGRAPH SEPARATOR (U+2029)", 'P'),
];

/// A document's text as Go's readers see its lines, when it has a Unicode line break:
/// each one replaced by a line break of the same length (NEL's two bytes by CRLF, LS's
/// and PS's three by a space and CRLF), so that every offset is that of the original text
/// and edits planned on it apply to the original. A space before a line break changes no
/// structure, no plain or quoted scalar, and no comment.
pub(super) struct GoLines {
    pub(super) text: String,
    /// The first Unicode line break: its offset, name and escape.
    first: (usize, &'static str, char),
}

#[inline]
pub(super) fn go_lines(text: &str) -> Option<GoLines> {
    // All three start with 0xC2 (NEL) or 0xE2 (LS, PS); most documents have neither.
    memchr::memchr2(0xC2, 0xE2, text.as_bytes())?;
    let (offset, (_, what, escape)) = text.char_indices().find_map(|(i, c)| {
        UNICODE_LINE_BREAKS
            .iter()
            .find(|(b, ..)| *b == c)
            .map(|found| (i, *found))
    })?;
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\u{85}' => out.push_str("\r\n"),
            '\u{2028}' | '\u{2029}' => out.push_str(" \r\n"),
            c => out.push(c),
        }
    }
    Some(GoLines {
        text: out,
        first: (offset, what, escape),
    })
}

impl GoLines {
    pub(super) fn error(&self, original: &str, name: &DocumentName) -> RenderError {
        let (offset, what, escape) = self.first;
        let line =
            name.first_line + memchr::memchr_iter(b'\n', &original.as_bytes()[..offset]).count();
        RenderError::UnicodeLineBreak {
            document: name.clone(),
            line,
            name: what,
            escape,
        }
    }
}
