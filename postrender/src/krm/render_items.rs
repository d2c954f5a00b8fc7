//! The items rendered by the post-renderer's pipeline, each read where it lies in the
//! `ResourceList` as one document, and its edits moved back to the `ResourceList`'s text.

use std::ops::Range;

use styrmin_ingress_rules::Level;

use super::cut::{ItemsSeen, ListCut, ListParts, item_document, line_of};
use super::error::{ItemRef, KrmError};
use super::function_config::{FunctionConfig, read_function_config};
use super::results::{ItemInfo, ResourceRef, reference_of};
use crate::documents::Document;
use crate::render::{self, RenderError, RenderRules, Rendered};
use crate::streaming;

/// What the pipeline found, its edits moved to the items (each counted from its item's
/// first byte), and each warning's item.
pub(super) type Processed = (Rendered, Vec<ItemInfo>);

/// Renders the items of a `ResourceList` cut by [`ListCut`]: its edits, or why it is refused
/// (a refusal of the cut, of the config, or of an item).
pub(super) fn process(
    input: &mut [u8],
    cut: ListCut,
    fallback: FunctionConfig,
    fallback_given: bool,
) -> Result<Processed, KrmError> {
    let parts = cut.parts?;
    render_items(input, &parts, &cut.seen, fallback, fallback_given)
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
    parts: &ListParts,
    seen: &ItemsSeen,
    fallback: FunctionConfig,
    fallback_given: bool,
) -> Result<Processed, KrmError> {
    let rules = rules_of(text, parts, fallback, fallback_given)?;
    let rendered = render_where_they_lie(text, parts, seen, &rules);
    let text = &*text;
    let mut rendered = rendered.map_err(|error| render_error(text, parts, &rules, error))?;
    move_edits_to_items(text, parts, &mut rendered)?;
    // Each warning's item, in the order of the warnings.
    let warned = rendered
        .warnings()
        .map(|o| {
            let index = o.document.index - 1;
            ItemInfo {
                at: item_ref(text, parts, index),
                reference: parts
                    .items
                    .get(index)
                    .map_or_else(ResourceRef::default, |r| {
                        reference_of(&item_document(text, r, parts.item_column))
                    }),
            }
        })
        .collect();
    Ok((rendered, warned))
}

/// The rules of the `ResourceList`'s functionConfig, else of `fallback`; both at once is an
/// error, and so is warn (a KRM function cannot pass its input through and warn).
fn rules_of(
    text: &[u8],
    parts: &ListParts,
    fallback: FunctionConfig,
    fallback_given: bool,
) -> Result<RenderRules, KrmError> {
    let function_config = parts
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
    Ok(RenderRules {
        resolved: settings.resolved,
        kubernetes: config.kubernetes,
        strict: config.strict,
    })
}

/// Renders the items, each a document of the pipeline read where it lies: its `-` turned
/// into a space for the time of the rendering, so that every byte keeps its column and its
/// offset, and nothing is copied. Only the items the pre-filter lets through are rendered
/// (the others are set aside by the pipeline all the same), unless some text is not UTF-8,
/// which the pipeline names in whichever item it is.
fn render_where_they_lie(
    text: &mut [u8],
    parts: &ListParts,
    seen: &ItemsSeen,
    rules: &RenderRules,
) -> Result<Rendered, RenderError> {
    let column = parts.item_column;
    let mut documents: Vec<Document> = Vec::with_capacity(parts.items.len());
    documents.extend(
        parts
            .items
            .iter()
            .enumerate()
            .filter(|(i, _)| seen.not_utf8 || seen.may_hold_ingress.get(*i).is_none_or(|may| *may))
            .map(|(i, range)| Document {
                index: i + 1,
                range: range.clone(),
            }),
    );
    for document in &documents {
        text[document.range.start + column] = b' ';
    }
    let rendered = render::render_documents_apart(text, &documents, rules);
    for document in &documents {
        text[document.range.start + column] = b'-';
    }
    rendered
}

/// Item `index` and its line.
fn item_ref(text: &[u8], parts: &ListParts, index: usize) -> ItemRef {
    ItemRef {
        index,
        line: line_of(text, parts.items[index].start),
    }
}

/// The edits, moved from the items read as documents to the ResourceList's items: the
/// same bytes, but for an edit before the first key. They are rewritten where they lie,
/// each still counted from its item's first byte: a large ResourceList has two edits for
/// every Ingress item, and they are spliced into its text from there.
fn move_edits_to_items(
    text: &[u8],
    parts: &ListParts,
    rendered: &mut Rendered,
) -> Result<(), KrmError> {
    let column = parts.item_column;
    let dash = column + 2;
    for changed in &mut rendered.changed {
        let index = changed.document.index - 1;
        let range = changed.document.range.clone();
        if changed.edits.iter().all(|e| e.range.start >= dash) {
            continue;
        }
        let refused = |error: &str| KrmError::Render {
            item: item_ref(text, parts, index),
            error: format!(
                "internal check failed: {error}. Please report this with the ResourceList."
            ),
        };
        // An item whose edit moves is checked against the document the pipeline edited.
        let mut document = text_of(text, range.clone())?.to_owned();
        document.replace_range(column..column + 1, " ");
        let document_edited = changed.text(&document);
        for edit in &mut changed.edits {
            if edit.range.start >= dash {
                continue;
            }
            if edit.range.is_empty()
                && edit.range.start == 0
                && edit.text.len() > dash
                && edit.text.as_bytes()[..dash].iter().all(|b| *b == b' ')
            {
                // A key put before the item's first key (a missing `spec:`): in the list it
                // goes after the `- `, and the old first key keeps its column.
                edit.range = dash..dash;
                edit.text = format!("{}{}", &edit.text[dash..], " ".repeat(dash)).into();
            } else {
                return Err(refused("an edit of the item's `-`"));
            }
        }
        // Sorted as the spliced text needs them (the moved key stays before an edit at the
        // same place, as it was before).
        changed.edits.sort_by_key(|e| (e.range.start, e.range.end));
        // Read as a document, the item with its moved edits is exactly the document the
        // pipeline edited.
        let mut edited = changed.text(text_of(text, range)?);
        edited.replace_range(column..column + 1, " ");
        if document_edited != edited {
            return Err(refused("the edited item differs from the edited document"));
        }
    }
    Ok(())
}

/// A refusal, named by the item and the line of the `ResourceList`: the item that failed is
/// rendered again alone, after as many blank lines as come before it, so the pipeline's own
/// message counts lines as the `ResourceList` does.
fn render_error(
    text: &[u8],
    parts: &ListParts,
    rules: &RenderRules,
    error: RenderError,
) -> KrmError {
    let index = error_document(&error).map_or(0, |d| d.saturating_sub(1));
    let Some(range) = parts.items.get(index) else {
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
    alone.push_str(&item_document(text, range, parts.item_column));
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
