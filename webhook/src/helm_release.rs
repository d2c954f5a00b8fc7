//! The optional FluxCD part (`--flux-post-renderer`): on CREATE and UPDATE of a HelmRelease
//! (`helm.toolkit.fluxcd.io/v2`) in a Styrmin namespace, put Styrmin's kustomize
//! post-renderer into `spec.postRenderers`, so helm-controller renders every Ingress with
//! the right class and the Ingress webhook only confirms it.
//!
//! The post-renderer is [`styrmin_ingress_rules::flux_post_renderer`]'s, the same text
//! `styrmin-postrender flux` prints. It is recognised by its marker: every patch of the
//! entry is a patch whose body has `metadata.name: styrmin-ingress-class`
//! ([`styrmin_ingress_rules::FLUX_PATCH_NAME`]). The user's own post-renderers are never dropped
//! or reordered; Styrmin's goes last (post-renderers run in order, so its class fields
//! win); an object that already has the current one gets no patch (R8). When the rules say
//! R5 (keep the chart's class), Styrmin's is removed and nothing is added.
//!
//! Patch texts are the user's input and YAML: each is parsed at most once per request, with a
//! tight budget (size, events, nodes, aliases), since Styrmin's own is a few hundred bytes; a
//! text beyond the budget is the user's. A request may also carry a deadline: a HelmRelease
//! whose post-renderers are not classified by then is left unchanged, with a warning.

use std::borrow::Cow;
use std::time::Instant;

use json_patch::PatchOperation;
use serde::Deserialize;
use serde::de::{Deserializer as _, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Value, json};
use styrmin_ingress_rules::{
    CLASS_ANNOTATION, ClassFields, FLUX_PATCH_NAME, FluxPostRenderer, IngressTarget,
    KubernetesVersion, RuleError, enforce, flux_post_renderer,
};

use crate::admission::{IsKey, KubeObject, Member, json_equals};
use crate::patch::{add, remove, replace};

/// The largest patch text that is parsed to look for Styrmin's marker (Styrmin's own is about
/// 300 bytes); a larger one is the user's.
pub const MAX_PATCH_TEXT_BYTES: usize = 4 * 1024;

/// The warning of a HelmRelease left unchanged because its post-renderers took too long.
pub const OVER_BUDGET_WARNING: &str = "Styrmin left spec.postRenderers unchanged: the post-renderers took longer \
     to check than the webhook's budget allows; Ingresses rendered from this release are still \
     checked by the Ingress webhook";

/// The only HelmRelease version whose post-renderers the webhook writes (helm-controller
/// v1.x; older versions are not served by its CRD).
pub const HELM_RELEASE_V2: &str = "helm.toolkit.fluxcd.io/v2";

/// What the webhook should do to a HelmRelease's post-renderers.
#[derive(Debug, Clone, PartialEq)]
pub struct FluxDecision {
    /// JSON patch operations; empty when the object is already current.
    pub patch: Vec<PatchOperation>,
    /// Admission warnings (R9).
    pub warnings: Vec<String>,
    /// The deadline passed before the post-renderers were classified: nothing was changed.
    pub over_budget: bool,
}

/// The deadline passed while the post-renderers were being classified.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the post-renderers were not classified within the time budget")]
pub struct OverBudget;

/// One `spec.postRenderers` entry as JSON, from the shared generator's structure.
pub fn post_renderer_json(renderer: &FluxPostRenderer) -> Value {
    let patches: Vec<Value> = renderer
        .patches
        .iter()
        .map(|p| json!({"target": {"kind": p.target.kind}, "patch": p.patch}))
        .collect();
    json!({"kustomize": {"patches": patches}})
}

/// The entry Styrmin wants in `spec.postRenderers` for `target`; `None` for R5.
pub fn wanted_post_renderer(target: &IngressTarget) -> Option<Value> {
    flux_post_renderer(target).map(|r| post_renderer_json(&r))
}

/// How many patch texts one request may have parsed (each at most [`MAX_PATCH_TEXT_BYTES`],
/// and each parse stopped by its own budget within about a millisecond): Styrmin's entry has
/// one, a real list a handful. Past it the post-renderers are over the budget, as past the
/// deadline: the work is counted as it is done, so neither the size of one entry nor the
/// length of the list can stretch it, whatever the clock says.
pub const MAX_PATCH_TEXTS_PARSED: usize = 1024;

/// The work one request's post-renderers may still cost: patch texts to parse, and the
/// deadline, checked before each one.
#[derive(Debug, Clone, Copy)]
pub struct FluxBudget {
    texts_left: usize,
    deadline: Option<Instant>,
}

impl FluxBudget {
    /// [`MAX_PATCH_TEXTS_PARSED`] patch texts, until `deadline` if there is one.
    pub fn new(deadline: Option<Instant>) -> Self {
        FluxBudget {
            texts_left: MAX_PATCH_TEXTS_PARSED,
            deadline,
        }
    }

    /// Takes one patch text's parse from the budget.
    fn spend_text(&mut self) -> Result<(), OverBudget> {
        if self.texts_left == 0 || self.deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(OverBudget);
        }
        self.texts_left -= 1;
        Ok(())
    }

    fn check_deadline(&self) -> Result<(), OverBudget> {
        match self.deadline {
            Some(deadline) if Instant::now() >= deadline => Err(OverBudget),
            _ => Ok(()),
        }
    }
}

/// Whether a `spec.postRenderers` entry is Styrmin's: a kustomize post-renderer with
/// patches only, each with the marker name in its body.
pub fn is_styrmin_post_renderer(entry: &Value) -> bool {
    let text = entry.to_string();
    serde_json::from_str::<&RawValue>(&text)
        .ok()
        .is_some_and(|raw| classify_entry(raw, &mut FluxBudget::new(None)).unwrap_or(false))
}

/// [`is_styrmin_post_renderer`] on an entry as sent, within `budget`; the entry is read
/// without building a tree of it.
fn classify_entry(entry: &RawValue, budget: &mut FluxBudget) -> Result<bool, OverBudget> {
    budget.check_deadline()?;
    let Some(kustomize) = only_member(entry, "kustomize") else {
        return Ok(false);
    };
    let Some(patches) = only_member(kustomize, "patches") else {
        return Ok(false);
    };
    let mut deserializer = serde_json::Deserializer::from_str(patches.get());
    match deserializer.deserialize_any(MarkedPatches { budget }) {
        Ok(verdict) => verdict,
        Err(_) => Ok(false),
    }
}

/// The member `key` of a JSON object whose only member it is (a repeated key: the last).
fn only_member<'a>(object: &'a RawValue, key: &'static str) -> Option<&'a RawValue> {
    struct OnlyMember(&'static str);
    impl<'de> Visitor<'de> for OnlyMember {
        type Value = Option<&'de RawValue>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let (mut found, mut other) = (None, false);
            while let Some(is_key) = map.next_key_seed(IsKey(self.0))? {
                if is_key {
                    found = Some(map.next_value::<&RawValue>()?);
                } else {
                    other = true;
                    map.next_value::<IgnoredAny>()?;
                }
            }
            Ok(found.filter(|_| !other))
        }
    }
    if !object.get().starts_with('{') {
        return None;
    }
    let mut deserializer = serde_json::Deserializer::from_str(object.get());
    deserializer.deserialize_map(OnlyMember(key)).ok().flatten()
}

/// A non-empty list of patches, each marked; short-circuits at the first that is not (the
/// rest is skipped unread) or when the budget runs out.
struct MarkedPatches<'b> {
    budget: &'b mut FluxBudget,
}

impl<'de> Visitor<'de> for MarkedPatches<'_> {
    type Value = Result<bool, OverBudget>;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a list of patches")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut verdict = Ok(true);
        let mut any = false;
        while let Some(patch) = seq.next_element::<&RawValue>()? {
            any = true;
            match is_marked_patch_text(patch, self.budget) {
                Ok(true) => {}
                other => {
                    verdict = other;
                    break;
                }
            }
        }
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(verdict.map(|all| all && any))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Ok(false))
    }
    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Ok(false))
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Ok(false))
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Ok(false))
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Ok(false))
    }
    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(Ok(false))
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Ok(false))
    }
}

/// The `patch` text of a kustomize patch, as sent.
#[derive(Deserialize)]
struct PatchText<'a> {
    #[serde(borrow, default)]
    patch: Option<Cow<'a, str>>,
}

#[cfg(test)]
fn is_marked_patch(patch: &Value) -> bool {
    let text = patch.to_string();
    serde_json::from_str::<&RawValue>(&text)
        .ok()
        .is_some_and(|raw| is_marked_patch_text(raw, &mut FluxBudget::new(None)).unwrap_or(false))
}

fn is_marked_patch_text(patch: &RawValue, budget: &mut FluxBudget) -> Result<bool, OverBudget> {
    if !patch.get().starts_with('{') {
        return Ok(false);
    }
    let Ok(PatchText { patch: Some(text) }) = serde_json::from_str::<PatchText<'_>>(patch.get())
    else {
        return Ok(false);
    };
    // Text too large, without the marker's words, over the parse budget, or that does not
    // parse (a JSON6902 patch is a list) is the user's.
    if text.len() > MAX_PATCH_TEXT_BYTES || !text.contains(FLUX_PATCH_NAME) {
        return Ok(false);
    }
    budget.spend_text()?;
    Ok(
        match serde_saphyr::from_str_with_options::<Value>(&text, patch_text_options()) {
            Ok(body) => {
                body.pointer("/metadata/name").and_then(Value::as_str) == Some(FLUX_PATCH_NAME)
            }
            Err(_) => false,
        },
    )
}

/// The parse budget of one patch text: generous for a strategic-merge patch of an Ingress's
/// name and two class fields, tight enough that an alias bomb stops within a millisecond.
fn patch_text_options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_reader_input_bytes: Some(MAX_PATCH_TEXT_BYTES),
            max_events: 2_000,
            max_aliases: 16,
            max_anchors: 16,
            max_recorded_anchor_events: 2_000,
            max_recorded_anchor_bytes: MAX_PATCH_TEXT_BYTES,
            max_depth: 16,
            max_documents: 1,
            max_nodes: 1_000,
            max_total_scalar_bytes: MAX_PATCH_TEXT_BYTES,
            max_merge_keys: 16,
        },
        alias_limits: serde_saphyr::alias_limits! {
            max_total_replayed_events: 2_000,
            max_replay_stack_depth: 8,
        },
    }
}

/// What the classification of a `spec.postRenderers` list found.
struct Classified<'a> {
    len: usize,
    /// The indices of Styrmin's entries.
    ours: Vec<usize>,
    last: Option<&'a RawValue>,
}

/// Reads a `spec.postRenderers` list entry by entry (never as a tree), classifying each within
/// `budget`.
struct ClassifyEntries<'b> {
    budget: &'b mut FluxBudget,
}

impl<'de> Visitor<'de> for ClassifyEntries<'_> {
    type Value = Result<Classified<'de>, OverBudget>;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a list")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut classified = Classified {
            len: 0,
            ours: Vec::new(),
            last: None,
        };
        while let Some(entry) = seq.next_element::<&RawValue>()? {
            match classify_entry(entry, self.budget) {
                Ok(true) => classified.ours.push(classified.len),
                Ok(false) => {}
                Err(over) => {
                    while seq.next_element::<IgnoredAny>()?.is_some() {}
                    return Ok(Err(over));
                }
            }
            classified.len += 1;
            classified.last = Some(entry);
        }
        Ok(Ok(classified))
    }
}

/// The JSON patch that makes `spec.postRenderers` of `object` hold the user's entries in
/// their order followed by `wanted` (or, when `wanted` is `None`, the user's entries only).
/// Empty when it already does, or when the object has no `spec` object or a
/// `spec.postRenderers` that is not a list (the API server rejects those anyway).
/// [`OverBudget`] when the budget runs out before every entry is classified: the deadline is
/// checked before each entry and each patch text, and at most [`MAX_PATCH_TEXTS_PARSED`] patch
/// texts are parsed; without a deadline the classification cannot run out of time.
pub fn post_renderers_patch_within(
    object: &KubeObject,
    wanted: Option<&Value>,
    deadline: Option<Instant>,
) -> Result<Vec<PatchOperation>, OverBudget> {
    #[derive(Deserialize)]
    struct FluxSpec<'a> {
        #[serde(borrow, default, rename = "postRenderers")]
        post_renderers: Option<&'a RawValue>,
    }
    let Some(spec) = object.spec_object_json() else {
        return Ok(Vec::new());
    };
    let Ok(FluxSpec { post_renderers }) = serde_json::from_str::<FluxSpec<'_>>(spec.get()) else {
        return Ok(Vec::new());
    };
    let Some(list) = post_renderers.filter(|raw| raw.get() != "null") else {
        return Ok(match wanted {
            Some(entry) => vec![add(["spec", "postRenderers"], json!([entry]))],
            None => Vec::new(),
        });
    };
    if !list.get().starts_with('[') {
        return Ok(Vec::new());
    }
    let mut budget = FluxBudget::new(deadline);
    let mut deserializer = serde_json::Deserializer::from_str(list.get());
    let Classified { len, ours, last } = match deserializer.deserialize_seq(ClassifyEntries {
        budget: &mut budget,
    }) {
        Ok(classified) => classified?,
        // The API server sent valid JSON; a list that is not is left alone.
        Err(_) => return Ok(Vec::new()),
    };
    Ok(edit_post_renderers(len, &ours, last, wanted))
}

/// The JSON patch from a list of `len` entries (Styrmin's at `ours`, the last one `last`) to
/// the user's entries in their order followed by `wanted`.
fn edit_post_renderers(
    len: usize,
    ours: &[usize],
    last: Option<&RawValue>,
    wanted: Option<&Value>,
) -> Vec<PatchOperation> {
    let remove_ours = || {
        // Last first, so the indices stay right.
        ours.iter()
            .rev()
            .map(|i| remove(["spec", "postRenderers", &i.to_string()]))
    };
    match (wanted, ours) {
        (Some(entry), []) => {
            vec![add(["spec", "postRenderers", "-"], entry.clone())]
        }
        // Ours is last: current, or stale and refreshed in place.
        (Some(entry), [i]) if *i + 1 == len => {
            if last.is_some_and(|last| json_equals(last, entry)) {
                Vec::new()
            } else {
                vec![replace(
                    ["spec", "postRenderers", &i.to_string()],
                    entry.clone(),
                )]
            }
        }
        // R5: remove ours.
        (None, _) => remove_ours().collect(),
        // Ours in the middle, or more than one: remove them, then add the current one last
        // (the user's entries are never rewritten, so a patch never copies them).
        (Some(entry), _) => remove_ours()
            .chain([add(["spec", "postRenderers", "-"], entry.clone())])
            .collect(),
    }
}

/// The webhook's answer for a HelmRelease object of a deployment whose rules give
/// `target`. On a Kubernetes version known to reject R4's two class fields (R9), nothing
/// is added: the Ingress webhook denies those Ingresses with the rule's message, and the
/// HelmRelease gets it as a warning.
pub fn decide_helm_release(
    target: &IngressTarget,
    kubernetes: Option<KubernetesVersion>,
    object: &Value,
) -> FluxDecision {
    match KubeObject::from_value(object) {
        Some(Member::Object(object)) => {
            decide_helm_release_within(target, kubernetes, &object, None)
        }
        _ => FluxDecision {
            patch: Vec::new(),
            warnings: Vec::new(),
            over_budget: false,
        },
    }
}

/// [`decide_helm_release`] with a deadline: past it, the HelmRelease is left unchanged with
/// [`OVER_BUDGET_WARNING`] (the HelmRelease webhook is `failurePolicy: Ignore`, and the
/// Ingress webhook still checks every Ingress it renders).
pub fn decide_helm_release_within(
    target: &IngressTarget,
    kubernetes: Option<KubernetesVersion>,
    object: &KubeObject,
    deadline: Option<Instant>,
) -> FluxDecision {
    if object.api_version.as_deref() != Some(HELM_RELEASE_V2) {
        return FluxDecision {
            patch: Vec::new(),
            warnings: Vec::new(),
            over_budget: false,
        };
    }
    if let Err(RuleError::BothClassFieldsUnsupported { version, .. }) =
        enforce(target, &ClassFields::default(), kubernetes)
    {
        // Short and without the class (any length): the API server may truncate an
        // admission warning longer than 256 characters.
        return FluxDecision {
            patch: Vec::new(),
            warnings: vec![format!(
                "Styrmin added no ingress post-renderer: Kubernetes {version} rejects Ingresses that set \
                 both spec.ingressClassName and the {CLASS_ANNOTATION} annotation; ingress_class needs \
                 1.27 or later, or a dedicated ingress"
            )],
            over_budget: false,
        };
    }
    match post_renderers_patch_within(object, wanted_post_renderer(target).as_ref(), deadline) {
        Ok(patch) => FluxDecision {
            patch,
            warnings: Vec::new(),
            over_budget: false,
        },
        Err(OverBudget) => FluxDecision {
            patch: Vec::new(),
            warnings: vec![OVER_BUDGET_WARNING.to_owned()],
            over_budget: true,
        },
    }
}

#[cfg(test)]
mod tests {
    use styrmin_ingress_rules::example_targets::{dedicated, no_class, shared};

    use super::*;
    use crate::patch::tests::{apply, wire};

    fn user(n: u32) -> Value {
        json!({"kustomize": {"patches": [{
            "target": {"kind": "Deployment"},
            "patch": format!("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: user-{n}\nspec:\n  replicas: {n}\n"),
        }]}})
    }

    fn images() -> Value {
        json!({"kustomize": {"images": [{"name": "nginx", "newTag": "1.27"}]}})
    }

    fn release(post_renderers: Option<Value>) -> Value {
        let mut object = json!({
            "apiVersion": HELM_RELEASE_V2, "kind": "HelmRelease",
            "metadata": {"name": "web", "namespace": "styrmin-web1"},
            "spec": {"interval": "10m", "chart": {"spec": {"chart": "podinfo", "sourceRef": {"kind": "HelmRepository", "name": "podinfo"}}}},
        });
        if let Some(p) = post_renderers {
            object["spec"]["postRenderers"] = p;
        }
        object
    }

    fn ours(target: &IngressTarget) -> Value {
        wanted_post_renderer(target).unwrap()
    }

    /// Applies the decision and checks what every patch must do: the user's entries keep
    /// their order, ours is last (or gone for R5), and a second pass changes nothing.
    fn check(target: &IngressTarget, object: &Value) -> Value {
        let decision = decide_helm_release(target, None, object);
        let out = apply(object, &decision.patch);
        let entries = out["spec"]["postRenderers"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let users_before: Vec<Value> = object["spec"]["postRenderers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| !is_styrmin_post_renderer(e))
            .cloned()
            .collect();
        let users_after: Vec<Value> = entries
            .iter()
            .filter(|e| !is_styrmin_post_renderer(e))
            .cloned()
            .collect();
        assert_eq!(users_before, users_after, "the user's entries changed");
        match wanted_post_renderer(target) {
            Some(wanted) => {
                assert_eq!(entries.last(), Some(&wanted));
                assert_eq!(
                    entries
                        .iter()
                        .filter(|e| is_styrmin_post_renderer(e))
                        .count(),
                    1
                );
            }
            None => assert!(!entries.iter().any(is_styrmin_post_renderer)),
        }
        // R8: idempotent.
        let again = decide_helm_release(target, None, &out);
        assert!(again.patch.is_empty(), "second pass: {:?}", again.patch);
        out
    }

    #[test]
    fn adds_the_list_when_there_is_none() {
        for object in [release(None), release(Some(Value::Null))] {
            let decision = decide_helm_release(&dedicated(), None, &object);
            assert_eq!(
                wire(&decision.patch),
                Value::Array(vec![
                    json!({"op": "add", "path": "/spec/postRenderers", "value": [ours(&dedicated())]})
                ])
            );
            check(&dedicated(), &object);
        }
    }

    #[test]
    fn appends_after_the_users_own() {
        let object = release(Some(json!([user(1), images(), user(2)])));
        let decision = decide_helm_release(&shared("on"), None, &object);
        assert_eq!(
            wire(&decision.patch),
            Value::Array(vec![
                json!({"op": "add", "path": "/spec/postRenderers/-", "value": ours(&shared("on"))})
            ])
        );
        check(&shared("on"), &object);
    }

    #[test]
    fn no_patch_when_current() {
        let object = release(Some(json!([user(1), ours(&dedicated())])));
        assert!(
            decide_helm_release(&dedicated(), None, &object)
                .patch
                .is_empty()
        );
        let object = release(Some(json!([ours(&shared("nginx"))])));
        assert!(
            decide_helm_release(&shared("nginx"), None, &object)
                .patch
                .is_empty()
        );
    }

    #[test]
    fn refreshes_a_stale_one_in_place() {
        let object = release(Some(json!([user(1), ours(&shared("nginx"))])));
        let decision = decide_helm_release(&dedicated(), None, &object);
        assert_eq!(
            wire(&decision.patch),
            Value::Array(vec![
                json!({"op": "replace", "path": "/spec/postRenderers/1", "value": ours(&dedicated())})
            ])
        );
        check(&dedicated(), &object);
    }

    #[test]
    fn moves_ours_last_and_keeps_one() {
        for list in [
            json!([ours(&shared("nginx")), user(1), user(2)]),
            json!([ours(&dedicated()), user(1)]),
            json!([user(1), ours(&dedicated()), user(2), ours(&dedicated())]),
        ] {
            let out = check(&dedicated(), &release(Some(list)));
            assert_eq!(out["spec"]["postRenderers"][0], user(1));
        }
    }

    #[test]
    fn r5_removes_ours_only() {
        let object = release(Some(json!([
            ours(&dedicated()),
            user(1),
            ours(&shared("x")),
            images()
        ])));
        let decision = decide_helm_release(&no_class(), None, &object);
        assert_eq!(
            wire(&decision.patch),
            Value::Array(vec![
                json!({"op": "remove", "path": "/spec/postRenderers/2"}),
                json!({"op": "remove", "path": "/spec/postRenderers/0"}),
            ])
        );
        let out = check(&no_class(), &object);
        assert_eq!(out["spec"]["postRenderers"], json!([user(1), images()]));
        // Nothing of ours: nothing to do, and no list is created.
        for object in [release(None), release(Some(json!([user(3)])))] {
            assert!(
                decide_helm_release(&no_class(), None, &object)
                    .patch
                    .is_empty()
            );
        }
    }

    #[test]
    fn the_marker_decides_what_is_ours() {
        assert!(is_styrmin_post_renderer(&ours(&dedicated())));
        assert!(!is_styrmin_post_renderer(&user(1)));
        assert!(!is_styrmin_post_renderer(&images()));
        // Ours with the user's images or patches added is the user's now: kept as it is.
        let mut mixed = ours(&dedicated());
        mixed["kustomize"]["images"] = json!([{"name": "a"}]);
        assert!(!is_styrmin_post_renderer(&mixed));
        let mut mixed = ours(&dedicated());
        mixed["kustomize"]["patches"]
            .as_array_mut()
            .unwrap()
            .push(user(1)["kustomize"]["patches"][0].clone());
        assert!(!is_styrmin_post_renderer(&mixed));
        // A JSON6902 patch and a patch text that is not YAML are the user's.
        assert!(!is_styrmin_post_renderer(
            &json!({"kustomize": {"patches": [{"patch": "[{\"op\": \"remove\", \"path\": \"/x\"}]"}]}})
        ));
        assert!(!is_styrmin_post_renderer(
            &json!({"kustomize": {"patches": [{"patch": "a: [b"}]}})
        ));
        // Reformatted by hand, still ours (the marker is read, not matched as text).
        let reformatted = json!({"kustomize": {"patches": [{"target": {"kind": "Ingress"},
            "patch": "{kind: Ingress, apiVersion: networking.k8s.io/v1, metadata: {name: styrmin-ingress-class}}"}]}});
        assert!(is_styrmin_post_renderer(&reformatted));
        check(&dedicated(), &release(Some(json!([reformatted, user(1)]))));
    }

    #[test]
    fn leaves_other_versions_and_broken_objects_alone() {
        let mut old = release(None);
        old["apiVersion"] = json!("helm.toolkit.fluxcd.io/v2beta1");
        assert!(
            decide_helm_release(&dedicated(), None, &old)
                .patch
                .is_empty()
        );
        let mut no_spec = release(None);
        no_spec.as_object_mut().unwrap().remove("spec");
        assert!(
            decide_helm_release(&dedicated(), None, &no_spec)
                .patch
                .is_empty()
        );
        let not_a_list = release(Some(json!({"kustomize": {}})));
        assert!(
            decide_helm_release(&dedicated(), None, &not_a_list)
                .patch
                .is_empty()
        );
    }

    /// A patch text that names the marker and expands to about 60,000 nodes from 5 anchors:
    /// accepted by the parser's default budget (250,000 nodes), which spends 0.1 s or more on it.
    pub(crate) fn alias_bomb() -> String {
        let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x]\n");
        for level in 1..5 {
            let aliases = vec![format!("*a{}", level - 1); 9].join(", ");
            text.push_str(&format!("a{level}: &a{level} [{aliases}]\n"));
        }
        text.push_str("kind: Ingress\nmetadata: {name: styrmin-ingress-class}\n");
        text
    }

    #[test]
    fn an_alias_bomb_is_stopped_by_the_patch_text_budget_and_is_the_users() {
        let bomb = alias_bomb();
        assert!(bomb.len() < 400, "{}", bomb.len());
        // The default budget takes it whole: that is the cost the tight one avoids.
        let whole: Value = serde_saphyr::from_str(&bomb).unwrap();
        assert_eq!(whole["metadata"]["name"], FLUX_PATCH_NAME);
        assert!(serde_saphyr::from_str_with_options::<Value>(&bomb, patch_text_options()).is_err());
        let entry =
            json!({"kustomize": {"patches": [{"target": {"kind": "Ingress"}, "patch": bomb}]}});
        assert!(!is_styrmin_post_renderer(&entry));
        // Kept as the user's, ours appended.
        let many: Vec<Value> = (0..100).map(|_| entry.clone()).collect();
        let out = check(&dedicated(), &release(Some(Value::Array(many))));
        assert_eq!(out["spec"]["postRenderers"].as_array().unwrap().len(), 101);
    }

    #[test]
    fn a_patch_text_is_read_only_within_the_size_limit_and_with_the_marker_as_written() {
        let text = ours(&dedicated())["kustomize"]["patches"][0]["patch"]
            .as_str()
            .unwrap()
            .to_owned();
        // A patch text larger than any of Styrmin's is not parsed at all.
        let large = format!("{text}# {}", "x".repeat(MAX_PATCH_TEXT_BYTES));
        assert!(!is_marked_patch(&json!({"patch": large})));
        // Up to that size, 4 KiB, it is read: Styrmin's patch with a comment that fills it.
        let padded = format!("{text}# {}", "x".repeat(4096 - text.len() - 2));
        assert_eq!(padded.len(), MAX_PATCH_TEXT_BYTES);
        assert!(is_marked_patch(&json!({"patch": padded})));
        // Only the marker's words as written count: a name spelled with an escape is the user's.
        let escaped = "apiVersion: builtin\nkind: PatchTransformer\nmetadata:\n  name: \"styrmin\\x2dingress-class\"\n";
        let name: Value = serde_saphyr::from_str(escaped).unwrap();
        assert_eq!(name["metadata"]["name"], FLUX_PATCH_NAME);
        assert!(!is_marked_patch(&json!({"patch": escaped})));
    }

    /// One entry of `n` marked patch texts (each parsed to tell whether it is Styrmin's).
    fn marked_entry(n: usize) -> Value {
        let text = "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: styrmin-ingress-class\n";
        let patches: Vec<Value> = (0..n)
            .map(|_| json!({"target": {"kind": "Ingress"}, "patch": text}))
            .collect();
        json!({"kustomize": {"patches": patches}})
    }

    #[test]
    fn the_budget_is_counted_inside_one_entry_not_between_entries() {
        // Up to the budget, every patch text is read: an entry of marked texts is ours.
        let object = release(Some(json!([user(1), marked_entry(MAX_PATCH_TEXTS_PARSED)])));
        let decision = decide_helm_release(&dedicated(), None, &object);
        assert!(!decision.over_budget);
        assert_eq!(
            wire(&decision.patch),
            json!([{"op": "replace", "path": "/spec/postRenderers/1", "value": ours(&dedicated())}])
        );
        // One text more, in the same single entry, and without a deadline: over the budget,
        // left unchanged with the warning. Before, the deadline was checked between entries
        // only, and one entry of 34,925 such texts took 13 s of CPU.
        for list in [
            json!([marked_entry(MAX_PATCH_TEXTS_PARSED + 1)]),
            json!([marked_entry(40_000)]),
            json!([marked_entry(600), user(2), marked_entry(600)]),
        ] {
            let decision = decide_helm_release(&dedicated(), None, &release(Some(list)));
            assert!(decision.over_budget);
            assert!(decision.patch.is_empty());
            assert_eq!(decision.warnings, vec![OVER_BUDGET_WARNING.to_owned()]);
        }
        // Texts that are not parsed (no marker, or too large) cost nothing.
        let unmarked: Vec<Value> = (0..10_000).map(user).collect();
        let decision =
            decide_helm_release(&dedicated(), None, &release(Some(Value::Array(unmarked))));
        assert!(!decision.over_budget);
        assert_eq!(decision.patch.len(), 1);
    }

    #[test]
    fn deeply_nested_patch_texts_are_the_users_never_a_crash() {
        // A text with the marker's words that nests past the parse budget's depth (flow as
        // deep as the size cap allows, and block) is read as the user's: kept in its place,
        // ours added last.
        let head = "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: styrmin-ingress-class\nspec:\n  rules: ";
        let k = (MAX_PATCH_TEXT_BYTES - head.len() - 1) / 2;
        let flow = format!("{head}{}{}\n", "[".repeat(k), "]".repeat(k));
        assert!(flow.len() <= MAX_PATCH_TEXT_BYTES, "{}", flow.len());
        let mut block = head.trim_end().to_owned();
        for level in 0..40 {
            block.push('\n');
            block.push_str(&" ".repeat(4 + 2 * level));
            block.push_str("a:");
        }
        block.push_str(" b\n");
        for text in [flow, block] {
            let entry =
                json!({"kustomize": {"patches": [{"target": {"kind": "Ingress"}, "patch": text}]}});
            let object = release(Some(json!([entry])));
            let out = check(&dedicated(), &object);
            assert_eq!(
                out["spec"]["postRenderers"],
                json!([entry, ours(&dedicated())])
            );
        }
    }

    #[test]
    fn the_deadline_is_checked_before_each_patch_text() {
        let mut budget = FluxBudget::new(Some(Instant::now()));
        let entry = serde_json::to_string(&marked_entry(1)).unwrap();
        let entry: &RawValue = serde_json::from_str(&entry).unwrap();
        assert_eq!(classify_entry(entry, &mut budget), Err(OverBudget));
        let patch = serde_json::to_string(&marked_entry(1)["kustomize"]["patches"][0]).unwrap();
        let patch: &RawValue = serde_json::from_str(&patch).unwrap();
        assert_eq!(is_marked_patch_text(patch, &mut budget), Err(OverBudget));
        let mut budget = FluxBudget::new(None);
        assert_eq!(is_marked_patch_text(patch, &mut budget), Ok(true));
        assert_eq!(budget.texts_left, MAX_PATCH_TEXTS_PARSED - 1);
    }

    #[test]
    fn ours_in_the_middle_is_removed_and_added_last_without_copying_the_users_entries() {
        let object = release(Some(json!([
            ours(&shared("nginx")),
            user(1),
            images(),
            ours(&dedicated()),
            user(2)
        ])));
        let decision = decide_helm_release(&dedicated(), None, &object);
        assert_eq!(
            wire(&decision.patch),
            json!([
                {"op": "remove", "path": "/spec/postRenderers/3"},
                {"op": "remove", "path": "/spec/postRenderers/0"},
                {"op": "add", "path": "/spec/postRenderers/-", "value": ours(&dedicated())},
            ])
        );
        let out = check(&dedicated(), &object);
        assert_eq!(
            out["spec"]["postRenderers"],
            json!([user(1), images(), user(2), ours(&dedicated())])
        );
    }

    #[test]
    fn past_the_deadline_the_release_is_left_unchanged_with_a_warning() {
        let object = release(Some(json!([user(1), ours(&shared("nginx"))])));
        let Some(Member::Object(view)) = KubeObject::from_value(&object) else {
            panic!("an object")
        };
        let late = decide_helm_release_within(&dedicated(), None, &view, Some(Instant::now()));
        assert!(late.over_budget);
        assert!(late.patch.is_empty());
        assert_eq!(late.warnings, vec![OVER_BUDGET_WARNING.to_owned()]);
        assert!(OVER_BUDGET_WARNING.len() <= 256 && !OVER_BUDGET_WARNING.contains('\n'));
        // In time: the usual answer.
        let far = Instant::now() + std::time::Duration::from_secs(60);
        let in_time = decide_helm_release_within(&dedicated(), None, &view, Some(far));
        assert!(!in_time.over_budget);
        assert_eq!(in_time, decide_helm_release(&dedicated(), None, &object));
        assert!(!in_time.patch.is_empty());
    }

    #[test]
    fn r9_old_kubernetes_gets_a_warning_not_a_patch() {
        let old = "1.26".parse().ok();
        let decision = decide_helm_release(&shared("nginx"), old, &release(None));
        assert!(decision.patch.is_empty());
        assert!(
            decision.warnings[0].contains("1.27"),
            "{:?}",
            decision.warnings
        );
        // Found by the fuzz target admission_review (its property, on the seed corpus): the
        // warning held the whole rule error (over 256 characters, which the API server may
        // truncate) and the class, of any length.
        let long = "x".repeat(300);
        for class in ["haproxy", long.as_str()] {
            let decision = decide_helm_release(&shared(class), old, &release(None));
            let warning = &decision.warnings[0];
            assert!(warning.len() <= 256 && !warning.contains('\n'), "{warning}");
        }
        // R3 sets one field only: fine there.
        assert!(
            !decide_helm_release(&dedicated(), old, &release(None))
                .patch
                .is_empty()
        );
    }
}
