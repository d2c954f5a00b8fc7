//! [`StyrminMigration`], cluster-scoped: a change of the levels carried out step by step by
//! the holder of the controllers' Lease (`styrmin-webhook controllers --migrations`), each
//! step gated on the target controller serving what moved, and rolled back when it does not
//! (docs/migrate.md).
//!
//! The spec is what to do (the steps, the pace, the gates, what to do when a gate fails)
//! and the three switches a person flips (`paused`, `abort`, `force`). The status is the
//! executor's memory: a new holder of the Lease resumes from it, so everything needed to go
//! on or to roll back is in it (the levels as they were before each step), or in the cluster
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
/// The longest step name (a DNS label's length).
pub const MAX_STEP_NAME: usize = 63;
/// The longest text a status message, condition message, error or event note holds.
pub const MAX_NOTE: usize = 1024;
/// The longest object name (and class name, host or address) a status repeats.
pub const MAX_OBJECT_NAME: usize = 253;
/// The longest namespace name.
pub const MAX_NAMESPACE: usize = 63;
/// The longest probe path.
pub const MAX_PROBE_PATH: usize = 1024;
/// The longest RFC 3339 time the status holds.
pub const MAX_TIME: usize = 64;
/// The longest condition type or reason.
pub const MAX_REASON: usize = 128;
/// The longest steps digest (`sha256:` and 64 hex digits).
pub const MAX_DIGEST: usize = 71;
/// Most pre-flight notes a step keeps.
pub const MAX_PREFLIGHT_NOTES: usize = 20;
/// Most classes a step's canaries are kept for, and addresses kept per class.
pub const MAX_CANARIES: usize = 64;
pub const MAX_ADDRESSES: usize = 16;
/// Most conditions.
pub const MAX_CONDITIONS: usize = 8;
/// Most statuses a probe accepts.
pub const MAX_EXPECTED_STATUS: usize = 32;
/// The largest status, as JSON: the API server keeps an object of at most 1.5 MiB in etcd,
/// spec and status together.
pub const MAX_STATUS_BYTES: usize = 512 * 1024;

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
    /// The steps, carried out in order; each starts when the one before is `Done`. Once the
    /// executor has picked the migration up, they cannot change.
    #[schemars(length(min = 1, max = MAX_STEPS), transform = unique_step_names)]
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
    /// What the pre-flight holds a step for, beyond its blocking findings.
    #[serde(default)]
    pub preflight: PreflightPolicy,
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
    /// A name to show (`staging`, `cluster`), unique in the migration: the status tells
    /// steps apart by it.
    #[schemars(length(min = 1, max = MAX_STEP_NAME))]
    pub name: String,
    /// StyrminCluster, StyrminEnvironment and StyrminDeployment objects (apiVersion, kind,
    /// metadata.name and namespace, spec), written as `kubectl apply` would.
    #[schemars(schema_with = "level_changes_schema")]
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
    /// The path asked, from `/`.
    #[serde(default = "ProbeGate::default_path")]
    #[schemars(length(min = 1, max = MAX_PROBE_PATH), regex(pattern = "^/"))]
    pub path: String,
    #[serde(default = "ProbeGate::default_port")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: u16,
    /// The statuses that count as served (left out: any status below 500).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_EXPECTED_STATUS), inner(range(min = 100, max = 599)))]
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

/// The switches of a migration's spec a person flips.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Switch {
    /// `spec.paused: true`: the executor stops within a second, at its next write or poll.
    Pause,
    /// `spec.paused: false`: it goes on.
    Resume,
    /// `spec.abort: true`: the step in progress is rolled back and the migration stops.
    Abort,
}

impl Switch {
    /// The merge patch that flips it: the one way both the command line and a gate that
    /// pauses write it.
    pub fn patch(self) -> serde_json::Value {
        let (field, value) = self.field();
        serde_json::json!({ "spec": { field: value } })
    }

    /// The field and the value the merge patch sets.
    pub fn field(self) -> (&'static str, bool) {
        match self {
            Switch::Pause => ("paused", true),
            Switch::Resume => ("paused", false),
            Switch::Abort => ("abort", true),
        }
    }

    /// The word the command line says it with.
    pub fn verb(self) -> &'static str {
        match self {
            Switch::Pause => "pause",
            Switch::Resume => "resume",
            Switch::Abort => "abort",
        }
    }
}

/// What the pre-flight holds a step for, beyond its blocking findings.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PreflightPolicy {
    /// Annotations the target controller does not read, by the annotation catalog
    /// (`styrmin-webhook plan --fail-on unsupported` finds the same): `warn` (the default)
    /// notes them and goes on; `block` holds the step until they are dealt with (or
    /// `force` is set).
    #[serde(default)]
    pub unsupported_annotations: AnnotationPolicy,
}

/// What an annotation the target does not read does to a step.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum AnnotationPolicy {
    /// Noted in the step's pre-flight notes; the step goes on.
    #[default]
    Warn,
    /// The step waits, as for a blocking finding.
    Block,
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
    /// Its canary passed and its levels are being set: recorded before the first is written,
    /// so that a step cut short here is resumed or rolled back, never taken as unchanged.
    SettingLevels,
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
    #[schemars(length(max = MAX_STEP_NAME))]
    pub current_step: Option<String>,
    /// `sha256:` and the digest of `spec.steps` as the executor picked them up: steps that
    /// no longer match it stop the executor (condition `Progressing`, reason `StepsChanged`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = MAX_DIGEST))]
    pub steps_digest: Option<String>,
    /// The counts of the step in progress, for `kubectl get`.
    #[serde(default)]
    pub planned: u32,
    #[serde(default)]
    pub moved: u32,
    #[serde(default)]
    pub served: u32,
    #[serde(default)]
    pub failed: u32,
    /// One entry per step of the spec, in its order, matched to it by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_STEPS))]
    pub steps: Vec<StepStatus>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_CONDITIONS))]
    pub conditions: Vec<MigrationCondition>,
    /// The last error the executor met carrying the migration out (kept once it goes on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<ExecutorError>,
    /// `<namespace>/<name>` of the Lease that elects the executor carrying the migration
    /// out: another executor (of another release of the chart) leaves it alone while that
    /// Lease is renewed, and takes it over once it is not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = MAX_EXECUTOR))]
    pub executor: Option<String>,
}

/// The longest `status.executor`: a namespace (63), `/` and a Lease name (253).
pub const MAX_EXECUTOR: usize = 63 + 1 + 253;

/// An error of the executor: a call that failed, or the cluster it could not read. It is
/// tried again after a backoff that doubles.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExecutorError {
    #[schemars(length(max = MAX_NOTE))]
    pub message: String,
    /// RFC 3339.
    #[schemars(length(max = MAX_TIME))]
    pub time: String,
    /// Errors in a row so far, this one included.
    #[serde(default)]
    pub count: u32,
}

/// What the executor keeps of one step.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StepStatus {
    #[schemars(length(max = MAX_STEP_NAME))]
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
    #[schemars(length(max = MAX_FAILING_LISTED))]
    pub failing: Vec<FailingIngress>,
    /// What the pre-flight found that a person should act on (annotations a move leaves
    /// behind, Issuers whose HTTP01 solver names a class that moves), at most 20.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_PREFLIGHT_NOTES), inner(length(max = MAX_NOTE)))]
    pub preflight: Vec<String>,
    /// The addresses the canary got, by class.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_CANARIES))]
    pub canary: Vec<CanaryAddress>,
    /// The level objects the step changed, as they were before it (`spec` left out: the
    /// object did not exist), so that a rollback by any replica puts them back.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "level_objects_schema")]
    pub previous: Vec<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = MAX_NOTE))]
    pub message: Option<String>,
    /// RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = MAX_TIME))]
    pub started_at: Option<String>,
    /// RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = MAX_TIME))]
    pub finished_at: Option<String>,
}

/// A condition, as `metav1.Condition` has it (`Ready`, `PreflightPassed`, `GatePassed`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MigrationCondition {
    #[serde(rename = "type")]
    #[schemars(length(max = MAX_REASON))]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    #[schemars(length(max = 7))]
    pub status: String,
    #[schemars(length(max = MAX_REASON))]
    pub reason: String,
    #[serde(default)]
    #[schemars(length(max = MAX_NOTE))]
    pub message: String,
    /// RFC 3339.
    #[schemars(length(max = MAX_TIME))]
    pub last_transition_time: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// An Ingress that failed a gate.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailingIngress {
    #[schemars(length(max = MAX_NAMESPACE))]
    pub namespace: String,
    #[schemars(length(max = MAX_OBJECT_NAME))]
    pub name: String,
    #[schemars(length(max = MAX_NOTE))]
    pub reason: String,
}

/// The addresses a class's canary got from its controller.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CanaryAddress {
    #[schemars(length(max = MAX_OBJECT_NAME))]
    pub class: String,
    #[schemars(length(max = MAX_ADDRESSES), inner(length(max = MAX_OBJECT_NAME)))]
    pub addresses: Vec<String>,
}

/// The kinds a step may change.
pub const LEVEL_KINDS: [&str; 3] = ["StyrminCluster", "StyrminEnvironment", "StyrminDeployment"];

/// A step's changes: level objects, each with its API version, kind and name (and a
/// StyrminDeployment with its namespace); their specs are free.
fn level_changes_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "array",
        "minItems": 1,
        "maxItems": MAX_CHANGES,
        "items": {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true,
            "required": ["apiVersion", "kind", "metadata"],
            "properties": {
                "apiVersion": {"type": "string", "enum": [<StyrminMigration as kube::Resource>::api_version(&())]},
                "kind": {"type": "string", "enum": LEVEL_KINDS},
                "metadata": {
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": true,
                    "required": ["name"],
                    "properties": {
                        "name": {"type": "string", "minLength": 1, "maxLength": MAX_OBJECT_NAME},
                        "namespace": {"type": "string", "maxLength": MAX_NAMESPACE}
                    }
                },
                "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
            },
            "x-kubernetes-validations": [{
                "rule": "self.kind != 'StyrminDeployment' || (has(self.metadata.namespace) && self.metadata.namespace != '')",
                "message": "a StyrminDeployment change needs metadata.namespace"
            }]
        }
    })
}

/// The level objects a step's status keeps for a rollback.
fn level_objects_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "array",
        "maxItems": MAX_CHANGES,
        "items": {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true
        }
    })
}

/// The rule that keeps step names unique (the status matches steps by name).
fn unique_step_names(schema: &mut schemars::Schema) {
    schema.insert(
        "x-kubernetes-validations".to_owned(),
        serde_json::json!([{
            "rule": "self.all(x, self.exists_one(y, y.name == x.name))",
            "message": "step names must be unique: the status tells steps apart by name"
        }]),
    );
}

/// The rule that keeps `spec.steps` as they were once the executor has picked the migration
/// up (it then keeps their digest in `status.stepsDigest`): no step added, removed, renamed
/// or moved. What a step changes is held by the digest: the executor stops when it differs.
pub const STEPS_FIXED_RULE: &str = "!has(oldSelf.status) || !has(oldSelf.status.stepsDigest) || self.spec.steps.map(s, s.name) == oldSelf.spec.steps.map(s, s.name)";

/// The CRD, with the rules on the whole object that the derive cannot express.
pub fn migration_crd()
-> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
    use kube::CustomResourceExt as _;
    let mut crd = StyrminMigration::crd();
    for version in &mut crd.spec.versions {
        if let Some(schema) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        {
            schema.x_kubernetes_validations = Some(vec![
                k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::ValidationRule {
                    rule: STEPS_FIXED_RULE.to_owned(),
                    message: Some(
                        "spec.steps cannot gain, lose, rename or reorder a step once the executor has picked the migration up: create another StyrminMigration for new steps".to_owned(),
                    ),
                    ..Default::default()
                },
            ]);
        }
    }
    crd
}

/// `text` cut to at most `max` bytes on a character boundary, with `…` when cut: every
/// string the status copies from what users wrote (names, hosts, reasons) goes through it.
pub fn bounded(text: &str, max: usize) -> String {
    crate::client_text::cut_to(text, max, "…").into_owned()
}

fn cut(text: &mut String, max: usize) {
    if text.len() > max {
        *text = bounded(text, max);
    }
}

fn cut_option(text: &mut Option<String>, max: usize) {
    if let Some(text) = text {
        cut(text, max);
    }
}

/// A status that cannot be made to fit [`MAX_STATUS_BYTES`].
#[derive(Debug, thiserror::Error)]
#[error("the migration's status would take {bytes} bytes, more than {MAX_STATUS_BYTES}")]
pub struct StatusTooLarge {
    pub bytes: usize,
}

impl StyrminMigrationStatus {
    /// Cuts every string and list to the bounds of the schema.
    pub fn bound(&mut self) {
        cut_option(&mut self.current_step, MAX_STEP_NAME);
        cut_option(&mut self.steps_digest, MAX_DIGEST);
        self.steps.truncate(MAX_STEPS);
        for step in &mut self.steps {
            step.bound();
        }
        self.conditions.truncate(MAX_CONDITIONS);
        for condition in &mut self.conditions {
            cut(&mut condition.type_, MAX_REASON);
            cut(&mut condition.status, 7);
            cut(&mut condition.reason, MAX_REASON);
            cut(&mut condition.message, MAX_NOTE);
            cut(&mut condition.last_transition_time, MAX_TIME);
        }
        if let Some(error) = &mut self.last_error {
            cut(&mut error.message, MAX_NOTE);
            cut(&mut error.time, MAX_TIME);
        }
        cut_option(&mut self.executor, MAX_EXECUTOR);
    }

    /// The status as JSON, in bytes.
    pub fn encoded_len(&self) -> usize {
        serde_json::to_vec(self).map_or(usize::MAX, |v| v.len())
    }

    /// [`Self::bound`], then, while the status is larger than [`MAX_STATUS_BYTES`], drops
    /// what only explains: the failing lists, pre-flight notes and canary addresses of the
    /// steps that ended, then the pre-flight notes and failing lists of every step. The
    /// counts, phases and the level objects kept for a rollback stay; when they alone are too
    /// large, nothing is dropped and the error says how large.
    pub fn fit(&mut self) -> Result<(), StatusTooLarge> {
        self.bound();
        let ended = |step: &StepStatus| step.finished_at.is_some() || step.phase == StepPhase::Done;
        let shed: [&dyn Fn(&mut StepStatus); 3] = [
            &|step| {
                if ended(step) {
                    step.failing.clear();
                    step.preflight.clear();
                    step.canary.clear();
                }
            },
            &|step| step.preflight.clear(),
            &|step| step.failing.clear(),
        ];
        let mut bytes = self.encoded_len();
        for shed_one in shed {
            if bytes <= MAX_STATUS_BYTES {
                return Ok(());
            }
            self.steps.iter_mut().for_each(shed_one);
            bytes = self.encoded_len();
        }
        if bytes <= MAX_STATUS_BYTES {
            Ok(())
        } else {
            Err(StatusTooLarge { bytes })
        }
    }
}

impl StepStatus {
    fn bound(&mut self) {
        cut(&mut self.name, MAX_STEP_NAME);
        self.failing.truncate(MAX_FAILING_LISTED);
        for failing in &mut self.failing {
            cut(&mut failing.namespace, MAX_NAMESPACE);
            cut(&mut failing.name, MAX_OBJECT_NAME);
            cut(&mut failing.reason, MAX_NOTE);
        }
        self.preflight.truncate(MAX_PREFLIGHT_NOTES);
        for note in &mut self.preflight {
            cut(note, MAX_NOTE);
        }
        self.canary.truncate(MAX_CANARIES);
        for canary in &mut self.canary {
            cut(&mut canary.class, MAX_OBJECT_NAME);
            canary.addresses.truncate(MAX_ADDRESSES);
            for address in &mut canary.addresses {
                cut(address, MAX_OBJECT_NAME);
            }
        }
        self.previous.truncate(MAX_CHANGES);
        cut_option(&mut self.message, MAX_NOTE);
        cut_option(&mut self.started_at, MAX_TIME);
        cut_option(&mut self.finished_at, MAX_TIME);
    }
}

/// `sha256:` and the digest of `steps` written as JSON with every object's keys sorted, so
/// that the same steps give the same digest whoever serialised them.
pub fn steps_digest(steps: &[MigrationStep]) -> String {
    fn canonical(value: &Value, out: &mut String) {
        match value {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                out.push('{');
                for (index, key) in keys.into_iter().enumerate() {
                    if index > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::from(key.as_str()).to_string());
                    out.push(':');
                    canonical(&map[key], out);
                }
                out.push('}');
            }
            Value::Array(items) => {
                out.push('[');
                for (index, item) in items.iter().enumerate() {
                    if index > 0 {
                        out.push(',');
                    }
                    canonical(item, out);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut text = String::new();
    canonical(&serde_json::to_value(steps).unwrap_or_default(), &mut text);
    let digest = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
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

    /// Every string of a schema, with its path, that has no `maxLength` (an `enum` bounds
    /// it too); the free objects of the level specs are left out.
    fn unbounded_strings(schema: &Value, path: &str, found: &mut Vec<String>) {
        if schema["type"] == "string"
            && schema.get("maxLength").is_none()
            && schema.get("enum").is_none()
        {
            found.push(path.to_owned());
        }
        if schema["type"] == "array" && schema.get("maxItems").is_none() {
            found.push(format!("{path} (no maxItems)"));
        }
        if let Some(properties) = schema["properties"].as_object() {
            for (key, property) in properties {
                unbounded_strings(property, &format!("{path}.{key}"), found);
            }
        }
        if schema["items"].is_object() {
            unbounded_strings(&schema["items"], &format!("{path}[]"), found);
        }
    }

    #[test]
    fn every_string_and_list_of_the_schema_is_bounded() {
        let crd = serde_json::to_value(migration_crd()).unwrap();
        let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
        let mut found = Vec::new();
        unbounded_strings(&schema["properties"]["spec"], "spec", &mut found);
        unbounded_strings(&schema["properties"]["status"], "status", &mut found);
        assert_eq!(found, Vec::<String>::new());
        // The check can fail.
        let mut loose = Vec::new();
        unbounded_strings(
            &serde_json::json!({"type": "object", "properties": {"a": {"type": "string"}}}),
            "x",
            &mut loose,
        );
        assert_eq!(loose, ["x.a"]);
    }

    #[test]
    fn the_schema_holds_the_rules_the_executor_relies_on() {
        let crd = serde_json::to_value(migration_crd()).unwrap();
        let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
        let rules = |at: &Value| -> Vec<String> {
            at["x-kubernetes-validations"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|r| r["rule"].as_str().unwrap().to_owned())
                .collect()
        };
        assert_eq!(rules(schema), [STEPS_FIXED_RULE]);
        assert!(STEPS_FIXED_RULE.contains("oldSelf.status.stepsDigest"));
        let spec = &schema["properties"]["spec"]["properties"];
        assert_eq!(
            rules(&spec["steps"]),
            ["self.all(x, self.exists_one(y, y.name == x.name))"]
        );
        let step = &spec["steps"]["items"]["properties"];
        assert_eq!(step["name"]["maxLength"], MAX_STEP_NAME);
        let change = &step["changes"]["items"];
        assert_eq!(
            change["properties"]["kind"]["enum"],
            serde_json::json!(LEVEL_KINDS)
        );
        assert_eq!(
            change["properties"]["apiVersion"]["enum"],
            serde_json::json!(["styrmin.io/v1alpha1"])
        );
        assert!(rules(change)[0].contains("StyrminDeployment"));
        let probe = &spec["gates"]["properties"]["probe"]["properties"];
        assert_eq!(probe["path"]["pattern"], "^/");
        assert_eq!(probe["path"]["maxLength"], MAX_PROBE_PATH);
        assert_eq!(probe["expectedStatus"]["maxItems"], MAX_EXPECTED_STATUS);
        let status = &schema["properties"]["status"]["properties"];
        assert_eq!(status["stepsDigest"]["maxLength"], MAX_DIGEST);
        assert_eq!(
            status["lastError"]["properties"]["message"]["maxLength"],
            MAX_NOTE
        );
    }

    #[test]
    fn a_cut_text_ends_on_a_character() {
        let long = "é".repeat(MAX_NOTE);
        let cut = bounded(&long, MAX_NOTE);
        assert!(cut.len() <= MAX_NOTE && cut.ends_with('…'), "{}", cut.len());
        assert_eq!(bounded("short", MAX_NOTE), "short");
        assert_eq!(bounded("abcdef", 5), "ab…");
    }

    #[test]
    fn the_status_is_bounded_field_by_field_and_as_a_whole() {
        let huge = "x".repeat(200 * 1024);
        let step = StepStatus {
            name: "staging".to_owned(),
            phase: StepPhase::Done,
            finished_at: Some("2026-12-07T10:00:00Z".to_owned()),
            message: Some(huge.clone()),
            failing: (0..40)
                .map(|i| FailingIngress {
                    namespace: format!("styrmin-{i}"),
                    name: "web".to_owned(),
                    reason: huge.clone(),
                })
                .collect(),
            preflight: vec![huge.clone(); 30],
            ..StepStatus::default()
        };
        let mut status = StyrminMigrationStatus {
            current_step: Some(huge.clone()),
            steps: vec![step; MAX_STEPS + 3],
            last_error: Some(ExecutorError {
                message: huge.clone(),
                time: "2026-12-07T10:00:00Z".to_owned(),
                count: 1,
            }),
            // Anyone who may patch the status may write this one too.
            executor: Some(huge.clone()),
            ..StyrminMigrationStatus::default()
        };
        status.fit().unwrap();
        assert!(status.encoded_len() <= MAX_STATUS_BYTES);
        assert!(status.executor.as_ref().unwrap().len() <= MAX_EXECUTOR);
        assert_eq!(status.steps.len(), MAX_STEPS);
        assert_eq!(status.current_step.as_ref().unwrap().len(), MAX_STEP_NAME);
        assert!(status.last_error.as_ref().unwrap().message.len() <= MAX_NOTE);
        // The steps that ended lost their lists, not their counts or messages.
        assert!(
            status
                .steps
                .iter()
                .all(|s| s.failing.is_empty() && s.message.is_some())
        );
        // A step in progress keeps its lists while they fit.
        let mut small = StyrminMigrationStatus {
            steps: vec![StepStatus {
                name: "cluster".to_owned(),
                phase: StepPhase::Moving,
                failing: vec![FailingIngress::default(); 3],
                ..StepStatus::default()
            }],
            ..StyrminMigrationStatus::default()
        };
        small.fit().unwrap();
        assert_eq!(small.steps[0].failing.len(), 3);
        // What a rollback needs is never dropped: too large is an error.
        let mut kept = StyrminMigrationStatus {
            steps: vec![StepStatus {
                previous: vec![serde_json::json!({"spec": huge}); 4],
                ..StepStatus::default()
            }],
            ..StyrminMigrationStatus::default()
        };
        assert!(kept.fit().unwrap_err().bytes > MAX_STATUS_BYTES);
        assert_eq!(kept.steps[0].previous.len(), 4);
    }

    #[test]
    fn the_steps_digest_reads_the_steps_not_their_key_order() {
        let migration: StyrminMigration = serde_saphyr::from_str(TWO_STEPS).unwrap();
        let digest = steps_digest(&migration.spec.steps);
        assert!(digest.starts_with("sha256:") && digest.len() == MAX_DIGEST);
        let mut reordered = migration.spec.steps.clone();
        let change = &mut reordered[0].changes[0];
        let object = change.as_object().unwrap().clone();
        let mut backwards = serde_json::Map::new();
        for (key, value) in object.into_iter().rev() {
            backwards.insert(key, value);
        }
        *change = Value::Object(backwards);
        assert_eq!(steps_digest(&reordered), digest);
        let mut changed = migration.spec.steps.clone();
        changed[0].changes[0]["spec"]["ingressClass"] = Value::from("traefik");
        assert_ne!(steps_digest(&changed), digest);
        let mut added = migration.spec.steps.clone();
        added.push(added[1].clone());
        assert_ne!(steps_digest(&added), digest);
    }
}
