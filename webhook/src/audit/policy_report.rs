//! The audit as PolicyReports: one report per audited object, scoped to it and owned by it
//! (the convention of Kyverno and Kubewarden, so that writers never share an object and the
//! API server's garbage collector removes a report with its object), in the Open Reports
//! format (`openreports.io/v1alpha1` `Report`) or the policy working group's
//! (`wgpolicyk8s.io/v1alpha2` `PolicyReport`). Both have the same result fields.
//!
//! Pure: an [`AuditReport`], the audited Ingresses and the objects' uids in, the reports
//! the cluster should hold out ([`DesiredReport`], without timestamps, so that an unchanged
//! audit gives equal reports). The writer in `crate::kube_source` stamps and applies them.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::Arc;

use serde_json::{Value, json};

use super::objects::AuditedIngress;
use super::{AuditReport, Finding, Reason, describe_fields};

/// Which report API the reports are written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReportApi {
    /// `openreports.io/v1alpha1` `Report` (Kubewarden; Kyverno 1.15+ when enabled).
    OpenReports,
    /// `wgpolicyk8s.io/v1alpha2` `PolicyReport` (Kyverno's default).
    WgPolicy,
}

impl ReportApi {
    /// Both, in the order `auto` tries them.
    pub const ALL: [ReportApi; 2] = [ReportApi::OpenReports, ReportApi::WgPolicy];

    pub const fn group(self) -> &'static str {
        match self {
            ReportApi::OpenReports => "openreports.io",
            ReportApi::WgPolicy => "wgpolicyk8s.io",
        }
    }

    pub const fn version(self) -> &'static str {
        match self {
            ReportApi::OpenReports => "v1alpha1",
            ReportApi::WgPolicy => "v1alpha2",
        }
    }

    pub const fn kind(self) -> &'static str {
        match self {
            ReportApi::OpenReports => "Report",
            ReportApi::WgPolicy => "PolicyReport",
        }
    }

    pub const fn plural(self) -> &'static str {
        match self {
            ReportApi::OpenReports => "reports",
            ReportApi::WgPolicy => "policyreports",
        }
    }

    /// `group/version`.
    pub fn api_version(self) -> String {
        format!("{}/{}", self.group(), self.version())
    }

    /// The name in flags, logs and the metric's label.
    pub const fn as_str(self) -> &'static str {
        match self {
            ReportApi::OpenReports => "openreports",
            ReportApi::WgPolicy => "wgpolicyk8s",
        }
    }
}

/// Which results a report holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReportResults {
    /// Only what is out of line; a conforming object has no report.
    #[default]
    Findings,
    /// Also a `pass` result for each Ingress rule an Ingress meets: every audited Ingress
    /// has a report.
    All,
}

/// `source` of every result and report: Policy Reporter's filter.
pub const SOURCE: &str = "styrmin";
/// The policy of the class rules and of serving (the Ingress reasons).
pub const INGRESS_POLICY: &str = "styrmin-ingress-class";
/// The policy of controller removal (W2) and the service aliases.
pub const REMOVAL_POLICY: &str = "styrmin-controller-removal";
/// The label of every report the webhook writes: the writer lists its own by it.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
pub const MANAGED_BY: &str = "styrmin-webhook";
/// The annotation that holds a digest of the report's content, so that a new leader knows
/// which reports are current from a list of their metadata.
pub const DIGEST_ANNOTATION: &str = "styrmin.io/report-digest";

/// An object a report can be about, by kind, namespace and name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    pub kind: &'static str,
    pub namespace: String,
    pub name: String,
}

/// A report's name and namespace.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ReportKey {
    pub namespace: String,
    pub name: String,
}

/// One report as the cluster should hold it, without timestamps.
#[derive(Clone, Debug, PartialEq)]
pub struct DesiredReport {
    pub key: ReportKey,
    /// The whole object, as applied (timestamps added by [`DesiredReport::stamped`]).
    pub body: Value,
    /// A digest of `body`: equal bodies, equal digests.
    pub digest: String,
}

impl DesiredReport {
    /// The object to apply: every result's `timestamp` set to `unix_seconds`.
    pub fn stamped(&self, unix_seconds: i64) -> Value {
        let mut body = self.body.clone();
        if let Some(results) = body.get_mut("results").and_then(Value::as_array_mut) {
            for result in results {
                result["timestamp"] = json!({"seconds": unix_seconds, "nanos": 0});
            }
        }
        body
    }
}

/// The API version and kind of the objects a report can be about.
fn api_version_of(kind: &str) -> &'static str {
    match kind {
        "Ingress" => "networking.k8s.io/v1",
        "StyrminDeployment" => "styrmin.io/v1alpha1",
        _ => "v1",
    }
}

/// A report's name: the object's uid, as Kyverno names its reports, with a prefix so that
/// the two never name the same report.
pub fn report_name(uid: &str) -> String {
    format!("styrmin-{uid}")
}

/// The policy, category and severity of a reason.
fn classify(reason: Reason) -> (&'static str, &'static str, &'static str) {
    match reason {
        Reason::WrongClass => (INGRESS_POLICY, "Ingress class", "medium"),
        Reason::CannotEnforce => (INGRESS_POLICY, "Ingress class", "high"),
        Reason::NotServed => (INGRESS_POLICY, "Ingress serving", "high"),
        Reason::UnknownClass => (INGRESS_POLICY, "Ingress serving", "high"),
        Reason::StuckDeleting => (REMOVAL_POLICY, "Controller removal", "high"),
        Reason::StaleAlias => (REMOVAL_POLICY, "Service aliases", "low"),
    }
}

fn finding_result(finding: &Finding) -> Value {
    let (policy, category, severity) = classify(finding.reason);
    let mut properties = BTreeMap::from([
        ("has", finding.has.clone()),
        ("wants", finding.wants.clone()),
        ("fix", finding.fix.clone()),
    ]);
    if let Some(decided_by) = &finding.decided_by {
        properties.insert("decidedBy", decided_by.clone());
    }
    if let Some(settings) = finding.settings {
        properties.insert("settings", settings.to_owned());
    }
    json!({
        "source": SOURCE,
        "policy": policy,
        "rule": finding.reason.as_str(),
        // Admission only warns for a deployment in `enforcement_mode: warn`.
        "result": if finding.mode == Some("warn") { "warn" } else { "fail" },
        "severity": severity,
        "category": category,
        "message": finding.why,
        "properties": properties,
    })
}

fn pass_result(reason: Reason, has: &str) -> Value {
    let (policy, category, severity) = classify(reason);
    json!({
        "source": SOURCE,
        "policy": policy,
        "rule": reason.as_str(),
        "result": "pass",
        "severity": severity,
        "category": category,
        "message": format!("{has}: as the rules want"),
        "properties": {"has": has},
    })
}

/// SHA-256 of the body's JSON, in hex (serde_json's maps are sorted: equal bodies give equal
/// text).
fn digest(body: &Value) -> String {
    let hash = ring::digest::digest(&ring::digest::SHA256, body.to_string().as_bytes());
    let mut hex = String::with_capacity(64);
    for byte in hash.as_ref() {
        let _ = write!(hex, "{byte:02x}");
    }
    hex
}

fn report(api: ReportApi, object: &ObjectKey, uid: &str, results: Vec<Value>) -> DesiredReport {
    let mut summary = BTreeMap::from([
        ("pass", 0),
        ("fail", 0),
        ("warn", 0),
        ("error", 0),
        ("skip", 0),
    ]);
    for result in &results {
        if let Some(count) = result["result"].as_str().and_then(|r| summary.get_mut(r)) {
            *count += 1;
        }
    }
    let name = report_name(uid);
    let reference = json!({
        "apiVersion": api_version_of(object.kind),
        "kind": object.kind,
        "name": object.name,
        "uid": uid,
    });
    let mut scope = reference.clone();
    scope["namespace"] = Value::from(object.namespace.clone());
    let mut body = json!({
        "apiVersion": api.api_version(),
        "kind": api.kind(),
        "metadata": {
            "name": name,
            "namespace": object.namespace,
            "labels": {MANAGED_BY_LABEL: MANAGED_BY},
            "ownerReferences": [reference],
        },
        "scope": scope,
        "results": results,
        "summary": summary,
    });
    if api == ReportApi::OpenReports {
        // Open Reports has a report-level source as well.
        body["source"] = Value::from(SOURCE);
    }
    let digest = digest(&body);
    body["metadata"]["annotations"] = json!({DIGEST_ANNOTATION: digest});
    DesiredReport {
        key: ReportKey {
            namespace: object.namespace.clone(),
            name,
        },
        body,
        digest,
    }
}

/// What the reports are built from.
#[derive(Clone, Copy, Debug)]
pub struct ReportInput<'a> {
    pub report: &'a AuditReport,
    /// Every audited Ingress (the `pass` results of [`ReportResults::All`]).
    pub ingresses: &'a [Arc<AuditedIngress>],
    /// The uid of every object a finding can name (an object without one gets no report:
    /// it cannot own it).
    pub uids: &'a HashMap<ObjectKey, String>,
}

/// The reports the cluster should hold, sorted by namespace and name.
pub fn policy_reports(
    input: &ReportInput<'_>,
    api: ReportApi,
    results: ReportResults,
) -> Vec<DesiredReport> {
    let mut by_object: BTreeMap<ObjectKey, Vec<&Finding>> = BTreeMap::new();
    for finding in &input.report.findings {
        by_object
            .entry(ObjectKey {
                kind: finding.kind,
                namespace: finding.namespace.clone(),
                name: finding.name.clone(),
            })
            .or_default()
            .push(finding);
    }
    if results == ReportResults::All {
        for ingress in input.ingresses {
            if crate::view::namespace_owner(ingress.namespace()).is_some() {
                by_object
                    .entry(ObjectKey {
                        kind: "Ingress",
                        namespace: ingress.namespace().to_owned(),
                        name: ingress.name().to_owned(),
                    })
                    .or_default();
            }
        }
    }
    let has_of: HashMap<(&str, &str), String> = if results == ReportResults::All {
        input
            .ingresses
            .iter()
            .map(|i| {
                (
                    (i.namespace(), i.name()),
                    describe_fields(&i.class_fields()),
                )
            })
            .collect()
    } else {
        HashMap::new()
    };
    let mut reports = Vec::new();
    for (object, findings) in by_object {
        let Some(uid) = input.uids.get(&object) else {
            continue;
        };
        let mut results: Vec<Value> = findings.iter().map(|f| finding_result(f)).collect();
        let has = (object.kind == "Ingress")
            .then(|| has_of.get(&(object.namespace.as_str(), object.name.as_str())))
            .flatten();
        if let Some(has) = has {
            for reason in Reason::INGRESS {
                if !findings.iter().any(|f| f.reason == reason) {
                    results.push(pass_result(reason, has));
                }
            }
        }
        reports.push(report(api, &object, uid, results));
    }
    reports.sort_by(|a, b| a.key.cmp(&b.key));
    reports
}

#[cfg(test)]
mod tests;
