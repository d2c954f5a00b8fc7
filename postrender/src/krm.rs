//! `styrmin-postrender` as a KRM function (the KRM Functions Specification that kustomize and
//! kpt implement): a `ResourceList` on stdin, the same `ResourceList` on stdout with every
//! Ingress item edited exactly as the post-renderer edits a stream, and `results` for R5's
//! warning and for refusals.
//!
//! The items are not re-serialised. The `ResourceList`'s text is cut into its items by lines,
//! each item becomes one document of a stream (its leading `- ` turned into two spaces, so
//! every byte keeps its column and its offset), and that stream goes through the
//! post-renderer's own pipeline ([`streaming::render_stream`]): the same pre-filter, the same
//! Go-reader classification and refusals, the same byte-level edit and self-check. The edits
//! come back as byte ranges of the items and are spliced into the `ResourceList`'s text.
//!
//! Cutting by lines is exact only when no quoted scalar or flow collection runs over a line
//! break: a line that starts in the item column inside such a scalar would look like the
//! next item. So every line is checked first ([`plain_lines`]), conservatively: a quoted
//! scalar must close on its line, flow collections may only be `[]` or `{}`, and anchors,
//! aliases, tags, tabs, CR and Unicode line breaks are not accepted. kustomize writes its
//! `ResourceList` that way (it round-trips every resource through JSON); a `ResourceList`
//! written otherwise is refused with the line that could not be read this way.

use std::fmt;
use std::ops::Range;

use ingress_rules::{IngressTarget, KubernetesVersion, Level};
use serde::Deserialize;

use crate::config::StyrminConfig;
use crate::ingress_edit::{self, Edit};
use crate::render::{RenderError, RenderRules, Rendered};
use crate::streaming::{self, StreamError};
use crate::yaml_tree;

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
/// `first_line` is the entry's line in the `ResourceList`, for messages.
fn read_function_config(text: &str, first_line: usize) -> Result<Option<FunctionConfig>, KrmError> {
    let mut path = String::new();
    let parsed = serde_saphyr::with_deserializer_from_str(text, |de| {
        serde_path_to_error::deserialize::<_, Envelope>(de).map_err(|e| {
            path = e.path().to_string();
            e.into_inner()
        })
    });
    let envelope = parsed.map_err(|e| {
        let mut message = e.without_snippet().to_string();
        if let Some(at) = e.location() {
            message = message.replace(
                &format!(" at line {}, column {}", at.line(), at.column()),
                "",
            );
            message = format!(
                "line {} column {}: {}",
                at.line() as usize + first_line - 1,
                at.column(),
                one_line(&message)
            );
        }
        KrmError::FunctionConfig {
            field: if path.is_empty() || path == "." {
                "functionConfig".to_owned()
            } else {
                path.escape_debug().to_string()
            },
            message: one_line_keep_line(&message),
        }
    })?;
    let Some(typed) = envelope.function_config else {
        return Ok(None);
    };
    let wrong = |field: &str, message: String| KrmError::FunctionConfig {
        field: format!("functionConfig.{field}"),
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
    Ok(Some(FunctionConfig {
        config: StyrminConfig {
            cluster: spec.cluster,
            environment: spec.environment,
            deployment: spec.deployment,
            last_deployed: spec.last_deployed,
        },
        kubernetes,
        strict: spec.strict.unwrap_or(false),
    }))
}

/// A message on one line, its own `line N column M:` prefix kept.
fn one_line_keep_line(message: &str) -> String {
    message
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// A message on one line, without a `line N: ` prefix of the parser's own.
fn one_line(message: &str) -> String {
    let text = message
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    let text = text.strip_prefix("error: ").unwrap_or(&text);
    match text
        .strip_prefix("line ")
        .and_then(|rest| rest.split_once(": "))
    {
        Some((_, after)) => after.to_owned(),
        None => text.to_owned(),
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

/// Cuts `text` into items and the function config, checking every line with
/// [`plain_lines`] on the way.
fn layout(text: &str, checked: bool) -> Result<Layout, KrmError> {
    if !checked {
        return Ok(match quick_cut(text) {
            Some(layout) => layout,
            None => cut(text, None)?,
        });
    }
    if let Some(at) = memchr::memchr2(b'\t', b'\r', text.as_bytes()) {
        let line = line_of(text, at);
        return Err(shape(
            line,
            "a tab or a carriage return; this function reads ResourceLists as kustomize writes them (spaces, LF)",
        ));
    }
    // NEL is C2 85, LINE and PARAGRAPH SEPARATOR E2 80 A8/A9: look at C2 and E2 bytes only.
    for at in memchr::memchr2_iter(0xc2, 0xe2, text.as_bytes()) {
        let what = match text.as_bytes().get(at..at + 3) {
            Some([0xc2, 0x85, _]) => "NEL (U+0085)",
            Some([0xe2, 0x80, 0xa8]) => "LINE SEPARATOR (U+2028)",
            Some([0xe2, 0x80, 0xa9]) => "PARAGRAPH SEPARATOR (U+2029)",
            _ if text.as_bytes().get(at..at + 2) == Some(&[0xc2, 0x85]) => "NEL (U+0085)",
            _ => continue,
        };
        return Err(shape(
            line_of(text, at),
            format!("a {what}, which Go's YAML readers read as a line break"),
        ));
    }
    cut(text, Some(&mut LineChecker::default()))
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

/// Cuts `text` into its parts, checking every line with `checker` when there is one.
fn cut(text: &str, mut checker: Option<&mut LineChecker>) -> Result<Layout, KrmError> {
    let mut out = Layout::default();
    let mut section = Section::Prologue;
    let mut seen = Vec::new();
    let mut item_column: Option<usize> = None;
    let mut offset = 0;
    let mut number = 0;
    while offset < text.len() {
        number += 1;
        let start = offset;
        let end =
            memchr::memchr(b'\n', &text.as_bytes()[start..]).map_or(text.len(), |i| start + i);
        offset = (end + 1).min(text.len());
        let content = &text[start..end];
        if checker.as_mut().is_some_and(|c| c.in_block_scalar(content)) {
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
            return Err(shape(number, "more than one YAML document"));
        }
        // An item of `items`: a `-` line in the items' column.
        if section == Section::Items && (rest.starts_with("- ") || rest == "-") {
            let column = *item_column.get_or_insert(indent);
            if indent == column {
                if rest == "-" {
                    return Err(shape(
                        number,
                        "an item that starts on the line after its `-`",
                    ));
                }
                if let Some(last) = out.items.last_mut() {
                    last.end = start;
                }
                out.items.push(start..text.len());
                if let Some(checker) = checker.as_mut() {
                    checker.check(content, number)?;
                }
                continue;
            }
        }
        if indent == 0 && rest.starts_with('-') {
            return Err(shape(number, "a sequence entry outside `items`"));
        }
        if indent > 0 {
            if section == Section::Prologue {
                return Err(shape(number, "the ResourceList is not a block mapping"));
            }
            if section == Section::Items && item_column.is_none_or(|c| indent < c) {
                return Err(shape(number, "a line of `items` outside its items"));
            }
            // The functionConfig is read by a YAML parser: a construct cut at a column-0
            // line does not parse, so its lines need no check.
            if section != Section::FunctionConfig
                && let Some(checker) = checker.as_mut()
            {
                checker.check(content, number)?;
            }
            continue;
        }
        // A top-level key.
        if let Some(last) = out.items.last_mut().filter(|_| section == Section::Items) {
            last.end = start;
        }
        if let Some(range) = out.function_config.as_mut()
            && section == Section::FunctionConfig
        {
            range.end = start;
        }
        let (key, value) = match rest.split_once(':') {
            Some((key, value)) if value.is_empty() || value.starts_with(' ') => (key, value.trim()),
            _ => {
                return Err(shape(
                    number,
                    "expected a top-level key of the ResourceList",
                ));
            }
        };
        section = match (key, value) {
            ("apiVersion", RESOURCE_LIST_API_VERSION) => Section::ApiVersion,
            ("kind", "ResourceList") => Section::Kind,
            ("apiVersion" | "kind", other) => {
                return Err(shape(
                    number,
                    format!(
                        "{key}: expected {RESOURCE_LIST_API_VERSION} ResourceList, found {other}"
                    ),
                ));
            }
            ("items", "" | "[]") => Section::Items,
            ("functionConfig", _) => {
                out.function_config = Some(start..text.len());
                Section::FunctionConfig
            }
            ("results", _) => {
                return Err(shape(
                    number,
                    "the ResourceList already has results; this function writes its own",
                ));
            }
            (other, _) => {
                return Err(shape(
                    number,
                    format!(
                        "`{}` is not a key of a ResourceList (apiVersion, kind, items, functionConfig)",
                        other.escape_debug()
                    ),
                ));
            }
        };
        if seen.contains(&section) {
            return Err(shape(number, format!("`{key}` appears more than once")));
        }
        seen.push(section);
        if let Some(checker) = checker.as_mut() {
            checker.check(content, number)?;
        }
    }
    if !seen.contains(&Section::Kind) || !seen.contains(&Section::ApiVersion) {
        return Err(shape(
            1,
            format!(
                "not a ResourceList: expected apiVersion {RESOURCE_LIST_API_VERSION} and kind ResourceList"
            ),
        ));
    }
    out.item_column = item_column.unwrap_or(0);
    Ok(out)
}

fn line_of(text: &str, offset: usize) -> usize {
    memchr::memchr_iter(b'\n', &text.as_bytes()[..offset]).count() + 1
}

/// The bytes that may open something that runs past its line (or that this checker
/// refuses): quotes, `[`, `{`, block-scalar indicators, anchors, aliases, tags, and the
/// reserved `%`, `@`, backtick and `?`.
const OPENERS: [bool; 256] = {
    let mut table = [false; 256];
    let openers = b"\"'[{|>&*!%@`?";
    let mut i = 0;
    while i < openers.len() {
        table[openers[i] as usize] = true;
        i += 1;
    }
    table
};

/// Checks, line by line, that no scalar or collection runs over a line break except block
/// scalars (`|`, `>`), whose lines are recognised by their indentation. Conservative: what
/// it accepts, a YAML parser reads the same way line by line; what it is unsure of, it refuses.
#[derive(Debug, Default)]
struct LineChecker {
    /// In a block scalar: the indentation of its parent node, and of its content once known.
    block: Option<(usize, Option<usize>)>,
}

impl LineChecker {
    /// Whether `line` belongs to the block scalar being read (and ends it when not).
    fn in_block_scalar(&mut self, line: &str) -> bool {
        let Some((parent, content)) = self.block else {
            return false;
        };
        let indent = line.len() - line.trim_start_matches(' ').len();
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
        if !line.bytes().any(|b| OPENERS[usize::from(b)])
            && !line.trim_end_matches(' ').ends_with('-')
        {
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
            if memchr::memmem::find(&bytes[..i], b" #").is_some() {
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
pub struct Outcome<'t> {
    text: &'t str,
    edits: Vec<Edit>,
    tail: String,
    pub failed: bool,
    /// One line per warning and error, for stderr.
    pub messages: Vec<String>,
}

impl Outcome<'_> {
    /// Writes the `ResourceList`, splicing the edits in as it goes (no copy of it is made).
    pub fn write(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        let mut at = 0;
        for edit in &self.edits {
            out.write_all(&self.text.as_bytes()[at..edit.range.start])?;
            out.write_all(edit.text.as_bytes())?;
            at = edit.range.end;
        }
        out.write_all(&self.text.as_bytes()[at..])?;
        out.write_all(self.tail.as_bytes())?;
        out.flush()
    }

    /// The `ResourceList` as text.
    pub fn output(&self) -> String {
        let mut text = ingress_edit::apply(self.text, &self.edits);
        text.push_str(&self.tail);
        text
    }
}

/// Runs the function on a whole `ResourceList`. `fallback` is the config from the command
/// line, used when the `ResourceList` has no functionConfig; `fallback_given` says whether
/// any of it was given explicitly (both at once is an error).
pub fn run(input: &[u8], fallback: FunctionConfig, fallback_given: bool) -> Outcome<'_> {
    match process(input, fallback, fallback_given) {
        Ok((text, edits, rendered, warned)) => {
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
                if !text.ends_with('\n') && !text.is_empty() {
                    tail.push('\n');
                }
                tail.push_str("results:\n");
                for r in results {
                    tail.push_str(&r);
                }
            }
            Outcome {
                text,
                edits,
                tail,
                failed: false,
                messages,
            }
        }
        Err(error) => {
            let message = error.to_string();
            let reference = match &error {
                KrmError::Render { item, .. } => item_reference(input, item),
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
                text: "",
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
        text,
        range,
        layout.item_column,
    )))
}

/// An item's text as a document of its own: `- ` becomes two spaces.
fn item_document(text: &str, range: &Range<usize>, column: usize) -> String {
    let mut document = text[range.clone()].to_owned();
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

/// A YAML double-quoted scalar.
fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// One entry of `results`, as YAML.
fn result(
    severity: &str,
    message: &str,
    reference: Option<&ResourceRef>,
    field: Option<&str>,
) -> String {
    let mut out = format!("- message: {}\n  severity: {severity}\n", quote(message));
    if let Some(r) = reference.filter(|r| r.kind.is_some() || r.name.is_some()) {
        out.push_str("  resourceRef:\n");
        for (key, value) in [
            ("apiVersion", &r.api_version),
            ("kind", &r.kind),
            ("name", &r.name),
            ("namespace", &r.namespace),
        ] {
            if let Some(value) = value {
                out.push_str(&format!("    {key}: {}\n", quote(value)));
            }
        }
    }
    if let Some(path) = field {
        out.push_str(&format!("  field:\n    path: {}\n", quote(path)));
    }
    out
}

/// The text, its edits (sorted), what the pipeline found, and each warning's item.
type Processed<'t> = (&'t str, Vec<Edit>, Rendered, Vec<ItemInfo>);

fn process(
    input: &[u8],
    fallback: FunctionConfig,
    fallback_given: bool,
) -> Result<Processed<'_>, KrmError> {
    let text = std::str::from_utf8(input).map_err(|e| KrmError::NotUtf8 {
        offset: e.valid_up_to(),
    })?;
    // The lines are checked on a thread of their own while the items render: the cut
    // (the same with and without the checks, when the checks pass) is ready sooner, and
    // nothing is written before both are done.
    std::thread::scope(|scope| {
        let checked = scope.spawn(|| layout(text, true));
        let rendered = layout(text, false).and_then(|quick| {
            render_items(text, &quick, fallback, fallback_given).map(|r| (r, quick))
        });
        let checked = checked
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
        let (processed, quick) = rendered?;
        if checked != quick {
            return Err(shape(
                1,
                "internal check failed: the items cut with and without the line checks differ. Please report this with the ResourceList.",
            ));
        }
        Ok(processed)
    })
}

fn render_items<'t>(
    text: &'t str,
    layout: &Layout,
    fallback: FunctionConfig,
    fallback_given: bool,
) -> Result<Processed<'t>, KrmError> {
    let function_config = layout
        .function_config
        .as_ref()
        .map(|range| read_function_config(&text[range.clone()], line_of(text, range.start)))
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

    // The items as a stream: each is a document whose bytes sit at the same columns. The
    // stream is made while the pipeline reads it, never held whole.
    let column = layout.item_column;
    let mut starts = Vec::with_capacity(layout.items.len());
    let mut length = 0;
    for range in &layout.items {
        starts.push(length + SEPARATOR.len());
        length += SEPARATOR.len() + range.len();
    }
    let stream = ItemStream {
        text: text.as_bytes(),
        items: &layout.items,
        column,
        item: 0,
        at: 0,
    };
    let item_ref = |index: usize| ItemRef {
        index,
        line: line_of(text, layout.items[index].start),
    };
    let rendered = match streaming::render_stream(stream, &rules, streaming::BLOCK_BYTES) {
        Ok(rendered) => rendered,
        Err(StreamError::Render(error)) => {
            return Err(render_error(text, layout, &rules, error));
        }
        Err(error) => {
            return Err(KrmError::Render {
                item: item_ref(0),
                error: error.to_string(),
            });
        }
    };

    // The edits, moved from the stream's items to the ResourceList's.
    let mut edits = Vec::new();
    for changed in &rendered.rendered.changed {
        let index = changed.document.index - 1;
        let (Some(range), Some(&start)) = (layout.items.get(index), starts.get(index)) else {
            return Err(KrmError::Render {
                item: item_ref(index.min(layout.items.len().saturating_sub(1))),
                error: "internal check failed: an edited document that is not an item. Please report this with the ResourceList.".to_owned(),
            });
        };
        let body = start - changed.document.range.start;
        let dash = column + 2;
        let mut item_edits = Vec::with_capacity(changed.edits.len());
        for edit in &changed.edits {
            let at = edit.range.start - body;
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
            item_edits.push(moved);
        }
        // The edited item, read as a document, is exactly the document the pipeline edited.
        let mut edited =
            ingress_edit::apply(&text[range.clone()], &shifted(&item_edits, range.start));
        edited.replace_range(column..column + 1, " ");
        let document = rendered
            .document_text(&changed.document)
            .map(|d| changed.text(d))
            .unwrap_or_default();
        if document.get(SEPARATOR.len()..) != Some(edited.as_str()) {
            return Err(KrmError::Render {
                item: item_ref(index),
                error: "internal check failed: the edited item differs from the edited document. Please report this with the ResourceList.".to_owned(),
            });
        }
        edits.extend(item_edits);
    }
    edits.sort_by_key(|e| (e.range.start, e.range.end));
    // Each warning's item, in the order of the warnings.
    let warned = rendered
        .rendered
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
    Ok((text, edits, rendered.into_rendered(), warned))
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

/// Each item is a document of the stream the pipeline reads: this before its text.
const SEPARATOR: &str = "---\n";

/// The items of a `ResourceList` as a stream of documents, read from its text: each item
/// after a `---` line, its `-` turned into a space.
#[derive(Debug)]
struct ItemStream<'t> {
    text: &'t [u8],
    items: &'t [Range<usize>],
    column: usize,
    /// The item being read, and the position in it (its separator counted).
    item: usize,
    at: usize,
}

impl std::io::Read for ItemStream<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let mut written = 0;
        while written < buf.len() {
            let Some(range) = self.items.get(self.item) else {
                break;
            };
            let separator = SEPARATOR.len();
            let n = if self.at < separator {
                let part = &SEPARATOR.as_bytes()[self.at..];
                let n = part.len().min(buf.len() - written);
                buf[written..written + n].copy_from_slice(&part[..n]);
                n
            } else {
                let from = range.start + self.at - separator;
                let part = &self.text[from..range.end];
                let n = part.len().min(buf.len() - written);
                buf[written..written + n].copy_from_slice(&part[..n]);
                // The item's `-`, in its column.
                let dash = range.start + self.column;
                if (from..from + n).contains(&dash) {
                    buf[written + dash - from] = b' ';
                }
                n
            };
            written += n;
            self.at += n;
            if self.at == separator + range.len() {
                self.item += 1;
                self.at = 0;
            }
        }
        Ok(written)
    }
}

/// A refusal, named by the item and the line of the `ResourceList`: the item that failed is
/// rendered again alone, after as many blank lines as come before it, so the pipeline's own
/// message counts lines as the `ResourceList` does.
fn render_error(text: &str, layout: &Layout, rules: &RenderRules, error: RenderError) -> KrmError {
    let index = error_document(&error).map_or(0, |d| d.saturating_sub(1));
    let Some(range) = layout.items.get(index) else {
        return KrmError::Render {
            item: ItemRef { index, line: 0 },
            error: error.to_string(),
        };
    };
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
                    serde_saphyr::from_str(&item_document(&text, range, layout.item_column)).expect("an item parses alone");
                proptest::prop_assert_eq!(&item, want);
            }
        }
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
