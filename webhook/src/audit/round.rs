//! A complete audit as the cluster-wide controllers receive it (the PolicyReport writer):
//! the findings, and the objects they can name, with their uids (a report is owned by its
//! object) and resource versions (a report says which version it judged).
//!
//! The kube source sends a new round only when something can have changed: the findings, or
//! a watched object (a new uid or resource version under the same name). A steady cluster
//! sends none, and its controllers have nothing to do.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::watch;

use super::CompletedAudit;
use super::objects::{AliasService, AuditedIngress};
use crate::crd::StyrminDeployment;

/// An object a finding can be about, by kind, namespace and name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectRef<'a> {
    pub kind: &'static str,
    pub namespace: &'a str,
    pub name: &'a str,
}

/// What a report needs of its object besides its name: the uid (the owner reference; an
/// object without one gets no report).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Subject<'a> {
    pub uid: &'a str,
}

/// One complete audit and the objects it read.
#[derive(Debug)]
pub struct AuditRound {
    pub audit: Arc<CompletedAudit>,
    pub ingresses: Vec<Arc<AuditedIngress>>,
    pub aliases: Vec<Arc<AliasService>>,
    pub deployments: Vec<Arc<StyrminDeployment>>,
    /// How many times the watches have listed again since the start: a controller that
    /// keeps its own record of the cluster checks it against the API server after a relist.
    pub relists: u64,
}

/// Where the rounds go: the last one (none before the first audit).
pub type AuditFeed = watch::Receiver<Option<Arc<AuditRound>>>;

impl AuditRound {
    /// Every object of the round with a uid, by kind, namespace and name.
    pub fn subjects(&self) -> HashMap<ObjectRef<'_>, Subject<'_>> {
        let mut subjects = HashMap::with_capacity(
            self.ingresses.len() + self.aliases.len() + self.deployments.len(),
        );
        let ingresses = self.ingresses.iter().filter_map(|i| {
            Some((
                ObjectRef {
                    kind: "Ingress",
                    namespace: i.namespace(),
                    name: i.name(),
                },
                Subject { uid: i.uid()? },
            ))
        });
        let metas = self.aliases.iter().map(|a| ("Service", &a.metadata)).chain(
            self.deployments
                .iter()
                .map(|d| ("StyrminDeployment", &d.metadata)),
        );
        let others = metas.filter_map(|(kind, meta)| {
            Some((
                ObjectRef {
                    kind,
                    namespace: meta.namespace.as_deref().unwrap_or(""),
                    name: meta.name.as_deref().unwrap_or(""),
                },
                Subject {
                    uid: meta.uid.as_deref()?,
                },
            ))
        });
        subjects.extend(ingresses.chain(others));
        subjects
    }
}
