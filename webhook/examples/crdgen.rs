//! Writes the CRDs of `styrmin_webhook::crd` as YAML files into a directory (default
//! `charts/styrmin-webhook/files/crds`, where the chart and, through it, the kustomize base
//! take them from), or prints them with `--stdout`.
//!
//! `cargo run -p styrmin-webhook --example crdgen -- charts/styrmin-webhook/files/crds`

use std::path::PathBuf;

use anyhow::Context as _;
use styrmin_webhook::crd::{all_crds, crd_yaml};

/// Where the CRDs are committed (the chart's `files/crds`, rendered into the kustomize base).
const CRD_DIR: &str = "charts/styrmin-webhook/files/crds";

fn main() -> anyhow::Result<()> {
    let arg = std::env::args().nth(1);
    for (file, crd) in all_crds() {
        let yaml = crd_yaml(&crd).with_context(|| format!("serialising {file}"))?;
        match arg.as_deref() {
            Some("--stdout") => print!("---\n{yaml}"),
            dir => {
                let dir = PathBuf::from(dir.unwrap_or(CRD_DIR));
                std::fs::create_dir_all(&dir)
                    .with_context(|| format!("creating {}", dir.display()))?;
                let path = dir.join(file);
                std::fs::write(&path, yaml)
                    .with_context(|| format!("writing {}", path.display()))?;
                eprintln!("crdgen: wrote {}", path.display());
            }
        }
    }
    Ok(())
}
