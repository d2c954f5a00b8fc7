//! The real rendered streams of `postrender/tests/data/rendered/` (Helm 3 and Helm 4 output,
//! and what each writes to a post-renderer), and what counts as an Ingress in them.

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
