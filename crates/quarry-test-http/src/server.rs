//! The server, its requests and replies, and a CGI gateway for replies from a program.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long a reply that hangs or is held open waits for the client to go away.
const HOLD_LIMIT: Duration = Duration::from_secs(120);

/// One request as the server received it.
#[derive(Debug, Clone)]
pub struct Request {
    /// `GET`, `POST`, … as sent.
    pub method: String,
    /// The request target: path and query, as sent.
    pub target: String,
    /// Header names and values in the order sent, names as sent.
    pub headers: Vec<(String, String)>,
    /// The body (a chunked body is de-chunked).
    pub body: Vec<u8>,
}

impl Request {
    /// The first header with this name, compared case-insensitively.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The target without its query.
    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or_default()
    }

    /// The body as text (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON, or `Value::Null` when it is not JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

/// How a reply ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// `Content-Length`, the whole body, close.
    Complete,
    /// `Content-Length` of the whole body, the first half of it, close: a lost connection.
    Truncated,
    /// No `Content-Length`; the body, then the connection stays open until the client closes
    /// it (a live event stream).
    HeldOpen,
    /// Nothing is written; the connection stays open until the client gives up.
    Hang,
}

/// What the server writes back.
#[derive(Debug, Clone)]
pub struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    ending: Ending,
}

impl Reply {
    /// This status with an empty body.
    pub fn empty(status: u16) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            body: Vec::new(),
            ending: Ending::Complete,
        }
    }

    /// This status, content type and body.
    pub fn status(status: u16, content_type: &str, body: impl Into<Vec<u8>>) -> Reply {
        Reply {
            body: body.into(),
            ..Reply::empty(status)
        }
        .header("Content-Type", content_type)
    }

    /// 200 with this content type and body.
    pub fn ok(content_type: &str, body: impl Into<Vec<u8>>) -> Reply {
        Reply::status(200, content_type, body)
    }

    /// This status with a JSON body.
    pub fn json(status: u16, body: &serde_json::Value) -> Reply {
        Reply::status(status, "application/json", body.to_string())
    }

    /// 302 to this location.
    pub fn redirect(location: &str) -> Reply {
        Reply::empty(302).header("Location", location)
    }

    /// An event stream carrying `body`; with `hold_open` the connection then stays open until
    /// the client closes it, otherwise it is closed.
    pub fn event_stream(body: impl Into<Vec<u8>>, hold_open: bool) -> Reply {
        let reply =
            Reply::status(200, "text/event-stream", body).header("Cache-Control", "no-cache");
        Reply {
            ending: if hold_open {
                Ending::HeldOpen
            } else {
                Ending::Complete
            },
            ..reply
        }
    }

    /// Announces the whole body's length, sends the first half and closes the connection.
    pub fn truncated(content_type: &str, body: impl Into<Vec<u8>>) -> Reply {
        Reply {
            ending: Ending::Truncated,
            ..Reply::ok(content_type, body)
        }
    }

    /// Reads the request and never answers (until the client closes the connection).
    pub fn hang() -> Reply {
        Reply {
            ending: Ending::Hang,
            ..Reply::empty(200)
        }
    }

    /// Adds a header.
    pub fn header(mut self, name: &str, value: impl Into<String>) -> Reply {
        self.headers.push((name.to_owned(), value.into()));
        self
    }
}

type Handler = Arc<dyn Fn(&Request) -> Reply + Send + Sync>;

/// A server on a loopback port; stops accepting when dropped.
pub struct Server {
    addr: SocketAddr,
    requests: Arc<Mutex<Vec<Request>>>,
    connections: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl Server {
    /// Listens on `127.0.0.1` on a free port.
    ///
    /// # Panics
    /// When no loopback port can be bound (a test cannot run without one).
    pub fn start(handler: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> Server {
        match Server::bind("127.0.0.1:0", handler) {
            Ok(server) => server,
            Err(e) => panic!("bind a loopback port for the test server: {e}"),
        }
    }

    /// Listens on `addr` (`"[::1]:0"`, `"127.0.0.2:0"`, …).
    pub fn bind(
        addr: impl ToSocketAddrs,
        handler: impl Fn(&Request) -> Reply + Send + Sync + 'static,
    ) -> std::io::Result<Server> {
        Server::on(TcpListener::bind(addr)?, handler)
    }

    /// Serves on a listener the test already bound.
    pub fn on(
        listener: TcpListener,
        handler: impl Fn(&Request) -> Reply + Send + Sync + 'static,
    ) -> std::io::Result<Server> {
        let addr = listener.local_addr()?;
        let requests: Arc<Mutex<Vec<Request>>> = Arc::default();
        let connections: Arc<AtomicUsize> = Arc::default();
        let stop: Arc<AtomicBool> = Arc::default();
        let handler: Handler = Arc::new(handler);
        let accept = {
            let (requests, connections, stop) =
                (requests.clone(), connections.clone(), stop.clone());
            std::thread::Builder::new()
                .name(format!("test-http {addr}"))
                .spawn(move || {
                    for stream in listener.incoming() {
                        if stop.load(Ordering::SeqCst) {
                            return;
                        }
                        let Ok(stream) = stream else { continue };
                        connections.fetch_add(1, Ordering::SeqCst);
                        let (requests, handler) = (requests.clone(), handler.clone());
                        std::thread::spawn(move || {
                            let _ = serve(stream, &requests, &*handler);
                        });
                    }
                })?
        };
        Ok(Server {
            addr,
            requests,
            connections,
            stop,
            accept: Some(accept),
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://{addr}`, without a trailing slash.
    pub fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `http://{addr}{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<Request> {
        lock(&self.requests).clone()
    }

    /// The targets of every request received so far.
    pub fn targets(&self) -> Vec<String> {
        lock(&self.requests)
            .iter()
            .map(|r| r.target.clone())
            .collect()
    }

    /// Forgets the requests received so far.
    pub fn clear(&self) {
        lock(&self.requests).clear();
    }

    /// Connections accepted so far (a request refused before sending opens none).
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

/// Answers `request` with a CGI program (RFC 3875): `command` (its program and any
/// environment of its own, e.g. `git http-backend` with `GIT_PROJECT_ROOT`) runs with the
/// request's meta-variables and the request body on its standard input; its `Status:`,
/// `Content-Type:` and other header lines and its body become the reply. A program that
/// cannot start or writes no header is a 502 saying why.
pub fn cgi(mut command: std::process::Command, request: &Request) -> Reply {
    use std::process::Stdio;
    let (path, query) = request
        .target
        .split_once('?')
        .unwrap_or((&request.target, ""));
    command
        .env("GATEWAY_INTERFACE", "CGI/1.1")
        .env("SERVER_PROTOCOL", "HTTP/1.1")
        .env("REQUEST_METHOD", &request.method)
        .env("PATH_INFO", path)
        .env("QUERY_STRING", query)
        .env("CONTENT_LENGTH", request.body.len().to_string())
        .env("REMOTE_ADDR", "127.0.0.1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if let Some(t) = request.header("content-type") {
        command.env("CONTENT_TYPE", t);
    }
    // Headers as HTTP_* meta-variables (`Git-Protocol` → `HTTP_GIT_PROTOCOL`).
    for (k, v) in &request.headers {
        let name = k.to_ascii_uppercase().replace('-', "_");
        if name != "CONTENT_TYPE" && name != "CONTENT_LENGTH" && name != "AUTHORIZATION" {
            command.env(format!("HTTP_{name}"), v);
        }
    }
    if let Some(p) = request.header("git-protocol") {
        command.env("GIT_PROTOCOL", p);
    }
    let mut child = match command.spawn() {
        Ok(c) => c,
        Err(e) => return Reply::status(502, "text/plain", format!("CGI program: {e}")),
    };
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(&request.body);
    }
    let out = match child.wait_with_output() {
        Ok(o) => o.stdout,
        Err(e) => return Reply::status(502, "text/plain", format!("CGI program: {e}")),
    };
    let Some((head_len, sep)) = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|p| (p, 4))
        .or_else(|| out.windows(2).position(|w| w == b"\n\n").map(|p| (p, 2)))
    else {
        return Reply::status(502, "text/plain", "CGI program wrote no header");
    };
    let head = String::from_utf8_lossy(&out[..head_len]).into_owned();
    let mut reply = Reply {
        body: out[head_len + sep..].to_vec(),
        ..Reply::empty(200)
    };
    for line in head.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let (k, v) = (k.trim(), v.trim());
        if k.eq_ignore_ascii_case("status") {
            reply.status = v
                .split_whitespace()
                .next()
                .and_then(|c| c.parse().ok())
                .unwrap_or(500);
        } else {
            reply = reply.header(k, v);
        }
    }
    reply
}

/// A loopback port nothing listens on (bound, then released): for "connection refused" tests.
///
/// # Panics
/// When no loopback port can be bound.
pub fn unused_port() -> u16 {
    match TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()) {
        Ok(addr) => addr.port(),
        Err(e) => panic!("bind a loopback port: {e}"),
    }
}

/// A request log stays usable after a test thread panicked while holding it.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn serve(
    stream: TcpStream,
    log: &Mutex<Vec<Request>>,
    handler: &dyn Fn(&Request) -> Reply,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let Some(request) = read_request(&mut reader)? else {
        return Ok(());
    };
    lock(log).push(request.clone());
    let reply = handler(&request);
    let mut stream = stream;
    if reply.ending == Ending::Hang {
        return wait_for_close(&mut stream);
    }
    let mut head = format!("HTTP/1.1 {} {}\r\n", reply.status, reason(reply.status));
    for (k, v) in &reply.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if reply.ending != Ending::HeldOpen {
        head.push_str(&format!("Content-Length: {}\r\n", reply.body.len()));
    }
    head.push_str("Connection: close\r\n\r\n");
    stream.write_all(head.as_bytes())?;
    match reply.ending {
        Ending::Truncated => stream.write_all(&reply.body[..reply.body.len() / 2])?,
        _ => stream.write_all(&reply.body)?,
    }
    stream.flush()?;
    if reply.ending == Ending::HeldOpen {
        return wait_for_close(&mut stream);
    }
    stream.shutdown(Shutdown::Both)
}

/// Reads one request; `None` when the client closed before sending one.
fn read_request(reader: &mut impl BufRead) -> std::io::Result<Option<Request>> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let mut words = line.split_whitespace();
    let method = words.next().unwrap_or_default().to_owned();
    let target = words.next().unwrap_or_default().to_owned();
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 {
            break;
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.push((k.trim().to_owned(), v.trim().to_owned()));
        }
    }
    let mut request = Request {
        method,
        target,
        headers,
        body: Vec::new(),
    };
    if let Some(len) = request.header("content-length") {
        let len = len.parse().map_err(|_| invalid("bad Content-Length"))?;
        request.body.resize(len, 0);
        reader.read_exact(&mut request.body)?;
    } else if request
        .header("transfer-encoding")
        .is_some_and(|t| t.to_ascii_lowercase().contains("chunked"))
    {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size)?;
            let size = size.trim().split(';').next().unwrap_or_default();
            let n = usize::from_str_radix(size, 16).map_err(|_| invalid("bad chunk size"))?;
            let mut chunk = vec![0; n + 2];
            reader.read_exact(&mut chunk)?;
            if n == 0 {
                break;
            }
            request.body.extend_from_slice(&chunk[..n]);
        }
    }
    Ok(Some(request))
}

fn invalid(what: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_owned())
}

/// Keeps the connection until the client closes it (or [`HOLD_LIMIT`] passes).
fn wait_for_close(stream: &mut TcpStream) -> std::io::Result<()> {
    stream.set_read_timeout(Some(HOLD_LIMIT))?;
    let mut sink = [0u8; 1024];
    while let Ok(n) = stream.read(&mut sink) {
        if n == 0 {
            break;
        }
    }
    Ok(())
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        301 => "Moved Permanently",
        302 => "Found",
        307 => "Temporary Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(addr: SocketAddr, raw: &str) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(raw.as_bytes()).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }

    #[test]
    fn answers_from_the_handler_and_records_the_request() {
        let server = Server::start(|r| Reply::ok("text/plain", format!("you asked {}", r.path())));
        let out = get(
            server.addr(),
            "POST /a/b?q=1 HTTP/1.1\r\nHost: x\r\nX-Key: v\r\nContent-Length: 4\r\n\r\nbody",
        );
        assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
        assert!(out.ends_with("\r\n\r\nyou asked /a/b"), "{out}");
        let seen = server.requests();
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].method, "POST");
        assert_eq!(seen[0].target, "/a/b?q=1");
        assert_eq!(seen[0].header("x-key"), Some("v"));
        assert_eq!(seen[0].text(), "body");
        assert_eq!(server.connections(), 1);
    }

    #[test]
    fn chunked_bodies_are_joined() {
        let server = Server::start(|_| Reply::empty(204));
        get(
            server.addr(),
            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{\"a\r\n4\r\n\":1}\r\n0\r\n\r\n",
        );
        assert_eq!(server.requests()[0].json(), serde_json::json!({"a": 1}));
    }

    #[test]
    fn a_truncated_reply_sends_half_of_what_it_announces() {
        let server = Server::start(|_| Reply::truncated("application/octet-stream", vec![7u8; 10]));
        let out = get(server.addr(), "GET / HTTP/1.1\r\n\r\n");
        assert!(out.contains("Content-Length: 10\r\n"), "{out}");
        assert!(
            out.ends_with("\r\n\r\n\u{7}\u{7}\u{7}\u{7}\u{7}"),
            "{out:?}"
        );
    }

    #[test]
    fn a_hanging_reply_writes_nothing() {
        let server = Server::start(|_| Reply::hang());
        let mut s = TcpStream::connect(server.addr()).unwrap();
        s.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let mut buf = [0u8; 16];
        let err = s.read(&mut buf).unwrap_err();
        assert!(matches!(
            err.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ));
    }

    #[test]
    fn a_cgi_program_answers() {
        let server = Server::start(|r| {
            let mut sh = std::process::Command::new("sh");
            sh.arg("-c").arg(
                "body=$(cat); printf 'Status: 201 Created\\r\\nContent-Type: text/plain\\r\\nX-Seen: %s\\r\\n\\r\\n%s %s %s %s' \
                 \"$HTTP_X_KEY\" \"$REQUEST_METHOD\" \"$PATH_INFO\" \"$QUERY_STRING\" \"$body\"",
            );
            cgi(sh, r)
        });
        let out = get(
            server.addr(),
            "POST /repo/info?x=1 HTTP/1.1\r\nX-Key: k1\r\nContent-Length: 3\r\n\r\nabc",
        );
        assert!(out.starts_with("HTTP/1.1 201 Created\r\n"), "{out}");
        assert!(out.contains("X-Seen: k1\r\n"), "{out}");
        assert!(out.ends_with("\r\n\r\nPOST /repo/info x=1 abc"), "{out}");

        let broken = Server::start(|r| cgi(std::process::Command::new("/nonexistent/cgi"), r));
        let out = get(broken.addr(), "GET / HTTP/1.1\r\n\r\n");
        assert!(out.starts_with("HTTP/1.1 502 "), "{out}");
    }

    #[test]
    fn nothing_listens_on_an_unused_port() {
        let port = unused_port();
        assert!(TcpStream::connect(("127.0.0.1", port)).is_err());
    }
}
