//! Measurements on loopback: the API server's `apiserver_request_total`, a metric of
//! Prometheus text, one plain HTTP request, and a process's resident memory.

use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::time::Duration;

use anyhow::{Context as _, Result, anyhow, bail};

/// VmRSS and VmHWM of `/proc/PID/status`, in KiB.
#[derive(Debug, Clone, Copy, Default)]
pub struct Memory {
    pub rss_kib: u64,
    pub peak_kib: u64,
}

/// VmRSS and VmHWM of process `pid`.
pub fn memory_of(pid: u32) -> Result<Memory> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let field = |name: &str| -> Result<u64> {
        let line = status
            .lines()
            .find(|l| l.starts_with(name))
            .ok_or_else(|| anyhow!("no {name} in /proc/{pid}/status"))?;
        Ok(line[name.len()..]
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()?)
    };
    Ok(Memory {
        rss_kib: field("VmRSS:")?,
        peak_kib: field("VmHWM:")?,
    })
}

/// Requests by (resource, verb, response code).
pub type Requests = BTreeMap<(String, String, String), f64>;

/// `apiserver_request_total` summed by (resource, verb, code).
pub async fn apiserver_requests(client: &kube::Client) -> Result<Requests> {
    let text = client
        .request_text(http::Request::get("/metrics").body(Vec::new())?)
        .await?;
    let mut counts = BTreeMap::new();
    for (labels, value) in series(&text, "apiserver_request_total") {
        let key = (
            label(labels, "resource"),
            label(labels, "verb"),
            label(labels, "code"),
        );
        *counts.entry(key).or_default() += value;
    }
    Ok(counts)
}

/// The requests of `end` not yet in `start`.
pub fn difference(end: &Requests, start: &Requests) -> Requests {
    end.iter()
        .map(|(key, value)| (key.clone(), value - start.get(key).copied().unwrap_or(0.0)))
        .filter(|(_, value)| *value > 0.0)
        .collect()
}

/// The series of metric `name` in Prometheus text: (labels between the braces, value).
pub fn series<'a>(text: &'a str, name: &'a str) -> impl Iterator<Item = (&'a str, f64)> + 'a {
    text.lines().filter_map(move |line| {
        let rest = line.strip_prefix(name)?;
        let (labels, value) = if let Some(braced) = rest.strip_prefix('{') {
            braced.split_once("} ")?
        } else {
            ("", rest.strip_prefix(' ')?)
        };
        Some((labels, value.trim().parse().ok()?))
    })
}

/// The first value of metric `name`.
pub fn metric(text: &str, name: &str) -> Option<f64> {
    series(text, name).map(|(_, value)| value).next()
}

/// The value of label `name` in the text between a series' braces (empty: none).
pub fn label(labels: &str, name: &str) -> String {
    labels
        .split(',')
        .find_map(|pair| pair.strip_prefix(name)?.strip_prefix("=\""))
        .map(|v| v.trim_end_matches('"').to_owned())
        .unwrap_or_default()
}

/// One plain HTTP/1.1 request on loopback (the webhook's metrics, etcd's metrics and gateway).
pub fn http(address: &str, method: &str, path: &str, body: &str) -> Result<String> {
    let mut stream =
        TcpStream::connect(address).with_context(|| format!("connecting {address}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(300)))?;
    write!(
        stream,
        "{method} {path} HTTP/1.0\r\nHost: {address}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    let (head, body) = answer
        .split_once("\r\n\r\n")
        .ok_or_else(|| anyhow!("{method} {address}{path}: no HTTP answer"))?;
    // HTTP/1.0: the answer is never chunked, its body ends with the connection.
    if !head
        .lines()
        .next()
        .is_some_and(|status| status.contains(" 200 "))
    {
        bail!("{method} {address}{path}: {head}");
    }
    Ok(body.to_owned())
}
