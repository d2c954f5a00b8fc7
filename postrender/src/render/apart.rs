//! Documents of a text already in memory rendered each where it lies and on its own, side by
//! side: the KRM route's items.

use super::document::{Rendered, render_block};
use super::enforce::RenderRules;
use super::error::RenderError;
use super::splice::ChangedDocument;
use super::threads::{in_flight, join, on_render_stack};
use crate::documents::Document;

/// Renders documents of a text already in memory, each where it lies and on its own, side
/// by side: for a caller that has found the documents and set aside those that cannot hold
/// an Ingress while it read them (the KRM function, its items while they were in cache),
/// so that the rest of the text is not read again. Documents keep their numbers and ranges
/// (gaps between them are never read); lines are counted from each document's start.
pub fn render_documents_apart(
    text: &[u8],
    documents: &[Document],
    rules: &RenderRules,
) -> Result<Rendered, RenderError> {
    let render_part = |part: &[Document]| -> Result<Rendered, RenderError> {
        let mut rendered = Rendered::default();
        // Most documents a caller picks are Ingresses, and most of those change: room for
        // all at once rather than growing by doubling (a copy each time, and up to twice
        // the room kept).
        rendered.changed.reserve_exact(part.len());
        for document in part {
            let before = document.index - 1;
            let alone = Document {
                index: 1,
                range: 0..document.range.len(),
            };
            let mut one = render_block(&text[document.range.clone()], Some(vec![alone]), rules)
                .map_err(|mut error| {
                    error.renumber(before, 0, document.range.start);
                    error
                })?;
            one.ingresses.renumber(before, 0);
            // One part for all the documents, not one each.
            rendered.ingresses.absorb(one.ingresses);
            rendered
                .changed
                .extend(one.changed.into_iter().map(|changed| ChangedDocument {
                    document: document.clone(),
                    edits: changed.edits,
                }));
        }
        Ok(rendered)
    };
    let per_part = documents.len().div_ceil(in_flight()).max(1);
    std::thread::scope(|scope| {
        // The parts side by side (all started before any is joined); the first error in
        // document order is the one reported.
        let handles: Vec<_> = documents
            .chunks(per_part)
            .map(|part| on_render_stack(scope, move || render_part(part)))
            .collect();
        let mut parts = handles.into_iter();
        let mut rendered = match parts.next() {
            Some(first) => join(first)?,
            None => render_part(&[])?,
        };
        for handle in parts {
            let mut next = join(handle)?;
            rendered.ingresses.append(next.ingresses);
            rendered.changed.append(&mut next.changed);
        }
        Ok(rendered)
    })
}
