//! Rendering while the stream is still arriving.
//!
//! Helm writes the rendered chart into a pipe. Reading all of it first and only then
//! parsing would leave the CPU idle during the read; instead the input is kept in blocks
//! that each end at a document boundary, and every full block is rendered on its own
//! thread while the next one is read. Nothing is written before every block is done and
//! checked, so an error still leaves stdout empty. The filter keeps only the output of
//! each finished block ([`Keep::Output`]): each block's edits are spliced into the block's
//! own bytes as soon as it is rendered, so that the stream is held once, never as input
//! and output side by side. The filter, `check`, the fuzz targets and the tests (on a stream
//! already in memory: `&[u8]` is a reader) all run it. The KRM route does not: it renders
//! its items where they lie with [`render::render_documents_apart`], and runs this pipeline
//! only on an item that failed, alone, to word the error. The answer does
//! not depend on where the blocks are cut, nor on what is kept: document numbers, line
//! numbers and the first error in stream order included (tests/streaming.rs, with tiny blocks).

use std::io::{self, Read, Write};

use crate::documents::{self, Document};
use crate::held_memory::{self, HeldBytes, Pages};
use crate::render::splice::{self, splice_in_place};
use crate::render::threads::{self, join, on_render_stack};
use crate::render::{self, RenderError, RenderRules, Rendered};

/// The rendering threads' stack, and the program run on such a thread.
pub use crate::render::threads::{RENDER_STACK_BYTES, with_render_stack};

/// A block is handed to a renderer once it holds this many bytes and a complete document:
/// a block and the growth of its edits fit one huge page.
pub const BLOCK_BYTES: usize = held_memory::HUGE_PAGE - held_memory::HUGE_PAGE / 16;

/// The rendered stream: its blocks, the documents that change (with their edits) and
/// every Ingress's outcome, in stream order (documents, lines and bytes counted over the
/// whole stream).
#[derive(Debug, Default)]
pub struct StreamRendered {
    /// The blocks as they came in ([`Keep::Input`]), or each with its edits spliced in
    /// ([`Keep::Output`]).
    blocks: Vec<HeldBytes>,
    /// Whether the blocks hold the output ([`Keep::Output`]).
    spliced: bool,
    pub rendered: Rendered,
    pub bytes: usize,
}

/// What the rendered stream keeps of its blocks until it is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// The blocks as they came in and each changed document's edits, for what reads the
    /// documents before and after (`check`'s diff, the KRM function).
    Input,
    /// Only the output: each block's edits are spliced into the block itself as soon as it
    /// is rendered, and [`Rendered::changed`] stays empty. The one copy of the stream the
    /// filter holds before it writes.
    Output,
}

#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    #[error("reading the rendered stream from stdin: {0}")]
    Read(io::Error),
    #[error(transparent)]
    Render(#[from] RenderError),
}

/// What a block's renderer hands back: the block (spliced, with [`Keep::Output`]), its
/// result, and how many bytes, documents and lines it held as it came in, to number the
/// documents of the blocks after it.
struct BlockResult {
    block: HeldBytes,
    result: Result<Rendered, RenderError>,
    bytes: usize,
    documents: usize,
    lines: usize,
}

/// Reads `input` to the end, rendering full blocks as they arrive; keeps the input.
pub fn render_stream(
    input: impl Read,
    rules: &RenderRules,
    block_bytes: usize,
) -> Result<StreamRendered, StreamError> {
    render_stream_keeping(input, rules, block_bytes, Keep::Input)
}

/// Reads `input` to the end, rendering full blocks as they arrive; keeps what `keep` says.
pub fn render_stream_keeping(
    mut input: impl Read,
    rules: &RenderRules,
    block_bytes: usize,
    keep: Keep,
) -> Result<StreamRendered, StreamError> {
    // A long stream must not start a thread per block.
    let in_flight = threads::in_flight();
    std::thread::scope(|scope| {
        let mut handles = std::collections::VecDeque::new();
        // Each block's result is merged as soon as it is in, in stream order, so that the
        // outcomes are never held twice (once per block and once merged).
        let mut merged = Merge {
            out: StreamRendered {
                spliced: keep == Keep::Output,
                ..StreamRendered::default()
            },
            documents_before: 0,
            lines_before: 0,
        };
        // The stream's first huge page is held in ordinary pages: a short stream is not
        // charged a whole huge page.
        let mut block =
            HeldBytes::with_room(block_bytes * 2, Pages::offered(held_memory::HUGE_PAGE));
        // A block with one huge document has no cut yet: look again only after another
        // block's worth of bytes, so the search stays linear in the input.
        let mut next_attempt = block_bytes;
        loop {
            // Read straight into the block's room, not through a buffer of our own, and no
            // further than the next look for a cut: a block fills its huge page and no more.
            let most = next_attempt
                .saturating_sub(block.len())
                .clamp(1, READ_BYTES);
            match block.read_from(&mut input, most) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) => return Err(StreamError::Read(e)),
            }
            if block.len() < next_attempt {
                continue;
            }
            next_attempt = block.len() + block_bytes;
            if let Some((cut, documents)) = last_complete_cut(&block) {
                next_attempt = block_bytes;
                let rest = block.split_off(cut, block_bytes * 2, Pages::offered(0));
                let full = std::mem::replace(&mut block, rest);
                if handles.len() >= in_flight
                    && let Some(oldest) = handles.pop_front()
                {
                    merged.push(join(oldest))?;
                }
                handles.push_back(on_render_stack(scope, move || {
                    render_and_keep(full, documents, rules, keep)
                }));
            }
        }
        let last = on_render_stack(scope, move || render_and_keep(block, None, rules, keep));
        for handle in handles {
            merged.push(join(handle))?;
        }
        merged.push(join(last))?;
        Ok(merged.out)
    })
}

/// How much is read from the input at a time.
const READ_BYTES: usize = 1 << 20;

/// Renders a block on its own and hands it back with its result, to be kept until the whole
/// stream is checked. `documents` are the block's documents when the search for its end
/// has already found them.
fn render_and_keep(
    mut block: HeldBytes,
    documents: Option<Vec<Document>>,
    rules: &RenderRules,
    keep: Keep,
) -> BlockResult {
    let mut result = render::render_block(&block, documents, rules);
    let documents = result.as_ref().map_or(0, |r| r.documents);
    // An error ends the stream: its lines are not needed.
    let lines = result.as_ref().map_or(0, |r| r.lines);
    let bytes = block.len();
    match (keep, &mut result) {
        // A block kept until the whole stream is checked gives back the room it was read
        // into and does not use (memory the parse trees touched would otherwise stay
        // resident).
        (Keep::Input, _) => block.shrink_to_fit(),
        // The edits, counted from the block's start, go into the block's own bytes, and
        // then go. The block keeps its capacity: the room it does not use was never
        // touched, and shrinking a large block could copy it.
        (Keep::Output, Ok(rendered)) => {
            splice_in_place(&mut block, &rendered.changed);
            rendered.changed = Vec::new();
        }
        (Keep::Output, Err(_)) => {}
    }
    BlockResult {
        block,
        result,
        bytes,
        documents,
        lines,
    }
}

/// The start of the last document of `block` whose lines are all there, when documents
/// come before it, and the documents before it: every document before that point is
/// complete and final (a boundary never moves when more lines arrive, and only a trailing
/// comment-only piece is ever joined to the document after it).
fn last_complete_cut(block: &[u8]) -> Option<(usize, Option<Vec<Document>>)> {
    let complete_lines = memchr::memrchr(b'\n', block)? + 1;
    // Only the stream from the second-to-last `---` line on is split here: a piece that
    // starts with a `---` line is never joined to the next, so the split of that tail
    // ends as the split of the whole does, and the block's renderer splits the rest on
    // its own thread.
    let mut starts = documents::start_markers_backwards(&block[..complete_lines]);
    let from = starts.nth(1).unwrap_or(0);
    if let Ok(tail) = documents::utf8(&block[from..complete_lines]) {
        let cut = from + documents::split(tail).pop()?.range.start;
        return (cut > 0).then_some((cut, None));
    }
    // Text that is not UTF-8 near the end: the whole block is split, up to it.
    let text = match documents::utf8(&block[..complete_lines]) {
        Ok(text) => text,
        // A character cut by the read ends on a later line; invalid text fails the block.
        Err(e) => std::str::from_utf8(&block[..e.valid_up_to()]).ok()?,
    };
    let mut documents = documents::split(text);
    let last = documents.pop()?;
    (!documents.is_empty() && last.range.start > 0).then_some((last.range.start, Some(documents)))
}

/// The blocks' results joined in stream order, documents and lines renumbered.
struct Merge {
    out: StreamRendered,
    documents_before: usize,
    lines_before: usize,
}

impl Merge {
    /// Adds the next block's result; the first error in stream order ends the stream.
    fn push(&mut self, block: BlockResult) -> Result<(), StreamError> {
        let BlockResult {
            block,
            result,
            bytes,
            documents,
            lines,
        } = block;
        let bytes_before = self.out.bytes;
        let mut rendered = match result {
            Ok(rendered) => rendered,
            Err(mut error) => {
                error.renumber(self.documents_before, self.lines_before, bytes_before);
                return Err(error.into());
            }
        };
        for changed in &mut rendered.changed {
            changed.document.index += self.documents_before;
            changed.document.range = changed.document.range.start + bytes_before
                ..changed.document.range.end + bytes_before;
        }
        let mut ingresses = rendered.ingresses;
        ingresses.renumber(self.documents_before, self.lines_before);
        // Kept until the whole stream is checked: no spare room.
        ingresses.shrink_to_fit();
        let out = &mut self.out;
        out.rendered.documents += rendered.documents;
        out.rendered.lines += rendered.lines;
        out.rendered.ingresses.append(ingresses);
        if out.rendered.changed.is_empty() {
            out.rendered.changed = rendered.changed;
        } else {
            out.rendered.changed.append(&mut rendered.changed);
        }
        out.bytes += bytes;
        self.documents_before += documents;
        self.lines_before += lines;
        out.blocks.push(block);
        Ok(())
    }
}

impl StreamRendered {
    /// Writes the stream with the changed documents' edits spliced in.
    pub fn write(&self, out: &mut impl Write) -> io::Result<()> {
        if self.spliced {
            for block in &self.blocks {
                out.write_all(block)?;
            }
            return out.flush();
        }
        splice::write_spliced(
            self.blocks.iter().map(|block| &block[..]),
            &self.rendered.changed,
            out,
        )
    }

    /// The text of a document of the stream as it came in (a document never spans two
    /// blocks); `None` for a range that is not one of its documents, and always with
    /// [`Keep::Output`].
    pub fn document_text(&self, document: &Document) -> Option<&str> {
        if self.spliced {
            return None;
        }
        let mut block_start = 0;
        for block in &self.blocks {
            let block_end = block_start + block.len();
            if document.range.end <= block_end {
                let bytes = block.get(
                    document.range.start.checked_sub(block_start)?
                        ..document.range.end - block_start,
                )?;
                return std::str::from_utf8(bytes).ok();
            }
            block_start = block_end;
        }
        None
    }

    /// The outcome alone, without the stream's bytes.
    pub fn into_rendered(self) -> Rendered {
        self.rendered
    }
}

#[cfg(test)]
mod tests;
