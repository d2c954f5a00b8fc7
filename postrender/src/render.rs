//! The post-renderer's pipeline: split the stream, find the Ingresses, apply the rules,
//! splice the edits, and prove each edited document reads back as intended.

use std::io::{self, Write};
use std::sync::{Arc, LazyLock};

use aho_corasick::packed::Searcher;
use memchr::memmem;
use smallvec::SmallVec;

use styrmin_ingress_rules::{
    ClassFields, Enforcement, IngressTarget, KubernetesVersion, NoClassWarning, ResolvedIngress,
    RuleError, enforce,
};

use crate::documents::{self, Document};
use crate::go_readers::{self, Anchors, Doubt};
use crate::ingress_edit::{self, Edit, EditError};
use crate::read_back::{self, Checked, ReadBack, Tally};
use crate::yaml_tree::{self, ItemsError, Node, NodeValue, SyntaxError};

#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error("the input is not UTF-8 text: {document}: invalid byte at offset {offset}")]
    NotUtf8 {
        document: DocumentName,
        offset: usize,
    },
    // The cause is part of each message (one statement, no repeated chain): the fields
    // are not named `source`, which would make them a second link of the chain.
    #[error("{document}: not valid YAML: {error}")]
    Syntax {
        document: DocumentName,
        error: SyntaxError,
    },
    #[error("{document}: {ingress}: {error}")]
    Edit {
        document: DocumentName,
        ingress: IngressName,
        error: EditError,
    },
    #[error("{document}: {ingress}: {error}")]
    Rule {
        document: DocumentName,
        ingress: IngressName,
        error: RuleError,
    },
    /// Go's readers might read the document as an Ingress (or a List of them), but how
    /// they read it is not certain.
    #[error("{document}: {doubt}")]
    Doubt {
        document: DocumentName,
        doubt: Doubt,
    },
    #[error(
        "{document}: line {line}: a tab in the indentation, which Helm and kubectl refuse (YAML indents with spaces)"
    )]
    TabIndentation { document: DocumentName, line: usize },
    #[error(
        "{document}: line {line}: {name}, which Helm and kubectl read as a line break and YAML 1.2 does not; write a line break or an escape (\\{escape}) instead"
    )]
    UnicodeLineBreak {
        document: DocumentName,
        line: usize,
        name: &'static str,
        escape: char,
    },
    /// The self-check after an edit failed: a bug, reported instead of writing a wrong object.
    #[error(
        "{document}: {ingress}: internal check failed, nothing was written: {what}. Please report this with the document."
    )]
    Verify {
        document: DocumentName,
        ingress: IngressName,
        what: String,
    },
    #[error("{document}: R5 (--strict): {ingress}: {message}", message = NoClassWarning::MESSAGE)]
    StrictNoClass {
        document: DocumentName,
        ingress: IngressName,
    },
}

impl RenderError {
    /// The same error in a larger stream with `documents` documents, `lines` lines and
    /// `bytes` bytes before the part it was found in.
    pub fn renumber(&mut self, documents: usize, lines: usize, bytes: usize) {
        match self {
            RenderError::NotUtf8 { document, offset } => {
                document.renumber(documents, lines);
                *offset += bytes;
            }
            RenderError::Syntax { document, error } => {
                document.renumber(documents, lines);
                error.line += lines;
            }
            RenderError::TabIndentation { document, line }
            | RenderError::UnicodeLineBreak { document, line, .. } => {
                document.renumber(documents, lines);
                *line += lines;
            }
            RenderError::Doubt { document, .. } => document.renumber(documents, lines),
            RenderError::Edit { document, .. }
            | RenderError::Rule { document, .. }
            | RenderError::Verify { document, .. }
            | RenderError::StrictNoClass { document, .. } => document.renumber(documents, lines),
        }
    }
}

mod outcomes;

/// What happened to one Ingress. Every Ingress of a stream keeps one until the stream is
/// written, in [`Outcomes`], compactly.
pub use outcomes::{
    DocumentName, DocumentRef, IngressName, IngressOutcome, IngressRef, Iter, Outcomes,
};

/// A document whose bytes change: only its edits are kept (byte ranges of the document and
/// their new text), never a copy of the document, so a stream of edited Ingresses does
/// not cost its size twice.
#[derive(Debug, Clone)]
pub struct ChangedDocument {
    /// The document, its range counted in the whole stream (its name is its Ingresses'
    /// [`IngressOutcome::document`]).
    pub document: Document,
    /// Sorted, non-overlapping, relative to the document's first byte. Most documents are
    /// one Ingress with an edit or two, kept without an allocation of their own.
    pub edits: SmallVec<[Edit; 2]>,
}

impl ChangedDocument {
    /// The document's new text, from its text `before`.
    pub fn text(&self, before: &str) -> String {
        ingress_edit::apply(before, &self.edits)
    }
}

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

/// What the rules need to know besides the stream.
#[derive(Debug, Clone)]
pub struct RenderRules {
    pub resolved: ResolvedIngress,
    pub kubernetes: Option<KubernetesVersion>,
    /// R5's warning becomes an error.
    pub strict: bool,
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
fn render_documents(
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
        if let Some(mut edits) = render_document(
            text,
            &name,
            rules,
            &mut rendered.ingresses,
            read_back,
            tally,
        )? {
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
pub(crate) fn may_hold_ingress(text: &[u8]) -> bool {
    // One pass for all four (most documents have none of them).
    static WORDS: LazyLock<Searcher> = LazyLock::new(|| {
        Searcher::new(["Ingress", "List", "\\", "!"])
            .unwrap_or_else(|| unreachable!("four fixed patterns"))
    });
    WORDS.find(text).is_some()
}

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
struct GoLines {
    text: String,
    /// The first Unicode line break: its offset, name and escape.
    first: (usize, &'static str, char),
}

fn go_lines(text: &str) -> Option<GoLines> {
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
    fn error(&self, original: &str, name: &DocumentName) -> RenderError {
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

/// The word every `List` kind holds, searched for without building a searcher each time.
static LIST: LazyLock<memmem::Finder<'static>> = LazyLock::new(|| memmem::Finder::new("List"));

/// Classifies one document as Go reads it and applies the rules to every Ingress in it;
/// its edits, sorted, when bytes change.
fn render_document(
    text: &str,
    name: &DocumentName,
    rules: &RenderRules,
    outcomes: &mut Outcomes,
    read_back: ReadBack,
    tally: &mut Tally,
) -> Result<Option<Vec<Edit>>, RenderError> {
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
        let list = match render_list_read_once(text, name, rules, outcomes, read_back, tally) {
            ListReading::Rendered(result) => return result,
            ListReading::NotAPlainIngressList => None,
            ListReading::NotInCommonLayout => yaml_tree::plain_list_parsed(text).ok().flatten(),
            ListReading::ItemFailed => yaml_tree::plain_list(text).ok().flatten(),
        };
        if let Some(list) = list
            && styrmin_ingress_rules::is_ingress_container_list(&list.api_version, &list.kind)
        {
            return render_plain_list(text, &list, name, rules, outcomes, read_back, tally);
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
    let mut local = read_back == ReadBack::Local
        && go_lines.is_none()
        && read_back::document_allows(text, has_alias);
    for ingress in &ingresses {
        let from = edits.len();
        let fields = enforce_one(text, ingress, name, rules, outcomes, &mut edits)?;
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

/// Whether the edits of the Ingress whose outcome was pushed last are proven where they
/// are ([`read_back`]) and read back as `desired`.
fn proven_as_desired(
    text: &str,
    ingress: &Node<'_>,
    outcomes: &Outcomes,
    edits: &[Edit],
    desired: &ClassFields,
) -> bool {
    outcomes
        .last()
        .is_some_and(|outcome| read_back::proven_as(text, ingress, outcome.before, desired, edits))
}

/// Reads the edited document back: where every edit of every Ingress was proven in place
/// (`local`, which also asks that the sorted edits stay apart), that proof stands; otherwise
/// the whole edited document is parsed again ([`verify`]).
fn check_edits(
    text: &str,
    root: &Node<'_>,
    ingresses: &[&Node<'_>],
    sorted: &[Edit],
    desired: &[Arc<ClassFields>],
    local: bool,
) -> Result<Checked, String> {
    if local && read_back::apart(sorted) {
        return Ok(Checked::Locally);
    }
    // The edited text lives only as long as its check: what is kept is the edits.
    let new_text = ingress_edit::apply(text, sorted);
    verify(root, ingresses, &new_text, desired)?;
    Ok(Checked::Fully)
}

/// The self-check that keeps a wrong splice from ever reaching the cluster: the edited
/// document parses, every Ingress in it reads back as the rules said, a second pass
/// would change nothing (R8), and with the two class fields set aside the document is
/// the same tree as before, every scalar with the same value and quoting (R7).
fn verify(
    before: &Node<'_>,
    ingresses_before: &[&Node<'_>],
    after_text: &str,
    desired: &[Arc<ClassFields>],
) -> Result<(), String> {
    let after = yaml_tree::parse_document(after_text)
        .map_err(|e| format!("the edited document does not parse ({e})"))?
        .ok_or("the edited document is empty")?;
    let mut anchors_after = Anchors::new(&after);
    let ty = go_readers::go_type(&after, "the top level", &mut anchors_after);
    let ingresses = ingress_nodes(&after, &ty, &mut anchors_after).map_err(|e| e.to_string())?;
    if ingresses.len() != desired.len() {
        return Err(format!(
            "{} Ingresses before the edit, {} after",
            desired.len(),
            ingresses.len()
        ));
    }
    for (ingress, want) in ingresses.iter().zip(desired) {
        let got = ingress_edit::read_class_fields(ingress).map_err(|e| e.to_string())?;
        if got != **want {
            return Err(format!(
                "class fields read back as {got:?}, expected {want:?}"
            ));
        }
        let again = ingress_edit::plan(after_text, ingress, want).map_err(|e| e.to_string())?;
        if !again.is_empty() {
            return Err("a second pass would edit again (not idempotent)".to_owned());
        }
    }
    let mut anchors_before = Anchors::new(before);
    let canonical_before = canonical(before, &mut &ingresses_before[..], &mut anchors_before);
    if canonical_before != canonical(&after, &mut &ingresses[..], &mut anchors_after) {
        return Err("something besides the class fields changed".to_owned());
    }
    Ok(())
}

/// Applies the rules to one Ingress of `text`: its outcome goes to `outcomes`, its edits to
/// `edits`; the class fields it must read back with.
fn enforce_one(
    text: &str,
    ingress: &Node<'_>,
    name: &DocumentName,
    rules: &RenderRules,
    outcomes: &mut Outcomes,
    edits: &mut Vec<Edit>,
) -> Result<Arc<ClassFields>, RenderError> {
    let ingress_name = ingress_name(ingress);
    let edit_error = |error| RenderError::Edit {
        document: name.clone(),
        ingress: ingress_name.clone(),
        error,
    };
    let before = ingress_edit::read_class_fields(ingress).map_err(edit_error)?;
    let Enforcement {
        fields, warning, ..
    } = enforce(&rules.resolved.target, &before, rules.kubernetes).map_err(|error| {
        RenderError::Rule {
            document: name.clone(),
            ingress: ingress_name.clone(),
            error,
        }
    })?;
    // --strict: the first Ingress left without a class fails the stream, like any
    // other error, in stream order.
    if rules.strict && warning.is_some() {
        return Err(RenderError::StrictNoClass {
            document: name.clone(),
            ingress: ingress_name,
        });
    }
    // R5 leaves the chart's fields exactly as written: a plain `on` or `123` stays
    // plain (R4 re-quotes them, since it sets the class as a string).
    let mut planned = if rules.resolved.target == IngressTarget::NoClass {
        Vec::new()
    } else {
        ingress_edit::plan(text, ingress, &fields).map_err(edit_error)?
    };
    // In the order of the bytes, as the document's edits will be.
    sort_edits(&mut planned);
    let after = outcomes.push(
        name,
        &ingress_name.0,
        before,
        fields,
        !planned.is_empty(),
        warning,
    );
    edits.extend(planned.into_iter().map(ingress_edit::with_shared_text));
    Ok(after)
}

/// Puts edits in the order of their bytes. Each Ingress's edits are put in order as they
/// are planned and Ingresses come in order, so a document's mostly are already: a List of
/// thousands is not sorted again.
fn sort_edits(edits: &mut [Edit]) {
    let key = |e: &Edit| (e.range.start, e.range.end);
    if !edits.is_sorted_by_key(key) {
        edits.sort_by_key(key);
    }
}

/// A List in the plain form of [`yaml_tree::plain_list`], read one item at a time so that
/// a List of thousands of Ingresses never has all their trees at once. The same rules and
/// the same self-check as for a whole document: each Ingress item's edits are proven where
/// they are ([`read_back`]) while its tree is at hand; when one is not, the edited List is
/// read again item by item, each Ingress must read back as the rules said and need no
/// second pass, and every item, with its class fields set aside, must be the tree it was
/// (compared by a digest of its canonical form, so that no item's tree is kept).
fn render_plain_list(
    text: &str,
    list: &yaml_tree::PlainList,
    name: &DocumentName,
    rules: &RenderRules,
    outcomes: &mut Outcomes,
    read_back: ReadBack,
    tally: &mut Tally,
) -> Result<Option<Vec<Edit>>, RenderError> {
    let mut items = ListItems::new(text, name, rules, read_back, list.items);
    yaml_tree::for_each_list_item(text, |index, item| items.render(index, &item, outcomes))
        .map_err(|e| match e {
            yaml_tree::ItemsError::Syntax(error) => RenderError::Syntax {
                error: error.shifted(name.first_line),
                document: name.clone(),
            },
            yaml_tree::ItemsError::Item(error) => error,
        })?;
    items.finish(list, outcomes, tally)
}

/// What reading a document that may be a List once settled: its answer; or that it is not
/// a List of Ingresses in the plain form (the whole-tree way judges it); or nothing, because
/// it is not in the common layout (the general parser reads its top level) or an item failed
/// (it is read again, to the error in its place).
enum ListReading {
    Rendered(Result<Option<Vec<Edit>>, RenderError>),
    NotAPlainIngressList,
    NotInCommonLayout,
    ItemFailed,
}

/// A List in the common layout read once, its items rendered while they are read, where
/// [`yaml_tree::plain_list`] and then [`render_plain_list`] would read it twice (a List's
/// `kind` may come after its items, so what the items are for is known only at the end).
/// Until then the items' outcomes are provisional: they are taken back when the document
/// turns out not to be a plain List of Ingresses, or when the reading does not settle it
/// (not in the layout, or an item failed): [`render_plain_list`] then reads it as before,
/// to the same answer, the same error included.
fn render_list_read_once(
    text: &str,
    name: &DocumentName,
    rules: &RenderRules,
    outcomes: &mut Outcomes,
    read_back: ReadBack,
    tally: &mut Tally,
) -> ListReading {
    let mark = outcomes.mark();
    let mut items = ListItems::new(text, name, rules, read_back, 0);
    let mut failed = false;
    let list = yaml_tree::plain_list_read_once(text, &mut |index, item| {
        failed = items.render(index, &item, outcomes).is_err();
        !failed
    });
    match list {
        Some(Some(list))
            if styrmin_ingress_rules::is_ingress_container_list(&list.api_version, &list.kind) =>
        {
            ListReading::Rendered(items.finish(&list, outcomes, tally))
        }
        Some(_) => {
            outcomes.roll_back(mark);
            ListReading::NotAPlainIngressList
        }
        None => {
            outcomes.roll_back(mark);
            if failed {
                ListReading::ItemFailed
            } else {
                ListReading::NotInCommonLayout
            }
        }
    }
}

/// The items of a plain List rendered one at a time, and what is kept of them until the
/// List is checked as a whole.
struct ListItems<'t> {
    text: &'t str,
    name: &'t DocumentName,
    rules: &'t RenderRules,
    edits: Vec<Edit>,
    desired: Vec<(usize, Arc<ClassFields>)>,
    /// Every Ingress item's edits proven where they are so far.
    local: bool,
    digests: Option<Vec<u64>>,
}

impl<'t> ListItems<'t> {
    /// `items`: how many the List has, when known (room for their digests).
    fn new(
        text: &'t str,
        name: &'t DocumentName,
        rules: &'t RenderRules,
        read_back: ReadBack,
        items: usize,
    ) -> Self {
        // The plain form has no alias and no tab (see `render_document`).
        let local = read_back == ReadBack::Local;
        ListItems {
            text,
            name,
            rules,
            edits: Vec::new(),
            desired: Vec::new(),
            local,
            // Digests are taken in the first pass only when the full check is sure to run;
            // otherwise only if a local proof fails, by reading the List once more.
            digests: (!local).then(|| Vec::with_capacity(items)),
        }
    }

    /// Renders item `index` of the List.
    fn render(
        &mut self,
        index: usize,
        item: &Node<'_>,
        outcomes: &mut Outcomes,
    ) -> Result<(), RenderError> {
        let (text, name) = (self.text, self.name);
        let mut anchors = Anchors::new(item);
        let at = format!("items[{index}]");
        let ty = go_readers::go_type(item, &at, &mut anchors);
        let ingress = ty.may_be_ingress();
        if ingress {
            if let Some(doubt) = ty.doubt {
                return Err(RenderError::Doubt {
                    document: name.clone(),
                    doubt,
                });
            }
            let from = self.edits.len();
            let fields = enforce_one(text, item, name, self.rules, outcomes, &mut self.edits)?;
            self.local =
                self.local && proven_as_desired(text, item, outcomes, &self.edits[from..], &fields);
            self.desired.push((index, fields));
        }
        if let Some(digests) = &mut self.digests {
            digests.push(digest(item, ingress));
        }
        Ok(())
    }

    /// The List's edits once every item is rendered, checked as a whole.
    fn finish(
        self,
        list: &yaml_tree::PlainList,
        outcomes: &Outcomes,
        tally: &mut Tally,
    ) -> Result<Option<Vec<Edit>>, RenderError> {
        let ListItems {
            text,
            name,
            mut edits,
            desired,
            local,
            digests,
            ..
        } = self;
        if edits.is_empty() {
            return Ok(None);
        }
        sort_edits(&mut edits);
        let verify_error = |what: String| RenderError::Verify {
            document: name.clone(),
            ingress: outcomes
                .last()
                .map_or(IngressName(String::new()), |o| o.ingress.to_name()),
            what,
        };
        // Every edit lies inside its item's own lines, so the List's top level and its other
        // items read as before.
        if local && read_back::apart(&edits) {
            tally.count(Checked::Locally);
            return Ok(Some(edits));
        }
        let digests = match digests {
            Some(digests) => digests,
            None => list_digests(text, list.items, &desired).map_err(|_| {
                verify_error("the List does not read as it did before the edit".to_owned())
            })?,
        };
        verify_plain_list(text, list, &edits, &desired, &digests).map_err(verify_error)?;
        tally.count(Checked::Fully);
        Ok(Some(edits))
    }
}

/// The digest of every item of a plain List, `ingresses` telling the Ingress items apart.
fn list_digests(
    text: &str,
    items: usize,
    ingresses: &[(usize, Arc<ClassFields>)],
) -> Result<Vec<u64>, ItemsError<()>> {
    let mut digests = Vec::with_capacity(items);
    let mut ingresses = ingresses.iter().map(|(i, _)| *i).peekable();
    yaml_tree::for_each_list_item(text, |index, item| {
        let ingress = ingresses.next_if_eq(&index).is_some();
        digests.push(digest(&item, ingress));
        Ok::<(), ()>(())
    })?;
    Ok(digests)
}

/// The full read-back check of an edited plain List (see [`render_plain_list`]).
fn verify_plain_list(
    text: &str,
    list: &yaml_tree::PlainList,
    sorted: &[Edit],
    desired: &[(usize, Arc<ClassFields>)],
    digests: &[u64],
) -> Result<(), String> {
    let new_text = ingress_edit::apply(text, sorted);
    match yaml_tree::plain_list(&new_text) {
        Ok(Some(after)) if after == *list => {}
        _ => return Err("the edited List does not read as the same List".to_owned()),
    }
    let mut wanted = desired.iter().peekable();
    let mut checked = 0;
    yaml_tree::for_each_list_item(&new_text, |index, item| {
        let ingress = wanted.next_if(|(i, _)| *i == index);
        if let Some((_, want)) = ingress {
            let got = ingress_edit::read_class_fields(&item).map_err(|e| e.to_string())?;
            if got != **want {
                return Err(format!(
                    "class fields read back as {got:?}, expected {want:?}"
                ));
            }
            let again = ingress_edit::plan(&new_text, &item, want).map_err(|e| e.to_string())?;
            if !again.is_empty() {
                return Err("a second pass would edit again (not idempotent)".to_owned());
            }
        }
        if digests.get(index) != Some(&digest(&item, ingress.is_some())) {
            return Err("something besides the class fields changed".to_owned());
        }
        checked += 1;
        Ok(())
    })
    .map_err(|e| match e {
        yaml_tree::ItemsError::Syntax(error) => {
            format!("the edited document does not parse ({error})")
        }
        yaml_tree::ItemsError::Item(what) => what,
    })?;
    if checked != digests.len() || wanted.next().is_some() {
        return Err("the edited List has another number of items".to_owned());
    }
    Ok(())
}

/// A digest of an item's canonical form, with its class fields set aside when it is an
/// Ingress.
fn digest(item: &Node<'_>, ingress: bool) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut anchors = Anchors::new(item);
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    let ingresses = [item];
    let mut strip: &[&Node<'_>] = if ingress { &ingresses } else { &[] };
    canonical(item, &mut strip, &mut anchors).hash(&mut hasher);
    hasher.finish()
}

/// The Ingress mappings of a document as Go reads it, in document order: the document
/// itself, or the Ingress items of a List (`ty` is the document's type). A doubt about an
/// item that may be an Ingress is an error.
fn ingress_nodes<'n, 'a>(
    root: &'n Node<'a>,
    ty: &go_readers::GoType,
    anchors: &mut Anchors<'n, 'a>,
) -> Result<Vec<&'n Node<'a>>, Doubt> {
    let ours = ty.may_be_ingress() || ty.may_be_list();
    if let Some(doubt) = ty.doubt.clone().filter(|_| ours) {
        return Err(doubt);
    }
    if ty.is_ingress() {
        return Ok(vec![root]);
    }
    if !ty.is_list() {
        return Ok(Vec::new());
    }
    let (items, doubt) = go_readers::list_items(root, "the List", anchors);
    if let Some(doubt) = doubt {
        return Err(doubt);
    }
    let mut out = Vec::new();
    for (index, item) in items.unwrap_or_default().iter().enumerate() {
        let at = format!("items[{index}]");
        let resolved = anchors.resolve(item);
        let ty = go_readers::go_type(resolved, &at, anchors);
        if !ty.may_be_ingress() {
            continue;
        }
        if let Some(doubt) = ty.doubt {
            return Err(doubt);
        }
        if matches!(item.value, NodeValue::Alias(_)) {
            return Err(Doubt::AliasedIngress { at });
        }
        out.push(item);
    }
    Ok(out)
}

fn ingress_name(ingress: &Node<'_>) -> IngressName {
    let metadata = ingress.get("metadata");
    let field = |key| metadata.and_then(|m| m.get(key)).and_then(Node::as_str);
    IngressName(match (field("namespace"), field("name")) {
        (Some(ns), Some(name)) => format!("{ns}/{name}"),
        (None, Some(name)) => name.to_owned(),
        (_, None) => "(no metadata.name)".to_owned(),
    })
}

/// A comparable form of a node: scalars by value and whether they are plain (which
/// decides their type for Go's YAML readers); Ingresses may lose their class fields and
/// the containers those leave empty (see [`canonical`]).
#[derive(Debug, PartialEq, Hash)]
enum Canonical<'n> {
    Scalar {
        text: &'n str,
        plain: bool,
        tagged: bool,
    },
    Mapping(Vec<(Canonical<'n>, Canonical<'n>)>),
    Sequence(Vec<Canonical<'n>>),
    Null,
    Alias,
}

/// The canonical form of `node`. `ingresses` are the Ingress nodes of the tree not yet
/// met, in document order (as [`ingress_nodes`] gives them): each loses its class fields,
/// so that a document is classified once, not again for each comparison.
fn canonical<'n, 'a>(
    node: &'n Node<'a>,
    ingresses: &mut &[&'n Node<'a>],
    anchors: &mut Anchors<'n, 'a>,
) -> Canonical<'n> {
    let is_ingress = ingresses.first().is_some_and(|i| std::ptr::eq(*i, node));
    if is_ingress {
        *ingresses = &ingresses[1..];
    }
    let mut out = match &node.value {
        _ if node.is_null() => Canonical::Null,
        NodeValue::Scalar { text, style, tag } => Canonical::Scalar {
            text,
            plain: matches!(style, granit_parser::ScalarStyle::Plain),
            tagged: *tag != yaml_tree::ScalarTag::None,
        },
        NodeValue::Mapping { entries, .. } => Canonical::Mapping(
            entries
                .iter()
                .map(|(k, v)| {
                    // An alias key reads as the scalar it refers to (a class field's
                    // key may be one).
                    let k = match anchors.resolve(k) {
                        resolved @ Node {
                            value: NodeValue::Scalar { .. },
                            ..
                        } => resolved,
                        _ => k,
                    };
                    (
                        canonical(k, &mut &[][..], anchors),
                        canonical(v, ingresses, anchors),
                    )
                })
                .collect(),
        ),
        NodeValue::Sequence { items, .. } => Canonical::Sequence(
            items
                .iter()
                .map(|i| canonical(i, ingresses, anchors))
                .collect(),
        ),
        NodeValue::Alias(_) => Canonical::Alias,
    };
    if is_ingress {
        strip_class_fields(&mut out);
    }
    out
}

fn strip_class_fields(ingress: &mut Canonical) {
    remove_path(ingress, &ingress_edit::CLASS_NAME_PATH);
    remove_path(ingress, &ingress_edit::CLASS_ANNOTATION_PATH);
}

/// Removes `path`, then every container on it that is left empty or null.
fn remove_path(node: &mut Canonical, path: &[&str]) {
    let Canonical::Mapping(entries) = node else {
        return;
    };
    let Some((key, rest)) = path.split_first() else {
        return;
    };
    let is_key = |k: &Canonical| matches!(k, Canonical::Scalar { text, .. } if text == key);
    if let Some(position) = entries.iter().position(|(k, _)| is_key(k)) {
        if !rest.is_empty() {
            remove_path(&mut entries[position].1, rest);
        }
        let emptied = match &entries[position].1 {
            Canonical::Mapping(e) => e.is_empty(),
            Canonical::Null => true,
            _ => false,
        };
        if rest.is_empty() || emptied {
            entries.remove(position);
        }
    }
}

/// The one splice loop: writes the stream, given as consecutive blocks, with the edits of
/// the changed documents (in stream order, ranges counted in the whole stream) in place of
/// the bytes they replace. A document never spans two blocks, so neither does an edit.
pub(crate) fn write_spliced<'b>(
    blocks: impl IntoIterator<Item = &'b [u8]>,
    changed: &[ChangedDocument],
    out: &mut impl Write,
) -> io::Result<()> {
    let mut edits = changed
        .iter()
        .flat_map(|c| {
            let start = c.document.range.start;
            c.edits.iter().map(move |e| {
                (
                    start + e.range.start..start + e.range.end,
                    e.text.as_bytes(),
                )
            })
        })
        .peekable();
    let mut block_start = 0;
    for block in blocks {
        let block_end = block_start + block.len();
        let mut at = block_start;
        while let Some((range, text)) = edits.next_if(|(range, _)| range.end <= block_end) {
            out.write_all(&block[at - block_start..range.start - block_start])?;
            out.write_all(text)?;
            at = range.end;
        }
        out.write_all(&block[at - block_start..])?;
        block_start = block_end;
    }
    out.flush()
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

#[cfg(test)]
mod read_back_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verify_catches_changes_outside_the_class_fields() {
        let text = "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: a\n  labels: {x: \"off\"}\nspec: {rules: []}\n";
        let root = yaml_tree::parse_document(text).unwrap().unwrap();
        let want = [Arc::new(ClassFields::default())];
        assert!(verify(&root, &[&root], text, &want).is_ok());
        let changed = text.replace("\"off\"", "off");
        assert_eq!(
            verify(&root, &[&root], &changed, &want).unwrap_err(),
            "something besides the class fields changed"
        );
        let with_class = text.replace("spec: {", "spec: {ingressClassName: a, ");
        assert!(
            verify(&root, &[&root], &with_class, &want)
                .unwrap_err()
                .contains("read back")
        );
    }
}
