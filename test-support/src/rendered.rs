//! The real rendered streams of `postrender/tests/data/rendered/` (Helm 3 and Helm 4 output,
//! and what each writes to a post-renderer), what counts as an Ingress in them, and a small
//! made-up stream of every kind of document boundary ([`mixed_stream`]).

use std::path::{Path, PathBuf};

use serde_json::Value;

/// `postrender/tests/data/rendered/`, from this crate or from a sibling crate.
pub fn rendered_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../postrender/tests/data/rendered")
}

/// The real rendered streams (Helm 3 and 4 output, and what each writes to a
/// post-renderer), sorted by name.
pub fn rendered_streams() -> Vec<(String, PathBuf)> {
    let mut files: Vec<_> = std::fs::read_dir(rendered_dir())
        .expect("postrender/tests/data/rendered")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .map(|p| {
            (
                p.file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned(),
                p,
            )
        })
        .collect();
    files.sort();
    assert!(
        files.len() >= 20,
        "expected the rendered fixtures, found {}",
        files.len()
    );
    files
}

/// An Ingress the rules apply to (R6), as JSON.
pub fn is_ingress(object: &Value) -> bool {
    object["kind"] == "Ingress"
        && styrmin_ingress_rules::INGRESS_API_VERSIONS
            .contains(&object["apiVersion"].as_str().unwrap_or_default())
}

/// A small Ingress with no class fields.
pub const SMALL_INGRESS: &str =
    "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: web\nspec:\n  rules: []\n";

/// A made-up stream of `n` documents that takes turns: an Ingress (`web0`, `web4`, …), a
/// ConfigMap whose block value holds `---x`, comments around an `...` end, and a `---`
/// marker with a comment on its line; the Ingresses and ConfigMaps have a `# Source:` line.
pub fn mixed_stream(n: usize) -> String {
    (0..n)
        .map(|i| match i % 4 {
            0 => format!("---\n# Source: c/templates/ing{i}.yaml\n{}", SMALL_INGRESS.replace("web", &format!("web{i}"))),
            1 => format!("---\n# Source: c/templates/cm{i}.yaml\napiVersion: v1\nkind: ConfigMap\ndata:\n  a: |\n    ---x\n    text\n"),
            2 => "# a comment between documents\n...\n# another\n".to_owned(),
            _ => format!("--- # d{i}\nkind: Service\n"),
        })
        .collect()
}
