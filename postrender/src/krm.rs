//! `styrmin-postrender` as a KRM function (the KRM Functions Specification that kustomize and
//! kpt implement): a `ResourceList` on stdin, the same `ResourceList` on stdout with every
//! Ingress item edited exactly as the post-renderer edits a stream, and `results` for R5's
//! warning and for refusals.
//!
//! The items are not re-serialised, nor copied. The `ResourceList`'s text is cut into its
//! items by lines, and each item is read where it lies as one document of the post-renderer's
//! own pipeline ([`render::render_documents_apart`]; its leading `-` turned into a space
//! for that time, so every byte keeps its column and its offset): the same pre-filter, the
//! same Go-reader classification and refusals, the same byte-level edit and self-check. The
//! edits come back as byte ranges of the items and are spliced into the `ResourceList`'s text
//! in place before it is written.
//!
//! The pipeline's pre-filter and its UTF-8 check are made on each item while the cut reads
//! it ([`cut::ItemsSeen`]), so that after the input ends only the items that may hold an Ingress
//! are read again: a `ResourceList` is read whole before anything is rendered (kustomize
//! writes the `functionConfig` last), and one larger than the processor's cache would
//! otherwise be read from memory once more.
//!
//! Cutting by lines is exact only when no quoted scalar or flow collection runs over a line
//! break: a line that starts in the item column inside such a scalar would look like the
//! next item. So every line is checked ([`line_checker::LineChecker`]), conservatively: a quoted scalar
//! must close on its line, flow collections may only be `[]` or `{}`, and anchors, aliases,
//! tags, tabs, CR and Unicode line breaks are not accepted. kustomize writes its
//! `ResourceList` that way (it round-trips every resource through JSON); a `ResourceList`
//! written otherwise is refused with the line that could not be read this way. The cut and
//! the checks run while the input is read ([`read`]), on a thread of their own.
//!
//! The parts, each a module: [`function_config`] reads the configuration; [`cut`] cuts the
//! `ResourceList` into its items, [`line_checker`] checking each line it reads,
//! [`plain_runs`] skipping the lines it passes over and [`item_lines`] taking the lines it
//! stops at most often; [`render_items`] renders the items and moves their edits back into
//! the `ResourceList`; [`results`] writes the `results`; [`error`] says why a `ResourceList`
//! was refused. This module runs them and writes the `ResourceList` out ([`ResourceListOutput`]).

use crate::held_memory::HeldBytes;
use crate::render;

mod cut;
mod error;
mod function_config;
mod item_lines;
mod line_checker;
mod plain_runs;
mod render_items;
mod results;

use cut::RESOURCE_LIST_API_VERSION;
pub use cut::{ListCut, read};
pub use error::{ItemRef, KrmError};
pub use function_config::{
    FUNCTION_CONFIG_API_VERSION, FUNCTION_CONFIG_KIND, FunctionConfig, read_plugin_config,
};
use render_items::process;

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

/// What a run writes: the output `ResourceList` (the input's text with the edits spliced
/// into it, then `results`), and whether it failed.
#[derive(Debug)]
pub struct ResourceListOutput {
    text: HeldBytes,
    tail: String,
    pub failed: bool,
    /// One line per warning and error, for stderr.
    pub messages: Vec<String>,
}

impl ResourceListOutput {
    /// Writes the `ResourceList`.
    pub fn write(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        out.write_all(&self.text)?;
        out.write_all(self.tail.as_bytes())?;
        out.flush()
    }

    /// The `ResourceList` as text.
    pub fn output(&self) -> String {
        let mut text = String::from_utf8_lossy(&self.text).into_owned();
        text.push_str(&self.tail);
        text
    }
}

/// Runs the function on a whole `ResourceList`. `fallback` is the config from the command
/// line, used when the `ResourceList` has no functionConfig; `fallback_given` says whether
/// any of it was given explicitly (both at once is an error).
pub fn run(input: &[u8], fallback: FunctionConfig, fallback_given: bool) -> ResourceListOutput {
    run_cut(
        HeldBytes::copy_of(input),
        ListCut::of(input),
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
) -> ResourceListOutput {
    match process(&mut input, cut, fallback, fallback_given) {
        Ok((rendered, warned)) => {
            let (tail, messages) = results::warnings(&input, &rendered, &warned);
            // The edits go into the held text itself, and then go: what is written is held
            // once, as the post-renderer holds its blocks.
            render::splice::splice_in_place(&mut input, &rendered.changed);
            drop(rendered);
            ResourceListOutput {
                text: input,
                tail,
                failed: false,
                messages,
            }
        }
        Err(error) => {
            let (tail, message) = results::refusal(&input, &error);
            ResourceListOutput {
                text: HeldBytes::default(),
                tail,
                failed: true,
                messages: vec![message],
            }
        }
    }
}
