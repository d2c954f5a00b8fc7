//! A scripted stand-in for a Kubernetes API server, for a real `kube::Client` (kube-rs
//! watchers and reflectors) to talk to over plain HTTP on loopback.
//!
//! A test queues what the server answers, path by path, and the server plays it to the
//! client in order:
//!
//! - [`FakeKubeApi::answer`] queues the body of the next non-watch `GET` of a path (a list
//!   page, `/version`). A request for which nothing is queued waits until something is, so a
//!   test can hold one resource's initial list back and look at the webhook meanwhile.
//! - [`FakeKubeApi::watch_lines`] queues watch events (the API server's JSON lines) for the
//!   next or current `?watch=true` request of a path, sent as chunks of one chunked response,
//!   as the API server streams them; [`WatchItem::End`] ends that response cleanly (the API
//!   server does so at the watch's timeout and after an `ERROR` event) and [`WatchItem::Drop`]
//!   cuts the TCP connection in the middle of it.
//!
//! Every request is recorded ([`FakeKubeApi::requests`]). Anything but `GET` gets 405.

use std::collections::{HashMap, VecDeque};
use std::io::{BufReader, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// One request the fake received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    pub path: String,
    /// The query string, without `?`.
    pub query: String,
}

impl Request {
    /// Whether it is a watch (`watch=true` or `watch=1`).
    pub fn is_watch(&self) -> bool {
        self.param("watch").is_some_and(|v| v == "true" || v == "1")
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

#[derive(Debug, Default)]
struct State {
    answers: HashMap<String, VecDeque<(u16, String)>>,
    watches: HashMap<String, VecDeque<WatchItem>>,
    requests: Vec<Request>,
}

#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
    changed: Condvar,
    stop: AtomicBool,
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
pub struct FakeKubeApi {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl FakeKubeApi {
    /// Listens on a free port of 127.0.0.1.
    pub fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .unwrap_or_else(|e| panic!("binding the fake Kubernetes API: {e}"));
        let addr = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("the fake Kubernetes API's address: {e}"));
        let shared = Arc::new(Shared::default());
        let server = Arc::clone(&shared);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if server.stop.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(stream) = stream else { continue };
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

    /// Every request so far.
    pub fn requests(&self) -> Vec<Request> {
        self.shared.lock().requests.clone()
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

impl Drop for FakeKubeApi {
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

fn serve(stream: TcpStream, shared: &Shared) {
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    while let Some((request_line, _body)) = crate::read_http_request(&mut reader) {
        let mut parts = request_line.split_whitespace();
        let method = parts.next().unwrap_or("").to_owned();
        let target = parts.next().unwrap_or("");
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let request = Request {
            method,
            path: path.to_owned(),
            query: query.to_owned(),
        };
        {
            shared.lock().requests.push(request.clone());
            shared.changed.notify_all();
        }
        if request.method != "GET" {
            let body = r#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"MethodNotAllowed","code":405}"#;
            if respond(&mut writer, 405, body).is_err() {
                return;
            }
            continue;
        }
        if request.is_watch() {
            stream_watch(&mut writer, reader.get_ref(), shared, &request.path);
            return;
        }
        let conn = reader.get_ref();
        let Some((status, body)) = shared.wait_for(
            |state| {
                state
                    .answers
                    .get_mut(&request.path)
                    .and_then(VecDeque::pop_front)
            },
            || client_alive(conn),
        ) else {
            return;
        };
        if respond(&mut writer, status, &body).is_err() {
            return;
        }
    }
}

fn respond(writer: &mut TcpStream, status: u16, body: &str) -> std::io::Result<()> {
    let reason = match status {
        200 => "OK",
        404 => "Not Found",
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
