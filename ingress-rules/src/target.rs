//! What an application's Ingresses are served by: the environment's dedicated controller, a
//! shared class, or no class (the chart's own class is kept). The rules' answer and a
//! deployment's last-deployed record (rule W5) are both one of these.
//!
//! A record is written (policy file `last_deployed:`, StyrminDeployment
//! `status.lastDeployed`, post-renderer config `last_deployed:`) in the shape of one level
//! and read like a cluster level: `{dedicated_ingress: {}}`, `{ingress_class: nginx}`,
//! `{ingress_class: ""}` (or `null`) for no class; [`IngressTarget::as_level`] gives that
//! form back. On a command line and in the webhook's log it is `dedicated`, `class:<name>`
//! or `no-class`.

use std::fmt;
use std::str::FromStr;

use crate::classes::DEDICATED_CONTROLLER_CLASS;
use crate::level::{DedicatedIngress, Level, Setting};

/// The name of a shared ingress class; never empty, because an empty class means no class
/// ([`IngressTarget::NoClass`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ClassName(String);

impl ClassName {
    /// The class `name`, or `None` for `""`, which is no class.
    pub fn new(name: impl Into<String>) -> Option<Self> {
        let name = name.into();
        (!name.is_empty()).then_some(ClassName(name))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ClassName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What an application's Ingresses get.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum IngressTarget {
    /// R1 on: the environment's dedicated controller serves them (R3).
    Dedicated,
    /// R1 off, R2 a class: this shared class serves them (R4).
    Class(ClassName),
    /// R1 off, R2 empty: the chart's own class is kept (R5).
    NoClass,
}

impl IngressTarget {
    /// The shared class `name`; [`NoClass`](Self::NoClass) for `""`.
    pub fn class(name: impl Into<String>) -> Self {
        ClassName::new(name).map_or(IngressTarget::NoClass, IngressTarget::Class)
    }

    /// The class an Ingress is served by: the dedicated controller's implementation or the
    /// shared class; `None` for no class.
    pub fn enforced_class(&self) -> Option<&str> {
        match self {
            IngressTarget::Dedicated => Some(DEDICATED_CONTROLLER_CLASS),
            IngressTarget::Class(class) => Some(class.as_str()),
            IngressTarget::NoClass => None,
        }
    }

    /// True when the dedicated controller serves the application (R1).
    pub fn is_dedicated(&self) -> bool {
        matches!(self, IngressTarget::Dedicated)
    }

    /// The record as one level, the form it is written in (the inverse of
    /// [`from_record_level`](Self::from_record_level), in `record.rs`).
    pub fn as_level(&self) -> Level {
        match self {
            IngressTarget::Dedicated => Level {
                dedicated_ingress: Setting::Value(DedicatedIngress::default()),
                ..Level::default()
            },
            IngressTarget::Class(class) => Level {
                ingress_class: Setting::Value(class.as_str().to_owned()),
                ..Level::default()
            },
            IngressTarget::NoClass => Level {
                ingress_class: Setting::Value(String::new()),
                ..Level::default()
            },
        }
    }
}

/// `dedicated`, `class:<name>` or `no-class`: the form of `--last-deployed`, the webhook's
/// log and its debug endpoint.
impl fmt::Display for IngressTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IngressTarget::Dedicated => f.write_str("dedicated"),
            IngressTarget::Class(class) => write!(f, "class:{class}"),
            IngressTarget::NoClass => f.write_str("no-class"),
        }
    }
}

/// A `--last-deployed` value that is none of `dedicated`, `class:<name>`, `no-class`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "{0:?} is not a last-deployed setting: expected `dedicated`, `class:<name>` (e.g. class:nginx) or `no-class`"
)]
pub struct ParseTargetError(String);

impl FromStr for IngressTarget {
    type Err = ParseTargetError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim() {
            "dedicated" => Ok(IngressTarget::Dedicated),
            "no-class" => Ok(IngressTarget::NoClass),
            other => match other.strip_prefix("class:") {
                // `class:` is no class.
                Some(class) => Ok(IngressTarget::class(class)),
                None => Err(ParseTargetError(text.to_owned())),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_class_is_no_class() {
        assert_eq!(ClassName::new(""), None);
        assert_eq!(IngressTarget::class(""), IngressTarget::NoClass);
        let nginx = ClassName::new("nginx").unwrap();
        assert_eq!(nginx.as_str(), "nginx");
        assert_eq!(nginx.to_string(), "nginx");
        assert_eq!(
            IngressTarget::class("nginx"),
            IngressTarget::Class(ClassName::new("nginx").unwrap())
        );
    }

    #[test]
    fn enforced_class_of_each_target() {
        assert_eq!(
            IngressTarget::Dedicated.enforced_class(),
            Some(DEDICATED_CONTROLLER_CLASS)
        );
        assert_eq!(IngressTarget::class("kong").enforced_class(), Some("kong"));
        assert_eq!(IngressTarget::class("").enforced_class(), None);
        assert_eq!(IngressTarget::NoClass.enforced_class(), None);
    }

    #[test]
    fn r1_only_the_dedicated_target_is_dedicated() {
        assert!(IngressTarget::Dedicated.is_dedicated());
        assert!(!IngressTarget::class("traefik").is_dedicated());
        assert!(!IngressTarget::NoClass.is_dedicated());
    }

    #[test]
    fn the_text_form_round_trips() {
        for (text, record) in [
            ("dedicated", IngressTarget::Dedicated),
            ("class:nginx", IngressTarget::class("nginx")),
            ("no-class", IngressTarget::NoClass),
        ] {
            assert_eq!(text.parse::<IngressTarget>().unwrap(), record);
            assert_eq!(record.to_string(), text);
        }
        assert_eq!(
            "class:".parse::<IngressTarget>().unwrap(),
            IngressTarget::NoClass
        );
        let err = "nginx".parse::<IngressTarget>().unwrap_err().to_string();
        assert!(err.contains("class:<name>"), "{err}");
    }
}
