//! What a move does to an Ingress's annotations, judged by the annotation catalog
//! ([`crate::annotation_catalog`]): for every Ingress that changes controller, its
//! annotations grouped by verdict for the target at its version, and the annotations whose
//! effect spans a host, judged per host across Ingresses.
//!
//! Which catalog target a class is, and at which version, is [`Targets`]: by the class's
//! `spec.controller` unless `--target CLASS=ID` names it; the version from
//! `--target-version`, else the newest version the catalog has rows for, with a note.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::annotation_catalog::{Catalog, Verdict, Version, catalog};
use crate::ingress_controllers::{KnownController, by_id, known};

/// Which catalog target each class is, and its version.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Targets {
    /// The version of every target whose class has none of its own.
    pub version: Option<Version>,
    /// By IngressClass name.
    pub classes: BTreeMap<String, ClassTarget>,
}

/// What `--target` and `--target-version` say of one IngressClass.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClassTarget {
    /// A catalog id (`traefik-ingress-nginx`): the class is served by it whatever its
    /// `spec.controller` says.
    pub target: Option<String>,
    pub version: Option<Version>,
}

/// A `--target` or `--target-version` value that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetArgError {
    #[error("{0:?}: expected CLASS=ID, an IngressClass name and a controller id of the catalog")]
    NotClassTarget(String),
    #[error("{0:?} is not a controller id of the catalog; known: {1}")]
    UnknownId(String, String),
    #[error(transparent)]
    Version(#[from] crate::annotation_catalog::VersionError),
}

/// Reads `CLASS=ID` (`--target`).
pub fn parse_class_target(text: &str) -> Result<(String, String), TargetArgError> {
    let (class, id) = text
        .split_once('=')
        .filter(|(c, i)| !c.is_empty() && !i.is_empty())
        .ok_or_else(|| TargetArgError::NotClassTarget(text.to_owned()))?;
    if by_id(id).is_none() {
        let ids: Vec<&str> = crate::ingress_controllers::KNOWN_CONTROLLERS
            .iter()
            .map(|c| c.id)
            .collect();
        return Err(TargetArgError::UnknownId(id.to_owned(), ids.join(", ")));
    }
    Ok((class.to_owned(), id.to_owned()))
}

/// Reads `[CLASS=]VERSION` (`--target-version`).
pub fn parse_target_version(text: &str) -> Result<(Option<String>, Version), TargetArgError> {
    match text.split_once('=') {
        Some((class, version)) if !class.is_empty() => {
            Ok((Some(class.to_owned()), version.parse()?))
        }
        _ => Ok((None, text.parse()?)),
    }
}

impl Targets {
    /// From the flags' values.
    pub fn of(targets: &[(String, String)], versions: &[(Option<String>, Version)]) -> Targets {
        let mut out = Targets::default();
        for (class, id) in targets {
            out.classes.entry(class.clone()).or_default().target = Some(id.clone());
        }
        for (class, version) in versions {
            match class {
                Some(class) => {
                    out.classes.entry(class.clone()).or_default().version = Some(*version)
                }
                None => out.version = Some(*version),
            }
        }
        out
    }

    /// The target serving class `class` whose `spec.controller` is `controller`.
    pub fn target(&self, class: &str, controller: &str) -> Option<&'static KnownController> {
        match self.classes.get(class).and_then(|c| c.target.as_deref()) {
            Some(id) => by_id(id),
            None => known(controller),
        }
    }

    /// The version `target` of class `class` is judged at, and a note when it was not given.
    pub fn version(
        &self,
        class: &str,
        target: &KnownController,
    ) -> (Option<Version>, Option<String>) {
        let given = self
            .classes
            .get(class)
            .and_then(|c| c.version)
            .or(self.version);
        if given.is_some() {
            return (given, None);
        }
        match catalog().newest(target.id) {
            Some(newest) => (
                Some(newest),
                Some(format!(
                    "version not given: judged at {newest}, the newest the catalog has"
                )),
            ),
            None => (None, None),
        }
    }
}

/// One annotation's verdict, as reported.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Judged {
    pub annotation: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub renamed_to: Option<String>,
    /// For a rename: false when the value's form differs (the note says how).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub same_value: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The catalog source; none when the controller table decided (a prefix the target
    /// does not read).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// An Ingress that changes controller, and what its annotations become.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct AnnotationReport {
    pub namespace: String,
    pub name: String,
    /// Its controller now, and the target's (`spec.controller` and catalog id).
    pub from: String,
    pub to: String,
    pub target: String,
    /// The version it is judged at (none when the catalog has no row for the target).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<Version>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version_note: Option<String>,
    pub supported: Vec<Judged>,
    pub renamed: Vec<Judged>,
    pub unsupported: Vec<Judged>,
    pub unknown: Vec<Judged>,
    /// Controller annotations beyond those the webhook keeps, not judged.
    pub left_out: usize,
}

impl AnnotationReport {
    /// Everything it reads is read by the target as it is.
    pub fn all_supported(&self) -> bool {
        self.renamed.is_empty() && self.unsupported.is_empty() && self.unknown.is_empty()
    }

    /// One line for the pre-flight: the groups that need a person.
    pub fn summary(&self, from: &str, to: &str) -> String {
        let mut parts = Vec::new();
        let keys = |list: &[Judged]| {
            list.iter()
                .map(|j| j.annotation.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        if !self.unsupported.is_empty() {
            parts.push(format!(
                "{} unsupported: {}",
                self.unsupported.len(),
                keys(&self.unsupported)
            ));
        }
        if !self.unknown.is_empty() {
            parts.push(format!(
                "{} unknown: {}",
                self.unknown.len(),
                keys(&self.unknown)
            ));
        }
        if !self.renamed.is_empty() {
            let renames: Vec<String> = self
                .renamed
                .iter()
                .map(|j| {
                    format!(
                        "{} -> {}",
                        j.annotation,
                        j.renamed_to.as_deref().unwrap_or("")
                    )
                })
                .collect();
            parts.push(format!(
                "{} renamed: {}",
                self.renamed.len(),
                renames.join(", ")
            ));
        }
        let version = match (&self.version, &self.version_note) {
            (_, Some(note)) => format!(" ({note})"),
            (Some(version), None) => format!(" {version}"),
            (None, None) => String::new(),
        };
        format!("{from} -> {to}{version}: {}", parts.join("; "))
    }
}

/// Judges `keys` (annotations the current controller reads) for `target` at `version`.
pub fn judge_keys<'k>(
    keys: impl IntoIterator<Item = &'k str>,
    target: &KnownController,
    version: Option<Version>,
    report: &mut AnnotationReport,
) {
    let catalog: &Catalog = catalog();
    // With no version there is no row for the target: the controller table decides.
    let version = version.unwrap_or(Version(0, 0, 0));
    for key in keys {
        let judged = catalog.judge(key, target, version);
        let mut entry = Judged {
            annotation: key.to_owned(),
            renamed_to: None,
            same_value: None,
            note: judged.note.map(str::to_owned),
            source: judged.source.map(str::to_owned),
        };
        let list = match judged.verdict {
            Verdict::Supported => &mut report.supported,
            Verdict::Renamed { to, same_value } => {
                entry.renamed_to = Some(to);
                entry.same_value = Some(same_value);
                &mut report.renamed
            }
            Verdict::Unsupported => &mut report.unsupported,
            Verdict::Unknown => &mut report.unknown,
        };
        list.push(entry);
    }
}

/// A host one of whose Ingresses carries an annotation whose effect spans the host in its
/// current controller, while some Ingress of the host changes controller.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct HostReport {
    pub host: String,
    pub annotation: String,
    pub note: String,
    /// `namespace/name` of the Ingresses that carry it.
    pub carried_by: Vec<String>,
    /// Those of the host that change controller, with the target's verdict on it.
    pub moving: Vec<HostMove>,
    /// Those of the host that stay where they are.
    pub staying: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct HostMove {
    pub ingress: String,
    pub target: String,
    pub verdict: &'static str,
}

/// What the host judgement needs of one planned Ingress.
#[derive(Clone, Debug, Default)]
pub struct HostEntry {
    pub ingress: String,
    /// The host-wide annotations it carries that its current controller reads.
    pub carries: Vec<String>,
    /// When it changes controller: the target's name and version.
    pub moves_to: Option<(&'static KnownController, Option<Version>)>,
}

/// The hosts where a host-wide annotation and a move meet.
pub fn host_reports(hosts: &BTreeMap<String, Vec<HostEntry>>) -> Vec<HostReport> {
    let mut out = Vec::new();
    for (host, entries) in hosts {
        if entries.iter().all(|e| e.moves_to.is_none()) {
            continue;
        }
        let mut annotations: Vec<&str> = entries
            .iter()
            .flat_map(|e| e.carries.iter().map(String::as_str))
            .collect();
        annotations.sort_unstable();
        annotations.dedup();
        for annotation in annotations {
            let Some(mark) = catalog().host_wide(annotation) else {
                continue;
            };
            let carried_by = entries
                .iter()
                .filter(|e| e.carries.iter().any(|c| c == annotation))
                .map(|e| e.ingress.clone())
                .collect();
            let mut moving = Vec::new();
            let mut staying = Vec::new();
            for entry in entries {
                match entry.moves_to {
                    Some((target, version)) => moving.push(HostMove {
                        ingress: entry.ingress.clone(),
                        target: target.name.to_owned(),
                        verdict: catalog()
                            .judge(annotation, target, version.unwrap_or(Version(0, 0, 0)))
                            .verdict
                            .as_str(),
                    }),
                    None => staying.push(entry.ingress.clone()),
                }
            }
            out.push(HostReport {
                host: host.clone(),
                annotation: annotation.to_owned(),
                note: mark.note.clone(),
                carried_by,
                moving,
                staying,
            });
        }
    }
    out
}

impl HostReport {
    /// One line for the pre-flight.
    pub fn detail(&self) -> String {
        let moving: Vec<String> = self
            .moving
            .iter()
            .map(|m| format!("{} (to {}: {})", m.ingress, m.target, m.verdict))
            .collect();
        let staying = if self.staying.is_empty() {
            String::new()
        } else {
            format!("; staying: {}", self.staying.join(", "))
        };
        format!(
            "{} on {}: {} Moving: {}{staying}",
            self.annotation,
            self.carried_by.join(", "),
            self.note,
            moving.join(", "),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_are_read_and_a_class_wins_over_the_default() {
        let targets = Targets::of(
            &[parse_class_target("traefik=traefik-ingress-nginx").unwrap_or_default()],
            &[
                parse_target_version("3.6").unwrap_or((None, Version(0, 0, 0))),
                parse_target_version("traefik=v3.7.2").unwrap_or((None, Version(0, 0, 0))),
            ],
        );
        let traefik = targets.target("traefik", "example.com/x");
        assert_eq!(traefik.map(|t| t.id), Some("traefik-ingress-nginx"));
        assert_eq!(
            targets
                .target("haproxy", "haproxy.org/ingress-controller/haproxy")
                .map(|t| t.id),
            Some("haproxy")
        );
        assert_eq!(targets.target("x", "example.com/x"), None);
        let Some(traefik) = traefik else { return };
        assert_eq!(
            targets.version("traefik", traefik),
            (Some(Version(3, 7, 2)), None)
        );
        assert_eq!(
            targets.version("other", traefik),
            (Some(Version(3, 6, 0)), None)
        );
        assert!(parse_class_target("traefik=nobody").is_err());
        assert!(parse_class_target("=traefik").is_err());
        assert!(parse_target_version("traefik=latest").is_err());
    }

    #[test]
    fn a_version_not_given_is_the_newest_with_a_note() {
        let Some(f5) = by_id("f5-nginx") else {
            panic!("f5-nginx is in the table")
        };
        let (version, note) = Targets::default().version("nginx-plus", f5);
        assert_eq!(version, catalog().newest("f5-nginx"));
        assert!(note.is_some_and(|n| n.starts_with("version not given")));
        let Some(istio) = by_id("istio") else {
            panic!("istio is in the table")
        };
        assert_eq!(Targets::default().version("istio", istio), (None, None));
    }
}
