//! Creating the benchmarks' Ingresses: fast, with parallel requests rather than one
//! `kubectl` per object.

use anyhow::{Context as _, Result};
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::networking::v1::Ingress;
use kube::api::{Api, PostParams};
use serde_json::json;

/// One Ingress to create: its namespace, its class (in both fields, as admission writes
/// them) and its host; it is named `web-<i>`.
#[derive(Clone, Debug)]
pub struct PlannedIngress {
    pub namespace: String,
    pub class: &'static str,
    pub host: String,
}

/// Creates `web-0` to `web-<count-1>`, `plan(i)` saying each one's namespace, class and host,
/// `parallel` requests at a time.
pub async fn create_ingresses(
    client: &kube::Client,
    count: usize,
    parallel: usize,
    plan: impl Fn(usize) -> PlannedIngress,
) -> Result<()> {
    let params = PostParams::default();
    futures::stream::iter(0..count)
        .map(|i| {
            let PlannedIngress {
                namespace,
                class,
                host,
            } = plan(i);
            let api: Api<Ingress> = Api::namespaced(client.clone(), &namespace);
            let ingress = serde_json::from_value::<Ingress>(json!({
                "metadata": {"name": format!("web-{i}"),
                             "annotations": {"kubernetes.io/ingress.class": class}},
                "spec": {"ingressClassName": class,
                         "rules": [{"host": host, "http": {"paths": [
                             {"path": "/", "pathType": "Prefix",
                              "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}
            }))
            .map_err(anyhow::Error::from);
            let params = &params;
            async move {
                api.create(params, &ingress?)
                    .await
                    .with_context(|| format!("creating Ingress web-{i}"))
            }
        })
        .buffer_unordered(parallel)
        .try_for_each(|_| async { Ok(()) })
        .await
}
