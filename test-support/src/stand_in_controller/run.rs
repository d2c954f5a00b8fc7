//! The API server side of one class's controller: the watch that feeds the cache, and the
//! status writes it asks for, a few at a time.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::networking::v1::Ingress;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use tokio::sync::{Mutex as AsyncMutex, mpsc};

use super::shared::Shared;
use super::status::IngressKey;

/// Status writes in flight at once: enough to settle 10,000 Ingresses in seconds, few
/// enough not to crowd the API server's other clients.
pub const WRITERS: usize = 16;
/// How long a failed write waits before it is tried again, with the Ingress as it is then.
const RETRY: Duration = Duration::from_secs(1);

/// The queue of Ingresses whose status may need a write.
pub type Queue = mpsc::UnboundedSender<IngressKey>;

/// Queues `key` unless it already waits: the writer reads the Ingress when its turn comes.
pub fn enqueue(shared: &Shared, queue: &Queue, key: IngressKey) {
    if shared.lock().queued.insert(key.clone()) {
        // The receiver goes only with the writers, when the whole controller stops.
        let _ = queue.send(key);
    }
}

/// Watches every Ingress of the cluster into the cache until aborted; the watcher retries
/// with kube-runtime's default backoff on errors.
pub async fn watch(client: kube::Client, shared: Arc<Shared>, queue: Queue) {
    let mut events = watcher(Api::<Ingress>::all(client), watcher::Config::default())
        .default_backoff()
        .boxed();
    while let Some(event) = events.next().await {
        match event {
            Ok(event) => {
                let keys = shared.lock().cache.apply(event);
                for key in keys {
                    enqueue(&shared, &queue, key);
                }
            }
            Err(error) => {
                tracing::warn!(class = %shared.class, %error, "watching Ingresses");
            }
        }
    }
}

/// One of [`WRITERS`]: takes the next queued Ingress and writes its status if it still
/// needs it.
pub async fn write_statuses(
    client: kube::Client,
    shared: Arc<Shared>,
    receiver: Arc<AsyncMutex<mpsc::UnboundedReceiver<IngressKey>>>,
    queue: Queue,
) {
    loop {
        let Some(key) = receiver.lock().await.recv().await else {
            return;
        };
        let patch = {
            let mut state = shared.lock();
            state.queued.remove(&key);
            state.cache.patch_for(&key)
        };
        let Some(patch) = patch else { continue };
        let api = Api::<Ingress>::namespaced(client.clone(), &key.namespace);
        let written = api
            .patch_status(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await;
        match written {
            Ok(_) => {
                shared.counters.patches.fetch_add(1, Ordering::Relaxed);
            }
            // Deleted meanwhile: its Delete event follows.
            Err(kube::Error::Api(status)) if status.is_not_found() => {}
            // Changed since it was read: the watch brings the new version, and the cache
            // queues it again if it still needs a write.
            Err(kube::Error::Api(status)) if status.is_conflict() => {
                shared.counters.conflicts.fetch_add(1, Ordering::Relaxed);
            }
            Err(error) => {
                shared.counters.patch_errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(class = %shared.class, ingress = %key, %error, "writing the status");
                tokio::time::sleep(RETRY).await;
                enqueue(&shared, &queue, key);
            }
        }
    }
}
