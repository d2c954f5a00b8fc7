//! The transitions of the product page ("Changing the dedicated ingress on the cluster",
//! "Changing the dedicated ingress of an environment", "A deployment that sets its own
//! dedicated_ingress"), walked through the webhook one request at a time.
//!
//! A [`World`] is what Styrmin keeps: the cluster and environment levels, and each
//! deployment with its phase and its record of the ingress settings it was last deployed
//! with (W5). Between steps a test changes it as Styrmin would (a config update, a
//! controller's phase, an application redeployed: its record changes), and at each step
//! [`World::expect`] sends, for each application namespace, an Ingress CREATE, an Ingress
//! UPDATE (a `kubectl edit` or a hook) and two deploys (a StyrminDeployment spec change and
//! a HelmRelease upgrade), and checks the class each Ingress gets and whether the deploy is
//! allowed or denied by W2.
//!
//! Styrmin writes a deployment's record before the deploy that uses the new settings, so the
//! redeploy's own Ingresses already get them.
//!
//! Each test is named after the sentence of the product page it checks.

use std::collections::HashMap;

use ingress_rules::{DedicatedIngress, IngressTarget, Level, Setting, SettingsSource};
use serde_json::{Value, json};

use super::*;
use crate::view::{Deployment, Phase, Role, View};

const CHART_CLASS: &str = "chart-class";
const EDITED_CLASS: &str = "edited-by-hand";

fn dedicated(keys: &[&str]) -> Setting<DedicatedIngress> {
    Setting::Value(DedicatedIngress {
        value_keys: keys.iter().map(|k| (*k).to_owned()).collect(),
    })
}

fn class_level(class: &str) -> Level {
    Level {
        ingress_class: Setting::Value(class.to_owned()),
        ..Level::default()
    }
}

fn on() -> IngressTarget {
    IngressTarget::Dedicated
}

fn shared(class: &str) -> IngressTarget {
    IngressTarget::class(class)
}

/// What W2 answers a deploy in one namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Deploy {
    Allowed,
    /// Denied: the environment's controller (this id) is being removed.
    Blocked(&'static str),
}

use Deploy::{Allowed, Blocked};

/// Styrmin's state, as the webhook's view holds it.
#[derive(Clone, Debug, Default)]
struct World {
    cluster: Level,
    environments: HashMap<String, Level>,
    deployments: HashMap<String, Deployment>,
}

impl World {
    /// A cluster with the shared class `contour` and no dedicated ingress; environment
    /// `prod` sets nothing (it takes the cluster's values) and has `web1` and `web2`,
    /// both last deployed with `contour`.
    fn shared_contour() -> World {
        let mut world = World {
            cluster: class_level("contour"),
            ..World::default()
        };
        world.environment("prod", Level::default());
        world.application("web1", "prod", Some(shared("contour")));
        world.application("web2", "prod", Some(shared("contour")));
        world
    }

    /// The same cluster with `dedicated_ingress: {replicas: 1}` and prod's controller
    /// `ctl1` RUNNING, both applications on it.
    fn dedicated_running() -> World {
        let mut world = World::shared_contour();
        world.cluster.dedicated_ingress = dedicated(&["replicas"]);
        world.controller("ctl1", "prod", Phase::Running);
        world.record("web1", on());
        world.record("web2", on());
        world
    }

    fn view(&self) -> View {
        View::new(
            self.cluster.clone(),
            self.environments.clone(),
            self.deployments.clone(),
            None,
        )
    }

    fn environment(&mut self, id: &str, level: Level) {
        self.environments.insert(id.to_owned(), level);
    }

    fn application(&mut self, id: &str, environment: &str, record: Option<IngressTarget>) {
        self.deployments.insert(
            id.to_owned(),
            Deployment {
                environment: Some(environment.to_owned()),
                role: Role::Application,
                phase: Phase::Running,
                level: Level::default(),
                last_deployed: record,
                removal: None,
            },
        );
    }

    fn controller(&mut self, id: &str, environment: &str, phase: Phase) {
        self.deployments.insert(
            id.to_owned(),
            Deployment {
                environment: Some(environment.to_owned()),
                role: Role::IngressController,
                phase,
                ..Deployment::default()
            },
        );
    }

    fn phase(&mut self, id: &str, phase: Phase) {
        self.deployments.get_mut(id).expect(id).phase = phase;
    }

    /// Styrmin (re)deploys `id` with these ingress settings: it writes the record first.
    fn record(&mut self, id: &str, record: IngressTarget) {
        self.deployments.get_mut(id).expect(id).last_deployed = Some(record);
    }

    fn remove(&mut self, id: &str) {
        self.deployments.remove(id).expect(id);
    }

    /// At this step, deployment `id`'s Ingresses get `class` (CREATE with the chart's class,
    /// UPDATE that edits it by hand), from its record or its levels (`source`), and a
    /// deploy in its namespace is `deploy`.
    #[track_caller]
    fn expect(
        &self,
        step: &str,
        id: &str,
        class: &IngressTarget,
        source: SettingsSource,
        deploy: Deploy,
    ) {
        let view = self.view();
        let namespace = format!("styrmin-{id}");
        let environment = self.deployments[id].environment.clone().unwrap_or_default();

        // An Ingress CREATE: the chart names its own class.
        let created = ingress(Some(CHART_CLASS), None);
        let decision = decide(&view, &request("CREATE", &namespace, created.clone(), None));
        assert!(decision.status.is_none(), "{step}: {id}: {decision:?}");
        let settings = decision.settings.as_ref().expect("settings");
        assert_eq!(settings.source(), source, "{step}: {id}: settings source");
        let expected = match class {
            IngressTarget::Dedicated => (None, Some("traefik")),
            IngressTarget::Class(c) => (Some(c.as_str()), Some(c.as_str())),
            IngressTarget::NoClass => (Some(CHART_CLASS), None),
        };
        assert_eq!(
            classes(&apply(&created, &decision)),
            expected,
            "{step}: {id}: Ingress CREATE"
        );

        // An Ingress UPDATE: `kubectl edit` (or a hook) puts another class on the current one.
        let current = apply(&created, &decision);
        let mut edited = current.clone();
        edited["spec"]
            .as_object_mut()
            .expect("spec")
            .remove("ingressClassName");
        edited["metadata"]["annotations"] = json!({ingress_rules::CLASS_ANNOTATION: EDITED_CLASS});
        let decision = decide(
            &view,
            &request("UPDATE", &namespace, edited.clone(), Some(current)),
        );
        assert!(decision.status.is_none(), "{step}: {id}: {decision:?}");
        let expected = match class {
            IngressTarget::Dedicated => (None, Some("traefik")),
            IngressTarget::Class(c) => (Some(c.as_str()), Some(c.as_str())),
            IngressTarget::NoClass => (None, Some(EDITED_CLASS)),
        };
        assert_eq!(
            classes(&apply(&edited, &decision)),
            expected,
            "{step}: {id}: Ingress UPDATE"
        );

        // A deploy: the StyrminDeployment's spec changes, and the HelmRelease is upgraded.
        let old = styrmin_deployment(&environment, "v1");
        let new = styrmin_deployment(&environment, "v2");
        let decisions = [
            decide(&view, &request("UPDATE", &namespace, new, Some(old))),
            decide(
                &view,
                &request(
                    "UPDATE",
                    &namespace,
                    helm_release("2.0.0"),
                    Some(helm_release("1.0.0")),
                ),
            ),
        ];
        for decision in decisions {
            match deploy {
                Allowed => assert_ne!(
                    decision.outcome,
                    Outcome::Denied,
                    "{step}: {id}: deploy should be allowed: {decision:?}"
                ),
                Blocked(controller) => assert_w2(step, &decision, &environment, controller),
            }
        }
    }

    /// A new application `id` of `environment` may (or may not) be created.
    #[track_caller]
    fn expect_new_application(&self, step: &str, id: &str, environment: &str, deploy: Deploy) {
        let decision = decide(
            &self.view(),
            &request(
                "CREATE",
                &format!("styrmin-{id}"),
                styrmin_deployment(environment, "v1"),
                None,
            ),
        );
        match deploy {
            Allowed => assert_ne!(decision.outcome, Outcome::Denied, "{step}: {decision:?}"),
            Blocked(controller) => assert_w2(step, &decision, environment, controller),
        }
    }
}

#[track_caller]
fn assert_w2(step: &str, decision: &Decision, environment: &str, controller: &str) {
    assert_eq!(
        decision.outcome,
        Outcome::Denied,
        "{step}: deploy should be denied"
    );
    let message = &decision.status.as_ref().expect("status").message;
    for needle in [
        format!("environment {environment:?}"),
        format!("controller {controller:?} is being removed"),
        "cannot be deployed, updated or upgraded".to_owned(),
        "try again after the removal completes".to_owned(),
    ] {
        assert!(message.contains(&needle), "{step}: {needle:?} in {message}");
    }
}

fn request(
    operation: &str,
    namespace: &str,
    object: Value,
    old_object: Option<Value>,
) -> AdmissionRequest {
    serde_json::from_value(json!({
        "uid": "u-1",
        "kind": {"group": "", "version": "", "kind": ""},
        "namespace": namespace,
        "operation": operation,
        "object": object,
        "oldObject": old_object,
    }))
    .expect("request")
}

fn ingress(class_name: Option<&str>, annotation: Option<&str>) -> Value {
    let mut object = json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": "web"},
        "spec": {"rules": [{"host": "web.example.com"}]},
    });
    if let Some(class) = class_name {
        object["spec"]["ingressClassName"] = json!(class);
    }
    if let Some(class) = annotation {
        object["metadata"]["annotations"] = json!({ingress_rules::CLASS_ANNOTATION: class});
    }
    object
}

fn styrmin_deployment(environment: &str, image: &str) -> Value {
    json!({
        "apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminDeployment",
        "metadata": {"name": "app"},
        "spec": {"environmentId": environment, "role": "application", "image": image},
    })
}

fn helm_release(chart_version: &str) -> Value {
    json!({
        "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
        "metadata": {"name": "app"},
        "spec": {"chart": {"spec": {"chart": "web", "version": chart_version}}},
    })
}

fn apply(object: &Value, decision: &Decision) -> Value {
    let mut out = object.clone();
    json_patch::patch(&mut out, &decision.patch).expect("apply");
    out
}

fn classes(object: &Value) -> (Option<&str>, Option<&str>) {
    (
        object
            .pointer("/spec/ingressClassName")
            .and_then(Value::as_str),
        object
            .pointer("/metadata/annotations/kubernetes.io~1ingress.class")
            .and_then(Value::as_str),
    )
}

const RECORD: SettingsSource = SettingsSource::Record;
const LEVELS: SettingsSource = SettingsSource::Levels;

// --- Changing the dedicated ingress on the cluster: turned on ---

/// "When the update turns dedicated_ingress on: Styrmin creates the environment's ingress
/// controller. The applications stay on their current ingress while the controller is not
/// RUNNING with the new values. When the controller reaches RUNNING, Styrmin redeploys the
/// applications onto it."
#[test]
fn the_applications_stay_on_their_current_ingress_while_the_controller_is_not_running() {
    let mut world = World::shared_contour();
    let contour = shared("contour");
    for id in ["web1", "web2"] {
        world.expect("before", id, &contour, RECORD, Allowed);
    }

    // The cluster update turns dedicated_ingress on; Styrmin creates the controller.
    world.cluster.dedicated_ingress = dedicated(&[]);
    world.controller("ctl1", "prod", Phase::Pending);
    for phase in [Phase::Pending, Phase::Deploying] {
        world.phase("ctl1", phase);
        for id in ["web1", "web2"] {
            world.expect(
                &format!("controller {phase}"),
                id,
                &contour,
                RECORD,
                Allowed,
            );
        }
    }

    // RUNNING: still on contour until Styrmin redeploys each application onto it.
    world.phase("ctl1", Phase::Running);
    world.expect("controller RUNNING", "web1", &contour, RECORD, Allowed);
    world.record("web1", on());
    world.expect("web1 redeployed", "web1", &on(), RECORD, Allowed);
    world.expect("web1 redeployed", "web2", &contour, RECORD, Allowed);
    world.record("web2", on());
    for id in ["web1", "web2"] {
        world.expect("both redeployed", id, &on(), RECORD, Allowed);
    }
}

/// "When the update turns dedicated_ingress on or changes its values: Styrmin ... redeploys
/// it with the new values."
#[test]
fn when_the_update_changes_its_values_styrmin_redeploys_the_controller_with_the_new_values() {
    let mut world = World::dedicated_running();
    world.cluster.dedicated_ingress = dedicated(&["replicas", "service"]);
    for phase in [Phase::Deploying, Phase::Running] {
        world.phase("ctl1", phase);
        for id in ["web1", "web2"] {
            // The class does not depend on the controller's values: nobody moves.
            world.expect(&format!("controller {phase}"), id, &on(), RECORD, Allowed);
        }
    }
    // The applications are redeployed onto the controller with the new values: same class.
    world.record("web1", on());
    world.expect("redeployed", "web1", &on(), RECORD, Allowed);
}

// --- Turned off ---

/// "When the update turns dedicated_ingress off: Styrmin redeploys the applications to their
/// resolved ingress_class immediately. Styrmin removes the controller after every
/// application has been redeployed without the dedicated ingress."
#[test]
fn styrmin_redeploys_the_applications_to_their_resolved_ingress_class_then_removes_the_controller()
{
    let mut world = World::dedicated_running();
    let contour = shared("contour");
    world.cluster.dedicated_ingress = Setting::Absent;
    // Until its redeploy, an application keeps the controller, which is still RUNNING.
    world.expect("turned off", "web1", &on(), RECORD, Allowed);
    world.record("web1", contour.clone());
    world.expect("web1 redeployed", "web1", &contour, RECORD, Allowed);
    world.expect("web1 redeployed", "web2", &on(), RECORD, Allowed);
    world.record("web2", contour.clone());
    // Every application has moved: the controller is removed. The environment no longer has
    // dedicated_ingress on, so W2 denies nothing while it is DELETING.
    world.phase("ctl1", Phase::Deleting);
    for id in ["web1", "web2"] {
        world.expect("controller DELETING", id, &contour, RECORD, Allowed);
    }
    world.expect_new_application("controller DELETING", "web3", "prod", Allowed);
    world.remove("ctl1");
    for id in ["web1", "web2"] {
        world.expect("controller removed", id, &contour, RECORD, Allowed);
    }
}

/// "While the removal runs and dedicated_ingress is still set for the environment, Styrmin
/// rejects deploying, updating and upgrading applications in the environment. Try again
/// after the removal completes, and Styrmin installs a new ingress controller."
#[test]
fn while_the_removal_runs_and_dedicated_ingress_is_still_set_styrmin_rejects_deploying() {
    // The last application of prod is deleted: Styrmin removes the controller, and the
    // cluster still sets dedicated_ingress.
    let mut world = World::dedicated_running();
    world.remove("web2");
    world.phase("web1", Phase::Deleting);
    world.phase("ctl1", Phase::Deleting);
    world.expect_new_application("controller DELETING", "web3", "prod", Blocked("ctl1"));
    // Deleting the application, and its own status changes, are never denied.
    let view = world.view();
    let delete = request(
        "DELETE",
        "styrmin-web1",
        Value::Null,
        Some(styrmin_deployment("prod", "v1")),
    );
    assert_ne!(decide(&view, &delete).outcome, Outcome::Denied);
    let mut status_only = styrmin_deployment("prod", "v1");
    status_only["status"] = json!({"phase": "DELETING"});
    let status_change = request(
        "UPDATE",
        "styrmin-web1",
        status_only,
        Some(styrmin_deployment("prod", "v1")),
    );
    assert_ne!(decide(&view, &status_change).outcome, Outcome::Denied);
    // Another environment is not concerned.
    world.environment("dev", Level::default());
    world.expect_new_application("controller DELETING", "dev1", "dev", Allowed);

    // The removal completes: deploying works again, and the new application, which has no
    // record yet, resolves from the levels (the cluster's dedicated ingress).
    world.remove("web1");
    world.remove("ctl1");
    world.expect_new_application("removal completed", "web3", "prod", Allowed);
    world.application("web3", "prod", None);
    world.phase("web3", Phase::Pending);
    world.controller("ctl2", "prod", Phase::Pending);
    world.expect("new controller PENDING", "web3", &on(), LEVELS, Allowed);
}

/// "The update turns dedicated_ingress off while the controller is FAILED: Styrmin
/// redeploys the applications to the shared ingress class, then removes the controller."
#[test]
fn the_update_turns_dedicated_ingress_off_while_the_controller_is_failed() {
    let mut world = World::dedicated_running();
    let contour = shared("contour");
    world.phase("ctl1", Phase::Failed);
    world.expect("controller FAILED", "web1", &on(), RECORD, Allowed);
    world.cluster.dedicated_ingress = Setting::Absent;
    world.record("web1", contour.clone());
    world.record("web2", contour.clone());
    world.phase("ctl1", Phase::Deleting);
    for id in ["web1", "web2"] {
        world.expect("controller DELETING", id, &contour, RECORD, Allowed);
    }
}

/// "A FAILED application keeps the controller because FluxCD rolls a failed upgrade back to
/// the previous release, whose Ingress can still use the controller. Styrmin removes the
/// controller after the application is RUNNING again or deleted."
#[test]
fn a_failed_application_keeps_the_controller() {
    let mut world = World::dedicated_running();
    let contour = shared("contour");
    world.cluster.dedicated_ingress = Setting::Absent;
    world.record("web1", contour.clone());
    // web2's redeploy to the shared class fails.
    world.record("web2", contour.clone());
    world.phase("web2", Phase::Failed);
    // The controller stays RUNNING (not DELETING): nothing is blocked, web2 can be retried,
    // and its Ingresses (the rolled-back release's included) get the settings of its last
    // deploy, the shared class, which serves them.
    world.expect("web2 FAILED", "web1", &contour, RECORD, Allowed);
    world.expect("web2 FAILED", "web2", &contour, RECORD, Allowed);
    assert_eq!(world.deployments["ctl1"].phase, Phase::Running);
    // web2 is RUNNING again: now the controller goes.
    world.phase("web2", Phase::Running);
    world.phase("ctl1", Phase::Deleting);
    world.expect("controller DELETING", "web2", &contour, RECORD, Allowed);
}

// --- Failed or removed controllers ---

/// "A new or redeployed controller ends FAILED: the applications that wait to move onto it
/// stay on their current config, because Styrmin never moves an application onto a
/// controller that is not RUNNING. Submit the config again: Styrmin redeploys the controller
/// again, and moves the applications when it is RUNNING."
#[test]
fn a_new_controller_that_ends_failed_moves_nobody_and_submitting_again_retries() {
    let mut world = World::shared_contour();
    let contour = shared("contour");
    world.cluster.dedicated_ingress = dedicated(&[]);
    world.controller("ctl1", "prod", Phase::Pending);
    for phase in [Phase::Deploying, Phase::Failed] {
        world.phase("ctl1", phase);
        for id in ["web1", "web2"] {
            world.expect(
                &format!("controller {phase}"),
                id,
                &contour,
                RECORD,
                Allowed,
            );
        }
    }
    // Submit the config again: the controller is redeployed, then the applications move.
    world.phase("ctl1", Phase::Deploying);
    world.expect("resubmitted", "web1", &contour, RECORD, Allowed);
    world.phase("ctl1", Phase::Running);
    world.expect("controller RUNNING", "web1", &contour, RECORD, Allowed);
    world.record("web1", on());
    world.record("web2", on());
    for id in ["web1", "web2"] {
        world.expect("moved", id, &on(), RECORD, Allowed);
    }
}

/// "The controller is FAILED and the update does not change the environment's
/// dedicated_ingress: Styrmin redeploys the applications for the other changed values and
/// leaves the controller as it is."
#[test]
fn the_controller_is_failed_and_the_update_does_not_change_dedicated_ingress() {
    let mut world = World::dedicated_running();
    world.phase("ctl1", Phase::Failed);
    // Another value changes (the cluster's ingress_class, ignored while dedicated is on).
    world.cluster.ingress_class = Setting::Value("nginx".into());
    world.record("web1", on());
    world.record("web2", on());
    for id in ["web1", "web2"] {
        world.expect("redeployed for other values", id, &on(), RECORD, Allowed);
    }
    assert_eq!(world.deployments["ctl1"].phase, Phase::Failed);
}

/// "The controller is being removed (DELETING): Styrmin does not create a second
/// controller, and the applications that would move onto one stay on their current config.
/// Submit the config again after the removal has finished; Styrmin then creates a new
/// controller and moves them."
#[test]
fn the_update_arrives_while_the_controller_is_being_removed() {
    let mut world = World::dedicated_running();
    let contour = shared("contour");
    // Turned off: the applications moved to contour, the controller is being removed.
    world.cluster.dedicated_ingress = Setting::Absent;
    world.record("web1", contour.clone());
    world.record("web2", contour.clone());
    world.phase("ctl1", Phase::Deleting);
    // The update turns it on again while ctl1 is DELETING: no second controller, nobody moves,
    // and W2 now blocks deploys (the environment has dedicated_ingress on again).
    world.cluster.dedicated_ingress = dedicated(&[]);
    for id in ["web1", "web2"] {
        world.expect(
            "on again while DELETING",
            id,
            &contour,
            RECORD,
            Blocked("ctl1"),
        );
    }
    assert_eq!(world.view().controllers_of("prod").count(), 1);
    // The removal finishes; the config is submitted again: a new controller, then the move.
    world.remove("ctl1");
    world.expect("removal finished", "web1", &contour, RECORD, Allowed);
    world.controller("ctl2", "prod", Phase::Pending);
    for phase in [Phase::Pending, Phase::Deploying] {
        world.phase("ctl2", phase);
        world.expect(&format!("ctl2 {phase}"), "web1", &contour, RECORD, Allowed);
    }
    world.phase("ctl2", Phase::Running);
    world.record("web1", on());
    world.record("web2", on());
    for id in ["web1", "web2"] {
        world.expect("moved onto ctl2", id, &on(), RECORD, Allowed);
    }
}

// --- Environments ---

/// "Environments that set their own dedicated_ingress keep their own value." and "An
/// environment that does not set dedicated_ingress takes the cluster's value, so an
/// environment cannot turn off a dedicated ingress that the cluster sets."
#[test]
fn environments_that_set_their_own_dedicated_ingress_keep_their_own_value() {
    let mut world = World::shared_contour();
    let contour = shared("contour");
    // `solo` sets its own dedicated_ingress; its controller runs; `null` in `quiet` does not
    // turn anything off.
    world.environment(
        "solo",
        Level {
            dedicated_ingress: dedicated(&["replicas"]),
            ..Level::default()
        },
    );
    world.controller("ctl-solo", "solo", Phase::Running);
    world.application("s1", "solo", Some(on()));
    world.environment(
        "quiet",
        Level {
            dedicated_ingress: Setting::Null,
            ..Level::default()
        },
    );
    world.application("q1", "quiet", Some(contour.clone()));

    // The cluster turns dedicated_ingress on: prod and quiet take it, solo keeps its own.
    world.cluster.dedicated_ingress = dedicated(&[]);
    world.controller("ctl1", "prod", Phase::Deploying);
    world.controller("ctl-quiet", "quiet", Phase::Deploying);
    world.expect("cluster on", "s1", &on(), RECORD, Allowed);
    world.expect("cluster on", "web1", &contour, RECORD, Allowed);
    world.expect("cluster on", "q1", &contour, RECORD, Allowed);
    // quiet's `null` cannot turn the cluster's dedicated ingress off: W2 counts it as on.
    world.phase("ctl-quiet", Phase::Deleting);
    world.expect(
        "quiet's controller DELETING",
        "q1",
        &contour,
        RECORD,
        Blocked("ctl-quiet"),
    );

    // The cluster turns it off again: solo keeps its controller and its applications.
    world.cluster.dedicated_ingress = Setting::Absent;
    world.phase("ctl-solo", Phase::Running);
    world.expect("cluster off", "s1", &on(), RECORD, Allowed);
    world.expect("cluster off", "q1", &contour, RECORD, Allowed);
    // Even while solo's own controller is being removed, W2 blocks solo only.
    world.phase("ctl-solo", Phase::Deleting);
    world.expect("solo DELETING", "s1", &on(), RECORD, Blocked("ctl-solo"));
    world.expect("solo DELETING", "web1", &contour, RECORD, Allowed);
}

/// "When the update turns dedicated_ingress on or changes its values, Styrmin creates the
/// controller or redeploys it with the new values. The applications stay on their current
/// ingress until the controller is RUNNING with the new values, then Styrmin redeploys them
/// onto it." (an environment update, against a cluster that does not set it)
#[test]
fn an_environment_update_turns_its_own_dedicated_ingress_on_against_the_clusters_value() {
    let mut world = World::shared_contour();
    let contour = shared("contour");
    world.environment(
        "prod",
        Level {
            ingress_class: Setting::Value("haproxy".into()),
            dedicated_ingress: dedicated(&[]),
        },
    );
    world.controller("ctl1", "prod", Phase::Pending);
    for phase in [Phase::Pending, Phase::Deploying, Phase::Running] {
        world.phase("ctl1", phase);
        world.expect(
            &format!("controller {phase}"),
            "web1",
            &contour,
            RECORD,
            Allowed,
        );
    }
    world.record("web1", on());
    world.expect("redeployed", "web1", &on(), RECORD, Allowed);
    world.expect("redeployed", "web2", &contour, RECORD, Allowed);
}

/// "When the update turns dedicated_ingress off and the cluster sets dedicated_ingress, the
/// environment takes the cluster's value. Styrmin redeploys the controller with the
/// cluster's values when they differ, in the same order."
#[test]
fn an_environment_that_turns_dedicated_ingress_off_takes_the_clusters_value() {
    let mut world = World::dedicated_running();
    world.environment(
        "prod",
        Level {
            dedicated_ingress: dedicated(&["service"]),
            ..Level::default()
        },
    );
    // The environment's own value is turned off: the cluster's applies; the controller is
    // redeployed with the cluster's values; the applications stay on it throughout.
    world.environment("prod", Level::default());
    for phase in [Phase::Deploying, Phase::Running] {
        world.phase("ctl1", phase);
        for id in ["web1", "web2"] {
            world.expect(&format!("controller {phase}"), id, &on(), RECORD, Allowed);
        }
    }
}

/// "When the update turns dedicated_ingress off and the cluster does not set it, Styrmin
/// redeploys the applications to the shared ingress class immediately, and removes the
/// controller after they have moved."
#[test]
fn an_environment_that_turns_dedicated_ingress_off_moves_to_the_shared_class_first() {
    let mut world = World::shared_contour();
    let haproxy = shared("haproxy");
    world.environment(
        "prod",
        Level {
            ingress_class: Setting::Value("haproxy".into()),
            dedicated_ingress: dedicated(&[]),
        },
    );
    world.controller("ctl1", "prod", Phase::Running);
    world.record("web1", on());
    world.record("web2", on());
    world.environment("prod", class_level("haproxy"));
    world.expect("turned off", "web2", &on(), RECORD, Allowed);
    world.record("web1", haproxy.clone());
    world.record("web2", haproxy.clone());
    world.phase("ctl1", Phase::Deleting);
    for id in ["web1", "web2"] {
        world.expect("controller DELETING", id, &haproxy, RECORD, Allowed);
    }
}

// --- A deployment that sets its own dedicated_ingress ---

/// "A deployment can set its own dedicated_ingress in its config. It keeps that value when
/// a cluster or environment update changes the environment's dedicated_ingress, so the
/// update does not move it onto the environment's controller." and "When a cluster or
/// environment update changes another value of such a deployment's resolved config, ...
/// Styrmin redeploys the deployment immediately, whatever the state of the controller."
#[test]
fn a_deployment_that_sets_its_own_dedicated_ingress_keeps_it_through_every_transition() {
    let mut world = World::dedicated_running();
    let contour = shared("contour");
    world.application("pin", "prod", Some(on()));
    world
        .deployments
        .get_mut("pin")
        .expect("pin")
        .level
        .dedicated_ingress = dedicated(&[]);
    let pin = |world: &World, step: &str, deploy: Deploy| {
        world.expect(step, "pin", &on(), RECORD, deploy);
    };
    pin(&world, "start", Allowed);

    // Values change while RUNNING.
    world.cluster.dedicated_ingress = dedicated(&["replicas", "service"]);
    world.phase("ctl1", Phase::Deploying);
    pin(&world, "values change", Allowed);
    // The controller ends FAILED; another value changes: pin is redeployed at once, and
    // keeps the dedicated ingress.
    world.phase("ctl1", Phase::Failed);
    world.record("pin", on());
    pin(&world, "controller FAILED, redeployed", Allowed);
    world.phase("ctl1", Phase::Running);

    // Turned off: the others move to contour, pin does not.
    world.cluster.dedicated_ingress = Setting::Absent;
    world.record("web1", contour.clone());
    world.record("web2", contour.clone());
    world.record("pin", on());
    pin(&world, "turned off", Allowed);
    world.expect("turned off", "web1", &contour, RECORD, Allowed);
    // Its levels say the same as its record: it waits for nothing.
    let settings = world.view().settings_for_deployment("pin");
    assert!(!settings.waits_for_redeploy(), "{settings:?}");

    // Turned on again: the others move back once the controller runs; pin stays.
    world.cluster.dedicated_ingress = dedicated(&[]);
    world.phase("ctl1", Phase::Deploying);
    pin(&world, "on again", Allowed);
    world.expect("on again", "web1", &contour, RECORD, Allowed);
    // And while a controller is being removed with dedicated_ingress on, W2 blocks it like
    // every application of the environment.
    world.phase("ctl1", Phase::Deleting);
    pin(&world, "controller DELETING", Blocked("ctl1"));
}

// --- The first application ---

/// "In an environment without applications, Styrmin creates no controller; it creates one
/// when you deploy the first application, as before."
#[test]
fn in_an_environment_without_applications_styrmin_creates_the_controller_with_the_first_application()
 {
    let mut world = World::default();
    world.cluster.dedicated_ingress = dedicated(&[]);
    world.environment("fresh", Level::default());
    // No controller and nothing being removed: the first application may be created.
    world.expect_new_application("empty environment", "app1", "fresh", Allowed);
    // Styrmin creates the application and the controller. Before it has a record, the
    // application's Ingresses resolve from the levels (W5): the dedicated ingress.
    world.application("app1", "fresh", None);
    world.phase("app1", Phase::Deploying);
    world.controller("ctl1", "fresh", Phase::Pending);
    for phase in [Phase::Pending, Phase::Deploying, Phase::Running] {
        world.phase("ctl1", phase);
        world.expect(
            &format!("controller {phase}"),
            "app1",
            &on(),
            LEVELS,
            Allowed,
        );
    }
    world.record("app1", on());
    world.phase("app1", Phase::Running);
    world.expect("deployed", "app1", &on(), RECORD, Allowed);
}

/// "When an environment's controller reaches RUNNING for any reason, for example after the
/// first deploy creates it, Styrmin also redeploys the applications of that environment that
/// are not yet at the config they resolve to."
#[test]
fn when_the_controller_reaches_running_styrmin_redeploys_the_applications_not_yet_at_their_config()
{
    let mut world = World::default();
    world.cluster.dedicated_ingress = dedicated(&[]);
    world.environment("fresh", Level::default());
    // Styrmin deployed the first application on the cluster default class while the
    // controller it created was not RUNNING, and recorded that.
    world.application("app1", "fresh", Some(shared("traefik")));
    world.controller("ctl1", "fresh", Phase::Deploying);
    world.expect(
        "controller DEPLOYING",
        "app1",
        &shared("traefik"),
        RECORD,
        Allowed,
    );
    let settings = world.view().settings_for_deployment("app1");
    assert!(settings.waits_for_redeploy());
    world.phase("ctl1", Phase::Running);
    world.record("app1", on());
    world.expect("redeployed", "app1", &on(), RECORD, Allowed);
}

/// A record of "no class" (R5) is kept like any other: the chart's class stays, and an
/// edit by hand stays too, until Styrmin redeploys the application onto the controller.
#[test]
fn the_applications_stay_on_their_current_ingress_even_when_that_is_no_class() {
    let mut world = World::shared_contour();
    world.cluster.ingress_class = Setting::Null;
    world.record("web1", IngressTarget::NoClass);
    world.expect("no class", "web1", &IngressTarget::NoClass, RECORD, Allowed);
    world.cluster.dedicated_ingress = dedicated(&[]);
    world.controller("ctl1", "prod", Phase::Deploying);
    world.expect(
        "controller DEPLOYING",
        "web1",
        &IngressTarget::NoClass,
        RECORD,
        Allowed,
    );
    world.phase("ctl1", Phase::Running);
    world.record("web1", on());
    world.expect("moved", "web1", &on(), RECORD, Allowed);
}
