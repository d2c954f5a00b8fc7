//! The HTTP side of one class's controller: every request is answered by the Ingress of the
//! class whose host the `Host` header names, as the cache last knew it.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{CONTENT_TYPE, HOST};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

use super::cache::Cache;
use super::shared::Shared;

/// The longest part of a `Host` header echoed in a 404's body.
const ECHOED_HOST: usize = 253;

/// The status and body for a request with `host` (its `Host` header, if any).
pub fn answer(cache: &Cache, class: &str, host: Option<&str>) -> (StatusCode, String) {
    match host.and_then(|host| cache.route(host)) {
        Some(key) => (StatusCode::OK, format!("class={class} ingress={key}\n")),
        None => {
            let host: String = host.unwrap_or("").chars().take(ECHOED_HOST).collect();
            (
                StatusCode::NOT_FOUND,
                format!("class={class}: no Ingress for host {host:?}\n"),
            )
        }
    }
}

/// Accepts connections until aborted. Connections are tasks of this one, so that aborting
/// it also cuts every open connection, as a crashed controller's would be.
pub async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    connections.spawn(serve_connection(stream, Arc::clone(&shared)));
                }
                Err(error) => {
                    // Out of file descriptors, say: wait rather than spin.
                    tracing::warn!(class = %shared.class, %error, "accepting a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

async fn serve_connection(stream: TcpStream, shared: Arc<Shared>) {
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        let shared = Arc::clone(&shared);
        async move { Ok::<_, Infallible>(respond(&shared, &request)) }
    });
    let served = hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(stream), service)
        .await;
    if let Err(error) = served {
        tracing::debug!(%error, "an HTTP connection ended");
    }
}

fn respond(shared: &Shared, request: &Request<Incoming>) -> Response<Full<Bytes>> {
    let host = request
        .headers()
        .get(HOST)
        .and_then(|value| value.to_str().ok());
    let (status, body) = answer(&shared.lock().cache, &shared.class, host);
    let counter = if status == StatusCode::OK {
        &shared.counters.answered
    } else {
        &shared.counters.not_found
    };
    counter.fetch_add(1, Ordering::Relaxed);
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// `GET http://ADDRESS/` with `Host: host`, as a migration's probe sends it: the status and
/// body, or the error of a controller that does not answer (refused, cut, malformed).
pub async fn get(address: SocketAddr, host: &str) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect(address).await?;
    let request = format!("GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await?;
    let answer = String::from_utf8_lossy(&answer);
    let malformed = || std::io::Error::new(std::io::ErrorKind::InvalidData, answer.to_string());
    let (head, body) = answer.split_once("\r\n\r\n").ok_or_else(malformed)?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(malformed)?;
    Ok((status, body.to_owned()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

    use k8s_openapi::api::networking::v1::Ingress;
    use kube::runtime::watcher;
    use serde_json::json;

    use super::*;

    #[test]
    fn a_known_host_names_class_and_ingress_an_unknown_one_is_404() {
        let mut cache = Cache::new("a", "127.0.0.11");
        let ingress: Ingress = serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"ingressClassName": "a", "rules": [{"host": "web.test"}]}
        }))
        .unwrap();
        cache.apply(watcher::Event::Apply(ingress));
        assert_eq!(
            answer(&cache, "a", Some("web.test:8080")),
            (StatusCode::OK, "class=a ingress=shop/web\n".to_owned())
        );
        let (status, body) = answer(&cache, "a", Some("other.test"));
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert!(body.contains("other.test"), "{body}");
        assert_eq!(answer(&cache, "a", None).0, StatusCode::NOT_FOUND);
        let long = "x".repeat(10_000);
        assert!(answer(&cache, "a", Some(&long)).1.len() < 400);
    }
}
