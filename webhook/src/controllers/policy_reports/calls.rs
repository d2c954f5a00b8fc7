//! The writer's calls to the API server, each bounded in time: list its own reports
//! (metadata only, paged), apply one, delete one. Nothing here decides anything.

use std::time::Duration;

use kube::api::{ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::{Api, Client};
use serde_json::Value;

use super::content::{
    DIGEST_ANNOTATION, Digest, FIRST_SEEN_ANNOTATION, FirstSeen, MANAGED_BY, MANAGED_BY_LABEL,
    ReportApi, ReportKey, owned_through_a_selector,
};
use super::ledger::KnownReport;
use crate::kube_calls::bounded;

/// The field manager of every report write.
pub const FIELD_MANAGER: &str = "styrmin-webhook";
/// Reports listed a page at a time.
pub const PAGE_SIZE: u32 = 500;

/// The report API's resource, for dynamic calls.
fn resource(api: ReportApi) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(api.group(), api.version(), api.kind()),
        api.plural(),
    )
}

/// Whether the API server serves `api`'s report resource (API discovery).
pub async fn serves(client: &Client, api: ReportApi, limit: Duration) -> Result<bool, kube::Error> {
    let group_version = format!("{}/{}", api.group(), api.version());
    match bounded(limit, client.list_api_group_resources(&group_version)).await {
        Ok(list) => Ok(list.resources.iter().any(|r| r.name == api.plural())),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
        Err(error) => Err(error),
    }
}

/// What the ledger keeps of a report, from its metadata.
fn known(meta: &kube::core::ObjectMeta) -> KnownReport {
    let annotation = |name| meta.annotations.as_ref().and_then(|a| a.get(name));
    KnownReport {
        digest: annotation(DIGEST_ANNOTATION).and_then(|d| Digest::parse(d)),
        resource_version: meta.resource_version.as_deref().map(Box::from),
        first_seen: annotation(FIRST_SEEN_ANNOTATION)
            .map(|t| FirstSeen::parse(t))
            .unwrap_or_default(),
        selected_owner: meta
            .owner_references
            .iter()
            .flatten()
            .any(|owner| owned_through_a_selector(&owner.kind)),
    }
}

/// One page of the reports this webhook wrote (label `app.kubernetes.io/managed-by`,
/// metadata only), and the token of the next page (`None`: the last).
pub async fn list_page(
    client: &Client,
    api: ReportApi,
    continue_token: Option<&str>,
    limit: Duration,
) -> Result<(Vec<(ReportKey, KnownReport)>, Option<String>), kube::Error> {
    let reports: Api<DynamicObject> = Api::all_with(client.clone(), &resource(api));
    let mut params = ListParams::default()
        .labels(&format!("{MANAGED_BY_LABEL}={MANAGED_BY}"))
        .limit(PAGE_SIZE);
    if let Some(token) = continue_token {
        params = params.continue_token(token);
    }
    let page = bounded(limit, reports.list_metadata(&params)).await?;
    let listed = page
        .items
        .into_iter()
        .filter_map(|item| {
            let meta = item.metadata;
            let report = known(&meta);
            Some((
                ReportKey {
                    namespace: meta.namespace?,
                    name: meta.name?,
                },
                report,
            ))
        })
        .collect();
    Ok((listed, page.metadata.continue_.filter(|t| !t.is_empty())))
}

/// Server-side apply of `body`, forced (the webhook owns these objects); the resource
/// version the report is left at.
pub async fn apply(
    client: &Client,
    api: ReportApi,
    key: &ReportKey,
    body: &Value,
    limit: Duration,
) -> Result<Option<Box<str>>, kube::Error> {
    let reports: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &key.namespace, &resource(api));
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let written = bounded(
        limit,
        reports.patch(&key.name, &params, &Patch::Apply(body)),
    )
    .await?;
    Ok(written.metadata.resource_version.map(Box::from))
}

/// Deletes a report; one already gone counts as deleted.
pub async fn delete(
    client: &Client,
    api: ReportApi,
    key: &ReportKey,
    limit: Duration,
) -> Result<(), kube::Error> {
    let reports: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &key.namespace, &resource(api));
    match bounded(limit, reports.delete(&key.name, &DeleteParams::default())).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(error) => Err(error),
    }
}
