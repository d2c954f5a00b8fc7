//! The metrics' help texts (`# HELP` of /metrics) name only flags `serve` has, under their
//! names, and list every value of the `reason` labels.

use clap::CommandFactory as _;
use styrmin_webhook::audit::{Reason, ReasonLabels};
use styrmin_webhook::cli::Cli;
use styrmin_webhook::metrics::{
    ListenerLabels, Metrics, RejectReason, RequestLabels, SourceLabels,
};

/// `(metric family, help text)` of every `# HELP` line, each labelled family given a sample
/// (one without is not written).
fn helps() -> Vec<(String, String)> {
    let metrics = Metrics::new();
    let labels = RequestLabels {
        kind: "ingress",
        operation: "CREATE",
        outcome: "allowed",
    };
    metrics.requests.get_or_create(&labels).inc();
    let source = SourceLabels { source: "file" };
    metrics.view_update_failures.get_or_create(&source).inc();
    let listener = ListenerLabels { listener: "https" };
    metrics.open_connections.get_or_create(&listener).inc();
    metrics.reject("https", RejectReason::Cap);
    let reason = ReasonLabels {
        reason: Reason::WrongClass.as_str(),
    };
    metrics
        .audit
        .nonconforming_ingresses
        .get_or_create(&reason)
        .inc();
    let text = metrics.encode();
    for family in [
        "admission_requests",
        "view_update_failures",
        "open_connections",
    ] {
        assert!(
            text.contains(&format!("# HELP styrmin_webhook_{family} ")),
            "{text}"
        );
    }
    text.lines()
        .filter_map(|line| line.strip_prefix("# HELP "))
        .filter_map(|rest| rest.split_once(' '))
        .map(|(name, help)| (name.to_owned(), help.to_owned()))
        .collect()
}

fn help_of(family: &str) -> String {
    helps()
        .into_iter()
        .find(|(name, _)| name == family)
        .unwrap_or_else(|| panic!("no metric {family}"))
        .1
}

#[test]
fn every_flag_a_help_names_is_a_flag_of_serve() {
    let command = Cli::command();
    let serve = command.find_subcommand("serve").expect("serve");
    let flags: Vec<&str> = serve.get_arguments().filter_map(|a| a.get_long()).collect();
    let mut named = 0;
    for (family, help) in helps() {
        for word in help.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-')) {
            if let Some(flag) = word.strip_prefix("--") {
                assert!(
                    flags.contains(&flag),
                    "{family}: --{flag} is not a flag of serve ({flags:?})"
                );
                named += 1;
            }
        }
    }
    assert!(named >= 1, "no help names a flag");
}

#[test]
fn the_reason_labels_are_listed_in_full() {
    let ingresses = help_of("styrmin_webhook_audit_nonconforming_ingresses");
    for reason in Reason::INGRESS {
        assert!(
            ingresses.contains(reason.as_str()),
            "{reason:?}: {ingresses}"
        );
    }
    let rejected = help_of("styrmin_webhook_connections_rejected");
    for reason in RejectReason::ALL {
        assert!(rejected.contains(reason.as_str()), "{reason:?}: {rejected}");
    }
}
