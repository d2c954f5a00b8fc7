//! The Kubernetes version, for R9: 1.18–1.26 reject an Ingress that sets both the class
//! annotation and `spec.ingressClassName`.

use std::fmt;
use std::str::FromStr;

/// `major.minor` of a Kubernetes API server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct KubernetesVersion {
    pub major: u32,
    pub minor: u32,
}

impl KubernetesVersion {
    /// The first release whose Ingress validation accepts the annotation and
    /// `spec.ingressClassName` together, when they are equal (R9).
    pub const BOTH_CLASS_FIELDS: KubernetesVersion = KubernetesVersion {
        major: 1,
        minor: 27,
    };

    /// Whether this server accepts a new Ingress with both class fields set.
    pub fn accepts_both_class_fields(self) -> bool {
        self >= Self::BOTH_CLASS_FIELDS
    }
}

impl fmt::Display for KubernetesVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("`{0}` is not a Kubernetes version: expected MAJOR.MINOR, for example 1.30 or v1.30.2")]
pub struct ParseVersionError(pub String);

impl FromStr for KubernetesVersion {
    type Err = ParseVersionError;

    /// Accepts what users and the API server write: `1.30`, `v1.30.2`, `v1.30.2-gke.1`,
    /// and the `/version` endpoint's minor with a `+` (`"27+"` on EKS and GKE).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ParseVersionError(s.to_owned());
        let trimmed = s.trim().trim_start_matches('v');
        let mut parts = trimmed.split('.');
        let major = parts.next().and_then(leading_number).ok_or_else(err)?;
        let minor = parts.next().and_then(leading_number).ok_or_else(err)?;
        Ok(KubernetesVersion { major, minor })
    }
}

fn leading_number(part: &str) -> Option<u32> {
    let end = part
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(part.len());
    part[..end].parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_spellings_in_use() {
        let v = |s: &str| s.parse::<KubernetesVersion>();
        assert_eq!(
            v("1.30"),
            Ok(KubernetesVersion {
                major: 1,
                minor: 30
            })
        );
        assert_eq!(
            v("v1.26.3"),
            Ok(KubernetesVersion {
                major: 1,
                minor: 26
            })
        );
        assert_eq!(
            v("v1.27.2-gke.1200"),
            Ok(KubernetesVersion {
                major: 1,
                minor: 27
            })
        );
        assert_eq!(
            v("1.27+"),
            Ok(KubernetesVersion {
                major: 1,
                minor: 27
            })
        );
        assert!(v("latest").is_err());
        assert!(v("1").is_err());
    }

    #[test]
    fn r9_both_fields_from_1_27() {
        let v = |s: &str| {
            s.parse::<KubernetesVersion>()
                .unwrap()
                .accepts_both_class_fields()
        };
        assert!(!v("1.18"));
        assert!(!v("1.26"));
        assert!(v("1.27"));
        assert!(v("1.35"));
        assert!(v("2.0"));
    }
}
