//! The KRM function's `results`: every text in them is one YAML double-quoted scalar that
//! stays on its line, and a functionConfig error is one line that says where.

use styrmin_postrender::krm::{FunctionConfig, KrmError, read_plugin_config, run};

const HEADER: &str = "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n";

fn no_class() -> FunctionConfig {
    read_plugin_config(
        "apiVersion: styrmin.io/v1alpha1\nkind: StyrminPostRender\nspec:\n  deployment:\n    ingress_class: \"\"\n",
    )
    .expect("reads")
}

#[test]
fn unicode_line_breaks_and_the_byte_order_mark_are_escaped_in_results() {
    // The name is written with escapes, so the item itself is one line of ASCII; read back it
    // holds U+2028, U+2029 and U+FEFF. YAML 1.1 readers (Go's yaml.v2, kustomize's older
    // kyaml) take U+2028 and U+2029 for line breaks, so written raw they would break the
    // `resourceRef`'s line.
    let input = format!(
        "{HEADER}- apiVersion: networking.k8s.io/v1\n  kind: Ingress\n  metadata:\n    name: \"web\\u2028a\\u2029b\\uFEFF\\\"q\\\\\"\n    namespace: apps\n"
    );
    let ran = run(input.as_bytes(), no_class(), false);
    assert!(!ran.failed, "{:?}", ran.messages);
    let output = ran.output();
    assert!(
        output.contains("    name: \"web\\u2028a\\u2029b\\uFEFF\\\"q\\\\\"\n"),
        "{output}"
    );
    assert!(
        !output.contains(['\u{2028}', '\u{2029}', '\u{feff}']),
        "{output:?}"
    );
    let list: serde_json::Value = serde_saphyr::from_str(&output).expect("reads back");
    let result = &list["results"][0];
    assert_eq!(result["severity"], "warning");
    assert_eq!(
        result["resourceRef"]["name"],
        "web\u{2028}a\u{2029}b\u{feff}\"q\\"
    );
    assert_eq!(result["field"]["path"], "spec.ingressClassName");
}

#[test]
fn a_function_config_error_is_one_line_that_keeps_its_line_and_column() {
    let text = "apiVersion: styrmin.io/v1alpha1\nkind: StyrminPostRender\nspec:\n  deployment:\n    ingress_clas: x\n";
    let Err(KrmError::FunctionConfig { field, message }) = read_plugin_config(text) else {
        panic!("a misspelt field is an error");
    };
    assert_eq!(field, "spec.deployment.ingress_clas");
    assert!(
        message.starts_with("line 5 column 5: unknown field `ingress_clas`, expected one of "),
        "{message}"
    );
    assert!(
        !message.contains("error:") && !message.contains('\n'),
        "{message}"
    );
}
