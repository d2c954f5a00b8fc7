//! Every Ingress's outcome, kept until the stream is written, compactly: a stream of
//! 200,000 Ingresses keeps 200,000 of them. The names' text (each document's source and
//! each Ingress's name) lives in one string per part of the stream, numbers are 32-bit
//! and counted from the part's start, and the class fields, which most Ingresses share,
//! are kept once per part and named by their position.

use std::fmt;
use std::sync::Arc;

use styrmin_ingress_rules::{ClassFields, NoClassWarning};

/// How a document is named in messages: its position, and the template it came from
/// (Helm 3's `# Source:` comment or Helm 4's filename annotation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocumentName {
    pub index: usize,
    pub source: Option<String>,
    /// The line of the stream the document starts on (1-based).
    pub first_line: usize,
}

impl fmt::Display for DocumentName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        DocumentRef {
            index: self.index,
            source: self.source.as_deref(),
            first_line: self.first_line,
        }
        .fmt(f)
    }
}

impl DocumentName {
    /// The same document counted in a larger stream that has `documents` documents and
    /// `lines` lines before the part this name was made in.
    pub fn renumber(&mut self, documents: usize, lines: usize) {
        self.index += documents;
        self.first_line += lines;
    }
}

/// An Ingress, named as `kubectl` would: `namespace/name`, or `name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IngressName(pub String);

impl fmt::Display for IngressName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        IngressRef(&self.0).fmt(f)
    }
}

/// How the document of an outcome is named in messages (and how [`DocumentName`] prints).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DocumentRef<'a> {
    pub index: usize,
    pub source: Option<&'a str>,
    /// The line of the stream the document starts on (1-based).
    pub first_line: usize,
}

impl fmt::Display for DocumentRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "document {}", self.index)?;
        match self.source {
            Some(source) => write!(f, " ({source})"),
            None => write!(f, " (line {})", self.first_line),
        }
    }
}

/// The name of the Ingress of an outcome (and how [`IngressName`] prints).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IngressRef<'a>(pub &'a str);

impl fmt::Display for IngressRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Ingress {}", self.0)
    }
}

impl IngressRef<'_> {
    pub fn to_name(self) -> IngressName {
        IngressName(self.0.to_owned())
    }
}

/// What happened to one Ingress, as read from [`Outcomes`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IngressOutcome<'a> {
    pub document: DocumentRef<'a>,
    pub ingress: IngressRef<'a>,
    pub before: &'a ClassFields,
    pub after: &'a ClassFields,
    /// Whether any byte of the Ingress changed (a plain `on` re-quoted counts).
    pub edited: bool,
    pub warning: Option<NoClassWarning>,
}

/// Every Ingress's outcome, in stream order.
#[derive(Debug, Default)]
pub struct Outcomes {
    parts: Vec<Part>,
    len: usize,
}

/// Where [`Outcomes`] ended at some point: how many parts, outcomes, and the lengths of
/// the last part's text, documents, fields and outcomes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OutcomesMark {
    parts: usize,
    len: usize,
    last: Option<[usize; 4]>,
}

/// Outcomes of consecutive Ingresses whose numbers, counted from the part's own, and whose
/// text fit in 32 bits (a part per block of the stream, and a new one in the rare block too
/// large for that).
#[derive(Debug, Default)]
struct Part {
    documents_before: usize,
    lines_before: usize,
    text: String,
    documents: Vec<PartDocument>,
    fields: Vec<Arc<ClassFields>>,
    outcomes: Vec<PackedOutcome>,
}

#[derive(Debug, Clone, Copy)]
struct Span {
    start: u32,
    len: u32,
}

/// A document that holds Ingresses: its index and first line counted from the part's.
#[derive(Debug)]
struct PartDocument {
    index: u32,
    first_line: u32,
    source: Option<Span>,
}

/// One Ingress's outcome as a part keeps it: positions and spans in place of owned text.
#[derive(Debug)]
struct PackedOutcome {
    /// Positions in the part's documents and class fields.
    document: u32,
    before: u32,
    after: u32,
    name: Span,
    edited: bool,
    /// R5's warning.
    warning: bool,
}

/// Class fields to keep: found by the rules, or already kept by another part.
enum Fields<'a> {
    Owned(ClassFields),
    Shared(&'a Arc<ClassFields>),
}

impl Fields<'_> {
    fn get(&self) -> &ClassFields {
        match self {
            Fields::Owned(fields) => fields,
            Fields::Shared(fields) => fields,
        }
    }

    fn into_shared(self) -> Arc<ClassFields> {
        match self {
            Fields::Owned(fields) => Arc::new(fields),
            Fields::Shared(fields) => Arc::clone(fields),
        }
    }
}

impl Part {
    fn new(document: DocumentRef<'_>) -> Part {
        Part {
            documents_before: document.index,
            lines_before: document.first_line,
            ..Part::default()
        }
    }

    /// Whether an outcome of `document` with `text` more bytes of names fits.
    fn fits(&self, document: DocumentRef<'_>, text: usize) -> bool {
        let fits = |n: usize| u32::try_from(n).is_ok();
        document.index >= self.documents_before
            && document.first_line >= self.lines_before
            && fits(document.index - self.documents_before)
            && fits(document.first_line - self.lines_before)
            && fits(self.text.len() + text)
            && fits(self.documents.len() + 1)
            && fits(self.fields.len() + 2)
    }

    fn span(&mut self, text: &str) -> Span {
        let start = self.text.len();
        self.text.push_str(text);
        Span {
            start: narrow(start),
            len: narrow(text.len()),
        }
    }

    fn text(&self, span: Span) -> &str {
        let start = span.start as usize;
        &self.text[start..start + span.len as usize]
    }

    /// The position of `fields` among the part's, shared with the outcome before (or with
    /// `also`) when it has the same.
    fn field(&mut self, fields: Fields<'_>, also: Option<u32>) -> u32 {
        let previous = self.outcomes.last().map(|o| [o.after, o.before]);
        let same = previous
            .into_iter()
            .flatten()
            .chain(also)
            .find(|&i| *self.fields[i as usize] == *fields.get());
        same.unwrap_or_else(|| {
            self.fields.push(fields.into_shared());
            narrow(self.fields.len() - 1)
        })
    }

    fn view<'a>(&'a self, outcome: &PackedOutcome) -> IngressOutcome<'a> {
        let document = &self.documents[outcome.document as usize];
        IngressOutcome {
            document: DocumentRef {
                index: self.documents_before + document.index as usize,
                source: document.source.map(|s| self.text(s)),
                first_line: self.lines_before + document.first_line as usize,
            },
            ingress: IngressRef(self.text(outcome.name)),
            before: &self.fields[outcome.before as usize],
            after: &self.fields[outcome.after as usize],
            edited: outcome.edited,
            warning: outcome.warning.then_some(NoClassWarning),
        }
    }

    fn shrink_to_fit(&mut self) {
        self.text.shrink_to_fit();
        self.documents.shrink_to_fit();
        self.fields.shrink_to_fit();
        self.outcomes.shrink_to_fit();
    }
}

/// A number a part has checked fits ([`Part::fits`]).
fn narrow(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

impl Outcomes {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn iter(&self) -> Iter<'_> {
        Iter {
            parts: self.parts.iter(),
            part: None,
        }
    }

    /// The outcome added last.
    pub fn last(&self) -> Option<IngressOutcome<'_>> {
        let part = self.parts.last()?;
        part.outcomes.last().map(|o| part.view(o))
    }

    /// Adds the outcome of an Ingress of `document`, after those of the Ingresses before it;
    /// the class fields it must read back with (`after`), shared with the outcomes.
    pub(crate) fn push(
        &mut self,
        document: &DocumentName,
        ingress: &str,
        before: ClassFields,
        after: ClassFields,
        edited: bool,
        warning: Option<NoClassWarning>,
    ) -> Arc<ClassFields> {
        let document = DocumentRef {
            index: document.index,
            source: document.source.as_deref(),
            first_line: document.first_line,
        };
        let (part, after) = self.push_packed(
            document,
            ingress,
            [Fields::Owned(before), Fields::Owned(after)],
            edited,
            warning.is_some(),
        );
        Arc::clone(&self.parts[part].fields[after as usize])
    }

    /// [`Outcomes::push`] with the class fields `[before, after]` given either way; the
    /// outcome's part and the position of its `after` in it.
    fn push_packed(
        &mut self,
        document: DocumentRef<'_>,
        ingress: &str,
        [before, after]: [Fields<'_>; 2],
        edited: bool,
        warning: bool,
    ) -> (usize, u32) {
        let source = document.source.unwrap_or_default();
        let new_part = self
            .parts
            .last()
            .is_none_or(|p| !p.fits(document, ingress.len() + source.len()));
        if new_part {
            self.parts.push(Part::new(document));
        }
        let part_index = self.parts.len() - 1;
        let part = &mut self.parts[part_index];
        let index = narrow(document.index - part.documents_before);
        let same_document = part.documents.last().is_some_and(|d| d.index == index);
        if !same_document {
            let source = document.source.map(|s| part.span(s));
            part.documents.push(PartDocument {
                index,
                first_line: narrow(document.first_line - part.lines_before),
                source,
            });
        }
        let after = part.field(after, None);
        let before = part.field(before, Some(after));
        let name = part.span(ingress);
        part.outcomes.push(PackedOutcome {
            document: narrow(part.documents.len() - 1),
            before,
            after,
            name,
            edited,
            warning,
        });
        self.len += 1;
        (part_index, after)
    }

    /// The same outcomes counted in a larger stream that has `documents` documents and
    /// `lines` lines before the part they were found in.
    pub(crate) fn renumber(&mut self, documents: usize, lines: usize) {
        for part in &mut self.parts {
            part.documents_before += documents;
            part.lines_before += lines;
        }
    }

    /// Adds `other`'s outcomes after these.
    pub(crate) fn append(&mut self, other: Outcomes) {
        self.len += other.len;
        self.parts.extend(other.parts);
    }

    /// Adds `other`'s outcomes after these, packed into the parts these end with: for many
    /// small results (a document rendered on its own each) that would otherwise keep a part,
    /// with its own allocations, each.
    pub(crate) fn absorb(&mut self, other: Outcomes) {
        for part in &other.parts {
            for outcome in &part.outcomes {
                let document = &part.documents[outcome.document as usize];
                let document = DocumentRef {
                    index: part.documents_before + document.index as usize,
                    source: document.source.map(|s| part.text(s)),
                    first_line: part.lines_before + document.first_line as usize,
                };
                let fields = |i: u32| Fields::Shared(&part.fields[i as usize]);
                self.push_packed(
                    document,
                    part.text(outcome.name),
                    [fields(outcome.before), fields(outcome.after)],
                    outcome.edited,
                    outcome.warning,
                );
            }
        }
    }

    /// Where the outcomes end now, to go back to with [`Outcomes::roll_back`].
    pub(crate) fn mark(&self) -> OutcomesMark {
        OutcomesMark {
            parts: self.parts.len(),
            len: self.len,
            last: self.parts.last().map(|p| {
                [
                    p.text.len(),
                    p.documents.len(),
                    p.fields.len(),
                    p.outcomes.len(),
                ]
            }),
        }
    }

    /// Forgets the outcomes added since `mark` was taken (for a reading that turned out
    /// not to be the document's: a List read at once, which was not one of Ingresses).
    pub(crate) fn roll_back(&mut self, mark: OutcomesMark) {
        self.parts.truncate(mark.parts);
        if let (Some(part), Some([text, documents, fields, outcomes])) =
            (self.parts.last_mut(), mark.last)
        {
            part.text.truncate(text);
            part.documents.truncate(documents);
            part.fields.truncate(fields);
            part.outcomes.truncate(outcomes);
        }
        self.len = mark.len;
    }

    /// Gives back the room the outcomes do not use.
    pub(crate) fn shrink_to_fit(&mut self) {
        for part in &mut self.parts {
            part.shrink_to_fit();
        }
        self.parts.shrink_to_fit();
    }
}

/// The outcomes in stream order.
#[derive(Debug, Clone)]
pub struct Iter<'a> {
    parts: std::slice::Iter<'a, Part>,
    part: Option<(&'a Part, std::slice::Iter<'a, PackedOutcome>)>,
}

impl<'a> Iterator for Iter<'a> {
    type Item = IngressOutcome<'a>;

    fn next(&mut self) -> Option<IngressOutcome<'a>> {
        loop {
            if let Some((part, outcomes)) = &mut self.part
                && let Some(outcome) = outcomes.next()
            {
                return Some(part.view(outcome));
            }
            let part = self.parts.next()?;
            self.part = Some((part, part.outcomes.iter()));
        }
    }
}

impl<'a> IntoIterator for &'a Outcomes {
    type Item = IngressOutcome<'a>;
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(class: Option<&str>) -> ClassFields {
        ClassFields {
            ingress_class_name: class.map(str::to_owned),
            class_annotation: None,
        }
    }

    /// Pushes one outcome per (document, name, class before, class after) and reads them back.
    fn round_trip(pushes: &[(DocumentName, &str, Option<&str>, Option<&str>)]) {
        let mut outcomes = Outcomes::default();
        for (n, (document, name, before, after)) in pushes.iter().enumerate() {
            let shared = outcomes.push(
                document,
                name,
                fields(*before),
                fields(*after),
                n % 2 == 0,
                (n % 3 == 0).then_some(NoClassWarning),
            );
            assert_eq!(*shared, fields(*after));
            assert_eq!(
                outcomes.last().map(|o| o.ingress.to_name()),
                Some(IngressName((*name).to_owned()))
            );
        }
        assert_eq!(outcomes.len(), pushes.len());
        let seen: Vec<IngressOutcome<'_>> = outcomes.iter().collect();
        assert_eq!(seen.len(), pushes.len());
        for (n, (outcome, (document, name, before, after))) in seen.iter().zip(pushes).enumerate() {
            // Printed as the names they were made from.
            assert_eq!(outcome.document.to_string(), document.to_string());
            assert_eq!(
                outcome.ingress.to_string(),
                IngressName((*name).to_owned()).to_string()
            );
            assert_eq!(outcome.document.index, document.index);
            assert_eq!(*outcome.before, fields(*before));
            assert_eq!(*outcome.after, fields(*after));
            assert_eq!(outcome.edited, n % 2 == 0);
            assert_eq!(outcome.warning.is_some(), n % 3 == 0);
        }
    }

    fn document(index: usize, source: Option<&str>, first_line: usize) -> DocumentName {
        DocumentName {
            index,
            source: source.map(str::to_owned),
            first_line,
        }
    }

    #[test]
    fn outcomes_read_back_as_pushed() {
        round_trip(&[]);
        let list = document(3, None, 17);
        round_trip(&[
            (
                document(1, Some("c/templates/a.yaml"), 1),
                "web",
                Some("nginx"),
                Some("x"),
            ),
            (list.clone(), "ns/a", None, None),
            (list.clone(), "(no metadata.name)", Some("x"), Some("x")),
            (list, "", Some("nginx"), Some("x")),
            (document(9, Some(""), 80), "b", Some("y"), None),
        ]);
    }

    #[test]
    fn numbers_beyond_32_bits_start_a_new_part() {
        let far = u32::MAX as usize + 5;
        round_trip(&[
            (document(1, None, 1), "a", None, Some("x")),
            (document(far, Some("s"), far * 2), "b", None, Some("x")),
            (
                document(far + 1, None, far * 2 + 1),
                "c",
                Some("x"),
                Some("x"),
            ),
            (document(far * 2, None, far * 3), "d", None, None),
        ]);
    }

    #[test]
    fn renumbered_and_appended_in_stream_order() {
        let mut first = Outcomes::default();
        first.push(
            &document(2, None, 3),
            "a",
            fields(None),
            fields(None),
            true,
            None,
        );
        let mut second = Outcomes::default();
        second.push(
            &document(1, Some("s.yaml"), 1),
            "b",
            fields(None),
            fields(None),
            false,
            None,
        );
        second.renumber(10, 100);
        first.append(second);
        first.shrink_to_fit();
        let seen: Vec<String> = first
            .iter()
            .map(|o| format!("{} {}", o.document, o.ingress))
            .collect();
        assert_eq!(
            seen,
            [
                "document 2 (line 3) Ingress a",
                "document 11 (s.yaml) Ingress b"
            ]
        );
        assert_eq!(first.len(), 2);
    }

    /// Every outcome as it prints and reads, for comparing two ways of keeping them.
    fn dump(outcomes: &Outcomes) -> Vec<String> {
        outcomes
            .iter()
            .map(|o| {
                format!(
                    "{} (line {}) {} {:?} -> {:?} edited={} warned={}",
                    o.document,
                    o.document.first_line,
                    o.ingress,
                    o.before,
                    o.after,
                    o.edited,
                    o.warning.is_some()
                )
            })
            .collect()
    }

    #[test]
    fn absorbed_outcomes_read_as_appended_ones_but_share_one_part() {
        // Documents rendered one by one, each alone (lines counted from its own start), as
        // the KRM route renders its items; one far away, whose numbers need a part of its own.
        let far = u32::MAX as usize + 5;
        let alone = |index: usize, name: &str, class: Option<&str>, n: usize| {
            let mut one = Outcomes::default();
            one.push(
                &document(1, n.is_multiple_of(2).then_some("c/templates/i.yaml"), 1),
                name,
                fields(class),
                fields(Some("haproxy")),
                !n.is_multiple_of(3),
                n.is_multiple_of(4).then_some(NoClassWarning),
            );
            one.renumber(index - 1, 0);
            one
        };
        let items: Vec<(usize, String, Option<&str>)> = (0..50)
            .map(|n| (3 * n + 1, format!("web-{n}"), [None, Some("nginx")][n % 2]))
            .chain([
                (far, "far".to_owned(), None),
                (far + 2, "after-far".to_owned(), None),
            ])
            .collect();
        let mut appended = Outcomes::default();
        let mut absorbed = Outcomes::default();
        for (n, (index, name, class)) in items.iter().enumerate() {
            appended.append(alone(*index, name, *class, n));
            absorbed.absorb(alone(*index, name, *class, n));
        }
        assert_eq!(dump(&absorbed), dump(&appended));
        assert_eq!(absorbed.len(), items.len());
        // One part up to the far document, one from it on; the class every Ingress gets is
        // kept once in each.
        assert_eq!(appended.parts.len(), items.len());
        assert_eq!(absorbed.parts.len(), 2);
        for part in &absorbed.parts {
            let haproxy = fields(Some("haproxy"));
            let kept = part.fields.iter().filter(|f| ***f == haproxy).count();
            assert_eq!(kept, 1, "{:?}", part.fields);
        }
    }

    #[test]
    fn rolled_back_outcomes_are_as_at_the_mark() {
        let push = |outcomes: &mut Outcomes, index: usize, name: &str, class: &str| {
            outcomes.push(
                &document(index, Some("c/templates/list.yaml"), index * 10),
                name,
                fields(None),
                fields(Some(class)),
                true,
                None,
            );
        };
        let far = u32::MAX as usize + 5;
        for first in [0, 2] {
            let mut outcomes = Outcomes::default();
            let mut reference = Outcomes::default();
            for n in 0..first {
                push(&mut outcomes, 1, &format!("a{n}"), "x");
                push(&mut reference, 1, &format!("a{n}"), "x");
            }
            let mark = outcomes.mark();
            // In the mark's part (a new document, a new class), and in a part of its own.
            push(&mut outcomes, 2, "b", "y");
            push(&mut outcomes, 2, "c", "z");
            push(&mut outcomes, far, "d", "y");
            outcomes.roll_back(mark);
            assert_eq!(dump(&outcomes), dump(&reference));
            assert_eq!(outcomes.len(), first);
            // What comes after reads as if nothing had been between.
            push(&mut outcomes, 3, "e", "w");
            push(&mut reference, 3, "e", "w");
            assert_eq!(dump(&outcomes), dump(&reference));
            let (kept, wanted) = (&outcomes.parts[0], &reference.parts[0]);
            assert_eq!(
                (
                    kept.text.len(),
                    kept.documents.len(),
                    kept.fields.len(),
                    kept.outcomes.len()
                ),
                (
                    wanted.text.len(),
                    wanted.documents.len(),
                    wanted.fields.len(),
                    wanted.outcomes.len()
                )
            );
        }
    }
}
