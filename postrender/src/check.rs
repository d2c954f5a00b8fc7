//! `styrmin-postrender check`: a readable diff of what the post-renderer would change.

use similar::TextDiff;

use crate::render::Rendered;

/// A unified diff per changed document; empty when every Ingress conforms.
pub fn diff(input: &str, rendered: &Rendered) -> String {
    let mut out = String::new();
    for changed in &rendered.changed {
        let before = &input[changed.document.range.clone()];
        let header = changed.name.to_string();
        let diff = TextDiff::from_lines(before, changed.text.as_str());
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
