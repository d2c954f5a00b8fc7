//! One document rendered: classified as Go's readers read it, the rules applied to each of
//! its Ingresses, its edits planned and read back. A List of Ingresses in the plain form goes
//! to [`super::list`]; the rest is parsed whole.

use std::sync::LazyLock;

use aho_corasick::packed::Searcher;
use memchr::memmem;
use smallvec::SmallVec;

use super::enforce::{DocumentInput, RenderRules, enforce_one, sort_edits};
use super::error::RenderError;
use super::go_lines::go_lines;
use super::list::render_if_plain_list;
use super::outcomes::{DocumentName, IngressName, IngressOutcome, Outcomes};
use super::read_back::{self, ReadBack, Tally};
use super::splice::ChangedDocument;
use super::verify::{check_edits, ingress_nodes, proven_as_desired};
use crate::documents::{self, Document};
use crate::go_readers::{self, Anchors};
use crate::ingress_edit::Edit;
use crate::yaml_tree;

/// The result of rendering a stream: the documents that change, and every Ingress seen.
#[derive(Debug, Default)]
pub struct Rendered {
    pub changed: Vec<ChangedDocument>,
    pub ingresses: Outcomes,
    pub documents: usize,
    /// The line breaks of a rendered block (counted on from where its documents were
    /// named, so that the block is not counted twice); 0 for documents rendered apart.
    pub lines: usize,
}

impl Rendered {
    pub fn warnings(&self) -> impl Iterator<Item = IngressOutcome<'_>> {
        self.ingresses.iter().filter(|i| i.warning.is_some())
    }
}

/// Renders one block of the stream (whole documents), in one thread: the streaming
/// pipeline runs blocks side by side. Document numbers, lines and offsets are counted
/// from the block's start; the pipeline renumbers them. `documents` are the block's
/// documents when the caller has already split it.
pub(crate) fn render_block(
    input: &[u8],
    documents: Option<Vec<Document>>,
    rules: &RenderRules,
) -> Result<Rendered, RenderError> {
    let stream = match documents::utf8(input) {
        Ok(text) => text,
        Err(e) => {
            let offset = e.valid_up_to();
            let valid = std::str::from_utf8(&input[..offset]).unwrap_or_default();
            let document = documents::split(valid)
                .last()
                .map(|d| name_of(valid, d, &mut LineCounter::default()))
                .unwrap_or(DocumentName {
                    index: 1,
                    source: None,
                    first_line: 1,
                });
            return Err(RenderError::NotUtf8 { document, offset });
        }
    };
    let documents = documents.unwrap_or_else(|| documents::split(stream));
    let mut tally = Tally::default();
    let mut rendered = render_documents(stream, &documents, rules, ReadBack::Local, &mut tally)?;
    rendered.documents = documents.len();
    Ok(rendered)
}

/// Renders a run of consecutive documents of `stream`.
pub(super) fn render_documents(
    stream: &str,
    documents: &[Document],
    rules: &RenderRules,
    read_back: ReadBack,
    tally: &mut Tally,
) -> Result<Rendered, RenderError> {
    let mut rendered = Rendered::default();
    let mut lines = LineCounter::default();
    for document in documents {
        let text = &stream[document.range.clone()];
        if !may_hold_ingress(text.as_bytes()) {
            continue;
        }
        let name = name_of(stream, document, &mut lines);
        let input = DocumentInput {
            text,
            name: &name,
            rules,
            read_back,
        };
        if let Some(mut edits) = render_document(input, &mut rendered.ingresses, tally)? {
            // Kept until the whole stream is checked: no spare room.
            edits.shrink_to_fit();
            rendered.changed.push(ChangedDocument {
                document: document.clone(),
                edits: SmallVec::from_vec(edits),
            });
        }
    }
    rendered.lines = lines.line_of(stream, stream.len()) - 1;
    Ok(rendered)
}

/// A sound pre-filter, not a classifier: a document whose `kind` is `Ingress`, `List` or
/// `IngressList` to Go's readers spells that word in its bytes, unless it writes it with a
/// double-quoted escape (`"\x49ngress"`, which needs a backslash) or as base64 under a
/// `!!binary` tag (which needs a `!`). Aliases, merge keys, duplicate keys and Unicode line
/// breaks all leave the word in the bytes. A document with none of these is certainly not
/// one of ours and skips the parser; every other document is parsed and classified.
pub fn may_hold_ingress(text: &[u8]) -> bool {
    // One pass for all four (most documents have none of them).
    static WORDS: LazyLock<Searcher> = LazyLock::new(|| {
        Searcher::new(["Ingress", "List", "\\", "!"])
            .unwrap_or_else(|| unreachable!("four fixed patterns"))
    });
    WORDS.find(text).is_some()
}

/// The word every `List` kind holds, searched for without building a searcher each time.
static LIST: LazyLock<memmem::Finder<'static>> = LazyLock::new(|| memmem::Finder::new("List"));

/// Classifies one document as Go reads it and applies the rules to every Ingress in it;
/// its edits, sorted, when bytes change.
fn render_document(
    input: DocumentInput<'_>,
    outcomes: &mut Outcomes,
    tally: &mut Tally,
) -> Result<Option<Vec<Edit>>, RenderError> {
    let DocumentInput { text, name, .. } = input;
    // Go's readers take NEL, LS and PS for line breaks: read the document as they do.
    let original = text;
    let go_lines = go_lines(text);
    let text = go_lines.as_ref().map_or(text, |g| g.text.as_str());
    // A List in the plain form is read one item at a time (a tab anywhere sends it the
    // whole-tree way, which checks tabs against the whole document).
    if go_lines.is_none()
        && LIST.find(text.as_bytes()).is_some()
        && memchr::memchr(b'\t', text.as_bytes()).is_none()
    {
        let list = render_if_plain_list(input, outcomes, tally);
        if let Some(result) = list {
            return result;
        }
    }
    let (root, has_alias) = match yaml_tree::parse_document_noting_aliases(text) {
        Ok(Some(parsed)) => parsed,
        Ok(None) => return Ok(None),
        Err(source) => {
            // A document that does not parse is refused only when it may be one of ours
            // (the quick scan of its top level says so, or cannot tell).
            let ours = yaml_tree::top_level_type(text).map_or(true, |ty| {
                matches!((&ty.api_version, &ty.kind), (_, Some(k)) if matches!(k.as_str(), "Ingress" | "List" | "IngressList"))
                    || ty.kind.is_none()
            });
            if !ours {
                return Ok(None);
            }
            if let Some(go_lines) = &go_lines {
                return Err(go_lines.error(original, name));
            }
            let document = name.clone();
            return Err(RenderError::Syntax {
                error: source.shifted(document.first_line),
                document,
            });
        }
    };
    let mut anchors = Anchors::new(&root);
    let ty = go_readers::go_type(&root, "the top level", &mut anchors);
    if !(ty.may_be_ingress() || ty.may_be_list()) {
        return Ok(None);
    }
    if let Some(doubt) = ty.doubt {
        return Err(RenderError::Doubt {
            document: name.clone(),
            doubt,
        });
    }
    let ingresses =
        ingress_nodes(&root, &ty, &mut anchors).map_err(|doubt| RenderError::Doubt {
            document: name.clone(),
            doubt,
        })?;
    if ingresses.is_empty() {
        return Ok(None);
    }
    if let Some(line) = yaml_tree::tab_in_indentation(text, &root) {
        return Err(RenderError::TabIndentation {
            line: line + name.first_line - 1,
            document: name.clone(),
        });
    }
    let mut edits = Vec::new();
    let mut desired = Vec::new();
    // Unicode line breaks are read as Go reads them (`go_lines`): only the full check.
    let mut local = input.read_back == ReadBack::Local
        && go_lines.is_none()
        && read_back::document_allows(text, has_alias);
    for ingress in &ingresses {
        let from = edits.len();
        let fields = enforce_one(text, ingress, name, input.rules, outcomes, &mut edits)?;
        local = local && proven_as_desired(text, ingress, outcomes, &edits[from..], &fields);
        desired.push(fields);
    }
    if edits.is_empty() {
        return Ok(None);
    }
    sort_edits(&mut edits);
    // An edit that would cut a Unicode line break of the original in two.
    if let Some(go_lines) = &go_lines
        && edits.iter().any(|e| {
            !original.is_char_boundary(e.range.start) || !original.is_char_boundary(e.range.end)
        })
    {
        return Err(go_lines.error(original, name));
    }
    let checked =
        check_edits(text, &root, &ingresses, &edits, &desired, local).map_err(|what| {
            RenderError::Verify {
                document: name.clone(),
                ingress: outcomes
                    .last()
                    .map_or(IngressName(String::new()), |o| o.ingress.to_name()),
                what,
            }
        })?;
    tally.count(checked);
    Ok(Some(edits))
}

fn name_of(stream: &str, document: &Document, lines: &mut LineCounter) -> DocumentName {
    let text = &stream[document.range.clone()];
    DocumentName {
        index: document.index,
        source: documents::source_comment(text)
            .or_else(|| documents::helm4_filename(text))
            .map(str::to_owned),
        first_line: lines.line_of(stream, document.range.start),
    }
}

/// Line numbers for messages, counted on from the last one asked for, so that naming
/// every Ingress of a large stream stays linear in its size.
#[derive(Debug, Default)]
struct LineCounter {
    offset: usize,
    newlines: usize,
}

impl LineCounter {
    /// The 1-based line of the stream that `offset` is on.
    fn line_of(&mut self, stream: &str, offset: usize) -> usize {
        if offset < self.offset {
            *self = LineCounter::default();
        }
        let skipped = &stream.as_bytes()[self.offset..offset];
        self.newlines += memchr::memchr_iter(b'\n', skipped).count();
        self.offset = offset;
        self.newlines + 1
    }
}
