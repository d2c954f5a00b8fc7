//! `migrate start`, `status`, `pause`, `resume` and `abort` against the stand-in API server,
//! which keeps the StyrminMigrations written to it (create, get, merge patch) and plays a
//! watch of one; and `migrate plan`'s steps as a pure function of the recorded migration
//! cluster (`tests/data/apiserver/migration/`).

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use styrmin_fake_apiserver::{FakeApiServer, WatchItem};
use styrmin_test_support::recorded_cluster::{client, recorded};
use styrmin_webhook::cli::migrate::calls::{self, MigrateCallError, Switch};
use styrmin_webhook::cli::migrate::file::read_migration;
use styrmin_webhook::cli::migrate::render::render_status;
use styrmin_webhook::cli::migrate::steps::{Cluster, plan_steps, render_table};
use styrmin_webhook::cli::migrate::{Started, show_status, start, switched};
use styrmin_webhook::cli::shared::Output;
use styrmin_webhook::crd::StyrminMigration;
use styrmin_webhook::plan::{ClassInfo, Move, Plan, Proposal};

const MIGRATIONS: &str = "/apis/styrmin.io/v1alpha1/styrminmigrations";

/// The recorded cluster's three steps from `nginx` to `haproxy` as one migration: warn
/// cluster-wide, enforce in prod, enforce everywhere.
fn three_steps() -> String {
    let mut steps = Vec::new();
    for (name, file) in [
        ("warn", "step1-warn-cluster-wide.yaml"),
        ("prod", "step2-enforce-prod.yaml"),
        ("everywhere", "step3-enforce-everywhere.yaml"),
    ] {
        let changes: Vec<Value> =
            serde_saphyr::from_multiple(&recorded(&format!("migration/{file}"))).unwrap();
        steps.push(json!({"name": name, "changes": changes}));
    }
    json!({
        "apiVersion": "styrmin.io/v1alpha1",
        "kind": "StyrminMigration",
        "metadata": {"name": "leave-nginx"},
        "spec": {"steps": steps}
    })
    .to_string()
}

fn items<K: DeserializeOwned>(file: &str) -> Vec<Arc<K>> {
    let list: Value = serde_json::from_str(&recorded(&format!("migration/{file}"))).unwrap();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| Arc::new(serde_json::from_value(item.clone()).unwrap()))
        .collect()
}

/// `namespace moves` of every Ingress of a plan that moves.
fn moving(plan: &Plan) -> Vec<String> {
    plan.environments
        .values()
        .flatten()
        .filter(|i| i.moves != Move::No)
        .map(|i| format!("{} {}", i.namespace, i.moves.as_str()))
        .collect()
}

#[test]
fn each_step_is_planned_on_top_of_the_steps_before_it() {
    let migration = read_migration("leave-nginx.json", &three_steps()).unwrap();
    let levels = Proposal {
        clusters: items("styrminclusters.list.json"),
        environments: items("styrminenvironments.list.json"),
        deployments: items("styrmindeployments.list.json"),
    };
    let classes: Vec<Arc<k8s_openapi::api::networking::v1::IngressClass>> =
        items("ingressclasses.list.json");
    let classes: Vec<ClassInfo> = classes.iter().map(|c| ClassInfo::of(c)).collect();
    let ingresses = items("ingresses.list.json");
    let cluster = Cluster {
        levels: &levels,
        kubernetes: None,
        ingresses: &ingresses,
        ingress_classes: &classes,
        acme_issuers: &[],
    };
    let named: Vec<(&str, &Proposal)> = migration
        .migration
        .spec
        .steps
        .iter()
        .map(|s| s.name.as_str())
        .zip(&migration.steps)
        .collect();
    let plans = plan_steps(&cluster, &named).unwrap();
    let moves: Vec<Vec<String>> = plans.iter().map(|p| moving(&p.plan)).collect();
    assert_eq!(
        moves,
        [
            // Warn: nothing is changed.
            vec![],
            // Prod enforced: web2 at once, web1 (a record) at its next deploy.
            vec![
                "styrmin-web1 at next deploy".to_owned(),
                "styrmin-web2 right after".to_owned()
            ],
            // Everywhere: staging's. Prod's are not shown again: the step before moved
            // both, web1 too, whose record it rewrote as a redeploy does.
            vec![
                "styrmin-api1 right after".to_owned(),
                "styrmin-shop1 at next deploy".to_owned()
            ],
        ]
    );
    let table = render_table(&plans);
    assert!(table.starts_with("STEP 1 of 3: warn\n"), "{table}");
    assert!(table.contains("\nSTEP 3 of 3: everywhere\n"), "{table}");
}

/// A fake API server that keeps StyrminMigrations.
fn api_server() -> (FakeApiServer, kube::Client) {
    let api = FakeApiServer::scripted();
    api.accept_writes(MIGRATIONS);
    let client = client(&api);
    (api, client)
}

#[tokio::test]
async fn start_creates_once_and_the_switches_are_merge_patches_of_the_spec() {
    let (api, client) = api_server();
    let migration = read_migration("leave-nginx.json", &three_steps()).unwrap();
    let created = calls::create(&client, &migration.migration).await.unwrap();
    assert_eq!(created.spec, migration.migration.spec);
    let again = calls::create(&client, &migration.migration).await;
    assert!(
        matches!(&again, Err(MigrateCallError::AlreadyExists { name }) if name == "leave-nginx"),
        "{again:?}"
    );

    // `migrate start` again: the same migration exists, nothing is written; other
    // settings under its name are refused.
    let writes = api.writes().len();
    let again = start(&client, &migration.migration).await.unwrap();
    assert!(
        matches!(&again, Started::Exists(m) if m.spec == created.spec),
        "{again:?}"
    );
    assert_eq!(api.writes().len(), writes + 1, "one create, answered 409");
    let mut other = migration.migration.clone();
    other.spec.pace.batch_size = 7;
    let refused = start(&client, &other).await;
    assert!(
        matches!(&refused, Err(MigrateCallError::Differs { name }) if name == "leave-nginx"),
        "{refused:?}"
    );

    let path = format!("{MIGRATIONS}/leave-nginx");
    for (switch, spec) in [
        (Switch::Pause, json!({"paused": true})),
        (Switch::Resume, json!({"paused": false})),
        (Switch::Abort, json!({"abort": true})),
    ] {
        let after = calls::flip(&client, "leave-nginx", switch).await.unwrap();
        let write = api.writes().pop().unwrap();
        assert_eq!(
            (write.method.as_str(), write.path.as_str()),
            ("PATCH", path.as_str())
        );
        assert_eq!(
            write.header("content-type"),
            Some("application/merge-patch+json")
        );
        assert_eq!(
            serde_json::from_str::<Value>(&write.body).unwrap(),
            json!({ "spec": spec })
        );
        // Only the switch changed: the steps are as created.
        assert_eq!(after.spec.steps, migration.migration.spec.steps);
        assert!(
            switched(&after, switch).starts_with("styrminmigration leave-nginx: spec."),
            "{}",
            switched(&after, switch)
        );
    }
    let stored = &api.stored(&path)[&path];
    assert_eq!(
        (&stored["spec"]["paused"], &stored["spec"]["abort"]),
        (&json!(false), &json!(true))
    );
    let missing = calls::flip(&client, "nothing", Switch::Pause).await;
    assert!(
        matches!(&missing, Err(MigrateCallError::NotFound { name }) if name == "nothing"),
        "{missing:?}"
    );
}

fn recorded_migration(file: &str) -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/migrations")
        .join(file);
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[tokio::test]
async fn status_shows_the_object_and_watch_redraws_on_change_until_it_is_finished() {
    let (api, client) = api_server();
    let path = format!("{MIGRATIONS}/leave-nginx");
    let running = recorded_migration("running.json");
    api.put_stored(&path, running.clone());

    let mut out = Vec::new();
    show_status(
        &client,
        "leave-nginx",
        Output::Table,
        false,
        &mut out,
        false,
    )
    .await
    .unwrap();
    let typed: StyrminMigration = serde_json::from_value(running.clone()).unwrap();
    assert_eq!(String::from_utf8(out).unwrap(), render_status(&typed));

    let mut out = Vec::new();
    show_status(&client, "leave-nginx", Output::Json, false, &mut out, false)
        .await
        .unwrap();
    let status: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(status, running["status"]);

    // The executor writes: the same again (nothing redrawn), then a wave, then Done.
    let mut waved = running.clone();
    waved["status"]["steps"][0]["moved"] = json!(790);
    let mut done = waved.clone();
    done["status"]["phase"] = json!("Done");
    let events = [&running, &waved, &done]
        .map(|object| WatchItem::Line(json!({"type": "MODIFIED", "object": object}).to_string()));
    api.watch(MIGRATIONS, events);
    let mut out = Vec::new();
    let last = show_status(&client, "leave-nginx", Output::Table, true, &mut out, false)
        .await
        .unwrap();
    let text = String::from_utf8(out).unwrap();
    let frames: Vec<&str> = text.split("\n\n").collect();
    assert_eq!(frames.len(), 3, "{text}");
    assert!(frames[1].contains("[#############-------]  65%"), "{text}");
    assert!(
        frames[2].starts_with("StyrminMigration leave-nginx: Done"),
        "{text}"
    );
    assert_eq!(
        serde_json::to_value(&last).unwrap()["status"],
        done["status"]
    );

    // Finished already: one frame, no watch.
    api.put_stored(&path, done.clone());
    let watches = api.requests().iter().filter(|r| r.is_watch()).count();
    let mut out = Vec::new();
    show_status(&client, "leave-nginx", Output::Json, true, &mut out, false)
        .await
        .unwrap();
    assert_eq!(String::from_utf8(out).unwrap().lines().count(), 1);
    assert_eq!(
        api.requests().iter().filter(|r| r.is_watch()).count(),
        watches
    );

    let missing = show_status(
        &client,
        "nothing",
        Output::Table,
        false,
        &mut Vec::new(),
        false,
    )
    .await
    .unwrap_err();
    assert_eq!(format!("{missing:#}"), "no StyrminMigration named nothing");
}
