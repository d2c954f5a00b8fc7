//! R3 and R4 for FluxCD: the kustomize post-renderer of a HelmRelease
//! (`spec.postRenderers[].kustomize.patches`) that gives every Ingress of a release the
//! class fields the rules decide.
//!
//! One strategic-merge patch with the group-less target `{kind: Ingress}` reaches
//! `networking.k8s.io/v1`, `networking.k8s.io/v1beta1` and `extensions/v1beta1` alike
//! (checked with kustomize v5.7.1: the patch body's `apiVersion` does not change the
//! target's, and the body's `metadata.name` is replaced by each target's). In it,
//! `ingressClassName: null` removes the field and a missing `metadata.annotations` map is
//! created. R5 (keep the chart's class) has no kustomize form: there is no post-renderer.
//!
//! Both `styrmin-postrender flux` (which prints it as YAML) and the webhook (which puts it
//! into HelmReleases as JSON) take the patch text from [`flux_post_renderer`], so the two
//! are the same string.

use crate::classes::{CLASS_ANNOTATION, DEDICATED_CONTROLLER_CLASS};
use crate::target::IngressTarget;

/// `metadata.name` of the patch body, which marks the post-renderer as Styrmin's.
/// Kustomize needs a name in a strategic-merge patch even when it has a target, and
/// replaces it with each target's own name, so the marker changes nothing in the objects.
pub const FLUX_PATCH_NAME: &str = "styrmin-ingress-class";

/// The kind every generated patch targets (no group, no version: every Ingress API
/// version, R6).
pub const FLUX_PATCH_TARGET_KIND: &str = "Ingress";

/// One HelmRelease post-renderer: `{kustomize: {patches: [...]}}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FluxPostRenderer {
    pub patches: Vec<KustomizePatch>,
}

/// One entry of `kustomize.patches`: an inline patch and the objects it applies to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KustomizePatch {
    pub target: PatchTarget,
    /// The patch body, YAML text without a final newline. Kustomize trims the text of an
    /// inline patch, so a block scalar at the very end of one (this text, inside the patch
    /// of a Component) loses its final line break: `|` comes out as `|-` (measured with
    /// v5.7.1). A text without one is the same string whichever way it reached the
    /// HelmRelease.
    pub patch: String,
}

/// A kustomize patch target; only `kind` is set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PatchTarget {
    pub kind: &'static str,
}

/// The post-renderer that applies R3 (dedicated) or R4 (a shared class) to every Ingress
/// of a release; `None` for R5, which leaves the chart's class alone and so has nothing to
/// patch.
pub fn flux_post_renderer(target: &IngressTarget) -> Option<FluxPostRenderer> {
    let (class_name, annotation) = match target {
        IngressTarget::Dedicated => ("null".to_owned(), double_quoted(DEDICATED_CONTROLLER_CLASS)),
        IngressTarget::Class(class) => {
            (double_quoted(class.as_str()), double_quoted(class.as_str()))
        }
        IngressTarget::NoClass => return None,
    };
    let patch = format!(
        "apiVersion: networking.k8s.io/v1\n\
         kind: {FLUX_PATCH_TARGET_KIND}\n\
         metadata:\n  \
           name: {FLUX_PATCH_NAME}\n  \
           annotations:\n    \
             {CLASS_ANNOTATION}: {annotation}\n\
         spec:\n  \
           ingressClassName: {class_name}"
    );
    Some(FluxPostRenderer {
        patches: vec![KustomizePatch {
            target: PatchTarget {
                kind: FLUX_PATCH_TARGET_KIND,
            },
            patch,
        }],
    })
}

/// A YAML double-quoted scalar. A class can be `on`, `no` or `123`, which Go's YAML
/// readers would take for a boolean or a number if written plain; control characters and
/// the Unicode line and paragraph separators are escaped so the text stays on one line.
pub fn double_quoted(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}' | '\u{FEFF}') => {
                out.push_str(&format!("\\u{:04X}", u32::from(c)));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::example_targets::shared;

    fn patch_of(target: &IngressTarget) -> String {
        let renderer = flux_post_renderer(target).unwrap();
        assert_eq!(renderer.patches.len(), 1);
        assert_eq!(renderer.patches[0].target.kind, "Ingress");
        renderer.patches[0].patch.clone()
    }

    #[test]
    fn r3_removes_the_class_name_and_sets_the_annotation() {
        let patch = patch_of(&IngressTarget::Dedicated);
        assert_eq!(
            patch,
            "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: styrmin-ingress-class\n  annotations:\n    kubernetes.io/ingress.class: \"traefik\"\nspec:\n  ingressClassName: null"
        );
    }

    #[test]
    fn r4_sets_both_fields_quoted() {
        let patch = patch_of(&shared("on"));
        assert!(
            patch.contains("    kubernetes.io/ingress.class: \"on\"\n"),
            "{patch}"
        );
        assert!(patch.ends_with("\n  ingressClassName: \"on\""), "{patch}");
        assert!(!patch.ends_with('\n'));
    }

    #[test]
    fn r5_has_no_post_renderer() {
        assert_eq!(flux_post_renderer(&IngressTarget::NoClass), None);
    }

    #[test]
    fn quoting_reads_back_as_the_same_string() {
        for class in [
            "on",
            "no",
            "123",
            "1e3",
            "~",
            "null",
            "a\"b\\c",
            "tab\there",
            "x\u{2028}y",
            "ünï",
        ] {
            let patch = patch_of(&shared(class));
            assert_eq!(patch.lines().count(), 8, "{patch}");
            let value: serde_json::Value = serde_saphyr::from_str(&patch).unwrap();
            assert_eq!(value["spec"]["ingressClassName"], class, "{patch}");
            assert_eq!(
                value["metadata"]["annotations"][CLASS_ANNOTATION], class,
                "{patch}"
            );
            assert_eq!(value["metadata"]["name"], FLUX_PATCH_NAME);
        }
    }

    #[test]
    fn double_quoted_escapes_control_characters_and_unicode_line_breaks() {
        // Escaped so that the text stays one line of YAML, and reads back as the same string.
        for (value, expected) in [
            ("a\u{1}b", "\"a\\u0001b\""),
            ("a\nb", "\"a\\u000Ab\""),
            ("\u{7f}", "\"\\u007F\""),
            ("a\u{2028}b", "\"a\\u2028b\""),
            ("\u{2029}", "\"\\u2029\""),
            ("\u{feff}x", "\"\\uFEFFx\""),
            ("é✓", "\"é✓\""),
        ] {
            let quoted = double_quoted(value);
            assert_eq!(quoted, expected, "{value:?}");
            let back: String = serde_saphyr::from_str(&quoted).unwrap();
            assert_eq!(back, value);
        }
    }
}
