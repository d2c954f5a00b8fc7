//! The `admission.k8s.io/v1` AdmissionReview as it travels on the wire: the request fields
//! the decisions read, and the response the API server accepts (the patch a base64 string).
//!
//! Why these types are the webhook's own and not `kube::core::admission`: kube's answer a
//! different wire.
//! - kube's `AdmissionResponse::patch` is a `Vec<u8>` serialized as an array of numbers; the API
//!   server documents, and the recorded reviews carry, a base64 string.
//! - kube's response always writes `status`; here `status` is written only on a denial, with the
//!   rule's code and reason (403 `Forbidden` for W2, 422 `Invalid` for R9). kube's response is
//!   `#[non_exhaustive]` and can only be built from a kube `AdmissionRequest`.
//! - kube's `AdmissionRequest<DynamicObject>` requires `resource` and `userInfo`, knows four
//!   operations and parses `object` and `oldObject` as typed objects, so a review with an
//!   unknown operation or a non-object `object` becomes a 400 and falls to the webhook's
//!   `failurePolicy`; here such a review is allowed unchanged.
//! - Only the fields the decisions read are parsed; `spec` stays raw text and the rest is
//!   skipped unread. Building a whole `serde_json::Value` tree of every review cost about 40 % of
//!   the webhook's CPU (docs/benchmarks-webhook.md) and let a review's memory grow far beyond its
//!   body.

use std::fmt;

use base64::Engine as _;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;
use styrmin_ingress_rules::CLASS_ANNOTATION;

/// The AdmissionReview versions answered; the response carries the request's.
pub const REVIEW_API_VERSIONS: [&str; 2] = ["admission.k8s.io/v1", "admission.k8s.io/v1beta1"];

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ReviewError {
    #[error("the body is not JSON: {0}")]
    NotJson(String),
    #[error("the body is not an AdmissionReview: {0}")]
    NotAReview(String),
}

/// `group`, `version`, `kind` of a request.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct GroupVersionKind {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub kind: String,
}

impl GroupVersionKind {
    /// `group/version`, or `version` for the core group: what an object's `apiVersion` says.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

/// The operation of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operation {
    Create,
    Update,
    Delete,
    Connect,
    Other,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
            Operation::Other => "other",
        }
    }
}

impl<'de> Deserialize<'de> for Operation {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Ok(match text.as_str() {
            "CREATE" => Operation::Create,
            "UPDATE" => Operation::Update,
            "DELETE" => Operation::Delete,
            "CONNECT" => Operation::Connect,
            _ => Operation::Other,
        })
    }
}

/// The longest request `uid` accepted, in bytes. The API server's uids are UUIDs (36
/// characters); 128 leaves room for other UUID spellings (`urn:uuid:…`, braces) and for clients
/// that prefix one. The answer echoes the uid, so a longer one is refused with 400 unechoed:
/// otherwise whatever a client puts there is copied into the answer, the log and the span.
pub const MAX_UID_BYTES: usize = 128;

/// The largest JSON texts that are compared as values when they differ as text (W2's old and new
/// `spec`, a post-renderer entry against Styrmin's). The API server encodes both sides with
/// the same encoder, so equal values arrive as equal text; larger texts that differ count as
/// different, and a value tree is never built from more than this.
pub const MAX_COMPARED_JSON_BYTES: usize = 64 * 1024;

/// A field the rules read as text, as sent: JSON `null`, a string, or any other JSON value
/// (kept as its JSON text; the API server type-checks objects, so only a crafted review has
/// one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FieldText {
    Null,
    Text(String),
    Json(String),
}

impl FieldText {
    /// The value as the rules see it: `null` counts as absent, anything else as set.
    pub fn as_class(&self) -> Option<String> {
        match self {
            FieldText::Null => None,
            FieldText::Text(text) | FieldText::Json(text) => Some(text.clone()),
        }
    }
}

impl<'de> Deserialize<'de> for FieldText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(deserializer)?;
        let text = raw.get();
        Ok(if text == "null" {
            FieldText::Null
        } else if text.starts_with('"') {
            FieldText::Text(serde_json::from_str(text).map_err(de::Error::custom)?)
        } else {
            FieldText::Json(text.to_owned())
        })
    }
}

/// A member that the decisions read only when it is a JSON object (`null`, a list or a scalar
/// count as absent, as `Value::get` on them does).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Member<T> {
    #[default]
    NotAnObject,
    Object(T),
}

impl<T> Member<T> {
    pub fn as_object(&self) -> Option<&T> {
        match self {
            Member::Object(object) => Some(object),
            Member::NotAnObject => None,
        }
    }

    pub fn is_object(&self) -> bool {
        matches!(self, Member::Object(_))
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Member<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MemberVisitor<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for MemberVisitor<T> {
            type Value = Member<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                T::deserialize(de::value::MapAccessDeserializer::new(map)).map(Member::Object)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Member::NotAnObject)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(Member::NotAnObject)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(Member::NotAnObject)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(Member::NotAnObject)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(Member::NotAnObject)
            }
            fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
                Ok(Member::NotAnObject)
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(Member::NotAnObject)
            }
            fn visit_none<E>(self) -> Result<Self::Value, E> {
                Ok(Member::NotAnObject)
            }
        }
        deserializer.deserialize_any(MemberVisitor(std::marker::PhantomData))
    }
}

/// A string member, or `None` for any other JSON value (skipped unread).
fn string_or_nothing<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<String>, D::Error> {
    struct StringVisitor;
    impl<'de> Visitor<'de> for StringVisitor {
        type Value = Option<String>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("any JSON value")
        }
        fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
            Ok(Some(v.to_owned()))
        }
        fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
            Ok(Some(v))
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok(None)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok(None)
        }
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_none<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
    }
    deserializer.deserialize_any(StringVisitor)
}

/// A member that is there, `null` included (`Option`'s own impl reads `null` as absent).
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<Option<T>, D::Error> {
    T::deserialize(deserializer).map(Some)
}

/// A map key compared with a known one, never copied.
pub(crate) struct IsKey(pub &'static str);

impl<'de> de::DeserializeSeed<'de> for IsKey {
    type Value = bool;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for IsKey {
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a key")
    }
    fn visit_str<E>(self, v: &str) -> Result<bool, E> {
        Ok(v == self.0)
    }
}

/// `metadata.annotations`, of which only the class annotation is read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Annotations {
    /// The class annotation, when the map has it (a repeated key: the last).
    pub class: Option<FieldText>,
}

impl<'de> Deserialize<'de> for Annotations {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct AnnotationsVisitor;
        impl<'de> Visitor<'de> for AnnotationsVisitor {
            type Value = Annotations;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Annotations, A::Error> {
                let mut class = None;
                while let Some(is_class) = map.next_key_seed(IsKey(CLASS_ANNOTATION))? {
                    if is_class {
                        class = Some(map.next_value::<FieldText>()?);
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(Annotations { class })
            }
        }
        deserializer.deserialize_map(AnnotationsVisitor)
    }
}

/// The `metadata` fields the decisions read.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct Metadata {
    #[serde(default, deserialize_with = "string_or_nothing")]
    pub name: Option<String>,
    #[serde(default, deserialize_with = "string_or_nothing")]
    pub namespace: Option<String>,
    #[serde(default)]
    pub annotations: Member<Annotations>,
}

/// The `spec` fields the decisions read: an Ingress's class name, a StyrminDeployment's role
/// and environment.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SpecFields {
    /// There (`null` included) or not.
    #[serde(default, deserialize_with = "present")]
    pub ingress_class_name: Option<FieldText>,
    #[serde(default, deserialize_with = "string_or_nothing")]
    pub role: Option<String>,
    #[serde(default, deserialize_with = "string_or_nothing")]
    pub environment_id: Option<String>,
}

/// The object of a request as the decisions see it: its type, the metadata and spec fields
/// they read, and `spec` as sent (W2 compares it; the Flux post-renderers are read from it).
/// Nothing else of the object is kept: its other members are skipped unread, so the memory a
/// review takes is its text and a few small strings, whatever the object holds.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(try_from = "ObjectWire")]
pub struct KubeObject {
    pub api_version: Option<String>,
    pub kind: Option<String>,
    pub metadata: Member<Metadata>,
    pub spec: Member<SpecFields>,
    /// `spec` as sent (`null` included), when there is one.
    pub spec_json: Option<Box<RawValue>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ObjectWire {
    #[serde(default, deserialize_with = "string_or_nothing")]
    api_version: Option<String>,
    #[serde(default, deserialize_with = "string_or_nothing")]
    kind: Option<String>,
    #[serde(default)]
    metadata: Member<Metadata>,
    #[serde(default, deserialize_with = "present")]
    spec: Option<Box<RawValue>>,
}

impl TryFrom<ObjectWire> for KubeObject {
    type Error = serde_json::Error;
    fn try_from(wire: ObjectWire) -> Result<Self, Self::Error> {
        let spec = match &wire.spec {
            Some(raw) => serde_json::from_str::<Member<SpecFields>>(raw.get())?,
            None => Member::NotAnObject,
        };
        Ok(KubeObject {
            api_version: wire.api_version,
            kind: wire.kind,
            metadata: wire.metadata,
            spec,
            spec_json: wire.spec,
        })
    }
}

impl KubeObject {
    /// The view of a JSON value (tests and tools; the webhook reads reviews with
    /// [`parse_review`]). `None` for `null`.
    pub fn from_value(value: &Value) -> Option<Member<KubeObject>> {
        serde_json::from_str(&value.to_string()).ok().flatten()
    }

    pub fn metadata(&self) -> Option<&Metadata> {
        self.metadata.as_object()
    }

    /// `spec` as sent, when it is a JSON object.
    pub fn spec_object_json(&self) -> Option<&RawValue> {
        self.spec
            .is_object()
            .then_some(self.spec_json.as_deref())
            .flatten()
    }
}

/// Whether two JSON texts hold the same value: the same text, or (both at most
/// [`MAX_COMPARED_JSON_BYTES`]) equal values.
pub fn same_json(a: &RawValue, b: &RawValue) -> bool {
    if a.get() == b.get() {
        return true;
    }
    if a.get().len() > MAX_COMPARED_JSON_BYTES || b.get().len() > MAX_COMPARED_JSON_BYTES {
        return false;
    }
    match (
        serde_json::from_str::<Value>(a.get()),
        serde_json::from_str::<Value>(b.get()),
    ) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// Whether a JSON text holds `value` (texts larger than [`MAX_COMPARED_JSON_BYTES`] never do).
pub fn json_equals(text: &RawValue, value: &Value) -> bool {
    text.get().len() <= MAX_COMPARED_JSON_BYTES
        && serde_json::from_str::<Value>(text.get()).is_ok_and(|parsed| parsed == *value)
}

/// The fields of an `AdmissionRequest` that the webhook reads; the rest is skipped unread.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionRequest {
    pub uid: String,
    #[serde(default)]
    pub kind: GroupVersionKind,
    /// The kind the client sent, before the API server converted it to `kind`
    /// (`matchPolicy: Equivalent`). The object is always in `kind`'s version.
    #[serde(default)]
    pub request_kind: Option<GroupVersionKind>,
    #[serde(default)]
    pub sub_resource: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub namespace: Option<String>,
    pub operation: Operation,
    /// `None` when absent or `null`.
    #[serde(default)]
    pub object: Option<Member<KubeObject>>,
    #[serde(default)]
    pub old_object: Option<Member<KubeObject>>,
    #[serde(default)]
    pub dry_run: Option<bool>,
}

impl AdmissionRequest {
    /// The object, when it is a JSON object.
    pub fn object(&self) -> Option<&KubeObject> {
        self.object.as_ref()?.as_object()
    }

    fn object_metadata(&self) -> Option<&Metadata> {
        self.object()?.metadata()
    }

    /// The namespace of the request, else of the object.
    pub fn namespace(&self) -> Option<&str> {
        self.namespace
            .as_deref()
            .filter(|ns| !ns.is_empty())
            .or_else(|| self.object_metadata()?.namespace.as_deref())
    }

    /// The name of the request, else of the object (`generateName` objects have none yet).
    pub fn name(&self) -> Option<&str> {
        self.name
            .as_deref()
            .filter(|n| !n.is_empty())
            .or_else(|| self.object_metadata()?.name.as_deref())
    }

    /// `(apiVersion, kind)` of the object; the request's `kind` where the object lacks them.
    pub fn object_type(&self) -> (String, String) {
        let object = self
            .object
            .as_ref()
            .or(self.old_object.as_ref())
            .and_then(Member::as_object);
        let field = |f: fn(&KubeObject) -> &Option<String>| {
            object
                .and_then(|o| f(o).as_deref())
                .filter(|s| !s.is_empty())
        };
        match (field(|o| &o.api_version), field(|o| &o.kind)) {
            (Some(api_version), Some(kind)) => (api_version.to_owned(), kind.to_owned()),
            _ => (self.kind.api_version(), self.kind.kind.clone()),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReviewIn {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    request: Option<AdmissionRequest>,
}

/// A parsed AdmissionReview: its version (echoed in the answer) and the request.
#[derive(Debug)]
pub struct Review {
    pub api_version: &'static str,
    pub request: AdmissionRequest,
}

/// Parses a request body into the typed view: the parse never builds a tree of the object, so
/// its memory is a small multiple of the body whatever the body holds.
pub fn parse_review(body: &[u8]) -> Result<Review, ReviewError> {
    let review: ReviewIn = serde_json::from_slice(body).map_err(|e| match e.classify() {
        serde_json::error::Category::Data => ReviewError::NotAReview(e.to_string()),
        _ => ReviewError::NotJson(e.to_string()),
    })?;
    if review.kind != "AdmissionReview" {
        return Err(ReviewError::NotAReview(format!(
            "kind is {:?}, expected \"AdmissionReview\"",
            review.kind
        )));
    }
    let Some(api_version) = REVIEW_API_VERSIONS
        .into_iter()
        .find(|v| *v == review.api_version)
    else {
        return Err(ReviewError::NotAReview(format!(
            "apiVersion is {:?}, expected \"admission.k8s.io/v1\"",
            review.api_version
        )));
    };
    let request = review
        .request
        .ok_or_else(|| ReviewError::NotAReview("it has no request".to_owned()))?;
    if request.uid.is_empty() {
        return Err(ReviewError::NotAReview("request.uid is empty".to_owned()));
    }
    if request.uid.len() > MAX_UID_BYTES {
        // Never echoed, here or in the log: only its length.
        return Err(ReviewError::NotAReview(format!(
            "request.uid is {} bytes; a Kubernetes uid is a UUID (36 characters), at most {MAX_UID_BYTES} are accepted",
            request.uid.len()
        )));
    }
    Ok(Review {
        api_version,
        request,
    })
}

/// `metav1.Status` of a denied request.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Status {
    pub status: &'static str,
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
}

impl Status {
    pub fn failure(code: u16, reason: &'static str, message: String) -> Self {
        Status {
            status: "Failure",
            code,
            reason,
            message,
        }
    }
}

/// The `response` of an AdmissionReview.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionResponse {
    pub uid: String,
    pub allowed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch_type: Option<&'static str>,
    /// The JSON patch, standard base64 (the API server decodes `[]byte` from a base64 string).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl AdmissionResponse {
    pub fn allow(uid: &str) -> Self {
        AdmissionResponse {
            uid: uid.to_owned(),
            allowed: true,
            status: None,
            patch_type: None,
            patch: None,
            warnings: Vec::new(),
        }
    }

    pub fn with_patch(mut self, operations: &[json_patch::PatchOperation]) -> Self {
        let bytes = serde_json::to_vec(operations).unwrap_or_else(|_| b"[]".to_vec());
        self.patch_type = Some("JSONPatch");
        self.patch = Some(base64::engine::general_purpose::STANDARD.encode(bytes));
        self
    }

    pub fn deny(uid: &str, status: Status) -> Self {
        AdmissionResponse {
            allowed: false,
            status: Some(status),
            ..AdmissionResponse::allow(uid)
        }
    }
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ReviewOut<'a> {
    api_version: &'a str,
    kind: &'static str,
    response: &'a AdmissionResponse,
}

/// The AdmissionReview that answers a request.
pub fn encode_review(api_version: &str, response: &AdmissionResponse) -> Vec<u8> {
    serde_json::to_vec(&ReviewOut { api_version, kind: "AdmissionReview", response })
        // Serialising strings, bools and numbers cannot fail; keep a valid answer regardless.
        .unwrap_or_else(|_| {
            format!(
                r#"{{"apiVersion":"{api_version}","kind":"AdmissionReview","response":{{"uid":{},"allowed":true}}}}"#,
                Value::String(response.uid.clone())
            )
            .into_bytes()
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patch_is_a_base64_string_on_the_wire() {
        let ops = [crate::patch::remove(["spec", "ingressClassName"])];
        let response = AdmissionResponse::allow("u1").with_patch(&ops);
        let wire: Value =
            serde_json::from_slice(&encode_review("admission.k8s.io/v1", &response)).unwrap();
        assert_eq!(wire["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(wire["kind"], "AdmissionReview");
        assert_eq!(wire["response"]["uid"], "u1");
        assert_eq!(wire["response"]["patchType"], "JSONPatch");
        let patch = wire["response"]["patch"]
            .as_str()
            .expect("patch is a string, not a number array");
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(patch)
            .unwrap();
        assert_eq!(
            serde_json::from_slice::<Value>(&decoded).unwrap(),
            serde_json::json!([{"op": "remove", "path": "/spec/ingressClassName"}])
        );
    }

    #[test]
    fn allow_has_no_patch_keys() {
        let wire: Value = serde_json::from_slice(&encode_review(
            "admission.k8s.io/v1",
            &AdmissionResponse::allow("u"),
        ))
        .unwrap();
        assert_eq!(
            wire["response"],
            serde_json::json!({"uid": "u", "allowed": true})
        );
    }

    #[test]
    fn deny_carries_a_status() {
        let response = AdmissionResponse::deny("u", Status::failure(403, "Forbidden", "no".into()));
        let wire: Value =
            serde_json::from_slice(&encode_review("admission.k8s.io/v1", &response)).unwrap();
        assert_eq!(wire["response"]["allowed"], false);
        assert_eq!(wire["response"]["status"]["code"], 403);
        assert_eq!(wire["response"]["status"]["message"], "no");
    }

    #[test]
    fn not_a_review_is_an_error_with_a_reason() {
        assert!(matches!(
            parse_review(b"nope"),
            Err(ReviewError::NotJson(_))
        ));
        for bad in [
            r#"[]"#,
            r#"{}"#,
            r#"{"apiVersion":"v1","kind":"Pod"}"#,
            r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#,
            r#"{"apiVersion":"admission.k8s.io/v2","kind":"AdmissionReview","request":{"uid":"a","operation":"CREATE"}}"#,
            r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"","operation":"CREATE"}}"#,
            r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"operation":"CREATE"}}"#,
            r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":7,"operation":"CREATE"}}"#,
        ] {
            assert!(
                matches!(
                    parse_review(bad.as_bytes()),
                    Err(ReviewError::NotAReview(_))
                ),
                "{bad}"
            );
        }
    }

    fn review_with(request: Value) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request,
        }))
        .unwrap()
    }

    #[test]
    fn a_uid_longer_than_a_uuid_needs_is_refused_and_not_echoed() {
        let uuid = "0d2f1a3c-7b4e-4f5a-9c1d-2e3f4a5b6c7d";
        let accepted = |uid: &str| {
            parse_review(&review_with(
                serde_json::json!({"uid": uid, "operation": "CREATE"}),
            ))
        };
        assert_eq!(accepted(uuid).unwrap().request.uid, uuid);
        let longest = "u".repeat(MAX_UID_BYTES);
        assert!(accepted(&longest).is_ok());
        let long = format!("{}Z", "u".repeat(MAX_UID_BYTES));
        let Err(ReviewError::NotAReview(message)) = accepted(&long) else {
            panic!("a {}-byte uid was accepted", long.len())
        };
        assert!(!message.contains("uu"), "{message}");
        assert!(message.contains("129 bytes"), "{message}");
        // A 6 MiB uid: refused the same way, its length the only trace.
        let huge = "x".repeat(6 * 1024 * 1024);
        let Err(error) = accepted(&huge) else {
            panic!("a 6 MiB uid was accepted")
        };
        assert!(error.to_string().len() < 200, "{error}");
    }

    /// What the decisions read, taken from the whole JSON tree as they did before the typed
    /// view: namespace, name, type, the class fields and the shape of the containers the patch
    /// goes into.
    fn read_from_the_tree(
        request: &Value,
    ) -> (
        Option<String>,
        Option<String>,
        styrmin_ingress_rules::ClassFields,
        crate::patch::ClassFieldsShape,
    ) {
        let object = &request["object"];
        let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
        let namespace = text(request.get("namespace"))
            .filter(|ns| !ns.is_empty())
            .or_else(|| text(object.pointer("/metadata/namespace")));
        let name = text(request.get("name"))
            .filter(|n| !n.is_empty())
            .or_else(|| text(object.pointer("/metadata/name")));
        (
            namespace,
            name,
            crate::patch::class_fields(object),
            crate::patch::ClassFieldsShape::of_value(object),
        )
    }

    fn read_from_the_view(
        review: &Review,
    ) -> (
        Option<String>,
        Option<String>,
        styrmin_ingress_rules::ClassFields,
        crate::patch::ClassFieldsShape,
    ) {
        let request = &review.request;
        let object = request.object().cloned().unwrap_or_default();
        (
            request.namespace().map(str::to_owned),
            request.name().map(str::to_owned),
            crate::patch::object_class_fields(&object),
            if request.object().is_some() {
                crate::patch::ClassFieldsShape::of_object(&object)
            } else {
                crate::patch::ClassFieldsShape::default()
            },
        )
    }

    #[test]
    fn the_typed_view_reads_what_the_tree_holds_in_every_recorded_review() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/admission");
        let mut read = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            let body = std::fs::read(&path).unwrap();
            let tree: Value = serde_json::from_slice(&body).unwrap();
            let Ok(review) = parse_review(&body) else {
                continue;
            };
            assert_eq!(
                read_from_the_view(&review),
                read_from_the_tree(&tree["request"]),
                "{}",
                path.display()
            );
            // `spec` is kept as sent: it holds the same value.
            let spec = review.request.object().and_then(|o| o.spec_json.as_deref());
            assert_eq!(
                spec.map(|raw| serde_json::from_str::<Value>(raw.get()).unwrap()),
                tree.pointer("/request/object/spec").cloned(),
                "{}",
                path.display()
            );
            read += 1;
        }
        assert!(read >= 10, "{read} recorded reviews read");
    }

    #[test]
    fn the_typed_view_reads_odd_objects_as_the_tree_does() {
        for object in [
            serde_json::json!({"metadata": {"namespace": 7, "name": ["x"], "annotations": null}, "spec": null}),
            serde_json::json!({"metadata": {"annotations": {"kubernetes.io/ingress.class": null}}, "spec": {"ingressClassName": null}}),
            serde_json::json!({"metadata": {"annotations": {"kubernetes.io/ingress.class": {"b": [1, 2.5], "a": true}}}, "spec": {"ingressClassName": 42}}),
            serde_json::json!({"metadata": {"annotations": [], "namespace": "styrmin-x"}, "spec": []}),
            serde_json::json!({"metadata": "m", "spec": "s", "apiVersion": {}, "kind": 1}),
            serde_json::json!({"metadata": {"annotations": {"kubernetes.io/ingress.class": "a\"b\\u00e9", "other": {"deep": [[[]]]}}}}),
            serde_json::json!([1, 2]),
            serde_json::json!("text"),
        ] {
            let request = serde_json::json!({"uid": "u", "operation": "CREATE", "object": object});
            let review = parse_review(&review_with(request.clone())).unwrap();
            let (view, tree) = (read_from_the_view(&review), read_from_the_tree(&request));
            // A non-string class is "set"; its text is the JSON as sent (the tree's is
            // re-encoded): compare whether it is set, and strings exactly.
            assert_eq!(view.0, tree.0, "{object}");
            assert_eq!(view.1, tree.1, "{object}");
            assert_eq!(view.3, tree.3, "{object}");
            assert_eq!(
                view.2.ingress_class_name.is_some(),
                tree.2.ingress_class_name.is_some(),
                "{object}"
            );
            assert_eq!(
                view.2.class_annotation.is_some(),
                tree.2.class_annotation.is_some(),
                "{object}"
            );
            if object["metadata"]["annotations"]["kubernetes.io/ingress.class"].is_string() {
                assert_eq!(view.2, tree.2, "{object}");
            }
        }
    }

    #[test]
    fn json_texts_are_compared_as_values_up_to_the_limit() {
        let raw = |text: &str| RawValue::from_string(text.to_owned()).unwrap();
        assert!(same_json(
            &raw(r#"{"a":1,"b":[1,2]}"#),
            &raw(r#"{ "b": [1, 2], "a": 1 }"#)
        ));
        assert!(!same_json(&raw(r#"{"a":1}"#), &raw(r#"{"a":2}"#)));
        assert!(!same_json(&raw("1"), &raw("1.0")));
        // Larger texts that differ are different, even when only their spacing does.
        let big = format!("[{}]", vec!["0"; MAX_COMPARED_JSON_BYTES / 2].join(","));
        let spaced = big.replace(',', ", ");
        assert!(same_json(&raw(&big), &raw(&big)));
        assert!(!same_json(&raw(&big), &raw(&spaced)));
        let small = serde_json::json!({"a": [1, 2]});
        assert!(json_equals(&raw(r#"{"a": [1,2]}"#), &small));
        assert!(!json_equals(&raw(&big), &small));
    }

    #[test]
    fn the_object_is_read_without_a_tree_of_its_other_members() {
        // A list of a million zeros where nothing is read: skipped; the same list as a field
        // that must be a string is read as "not a string".
        let zeros = format!("[{}]", vec!["0"; 1_000_000].join(","));
        let body = format!(
            r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{"uid":"u","operation":"CREATE","namespace":"styrmin-a","object":{{"apiVersion":"networking.k8s.io/v1","kind":"Ingress","data":{zeros},"metadata":{{"name":{zeros},"annotations":{{"x":{zeros}}}}},"spec":{{"rules":{zeros}}}}}}}}}"#
        );
        let review = parse_review(body.as_bytes()).unwrap();
        let object = review.request.object().unwrap();
        assert_eq!(object.metadata().unwrap().name, None);
        assert_eq!(
            object
                .metadata()
                .unwrap()
                .annotations
                .as_object()
                .unwrap()
                .class,
            None
        );
        // `spec` is the one member kept as sent.
        assert!(object.spec_json.as_ref().unwrap().get().len() > 2_000_000);
        assert_eq!(
            review.request.object_type(),
            ("networking.k8s.io/v1".to_owned(), "Ingress".to_owned())
        );
    }

    #[test]
    fn object_type_falls_back_to_the_request_kind() {
        let review = parse_review(
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"a","operation":"CREATE",
                "kind":{"group":"networking.k8s.io","version":"v1","kind":"Ingress"},"object":{"metadata":{"namespace":"ns1"}}}}"#,
        )
        .unwrap();
        assert_eq!(
            review.request.object_type(),
            ("networking.k8s.io/v1".to_owned(), "Ingress".to_owned())
        );
        assert_eq!(review.request.namespace(), Some("ns1"));
        assert_eq!(review.request.operation, Operation::Create);
    }
}
