//! The executor's events against a real kube-runtime recorder and the fake API server.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use styrmin_fake_apiserver::FakeApiServer;
use styrmin_test_support::recorded_cluster;

use super::step_event;

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
