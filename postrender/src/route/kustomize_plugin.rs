//! The kustomize exec plugin (`kubectl kustomize --enable-alpha-plugins`): the plugin's config
//! file (kind `StyrminPostRender`) is the whole configuration, stdin the resources as a YAML
//! stream, stdout the same stream filtered as the Helm stream is ([`super::helm::filter`]).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use styrmin_ingress_rules::Level;

use crate::krm;
use crate::render::RenderRules;

/// Runs the plugin with the config file `plugin_config`.
pub fn run(plugin_config: &Path, report: Option<&PathBuf>) -> anyhow::Result<ExitCode> {
    let text = std::fs::read_to_string(plugin_config)
        .with_context(|| format!("cannot read the plugin config {}", plugin_config.display()))?;
    let plugin = krm::read_plugin_config(&text)
        .with_context(|| format!("plugin config {}", plugin_config.display()))?;
    let default_cluster = Level::default();
    let rules = RenderRules {
        resolved: plugin.config.settings(&default_cluster).resolved,
        kubernetes: plugin.kubernetes,
        strict: plugin.strict,
    };
    // The plugin filters a stream, so warn works as for Helm.
    let mode = plugin.config.mode(&default_cluster);
    super::helm::filter(std::io::stdin().lock(), &rules, mode, report)
}
