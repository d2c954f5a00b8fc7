//! The post-renderer against the readers that consume its output: kubectl's go-yaml v2
//! reader (`kubectl label --local -o json -f -`, as Helm 3 reads) and kustomize's go-yaml v3
//! reader (`kubectl kustomize DIR`, as Helm 4, kustomize and Flux read).
//!
//! For generated layouts (with YAML forms at the edges: tags, anchors, explicit keys, CRLF)
//! and for the regression files in `postrender/tests/data/yaml-edges/`: Go's reading of the
//! input and of the output must be equal except the two class fields, which must be as the
//! rule says; the output must be a fixed point; a refused input gives a non-zero exit and
//! an empty stdout. Each reader runs once per batch of many documents, to keep this fast.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::Value;
use styrmin_e2e::{Scratch, tool};
use styrmin_ingress_rules::{IngressTarget, LevelName, Origin, ResolvedIngress};
use styrmin_postrender::render::RenderRules;
use styrmin_test_support::ingress_gen::{self, DocGen, Shape};

const ANNOTATION: &str = "kubernetes.io/ingress.class";

/// The rules each batch runs under: R4 with a class a YAML 1.1 reader takes for a
/// boolean, and R3.
fn rule_sets() -> Vec<(RenderRules, Option<&'static str>, Option<&'static str>)> {
    vec![
        (
            RenderRules {
                resolved: ResolvedIngress {
                    target: IngressTarget::class("on"),
                    origin: Origin::Level(LevelName::Cluster),
                },
                kubernetes: None,
                strict: false,
            },
            Some("on"),
            Some("on"),
        ),
        (
            RenderRules {
                resolved: ResolvedIngress {
                    target: IngressTarget::Dedicated,
                    origin: Origin::Level(LevelName::Cluster),
                },
                kubernetes: None,
                strict: false,
            },
            None,
            Some("traefik"),
        ),
    ]
}

/// Runs the post-renderer's pipeline; `None` when it refuses the stream.
fn post_render(input: &str, rules: &RenderRules) -> Option<String> {
    let rendered =
        styrmin_postrender::streaming::render_stream(input.as_bytes(), rules, 1 << 20).ok()?;
    let mut out = Vec::new();
    rendered.write(&mut out).unwrap();
    Some(String::from_utf8(out).unwrap())
}

/// go-yaml v2, as kubectl and Helm 3 read: one JSON object per resource (List items
/// expanded), in stream order; `Err` with kubectl's message when it refuses the stream.
fn read_v2(stream: &str) -> Result<Vec<Value>, String> {
    let mut child = Command::new(tool("kubectl"))
        .args([
            "label",
            "--local",
            "-o",
            "json",
            "-f",
            "-",
            "styrmin-oracle=1",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Written from another thread: kubectl writes while it reads, and a full pipe each way
    // would otherwise stop both.
    let mut stdin = child.stdin.take().unwrap();
    let bytes = stream.as_bytes().to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&bytes));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    serde_json::Deserializer::from_slice(&out.stdout)
        .into_iter::<Value>()
        .map(|v| v.map_err(|e| e.to_string()))
        .collect()
}

/// go-yaml v3 (kyaml), as kustomize, Helm 4 and Flux read: kustomize's output in input
/// order, each resource read back as JSON.
fn read_v3(stream: &str, scratch: &Path) -> Result<Vec<Value>, String> {
    std::fs::create_dir_all(scratch).unwrap();
    std::fs::write(scratch.join("resources.yaml"), stream).unwrap();
    std::fs::write(
        scratch.join("kustomization.yaml"),
        "resources:\n- resources.yaml\nsortOptions:\n  order: fifo\n",
    )
    .unwrap();
    let out = Command::new(tool("kubectl"))
        .arg("kustomize")
        .arg(scratch)
        .output()
        .unwrap();
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let text = String::from_utf8(out.stdout).unwrap();
    serde_saphyr::from_multiple::<Value>(&text).map_err(|e| e.to_string())
}

/// The class fields of a resource, and the resource without them (empty containers they
/// leave removed, as the post-renderer may create or remove them).
fn split_class(resource: &Value) -> (Option<Value>, Option<Value>, Value) {
    let mut rest = resource.clone();
    let class_name = rest
        .pointer_mut("/spec")
        .and_then(Value::as_object_mut)
        .and_then(|spec| spec.remove("ingressClassName"));
    let annotation = rest
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
        .and_then(|a| a.remove(ANNOTATION));
    for (parent, key) in [("/metadata", "annotations"), ("", "spec")] {
        let emptied = rest
            .pointer(&format!("{parent}/{key}"))
            .is_some_and(|v| v.is_null() || v.as_object().is_some_and(|o| o.is_empty()));
        if emptied && let Some(map) = rest.pointer_mut(parent).and_then(Value::as_object_mut) {
            map.remove(key);
        }
    }
    (class_name, annotation, rest)
}

fn is_ingress(resource: &Value) -> bool {
    resource["kind"] == "Ingress"
        && styrmin_ingress_rules::INGRESS_API_VERSIONS
            .contains(&resource["apiVersion"].as_str().unwrap_or(""))
}

/// Go's reading of the input and of the output agree except the class fields, which are
/// as the rule says.
fn assert_same_but_class(
    reader: &str,
    before: &[Value],
    after: &[Value],
    want: (Option<&str>, Option<&str>),
    context: &str,
) {
    assert_eq!(
        before.len(),
        after.len(),
        "{reader}: the output has another number of resources\n{context}"
    );
    for (b, a) in before.iter().zip(after) {
        if !is_ingress(b) {
            assert_eq!(
                b, a,
                "{reader}: a resource that is not an Ingress changed\n{context}"
            );
            continue;
        }
        let (_, _, b_rest) = split_class(b);
        let (class_name, annotation, a_rest) = split_class(a);
        assert_eq!(
            b_rest, a_rest,
            "{reader}: more than the class fields changed\n{context}"
        );
        assert_eq!(
            (class_name, annotation),
            (
                want.0.map(|c| Value::String(c.to_owned())),
                want.1.map(|c| Value::String(c.to_owned()))
            ),
            "{reader}: the class fields of {} are not the rule's\n{context}",
            a["metadata"]["name"]
        );
    }
}

/// Edge forms Go reads as plain ones, applied to a block-style document line by line:
/// tags and an unreferenced anchor on `kind`, explicit keys for the class fields, an
/// unreferenced anchor on `spec`.
fn with_edges(text: &str, choice: u32) -> String {
    let nl = if text.contains("\r\n") { "\r\n" } else { "\n" };
    let mut out = String::new();
    for line in text.split_inclusive('\n') {
        let body = line.trim_end_matches(['\r', '\n']);
        let indent = body.len() - body.trim_start_matches(' ').len();
        let (pad, rest) = body.split_at(indent);
        let edited = match rest {
            "kind: Ingress" => Some(match choice % 4 {
                0 => format!("{pad}kind: !!str Ingress"),
                1 => format!("{pad}kind: !!binary SW5ncmVzcw=="),
                2 => format!("{pad}kind: &kind Ingress"),
                _ => format!("{pad}? kind{nl}{pad}: Ingress"),
            }),
            "spec:" if choice.is_multiple_of(3) => Some(format!("{pad}spec: &spec")),
            _ => ["ingressClassName: ", "kubernetes.io/ingress.class: "]
                .iter()
                .find_map(|key| rest.strip_prefix(key).map(|v| (key, v)))
                .filter(|_| choice % 2 == 1)
                .map(|(key, value)| {
                    format!("{pad}? {}{nl}{pad}: {value}", key.trim_end_matches(": "))
                }),
        };
        match edited {
            Some(e) => {
                out.push_str(&e);
                out.push_str(&line[body.len()..]);
            }
            None => out.push_str(line),
        }
    }
    out
}

/// Generated Ingress and List documents, each named uniquely (kustomize refuses two
/// resources with one name), with metadata (kustomize refuses a resource without a name).
fn generated_documents(count: usize) -> Vec<String> {
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]),
    );
    let strategy = (
        ingress_gen::document(true),
        ingress_gen::layout(),
        0u32..1000,
    );
    let mut out = Vec::new();
    let mut n = 0;
    while out.len() < count {
        let (doc, layout, choice) = strategy.new_tree(&mut runner).unwrap().current();
        let mut name = |i: &mut ingress_gen::IngressGen| {
            n += 1;
            i.name = format!("ing-{n}");
            if !matches!(i.metadata, Shape::Present) {
                i.metadata = Shape::Present;
            }
        };
        let doc = match doc {
            DocGen::Ingress(mut i) => {
                name(&mut i);
                DocGen::Ingress(i)
            }
            DocGen::List(mut items, list) if !items.is_empty() => {
                items.iter_mut().for_each(name);
                DocGen::List(items, list)
            }
            _ => continue,
        };
        let mut text = doc.text(&layout);
        if layout.indent.is_some() {
            text = with_edges(&text, choice);
        }
        if !text.ends_with('\n') {
            text.push('\n');
        }
        out.push(text);
    }
    out
}

/// A stream of `documents` as kubectl's reader splits it (by `---` lines).
fn stream_of(documents: &[String]) -> String {
    documents.iter().map(|d| format!("---\n{d}")).collect()
}

#[test]
fn generated_layouts_read_by_go_as_the_rule_says() {
    let scratch = Scratch::new("go-readers");
    let documents = generated_documents(300);
    let input = stream_of(&documents);
    let v2_in = read_v2(&input).unwrap_or_else(|e| panic!("kubectl refuses the input: {e}"));
    let v3_in =
        read_v3(&input, &scratch.path().join("in")).unwrap_or_else(|e| panic!("kustomize: {e}"));
    assert!(v2_in.iter().filter(|r| is_ingress(r)).count() >= 300);
    for (i, (rules, class_name, annotation)) in rule_sets().into_iter().enumerate() {
        // Every generated layout is one Go reads plainly: none may be refused.
        let output = post_render(&input, &rules).unwrap_or_else(|| {
            let refused: Vec<String> = documents
                .iter()
                .filter(|d| post_render(d, &rules).is_none())
                .cloned()
                .collect();
            panic!("refused: {refused:#?}")
        });
        assert_eq!(
            post_render(&output, &rules).as_deref(),
            Some(output.as_str()),
            "the output is not a fixed point"
        );
        let v2_out = read_v2(&output).unwrap_or_else(|e| panic!("kubectl refuses the output: {e}"));
        let v3_out = read_v3(&output, &scratch.path().join(format!("out{i}")))
            .unwrap_or_else(|e| panic!("kustomize refuses the output: {e}"));
        let context = "(generated batch)";
        assert_same_but_class(
            "go-yaml v2",
            &v2_in,
            &v2_out,
            (class_name, annotation),
            context,
        );
        assert_same_but_class(
            "go-yaml v3",
            &v3_in,
            &v3_out,
            (class_name, annotation),
            context,
        );
    }
}

/// Each refused regression file and its whole message (after `styrmin-postrender: error: `).
const REFUSALS: &[(&str, &str)] = &[
    (
        "refuse-apiversion-duplicate.yaml",
        "document 1 (line 1): `apiVersion` appears more than once at the top level: Helm 3 and kubectl keep the last, Helm 4 and kustomize refuse the document",
    ),
    (
        "refuse-class-name-alias.yaml",
        "document 1 (line 1): Ingress class-alias: spec.ingressClassName is a YAML alias or defines an anchor that other nodes may share; styrmin-postrender does not edit shared nodes",
    ),
    (
        "refuse-kind-duplicate-last-ingress.yaml",
        "document 1 (line 1): `kind` appears more than once at the top level: Helm 3 and kubectl keep the last, Helm 4 and kustomize refuse the document",
    ),
    (
        "refuse-kind-merge-key-over-explicit.yaml",
        "document 1 (line 1): `kind` at the top level comes from a YAML merge key (`<<`), which Helm 3 and Helm 4 apply in different orders; write the key out",
    ),
    (
        "refuse-list-item-alias.yaml",
        "document 1 (line 1): items[1] is a YAML alias of an Ingress; styrmin-postrender does not edit shared nodes",
    ),
    (
        "refuse-nel-in-plain-annotation.yaml",
        "document 1 (line 1): line 6: a NEL character (U+0085), which Helm and kubectl read as a line break and YAML 1.2 does not; write a line break or an escape (\\N) instead",
    ),
    (
        "refuse-tab-block-scalar-first-line.yaml",
        "document 1 (line 1): line 7: a tab in the indentation, which Helm and kubectl refuse (YAML indents with spaces)",
    ),
    (
        "refuse-tab-comment-line.yaml",
        "document 1 (line 1): line 5: a tab in the indentation, which Helm and kubectl refuse (YAML indents with spaces)",
    ),
    (
        "refuse-tab-indentation.yaml",
        "document 1 (line 1): not valid YAML: line 6 column 2: tabs disallowed within this context (block indentation)",
    ),
    (
        "refuse-tab-plain-continuation-below-indentation.yaml",
        "document 1 (line 1): not valid YAML: line 6 column 11: while scanning a plain scalar, found a tab",
    ),
];

/// This workspace (from this file's crate, compiled here).
fn workspace_root() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Runs the binary as Helm does.
fn run_binary(args: &[&str], stdin: &[u8]) -> std::process::Output {
    let mut child = Command::new(workspace_root().join("target/release/styrmin-postrender"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pipe = child.stdin.take().unwrap();
    let bytes = stdin.to_vec();
    let writer = std::thread::spawn(move || pipe.write_all(&bytes));
    let out = child.wait_with_output().unwrap();
    let _ = writer.join();
    out
}

#[test]
fn regression_files_are_edited_as_go_reads_them_or_refused() {
    let scratch = Scratch::new("go-readers-edges");
    let dir = workspace_root().join("postrender/tests/data/yaml-edges");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 20, "{}", files.len());
    let mut refused = 0;
    for (n, file) in files.iter().enumerate() {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let input = std::fs::read(file).unwrap();
        let out = run_binary(&["--ingress-class=on"], &input);
        let stderr = String::from_utf8_lossy(&out.stderr);
        if name.starts_with("refuse-") {
            assert!(!out.status.success(), "{name}: accepted");
            assert!(out.stdout.is_empty(), "{name}: wrote to stdout on error");
            let message = REFUSALS
                .iter()
                .find(|(file, _)| *file == name)
                .unwrap_or_else(|| panic!("{name}: no expected message"))
                .1;
            assert_eq!(
                stderr,
                format!("styrmin-postrender: error: {message}\n"),
                "{name}"
            );
            refused += 1;
            continue;
        }
        assert!(out.status.success(), "{name}: {stderr}");
        if name.starts_with("keep-") {
            assert_eq!(out.stdout, input, "{name}: changed");
            continue;
        }
        assert!(name.starts_with("edit-"), "{name}: edit-, keep- or refuse-");
        assert_ne!(out.stdout, input, "{name}: not edited");
        let again = run_binary(&["--ingress-class=on"], &out.stdout);
        assert_eq!(again.stdout, out.stdout, "{name}: not a fixed point");
        let input = String::from_utf8(input).unwrap();
        let output = String::from_utf8(out.stdout).unwrap();
        let context = format!("{name}\n--- input:\n{input}\n--- output:\n{output}");
        let v2_in = read_v2(&input).unwrap_or_else(|e| panic!("{name}: kubectl: {e}"));
        let v2_out = read_v2(&output).unwrap_or_else(|e| panic!("{name}: kubectl: {e}"));
        assert!(v2_in.iter().any(is_ingress), "{context}");
        assert_same_but_class(
            "go-yaml v2",
            &v2_in,
            &v2_out,
            (Some("on"), Some("on")),
            &context,
        );
        let v3_in = read_v3(&input, &scratch.path().join(format!("in{n}")))
            .unwrap_or_else(|e| panic!("{name}: kustomize: {e}"));
        let v3_out = read_v3(&output, &scratch.path().join(format!("out{n}")))
            .unwrap_or_else(|e| panic!("{name}: kustomize: {e}"));
        assert_same_but_class(
            "go-yaml v3",
            &v3_in,
            &v3_out,
            (Some("on"), Some("on")),
            &context,
        );
    }
    assert_eq!(refused, REFUSALS.len());
}

/// go-yaml v2's and v3's readings of a document, `None` where the reader refuses it.
type Readings = (Option<Vec<Value>>, Option<Vec<Value>>);

/// One wrapped case of the YAML test suite, with what Go's readers made of it when it was
/// recorded (`e2e/tests/data/yaml-test-suite/record.py`).
#[derive(serde::Deserialize)]
struct SuiteCase {
    id: String,
    wrap: String,
    yaml: String,
    /// `same`: both readers read it, alike; `differ`: only one reads it, or they differ;
    /// `refused`: neither reads it.
    go: String,
    /// Either reader reads an Ingress.
    ingress: bool,
}

fn suite_cases() -> Vec<SuiteCase> {
    let path = workspace_root().join("e2e/tests/data/yaml-test-suite/cases.json");
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// kubectl label's own label left out, to compare v2's reading with v3's.
fn without_oracle_label(mut resource: Value) -> Value {
    if let Some(labels) = resource
        .pointer_mut("/metadata/labels")
        .and_then(Value::as_object_mut)
    {
        labels.remove("styrmin-oracle");
        if labels.is_empty()
            && let Some(metadata) = resource
                .pointer_mut("/metadata")
                .and_then(Value::as_object_mut)
        {
            metadata.remove("labels");
        }
    }
    resource
}

/// The resources whose reading by Go differs from the rule's: (`input`, `output`) pairs
/// in stream order, named by their `metadata.name`.
fn wrong_readings(
    before: &[Value],
    after: &[Value],
    want: (Option<&str>, Option<&str>),
) -> Vec<String> {
    let want = (
        want.0.map(|c| Value::String(c.to_owned())),
        want.1.map(|c| Value::String(c.to_owned())),
    );
    let mut wrong = Vec::new();
    for (b, a) in before.iter().zip(after) {
        let name = b["metadata"]["name"].to_string();
        if !is_ingress(b) {
            if b != a {
                wrong.push(format!("{name}: not an Ingress, and edited"));
            }
            continue;
        }
        let (_, _, b_rest) = split_class(b);
        let (class_name, annotation, a_rest) = split_class(a);
        if b_rest != a_rest {
            wrong.push(format!("{name}: more than the class fields changed"));
        } else if (class_name, annotation) != want {
            wrong.push(format!("{name}: the class fields are not the rule's"));
        }
    }
    if before.len() != after.len() {
        wrong.push(format!(
            "{} resources before, {} after",
            before.len(),
            after.len()
        ));
    }
    wrong
}

/// The YAML test suite's cases (one document each), wrapped as an Ingress's top level, as
/// a value inside an Ingress, and as a ConfigMap beside them: where both Go readers read a
/// document alike, the post-renderer must not refuse it (over-eager refusals) and Go's
/// reading of its output must be the input's with the rule's class fields (slip-throughs:
/// an Ingress left alone or edited wrong, a neighbour edited); where the readers disagree
/// about a document that one of them reads as an Ingress, it must refuse it.
#[test]
fn yaml_test_suite_cases_read_by_go_as_the_rule_says() {
    let scratch = Scratch::new("go-readers-suite");
    let cases = suite_cases();
    let same: Vec<&SuiteCase> = cases.iter().filter(|c| c.go == "same").collect();
    assert!(same.len() >= 300, "{} cases both readers read", same.len());
    assert!(same.iter().filter(|c| c.ingress).count() >= 150);
    let label = |c: &SuiteCase| format!("{} ({})", c.id, c.wrap);
    let input: String = same.iter().map(|c| format!("---\n{}", c.yaml)).collect();
    let v2_in = read_v2(&input).unwrap_or_else(|e| panic!("the record is stale: kubectl: {e}"));
    let v3_in = read_v3(&input, &scratch.path().join("in"))
        .unwrap_or_else(|e| panic!("the record is stale: kustomize: {e}"));
    assert_eq!(v2_in.len(), same.len());
    for (i, (rules, class_name, annotation)) in rule_sets().into_iter().enumerate() {
        // Each document alone, so that one refusal does not hide the others' readings:
        // a refused document stands for itself in the output (an Ingress left alone).
        let mut over_eager = Vec::new();
        let mut output = String::new();
        for case in &same {
            let out = post_render(&case.yaml, &rules).unwrap_or_else(|| {
                over_eager.push(label(case));
                case.yaml.clone()
            });
            output.push_str("---\n");
            output.push_str(&out);
        }
        let v2_out = read_v2(&output).unwrap_or_else(|e| panic!("kubectl refuses the output: {e}"));
        let v3_out = read_v3(&output, &scratch.path().join(format!("out{i}")))
            .unwrap_or_else(|e| panic!("kustomize refuses the output: {e}"));
        let mut slips = wrong_readings(&v2_in, &v2_out, (class_name, annotation));
        slips.extend(wrong_readings(&v3_in, &v3_out, (class_name, annotation)));
        assert_eq!(
            (over_eager.len(), slips.len()),
            (0, 0),
            "rules {i}: over-eager refusals {over_eager:?}, slip-throughs {slips:?}"
        );
    }
    // The documents the two readers disagree about (one refuses it, or they read it
    // differently): each is read again, alone. The post-renderer may refuse them; if it
    // edits one, every reader that reads the input must read the output as the input with
    // the rule's class fields, and a document that is not an Ingress must stay as it was.
    let differ: Vec<&SuiteCase> = cases.iter().filter(|c| c.go == "differ").collect();
    let readings: Vec<Readings> = differ
        .iter()
        .map(|case| {
            let v2 = read_v2(&case.yaml)
                .ok()
                .map(|r| r.into_iter().map(without_oracle_label).collect::<Vec<_>>());
            let v3 = read_v3(&case.yaml, &scratch.path().join("differ")).ok();
            assert_ne!(v2, v3, "{}: the record is stale", label(case));
            (v2, v3)
        })
        .collect();
    for (i, (rules, class_name, annotation)) in rule_sets().into_iter().enumerate() {
        let mut slips = Vec::new();
        let (mut v2_in, mut v2_out, mut v3_in, mut v3_out) =
            (Vec::new(), String::new(), Vec::new(), String::new());
        for (case, (v2, v3)) in differ.iter().zip(&readings) {
            let Some(out) = post_render(&case.yaml, &rules) else {
                continue;
            };
            if !case.ingress {
                if out != case.yaml {
                    slips.push(format!("{}: not an Ingress, and edited", label(case)));
                }
                continue;
            }
            if let Some(v2) = v2 {
                v2_in.extend(v2.iter().cloned());
                v2_out.push_str(&format!("---\n{out}"));
            }
            if let Some(v3) = v3 {
                v3_in.extend(v3.iter().cloned());
                v3_out.push_str(&format!("---\n{out}"));
            }
        }
        let v2_after: Vec<Value> = read_v2(&v2_out)
            .unwrap_or_else(|e| panic!("kubectl refuses an output it read as input: {e}"))
            .into_iter()
            .map(without_oracle_label)
            .collect();
        let v3_after = read_v3(&v3_out, &scratch.path().join(format!("differ-out{i}")))
            .unwrap_or_else(|e| panic!("kustomize refuses an output it read as input: {e}"));
        slips.extend(wrong_readings(&v2_in, &v2_after, (class_name, annotation)));
        slips.extend(wrong_readings(&v3_in, &v3_after, (class_name, annotation)));
        assert!(slips.is_empty(), "rules {i}: readers disagree: {slips:?}");
    }
}
