//! A stand-in for a Kubernetes API server on loopback (plain HTTP/1.1), for the tests: real
//! `helm` and real `kube::Client`s (kube-rs watchers and reflectors) talk to it. There is no
//! kube-apiserver in the tests; this plays the recorded answers of one.
//!
//! What a `GET` gets, in this order:
//!
//! - the next answer queued for its path with [`FakeApiServer::answer`] (a list page,
//!   `/version`), each answer sent once;
//! - the object stored for its path with [`FakeApiServer::serve_object`], as often as asked
//!   (Helm's `lookup`);
//! - for a server made with [`FakeApiServer::with_discovery`] (the Helm tests): API discovery
//!   for a fixed set of resource types, and 404 for everything else, so no object "exists";
//! - for a server made with [`FakeApiServer::scripted`] (the kube-rs tests): nothing yet — the
//!   request waits until something is queued, so a test can hold one resource's initial
//!   list back and look at the webhook meanwhile.
//!
//! A `?watch=true` request is answered with the items queued by [`FakeApiServer::watch`] (the
//! API server's JSON lines, one chunk each, of one chunked response, as it streams them);
//! [`WatchItem::End`] ends that response cleanly (the API server does so at the watch's
//! timeout and after an `ERROR` event) and [`WatchItem::Drop`] cuts the TCP connection in
//! the middle of it.
//!
//! Every request is recorded ([`FakeApiServer::requests`]). Anything but `GET` gets 405, so
//! a test can assert that a dry run wrote nothing, except under the path prefixes a test
//! opens with [`FakeApiServer::accept_writes`]: there the fake keeps the objects written
//! (create, replace with optimistic concurrency, server-side apply, merge patch, JSON patch
//! with optimistic concurrency, delete, get, list; the module `store`), and
//! [`FakeApiServer::fail_writes`] makes the next writes fail.
//!
//! It is written on `std::net` rather than an HTTP server crate because a request that waits
//! must notice its client leaving (a kube-rs client that gives up and retries) and leave
//! the queued answer to the retry; [`client_alive`] peeks at the socket for that.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::io::{BufRead, BufReader, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::Value;

mod discovery;
mod store;

/// One request the fake received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    pub path: String,
    /// The query string, without `?`.
    pub query: String,
    /// The body, as sent (empty for a `GET`).
    pub body: String,
    /// The headers, names in lower case.
    pub headers: Vec<(String, String)>,
}

impl Request {
    /// Whether it is a watch (`watch=true` or `watch=1`).
    pub fn is_watch(&self) -> bool {
        self.param("watch").is_some_and(|v| v == "true" || v == "1")
    }

    /// A header's value (`name` in lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// A query parameter's value (not percent-decoded).
    pub fn param(&self, name: &str) -> Option<&str> {
        self.query
            .split('&')
            .filter_map(|pair| pair.split_once('='))
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value)
    }
}

/// `METHOD /path?query`, as in the request line.
impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.method, self.path)?;
        if !self.query.is_empty() {
            write!(f, "?{}", self.query)?;
        }
        Ok(())
    }
}

/// What a watch response does next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WatchItem {
    /// One event line (a JSON object), sent as one chunk.
    Line(String),
    /// The end of the response: the last chunk, then the connection is closed.
    End,
    /// The connection is cut without ending the response.
    Drop,
}

/// What a `GET` of a path gets when nothing is queued or stored for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Otherwise {
    /// API discovery, or 404.
    Discovery,
    /// It waits until an answer is queued.
    Wait,
}

#[derive(Debug)]
struct State {
    otherwise: Otherwise,
    answers: HashMap<String, VecDeque<(u16, String)>>,
    objects: HashMap<String, String>,
    watches: HashMap<String, VecDeque<WatchItem>>,
    requests: Vec<Request>,
    /// Path prefixes whose requests the object store answers.
    writable: Vec<String>,
    store: store::Store,
    /// Under which prefix how many of the next writes fail, and with which status.
    failing_writes: (String, usize, u16),
    /// Under which prefix writes wait how long before they are answered (a loaded API
    /// server); only those are counted in flight.
    slow_writes: (String, Duration),
}

impl State {
    /// The answer to a `GET` of `path` now, if there is one (see the module's docs).
    fn answer(&mut self, path: &str) -> Option<(u16, String)> {
        if let Some(queued) = self.answers.get_mut(path).and_then(VecDeque::pop_front) {
            return Some(queued);
        }
        if let Some(object) = self.objects.get(path) {
            return Some((200, object.clone()));
        }
        match self.otherwise {
            Otherwise::Discovery => Some(
                discovery::answer(path)
                    .map_or_else(|| (404, status_json(404, "NotFound")), |body| (200, body)),
            ),
            Otherwise::Wait => None,
        }
    }
}

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    changed: Condvar,
    stop: AtomicBool,
    /// Writes being answered now, and the most at once so far.
    writes_in_flight: AtomicUsize,
    most_writes_in_flight: AtomicUsize,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Waits (in short steps, so that a stopped server ends its threads) until `take` finds
    /// something; `None` once the server stops or `alive` says the client has gone.
    fn wait_for<T>(
        &self,
        mut take: impl FnMut(&mut State) -> Option<T>,
        alive: impl Fn() -> bool,
    ) -> Option<T> {
        let mut state = self.lock();
        loop {
            if self.stop.load(Ordering::Relaxed) || !alive() {
                return None;
            }
            if let Some(found) = take(&mut state) {
                self.changed.notify_all();
                return Some(found);
            }
            state = self
                .changed
                .wait_timeout(state, Duration::from_millis(50))
                .map(|(guard, _)| guard)
                .unwrap_or_else(|poisoned| poisoned.into_inner().0);
        }
    }
}

/// The fake API server; stops when dropped.
#[derive(Debug)]
pub struct FakeApiServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl FakeApiServer {
    /// For Helm (`helm install --dry-run` needs a reachable cluster even for a client-side
    /// dry run): discovery, stored objects, 404 for every other object. Helm must run with
    /// `--disable-openapi-validation` (no OpenAPI schema is served).
    pub fn with_discovery() -> Self {
        Self::start(Otherwise::Discovery)
    }

    /// For kube-rs clients: only what the test queues; a `GET` with nothing queued waits.
    pub fn scripted() -> Self {
        Self::start(Otherwise::Wait)
    }

    /// Listens on a free port of 127.0.0.1.
    fn start(otherwise: Otherwise) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .unwrap_or_else(|e| panic!("binding the fake API server: {e}"));
        let addr = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("the fake API server's address: {e}"));
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                otherwise,
                answers: HashMap::new(),
                objects: HashMap::new(),
                watches: HashMap::new(),
                requests: Vec::new(),
                writable: Vec::new(),
                store: store::Store::default(),
                failing_writes: (String::new(), 0, 500),
                slow_writes: (String::new(), Duration::ZERO),
            }),
            changed: Condvar::new(),
            stop: AtomicBool::new(false),
            writes_in_flight: AtomicUsize::new(0),
            most_writes_in_flight: AtomicUsize::new(0),
        });
        let server = Arc::clone(&shared);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if server.stop.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                // Small answers go out at once (no Nagle delay against the client's delayed ACK).
                let _ = stream.set_nodelay(true);
                let server = Arc::clone(&server);
                std::thread::spawn(move || serve(stream, &server));
            }
        });
        Self { addr, shared }
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Writes a kubeconfig for this server to `path` (with `namespace` as the context's
    /// namespace, if given).
    pub fn write_kubeconfig(&self, path: &Path, namespace: Option<&str>) {
        let namespace = namespace
            .map(|n| format!("\n    namespace: {n}"))
            .unwrap_or_default();
        let config = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: {}\n\
             users:\n- name: fake\n  user: {{}}\ncontexts:\n- name: fake\n  context:\n    \
             cluster: fake\n    user: fake{namespace}\ncurrent-context: fake\n",
            self.url()
        );
        std::fs::write(path, config)
            .unwrap_or_else(|e| panic!("writing kubeconfig {}: {e}", path.display()));
    }

    /// Queues the answer to the next non-watch GET of `path`.
    pub fn answer(&self, path: &str, status: u16, body: impl Into<String>) {
        self.shared
            .lock()
            .answers
            .entry(path.to_owned())
            .or_default()
            .push_back((status, body.into()));
        self.shared.changed.notify_all();
    }

    /// From now on, a GET of `path` with nothing queued answers `object` (JSON).
    pub fn serve_object(&self, path: &str, object: &Value) {
        self.shared
            .lock()
            .objects
            .insert(path.to_owned(), object.to_string());
        self.shared.changed.notify_all();
    }

    /// Queues watch items for `path`.
    pub fn watch(&self, path: &str, items: impl IntoIterator<Item = WatchItem>) {
        self.shared
            .lock()
            .watches
            .entry(path.to_owned())
            .or_default()
            .extend(items);
        self.shared.changed.notify_all();
    }

    /// Queues every non-blank line of `text` as a watch event of `path`.
    pub fn watch_lines(&self, path: &str, text: &str) {
        self.watch(
            path,
            text.lines()
                .filter(|line| !line.trim().is_empty())
                .map(|line| WatchItem::Line(line.to_owned())),
        );
    }

    /// From now on, every request under `prefix` (e.g. `/apis/coordination.k8s.io/v1/`) is
    /// answered by the fake's object store, writes included.
    pub fn accept_writes(&self, prefix: &str) {
        self.shared.lock().writable.push(prefix.to_owned());
        self.shared.changed.notify_all();
    }

    /// The next `count` writes (any method but `GET`) under the writable `prefix` fail with
    /// `status`.
    pub fn fail_writes(&self, prefix: &str, count: usize, status: u16) {
        self.shared.lock().failing_writes = (prefix.to_owned(), count, status);
    }

    /// From now on, every write (any method but `GET`) under `prefix` is answered after
    /// `delay`, as a loaded API server answers; writes on separate connections wait side by
    /// side.
    pub fn delay_writes(&self, prefix: &str, delay: Duration) {
        self.shared.lock().slow_writes = (prefix.to_owned(), delay);
    }

    /// The most writes under the prefix of [`FakeApiServer::delay_writes`] that were being
    /// answered at one time.
    pub fn most_writes_in_flight(&self) -> usize {
        self.shared.most_writes_in_flight.load(Ordering::Relaxed)
    }

    /// Every object stored under `prefix`, by path.
    pub fn stored(&self, prefix: &str) -> std::collections::BTreeMap<String, Value> {
        self.shared.lock().store.objects(prefix)
    }

    /// How many objects are stored under `prefix`.
    pub fn stored_count(&self, prefix: &str) -> usize {
        self.shared.lock().store.count(prefix)
    }

    /// Removes a stored object, as another client (the garbage collector) would.
    pub fn remove_stored(&self, path: &str) -> Option<Value> {
        self.shared.lock().store.remove(path)
    }

    /// Stores an object, as another client would.
    pub fn put_stored(&self, path: &str, object: Value) {
        self.shared.lock().store.put(path, object);
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Request> {
        self.shared.lock().requests.clone()
    }

    /// Every request so far that was not a `GET` (each answered 405), for a test that
    /// asserts a dry run wrote nothing.
    pub fn writes(&self) -> Vec<Request> {
        self.requests()
            .into_iter()
            .filter(|r| r.method != "GET")
            .collect()
    }

    /// What a dry run against this server must show: it wrote nothing, and it read (`GET`) a
    /// path that `read` accepts, so the client did reach this server; `unread` says what that
    /// read was for.
    pub fn assert_dry_run(&self, read: impl Fn(&str) -> bool, unread: &str) {
        let writes = self.writes();
        assert!(
            writes.is_empty(),
            "a dry run wrote to the API server: {writes:#?}"
        );
        let requests = self.requests();
        assert!(
            requests.iter().any(|r| r.method == "GET" && read(&r.path)),
            "{unread}: {requests:?}"
        );
    }

    /// Whether everything queued for `path` has been sent.
    pub fn drained(&self, path: &str) -> bool {
        let state = self.shared.lock();
        state.answers.get(path).is_none_or(VecDeque::is_empty)
            && state.watches.get(path).is_none_or(VecDeque::is_empty)
    }

    /// Waits until the `n`-th request (counting from 1) that `matches` has arrived, and returns
    /// it; fails the test after `timeout`.
    pub fn wait_for_request(
        &self,
        what: &str,
        n: usize,
        timeout: Duration,
        matches: impl Fn(&Request) -> bool,
    ) -> Request {
        let deadline = Instant::now() + timeout;
        let found = self.shared.wait_for(
            |state| {
                state
                    .requests
                    .iter()
                    .filter(|r| matches(r))
                    .nth(n - 1)
                    .cloned()
            },
            || Instant::now() < deadline,
        );
        found.unwrap_or_else(|| {
            panic!(
                "no request #{n} for {what} within {timeout:?}; requests: {:#?}",
                self.requests()
            )
        })
    }
}

impl Drop for FakeApiServer {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        self.shared.changed.notify_all();
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.addr);
    }
}

/// Whether the client still holds the connection (no EOF waiting to be read).
fn client_alive(stream: &TcpStream) -> bool {
    if stream.set_nonblocking(true).is_err() {
        return false;
    }
    let mut byte = [0u8; 1];
    let alive = match stream.peek(&mut byte) {
        Ok(0) => false,
        Ok(_) => true,
        Err(e) => e.kind() == std::io::ErrorKind::WouldBlock,
    };
    let _ = stream.set_nonblocking(false);
    alive
}

/// One request as read: its request line, headers and body.
type HttpRequest = (String, Vec<(String, String)>, Vec<u8>);

/// Reads one HTTP/1.1 request (its request line, headers and its body, by
/// `Content-Length`); `None` when the client closed the connection.
fn read_http_request(reader: &mut impl BufRead) -> Option<HttpRequest> {
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
        return None;
    }
    let mut content_length = 0usize;
    let mut headers = Vec::new();
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).unwrap_or(0) == 0 {
            return None;
        }
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                content_length = value.trim().parse().unwrap_or(0);
            }
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
    let mut body = vec![0u8; content_length];
    reader.read_exact(&mut body).ok()?;
    Some((request_line, headers, body))
}

fn serve(stream: TcpStream, shared: &Shared) {
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    while let Some((request_line, headers, body)) = read_http_request(&mut reader) {
        let mut parts = request_line.split_whitespace();
        let method = parts.next().unwrap_or("").to_owned();
        let target = parts.next().unwrap_or("");
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let request = Request {
            method,
            path: path.to_owned(),
            query: query.to_owned(),
            body: String::from_utf8_lossy(&body).into_owned(),
            headers,
        };
        let slow = {
            let state = shared.lock();
            let (prefix, delay) = &state.slow_writes;
            (request.method != "GET" && !prefix.is_empty() && request.path.starts_with(prefix))
                .then_some(*delay)
        };
        if let Some(delay) = slow {
            let now = shared.writes_in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            shared
                .most_writes_in_flight
                .fetch_max(now, Ordering::SeqCst);
            std::thread::sleep(delay);
        }
        let stored = {
            let mut state = shared.lock();
            state.requests.push(request.clone());
            shared.changed.notify_all();
            if !request.is_watch()
                && state
                    .writable
                    .iter()
                    .any(|p| request.path.starts_with(p.as_str()))
            {
                let failing = &mut state.failing_writes;
                Some(
                    if request.method != "GET"
                        && failing.1 > 0
                        && request.path.starts_with(failing.0.as_str())
                    {
                        failing.1 -= 1;
                        let code = failing.2;
                        (code, status_json(code, "InternalError"))
                    } else {
                        let selector = request.param("labelSelector");
                        let patch = |kind: &str| {
                            request.method == "PATCH"
                                && request
                                    .header("content-type")
                                    .is_some_and(|t| t.starts_with(kind))
                        };
                        if patch("application/merge-patch+json") {
                            state.store.merge_patch(&request.path, &body)
                        } else if patch("application/json-patch+json") {
                            state.store.json_patch(&request.path, &body)
                        } else {
                            state
                                .store
                                .handle(&request.method, &request.path, selector, &body)
                        }
                    },
                )
            } else {
                None
            }
        };
        if slow.is_some() {
            shared.writes_in_flight.fetch_sub(1, Ordering::SeqCst);
        }
        if let Some((status, body)) = stored {
            if respond(&mut writer, status, &body).is_err() {
                return;
            }
            continue;
        }
        if request.method != "GET" {
            if respond(&mut writer, 405, &status_json(405, "MethodNotAllowed")).is_err() {
                return;
            }
            continue;
        }
        if request.is_watch() {
            stream_watch(&mut writer, reader.get_ref(), shared, &request.path);
            return;
        }
        let conn = reader.get_ref();
        let Some((status, body)) =
            shared.wait_for(|state| state.answer(&request.path), || client_alive(conn))
        else {
            return;
        };
        if respond(&mut writer, status, &body).is_err() {
            return;
        }
    }
}

/// A `Status` object, as the API server answers a failed request.
fn status_json(code: u16, reason: &str) -> String {
    serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason, "code": code
    })
    .to_string()
}

fn respond(writer: &mut TcpStream, status: u16, body: &str) -> std::io::Result<()> {
    let reason = match status {
        200 => "OK",
        201 => "Created",
        404 => "Not Found",
        409 => "Conflict",
        405 => "Method Not Allowed",
        410 => "Gone",
        500 => "Internal Server Error",
        _ => "Status",
    };
    write!(
        writer,
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    writer.flush()
}

/// One watch response: chunked, one event per chunk, until `End`, `Drop` or a gone client.
fn stream_watch(writer: &mut TcpStream, conn: &TcpStream, shared: &Shared, path: &str) {
    let header = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
                  Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
    if writer
        .write_all(header.as_bytes())
        .and_then(|()| writer.flush())
        .is_err()
    {
        return;
    }
    loop {
        let Some(item) = shared.wait_for(
            |state| state.watches.get_mut(path).and_then(VecDeque::pop_front),
            || client_alive(conn),
        ) else {
            return;
        };
        match item {
            WatchItem::Line(line) => {
                let chunk = format!("{line}\n");
                let sent = write!(writer, "{:x}\r\n{chunk}\r\n", chunk.len())
                    .and_then(|()| writer.flush());
                if sent.is_err() {
                    return;
                }
            }
            WatchItem::End => {
                let _ = writer.write_all(b"0\r\n\r\n").and_then(|()| writer.flush());
                let _ = writer.shutdown(Shutdown::Both);
                return;
            }
            WatchItem::Drop => {
                let _ = writer.shutdown(Shutdown::Both);
                return;
            }
        }
    }
}
