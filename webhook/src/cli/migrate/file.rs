//! A StyrminMigration as `migrate plan -f` and `migrate start -f` read it: one object in a
//! YAML or JSON file, checked before anything is asked of the cluster, every error naming
//! the file, the document, and the step and change or the field at fault.

use crate::controllers::migration::step::{StepError, check_step};
use crate::crd::StyrminMigration;
use crate::crd::migration::{MAX_CHANGES, MAX_STEP_NAME, MAX_STEPS};
use crate::plan::{ChangeError, Proposal};

/// A migration whose steps are all level objects `plan` can apply.
#[derive(Clone, Debug)]
pub struct ValidMigration {
    pub migration: StyrminMigration,
    /// Each step's changes, in the order of the steps.
    pub steps: Vec<Proposal>,
}

impl ValidMigration {
    pub fn name(&self) -> &str {
        self.migration.metadata.name.as_deref().unwrap_or_default()
    }
}

/// What is wrong with a migration file.
#[derive(Debug, thiserror::Error)]
pub enum MigrationFileError {
    #[error("{origin}: not YAML or JSON")]
    Parse {
        origin: String,
        #[source]
        source: Box<serde_saphyr::Error>,
    },
    #[error("{origin}: no StyrminMigration in it")]
    Empty { origin: String },
    #[error("{origin}: {count} documents; one StyrminMigration per file")]
    Several { origin: String, count: usize },
    #[error(
        "{origin}, document {document}: {kind} is not a migration: expected a StyrminMigration of styrmin.io/v1alpha1"
    )]
    NotAMigration {
        origin: String,
        document: usize,
        kind: String,
    },
    #[error("{origin}, document {document}: {path}")]
    Invalid {
        origin: String,
        document: usize,
        path: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("{origin}, document {document}: metadata.name is missing")]
    NoName { origin: String, document: usize },
    #[error("{origin}, document {document}: spec.steps has {count} steps; {limits}")]
    StepCount {
        origin: String,
        document: usize,
        count: usize,
        limits: String,
    },
    #[error("{origin}, document {document}, step {step}: {problem}")]
    Step {
        origin: String,
        document: usize,
        /// `2 (cluster)`: its place from 1 and its name.
        step: String,
        problem: String,
    },
    #[error("{origin}, document {document}, step {step}, change {change}")]
    Change {
        origin: String,
        document: usize,
        step: String,
        change: usize,
        #[source]
        source: ChangeError,
    },
    #[error("{origin}, document {document}, step {step}, change {change}: {what}")]
    ChangeKey {
        origin: String,
        document: usize,
        step: String,
        change: usize,
        what: &'static str,
    },
}

/// Reads and checks the migration in `text`, read from `origin` (a file name).
pub fn read_migration(origin: &str, text: &str) -> Result<ValidMigration, MigrationFileError> {
    let documents: Vec<Option<serde_json::Value>> =
        serde_saphyr::from_multiple(text).map_err(|source| MigrationFileError::Parse {
            origin: origin.to_owned(),
            source: Box::new(source),
        })?;
    // Documents with nothing in them (a comment, a trailing `---`) are not counted.
    let mut found: Vec<(usize, serde_json::Value)> = documents
        .into_iter()
        .enumerate()
        .filter_map(|(index, document)| document.map(|d| (index + 1, d)))
        .collect();
    let (document, object) = match found.len() {
        0 => {
            return Err(MigrationFileError::Empty {
                origin: origin.to_owned(),
            });
        }
        1 => found.remove(0),
        count => {
            return Err(MigrationFileError::Several {
                origin: origin.to_owned(),
                count,
            });
        }
    };
    let text = |key: &str| object.get(key).and_then(|v| v.as_str()).unwrap_or("");
    let (api_version, kind) = (text("apiVersion"), text("kind"));
    let wanted = format!("{}/{}", crate::crd::GROUP, crate::crd::VERSION);
    if api_version != wanted || kind != "StyrminMigration" {
        return Err(MigrationFileError::NotAMigration {
            origin: origin.to_owned(),
            document,
            kind: format!("{api_version} {kind}").trim().to_owned(),
        });
    }
    let migration: StyrminMigration =
        serde_path_to_error::deserialize(&object).map_err(|e| MigrationFileError::Invalid {
            origin: origin.to_owned(),
            document,
            path: e.path().to_string(),
            source: e.into_inner(),
        })?;
    check(origin, document, migration)
}

/// The checks the types cannot make: a name, how many steps and changes, unique step
/// names of at most [`MAX_STEP_NAME`] bytes, and every change a level object the executor
/// can set ([`check_step`], the executor's own check).
fn check(
    origin: &str,
    document: usize,
    migration: StyrminMigration,
) -> Result<ValidMigration, MigrationFileError> {
    if migration.metadata.name.as_deref().is_none_or(str::is_empty) {
        return Err(MigrationFileError::NoName {
            origin: origin.to_owned(),
            document,
        });
    }
    let count = migration.spec.steps.len();
    if count == 0 || count > MAX_STEPS {
        return Err(MigrationFileError::StepCount {
            origin: origin.to_owned(),
            document,
            count,
            limits: format!("a migration has 1 to {MAX_STEPS}"),
        });
    }
    let mut steps = Vec::with_capacity(count);
    for (index, step) in migration.spec.steps.iter().enumerate() {
        let place = format!("{} ({})", index + 1, step.name);
        let problem = |problem: String| MigrationFileError::Step {
            origin: origin.to_owned(),
            document,
            step: place.clone(),
            problem,
        };
        if step.name.is_empty() {
            return Err(problem("the step has no name".to_owned()));
        }
        if step.name.len() > MAX_STEP_NAME {
            return Err(problem(format!(
                "the step's name is longer than {MAX_STEP_NAME} bytes"
            )));
        }
        if migration.spec.steps[..index]
            .iter()
            .any(|s| s.name == step.name)
        {
            return Err(problem(format!(
                "a step before it is also named {:?}; the status tells steps apart by name",
                step.name
            )));
        }
        if step.changes.is_empty() || step.changes.len() > MAX_CHANGES {
            return Err(problem(format!(
                "{} changes; a step has 1 to {MAX_CHANGES}",
                step.changes.len()
            )));
        }
        let checked = check_step(step).map_err(|error| match error {
            StepError::Change { index, source, .. } => MigrationFileError::Change {
                origin: origin.to_owned(),
                document,
                step: place.clone(),
                change: index,
                source,
            },
            StepError::Key { index, what, .. } => MigrationFileError::ChangeKey {
                origin: origin.to_owned(),
                document,
                step: place.clone(),
                change: index,
                what,
            },
            other => problem(other.to_string()),
        })?;
        steps.push(checked.proposal);
    }
    Ok(ValidMigration { migration, steps })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO_STEPS: &str = r#"
apiVersion: styrmin.io/v1alpha1
kind: StyrminMigration
metadata: {name: leave-nginx}
spec:
  steps:
  - name: staging
    changes:
    - {apiVersion: styrmin.io/v1alpha1, kind: StyrminEnvironment, metadata: {name: staging}, spec: {ingressClass: haproxy}}
  - name: cluster
    changes:
    - {apiVersion: styrmin.io/v1alpha1, kind: StyrminCluster, metadata: {name: default}, spec: {ingressClass: haproxy}}
    - {apiVersion: styrmin.io/v1alpha1, kind: StyrminDeployment, metadata: {name: styrmin-web1, namespace: styrmin-web1}, spec: {environmentId: prod, ingressClass: nginx}}
"#;

    /// The error's message with its causes, as the command prints it.
    fn error(text: &str) -> String {
        let error = read_migration("steps.yaml", text).expect_err("refused");
        let mut message = error.to_string();
        let mut source = std::error::Error::source(&error);
        while let Some(cause) = source {
            message.push_str(&format!(": {cause}"));
            source = cause.source();
        }
        message
    }

    #[test]
    fn a_valid_file_gives_each_steps_changes_in_order() {
        let valid = read_migration("steps.yaml", TWO_STEPS).unwrap();
        assert_eq!(valid.name(), "leave-nginx");
        assert_eq!(valid.steps.len(), 2);
        assert_eq!(valid.steps[0].environments.len(), 1);
        assert!(valid.steps[0].clusters.is_empty());
        assert_eq!(
            (
                valid.steps[1].clusters.len(),
                valid.steps[1].deployments.len()
            ),
            (1, 1)
        );
        // The same as JSON, and a comment-only document besides.
        let value: serde_json::Value = serde_saphyr::from_str(TWO_STEPS).unwrap();
        let json = format!("# a comment\n---\n{value}\n");
        let again = read_migration("steps.json", &json).unwrap();
        assert_eq!(again.migration, valid.migration);
    }

    #[test]
    fn a_file_that_is_not_one_migration_is_refused_naming_it() {
        assert!(error("{").starts_with("steps.yaml: not YAML or JSON: "));
        assert_eq!(
            error("# nothing\n"),
            "steps.yaml: no StyrminMigration in it"
        );
        assert_eq!(
            error(&format!("{TWO_STEPS}---\n{TWO_STEPS}")),
            "steps.yaml: 2 documents; one StyrminMigration per file"
        );
        assert_eq!(
            error("apiVersion: v1\nkind: ConfigMap\n"),
            "steps.yaml, document 1: v1 ConfigMap is not a migration: expected a StyrminMigration of styrmin.io/v1alpha1"
        );
        assert!(
            error(&TWO_STEPS.replace("name: leave-nginx", "labels: {}"))
                .starts_with("steps.yaml, document 1: metadata.name is missing")
        );
    }

    #[test]
    fn a_wrong_field_is_named_by_its_path() {
        let text = format!("{TWO_STEPS}  pace: {{batchSize: many}}\n");
        let message = error(&text);
        assert!(
            message.starts_with("steps.yaml, document 1: spec.pace.batchSize: invalid type"),
            "{message}"
        );
        let message = error(&TWO_STEPS.replace("  - name: cluster\n", "  - nom: cluster\n"));
        assert!(
            message.starts_with("steps.yaml, document 1: spec.steps[1]: missing field `name`"),
            "{message}"
        );
    }

    #[test]
    fn steps_and_changes_are_checked_each_named() {
        let none = TWO_STEPS.split("  steps:").next().unwrap().to_owned() + "  steps: []\n";
        assert_eq!(
            error(&none),
            "steps.yaml, document 1: spec.steps has 0 steps; a migration has 1 to 32"
        );
        assert_eq!(
            error(&TWO_STEPS.replace("name: cluster", "name: staging")),
            "steps.yaml, document 1, step 2 (staging): a step before it is also named \"staging\"; the status tells steps apart by name"
        );
        assert_eq!(
            error(&TWO_STEPS.replace("name: cluster", "name: ''")),
            "steps.yaml, document 1, step 2 (): the step has no name"
        );
        let empty = TWO_STEPS.replacen(
            "    changes:\n    - {apiVersion: styrmin.io/v1alpha1, kind: StyrminEnvironment, metadata: {name: staging}, spec: {ingressClass: haproxy}}\n",
            "    changes: []\n",
            1,
        );
        assert_eq!(
            error(&empty),
            "steps.yaml, document 1, step 1 (staging): 0 changes; a step has 1 to 64"
        );
        assert_eq!(
            error(&TWO_STEPS.replace("kind: StyrminCluster", "kind: ConfigMap")),
            "steps.yaml, document 1, step 2 (cluster), change 1: styrmin.io/v1alpha1 ConfigMap is not a level object: expected a StyrminCluster, StyrminEnvironment or StyrminDeployment of styrmin.io/v1alpha1"
        );
        // What the executor refuses, the file is refused for, with the same check.
        let deployment = TWO_STEPS.replace(", namespace: styrmin-web1}", "}");
        assert_eq!(
            error(&deployment),
            "steps.yaml, document 1, step 2 (cluster), change 2: no metadata.name, or a StyrminDeployment without metadata.namespace"
        );
        let migration: StyrminMigration = serde_saphyr::from_str(&deployment).unwrap();
        let executor = crate::controllers::migration::step::step_changes(&migration.spec.steps[1])
            .unwrap_err()
            .to_string();
        assert!(
            executor.ends_with("a StyrminDeployment without metadata.namespace"),
            "{executor}"
        );
        let long = TWO_STEPS.replace("name: cluster", &format!("name: {}", "c".repeat(64)));
        assert!(
            error(&long).ends_with("the step's name is longer than 63 bytes"),
            "{}",
            error(&long)
        );
        let message = error(&TWO_STEPS.replace("environmentId: prod", "environmentId: [prod]"));
        assert!(
            message.starts_with(
                "steps.yaml, document 1, step 2 (cluster), change 2: StyrminDeployment styrmin-web1: invalid type"
            ),
            "{message}"
        );
    }
}
