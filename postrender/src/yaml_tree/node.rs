//! The tree's node types, shared by the general parser's builder and the common-layout
//! reader.

use std::borrow::Cow;
use std::ops::Range;

use granit_parser::ScalarStyle;

/// How deeply collections may nest in one document, its root collection counted as 1:
/// what Go's readers accept, and no more. go-yaml (v2 and v3, so Helm 3, Helm 4, kubectl,
/// kustomize and Flux alike) refuses more than 10,000 flow levels or block indentations,
/// and every one of them turns the document into JSON, whose decoder refuses values nested
/// deeper than 10,000 (measured: docs/postrender-yaml.md, "How deep a document may nest").
/// Every walk over a tree (the readers', the rules', the read-back's, dropping it) recurses
/// at most this deep, and every thread that renders has a stack sized for that
/// ([`crate::render::threads::RENDER_STACK_BYTES`]).
pub const MAX_NESTING: usize = 10_000;

/// One YAML node.
#[derive(Debug, Clone)]
pub struct Node<'a> {
    pub value: NodeValue<'a>,
    /// The node's own bytes. For a block collection the end is where the next token
    /// starts (it may be on a later line); for a block scalar the start is its first
    /// content byte, after the `|` or `>` indicator line.
    pub span: Range<usize>,
    /// Where the node starts including an explicit tag (`!!str x`).
    pub start_with_tag: usize,
    /// The parser's id of the anchor (`&a`) the node defines; 0 for none.
    pub anchor: usize,
    /// The node defines an anchor that an alias of the document refers to: editing it
    /// would change every place that shares it. An anchor nothing refers to is not shared.
    pub anchored: bool,
    /// 1-based line and 0-based column of the node's start.
    pub line: usize,
    pub column: usize,
}

#[derive(Debug, Clone)]
pub enum NodeValue<'a> {
    Scalar {
        text: Cow<'a, str>,
        style: ScalarStyle,
        tag: ScalarTag,
    },
    Mapping {
        flow: bool,
        entries: Vec<(Node<'a>, Node<'a>)>,
    },
    Sequence {
        flow: bool,
        items: Vec<Node<'a>>,
    },
    /// `*name`: the node whose anchor has this id.
    Alias(usize),
}

/// The explicit tag of a scalar, as far as it decides how Go's readers take its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScalarTag {
    None,
    /// `!!str`: a string, as without a tag for a word.
    Str,
    /// `!!binary`: base64 that Go's readers decode into the string they use.
    Binary,
    /// A local tag (`!custom`): Go's readers (v2 and v3) ignore it and read the scalar as
    /// a string, whatever its text (`!custom 123` is the string "123").
    Local(String),
    /// Any other tag (`!!int`, `tag:…`): Go's readers may refuse or convert the value.
    Other(String),
}

impl ScalarTag {
    pub(super) fn of(tag: Option<&granit_parser::Tag>) -> Self {
        let Some(tag) = tag else {
            return ScalarTag::None;
        };
        let full = format!("{}{}", tag.handle(), tag.suffix());
        match full.as_str() {
            "tag:yaml.org,2002:str" => ScalarTag::Str,
            "tag:yaml.org,2002:binary" => ScalarTag::Binary,
            _ if tag.original_handle() == "!" => ScalarTag::Local(full),
            _ => ScalarTag::Other(format!("{}{}", tag.original_handle(), tag.suffix())),
        }
    }
}

impl<'a> Node<'a> {
    /// The string value of a scalar, `None` for anything else.
    pub fn as_str(&self) -> Option<&str> {
        match &self.value {
            NodeValue::Scalar { text, .. } => Some(text),
            _ => None,
        }
    }

    /// A scalar that YAML reads as null: `~`, `null`, or nothing, unquoted.
    pub fn is_null(&self) -> bool {
        match &self.value {
            NodeValue::Scalar {
                text,
                style: ScalarStyle::Plain,
                ..
            } => {
                matches!(text.as_ref(), "" | "~" | "null" | "Null" | "NULL")
            }
            _ => false,
        }
    }

    /// The entries of a mapping.
    pub fn entries(&self) -> Option<&[(Node<'a>, Node<'a>)]> {
        match &self.value {
            NodeValue::Mapping { entries, .. } => Some(entries),
            _ => None,
        }
    }

    /// The entries of a block mapping (`None` for a flow mapping or anything else).
    pub fn block_entries(&self) -> Option<&[(Node<'a>, Node<'a>)]> {
        match &self.value {
            NodeValue::Mapping {
                flow: false,
                entries,
            } => Some(entries),
            _ => None,
        }
    }

    /// The value under `key` in a mapping, comparing scalar keys by their string value.
    pub fn get(&self, key: &str) -> Option<&Node<'a>> {
        self.entry(key).map(|(_, v)| v)
    }

    /// The key and value of `key` in a mapping.
    pub fn entry(&self, key: &str) -> Option<&(Node<'a>, Node<'a>)> {
        self.entries()?
            .iter()
            .find(|(k, _)| k.as_str() == Some(key))
    }

    /// A plain (unquoted) scalar.
    pub fn is_plain(&self) -> bool {
        matches!(
            self.value,
            NodeValue::Scalar {
                style: ScalarStyle::Plain,
                ..
            }
        )
    }

    pub fn is_flow(&self) -> bool {
        matches!(
            self.value,
            NodeValue::Mapping { flow: true, .. } | NodeValue::Sequence { flow: true, .. }
        )
    }

    pub fn is_block_scalar(&self) -> bool {
        matches!(
            self.value,
            NodeValue::Scalar {
                style: ScalarStyle::Literal | ScalarStyle::Folded,
                ..
            }
        )
    }
}

/// The top level of a List document in the plain form that lets its items be read one
/// at a time (a tree of a List of thousands of Ingresses would cost many times its size):
/// a mapping whose keys are untagged, unanchored scalars without a merge key, that names
/// `apiVersion` and `kind` once each with an untagged scalar and `items` once with a
/// sequence, in a document with no alias. Anything else is read whole.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PlainList {
    pub api_version: String,
    pub kind: String,
    pub items: usize,
}
