//! `styrmin-postrender check`: a readable diff of what the post-renderer would change.

use similar::TextDiff;

use crate::streaming::StreamRendered;

/// A unified diff per changed document; empty when every Ingress conforms.
pub fn diff(stream: &StreamRendered) -> String {
    let mut out = String::new();
    // Both lists are in stream order, and every changed document has an Ingress.
    let mut outcomes = stream.rendered.ingresses.iter().peekable();
    for changed in &stream.rendered.changed {
        while outcomes
            .next_if(|o| o.document.index < changed.document.index)
            .is_some()
        {}
        let name = outcomes.peek().map(|o| &o.document);
        let before = stream.document_text(&changed.document).unwrap_or_default();
        let after = changed.text(before);
        let header = name.map_or_else(
            || format!("document {}", changed.document.index),
            ToString::to_string,
        );
        let diff = TextDiff::from_lines(before, after.as_str());
        out.push_str(
            &diff
                .unified_diff()
                .context_radius(3)
                .header(
                    &format!("{header} (rendered)"),
                    &format!("{header} (styrmin)"),
                )
                .to_string(),
        );
    }
    out
}
