//! The function's configuration: the `functionConfig` of a `ResourceList`, a
//! `StyrminPostRender`, and the same document as the config file of kubectl's kustomize exec
//! plugin.

use serde::Deserialize;
use styrmin_ingress_rules::{IngressTarget, KubernetesVersion, Level};

use super::error::KrmError;
use crate::config::{StyrminConfig, one_line, parser_message, without_parser_position};

/// The `functionConfig` kind, and its API group and version (the group of Styrmin's custom
/// resources).
pub const FUNCTION_CONFIG_API_VERSION: &str = "styrmin.io/v1alpha1";
pub const FUNCTION_CONFIG_KIND: &str = "StyrminPostRender";

/// The config a run takes: the functionConfig's spec, else the command line's.
#[derive(Debug, Clone, Default)]
pub struct FunctionConfig {
    pub config: StyrminConfig,
    pub kubernetes: Option<KubernetesVersion>,
    pub strict: bool,
}

/// `spec` of a `StyrminPostRender`: the config file's sections, and the two flags.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Spec {
    #[serde(default)]
    cluster: Option<Level>,
    #[serde(default)]
    environment: Option<Level>,
    #[serde(default)]
    deployment: Option<Level>,
    #[serde(default)]
    last_deployed: Option<IngressTarget>,
    #[serde(default)]
    kube_version: Option<String>,
    #[serde(default)]
    strict: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct TypedConfig {
    api_version: Option<String>,
    kind: Option<String>,
    #[serde(default, rename = "metadata")]
    _metadata: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    spec: Option<Spec>,
}

#[derive(Debug, Deserialize)]
struct Envelope {
    #[serde(rename = "functionConfig")]
    function_config: Option<TypedConfig>,
}

/// Reads the `functionConfig:` entry (its text, `functionConfig:` line included).
/// `first_line` gives the entry's line in the `ResourceList`, for messages (counted only
/// when there is one to write: that takes a pass over the items).
pub(super) fn read_function_config(
    text: &str,
    first_line: impl FnOnce() -> usize,
) -> Result<Option<FunctionConfig>, KrmError> {
    let envelope: Envelope = parse_config(text, first_line, "functionConfig")?;
    let Some(typed) = envelope.function_config else {
        return Ok(None);
    };
    typed.into_config("functionConfig.").map(Some)
}

/// Reads the config file kubectl's kustomize hands an exec plugin (its path is the
/// plugin's first argument): a `StyrminPostRender` document, the functionConfig's kind.
/// Fields are named from the document's root (`spec.deployment.ingress_class`).
pub fn read_plugin_config(text: &str) -> Result<FunctionConfig, KrmError> {
    let typed: TypedConfig = parse_config(text, || 1, "the plugin config")?;
    typed.into_config("")
}

/// Parses a config, an error naming the field by its path and the line from `first_line`
/// (the config's first line in a larger text); `root` names the whole.
fn parse_config<T: serde::de::DeserializeOwned>(
    text: &str,
    first_line: impl FnOnce() -> usize,
    root: &str,
) -> Result<T, KrmError> {
    let mut path = String::new();
    let parsed = serde_saphyr::with_deserializer_from_str(text, |de| {
        serde_path_to_error::deserialize::<_, T>(de).map_err(|e| {
            path = e.path().to_string();
            e.into_inner()
        })
    });
    parsed.map_err(|e| {
        let mut message = parser_message(&e);
        if let Some(at) = e.location() {
            message = format!(
                "line {} column {}: {}",
                at.line() as usize + first_line() - 1,
                at.column(),
                without_parser_position(&one_line(&message))
            );
        }
        KrmError::FunctionConfig {
            field: if path.is_empty() || path == "." {
                root.to_owned()
            } else {
                path.escape_debug().to_string()
            },
            message: one_line(&message),
        }
    })
}

impl TypedConfig {
    /// The config, once its kind is checked; fields named after `prefix`.
    fn into_config(self, prefix: &str) -> Result<FunctionConfig, KrmError> {
        let typed = self;
        let wrong = |field: &str, message: String| KrmError::FunctionConfig {
            field: format!("{prefix}{field}"),
            message,
        };
        if typed.api_version.as_deref() != Some(FUNCTION_CONFIG_API_VERSION) {
            return Err(wrong(
                "apiVersion",
                format!(
                    "expected {FUNCTION_CONFIG_API_VERSION}, found {}",
                    typed.api_version.as_deref().unwrap_or("nothing")
                ),
            ));
        }
        if typed.kind.as_deref() != Some(FUNCTION_CONFIG_KIND) {
            return Err(wrong(
                "kind",
                format!(
                    "expected {FUNCTION_CONFIG_KIND}, found {}",
                    typed.kind.as_deref().unwrap_or("nothing")
                ),
            ));
        }
        let spec = typed.spec.unwrap_or_default();
        let kubernetes = spec
            .kube_version
            .as_deref()
            .map(|v| {
                v.parse::<KubernetesVersion>()
                    .map_err(|e| wrong("spec.kube_version", e.to_string()))
            })
            .transpose()?;
        Ok(FunctionConfig {
            config: StyrminConfig {
                cluster: spec.cluster,
                environment: spec.environment,
                deployment: spec.deployment,
                last_deployed: spec.last_deployed,
            },
            kubernetes,
            strict: spec.strict.unwrap_or(false),
        })
    }
}
