//! The layout charts render, read without the general parser.
//!
//! Almost every Ingress a chart renders is printable ASCII in block mappings and block
//! sequences whose scalars sit on one line each: words, hosts and paths unquoted, values
//! in quotes without escapes, small flow collections (`{name: web, port: {number: 80}}`),
//! comments. For that layout this reader builds the same tree as the general parser
//! (granit-parser), with the same spans, lines and columns, at a fraction of its cost.
//! Anything it does not know for certain (a tab, a carriage return, a byte outside
//! printable ASCII, a tag, an anchor, an alias, a block scalar, an escape, a scalar on
//! several lines, an empty value, an explicit key, a document marker after the first
//! line, anything the general parser would refuse) makes it give up, and the document is
//! parsed the general way. It never decides anything the general parser would not: a
//! test compares the two trees over rendered charts, generated layouts, the YAML test
//! suite and every one-byte change of those.

use std::borrow::Cow;
use std::ops::Range;

use granit_parser::ScalarStyle;

use super::node::{MAX_NESTING, Node, NodeValue, PlainList, ScalarTag};

/// The tree of a document in the common layout; `None` when the document is not in it
/// (which says nothing about whether it is valid YAML).
pub(super) fn read(text: &str) -> Option<Node<'_>> {
    let mut reader = Reader::at_first_node(text)?;
    let indent = reader.next?;
    let at = reader.line_start + indent;
    let root = if matches!(reader.bytes[at], b'{' | b'[') {
        let mut at = at;
        let node = reader.flow(&mut at)?;
        reader.end_of_line(at)?;
        node
    } else {
        reader.block(indent)?
    };
    // Content after the root (a dedented line) is for the general parser to judge.
    reader.next.is_none().then_some(root)
}

/// Hands `each` the items of the top-level `items` sequence of a document in the common
/// layout, one at a time, each the tree [`read`] builds for it (so that a `List` of
/// thousands never has all their trees at once). `Err` with the number of items handed
/// over when it stops early: `each` returned `false`, or the document is not in the
/// layout (which it may find out after some items).
pub(super) fn for_each_list_item<'a>(
    text: &'a str,
    each: &mut dyn FnMut(Node<'a>) -> bool,
) -> Result<(), usize> {
    let mut handed = 0;
    let mut counted = |item| {
        handed += 1;
        each(item)
    };
    let whole = list_top_level(text, &mut counted);
    whole.map(drop).ok_or(handed)
}

/// What reading a document in the common layout, items and all, settled.
#[derive(Debug, PartialEq, Eq)]
pub enum ReadOnce {
    /// A List in the plain form.
    Plain(PlainList),
    /// Not a List in the plain form.
    NotPlain,
    /// Not in the common layout, or the reading was stopped.
    Unsettled,
}

/// Reads a document's top level as [`PlainList`] describes, in the common layout, one item's
/// tree at a time: each item goes to `each` with its index as soon as it is read, and the top
/// level is judged when the reading ends (a List's `kind` may come after its items). Where the
/// reading does not settle it ([`ReadOnce::Unsettled`]: the document is not in the layout, or
/// `each` returned `false`), [`super::plain_list_parsed`] and [`super::for_each_list_item`]
/// give the answer, each reading the document once.
pub fn plain_list_read_once<'a>(
    text: &'a str,
    each: &mut dyn FnMut(usize, Node<'a>) -> bool,
) -> ReadOnce {
    let mut items = 0;
    let root = list_top_level(text, &mut |item| {
        let go_on = each(items, item);
        items += 1;
        go_on
    });
    let Some(entries) = root.as_ref().and_then(Node::entries) else {
        return ReadOnce::Unsettled;
    };
    let (mut api_version, mut kind, mut seen_items) = (Vec::new(), Vec::new(), false);
    for (key, value) in entries {
        if key.is_plain() && key.as_str() == Some("<<") {
            return ReadOnce::NotPlain;
        }
        match (key.as_str(), value.as_str()) {
            (Some("kind"), Some(k)) if !k.ends_with("List") => return ReadOnce::NotPlain,
            (Some("kind"), Some(k)) => kind.push(k),
            (Some("apiVersion"), Some(v)) => api_version.push(v),
            (Some("apiVersion" | "kind"), None) => return ReadOnce::NotPlain,
            // Only a block sequence reaches here under `items` (the rest gave up above).
            (Some("items"), _) if seen_items => return ReadOnce::NotPlain,
            (Some("items"), _) => seen_items = true,
            _ => {}
        }
    }
    let ([api_version], [kind], true) = (api_version.as_slice(), kind.as_slice(), seen_items)
    else {
        return ReadOnce::NotPlain;
    };
    ReadOnce::Plain(PlainList {
        api_version: (*api_version).to_owned(),
        kind: (*kind).to_owned(),
        items,
    })
}

/// The top-level block mapping of a document in the common layout, the items of its
/// block sequence `items` handed to `each` instead of kept; `None` when the document is
/// not in the layout, has another top level, or `each` stopped the reading.
fn list_top_level<'a>(text: &'a str, each: Items<'_, 'a>) -> Option<Node<'a>> {
    let mut reader = Reader::at_first_node(text)?;
    let indent = reader.next?;
    if matches!(reader.bytes[reader.line_start + indent], b'{' | b'[' | b'-') {
        return None;
    }
    let root = reader.mapping(indent, Some(each))?;
    reader.next.is_none().then_some(root)
}

/// The sink of a sequence read one item at a time; `false` stops the reading.
type Items<'s, 'a> = &'s mut dyn FnMut(Node<'a>) -> bool;

/// What each byte may be in a plain scalar: its first byte ([`START`], one that cannot be
/// mistaken for an indicator), a later byte in flow context ([`IN_FLOW`]) or in block
/// context ([`IN_BLOCK`], which also takes flow indicators and quotes).
static PLAIN: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        let start = c.is_ascii_alphanumeric()
            || matches!(
                c,
                b'/' | b'.' | b'_' | b'$' | b'(' | b'+' | b'=' | b'~' | b'^' | b';' | b'<' | b'\\'
            );
        let inside = start
            || matches!(
                c,
                b'-' | b')' | b'@' | b'%' | b'*' | b'&' | b'!' | b'?' | b'>' | b'#' | b'`'
            );
        let block = inside || matches!(c, b',' | b'[' | b']' | b'{' | b'}' | b'"' | b'\'');
        table[b] = (start as u8 * START) | (inside as u8 * IN_FLOW) | (block as u8 * IN_BLOCK);
        b += 1;
    }
    table
};
const START: u8 = 1;
const IN_FLOW: u8 = 2;
const IN_BLOCK: u8 = 4;

fn starts_plain(b: u8) -> bool {
    PLAIN[usize::from(b)] & START != 0
}

fn inside_plain(b: u8, flow: bool) -> bool {
    PLAIN[usize::from(b)] & if flow { IN_FLOW } else { IN_BLOCK } != 0
}

/// Only printable ASCII and line feeds, checked a chunk at a time so that it vectorises.
fn printable_ascii(bytes: &[u8]) -> bool {
    bytes.chunks(64).all(|chunk| {
        !chunk.iter().fold(false, |bad, &b| {
            bad | (!(b' '..=b'~').contains(&b) & (b != b'\n'))
        })
    })
}

struct Reader<'a> {
    text: &'a str,
    bytes: &'a [u8],
    /// The start of the line the reader is on: the next line with content once a node is read.
    line_start: usize,
    /// That line's number, from 1.
    line: usize,
    /// The indentation of that line, `None` at the end of the document.
    next: Option<usize>,
    /// How many collections enclose the node being read; past [`MAX_NESTING`] the reader
    /// gives up, and the general parser refuses the document.
    depth: usize,
}

impl<'a> Reader<'a> {
    /// A reader on the first line with content of `text`, past a `---` line; `None` when
    /// `text` holds anything but printable ASCII and line feeds.
    fn at_first_node(text: &'a str) -> Option<Self> {
        let bytes = text.as_bytes();
        if !printable_ascii(bytes) {
            return None;
        }
        let mut reader = Reader {
            text,
            bytes,
            line_start: 0,
            line: 1,
            next: None,
            depth: 0,
        };
        reader.next = reader.next_content();
        // An explicit document start on the first line with content, alone on its line.
        if let Some(0) = reader.next
            && bytes[reader.line_start..].starts_with(b"---")
        {
            match bytes.get(reader.line_start + 3) {
                Some(b'\n') => {
                    reader.line_start += 4;
                    reader.line += 1;
                    reader.next = reader.next_content();
                }
                _ => return None,
            }
        }
        Some(reader)
    }

    /// The first byte at or after `at` that is not a space.
    fn after_spaces(&self, mut at: usize) -> usize {
        while self.bytes.get(at) == Some(&b' ') {
            at += 1;
        }
        at
    }

    /// Moves to the next line with content from the current line's start (blank lines and
    /// comment lines are skipped); its indentation, `None` at the end.
    fn next_content(&mut self) -> Option<usize> {
        let bytes = self.bytes;
        loop {
            let mut at = self.after_spaces(self.line_start);
            match bytes.get(at) {
                None => return None,
                Some(b'\n') => {}
                Some(b'#') => at += memchr::memchr(b'\n', &bytes[at..])?,
                Some(_) => return Some(at - self.line_start),
            }
            self.line_start = at + 1;
            self.line += 1;
        }
    }

    /// Finishes the current line at `at`: spaces, an optional comment after a space, the
    /// line break; then moves to the next line with content.
    fn end_of_line(&mut self, spaced: usize) -> Option<()> {
        let bytes = self.bytes;
        let mut at = self.after_spaces(spaced);
        if bytes.get(at) == Some(&b'#') && at > spaced {
            at += memchr::memchr(b'\n', &bytes[at..]).unwrap_or(bytes.len() - at);
        }
        match bytes.get(at) {
            None => {
                self.line_start = at;
                self.next = None;
                return Some(());
            }
            Some(b'\n') => {}
            Some(_) => return None,
        }
        self.line_start = at + 1;
        self.line += 1;
        self.next = self.next_content();
        Some(())
    }

    /// Where a block collection ends: the start of the next token, less the spaces before
    /// it (the start of the next line with content, or the end less trailing spaces).
    fn block_end(&self, start: usize) -> usize {
        if self.next.is_some() {
            return self.line_start.max(start);
        }
        let mut end = self.bytes.len();
        while end > start && self.bytes[end - 1] == b' ' {
            end -= 1;
        }
        end
    }

    fn node(
        &self,
        value: NodeValue<'a>,
        span: Range<usize>,
        line: usize,
        column: usize,
    ) -> Node<'a> {
        Node {
            value,
            start_with_tag: span.start,
            span,
            anchor: 0,
            anchored: false,
            line,
            column,
        }
    }

    /// One more collection encloses what is read next; `None` past [`MAX_NESTING`]. A
    /// collection read whole leaves again (a `None` abandons the whole reading).
    fn enter(&mut self) -> Option<()> {
        self.depth += 1;
        (self.depth <= MAX_NESTING).then_some(())
    }

    /// The block node starting on the current line, at column `indent`.
    fn block(&mut self, indent: usize) -> Option<Node<'a>> {
        let at = self.line_start + indent;
        match self.bytes[at] {
            b'-' => self.sequence(indent, false, None),
            _ => self.mapping(indent, None),
        }
    }

    /// A block mapping whose first key starts at column `column` of the current line. With
    /// `items`, the block sequence under its key `items` goes to that sink item by item.
    fn mapping(&mut self, column: usize, mut items: Option<Items<'_, 'a>>) -> Option<Node<'a>> {
        self.enter()?;
        let bytes = self.bytes;
        let start = self.line_start + column;
        let line = self.line;
        let mut entries = Vec::new();
        loop {
            let mut at = self.line_start + column;
            let key = self.key(&mut at, true)?;
            if bytes.get(at) != Some(&b':') {
                return None;
            }
            at += 1;
            let after_colon = at;
            let inline = match bytes.get(at) {
                Some(b' ') => {
                    at = self.after_spaces(at);
                    !matches!(bytes.get(at), None | Some(b'\n' | b'#'))
                }
                None | Some(b'\n') => false,
                Some(_) => return None,
            };
            // The List's items are a block sequence, or left to the general parser.
            let to_sink = items.is_some() && key.as_str() == Some("items");
            let value = if inline {
                if to_sink {
                    return None;
                }
                let value = self.inline_value(&mut at, false)?;
                self.end_of_line(at)?;
                value
            } else {
                self.end_of_line(after_colon)?;
                let sink = match &mut items {
                    Some(sink) if to_sink => Some(&mut **sink as Items<'_, 'a>),
                    _ => None,
                };
                match self.next {
                    Some(indent) if to_sink && !self.at_sequence_entry(indent) => return None,
                    Some(indent) if indent > column && self.at_sequence_entry(indent) => {
                        self.sequence(indent, false, sink)?
                    }
                    Some(indent) if indent > column => self.block(indent)?,
                    Some(indent) if indent == column && self.at_sequence_entry(indent) => {
                        self.sequence(indent, true, sink)?
                    }
                    // An empty value: the general parser decides where its span is.
                    _ => return None,
                }
            };
            entries.push((key, value));
            let is_key_line =
                |reader: &Self, indent: usize| reader.bytes[reader.line_start + indent] != b'-';
            if !self.another_entry(column, is_key_line, false)? {
                break;
            }
        }
        let end = self.block_end(start);
        self.depth -= 1;
        Some(self.node(
            NodeValue::Mapping {
                flow: false,
                entries,
            },
            start..end,
            line,
            column,
        ))
    }

    /// After an entry of a block collection at `column`: whether the next line with content
    /// holds another (`is_entry`), ends the collection, or is for the general parser (`None`:
    /// deeper than the entry, or at its column but not an entry, unless `same_column_ends`,
    /// as for an indentless sequence under a key).
    fn another_entry(
        &self,
        column: usize,
        is_entry: impl Fn(&Self, usize) -> bool,
        same_column_ends: bool,
    ) -> Option<bool> {
        match self.next {
            Some(indent) if indent == column && is_entry(self, indent) => Some(true),
            Some(indent) if indent == column => same_column_ends.then_some(false),
            Some(indent) if indent < column => Some(false),
            None => Some(false),
            Some(_) => None,
        }
    }

    fn at_sequence_entry(&self, indent: usize) -> bool {
        let at = self.line_start + indent;
        self.bytes.get(at) == Some(&b'-') && self.bytes.get(at + 1) == Some(&b' ')
    }

    /// A block sequence whose first `- ` is at column `column` of the current line;
    /// `compact` when it is the value of a key at the same column (Helm's usual layout).
    /// With `sink`, each item goes there as soon as it is read and the node has no items.
    fn sequence(
        &mut self,
        column: usize,
        compact: bool,
        mut sink: Option<Items<'_, 'a>>,
    ) -> Option<Node<'a>> {
        self.enter()?;
        let bytes = self.bytes;
        // The general parser starts an indentless sequence (`key:` then `- ` at the key's
        // column) at its first item's content, an indented one at its first `-`.
        let mut start = self.line_start + column;
        let line = self.line;
        let mut start_column = column;
        let mut items = Vec::new();
        let mut first = true;
        loop {
            if !self.at_sequence_entry(column) {
                return None;
            }
            let mut at = self.after_spaces(self.line_start + column + 2);
            let item = match bytes.get(at) {
                None | Some(b'\n' | b'#' | b'-') => return None,
                Some(_) if self.is_key(at) => self.mapping(at - self.line_start, None)?,
                Some(_) => {
                    let item = self.inline_value(&mut at, false)?;
                    self.end_of_line(at)?;
                    item
                }
            };
            if compact && first {
                start = item.span.start;
                start_column = item.column;
            }
            first = false;
            match &mut sink {
                Some(sink) => {
                    if !sink(item) {
                        return None;
                    }
                }
                None => items.push(item),
            }
            if !self.another_entry(column, Self::at_sequence_entry, compact)? {
                break;
            }
        }
        let end = self.block_end(start);
        self.depth -= 1;
        Some(self.node(
            NodeValue::Sequence { flow: false, items },
            start..end,
            line,
            start_column,
        ))
    }

    /// Whether a key and `: ` (or `:` at the end of the line) start at `at`.
    fn is_key(&self, mut at: usize) -> bool {
        self.key(&mut at, true).is_some()
            && self.bytes.get(at) == Some(&b':')
            && matches!(self.bytes.get(at + 1), None | Some(b' ' | b'\n'))
    }

    /// A scalar or a flow collection on the current line, starting at `at`.
    fn inline_value(&mut self, at: &mut usize, flow: bool) -> Option<Node<'a>> {
        match self.bytes.get(*at)? {
            b'"' => self.quoted(at, b'"'),
            b'\'' => self.quoted(at, b'\''),
            b'[' | b'{' => self.flow(at),
            _ => self.plain(at, !flow, false),
        }
    }

    /// A plain scalar on one line. In block context (`block`) it may hold single spaces,
    /// flow indicators and `:` before a non-space; a key (`key`) holds neither spaces nor
    /// `:`, and in flow context it holds no flow indicator either.
    fn plain(&self, at: &mut usize, block: bool, key: bool) -> Option<Node<'a>> {
        let bytes = self.bytes;
        let start = *at;
        if !bytes.get(start).is_some_and(|&b| starts_plain(b)) {
            return None;
        }
        let flow = !block;
        let mut end = start + 1;
        loop {
            match bytes.get(end) {
                Some(&b) if inside_plain(b, flow) => end += 1,
                Some(b':')
                    if block
                        && !key
                        && bytes.get(end + 1).is_some_and(|&b| inside_plain(b, flow)) =>
                {
                    end += 2;
                }
                Some(b' ') if block && !key => {
                    let next = self.after_spaces(end);
                    // ` #` starts a comment.
                    if bytes
                        .get(next)
                        .is_some_and(|&b| b != b'#' && inside_plain(b, flow))
                    {
                        end = next + 1;
                    } else {
                        break;
                    }
                }
                _ => break,
            }
        }
        *at = end;
        Some(self.scalar(start..end, start..end, ScalarStyle::Plain))
    }

    /// A mapping key at `at`: a plain word or a quoted scalar on one line.
    fn key(&self, at: &mut usize, block: bool) -> Option<Node<'a>> {
        match self.bytes.get(*at)? {
            b'"' => self.quoted(at, b'"'),
            b'\'' => self.quoted(at, b'\''),
            _ => self.plain(at, block, true),
        }
    }

    /// A quoted scalar on one line without escapes (`''` inside single quotes is one).
    fn quoted(&self, at: &mut usize, quote: u8) -> Option<Node<'a>> {
        let bytes = self.bytes;
        let start = *at;
        let inner = &bytes[start + 1..];
        let len = memchr::memchr3(quote, b'\\', b'\n', inner)?;
        // A backslash (an escape in double quotes) and `''` are left to the general parser.
        if inner[len] != quote || (quote == b'\'' && inner.get(len + 1) == Some(&b'\'')) {
            return None;
        }
        let end = start + 1 + len + 1;
        *at = end;
        let style = if quote == b'"' {
            ScalarStyle::DoubleQuoted
        } else {
            ScalarStyle::SingleQuoted
        };
        Some(self.scalar(start..end, start + 1..end - 1, style))
    }

    /// A scalar node: its bytes (`span`) and its value's (`text`).
    fn scalar(&self, span: Range<usize>, text: Range<usize>, style: ScalarStyle) -> Node<'a> {
        let text = &self.text[text];
        let column = span.start - self.line_start;
        self.node(
            NodeValue::Scalar {
                text: Cow::Borrowed(text),
                style,
                tag: ScalarTag::None,
            },
            span,
            self.line,
            column,
        )
    }

    /// A flow mapping or sequence that closes on its own line, starting at `at`.
    fn flow(&mut self, at: &mut usize) -> Option<Node<'a>> {
        self.enter()?;
        let bytes = self.bytes;
        let start = *at;
        let mapping = bytes[start] == b'{';
        let close = if mapping { b'}' } else { b']' };
        *at += 1;
        *at = self.after_spaces(*at);
        let mut entries = Vec::new();
        let mut items = Vec::new();
        if bytes.get(*at) == Some(&close) {
            *at += 1;
        } else {
            loop {
                if mapping {
                    let key = self.key(at, false)?;
                    if bytes.get(*at) != Some(&b':') || bytes.get(*at + 1) != Some(&b' ') {
                        return None;
                    }
                    *at += 2;
                    *at = self.after_spaces(*at);
                    let value = self.inline_value(at, true)?;
                    entries.push((key, value));
                } else {
                    items.push(self.inline_value(at, true)?);
                }
                *at = self.after_spaces(*at);
                match bytes.get(*at)? {
                    b',' => {
                        *at += 1;
                        *at = self.after_spaces(*at);
                        if matches!(bytes.get(*at)?, b']' | b'}' | b',') {
                            return None;
                        }
                    }
                    &b if b == close => {
                        *at += 1;
                        break;
                    }
                    _ => return None,
                }
            }
        }
        let value = if mapping {
            NodeValue::Mapping {
                flow: true,
                entries,
            }
        } else {
            NodeValue::Sequence { flow: true, items }
        };
        self.depth -= 1;
        Some(self.node(value, start..*at, self.line, start - self.line_start))
    }
}

#[cfg(test)]
mod tests;
