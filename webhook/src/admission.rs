//! The `admission.k8s.io/v1` AdmissionReview as it travels on the wire: the request fields
//! the decisions read, and the response the API server accepts (the patch a base64 string).

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::Value;

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

/// The fields of an `AdmissionRequest` that the webhook reads.
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
    #[serde(default)]
    pub object: Option<Value>,
    #[serde(default)]
    pub old_object: Option<Value>,
    #[serde(default)]
    pub dry_run: Option<bool>,
}

impl AdmissionRequest {
    /// The namespace of the request, else of the object.
    pub fn namespace(&self) -> Option<&str> {
        self.namespace
            .as_deref()
            .filter(|ns| !ns.is_empty())
            .or_else(|| {
                self.object
                    .as_ref()?
                    .pointer("/metadata/namespace")?
                    .as_str()
            })
    }

    /// The name of the request, else of the object (`generateName` objects have none yet).
    pub fn name(&self) -> Option<&str> {
        self.name
            .as_deref()
            .filter(|n| !n.is_empty())
            .or_else(|| self.object.as_ref()?.pointer("/metadata/name")?.as_str())
    }

    /// `(apiVersion, kind)` of the object; the request's `kind` where the object lacks them.
    pub fn object_type(&self) -> (String, String) {
        let object = self.object.as_ref().or(self.old_object.as_ref());
        let field = |name: &str| {
            object
                .and_then(|o| o.get(name))
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
        };
        match (field("apiVersion"), field("kind")) {
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

/// Parses a request body.
pub fn parse_review(body: &[u8]) -> Result<Review, ReviewError> {
    let value: Value =
        serde_json::from_slice(body).map_err(|e| ReviewError::NotJson(e.to_string()))?;
    let review: ReviewIn =
        serde_json::from_value(value).map_err(|e| ReviewError::NotAReview(e.to_string()))?;
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
