//! One configuration level (cluster, environment or deployment) and the three states a
//! key can be in there (docs/rules.md §1).

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, Visitor};

use crate::mode::EnforcementMode;

/// Which configuration level a value came from, most specific last.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LevelName {
    Cluster,
    Environment,
    Deployment,
}

impl fmt::Display for LevelName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LevelName::Cluster => "cluster",
            LevelName::Environment => "environment",
            LevelName::Deployment => "deployment",
        })
    }
}

/// A key of a level as written: left out, written as `null`, or given a value.
///
/// The difference between `Absent` and `Null` matters at the cluster level only
/// (`ingress_class` absent means `traefik`, `null` means no class); at the environment
/// and deployment levels both mean "not set: inherit".
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Setting<T> {
    #[default]
    Absent,
    Null,
    Value(T),
}

impl<T> Setting<T> {
    /// The value, when the level sets one.
    pub fn value(&self) -> Option<&T> {
        match self {
            Setting::Value(v) => Some(v),
            Setting::Absent | Setting::Null => None,
        }
    }
}

impl<T> From<Option<T>> for Setting<T> {
    /// `None` is an explicit `null`: a present key. Use `Setting::Absent` for a missing one.
    fn from(value: Option<T>) -> Self {
        value.map_or(Setting::Null, Setting::Value)
    }
}

/// Deserialises a present key: `null` becomes `Null`, anything else `Value`. A missing key
/// never reaches this (fields carry `#[serde(default)]`), so it stays `Absent`.
impl<'de, T: Deserialize<'de>> Deserialize<'de> for Setting<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Option::<T>::deserialize(deserializer).map(Setting::from)
    }
}

/// A `dedicated_ingress` value: any object turns the dedicated controller on, `{}`
/// included; its keys are the controller's values, which do not affect the class.
/// Anything that is not an object is a configuration error (docs/rules.md §1).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DedicatedIngress {
    /// The top-level keys of the object, kept so that `explain` can show them.
    pub value_keys: Vec<String>,
}

impl<'de> Deserialize<'de> for DedicatedIngress {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ObjectOnly;

        impl<'de> Visitor<'de> for ObjectOnly {
            type Value = DedicatedIngress;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object of the dedicated controller's values (`{}` for the defaults), or null")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut value_keys = Vec::new();
                while let Some(key) = map.next_key::<KeyName>()? {
                    map.next_value::<IgnoredAny>()?;
                    value_keys.push(key.0);
                }
                Ok(DedicatedIngress { value_keys })
            }
        }

        // `deserialize_any` so that a scalar or a sequence reaches the visitor and is reported
        // with what was expected, instead of a parser-level "expected mapping".
        deserializer.deserialize_any(ObjectOnly)
    }
}

/// A map key shown by `explain`; a non-string key (YAML allows them) is shown as written.
struct KeyName(String);

impl<'de> Deserialize<'de> for KeyName {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct AnyKey;
        impl Visitor<'_> for AnyKey {
            type Value = KeyName;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<KeyName, E> {
                Ok(KeyName(v.to_owned()))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<KeyName, E> {
                Ok(KeyName(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<KeyName, E> {
                Ok(KeyName(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<KeyName, E> {
                Ok(KeyName(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<KeyName, E> {
                Ok(KeyName(v.to_string()))
            }
            fn visit_unit<E: de::Error>(self) -> Result<KeyName, E> {
                Ok(KeyName("null".to_owned()))
            }
        }
        deserializer.deserialize_any(AnyKey)
    }
}

/// The keys of one level, as written in the Styrmin config: the two ingress keys and the
/// enforcement mode.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Level {
    #[serde(default)]
    pub ingress_class: Setting<String>,
    #[serde(default)]
    pub dedicated_ingress: Setting<DedicatedIngress>,
    /// `enforce` or `warn` (see [`crate::resolve_mode`]); absent or `null` inherits.
    #[serde(default)]
    pub enforcement_mode: Setting<EnforcementMode>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> Result<Level, serde_saphyr::Error> {
        serde_saphyr::from_str(yaml)
    }

    #[test]
    fn absent_null_empty_and_value_are_four_states() {
        assert_eq!(parse("{}").unwrap().ingress_class, Setting::Absent);
        assert_eq!(
            parse("ingress_class: null").unwrap().ingress_class,
            Setting::Null
        );
        assert_eq!(
            parse("ingress_class: ~").unwrap().ingress_class,
            Setting::Null
        );
        assert_eq!(
            parse("ingress_class: \"\"").unwrap().ingress_class,
            Setting::Value(String::new())
        );
        assert_eq!(
            parse("ingress_class: nginx").unwrap().ingress_class,
            Setting::Value("nginx".into())
        );
    }

    #[test]
    fn any_object_turns_dedicated_on() {
        assert_eq!(
            parse("dedicated_ingress: {}").unwrap().dedicated_ingress,
            Setting::Value(DedicatedIngress::default())
        );
        let level =
            parse("dedicated_ingress: {replicas: 2, service: {type: LoadBalancer}}").unwrap();
        assert_eq!(
            level.dedicated_ingress.value().unwrap().value_keys,
            vec!["replicas".to_owned(), "service".to_owned()]
        );
        assert_eq!(
            parse("dedicated_ingress: null").unwrap().dedicated_ingress,
            Setting::Null
        );
    }

    #[test]
    fn non_object_dedicated_is_an_error_that_says_what_was_expected() {
        for bad in ["true", "\"x\"", "[]", "1", "yes please"] {
            let err = parse(&format!("dedicated_ingress: {bad}"))
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("object of the dedicated controller's values"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn unknown_keys_are_rejected() {
        let err = parse("ingres_class: nginx").unwrap_err().to_string();
        assert!(err.contains("ingres_class"), "{err}");
    }

    #[test]
    fn works_from_json_too() {
        let level: Level =
            serde_json::from_str(r#"{"ingress_class":null,"dedicated_ingress":{}}"#).unwrap();
        assert_eq!(level.ingress_class, Setting::Null);
        assert!(level.dedicated_ingress.value().is_some());
        assert!(serde_json::from_str::<Level>(r#"{"dedicated_ingress":true}"#).is_err());
    }

    #[test]
    fn level_names_as_shown_in_messages() {
        assert_eq!(LevelName::Cluster.to_string(), "cluster");
        assert_eq!(LevelName::Environment.to_string(), "environment");
        assert_eq!(LevelName::Deployment.to_string(), "deployment");
    }

    #[test]
    fn dedicated_ingress_keys_of_every_scalar_type_are_kept() {
        let level = parse("dedicated_ingress: {replicas: 2, true: 1, 3: x, 1.5: y}\n").unwrap();
        let dedicated: &DedicatedIngress = level.dedicated_ingress.value().unwrap();
        assert_eq!(dedicated.value_keys, ["replicas", "true", "3", "1.5"]);
    }

    #[test]
    fn a_dedicated_ingress_key_that_is_not_a_scalar_is_reported() {
        let error = parse("dedicated_ingress: {[a]: 1}\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("a key"), "{error}");
    }
}
