//! Where the webhook's test data is: `webhook/tests/data/` (real AdmissionReviews in
//! `admission/`, recorded API server responses in `apiserver/`).

use std::path::{Path, PathBuf};

/// `webhook/tests/data/<rel>`.
pub fn webhook_data(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(rel)
}
