//! Shared harness for the end-to-end tests in `tests/tests/`: where the release binaries,
//! the installed tools (`make tools`) and the test data are.

use std::path::{Path, PathBuf};

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}

/// `tests/data/<rel>`.
pub fn data(rel: &str) -> PathBuf {
    workspace_root().join("tests").join("data").join(rel)
}

/// A binary built by `cargo build --release` (`make build` runs before the tests).
pub fn release_binary(name: &str) -> PathBuf {
    let path = workspace_root().join("target").join("release").join(name);
    assert!(path.exists(), "{} is missing: run `make build` (or `cargo build --release`) first", path.display());
    path
}

/// A tool installed by `make tools` under `.tools/bin` (helm3, helm4, kubectl).
pub fn tool(name: &str) -> PathBuf {
    let path = workspace_root().join(".tools").join("bin").join(name);
    assert!(path.exists(), "{} is missing: run `make tools` first", path.display());
    path
}
