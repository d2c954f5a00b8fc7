//! `styrmin-postrender explain`: which class or dedicated ingress the config gives, which
//! level decided it, and whether the last-deployed record (rule W5) or the levels applied.

use std::fmt::Write as _;

use styrmin_ingress_rules::{AppliedSettings, IngressTarget, Level, Origin, Setting};

use crate::config::StyrminConfig;

pub fn explain(config: &StyrminConfig, settings: &AppliedSettings) -> String {
    let resolved = &settings.resolved;
    // The same "decided by" text as the webhook's log, with a word on what it means.
    let decided_by = resolved.decided_by();
    let mut out = String::new();
    let _ = match &resolved.target {
        IngressTarget::Dedicated => writeln!(
            out,
            "dedicated ingress controller (R3): every Ingress gets the annotation kubernetes.io/ingress.class: \"traefik\" \
             and no spec.ingressClassName\ndecided by: {decided_by} (ingress_class at every level is ignored)"
        ),
        IngressTarget::Class(class) => {
            let class = class.as_str();
            writeln!(
                out,
                "shared ingress class {class:?} (R4): every Ingress gets spec.ingressClassName and the annotation \
                 kubernetes.io/ingress.class both set to {class:?}\ndecided by: {decided_by}{}",
                match resolved.origin {
                    Origin::ClusterDefault => " (no level sets ingress_class)",
                    Origin::Level(_) | Origin::LastDeployed => "",
                }
            )
        }
        IngressTarget::NoClass => writeln!(
            out,
            "no class (R5): Ingresses keep the class the chart gives them; one with no class gets a warning\n\
             decided by: {decided_by} (empty)"
        ),
    };
    let mode = config.mode(&Level::default());
    let _ = writeln!(
        out,
        "enforcement_mode: {} (decided by {}){}",
        mode.mode,
        mode.decided_by(),
        if mode.mode.is_warn() {
            ": the stream passes unchanged, what enforce would change is reported"
        } else {
            ""
        }
    );
    // W5: the record, or the levels; `settings: record|levels` like the webhook's log.
    let _ = writeln!(out, "settings: {} — {}", settings.source(), settings.why());
    out.push_str("levels (most specific last):\n");
    for (name, level) in config.named_levels() {
        let _ = writeln!(
            out,
            "  {:<12} {}",
            format!("{name}:"),
            describe_level(level)
        );
    }
    out
}

fn describe_level(level: Option<&Level>) -> String {
    let Some(level) = level else {
        return "not given".to_owned();
    };
    let class = match &level.ingress_class {
        Setting::Absent => "ingress_class absent".to_owned(),
        Setting::Null => "ingress_class null".to_owned(),
        Setting::Value(v) => format!("ingress_class {v:?}"),
    };
    let dedicated = match &level.dedicated_ingress {
        Setting::Absent => "dedicated_ingress absent".to_owned(),
        Setting::Null => "dedicated_ingress null".to_owned(),
        Setting::Value(d) if d.value_keys.is_empty() => "dedicated_ingress {} (on)".to_owned(),
        Setting::Value(d) => format!("dedicated_ingress {{{}}} (on)", d.value_keys.join(", ")),
    };
    match level.enforcement_mode.value() {
        Some(mode) => format!("{class}, {dedicated}, enforcement_mode {mode}"),
        None => format!("{class}, {dedicated}"),
    }
}
