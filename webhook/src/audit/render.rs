//! The audit as a person reads it (a table like `kubectl get`) or as JSON (`-o json`).

use std::fmt::Write as _;

use super::{CompletedAudit, Finding, Reason};

/// Columns padded to the widest cell plus three spaces, like kubectl's tables.
fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut text = String::new();
    let mut line = |cells: Vec<&str>| {
        let last = cells.len().saturating_sub(1);
        let mut out = String::new();
        for (i, (cell, width)) in cells.iter().zip(&widths).enumerate() {
            out.push_str(cell);
            if i < last {
                out.push_str(&" ".repeat(width - cell.chars().count() + 3));
            }
        }
        text.push_str(out.trim_end());
        text.push('\n');
    };
    line(header.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
    text
}

fn finding_rows<'a>(findings: impl Iterator<Item = &'a Finding>) -> Vec<Vec<String>> {
    findings
        .map(|f| {
            vec![
                f.namespace.to_string(),
                f.name.to_string(),
                f.reason.as_str().to_owned(),
                f.has.to_string(),
                f.wants.to_string(),
                match f.mode {
                    Some(mode) => format!("mode={mode}: {}", f.why),
                    None => f.why.to_string(),
                },
                f.fix.to_string(),
            ]
        })
        .collect()
}

/// The tables: Ingresses out of line, controllers stuck DELETING, stale aliases (each only
/// when it has rows), the levels as stored and resolved, and a summary line.
pub fn render_table(report: &CompletedAudit) -> String {
    let mut text = String::new();
    for (kind, column) in [
        ("Ingress", "INGRESS"),
        ("StyrminDeployment", "STYRMINDEPLOYMENT"),
        ("Service", "SERVICE"),
    ] {
        let rows = finding_rows(report.findings.iter().filter(|f| f.kind == kind));
        if rows.is_empty() {
            continue;
        }
        text.push_str(&table(
            &["NAMESPACE", column, "REASON", "HAS", "WANTS", "WHY", "FIX"],
            &rows,
        ));
        text.push('\n');
    }
    let levels: Vec<Vec<String>> = report
        .levels
        .iter()
        .map(|l| {
            vec![
                l.level.clone(),
                l.ingress_class.clone(),
                l.dedicated_ingress.clone(),
                l.resolves_to.clone(),
                l.note.clone().unwrap_or_default(),
            ]
        })
        .collect();
    text.push_str(&table(
        &[
            "LEVEL",
            "INGRESSCLASS",
            "DEDICATEDINGRESS",
            "RESOLVES TO",
            "NOTE",
        ],
        &levels,
    ));
    text.push('\n');
    let counts: Vec<String> = Reason::ALL
        .iter()
        .map(|r| format!("{} {}", r.as_str(), report.count(*r)))
        .collect();
    let _ = writeln!(
        text,
        "{} Ingresses in Styrmin namespaces, {} conform; {} (audit of {})",
        report.ingresses,
        report.conforming_ingresses,
        counts.join(", "),
        report.completed_at
    );
    text
}

/// The report as pretty JSON, with a final newline.
pub fn render_json(report: &CompletedAudit) -> String {
    let mut text = serde_json::to_string_pretty(report).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up_and_lines_have_no_trailing_blanks() {
        let text = table(
            &["A", "LONGER", "C"],
            &[vec!["wide cell".into(), "x".into(), "".into()]],
        );
        assert_eq!(text, "A           LONGER   C\nwide cell   x\n");
    }
}
