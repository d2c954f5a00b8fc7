//! Objects written through the fake, for the paths a test opens to writes
//! ([`crate::FakeApiServer::accept_writes`]): create (`POST`), replace (`PUT`, refused with
//! 409 when its `resourceVersion` is not the stored one, as the API server's optimistic
//! concurrency does), server-side apply (`PATCH`: the body becomes the object, the managed
//! fields are not tracked), JSON merge patch (`PATCH` as `application/merge-patch+json`, RFC
//! 7386, with a `resourceVersion` it names as a precondition), JSON patch (`PATCH` as `application/json-patch+json`, RFC 6902, of an object or its
//! `status` subresource, refused with 409 when it sets a `resourceVersion` that is not the
//! stored one, as the API server's optimistic concurrency does), delete (with a
//! `resourceVersion` precondition), get and list (with an equality label selector).

use std::collections::BTreeMap;

use serde_json::{Value, json};

/// An object path: `<prefix>/namespaces/<ns>/<plural>/<name>` or `<prefix>/<plural>/<name>`.
#[derive(Debug, Default)]
pub(crate) struct Store {
    objects: BTreeMap<String, Value>,
    resource_version: u64,
    uid: u64,
}

/// Whether `path` names one object (a name after the plural) rather than a collection.
fn is_object(path: &str) -> bool {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    // /apis/<group>/<version>/[namespaces/<ns>/]<plural>[/<name>]
    let base = if segments.first() == Some(&"api") {
        2
    } else {
        3
    };
    let rest = segments.len().saturating_sub(base);
    let namespaced = segments.get(base) == Some(&"namespaces");
    if namespaced { rest == 4 } else { rest == 2 }
}

/// The plural and group-version prefix of a collection path, and its namespace, if any.
fn collection_parts(path: &str) -> (String, Option<String>, String) {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let base = if segments.first() == Some(&"api") {
        2
    } else {
        3
    };
    let prefix = format!("/{}", segments[..base.min(segments.len())].join("/"));
    match segments.get(base) {
        Some(&"namespaces") => (
            prefix,
            segments.get(base + 1).map(|s| (*s).to_owned()),
            segments.get(base + 2).copied().unwrap_or("").to_owned(),
        ),
        _ => (
            prefix,
            None,
            segments.get(base).copied().unwrap_or("").to_owned(),
        ),
    }
}

fn status(code: u16, reason: &str, message: &str) -> (u16, String) {
    (
        code,
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason,
               "message": message, "code": code})
        .to_string(),
    )
}

/// Percent-decodes the few characters a label selector uses.
fn decode(text: &str) -> String {
    text.replace("%3D", "=")
        .replace("%3d", "=")
        .replace("%2F", "/")
        .replace("%2f", "/")
        .replace("%2C", ",")
        .replace("%2c", ",")
}

fn labels_match(object: &Value, selector: Option<&str>) -> bool {
    let Some(selector) = selector.map(decode) else {
        return true;
    };
    selector
        .split(',')
        .filter(|s| !s.is_empty())
        .all(|term| match term.split_once('=') {
            Some((key, value)) => object["metadata"]["labels"][key] == value,
            None => false,
        })
}

/// RFC 7386: an object merges key by key, `null` removes a key, anything else replaces.
fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(changes) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    if let Value::Object(fields) = target {
        for (key, value) in changes {
            if value.is_null() {
                fields.remove(key);
            } else {
                merge(fields.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
    }
}

/// Whether a delete's `preconditions.resourceVersion` names another version than `stored`'s.
fn precondition_fails(body: Option<&Value>, stored: Option<&Value>) -> bool {
    let wanted = body.and_then(|b| b["preconditions"]["resourceVersion"].as_str());
    match (wanted, stored) {
        (Some(wanted), Some(stored)) => stored["metadata"]["resourceVersion"] != wanted,
        _ => false,
    }
}

/// One RFC 6902 operation (`add`, `replace`, `remove`, `test`) on `object`.
fn apply_operation(object: &mut Value, operation: &Value) -> Result<(), String> {
    let op = operation["op"].as_str().unwrap_or_default();
    let pointer = operation["path"].as_str().unwrap_or_default();
    let (parent, last) = pointer
        .rsplit_once('/')
        .ok_or_else(|| format!("{op}: path {pointer:?} is not a JSON pointer"))?;
    let last = last.replace("~1", "/").replace("~0", "~");
    if op == "test" {
        return match object.pointer(pointer) {
            Some(found) if *found == operation["value"] => Ok(()),
            _ => Err(format!("test of {pointer} failed")),
        };
    }
    let target = object
        .pointer_mut(parent)
        .ok_or_else(|| format!("{op}: no {parent:?}"))?;
    let value = operation["value"].clone();
    match (op, target) {
        ("add" | "replace", Value::Object(fields)) => {
            if op == "replace" && !fields.contains_key(&last) {
                return Err(format!("replace: no {pointer}"));
            }
            fields.insert(last, value);
        }
        ("remove", Value::Object(fields)) => {
            fields
                .remove(&last)
                .ok_or_else(|| format!("remove: no {pointer}"))?;
        }
        ("add", Value::Array(items)) if last == "-" => items.push(value),
        (_, Value::Array(items)) => {
            let index: usize = last
                .parse()
                .map_err(|_| format!("{op}: {pointer} is no index"))?;
            match op {
                "add" if index <= items.len() => items.insert(index, value),
                "replace" if index < items.len() => items[index] = value,
                "remove" if index < items.len() => drop(items.remove(index)),
                _ => return Err(format!("{op}: {pointer} out of range")),
            }
        }
        _ => return Err(format!("{op}: cannot apply at {pointer}")),
    }
    Ok(())
}

impl Store {
    fn stamp(&mut self, object: &mut Value, previous: Option<&Value>) {
        self.resource_version += 1;
        let metadata = &mut object["metadata"];
        metadata["resourceVersion"] = Value::from(self.resource_version.to_string());
        match previous {
            Some(old) => {
                metadata["uid"] = old["metadata"]["uid"].clone();
                metadata["creationTimestamp"] = old["metadata"]["creationTimestamp"].clone();
            }
            None => {
                self.uid += 1;
                metadata["uid"] = Value::from(format!("fake-uid-{}", self.uid));
                metadata["creationTimestamp"] = Value::from("2026-12-05T10:00:00Z");
            }
        }
    }

    /// The answer to a request on a write-enabled path.
    pub(crate) fn handle(
        &mut self,
        method: &str,
        path: &str,
        label_selector: Option<&str>,
        body: &[u8],
    ) -> (u16, String) {
        let body: Option<Value> = serde_json::from_slice(body).ok();
        match (method, is_object(path)) {
            ("GET", true) => match self.objects.get(path) {
                Some(object) => (200, object.to_string()),
                None => status(404, "NotFound", &format!("{path} not found")),
            },
            ("GET", false) => {
                let (prefix, namespace, plural) = collection_parts(path);
                let items: Vec<&Value> = self
                    .objects
                    .iter()
                    .filter(|(key, _)| {
                        let (p, ns, pl) =
                            collection_parts(key.rsplit_once('/').map_or("", |(c, _)| c));
                        p == prefix && pl == plural && (namespace.is_none() || ns == namespace)
                    })
                    .map(|(_, object)| object)
                    .filter(|object| labels_match(object, label_selector))
                    .collect();
                (
                    200,
                    json!({"kind": "List", "apiVersion": "v1",
                           "metadata": {"resourceVersion": self.resource_version.to_string()},
                           "items": items})
                    .to_string(),
                )
            }
            ("POST", false) => {
                let Some(mut object) = body else {
                    return status(400, "BadRequest", "the body is not JSON");
                };
                let Some(name) = object["metadata"]["name"].as_str().map(str::to_owned) else {
                    return status(422, "Invalid", "metadata.name is required");
                };
                let key = format!("{path}/{name}");
                if self.objects.contains_key(&key) {
                    return status(409, "AlreadyExists", &format!("{key} already exists"));
                }
                self.stamp(&mut object, None);
                self.objects.insert(key, object.clone());
                (201, object.to_string())
            }
            ("PUT", true) => {
                let Some(mut object) = body else {
                    return status(400, "BadRequest", "the body is not JSON");
                };
                let Some(stored) = self.objects.get(path).cloned() else {
                    return status(404, "NotFound", &format!("{path} not found"));
                };
                let sent = object["metadata"]["resourceVersion"].as_str();
                if sent.is_some_and(|v| Some(v) != stored["metadata"]["resourceVersion"].as_str()) {
                    return status(
                        409,
                        "Conflict",
                        "Operation cannot be fulfilled: the object has been modified; please apply your changes to the latest version and try again",
                    );
                }
                self.stamp(&mut object, Some(&stored));
                self.objects.insert(path.to_owned(), object.clone());
                (200, object.to_string())
            }
            ("PATCH", true) => {
                let Some(mut object) = body else {
                    return status(400, "BadRequest", "the body is not JSON");
                };
                let previous = self.objects.get(path).cloned();
                let created = previous.is_none();
                self.stamp(&mut object, previous.as_ref());
                self.objects.insert(path.to_owned(), object.clone());
                (if created { 201 } else { 200 }, object.to_string())
            }
            ("DELETE", true) if precondition_fails(body.as_ref(), self.objects.get(path)) => {
                status(
                    409,
                    "Conflict",
                    "Operation cannot be fulfilled: the precondition resourceVersion does not match",
                )
            }
            ("DELETE", true) => match self.objects.remove(path) {
                Some(_) => (
                    200,
                    json!({"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 200})
                        .to_string(),
                ),
                None => status(404, "NotFound", &format!("{path} not found")),
            },
            _ => status(405, "MethodNotAllowed", &format!("{method} {path}")),
        }
    }

    /// A JSON merge patch (RFC 7386) of a stored object, or of its `status` subresource: 404
    /// when there is none, 409 when it names a `resourceVersion` that is not the stored one.
    pub(crate) fn merge_patch(&mut self, path: &str, body: &[u8]) -> (u16, String) {
        let Ok(patch) = serde_json::from_slice::<Value>(body) else {
            return status(400, "BadRequest", "the body is not JSON");
        };
        let path = match path.strip_suffix("/status") {
            Some(object) if is_object(object) => object,
            _ => path,
        };
        let Some(previous) = self.objects.get(path).cloned() else {
            return status(404, "NotFound", &format!("{path} not found"));
        };
        let version = &patch["metadata"]["resourceVersion"];
        if version.is_string() && *version != previous["metadata"]["resourceVersion"] {
            return status(
                409,
                "Conflict",
                "Operation cannot be fulfilled: the object has been modified; please apply your changes to the latest version and try again",
            );
        }
        let mut object = previous.clone();
        merge(&mut object, &patch);
        self.stamp(&mut object, Some(&previous));
        self.objects.insert(path.to_owned(), object.clone());
        (200, object.to_string())
    }

    /// A JSON patch (RFC 6902) of a stored object, or of its `status` subresource (the path
    /// with `/status`): 404 when there is none, 422 when an operation cannot be applied, 409
    /// when the patched `resourceVersion` is not the stored one.
    pub(crate) fn json_patch(&mut self, path: &str, body: &[u8]) -> (u16, String) {
        let path = match path.strip_suffix("/status") {
            Some(object) if is_object(object) => object,
            _ => path,
        };
        let Ok(Value::Array(operations)) = serde_json::from_slice::<Value>(body) else {
            return status(400, "BadRequest", "the body is not a JSON patch");
        };
        let Some(previous) = self.objects.get(path).cloned() else {
            return status(404, "NotFound", &format!("{path} not found"));
        };
        let mut object = previous.clone();
        for operation in &operations {
            if let Err(why) = apply_operation(&mut object, operation) {
                return status(422, "Invalid", &why);
            }
        }
        if object["metadata"]["resourceVersion"] != previous["metadata"]["resourceVersion"] {
            return status(
                409,
                "Conflict",
                "Operation cannot be fulfilled: the object has been modified; please apply your changes to the latest version and try again",
            );
        }
        self.stamp(&mut object, Some(&previous));
        self.objects.insert(path.to_owned(), object.clone());
        (200, object.to_string())
    }

    /// Every stored object under `prefix`, by path.
    pub(crate) fn objects(&self, prefix: &str) -> BTreeMap<String, Value> {
        self.objects
            .iter()
            .filter(|(path, _)| path.starts_with(prefix))
            .map(|(path, object)| (path.clone(), object.clone()))
            .collect()
    }

    /// How many objects are stored under `prefix`.
    pub(crate) fn count(&self, prefix: &str) -> usize {
        self.objects
            .keys()
            .filter(|path| path.starts_with(prefix))
            .count()
    }

    /// Removes an object as another client would (the garbage collector, an admin).
    pub(crate) fn remove(&mut self, path: &str) -> Option<Value> {
        self.objects.remove(path)
    }

    /// Stores an object as another client would.
    pub(crate) fn put(&mut self, path: &str, mut object: Value) {
        let previous = self.objects.get(path).cloned();
        self.stamp(&mut object, previous.as_ref());
        self.objects.insert(path.to_owned(), object);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/styrmin-system/leases";

    fn body(value: Value) -> Vec<u8> {
        value.to_string().into_bytes()
    }

    #[test]
    fn create_replace_with_the_version_read_and_conflict_otherwise() {
        let mut store = Store::default();
        let lease = json!({"metadata": {"name": "l"}, "spec": {"holderIdentity": "a"}});
        assert_eq!(
            store.handle("POST", LEASES, None, &body(lease.clone())).0,
            201
        );
        assert_eq!(store.handle("POST", LEASES, None, &body(lease)).0, 409);
        let path = format!("{LEASES}/l");
        let (code, read) = store.handle("GET", &path, None, b"");
        assert_eq!(code, 200);
        let mut read: Value = serde_json::from_str(&read).unwrap_or_default();
        read["spec"]["holderIdentity"] = Value::from("b");
        assert_eq!(store.handle("PUT", &path, None, &body(read.clone())).0, 200);
        // The same version again: someone wrote meanwhile.
        assert_eq!(store.handle("PUT", &path, None, &body(read)).0, 409);
    }

    #[test]
    fn a_json_patch_keeps_the_version_it_names_or_conflicts() {
        let mut store = Store::default();
        let path = "/apis/styrmin.io/v1alpha1/styrminmigrations/m";
        store.put(
            path,
            json!({"metadata": {"name": "m"}, "spec": {"steps": [1]}}),
        );
        let (_, read) = store.handle("GET", path, None, b"");
        let read: Value = serde_json::from_str(&read).unwrap_or_default();
        let version = read["metadata"]["resourceVersion"].clone();
        let patch = |version: &Value, phase: &str| {
            body(json!([
                {"op": "replace", "path": "/metadata/resourceVersion", "value": version},
                {"op": "add", "path": "/status", "value": {"phase": phase}},
            ]))
        };
        let status_path = format!("{path}/status");
        let (code, after) = store.json_patch(&status_path, &patch(&version, "Running"));
        assert_eq!(code, 200, "{after}");
        let after: Value = serde_json::from_str(&after).unwrap_or_default();
        assert_eq!(after["status"]["phase"], "Running");
        assert_eq!(after["spec"]["steps"], json!([1]));
        // The version read before that write is old now: refused, nothing stored.
        assert_eq!(
            store.json_patch(&status_path, &patch(&version, "Paused")).0,
            409
        );
        assert_eq!(store.objects(path)[path]["status"]["phase"], "Running");
        assert_eq!(
            store
                .json_patch(
                    &status_path,
                    &patch(&after["metadata"]["resourceVersion"], "Paused")
                )
                .0,
            200
        );
        // Without a version it is not a precondition; a bad operation is refused.
        let plain = body(json!([{"op": "add", "path": "/spec/steps/-", "value": 2}]));
        assert_eq!(store.json_patch(path, &plain).0, 200);
        assert_eq!(store.objects(path)[path]["spec"]["steps"], json!([1, 2]));
        let bad = body(json!([{"op": "replace", "path": "/nothing/here", "value": 2}]));
        assert_eq!(store.json_patch(path, &bad).0, 422);
        assert_eq!(store.json_patch(&format!("{path}x"), &plain).0, 404);
        // A delete with an old version as its precondition conflicts.
        let old = body(json!({"preconditions": {"resourceVersion": version}}));
        assert_eq!(store.handle("DELETE", path, None, &old).0, 409);
        assert_eq!(store.count(path), 1);
    }

    #[test]
    fn a_merge_patch_changes_only_what_it_names() {
        let mut store = Store::default();
        let path = "/apis/styrmin.io/v1alpha1/styrminmigrations/m";
        assert_eq!(store.merge_patch(path, b"{}").0, 404);
        store.put(
            path,
            json!({"metadata": {"name": "m"}, "spec": {"steps": [1], "paused": true, "abort": false}}),
        );
        let (code, patched) =
            store.merge_patch(path, br#"{"spec": {"paused": null, "abort": true}}"#);
        assert_eq!(code, 200);
        let patched: Value = serde_json::from_str(&patched).unwrap_or_default();
        assert_eq!(patched["spec"], json!({"steps": [1], "abort": true}));
        assert_eq!(patched["metadata"]["name"], "m");
        assert_eq!(patched["metadata"]["resourceVersion"], "2");
        // A version it names is a precondition, of the object or its status.
        let old = br#"{"metadata": {"resourceVersion": "1"}, "status": {"phase": "Paused"}}"#;
        assert_eq!(store.merge_patch(&format!("{path}/status"), old).0, 409);
        let current = br#"{"metadata": {"resourceVersion": "2"}, "status": {"phase": "Paused"}}"#;
        assert_eq!(store.merge_patch(&format!("{path}/status"), current).0, 200);
        assert_eq!(store.objects(path)[path]["status"]["phase"], "Paused");
    }

    #[test]
    fn apply_list_by_label_and_delete() {
        let mut store = Store::default();
        let reports = "/apis/openreports.io/v1alpha1";
        let report = |name: &str, label: &str| json!({"metadata": {"name": name, "namespace": "ns1", "labels": {"app.kubernetes.io/managed-by": label}}});
        let path = format!("{reports}/namespaces/ns1/reports/a");
        assert_eq!(
            store
                .handle("PATCH", &path, None, &body(report("a", "styrmin-webhook")))
                .0,
            201
        );
        assert_eq!(
            store
                .handle("PATCH", &path, None, &body(report("a", "styrmin-webhook")))
                .0,
            200
        );
        let other = format!("{reports}/namespaces/ns2/reports/b");
        store.handle("PATCH", &other, None, &body(report("b", "kyverno")));
        let (_, list) = store.handle(
            "GET",
            &format!("{reports}/reports"),
            Some("app.kubernetes.io%2Fmanaged-by%3Dstyrmin-webhook"),
            b"",
        );
        let list: Value = serde_json::from_str(&list).unwrap_or_default();
        assert_eq!(list["items"].as_array().map(Vec::len), Some(1), "{list}");
        assert_eq!(list["items"][0]["metadata"]["name"], "a");
        assert_eq!(store.handle("DELETE", &path, None, b"").0, 200);
        assert_eq!(store.handle("DELETE", &path, None, b"").0, 404);
    }
}
