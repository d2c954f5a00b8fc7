//! A `ResourceList` cut into its items and its `functionConfig` by lines, each line checked
//! ([`LineChecker`]) so that the cut is where a YAML parser puts the items; made while the
//! input is read ([`read`]), and what the cut sees of the items on the way ([`ItemsSeen`]).

use std::io::Read;
use std::ops::Range;

use super::error::{KrmError, shape};
use super::item_lines;
use super::line_checker::{LineChecker, ends_with_dash};
use super::plain_runs::{block_run, plain_run};
use crate::held_memory::{self, HeldBytes, Pages};
use crate::render;

/// The `ResourceList`'s API group and version.
pub(super) const RESOURCE_LIST_API_VERSION: &str = "config.kubernetes.io/v1";

/// A `ResourceList` cut into its parts by lines.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct ListParts {
    /// Each item's bytes, from its `-` line to the next item (or the end of `items`).
    pub(super) items: Vec<Range<usize>>,
    /// The column of the items' `-`.
    pub(super) item_column: usize,
    /// The `functionConfig:` entry's bytes.
    pub(super) function_config: Option<Range<usize>>,
}

/// Top-level keys of a `ResourceList`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Section {
    Prologue,
    ApiVersion,
    Kind,
    Items,
    FunctionConfig,
}

/// Cuts `text` into items and the function config; `checked`, checking every line with
/// [`LineChecker`] on the way.
pub(super) fn cut_into_parts(text: &str, checked: bool) -> Result<ListParts, KrmError> {
    if !checked && let Some(parts) = quick_cut(text) {
        return Ok(parts);
    }
    let mut cutter = Cutter::new(checked);
    cutter.feed(text.as_bytes());
    cutter.finish()
}

/// Ranges still open (an item, the functionConfig) end here until the next part starts
/// or the input ends.
const OPEN: usize = usize::MAX;

/// A `ResourceList` cut into its parts, and checked when asked to, line by line as it is
/// read: fed in pieces that each end at a line break (but the last), so that the cut and
/// the checks are done by the time the input is.
#[derive(Debug)]
struct Cutter {
    state: CutState,
    /// Lines read so far.
    number: usize,
    checker: Option<LineChecker>,
    /// Whether runs of plain lines are skipped by a search ([`plain_run`]); off, every line
    /// goes through the line logic (the tests compare the two).
    skip_plain: bool,
    /// Bytes fed so far.
    bytes: usize,
    /// The first error of each kind, in the order they are reported: a tab or CR, a
    /// Unicode line break (these over the whole input), then what the cut found (the cut
    /// stops at it; invalid UTF-8 among them, in a line it reads: the lines it passes over
    /// are the items', which the pipeline reads as UTF-8, and the functionConfig's, which
    /// its parser does).
    tab: Option<KrmError>,
    line_break: Option<KrmError>,
    cut: Option<KrmError>,
    items_seen: ItemsSeen,
}

/// What the cut learns of the items' bytes while they are in cache, so that rendering does
/// not read them again: which items the pipeline's pre-filter lets through, and whether
/// all the text is UTF-8.
#[derive(Debug, Default)]
pub(super) struct ItemsSeen {
    pub(super) may_hold_ingress: Vec<bool>,
    /// The first item not yet seen to its end.
    next: usize,
    pub(super) not_utf8: bool,
}

impl Cutter {
    fn new(checked: bool) -> Self {
        Self {
            state: CutState {
                out: ListParts::default(),
                section: Section::Prologue,
                seen: Vec::new(),
                item_column: None,
            },
            number: 0,
            checker: checked.then(LineChecker::default),
            skip_plain: true,
            bytes: 0,
            tab: None,
            line_break: None,
            cut: None,
            items_seen: ItemsSeen::default(),
        }
    }

    /// Reads the next piece of the input: whole lines, but at the end of the input.
    fn feed(&mut self, piece: &[u8]) {
        let base = self.bytes;
        self.bytes += piece.len();
        let text = piece;
        let lines_before = self.number;
        if self.checker.is_some() && self.tab.is_none() {
            self.find_unreadable_bytes(text, lines_before);
        }
        let stopped = self.tab.is_some() || self.line_break.is_some() || self.cut.is_some();
        // Checked once for the piece (whole lines), so that no line of it needs to be.
        let utf8 = crate::documents::utf8(piece).is_ok();
        self.items_seen.not_utf8 |= !utf8;
        if !stopped && let Err(error) = self.cut_lines(base, text, utf8) {
            self.cut = Some(error);
        }
        if self.cut.is_none() {
            self.see_items(piece, base);
        }
        if stopped || self.cut.is_some() {
            // Lines are still counted for the messages of the whole-input checks.
            self.number = lines_before + memchr::memchr_iter(b'\n', piece).count();
        }
    }

    /// Sees the items' parts in `piece` (whole lines from byte `base`): the pre-filter of
    /// an item is that of its parts, since none of its words holds a line break.
    fn see_items(&mut self, piece: &[u8], base: usize) {
        let end = base + piece.len();
        let seen = &mut self.items_seen;
        let items = &self.state.out.items;
        seen.may_hold_ingress.resize(items.len(), false);
        while let Some(range) = items.get(seen.next) {
            let (from, to) = (range.start.max(base), range.end.min(end));
            if from < to {
                seen.may_hold_ingress[seen.next] |=
                    render::may_hold_ingress(&piece[from - base..to - base]);
            }
            if range.end > end {
                break;
            }
            seen.next += 1;
        }
    }

    /// The whole-input checks of a checked cut, on one piece that starts after `lines`
    /// lines: tabs and CR, and the Unicode line breaks Go reads as such.
    fn find_unreadable_bytes(&mut self, text: &[u8], lines: usize) {
        if let Some(at) = memchr::memchr2(b'\t', b'\r', text) {
            self.tab = Some(shape(
                lines + line_of(text, at),
                "a tab or a carriage return; this function reads ResourceLists as kustomize writes them (spaces, LF)",
            ));
            return;
        }
        if self.line_break.is_some() {
            return;
        }
        // NEL is C2 85, LINE and PARAGRAPH SEPARATOR E2 80 A8/A9: look at C2 and E2 bytes only.
        for at in memchr::memchr2_iter(0xc2, 0xe2, text) {
            let what = match text.get(at..at + 3) {
                Some([0xc2, 0x85, _]) => "NEL (U+0085)",
                Some([0xe2, 0x80, 0xa8]) => "LINE SEPARATOR (U+2028)",
                Some([0xe2, 0x80, 0xa9]) => "PARAGRAPH SEPARATOR (U+2029)",
                _ if text.get(at..at + 2) == Some(&[0xc2, 0x85]) => "NEL (U+0085)",
                _ => continue,
            };
            self.line_break = Some(shape(
                lines + line_of(text, at),
                format!("a {what}, which Go's YAML readers read as a line break"),
            ));
            return;
        }
    }

    /// The cut, once the whole input is read.
    fn finish(self) -> Result<ListParts, KrmError> {
        if let Some(error) = self.tab.or(self.line_break).or(self.cut) {
            return Err(error);
        }
        if !self.state.seen.contains(&Section::Kind)
            || !self.state.seen.contains(&Section::ApiVersion)
        {
            return Err(shape(
                1,
                format!(
                    "not a ResourceList: expected apiVersion {RESOURCE_LIST_API_VERSION} and kind ResourceList"
                ),
            ));
        }
        let mut out = self.state.out;
        let end = self.bytes;
        for range in out.items.iter_mut().chain(out.function_config.as_mut()) {
            if range.end == OPEN {
                range.end = end;
            }
        }
        out.item_column = self.state.item_column.unwrap_or(0);
        // Kept until the output is written: no spare room.
        out.items.shrink_to_fit();
        Ok(out)
    }

    /// Cuts the lines of one piece that starts at byte `base`, checking each with the
    /// checker when there is one.
    fn cut_lines(&mut self, base: usize, text: &[u8], utf8: bool) -> Result<(), KrmError> {
        let state = &mut self.state;
        // Lines are counted only for a message: a line's number is found when one is made.
        let lines_before = self.number;
        let line_at =
            |start: usize| lines_before + memchr::memchr_iter(b'\n', &text[..start]).count() + 1;
        let mut checker = self.checker.as_mut();
        let mut offset = 0;
        let result = (|| -> Result<(), KrmError> {
            while offset < text.len() {
                let items_in_column_0 =
                    state.section == Section::Items && state.item_column == Some(0);
                if self.skip_plain {
                    offset = skip_runs(text, offset, items_in_column_0, checker.as_deref());
                }
                if offset == text.len() {
                    break;
                }
                let start = offset;
                let end = memchr::memchr(b'\n', &text[start..]).map_or(text.len(), |i| start + i);
                offset = (end + 1).min(text.len());
                let line = &text[start..end];
                if self.skip_plain
                    && items_in_column_0
                    && let Some(checker) = checker.as_deref_mut()
                    && (utf8 || line.is_ascii())
                    && take_common_line(checker, &mut state.out.items, base + start, line)
                {
                    continue;
                }
                if line.first() == Some(&b' ')
                    && passed_over(line, state.section, state.item_column, checker.as_deref())
                {
                    continue;
                }
                let content = std::str::from_utf8(line).map_err(|e| KrmError::NotUtf8 {
                    offset: base + start + e.valid_up_to(),
                })?;
                if checker
                    .as_mut()
                    .is_some_and(|c| c.in_block_scalar(content.as_bytes()))
                {
                    continue;
                }
                state.read_line(content, base + start, checker.as_deref_mut(), || {
                    line_at(start)
                })?;
            }
            Ok(())
        })();
        self.number = lines_before
            + memchr::memchr_iter(b'\n', text).count()
            + usize::from(text.last().is_some_and(|b| *b != b'\n'));
        result
    }

    /// The cut, and what it saw of the items.
    fn into_cut(mut self) -> ListCut {
        let seen = std::mem::take(&mut self.items_seen);
        ListCut {
            parts: self.finish(),
            seen,
        }
    }
}

/// The cut of a `ResourceList` as kustomize writes it (`items:` with its `- ` in column 0,
/// then `functionConfig:`), found by searching for those markers rather than line by line;
/// `None` when the text is not of that shape. The checked cut must come out the same.
fn quick_cut(text: &str) -> Option<ListParts> {
    let bytes = text.as_bytes();
    let items = memchr::memmem::find(bytes, b"\nitems:\n")? + "\nitems:\n".len();
    if !text[items..].starts_with("- ") {
        return None;
    }
    // Past the last item's `- ` line, the first line in column 0 that is not a comment ends
    // the items; the top-level keys after it (kustomize writes only `functionConfig`) are
    // found the same way. Only that tail is read line by line.
    let last_item = items + memchr::memmem::rfind(&bytes[items..], b"\n- ").map_or(0, |i| i + 1);
    let mut keys = Vec::new();
    let mut at = last_item;
    while let Some(newline) = memchr::memchr(b'\n', &bytes[at..]) {
        at += newline + 1;
        match bytes.get(at) {
            None | Some(b' ' | b'#' | b'\n') => {}
            Some(_) => keys.push(at),
        }
    }
    let end = keys.first().copied().unwrap_or(text.len());
    let mut parts = ListParts::default();
    let mut start = items;
    for at in memchr::memmem::find_iter(&bytes[items..end], b"\n- ") {
        parts.items.push(start..items + at + 1);
        start = items + at + 1;
    }
    parts.items.push(start..end);
    for (k, &key) in keys.iter().enumerate() {
        if text[key..].starts_with("functionConfig:") {
            parts.function_config = Some(key..keys.get(k + 1).copied().unwrap_or(text.len()));
        }
    }
    Some(parts)
}

/// Where the cut is: the parts found so far, and the part and the items' column it is in.
#[derive(Debug)]
struct CutState {
    out: ListParts,
    section: Section,
    seen: Vec<Section>,
    item_column: Option<usize>,
}

impl CutState {
    /// Reads one line that no run passed over and that is not in a block scalar: a document
    /// marker, an item's `-` line, an indented line or a top-level key, starting at byte `at`
    /// of the input (`line_at` gives its number, for a message).
    fn read_line(
        &mut self,
        content: &str,
        at: usize,
        mut checker: Option<&mut LineChecker>,
        line_at: impl Fn() -> usize,
    ) -> Result<(), KrmError> {
        let indent = content.len() - content.trim_start_matches(' ').len();
        let rest = &content[indent..];
        if rest.is_empty() || rest.starts_with('#') {
            return Ok(());
        }
        if indent == 0 && (rest == "---" || rest == "..." || rest.starts_with("--- ")) {
            if self.section == Section::Prologue && rest == "---" {
                return Ok(());
            }
            return Err(shape(line_at(), "more than one YAML document"));
        }
        // An item of `items`: a `-` line in the items' column.
        if self.section == Section::Items && (rest.starts_with("- ") || rest == "-") {
            let column = *self.item_column.get_or_insert(indent);
            if indent == column {
                if rest == "-" {
                    return Err(shape(
                        line_at(),
                        "an item that starts on the line after its `-`",
                    ));
                }
                start_item(&mut self.out.items, at);
                if let Some(checker) = checker.as_deref_mut() {
                    checker
                        .check(content, 0)
                        .map_err(|e| e.on_line(line_at()))?;
                }
                return Ok(());
            }
        }
        if indent == 0 && rest.starts_with('-') {
            return Err(shape(line_at(), "a sequence entry outside `items`"));
        }
        if indent > 0 {
            if self.section == Section::Prologue {
                return Err(shape(line_at(), "the ResourceList is not a block mapping"));
            }
            if self.section == Section::Items && self.item_column.is_none_or(|c| indent < c) {
                return Err(shape(line_at(), "a line of `items` outside its items"));
            }
            // The functionConfig is read by a YAML parser: a construct cut at a column-0
            // line does not parse, so its lines need no check.
            if self.section != Section::FunctionConfig
                && let Some(checker) = checker.as_deref_mut()
            {
                checker
                    .check(content, 0)
                    .map_err(|e| e.on_line(line_at()))?;
            }
            return Ok(());
        }
        // A top-level key.
        if let Some(last) = self
            .out
            .items
            .last_mut()
            .filter(|_| self.section == Section::Items)
        {
            last.end = at;
        }
        if let Some(range) = self.out.function_config.as_mut()
            && self.section == Section::FunctionConfig
        {
            range.end = at;
        }
        let (key, next) = top_level_key(rest).map_err(|why| shape(line_at(), why))?;
        self.section = next;
        if self.section == Section::FunctionConfig {
            self.out.function_config = Some(at..OPEN);
        }
        if self.seen.contains(&self.section) {
            return Err(shape(line_at(), format!("`{key}` appears more than once")));
        }
        self.seen.push(self.section);
        if let Some(checker) = checker {
            checker
                .check(content, 0)
                .map_err(|e| e.on_line(line_at()))?;
        }
        Ok(())
    }
}

/// Where the line logic goes on from `offset` (a line's start), past the runs of lines it
/// would pass over, found by searches rather than line by line: indented lines of an item
/// when the items are in column 0 (`items_in_column_0`), outside block scalars, skipped
/// whole by a search for the bytes that could make the line logic read a line (it reads
/// the line the search stops at); and the lines of a block scalar, by their leading spaces.
fn skip_runs(
    text: &[u8],
    offset: usize,
    items_in_column_0: bool,
    checker: Option<&LineChecker>,
) -> usize {
    let mut offset = offset;
    if items_in_column_0 && checker.is_some_and(|c| c.block.is_none()) {
        offset = plain_run(text, offset);
    }
    if let Some(LineChecker {
        block: Some((_, Some(column))),
    }) = checker
    {
        offset = block_run(text, offset, *column);
    }
    offset
}

/// Takes one of the lines the runs stop at most often ([`item_lines`]) as the line logic
/// takes it: an item's `- ` line (it starts at byte `at`), a line with a one-line quoted
/// scalar, a block scalar's header, its first line and the line after it. In `items`, with
/// the items in column 0; `false` leaves the line to the line logic.
fn take_common_line(
    checker: &mut LineChecker,
    items: &mut Vec<Range<usize>>,
    at: usize,
    line: &[u8],
) -> bool {
    if checker.in_block_scalar(line) {
        return true;
    }
    match item_lines::take(line) {
        Some(item_lines::Taken::ItemStart) => {
            start_item(items, at);
            true
        }
        Some(item_lines::Taken::Indented) => true,
        Some(item_lines::Taken::BlockHeader { parent }) => {
            checker.block = Some((parent, None));
            true
        }
        None => false,
    }
}

/// An item starts at byte `at`, and ends the item before it.
fn start_item(items: &mut Vec<Range<usize>>, at: usize) {
    if let Some(last) = items.last_mut() {
        last.end = at;
    }
    items.push(at..OPEN);
}

/// Whether an indented line (it starts with a space) is passed over without being read.
/// Most lines are indented lines of an item (the items in column 0) or of the
/// functionConfig that nothing of the line logic would stop at: passing them over is what
/// keeps the checks cheap beside the rendering.
fn passed_over(
    line: &[u8],
    section: Section,
    item_column: Option<usize>,
    checker: Option<&LineChecker>,
) -> bool {
    match checker {
        Some(checker) if checker.in_block_content(line) => true,
        Some(checker) if checker.block.is_some() => false,
        _ if section == Section::FunctionConfig => true,
        None => section == Section::Items && item_column == Some(0),
        Some(_) => {
            section == Section::Items
                && item_column == Some(0)
                && !item_lines::holds_opener(line)
                && !ends_with_dash(line)
        }
    }
}

/// A top-level key of the `ResourceList` (`rest`, its line from column 0): the key, and the
/// part it starts; `Err` says why it is refused.
fn top_level_key(rest: &str) -> Result<(&str, Section), String> {
    let (key, value) = match rest.split_once(':') {
        Some((key, value)) if value.is_empty() || value.starts_with(' ') => (key, value.trim()),
        _ => return Err("expected a top-level key of the ResourceList".to_owned()),
    };
    let section = match (key, value) {
        ("apiVersion", RESOURCE_LIST_API_VERSION) => Section::ApiVersion,
        ("kind", "ResourceList") => Section::Kind,
        ("apiVersion" | "kind", other) => {
            return Err(format!(
                "{key}: expected {RESOURCE_LIST_API_VERSION} ResourceList, found {other}"
            ));
        }
        ("items", "" | "[]") => Section::Items,
        ("functionConfig", _) => Section::FunctionConfig,
        ("results", _) => {
            return Err(
                "the ResourceList already has results; this function writes its own".to_owned(),
            );
        }
        (other, _) => {
            return Err(format!(
                "`{}` is not a key of a ResourceList (apiVersion, kind, items, functionConfig)",
                other.escape_debug()
            ));
        }
    };
    Ok((key, section))
}

pub(super) fn line_of(text: &(impl AsRef<[u8]> + ?Sized), offset: usize) -> usize {
    memchr::memchr_iter(b'\n', &text.as_ref()[..offset]).count() + 1
}

/// An item's text as a document of its own: `- ` becomes two spaces.
pub(super) fn item_document(text: &[u8], range: &Range<usize>, column: usize) -> String {
    let mut document = String::from_utf8_lossy(&text[range.clone()]).into_owned();
    document.replace_range(column..column + 1, " ");
    document
}

/// The cut of a `ResourceList`, its lines checked: made while it is read ([`read`]) or
/// at once ([`ListCut::of`]).
#[derive(Debug)]
pub struct ListCut {
    pub(super) parts: Result<ListParts, KrmError>,
    pub(super) seen: ItemsSeen,
}

impl ListCut {
    /// The cut of a whole `ResourceList`, given at once.
    pub(super) fn of(text: &[u8]) -> Self {
        let mut cutter = Cutter::new(true);
        cutter.feed(text);
        cutter.into_cut()
    }
}

/// How many bytes are read at a time; the cut gets them as whole lines.
const READ_PIECE: usize = 1 << 20;

/// Reads a `ResourceList` to its end and cuts it. The input is read into room for
/// `reserve` bytes (zeroed room: the system maps its pages only once they are written, in
/// huge pages past the first where they are offered, [`held_memory`]), and each part read,
/// as whole lines, is lent to a thread that cuts it and checks its lines while the rest is
/// read into the room after it: the cut is ready when the input ends, and nothing is
/// copied. A longer input is read on after the room is full, and the rest cut then.
pub fn read(mut input: impl Read, reserve: usize) -> std::io::Result<(HeldBytes, ListCut)> {
    let mut text = HeldBytes::with_room(reserve, Pages::offered(held_memory::HUGE_PAGE));
    let mut filled = 0;
    let mut sent = 0;
    let (read, mut cutter) = std::thread::scope(|scope| {
        let (pieces, received) = std::sync::mpsc::channel::<&[u8]>();
        let worker = scope.spawn(move || {
            let mut cutter = Cutter::new(true);
            for piece in received {
                cutter.feed(piece);
            }
            cutter
        });
        // `rest` is the room not yet lent; its first `pending` bytes are read, a line not
        // yet ended.
        let mut rest: &mut [u8] = text.spare_room_mut();
        let mut pending = 0;
        let read = loop {
            let room = (rest.len() - pending).min(READ_PIECE);
            if room == 0 {
                break Ok(false);
            }
            let n = match input.read(&mut rest[pending..pending + room]) {
                Ok(0) => break Ok(true),
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => break Err(e),
            };
            filled += n;
            pending += n;
            if let Some(i) = memchr::memrchr(b'\n', &rest[pending - n..pending]) {
                let lines = pending - n + i + 1;
                let (piece, after) = std::mem::take(&mut rest).split_at_mut(lines);
                rest = after;
                pending -= lines;
                sent += lines;
                if pieces.send(piece).is_err() {
                    // The cutter stopped (a panic, which the join passes on).
                    break Ok(true);
                }
            }
        };
        drop(pieces);
        let cutter = worker
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (read, cutter)
    });
    text.hold(filled);
    if !read? {
        while text.read_from(&mut input, READ_PIECE)? > 0 {}
    }
    cutter.feed(&text[sent..]);
    Ok((text, cutter.into_cut()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines an item may hold, among them every way a scalar or a collection can run over a
    /// line break and put a line that looks like the next item (`- `) in column 0.
    const FRAGMENTS: [&str; 16] = [
        "  name: web\n",
        "  a: \"off\"\n",
        "  b: 'it''s'\n",
        "  c: \"one\n- kind: Fake\n  d: two\"\n",
        "  c: 'one\n- kind: Fake\n  d: two'\n",
        "  e: [x,\n- kind: Fake, y]\n",
        "  f: {x: 1,\n- kind: Fake}\n",
        "  g: |\n    - kind: Fake\n    \"x\n",
        "  h: >-\n    folded\n\n    text\n",
        "  i:\n  - one\n  - \"two\"\n",
        "  j: &anchor x\n",
        "  k: plain text\n    continued \"here\n",
        "# a comment\n",
        "  l: {}\n  m: []\n",
        "  n: \"a\\\"b\"\n",
        "  o: x # \"not a quote\n",
    ];

    proptest::proptest! {
        /// Whatever the line checks accept is cut exactly where a YAML parser puts the items:
        /// as many, and each the same value as the parser's item.
        #[test]
        fn an_accepted_cut_is_the_parsers(items in proptest::collection::vec(
            proptest::collection::vec(0..FRAGMENTS.len(), 0..5), 1..5)
        ) {
            let mut text = String::from("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n");
            for (i, fragments) in items.iter().enumerate() {
                text.push_str(&format!("- kind: K{i}\n"));
                // Each at most once: a key twice is a document Go refuses anyway.
                let mut used = Vec::new();
                for f in fragments {
                    if !used.contains(f) {
                        used.push(*f);
                        text.push_str(FRAGMENTS[*f]);
                    }
                }
            }
            let Ok(parts) = cut_into_parts(&text, true) else {
                return Ok(());
            };
            let parsed: serde_json::Value = serde_saphyr::from_str(&text).expect("the checks accepted what a parser refuses");
            let parsed_items = parsed["items"].as_array().expect("items");
            proptest::prop_assert_eq!(parts.items.len(), parsed_items.len());
            proptest::prop_assert_eq!(&parts, &super::cut_into_parts(&text, false).expect("the quick cut"));
            for (range, want) in parts.items.iter().zip(parsed_items) {
                let item: serde_json::Value =
                    serde_saphyr::from_str(&item_document(text.as_bytes(), range, parts.item_column)).expect("an item parses alone");
                proptest::prop_assert_eq!(&item, want);
            }
        }
    }

    /// A `ResourceList` whose items are `- kind: K<i>` and then the fragments named.
    fn resource_list_of(items: &[Vec<usize>], fragments: &[&str]) -> String {
        let mut text =
            String::from("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n");
        for (i, named) in items.iter().enumerate() {
            text.push_str(&format!("- kind: K{i}\n"));
            for f in named {
                text.push_str(fragments[*f]);
            }
        }
        text.push_str("functionConfig:\n  kind: X\n");
        text
    }

    /// Feeds `text` to `cutter` in pieces of whole lines, a piece ending after line `n`
    /// where `breaks[n]`, and the rest at the end.
    fn feed_in_pieces(cutter: &mut Cutter, text: &[u8], breaks: &[bool]) {
        let mut piece = 0;
        for (line, at) in memchr::memchr_iter(b'\n', text).enumerate() {
            if breaks.get(line).copied().unwrap_or(false) {
                cutter.feed(&text[piece..=at]);
                piece = at + 1;
            }
        }
        cutter.feed(&text[piece..]);
    }

    proptest::proptest! {
        /// The cut made while the input is read, in pieces of whole lines, is the cut of the
        /// whole input: the same items, or the same refusal.
        #[test]
        fn a_cut_in_pieces_is_the_cut_of_the_whole(
            items in proptest::collection::vec(proptest::collection::vec(0..FRAGMENTS.len(), 0..5), 1..5),
            breaks in proptest::collection::vec(proptest::bool::ANY, 64),
            tab in proptest::option::of(0..64usize),
        ) {
            let mut text = resource_list_of(&items, &FRAGMENTS);
            // A tab somewhere, refused wherever it is.
            if let Some(line) = tab
                && let Some((at, _)) = text.match_indices('\n').nth(line)
            {
                text.insert(at, '\t');
            }
            let whole = cut_into_parts(&text, true).map_err(|e| e.to_string());
            let mut cutter = Cutter::new(true);
            feed_in_pieces(&mut cutter, text.as_bytes(), &breaks);
            proptest::prop_assert_eq!(cutter.finish().map_err(|e| e.to_string()), whole);
        }
    }

    /// Item lines that the pipeline's pre-filter lets through, or not.
    const SEEN_FRAGMENTS: [&str; 7] = [
        "  kind: Ingress\n",
        "  kind: ConfigMapList\n",
        "  a: \"\\x49ngress\"\n",
        "  b: !!str x\n",
        "  data:\n    c: |\n      Ingress in a block scalar\n",
        "  plain: a value long enough to run past one block of thirty-two bytes\n",
        "  d: In\n  e: gress\n",
    ];

    proptest::proptest! {
        /// What the cut sees of the items while reading them in pieces is the pre-filter of
        /// each whole item, and whether the text is UTF-8.
        #[test]
        fn the_items_seen_in_pieces_are_the_pre_filter_of_each_item(
            items in proptest::collection::vec(proptest::collection::vec(0..SEEN_FRAGMENTS.len(), 0..6), 1..6),
            breaks in proptest::collection::vec(proptest::bool::ANY, 64),
            not_utf8 in proptest::option::of(0..64usize),
        ) {
            let text = resource_list_of(&items, &SEEN_FRAGMENTS);
            let mut bytes = text.clone().into_bytes();
            if let Some(line) = not_utf8
                && let Some((at, _)) = text.match_indices('\n').nth(line)
            {
                bytes[at - 1] = 0xff;
            }
            let mut cutter = Cutter::new(true);
            feed_in_pieces(&mut cutter, &bytes, &breaks);
            let cut = cutter.into_cut();
            let Ok(parts) = cut.parts else {
                return Ok(());
            };
            let want: Vec<bool> = parts
                .items
                .iter()
                .map(|range| render::may_hold_ingress(&bytes[range.clone()]))
                .collect();
            proptest::prop_assert_eq!(&cut.seen.may_hold_ingress, &want);
            proptest::prop_assert_eq!(cut.seen.not_utf8, std::str::from_utf8(&bytes).is_err());
        }
    }

    /// Lines for the skipping cut: long runs of plain lines (past a search block), block
    /// scalars deeper than their key and lines that end them, and every kind of line a run
    /// must stop at.
    const RUN_FRAGMENTS: [&str; 36] = [
        "  plain: a value long enough to run past one block of thirty-two bytes\n    more: x\n",
        "  spec:\n    nested:\n      deeper: value value value value value value\n",
        "  a: \"off\"\n",
        "  c: \"one\n- kind: Fake\n  d: two\"\n",
        "  g: |\n    - kind: Fake\n    \"x\n    and a long line of the block scalar, past a block\n",
        "  h: |-\n      deep content line one of the block scalar\n      two\n    less: indented\n",
        "  i: >\n    folded\n\n    after a blank line\n  j: after\n",
        "  k: |\n    content\n   three spaces\n",
        "  l: ends with a dash -\n",
        "  m: ends with a space \n",
        "  n:\n  - one\n  -\n",
        "\n",
        "# a comment in column 0\n",
        "  o: x # a comment with ' and \" in it\n",
        "  p: (parens) $dollar\n",
        "other: a top-level key\n",
        "  q: caf\u{e9} \u{2603}\n",
        "  r: |\n        eight spaces deep\n        and again\n",
        // Lines with quoted scalars, and block scalar headers, of every shape near the ones
        // taken without the line logic.
        "  s: \"with \\\" an escape\"\n  t: 'it''s'\n  e: \"\"\n  f: ''\n",
        "  - \"alone\"\n  - u: 'v'\n  - - \"nested\"\n  - 'x' \n",
        "  \"quoted key\": x\n  w: \"x\" # comment\n  k:  \"two spaces\"\n  h:\"x\"\n",
        "  x: \"unclosed\n  g: \"a\"b\"\n",
        "  a-b.c/d_e: \"v\"\n  -k: \"v\"\n  k: \"v\"-\n",
        "  y: |-\n    a\n  z: >+\n\n    b\n  m: |\n  n: x\n",
        "  o: |\n\n      deep\n    less deep\n  p: >-\n    - kind: Fake\n  q: |2\n     x\n",
        "  - |\n    entry\n  |\n  k: | # comment\n    c\n",
        "- \"an item alone\"\n- 'another'\n",
        "  k: |\n   \"one column deeper\n  l: x\n  - m: >-\n      \"deeper\n    [x\n",
        "-x: column 0\n",
        "--- x\n",
        "  i2: |\n    x\n\n  \n    \"in the block after blank lines\n",
        "  o2: |\n\n  \n      \"deep after blank lines\n",
        "  t2: 'a'b'\n",
        "  g2: \"a\"b\"\n",
        "  s2: \"a\\\"\n",
        "  h2:|\n      \"x\n",
    ];

    proptest::proptest! {
        /// The cut that skips runs of plain lines and of block scalar lines is the cut that
        /// reads every line: the same items, or the same refusal on the same line; fed
        /// whole or in pieces.
        #[test]
        fn the_skipping_cut_is_the_line_by_line_cut(
            items in proptest::collection::vec(proptest::collection::vec(0..RUN_FRAGMENTS.len(), 0..6), 1..5),
            breaks in proptest::collection::vec(proptest::bool::ANY, 96),
            end_without_break in proptest::bool::ANY,
        ) {
            let mut text = resource_list_of(&items, &RUN_FRAGMENTS);
            if end_without_break {
                text.pop();
            }
            let cut = |skip: bool, pieces: bool| {
                let mut cutter = Cutter::new(true);
                cutter.skip_plain = skip;
                feed_in_pieces(&mut cutter, text.as_bytes(), if pieces { &breaks } else { &[] });
                let lines = cutter.number;
                (cutter.finish().map_err(|e| e.to_string()), lines)
            };
            let careful = cut(false, false);
            proptest::prop_assert_eq!(&cut(true, false), &careful);
            proptest::prop_assert_eq!(&cut(true, true), &careful);
        }
    }
}
