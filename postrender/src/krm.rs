//! `styrmin-postrender` as a KRM function (the KRM Functions Specification that kustomize and
//! kpt implement): a `ResourceList` on stdin, the same `ResourceList` on stdout with every
//! Ingress item edited exactly as the post-renderer edits a stream, and `results` for R5's
//! warning and for refusals.
//!
//! The items are not re-serialised, nor copied. The `ResourceList`'s text is cut into its
//! items by lines, and each item is read where it lies as one document of the post-renderer's
//! own pipeline ([`streaming::render_documents_apart`]; its leading `-` turned into a space
//! for that time, so every byte keeps its column and its offset): the same pre-filter, the
//! same Go-reader classification and refusals, the same byte-level edit and self-check. The
//! edits come back as byte ranges of the items and are spliced into the `ResourceList`'s text
//! as it is written.
//!
//! The pipeline's pre-filter and its UTF-8 check are made on each item while the cut reads
//! it ([`ItemsSeen`]), so that after the input ends only the items that may hold an Ingress
//! are read again: a `ResourceList` is read whole before anything is rendered (kustomize
//! writes the `functionConfig` last), and one larger than the processor's cache would
//! otherwise be read from memory once more.
//!
//! Cutting by lines is exact only when no quoted scalar or flow collection runs over a line
//! break: a line that starts in the item column inside such a scalar would look like the
//! next item. So every line is checked ([`LineChecker`]), conservatively: a quoted scalar
//! must close on its line, flow collections may only be `[]` or `{}`, and anchors, aliases,
//! tags, tabs, CR and Unicode line breaks are not accepted. kustomize writes its
//! `ResourceList` that way (it round-trips every resource through JSON); a `ResourceList`
//! written otherwise is refused with the line that could not be read this way. The cut and
//! the checks run while the input is read ([`read`]), on a thread of their own.

use std::fmt;
use std::io::{IoSlice, Read};
use std::ops::Range;

use ingress_rules::{IngressTarget, KubernetesVersion, Level, double_quoted};
use serde::Deserialize;

use crate::config::{StyrminConfig, one_line, parser_message, without_parser_position};
use crate::documents::Document;
use crate::held_memory::{self, HeldBytes, Pages};
use crate::ingress_edit::{self, Edit};
use crate::render::{self, RenderError, RenderRules, Rendered};
use crate::streaming;
use crate::yaml_tree;

mod item_lines;

/// The `functionConfig` kind, and its API group and version (the group of Styrmin's custom
/// resources).
pub const FUNCTION_CONFIG_API_VERSION: &str = "styrmin.io/v1alpha1";
pub const FUNCTION_CONFIG_KIND: &str = "StyrminPostRender";
const RESOURCE_LIST_API_VERSION: &str = "config.kubernetes.io/v1";

/// Whether a stream is a `ResourceList` as kustomize and kpt send one: its first lines (after
/// comments and an optional `---`) are its `apiVersion` and `kind`, in either order. Only
/// `prefix`, the first bytes of the input, is looked at.
pub fn looks_like_resource_list(prefix: &[u8]) -> bool {
    let text = match std::str::from_utf8(prefix) {
        Ok(text) => text,
        Err(e) => std::str::from_utf8(&prefix[..e.valid_up_to()]).unwrap_or_default(),
    };
    let mut lines = text
        .lines()
        .map(|l| l.trim_end_matches('\r'))
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .skip_while(|l| *l == "---");
    let (Some(first), Some(second)) = (lines.next(), lines.next()) else {
        return false;
    };
    let api = format!("apiVersion: {RESOURCE_LIST_API_VERSION}");
    let kind = "kind: ResourceList";
    (first == api && second == kind) || (first == kind && second == api)
}

/// Why a `ResourceList` was not processed. Every variant becomes one `results` entry.
#[derive(Debug, thiserror::Error)]
pub enum KrmError {
    #[error("the ResourceList is not UTF-8 text: invalid byte at offset {offset}")]
    NotUtf8 { offset: usize },
    #[error("line {line}: {why}")]
    Shape { line: usize, why: String },
    #[error("{field}: {message}")]
    FunctionConfig { field: String, message: String },
    #[error("{item}: {error}")]
    Render { item: ItemRef, error: String },
    #[error(
        "the function config and --config, --ingress-class, --dedicated-ingress, --last-deployed, --kube-version, --enforcement-mode or --strict (or their STYRMIN_ variables) were both given: the functionConfig is the whole configuration"
    )]
    TwoConfigs,
    #[error("{0}")]
    Config(#[from] crate::config::ConfigError),
    /// The function edits items in place; passing them unchanged with a report is the
    /// post-renderer's filter's (`styrmin-postrender --enforcement-mode warn`).
    #[error(
        "enforcement_mode warn (decided by {decided_by}) is not supported by the KRM function: it would edit the items; \
         run `styrmin-postrender check` on the rendered objects to see what would change"
    )]
    WarnUnsupported { decided_by: String },
}

impl KrmError {
    /// The same refusal, on line `line` (for a check made before its line was counted).
    fn on_line(self, line: usize) -> Self {
        match self {
            KrmError::Shape { why, .. } => KrmError::Shape { line, why },
            other => other,
        }
    }

    /// The field a result names: a path in the `ResourceList`.
    fn field(&self) -> Option<String> {
        match self {
            KrmError::FunctionConfig { field, .. } => Some(field.clone()),
            KrmError::Render { item, .. } => Some(format!("items[{}]", item.index)),
            _ => None,
        }
    }
}

/// An item, for messages: its index in `items` and its first line in the `ResourceList`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemRef {
    pub index: usize,
    pub line: usize,
}

impl fmt::Display for ItemRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "items[{}] (line {})", self.index, self.line)
    }
}

/// The config a run takes: the functionConfig's spec, else the command line's.
#[derive(Debug, Clone, Default)]
pub struct FunctionConfig {
    pub config: StyrminConfig,
    pub kubernetes: Option<KubernetesVersion>,
    pub strict: bool,
}

/// `spec` of a `StyrminPostRender`: the config file's sections, and the two flags.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Spec {
    #[serde(default)]
    cluster: Option<Level>,
    #[serde(default)]
    environment: Option<Level>,
    #[serde(default)]
    deployment: Option<Level>,
    #[serde(default)]
    last_deployed: Option<IngressTarget>,
    #[serde(default)]
    kube_version: Option<String>,
    #[serde(default)]
    strict: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct TypedConfig {
    api_version: Option<String>,
    kind: Option<String>,
    #[serde(default, rename = "metadata")]
    _metadata: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    spec: Option<Spec>,
}

#[derive(Debug, Deserialize)]
struct Envelope {
    #[serde(rename = "functionConfig")]
    function_config: Option<TypedConfig>,
}

/// Reads the `functionConfig:` entry (its text, `functionConfig:` line included).
/// `first_line` gives the entry's line in the `ResourceList`, for messages (counted only
/// when there is one to write: that takes a pass over the items).
fn read_function_config(
    text: &str,
    first_line: impl FnOnce() -> usize,
) -> Result<Option<FunctionConfig>, KrmError> {
    let envelope: Envelope = parse_config(text, first_line, "functionConfig")?;
    let Some(typed) = envelope.function_config else {
        return Ok(None);
    };
    typed.into_config("functionConfig.").map(Some)
}

/// Reads the config file kubectl's kustomize hands an exec plugin (its path is the
/// plugin's first argument): a `StyrminPostRender` document, the functionConfig's kind.
/// Fields are named from the document's root (`spec.deployment.ingress_class`).
pub fn read_plugin_config(text: &str) -> Result<FunctionConfig, KrmError> {
    let typed: TypedConfig = parse_config(text, || 1, "the plugin config")?;
    typed.into_config("")
}

/// Parses a config, an error naming the field by its path and the line from `first_line`
/// (the config's first line in a larger text); `root` names the whole.
fn parse_config<T: serde::de::DeserializeOwned>(
    text: &str,
    first_line: impl FnOnce() -> usize,
    root: &str,
) -> Result<T, KrmError> {
    let mut path = String::new();
    let parsed = serde_saphyr::with_deserializer_from_str(text, |de| {
        serde_path_to_error::deserialize::<_, T>(de).map_err(|e| {
            path = e.path().to_string();
            e.into_inner()
        })
    });
    parsed.map_err(|e| {
        let mut message = parser_message(&e);
        if let Some(at) = e.location() {
            message = format!(
                "line {} column {}: {}",
                at.line() as usize + first_line() - 1,
                at.column(),
                without_parser_position(&one_line(&message))
            );
        }
        KrmError::FunctionConfig {
            field: if path.is_empty() || path == "." {
                root.to_owned()
            } else {
                path.escape_debug().to_string()
            },
            message: one_line(&message),
        }
    })
}

impl TypedConfig {
    /// The config, once its kind is checked; fields named after `prefix`.
    fn into_config(self, prefix: &str) -> Result<FunctionConfig, KrmError> {
        let typed = self;
        let wrong = |field: &str, message: String| KrmError::FunctionConfig {
            field: format!("{prefix}{field}"),
            message,
        };
        if typed.api_version.as_deref() != Some(FUNCTION_CONFIG_API_VERSION) {
            return Err(wrong(
                "apiVersion",
                format!(
                    "expected {FUNCTION_CONFIG_API_VERSION}, found {}",
                    typed.api_version.as_deref().unwrap_or("nothing")
                ),
            ));
        }
        if typed.kind.as_deref() != Some(FUNCTION_CONFIG_KIND) {
            return Err(wrong(
                "kind",
                format!(
                    "expected {FUNCTION_CONFIG_KIND}, found {}",
                    typed.kind.as_deref().unwrap_or("nothing")
                ),
            ));
        }
        let spec = typed.spec.unwrap_or_default();
        let kubernetes = spec
            .kube_version
            .as_deref()
            .map(|v| {
                v.parse::<KubernetesVersion>()
                    .map_err(|e| wrong("spec.kube_version", e.to_string()))
            })
            .transpose()?;
        Ok(FunctionConfig {
            config: StyrminConfig {
                cluster: spec.cluster,
                environment: spec.environment,
                deployment: spec.deployment,
                last_deployed: spec.last_deployed,
            },
            kubernetes,
            strict: spec.strict.unwrap_or(false),
        })
    }
}

/// A `ResourceList` cut into its parts by lines.
#[derive(Debug, Default, PartialEq, Eq)]
struct Layout {
    /// Each item's bytes, from its `-` line to the next item (or the end of `items`).
    items: Vec<Range<usize>>,
    /// The column of the items' `-`.
    item_column: usize,
    /// The `functionConfig:` entry's bytes.
    function_config: Option<Range<usize>>,
}

fn shape(line: usize, why: impl Into<String>) -> KrmError {
    KrmError::Shape {
        line,
        why: why.into(),
    }
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
fn layout(text: &str, checked: bool) -> Result<Layout, KrmError> {
    if !checked && let Some(layout) = quick_cut(text) {
        return Ok(layout);
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
    out: Layout,
    section: Section,
    seen: Vec<Section>,
    item_column: Option<usize>,
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
struct ItemsSeen {
    may_hold_ingress: Vec<bool>,
    /// The first item not yet seen to its end.
    next: usize,
    not_utf8: bool,
}

impl Cutter {
    fn new(checked: bool) -> Self {
        Self {
            out: Layout::default(),
            section: Section::Prologue,
            seen: Vec::new(),
            item_column: None,
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
        let items = &self.out.items;
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
    fn finish(self) -> Result<Layout, KrmError> {
        if let Some(error) = self.tab.or(self.line_break).or(self.cut) {
            return Err(error);
        }
        if !self.seen.contains(&Section::Kind) || !self.seen.contains(&Section::ApiVersion) {
            return Err(shape(
                1,
                format!(
                    "not a ResourceList: expected apiVersion {RESOURCE_LIST_API_VERSION} and kind ResourceList"
                ),
            ));
        }
        let mut out = self.out;
        let end = self.bytes;
        for range in out.items.iter_mut().chain(out.function_config.as_mut()) {
            if range.end == OPEN {
                range.end = end;
            }
        }
        out.item_column = self.item_column.unwrap_or(0);
        Ok(out)
    }
}

/// The cut of a `ResourceList` as kustomize writes it (`items:` with its `- ` in column 0,
/// then `functionConfig:`), found by searching for those markers rather than line by line;
/// `None` when the text is not of that shape. The checked cut must come out the same.
fn quick_cut(text: &str) -> Option<Layout> {
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
    let mut layout = Layout::default();
    let mut start = items;
    for at in memchr::memmem::find_iter(&bytes[items..end], b"\n- ") {
        layout.items.push(start..items + at + 1);
        start = items + at + 1;
    }
    layout.items.push(start..end);
    for (k, &key) in keys.iter().enumerate() {
        if text[key..].starts_with("functionConfig:") {
            layout.function_config = Some(key..keys.get(k + 1).copied().unwrap_or(text.len()));
        }
    }
    Some(layout)
}

impl Cutter {
    /// Cuts the lines of one piece that starts at byte `base`, checking each with the
    /// checker when there is one.
    fn cut_lines(&mut self, base: usize, text: &[u8], utf8: bool) -> Result<(), KrmError> {
        let mut out = std::mem::take(&mut self.out);
        let mut section = self.section;
        let mut seen = std::mem::take(&mut self.seen);
        let mut item_column = self.item_column;
        // Lines are counted only for a message: a line's number is found when one is made.
        let lines_before = self.number;
        let line_at =
            |start: usize| lines_before + memchr::memchr_iter(b'\n', &text[..start]).count() + 1;
        let mut checker = self.checker.as_mut();
        let mut offset = 0;
        let result = (|| -> Result<(), KrmError> {
            while offset < text.len() {
                // Runs of indented lines of an item (the items in column 0) that the line
                // logic below would pass over are skipped whole, by a search for the bytes
                // that could make it read a line; it reads the line the search stops at.
                if self.skip_plain
                    && section == Section::Items
                    && item_column == Some(0)
                    && checker.as_deref().is_some_and(|c| c.block.is_none())
                {
                    let stop = plain_run(text, offset);
                    offset = stop;
                }
                // The same for the lines of a block scalar, by their leading spaces.
                if self.skip_plain
                    && let Some(LineChecker {
                        block: Some((_, Some(column))),
                    }) = checker.as_deref()
                {
                    let stop = block_run(text, offset, *column);
                    offset = stop;
                }
                if offset == text.len() {
                    break;
                }
                let start = offset;
                let end = memchr::memchr(b'\n', &text[start..]).map_or(text.len(), |i| start + i);
                offset = (end + 1).min(text.len());
                let line = &text[start..end];
                // The lines the runs stop at most often ([`item_lines`]): an item's `- `
                // line, a line with a one-line quoted scalar, a block scalar's header, its
                // first line and the line after it; as the line logic takes them.
                if self.skip_plain
                    && section == Section::Items
                    && item_column == Some(0)
                    && let Some(checker) = checker.as_deref_mut()
                    && (utf8 || line.is_ascii())
                {
                    if checker.in_block_scalar(line) {
                        continue;
                    }
                    match item_lines::take(line) {
                        Some(item_lines::Taken::ItemStart) => {
                            if let Some(last) = out.items.last_mut() {
                                last.end = base + start;
                            }
                            out.items.push(base + start..OPEN);
                            continue;
                        }
                        Some(item_lines::Taken::Indented) => continue,
                        Some(item_lines::Taken::BlockHeader { parent }) => {
                            checker.block = Some((parent, None));
                            continue;
                        }
                        None => {}
                    }
                }
                // Most lines are indented lines of an item (the items in column 0) or of the
                // functionConfig that nothing below would stop at: they are passed over without
                // being read, which is what keeps the checks cheap beside the rendering.
                if line.first() == Some(&b' ') {
                    let passed = match checker.as_deref() {
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
                    };
                    if passed {
                        continue;
                    }
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
                let indent = content.len() - content.trim_start_matches(' ').len();
                let rest = &content[indent..];
                if rest.is_empty() || rest.starts_with('#') {
                    continue;
                }
                if indent == 0 && (rest == "---" || rest == "..." || rest.starts_with("--- ")) {
                    if section == Section::Prologue && rest == "---" {
                        continue;
                    }
                    return Err(shape(line_at(start), "more than one YAML document"));
                }
                // An item of `items`: a `-` line in the items' column.
                if section == Section::Items && (rest.starts_with("- ") || rest == "-") {
                    let column = *item_column.get_or_insert(indent);
                    if indent == column {
                        if rest == "-" {
                            return Err(shape(
                                line_at(start),
                                "an item that starts on the line after its `-`",
                            ));
                        }
                        if let Some(last) = out.items.last_mut() {
                            last.end = base + start;
                        }
                        out.items.push(base + start..OPEN);
                        if let Some(checker) = checker.as_mut() {
                            checker
                                .check(content, 0)
                                .map_err(|e| e.on_line(line_at(start)))?;
                        }
                        continue;
                    }
                }
                if indent == 0 && rest.starts_with('-') {
                    return Err(shape(line_at(start), "a sequence entry outside `items`"));
                }
                if indent > 0 {
                    if section == Section::Prologue {
                        return Err(shape(
                            line_at(start),
                            "the ResourceList is not a block mapping",
                        ));
                    }
                    if section == Section::Items && item_column.is_none_or(|c| indent < c) {
                        return Err(shape(line_at(start), "a line of `items` outside its items"));
                    }
                    // The functionConfig is read by a YAML parser: a construct cut at a column-0
                    // line does not parse, so its lines need no check.
                    if section != Section::FunctionConfig
                        && let Some(checker) = checker.as_mut()
                    {
                        checker
                            .check(content, 0)
                            .map_err(|e| e.on_line(line_at(start)))?;
                    }
                    continue;
                }
                // A top-level key.
                if let Some(last) = out.items.last_mut().filter(|_| section == Section::Items) {
                    last.end = base + start;
                }
                if let Some(range) = out.function_config.as_mut()
                    && section == Section::FunctionConfig
                {
                    range.end = base + start;
                }
                let (key, value) = match rest.split_once(':') {
                    Some((key, value)) if value.is_empty() || value.starts_with(' ') => {
                        (key, value.trim())
                    }
                    _ => {
                        return Err(shape(
                            line_at(start),
                            "expected a top-level key of the ResourceList",
                        ));
                    }
                };
                section = match (key, value) {
                    ("apiVersion", RESOURCE_LIST_API_VERSION) => Section::ApiVersion,
                    ("kind", "ResourceList") => Section::Kind,
                    ("apiVersion" | "kind", other) => {
                        return Err(shape(
                            line_at(start),
                            format!(
                                "{key}: expected {RESOURCE_LIST_API_VERSION} ResourceList, found {other}"
                            ),
                        ));
                    }
                    ("items", "" | "[]") => Section::Items,
                    ("functionConfig", _) => {
                        out.function_config = Some(base + start..OPEN);
                        Section::FunctionConfig
                    }
                    ("results", _) => {
                        return Err(shape(
                            line_at(start),
                            "the ResourceList already has results; this function writes its own",
                        ));
                    }
                    (other, _) => {
                        return Err(shape(
                            line_at(start),
                            format!(
                                "`{}` is not a key of a ResourceList (apiVersion, kind, items, functionConfig)",
                                other.escape_debug()
                            ),
                        ));
                    }
                };
                if seen.contains(&section) {
                    return Err(shape(
                        line_at(start),
                        format!("`{key}` appears more than once"),
                    ));
                }
                seen.push(section);
                if let Some(checker) = checker.as_mut() {
                    checker
                        .check(content, 0)
                        .map_err(|e| e.on_line(line_at(start)))?;
                }
            }
            Ok(())
        })();
        self.out = out;
        self.section = section;
        self.seen = seen;
        self.item_column = item_column;
        self.number = lines_before
            + memchr::memchr_iter(b'\n', text).count()
            + usize::from(text.last().is_some_and(|b| *b != b'\n'));
        result
    }
}

fn line_of(text: &(impl AsRef<[u8]> + ?Sized), offset: usize) -> usize {
    memchr::memchr_iter(b'\n', &text.as_ref()[..offset]).count() + 1
}

/// Whether a line's last byte but spaces is a `-`.
fn ends_with_dash(line: &[u8]) -> bool {
    match line.last() {
        Some(b'-') => true,
        Some(b' ') => line.trim_ascii_end().ends_with(b"-"),
        _ => false,
    }
}

/// Whether a byte may make the line logic read a line it would otherwise pass over, seen
/// with the byte after it: a byte that may be an opener (every byte of
/// [`item_lines::OPENER_BYTES`], and a few
/// more that share their ranges: `#`, `$`, `(`, `)`), a line break before a line that does
/// not start with a space (or before an empty one), and a `-` or space that ends a line.
/// Written with `&` and `|` so that a block of bytes is tested without branches.
#[inline(always)]
fn stops_plain_run(byte: u8, next: u8) -> bool {
    let opener = (byte.wrapping_sub(b'!') <= b'*' - b'!')
        | (byte.wrapping_sub(b'>') <= b'@' - b'>')
        | (byte == b'[')
        | (byte == b'`')
        | (byte.wrapping_sub(b'{') <= b'|' - b'{');
    let column_0 = (byte == b'\n') & (next != b' ');
    let line_end = ((byte == b'-') | (byte == b' ')) & (next == b'\n');
    opener | column_0 | line_end
}

/// The start of the first line at or after `start` (a line's start) that the line logic
/// must read, when the lines from `start` are indented lines of an item with the items in
/// column 0, outside block scalars: every line before it starts with a space, holds no byte
/// of [`item_lines::OPENER_BYTES`], does not end in `-` or a space, and ends with a line break (the line
/// logic passes such a line over and only counts it). The search looks at a block of bytes
/// at a time and only finds the byte it stopped at within the block that holds it.
fn plain_run(text: &[u8], start: usize) -> usize {
    if text.get(start) != Some(&b' ') {
        return start;
    }
    let mut at = start;
    // Each block of 32 bytes (and the byte after it) gives a flag for each byte that stops.
    let stop = loop {
        let Some(block) = text.get(at..at + 33) else {
            // The end: byte by byte, the last byte stopping (its line is read: it may not end).
            let last = text.len() - 1;
            break (at..last).find(|&i| stops_plain_run(text[i], text[i + 1]));
        };
        let mut flags = [0u8; 32];
        for (k, flag) in flags.iter_mut().enumerate() {
            *flag = u8::from(stops_plain_run(block[k], block[k + 1]));
        }
        if let Some(k) = first_flag(&flags) {
            break Some(at + k);
        }
        at += 32;
    };
    run_end(text, start, stop)
}

/// Where a run from `start` ends, given the first byte that stops it: after it when it is a
/// line break (it ends the run's last line; the next line is the one to read), else at the
/// start of its line. With none, the last line is read (it may not end with a line break).
fn run_end(text: &[u8], start: usize, stop: Option<usize>) -> usize {
    match stop {
        Some(at) if text[at] == b'\n' => at + 1,
        Some(at) => memchr::memrchr(b'\n', &text[start..at]).map_or(start, |i| start + i + 1),
        None => {
            let last = text.len() - 1;
            memchr::memrchr(b'\n', &text[start..last]).map_or(start, |i| start + i + 1)
        }
    }
}

/// The start of the first line at or after `start` (a line's start) that does not start
/// with `column` spaces or is the last line: every line before it is a line of the block
/// scalar being read whose content starts at `column` (the line logic passes such a line
/// over by its leading spaces and only counts it), and ends with a line break. Searched a
/// block of bytes at a time, as [`plain_run`].
fn block_run(text: &[u8], start: usize, column: usize) -> usize {
    // Up to eight leading spaces are compared as one word.
    let lead_mask = u64::MAX >> (8 * 8usize.saturating_sub(column).min(7)) as u32;
    let indented = |at: usize| match text.get(at..at + 8) {
        Some(word) if column <= 8 => {
            let word = u64::from_le_bytes(word.try_into().unwrap_or_default());
            (word ^ 0x2020_2020_2020_2020) & lead_mask == 0
        }
        _ => text
            .get(at..at + column)
            .is_some_and(|lead| lead.iter().all(|b| *b == b' ')),
    };
    if column == 0 || !indented(start) {
        return start;
    }
    // Each line break found by a vector search; only the line after each is looked at.
    let last = text.len() - 1;
    let stop = memchr::memchr_iter(b'\n', &text[start..last])
        .map(|i| start + i)
        .find(|&i| !indented(i + 1));
    run_end(text, start, stop)
}

/// The first of 32 flags (0 or 1) that is set, read as four words.
fn first_flag(flags: &[u8; 32]) -> Option<usize> {
    flags
        .chunks_exact(8)
        .map(|w| u64::from_le_bytes(w.try_into().unwrap_or_default()))
        .enumerate()
        .find(|(_, word)| *word != 0)
        .map(|(w, word)| w * 8 + word.trailing_zeros() as usize / 8)
}

/// Checks, line by line, that no scalar or collection runs over a line break except block
/// scalars (`|`, `>`), whose lines are recognised by their indentation. Conservative: what
/// it accepts, a YAML parser reads the same way line by line; what it is unsure of, it refuses.
#[derive(Debug, Default)]
struct LineChecker {
    /// In a block scalar: the indentation of its parent node, and of its content once known.
    block: Option<(usize, Option<usize>)>,
}

impl LineChecker {
    /// Whether `line` is a line of the block scalar being read, once its content's
    /// indentation is known, by its leading spaces alone ([`Self::in_block_scalar`] says
    /// the same, and ends the block scalar when it is not).
    fn in_block_content(&self, line: &[u8]) -> bool {
        match self.block {
            Some((_, Some(column))) => line
                .get(..column)
                .is_some_and(|lead| lead.iter().all(|b| *b == b' ')),
            _ => false,
        }
    }

    /// Whether `line` belongs to the block scalar being read (and ends it when not).
    fn in_block_scalar(&mut self, line: &[u8]) -> bool {
        let Some((parent, content)) = self.block else {
            return false;
        };
        let indent = line.iter().take_while(|b| **b == b' ').count();
        if indent == line.len() {
            return true;
        }
        match content {
            None if indent > parent => {
                self.block = Some((parent, Some(indent)));
                true
            }
            Some(column) if indent >= column => true,
            _ => {
                self.block = None;
                false
            }
        }
    }

    /// Checks one line that is not inside a block scalar.
    fn check(&mut self, line: &str, number: usize) -> Result<(), KrmError> {
        // Most lines hold no byte that can open a quoted scalar, a flow collection, a block
        // scalar, an anchor, an alias or a tag: nothing of theirs can run on.
        if !item_lines::holds_opener(line.as_bytes()) && !ends_with_dash(line.as_bytes()) {
            return Ok(());
        }
        let refuse = |why: &str| Err(shape(number, why.to_owned()));
        let mut column = line.len() - line.trim_start_matches(' ').len();
        let mut rest = &line[column..];
        let mut dash = None;
        // Sequence entries: `- `, possibly nested.
        while let Some(after) = rest.strip_prefix("- ") {
            dash = Some(column);
            let spaces = after.len() - after.trim_start_matches(' ').len();
            column += 2 + spaces;
            rest = &after[spaces..];
        }
        if rest == "-" {
            return refuse("a sequence entry with its value on the next line");
        }
        // `- |`: a block scalar as a sequence entry, its content indented past the `-`.
        if let (Some(dash), Some(b'|' | b'>')) = (dash, rest.as_bytes().first()) {
            return self.block_scalar(rest, dash, number);
        }
        // A key, then a value; or a value alone.
        let value = match rest.as_bytes().first() {
            None => return Ok(()),
            Some(b'#') => return Ok(()),
            Some(b'"' | b'\'') => {
                let Some(end) = quoted_end(rest) else {
                    return refuse("a quoted scalar that does not end on its line");
                };
                let after = &rest[end..];
                match after.strip_prefix(':') {
                    Some(value) if value.is_empty() || value.starts_with(' ') => {
                        value.trim_start_matches(' ')
                    }
                    _ => return finish(after, number),
                }
            }
            Some(_) => match plain_key(rest) {
                Some((key_end, value)) => {
                    if !plain_start(&rest[..key_end]) {
                        return refuse("a key this function does not read line by line");
                    }
                    value
                }
                None => {
                    // A plain scalar alone (a sequence item, or a continuation line).
                    return if plain_start(rest) {
                        Ok(())
                    } else {
                        refuse(
                            "a value that may run over several lines (a flow collection, a tag, an anchor or an alias)",
                        )
                    };
                }
            },
        };
        match value.as_bytes().first() {
            None | Some(b'#') => Ok(()),
            Some(b'"' | b'\'') => match quoted_end(value) {
                Some(end) => finish(&value[end..], number),
                None => refuse("a quoted scalar that does not end on its line"),
            },
            // The key is the content's parent node.
            Some(b'|' | b'>') => self.block_scalar(value, column, number),
            Some(b'[' | b'{') => {
                let (collection, after) = value.split_at(2.min(value.len()));
                if matches!(collection, "[]" | "{}") {
                    finish(after, number)
                } else {
                    refuse(
                        "a flow collection (other than [] and {}) that this function does not read line by line",
                    )
                }
            }
            Some(_) if plain_start(value) && plain_key(value).is_none() => Ok(()),
            Some(_) => refuse("a value this function does not read line by line"),
        }
    }
}

impl LineChecker {
    /// A block scalar's header (`|`, `>`, with `-` or `+`): its lines follow, indented past
    /// `parent`.
    fn block_scalar(&mut self, header: &str, parent: usize, number: usize) -> Result<(), KrmError> {
        let indicators = header[1..].split(" #").next().unwrap_or("").trim_end();
        if !matches!(indicators, "" | "-" | "+") {
            return Err(shape(
                number,
                "a block scalar with an indentation indicator",
            ));
        }
        self.block = Some((parent, None));
        Ok(())
    }
}

/// What may follow a complete scalar on its line: spaces, then a comment or nothing.
fn finish(after: &str, number: usize) -> Result<(), KrmError> {
    let trimmed = after.trim_start_matches(' ');
    if trimmed.is_empty() || (trimmed.starts_with('#') && trimmed.len() < after.len()) {
        Ok(())
    } else {
        Err(shape(
            number,
            "text after a quoted scalar or a flow collection",
        ))
    }
}

/// The byte after the closing quote of the quoted scalar `text` starts with, when it closes
/// on this line.
fn quoted_end(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let quote = *bytes.first()?;
    let mut i = 1;
    loop {
        if quote == b'"' {
            i += memchr::memchr2(b'"', b'\\', bytes.get(i..)?)?;
            if bytes[i] == b'\\' {
                i += 2;
                continue;
            }
            return Some(i + 1);
        }
        i += memchr::memchr(b'\'', bytes.get(i..)?)?;
        if bytes.get(i + 1) == Some(&b'\'') {
            i += 2;
            continue;
        }
        return Some(i + 1);
    }
}

/// Whether a plain scalar may start with this text's first character (no indicator that
/// would make it something else: quotes, flow, anchors, tags, aliases, block scalars...).
fn plain_start(text: &str) -> bool {
    match text.as_bytes().first() {
        None => true,
        Some(c) => {
            !matches!(
                c,
                b'"' | b'\''
                    | b'['
                    | b']'
                    | b'{'
                    | b'}'
                    | b','
                    | b'&'
                    | b'*'
                    | b'!'
                    | b'|'
                    | b'>'
                    | b'%'
                    | b'@'
                    | b'`'
                    | b'#'
                    | b'?'
                    | b'-'
                    | b':'
            ) || (matches!(c, b'-' | b'?' | b':')
                && text.as_bytes().get(1).is_some_and(|n| *n != b' '))
        }
    }
}

/// For a line of plain text: where its key ends and its value (after `: ` and spaces), when
/// it is `key: value` (a comment ` #` before any `: ` means it is not).
fn plain_key(text: &str) -> Option<(usize, &str)> {
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(i) = memchr::memchr(b':', &bytes[from..]).map(|i| i + from) {
        if bytes.get(i + 1).is_none_or(|n| *n == b' ') {
            if memchr::memchr_iter(b'#', &bytes[..i]).any(|j| j > 0 && bytes[j - 1] == b' ') {
                return None;
            }
            return Some((i, text[i + 1..].trim_start_matches(' ')));
        }
        from = i + 1;
    }
    None
}

/// The outcome of a run: the `ResourceList` to write (the input's text with the edits
/// spliced in, then `results`), and whether it failed.
#[derive(Debug)]
pub struct Outcome {
    text: HeldBytes,
    edits: Vec<Edit>,
    tail: String,
    pub failed: bool,
    /// One line per warning and error, for stderr.
    pub messages: Vec<String>,
}

impl Outcome {
    /// Writes the `ResourceList`, splicing the edits in as it goes (no copy of it is made).
    pub fn write(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        // The pieces go out as they lie, many to a system call, rather than copied into a
        // buffer first.
        let mut pieces = Vec::with_capacity(2 * self.edits.len() + 2);
        let mut at = 0;
        for edit in &self.edits {
            pieces.push(IoSlice::new(&self.text[at..edit.range.start]));
            pieces.push(IoSlice::new(edit.text.as_bytes()));
            at = edit.range.end;
        }
        pieces.push(IoSlice::new(&self.text[at..]));
        pieces.push(IoSlice::new(self.tail.as_bytes()));
        let mut pieces = &mut pieces[..];
        while !pieces.is_empty() {
            // At most this many at a time (the system's limit on Linux).
            let batch = pieces.len().min(1024);
            match out.write_vectored(&pieces[..batch]) {
                Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
                Ok(n) => IoSlice::advance_slices(&mut pieces, n),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        out.flush()
    }

    /// The `ResourceList` as text.
    pub fn output(&self) -> String {
        let mut text = ingress_edit::apply(&String::from_utf8_lossy(&self.text), &self.edits);
        text.push_str(&self.tail);
        text
    }
}

/// Runs the function on a whole `ResourceList`. `fallback` is the config from the command
/// line, used when the `ResourceList` has no functionConfig; `fallback_given` says whether
/// any of it was given explicitly (both at once is an error).
pub fn run(input: &[u8], fallback: FunctionConfig, fallback_given: bool) -> Outcome {
    let mut cutter = Cutter::new(true);
    cutter.feed(input);
    run_cut(
        HeldBytes::copy_of(input),
        cutter.into_cut(),
        fallback,
        fallback_given,
    )
}

/// [`run`] on a `ResourceList` already cut by [`read`].
pub fn run_cut(
    mut input: HeldBytes,
    cut: ListCut,
    fallback: FunctionConfig,
    fallback_given: bool,
) -> Outcome {
    match process(&mut input, cut, fallback, fallback_given) {
        Ok((edits, rendered, warned)) => {
            let mut results = Vec::new();
            let mut messages = Vec::new();
            for (outcome, item) in rendered.warnings().zip(&warned) {
                let message = ingress_rules::NoClassWarning::MESSAGE;
                messages.push(format!(
                    "warning: {}: {}: {message}",
                    item.at, outcome.ingress
                ));
                results.push(result(
                    "warning",
                    message,
                    Some(&item.reference),
                    Some("spec.ingressClassName"),
                ));
            }
            let mut tail = String::new();
            if !results.is_empty() {
                if !input.ends_with(b"\n") && !input.is_empty() {
                    tail.push('\n');
                }
                tail.push_str("results:\n");
                for r in results {
                    tail.push_str(&r);
                }
            }
            Outcome {
                text: input,
                edits,
                tail,
                failed: false,
                messages,
            }
        }
        Err(error) => {
            let message = error.to_string();
            let reference = match &error {
                KrmError::Render { item, .. } => item_reference(&input, item),
                _ => None,
            };
            let field = error.field();
            let mut output = format!(
                "apiVersion: {RESOURCE_LIST_API_VERSION}\nkind: ResourceList\nitems: []\nresults:\n"
            );
            output.push_str(&result(
                "error",
                &message,
                reference.as_ref(),
                field.as_deref(),
            ));
            Outcome {
                text: HeldBytes::default(),
                edits: Vec::new(),
                tail: output,
                failed: true,
                messages: vec![format!("error: {message}")],
            }
        }
    }
}

/// A `resourceRef`: apiVersion, kind, name and namespace of an item.
#[derive(Debug, Clone, Default)]
struct ResourceRef {
    api_version: Option<String>,
    kind: Option<String>,
    name: Option<String>,
    namespace: Option<String>,
}

#[derive(Debug)]
struct ItemInfo {
    at: ItemRef,
    reference: ResourceRef,
}

fn item_reference(input: &[u8], item: &ItemRef) -> Option<ResourceRef> {
    let text = std::str::from_utf8(input).ok()?;
    let layout = layout(text, false).ok()?;
    let range = layout.items.get(item.index)?;
    Some(reference_of(&item_document(
        text.as_bytes(),
        range,
        layout.item_column,
    )))
}

/// An item's text as a document of its own: `- ` becomes two spaces.
fn item_document(text: &[u8], range: &Range<usize>, column: usize) -> String {
    let mut document = String::from_utf8_lossy(&text[range.clone()]).into_owned();
    document.replace_range(column..column + 1, " ");
    document
}

fn reference_of(document: &str) -> ResourceRef {
    let Ok(Some(root)) = yaml_tree::parse_document(document) else {
        return ResourceRef::default();
    };
    let get = |node: Option<&yaml_tree::Node<'_>>, key: &str| {
        node.and_then(|n| n.get(key))
            .and_then(yaml_tree::Node::as_str)
            .map(str::to_owned)
    };
    let metadata = root.get("metadata");
    ResourceRef {
        api_version: get(Some(&root), "apiVersion"),
        kind: get(Some(&root), "kind"),
        name: get(metadata, "name"),
        namespace: get(metadata, "namespace"),
    }
}

/// One entry of `results`, as YAML.
fn result(
    severity: &str,
    message: &str,
    reference: Option<&ResourceRef>,
    field: Option<&str>,
) -> String {
    let mut out = format!(
        "- message: {}\n  severity: {severity}\n",
        double_quoted(message)
    );
    if let Some(r) = reference.filter(|r| r.kind.is_some() || r.name.is_some()) {
        out.push_str("  resourceRef:\n");
        for (key, value) in [
            ("apiVersion", &r.api_version),
            ("kind", &r.kind),
            ("name", &r.name),
            ("namespace", &r.namespace),
        ] {
            if let Some(value) = value {
                out.push_str(&format!("    {key}: {}\n", double_quoted(value)));
            }
        }
    }
    if let Some(path) = field {
        out.push_str(&format!("  field:\n    path: {}\n", double_quoted(path)));
    }
    out
}

/// The text's edits (sorted), what the pipeline found, and each warning's item.
type Processed = (Vec<Edit>, Rendered, Vec<ItemInfo>);

fn process(
    input: &mut [u8],
    cut: ListCut,
    fallback: FunctionConfig,
    fallback_given: bool,
) -> Result<Processed, KrmError> {
    let layout = cut.layout?;
    render_items(input, &layout, &cut.seen, fallback, fallback_given)
}

/// The cut of a `ResourceList`, its lines checked: made while it is read ([`read`]) or
/// at once ([`run`]).
#[derive(Debug)]
pub struct ListCut {
    layout: Result<Layout, KrmError>,
    seen: ItemsSeen,
}

impl Cutter {
    /// The cut, and what it saw of the items.
    fn into_cut(mut self) -> ListCut {
        let seen = std::mem::take(&mut self.items_seen);
        ListCut {
            layout: self.finish(),
            seen,
        }
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

/// A part of the `ResourceList` as text: a part that starts and ends at a line's start
/// (the cut read each line as UTF-8).
fn text_of(text: &[u8], range: Range<usize>) -> Result<&str, KrmError> {
    let start = range.start;
    std::str::from_utf8(&text[range]).map_err(|e| KrmError::NotUtf8 {
        offset: start + e.valid_up_to(),
    })
}

fn render_items(
    text: &mut [u8],
    layout: &Layout,
    seen: &ItemsSeen,
    fallback: FunctionConfig,
    fallback_given: bool,
) -> Result<Processed, KrmError> {
    let function_config = layout
        .function_config
        .as_ref()
        .map(|range| {
            read_function_config(text_of(text, range.clone())?, || line_of(text, range.start))
        })
        .transpose()?
        .flatten();
    let config = match function_config {
        Some(_) if fallback_given => return Err(KrmError::TwoConfigs),
        Some(config) => config,
        None => fallback,
    };
    let mode = config.config.mode(&Level::default());
    if mode.mode.is_warn() {
        return Err(KrmError::WarnUnsupported {
            decided_by: mode.decided_by(),
        });
    }
    let settings = config.config.settings(&Level::default());
    let rules = RenderRules {
        resolved: settings.resolved,
        kubernetes: config.kubernetes,
        strict: config.strict,
    };

    // Each item is a document of the pipeline read where it lies: its `-` turned into a
    // space for the time of the rendering, so that every byte keeps its column and its
    // offset, and nothing is copied. Only the items the pre-filter lets through are
    // rendered (the others are set aside by the pipeline all the same), unless some text is
    // not UTF-8, which the pipeline names in whichever item it is.
    let column = layout.item_column;
    let documents: Vec<Document> = layout
        .items
        .iter()
        .enumerate()
        .filter(|(i, _)| seen.not_utf8 || seen.may_hold_ingress.get(*i).is_none_or(|may| *may))
        .map(|(i, range)| Document {
            index: i + 1,
            range: range.clone(),
        })
        .collect();
    for document in &documents {
        text[document.range.start + column] = b' ';
    }
    let rendered = streaming::render_documents_apart(text, &documents, &rules);
    for document in &documents {
        text[document.range.start + column] = b'-';
    }
    let text = &*text;
    let item_ref = |index: usize| ItemRef {
        index,
        line: line_of(text, layout.items[index].start),
    };
    let rendered = rendered.map_err(|error| render_error(text, layout, &rules, error))?;

    // The edits, moved from the items read as documents to the ResourceList's items: the
    // same bytes, but for an edit before the first key.
    let mut edits = Vec::new();
    for changed in &rendered.changed {
        let index = changed.document.index - 1;
        let range = &changed.document.range;
        let dash = column + 2;
        let mut moved_key = false;
        for edit in &changed.edits {
            let at = edit.range.start;
            let moved = if at >= dash {
                Edit {
                    range: range.start + at..range.start + at + edit.range.len(),
                    text: edit.text.clone(),
                }
            } else if edit.range.is_empty()
                && at == 0
                && edit.text.len() > dash
                && edit.text.as_bytes()[..dash].iter().all(|b| *b == b' ')
            {
                // A key put before the item's first key (a missing `spec:`): in the list it
                // goes after the `- `, and the old first key keeps its column.
                moved_key = true;
                Edit {
                    range: range.start + dash..range.start + dash,
                    text: format!("{}{}", &edit.text[dash..], " ".repeat(dash)),
                }
            } else {
                return Err(KrmError::Render {
                    item: item_ref(index),
                    error: "internal check failed: an edit of the item's `-`. Please report this with the ResourceList.".to_owned(),
                });
            };
            edits.push(moved);
        }
        // An item whose edit moved: read as a document, it is exactly the document the
        // pipeline edited.
        if moved_key {
            let item = text_of(text, range.clone())?;
            let item_edits = &edits[edits.len() - changed.edits.len()..];
            let mut edited = ingress_edit::apply(item, &shifted(item_edits, range.start));
            edited.replace_range(column..column + 1, " ");
            let mut document = item.to_owned();
            document.replace_range(column..column + 1, " ");
            if changed.text(&document) != edited {
                return Err(KrmError::Render {
                    item: item_ref(index),
                    error: "internal check failed: the edited item differs from the edited document. Please report this with the ResourceList.".to_owned(),
                });
            }
        }
    }
    edits.sort_by_key(|e| (e.range.start, e.range.end));
    // Each warning's item, in the order of the warnings.
    let warned = rendered
        .warnings()
        .map(|o| {
            let index = o.document.index - 1;
            ItemInfo {
                at: item_ref(index),
                reference: layout
                    .items
                    .get(index)
                    .map_or_else(ResourceRef::default, |r| {
                        reference_of(&item_document(text, r, column))
                    }),
            }
        })
        .collect();
    Ok((edits, rendered, warned))
}

/// `edits` with their ranges counted from `origin`.
fn shifted(edits: &[Edit], origin: usize) -> Vec<Edit> {
    edits
        .iter()
        .map(|e| Edit {
            range: e.range.start - origin..e.range.end - origin,
            text: e.text.clone(),
        })
        .collect()
}

/// A refusal, named by the item and the line of the `ResourceList`: the item that failed is
/// rendered again alone, after as many blank lines as come before it, so the pipeline's own
/// message counts lines as the `ResourceList` does.
fn render_error(text: &[u8], layout: &Layout, rules: &RenderRules, error: RenderError) -> KrmError {
    let index = error_document(&error).map_or(0, |d| d.saturating_sub(1));
    let Some(range) = layout.items.get(index) else {
        return KrmError::Render {
            item: ItemRef { index, line: 0 },
            error: error.to_string(),
        };
    };
    // The lines the cut passed over were left to the pipeline to read as UTF-8: a byte
    // that is not is named by its offset in the ResourceList.
    if let Err(error) = text_of(text, range.clone()) {
        return error;
    }
    let item = ItemRef {
        index,
        line: line_of(text, range.start),
    };
    let mut alone = "\n".repeat(item.line.saturating_sub(2));
    alone.push_str("---\n");
    alone.push_str(&item_document(text, range, layout.item_column));
    let message = match streaming::render_stream(alone.as_bytes(), rules, streaming::BLOCK_BYTES) {
        Err(again) => again.to_string(),
        Ok(_) => error.to_string(),
    };
    // "document 1 (line L): ..." names the stream of one item; the item says it better.
    let message = match message.strip_prefix("document 1 (") {
        Some(rest) => rest
            .split_once("): ")
            .map_or(message.clone(), |(_, after)| after.to_owned()),
        None => message,
    };
    KrmError::Render {
        item,
        error: message,
    }
}

/// The 1-based document an error names (its `document N` prefix).
fn error_document(error: &RenderError) -> Option<usize> {
    let message = error.to_string();
    let at = message.find("document ")?;
    let digits: String = message[at + "document ".len()..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(name: &str) -> FunctionConfig {
        FunctionConfig {
            config: StyrminConfig::from_yaml(
                &format!("deployment: {{ingress_class: {name}}}"),
                "t",
            )
            .expect("config"),
            ..FunctionConfig::default()
        }
    }

    const LIST: &str = "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- apiVersion: v1\n  data:\n    a: \"off\"\n    b: |\n      - apiVersion: networking.k8s.io/v1\n      kind: Ingress\n  kind: ConfigMap\n  metadata:\n    name: cm\n- apiVersion: networking.k8s.io/v1\n  kind: Ingress\n  metadata:\n    annotations:\n      config.kubernetes.io/index: '1'\n    name: web\n  spec:\n    ingressClassName: nginx\n";

    #[test]
    fn edits_only_the_ingress_items() {
        let outcome = run(LIST.as_bytes(), class("haproxy"), false);
        assert!(!outcome.failed, "{:?}", outcome.messages);
        // The same items in a `List` document, through the post-renderer's pipeline.
        let header = "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\n";
        let list = LIST.replace(header, "apiVersion: v1\nkind: List\n");
        let config = class("haproxy");
        let rules = RenderRules {
            resolved: config.config.settings(&Level::default()).resolved,
            kubernetes: None,
            strict: false,
        };
        let stream = streaming::render_stream(list.as_bytes(), &rules, streaming::BLOCK_BYTES)
            .expect("renders");
        let mut want = Vec::new();
        stream.write(&mut want).expect("writes");
        let want = String::from_utf8(want).expect("utf-8");
        assert_ne!(want, list, "the Ingress changes");
        assert_eq!(
            outcome.output().strip_prefix(header),
            want.strip_prefix("apiVersion: v1\nkind: List\n")
        );
    }

    #[test]
    fn a_missing_spec_goes_after_the_dash() {
        let input = "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- apiVersion: networking.k8s.io/v1\n  kind: Ingress\n  metadata:\n    name: web\n";
        let outcome = run(input.as_bytes(), class("haproxy"), false);
        assert!(!outcome.failed, "{:?}", outcome.messages);
        assert!(
            outcome.output().contains(
                "items:\n- spec:\n    ingressClassName: \"haproxy\"\n  apiVersion: networking.k8s.io/v1\n"
            ),
            "{}",
            outcome.output()
        );
    }

    #[test]
    fn r5_warns_in_results_naming_the_ingress_and_the_field() {
        let input = "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: cm\n- apiVersion: networking.k8s.io/v1\n  kind: Ingress\n  metadata:\n    name: web\n    namespace: apps\n";
        let outcome = run(input.as_bytes(), class("\"\""), false);
        assert!(!outcome.failed);
        assert_eq!(
            outcome.output(),
            format!(
                "{input}results:\n- message: \"{}\"\n  severity: warning\n  resourceRef:\n    apiVersion: \"networking.k8s.io/v1\"\n    kind: \"Ingress\"\n    name: \"web\"\n    namespace: \"apps\"\n  field:\n    path: \"spec.ingressClassName\"\n",
                ingress_rules::NoClassWarning::MESSAGE
            )
        );
        assert_eq!(outcome.messages.len(), 1);
        assert!(outcome.messages[0].contains("items[1] (line 8): Ingress apps/web"));
    }

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
            let Ok(layout) = layout(&text, true) else {
                return Ok(());
            };
            let parsed: serde_json::Value = serde_saphyr::from_str(&text).expect("the checks accepted what a parser refuses");
            let parsed_items = parsed["items"].as_array().expect("items");
            proptest::prop_assert_eq!(layout.items.len(), parsed_items.len());
            proptest::prop_assert_eq!(&layout, &super::layout(&text, false).expect("the quick cut"));
            for (range, want) in layout.items.iter().zip(parsed_items) {
                let item: serde_json::Value =
                    serde_saphyr::from_str(&item_document(text.as_bytes(), range, layout.item_column)).expect("an item parses alone");
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
            let whole = layout(&text, true).map_err(|e| e.to_string());
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
            let Ok(layout) = cut.layout else {
                return Ok(());
            };
            let want: Vec<bool> = layout
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

    #[test]
    fn every_opener_stops_a_plain_run() {
        for &byte in item_lines::OPENER_BYTES {
            assert!(stops_plain_run(byte, b'x'), "{:?}", char::from(byte));
        }
        // A line break before a space, a letter after a dash: no stop.
        assert!(!stops_plain_run(b'\n', b' '));
        assert!(!stops_plain_run(b'-', b'x'));
        assert!(!stops_plain_run(b'a', b'\n'));
    }

    #[test]
    fn a_plain_run_stops_at_the_line_the_line_logic_must_read() {
        let plain = "  plain: a line of an item, long enough to fill a block\n".repeat(5);
        for stop in [
            "- kind: next item\n",
            "top: key\n",
            "\n",
            "  a: \"quoted\"\n",
            "  b: |\n",
            "  c: x {\n",
            "  d: &anchor\n",
            "  e: ends in a dash -\n",
            "  f: ends in a space \n",
            "  no line break at the end",
        ] {
            let text = format!("{plain}{stop}  after: x\n");
            assert_eq!(plain_run(text.as_bytes(), 0), plain.len(), "{stop:?}");
            // From the start of a line in the run, the same stop.
            let second = plain.find('\n').unwrap_or_default() + 1;
            assert_eq!(plain_run(text.as_bytes(), second), plain.len(), "{stop:?}");
        }
        // A line that does not start with a space is read at once.
        assert_eq!(plain_run(b"- kind: x\n  a: b\n", 0), 0);
    }

    #[test]
    fn a_block_run_stops_at_the_first_line_less_indented_than_its_content() {
        let content = "      a line of the block scalar, long enough to fill a block\n".repeat(4);
        for stop in [
            "     five spaces\n",
            "  key: value\n",
            "- kind: next item\n",
            "\n",
            "    \n",
            "      the last line, with no line break",
        ] {
            let text = format!("{content}{stop}      after\n");
            assert_eq!(block_run(text.as_bytes(), 0, 6), content.len(), "{stop:?}");
        }
        // Deeper lines and any bytes in them belong to the block scalar.
        let text = format!("{content}        \"deeper\" [x] - \n  end: x\n");
        assert_eq!(
            block_run(text.as_bytes(), 0, 6),
            text.find("  end").unwrap_or_default()
        );
        assert_eq!(block_run(b"    short\n", 0, 6), 0);
        // Content deeper than eight spaces (compared byte by byte), and exactly eight.
        for column in [8, 10, 12] {
            let lead = " ".repeat(column);
            let content = format!("{lead}a line of the block scalar, past a block\n").repeat(3);
            let text = format!("{content}{}one space less\n{lead}after\n", &lead[1..]);
            assert_eq!(
                block_run(text.as_bytes(), 0, column),
                content.len(),
                "{column}"
            );
        }
    }

    /// A reader that hands out a few bytes at a time, as a pipe may.
    struct Trickle<'a>(&'a [u8], usize);

    impl std::io::Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.1.min(buf.len()).min(self.0.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    #[test]
    fn reading_in_pieces_gives_the_whole_run() {
        let input = format!(
            "{LIST}functionConfig:\n  apiVersion: styrmin.io/v1alpha1\n  kind: StyrminPostRender\n  spec:\n    deployment:\n      ingress_class: haproxy\n"
        );
        let whole = run(input.as_bytes(), FunctionConfig::default(), false);
        assert!(!whole.failed, "{:?}", whole.messages);
        // Room for all, for part of it (the rest read and cut after), for nothing.
        for (piece, reserve) in [(7, 1 << 16), (1, 100), (64, 0), (1 << 20, 1 << 16)] {
            let (text, cut) = read(Trickle(input.as_bytes(), piece), reserve).expect("reads");
            assert_eq!(&text[..], input.as_bytes());
            let outcome = run_cut(text, cut, FunctionConfig::default(), false);
            assert_eq!(
                outcome.output(),
                whole.output(),
                "pieces of {piece}, room for {reserve}"
            );
        }
    }

    #[test]
    fn a_byte_that_is_not_utf8_is_named_by_its_offset_wherever_it_is() {
        let header = "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n";
        let item = "- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: a";
        let function_config = "functionConfig:\n  apiVersion: styrmin.io/v1alpha1\n  kind: StyrminPostRender\n  spec: {}";
        // In a line the cut passes over (an item's, the functionConfig's), in one it reads.
        for (before, after) in [
            (format!("{header}{item}"), "\n".to_owned()),
            (
                format!("{header}{item}\n{function_config}"),
                "\n".to_owned(),
            ),
            (
                "apiVersion: config.kubernetes.io/v1\nkind: ResourceList".to_owned(),
                format!("\nitems:\n{item}\n"),
            ),
        ] {
            let mut input = before.clone().into_bytes();
            input.push(0xff);
            input.extend_from_slice(after.as_bytes());
            let outcome = run(&input, class("haproxy"), false);
            assert!(outcome.failed);
            assert_eq!(
                outcome.messages,
                [format!(
                    "error: the ResourceList is not UTF-8 text: invalid byte at offset {}",
                    before.len()
                )]
            );
        }
    }

    #[test]
    fn a_plugin_config_is_read_as_the_function_config_with_its_fields_named_from_its_root() {
        let config = read_plugin_config(
            "apiVersion: styrmin.io/v1alpha1\nkind: StyrminPostRender\nmetadata:\n  name: s\nspec:\n  deployment:\n    ingress_class: haproxy\n  strict: true\n",
        )
        .expect("reads");
        assert!(config.strict);
        assert_eq!(
            config.config.settings(&Level::default()).resolved,
            class("haproxy").config.settings(&Level::default()).resolved
        );
        let field = |text: &str| match read_plugin_config(text) {
            Err(KrmError::FunctionConfig { field, .. }) => field,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            field(
                "apiVersion: styrmin.io/v1alpha1\nkind: StyrminPostRender\nspec:\n  deployment:\n    ingress_clas: x\n"
            ),
            "spec.deployment.ingress_clas"
        );
        assert_eq!(
            field("apiVersion: styrmin.io/v1alpha1\nkind: Other\n"),
            "kind"
        );
    }

    #[test]
    fn detects_a_resource_list() {
        assert!(looks_like_resource_list(LIST.as_bytes()));
        assert!(looks_like_resource_list(
            b"# c\n---\nkind: ResourceList\napiVersion: config.kubernetes.io/v1\n"
        ));
        assert!(!looks_like_resource_list(
            b"apiVersion: v1\nkind: List\nitems: []\n"
        ));
        assert!(!looks_like_resource_list(
            b"apiVersion: config.kubernetes.io/v1\n"
        ));
    }

    #[test]
    fn a_quoted_scalar_over_lines_is_refused() {
        let input = "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  data:\n    a: \"one\n- apiVersion: networking.k8s.io/v1\n  kind: Ingress\n  metadata: {}\"\n";
        let outcome = run(input.as_bytes(), class("haproxy"), false);
        assert!(outcome.failed);
        assert!(
            outcome.messages[0].contains("line 7"),
            "{:?}",
            outcome.messages
        );
        assert!(outcome.output().contains("items: []"));
    }

    #[test]
    fn a_bad_function_config_names_the_field() {
        let input = format!(
            "{LIST}functionConfig:\n  apiVersion: styrmin.io/v1alpha1\n  kind: StyrminPostRender\n  spec:\n    deployment:\n      ingress_clas: x\n"
        );
        let outcome = run(input.as_bytes(), FunctionConfig::default(), false);
        assert!(outcome.failed);
        assert!(
            outcome
                .output()
                .contains("path: \"functionConfig.spec.deployment.ingress_clas\""),
            "{}",
            outcome.output()
        );
        assert!(!outcome.output().contains("kind: ConfigMap"));
    }

    #[test]
    fn checker_accepts_what_kustomize_writes_and_refuses_the_rest() {
        let ok = |line: &str| LineChecker::default().check(line, 1).is_ok();
        for line in [
            "  name: web",
            "  - host: a.example.com",
            "    a: \"off\"",
            "    a: 'it''s'",
            "    \"8080\": http",
            "  emptyDir: {}",
            "  args: []",
            "  url: http://x:80/a # c",
            "  b: |",
            "    - |",
            "- - a",
        ] {
            assert!(ok(line), "{line}");
        }
        for line in [
            "    a: \"one",
            "    a: 'one",
            "    a: [x, y]",
            "    a: {x: 1}",
            "    a: &x b",
            "    a: *x",
            "    a: !!str b",
            "    \"one",
            "    a: |2",
            "  -",
        ] {
            assert!(!ok(line), "{line}");
        }
    }
}
