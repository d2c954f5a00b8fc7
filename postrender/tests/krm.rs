//! The KRM function on whole `ResourceList`s, through the public API: the items it edits
//! and how, the `results` it writes, the config it reads, and what it refuses.

use styrmin_ingress_rules::Level;
use styrmin_postrender::config::StyrminConfig;
use styrmin_postrender::krm::{
    FunctionConfig, KrmError, looks_like_resource_list, read, read_plugin_config, run, run_cut,
};
use styrmin_postrender::render::RenderRules;
use styrmin_postrender::streaming;

fn class(name: &str) -> FunctionConfig {
    FunctionConfig {
        config: StyrminConfig::from_yaml(&format!("deployment: {{ingress_class: {name}}}"), "t")
            .expect("config"),
        ..FunctionConfig::default()
    }
}

const LIST: &str = "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- apiVersion: v1\n  data:\n    a: \"off\"\n    b: |\n      - apiVersion: networking.k8s.io/v1\n      kind: Ingress\n  kind: ConfigMap\n  metadata:\n    name: cm\n- apiVersion: networking.k8s.io/v1\n  kind: Ingress\n  metadata:\n    annotations:\n      config.kubernetes.io/index: '1'\n    name: web\n  spec:\n    ingressClassName: nginx\n";

#[test]
fn edits_only_the_ingress_items() {
    let ran = run(LIST.as_bytes(), class("haproxy"), false);
    assert!(!ran.failed, "{:?}", ran.messages);
    // The same items in a `List` document, through the post-renderer's pipeline.
    let header = "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\n";
    let list = LIST.replace(header, "apiVersion: v1\nkind: List\n");
    let config = class("haproxy");
    let rules = RenderRules {
        resolved: config.config.settings(&Level::default()).resolved,
        kubernetes: None,
        strict: false,
    };
    let stream =
        streaming::render_stream(list.as_bytes(), &rules, streaming::BLOCK_BYTES).expect("renders");
    let mut want = Vec::new();
    stream.write(&mut want).expect("writes");
    let want = String::from_utf8(want).expect("utf-8");
    assert_ne!(want, list, "the Ingress changes");
    assert_eq!(
        ran.output().strip_prefix(header),
        want.strip_prefix("apiVersion: v1\nkind: List\n")
    );
}

#[test]
fn a_missing_spec_goes_after_the_dash() {
    let input = "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- apiVersion: networking.k8s.io/v1\n  kind: Ingress\n  metadata:\n    name: web\n";
    let ran = run(input.as_bytes(), class("haproxy"), false);
    assert!(!ran.failed, "{:?}", ran.messages);
    assert!(
        ran.output().contains(
            "items:\n- spec:\n    ingressClassName: \"haproxy\"\n  apiVersion: networking.k8s.io/v1\n"
        ),
        "{}",
        ran.output()
    );
}

#[test]
fn r5_warns_in_results_naming_the_ingress_and_the_field() {
    let input = "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: cm\n- apiVersion: networking.k8s.io/v1\n  kind: Ingress\n  metadata:\n    name: web\n    namespace: apps\n";
    let ran = run(input.as_bytes(), class("\"\""), false);
    assert!(!ran.failed);
    assert_eq!(
        ran.output(),
        format!(
            "{input}results:\n- message: \"{}\"\n  severity: warning\n  resourceRef:\n    apiVersion: \"networking.k8s.io/v1\"\n    kind: \"Ingress\"\n    name: \"web\"\n    namespace: \"apps\"\n  field:\n    path: \"spec.ingressClassName\"\n",
            styrmin_ingress_rules::NoClassWarning::MESSAGE
        )
    );
    assert_eq!(ran.messages.len(), 1);
    assert!(ran.messages[0].contains("items[1] (line 8): Ingress apps/web"));
}

/// A reader that hands out a few bytes at a time, as a pipe may.
struct Trickle<'a>(&'a [u8], usize);

impl std::io::Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.1.min(buf.len()).min(self.0.len());
        buf[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        Ok(n)
    }
}

#[test]
fn reading_in_pieces_gives_the_whole_run() {
    let input = format!(
        "{LIST}functionConfig:\n  apiVersion: styrmin.io/v1alpha1\n  kind: StyrminPostRender\n  spec:\n    deployment:\n      ingress_class: haproxy\n"
    );
    let whole = run(input.as_bytes(), FunctionConfig::default(), false);
    assert!(!whole.failed, "{:?}", whole.messages);
    // Room for all, for part of it (the rest read and cut after), for nothing.
    for (piece, reserve) in [(7, 1 << 16), (1, 100), (64, 0), (1 << 20, 1 << 16)] {
        let (text, cut) = read(Trickle(input.as_bytes(), piece), reserve).expect("reads");
        assert_eq!(&text[..], input.as_bytes());
        let ran = run_cut(text, cut, FunctionConfig::default(), false);
        assert_eq!(
            ran.output(),
            whole.output(),
            "pieces of {piece}, room for {reserve}"
        );
    }
}

#[test]
fn a_byte_that_is_not_utf8_is_named_by_its_offset_wherever_it_is() {
    let header = "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n";
    let item = "- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: a";
    let function_config =
        "functionConfig:\n  apiVersion: styrmin.io/v1alpha1\n  kind: StyrminPostRender\n  spec: {}";
    // In a line the cut passes over (an item's, the functionConfig's), in one it reads.
    for (before, after) in [
        (format!("{header}{item}"), "\n".to_owned()),
        (
            format!("{header}{item}\n{function_config}"),
            "\n".to_owned(),
        ),
        (
            "apiVersion: config.kubernetes.io/v1\nkind: ResourceList".to_owned(),
            format!("\nitems:\n{item}\n"),
        ),
    ] {
        let mut input = before.clone().into_bytes();
        input.push(0xff);
        input.extend_from_slice(after.as_bytes());
        let ran = run(&input, class("haproxy"), false);
        assert!(ran.failed);
        assert_eq!(
            ran.messages,
            [format!(
                "error: the ResourceList is not UTF-8 text: invalid byte at offset {}",
                before.len()
            )]
        );
    }
}

#[test]
fn a_plugin_config_is_read_as_the_function_config_with_its_fields_named_from_its_root() {
    let config = read_plugin_config(
        "apiVersion: styrmin.io/v1alpha1\nkind: StyrminPostRender\nmetadata:\n  name: s\nspec:\n  deployment:\n    ingress_class: haproxy\n  strict: true\n",
    )
    .expect("reads");
    assert!(config.strict);
    assert_eq!(
        config.config.settings(&Level::default()).resolved,
        class("haproxy").config.settings(&Level::default()).resolved
    );
    let field = |text: &str| match read_plugin_config(text) {
        Err(KrmError::FunctionConfig { field, .. }) => field,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        field(
            "apiVersion: styrmin.io/v1alpha1\nkind: StyrminPostRender\nspec:\n  deployment:\n    ingress_clas: x\n"
        ),
        "spec.deployment.ingress_clas"
    );
    assert_eq!(
        field("apiVersion: styrmin.io/v1alpha1\nkind: Other\n"),
        "kind"
    );
}

#[test]
fn detects_a_resource_list() {
    assert!(looks_like_resource_list(LIST.as_bytes()));
    assert!(looks_like_resource_list(
        b"# c\n---\nkind: ResourceList\napiVersion: config.kubernetes.io/v1\n"
    ));
    assert!(!looks_like_resource_list(
        b"apiVersion: v1\nkind: List\nitems: []\n"
    ));
    assert!(!looks_like_resource_list(
        b"apiVersion: config.kubernetes.io/v1\n"
    ));
}

#[test]
fn a_quoted_scalar_over_lines_is_refused() {
    let input = "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  data:\n    a: \"one\n- apiVersion: networking.k8s.io/v1\n  kind: Ingress\n  metadata: {}\"\n";
    let ran = run(input.as_bytes(), class("haproxy"), false);
    assert!(ran.failed);
    assert!(ran.messages[0].contains("line 7"), "{:?}", ran.messages);
    assert!(ran.output().contains("items: []"));
}

#[test]
fn a_bad_function_config_names_the_field() {
    let input = format!(
        "{LIST}functionConfig:\n  apiVersion: styrmin.io/v1alpha1\n  kind: StyrminPostRender\n  spec:\n    deployment:\n      ingress_clas: x\n"
    );
    let ran = run(input.as_bytes(), FunctionConfig::default(), false);
    assert!(ran.failed);
    assert!(
        ran.output()
            .contains("path: \"functionConfig.spec.deployment.ingress_clas\""),
        "{}",
        ran.output()
    );
    assert!(!ran.output().contains("kind: ConfigMap"));
}
