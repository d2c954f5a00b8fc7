//! The rules applied to one Ingress: its outcome, and the edits that give it its class fields.

use std::sync::Arc;

use styrmin_ingress_rules::{
    ClassFields, Enforcement, IngressTarget, KubernetesVersion, ResolvedIngress, enforce,
};

use super::error::RenderError;
use super::outcomes::{DocumentName, IngressName, Outcomes};
use super::read_back::ReadBack;
use crate::ingress_edit::{self, Edit};
use crate::yaml_tree::Node;

/// What the rules need to know besides the stream.
#[derive(Debug, Clone)]
pub struct RenderRules {
    pub resolved: ResolvedIngress,
    pub kubernetes: Option<KubernetesVersion>,
    /// R5's warning becomes an error.
    pub strict: bool,
}

/// One document to render and what rendering it needs: its text, its name for messages,
/// the rules, and how its edits are read back.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DocumentInput<'a> {
    pub text: &'a str,
    pub name: &'a DocumentName,
    pub rules: &'a RenderRules,
    pub read_back: ReadBack,
}

/// Applies the rules to one Ingress of `text`: its outcome goes to `outcomes`, its edits to
/// `edits`; the class fields it must read back with.
pub(crate) fn enforce_one(
    text: &str,
    ingress: &Node<'_>,
    name: &DocumentName,
    rules: &RenderRules,
    outcomes: &mut Outcomes,
    edits: &mut Vec<Edit>,
) -> Result<Arc<ClassFields>, RenderError> {
    let ingress_name = ingress_name(ingress);
    let edit_error = |error| RenderError::Edit {
        document: name.clone(),
        ingress: ingress_name.clone(),
        error,
    };
    let before = ingress_edit::read_class_fields(ingress).map_err(edit_error)?;
    let Enforcement {
        fields, warning, ..
    } = enforce(&rules.resolved.target, &before, rules.kubernetes).map_err(|error| {
        RenderError::Rule {
            document: name.clone(),
            ingress: ingress_name.clone(),
            error,
        }
    })?;
    // --strict: the first Ingress left without a class fails the stream, like any
    // other error, in stream order.
    if rules.strict && warning.is_some() {
        return Err(RenderError::StrictNoClass {
            document: name.clone(),
            ingress: ingress_name,
        });
    }
    // R5 leaves the chart's fields exactly as written: a plain `on` or `123` stays
    // plain (R4 re-quotes them, since it sets the class as a string).
    let mut planned = if rules.resolved.target == IngressTarget::NoClass {
        Vec::new()
    } else {
        ingress_edit::plan(text, ingress, &fields).map_err(edit_error)?
    };
    // In the order of the bytes, as the document's edits will be.
    sort_edits(&mut planned);
    let after = outcomes.push(
        name,
        &ingress_name.0,
        before,
        fields,
        !planned.is_empty(),
        warning,
    );
    edits.extend(planned.into_iter().map(ingress_edit::with_shared_text));
    Ok(after)
}

/// Puts edits in the order of their bytes. Each Ingress's edits are put in order as they
/// are planned and Ingresses come in order, so a document's mostly are already: a List of
/// thousands is not sorted again.
#[inline]
pub(crate) fn sort_edits(edits: &mut [Edit]) {
    let key = |e: &Edit| (e.range.start, e.range.end);
    if !edits.is_sorted_by_key(key) {
        edits.sort_by_key(key);
    }
}

pub(super) fn ingress_name(ingress: &Node<'_>) -> IngressName {
    let metadata = ingress.get("metadata");
    let field = |key| metadata.and_then(|m| m.get(key)).and_then(Node::as_str);
    IngressName(match (field("namespace"), field("name")) {
        (Some(ns), Some(name)) => format!("{ns}/{name}"),
        (None, Some(name)) => name.to_owned(),
        (_, None) => "(no metadata.name)".to_owned(),
    })
}
