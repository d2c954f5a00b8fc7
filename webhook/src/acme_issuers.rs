//! cert-manager's Issuers and ClusterIssuers, as far as a class change concerns them: the
//! ingress class their ACME HTTP01 solvers name. cert-manager creates its own Ingress, with
//! that class, to answer each challenge; when the class is moved off or its controller
//! removed, the challenge is served by nobody and certificates stop renewing.
//!
//! [`AcmeIssuer::of`] reads a recorded object (pure); [`read`] lists them, only when the API
//! server serves cert-manager's API ([`ISSUER_CALLS`], which the ClusterRole grants).

use std::time::Duration;

use kube::api::{ApiResource, DynamicObject, ListParams};
use kube::core::GroupVersionKind;
use kube::{Api, Client};
use serde_json::Value;

use crate::kube_source::ApiCall;

/// cert-manager's API group and version.
pub const GROUP: &str = "cert-manager.io";
pub const VERSION: &str = "v1";

/// The two resources, each listed in every namespace.
pub const ISSUER_CALLS: [ApiCall; 2] = [
    ApiCall::Resource {
        group: GROUP,
        version: VERSION,
        resource: "issuers",
        verbs: &["list"],
        names: &[],
    },
    ApiCall::Resource {
        group: GROUP,
        version: VERSION,
        resource: "clusterissuers",
        verbs: &["list"],
        names: &[],
    },
];

/// An Issuer or ClusterIssuer with HTTP01 solvers that create Ingresses of a class.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AcmeIssuer {
    /// `Issuer` or `ClusterIssuer`.
    pub kind: &'static str,
    pub namespace: Option<String>,
    pub name: String,
    /// The classes its solvers name (`http01.ingress.ingressClassName` or `.class`), sorted,
    /// without repeats.
    pub classes: Vec<String>,
}

impl AcmeIssuer {
    /// What matters of an object of kind `kind`: `None` when none of its solvers is an
    /// HTTP01 Ingress solver with a class (a solver with `name` edits an existing Ingress,
    /// whose class Styrmin already plans).
    pub fn of(kind: &'static str, object: &Value) -> Option<AcmeIssuer> {
        let solvers = object.pointer("/spec/acme/solvers")?.as_array()?;
        let mut classes: Vec<String> = solvers
            .iter()
            .filter_map(|solver| solver.pointer("/http01/ingress"))
            .flat_map(|ingress| {
                ["ingressClassName", "class"]
                    .into_iter()
                    .filter_map(|key| ingress.get(key)?.as_str())
            })
            .filter(|class| !class.is_empty())
            .map(str::to_owned)
            .collect();
        classes.sort();
        classes.dedup();
        if classes.is_empty() {
            return None;
        }
        let text = |pointer| object.pointer(pointer).and_then(Value::as_str);
        Some(AcmeIssuer {
            kind,
            namespace: text("/metadata/namespace").map(str::to_owned),
            name: text("/metadata/name").unwrap_or_default().to_owned(),
            classes,
        })
    }

    /// `Issuer ns/name` or `ClusterIssuer name`.
    pub fn subject(&self) -> String {
        match &self.namespace {
            Some(namespace) => format!("{} {namespace}/{}", self.kind, self.name),
            None => format!("{} {}", self.kind, self.name),
        }
    }
}

/// How long one discovery or list call may take.
const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Every Issuer and ClusterIssuer with an HTTP01 Ingress solver; none when the API server
/// does not serve cert-manager's API.
pub async fn read(client: &Client) -> Result<Vec<AcmeIssuer>, kube::Error> {
    let group_version = format!("{GROUP}/{VERSION}");
    let served = match timed(client.list_api_group_resources(&group_version)).await {
        Ok(list) => list,
        Err(kube::Error::Api(status)) if status.code == 404 => return Ok(Vec::new()),
        Err(error) => return Err(error),
    };
    let mut issuers = Vec::new();
    for (kind, plural) in [("Issuer", "issuers"), ("ClusterIssuer", "clusterissuers")] {
        if !served.resources.iter().any(|r| r.name == plural) {
            continue;
        }
        let resource =
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, VERSION, kind), plural);
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        let mut params = ListParams::default().limit(500);
        loop {
            let page = timed(api.list(&params)).await?;
            for object in &page.items {
                let value = serde_json::to_value(object).map_err(kube::Error::SerdeError)?;
                issuers.extend(AcmeIssuer::of(kind, &value));
            }
            match page.metadata.continue_ {
                Some(token) if !token.is_empty() => params = params.continue_token(&token),
                _ => break,
            }
        }
    }
    Ok(issuers)
}

async fn timed<T>(call: impl Future<Output = Result<T, kube::Error>>) -> Result<T, kube::Error> {
    crate::kube_calls::bounded(READ_TIMEOUT, call).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recorded(file: &str) -> Vec<Value> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/apiserver/migration")
            .join(file);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{e}"));
        let list: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
        list["items"].as_array().cloned().unwrap_or_default()
    }

    #[test]
    fn the_classes_of_http01_ingress_solvers_and_nothing_else() {
        let issuers: Vec<AcmeIssuer> = recorded("issuers.list.json")
            .iter()
            .filter_map(|o| AcmeIssuer::of("Issuer", o))
            .chain(
                recorded("clusterissuers.list.json")
                    .iter()
                    .filter_map(|o| AcmeIssuer::of("ClusterIssuer", o)),
            )
            .collect();
        let found: Vec<(String, Vec<String>)> = issuers
            .iter()
            .map(|i| (i.subject(), i.classes.clone()))
            .collect();
        assert_eq!(
            found,
            [
                (
                    "Issuer styrmin-web2/letsencrypt".to_owned(),
                    vec!["nginx".to_owned()]
                ),
                (
                    "ClusterIssuer letsencrypt-prod".to_owned(),
                    vec!["haproxy".to_owned(), "nginx".to_owned()]
                ),
            ]
        );
    }
}
