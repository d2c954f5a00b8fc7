//! Every real rendered stream in `postrender/tests/data/rendered/` (Helm 3 and Helm 4 output, and
//! exactly what each writes to a post-renderer) × every configuration of the resolution
//! table: the Ingresses get the rule's fields, nothing else changes, and the output is a
//! fixed point.

use serde_json::Value;
use styrmin_ingress_rules::{IngressTarget, Level, resolve};
use styrmin_postrender::config::StyrminConfig;
use styrmin_postrender::render::RenderRules;
use styrmin_postrender::{documents, streaming};
use styrmin_test_support::rendered::{is_ingress, rendered_streams};
use styrmin_test_support::resolution_table::RESOLUTION_TABLE;

fn fixtures() -> Vec<(String, String)> {
    rendered_streams()
        .into_iter()
        .map(|(name, path)| (name, std::fs::read_to_string(&path).expect("read")))
        .collect()
}

fn rules(config: &str) -> RenderRules {
    let config = StyrminConfig::from_yaml(config, "test").expect("config");
    let default = Level::default();
    RenderRules {
        resolved: resolve(&config.levels(&default)),
        kubernetes: None,
        strict: false,
    }
}

fn run(input: &str, rules: &RenderRules) -> String {
    let rendered =
        streaming::render_stream(input.as_bytes(), rules, streaming::BLOCK_BYTES).expect("render");
    let mut out = Vec::new();
    rendered.write(&mut out).expect("write");
    String::from_utf8(out).expect("utf-8")
}

/// Every Ingress of a parsed document (itself, or its List items).
fn ingresses(doc: &mut Value) -> Vec<&mut Value> {
    if is_ingress(doc) {
        return vec![doc];
    }
    let api = doc["apiVersion"].as_str().unwrap_or_default().to_owned();
    let kind = doc["kind"].as_str().unwrap_or_default().to_owned();
    if !styrmin_ingress_rules::is_ingress_container_list(&api, &kind) {
        return Vec::new();
    }
    match doc.get_mut("items").and_then(Value::as_array_mut) {
        Some(items) => items.iter_mut().filter(|i| is_ingress(i)).collect(),
        None => Vec::new(),
    }
}

fn class_fields(ingress: &Value) -> (Option<String>, Option<String>) {
    let s = |v: &Value| v.as_str().map(str::to_owned);
    (
        s(&ingress["spec"]["ingressClassName"]),
        s(&ingress["metadata"]["annotations"]["kubernetes.io/ingress.class"]),
    )
}

/// Removes the two class fields and the maps they leave empty.
fn strip(ingress: &mut Value) {
    if let Some(spec) = ingress.get_mut("spec").and_then(Value::as_object_mut) {
        spec.remove("ingressClassName");
    }
    if let Some(metadata) = ingress.get_mut("metadata").and_then(Value::as_object_mut) {
        if let Some(annotations) = metadata
            .get_mut("annotations")
            .and_then(Value::as_object_mut)
        {
            annotations.remove("kubernetes.io/ingress.class");
        }
        if metadata
            .get("annotations")
            .is_some_and(|a| a.is_null() || a.as_object().is_some_and(|m| m.is_empty()))
        {
            metadata.remove("annotations");
        }
    }
}

fn parse_all(text: &str) -> Vec<Value> {
    documents::split(text)
        .into_iter()
        .map(|d| {
            let doc = &text[d.range];
            serde_saphyr::from_str::<Option<Value>>(doc)
                .unwrap_or_else(|e| panic!("{e}\n{doc}"))
                .unwrap_or(Value::Null)
        })
        .collect()
}

#[test]
fn every_fixture_under_every_configuration() {
    let mut ingresses_seen = 0;
    for (name, input) in fixtures() {
        for table_config in RESOLUTION_TABLE {
            let config = &table_config.config_yaml();
            let rules = rules(config);
            let output = run(&input, &rules);
            let context = format!("{name} with config {config:?}");

            // R7: documents that are not Ingresses (nor Lists holding one) are byte-for-byte.
            let (docs_in, docs_out) = (documents::split(&input), documents::split(&output));
            assert_eq!(docs_in.len(), docs_out.len(), "{context}: document count");
            let (parsed_in, mut parsed_out) = (parse_all(&input), parse_all(&output));
            for (i, (a, b)) in docs_in.iter().zip(&docs_out).enumerate() {
                let mut probe = parsed_in[i].clone();
                if ingresses(&mut probe).is_empty() {
                    assert_eq!(
                        &input[a.range.clone()],
                        &output[b.range.clone()],
                        "{context}: document {} changed",
                        i + 1
                    );
                }
            }

            for (before, after) in parsed_in.iter().zip(parsed_out.iter_mut()) {
                let mut before = before.clone();
                let (mut ins, outs) = (ingresses(&mut before), ingresses(after));
                assert_eq!(ins.len(), outs.len(), "{context}");
                for (i, o) in ins.iter_mut().zip(outs) {
                    ingresses_seen += 1;
                    let chart = class_fields(i);
                    let expected = match &rules.resolved.target {
                        IngressTarget::Dedicated => (None, Some("traefik".to_owned())),
                        IngressTarget::Class(class) => {
                            (Some(class.to_string()), Some(class.to_string()))
                        }
                        IngressTarget::NoClass => chart.clone(),
                    };
                    assert_eq!(
                        class_fields(o),
                        expected,
                        "{context}: {}",
                        o["metadata"]["name"]
                    );
                    // Nothing else in the Ingress changed, read by another parser (serde-saphyr).
                    strip(i);
                    strip(o);
                    assert_eq!(&**i, &*o, "{context}");
                }
            }

            // R8: the output is a fixed point.
            assert_eq!(run(&output, &rules), output, "{context}: not idempotent");
        }
    }
    assert!(
        ingresses_seen >= 20 * RESOLUTION_TABLE.len(),
        "only {ingresses_seen} Ingresses checked"
    );
}

#[test]
fn helm4_filename_annotation_survives() {
    for (name, input) in fixtures()
        .into_iter()
        .filter(|(n, _)| n.contains("helm4-postrenderer"))
    {
        let output = run(&input, &rules("cluster: {dedicated_ingress: {}}"));
        assert_eq!(
            input.matches(documents::HELM4_FILENAME_ANNOTATION).count(),
            output.matches(documents::HELM4_FILENAME_ANNOTATION).count(),
            "{name}"
        );
    }
}

#[test]
fn helm3_source_lines_survive() {
    for (name, input) in fixtures()
        .into_iter()
        .filter(|(n, _)| n.contains("helm3-postrenderer"))
    {
        let output = run(&input, &rules("cluster: {ingress_class: nginx}"));
        let sources = |t: &str| {
            t.lines()
                .filter(|l| l.starts_with("# Source: "))
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        assert_eq!(sources(&input), sources(&output), "{name}");
        assert!(output.starts_with("---\n# Source: "), "{name}");
    }
}
