//! The project's own checks that no ready-made tool does (`cargo run -p xtask -- help`).
//!
//! `function-lengths`: the longest functions of every crate's `src/` and `tests/`, none over
//! 120 lines.
//!
//! `module-cycles`: no module of any crate of the workspace may name, directly or through
//! others, a module that names it back. A ready-made tool (cargo-modules) was tried first:
//! its `dependencies --acyclic` counts a type and its own methods as a cycle, and it takes
//! minutes to build.

pub mod cycles;
pub mod lengths;
pub mod modules;

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context as _;
use serde_json::Value;

use crate::modules::ModuleGraph;

/// A crate of the workspace: its package, and the root file of its library or a binary.
#[derive(Debug)]
pub struct CrateRoot {
    pub package: String,
    pub target: String,
    pub root: PathBuf,
}

/// The libraries and binaries of every package of the workspace (`cargo metadata`).
pub fn workspace_crates(manifest: Option<&Path>) -> anyhow::Result<Vec<CrateRoot>> {
    let metadata = metadata(manifest)?;
    let mut crates = Vec::new();
    for package in metadata["packages"].as_array().into_iter().flatten() {
        for target in package["targets"].as_array().into_iter().flatten() {
            let kinds = target["kind"].as_array().into_iter().flatten();
            if !kinds
                .filter_map(Value::as_str)
                .any(|k| matches!(k, "lib" | "bin" | "proc-macro"))
            {
                continue;
            }
            crates.push(CrateRoot {
                package: package["name"].as_str().unwrap_or_default().to_owned(),
                target: target["name"].as_str().unwrap_or_default().to_owned(),
                root: PathBuf::from(target["src_path"].as_str().unwrap_or_default()),
            });
        }
    }
    Ok(crates)
}

/// `cargo metadata` of the workspace, without its dependencies.
fn metadata(manifest: Option<&Path>) -> anyhow::Result<Value> {
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    command.args(["metadata", "--format-version", "1", "--no-deps"]);
    if let Some(manifest) = manifest {
        command.arg("--manifest-path").arg(manifest);
    }
    let output = command.output().context("cannot run cargo metadata")?;
    anyhow::ensure!(
        output.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).context("cargo metadata")
}

/// Each package of the workspace with the `src/` folder its targets' roots are in, once.
pub fn source_dirs(manifest: Option<&Path>) -> anyhow::Result<Vec<(String, PathBuf)>> {
    let mut dirs: Vec<(String, PathBuf)> = Vec::new();
    for krate in workspace_crates(manifest)? {
        let Some(src) = krate
            .root
            .ancestors()
            .find(|dir| dir.file_name().is_some_and(|name| name == "src"))
        else {
            continue;
        };
        if !dirs.iter().any(|(_, dir)| dir == src) {
            dirs.push((krate.package, src.to_path_buf()));
        }
    }
    Ok(dirs)
}

/// Where the functions `function-lengths` measures are: each package's `src/` folder (its
/// `#[cfg(test)]` modules and `tests.rs` files with it) and, when the package has one, its
/// `tests/` folder (integration tests and their shared helpers, subfolders included). Each
/// with a label: the package's name for `src/`, the name and `tests/` for the tests.
pub fn code_dirs(manifest: Option<&Path>) -> anyhow::Result<Vec<(String, PathBuf)>> {
    let mut dirs = source_dirs(manifest)?;
    let metadata = metadata(manifest)?;
    for package in metadata["packages"].as_array().into_iter().flatten() {
        let name = package["name"].as_str().unwrap_or_default();
        let Some(root) = package["manifest_path"]
            .as_str()
            .and_then(|path| Path::new(path).parent())
        else {
            continue;
        };
        let tests = root.join("tests");
        if tests.is_dir() {
            dirs.push((format!("{name} tests/"), tests));
        }
    }
    Ok(dirs)
}

/// The cycles of one crate, as text; empty when there is none.
pub fn report_cycles(krate: &CrateRoot, base: &Path) -> anyhow::Result<(usize, String)> {
    let graph = ModuleGraph::read(&krate.root)
        .with_context(|| format!("package {} ({})", krate.package, krate.target))?;
    let mut text = String::new();
    for cycle in cycles::cycles(&graph) {
        text.push_str(&format!(
            "module cycle in {} ({}):\n",
            krate.package, krate.target
        ));
        for (i, from) in cycle.iter().enumerate() {
            let to = &cycle[(i + 1) % cycle.len()];
            let used = &graph.edges[from][to];
            let file = used.file.strip_prefix(base).unwrap_or(&used.file);
            text.push_str(&format!(
                "  {} -> {}   ({} names {})\n",
                from.join("::"),
                to.join("::"),
                file.display(),
                used.written
            ));
        }
    }
    Ok((graph.modules.len(), text))
}
