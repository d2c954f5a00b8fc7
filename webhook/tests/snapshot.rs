//! One listing of the cluster for the command line ([`Snapshot`]), against recorded API
//! server responses (`tests/data/apiserver/`) served by the fake API server: every page
//! read, what the view leaves out returned rather than printed, and a failed list named.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use styrmin_fake_apiserver::FakeApiServer;
use styrmin_test_support::recorded_cluster::{
    CLUSTERS, DEPLOYMENTS, ENVIRONMENTS, INGRESS_CLASSES, INGRESSES, client, recorded,
};
use styrmin_webhook::kube_source::{Snapshot, SnapshotError};

/// The deployments in two pages (one of them in namespace `team-a`), the audit's
/// Ingresses (one in `default`) and IngressClasses.
fn answer_a_cluster(api: &FakeApiServer) {
    api.answer("/version", 200, recorded("version.json"));
    api.answer(CLUSTERS, 200, recorded("styrminclusters.list.json"));
    api.answer(ENVIRONMENTS, 200, recorded("styrminenvironments.list.json"));
    api.answer(
        DEPLOYMENTS,
        200,
        recorded("styrmindeployments.list-page1.json"),
    );
    api.answer(
        DEPLOYMENTS,
        200,
        recorded("styrmindeployments.list-page2.json"),
    );
}

#[tokio::test]
async fn every_page_read_and_what_the_view_leaves_out_returned() {
    let api = FakeApiServer::scripted();
    answer_a_cluster(&api);
    api.answer(INGRESSES, 200, recorded("audit/ingresses.list.json"));
    api.answer(
        INGRESS_CLASSES,
        200,
        recorded("audit/ingressclasses.list.json"),
    );

    let snapshot = Snapshot::read(&client(&api)).await.unwrap();

    assert_eq!(snapshot.deployments.len(), 4, "both pages");
    assert_eq!(
        snapshot.ignored,
        ["StyrminDeployment team-a/styrmin-odd: ignored, not in a namespace styrmin-<id>"]
    );
    let namespaces: Vec<_> = snapshot
        .ingresses
        .iter()
        .map(|i| i.namespace().to_owned())
        .collect();
    assert_eq!(
        namespaces.len(),
        5,
        "the one in `default` is left out: {namespaces:?}"
    );
    assert!(namespaces.iter().all(|n| n.starts_with("styrmin-")));
    assert_eq!(snapshot.ingress_classes.len(), 2);
    let pages: Vec<_> = api
        .requests()
        .into_iter()
        .filter(|r| r.path == DEPLOYMENTS)
        .map(|r| r.param("continue").is_some())
        .collect();
    assert_eq!(pages, [false, true], "the second page asked by its token");
}

#[tokio::test]
async fn a_failed_list_names_its_resource() {
    let api = FakeApiServer::scripted();
    answer_a_cluster(&api);
    api.answer(INGRESSES, 500, recorded("status-500.json"));

    let error = Snapshot::read(&client(&api)).await.unwrap_err();

    assert!(
        matches!(&error, SnapshotError::List { plural, .. } if plural == "ingresses"),
        "{error:?}"
    );
    assert_eq!(error.to_string(), "cannot list ingresses");
    assert!(
        std::error::Error::source(&error).is_some(),
        "the API's error kept"
    );
}
