//! What the post-renderer tells its user besides the stream: R5 warnings, what it
//! changed, and errors. Helm 3 shows a post-renderer's stderr only when it fails and
//! Helm 4 never does, so the same lines can also go to a report file (`--report`).
//!
//! Each run appends its lines to the report, ending with its summary or error line: one
//! release may call the post-renderer twice with the same arguments (Helm 4.2's `separate`
//! PostRenderStrategy renders the manifests, then the hooks), and the second call must not
//! erase what the first one reported.

use std::fmt::Write as _;
use std::fs::File;
use std::io::Write as _;
use std::path::Path;

use styrmin_ingress_rules::ClassFields;

use crate::render::{IngressOutcome, Rendered};

/// The report file, opened for appending (created when missing).
pub fn open(path: &Path) -> std::io::Result<File> {
    File::options().create(true).append(true).open(path)
}

/// Appends `lines` to the report file in one write and syncs it.
pub fn append(path: &Path, lines: &str) -> std::io::Result<()> {
    let mut file = open(path)?;
    file.write_all(lines.as_bytes())?;
    file.sync_data()
}

/// The report of a successful run: one line per change and per warning, then a summary.
pub fn success(rendered: &Rendered) -> String {
    let mut out = String::new();
    for outcome in &rendered.ingresses {
        if outcome.edited {
            let _ = writeln!(
                out,
                "changed: {}: {}: {}",
                outcome.document,
                outcome.ingress,
                describe_change(&outcome)
            );
        }
    }
    out.push_str(&warnings(rendered));
    let _ = writeln!(out, "{}", summary(rendered));
    out
}

/// In `warn` mode, one line per field change that enforcing would make, for `--report` and
/// stderr: `would change: document 2 (templates/ingress.yaml): Ingress web: would set
/// spec.ingressClassName "haproxy" (now "nginx"), decided by environment.ingress_class`.
pub fn would_change(rendered: &Rendered, decided_by: &str) -> String {
    let mut out = String::new();
    for outcome in rendered.ingresses.iter().filter(|o| o.edited) {
        for change in styrmin_ingress_rules::changes_between(outcome.before, outcome.after) {
            let _ = writeln!(
                out,
                "would change: {}: {}: {}, decided by {decided_by}",
                outcome.document,
                outcome.ingress,
                styrmin_ingress_rules::would_change(&change, outcome.before)
            );
        }
    }
    out
}

/// The summary of a `warn` run: nothing was changed, this many Ingresses would be.
pub fn warn_summary(rendered: &Rendered) -> String {
    let would = rendered.ingresses.iter().filter(|o| o.edited).count();
    format!(
        "styrmin-postrender: enforcement_mode warn: {} documents passed unchanged, {} Ingresses, {} would change, {} warnings",
        rendered.documents,
        rendered.ingresses.len(),
        would,
        rendered.warnings().count()
    )
}

/// The R5 warnings alone, as printed on stderr.
pub fn warnings(rendered: &Rendered) -> String {
    let mut out = String::new();
    for outcome in rendered.warnings() {
        let _ = writeln!(
            out,
            "warning: {}: {}: {}",
            outcome.document,
            outcome.ingress,
            styrmin_ingress_rules::NoClassWarning::MESSAGE
        );
    }
    out
}

pub fn summary(rendered: &Rendered) -> String {
    let edited = rendered.ingresses.iter().filter(|o| o.edited).count();
    let warned = rendered.warnings().count();
    format!(
        "styrmin-postrender: {} documents, {} Ingresses, {} changed, {} warnings",
        rendered.documents,
        rendered.ingresses.len(),
        edited,
        warned
    )
}

/// `spec.ingressClassName "nginx" -> (removed); annotation (none) -> "traefik"`.
pub fn describe_change(outcome: &IngressOutcome) -> String {
    let IngressOutcome { before, after, .. } = outcome;
    let field = |name: &str, b: &Option<String>, a: &Option<String>| {
        format!("{name} {} -> {}", show(b, false), show(a, true))
    };
    let ClassFields {
        ingress_class_name: bc,
        class_annotation: ba,
    } = &**before;
    let ClassFields {
        ingress_class_name: ac,
        class_annotation: aa,
    } = &**after;
    let mut parts = Vec::new();
    if bc != ac || (ac.is_some()) {
        parts.push(field("spec.ingressClassName", bc, ac));
    }
    parts.push(field("annotation kubernetes.io/ingress.class", ba, aa));
    parts.join("; ")
}

fn show(value: &Option<String>, after: bool) -> String {
    match value {
        Some(v) => format!("{v:?}"),
        None if after => "(removed)".to_owned(),
        None => "(none)".to_owned(),
    }
}
