//! `styrmin-postrender`: a Helm post-renderer that gives every Ingress of a rendered
//! chart the class Styrmin's rules decide (which rules: docs/rules.md, "Which part applies
//! which rules").
//!
//! The pipeline: [`documents::split`] cuts the stream into documents by bytes, a byte
//! pre-filter skips every document that cannot be an Ingress or a List to Go's readers,
//! the rest are parsed whole into a [`yaml_tree::Node`] tree with byte spans and
//! classified as Go reads them ([`go_readers`]), [`styrmin_ingress_rules::enforce`] decides the
//! class fields, and [`ingress_edit`] splices only those bytes. Every edited document is read
//! back before anything is written. One pipeline runs it all: [`streaming::render_stream`]
//! renders the stream in blocks as it arrives, for the filter, `check` and the fuzz targets
//! alike.

pub mod check;
pub mod cli;
pub mod config;
pub mod documents;
pub mod explain;
pub mod flux;
pub mod go_readers;
pub mod held_memory;
pub mod ingress_edit;
pub mod krm;
pub mod render;
pub mod report;
pub mod streaming;
pub mod yaml_tree;
