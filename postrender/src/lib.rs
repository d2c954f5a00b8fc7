//! `styrmin-postrender`: a Helm post-renderer that gives every Ingress of a rendered
//! chart the class Styrmin's rules decide (SPEC R1–R9).

pub mod ingress_edit;
pub mod render;
pub mod stream;
pub mod yaml_tree;
