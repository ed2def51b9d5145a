//! The legacy HTTP+SSE client transport (MCP protocol 2024-11-05), as an
//! rmcp [`Transport`] for the client role.
//!
//! # The protocol
//!
//! 1. The client opens `GET <url>` with `Accept: text/event-stream`. The
//!    response is a long-lived Server-Sent Events stream.
//! 2. The server's first event is `event: endpoint`; its `data` is a URI,
//!    usually relative (`/message?sessionId=…`), resolved against the SSE URL.
//!    It names where the client POSTs its messages for this session.
//! 3. Every later `event: message` (or event without a name) carries one
//!    JSON-RPC message from the server: a response, a notification or a
//!    request. A JSON array is a JSON-RPC batch and is unpacked.
//! 4. Each client message is sent as `POST <endpoint>` with
//!    `Content-Type: application/json`. The server acknowledges with `202
//!    Accepted` (some answer `200`); the actual reply arrives on the stream.
//!
//! The session lives as long as the GET stream: when it ends, [`receive`]
//! returns `None` and rmcp treats the connection as closed.
//!
//! # The origin check
//!
//! The endpoint is chosen by the server, and every POST carries the
//! caller's extra headers (typically `Authorization`). A server, or anyone
//! able to inject an event into the stream, could name an endpoint on another
//! host and have our credentials and messages sent there. So an endpoint
//! whose origin (scheme, host, port) differs from the SSE URL's is refused and
//! the connection fails with [`SseTransportError::CrossOriginEndpoint`].
//!
//! # Limits and robustness
//!
//! * The `endpoint` event must arrive within
//!   [`SseClientConfig::connect_timeout`] (covering connect, response headers
//!   and the event itself).
//! * A single event is capped at [`MAX_EVENT_BYTES`]; a larger one fails the
//!   connection (during `connect`) or ends the stream (afterwards), rather than
//!   letting a peer grow our memory without bound.
//! * A `message` event that is not JSON-RPC is logged and skipped: one bad
//!   message should not tear down a session.
//! * The events are parsed here rather than with a generic SSE crate so that
//!   the size cap applies while an event is still being buffered, and so that
//!   unknown fields and comments are ignored as the SSE specification demands.
//!
//! The `reqwest::Client` is the caller's: its TLS, proxy and redirect
//! policies apply. It should not have a total request `timeout`, which would
//! also cut the long-lived GET stream; use its `connect_timeout` or
//! `read_timeout` instead.
//!
//! [`receive`]: Transport::receive

use std::{borrow::Cow, collections::VecDeque, fmt, future::Future, sync::Arc, time::Duration};

use http::{HeaderMap, HeaderValue, StatusCode, header};
use rmcp::{
    RoleClient,
    model::ServerJsonRpcMessage,
    service::{RxJsonRpcMessage, TxJsonRpcMessage},
    transport::Transport,
};
use tokio::sync::mpsc;
use tokio_util::sync::{CancellationToken, DropGuard};
use url::Url;

/// The largest single SSE event (its data and the line being read) accepted
/// from a server: 16 MiB.
pub const MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// How much of an error response's body goes into [`SseTransportError::Status`].
const BODY_EXCERPT_BYTES: usize = 512;

/// How long reading that excerpt may take: an error must not hang on a slow body.
const BODY_EXCERPT_TIMEOUT: Duration = Duration::from_secs(2);

/// Messages parsed ahead of rmcp's `receive`. Bounded, so a slow consumer
/// pushes back on the stream instead of buffering without limit.
const INBOX_CAPACITY: usize = 64;

/// Where and how to open a legacy SSE connection.
#[derive(Debug, Clone)]
pub struct SseClientConfig {
    /// The SSE URL (`GET`), e.g. `https://example.com/sse`.
    pub url: String,
    /// Extra headers sent with the GET and with every POST (e.g. `Authorization`).
    pub headers: HeaderMap,
    /// How long [`SseClientTransport::connect`] waits for the `endpoint` event,
    /// counting from the start of the request.
    pub connect_timeout: Duration,
}

/// Why the SSE transport failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum SseTransportError {
    /// The configured URL is not an absolute `http`/`https` URL.
    InvalidUrl {
        /// What is wrong with it.
        reason: String,
    },
    /// An HTTP request could not be sent, or its body could not be read.
    Request {
        /// `GET` (the stream) or `POST` (a message).
        method: &'static str,
        /// The URL without its query, which may hold secrets.
        url: String,
        /// The underlying error, stripped of the URL.
        source: reqwest::Error,
    },
    /// The server answered with a status this transport does not accept.
    Status {
        /// `GET` (the stream) or `POST` (a message).
        method: &'static str,
        /// The URL without its query.
        url: String,
        /// The status received.
        status: StatusCode,
        /// The start of the response body, whitespace collapsed.
        body: String,
    },
    /// The GET was answered with something other than `text/event-stream`.
    NotEventStream {
        /// The URL without its query.
        url: String,
        /// The `Content-Type` received (empty when absent).
        content_type: String,
    },
    /// The `endpoint` event did not arrive within the connect timeout.
    ConnectTimeout {
        /// The URL without its query.
        url: String,
        /// The timeout that elapsed.
        timeout: Duration,
    },
    /// The SSE stream ended before the `endpoint` event.
    ClosedBeforeEndpoint {
        /// The URL without its query.
        url: String,
    },
    /// The `endpoint` event's data is not a usable URI reference.
    InvalidEndpoint {
        /// What is wrong with it.
        reason: String,
    },
    /// The `endpoint` event named another origin than the SSE URL's; refused.
    CrossOriginEndpoint {
        /// The SSE URL's origin.
        expected: String,
        /// The endpoint's origin.
        found: String,
    },
    /// A single SSE event exceeded [`MAX_EVENT_BYTES`].
    EventTooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
    /// An outgoing message could not be serialized.
    Encode(serde_json::Error),
    /// The transport was closed, or its SSE stream has ended.
    Closed,
}

impl fmt::Display for SseTransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidUrl { reason } => write!(f, "invalid SSE URL: {reason}"),
            Self::Request {
                method,
                url,
                source,
            } => write!(f, "{method} {url} failed: {source}"),
            Self::Status {
                method,
                url,
                status,
                body,
            } => {
                write!(f, "{method} {url} answered {status}")?;
                if !body.is_empty() {
                    write!(f, ": {body}")?;
                }
                Ok(())
            }
            Self::NotEventStream { url, content_type } => {
                let content_type = if content_type.is_empty() {
                    "no content type"
                } else {
                    content_type
                };
                write!(
                    f,
                    "GET {url} answered {content_type}, not text/event-stream"
                )
            }
            Self::ConnectTimeout { url, timeout } => write!(
                f,
                "no `endpoint` event from {url} within {:.1}s",
                timeout.as_secs_f64()
            ),
            Self::ClosedBeforeEndpoint { url } => {
                write!(f, "SSE stream from {url} ended before the `endpoint` event")
            }
            Self::InvalidEndpoint { reason } => {
                write!(f, "invalid `endpoint` event: {reason}")
            }
            Self::CrossOriginEndpoint { expected, found } => write!(
                f,
                "refused `endpoint` on origin {found}: messages may only be posted to the SSE \
                 URL's origin {expected}"
            ),
            Self::EventTooLarge { limit } => {
                write!(f, "an SSE event exceeded the {limit}-byte limit")
            }
            Self::Encode(error) => write!(f, "could not serialize a message: {error}"),
            Self::Closed => f.write_str("the SSE transport is closed"),
        }
    }
}

impl std::error::Error for SseTransportError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Request { source, .. } => Some(source),
            Self::Encode(error) => Some(error),
            _ => None,
        }
    }
}

/// A connected legacy SSE session: the GET stream read by a background task,
/// messages posted to the server's endpoint.
pub struct SseClientTransport {
    client: reqwest::Client,
    /// Where messages are posted; same origin as the SSE URL.
    endpoint: Arc<Url>,
    /// The caller's headers plus `Content-Type: application/json`.
    post_headers: Arc<HeaderMap>,
    /// Messages decoded by the reader task.
    inbox: mpsc::Receiver<ServerJsonRpcMessage>,
    /// Cancelled when the session is over: on `close`, on drop, or when the
    /// stream ends. The reader stops on it and sends fail fast after it.
    session: CancellationToken,
    /// Stops the reader (and so drops the GET connection) when the transport
    /// is dropped without `close`.
    _stop_reader: DropGuard,
}

impl fmt::Debug for SseClientTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SseClientTransport")
            .field("endpoint", &redact(&self.endpoint))
            .field("closed", &self.session.is_cancelled())
            .finish_non_exhaustive()
    }
}

impl SseClientTransport {
    /// Opens the SSE stream and waits for the `endpoint` event.
    ///
    /// Fails if the URL is not `http`/`https`, the GET fails or is not an event
    /// stream, the endpoint event does not arrive within
    /// `config.connect_timeout`, or it names another origin. Must be called
    /// within a Tokio runtime: the stream is then read by a spawned task.
    pub async fn connect(
        client: reqwest::Client,
        config: SseClientConfig,
    ) -> Result<Self, SseTransportError> {
        let SseClientConfig {
            url,
            headers,
            connect_timeout,
        } = config;
        let sse_url = parse_http_url(&url)?;

        let mut get_headers = headers.clone();
        get_headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("text/event-stream"),
        );
        let mut post_headers = headers;
        post_headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );

        let (events, endpoint) =
            tokio::time::timeout(connect_timeout, open_stream(&client, &sse_url, get_headers))
                .await
                .map_err(|_| SseTransportError::ConnectTimeout {
                    url: redact(&sse_url),
                    timeout: connect_timeout,
                })??;
        tracing::debug!(sse = %redact(&sse_url), endpoint = %redact(&endpoint), "SSE session open");

        let (tx, inbox) = mpsc::channel(INBOX_CAPACITY);
        let session = CancellationToken::new();
        tokio::spawn(read_stream(events, tx, session.clone()));
        Ok(Self {
            client,
            endpoint: Arc::new(endpoint),
            post_headers: Arc::new(post_headers),
            inbox,
            _stop_reader: session.clone().drop_guard(),
            session,
        })
    }

    /// The URL messages are posted to, as announced by the server.
    pub fn endpoint(&self) -> &Url {
        &self.endpoint
    }
}

impl Transport<RoleClient> for SseClientTransport {
    type Error = SseTransportError;

    fn name() -> Cow<'static, str> {
        Cow::Borrowed("SseClientTransport")
    }

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        // rmcp spawns this future and keeps receiving meanwhile, so it owns
        // clones of everything and borrows nothing from `self`.
        let client = self.client.clone();
        let endpoint = Arc::clone(&self.endpoint);
        let headers = Arc::clone(&self.post_headers);
        let session = self.session.clone();
        let body = serde_json::to_vec(&item);
        async move {
            let body = body.map_err(SseTransportError::Encode)?;
            if session.is_cancelled() {
                return Err(SseTransportError::Closed);
            }
            let post = post_message(&client, &endpoint, &headers, body);
            tokio::select! {
                result = post => result,
                () = session.cancelled() => Err(SseTransportError::Closed),
            }
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        // Cancel-safe, as rmcp requires: it polls this inside `select!`.
        self.inbox.recv().await
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        // The legacy protocol has no explicit session end: dropping the GET
        // stream (the reader stops on the token) is how the server learns.
        self.session.cancel();
        self.inbox.close();
        Ok(())
    }
}

/// Parses the configured SSE URL, accepting only absolute http(s) URLs.
fn parse_http_url(raw: &str) -> Result<Url, SseTransportError> {
    let url = Url::parse(raw.trim()).map_err(|error| SseTransportError::InvalidUrl {
        reason: error.to_string(),
    })?;
    match url.scheme() {
        "http" | "https" => Ok(url),
        other => Err(SseTransportError::InvalidUrl {
            reason: format!("scheme `{other}` is not http or https"),
        }),
    }
}

/// The URL for messages: no user info and no query, which may carry secrets.
fn redact(url: &Url) -> String {
    format!("{}{}", url.origin().ascii_serialization(), url.path())
}

/// Sends the GET, checks the response is an event stream, and reads events
/// until the `endpoint` one. Returns the reader (which may already hold
/// further events) and the resolved endpoint.
async fn open_stream(
    client: &reqwest::Client,
    sse_url: &Url,
    headers: HeaderMap,
) -> Result<(EventReader, Url), SseTransportError> {
    let response = client
        .get(sse_url.clone())
        .headers(headers)
        .send()
        .await
        .map_err(|source| SseTransportError::Request {
            method: "GET",
            url: redact(sse_url),
            source: source.without_url(),
        })?;

    let status = response.status();
    if !status.is_success() {
        return Err(SseTransportError::Status {
            method: "GET",
            url: redact(sse_url),
            status,
            body: body_excerpt(response).await,
        });
    }
    let content_type = response
        .headers()
        .get(header::CONTENT_TYPE)
        .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned())
        .unwrap_or_default();
    if !is_event_stream(&content_type) {
        return Err(SseTransportError::NotEventStream {
            url: redact(sse_url),
            content_type,
        });
    }

    let mut events = EventReader::new(response, redact(sse_url));
    loop {
        match events.next().await? {
            None => {
                return Err(SseTransportError::ClosedBeforeEndpoint {
                    url: redact(sse_url),
                });
            }
            Some(event) if event.kind == "endpoint" => {
                let endpoint = resolve_endpoint(sse_url, &event.data)?;
                return Ok((events, endpoint));
            }
            Some(event) => {
                tracing::warn!(event = %event.kind, "ignoring an SSE event sent before `endpoint`");
            }
        }
    }
}

/// Whether a `Content-Type` value is `text/event-stream` (parameters allowed).
fn is_event_stream(content_type: &str) -> bool {
    content_type
        .split(';')
        .next()
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("text/event-stream"))
}

/// Resolves the `endpoint` event's data against the SSE URL and refuses any
/// other origin (see the module documentation).
fn resolve_endpoint(sse_url: &Url, data: &str) -> Result<Url, SseTransportError> {
    let raw = data.trim();
    if raw.is_empty() {
        return Err(SseTransportError::InvalidEndpoint {
            reason: "the event has no data".to_owned(),
        });
    }
    let endpoint = sse_url
        .join(raw)
        .map_err(|error| SseTransportError::InvalidEndpoint {
            reason: error.to_string(),
        })?;
    // `Origin` equality compares scheme, host and port (defaults normalized);
    // non-http schemes get opaque origins, which equal nothing.
    if endpoint.origin() != sse_url.origin() {
        return Err(SseTransportError::CrossOriginEndpoint {
            expected: sse_url.origin().ascii_serialization(),
            found: endpoint.origin().ascii_serialization(),
        });
    }
    Ok(endpoint)
}

/// Posts one serialized message; 200 and 202 are success.
async fn post_message(
    client: &reqwest::Client,
    endpoint: &Url,
    headers: &HeaderMap,
    body: Vec<u8>,
) -> Result<(), SseTransportError> {
    let response = client
        .post(endpoint.clone())
        .headers(headers.clone())
        .body(body)
        .send()
        .await
        .map_err(|source| SseTransportError::Request {
            method: "POST",
            url: redact(endpoint),
            source: source.without_url(),
        })?;
    let status = response.status();
    if status == StatusCode::OK || status == StatusCode::ACCEPTED {
        // The body (usually "Accepted") carries nothing: replies come on the stream.
        return Ok(());
    }
    Err(SseTransportError::Status {
        method: "POST",
        url: redact(endpoint),
        status,
        body: body_excerpt(response).await,
    })
}

/// The start of a response body for an error message: at most
/// [`BODY_EXCERPT_BYTES`], read for at most [`BODY_EXCERPT_TIMEOUT`].
async fn body_excerpt(mut response: reqwest::Response) -> String {
    let mut buf = Vec::new();
    let read = async {
        while buf.len() < BODY_EXCERPT_BYTES {
            match response.chunk().await {
                Ok(Some(chunk)) => buf.extend_from_slice(&chunk),
                Ok(None) | Err(_) => break,
            }
        }
    };
    // A timeout just leaves what was read so far.
    let _ = tokio::time::timeout(BODY_EXCERPT_TIMEOUT, read).await;
    buf.truncate(BODY_EXCERPT_BYTES);
    String::from_utf8_lossy(&buf)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// The reader task: forwards `message` events to the inbox until the stream
/// ends, fails, or the session is cancelled. Ending drops the inbox sender,
/// so `receive` returns `None` once the inbox is drained.
async fn read_stream(
    mut events: EventReader,
    inbox: mpsc::Sender<ServerJsonRpcMessage>,
    session: CancellationToken,
) {
    // Whatever ends this task ends the session: later sends fail fast.
    let _session_over = session.clone().drop_guard();
    let forward = async {
        loop {
            let event = match events.next().await {
                Ok(Some(event)) => event,
                Ok(None) => {
                    tracing::debug!(sse = %events.url, "SSE stream ended");
                    return;
                }
                Err(error) => {
                    tracing::warn!(%error, "SSE stream failed; closing the transport");
                    return;
                }
            };
            match event.kind.as_str() {
                "message" => {
                    for message in decode_messages(&event.data) {
                        if inbox.send(message).await.is_err() {
                            // The transport is gone; nobody will read.
                            return;
                        }
                    }
                }
                // The endpoint is fixed at connect time; a later one must not
                // silently redirect our posts.
                "endpoint" => tracing::warn!("ignoring a repeated `endpoint` event"),
                other => tracing::debug!(event = %other, "ignoring an SSE event of unknown type"),
            }
        }
    };
    tokio::select! {
        () = forward => {}
        () = session.cancelled() => {}
    }
}

/// Decodes a `message` event: one JSON-RPC message or a batch (array) of them.
/// What does not parse is logged and skipped.
fn decode_messages(data: &str) -> Vec<ServerJsonRpcMessage> {
    let skip = |error: serde_json::Error| {
        tracing::warn!(%error, bytes = data.len(), "skipping an SSE message that is not JSON-RPC");
    };
    if !data.trim_start().starts_with('[') {
        return match serde_json::from_str(data) {
            Ok(message) => vec![message],
            Err(error) => {
                skip(error);
                Vec::new()
            }
        };
    }
    match serde_json::from_str::<Vec<serde_json::Value>>(data) {
        // Element by element, so one bad member does not lose the batch.
        Ok(batch) => batch
            .into_iter()
            .filter_map(|value| serde_json::from_value(value).map_err(skip).ok())
            .collect(),
        Err(error) => {
            skip(error);
            Vec::new()
        }
    }
}

/// A dispatched SSE event.
#[derive(Debug, PartialEq, Eq)]
struct SseEvent {
    /// The event type; `message` when the server named none.
    kind: String,
    /// The data lines, joined with `\n`.
    data: String,
}

/// Reads complete events off the GET response.
struct EventReader {
    response: reqwest::Response,
    parser: SseParser,
    pending: VecDeque<SseEvent>,
    /// The redacted SSE URL, for errors and logs.
    url: String,
}

impl EventReader {
    fn new(response: reqwest::Response, url: String) -> Self {
        Self {
            response,
            parser: SseParser::new(MAX_EVENT_BYTES),
            pending: VecDeque::new(),
            url,
        }
    }

    /// The next complete event, or `None` once the stream has ended.
    async fn next(&mut self) -> Result<Option<SseEvent>, SseTransportError> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Ok(Some(event));
            }
            let chunk =
                self.response
                    .chunk()
                    .await
                    .map_err(|source| SseTransportError::Request {
                        method: "GET",
                        url: self.url.clone(),
                        source: source.without_url(),
                    })?;
            match chunk {
                Some(chunk) => self.parser.feed(&chunk, &mut self.pending)?,
                // An unterminated last event is dropped, as the SSE spec says.
                None => return Ok(None),
            }
        }
    }
}

/// An incremental parser for the SSE wire format (WHATWG HTML, "Server-sent
/// events"), limited to what this transport needs: `event` and `data` fields.
/// `id` and `retry` (reconnection) are ignored, as are comments and unknown
/// fields. Lines end with CRLF, LF or CR.
struct SseParser {
    /// Bytes of the line being received.
    line: Vec<u8>,
    /// The current event's type, if named.
    kind: Option<String>,
    /// The current event's data, each line followed by `\n`.
    data: String,
    /// The previous chunk ended in CR: a leading LF completes that CRLF.
    after_cr: bool,
    /// Still at the first line, where a byte order mark is skipped.
    at_start: bool,
    /// Cap on `line` plus `data`.
    max_event_bytes: usize,
}

impl SseParser {
    fn new(max_event_bytes: usize) -> Self {
        Self {
            line: Vec::new(),
            kind: None,
            data: String::new(),
            after_cr: false,
            at_start: true,
            max_event_bytes,
        }
    }

    /// Feeds a chunk of the stream, appending completed events to `out`.
    fn feed(
        &mut self,
        mut chunk: &[u8],
        out: &mut VecDeque<SseEvent>,
    ) -> Result<(), SseTransportError> {
        if self.after_cr && !chunk.is_empty() {
            self.after_cr = false;
            chunk = chunk.strip_prefix(b"\n").unwrap_or(chunk);
        }
        while !chunk.is_empty() {
            let Some(end) = chunk.iter().position(|b| matches!(b, b'\n' | b'\r')) else {
                self.extend_line(chunk)?;
                break;
            };
            let (head, rest) = chunk.split_at(end);
            self.extend_line(head)?;
            chunk = match rest {
                [b'\r', b'\n', rest @ ..] => rest,
                [b'\r'] => {
                    self.after_cr = true;
                    &[]
                }
                [_, rest @ ..] => rest,
                [] => &[],
            };
            let line = std::mem::take(&mut self.line);
            self.process_line(&line, out)?;
            // Keep the allocation for the next line.
            self.line = line;
            self.line.clear();
        }
        Ok(())
    }

    fn extend_line(&mut self, bytes: &[u8]) -> Result<(), SseTransportError> {
        if self.line.len() + bytes.len() + self.data.len() > self.max_event_bytes {
            return Err(SseTransportError::EventTooLarge {
                limit: self.max_event_bytes,
            });
        }
        self.line.extend_from_slice(bytes);
        Ok(())
    }

    fn process_line(
        &mut self,
        line: &[u8],
        out: &mut VecDeque<SseEvent>,
    ) -> Result<(), SseTransportError> {
        let line = String::from_utf8_lossy(line);
        let mut line: &str = &line;
        if std::mem::take(&mut self.at_start) {
            line = line.strip_prefix('\u{feff}').unwrap_or(line);
        }
        if line.is_empty() {
            self.dispatch(out);
            return Ok(());
        }
        if line.starts_with(':') {
            return Ok(()); // A comment, typically a keep-alive.
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "event" => self.kind = Some(value.to_owned()),
            "data" => {
                if self.data.len() + value.len() + 1 > self.max_event_bytes {
                    return Err(SseTransportError::EventTooLarge {
                        limit: self.max_event_bytes,
                    });
                }
                self.data.push_str(value);
                self.data.push('\n');
            }
            _ => {}
        }
        Ok(())
    }

    /// Ends the current event at a blank line. An event without data is not
    /// dispatched, per the spec.
    fn dispatch(&mut self, out: &mut VecDeque<SseEvent>) {
        let kind = self.kind.take();
        if self.data.is_empty() {
            return;
        }
        let mut data = std::mem::take(&mut self.data);
        data.pop(); // The `\n` after the last data line.
        out.push_back(SseEvent {
            kind: kind
                .filter(|kind| !kind.is_empty())
                .unwrap_or_else(|| "message".to_owned()),
            data,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_chunks(chunks: &[&[u8]]) -> Result<Vec<SseEvent>, SseTransportError> {
        let mut parser = SseParser::new(MAX_EVENT_BYTES);
        let mut out = VecDeque::new();
        for chunk in chunks {
            parser.feed(chunk, &mut out)?;
        }
        Ok(out.into())
    }

    fn event(kind: &str, data: &str) -> SseEvent {
        SseEvent {
            kind: kind.to_owned(),
            data: data.to_owned(),
        }
    }

    #[test]
    fn parses_endpoint_then_messages() {
        let events = parse_chunks(&[
            b"event: endpoint\ndata: /message?sessionId=1\n\n",
            b"event: message\ndata: {\"a\":1}\n\ndata: {\"b\":2}\n\n",
        ])
        .unwrap();
        assert_eq!(
            events,
            vec![
                event("endpoint", "/message?sessionId=1"),
                event("message", "{\"a\":1}"),
                event("message", "{\"b\":2}"),
            ]
        );
    }

    #[test]
    fn handles_split_chunks_crlf_cr_comments_bom_and_unknown_fields() {
        let events = parse_chunks(&[
            b"\xEF\xBB\xBF: keep-alive\r",
            b"\nev",
            b"ent: message\r\ndata: line one\rdata:line two\nid: 7\nretry: 10\nfoo: bar\nnocolon\r",
            b"\r\n",
            b"data\n\n",
            b"event: ignored-no-data\n\n",
        ])
        .unwrap();
        assert_eq!(
            events,
            vec![event("message", "line one\nline two"), event("message", "")]
        );
    }

    #[test]
    fn drops_an_unterminated_last_event() {
        let events = parse_chunks(&[b"data: complete\n\ndata: partial\n"]).unwrap();
        assert_eq!(events, vec![event("message", "complete")]);
    }

    #[test]
    fn caps_a_single_event() {
        let mut parser = SseParser::new(16);
        let mut out = VecDeque::new();
        parser.feed(b"data: 0123456789\n\n", &mut out).unwrap();
        assert_eq!(out.len(), 1);
        // Many small lines of one event.
        let err = parser
            .feed(b"data: 01234\ndata: 56789\ndata: abcde\n", &mut out)
            .unwrap_err();
        assert!(matches!(
            err,
            SseTransportError::EventTooLarge { limit: 16 }
        ));
        // One line that never ends.
        let mut parser = SseParser::new(16);
        parser.feed(b"data: 0123", &mut out).unwrap();
        let err = parser.feed(b"456789abcdef", &mut out).unwrap_err();
        assert!(matches!(err, SseTransportError::EventTooLarge { .. }));
    }

    #[test]
    fn keep_alive_comments_do_not_count_toward_the_cap() {
        let mut parser = SseParser::new(16);
        let mut out = VecDeque::new();
        for _ in 0..100 {
            parser.feed(b": ping ping ping\n", &mut out).unwrap();
        }
        assert!(out.is_empty());
    }

    #[test]
    fn endpoint_resolution_and_origin_check() {
        let sse = Url::parse("http://127.0.0.1:8080/mcp/sse?token=x").unwrap();
        assert_eq!(
            resolve_endpoint(&sse, " /message?sessionId=abc\n")
                .unwrap()
                .as_str(),
            "http://127.0.0.1:8080/message?sessionId=abc"
        );
        assert_eq!(
            resolve_endpoint(&sse, "messages").unwrap().as_str(),
            "http://127.0.0.1:8080/mcp/messages"
        );
        assert!(resolve_endpoint(&sse, "http://127.0.0.1:8080/m").is_ok());
        for refused in [
            "http://127.0.0.1:8081/message",
            "https://127.0.0.1:8080/message",
            "http://localhost:8080/message",
            "//evil.example/message",
            "http://evil.example/message",
            "data:text/plain,hi",
        ] {
            let err = resolve_endpoint(&sse, refused).unwrap_err();
            assert!(
                matches!(err, SseTransportError::CrossOriginEndpoint { .. }),
                "{refused}: {err}"
            );
        }
        assert!(matches!(
            resolve_endpoint(&sse, "  "),
            Err(SseTransportError::InvalidEndpoint { .. })
        ));
        // Default ports are normalized.
        let https = Url::parse("https://example.com/sse").unwrap();
        assert!(resolve_endpoint(&https, "https://example.com:443/m").is_ok());
    }

    #[test]
    fn decodes_single_batch_and_skips_garbage() {
        let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
        assert_eq!(decode_messages(ping).len(), 1);
        assert_eq!(
            decode_messages(&format!("[{ping}, {{\"nonsense\": true}}, {ping}]")).len(),
            2
        );
        assert!(decode_messages("not json").is_empty());
        assert!(decode_messages("[1, 2").is_empty());
    }

    #[test]
    fn validates_urls_and_content_types() {
        assert!(parse_http_url("https://example.com/sse").is_ok());
        assert!(matches!(
            parse_http_url("ftp://example.com/sse"),
            Err(SseTransportError::InvalidUrl { .. })
        ));
        assert!(parse_http_url("/relative").is_err());
        assert!(is_event_stream("text/event-stream"));
        assert!(is_event_stream("Text/Event-Stream; charset=utf-8"));
        assert!(!is_event_stream("application/json"));
        assert!(!is_event_stream(""));
        let url = Url::parse("https://user:pw@example.com:8443/sse?key=secret").unwrap();
        assert_eq!(redact(&url), "https://example.com:8443/sse");
    }
}
