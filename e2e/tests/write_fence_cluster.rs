//! The chart's write fence on a real kube-apiserver (`make test-cluster`, not `make test`):
//! the ValidatingAdmissionPolicy of `write-fence.yaml`, with the chart's service accounts and
//! RBAC as `helm template` renders them with `migrations.enabled=true`. Writes are made with a
//! token of the controllers' service account: the executor's own write (`write_back`, and a
//! class change with a `styrmin.io/*` annotation) passes, and a change of a host, a backend,
//! TLS, a label or another annotation, a write outside a Styrmin namespace and a create
//! outside the release namespace are refused. Admission's service account may not write at
//! all (RBAC). The binaries come from `$KUBEBUILDER_ASSETS`; without it the test says so and
//! returns.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use k8s_openapi::api::networking::v1::Ingress;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};
use styrmin_e2e::Scratch;
use styrmin_e2e::control_plane::{self, ControlPlane, apply, eventually};
use styrmin_webhook::controllers::migration::calls::write_back;

/// The chart's objects with `migrations.enabled=true` that the fence needs: the service
/// accounts, their RBAC, and the policy with its binding.
async fn apply_the_charts_rbac_and_fence(client: &kube::Client) {
    let applied = control_plane::apply_the_charts(
        client,
        "write-fence-cluster-chart",
        &["migrations.enabled=true"],
        &[
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding",
        ],
    )
    .await;
    let fences = applied
        .iter()
        .filter(|kind| kind.starts_with("ValidatingAdmissionPolicy"))
        .count();
    assert_eq!(fences, 2, "the chart rendered no fence");
}

/// A client with a token of the service account `name` of styrmin-system.
async fn as_service_account(client: &kube::Client, url: &str, name: &str) -> kube::Client {
    let token = control_plane::service_account_token(client, "styrmin-system", name).await;
    control_plane::client(url, &token)
}

fn ingress(namespace: &str, name: &str) -> Value {
    json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": name, "namespace": namespace,
                     "labels": {"app": "web"},
                     "annotations": {"nginx.ingress.kubernetes.io/rewrite-target": "/"}},
        "spec": {
            "ingressClassName": "nginx",
            "tls": [{"hosts": ["web.example.com"], "secretName": "web-tls"}],
            "rules": [{"host": "web.example.com", "http": {"paths": [{
                "path": "/", "pathType": "Prefix",
                "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]
        }
    })
}

/// Replaces the Ingress after `change`, as `client`: the API server's status code on refusal
/// (with its message), `Ok` when it is stored.
async fn write(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    change: impl FnOnce(&mut Value),
) -> Result<(), (u16, String)> {
    write_read_by(client, client, namespace, name, change).await
}

/// [`write`], the Ingress read by `reader`.
async fn write_read_by(
    reader: &kube::Client,
    client: &kube::Client,
    namespace: &str,
    name: &str,
    change: impl FnOnce(&mut Value),
) -> Result<(), (u16, String)> {
    let api: Api<Ingress> = Api::namespaced(client.clone(), namespace);
    let current = Api::<Ingress>::namespaced(reader.clone(), namespace)
        .get(name)
        .await
        .unwrap();
    let mut object = serde_json::to_value(&current).unwrap();
    change(&mut object);
    let changed: Ingress = serde_json::from_value(object).unwrap();
    match api.replace(name, &PostParams::default(), &changed).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) => Err((status.code, status.message)),
        Err(error) => panic!("writing {namespace}/{name}: {error}"),
    }
}

fn refused(outcome: Result<(), (u16, String)>, what: &str, says: &str) {
    match outcome {
        Err((code, message)) => {
            assert!(
                (code == 403 || code == 422) && message.contains(says),
                "{what}: {code} {message}"
            );
        }
        Ok(()) => panic!("{what}: stored, not refused"),
    }
}

/// A change the fence refuses: the namespace, the change, what it is, what the refusal says.
type Refusal = (&'static str, fn(&mut Value), &'static str, &'static str);

/// The controllers' service account refused every change but the class, in a Styrmin
/// namespace, and any create outside the release namespace; a canary there is created and
/// deleted.
async fn assert_refuses_all_but_the_class(controllers: &kube::Client) {
    let fields = "only an Ingress's class fields";
    let refusals: [Refusal; 6] = [
        (
            "styrmin-web1",
            |o| o["spec"]["rules"][0]["host"] = json!("evil.example.com"),
            "a host",
            fields,
        ),
        (
            "styrmin-web1",
            |o| {
                o["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]["name"] =
                    json!("attacker");
            },
            "a backend",
            fields,
        ),
        (
            "styrmin-web1",
            |o| o["spec"]["tls"] = json!([]),
            "TLS",
            fields,
        ),
        (
            "styrmin-web1",
            |o| o["metadata"]["labels"]["app"] = json!("other"),
            "a label",
            "labels",
        ),
        (
            "styrmin-web1",
            |o| {
                o["metadata"]["annotations"]["nginx.ingress.kubernetes.io/rewrite-target"] =
                    json!("/evil");
            },
            "another annotation",
            "styrmin.io/*",
        ),
        (
            "team-other",
            |o| o["spec"]["ingressClassName"] = json!("haproxy"),
            "a namespace that is not Styrmin's",
            "only in Styrmin namespaces",
        ),
    ];
    for (namespace, change, what, says) in refusals {
        refused(
            write(controllers, namespace, "web", change).await,
            what,
            says,
        );
    }
    let created = Api::<Ingress>::namespaced(controllers.clone(), "styrmin-web1")
        .create(
            &PostParams::default(),
            &serde_json::from_value(ingress("styrmin-web1", "new")).unwrap(),
        )
        .await;
    assert!(
        matches!(&created, Err(kube::Error::Api(s)) if s.code == 403),
        "a create outside the release namespace: {created:?}"
    );
    // The canary: created and deleted in the release namespace.
    let canaries: Api<Ingress> = Api::namespaced(controllers.clone(), "styrmin-system");
    canaries
        .create(
            &PostParams::default(),
            &serde_json::from_value(ingress("styrmin-system", "canary")).unwrap(),
        )
        .await
        .unwrap();
    canaries
        .delete("canary", &DeleteParams::default())
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real API server: make test-cluster with KUBEBUILDER_ASSETS"]
async fn the_fence_lets_the_controllers_change_only_the_class() {
    let Some(assets) = control_plane::assets() else {
        eprintln!("skipped: KUBEBUILDER_ASSETS is not set; `make test-cluster` runs this");
        return;
    };
    let dir = Scratch::new("write-fence-cluster");
    let plane = ControlPlane::start(&assets, dir.path(), &[]);
    let admin = plane.ready().await;
    for namespace in ["styrmin-system", "styrmin-web1", "team-other"] {
        apply(
            &admin,
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
        )
        .await;
    }
    apply_the_charts_rbac_and_fence(&admin).await;
    for namespace in ["styrmin-web1", "team-other"] {
        apply(&admin, &ingress(namespace, "web")).await;
    }
    let controllers = as_service_account(&admin, &plane.url, "styrmin-webhook-controllers").await;

    // The policy is enforced a moment after it is created: wait for the first refusal, each
    // try a new value (a try that was stored would make the next one no change at all).
    let mut tries = 0;
    eventually("the fence refuses a label change", async || {
        tries += 1;
        write(&controllers, "styrmin-web1", "web", |o| {
            o["metadata"]["labels"]["probe"] = json!(format!("try-{tries}"));
        })
        .await
        .err()
    })
    .await;

    // The executor's own writes pass: its write-back as is, and a class change with its
    // record annotation.
    write_back(&controllers, "styrmin-web1", "web", false)
        .await
        .unwrap();
    write(&controllers, "styrmin-web1", "web", |o| {
        o["spec"]["ingressClassName"] = json!("haproxy");
        o["metadata"]["annotations"]["styrmin.io/moved-by"] = json!("migration");
    })
    .await
    .unwrap();

    assert_refuses_all_but_the_class(&controllers).await;

    // What the fence let through is all that changed.
    let stored = Api::<Ingress>::namespaced(admin.clone(), "styrmin-web1")
        .get("web")
        .await
        .unwrap();
    let spec = stored.spec.unwrap();
    assert_eq!(spec.ingress_class_name.as_deref(), Some("haproxy"));
    assert_eq!(
        spec.rules.unwrap()[0].host.as_deref(),
        Some("web.example.com")
    );
    // Admission's service account may write nothing (RBAC, before the fence).
    let admission = as_service_account(&admin, &plane.url, "styrmin-webhook").await;
    refused(
        write_read_by(&admin, &admission, "styrmin-web1", "web", |o| {
            o["spec"]["ingressClassName"] = json!("nginx");
        })
        .await,
        "admission's service account",
        "forbidden",
    );
}
