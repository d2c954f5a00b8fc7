//! Why a `ResourceList` was not processed, and the item a message names.

use std::fmt;

/// Why a `ResourceList` was not processed. Every variant becomes one `results` entry.
#[derive(Debug, thiserror::Error)]
pub enum KrmError {
    #[error("the ResourceList is not UTF-8 text: invalid byte at offset {offset}")]
    NotUtf8 { offset: usize },
    #[error("line {line}: {why}")]
    Shape { line: usize, why: String },
    #[error("{field}: {message}")]
    FunctionConfig { field: String, message: String },
    #[error("{item}: {error}")]
    Render { item: ItemRef, error: String },
    #[error(
        "the function config and --config, --ingress-class, --dedicated-ingress, --last-deployed, --kube-version, --enforcement-mode or --strict (or their STYRMIN_ variables) were both given: the functionConfig is the whole configuration"
    )]
    TwoConfigs,
    #[error("{0}")]
    Config(#[from] crate::config::ConfigError),
    /// The function edits items in place; passing them unchanged with a report is the
    /// post-renderer's filter's (`styrmin-postrender --enforcement-mode warn`).
    #[error(
        "enforcement_mode warn (decided by {decided_by}) is not supported by the KRM function: it would edit the items; \
         run `styrmin-postrender check` on the rendered objects to see what would change"
    )]
    WarnUnsupported { decided_by: String },
}

impl KrmError {
    /// The same refusal, on line `line` (for a check made before its line was counted).
    pub(super) fn on_line(self, line: usize) -> Self {
        match self {
            KrmError::Shape { why, .. } => KrmError::Shape { line, why },
            other => other,
        }
    }

    /// The field a result names: a path in the `ResourceList`.
    pub(super) fn field(&self) -> Option<String> {
        match self {
            KrmError::FunctionConfig { field, .. } => Some(field.clone()),
            KrmError::Render { item, .. } => Some(format!("items[{}]", item.index)),
            _ => None,
        }
    }
}

/// An item, for messages: its index in `items` and its first line in the `ResourceList`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemRef {
    pub index: usize,
    pub line: usize,
}

impl fmt::Display for ItemRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "items[{}] (line {})", self.index, self.line)
    }
}

/// A refusal of the `ResourceList`'s shape, on line `line`.
pub(super) fn shape(line: usize, why: impl Into<String>) -> KrmError {
    KrmError::Shape {
        line,
        why: why.into(),
    }
}
