//! Edits spliced into the text they were planned on. One iterator gives the edits of the
//! changed documents as ranges of the whole text ([`edits_of`]); it feeds the three outputs:
//! a new string ([`spliced_text`]), a writer ([`write_spliced`]) and the held text itself
//! ([`splice_in_place`]).

use std::io::{self, Write};
use std::ops::{Index, Range, RangeFrom};

use smallvec::SmallVec;

use crate::documents::Document;
use crate::held_memory::HeldBytes;
use crate::ingress_edit::Edit;

/// A document whose bytes change: only its edits are kept (byte ranges of the document and
/// their new text), never a copy of the document, so a stream of edited Ingresses does
/// not cost its size twice.
#[derive(Debug, Clone)]
pub struct ChangedDocument {
    /// The document, its range counted in the whole stream (its name is its Ingresses'
    /// [`super::outcomes::IngressOutcome::document`]).
    pub document: Document,
    /// Sorted, non-overlapping, relative to the document's first byte. Most documents are
    /// one Ingress with an edit or two, kept without an allocation of their own.
    pub edits: SmallVec<[Edit; 2]>,
}

impl ChangedDocument {
    /// The document's new text, from its text `before`.
    pub fn text(&self, before: &str) -> String {
        spliced_text(before, &self.edits)
    }
}

/// An edit's range and its new text.
type Splice<'e, T> = (Range<usize>, &'e T);

/// The edits of `changed` (documents in order, each one's edits sorted and apart), each
/// counted from the start of the text the documents' ranges are counted in.
pub(crate) fn edits_of(
    changed: &[ChangedDocument],
) -> impl DoubleEndedIterator<Item = Splice<'_, [u8]>> + Clone + '_ {
    changed.iter().flat_map(|c| {
        let start = c.document.range.start;
        c.edits.iter().map(move |e| {
            (
                start + e.range.start..start + e.range.end,
                e.text.as_bytes(),
            )
        })
    })
}

/// The pieces of a spliced text, in order: the runs of `text` that are kept, and the edits'
/// texts between them. `edits` are sorted, apart and inside `text`.
struct Pieces<'t, T: ?Sized, I> {
    text: &'t T,
    edits: I,
    at: usize,
    /// The text of the edit whose kept run was just handed out.
    next: Option<&'t T>,
    done: bool,
}

fn pieces<'t, T, I>(text: &'t T, edits: I) -> Pieces<'t, T, I>
where
    T: ?Sized + Index<Range<usize>, Output = T> + Index<RangeFrom<usize>, Output = T>,
    I: Iterator<Item = Splice<'t, T>>,
{
    Pieces {
        text,
        edits,
        at: 0,
        next: None,
        done: false,
    }
}

impl<'t, T, I> Iterator for Pieces<'t, T, I>
where
    T: ?Sized + Index<Range<usize>, Output = T> + Index<RangeFrom<usize>, Output = T>,
    I: Iterator<Item = Splice<'t, T>>,
{
    type Item = &'t T;

    fn next(&mut self) -> Option<&'t T> {
        if let Some(text) = self.next.take() {
            return Some(text);
        }
        if let Some((range, text)) = self.edits.next() {
            let kept = &self.text[self.at..range.start];
            self.at = range.end;
            self.next = Some(text);
            return Some(kept);
        }
        if self.done {
            return None;
        }
        self.done = true;
        Some(&self.text[self.at..])
    }
}

/// `text` with `edits` (ranges of `text`, apart; put in order here when they are not) in
/// place of the bytes they replace, as a new string.
pub fn spliced_text(text: &str, edits: &[Edit]) -> String {
    let mut sorted: Vec<&Edit> = edits.iter().collect();
    sorted.sort_by_key(|e| (e.range.start, e.range.end));
    let added: usize = edits.iter().map(|e| e.text.len()).sum();
    let mut out = String::with_capacity(text.len() + added);
    let edits = sorted.into_iter().map(|e| (e.range.clone(), &*e.text));
    for piece in pieces(text, edits) {
        out.push_str(piece);
    }
    out
}

/// Writes the stream, given as consecutive blocks, with the edits of the changed documents
/// (in stream order, ranges counted in the whole stream) in place of the bytes they replace.
/// A document never spans two blocks, so neither does an edit.
pub fn write_spliced<'b>(
    blocks: impl IntoIterator<Item = &'b [u8]>,
    changed: &[ChangedDocument],
    out: &mut impl Write,
) -> io::Result<()> {
    let mut edits = edits_of(changed).peekable();
    let mut block_start = 0;
    for block in blocks {
        let block_end = block_start + block.len();
        let in_block = std::iter::from_fn(|| {
            edits
                .next_if(|(range, _)| range.end <= block_end)
                .map(|(range, text)| (range.start - block_start..range.end - block_start, text))
        });
        for piece in pieces(block, in_block) {
            out.write_all(piece)?;
        }
        block_start = block_end;
    }
    out.flush()
}

/// Splices the edits of the changed documents of `block` (ranges counted from the block's
/// start, in order, not overlapping; the documents in order) into `block` itself: what the
/// filter writes, and the KRM route's `ResourceList`, is held once, never as input and
/// output side by side. The block grows or shrinks by their net size, and every kept byte
/// moves at most once. Kept runs that move toward the block's start are moved first, front
/// to back; then those that move toward its end, back to front; then the edits' texts are
/// written between them. A run's new place never covers bytes of a run not yet moved: runs
/// before it that move the same way are already in place, and a run that moves the other
/// way lies on its far side.
pub fn splice_in_place(block: &mut HeldBytes, changed: &[ChangedDocument]) {
    let edits = edits_of(changed);
    let old_len = block.len();
    let added: usize = edits.clone().map(|(_, text)| text.len()).sum();
    let removed: usize = edits.clone().map(|(range, _)| range.len()).sum();
    let new_len = old_len + added - removed;
    if new_len > old_len {
        block.resize(new_len);
    }
    let delta = |range: &Range<usize>, text: &[u8]| text.len() as isize - range.len() as isize;
    // The kept run after each edit: where it starts now, its length, and how far it moves.
    let mut shift = 0isize;
    let mut forward = edits.clone().peekable();
    while let Some((range, text)) = forward.next() {
        shift += delta(&range, text);
        let end = forward.peek().map_or(old_len, |(next, _)| next.start);
        if shift < 0 {
            block.copy_within(range.end..end, range.end.wrapping_add_signed(shift));
        }
    }
    let mut end = old_len;
    for (range, text) in edits.clone().rev() {
        if shift > 0 {
            block.copy_within(range.end..end, range.end.wrapping_add_signed(shift));
        }
        shift -= delta(&range, text);
        end = range.start;
    }
    debug_assert_eq!(shift, 0);
    let mut shift = 0isize;
    for (range, text) in edits {
        let at = range.start.wrapping_add_signed(shift);
        block[at..at + text.len()].copy_from_slice(text);
        shift += delta(&range, text);
    }
    block.truncate(new_len);
}
