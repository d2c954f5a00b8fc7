//! A YAML node tree that remembers where every node is, in bytes.
//!
//! Built from granit-parser's events, whose spans are exact UTF-8 byte offsets. It is
//! only built for documents that hold Ingresses; the editor reads it to find the class
//! fields and splices bytes at the positions it records, so nothing else in the document
//! moves.

use std::borrow::Cow;
use std::collections::HashSet;
use std::ops::Range;

use granit_parser::{Event, Options, Parser, ScalarStyle, Span, StructureStyle};

mod common_layout;
mod node;

pub use common_layout::{ReadOnce, plain_list_read_once};
pub use node::{MAX_NESTING, Node, NodeValue, PlainList, ScalarTag};

/// A parse failure, with the position in the parsed text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line} column {column}: {message}")]
pub struct SyntaxError {
    /// 1-based line in the parsed text.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    pub message: String,
}

impl SyntaxError {
    /// The same error with its line counted from the start of the stream, for a document
    /// that starts on line `first_line`.
    pub fn shifted(mut self, first_line: usize) -> Self {
        self.line += first_line.saturating_sub(1);
        self
    }

    fn at(span: &Span, message: impl Into<String>) -> Self {
        SyntaxError {
            line: span.start.line(),
            column: span.start.col() + 1,
            message: message.into(),
        }
    }
}

impl From<granit_parser::ScanError> for SyntaxError {
    fn from(e: granit_parser::ScanError) -> Self {
        if matches!(e.kind(), granit_parser::ErrorKind::RecursionLimitExceeded) {
            return too_deep(e.marker().line(), e.marker().col() + 1);
        }
        SyntaxError {
            line: e.marker().line(),
            column: e.marker().col() + 1,
            message: e.info(),
        }
    }
}

/// The refusal of a document that nests deeper than [`MAX_NESTING`].
fn too_deep(line: usize, column: usize) -> SyntaxError {
    SyntaxError {
        line,
        column,
        message: format!(
            "collections nested more than {MAX_NESTING} deep (Go's YAML readers refuse them too)"
        ),
    }
}

/// Parser options: comments are not needed (they are kept as bytes, never re-emitted); the
/// parser stops at [`MAX_NESTING`] flow or block levels, the tree builder at that many in all.
fn options() -> Options {
    let mut options = Options::default();
    options.set_emit_comments(false);
    options.flow_nesting_limit = MAX_NESTING;
    options.block_nesting_limit = MAX_NESTING;
    options
}

/// Parses the first document of `text` into a tree. `Ok(None)` for a document with no
/// node (only comments). Content after the first document is an error: the stream
/// splitter hands over one document at a time.
pub fn parse_document(text: &str) -> Result<Option<Node<'_>>, SyntaxError> {
    Ok(parse_document_noting_aliases(text)?.map(|(root, _)| root))
}

/// [`parse_document`], and whether the document has an alias (`*name`) anywhere, which
/// the parse sees for free and a walk of the tree would have to look for.
pub fn parse_document_noting_aliases(text: &str) -> Result<Option<(Node<'_>, bool)>, SyntaxError> {
    // The layout charts render has no alias.
    if let Some(root) = common_layout::read(text) {
        return Ok(Some((root, false)));
    }
    parse_with_parser(text)
}

/// [`parse_document_noting_aliases`] by the general parser alone.
fn parse_with_parser(text: &str) -> Result<Option<(Node<'_>, bool)>, SyntaxError> {
    let mut parser = Parser::new_from_str_with_options(text, options());
    let mut builder = Builder::default();
    let mut root = None;
    let mut documents = 0;
    while let Some(event) = parser.next_event() {
        let (event, span) = event?;
        match event {
            Event::StreamStart | Event::StreamEnd | Event::DocumentEnd => {}
            Event::DocumentStart(..) => {
                documents += 1;
                if documents > 1 {
                    return Err(SyntaxError::at(
                        &span,
                        "a second document where one was expected",
                    ));
                }
            }
            other => {
                if let Some(done) = builder.push(other, &span, text)? {
                    root = Some(done);
                }
            }
        }
    }
    let Some(mut root) = root.filter(|node: &Node<'_>| !(node.is_null() && node.span.is_empty()))
    else {
        return Ok(None);
    };
    if !builder.referenced.is_empty() {
        mark_shared(&mut root, &builder.referenced);
    }
    Ok(Some((root, builder.aliases)))
}

/// Marks the nodes whose anchor an alias refers to.
fn mark_shared(node: &mut Node<'_>, referenced: &HashSet<usize>) {
    node.anchored = node.anchor != 0 && referenced.contains(&node.anchor);
    match &mut node.value {
        NodeValue::Mapping { entries, .. } => {
            for (k, v) in entries {
                mark_shared(k, referenced);
                mark_shared(v, referenced);
            }
        }
        NodeValue::Sequence { items, .. } => {
            for item in items {
                mark_shared(item, referenced);
            }
        }
        NodeValue::Scalar { .. } | NodeValue::Alias(_) => {}
    }
}

/// Every node of the tree with an anchor, by anchor id, to resolve aliases.
pub fn anchors<'n, 'a>(root: &'n Node<'a>) -> std::collections::HashMap<usize, &'n Node<'a>> {
    let mut out = std::collections::HashMap::new();
    let mut stack = vec![root];
    while let Some(node) = stack.pop() {
        if node.anchor != 0 {
            out.insert(node.anchor, node);
        }
        match &node.value {
            NodeValue::Mapping { entries, .. } => {
                for (k, v) in entries {
                    stack.push(k);
                    stack.push(v);
                }
            }
            NodeValue::Sequence { items, .. } => stack.extend(items.iter()),
            NodeValue::Scalar { .. } | NodeValue::Alias(_) => {}
        }
    }
    out
}

/// Collections under construction, innermost last.
#[derive(Default)]
struct Builder<'a> {
    open: Vec<Open<'a>>,
    /// How many collections of the document enclose the nodes built (a List's items: 2).
    enclosing: usize,
    /// The anchor ids aliases refer to.
    referenced: HashSet<usize>,
    /// An alias was met, resolved or not.
    aliases: bool,
}

struct Open<'a> {
    node: Node<'a>,
    pending_key: Option<Node<'a>>,
}

impl<'a> Builder<'a> {
    /// Opens a mapping or sequence: its entries or items follow until its end event.
    fn open_collection(&mut self, node: Node<'a>) {
        self.open.push(Open {
            node,
            pending_key: None,
        });
    }

    /// Feeds one event; returns the root node when it is complete.
    fn push(
        &mut self,
        event: Event<'a>,
        span: &Span,
        text: &str,
    ) -> Result<Option<Node<'a>>, SyntaxError> {
        let range = span
            .byte_range()
            .ok_or_else(|| SyntaxError::at(span, "no byte offsets"))?;
        let start_with_tag = span
            .tag_start()
            .and_then(|m| m.byte_offset())
            .map_or(range.start, |t| t.min(range.start));
        let make = |value, anchor| Node {
            value,
            span: range.clone(),
            start_with_tag,
            anchor,
            anchored: false,
            line: span.start.line(),
            column: span.start.col(),
        };
        let complete = match event {
            Event::Scalar(text_value, style, anchor, tag) => {
                let mut node = make(
                    NodeValue::Scalar {
                        text: text_value,
                        style,
                        tag: ScalarTag::of(tag.as_deref()),
                    },
                    anchor,
                );
                // A block scalar's span runs into the next line's indentation: end it at
                // the end of its own last line, as for block collections.
                if node.is_block_scalar() {
                    let trimmed = text[node.span.clone()].trim_end_matches([' ', '\t']).len();
                    node.span.end = node.span.start + trimmed;
                }
                Some(node)
            }
            Event::Alias(id) => {
                self.referenced.insert(id);
                self.aliases = true;
                Some(make(NodeValue::Alias(id), 0))
            }
            Event::UnresolvedAlias(_) => {
                self.aliases = true;
                Some(make(NodeValue::Alias(0), 0))
            }
            Event::MappingStart(..) | Event::SequenceStart(..)
                if self.enclosing + self.open.len() >= MAX_NESTING =>
            {
                return Err(too_deep(span.start.line(), span.start.col() + 1));
            }
            Event::MappingStart(style, anchor, _) => {
                let (flow, entries) = (style == StructureStyle::Flow, Vec::new());
                self.open_collection(make(NodeValue::Mapping { flow, entries }, anchor));
                None
            }
            Event::SequenceStart(style, anchor, _) => {
                let (flow, items) = (style == StructureStyle::Flow, Vec::new());
                self.open_collection(make(NodeValue::Sequence { flow, items }, anchor));
                None
            }
            Event::MappingEnd | Event::SequenceEnd => {
                let mut done = self
                    .open
                    .pop()
                    .ok_or_else(|| SyntaxError::at(span, "unbalanced collection end"))?
                    .node;
                done.span.end = range.end.max(done.span.start);
                // A block collection's end event sits where the next token starts; keep
                // the span on the collection's own lines by trimming trailing white space
                // back to the end of its last line.
                if !done.is_flow() {
                    let own = &text[done.span.clone()];
                    let trimmed = own.trim_end_matches([' ', '\t']).len();
                    done.span.end = done.span.start + trimmed;
                }
                Some(done)
            }
            _ => None,
        };
        let Some(node) = complete else {
            return Ok(None);
        };
        let Some(parent) = self.open.last_mut() else {
            return Ok(Some(node));
        };
        match &mut parent.node.value {
            NodeValue::Mapping { entries, .. } => match parent.pending_key.take() {
                None => parent.pending_key = Some(node),
                Some(key) => entries.push((key, node)),
            },
            NodeValue::Sequence { items, .. } => items.push(node),
            NodeValue::Scalar { .. } | NodeValue::Alias(_) => {
                return Err(SyntaxError::at(span, "a node inside a scalar"));
            }
        }
        Ok(None)
    }
}

/// The first line (1-based) of `text` whose indentation holds a tab where Go's YAML
/// readers refuse one. go-yaml (v2 and v3, both ports of libyaml) skips a tab before a
/// token only inside a flow collection, so a tab in the indentation of a block node, a
/// comment or a blank line fails ("found character that cannot start any token", or "a tab
/// character that violates indentation" after a plain scalar). Its scalar scanners take
/// tabs themselves: anywhere on the later lines of a quoted scalar, on the later lines of a
/// plain scalar from the column past the enclosing collection's indentation on, and in a
/// block scalar past its indentation (not on its first line, where YAML 1.2 allows some).
pub fn tab_in_indentation(text: &str, root: &Node<'_>) -> Option<usize> {
    memchr::memchr(b'\t', text.as_bytes())?;
    let mut exempt = TabExempt::default();
    collect_tab_exempt(text, root, 0, &mut exempt);
    let bytes = text.as_bytes();
    let mut line = 1;
    let mut start = 0;
    while start < bytes.len() {
        let end = memchr::memchr2(b'\n', b'\r', &bytes[start..]).map_or(bytes.len(), |i| start + i);
        let indentation = bytes[start..end]
            .iter()
            .take_while(|b| matches!(b, b' ' | b'\t'))
            .count();
        let spaces = bytes[start..end].iter().take_while(|b| **b == b' ').count();
        if spaces < indentation && !exempt.allows(text, start, spaces) {
            return Some(line);
        }
        // One line break: `\r\n`, `\r` or `\n`.
        let mut next = end + 1;
        if bytes.get(end) == Some(&b'\r') && bytes.get(end + 1) == Some(&b'\n') {
            next += 1;
        }
        start = next;
        line += 1;
    }
    None
}

/// The parts of a document whose lines may start with a tab, to Go's readers.
#[derive(Default)]
struct TabExempt {
    flows: Vec<Range<usize>>,
    blocks: Vec<Range<usize>>,
    quoted: Vec<Range<usize>>,
    /// A multi-line plain scalar, and the column a tab on its later lines may start at.
    plain: Vec<(Range<usize>, usize)>,
}

impl TabExempt {
    /// Whether the line starting at `line_start`, whose first tab is at column `spaces`,
    /// is one that Go's readers accept.
    fn allows(&self, text: &str, line_start: usize, spaces: usize) -> bool {
        let within = |r: &Range<usize>| r.start < line_start && line_start < r.end;
        if self.flows.iter().chain(&self.quoted).any(within) {
            return true;
        }
        if self
            .plain
            .iter()
            .any(|(r, column)| within(r) && spaces >= *column)
        {
            return true;
        }
        tab_allowed_in_block(text, line_start, spaces, &self.blocks)
    }
}

fn tab_allowed_in_block(
    text: &str,
    line_start: usize,
    spaces: usize,
    blocks: &[Range<usize>],
) -> bool {
    let Some(block) = blocks.iter().find(|b| {
        let first_line = text[..b.start].rfind(['\n', '\r']).map_or(0, |i| i + 1);
        first_line <= line_start && line_start < b.end
    }) else {
        return false;
    };
    // The block's indentation is that of its first line with content; a tab on that line
    // (or before that indentation) is refused by Go's readers.
    let first_line = text[..block.start].rfind(['\n', '\r']).map_or(0, |i| i + 1);
    let content = text[first_line..block.end]
        .split(['\n', '\r'])
        .scan(first_line, |at, l| {
            let this = *at;
            *at += l.len() + 1;
            Some((this, l))
        })
        .find(|(_, l)| !l.trim().is_empty());
    let Some((content_start, content_line)) = content else {
        return false;
    };
    let indentation = content_line.bytes().take_while(|b| *b == b' ').count();
    content_start < line_start && spaces >= indentation
}

/// Where go-yaml's plain scalar scanner stops reading after a scalar that ends at `end`:
/// it reads on through blank lines, looking for a continuation, up to the first line with
/// content (a comment line included, where it stops).
fn plain_scan_end(text: &str, end: usize) -> usize {
    let bytes = text.as_bytes();
    let line_end = |from: usize| {
        memchr::memchr2(b'\n', b'\r', &bytes[from..]).map_or(bytes.len(), |i| from + i)
    };
    let next_line = |at: usize| {
        if bytes.get(at) == Some(&b'\r') && bytes.get(at + 1) == Some(&b'\n') {
            at + 2
        } else {
            at + 1
        }
    };
    let mut at = line_end(end.min(bytes.len()));
    while at < bytes.len() {
        let start = next_line(at);
        let stop = line_end(start.min(bytes.len()));
        let first = bytes[start.min(stop)..stop]
            .iter()
            .find(|b| !matches!(b, b' ' | b'\t'));
        match first {
            None => at = stop,
            Some(b'#') => return stop,
            Some(_) => break,
        }
    }
    at
}

/// Collects the exempt parts under `node`; `indent` is the column a plain scalar's later
/// lines may hold a tab from (one past the enclosing block collection's column).
fn collect_tab_exempt(text: &str, node: &Node<'_>, indent: usize, exempt: &mut TabExempt) {
    if node.is_flow() {
        exempt.flows.push(node.span.clone());
        return;
    }
    match &node.value {
        NodeValue::Scalar { style, .. } => match style {
            ScalarStyle::Literal | ScalarStyle::Folded => exempt.blocks.push(node.span.clone()),
            ScalarStyle::SingleQuoted | ScalarStyle::DoubleQuoted => {
                exempt.quoted.push(node.span.clone());
            }
            _ => exempt
                .plain
                .push((node.span.start..plain_scan_end(text, node.span.end), indent)),
        },
        NodeValue::Mapping { entries, .. } => {
            for (k, v) in entries {
                collect_tab_exempt(text, k, node.column + 1, exempt);
                collect_tab_exempt(text, v, node.column + 1, exempt);
            }
        }
        NodeValue::Sequence { items, .. } => {
            for item in items {
                collect_tab_exempt(text, item, node.column + 1, exempt);
            }
        }
        NodeValue::Alias(_) => {}
    }
}

/// Reads a document's top level as [`PlainList`] describes; `Ok(None)` when it is not in
/// that form. Never holds the tree of more than one item: the general parser builds none,
/// the common-layout reader one item's at a time.
pub fn plain_list(text: &str) -> Result<Option<PlainList>, SyntaxError> {
    match plain_list_read_once(text, &mut |_, _| true) {
        ReadOnce::Plain(list) => Ok(Some(list)),
        ReadOnce::NotPlain => Ok(None),
        ReadOnce::Unsettled => plain_list_parsed(text),
    }
}

/// [`plain_list`] by the general parser alone.
pub fn plain_list_parsed(text: &str) -> Result<Option<PlainList>, SyntaxError> {
    let mut parser = Parser::new_from_str_with_options(text, options());
    let mut depth = 0usize;
    let mut expecting_key = true;
    let mut key: Option<Cow<'_, str>> = None;
    let (mut api_version, mut kind, mut items) = (Vec::new(), Vec::new(), None::<usize>);
    let mut in_items = false;
    let mut documents = 0;
    while let Some(event) = parser.next_event() {
        let (event, span) = event?;
        match event {
            Event::StreamStart | Event::StreamEnd | Event::DocumentEnd => continue,
            Event::DocumentStart(..) => {
                documents += 1;
                if documents > 1 {
                    return Err(SyntaxError::at(
                        &span,
                        "a second document where one was expected",
                    ));
                }
                continue;
            }
            Event::Alias(_) | Event::UnresolvedAlias(_) => return Ok(None),
            _ => {}
        }
        match (depth, event) {
            (0, Event::MappingStart(..)) => depth = 1,
            (0, _) => return Ok(None),
            (1, Event::MappingEnd) => depth = 0,
            (1, Event::Scalar(value, style, anchor, tag)) if expecting_key => {
                if tag.is_some() || anchor != 0 || (style == ScalarStyle::Plain && value == "<<") {
                    return Ok(None);
                }
                key = Some(value);
                expecting_key = false;
            }
            (1, Event::Scalar(value, _, _, tag)) => {
                match key.as_deref() {
                    Some("apiVersion" | "kind") if tag.is_some() => return Ok(None),
                    Some("apiVersion") => api_version.push(value.into_owned()),
                    // Not a List: no need to read further.
                    Some("kind") if !value.ends_with("List") => return Ok(None),
                    Some("kind") => kind.push(value.into_owned()),
                    Some("items") => return Ok(None),
                    _ => {}
                }
                expecting_key = true;
            }
            (1, event @ (Event::SequenceStart(..) | Event::MappingStart(..))) if !expecting_key => {
                let is_items = key.as_deref() == Some("items");
                if matches!(key.as_deref(), Some("apiVersion" | "kind")) {
                    return Ok(None);
                }
                if is_items {
                    if items.is_some() || matches!(event, Event::MappingStart(..)) {
                        return Ok(None);
                    }
                    items = Some(0);
                }
                in_items = is_items;
                depth = 2;
            }
            (1, _) => return Ok(None),
            (2, Event::SequenceEnd | Event::MappingEnd) => {
                depth = 1;
                in_items = false;
                expecting_key = true;
            }
            (d, event) => {
                let opens = matches!(event, Event::SequenceStart(..) | Event::MappingStart(..));
                let closes = matches!(event, Event::SequenceEnd | Event::MappingEnd);
                if in_items && d == 2 && !closes {
                    items = items.map(|n| n + 1);
                }
                if opens {
                    depth += 1;
                } else if closes {
                    depth -= 1;
                }
            }
        }
    }
    let (Some(items), [api_version], [kind]) = (items, api_version.as_slice(), kind.as_slice())
    else {
        return Ok(None);
    };
    Ok(Some(PlainList {
        api_version: api_version.clone(),
        kind: kind.clone(),
        items,
    }))
}

/// Why reading the items of a List one at a time stopped.
#[derive(Debug)]
pub enum ItemsError<E> {
    Syntax(SyntaxError),
    Item(E),
}

/// Calls `f` with each item of the top-level `items` sequence of a document in the form
/// [`plain_list`] accepts, as a tree (spans in `text`), one at a time: only one item's tree
/// exists at once.
pub fn for_each_list_item<'a, E>(
    text: &'a str,
    mut f: impl FnMut(usize, Node<'a>) -> Result<(), E>,
) -> Result<(), ItemsError<E>> {
    // The common layout first; where it stops after some items, the parser goes on from
    // the next one (its trees of the items before are the same, and are not handed over again).
    let mut handed = 0;
    let mut failed = None;
    let quick = common_layout::for_each_list_item(text, &mut |item| match f(handed, item) {
        Ok(()) => {
            handed += 1;
            true
        }
        Err(error) => {
            failed = Some(error);
            false
        }
    });
    if let Some(error) = failed {
        return Err(ItemsError::Item(error));
    }
    match quick {
        Ok(()) => Ok(()),
        Err(_) => for_each_list_item_parsed(text, handed, f),
    }
}

/// [`for_each_list_item`] by the general parser, handing over the items from `skip` on.
fn for_each_list_item_parsed<'a, E>(
    text: &'a str,
    skip: usize,
    mut f: impl FnMut(usize, Node<'a>) -> Result<(), E>,
) -> Result<(), ItemsError<E>> {
    let mut parser = Parser::new_from_str_with_options(text, options());
    let mut depth = 0usize;
    let mut expecting_key = true;
    let mut items_next = false;
    let mut in_items = false;
    // The root mapping and its `items` enclose every item.
    let mut builder = Builder {
        enclosing: 2,
        ..Builder::default()
    };
    let mut index = 0;
    while let Some(event) = parser.next_event() {
        let (event, span) = event.map_err(|e| ItemsError::Syntax(e.into()))?;
        if matches!(
            event,
            Event::StreamStart | Event::StreamEnd | Event::DocumentStart(..) | Event::DocumentEnd
        ) {
            continue;
        }
        if in_items {
            if builder.open.is_empty() && matches!(event, Event::SequenceEnd) {
                in_items = false;
                depth = 1;
                expecting_key = true;
                continue;
            }
            if let Some(item) = builder
                .push(event, &span, text)
                .map_err(ItemsError::Syntax)?
            {
                if index >= skip {
                    f(index, item).map_err(ItemsError::Item)?;
                }
                index += 1;
            }
            continue;
        }
        let opens = matches!(event, Event::SequenceStart(..) | Event::MappingStart(..));
        let closes = matches!(event, Event::SequenceEnd | Event::MappingEnd);
        if depth == 1 {
            match &event {
                Event::Scalar(value, ..) if expecting_key => {
                    items_next = value == "items";
                    expecting_key = false;
                    continue;
                }
                Event::SequenceStart(..) if items_next => {
                    in_items = true;
                    items_next = false;
                    continue;
                }
                _ if !closes => {
                    expecting_key = !opens;
                    items_next = false;
                }
                _ => {}
            }
        }
        if opens {
            depth += 1;
        } else if closes {
            depth = depth.saturating_sub(1);
            if depth == 1 {
                expecting_key = true;
            }
        }
    }
    Ok(())
}

/// Reads the top-level `apiVersion` and `kind` of a document, parsing no further than
/// needed: most documents name their kind in the first two lines, and only Ingresses and
/// Lists are parsed whole.
pub fn top_level_type(text: &str) -> Result<TopLevelType, SyntaxError> {
    let mut parser = Parser::new_from_str_with_options(text, options());
    let mut depth = 0usize;
    // At depth 1 of the root mapping, keys and values alternate.
    let mut expecting_key = true;
    let mut current_key: Option<Cow<'_, str>> = None;
    let mut found = TopLevelType::default();
    while let Some(event) = parser.next_event() {
        let (event, _span) = event?;
        match event {
            Event::MappingStart(..) | Event::SequenceStart(..) => {
                if depth == 0 && matches!(event, Event::SequenceStart(..)) {
                    return Ok(found);
                }
                depth += 1;
            }
            Event::MappingEnd | Event::SequenceEnd => {
                depth = depth.saturating_sub(1);
                if depth == 1 {
                    expecting_key = !expecting_key;
                }
                if depth == 0 {
                    break;
                }
            }
            Event::Scalar(value, ..) if depth == 1 => {
                if expecting_key {
                    current_key = Some(value);
                } else {
                    match current_key.as_deref() {
                        Some("kind") => found.kind = Some(value.into_owned()),
                        Some("apiVersion") => found.api_version = Some(value.into_owned()),
                        _ => {}
                    }
                    current_key = None;
                }
                expecting_key = !expecting_key;
            }
            Event::Alias(_) | Event::UnresolvedAlias(_) if depth == 1 => {
                expecting_key = !expecting_key;
            }
            Event::Scalar(..) if depth == 0 => return Ok(found),
            Event::DocumentEnd => break,
            _ => {}
        }
        // Only Ingresses and lists need the apiVersion too; anything else is decided by kind.
        if let Some(kind) = &found.kind {
            let needs_version = matches!(kind.as_str(), "Ingress" | "List" | "IngressList");
            if !needs_version || found.api_version.is_some() {
                return Ok(found);
            }
        }
    }
    Ok(found)
}

/// The top-level `apiVersion` and `kind` of a document, where it has them.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TopLevelType {
    pub api_version: Option<String>,
    pub kind: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ty(text: &str) -> (Option<String>, Option<String>) {
        let t = top_level_type(text).unwrap();
        (t.api_version, t.kind)
    }

    fn s(v: &str) -> Option<String> {
        Some(v.to_owned())
    }

    #[test]
    fn kind_anywhere_at_the_top_level() {
        assert_eq!(
            ty("apiVersion: v1\nkind: ConfigMap\n"),
            (s("v1"), s("ConfigMap"))
        );
        assert_eq!(
            ty("kind: Ingress\nmetadata: {name: x}\napiVersion: networking.k8s.io/v1\n"),
            (s("networking.k8s.io/v1"), s("Ingress"))
        );
        assert_eq!(
            ty("metadata:\n  kind: Ingress\napiVersion: v1\nkind: \"Ingress\"\n"),
            (s("v1"), s("Ingress"))
        );
        assert_eq!(
            ty("{\"apiVersion\": \"networking.k8s.io/v1\", \"kind\": \"Ingress\"}"),
            (s("networking.k8s.io/v1"), s("Ingress"))
        );
    }

    #[test]
    fn kind_nested_or_in_strings_does_not_count() {
        assert_eq!(
            ty("apiVersion: v1\nkind: ConfigMap\ndata:\n  x: |\n    kind: Ingress\n"),
            (s("v1"), s("ConfigMap"))
        );
        assert_eq!(ty("spec:\n  kind: Ingress\n"), (None, None));
        assert_eq!(ty("- kind: Ingress\n"), (None, None));
        assert_eq!(ty("kind\n"), (None, None));
        assert_eq!(ty("# only a comment\n"), (None, None));
        assert_eq!(
            ty("spec: [kind, Ingress]\nother: {kind: Ingress}\n"),
            (None, None)
        );
    }

    #[test]
    fn tree_spans_are_bytes() {
        let text = "metadata:\n  name: \"é\"\nspec:\n  ingressClassName: nginx # c\n";
        let root = parse_document(text).unwrap().unwrap();
        let name = root.get("metadata").unwrap().get("name").unwrap();
        assert_eq!(&text[name.span.clone()], "\"é\"");
        let class = root.get("spec").unwrap().get("ingressClassName").unwrap();
        assert_eq!(&text[class.span.clone()], "nginx");
        let spec = root.get("spec").unwrap();
        assert_eq!(&text[spec.span.clone()], "ingressClassName: nginx # c\n");
    }

    #[test]
    fn empty_document_has_no_root() {
        assert!(parse_document("---\n# nothing\n").unwrap().is_none());
        assert!(parse_document("").unwrap().is_none());
    }

    #[test]
    fn syntax_errors_have_a_position() {
        let err = parse_document("a: [1, 2\nb: 3\n").unwrap_err();
        assert!(err.line >= 1, "{err}");
    }
}
