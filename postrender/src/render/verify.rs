//! The self-check after an edit: the edited document read back, either where each edit lies
//! ([`read_back`]) or parsed whole and compared with the tree before, its class fields set
//! aside ([`verify`]); and the digest that compares a List's items without keeping their trees.

use std::sync::Arc;

use styrmin_ingress_rules::ClassFields;

use super::outcomes::Outcomes;
use super::read_back::{self, Checked};
use crate::go_readers::{self, Anchors, Doubt};
use crate::ingress_edit::{self, Edit};
use crate::yaml_tree::{self, Node, NodeValue};

/// Whether the edits of the Ingress whose outcome was pushed last are proven where they
/// are ([`read_back`]) and read back as `desired`.
pub(super) fn proven_as_desired(
    text: &str,
    ingress: &Node<'_>,
    outcomes: &Outcomes,
    edits: &[Edit],
    desired: &ClassFields,
) -> bool {
    outcomes
        .last()
        .is_some_and(|outcome| read_back::proven_as(text, ingress, outcome.before, desired, edits))
}

/// Reads the edited document back: where every edit of every Ingress was proven in place
/// (`local`, which also asks that the sorted edits stay apart), that proof stands; otherwise
/// the whole edited document is parsed again ([`verify`]).
#[inline]
pub(super) fn check_edits(
    text: &str,
    root: &Node<'_>,
    ingresses: &[&Node<'_>],
    sorted: &[Edit],
    desired: &[Arc<ClassFields>],
    local: bool,
) -> Result<Checked, String> {
    if local && read_back::apart(sorted) {
        return Ok(Checked::Locally);
    }
    // The edited text lives only as long as its check: what is kept is the edits.
    let new_text = super::splice::spliced_text(text, sorted);
    verify(root, ingresses, &new_text, desired)?;
    Ok(Checked::Fully)
}

/// The self-check that keeps a wrong splice from ever reaching the cluster: the edited
/// document parses, every Ingress in it reads back as the rules said, a second pass
/// would change nothing (R8), and with the two class fields set aside the document is
/// the same tree as before, every scalar with the same value and quoting (R7).
pub(super) fn verify(
    before: &Node<'_>,
    ingresses_before: &[&Node<'_>],
    after_text: &str,
    desired: &[Arc<ClassFields>],
) -> Result<(), String> {
    let after = yaml_tree::parse_document(after_text)
        .map_err(|e| format!("the edited document does not parse ({e})"))?
        .ok_or("the edited document is empty")?;
    let mut anchors_after = Anchors::new(&after);
    let ty = go_readers::go_type(&after, "the top level", &mut anchors_after);
    let ingresses = ingress_nodes(&after, &ty, &mut anchors_after).map_err(|e| e.to_string())?;
    if ingresses.len() != desired.len() {
        return Err(format!(
            "{} Ingresses before the edit, {} after",
            desired.len(),
            ingresses.len()
        ));
    }
    for (ingress, want) in ingresses.iter().zip(desired) {
        let got = ingress_edit::read_class_fields(ingress).map_err(|e| e.to_string())?;
        if got != **want {
            return Err(format!(
                "class fields read back as {got:?}, expected {want:?}"
            ));
        }
        let again = ingress_edit::plan(after_text, ingress, want).map_err(|e| e.to_string())?;
        if !again.is_empty() {
            return Err("a second pass would edit again (not idempotent)".to_owned());
        }
    }
    let mut anchors_before = Anchors::new(before);
    let canonical_before = canonical(before, &mut &ingresses_before[..], &mut anchors_before);
    if canonical_before != canonical(&after, &mut &ingresses[..], &mut anchors_after) {
        return Err("something besides the class fields changed".to_owned());
    }
    Ok(())
}

/// A digest of an item's canonical form, with its class fields set aside when it is an
/// Ingress.
pub(super) fn digest(item: &Node<'_>, ingress: bool) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut anchors = Anchors::new(item);
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    let ingresses = [item];
    let mut strip: &[&Node<'_>] = if ingress { &ingresses } else { &[] };
    canonical(item, &mut strip, &mut anchors).hash(&mut hasher);
    hasher.finish()
}

/// The Ingress mappings of a document as Go reads it, in document order: the document
/// itself, or the Ingress items of a List (`ty` is the document's type). A doubt about an
/// item that may be an Ingress is an error.
pub(super) fn ingress_nodes<'n, 'a>(
    root: &'n Node<'a>,
    ty: &go_readers::GoType,
    anchors: &mut Anchors<'n, 'a>,
) -> Result<Vec<&'n Node<'a>>, Doubt> {
    let ours = ty.may_be_ingress() || ty.may_be_list();
    if let Some(doubt) = ty.doubt.clone().filter(|_| ours) {
        return Err(doubt);
    }
    if ty.is_ingress() {
        return Ok(vec![root]);
    }
    if !ty.is_list() {
        return Ok(Vec::new());
    }
    let (items, doubt) = go_readers::list_items(root, "the List", anchors);
    if let Some(doubt) = doubt {
        return Err(doubt);
    }
    let mut out = Vec::new();
    for (index, item) in items.unwrap_or_default().iter().enumerate() {
        let at = format!("items[{index}]");
        let resolved = anchors.resolve(item);
        let ty = go_readers::go_type(resolved, &at, anchors);
        if !ty.may_be_ingress() {
            continue;
        }
        if let Some(doubt) = ty.doubt {
            return Err(doubt);
        }
        if matches!(item.value, NodeValue::Alias(_)) {
            return Err(Doubt::AliasedIngress { at });
        }
        out.push(item);
    }
    Ok(out)
}

/// A comparable form of a node: scalars by value and whether they are plain (which
/// decides their type for Go's YAML readers); Ingresses may lose their class fields and
/// the containers those leave empty (see [`canonical`]).
#[derive(Debug, PartialEq, Hash)]
enum Canonical<'n> {
    Scalar {
        text: &'n str,
        plain: bool,
        tagged: bool,
    },
    Mapping(Vec<(Canonical<'n>, Canonical<'n>)>),
    Sequence(Vec<Canonical<'n>>),
    Null,
    Alias,
}

/// The canonical form of `node`. `ingresses` are the Ingress nodes of the tree not yet
/// met, in document order (as [`ingress_nodes`] gives them): each loses its class fields,
/// so that a document is classified once, not again for each comparison.
fn canonical<'n, 'a>(
    node: &'n Node<'a>,
    ingresses: &mut &[&'n Node<'a>],
    anchors: &mut Anchors<'n, 'a>,
) -> Canonical<'n> {
    let is_ingress = ingresses.first().is_some_and(|i| std::ptr::eq(*i, node));
    if is_ingress {
        *ingresses = &ingresses[1..];
    }
    let mut out = match &node.value {
        _ if node.is_null() => Canonical::Null,
        NodeValue::Scalar { text, style, tag } => Canonical::Scalar {
            text,
            plain: matches!(style, granit_parser::ScalarStyle::Plain),
            tagged: *tag != yaml_tree::ScalarTag::None,
        },
        NodeValue::Mapping { entries, .. } => Canonical::Mapping(
            entries
                .iter()
                .map(|(k, v)| {
                    // An alias key reads as the scalar it refers to (a class field's
                    // key may be one).
                    let k = match anchors.resolve(k) {
                        resolved @ Node {
                            value: NodeValue::Scalar { .. },
                            ..
                        } => resolved,
                        _ => k,
                    };
                    (
                        canonical(k, &mut &[][..], anchors),
                        canonical(v, ingresses, anchors),
                    )
                })
                .collect(),
        ),
        NodeValue::Sequence { items, .. } => Canonical::Sequence(
            items
                .iter()
                .map(|i| canonical(i, ingresses, anchors))
                .collect(),
        ),
        NodeValue::Alias(_) => Canonical::Alias,
    };
    if is_ingress {
        strip_class_fields(&mut out);
    }
    out
}

fn strip_class_fields(ingress: &mut Canonical) {
    remove_path(ingress, &ingress_edit::CLASS_NAME_PATH);
    remove_path(ingress, &ingress_edit::CLASS_ANNOTATION_PATH);
}

/// Removes `path`, then every container on it that is left empty or null.
fn remove_path(node: &mut Canonical, path: &[&str]) {
    let Canonical::Mapping(entries) = node else {
        return;
    };
    let Some((key, rest)) = path.split_first() else {
        return;
    };
    let is_key = |k: &Canonical| matches!(k, Canonical::Scalar { text, .. } if text == key);
    if let Some(position) = entries.iter().position(|(k, _)| is_key(k)) {
        if !rest.is_empty() {
            remove_path(&mut entries[position].1, rest);
        }
        let emptied = match &entries[position].1 {
            Canonical::Mapping(e) => e.is_empty(),
            Canonical::Null => true,
            _ => false,
        };
        if rest.is_empty() || emptied {
            entries.remove(position);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verify_catches_changes_outside_the_class_fields() {
        let text = "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: a\n  labels: {x: \"off\"}\nspec: {rules: []}\n";
        let root = yaml_tree::parse_document(text).unwrap().unwrap();
        let want = [Arc::new(ClassFields::default())];
        assert!(verify(&root, &[&root], text, &want).is_ok());
        let changed = text.replace("\"off\"", "off");
        assert_eq!(
            verify(&root, &[&root], &changed, &want).unwrap_err(),
            "something besides the class fields changed"
        );
        let with_class = text.replace("spec: {", "spec: {ingressClassName: a, ");
        assert!(
            verify(&root, &[&root], &with_class, &want)
                .unwrap_err()
                .contains("read back")
        );
    }
}
