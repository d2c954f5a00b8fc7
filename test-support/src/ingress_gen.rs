//! Generators for the property tests: rendered streams of Ingresses in many YAML layouts
//! (block with 2 or 4 spaces, flow, JSON-style; LF or CRLF; metadata, annotations and spec
//! present, absent, null or empty; class fields absent, null, plain words that other YAML
//! readers take for booleans or numbers, quoted), Lists of Ingresses, documents that are not
//! Ingresses, and comments; and the three configuration levels.
//!
//! Shared by `postrender/tests/properties.rs`, `e2e/tests/properties_one_rule_set.rs` and
//! `e2e/tests/postrender_go_readers.rs`.

use proptest::prelude::*;

/// A YAML node, with scalars as the raw text to write.
#[derive(Clone, Debug)]
pub enum Y {
    Map(Vec<(String, Y)>),
    Seq(Vec<Y>),
    /// A scalar as written (`"nginx"`, `on`, `~`, `` for an empty value, which is null).
    S(String),
    /// A literal block scalar's lines (`|`); written double-quoted in flow layouts.
    Block(Vec<String>),
}

/// How a stream is written.
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    /// Block style with this indent; `None` is flow style (one line per document).
    pub indent: Option<usize>,
    /// Block sequences indented under their key (`true`) or at the key's column (Helm's).
    pub indent_sequences: bool,
    /// Flow style with every key double-quoted (JSON-style documents).
    pub quote_keys: bool,
    pub crlf: bool,
}

impl Layout {
    fn nl(&self) -> &'static str {
        if self.crlf { "\r\n" } else { "\n" }
    }
}

pub fn layout() -> impl Strategy<Value = Layout> {
    (
        prop_oneof![
            3 => prop::sample::select(vec![Some(2usize), Some(4)]),
            1 => Just(None)
        ],
        any::<bool>(),
        any::<bool>(),
        prop::bool::weighted(0.25),
    )
        .prop_map(|(indent, indent_sequences, quote_keys, crlf)| Layout {
            indent,
            indent_sequences,
            quote_keys,
            crlf,
        })
}

fn key(layout: &Layout, k: &str) -> String {
    if layout.indent.is_none() && layout.quote_keys || k.contains(": ") {
        format!("\"{k}\"")
    } else {
        k.to_owned()
    }
}

fn flow(y: &Y, layout: &Layout, out: &mut String) {
    match y {
        Y::Map(entries) => {
            out.push('{');
            for (i, (k, v)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&key(layout, k));
                out.push_str(": ");
                flow(v, layout, out);
            }
            out.push('}');
        }
        Y::Seq(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                flow(item, layout, out);
            }
            out.push(']');
        }
        Y::S(raw) if raw.is_empty() => out.push_str("null"),
        Y::S(raw) => out.push_str(raw),
        Y::Block(lines) => {
            out.push('"');
            for line in lines {
                out.push_str(&line.replace('\\', "\\\\").replace('"', "\\\""));
                out.push_str("\\n");
            }
            out.push('"');
        }
    }
}

/// Writes the entries of a block mapping at column `at`.
fn block_map(entries: &[(String, Y)], at: usize, layout: &Layout, out: &mut String) {
    let (step, nl) = (layout.indent.unwrap_or(2), layout.nl());
    for (k, v) in entries {
        out.push_str(&" ".repeat(at));
        out.push_str(&key(layout, k));
        out.push(':');
        match v {
            Y::S(raw) if raw.is_empty() => out.push_str(nl),
            Y::S(raw) => {
                out.push(' ');
                out.push_str(raw);
                out.push_str(nl);
            }
            Y::Map(e) if e.is_empty() => {
                out.push_str(" {}");
                out.push_str(nl);
            }
            Y::Seq(s) if s.is_empty() => {
                out.push_str(" []");
                out.push_str(nl);
            }
            Y::Map(e) => {
                out.push_str(nl);
                block_map(e, at + step, layout, out);
            }
            Y::Seq(items) => {
                out.push_str(nl);
                let at = if layout.indent_sequences {
                    at + step
                } else {
                    at
                };
                block_seq(items, at, layout, out);
            }
            Y::Block(lines) => {
                out.push_str(" |");
                out.push_str(nl);
                for line in lines {
                    out.push_str(&" ".repeat(at + step));
                    out.push_str(line);
                    out.push_str(nl);
                }
            }
        }
    }
}

fn block_seq(items: &[Y], at: usize, layout: &Layout, out: &mut String) {
    let nl = layout.nl();
    for item in items {
        match item {
            Y::Map(e) if !e.is_empty() => {
                let mut inner = String::new();
                block_map(e, at + 2, layout, &mut inner);
                out.push_str(&" ".repeat(at));
                out.push_str("- ");
                out.push_str(&inner[at + 2..]);
            }
            other => {
                out.push_str(&" ".repeat(at));
                out.push_str("- ");
                let mut inner = String::new();
                flow(other, layout, &mut inner);
                out.push_str(&inner);
                out.push_str(nl);
            }
        }
    }
}

/// A whole document's text (no `---` line), ending with a line break.
pub fn write_document(y: &Y, layout: &Layout) -> String {
    let mut out = String::new();
    match (layout.indent, y) {
        (Some(_), Y::Map(entries)) => block_map(entries, 0, layout, &mut out),
        _ => {
            flow(y, layout, &mut out);
            out.push_str(layout.nl());
        }
    }
    out
}

/// A class field's value as a chart may write it.
#[derive(Clone, Debug)]
pub enum ClassValue {
    Absent,
    /// `null`, `~`, or nothing after the colon.
    Null(&'static str),
    /// A plain scalar: `nginx`, but also `on`, `no`, `true`, `123` (other YAML readers take
    /// these for booleans and numbers).
    Plain(&'static str),
    DoubleQuoted(&'static str),
    SingleQuoted(&'static str),
}

impl ClassValue {
    fn raw(&self) -> Option<String> {
        match self {
            ClassValue::Absent => None,
            ClassValue::Null(raw) | ClassValue::Plain(raw) => Some((*raw).to_owned()),
            ClassValue::DoubleQuoted(w) => Some(format!("\"{w}\"")),
            ClassValue::SingleQuoted(w) => Some(format!("'{w}'")),
        }
    }
}

/// Words for classes: ordinary names and the ones YAML 1.1 readers take for something else.
pub const WORDS: [&str; 12] = [
    "nginx", "traefik", "haproxy", "on", "no", "yes", "y", "off", "true", "null", "123", "1.5",
];
/// Words that every YAML reader takes for strings when written plain.
const PLAIN_STRINGS: [&str; 3] = ["nginx", "traefik", "haproxy"];

/// A class value. `typed`: only what the API server could hold (strings or nothing), as an
/// object the webhook is sent would have; otherwise also plain words that read as other types.
pub fn class_value(typed: bool) -> impl Strategy<Value = ClassValue> {
    let plain = if typed {
        PLAIN_STRINGS.to_vec()
    } else {
        WORDS.to_vec()
    };
    prop_oneof![
        3 => Just(ClassValue::Absent),
        1 => prop::sample::select(vec!["null", "~", ""]).prop_map(ClassValue::Null),
        2 => prop::sample::select(plain).prop_map(ClassValue::Plain),
        2 => prop::sample::select(WORDS.to_vec()).prop_map(ClassValue::DoubleQuoted),
        1 => prop::sample::select(WORDS.to_vec()).prop_map(ClassValue::SingleQuoted),
    ]
}

/// Other annotations, whose values must come out as they went in (R7).
fn other_annotation() -> impl Strategy<Value = (String, String)> {
    (
        prop::sample::select(vec![
            "nginx.ingress.kubernetes.io/proxy-buffering",
            "nginx.ingress.kubernetes.io/ssl-redirect",
            "traefik.ingress.kubernetes.io/router.tls",
            "example.com/note",
            "meta.helm.sh/release-name",
            "kubernetes.io/ingress.class.extra",
            "ingressClassName",
        ]),
        prop::sample::select(vec![
            "\"off\"",
            "'off'",
            "\"true\"",
            "\"123\"",
            "\"a: b\"",
            "\"\"",
            "\"nginx\"",
            "\"# not a comment\"",
            "\"kubernetes.io/ingress.class: x\"",
        ]),
    )
        .prop_map(|(k, v)| (k.to_owned(), v.to_owned()))
}

#[derive(Clone, Debug)]
pub enum Shape {
    Absent,
    Null,
    Empty,
    Present,
}

fn shape() -> impl Strategy<Value = Shape> {
    prop_oneof![
        1 => Just(Shape::Absent),
        1 => Just(Shape::Null),
        1 => Just(Shape::Empty),
        5 => Just(Shape::Present),
    ]
}

/// One generated Ingress.
#[derive(Clone, Debug)]
pub struct IngressGen {
    pub api_version: &'static str,
    pub name: String,
    pub metadata: Shape,
    pub annotations: Shape,
    pub others: Vec<(String, String)>,
    /// Where the class annotation goes among the others.
    pub annotation_at: usize,
    pub class_annotation: ClassValue,
    pub spec: Shape,
    pub class_name: ClassValue,
    pub class_name_first: bool,
    pub spec_before_metadata: bool,
    pub kind_first: bool,
    pub rules: usize,
    pub labels: bool,
}

pub fn ingress(typed: bool) -> impl Strategy<Value = IngressGen> {
    (
        (
            prop::sample::select(vec![
                "networking.k8s.io/v1",
                "networking.k8s.io/v1beta1",
                "extensions/v1beta1",
            ]),
            "ing-[a-z0-9]{0,6}",
            shape(),
            shape(),
            prop::collection::vec(other_annotation(), 0..3),
            0usize..4,
            class_value(typed),
        ),
        (
            shape(),
            class_value(typed),
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            0usize..3,
            any::<bool>(),
        ),
    )
        .prop_map(
            |(
                (
                    api_version,
                    name,
                    metadata,
                    annotations,
                    mut others,
                    annotation_at,
                    class_annotation,
                ),
                (
                    spec,
                    class_name,
                    class_name_first,
                    spec_before_metadata,
                    kind_first,
                    rules,
                    labels,
                ),
            )| {
                // The API server keeps one value per key: no duplicate keys.
                let mut seen = std::collections::HashSet::new();
                others.retain(|(k, _)| seen.insert(k.clone()));
                IngressGen {
                    api_version,
                    name,
                    metadata,
                    annotations,
                    others,
                    annotation_at,
                    class_annotation,
                    spec,
                    class_name,
                    class_name_first,
                    spec_before_metadata,
                    kind_first,
                    rules,
                    labels,
                }
            },
        )
}

fn s(raw: &str) -> Y {
    Y::S(raw.to_owned())
}

fn shaped(shape: &Shape, entries: Vec<(String, Y)>) -> Option<Y> {
    match shape {
        Shape::Absent => None,
        Shape::Null => Some(s("null")),
        Shape::Empty => Some(Y::Map(Vec::new())),
        Shape::Present => Some(Y::Map(entries)),
    }
}

impl IngressGen {
    /// The Ingress as a YAML tree. A field inside an absent, null or empty map is not written.
    pub fn tree(&self) -> Y {
        let mut annotations: Vec<(String, Y)> =
            self.others.iter().map(|(k, v)| (k.clone(), s(v))).collect();
        if let Some(raw) = self.class_annotation.raw() {
            let at = self.annotation_at.min(annotations.len());
            annotations.insert(at, ("kubernetes.io/ingress.class".to_owned(), Y::S(raw)));
        }
        let mut metadata = vec![("name".to_owned(), s(&self.name))];
        if self.labels {
            metadata.push((
                "labels".to_owned(),
                Y::Map(vec![
                    ("app.kubernetes.io/name".to_owned(), s(&self.name)),
                    ("helm.sh/chart".to_owned(), s("\"app-1.0.0\"")),
                ]),
            ));
        }
        if let Some(a) = shaped(&self.annotations, annotations) {
            metadata.push(("annotations".to_owned(), a));
        }
        let backend = |port: &str| {
            Y::Map(vec![(
                "service".to_owned(),
                Y::Map(vec![
                    ("name".to_owned(), s(&self.name)),
                    (
                        "port".to_owned(),
                        Y::Map(vec![("number".to_owned(), s(port))]),
                    ),
                ]),
            )])
        };
        let rules: Vec<Y> = (0..self.rules)
            .map(|i| {
                Y::Map(vec![
                    ("host".to_owned(), Y::S(format!("\"h{i}.example.com\""))),
                    (
                        "http".to_owned(),
                        Y::Map(vec![(
                            "paths".to_owned(),
                            Y::Seq(vec![Y::Map(vec![
                                ("path".to_owned(), s("/")),
                                ("pathType".to_owned(), s("Prefix")),
                                ("backend".to_owned(), backend("80")),
                            ])]),
                        )]),
                    ),
                ])
            })
            .collect();
        let mut spec = Vec::new();
        if self.rules == 0 {
            spec.push(("defaultBackend".to_owned(), backend("8080")));
        } else {
            spec.push(("rules".to_owned(), Y::Seq(rules)));
        }
        if let Some(raw) = self.class_name.raw() {
            let at = if self.class_name_first { 0 } else { spec.len() };
            spec.insert(at, ("ingressClassName".to_owned(), Y::S(raw)));
        }
        let mut top = vec![
            ("apiVersion".to_owned(), s(self.api_version)),
            ("kind".to_owned(), s("Ingress")),
        ];
        if self.kind_first {
            top.swap(0, 1);
        }
        let metadata = shaped(&self.metadata, metadata).map(|m| ("metadata".to_owned(), m));
        let spec = shaped(&self.spec, spec).map(|m| ("spec".to_owned(), m));
        let (first, second) = if self.spec_before_metadata {
            (spec, metadata)
        } else {
            (metadata, spec)
        };
        top.extend(first);
        top.extend(second);
        Y::Map(top)
    }
}

/// A document of a stream, and whether it may hold an Ingress.
#[derive(Clone, Debug)]
pub enum DocGen {
    Ingress(IngressGen),
    List(Vec<IngressGen>, bool),
    Other(u8),
    Comment,
}

impl DocGen {
    pub fn holds_ingress(&self) -> bool {
        matches!(self, DocGen::Ingress(_) | DocGen::List(..))
    }

    pub fn text(&self, layout: &Layout) -> String {
        match self {
            DocGen::Ingress(i) => write_document(&i.tree(), layout),
            DocGen::List(items, ingress_list) => {
                let (api, kind) = if *ingress_list {
                    ("networking.k8s.io/v1", "IngressList")
                } else {
                    ("v1", "List")
                };
                write_document(
                    &Y::Map(vec![
                        ("apiVersion".to_owned(), s(api)),
                        ("kind".to_owned(), s(kind)),
                        (
                            "items".to_owned(),
                            Y::Seq(items.iter().map(IngressGen::tree).collect()),
                        ),
                    ]),
                    layout,
                )
            }
            DocGen::Other(n) => write_document(&other_document(*n), layout),
            DocGen::Comment => {
                format!("# only a comment: kind: Ingress{nl}", nl = layout.nl())
            }
        }
    }
}

/// Documents that are not Ingresses, some of which look like one to a regex: each has the
/// class annotation, and most one more top-level field (`data` or `spec`).
fn other_document(n: u8) -> Y {
    let entry = |key: &str, value: Y| (key.to_owned(), value);
    let (api, kind, name, body) = match n % 6 {
        0 => (
            "v1",
            "ConfigMap",
            "cm",
            Some(entry(
                "data",
                Y::Map(vec![
                    entry(
                        "ingress.yaml",
                        Y::Block(vec![
                            "apiVersion: networking.k8s.io/v1".to_owned(),
                            "kind: Ingress".to_owned(),
                            "spec:".to_owned(),
                            "  ingressClassName: nginx".to_owned(),
                        ]),
                    ),
                    entry("proxy-buffering", s("off")),
                ]),
            )),
        ),
        1 => (
            "networking.k8s.io/v1",
            "IngressClass",
            "nginx",
            Some(entry(
                "spec",
                Y::Map(vec![entry("controller", s("k8s.io/ingress-nginx"))]),
            )),
        ),
        2 => (
            "voyager.appscode.com/v1beta1",
            "Ingress",
            "voyager",
            Some(entry(
                "spec",
                Y::Map(vec![entry("ingressClassName", s("on"))]),
            )),
        ),
        3 => (
            "traefik.io/v1alpha1",
            "IngressRoute",
            "route",
            Some(entry(
                "spec",
                Y::Map(vec![entry("entryPoints", Y::Seq(vec![s("web")]))]),
            )),
        ),
        4 => ("v1", "List", "not-a-list-of-ingresses", None),
        _ => (
            "gateway.networking.k8s.io/v1",
            "HTTPRoute",
            "r",
            Some(entry(
                "spec",
                Y::Map(vec![entry("hostnames", Y::Seq(vec![s("\"a.b\"")]))]),
            )),
        ),
    };
    let annotations = Y::Map(vec![entry("kubernetes.io/ingress.class", s("nginx"))]);
    let mut fields = vec![
        entry("apiVersion", s(api)),
        entry("kind", s(kind)),
        entry(
            "metadata",
            Y::Map(vec![
                entry("name", s(name)),
                entry("annotations", annotations),
            ]),
        ),
    ];
    fields.extend(body);
    Y::Map(fields)
}

pub fn document(typed: bool) -> impl Strategy<Value = DocGen> {
    prop_oneof![
        6 => ingress(typed).prop_map(DocGen::Ingress),
        2 => (prop::collection::vec(ingress(typed), 0..3), any::<bool>())
            .prop_map(|(items, ingress_list)| DocGen::List(items, ingress_list)),
        3 => any::<u8>().prop_map(DocGen::Other),
        1 => Just(DocGen::Comment),
    ]
}

/// A rendered stream: documents, each perhaps with Helm 3's `# Source:` comment.
#[derive(Clone, Debug)]
pub struct StreamGen {
    pub layout: Layout,
    pub documents: Vec<(DocGen, bool)>,
    pub leading_separator: bool,
    pub final_newline: bool,
}

impl StreamGen {
    /// The text, and for each document whether it may hold an Ingress.
    pub fn text(&self) -> (String, Vec<bool>) {
        let nl = self.layout.nl();
        let mut text = String::new();
        let mut holds = Vec::new();
        for (i, (doc, source)) in self.documents.iter().enumerate() {
            // (Comments before the first `---` belong to the document after them.)
            let comment_first = i == 0 && matches!(doc, DocGen::Comment);
            if i > 0 || self.leading_separator || comment_first {
                text.push_str("---");
                text.push_str(nl);
            }
            if *source {
                text.push_str(&format!("# Source: chart/templates/doc{i}.yaml{nl}"));
            }
            text.push_str(&doc.text(&self.layout));
            holds.push(doc.holds_ingress());
        }
        if !self.final_newline && text.ends_with(nl) {
            text.truncate(text.len() - nl.len());
        }
        (text, holds)
    }
}

pub fn stream(typed: bool) -> impl Strategy<Value = StreamGen> {
    (
        layout(),
        prop::collection::vec((document(typed), any::<bool>()), 1..5),
        any::<bool>(),
        prop::bool::weighted(0.8),
    )
        .prop_map(
            |(layout, documents, leading_separator, final_newline)| StreamGen {
                layout,
                documents,
                leading_separator,
                final_newline,
            },
        )
}

/// One level of the configuration: `ingress_class` and `dedicated_ingress`, each absent,
/// null or a value (`""` among the classes).
#[derive(Clone, Debug)]
pub struct LevelGen {
    pub ingress_class: Option<Option<&'static str>>,
    pub dedicated_ingress: Option<Option<&'static str>>,
}

impl LevelGen {
    /// The level as a flow mapping (`{ingress_class: "nginx"}`), keys in a fixed order.
    pub fn flow(&self) -> String {
        let mut parts = Vec::new();
        match self.ingress_class {
            None => {}
            Some(None) => parts.push("ingress_class: null".to_owned()),
            Some(Some(c)) => parts.push(format!("ingress_class: \"{c}\"")),
        }
        match self.dedicated_ingress {
            None => {}
            Some(None) => parts.push("dedicated_ingress: null".to_owned()),
            Some(Some(d)) => parts.push(format!("dedicated_ingress: {d}")),
        }
        format!("{{{}}}", parts.join(", "))
    }
}

fn level() -> impl Strategy<Value = LevelGen> {
    let class = prop_oneof![
        3 => Just(None),
        1 => Just(Some(None)),
        1 => Just(Some(Some(""))),
        3 => prop::sample::select(WORDS.to_vec()).prop_map(|w| Some(Some(w))),
    ];
    let dedicated = prop_oneof![
        6 => Just(None),
        2 => Just(Some(None)),
        1 => Just(Some(Some("{}"))),
        1 => Just(Some(Some("{replicas: 2}"))),
    ];
    (class, dedicated).prop_map(|(ingress_class, dedicated_ingress)| LevelGen {
        ingress_class,
        dedicated_ingress,
    })
}

/// The three levels; `None` is a section left out.
#[derive(Clone, Debug)]
pub struct ConfigGen {
    pub cluster: Option<LevelGen>,
    pub environment: Option<LevelGen>,
    pub deployment: Option<LevelGen>,
}

impl ConfigGen {
    /// The post-renderer's config file.
    pub fn postrender_yaml(&self) -> String {
        let mut text = String::new();
        for (name, level) in [
            ("cluster", &self.cluster),
            ("environment", &self.environment),
            ("deployment", &self.deployment),
        ] {
            if let Some(level) = level {
                text.push_str(&format!("{name}: {}\n", level.flow()));
            }
        }
        text
    }

    /// The same levels as the webhook's policy file: deployment `app` of environment `env`.
    pub fn policy_yaml(&self) -> String {
        let mut text = String::new();
        if let Some(cluster) = &self.cluster {
            text.push_str(&format!("cluster: {}\n", cluster.flow()));
        }
        if let Some(environment) = &self.environment {
            text.push_str(&format!("environments:\n  env: {}\n", environment.flow()));
        }
        let own = self.deployment.as_ref().map_or(String::new(), |d| {
            let flow = d.flow();
            let inner = &flow[1..flow.len() - 1];
            if inner.is_empty() {
                String::new()
            } else {
                format!(", {inner}")
            }
        });
        text.push_str(&format!("deployments:\n  app: {{environment: env{own}}}\n"));
        text
    }
}

pub fn config() -> impl Strategy<Value = ConfigGen> {
    (
        prop::option::weighted(0.7, level()),
        prop::option::weighted(0.6, level()),
        prop::option::weighted(0.6, level()),
    )
        .prop_map(|(cluster, environment, deployment)| ConfigGen {
            cluster,
            environment,
            deployment,
        })
}
