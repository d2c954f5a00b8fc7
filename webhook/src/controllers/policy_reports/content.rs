//! The audit as PolicyReports: one report per audited object, scoped to it and owned by it
//! (the convention of Kyverno and Kubewarden, so that writers never share an object and the
//! API server's garbage collector removes a report with its object), in the Open Reports
//! format (`openreports.io/v1alpha1` `Report`) or the policy working group's
//! (`wgpolicyk8s.io/v1alpha2` `PolicyReport`). Both have the same result fields.
//!
//! Pure: an [`AuditRound`] in, the reports the cluster should hold out ([`ReportSet`]). A
//! report's content depends on the findings and the objects only, never on the clock: a
//! cluster that does not change gives byte-identical reports at every audit, so their
//! digests match and nothing is written. The only times in a report are its results'
//! `timestamp`s: when each finding was first made, kept across rewrites in an annotation
//! ([`FIRST_SEEN_ANNOTATION`]) and left out of the digest.
//!
//! Everything a user controls (class names, annotation values) is cut at [`MAX_TEXT`]
//! bytes with a marker, so that one report stays under [`MAX_REPORT_BYTES`] whatever the
//! objects hold.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;

use serde_json::{Value, json};

use crate::audit::round::{AuditRound, ObjectRef, Subject};
use crate::audit::{Finding, Reason, describe_fields};

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

/// Which results a report holds (`--policy-reports-results`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
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

/// The annotation that keeps when each result's finding was first made (`rule/result=unix
/// seconds`, comma-separated), so that a rewrite and a new leader keep the results'
/// timestamps. Not part of the digest.
pub const FIRST_SEEN_ANNOTATION: &str = "styrmin.io/first-seen";
/// The longest text a report takes from an object (a class name, an annotation, a message
/// that quotes them), in bytes; longer ones are cut and end with [`CUT_MARKER`].
pub const MAX_TEXT: usize = 1024;
/// What ends a cut text.
pub const CUT_MARKER: &str = "…[cut]";
/// The largest report, in bytes of JSON: at most six results of five texts each, every text
/// at most [`MAX_TEXT`], and names Kubernetes bounds itself (tested with a 256 KiB class).
pub const MAX_REPORT_BYTES: usize = 48 * 1024;

/// A report's name and namespace.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ReportKey {
    pub namespace: String,
    pub name: String,
}

/// Whether objects of `kind` reach the audit through a label selector, so that one missing
/// from a round may still exist: only the service aliases (`SERVICE_ALIAS_SELECTOR`).
pub fn owned_through_a_selector(kind: &str) -> bool {
    kind == "Service"
}

impl ReportKey {
    /// The uid of the object the report is about (its name is `styrmin-<uid>`).
    pub fn uid(&self) -> Option<&str> {
        self.name.strip_prefix(REPORT_NAME_PREFIX)
    }
}

/// The first 128 bits of the SHA-256 of a report's content without its timestamps: enough
/// to tell a changed report from an unchanged one, in half the annotation and the ledger.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Digest(pub [u8; DIGEST_BYTES]);

const DIGEST_BYTES: usize = 16;

impl Digest {
    fn of(body: &Value) -> Digest {
        let mut context = ring::digest::Context::new(&ring::digest::SHA256);
        // Serialized straight into the hash: no string of the whole report is made.
        let _ = serde_json::to_writer(HashWriter(&mut context), body);
        let hash = context.finish();
        let mut bytes = [0; DIGEST_BYTES];
        bytes.copy_from_slice(&hash.as_ref()[..DIGEST_BYTES]);
        Digest(bytes)
    }

    /// The digest as the annotation holds it (hex); `None` for anything else, such as the
    /// longer digests of earlier versions (those reports are written once more).
    pub fn parse(hex: &str) -> Option<Digest> {
        if hex.len() != 2 * DIGEST_BYTES {
            return None;
        }
        let mut bytes = [0; DIGEST_BYTES];
        for (i, byte) in bytes.iter_mut().enumerate() {
            *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(Digest(bytes))
    }
}

/// Feeds what is written to a hash.
struct HashWriter<'a>(&'a mut ring::digest::Context);

impl std::io::Write for HashWriter<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.update(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl std::fmt::Display for Digest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for byte in self.0 {
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

impl std::fmt::Debug for Digest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Digest({self})")
    }
}

/// When each result of a report was first made: `rule/result` and unix seconds, sorted.
/// The keys are taken from [`RULE_RESULTS`], so that the ledger's copy of a report's times
/// is one small allocation, whatever the number of reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FirstSeen(Box<[(&'static str, i64)]>);

/// Every `rule/result` a report can hold.
pub const RULE_RESULTS: [&str; 18] = [
    "wrong_class/fail",
    "wrong_class/warn",
    "wrong_class/pass",
    "cannot_enforce/fail",
    "cannot_enforce/warn",
    "cannot_enforce/pass",
    "not_served/fail",
    "not_served/warn",
    "not_served/pass",
    "unknown_class/fail",
    "unknown_class/warn",
    "unknown_class/pass",
    "stuck_deleting/fail",
    "stuck_deleting/warn",
    "stuck_deleting/pass",
    "stale_alias/fail",
    "stale_alias/warn",
    "stale_alias/pass",
];

/// `key` as it is in [`RULE_RESULTS`]; `None` for a key no report of this version holds.
fn rule_result(key: &str) -> Option<&'static str> {
    RULE_RESULTS.iter().find(|known| **known == key).copied()
}

impl FirstSeen {
    fn new(mut entries: Vec<(&'static str, i64)>) -> FirstSeen {
        entries.sort();
        entries.dedup_by(|a, b| a.0 == b.0);
        FirstSeen(entries.into_boxed_slice())
    }

    /// As the annotation holds it; entries that do not read are left out (their results
    /// count as first made at the next write).
    pub fn parse(text: &str) -> FirstSeen {
        FirstSeen::new(
            text.split(',')
                .filter_map(|entry| {
                    let (key, seconds) = entry.split_once('=')?;
                    Some((rule_result(key.trim())?, seconds.trim().parse().ok()?))
                })
                .collect(),
        )
    }

    pub fn get(&self, key: &str) -> Option<i64> {
        self.0
            .binary_search_by(|(k, _)| (*k).cmp(key))
            .ok()
            .map(|i| self.0[i].1)
    }

    fn to_annotation(&self) -> String {
        let mut text = String::new();
        for (key, seconds) in &self.0 {
            if !text.is_empty() {
                text.push(',');
            }
            let _ = write!(text, "{key}={seconds}");
        }
        text
    }
}

/// A report as written: its body with timestamps, and what the ledger keeps of it.
#[derive(Clone, Debug, PartialEq)]
pub struct StampedReport {
    pub body: Value,
    pub first_seen: FirstSeen,
}

/// One report as the cluster should hold it, without timestamps.
#[derive(Clone, Debug, PartialEq)]
pub struct DesiredReport {
    pub key: ReportKey,
    /// The whole object, as applied (timestamps added by [`DesiredReport::stamped`]).
    pub body: Value,
    /// A digest of `body`: equal bodies, equal digests.
    pub digest: Digest,
}

impl DesiredReport {
    /// The object to apply: each result's `timestamp` is when its finding was first made
    /// (`previous`), or `now` for a new one; the annotation keeps them for the next write.
    pub fn stamped(&self, previous: &FirstSeen, now: i64) -> StampedReport {
        let mut body = self.body.clone();
        let mut seen = Vec::new();
        if let Some(results) = body.get_mut("results").and_then(Value::as_array_mut) {
            for result in results {
                let key = format!(
                    "{}/{}",
                    result["rule"].as_str().unwrap_or(""),
                    result["result"].as_str().unwrap_or("")
                );
                let seconds = previous.get(&key).unwrap_or(now);
                result["timestamp"] = json!({"seconds": seconds, "nanos": 0});
                seen.extend(rule_result(&key).map(|key| (key, seconds)));
            }
        }
        let first_seen = FirstSeen::new(seen);
        body["metadata"]["annotations"][FIRST_SEEN_ANNOTATION] =
            Value::from(first_seen.to_annotation());
        StampedReport { body, first_seen }
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

const REPORT_NAME_PREFIX: &str = "styrmin-";

/// A report's name: the object's uid, as Kyverno names its reports, with a prefix so that
/// the two never name the same report.
pub fn report_name(uid: &str) -> String {
    format!("{REPORT_NAME_PREFIX}{uid}")
}

/// `text` cut at [`MAX_TEXT`] bytes (on a character boundary) with [`CUT_MARKER`].
pub fn bounded(text: &str) -> String {
    crate::client_text::cut_to(text, MAX_TEXT, CUT_MARKER).into_owned()
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
    // How a class was decided (`decidedBy`, `settings`) is already in a class result's
    // message; the properties do not repeat it.
    let properties = BTreeMap::from([
        ("has", bounded(&finding.has)),
        ("wants", bounded(&finding.wants)),
        ("fix", bounded(&finding.fix)),
    ]);
    json!({
        "source": SOURCE,
        "policy": policy,
        "rule": finding.reason.as_str(),
        // Admission only warns for a deployment in `enforcement_mode: warn`.
        "result": if finding.mode == Some("warn") { "warn" } else { "fail" },
        "scored": true,
        "severity": severity,
        "category": category,
        "message": bounded(&finding.why),
        "properties": properties,
    })
}

fn pass_result(reason: Reason, has: &str) -> Value {
    let (policy, category, severity) = classify(reason);
    let has = bounded(has);
    json!({
        "source": SOURCE,
        "policy": policy,
        "rule": reason.as_str(),
        "result": "pass",
        "scored": true,
        "severity": severity,
        "category": category,
        "message": bounded(&format!("{has}: as the rules want")),
        "properties": {"has": has},
    })
}

fn report(
    api: ReportApi,
    object: ObjectRef<'_>,
    subject: Subject<'_>,
    results: Vec<Value>,
) -> DesiredReport {
    // Counts of zero are left out, as Kyverno writes its summaries (`omitempty`).
    let mut summary: BTreeMap<&str, u32> = BTreeMap::new();
    for result in &results {
        if let Some(outcome) = result["result"].as_str() {
            *summary.entry(outcome).or_default() += 1;
        }
    }
    let name = report_name(subject.uid);
    let reference = json!({
        "apiVersion": api_version_of(object.kind),
        "kind": object.kind,
        "name": object.name,
        "uid": subject.uid,
    });
    // No resourceVersion in the scope: every status write of the object (a controller
    // publishing an address) would change it, and with it the report's digest, and the report
    // would be written again with the same findings.
    let mut scope = reference.clone();
    scope["namespace"] = Value::from(object.namespace);
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
    let digest = Digest::of(&body);
    body["metadata"]["annotations"] = json!({DIGEST_ANNOTATION: digest.to_string()});
    DesiredReport {
        key: ReportKey {
            namespace: object.namespace.to_owned(),
            name,
        },
        body,
        digest,
    }
}

/// The objects that should have a report, and their findings.
struct Entry<'a> {
    object: ObjectRef<'a>,
    subject: Subject<'a>,
    findings: Vec<&'a Finding>,
    /// What the Ingress has, for its `pass` results ([`ReportResults::All`]).
    has: Option<String>,
}

/// The reports the cluster should hold for one audit round, sorted by namespace and name,
/// each with its digest. A report's body is built when it is asked for ([`ReportSet::report`]),
/// so that the set of a large cluster holds digests, not JSON.
pub struct ReportSet<'a> {
    api: ReportApi,
    entries: Vec<Entry<'a>>,
    keys: Vec<ReportKey>,
    digests: Vec<Digest>,
    /// The uids of every object of the round: a report whose object is not among them is the
    /// garbage collector's to remove.
    uids: HashSet<&'a str>,
}

impl std::fmt::Debug for ReportSet<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReportSet")
            .field("api", &self.api)
            .field("reports", &self.keys.len())
            .finish_non_exhaustive()
    }
}

impl<'a> ReportSet<'a> {
    /// The reports of `round` in `api`.
    pub fn new(round: &'a AuditRound, api: ReportApi, results: ReportResults) -> Self {
        let subjects = round.subjects();
        let mut by_object: BTreeMap<ObjectRef<'a>, Vec<&'a Finding>> = BTreeMap::new();
        for finding in round.audit.findings.iter() {
            by_object
                .entry(ObjectRef {
                    kind: finding.kind,
                    namespace: &finding.namespace,
                    name: &finding.name,
                })
                .or_default()
                .push(finding);
        }
        let mut has_of = HashMap::new();
        if results == ReportResults::All {
            for ingress in &round.ingresses {
                if crate::view::namespace_owner(ingress.namespace()).is_some() {
                    let object = ObjectRef {
                        kind: "Ingress",
                        namespace: ingress.namespace(),
                        name: ingress.name(),
                    };
                    by_object.entry(object).or_default();
                    has_of.insert(object, describe_fields(&ingress.class_fields()));
                }
            }
        }
        let mut entries: Vec<Entry<'a>> = by_object
            .into_iter()
            .filter_map(|(object, findings)| {
                let subject = *subjects.get(&object)?;
                Some(Entry {
                    object,
                    subject,
                    findings,
                    has: has_of.remove(&object),
                })
            })
            .collect();
        entries.sort_by(|a, b| {
            (a.object.namespace, a.subject.uid).cmp(&(b.object.namespace, b.subject.uid))
        });
        // The keys first, all together, then the digests: each digest needs the report's
        // body, many small allocations freed at once, and keys made among them would be
        // scattered over the heap those leave.
        let keys = entries
            .iter()
            .map(|entry| ReportKey {
                namespace: entry.object.namespace.to_owned(),
                name: report_name(entry.subject.uid),
            })
            .collect();
        let mut set = ReportSet {
            api,
            keys,
            digests: Vec::with_capacity(entries.len()),
            uids: subjects.values().map(|s| s.uid).collect(),
            entries,
        };
        set.digests = set
            .entries
            .iter()
            .map(|entry| set.build(entry).digest)
            .collect();
        set
    }

    fn build(&self, entry: &Entry<'a>) -> DesiredReport {
        let mut results: Vec<Value> = entry.findings.iter().map(|f| finding_result(f)).collect();
        if let Some(has) = &entry.has {
            for reason in Reason::INGRESS {
                if !entry.findings.iter().any(|f| f.reason == reason) {
                    results.push(pass_result(reason, has));
                }
            }
        }
        report(self.api, entry.object, entry.subject, results)
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The report keys, sorted, with their digests.
    pub fn digests(&self) -> impl Iterator<Item = (&ReportKey, Digest)> {
        self.keys.iter().zip(self.digests.iter().copied())
    }

    /// The index of the report `key`.
    pub fn find(&self, key: &ReportKey) -> Option<usize> {
        self.keys.binary_search(key).ok()
    }

    /// The report at `index` (see [`ReportSet::find`]), built now.
    pub fn report(&self, index: usize) -> Option<DesiredReport> {
        self.entries.get(index).map(|entry| self.build(entry))
    }

    /// Whether the object a report of `key` would be about is still there.
    pub fn has_object(&self, key: &ReportKey) -> bool {
        key.uid().is_some_and(|uid| self.uids.contains(uid))
    }
}

/// Every report of `round`, built (for tests and small clusters; the writer asks
/// [`ReportSet`] for one at a time).
pub fn policy_reports(
    round: &AuditRound,
    api: ReportApi,
    results: ReportResults,
) -> Vec<DesiredReport> {
    let set = ReportSet::new(round, api, results);
    (0..set.len()).filter_map(|i| set.report(i)).collect()
}

#[cfg(test)]
mod tests;
