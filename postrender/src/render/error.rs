//! Why a document is refused, named by its document, line and Ingress.

use styrmin_ingress_rules::{NoClassWarning, RuleError};

use super::outcomes::{DocumentName, IngressName};
use crate::go_readers::Doubt;
use crate::ingress_edit::EditError;
use crate::yaml_tree::SyntaxError;

#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error("the input is not UTF-8 text: {document}: invalid byte at offset {offset}")]
    NotUtf8 {
        document: DocumentName,
        offset: usize,
    },
    // The cause is part of each message (one statement, no repeated chain): the fields
    // are not named `source`, which would make them a second link of the chain.
    #[error("{document}: not valid YAML: {error}")]
    Syntax {
        document: DocumentName,
        error: SyntaxError,
    },
    #[error("{document}: {ingress}: {error}")]
    Edit {
        document: DocumentName,
        ingress: IngressName,
        error: EditError,
    },
    #[error("{document}: {ingress}: {error}")]
    Rule {
        document: DocumentName,
        ingress: IngressName,
        error: RuleError,
    },
    /// Go's readers might read the document as an Ingress (or a List of them), but how
    /// they read it is not certain.
    #[error("{document}: {doubt}")]
    Doubt {
        document: DocumentName,
        doubt: Doubt,
    },
    #[error(
        "{document}: line {line}: a tab in the indentation, which Helm and kubectl refuse (YAML indents with spaces)"
    )]
    TabIndentation { document: DocumentName, line: usize },
    #[error(
        "{document}: line {line}: {name}, which Helm and kubectl read as a line break and YAML 1.2 does not; write a line break or an escape (\\{escape}) instead"
    )]
    UnicodeLineBreak {
        document: DocumentName,
        line: usize,
        name: &'static str,
        escape: char,
    },
    /// The self-check after an edit failed: a bug, reported instead of writing a wrong object.
    #[error(
        "{document}: {ingress}: internal check failed, nothing was written: {what}. Please report this with the document."
    )]
    Verify {
        document: DocumentName,
        ingress: IngressName,
        what: String,
    },
    #[error("{document}: R5 (--strict): {ingress}: {message}", message = NoClassWarning::MESSAGE)]
    StrictNoClass {
        document: DocumentName,
        ingress: IngressName,
    },
}

impl RenderError {
    /// The same error in a larger stream with `documents` documents, `lines` lines and
    /// `bytes` bytes before the part it was found in.
    pub fn renumber(&mut self, documents: usize, lines: usize, bytes: usize) {
        match self {
            RenderError::NotUtf8 { document, offset } => {
                document.renumber(documents, lines);
                *offset += bytes;
            }
            RenderError::Syntax { document, error } => {
                document.renumber(documents, lines);
                error.line += lines;
            }
            RenderError::TabIndentation { document, line }
            | RenderError::UnicodeLineBreak { document, line, .. } => {
                document.renumber(documents, lines);
                *line += lines;
            }
            RenderError::Doubt { document, .. } => document.renumber(documents, lines),
            RenderError::Edit { document, .. }
            | RenderError::Rule { document, .. }
            | RenderError::Verify { document, .. }
            | RenderError::StrictNoClass { document, .. } => document.renumber(documents, lines),
        }
    }
}
