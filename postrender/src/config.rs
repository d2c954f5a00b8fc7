//! The post-renderer's configuration: the three levels of one deployment (docs/rules.md §1), and
//! optionally the ingress settings it was last deployed with (rule W5).

use std::path::{Path, PathBuf};

use serde::Deserialize;
use styrmin_ingress_rules::{
    AppliedSettings, DedicatedIngress, EnforcementMode, IngressTarget, Level, LevelName, Levels,
    ResolvedMode, Setting, resolve_mode, settings_for,
};

/// The config file: up to three sections, each with `ingress_class`, `dedicated_ingress`
/// and `enforcement_mode`. A missing section is a level that sets nothing.
///
/// An optional fourth section, `last_deployed:`, is the deployment's record of the settings
/// it was last deployed with (rule W5), in the same shape read like a cluster level
/// (`{dedicated_ingress: {}}`, `{ingress_class: nginx}`, `{ingress_class: ""}`). When it is
/// there it decides alone, whatever the three levels say.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StyrminConfig {
    #[serde(default)]
    pub cluster: Option<Level>,
    #[serde(default)]
    pub environment: Option<Level>,
    #[serde(default)]
    pub deployment: Option<Level>,
    #[serde(default)]
    pub last_deployed: Option<IngressTarget>,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {error}")]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("config {origin}: {key}: {message}")]
    Invalid {
        origin: String,
        key: String,
        message: String,
    },
}

impl StyrminConfig {
    /// Reads and checks a config file.
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Read {
            path: path.to_owned(),
            error,
        })?;
        Self::from_yaml(&text, &format!("file {}", path.display()))
    }

    /// Parses config YAML; `origin` names where it came from in errors. Errors name the
    /// key (`environment.dedicated_ingress`) as well as the line.
    pub fn from_yaml(text: &str, origin: &str) -> Result<Self, ConfigError> {
        // An empty file (or one with only comments) is a config that sets nothing.
        if text
            .lines()
            .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'))
        {
            return Ok(Self::default());
        }
        let mut key = String::new();
        let parsed = serde_saphyr::with_deserializer_from_str(text, |de| {
            serde_path_to_error::deserialize::<_, Option<StyrminConfig>>(de).map_err(|e| {
                key = e.path().to_string();
                e.into_inner()
            })
        });
        match parsed {
            Ok(config) => Ok(config.unwrap_or_default()),
            Err(e) => Err(ConfigError::Invalid {
                origin: match e.location() {
                    Some(at) => format!("{origin}, line {} column {}", at.line(), at.column()),
                    None => origin.to_owned(),
                },
                key: if key.is_empty() || key == "." {
                    "(top level)".to_owned()
                } else {
                    // A key may hold line breaks (`{ingres\r\rcluster: x}`): escaped, so the
                    // error stays one line.
                    key.escape_debug().to_string()
                },
                message: readable(&parser_message(&e)),
            }),
        }
    }

    /// Applies the command line's shortcuts, which act at the deployment level (the most
    /// specific): `--ingress-class` sets its `ingress_class`, `--dedicated-ingress` turns
    /// its `dedicated_ingress` on.
    pub fn with_deployment_overrides(
        mut self,
        ingress_class: Option<String>,
        dedicated_ingress: bool,
    ) -> Self {
        if ingress_class.is_none() && !dedicated_ingress {
            return self;
        }
        let deployment = self.deployment.get_or_insert_with(Level::default);
        if let Some(class) = ingress_class {
            deployment.ingress_class = Setting::Value(class);
        }
        if dedicated_ingress {
            deployment.dedicated_ingress = Setting::Value(DedicatedIngress::default());
        }
        self
    }

    /// `--enforcement-mode`: the deployment level's `enforcement_mode` (the most specific).
    pub fn with_enforcement_mode(mut self, mode: Option<EnforcementMode>) -> Self {
        if let Some(mode) = mode {
            self.deployment
                .get_or_insert_with(Level::default)
                .enforcement_mode = Setting::Value(mode);
        }
        self
    }

    /// `enforce` or `warn`: the most specific level that sets it; none does, `enforce`.
    pub fn mode(&self, default_cluster: &Level) -> ResolvedMode {
        resolve_mode(&self.levels(default_cluster))
    }

    /// `--last-deployed`: the record of the settings the deployment was last deployed with
    /// (replaces the file's `last_deployed:`).
    pub fn with_last_deployed(mut self, record: Option<IngressTarget>) -> Self {
        if record.is_some() {
            self.last_deployed = record;
        }
        self
    }

    /// Which settings apply (rule W5): the `last_deployed` record when there is one, else
    /// the three levels.
    pub fn settings(&self, default_cluster: &Level) -> AppliedSettings {
        settings_for(self.last_deployed.as_ref(), &self.levels(default_cluster))
    }

    /// The levels as the rules take them. A missing cluster section is a cluster config
    /// that mentions neither key: class `traefik`, no dedicated ingress.
    pub fn levels<'a>(&'a self, default_cluster: &'a Level) -> Levels<'a> {
        Levels {
            cluster: self.cluster.as_ref().unwrap_or(default_cluster),
            environment: self.environment.as_ref(),
            deployment: self.deployment.as_ref(),
        }
    }

    /// Each level with its name, most general first, for `explain`.
    pub fn named_levels(&self) -> [(LevelName, Option<&Level>); 3] {
        [
            (LevelName::Cluster, self.cluster.as_ref()),
            (LevelName::Environment, self.environment.as_ref()),
            (LevelName::Deployment, self.deployment.as_ref()),
        ]
    }
}

/// The parser's message as one readable statement: on one line, without its own position
/// (the origin says where), serde's `invalid type: X, expected Y` as `expected Y, found X`.
fn readable(message: &str) -> String {
    let line = one_line(message);
    let text = without_parser_position(&line);
    if let Some((found, expected)) = text
        .strip_prefix("invalid type: ")
        .and_then(|t| t.split_once(", expected "))
    {
        return format!("expected {expected}, found the {}", found.replace('`', ""));
    }
    text.to_owned()
}

/// The parser's message without its snippet and its ` at line L, column C` (the caller says
/// where, in its own words).
pub(crate) fn parser_message(error: &serde_saphyr::Error) -> String {
    let message = error.without_snippet().to_string();
    match error.location() {
        Some(at) => message.replace(
            &format!(" at line {}, column {}", at.line(), at.column()),
            "",
        ),
        None => message,
    }
}

/// A message on one line, its lines trimmed and joined by a space, blank ones dropped: Helm
/// shows only the first line of a failing post-renderer, and kustomize one line per result.
pub(crate) fn one_line(message: &str) -> String {
    message
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// A one-line parser message without the parser's own `error: ` and `line L column C: `
/// prefix, for a caller that says where in its own words.
pub(crate) fn without_parser_position(text: &str) -> &str {
    let text = text.strip_prefix("error: ").unwrap_or(text);
    match text
        .strip_prefix("line ")
        .and_then(|rest| rest.split_once(": "))
    {
        Some((_, after)) => after,
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use styrmin_ingress_rules::{IngressTarget, Origin, ResolvedIngress, resolve};

    use super::*;

    fn resolved(yaml: &str) -> ResolvedIngress {
        let config = StyrminConfig::from_yaml(yaml, "test").unwrap();
        let default = Level::default();
        resolve(&config.levels(&default))
    }

    #[test]
    fn no_config_is_the_cluster_default() {
        assert_eq!(
            resolved(""),
            ResolvedIngress {
                target: IngressTarget::class("traefik"),
                origin: Origin::ClusterDefault
            }
        );
        assert_eq!(resolved("# nothing\n"), resolved("{}"));
        assert_eq!(resolved("cluster:\n"), resolved("{}"));
    }

    #[test]
    fn sections_are_levels() {
        assert_eq!(
            resolved("cluster: {ingress_class: null}"),
            ResolvedIngress {
                target: IngressTarget::NoClass,
                origin: Origin::Level(LevelName::Cluster)
            }
        );
        assert_eq!(
            resolved("cluster: {ingress_class: nginx}\nenvironment: {dedicated_ingress: {}}"),
            ResolvedIngress {
                target: IngressTarget::Dedicated,
                origin: Origin::Level(LevelName::Environment)
            }
        );
        assert_eq!(
            resolved("cluster: {dedicated_ingress: null}\ndeployment:\n  ingress_class: haproxy\n"),
            ResolvedIngress {
                target: IngressTarget::class("haproxy"),
                origin: Origin::Level(LevelName::Deployment)
            }
        );
    }

    #[test]
    fn errors_name_the_key() {
        let err = |yaml: &str| {
            StyrminConfig::from_yaml(yaml, "file s.yaml")
                .unwrap_err()
                .to_string()
        };
        // One line: origin, line and column, key, and one statement of what is wrong.
        assert_eq!(
            err("environment:\n  dedicated_ingress: true\n"),
            "config file s.yaml, line 2 column 3: environment.dedicated_ingress: expected an object of the dedicated controller's values (`{}` for the defaults), or null, found the boolean true"
        );
        assert_eq!(
            err("deployment:\n  ingress_clas: nginx\n"),
            "config file s.yaml, line 2 column 3: deployment.ingress_clas: unknown field `ingress_clas`, expected one of ingress_class, dedicated_ingress, enforcement_mode"
        );
        assert_eq!(
            err("clusters: {}\n"),
            "config file s.yaml, line 1 column 1: clusters: unknown field `clusters`, expected one of cluster, environment, deployment, last_deployed"
        );
        assert_eq!(
            err("cluster: [a]\n"),
            "config file s.yaml, line 1 column 10: cluster: expected mapping start"
        );
        // Found by fuzzing (postrender_config): a key with line breaks made the message
        // span lines, and Helm shows only the first line of a failing post-renderer.
        let e = err("cluster: {ingres\r\r\rcluster: {ng\r\rress\r_\rc");
        assert!(!e.contains('\n') && !e.contains('\r'), "{e:?}");
        let e = err("deployment:\n  \"ingress\\nclass\": x\n");
        assert!(e.contains("ingress\\nclass"), "{e:?}");
        assert!(!e.contains('\n'), "{e:?}");
        let e = err("cluster: {ingress_class: [a]}\n");
        assert!(e.contains("cluster.ingress_class"), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }

    #[test]
    fn a_message_is_flattened_onto_one_line() {
        assert_eq!(one_line("  a\n\n\tb  \r\nc\n"), "a b c");
        assert_eq!(one_line("line 3 column 4: x\n  y"), "line 3 column 4: x y");
        assert_eq!(one_line(""), "");
    }

    #[test]
    fn the_parser_position_goes_only_from_the_front() {
        assert_eq!(
            without_parser_position("error: line 2 column 3: bad"),
            "bad"
        );
        assert_eq!(without_parser_position("line 2 column 3: bad"), "bad");
        assert_eq!(without_parser_position("error: bad"), "bad");
        assert_eq!(
            without_parser_position("bad at line 2: x"),
            "bad at line 2: x"
        );
        assert_eq!(without_parser_position("lines: x"), "lines: x");
    }

    #[test]
    fn readable_states_what_was_expected_then_what_was_found() {
        assert_eq!(
            readable("error: line 1 column 2: invalid type: `boolean` true,\n  expected a map"),
            "expected a map, found the boolean true"
        );
        assert_eq!(readable("unknown field `x`"), "unknown field `x`");
    }

    #[test]
    fn w5_a_last_deployed_section_decides_alone() {
        let default = Level::default();
        let config = StyrminConfig::from_yaml(
            "cluster: {dedicated_ingress: {}}\nlast_deployed: {ingress_class: nginx}\n",
            "t",
        )
        .unwrap();
        let settings = config.settings(&default);
        assert_eq!(
            settings.source(),
            styrmin_ingress_rules::SettingsSource::Record
        );
        assert_eq!(settings.resolved.target.enforced_class(), Some("nginx"));
        assert!(settings.levels.target.is_dedicated());
        let config = config.with_last_deployed(Some(IngressTarget::Dedicated));
        assert!(config.settings(&default).resolved.target.is_dedicated());
        // Without it, the levels decide, as before.
        let config = StyrminConfig::from_yaml("cluster: {dedicated_ingress: {}}", "t").unwrap();
        let settings = config.with_last_deployed(None).settings(&default);
        assert_eq!(
            settings.source(),
            styrmin_ingress_rules::SettingsSource::Levels
        );
        assert!(settings.resolved.target.is_dedicated());
        let e = StyrminConfig::from_yaml("last_deployed: {dedicated_ingress: true}\n", "t")
            .unwrap_err()
            .to_string();
        assert!(e.contains("last_deployed.dedicated_ingress"), "{e}");
    }

    #[test]
    fn the_enforcement_mode_is_resolved_like_the_class() {
        let default = Level::default();
        let mode = |yaml: &str| StyrminConfig::from_yaml(yaml, "t").unwrap().mode(&default);
        assert_eq!(mode(""), ResolvedMode::default());
        assert_eq!(mode("").mode, EnforcementMode::Enforce);
        assert_eq!(
            mode("cluster: {enforcement_mode: warn}\nenvironment: {ingress_class: haproxy}"),
            ResolvedMode {
                mode: EnforcementMode::Warn,
                origin: Some(LevelName::Cluster)
            }
        );
        assert_eq!(
            mode("cluster: {enforcement_mode: warn}\nenvironment: {enforcement_mode: enforce}"),
            ResolvedMode {
                mode: EnforcementMode::Enforce,
                origin: Some(LevelName::Environment)
            }
        );
        // The command line's shortcut acts at the deployment level, over the file's.
        let config = StyrminConfig::from_yaml("environment: {enforcement_mode: enforce}", "t")
            .unwrap()
            .with_enforcement_mode(Some(EnforcementMode::Warn));
        assert_eq!(
            config.mode(&default),
            ResolvedMode {
                mode: EnforcementMode::Warn,
                origin: Some(LevelName::Deployment)
            }
        );
        let e = StyrminConfig::from_yaml("environment: {enforcement_mode: audit}\n", "file s.yaml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("environment.enforcement_mode"), "{e}");
        assert!(e.contains("enforce") && e.contains("warn"), "{e}");
    }

    #[test]
    fn command_line_shortcuts_act_at_the_deployment_level() {
        let config = StyrminConfig::from_yaml("environment: {ingress_class: nginx}", "t").unwrap();
        let config = config.with_deployment_overrides(Some("contour".into()), false);
        let default = Level::default();
        assert_eq!(
            resolve(&config.levels(&default)),
            ResolvedIngress {
                target: IngressTarget::class("contour"),
                origin: Origin::Level(LevelName::Deployment)
            }
        );
        let config = config.with_deployment_overrides(None, true);
        assert!(resolve(&config.levels(&default)).target.is_dedicated());
    }
}
