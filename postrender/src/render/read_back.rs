//! Reading an edit back where it is: a proof, from the first parse's spans and node facts,
//! that a splice changes one class field of the tree and nothing else, so that the edited
//! document need not be parsed again.
//!
//! Three kinds of splice are proven; anything else (a flow-mapping insertion, an empty value
//! filled, a null or empty mapping on the way rewritten, a mapping left empty, a block
//! scalar replaced, a document with an alias, a tab or a Unicode line break, edits that
//! touch each other) is left to the full read-back check, which parses the whole edited
//! document and compares trees.
//!
//! - **A scalar value replaced.** The range is exactly the span of a one-line plain, single-
//!   or double-quoted scalar that is a mapping value (after `: `), without anchor or tag;
//!   the new text is one double-quoted scalar. A double-quoted scalar ends at its closing
//!   quote in block and flow context alike, and what follows the span (a space, a line
//!   break, `,`, `}`, `]` or the end, never a `:`) ended the old scalar too, so the same
//!   tokens follow: the tree is the same with that scalar's value changed.
//! - **Entries inserted into a block mapping.** The new lines go in front of the line of the
//!   mapping's first key, which only spaces precede; they are `key:` lines at that key's
//!   column, each nested one deeper, the last `key: "value"`. They read as one new first
//!   entry (a block mapping of one entry per level), and every old line keeps its column.
//! - **An entry removed from a block mapping.** The range is whole lines: from the start of
//!   the key's line (only spaces before the key) to the end of the one-line scalar value's
//!   line, where only a comment may follow. The mapping keeps another entry, at the same
//!   column, so it reads as before less that entry.
//!
//! The fields read back are the fields before the edit with each proven change applied; the
//! caller compares them with those the rules want. A second pass would not edit (R8): a field
//! set is now a double-quoted string equal to the value wanted, which
//! [`crate::ingress_edit::plan`] leaves alone, a field removed is absent, and nothing else
//! on the path to either changed.

use std::borrow::Cow;
use std::ops::Range;

use granit_parser::ScalarStyle;
use styrmin_ingress_rules::ClassFields;

use crate::ingress_edit::{self, CLASS_ANNOTATION_PATH, CLASS_NAME_PATH, Edit};
use crate::yaml_tree::{Node, NodeValue, ScalarTag};

/// How an edited document is read back before anything is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadBack {
    /// Each splice proven where it is when every splice is of a kind this module proves;
    /// otherwise the whole edited document parsed again.
    Local,
    /// The whole edited document parsed again, always (the check the local proof must
    /// agree with; the tests render both ways).
    #[cfg_attr(not(test), allow(dead_code))]
    Full,
}

/// How an edited document was read back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Checked {
    Locally,
    Fully,
}

/// Whether a document's splices may be proven locally at all: no alias anywhere (so no
/// node is shared; `has_alias` as [`crate::yaml_tree::parse_document_noting_aliases`]
/// tells it) and no tab (whose place in the indentation Go's readers judge). A document
/// with Unicode line breaks is never offered (see `render::go_lines`).
pub(crate) fn document_allows(text: &str, has_alias: bool) -> bool {
    !has_alias && memchr::memchr(b'\t', text.as_bytes()).is_none()
}

/// Whether sorted edits stay apart: no edit ends where the next starts, so that each proof
/// holds beside the others (two insertions at one place are left to the full check).
pub(crate) fn apart(sorted: &[Edit]) -> bool {
    sorted
        .windows(2)
        .all(|pair| pair[0].range.end < pair[1].range.start)
}

#[derive(Clone, Copy)]
enum Field {
    ClassName,
    Annotation,
}

impl Field {
    fn path(self) -> &'static [&'static str] {
        match self {
            Field::ClassName => &CLASS_NAME_PATH,
            Field::Annotation => &CLASS_ANNOTATION_PATH,
        }
    }

    fn of(self, fields: &ClassFields) -> Option<&str> {
        match self {
            Field::ClassName => fields.ingress_class_name.as_deref(),
            Field::Annotation => fields.class_annotation.as_deref(),
        }
    }
}

/// Whether `ingress` (a node of `text`) reads back with the class fields `desired` once
/// `edits` (its own edits, any order) are applied, every edit proven where it is: the
/// fields before (read from the same tree) with each proven change applied. `false` when
/// the full check must decide.
pub(crate) fn proven_as(
    text: &str,
    ingress: &Node<'_>,
    before: &ClassFields,
    desired: &ClassFields,
    edits: &[Edit],
) -> bool {
    // Per field: `None` while no edit changes it, else the value the edit leaves.
    let mut after: [Option<Option<Cow<'_, str>>>; 2] = [None, None];
    for edit in edits {
        let Some((field, value)) = [Field::ClassName, Field::Annotation]
            .into_iter()
            .find_map(|field| prove(text, ingress, field, edit).map(|value| (field, value)))
        else {
            return false;
        };
        // One edit per field: two would each be proven against the tree before the other.
        let slot = &mut after[field as usize];
        if slot.is_some() {
            return false;
        }
        *slot = Some(value);
    }
    [Field::ClassName, Field::Annotation]
        .into_iter()
        .all(|field| {
            let got = match &after[field as usize] {
                Some(value) => value.as_deref(),
                None => field.of(before),
            };
            got == field.of(desired)
        })
}

/// Where a field's path ends in the tree, as far as the local proof follows it.
enum Walk<'n, 'a> {
    /// Every key is there: the mapping holding the last one, and its entry's index.
    Found(&'n Node<'a>, usize),
    /// `path[depth]` is missing from this mapping (every key before it is there).
    Missing(&'n Node<'a>, usize),
}

/// Follows `path` from `ingress` through mappings whose keys are plain or quoted scalars
/// without tag or anchor, none a merge key (`<<`), none twice: then a key's text is what
/// Go reads, and this walk finds what [`ingress_edit::read_class_fields`] reads. `None`
/// for anything else, and for a key whose value is not a mapping with entries (a null or
/// empty value is rewritten whole, which is left to the full check).
fn walk<'n, 'a>(ingress: &'n Node<'a>, path: &[&str]) -> Option<Walk<'n, 'a>> {
    let mut node = ingress;
    for (depth, key) in path.iter().enumerate() {
        let entries = node.entries()?;
        let mut found = None;
        for (index, (k, _)) in entries.iter().enumerate() {
            let text = simple_key(k)?;
            if text == *key {
                if found.is_some() {
                    return None;
                }
                found = Some(index);
            }
        }
        let Some(index) = found else {
            return Some(Walk::Missing(node, depth));
        };
        if depth + 1 == path.len() {
            return Some(Walk::Found(node, index));
        }
        let value = &entries[index].1;
        match &value.value {
            NodeValue::Mapping { entries, .. } if !entries.is_empty() => node = value,
            _ => return None,
        }
    }
    None
}

/// The text of a key that reads as written: an untagged, unanchored plain or quoted
/// scalar that is not a merge key.
fn simple_key<'k>(key: &'k Node<'_>) -> Option<&'k str> {
    match &key.value {
        NodeValue::Scalar {
            text,
            style: ScalarStyle::Plain | ScalarStyle::SingleQuoted | ScalarStyle::DoubleQuoted,
            tag: ScalarTag::None,
        } if key.anchor == 0 && !(key.is_plain() && text == "<<") => Some(text),
        _ => None,
    }
}

/// The new value of `field` if `edit` is a proven splice of it.
fn prove<'e>(
    text: &str,
    ingress: &Node<'_>,
    field: Field,
    edit: &'e Edit,
) -> Option<Option<Cow<'e, str>>> {
    let path = field.path();
    match walk(ingress, path)? {
        Walk::Found(mapping, index) if edit.text.is_empty() => {
            prove_removal(text, mapping, index, &edit.range).map(|()| None)
        }
        Walk::Found(mapping, index) => {
            let (_, value) = mapping.entries()?.get(index)?;
            prove_replacement(text, value, edit).map(Some)
        }
        Walk::Missing(mapping, depth) => {
            prove_insertion(text, mapping, &path[depth..], edit).map(Some)
        }
    }
}

/// A one-line scalar value replaced, at exactly its span, by one double-quoted scalar.
fn prove_replacement<'e>(text: &str, value: &Node<'_>, edit: &'e Edit) -> Option<Cow<'e, str>> {
    let span = &value.span;
    let simple = matches!(
        &value.value,
        NodeValue::Scalar {
            style: ScalarStyle::Plain | ScalarStyle::SingleQuoted | ScalarStyle::DoubleQuoted,
            tag: ScalarTag::None,
            ..
        }
    );
    if !simple
        || value.anchor != 0
        || value.start_with_tag != span.start
        || span.is_empty()
        || edit.range != *span
    {
        return None;
    }
    let bytes = text.as_bytes();
    let own = bytes.get(span.clone())?;
    if memchr::memchr2(b'\n', b'\r', own).is_some() {
        return None;
    }
    // Before: `:` and at least one space (a value on the key's line, block or flow).
    let spaces = bytes[..span.start]
        .iter()
        .rev()
        .take_while(|b| **b == b' ')
        .count();
    if spaces == 0 || span.start < spaces + 1 || bytes[span.start - spaces - 1] != b':' {
        return None;
    }
    // After: what may end a scalar value, and no `:` that would make the new one a key.
    match bytes.get(span.end) {
        None | Some(b' ' | b'\n' | b'\r' | b',' | b'}' | b']') => {}
        Some(_) => return None,
    }
    let rest = &bytes[span.end..];
    let next = rest.iter().find(|b| **b != b' ');
    if next == Some(&b':') {
        return None;
    }
    decode_quoted(&edit.text)
}

/// The string a double-quoted scalar written by [`ingress_edit::quoted`] holds, when the
/// text is one such scalar on one line with only `\"` and `\\` escapes and characters it
/// writes as they are; `None` for anything else.
fn decode_quoted(quoted: &str) -> Option<Cow<'_, str>> {
    let inner = quoted.strip_prefix('"')?.strip_suffix('"')?;
    let written_raw = |c: char| {
        !(c.is_control()
            || matches!(
                c,
                '"' | '\\' | '\u{2028}' | '\u{2029}' | '\u{FEFF}' | '\u{FFFE}' | '\u{FFFF}'
            ))
    };
    if inner.chars().all(written_raw) {
        // Every character as `quoted` writes it: the text is `quoted(inner)`.
        return Some(Cow::Borrowed(inner));
    }
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next()? {
                e @ ('"' | '\\') => out.push(e),
                _ => return None,
            },
            c if written_raw(c) => out.push(c),
            _ => return None,
        }
    }
    (ingress_edit::quoted(&out) == quoted).then_some(Cow::Owned(out))
}

/// The start of the line that holds `pos`.
fn line_start(text: &str, pos: usize) -> usize {
    text.as_bytes()[..pos]
        .iter()
        .rposition(|b| matches!(b, b'\n' | b'\r'))
        .map_or(0, |i| i + 1)
}

/// The column of `pos` when only spaces precede it on its line.
fn leading_spaces(text: &str, pos: usize) -> Option<usize> {
    let start = line_start(text, pos);
    text.as_bytes()[start..pos]
        .iter()
        .all(|b| *b == b' ')
        .then_some(pos - start)
}

/// A key that starts its line after spaces only, with no property before it: its column.
fn key_column(text: &str, key: &Node<'_>) -> Option<usize> {
    simple_key(key)?;
    if key.start_with_tag != key.span.start || key.span.is_empty() {
        return None;
    }
    leading_spaces(text, key.span.start)
}

/// `path = "value"` inserted as block lines in front of the first key of a block mapping.
fn prove_insertion<'e>(
    text: &str,
    mapping: &Node<'_>,
    path: &[&str],
    edit: &'e Edit,
) -> Option<Cow<'e, str>> {
    let entries = mapping.block_entries()?;
    let (first, _) = entries.first()?;
    let column = key_column(text, first)?;
    let at = first.span.start - column;
    if edit.range != (at..at) {
        return None;
    }
    // The new lines: the line break is the first line's own, the step the second line's.
    let mut lines = &*edit.text;
    let first_break = lines.find(['\n', '\r'])?;
    let newline = if lines[first_break..].starts_with("\r\n") {
        "\r\n"
    } else if lines[first_break..].starts_with('\r') {
        "\r"
    } else {
        "\n"
    };
    let mut step = 0;
    let mut value = None;
    for (depth, key) in path.iter().enumerate() {
        let end = lines.find(['\n', '\r'])?;
        let row = &lines[..end];
        lines = lines[end..].strip_prefix(newline)?;
        let indent = row.bytes().take_while(|b| *b == b' ').count();
        if depth == 1 {
            step = indent.checked_sub(column).filter(|s| *s > 0)?;
        }
        let row = row[indent..].strip_prefix(key)?.strip_prefix(':')?;
        if indent != column + depth * step {
            return None;
        }
        if depth + 1 == path.len() {
            value = Some(decode_quoted(row.strip_prefix(' ')?)?);
        } else if !row.is_empty() {
            return None;
        }
    }
    if !lines.is_empty() {
        return None;
    }
    value
}

/// A whole-line entry of a block mapping removed, the mapping keeping another.
fn prove_removal(text: &str, mapping: &Node<'_>, index: usize, range: &Range<usize>) -> Option<()> {
    let entries = mapping.block_entries()?;
    if entries.len() < 2 {
        return None;
    }
    let (key, value) = entries.get(index)?;
    let column = key_column(text, key)?;
    let simple_value = matches!(
        &value.value,
        NodeValue::Scalar {
            style: ScalarStyle::Plain | ScalarStyle::SingleQuoted | ScalarStyle::DoubleQuoted,
            ..
        }
    );
    if !simple_value || value.anchor != 0 || value.span.start < key.span.end {
        return None;
    }
    let bytes = text.as_bytes();
    let entry = bytes.get(key.span.start..value.span.end)?;
    if memchr::memchr2(b'\n', b'\r', entry).is_some() {
        return None;
    }
    // After the value: spaces, perhaps a comment, then the line break (or the end).
    let rest = &bytes[value.span.end..];
    let line_end = memchr::memchr2(b'\n', b'\r', rest).map_or(bytes.len(), |i| value.span.end + i);
    let tail = &bytes[value.span.end..line_end];
    let spaces = tail.iter().take_while(|b| **b == b' ').count();
    if !(spaces == tail.len() || spaces > 0 && tail[spaces] == b'#') {
        return None;
    }
    let end = match bytes.get(line_end) {
        None => line_end,
        Some(b'\r') if bytes.get(line_end + 1) == Some(&b'\n') => line_end + 2,
        Some(_) => line_end + 1,
    };
    (*range == (key.span.start - column..end)).then_some(())
}

/// How many edited documents were read back each way (for the tests that make sure the
/// local proof is the one that runs where it should).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tally {
    pub locally: usize,
    pub fully: usize,
}

impl Tally {
    pub fn count(&mut self, checked: Checked) {
        match checked {
            Checked::Locally => self.locally += 1,
            Checked::Fully => self.fully += 1,
        }
    }
}

#[cfg(test)]
mod tests;
