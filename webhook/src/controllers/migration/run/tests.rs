//! The executor's calls through a real client against the fake API server: its events
//! (through kube-runtime's recorder) and its writes that carry a `resourceVersion`.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use serde_json::json;
use styrmin_fake_apiserver::FakeApiServer;
use styrmin_test_support::recorded_cluster;

use super::step_event;
use crate::controllers::migration::calls;
use crate::controllers::migration::step::{LevelKey, LevelKind};
use crate::crd::migration::{MigrationPhase, StyrminMigrationStatus};

const EVENTS: &str = "/apis/events.k8s.io/v1/";

fn reference(name: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some("styrmin.io/v1alpha1".to_owned()),
        kind: Some("StyrminMigration".to_owned()),
        name: Some(name.to_owned()),
        uid: Some(format!("uid-{name}")),
        ..ObjectReference::default()
    }
}

/// The stored events of the migration `name`: each one's note and series count (1 when it
/// has no series).
fn stored(api: &FakeApiServer, name: &str) -> Vec<(String, i64)> {
    let mut found: Vec<(String, i64)> = api
        .stored(EVENTS)
        .into_values()
        .filter(|e| e["regarding"]["name"] == name)
        .map(|e| {
            (
                e["note"].as_str().unwrap_or_default().to_owned(),
                e["series"]["count"].as_i64().unwrap_or(1),
            )
        })
        .collect();
    found.sort();
    found
}

#[tokio::test]
async fn each_steps_events_reach_the_api_server_with_their_own_note() {
    let api = FakeApiServer::scripted();
    api.accept_writes(EVENTS);
    let recorder = Recorder::new(
        recorded_cluster::client(&api),
        Reporter {
            controller: "styrmin-webhook".to_owned(),
            instance: Some("test".to_owned()),
        },
    );
    let staging = "step \"staging\": levels set, moving 3 Ingresses";
    let cluster = "step \"cluster\": levels set, moving 5 Ingresses";
    let publish = |event: Event, name: &'static str| {
        let recorder = &recorder;
        async move { recorder.publish(&event, &reference(name)).await.unwrap() }
    };
    for (step, note) in [
        ("staging", staging),
        ("cluster", cluster),
        ("staging", staging),
    ] {
        publish(
            step_event(EventType::Normal, "LevelsSet", Some(step), note),
            "m",
        )
        .await;
    }
    // Each step's event is stored with its note; the same event told again is counted.
    assert_eq!(
        stored(&api, "m"),
        [(cluster.to_owned(), 1), (staging.to_owned(), 2)]
    );

    // The test can fail: with one action for every event, as the recorder is given it, the
    // second step's event only counts the first one's again and its note is lost.
    for note in [staging, cluster] {
        let event = Event {
            action: "Migrate".to_owned(),
            ..step_event(EventType::Normal, "LevelsSet", None, note)
        };
        publish(event, "one-action").await;
    }
    assert_eq!(stored(&api, "one-action"), [(staging.to_owned(), 2)]);
}

const STYRMIN: &str = "/apis/styrmin.io/";

/// Stores `object` at `path` as another client would, its `resourceVersion` bumped.
fn written_by_someone_else(
    api: &FakeApiServer,
    path: &str,
    change: impl FnOnce(&mut serde_json::Value),
) {
    let mut object = api.stored(path)[path].clone();
    change(&mut object);
    api.put_stored(path, object);
}

#[tokio::test]
async fn a_status_written_with_an_old_version_is_refused_and_not_stored() {
    let api = FakeApiServer::scripted();
    api.accept_writes(STYRMIN);
    let path = "/apis/styrmin.io/v1alpha1/styrminmigrations/m";
    api.put_stored(
        path,
        json!({"apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminMigration",
               "metadata": {"name": "m"},
               "spec": {"steps": [{"name": "staging", "changes": [
                   {"apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminEnvironment",
                    "metadata": {"name": "staging"}, "spec": {"ingressClass": "haproxy"}}]}]}}),
    );
    let client = recorded_cluster::client(&api);
    let read = calls::read_migration(&client, "m").await.unwrap().unwrap();
    let ours = StyrminMigrationStatus {
        phase: Some(MigrationPhase::Running),
        ..StyrminMigrationStatus::default()
    };
    // Another writer stores a status after the read: the write with the version read fails.
    written_by_someone_else(&api, path, |m| m["status"] = json!({"phase": "Paused"}));
    let version = read.metadata.resource_version.as_deref();
    let refused = calls::write_status(&client, "m", version, &ours)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Some(409), "{refused}");
    assert_eq!(api.stored(path)[path]["status"]["phase"], "Paused");
    // Read again, it is written; the answer is the migration as stored, with its new version.
    let again = calls::read_migration(&client, "m").await.unwrap().unwrap();
    let version = again.metadata.resource_version.as_deref();
    let written = calls::write_status(&client, "m", version, &ours)
        .await
        .unwrap();
    assert_eq!(written.status.unwrap().phase, Some(MigrationPhase::Running));
    assert_ne!(written.metadata.resource_version.as_deref(), version);
    let write = api.writes().pop().unwrap();
    assert_eq!(write.path, format!("{path}/status"));
    assert_eq!(
        write.header("content-type"),
        Some("application/json-patch+json")
    );
}

#[tokio::test]
async fn a_level_changed_since_it_was_read_is_not_overwritten() {
    let api = FakeApiServer::scripted();
    api.accept_writes(STYRMIN);
    let path = "/apis/styrmin.io/v1alpha1/styrminenvironments/staging";
    api.put_stored(
        path,
        json!({"apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminEnvironment",
               "metadata": {"name": "staging"}, "spec": {"ingressClass": "nginx"}}),
    );
    let client = recorded_cluster::client(&api);
    let key = LevelKey {
        kind: LevelKind::Environment,
        namespace: None,
        name: "staging".to_owned(),
    };
    let haproxy = json!({"ingressClass": "haproxy"});
    let read = calls::read_level(&client, &key).await.unwrap().unwrap();
    assert_eq!(read.spec, json!({"ingressClass": "nginx"}));
    written_by_someone_else(&api, path, |e| e["spec"]["ingressClass"] = json!("traefik"));
    let old = read.resource_version.as_deref();
    let refused = calls::write_level(&client, &key, Some(&haproxy), old)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Some(409), "{refused}");
    assert_eq!(api.stored(path)[path]["spec"]["ingressClass"], "traefik");
    let read = calls::read_level(&client, &key).await.unwrap().unwrap();
    calls::write_level(
        &client,
        &key,
        Some(&haproxy),
        read.resource_version.as_deref(),
    )
    .await
    .unwrap();
    assert_eq!(api.stored(path)[path]["spec"], haproxy);
    // A delete with a version that is old now conflicts and leaves it.
    let refused = calls::write_level(&client, &key, None, read.resource_version.as_deref())
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Some(409), "{refused}");
    assert_eq!(api.stored(path).len(), 1);
    // Read as absent, it is created; created meanwhile by someone else, that conflicts.
    let absent = LevelKey {
        name: "prod".to_owned(),
        ..key.clone()
    };
    calls::write_level(&client, &absent, Some(&haproxy), None)
        .await
        .unwrap();
    let again = calls::write_level(&client, &absent, Some(&haproxy), None)
        .await
        .unwrap_err();
    assert_eq!(again.code(), Some(409), "{again}");
}

#[tokio::test]
async fn a_record_is_written_with_the_version_read_and_put_back() {
    let api = FakeApiServer::scripted();
    api.accept_writes(STYRMIN);
    let path = "/apis/styrmin.io/v1alpha1/namespaces/styrmin-web1/styrmindeployments/styrmin-web1";
    api.put_stored(
        path,
        json!({"apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminDeployment",
               "metadata": {"name": "styrmin-web1", "namespace": "styrmin-web1"},
               "spec": {"environmentId": "staging"},
               "status": {"lastDeployed": {"ingressClass": "nginx"}}}),
    );
    let client = recorded_cluster::client(&api);
    let haproxy = json!({"ingressClass": "haproxy"});
    calls::set_record(&client, "web1", "leave-nginx", &haproxy)
        .await
        .unwrap();
    let stored = &api.stored(path)[path];
    assert_eq!(stored["status"]["lastDeployed"], haproxy);
    let kept: serde_json::Value = serde_json::from_str(
        stored["metadata"]["annotations"][calls::RECORD_BEFORE_ANNOTATION]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(kept["lastDeployed"], json!({"ingressClass": "nginx"}));
    // Both patches named the version they were made on.
    let patches: Vec<serde_json::Value> = api
        .writes()
        .iter()
        .map(|w| serde_json::from_str(&w.body).unwrap())
        .collect();
    assert_eq!(patches.len(), 2);
    assert!(
        patches
            .iter()
            .all(|p| p["metadata"]["resourceVersion"].is_string()),
        "{patches:?}"
    );
    // Already at its target: nothing is written.
    calls::set_record(&client, "web1", "leave-nginx", &haproxy)
        .await
        .unwrap();
    assert_eq!(api.writes().len(), 2);
    calls::restore_record(&client, "web1").await.unwrap();
    let stored = &api.stored(path)[path];
    assert_eq!(
        stored["status"]["lastDeployed"],
        json!({"ingressClass": "nginx"})
    );
    assert!(stored["metadata"]["annotations"][calls::RECORD_BEFORE_ANNOTATION].is_null());
}
