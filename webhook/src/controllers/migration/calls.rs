//! The executor's calls to the API server, each bounded by [`CALL_TIMEOUT`]; the decisions
//! are in [`super::step`] and [`super::run`].

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::networking::v1::Ingress;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube::{Api, Client};
use serde_json::{Value, json};
use styrmin_ingress_rules::{CLASS_ANNOTATION, ClassFields};

use super::step::{LevelKey, LevelKind, ServedIngress};
use crate::crd::migration::{StyrminMigration, StyrminMigrationStatus};
use crate::crd::{GROUP, VERSION};
use crate::kube_calls::{CALL_TIMEOUT, NoAnswer, bounded};

pub use super::step::RECORD_BEFORE_ANNOTATION;

#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("{what}: {source}")]
    Api {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("{what}: no answer in {CALL_TIMEOUT:?}")]
    Timeout { what: String },
}

/// `call`, [`bounded`] by [`CALL_TIMEOUT`], its error saying `what` was asked.
pub async fn ask<T>(
    what: impl FnOnce() -> String,
    call: impl std::future::Future<Output = Result<T, kube::Error>>,
) -> Result<T, CallError> {
    bounded(CALL_TIMEOUT, call).await.map_err(|source| {
        if NoAnswer::is(&source) {
            CallError::Timeout { what: what() }
        } else {
            CallError::Api {
                what: what(),
                source,
            }
        }
    })
}

impl CallError {
    /// The status code the API server answered with, if it answered.
    pub fn code(&self) -> Option<u16> {
        match self {
            CallError::Api {
                source: kube::Error::Api(status),
                ..
            } => Some(status.code),
            _ => None,
        }
    }
}

/// `None` when the API server answered `code` (what the caller takes as done: a 404 to a
/// delete, a 409 to a create), else the result.
fn unless_answered<T>(code: u16, result: Result<T, CallError>) -> Result<Option<T>, CallError> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(error) if error.code() == Some(code) => Ok(None),
        Err(error) => Err(error),
    }
}

fn level_resource(key: &LevelKey) -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(GROUP, VERSION, key.kind.kind()))
}

/// The dynamic API of a level object.
fn level_api(client: &Client, key: &LevelKey) -> Api<DynamicObject> {
    let resource = level_resource(key);
    match &key.namespace {
        Some(namespace) if key.kind == LevelKind::Deployment => {
            Api::namespaced_with(client.clone(), namespace, &resource)
        }
        _ => Api::all_with(client.clone(), &resource),
    }
}

/// A level object as read: its spec, and the `resourceVersion` a write of it carries.
#[derive(Clone, Debug, PartialEq)]
pub struct ReadLevel {
    pub spec: Value,
    pub resource_version: Option<String>,
}

/// A level object's spec and version (`None`: it does not exist).
pub async fn read_level(client: &Client, key: &LevelKey) -> Result<Option<ReadLevel>, CallError> {
    let api = level_api(client, key);
    let object = ask(|| format!("reading {key}"), api.get_opt(&key.name)).await?;
    Ok(object.map(|o| ReadLevel {
        spec: o.data.get("spec").cloned().unwrap_or(json!({})),
        resource_version: o.metadata.resource_version,
    }))
}

/// A JSON patch that sets `value` at `path` of an object whose `resourceVersion` is
/// `version`: the API server refuses it with 409 Conflict when the object changed since.
pub fn versioned_patch(version: Option<&str>, path: &str, value: &Value) -> json_patch::Patch {
    let mut operations = Vec::new();
    if let Some(version) = version {
        operations
            .push(json!({"op": "replace", "path": "/metadata/resourceVersion", "value": version}));
    }
    operations.push(json!({"op": "add", "path": path, "value": value}));
    serde_json::from_value(Value::Array(operations)).unwrap_or_default()
}

/// Sets a level object's spec exactly (`null`s kept: a JSON patch, not a merge); `None`
/// deletes it. `version` is the `resourceVersion` it was read with (`None`: it did not
/// exist, and is created): a change since, or a creation since, fails with 409, and a
/// deletion since with 404, so that the caller reads it again instead of overwriting.
pub async fn write_level(
    client: &Client,
    key: &LevelKey,
    spec: Option<&Value>,
    version: Option<&str>,
) -> Result<(), CallError> {
    let api = level_api(client, key);
    let what = || format!("setting {key}");
    let Some(spec) = spec else {
        let params = DeleteParams {
            preconditions: Some(kube::api::Preconditions {
                resource_version: version.map(str::to_owned),
                uid: None,
            }),
            ..DeleteParams::default()
        };
        let deleted = ask(|| format!("deleting {key}"), api.delete(&key.name, &params)).await;
        return unless_answered(404, deleted).map(drop);
    };
    if version.is_some() {
        let patch = versioned_patch(version, "/spec", spec);
        return ask(
            what,
            api.patch(
                &key.name,
                &PatchParams::default(),
                &Patch::Json::<()>(patch),
            ),
        )
        .await
        .map(drop);
    }
    let mut object = DynamicObject::new(&key.name, &level_resource(key));
    object.metadata.namespace = key.namespace.clone();
    object.data = json!({"spec": spec});
    ask(what, api.create(&PostParams::default(), &object))
        .await
        .map(drop)
}

fn deployment_api(client: &Client, id: &str) -> Api<DynamicObject> {
    level_api(
        client,
        &LevelKey {
            kind: LevelKind::Deployment,
            namespace: Some(format!("styrmin-{id}")),
            name: format!("styrmin-{id}"),
        },
    )
}

/// How often a record write that meets a newer `resourceVersion` reads the deployment again.
const RECORD_TRIES: usize = 3;

/// Sets a deployment's record (`status.lastDeployed`), first keeping the one it replaces in
/// [`RECORD_BEFORE_ANNOTATION`] (unless a migration already keeps one there). Each patch
/// carries the `resourceVersion` read: a deployment written meanwhile (a redeploy that sets
/// its record) is read again, and left alone when its record is already the target.
pub async fn set_record(
    client: &Client,
    id: &str,
    migration: &str,
    record: &Value,
) -> Result<(), CallError> {
    let mut tries = 0;
    loop {
        tries += 1;
        match set_record_once(client, id, migration, record).await {
            Err(error) if error.code() == Some(409) && tries < RECORD_TRIES => continue,
            other => return other,
        }
    }
}

async fn set_record_once(
    client: &Client,
    id: &str,
    migration: &str,
    record: &Value,
) -> Result<(), CallError> {
    let api = deployment_api(client, id);
    let name = format!("styrmin-{id}");
    let what = || format!("setting the record of deployment {id}");
    let object = ask(what, api.get(&name)).await?;
    let current = object.data.pointer("/status/lastDeployed").cloned();
    if current.as_ref() == Some(record) {
        return Ok(());
    }
    let mut version = object.metadata.resource_version.clone();
    let kept = object
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(RECORD_BEFORE_ANNOTATION));
    if !kept {
        let before = json!({"migration": migration, "lastDeployed": current}).to_string();
        let patch = json!({"metadata": {
            "resourceVersion": version,
            "annotations": {RECORD_BEFORE_ANNOTATION: before},
        }});
        let patched = ask(
            what,
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)),
        )
        .await?;
        version = patched.metadata.resource_version;
    }
    let patch =
        json!({"metadata": {"resourceVersion": version}, "status": {"lastDeployed": record}});
    ask(
        what,
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch)),
    )
    .await
    .map(|_| ())
}

/// Puts back the record a migration replaced, and forgets it (nothing kept: nothing to do).
pub async fn restore_record(client: &Client, id: &str) -> Result<(), CallError> {
    let api = deployment_api(client, id);
    let name = format!("styrmin-{id}");
    let what = || format!("restoring the record of deployment {id}");
    let object = ask(what, api.get(&name)).await?;
    let Some(before) = object
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(RECORD_BEFORE_ANNOTATION))
        .and_then(|text| serde_json::from_str::<Value>(text).ok())
    else {
        return Ok(());
    };
    // A merge patch's null removes the record: it was not there before. The version read
    // makes a record written meanwhile a conflict, read again by the next pass.
    let patch = json!({
        "metadata": {"resourceVersion": object.metadata.resource_version},
        "status": {"lastDeployed": before["lastDeployed"]},
    });
    ask(
        what,
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch)),
    )
    .await?;
    forget_record(client, id).await
}

/// Drops [`RECORD_BEFORE_ANNOTATION`] (a step that is done keeps nothing to put back).
pub async fn forget_record(client: &Client, id: &str) -> Result<(), CallError> {
    let api = deployment_api(client, id);
    let patch = json!({"metadata": {"annotations": {RECORD_BEFORE_ANNOTATION: null}}});
    ask(
        || format!("forgetting the kept record of deployment {id}"),
        api.patch(
            &format!("styrmin-{id}"),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        ),
    )
    .await
    .map(|_| ())
}

/// Writes an Ingress back as it is (a replace with its `resourceVersion`), so that admission
/// applies the rules to it; returns its class fields as stored.
/// With `dry_run`, admission answers and nothing is stored: what a write would give.
pub async fn write_back(
    client: &Client,
    namespace: &str,
    name: &str,
    dry_run: bool,
) -> Result<ClassFields, CallError> {
    let api: Api<Ingress> = Api::namespaced(client.clone(), namespace);
    let what = || format!("writing Ingress {namespace}/{name}");
    let ingress = ask(what, api.get(name)).await?;
    let params = PostParams {
        dry_run,
        ..PostParams::default()
    };
    let stored = ask(what, api.replace(name, &params, &ingress)).await?;
    Ok(class_fields(&stored))
}

/// The class fields of an Ingress.
pub fn class_fields(ingress: &Ingress) -> ClassFields {
    ClassFields {
        ingress_class_name: ingress
            .spec
            .as_ref()
            .and_then(|s| s.ingress_class_name.clone()),
        class_annotation: ingress
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(CLASS_ANNOTATION))
            .cloned(),
    }
}

/// What the gates read of an Ingress.
pub fn served_ingress(ingress: &Ingress) -> ServedIngress {
    let addresses = ingress
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|a| a.ip.clone().or_else(|| a.hostname.clone()))
        .collect();
    let hosts = ingress
        .spec
        .as_ref()
        .and_then(|s| s.rules.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|r| r.host.clone())
        .collect();
    ServedIngress {
        fields: class_fields(ingress),
        addresses,
        hosts,
    }
}

/// The Ingresses of a namespace, by name, as the gates read them.
pub async fn served_in(
    client: &Client,
    namespace: &str,
) -> Result<BTreeMap<String, ServedIngress>, CallError> {
    let api: Api<Ingress> = Api::namespaced(client.clone(), namespace);
    let list = ask(
        || format!("listing the Ingresses of {namespace}"),
        api.list(&kube::api::ListParams::default()),
    )
    .await?;
    Ok(list
        .items
        .iter()
        .map(|i| {
            (
                i.metadata.name.clone().unwrap_or_default(),
                served_ingress(i),
            )
        })
        .collect())
}

/// The Ingresses of each of `namespaces`, by namespace and name, as the gates read them.
pub async fn served_in_each<'a>(
    client: &Client,
    namespaces: impl IntoIterator<Item = &'a str>,
) -> Result<BTreeMap<&'a str, BTreeMap<String, ServedIngress>>, CallError> {
    let mut read = BTreeMap::new();
    for namespace in namespaces
        .into_iter()
        .collect::<std::collections::BTreeSet<_>>()
    {
        read.insert(namespace, served_in(client, namespace).await?);
    }
    Ok(read)
}

/// Creates the canary Ingress of `class` in `namespace` (kept if it exists).
pub async fn create_canary(
    client: &Client,
    namespace: &str,
    name: &str,
    class: &str,
    host: &str,
) -> Result<(), CallError> {
    let api: Api<Ingress> = Api::namespaced(client.clone(), namespace);
    let ingress: Ingress = serde_json::from_value(json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {
            "name": name,
            "labels": {"app.kubernetes.io/managed-by": "styrmin-webhook", "styrmin.io/canary": "true"},
        },
        "spec": {
            "ingressClassName": class,
            "rules": [{"host": host, "http": {"paths": [{
                "path": "/", "pathType": "Prefix",
                "backend": {"service": {"name": "styrmin-canary", "port": {"number": 80}}},
            }]}}],
        },
    }))
    .unwrap_or_default();
    let created = ask(
        || format!("creating the canary Ingress {namespace}/{name}"),
        api.create(&PostParams::default(), &ingress),
    )
    .await;
    unless_answered(409, created).map(drop)
}

/// The canary as the gates read it (`None`: gone).
pub async fn read_canary(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<Option<ServedIngress>, CallError> {
    let api: Api<Ingress> = Api::namespaced(client.clone(), namespace);
    let found = ask(
        || format!("reading the canary Ingress {namespace}/{name}"),
        api.get_opt(name),
    )
    .await?;
    Ok(found.as_ref().map(served_ingress))
}

pub async fn delete_canary(client: &Client, namespace: &str, name: &str) -> Result<(), CallError> {
    let api: Api<Ingress> = Api::namespaced(client.clone(), namespace);
    let deleted = ask(
        || format!("deleting the canary Ingress {namespace}/{name}"),
        api.delete(name, &DeleteParams::default()),
    )
    .await;
    unless_answered(404, deleted).map(drop)
}

/// The spec of the Lease `namespace/name` (`None`: there is none), by its name.
pub async fn read_lease(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<Option<k8s_openapi::api::coordination::v1::LeaseSpec>, CallError> {
    let api: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client.clone(), namespace);
    let found = ask(
        || format!("reading the Lease {namespace}/{name}"),
        api.get_opt(name),
    )
    .await?;
    Ok(found.map(|lease| lease.spec.unwrap_or_default()))
}

/// The migrations, oldest first.
pub async fn list_migrations(client: &Client) -> Result<Vec<StyrminMigration>, CallError> {
    let api: Api<StyrminMigration> = Api::all(client.clone());
    let mut list = ask(
        || "listing the StyrminMigrations".to_owned(),
        api.list(&kube::api::ListParams::default()),
    )
    .await?
    .items;
    list.sort_by(|a, b| {
        (&a.metadata.creation_timestamp, &a.metadata.name)
            .cmp(&(&b.metadata.creation_timestamp, &b.metadata.name))
    });
    Ok(list)
}

pub async fn read_migration(
    client: &Client,
    name: &str,
) -> Result<Option<StyrminMigration>, CallError> {
    let api: Api<StyrminMigration> = Api::all(client.clone());
    ask(
        || format!("reading StyrminMigration {name}"),
        api.get_opt(name),
    )
    .await
}

/// Replaces a migration's status, if the migration still has the `resourceVersion`
/// `version` (a 409 otherwise); the migration as stored after.
pub async fn write_status(
    client: &Client,
    name: &str,
    version: Option<&str>,
    status: &StyrminMigrationStatus,
) -> Result<StyrminMigration, CallError> {
    let api: Api<StyrminMigration> = Api::all(client.clone());
    // The whole status replaced: a merge patch would keep a list or field left out.
    let patch = versioned_patch(
        version,
        "/status",
        &serde_json::to_value(status).unwrap_or_default(),
    );
    ask(
        || format!("writing the status of StyrminMigration {name}"),
        api.patch_status(name, &PatchParams::default(), &Patch::Json::<()>(patch)),
    )
    .await
}

/// `GET http://ADDRESS:PORT/PATH` with `Host: host`: the status it answers.
pub async fn probe(
    address: &str,
    port: u16,
    host: &str,
    path: &str,
    timeout: Duration,
) -> Result<u16, String> {
    let request = async {
        let stream = tokio::net::TcpStream::connect((address, port))
            .await
            .map_err(|e| format!("connecting to {address}:{port}: {e}"))?;
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .map_err(|e| format!("HTTP to {address}:{port}: {e}"))?;
        tokio::spawn(connection);
        let request = http::Request::get(path)
            .header(http::header::HOST, host)
            .header(http::header::USER_AGENT, "styrmin-webhook-migration-probe")
            .body(http_body_util::Empty::<hyper::body::Bytes>::new())
            .map_err(|e| format!("a request for {host}{path}: {e}"))?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| format!("GET {host}{path} through {address}:{port}: {e}"))?;
        Ok(response.status().as_u16())
    };
    tokio::time::timeout(timeout, request)
        .await
        .unwrap_or_else(|_| {
            Err(format!(
                "GET {host}{path} through {address}:{port}: no answer in {timeout:?}"
            ))
        })
}

/// Sets `spec.paused` of a migration (a gate that pauses it); the migration after.
pub async fn set_paused(client: &Client, name: &str) -> Result<StyrminMigration, CallError> {
    let api: Api<StyrminMigration> = Api::all(client.clone());
    let patch = crate::crd::migration::Switch::Pause.patch();
    ask(
        || format!("pausing StyrminMigration {name}"),
        api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)),
    )
    .await
}
