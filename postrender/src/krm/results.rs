//! The `results` of a run: a warning for each Ingress R5 warns of, or the one error of a
//! refusal, each naming the item (`resourceRef`) and the field it is about.

use styrmin_ingress_rules::double_quoted;

use super::cut::{RESOURCE_LIST_API_VERSION, cut_into_parts, item_document};
use super::error::{ItemRef, KrmError};
use crate::render::Rendered;
use crate::yaml_tree;

/// The `results` written after the items of `input` when it went through: one warning for
/// each of `rendered`'s warnings, whose items are `warned`; and a line for stderr each.
pub(super) fn warnings(
    input: &[u8],
    rendered: &Rendered,
    warned: &[ItemInfo],
) -> (String, Vec<String>) {
    let mut results = Vec::new();
    let mut messages = Vec::new();
    for (outcome, item) in rendered.warnings().zip(warned) {
        let message = styrmin_ingress_rules::NoClassWarning::MESSAGE;
        messages.push(format!(
            "warning: {}: {}: {message}",
            item.at, outcome.ingress
        ));
        results.push(result(
            "warning",
            message,
            Some(&item.reference),
            Some("spec.ingressClassName"),
        ));
    }
    let mut tail = String::new();
    if !results.is_empty() {
        if !input.ends_with(b"\n") && !input.is_empty() {
            tail.push('\n');
        }
        tail.push_str("results:\n");
        for r in results {
            tail.push_str(&r);
        }
    }
    (tail, messages)
}

/// The `ResourceList` written when `input` is refused: no items, and `results` with the
/// error; and its line for stderr.
pub(super) fn refusal(input: &[u8], error: &KrmError) -> (String, String) {
    let message = error.to_string();
    let reference = match error {
        KrmError::Render { item, .. } => item_reference(input, item),
        _ => None,
    };
    let field = error.field();
    let mut output = format!(
        "apiVersion: {RESOURCE_LIST_API_VERSION}\nkind: ResourceList\nitems: []\nresults:\n"
    );
    output.push_str(&result(
        "error",
        &message,
        reference.as_ref(),
        field.as_deref(),
    ));
    (output, format!("error: {message}"))
}

/// A `resourceRef`: apiVersion, kind, name and namespace of an item.
#[derive(Debug, Clone, Default)]
pub(super) struct ResourceRef {
    api_version: Option<String>,
    kind: Option<String>,
    name: Option<String>,
    namespace: Option<String>,
}

#[derive(Debug)]
pub(super) struct ItemInfo {
    pub(super) at: ItemRef,
    pub(super) reference: ResourceRef,
}

fn item_reference(input: &[u8], item: &ItemRef) -> Option<ResourceRef> {
    let text = std::str::from_utf8(input).ok()?;
    let parts = cut_into_parts(text, false).ok()?;
    let range = parts.items.get(item.index)?;
    Some(reference_of(&item_document(
        text.as_bytes(),
        range,
        parts.item_column,
    )))
}

pub(super) fn reference_of(document: &str) -> ResourceRef {
    let Ok(Some(root)) = yaml_tree::parse_document(document) else {
        return ResourceRef::default();
    };
    let get = |node: Option<&yaml_tree::Node<'_>>, key: &str| {
        node.and_then(|n| n.get(key))
            .and_then(yaml_tree::Node::as_str)
            .map(str::to_owned)
    };
    let metadata = root.get("metadata");
    ResourceRef {
        api_version: get(Some(&root), "apiVersion"),
        kind: get(Some(&root), "kind"),
        name: get(metadata, "name"),
        namespace: get(metadata, "namespace"),
    }
}

/// One entry of `results`, as YAML.
fn result(
    severity: &str,
    message: &str,
    reference: Option<&ResourceRef>,
    field: Option<&str>,
) -> String {
    let mut out = format!(
        "- message: {}\n  severity: {severity}\n",
        double_quoted(message)
    );
    if let Some(r) = reference.filter(|r| r.kind.is_some() || r.name.is_some()) {
        out.push_str("  resourceRef:\n");
        for (key, value) in [
            ("apiVersion", &r.api_version),
            ("kind", &r.kind),
            ("name", &r.name),
            ("namespace", &r.namespace),
        ] {
            if let Some(value) = value {
                out.push_str(&format!("    {key}: {}\n", double_quoted(value)));
            }
        }
    }
    if let Some(path) = field {
        out.push_str(&format!("  field:\n    path: {}\n", double_quoted(path)));
    }
    out
}
