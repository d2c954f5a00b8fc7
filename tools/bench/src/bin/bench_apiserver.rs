//! A stand-in Kubernetes API server for `make bench-webhook`'s memory measurement of
//! `--source kubernetes`: it answers every list the webhook makes with N generated objects
//! (N StyrminDeployments, N Ingresses with the metadata a Helm-installed Ingress carries, N
//! namespaces, N/10 service aliases, two IngressClasses), in pages of `limit` with a `continue` token as the API
//! server does, and holds every watch open without events.
//!
//! `bench_apiserver ADDR N`

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;

use serde_json::{Value, json};

/// A list: its kind and its items, each already JSON.
struct List {
    api_version: &'static str,
    kind: &'static str,
    items: Vec<String>,
}

fn list(api_version: &'static str, kind: &'static str, items: Vec<Value>) -> Answer {
    Answer::List(List {
        api_version,
        kind,
        items: items.iter().map(Value::to_string).collect(),
    })
}

enum Answer {
    Body(String),
    List(List),
}

impl List {
    /// The page of `limit` items from offset `start` (the `continue` token is the offset).
    fn page(&self, start: usize, limit: usize) -> String {
        let end = self.items.len().min(start.saturating_add(limit));
        let next = if end < self.items.len() {
            format!(
                r#","continue":"{end}","remainingItemCount":{}"#,
                self.items.len() - end
            )
        } else {
            String::new()
        };
        format!(
            r#"{{"apiVersion":"{}","kind":"{}","metadata":{{"resourceVersion":"1000"{next}}},"items":[{}]}}"#,
            self.api_version,
            self.kind,
            self.items
                .get(start.min(end)..end)
                .unwrap_or_default()
                .join(",")
        )
    }
}

fn meta(name: &str, namespace: Option<&str>, i: usize) -> Value {
    let mut meta = json!({
        "name": name, "resourceVersion": format!("{}", 100 + i),
        "uid": format!("00000000-0000-4000-8000-{i:012}"),
        "creationTimestamp": "2026-03-02T09:16:21Z", "generation": 1,
    });
    if let Some(namespace) = namespace {
        meta["namespace"] = json!(namespace);
    }
    meta
}

fn ingress(i: usize) -> Value {
    let namespace = format!("styrmin-app{i}");
    let mut metadata = meta("web", Some(&namespace), i);
    metadata["labels"] = json!({"app.kubernetes.io/name": "web", "app.kubernetes.io/instance": format!("app{i}"), "helm.sh/chart": "web-1.2.3"});
    metadata["annotations"] = json!({
        "kubernetes.io/ingress.class": "traefik",
        "meta.helm.sh/release-name": format!("app{i}"),
        "meta.helm.sh/release-namespace": namespace,
        "traefik.ingress.kubernetes.io/router.tls": "true",
    });
    metadata["managedFields"] = json!([{
        "apiVersion": "networking.k8s.io/v1", "fieldsType": "FieldsV1", "manager": "helm",
        "operation": "Update", "time": "2026-03-02T09:16:21Z",
        "fieldsV1": {"f:metadata": {"f:annotations": {".": {}, "f:kubernetes.io/ingress.class": {}}}, "f:spec": {"f:rules": {}, "f:tls": {}}}
    }]);
    let host = format!("web-app{i}.apps.example.com");
    json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": metadata,
        "spec": {
            "tls": [{"hosts": [host], "secretName": "web-tls"}],
            "rules": [{"host": host, "http": {"paths": [{"path": "/", "pathType": "Prefix",
                "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]
        },
        "status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.10"}]}}
    })
}

fn deployment(i: usize) -> Value {
    let name = format!("styrmin-app{i}");
    json!({
        "apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminDeployment",
        "metadata": meta(&name, Some(&name), i),
        "spec": {"environmentId": format!("env{}", i % 20), "role": "application", "ingressClass": format!("c{i}")},
        "status": {"phase": "RUNNING", "lastDeployed": {"dedicatedIngress": {}}}
    })
}

fn answers(n: usize) -> Vec<(String, Answer)> {
    let v1 = |path: &str| format!("/api/v1/{path}");
    vec![
        ("/version".into(), Answer::Body(json!({"major": "1", "minor": "33", "gitVersion": "v1.33.1"}).to_string())),
        ("/apis/styrmin.io/v1alpha1/styrminclusters".into(), list("styrmin.io/v1alpha1", "StyrminClusterList",
            vec![json!({"apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminCluster", "metadata": meta("default", None, 0), "spec": {"ingressClass": "traefik"}})])),
        ("/apis/styrmin.io/v1alpha1/styrminenvironments".into(), list("styrmin.io/v1alpha1", "StyrminEnvironmentList",
            (0..20).map(|e| json!({"apiVersion": "styrmin.io/v1alpha1", "kind": "StyrminEnvironment", "metadata": meta(&format!("env{e}"), None, e), "spec": {"dedicatedIngress": {}}})).collect())),
        ("/apis/styrmin.io/v1alpha1/styrmindeployments".into(), list("styrmin.io/v1alpha1", "StyrminDeploymentList", (0..n).map(deployment).collect())),
        ("/apis/networking.k8s.io/v1/ingresses".into(), list("networking.k8s.io/v1", "IngressList", (0..n).map(ingress).collect())),
        ("/apis/networking.k8s.io/v1/ingressclasses".into(), list("networking.k8s.io/v1", "IngressClassList",
            ["traefik", "haproxy"].iter().enumerate().map(|(i, name)| json!({
                "apiVersion": "networking.k8s.io/v1", "kind": "IngressClass", "metadata": meta(name, None, i),
                "spec": {"controller": format!("example.com/{name}")}
            })).collect())),
        (v1("services"), list("v1", "ServiceList", (0..n / 10).map(|i| json!({
            "apiVersion": "v1", "kind": "Service", "metadata": meta("db", Some(&format!("styrmin-app{i}")), i),
            "spec": {"type": "ExternalName", "externalName": format!("db.styrmin-app{}.svc.cluster.local", i + 1)}
        })).collect())),
        (v1("namespaces"), list("v1", "NamespaceList", (0..n).map(|i| json!({
            "apiVersion": "v1", "kind": "Namespace", "metadata": meta(&format!("styrmin-app{i}"), None, i),
            "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}
        })).collect())),
    ]
}

fn param<'a>(query: &'a str, name: &str) -> Option<&'a str> {
    query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
}

fn serve(stream: TcpStream, answers: &[(String, Answer)]) -> std::io::Result<()> {
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header)? == 0 || header.trim().is_empty() {
                break;
            }
        }
        let target = line.split_whitespace().nth(1).unwrap_or("");
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        if query
            .split('&')
            .any(|p| p == "watch=true" || p == "watch=1")
        {
            // Held open, no events, until the client goes.
            writer.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")?;
            writer.flush()?;
            let mut rest = Vec::new();
            let _ = std::io::Read::read_to_end(&mut reader, &mut rest);
            return Ok(());
        }
        let start = param(query, "continue")
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let limit = param(query, "limit")
            .and_then(|l| l.parse().ok())
            .unwrap_or(usize::MAX);
        let (status, body) = match answers.iter().find(|(p, _)| p == path) {
            Some((_, Answer::Body(body))) => ("200 OK", body.clone()),
            Some((_, Answer::List(list))) => ("200 OK", list.page(start, limit)),
            None => (
                "404 Not Found",
                r#"{"kind":"Status","apiVersion":"v1","status":"Failure","code":404}"#.to_owned(),
            ),
        };
        write!(
            writer,
            "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )?;
        writer.flush()?;
    }
}

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:18450".into());
    let n: usize = args.next().and_then(|n| n.parse().ok()).unwrap_or(10_000);
    let answers = Arc::new(answers(n));
    let listener = TcpListener::bind(&addr)?;
    eprintln!("bench_apiserver: {n} objects of each kind on {addr}");
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let answers = Arc::clone(&answers);
        std::thread::spawn(move || serve(stream, &answers));
    }
    Ok(())
}
