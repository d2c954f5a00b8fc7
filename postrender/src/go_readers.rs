//! What a document is to the Go programs that consume the post-renderer's output: Helm 3
//! and kubectl read YAML with go-yaml v2 (`sigs.k8s.io/yaml`), Helm 4, kustomize and Flux
//! with go-yaml v3 (kyaml). Both resolve aliases and `!!str`/`!!binary` tags, both treat
//! NEL, LS and PS as line breaks, and they differ on duplicate keys (v2 keeps the last, v3
//! refuses the document) and on merge keys (v2 lets a later `<<` override an explicit key,
//! v3 never does).
//!
//! The type of a document (its `apiVersion` and `kind`, and for a List each item's) is read
//! here as Go reads it. Where the two readers could disagree, or the reading rests on a YAML
//! form the editor cannot follow, the reading carries a [`Doubt`]; a document with a doubt
//! that might be an Ingress is refused rather than guessed at (docs/postrender-yaml.md).

use std::collections::HashMap;

use base64::Engine as _;
use styrmin_ingress_rules::{is_ingress, is_ingress_container_list};

use crate::yaml_tree::{Node, NodeValue, ScalarTag};

/// Why the reading of a document's type is not certain.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Doubt {
    #[error(
        "`{key}` appears more than once at {at}: Helm 3 and kubectl keep the last, Helm 4 and kustomize refuse the document"
    )]
    DuplicateKey { key: &'static str, at: String },
    #[error(
        "`{key}` at {at} comes from a YAML merge key (`<<`), which Helm 3 and Helm 4 apply in different orders; write the key out"
    )]
    MergeKey { key: &'static str, at: String },
    #[error("`{key}` at {at} has the tag {tag}, which Go's YAML readers may convert or refuse")]
    Tag {
        key: &'static str,
        at: String,
        tag: String,
    },
    #[error("{at} is a YAML alias of an Ingress; styrmin-postrender does not edit shared nodes")]
    AliasedIngress { at: String },
}

/// A document's type as Go reads it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GoType {
    pub api_version: Option<String>,
    pub kind: Option<String>,
    /// Other types Go's readers might see, when there is a doubt.
    pub alternatives: Vec<(Option<String>, Option<String>)>,
    pub doubt: Option<Doubt>,
}

impl GoType {
    /// Every type a Go reader might see: the reading, and its alternatives.
    fn candidates(&self) -> impl Iterator<Item = (Option<&str>, Option<&str>)> {
        std::iter::once((self.api_version.as_deref(), self.kind.as_deref())).chain(
            self.alternatives
                .iter()
                .map(|(a, k)| (a.as_deref(), k.as_deref())),
        )
    }

    /// Whether any reading is an Ingress.
    pub fn may_be_ingress(&self) -> bool {
        self.candidates()
            .any(|c| matches!(c, (Some(a), Some(k)) if is_ingress(a, k)))
    }

    /// Whether any reading is a List that may hold Ingresses.
    pub fn may_be_list(&self) -> bool {
        self.candidates()
            .any(|c| matches!(c, (Some(a), Some(k)) if is_ingress_container_list(a, k)))
    }

    /// Certainly an Ingress (no doubt).
    pub fn is_ingress(&self) -> bool {
        self.doubt.is_none() && self.may_be_ingress()
    }

    pub fn is_list(&self) -> bool {
        self.doubt.is_none() && self.may_be_list()
    }
}

/// Resolves aliases against the anchors of one document, built only when an alias is met.
#[derive(Debug)]
pub struct Anchors<'n, 'a> {
    root: &'n Node<'a>,
    table: Option<HashMap<usize, &'n Node<'a>>>,
}

impl<'n, 'a> Anchors<'n, 'a> {
    pub fn new(root: &'n Node<'a>) -> Self {
        Anchors { root, table: None }
    }

    /// The node an alias stands for (the node itself when it is not an alias).
    pub fn resolve(&mut self, node: &'n Node<'a>) -> &'n Node<'a> {
        match node.value {
            NodeValue::Alias(id) => {
                let root = self.root;
                let table = self
                    .table
                    .get_or_insert_with(|| crate::yaml_tree::anchors(root));
                table.get(&id).copied().unwrap_or(node)
            }
            _ => node,
        }
    }
}

/// The string Go reads from a scalar (`None` for anything that is not a string to Go,
/// or a `!!binary` value that is not base64 of UTF-8 text), and the tag that makes it
/// doubtful (only a tag other than `!!str`, `!!binary` and a local one).
fn go_string(node: &Node<'_>) -> (Option<String>, Option<String>) {
    match &node.value {
        NodeValue::Scalar { text, tag, .. } => match tag {
            ScalarTag::None | ScalarTag::Str | ScalarTag::Local(_) => {
                (Some(text.to_string()), None)
            }
            ScalarTag::Binary => {
                let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
                let decoded = base64::engine::general_purpose::STANDARD
                    .decode(compact)
                    .ok()
                    .and_then(|b| String::from_utf8(b).ok());
                (decoded, None)
            }
            ScalarTag::Other(t) => (Some(text.to_string()), Some(t.clone())),
        },
        _ => (None, None),
    }
}

/// Whether Go reads `node` as the string `key`: [`go_string`] without building the string
/// for the usual untagged, `!!str` or local-tagged scalar.
fn go_key_is(node: &Node<'_>, key: &str) -> bool {
    match &node.value {
        NodeValue::Scalar {
            text,
            tag: ScalarTag::None | ScalarTag::Str | ScalarTag::Local(_),
            ..
        } => text == key,
        _ => go_string(node).0.as_deref() == Some(key),
    }
}

/// Whether a key is YAML's merge key: a plain `<<`, tagged or not (`!!merge <<`); a quoted
/// `"<<"` is an ordinary key.
fn is_merge_key(key: &Node<'_>) -> bool {
    matches!(&key.value, NodeValue::Scalar { text, style: granit_parser::ScalarStyle::Plain, .. } if text == "<<")
}

/// The values a mapping holds under `key`, as Go reads it.
#[derive(Debug)]
pub struct Lookup<'n, 'a> {
    /// Every value the mapping gives the key, in document order (aliases resolved): an
    /// explicit entry's value, or the value a merge key (`<<`) brings in (of a merge
    /// key's several sources, the first that has the key, as both readers take it).
    pub values: Vec<(Source, &'n Node<'a>)>,
}

/// Where a value of a [`Lookup`] comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Explicit,
    Merged,
}

impl<'n, 'a> Lookup<'n, 'a> {
    fn explicit(&self) -> impl Iterator<Item = &'n Node<'a>> + '_ {
        self.values
            .iter()
            .filter(|(s, _)| *s == Source::Explicit)
            .map(|(_, n)| *n)
    }

    /// Why the two readers might not take the same value: a key written twice (v2 keeps
    /// the last, v3 refuses the document), or merge keys that give v2 and v3 different
    /// values. A merge key both readers resolve alike is no doubt.
    pub fn doubt(&self, key: &'static str, at: &str) -> Option<Doubt> {
        if self.explicit().count() > 1 {
            return Some(Doubt::DuplicateKey {
                key,
                at: at.to_owned(),
            });
        }
        let same = match (self.v2(), self.v3()) {
            (Some(a), Some(b)) => {
                std::ptr::eq(a, b)
                    || matches!((go_string(a), go_string(b)), ((Some(x), None), (Some(y), None)) if x == y)
            }
            (None, None) => true,
            _ => false,
        };
        (!same).then(|| Doubt::MergeKey {
            key,
            at: at.to_owned(),
        })
    }

    /// go-yaml v2's reading: the last value in document order (a merge key sets the keys
    /// it brings in, an explicit key after it overrides them, a merge key after an
    /// explicit key overrides that).
    pub fn v2(&self) -> Option<&'n Node<'a>> {
        self.values.last().map(|(_, n)| *n)
    }

    /// go-yaml v3's reading: the explicit entry, else the first merged value.
    pub fn v3(&self) -> Option<&'n Node<'a>> {
        self.explicit()
            .next()
            .or_else(|| self.values.first().map(|(_, n)| *n))
    }

    /// Every value some reader might take.
    pub fn all(&self) -> impl Iterator<Item = &'n Node<'a>> + '_ {
        self.values.iter().map(|(_, n)| *n)
    }
}

/// Looks `key` up in `mapping` (an alias already resolved), following merge keys.
pub fn lookup<'n, 'a>(
    mapping: &'n Node<'a>,
    key: &str,
    anchors: &mut Anchors<'n, 'a>,
) -> Lookup<'n, 'a> {
    let mut found = Lookup { values: Vec::new() };
    let Some(entries) = mapping.entries() else {
        return found;
    };
    for (k, v) in entries {
        let k = anchors.resolve(k);
        if is_merge_key(k) {
            let merged = anchors.resolve(v);
            let sources: Vec<&Node<'_>> = match &merged.value {
                NodeValue::Sequence { items, .. } => {
                    items.iter().map(|item| anchors.resolve(item)).collect()
                }
                _ => vec![merged],
            };
            // Merges nest: a merged mapping may merge others. Of several sources, the
            // first that has the key gives it (to v2 and v3 alike).
            let value = sources.into_iter().find_map(|source| {
                let inner = lookup(source, key, anchors);
                inner.v3()
            });
            if let Some(value) = value {
                found.values.push((Source::Merged, value));
            }
            continue;
        }
        if go_key_is(k, key) {
            found.values.push((Source::Explicit, anchors.resolve(v)));
        }
    }
    found
}

/// Reads the type of `mapping` as Go does; `at` names it in messages.
pub fn go_type<'n, 'a>(mapping: &'n Node<'a>, at: &str, anchors: &mut Anchors<'n, 'a>) -> GoType {
    let mut out = GoType::default();
    if mapping.entries().is_none() {
        return out;
    }
    let api = lookup(mapping, "apiVersion", anchors);
    let kind = lookup(mapping, "kind", anchors);
    let read = |node: Option<&Node<'_>>| node.and_then(|n| go_string(n).0);
    out.api_version = read(api.v2());
    out.kind = read(kind.v2());
    out.doubt = api
        .doubt("apiVersion", at)
        .or_else(|| kind.doubt("kind", at));
    for (key, lookup) in [("apiVersion", &api), ("kind", &kind)] {
        for node in lookup.all() {
            if let Some(tag) = go_string(node).1 {
                out.doubt.get_or_insert(Doubt::Tag {
                    key,
                    at: at.to_owned(),
                    tag,
                });
            }
        }
    }
    // Duplicate keys alone: go-yaml v2 reads the last, v3 refuses the document, so the
    // reading stands. Merge keys the readers take differently, or a tag, may make a reader
    // see any of the values.
    if matches!(out.doubt, Some(Doubt::MergeKey { .. } | Doubt::Tag { .. })) {
        let apis: Vec<Option<String>> = api.all().map(|n| go_string(n).0).chain([None]).collect();
        let kinds: Vec<Option<String>> = kind.all().map(|n| go_string(n).0).chain([None]).collect();
        for a in &apis {
            for k in &kinds {
                out.alternatives.push((a.clone(), k.clone()));
            }
        }
    }
    out
}

/// The items of a List document as Go reads them (`None` when `items` is not a sequence),
/// and the doubt that makes the reading uncertain when some candidate sequence holds an
/// Ingress.
pub fn list_items<'n, 'a>(
    list: &'n Node<'a>,
    at: &str,
    anchors: &mut Anchors<'n, 'a>,
) -> (Option<&'n [Node<'a>]>, Option<Doubt>) {
    let items = lookup(list, "items", anchors);
    let doubt = items.doubt("items", at);
    let sequence = |node: &'n Node<'a>| match &node.value {
        NodeValue::Sequence { items, .. } => Some(items.as_slice()),
        _ => None,
    };
    if doubt.is_some() {
        // Any of the candidate sequences holding an Ingress makes the doubt matter.
        let holds_ingress = items.all().filter_map(sequence).flatten().any(|item| {
            let item = anchors.resolve(item);
            go_type(item, at, anchors).may_be_ingress()
        });
        return (None, holds_ingress.then_some(doubt).flatten());
    }
    (items.v2().and_then(sequence), None)
}
