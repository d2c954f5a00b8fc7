//! The annotation catalog: what each target controller does with the annotations another
//! controller reads, by the target's own published support, version by version.
//!
//! The data is `webhook/src/annotation_catalog.json`, embedded and read once. A row says,
//! for one source annotation, one target (an id of
//! [`KNOWN_CONTROLLERS`](crate::ingress_controllers::KNOWN_CONTROLLERS)) and the first
//! target version it holds for, whether the target supports it (with the documented
//! limitation), does not, or reads the same meaning under another key. Every row names its
//! source. A key no row covers at the target's version is `unknown` when the target reads
//! its prefix (Traefik's ingress-nginx provider and an `nginx.ingress.kubernetes.io/` key it
//! does not list), and `unsupported` when it reads nothing under that prefix (HAProxy and
//! every `nginx.ingress.kubernetes.io/` key), as the controller table says.
//!
//! Pure: no I/O. `docs/migrate.md` explains how to add or correct a row.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::LazyLock;

use serde::{Deserialize, Serialize};

use crate::ingress_controllers::{KnownController, by_id};

/// The catalog as it is shipped.
const DATA: &str = include_str!("annotation_catalog.json");

static CATALOG: LazyLock<Catalog> = LazyLock::new(|| match Catalog::parse(DATA) {
    Ok(catalog) => catalog,
    // The shipped data is checked by this module's tests: a failure here is a build that
    // skipped them.
    Err(error) => panic!("webhook/src/annotation_catalog.json: {error}"),
});

/// The shipped catalog, parsed and checked on first use.
pub fn catalog() -> &'static Catalog {
    &CATALOG
}

/// A controller version, `MAJOR.MINOR[.PATCH]` (a leading `v` and a `-suffix` are allowed,
/// as image tags have them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version(pub u32, pub u32, pub u32);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a version: expected MAJOR.MINOR or MAJOR.MINOR.PATCH, such as 3.7 or v3.7.2")]
pub struct VersionError(pub String);

impl std::str::FromStr for Version {
    type Err = VersionError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let error = || VersionError(text.to_owned());
        let bare = text.strip_prefix('v').unwrap_or(text);
        let bare = bare.split(['-', '+']).next().unwrap_or(bare);
        let mut parts = bare
            .split('.')
            .map(|p| p.parse::<u32>().map_err(|_| error()));
        let major = parts.next().ok_or_else(error)??;
        let minor = parts.next().ok_or_else(error)??;
        let patch = parts.next().transpose()?.unwrap_or(0);
        if parts.next().is_some() {
            return Err(error());
        }
        Ok(Version(major, minor, patch))
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

impl<'de> Deserialize<'de> for Version {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl Serialize for Version {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// What a row says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RowVerdict {
    Supported,
    Unsupported,
    Renamed,
}

/// Where a row's facts come from.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Source {
    pub document: String,
    pub version: String,
    pub url: String,
}

/// One row of the catalog.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Row {
    pub annotation: String,
    /// The target's id in the controller table.
    pub target: String,
    /// The first target version the row holds for; it holds until a later row of the same
    /// annotation and target.
    pub since: Version,
    pub verdict: RowVerdict,
    /// For `renamed`: the target's key of the same meaning.
    #[serde(default)]
    pub renamed_to: Option<String>,
    /// For `renamed`: whether the value can be copied as it is (false: the value's form
    /// differs, the note says how).
    #[serde(default = "yes")]
    pub same_value: bool,
    /// The documented limitation, in our words.
    #[serde(default)]
    pub note: Option<String>,
    /// A key of [`Catalog::sources`]: a row without one is refused.
    #[serde(default)]
    pub source: String,
}

fn yes() -> bool {
    true
}

/// An annotation whose effect in its own controller spans the whole host, across Ingresses.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostWide {
    pub annotation: String,
    pub note: String,
    #[serde(default)]
    pub source: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Data {
    revision: u32,
    sources: BTreeMap<String, Source>,
    host_wide: Vec<HostWide>,
    rows: Vec<Row>,
}

/// What is wrong with the catalog's data.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("not the catalog's JSON")]
    Parse(#[source] serde_json::Error),
    #[error("source {0:?}: its document, version and url must all be given")]
    EmptySource(String),
    #[error("{annotation} for {target}: no source, or source {source_key:?} is not in sources")]
    NoSource {
        annotation: String,
        target: String,
        source_key: String,
    },
    #[error("{annotation}: target {target:?} is not an id of the controller table")]
    UnknownTarget { annotation: String, target: String },
    #[error(
        "{annotation} for {target} since {since}: two rows ({first} and {second}); a later version needs a later since"
    )]
    Conflict {
        annotation: String,
        target: String,
        since: Version,
        first: String,
        second: String,
    },
    #[error(
        "{annotation} for {target}: renamed needs renamed_to, a key the target reads, and only renamed has one"
    )]
    BadRename { annotation: String, target: String },
}

/// A verdict on one annotation for one target at one version.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(tag = "verdict", rename_all = "kebab-case")]
pub enum Verdict {
    Supported,
    /// The target reads the same meaning under `to`.
    #[serde(rename = "renamed-to")]
    Renamed {
        to: String,
        same_value: bool,
    },
    Unsupported,
    Unknown,
}

impl Verdict {
    pub fn as_str(&self) -> &'static str {
        match self {
            Verdict::Supported => "supported",
            Verdict::Renamed { .. } => "renamed-to",
            Verdict::Unsupported => "unsupported",
            Verdict::Unknown => "unknown",
        }
    }
}

/// A verdict with what backs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Judgement<'a> {
    pub verdict: Verdict,
    pub note: Option<&'a str>,
    /// The row's source key; `None` when no row covers it (then the controller table,
    /// `docs/rollout.md`, decides).
    pub source: Option<&'a str>,
}

/// The catalog, checked.
#[derive(Debug)]
pub struct Catalog {
    pub revision: u32,
    pub sources: BTreeMap<String, Source>,
    pub host_wide: Vec<HostWide>,
    /// By annotation, target and `since`.
    rows: BTreeMap<(String, String), Vec<Row>>,
}

impl Catalog {
    /// Reads and checks catalog data: every row and host-wide mark names a source that is
    /// given, every target is in the controller table, no two rows of one annotation and
    /// target start at the same version, a rename names a key the target reads.
    pub fn parse(text: &str) -> Result<Catalog, CatalogError> {
        let data: Data = serde_json::from_str(text).map_err(CatalogError::Parse)?;
        for (key, source) in &data.sources {
            if [&source.document, &source.version, &source.url]
                .iter()
                .any(|s| s.trim().is_empty())
            {
                return Err(CatalogError::EmptySource(key.clone()));
            }
        }
        let no_source = |annotation: &str, target: &str, key: &str| CatalogError::NoSource {
            annotation: annotation.to_owned(),
            target: target.to_owned(),
            source_key: key.to_owned(),
        };
        for mark in &data.host_wide {
            if !data.sources.contains_key(&mark.source) {
                return Err(no_source(&mark.annotation, "(host-wide)", &mark.source));
            }
        }
        let mut rows: BTreeMap<(String, String), Vec<Row>> = BTreeMap::new();
        for row in data.rows {
            check_row(&row, &data.sources)?;
            rows.entry((row.annotation.clone(), row.target.clone()))
                .or_default()
                .push(row);
        }
        for list in rows.values_mut() {
            list.sort_by_key(|r| r.since);
            for pair in list.windows(2) {
                if let [first, second] = pair
                    && first.since == second.since
                {
                    return Err(CatalogError::Conflict {
                        annotation: first.annotation.clone(),
                        target: first.target.clone(),
                        since: first.since,
                        first: describe(first),
                        second: describe(second),
                    });
                }
            }
        }
        Ok(Catalog {
            revision: data.revision,
            sources: data.sources,
            host_wide: data.host_wide,
            rows,
        })
    }

    /// The verdict on annotation `key` for `target` at `version`.
    pub fn judge(&self, key: &str, target: &KnownController, version: Version) -> Judgement<'_> {
        let row = self
            .rows
            .get(&(key.to_owned(), target.id.to_owned()))
            .and_then(|rows| rows.iter().rev().find(|r| r.since <= version));
        match row {
            Some(row) => Judgement {
                verdict: match row.verdict {
                    RowVerdict::Supported => Verdict::Supported,
                    RowVerdict::Unsupported => Verdict::Unsupported,
                    RowVerdict::Renamed => Verdict::Renamed {
                        to: row.renamed_to.clone().unwrap_or_default(),
                        same_value: row.same_value,
                    },
                },
                note: row.note.as_deref(),
                source: Some(&row.source),
            },
            None if target.reads(key) => Judgement {
                verdict: Verdict::Unknown,
                note: None,
                source: None,
            },
            None => Judgement {
                verdict: Verdict::Unsupported,
                note: None,
                source: None,
            },
        }
    }

    /// The newest version any row of `target` starts at: what a target whose version is
    /// not known is judged by.
    pub fn newest(&self, target: &str) -> Option<Version> {
        self.rows
            .iter()
            .filter(|((_, t), _)| t == target)
            .flat_map(|(_, rows)| rows.iter().map(|r| r.since))
            .max()
    }

    /// The versions at which `target`'s rows change, oldest first.
    pub fn versions(&self, target: &str) -> Vec<Version> {
        let versions: BTreeSet<Version> = self
            .rows
            .iter()
            .filter(|((_, t), _)| t == target)
            .flat_map(|(_, rows)| rows.iter().map(|r| r.since))
            .collect();
        versions.into_iter().collect()
    }

    /// The targets that have rows.
    pub fn targets(&self) -> BTreeSet<&str> {
        self.rows.keys().map(|(_, t)| t.as_str()).collect()
    }

    /// Every annotation under `prefix` some row names.
    pub fn annotations(&self, prefix: &str) -> BTreeSet<&str> {
        self.rows
            .keys()
            .map(|(a, _)| a.as_str())
            .filter(|a| a.starts_with(prefix))
            .collect()
    }

    /// Whether `key`'s effect spans its host in its own controller, and how.
    pub fn host_wide(&self, key: &str) -> Option<&HostWide> {
        self.host_wide.iter().find(|m| m.annotation == key)
    }

    /// The renames of `annotations` for `target` at `version` whose value can be copied as
    /// it is: `(old key, new key)`, in the order given. What a move that translates keys
    /// would add; nothing else is renamed.
    pub fn renames_for<'k>(
        &self,
        annotations: impl IntoIterator<Item = &'k str>,
        target: &KnownController,
        version: Version,
    ) -> Vec<(String, String)> {
        annotations
            .into_iter()
            .filter_map(|key| match self.judge(key, target, version).verdict {
                Verdict::Renamed {
                    to,
                    same_value: true,
                } => Some((key.to_owned(), to)),
                _ => None,
            })
            .collect()
    }
}

/// One row's check on its own: source, target, rename.
fn check_row(row: &Row, sources: &BTreeMap<String, Source>) -> Result<(), CatalogError> {
    if !sources.contains_key(&row.source) {
        return Err(CatalogError::NoSource {
            annotation: row.annotation.clone(),
            target: row.target.clone(),
            source_key: row.source.clone(),
        });
    }
    let Some(target) = by_id(&row.target) else {
        return Err(CatalogError::UnknownTarget {
            annotation: row.annotation.clone(),
            target: row.target.clone(),
        });
    };
    let rename_ok = match (row.verdict, &row.renamed_to) {
        (RowVerdict::Renamed, Some(to)) => target.reads(to) && *to != row.annotation,
        (RowVerdict::Renamed, None) => false,
        (_, renamed_to) => renamed_to.is_none(),
    };
    if !rename_ok {
        return Err(CatalogError::BadRename {
            annotation: row.annotation.clone(),
            target: row.target.clone(),
        });
    }
    Ok(())
}

fn describe(row: &Row) -> String {
    match (&row.verdict, &row.renamed_to) {
        (RowVerdict::Renamed, Some(to)) => format!("renamed to {to}"),
        (RowVerdict::Supported, _) => "supported".to_owned(),
        (RowVerdict::Unsupported, _) => "unsupported".to_owned(),
        (RowVerdict::Renamed, None) => "renamed".to_owned(),
    }
}

/// The Markdown table of `docs/migrate.md`: for every target with rows and every version
/// its rows change at, how many of the catalog's `nginx.ingress.kubernetes.io/` annotations
/// it supports, renames, lacks, and does not say. A test keeps the page equal to it.
pub fn support_table(catalog: &Catalog) -> String {
    const NGINX: &str = "nginx.ingress.kubernetes.io/";
    let keys = catalog.annotations(NGINX);
    let mut out = String::from(
        "| target | from version | supported | renamed | unsupported | unknown |\n|---|---|---|---|---|---|\n",
    );
    for id in catalog.targets() {
        let Some(target) = by_id(id) else { continue };
        for version in catalog.versions(id) {
            let mut counts = [0usize; 4];
            for key in &keys {
                let slot = match catalog.judge(key, target, version).verdict {
                    Verdict::Supported => 0,
                    Verdict::Renamed { .. } => 1,
                    Verdict::Unsupported => 2,
                    Verdict::Unknown => 3,
                };
                counts[slot] += 1;
            }
            let [supported, renamed, unsupported, unknown] = counts;
            out.push_str(&format!(
                "| {} | {version} | {supported} | {renamed} | {unsupported} | {unknown} |\n",
                target.name
            ));
        }
    }
    out.push_str(&format!(
        "\n{} annotations, catalog revision {}.\n",
        keys.len(),
        catalog.revision
    ));
    out
}

#[cfg(test)]
mod tests;
