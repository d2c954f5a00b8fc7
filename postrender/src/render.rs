//! Rendering one document: find its Ingresses as Go reads it, apply the rules, plan the
//! byte edits and prove that the edited document reads back as intended. Both routes, the
//! stream ([`crate::streaming`]) and the KRM function ([`crate::krm`]), render their
//! documents here.
//!
//! The rooms: [`document`] classifies a document, [`enforce`] applies the rules to each
//! Ingress; [`list`] reads a List of Ingresses one item at a time; [`verify`] and [`read_back`]
//! prove the edits; [`splice`] puts them into the text; [`apart`] renders the documents a
//! caller picked, side by side, on the [`threads`] that render; [`outcomes`] keeps what
//! happened to every Ingress; [`error`] says why a document is refused; [`go_lines`] reads
//! Unicode line breaks as Go does. This module only names them: each room uses its siblings,
//! never this one, so that the rooms form no cycle.

pub mod apart;
pub mod document;
pub mod enforce;
pub mod error;
pub mod go_lines;
pub mod list;
pub mod outcomes;
pub mod read_back;
pub mod splice;
pub mod threads;
pub mod verify;

pub use apart::render_documents_apart;
pub(crate) use document::render_block;
pub use document::{Rendered, may_hold_ingress};
pub use enforce::RenderRules;
pub use error::RenderError;
/// What happened to one Ingress. Every Ingress of a stream keeps one until the stream is
/// written, in [`Outcomes`], compactly.
pub use outcomes::{
    DocumentName, DocumentRef, IngressName, IngressOutcome, IngressRef, Iter, Outcomes,
};
pub use splice::ChangedDocument;
