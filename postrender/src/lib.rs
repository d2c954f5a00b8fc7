//! `styrmin-postrender`: gives every Ingress a chart renders the class Styrmin's rules decide
//! (docs/rules.md), changing only those bytes. Two routes, one renderer of documents:
//!
//! - **The stream** (Helm 3 and 4, `check`, the kustomize exec plugin): [`streaming`] keeps
//!   stdin in blocks that end at a document boundary and renders each on its own thread.
//! - **The KRM function** (kustomize, kpt): [`krm`] cuts a `ResourceList` into its items by
//!   lines and renders each where it lies.
//!
//! [`render`] renders one document: classified as Go reads it, edited ([`ingress_edit`]) and
//! read back before anything is written. [`route`] runs each route from stdin to stdout.

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
pub mod route;
pub mod streaming;
pub mod yaml_tree;
