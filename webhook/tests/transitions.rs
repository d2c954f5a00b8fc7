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

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::collections::HashMap;

use serde_json::{Value, json};
use styrmin_ingress_rules::example_targets::{dedicated, shared};
use styrmin_ingress_rules::{DedicatedIngress, IngressTarget, Level, Setting, SettingsSource};

use styrmin_webhook::decide::*;
use styrmin_webhook::view::{Deployment, Phase, Role, View};
use support::patched::{apply, classes};
use support::review::{create, decide, helm_release, ingress, request, styrmin_deployment, update};

mod support;

const CHART_CLASS: &str = "chart-class";
const EDITED_CLASS: &str = "edited-by-hand";

fn dedicated_ingress(keys: &[&str]) -> Setting<DedicatedIngress> {
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

/// A level that sets `dedicated_ingress` with these value keys, and nothing else.
fn dedicated_level(keys: &[&str]) -> Level {
    Level {
        dedicated_ingress: dedicated_ingress(keys),
        ..Level::default()
    }
}

/// What W2 answers a deploy in one namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Deploy {
    Allowed,
    /// Denied: the environment's controller (this id) is being removed.
    Blocked(&'static str),
}

use Deploy::{Allowed, Blocked};
use Phase::{Deleting, Deploying, Failed, Pending, Running};

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
        world.cluster.dedicated_ingress = dedicated_ingress(&["replicas"]);
        world.controller("ctl1", "prod", Running);
        world.record_each(PROD_APPS, &dedicated());
        world
    }

    /// [`World::shared_contour`] where `prod` sets `ingress_class: haproxy` and its own
    /// `dedicated_ingress: {}`, and its controller `ctl1` is in `phase`.
    fn prod_dedicated_over_haproxy(phase: Phase) -> World {
        let mut world = World::shared_contour();
        world.environment(
            "prod",
            Level {
                dedicated_ingress: dedicated_ingress(&[]),
                ..class_level("haproxy")
            },
        );
        world.controller("ctl1", "prod", phase);
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
                phase: Running,
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

    /// Styrmin (re)deploys each of `ids` with the same ingress settings.
    fn record_each(&mut self, ids: &[&str], record: &IngressTarget) {
        for id in ids {
            self.record(id, record.clone());
        }
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
        let created = ingress("networking.k8s.io/v1", Some(CHART_CLASS), None);
        let decision = create(&view, &namespace, created.clone());
        assert!(decision.status.is_none(), "{step}: {id}: {decision:?}");
        let settings = decision.settings.as_ref().expect("settings");
        assert_eq!(settings.source(), source, "{step}: {id}: settings source");
        let expected = match class {
            IngressTarget::Dedicated => (None, Some("traefik")),
            IngressTarget::Class(c) => (Some(c.as_str()), Some(c.as_str())),
            IngressTarget::NoClass => (Some(CHART_CLASS), None),
        };
        assert_eq!(
            classes(&apply(&created, &decision.patch)),
            expected,
            "{step}: {id}: Ingress CREATE"
        );

        // An Ingress UPDATE: `kubectl edit` (or a hook) puts another class on the current one.
        let current = apply(&created, &decision.patch);
        let mut edited = current.clone();
        edited["spec"]
            .as_object_mut()
            .expect("spec")
            .remove("ingressClassName");
        edited["metadata"]["annotations"] =
            json!({styrmin_ingress_rules::CLASS_ANNOTATION: EDITED_CLASS});
        let decision = update(&view, &namespace, edited.clone(), current);
        assert!(decision.status.is_none(), "{step}: {id}: {decision:?}");
        let expected = match class {
            IngressTarget::Dedicated => (None, Some("traefik")),
            IngressTarget::Class(c) => (Some(c.as_str()), Some(c.as_str())),
            IngressTarget::NoClass => (None, Some(EDITED_CLASS)),
        };
        assert_eq!(
            classes(&apply(&edited, &decision.patch)),
            expected,
            "{step}: {id}: Ingress UPDATE"
        );

        // A deploy: the StyrminDeployment's spec changes, and the HelmRelease is upgraded.
        let old = styrmin_deployment(&environment, "application", "v1");
        let new = styrmin_deployment(&environment, "application", "v2");
        let decisions = [
            update(&view, &namespace, new, old),
            update(
                &view,
                &namespace,
                helm_release("v2", "2.0.0"),
                helm_release("v2", "1.0.0"),
            ),
        ];
        for decision in decisions {
            match deploy {
                Allowed => assert_ne!(
                    decision.outcome,
                    RequestOutcome::Denied,
                    "{step}: {id}: deploy should be allowed: {decision:?}"
                ),
                Blocked(controller) => assert_w2(step, &decision, &environment, controller),
            }
        }
    }

    /// [`World::expect`] for each of the applications `ids`.
    #[track_caller]
    fn expect_each(
        &self,
        step: &str,
        ids: &[&str],
        class: &IngressTarget,
        source: SettingsSource,
        deploy: Deploy,
    ) {
        for id in ids {
            self.expect(step, id, class, source, deploy);
        }
    }

    /// Controller `controller` goes through `phases`; at each, the applications `ids` get
    /// `class` (from their record or their levels, `source`) and may deploy.
    #[track_caller]
    fn expect_through(
        &mut self,
        controller: &str,
        phases: &[Phase],
        ids: &[&str],
        class: &IngressTarget,
        source: SettingsSource,
    ) {
        for phase in phases {
            self.phase(controller, *phase);
            let step = format!("controller {controller} {phase}");
            self.expect_each(&step, ids, class, source, Allowed);
        }
    }

    /// prod's controller `ctl1` is redeployed with other values (DEPLOYING, then RUNNING);
    /// the applications stay on it throughout.
    #[track_caller]
    fn expect_stay_on_the_redeployed_controller(&mut self) {
        self.expect_through(
            "ctl1",
            &[Deploying, Running],
            PROD_APPS,
            &dedicated(),
            RECORD,
        );
    }

    /// A new application `id` of `environment` may (or may not) be created.
    #[track_caller]
    fn expect_new_application(&self, step: &str, id: &str, environment: &str, deploy: Deploy) {
        let decision = create(
            &self.view(),
            &format!("styrmin-{id}"),
            styrmin_deployment(environment, "application", "v1"),
        );
        match deploy {
            Allowed => assert_ne!(
                decision.outcome,
                RequestOutcome::Denied,
                "{step}: {decision:?}"
            ),
            Blocked(controller) => assert_w2(step, &decision, environment, controller),
        }
    }
}

#[track_caller]
fn assert_w2(step: &str, decision: &Decision, environment: &str, controller: &str) {
    assert_eq!(
        decision.outcome,
        RequestOutcome::Denied,
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

/// The applications of `prod` in [`World::shared_contour`] and [`World::dedicated_running`].
const PROD_APPS: &[&str] = &["web1", "web2"];

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
    world.expect_each("before", PROD_APPS, &contour, RECORD, Allowed);

    // The cluster update turns dedicated_ingress on; Styrmin creates the controller.
    world.cluster.dedicated_ingress = dedicated_ingress(&[]);
    world.controller("ctl1", "prod", Pending);
    world.expect_through("ctl1", &[Pending, Deploying], PROD_APPS, &contour, RECORD);

    // RUNNING: still on contour until Styrmin redeploys each application onto it.
    world.expect_through("ctl1", &[Running], &["web1"], &contour, RECORD);
    world.record("web1", dedicated());
    world.expect("web1 redeployed", "web1", &dedicated(), RECORD, Allowed);
    world.expect("web1 redeployed", "web2", &contour, RECORD, Allowed);
    world.record("web2", dedicated());
    world.expect_each("both redeployed", PROD_APPS, &dedicated(), RECORD, Allowed);
}

/// "When the update turns dedicated_ingress on or changes its values: Styrmin ... redeploys
/// it with the new values."
#[test]
fn when_the_update_changes_its_values_styrmin_redeploys_the_controller_with_the_new_values() {
    let mut world = World::dedicated_running();
    world.cluster.dedicated_ingress = dedicated_ingress(&["replicas", "service"]);
    // The class does not depend on the controller's values: nobody moves.
    world.expect_stay_on_the_redeployed_controller();
    // The applications are redeployed onto the controller with the new values: same class.
    world.record("web1", dedicated());
    world.expect("redeployed", "web1", &dedicated(), RECORD, Allowed);
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
    world.expect("turned off", "web1", &dedicated(), RECORD, Allowed);
    world.record("web1", contour.clone());
    world.expect("web1 redeployed", "web1", &contour, RECORD, Allowed);
    world.expect("web1 redeployed", "web2", &dedicated(), RECORD, Allowed);
    world.record("web2", contour.clone());
    // Every application has moved: the controller is removed. The environment no longer has
    // dedicated_ingress on, so W2 denies nothing while it is DELETING.
    world.expect_through("ctl1", &[Deleting], PROD_APPS, &contour, RECORD);
    world.expect_new_application("controller DELETING", "web3", "prod", Allowed);
    world.remove("ctl1");
    world.expect_each("controller removed", PROD_APPS, &contour, RECORD, Allowed);
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
    world.phase("web1", Deleting);
    world.phase("ctl1", Deleting);
    world.expect_new_application("controller DELETING", "web3", "prod", Blocked("ctl1"));
    // Deleting the application, and its own status changes, are never denied.
    let view = world.view();
    let delete = request(
        "DELETE",
        "styrmin-web1",
        Value::Null,
        Some(styrmin_deployment("prod", "application", "v1")),
    );
    assert_ne!(decide(&view, &delete).outcome, RequestOutcome::Denied);
    let mut status_only = styrmin_deployment("prod", "application", "v1");
    status_only["status"] = json!({"phase": "DELETING"});
    let status_change = request(
        "UPDATE",
        "styrmin-web1",
        status_only,
        Some(styrmin_deployment("prod", "application", "v1")),
    );
    assert_ne!(
        decide(&view, &status_change).outcome,
        RequestOutcome::Denied
    );
    // Another environment is not concerned.
    world.environment("dev", Level::default());
    world.expect_new_application("controller DELETING", "dev1", "dev", Allowed);

    // The removal completes: deploying works again, and the new application, which has no
    // record yet, resolves from the levels (the cluster's dedicated ingress).
    world.remove("web1");
    world.remove("ctl1");
    world.expect_new_application("removal completed", "web3", "prod", Allowed);
    world.application("web3", "prod", None);
    world.phase("web3", Pending);
    world.controller("ctl2", "prod", Pending);
    world.expect(
        "new controller PENDING",
        "web3",
        &dedicated(),
        LEVELS,
        Allowed,
    );
}

/// "The update turns dedicated_ingress off while the controller is FAILED: Styrmin
/// redeploys the applications to the shared ingress class, then removes the controller."
#[test]
fn the_update_turns_dedicated_ingress_off_while_the_controller_is_failed() {
    let mut world = World::dedicated_running();
    let contour = shared("contour");
    world.expect_through("ctl1", &[Failed], &["web1"], &dedicated(), RECORD);
    world.cluster.dedicated_ingress = Setting::Absent;
    world.record_each(PROD_APPS, &contour);
    world.expect_through("ctl1", &[Deleting], PROD_APPS, &contour, RECORD);
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
    world.phase("web2", Failed);
    // The controller stays RUNNING (not DELETING): nothing is blocked, web2 can be retried,
    // and its Ingresses (the rolled-back release's included) get the settings of its last
    // deploy, the shared class, which serves them.
    world.expect("web2 FAILED", "web1", &contour, RECORD, Allowed);
    world.expect("web2 FAILED", "web2", &contour, RECORD, Allowed);
    assert_eq!(world.deployments["ctl1"].phase, Running);
    // web2 is RUNNING again: now the controller goes.
    world.phase("web2", Running);
    world.expect_through("ctl1", &[Deleting], &["web2"], &contour, RECORD);
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
    world.cluster.dedicated_ingress = dedicated_ingress(&[]);
    world.controller("ctl1", "prod", Pending);
    world.expect_through("ctl1", &[Deploying, Failed], PROD_APPS, &contour, RECORD);
    // Submit the config again: the controller is redeployed, then the applications move.
    world.phase("ctl1", Deploying);
    world.expect("resubmitted", "web1", &contour, RECORD, Allowed);
    world.expect_through("ctl1", &[Running], &["web1"], &contour, RECORD);
    world.record_each(PROD_APPS, &dedicated());
    world.expect_each("moved", PROD_APPS, &dedicated(), RECORD, Allowed);
}

/// "The controller is FAILED and the update does not change the environment's
/// dedicated_ingress: Styrmin redeploys the applications for the other changed values and
/// leaves the controller as it is."
#[test]
fn the_controller_is_failed_and_the_update_does_not_change_dedicated_ingress() {
    let mut world = World::dedicated_running();
    world.phase("ctl1", Failed);
    // Another value changes (the cluster's ingress_class, ignored while dedicated is on).
    world.cluster.ingress_class = Setting::Value("nginx".into());
    world.record_each(PROD_APPS, &dedicated());
    world.expect_each(
        "redeployed for other values",
        PROD_APPS,
        &dedicated(),
        RECORD,
        Allowed,
    );
    assert_eq!(world.deployments["ctl1"].phase, Failed);
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
    world.record_each(PROD_APPS, &contour);
    world.phase("ctl1", Deleting);
    // The update turns it on again while ctl1 is DELETING: no second controller, nobody moves,
    // and W2 now blocks deploys (the environment has dedicated_ingress on again).
    world.cluster.dedicated_ingress = dedicated_ingress(&[]);
    world.expect_each(
        "on again while DELETING",
        PROD_APPS,
        &contour,
        RECORD,
        Blocked("ctl1"),
    );
    assert_eq!(world.view().controllers_of("prod").count(), 1);
    // The removal finishes; the config is submitted again: a new controller, then the move.
    world.remove("ctl1");
    world.expect("removal finished", "web1", &contour, RECORD, Allowed);
    world.controller("ctl2", "prod", Pending);
    world.expect_through("ctl2", &[Pending, Deploying], &["web1"], &contour, RECORD);
    world.phase("ctl2", Running);
    world.record_each(PROD_APPS, &dedicated());
    world.expect_each("moved onto ctl2", PROD_APPS, &dedicated(), RECORD, Allowed);
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
    world.environment("solo", dedicated_level(&["replicas"]));
    world.controller("ctl-solo", "solo", Running);
    world.application("s1", "solo", Some(dedicated()));
    world.environment(
        "quiet",
        Level {
            dedicated_ingress: Setting::Null,
            ..Level::default()
        },
    );
    world.application("q1", "quiet", Some(contour.clone()));

    // The cluster turns dedicated_ingress on: prod and quiet take it, solo keeps its own.
    world.cluster.dedicated_ingress = dedicated_ingress(&[]);
    world.controller("ctl1", "prod", Deploying);
    world.controller("ctl-quiet", "quiet", Deploying);
    world.expect("cluster on", "s1", &dedicated(), RECORD, Allowed);
    world.expect("cluster on", "web1", &contour, RECORD, Allowed);
    world.expect("cluster on", "q1", &contour, RECORD, Allowed);
    // quiet's `null` cannot turn the cluster's dedicated ingress off: W2 counts it as on.
    world.phase("ctl-quiet", Deleting);
    world.expect(
        "quiet's controller DELETING",
        "q1",
        &contour,
        RECORD,
        Blocked("ctl-quiet"),
    );

    // The cluster turns it off again: solo keeps its controller and its applications.
    world.cluster.dedicated_ingress = Setting::Absent;
    world.phase("ctl-solo", Running);
    world.expect("cluster off", "s1", &dedicated(), RECORD, Allowed);
    world.expect("cluster off", "q1", &contour, RECORD, Allowed);
    // Even while solo's own controller is being removed, W2 blocks solo only.
    world.phase("ctl-solo", Deleting);
    world.expect(
        "solo DELETING",
        "s1",
        &dedicated(),
        RECORD,
        Blocked("ctl-solo"),
    );
    world.expect("solo DELETING", "web1", &contour, RECORD, Allowed);
}

/// "When the update turns dedicated_ingress on or changes its values, Styrmin creates the
/// controller or redeploys it with the new values. The applications stay on their current
/// ingress until the controller is RUNNING with the new values, then Styrmin redeploys them
/// onto it." (an environment update, against a cluster that does not set it)
#[test]
fn an_environment_update_turns_its_own_dedicated_ingress_on_against_the_clusters_value() {
    let mut world = World::prod_dedicated_over_haproxy(Pending);
    let contour = shared("contour");
    world.expect_through(
        "ctl1",
        &[Pending, Deploying, Running],
        &["web1"],
        &contour,
        RECORD,
    );
    world.record("web1", dedicated());
    world.expect("redeployed", "web1", &dedicated(), RECORD, Allowed);
    world.expect("redeployed", "web2", &contour, RECORD, Allowed);
}

/// "When the update turns dedicated_ingress off and the cluster sets dedicated_ingress, the
/// environment takes the cluster's value. Styrmin redeploys the controller with the
/// cluster's values when they differ, in the same order."
#[test]
fn an_environment_that_turns_dedicated_ingress_off_takes_the_clusters_value() {
    let mut world = World::dedicated_running();
    world.environment("prod", dedicated_level(&["service"]));
    // The environment's own value is turned off: the cluster's applies; the controller is
    // redeployed with the cluster's values; the applications stay on it throughout.
    world.environment("prod", Level::default());
    world.expect_stay_on_the_redeployed_controller();
}

/// "When the update turns dedicated_ingress off and the cluster does not set it, Styrmin
/// redeploys the applications to the shared ingress class immediately, and removes the
/// controller after they have moved."
#[test]
fn an_environment_that_turns_dedicated_ingress_off_moves_to_the_shared_class_first() {
    let mut world = World::prod_dedicated_over_haproxy(Running);
    let haproxy = shared("haproxy");
    world.record_each(PROD_APPS, &dedicated());
    world.environment("prod", class_level("haproxy"));
    world.expect("turned off", "web2", &dedicated(), RECORD, Allowed);
    world.record_each(PROD_APPS, &haproxy);
    world.expect_through("ctl1", &[Deleting], PROD_APPS, &haproxy, RECORD);
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
    world.application("pin", "prod", Some(dedicated()));
    world
        .deployments
        .get_mut("pin")
        .expect("pin")
        .level
        .dedicated_ingress = dedicated_ingress(&[]);
    let pin = |world: &World, step: &str, deploy: Deploy| {
        world.expect(step, "pin", &dedicated(), RECORD, deploy);
    };
    pin(&world, "start", Allowed);

    // Values change while RUNNING.
    world.cluster.dedicated_ingress = dedicated_ingress(&["replicas", "service"]);
    world.phase("ctl1", Deploying);
    pin(&world, "values change", Allowed);
    // The controller ends FAILED; another value changes: pin is redeployed at once, and
    // keeps the dedicated ingress.
    world.phase("ctl1", Failed);
    world.record("pin", dedicated());
    pin(&world, "controller FAILED, redeployed", Allowed);
    world.phase("ctl1", Running);

    // Turned off: the others move to contour, pin does not.
    world.cluster.dedicated_ingress = Setting::Absent;
    world.record_each(PROD_APPS, &contour);
    world.record("pin", dedicated());
    pin(&world, "turned off", Allowed);
    world.expect("turned off", "web1", &contour, RECORD, Allowed);
    // Its levels say the same as its record: it waits for nothing.
    let settings = world.view().settings_for_deployment("pin");
    assert!(!settings.waits_for_redeploy(), "{settings:?}");

    // Turned on again: the others move back once the controller runs; pin stays.
    world.cluster.dedicated_ingress = dedicated_ingress(&[]);
    world.phase("ctl1", Deploying);
    pin(&world, "on again", Allowed);
    world.expect("on again", "web1", &contour, RECORD, Allowed);
    // And while a controller is being removed with dedicated_ingress on, W2 blocks it like
    // every application of the environment.
    world.phase("ctl1", Deleting);
    pin(&world, "controller DELETING", Blocked("ctl1"));
}

// --- The first application ---

/// "In an environment without applications, Styrmin creates no controller; it creates one
/// when you deploy the first application, as before."
#[test]
fn in_an_environment_without_applications_styrmin_creates_the_controller_with_the_first_application()
 {
    let mut world = World::default();
    world.cluster.dedicated_ingress = dedicated_ingress(&[]);
    world.environment("fresh", Level::default());
    // No controller and nothing being removed: the first application may be created.
    world.expect_new_application("empty environment", "app1", "fresh", Allowed);
    // Styrmin creates the application and the controller. Before it has a record, the
    // application's Ingresses resolve from the levels (W5): the dedicated ingress.
    world.application("app1", "fresh", None);
    world.phase("app1", Deploying);
    world.controller("ctl1", "fresh", Pending);
    world.expect_through(
        "ctl1",
        &[Pending, Deploying, Running],
        &["app1"],
        &dedicated(),
        LEVELS,
    );
    world.record("app1", dedicated());
    world.phase("app1", Running);
    world.expect("deployed", "app1", &dedicated(), RECORD, Allowed);
}

/// "When an environment's controller reaches RUNNING for any reason, for example after the
/// first deploy creates it, Styrmin also redeploys the applications of that environment that
/// are not yet at the config they resolve to."
#[test]
fn when_the_controller_reaches_running_styrmin_redeploys_the_applications_not_yet_at_their_config()
{
    let mut world = World::default();
    world.cluster.dedicated_ingress = dedicated_ingress(&[]);
    world.environment("fresh", Level::default());
    // Styrmin deployed the first application on the cluster default class while the
    // controller it created was not RUNNING, and recorded that.
    world.application("app1", "fresh", Some(shared("traefik")));
    world.controller("ctl1", "fresh", Deploying);
    world.expect(
        "controller DEPLOYING",
        "app1",
        &shared("traefik"),
        RECORD,
        Allowed,
    );
    let settings = world.view().settings_for_deployment("app1");
    assert!(settings.waits_for_redeploy());
    world.phase("ctl1", Running);
    world.record("app1", dedicated());
    world.expect("redeployed", "app1", &dedicated(), RECORD, Allowed);
}

/// A record of "no class" (R5) is kept like any other: the chart's class stays, and an
/// edit by hand stays too, until Styrmin redeploys the application onto the controller.
#[test]
fn the_applications_stay_on_their_current_ingress_even_when_that_is_no_class() {
    let mut world = World::shared_contour();
    world.cluster.ingress_class = Setting::Null;
    world.record("web1", IngressTarget::NoClass);
    world.expect("no class", "web1", &IngressTarget::NoClass, RECORD, Allowed);
    world.cluster.dedicated_ingress = dedicated_ingress(&[]);
    world.controller("ctl1", "prod", Deploying);
    world.expect(
        "controller DEPLOYING",
        "web1",
        &IngressTarget::NoClass,
        RECORD,
        Allowed,
    );
    world.phase("ctl1", Running);
    world.record("web1", dedicated());
    world.expect("moved", "web1", &dedicated(), RECORD, Allowed);
}
