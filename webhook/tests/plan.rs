//! `plan` as a pure function: the migration cluster of `tests/data/apiserver/migration/`
//! (class `nginx`, environments prod and staging, two deployments of each with and without
//! a last-deployed record) and the proposed objects of each step of moving it to `haproxy`.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_json::Value;
use styrmin_webhook::acme_issuers::AcmeIssuer;
use styrmin_webhook::audit::objects::AuditedIngress;
use styrmin_webhook::crd::{StyrminCluster, StyrminDeployment, StyrminEnvironment};
use styrmin_webhook::kube_source::build_view;
use styrmin_webhook::plan::{
    ClassInfo, Move, Plan, PlanInput, PreflightReason, Proposal, plan, render_json, render_table,
};
use styrmin_webhook::view::View;

fn recorded(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/apiserver/migration")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn items<K: DeserializeOwned>(file: &str) -> Vec<Arc<K>> {
    let list: Value = serde_json::from_str(&recorded(file)).unwrap();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| Arc::new(serde_json::from_value(item.clone()).unwrap()))
        .collect()
}

struct Cluster {
    clusters: Vec<Arc<StyrminCluster>>,
    environments: Vec<Arc<StyrminEnvironment>>,
    deployments: Vec<Arc<StyrminDeployment>>,
    ingresses: Vec<Arc<AuditedIngress>>,
    classes: Vec<ClassInfo>,
}

impl Cluster {
    fn recorded() -> Self {
        let classes: Vec<Arc<k8s_openapi::api::networking::v1::IngressClass>> =
            items("ingressclasses.list.json");
        Cluster {
            clusters: items("styrminclusters.list.json"),
            environments: items("styrminenvironments.list.json"),
            deployments: items("styrmindeployments.list.json"),
            ingresses: items("ingresses.list.json"),
            classes: classes.iter().map(|c| ClassInfo::of(c)).collect(),
        }
    }

    fn view(&self) -> View {
        build_view(&self.clusters, &self.environments, &self.deployments, None)
            .unwrap()
            .view
    }

    /// The cluster with the objects of these files applied, as `kubectl apply -f` would.
    fn applied(&self, files: &[&str]) -> Cluster {
        let mut proposal = Proposal::default();
        for file in files {
            proposal.add_file(file, &recorded(file)).unwrap();
        }
        let after = proposal.apply_to(&self.clusters, &self.environments, &self.deployments);
        Cluster {
            clusters: after.clusters,
            environments: after.environments,
            deployments: after.deployments,
            ingresses: self.ingresses.clone(),
            classes: self.classes.clone(),
        }
    }

    fn plan(&self, proposed: &Cluster) -> Plan {
        plan(&PlanInput {
            current: &self.view(),
            proposed: &proposed.view(),
            ingresses: &self.ingresses,
            ingress_classes: &self.classes,
            acme_issuers: &[],
        })
    }
}

/// `(environment, namespace, moves, next deploy's class)` of every planned Ingress.
fn rows(plan: &Plan) -> Vec<(String, String, Move, String)> {
    plan.environments
        .iter()
        .flat_map(|(env, ingresses)| {
            ingresses.iter().map(move |i| {
                (
                    env.clone(),
                    i.namespace.clone(),
                    i.moves,
                    i.next_deploy.short(),
                )
            })
        })
        .collect()
}

fn row(env: &str, namespace: &str, moves: Move, class: &str) -> (String, String, Move, String) {
    (
        env.to_owned(),
        namespace.to_owned(),
        moves,
        class.to_owned(),
    )
}

#[test]
fn warn_cluster_wide_moves_nothing_and_says_where_enforce_would_take_each() {
    let cluster = Cluster::recorded();
    let plan = cluster.plan(&cluster.applied(&["step1-warn-cluster-wide.yaml"]));
    assert_eq!(
        rows(&plan),
        [
            row("prod", "styrmin-web1", Move::No, "nginx"),
            row("prod", "styrmin-web2", Move::No, "nginx"),
            row("staging", "styrmin-api1", Move::No, "nginx"),
            row("staging", "styrmin-shop1", Move::No, "nginx"),
        ]
    );
    for ingress in plan.environments.values().flatten() {
        assert_eq!(ingress.mode.as_str(), "warn");
        assert_eq!(ingress.would.as_ref().unwrap().short(), "haproxy");
    }
    assert!(plan.preflight.is_empty(), "{:?}", plan.preflight);
    assert!(plan.is_quiet());
    // The Ingress outside Styrmin namespaces is not planned.
    assert!(!render_table(&plan).contains("default/other"));
}

#[test]
fn enforcing_prod_moves_its_ingresses_now_or_at_their_next_deploy() {
    let warned = Cluster::recorded().applied(&["step1-warn-cluster-wide.yaml"]);
    let plan = warned.plan(&warned.applied(&["step2-enforce-prod.yaml"]));
    assert_eq!(
        rows(&plan),
        [
            // web1 was last deployed with nginx: its record holds it until Styrmin redeploys it.
            row("prod", "styrmin-web1", Move::NextDeploy, "haproxy"),
            row("prod", "styrmin-web2", Move::RightAfter, "haproxy"),
            row("staging", "styrmin-api1", Move::No, "nginx"),
            row("staging", "styrmin-shop1", Move::No, "nginx"),
        ]
    );
    let web1 = &plan.environments["prod"][0];
    assert_eq!(web1.right_after.short(), "nginx");
    assert!(web1.record);
    assert_eq!(web1.decided_by, "cluster.ingress_class");
    assert_eq!(plan.moves(), (1, 1));
    // Both prod Ingresses change controller, so their address; of web2's nginx annotations,
    // HAProxy reads one under its own key and not the other. Nothing else is found.
    let found: Vec<(PreflightReason, &str)> = plan
        .preflight
        .iter()
        .map(|f| (f.reason, f.subject.as_str()))
        .collect();
    assert_eq!(
        found,
        [
            (
                PreflightReason::ChangesController,
                "Ingress styrmin-web1/web"
            ),
            (
                PreflightReason::ChangesController,
                "Ingress styrmin-web2/web"
            ),
            (
                PreflightReason::AnnotationsNotCarried,
                "Ingress styrmin-web2/web"
            ),
        ]
    );
    assert_eq!(
        plan.preflight[1].detail,
        "served by k8s.io/ingress-nginx now, by haproxy.org/ingress-controller/haproxy right after: its address changes, and DNS must follow"
    );
    assert_eq!(
        plan.preflight[2].detail,
        "ingress-nginx -> HAProxy Kubernetes Ingress (version not given: judged at 1.5.0, the newest the catalog has): 1 unsupported: nginx.ingress.kubernetes.io/proxy-body-size; 1 renamed: nginx.ingress.kubernetes.io/ssl-redirect -> haproxy.org/ssl-redirect"
    );
    let table = render_table(&plan);
    assert!(
        table.contains("4 Ingresses: 1 move right after the change, 1 at their next deploy; 3 pre-flight findings"),
        "{table}"
    );
    let json: Value = serde_json::from_str(&render_json(&plan)).unwrap();
    assert_eq!(json["moves"]["next_deploy"], 1);
    assert_eq!(
        json["environments"]["prod"][1]["right_after"]["ingressClassName"],
        "haproxy"
    );
}

#[test]
fn pre_flight_finds_a_missing_class_a_controller_not_running_and_a_default_class() {
    let cluster = Cluster::recorded();
    // A List holding Styrmin objects is opened.
    let mut proposal = Proposal::default();
    proposal
        .add_file(
            "proposal.yaml",
            "apiVersion: styrmin.io/v1alpha1\nkind: StyrminEnvironment\nmetadata: {name: prod}\nspec: {ingressClass: contour}\n\
             ---\napiVersion: v1\nkind: List\nitems:\n- apiVersion: styrmin.io/v1alpha1\n  kind: StyrminEnvironment\n  metadata: {name: staging}\n  spec: {dedicatedIngress: {}}\n",
        )
        .unwrap();
    let after = proposal.apply_to(
        &cluster.clusters,
        &cluster.environments,
        &cluster.deployments,
    );
    let proposed = Cluster {
        clusters: after.clusters,
        environments: after.environments,
        deployments: after.deployments,
        ingresses: cluster.ingresses.clone(),
        classes: cluster.classes.clone(),
    };
    let plan = cluster.plan(&proposed);
    let reasons: Vec<(PreflightReason, &str)> = plan
        .preflight
        .iter()
        .filter(|f| f.reason != PreflightReason::ChangesController)
        .map(|f| (f.reason, f.subject.as_str()))
        .collect();
    assert_eq!(
        reasons,
        [
            (PreflightReason::MissingIngressClass, "IngressClass contour"),
            (PreflightReason::ControllerNotRunning, "environment staging"),
        ]
    );

    // An empty class keeps the chart's class (R5); an Ingress with none is picked up by the
    // IngressClass marked default.
    let mut classless = cluster.ingresses.clone();
    let mut bare = (*classless[1]).clone();
    bare.ingress_class_name = None;
    bare.class_annotation = None;
    classless[1] = Arc::new(bare);
    let mut proposal = Proposal::default();
    proposal
        .add_file(
            "empty.yaml",
            "{apiVersion: styrmin.io/v1alpha1, kind: StyrminCluster, metadata: {name: default}, spec: {ingressClass: \"\"}}",
        )
        .unwrap();
    let after = proposal.apply_to(
        &cluster.clusters,
        &cluster.environments,
        &cluster.deployments,
    );
    let proposed = Cluster {
        clusters: after.clusters,
        environments: after.environments,
        deployments: after.deployments,
        ingresses: classless.clone(),
        classes: cluster.classes.clone(),
    };
    let plan = styrmin_webhook::plan::plan(&PlanInput {
        current: &cluster.view(),
        proposed: &proposed.view(),
        ingresses: &classless,
        ingress_classes: &cluster.classes,
        acme_issuers: &[],
    });
    let default = plan
        .preflight
        .iter()
        .find(|f| f.reason == PreflightReason::DefaultClassPicksUp)
        .unwrap();
    assert_eq!(default.subject, "IngressClass nginx");
    assert!(
        default
            .detail
            .contains("the 1 Ingresses left with no class (R5) are served by k8s.io/ingress-nginx"),
        "{}",
        default.detail
    );
}

#[test]
fn a_file_that_is_not_a_proposal_is_refused_with_its_document() {
    let mut proposal = Proposal::default();
    let error = proposal
        .add_file(
            "p.yaml",
            "apiVersion: styrmin.io/v1alpha1\nkind: StyrminEnvironment\nmetadata: {name: prod}\nspec: {}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
        )
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with("p.yaml, document 2: v1 ConfigMap is not a proposal"),
        "{error}"
    );
    let error = Proposal::default()
        .add_file(
            "q.yaml",
            "apiVersion: styrmin.io/v1alpha1\nkind: StyrminEnvironment\nmetadata: {name: prod}\nspec: {enforcementMode: audit}\n",
        )
        .unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("q.yaml, document 1: StyrminEnvironment prod"),
        "{error}"
    );
    let error = Proposal::default().add_file("r.yaml", "a: [").unwrap_err();
    assert!(
        error.to_string().contains("r.yaml: not YAML or JSON"),
        "{error}"
    );
}

#[test]
fn a_move_off_a_controller_the_table_does_not_know_is_reported_once_as_unknown() {
    let warned = Cluster::recorded().applied(&["step1-warn-cluster-wide.yaml"]);
    let mut proposed = warned.applied(&["step2-enforce-prod.yaml"]);
    let mut current = warned;
    for cluster in [&mut current, &mut proposed] {
        for class in &mut cluster.classes {
            if class.name == "nginx" {
                class.controller = Some("example.com/ingress".to_owned());
            }
        }
    }
    let plan = current.plan(&proposed);
    let unknown: Vec<(&str, &str)> = plan
        .preflight
        .iter()
        .filter(|f| f.reason == PreflightReason::AnnotationsNotCarried)
        .map(|f| (f.subject.as_str(), f.detail.as_str()))
        .collect();
    assert_eq!(
        unknown,
        [(
            "controller example.com/ingress",
            "not a controller Styrmin knows: which annotations of the 2 Ingresses moving off it it reads is not known (first: Ingress styrmin-web1/web)"
        )]
    );
}

#[test]
fn class_less_ingresses_stay_on_a_default_class_the_change_moves_ingresses_off() {
    let warned = Cluster::recorded().applied(&["step1-warn-cluster-wide.yaml"]);
    // api1's Ingress has no class: staging is still in warn, so it is left as it is.
    let mut ingresses = warned.ingresses.clone();
    let api1 = ingresses
        .iter()
        .position(|i| i.namespace() == "styrmin-api1")
        .unwrap();
    let mut bare = (*ingresses[api1]).clone();
    bare.ingress_class_name = None;
    bare.class_annotation = None;
    ingresses[api1] = Arc::new(bare);
    let current = Cluster {
        ingresses,
        ..warned
    };
    let proposed = current.applied(&["step2-enforce-prod.yaml"]);
    let plan = current.plan(&proposed);
    let default = plan
        .preflight
        .iter()
        .find(|f| f.reason == PreflightReason::DefaultClassPicksUp)
        .unwrap();
    assert_eq!(default.subject, "IngressClass nginx");
    assert_eq!(
        default.detail,
        "marked ingressclass.kubernetes.io/is-default-class, and the change moves Ingresses off it: the 1 Ingresses left with no class (R5) stay on it, served by k8s.io/ingress-nginx; a default class is given only when an Ingress is created, so they do not follow (first: Ingress styrmin-api1/api)"
    );
    let leaving = styrmin_webhook::plan::leaving_classes(&plan);
    assert_eq!(
        leaving.get("nginx"),
        Some(&styrmin_webhook::plan::Leaving::Moved),
        "shop1 stays on nginx until staging is enforced"
    );
    // Enforced everywhere, every Ingress with a class leaves nginx.
    let everywhere = current.applied(&["step2-enforce-prod.yaml", "step3-enforce-everywhere.yaml"]);
    let leaving = styrmin_webhook::plan::leaving_classes(&current.plan(&everywhere));
    assert_eq!(
        leaving.get("nginx"),
        Some(&styrmin_webhook::plan::Leaving::Emptied)
    );
}

#[test]
fn an_issuer_whose_http01_solver_names_a_class_moved_off_is_found() {
    let issuers: Vec<AcmeIssuer> = items::<Value>("issuers.list.json")
        .iter()
        .filter_map(|o| AcmeIssuer::of("Issuer", o))
        .chain(
            items::<Value>("clusterissuers.list.json")
                .iter()
                .filter_map(|o| AcmeIssuer::of("ClusterIssuer", o)),
        )
        .collect();
    let found = |current: &Cluster, proposed: &Cluster| -> Vec<String> {
        plan(&PlanInput {
            current: &current.view(),
            proposed: &proposed.view(),
            ingresses: &current.ingresses,
            ingress_classes: &current.classes,
            acme_issuers: &issuers,
        })
        .preflight
        .iter()
        .filter(|f| f.reason == PreflightReason::AcmeSolverClass)
        .map(|f| format!("{}: {}", f.subject, f.detail))
        .collect()
    };
    let cluster = Cluster::recorded();
    let warned = cluster.applied(&["step1-warn-cluster-wide.yaml"]);
    // In warn nothing moves: nothing to say.
    assert_eq!(found(&cluster, &warned), Vec::<String>::new());
    // Enforcing prod moves Ingresses off nginx, which both solvers name; not off haproxy.
    let enforced = warned.applied(&["step2-enforce-prod.yaml"]);
    assert_eq!(
        found(&warned, &enforced),
        [
            "Issuer styrmin-web2/letsencrypt: its HTTP01 solver creates challenge Ingresses of class \"nginx\", and the change moves Ingresses off it: point the solver at the new class once its controller serves, or certificates stop renewing when the old one goes",
            "ClusterIssuer letsencrypt-prod: its HTTP01 solver creates challenge Ingresses of class \"nginx\", and the change moves Ingresses off it: point the solver at the new class once its controller serves, or certificates stop renewing when the old one goes",
        ]
    );
}
