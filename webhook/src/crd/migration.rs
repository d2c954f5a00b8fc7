//! [`StyrminMigration`], cluster-scoped: a change of the levels carried out step by step by
//! the webhook's leader, each step gated on the target controller serving what moved, and
//! rolled back when it does not (docs/migrate.md).
//!
//! The spec is what to do (the steps, the pace, the gates, what to do when a gate fails)
//! and the three switches a person flips (`paused`, `abort`, `force`). The status is the
//! executor's memory: a new leader resumes from it, so everything needed to go on or to
//! roll back is in it (the levels as they were before each step), or in the cluster
//! itself (an Ingress that already has its target class is not written again).

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The longest list of failing Ingresses a step's status keeps (the counts are whole).
pub const MAX_FAILING_LISTED: usize = 20;
/// Most steps in one migration.
pub const MAX_STEPS: usize = 32;
/// Most level objects in one step.
pub const MAX_CHANGES: usize = 64;

/// A migration: steps of level changes, carried out in order.
// Several `printcolumn(type_ = "string", ..)` look like repeated attributes to clippy.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "styrmin.io",
    version = "v1alpha1",
    kind = "StyrminMigration",
    status = "StyrminMigrationStatus",
    doc = "A change of Styrmin's levels carried out step by step, each step gated on the target ingress controller serving what moved.",
    derive = "PartialEq",
    derive = "Default",
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Step", type_ = "string", json_path = ".status.currentStep"),
    printcolumn(name = "Planned", type_ = "integer", json_path = ".status.planned"),
    printcolumn(name = "Moved", type_ = "integer", json_path = ".status.moved"),
    printcolumn(name = "Served", type_ = "integer", json_path = ".status.served"),
    printcolumn(name = "Failed", type_ = "integer", json_path = ".status.failed"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct StyrminMigrationSpec {
    /// The steps, carried out in order; each starts when the one before is `Done`.
    #[schemars(length(min = 1, max = 32))]
    pub steps: Vec<MigrationStep>,
    /// How fast Ingresses are moved.
    #[serde(default)]
    pub pace: Pace,
    /// What must hold before a step starts and after each wave.
    #[serde(default)]
    pub gates: Gates,
    /// What to do when a gate fails: `rollback` (the default) or `pause`.
    #[serde(default)]
    pub on_gate_failure: OnGateFailure,
    /// Stop between waves, and go on when set back to false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
    /// Roll back the step in progress and stop (steps already `Done` stay).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub abort: bool,
    /// Start a step even when its pre-flight has blocking findings.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub force: bool,
}

/// One step: level objects to set, as `styrmin-webhook plan -f` takes them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MigrationStep {
    /// A name to show (`staging`, `cluster`).
    pub name: String,
    /// StyrminCluster, StyrminEnvironment and StyrminDeployment objects (apiVersion, kind,
    /// metadata.name and namespace, spec), written as `kubectl apply` would.
    #[schemars(length(min = 1, max = 64))]
    #[schemars(schema_with = "level_objects_schema")]
    pub changes: Vec<Value>,
}

/// How fast Ingresses are moved.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Pace {
    /// Ingresses written a second, at most.
    #[serde(default = "Pace::default_per_second")]
    #[schemars(range(min = 1, max = 1000))]
    pub ingresses_per_second: u32,
    /// Ingresses in one wave: the gates are checked after each.
    #[serde(default = "Pace::default_batch")]
    #[schemars(range(min = 1, max = 10000))]
    pub batch_size: u32,
}

impl Pace {
    const fn default_per_second() -> u32 {
        50
    }
    const fn default_batch() -> u32 {
        250
    }
}

impl Default for Pace {
    fn default() -> Self {
        Pace {
            ingresses_per_second: Self::default_per_second(),
            batch_size: Self::default_batch(),
        }
    }
}

/// The gates.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Gates {
    /// Before a step: an Ingress of the executor's own on each target class must get an
    /// address (and, with the probe, any HTTP answer through it: it has no backend).
    #[serde(default)]
    pub canary: CanaryGate,
    /// After each wave: every moved Ingress has its target class and the target
    /// controller's address.
    #[serde(default)]
    pub served: ServedGate,
    /// An HTTP request per host through the address (off when left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<ProbeGate>,
    /// The share of a wave's Ingresses, in percent, that may fail the gates without failing
    /// the step (default 0).
    #[serde(default)]
    #[schemars(range(max = 100))]
    pub max_failed_percent: u32,
}

/// The canary gate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CanaryGate {
    /// How long the canary may take to get an address (and answer the probe).
    #[serde(default = "CanaryGate::default_timeout")]
    #[schemars(range(min = 1, max = 3600))]
    pub timeout_seconds: u32,
}

impl CanaryGate {
    const fn default_timeout() -> u32 {
        120
    }
}

impl Default for CanaryGate {
    fn default() -> Self {
        CanaryGate {
            timeout_seconds: Self::default_timeout(),
        }
    }
}

/// The gate after each wave.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServedGate {
    /// How long a moved Ingress may take to be served.
    #[serde(default = "ServedGate::default_timeout")]
    #[schemars(range(min = 1, max = 3600))]
    pub timeout_seconds: u32,
    /// Which address counts: `canary` (the default: one the canary of the same class got,
    /// as a controller behind one load balancer gives every Ingress) or `any` (any address:
    /// a controller that gives each Ingress its own; weaker, as an old address may linger).
    #[serde(default)]
    pub address: AddressMatch,
}

impl ServedGate {
    const fn default_timeout() -> u32 {
        300
    }
}

impl Default for ServedGate {
    fn default() -> Self {
        ServedGate {
            timeout_seconds: Self::default_timeout(),
            address: AddressMatch::default(),
        }
    }
}

/// Which address shows that the target controller serves an Ingress.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum AddressMatch {
    #[default]
    Canary,
    Any,
}

/// The HTTP probe: `GET http://ADDRESS:PORT/PATH` with each rule's host.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProbeGate {
    #[serde(default = "ProbeGate::default_path")]
    pub path: String,
    #[serde(default = "ProbeGate::default_port")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: u16,
    /// The statuses that count as served (left out: any status below 500).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expected_status: Vec<u16>,
    /// How long one request may take.
    #[serde(default = "ProbeGate::default_timeout")]
    #[schemars(range(min = 1, max = 60))]
    pub timeout_seconds: u32,
}

impl ProbeGate {
    fn default_path() -> String {
        "/".to_owned()
    }
    const fn default_port() -> u16 {
        80
    }
    const fn default_timeout() -> u32 {
        5
    }

    /// Whether `status` counts as served.
    pub fn accepts(&self, status: u16) -> bool {
        if self.expected_status.is_empty() {
            status < 500
        } else {
            self.expected_status.contains(&status)
        }
    }
}

/// What a failed gate does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum OnGateFailure {
    /// Put the levels and records back, move the Ingresses back, check they are served, stop.
    #[default]
    Rollback,
    /// Stop where it is, for a person to look (`paused: false` goes on, `abort: true` rolls back).
    Pause,
}

/// Where a migration is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum MigrationPhase {
    Pending,
    Running,
    Paused,
    Done,
    RolledBack,
    Failed,
}

/// Where a step is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum StepPhase {
    #[default]
    Pending,
    /// Its canary passed and its levels are set; its waves are being written.
    Moving,
    /// A wave is written; its gates are being checked.
    Verifying,
    Done,
    /// Being moved back, or moved back (`finishedAt` set).
    RolledBack,
    Paused,
    Failed,
}

/// What the executor keeps of a migration.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StyrminMigrationStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<MigrationPhase>,
    /// The generation of the spec this status answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The name of the step in progress (or the last one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_step: Option<String>,
    /// The counts of the step in progress, for `kubectl get`.
    #[serde(default)]
    pub planned: u32,
    #[serde(default)]
    pub moved: u32,
    #[serde(default)]
    pub served: u32,
    #[serde(default)]
    pub failed: u32,
    /// One entry per step of the spec, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<StepStatus>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<MigrationCondition>,
}

/// What the executor keeps of one step.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StepStatus {
    pub name: String,
    #[serde(default)]
    pub phase: StepPhase,
    /// Ingresses the step moves.
    #[serde(default)]
    pub planned: u32,
    /// Ingresses of the waves written so far (those admission did not move are also in
    /// `failing`).
    #[serde(default)]
    pub moved: u32,
    /// Moved Ingresses the gates found served.
    #[serde(default)]
    pub served: u32,
    /// Moved Ingresses that failed a gate.
    #[serde(default)]
    pub failed: u32,
    /// Deployments that set their own class or dedicated ingress: left where they are.
    #[serde(default)]
    pub left_in_place: u32,
    /// Waves written so far.
    #[serde(default)]
    pub waves: u32,
    /// At most [`MAX_FAILING_LISTED`] failing Ingresses, with reasons.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failing: Vec<FailingIngress>,
    /// What the pre-flight found that a person should act on (annotations a move leaves
    /// behind, Issuers whose HTTP01 solver names a class that moves), at most 20.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preflight: Vec<String>,
    /// The addresses the canary got, by class.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub canary: Vec<CanaryAddress>,
    /// The level objects the step changed, as they were before it (`spec` left out: the
    /// object did not exist), so that a rollback by any replica puts them back.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "level_objects_schema")]
    pub previous: Vec<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
}

/// A condition, as `metav1.Condition` has it (`Ready`, `PreflightPassed`, `GatePassed`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MigrationCondition {
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    pub reason: String,
    #[serde(default)]
    pub message: String,
    /// RFC 3339.
    pub last_transition_time: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// An Ingress that failed a gate.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailingIngress {
    pub namespace: String,
    pub name: String,
    pub reason: String,
}

/// The addresses a class's canary got from its controller.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CanaryAddress {
    pub class: String,
    pub addresses: Vec<String>,
}

fn level_objects_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "array",
        "items": {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;

    const TWO_STEPS: &str = r#"
apiVersion: styrmin.io/v1alpha1
kind: StyrminMigration
metadata: {name: leave-nginx}
spec:
  steps:
  - name: staging
    changes:
    - {apiVersion: styrmin.io/v1alpha1, kind: StyrminEnvironment, metadata: {name: staging}, spec: {ingressClass: haproxy}}
  - name: cluster
    changes:
    - {apiVersion: styrmin.io/v1alpha1, kind: StyrminCluster, metadata: {name: default}, spec: {ingressClass: haproxy}}
  gates:
    probe: {expectedStatus: [200, 404]}
"#;

    #[test]
    fn a_left_out_setting_takes_its_default() {
        let migration: StyrminMigration = serde_saphyr::from_str(TWO_STEPS).unwrap();
        let spec = &migration.spec;
        assert_eq!(spec.steps.len(), 2);
        assert_eq!(spec.steps[1].changes[0]["kind"], "StyrminCluster");
        assert_eq!(spec.pace, Pace::default());
        assert_eq!(
            (spec.pace.ingresses_per_second, spec.pace.batch_size),
            (50, 250)
        );
        assert_eq!(spec.gates.canary.timeout_seconds, 120);
        assert_eq!(spec.gates.served.address, AddressMatch::Canary);
        assert_eq!(spec.on_gate_failure, OnGateFailure::Rollback);
        assert!(!spec.paused && !spec.abort && !spec.force);
        let probe = spec.gates.probe.as_ref().unwrap();
        assert_eq!((probe.path.as_str(), probe.port), ("/", 80));
        assert!(probe.accepts(404) && !probe.accepts(302));
        let any = ProbeGate {
            expected_status: Vec::new(),
            ..probe.clone()
        };
        assert!(any.accepts(302) && any.accepts(499) && !any.accepts(503));
    }

    #[test]
    fn status_round_trips_with_its_wire_names() {
        let status = StyrminMigrationStatus {
            phase: Some(MigrationPhase::Running),
            current_step: Some("staging".to_owned()),
            planned: 3,
            steps: vec![StepStatus {
                name: "staging".to_owned(),
                phase: StepPhase::Verifying,
                failing: vec![FailingIngress {
                    namespace: "styrmin-web1".to_owned(),
                    name: "web".to_owned(),
                    reason: "no address from class haproxy after 300s".to_owned(),
                }],
                ..StepStatus::default()
            }],
            ..StyrminMigrationStatus::default()
        };
        let json = serde_json::to_value(&status).unwrap();
        assert_eq!(json["phase"], "Running");
        assert_eq!(json["currentStep"], "staging");
        assert_eq!(json["steps"][0]["phase"], "Verifying");
        assert_eq!(json["steps"][0]["failing"][0]["namespace"], "styrmin-web1");
        let back: StyrminMigrationStatus = serde_json::from_value(json).unwrap();
        assert_eq!(back, status);
    }

    #[test]
    fn the_crd_is_cluster_scoped_with_a_status_and_progress_columns() {
        let crd = serde_json::to_value(StyrminMigration::crd()).unwrap();
        assert_eq!(crd["spec"]["scope"], "Cluster");
        let version = &crd["spec"]["versions"][0];
        assert!(version["subresources"]["status"].is_object());
        let columns: Vec<&str> = version["additionalPrinterColumns"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|c| c["name"].as_str())
            .collect();
        assert_eq!(
            columns,
            [
                "Phase", "Step", "Planned", "Moved", "Served", "Failed", "Age"
            ]
        );
        let steps =
            &version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["steps"];
        assert_eq!(steps["maxItems"], MAX_STEPS);
        let changes = &steps["items"]["properties"]["changes"];
        assert_eq!(changes["maxItems"], MAX_CHANGES);
        assert_eq!(
            changes["items"]["x-kubernetes-preserve-unknown-fields"],
            true
        );
    }
}
