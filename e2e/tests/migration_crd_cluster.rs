//! The StyrminMigration CRD's CEL rules on a real kube-apiserver (`make test-cluster`, not
//! `make test`): the API server accepts the CRD (its rules compile and fit the cost budget),
//! refuses two steps of one name, refuses a step added once the executor has picked the
//! migration up (`status.stepsDigest` set), and still lets a person pause it. The binaries
//! come from `$KUBEBUILDER_ASSETS`; without it the test says so and returns.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use styrmin_e2e::Scratch;
use styrmin_e2e::control_plane::{self, ControlPlane, install_crds, resource_of};

fn step(name: &str, class: &str) -> Value {
    json!({"name": name, "changes": [{
        "apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminCluster",
        "metadata": {"name": "default"}, "spec": {"ingressClass": class}}]})
}

fn migration(name: &str, steps: Vec<Value>) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminMigration",
        "metadata": {"name": name}, "spec": {"steps": steps}
    }))
    .unwrap()
}

fn refusal(result: Result<DynamicObject, kube::Error>) -> String {
    match result {
        Err(kube::Error::Api(status)) if status.code == 422 => status.message,
        other => panic!("not refused as invalid: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real API server: make test-cluster with KUBEBUILDER_ASSETS"]
async fn the_crds_rules_hold_on_a_real_api_server() {
    let Some(assets) = control_plane::assets() else {
        eprintln!("skipped: KUBEBUILDER_ASSETS is not set; `make test-cluster` runs this");
        return;
    };
    let dir = Scratch::new("migration-crd-cluster");
    let plane = ControlPlane::start(&assets, dir.path(), &[]);
    let client = plane.ready().await;
    install_crds(&client).await;
    let api: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &resource_of(&json!({"apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminMigration"})),
    );
    let create = async |object: &DynamicObject| {
        let mut tries = 0;
        loop {
            match api.create(&PostParams::default(), object).await {
                // The CRD's resource is served a moment after the CRD is created.
                Err(kube::Error::Api(status)) if status.code == 404 && tries < 40 => {
                    tries += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(250)).await;
                }
                other => return other,
            }
        }
    };

    let message = refusal(
        create(&migration(
            "twice",
            vec![step("staging", "haproxy"), step("staging", "nginx")],
        ))
        .await,
    );
    assert!(message.contains("step names must be unique"), "{message}");

    create(&migration(
        "leave-nginx",
        vec![step("staging", "haproxy"), step("cluster", "haproxy")],
    ))
    .await
    .unwrap();
    // Before the executor picks it up, the steps may still change.
    let three = json!({"spec": {"steps": [
        step("staging", "haproxy"), step("cluster", "haproxy"), step("third", "traefik")]}});
    api.patch(
        "leave-nginx",
        &PatchParams::default(),
        &Patch::Merge(&three),
    )
    .await
    .unwrap();
    // Picked up: the executor keeps the steps' digest in the status.
    api.patch_status(
        "leave-nginx",
        &PatchParams::default(),
        &Patch::Merge(&json!({"status": {"stepsDigest": "picked-up"}})),
    )
    .await
    .unwrap();
    let four = json!({"spec": {"steps": [
        step("staging", "haproxy"), step("cluster", "haproxy"), step("third", "traefik"),
        step("fourth", "nginx")]}});
    let message = refusal(
        api.patch("leave-nginx", &PatchParams::default(), &Patch::Merge(&four))
            .await,
    );
    assert!(
        message.contains("cannot gain, lose, rename or reorder"),
        "{message}"
    );
    let renamed = json!({"spec": {"steps": [
        step("staging", "haproxy"), step("everything", "haproxy"), step("third", "traefik")]}});
    refusal(
        api.patch(
            "leave-nginx",
            &PatchParams::default(),
            &Patch::Merge(&renamed),
        )
        .await,
    );
    // Its switches stay free.
    api.patch(
        "leave-nginx",
        &PatchParams::default(),
        &Patch::Merge(&json!({"spec": {"paused": true}})),
    )
    .await
    .unwrap();
}
