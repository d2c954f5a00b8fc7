//! `plan -o json` judged by the annotation catalog: the Styrmin objects of
//! `tests/data/apiserver/migration/`, with the Ingresses and IngressClasses of
//! `tests/data/apiserver/catalog/` (four Ingresses on class `nginx` with ingress-nginx
//! annotations; classes for Traefik's ingress-nginx provider, F5 NGINX and HAProxy), each
//! moved to one target by the cluster's class.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_json::Value;
use styrmin_webhook::annotation_catalog::{Verdict, Version, catalog};
use styrmin_webhook::audit::objects::AuditedIngress;
use styrmin_webhook::crd::{StyrminCluster, StyrminDeployment, StyrminEnvironment};
use styrmin_webhook::ingress_controllers::by_id;
use styrmin_webhook::kube_source::build_view;
use styrmin_webhook::plan::annotations::{parse_class_target, parse_target_version};
use styrmin_webhook::plan::{
    ClassInfo, FailOn, Plan, PlanInput, PreflightReason, Proposal, Targets, plan_with, render_json,
};
use styrmin_webhook::view::View;

fn recorded(dir: &str, name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/apiserver")
        .join(dir)
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn items<K: DeserializeOwned>(dir: &str, file: &str) -> Vec<Arc<K>> {
    let list: Value = serde_json::from_str(&recorded(dir, file)).unwrap();
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
            items("catalog", "ingressclasses.list.json");
        Cluster {
            clusters: items("migration", "styrminclusters.list.json"),
            environments: items("migration", "styrminenvironments.list.json"),
            deployments: items("migration", "styrmindeployments.list.json"),
            ingresses: items("catalog", "ingresses.list.json"),
            classes: classes.iter().map(|c| ClassInfo::of(c)).collect(),
        }
    }

    fn view(&self, proposal: Option<&str>) -> View {
        let mut parsed = Proposal::default();
        if let Some(text) = proposal {
            parsed.add_file("proposal.yaml", text).unwrap();
        }
        let after = parsed.apply_to(&self.clusters, &self.environments, &self.deployments);
        build_view(
            &after.clusters,
            &after.environments,
            &after.deployments,
            None,
        )
        .unwrap()
        .view
    }

    /// The plan of moving the whole cluster to `class`, with these `plan` flags.
    fn plan_to(&self, class: &str, targets: &[&str], versions: &[&str]) -> Plan {
        let proposal = format!(
            "apiVersion: styrmin.io/v1alpha1\nkind: StyrminCluster\nmetadata: {{name: default}}\nspec: {{ingressClass: {class}}}\n"
        );
        let targets = Targets::of(
            &targets
                .iter()
                .map(|t| parse_class_target(t).unwrap())
                .collect::<Vec<_>>(),
            &versions
                .iter()
                .map(|v| parse_target_version(v).unwrap())
                .collect::<Vec<_>>(),
        );
        plan_with(
            &PlanInput {
                current: &self.view(None),
                proposed: &self.view(Some(&proposal)),
                ingresses: &self.ingresses,
                ingress_classes: &self.classes,
                acme_issuers: &[],
            },
            &targets,
        )
    }
}

/// `namespace/name` → verdict → the annotations (without the nginx prefix), from the JSON.
fn verdicts(json: &Value) -> BTreeMap<String, BTreeMap<&'static str, Vec<String>>> {
    let mut out = BTreeMap::new();
    for report in json["annotations"].as_array().unwrap() {
        let ingress = format!(
            "{}/{}",
            report["namespace"].as_str().unwrap(),
            report["name"].as_str().unwrap()
        );
        let mut groups = BTreeMap::new();
        for group in ["supported", "renamed", "unsupported", "unknown"] {
            let keys: Vec<String> = report[group]
                .as_array()
                .unwrap()
                .iter()
                .map(|j| {
                    let key = j["annotation"].as_str().unwrap();
                    let short = key.trim_start_matches("nginx.ingress.kubernetes.io/");
                    match j["renamed_to"].as_str() {
                        Some(to) => format!("{short}>{to}"),
                        None => short.to_owned(),
                    }
                })
                .collect();
            if !keys.is_empty() {
                groups.insert(group, keys);
            }
        }
        out.insert(ingress, groups);
    }
    out
}

/// Every verdict of the JSON is the catalog's for the report's target and version.
fn agrees_with_the_catalog(json: &Value) {
    for report in json["annotations"].as_array().unwrap() {
        let target = by_id(report["target"].as_str().unwrap()).unwrap();
        let version: Version = report["version"]
            .as_str()
            .map_or(Version(0, 0, 0), |v| v.parse().unwrap());
        for (group, want) in [
            ("supported", "supported"),
            ("renamed", "renamed-to"),
            ("unsupported", "unsupported"),
            ("unknown", "unknown"),
        ] {
            for judged in report[group].as_array().unwrap() {
                let key = judged["annotation"].as_str().unwrap();
                let verdict = catalog().judge(key, target, version).verdict;
                assert_eq!(verdict.as_str(), want, "{key} for {}", target.id);
                if let Verdict::Renamed { to, .. } = verdict {
                    assert_eq!(judged["renamed_to"], to.as_str());
                }
            }
        }
    }
}

fn json_of(plan: &Plan) -> Value {
    serde_json::from_str(&render_json(plan)).unwrap()
}

fn keys(list: &[&str]) -> Vec<String> {
    list.iter().map(|k| (*k).to_owned()).collect()
}

#[test]
fn traefik_3_6_and_3_7_read_what_their_releases_document() {
    let cluster = Cluster::recorded();
    let at = |version: &str| {
        cluster.plan_to(
            "traefik",
            &["traefik=traefik-ingress-nginx"],
            &[&format!("traefik={version}")],
        )
    };
    let (old, new) = (json_of(&at("3.6.2")), json_of(&at("3.7.9")));
    agrees_with_the_catalog(&old);
    agrees_with_the_catalog(&new);
    let (old, new) = (verdicts(&old), verdicts(&new));
    assert_eq!(
        old["styrmin-web1/web"]["unsupported"],
        keys(&["proxy-body-size", "rewrite-target"])
    );
    assert_eq!(
        old["styrmin-web1/web"]["supported"],
        keys(&["ssl-redirect", "use-regex"])
    );
    assert_eq!(
        new["styrmin-web1/web"]["supported"],
        keys(&[
            "proxy-body-size",
            "rewrite-target",
            "ssl-redirect",
            "use-regex"
        ])
    );
    assert_eq!(old["styrmin-web2/web"]["unsupported"], keys(&["limit-rps"]));
    assert!(!new["styrmin-web2/web"].contains_key("unsupported"));
    // A key no release lists is unknown on both; ModSecurity is Traefik Hub's only.
    assert_eq!(
        new["styrmin-api1/api"]["unknown"],
        keys(&["no-such-annotation"])
    );
    assert_eq!(
        new["styrmin-api1/api"]["unsupported"],
        keys(&["modsecurity-snippet"])
    );
    assert_eq!(
        new["styrmin-api1/api"]["supported"],
        keys(&["enable-global-auth", "limit-connections"])
    );
}

#[test]
fn f5_nginx_and_haproxy_read_renamed_keys_and_nothing_else() {
    let cluster = Cluster::recorded();
    let f5 = json_of(&cluster.plan_to("f5", &[], &["5.4.0"]));
    agrees_with_the_catalog(&f5);
    let f5 = verdicts(&f5);
    assert_eq!(
        f5["styrmin-web1/web"]["renamed"],
        keys(&[
            "rewrite-target>nginx.org/rewrite-target",
            "ssl-redirect>nginx.org/ssl-redirect"
        ])
    );
    assert_eq!(
        f5["styrmin-web1/web"]["unsupported"],
        keys(&["proxy-body-size", "use-regex"])
    );
    assert_eq!(
        f5["styrmin-shop1/shop"]["renamed"],
        keys(&[
            "affinity>nginx.org/sticky-cookie-services",
            "configuration-snippet>nginx.org/location-snippets",
            "proxy-read-timeout>nginx.org/proxy-read-timeout"
        ])
    );
    let haproxy_plan = cluster.plan_to("haproxy", &[], &[]);
    let haproxy = json_of(&haproxy_plan);
    agrees_with_the_catalog(&haproxy);
    // No version given: the newest the catalog has, said in the report.
    assert_eq!(haproxy["annotations"][0]["version"], "1.5.0");
    assert!(
        haproxy["annotations"][0]["version_note"]
            .as_str()
            .unwrap()
            .starts_with("version not given")
    );
    let haproxy = verdicts(&haproxy);
    assert_eq!(
        haproxy["styrmin-web1/web"]["renamed"],
        keys(&[
            "rewrite-target>haproxy.org/path-rewrite",
            "ssl-redirect>haproxy.org/ssl-redirect"
        ])
    );
    assert!(!haproxy.values().any(|g| g.contains_key("unknown")));
    assert!(haproxy_plan.fails_on(FailOn::Unsupported));
}

/// `spec.preflight.unsupportedAnnotations` of a migration: `warn` never holds a step;
/// `block` holds it exactly when `plan --fail-on unsupported` fails, and says which.
#[test]
fn block_holds_a_step_exactly_where_fail_on_unsupported_fails() {
    use styrmin_webhook::crd::migration::AnnotationPolicy;
    let cluster = Cluster::recorded();
    let old = cluster.plan_to(
        "traefik",
        &["traefik=traefik-ingress-nginx"],
        &["traefik=3.6.2"],
    );
    assert!(old.fails_on(FailOn::Unsupported));
    assert_eq!(old.held_by_annotations(AnnotationPolicy::Warn), None);
    let held = old.held_by_annotations(AnnotationPolicy::Block).unwrap();
    assert!(
        held.starts_with("unsupported_annotations: 4 moving Ingresses"),
        "{held}"
    );
    assert!(held.contains("modsecurity-snippet"), "{held}");
    // Traefik 3.7 reads all but Hub's ModSecurity: still held, by one Ingress.
    let new = cluster.plan_to(
        "traefik",
        &["traefik=traefik-ingress-nginx"],
        &["traefik=3.7.9"],
    );
    let held = new.held_by_annotations(AnnotationPolicy::Block).unwrap();
    assert!(
        held.starts_with("unsupported_annotations: 1 moving Ingresses"),
        "{held}"
    );
    // A plan with nothing unsupported is never held.
    let mut clean = new.clone();
    for report in &mut clean.annotations {
        report.unsupported.clear();
    }
    assert!(!clean.fails_on(FailOn::Unsupported));
    assert_eq!(clean.held_by_annotations(AnnotationPolicy::Block), None);
}

#[test]
fn the_hash_leaves_out_nothing_but_is_the_same_for_the_same_plan() {
    let cluster = Cluster::recorded();
    let plan = || cluster.plan_to("f5", &[], &["5.4"]);
    let first = json_of(&plan());
    assert_eq!(first["hash"], json_of(&plan())["hash"]);
    assert_eq!(first["hash"].as_str().unwrap().len(), 64);
    // The API server's order of the Ingresses does not matter.
    let mut reversed = Cluster::recorded();
    reversed.ingresses.reverse();
    reversed.classes.reverse();
    assert_eq!(
        first["hash"],
        json_of(&reversed.plan_to("f5", &[], &["5.4"]))["hash"]
    );
    // Another version is another plan.
    assert_ne!(
        first["hash"],
        json_of(&cluster.plan_to("f5", &[], &["5.2"]))["hash"]
    );
    assert_eq!(first["catalog_revision"], catalog().revision);
}

#[test]
fn a_target_class_of_an_unknown_controller_is_refused_and_counts_as_unknown() {
    let cluster = Cluster::recorded();
    // traefik's class names traefik.io/ingress-nginx, which no controller of the table has.
    let plan = cluster.plan_to("traefik", &[], &[]);
    let refused: Vec<(&str, &str)> = plan
        .preflight
        .iter()
        .filter(|f| f.reason == PreflightReason::UnknownTargetController)
        .map(|f| (f.subject.as_str(), f.detail.as_str()))
        .collect();
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0].0, "IngressClass traefik");
    assert!(
        refused[0].1.contains("--target traefik=ID"),
        "{}",
        refused[0].1
    );
    assert!(plan.annotations.is_empty());
    assert!(plan.fails_on(FailOn::Unknown));
    assert!(!plan.fails_on(FailOn::Unsupported));
}

#[test]
fn use_regex_is_judged_for_every_ingress_of_its_host() {
    let cluster = Cluster::recorded();
    let plan = cluster.plan_to("haproxy", &[], &[]);
    // web1 carries use-regex and rewrite-target on shop.example.com; web2 shares the host.
    let hosts: Vec<(&str, &str, Vec<&str>)> = plan
        .hosts
        .iter()
        .map(|h| {
            (
                h.host.as_str(),
                h.annotation.as_str(),
                h.moving.iter().map(|m| m.ingress.as_str()).collect(),
            )
        })
        .collect();
    assert_eq!(
        hosts,
        [
            (
                "shop.example.com",
                "nginx.ingress.kubernetes.io/rewrite-target",
                vec!["styrmin-web1/web", "styrmin-web2/web"]
            ),
            (
                "shop.example.com",
                "nginx.ingress.kubernetes.io/use-regex",
                vec!["styrmin-web1/web", "styrmin-web2/web"]
            ),
        ]
    );
    let finding = plan
        .preflight
        .iter()
        .find(|f| f.reason == PreflightReason::HostWideAnnotation)
        .unwrap();
    assert_eq!(finding.subject, "host shop.example.com");
    assert!(
        finding
            .detail
            .contains("styrmin-web2/web (to HAProxy Kubernetes Ingress: renamed-to)"),
        "{}",
        finding.detail
    );
}

#[test]
fn two_classes_of_one_controller_string_are_warned_about() {
    let mut cluster = Cluster::recorded();
    cluster.classes.push(ClassInfo {
        name: "haproxy-copy".to_owned(),
        controller: Some("haproxy.org/ingress-controller/haproxy".to_owned()),
        is_default: false,
    });
    let plan = cluster.plan_to("haproxy", &[], &[]);
    let shared: Vec<&str> = plan
        .preflight
        .iter()
        .filter(|f| f.reason == PreflightReason::SharedController)
        .map(|f| f.detail.as_str())
        .collect();
    assert_eq!(shared.len(), 1);
    assert!(
        shared[0].starts_with("IngressClasses haproxy, haproxy-copy name the same"),
        "{}",
        shared[0]
    );
    // Classes no move involves are left alone.
    assert!(
        !cluster
            .plan_to("f5", &[], &[])
            .preflight
            .iter()
            .any(|f| f.reason == PreflightReason::SharedController)
    );
}

#[test]
fn a_class_of_the_old_controller_string_is_warned_about_not_judged() {
    // Traefik's ingress-nginx provider left at its default controllerClass: its class
    // names ingress-nginx's string, so nothing tells the two apart but the warning.
    let mut cluster = Cluster::recorded();
    for class in &mut cluster.classes {
        if class.name == "traefik" {
            class.controller = Some("k8s.io/ingress-nginx".to_owned());
        }
    }
    let plan = cluster.plan_to("traefik", &["traefik=traefik-ingress-nginx"], &[]);
    let reasons: Vec<(PreflightReason, &str)> = plan
        .preflight
        .iter()
        .map(|f| (f.reason, f.subject.as_str()))
        .collect();
    assert_eq!(
        reasons,
        [(
            PreflightReason::SharedController,
            "controller k8s.io/ingress-nginx"
        )]
    );
}
