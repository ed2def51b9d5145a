//! The legacy HTTP+SSE client transport (`quarry_hub::sse`), tested against a
//! real server and against scripted loopback servers (`quarry_test_http`) for
//! the failure cases a real server will not produce.
//!
//! The real server is `@modelcontextprotocol/server-everything` in SSE mode
//! (`node dist/index.js sse`, port from `PORT`, stream at `/sse`). It is found
//! through `QUARRY_MCP_SERVERS`, an npm prefix it is installed in:
//!
//! ```sh
//! npm install --prefix /root/.cache/quarry-mcp-servers @modelcontextprotocol/server-everything
//! export QUARRY_MCP_SERVERS=/root/.cache/quarry-mcp-servers
//! ```
//!
//! Without it, the real-server test fails (it does not skip) and says so.
//! `node` must be on `PATH`.

use std::{
    collections::VecDeque,
    path::PathBuf,
    process::Stdio,
    sync::Arc,
    time::{Duration, Instant},
};

use http::{HeaderMap, HeaderValue, StatusCode, header};
use quarry_hub::sse::{MAX_EVENT_BYTES, SseClientConfig, SseClientTransport, SseTransportError};
use quarry_test_http::{Reply, Request, Server, unused_port};
use rmcp::{
    ServiceExt,
    model::{CallToolRequestParams, CallToolResult, ClientJsonRpcMessage, JsonRpcMessage},
    transport::Transport,
};
use serde_json::json;
use tokio::{
    net::TcpStream,
    process::{Child, Command},
};

const INSTALL_HINT: &str = "install the test server with `npm install --prefix \
     /root/.cache/quarry-mcp-servers @modelcontextprotocol/server-everything` and run the tests \
     with `QUARRY_MCP_SERVERS=/root/.cache/quarry-mcp-servers`";

fn config(url: String, timeout: Duration) -> SseClientConfig {
    SseClientConfig {
        url,
        headers: HeaderMap::new(),
        connect_timeout: timeout,
    }
}

/// reqwest is built without a default rustls crypto provider: install the crate's first.
fn http_client() -> reqwest::Client {
    quarry_netguard::ensure_crypto_provider();
    reqwest::Client::new()
}

// ---------------------------------------------------------------------------
// The real server.

/// `server-everything` in SSE mode, killed when dropped.
struct EverythingServer {
    _child: Child,
    port: u16,
    log: tempfile::NamedTempFile,
}

impl EverythingServer {
    async fn start() -> Self {
        let prefix = std::env::var_os("QUARRY_MCP_SERVERS")
            .map(PathBuf::from)
            .unwrap_or_else(|| panic!("QUARRY_MCP_SERVERS is not set: {INSTALL_HINT}"));
        let entry =
            prefix.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
        assert!(
            entry.is_file(),
            "{} does not exist: {INSTALL_HINT}",
            entry.display()
        );

        let port = unused_port();
        let log = tempfile::NamedTempFile::new().expect("a temporary log file");
        let stderr = log.reopen().expect("reopen the log file");
        let mut child = Command::new("node")
            .arg(&entry)
            .arg("sse")
            .env("PORT", port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(stderr))
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("could not start `node` (is it on PATH?): {e}"));

        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
                break;
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!(
                    "server-everything exited with {status}; its log:\n{}",
                    std::fs::read_to_string(log.path()).unwrap_or_default()
                );
            }
            assert!(
                Instant::now() < deadline,
                "server-everything did not listen on port {port} within 30s; its log:\n{}",
                std::fs::read_to_string(log.path()).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Self {
            _child: child,
            port,
            log,
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/sse", self.port)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.log.path()).unwrap_or_default()
    }
}

fn text_of(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|block| block.as_text().map(|text| text.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

fn args(value: serde_json::Value) -> rmcp::model::JsonObject {
    match value {
        serde_json::Value::Object(map) => map,
        other => panic!("arguments must be an object, got {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_server_over_legacy_sse() {
    let server = EverythingServer::start().await;

    let mut headers = HeaderMap::new();
    // Extra headers ride along; the server ignores this one.
    headers.insert(
        header::AUTHORIZATION,
        HeaderValue::from_static("Bearer quarry-test"),
    );
    let transport = SseClientTransport::connect(
        http_client(),
        SseClientConfig {
            url: server.url(),
            headers,
            connect_timeout: Duration::from_secs(10),
        },
    )
    .await
    .expect("connect to server-everything");
    assert_eq!(transport.endpoint().path(), "/message");
    assert!(
        transport
            .endpoint()
            .query()
            .is_some_and(|q| q.starts_with("sessionId=")),
        "endpoint: {}",
        transport.endpoint()
    );

    let client = ().serve(transport).await.expect("initialize over SSE");
    let info = client.peer_info().expect("server info after initialize");
    let name = info
        .server_info
        .as_ref()
        .map(|implementation| implementation.name.clone())
        .unwrap_or_default();
    assert!(!name.is_empty(), "server info: {info:?}");

    let tools = client.list_all_tools().await.expect("tools/list");
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
    for expected in ["echo", "get-sum", "get-structured-content"] {
        assert!(names.contains(&expected), "no `{expected}` among {names:?}");
    }

    let echoed = client
        .call_tool(
            CallToolRequestParams::new("echo")
                .with_arguments(args(json!({"message": "héllo, quarry"}))),
        )
        .await
        .expect("call echo");
    assert_eq!(text_of(&echoed), "Echo: héllo, quarry");
    assert_ne!(echoed.is_error, Some(true));

    // Several requests in flight at once: posts run while the stream is read.
    let (a, b, c) = tokio::join!(
        client.call_tool(
            CallToolRequestParams::new("get-sum").with_arguments(args(json!({"a": 2, "b": 3})))
        ),
        client.call_tool(
            CallToolRequestParams::new("echo").with_arguments(args(json!({"message": "one"})))
        ),
        client.call_tool(
            CallToolRequestParams::new("echo").with_arguments(args(json!({"message": "two"})))
        ),
    );
    assert_eq!(text_of(&a.expect("get-sum")), "The sum of 2 and 3 is 5.");
    assert_eq!(text_of(&b.expect("echo one")), "Echo: one");
    assert_eq!(text_of(&c.expect("echo two")), "Echo: two");

    let weather = client
        .call_tool(
            CallToolRequestParams::new("get-structured-content")
                .with_arguments(args(json!({"location": "Chicago"}))),
        )
        .await
        .expect("call get-structured-content");
    assert_eq!(
        weather.structured_content,
        Some(json!({"temperature": 36, "conditions": "Light rain / drizzle", "humidity": 82}))
    );

    // Closing drops the GET stream, which is how the server learns the session ended.
    client.cancel().await.expect("close the client");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !server.log().contains("Client Disconnected") {
        assert!(
            Instant::now() < deadline,
            "the server did not see the session end; its log:\n{}",
            server.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

// ---------------------------------------------------------------------------
// Scripted loopback servers.

/// The URL of a fake server's event stream.
fn sse_url(server: &Server) -> String {
    server.url("/sse")
}

fn ping(id: u32) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#)
}

fn is_ping(message: &rmcp::service::RxJsonRpcMessage<rmcp::RoleClient>, id: u32) -> bool {
    matches!(message, JsonRpcMessage::Request(request)
        if request.id == rmcp::model::NumberOrString::Number(id.into()))
}

#[tokio::test]
async fn nothing_listening_is_a_request_error() {
    let url = format!("http://127.0.0.1:{}/sse", unused_port());
    let err = SseClientTransport::connect(http_client(), config(url, Duration::from_secs(5)))
        .await
        .expect_err("nothing listens there");
    assert!(
        matches!(err, SseTransportError::Request { method: "GET", .. }),
        "{err:?}"
    );
    assert!(
        err.to_string().starts_with("GET http://127.0.0.1:"),
        "{err}"
    );
}

#[tokio::test]
async fn invalid_urls_are_refused() {
    for url in ["not a url", "ftp://127.0.0.1/sse", "/sse"] {
        let err = SseClientTransport::connect(
            http_client(),
            config(url.to_owned(), Duration::from_secs(1)),
        )
        .await
        .expect_err(url);
        assert!(
            matches!(err, SseTransportError::InvalidUrl { .. }),
            "{url}: {err:?}"
        );
    }
}

#[tokio::test]
async fn a_silent_stream_times_out_waiting_for_the_endpoint() {
    let server = Server::start(|_| Reply::event_stream(": hello\n\n", true));
    let started = Instant::now();
    let err = SseClientTransport::connect(
        http_client(),
        config(sse_url(&server), Duration::from_millis(500)),
    )
    .await
    .expect_err("no endpoint event is ever sent");
    assert!(
        matches!(err, SseTransportError::ConnectTimeout { .. }),
        "{err:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(
        err.to_string(),
        format!(
            "no `endpoint` event from http://127.0.0.1:{}/sse within 0.5s",
            server.addr().port()
        )
    );
}

#[tokio::test]
async fn an_endpoint_on_another_origin_is_refused() {
    for endpoint in [
        "http://evil.example/message?sessionId=1",
        "//evil.example/message",
        "https://127.0.0.1/message",
    ] {
        let body = format!("event: endpoint\ndata: {endpoint}\n\n");
        let server = Server::start(move |_| Reply::event_stream(body.clone(), true));
        let err = SseClientTransport::connect(
            http_client(),
            config(sse_url(&server), Duration::from_secs(5)),
        )
        .await
        .expect_err(endpoint);
        let SseTransportError::CrossOriginEndpoint { expected, .. } = &err else {
            panic!("{endpoint}: {err:?}");
        };
        assert_eq!(
            expected,
            &format!("http://127.0.0.1:{}", server.addr().port())
        );
        assert!(err.to_string().contains("refused `endpoint`"), "{err}");
        // Nothing was ever posted.
        assert!(server.requests().iter().all(|r| r.method == "GET"));
    }
}

#[tokio::test]
async fn http_errors_on_the_stream_carry_status_and_body() {
    let server = Server::start(|_| {
        Reply::status(401, "application/json", "{\"error\":  \"missing\n token\"}")
    });
    let err = SseClientTransport::connect(
        http_client(),
        config(sse_url(&server), Duration::from_secs(5)),
    )
    .await
    .expect_err("401");
    assert!(
        matches!(
            err,
            SseTransportError::Status {
                status: StatusCode::UNAUTHORIZED,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        format!(
            "GET http://127.0.0.1:{}/sse answered 401 Unauthorized: {{\"error\": \"missing token\"}}",
            server.addr().port()
        )
    );

    let server = Server::start(|_| Reply::status(200, "application/json", "{}"));
    let err = SseClientTransport::connect(
        http_client(),
        config(sse_url(&server), Duration::from_secs(5)),
    )
    .await
    .expect_err("not an event stream");
    assert!(
        matches!(err, SseTransportError::NotEventStream { .. }),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_stream_closed_before_the_endpoint_fails_the_connect() {
    let server = Server::start(|_| Reply::event_stream(format!("data: {}\n\n", ping(1)), false));
    let err = SseClientTransport::connect(
        http_client(),
        config(sse_url(&server), Duration::from_secs(5)),
    )
    .await
    .expect_err("the stream ends first");
    assert!(
        matches!(err, SseTransportError::ClosedBeforeEndpoint { .. }),
        "{err:?}"
    );
}

#[tokio::test]
async fn messages_flow_bad_json_is_skipped_and_the_end_of_stream_closes() {
    // Endpoint and messages in one chunk, CRLF line ends, a keep-alive, an
    // unnamed event, a batch, an unknown event type, and garbage in between.
    let body = format!(
        "event: endpoint\r\ndata: /message?sessionId=abc\r\n\r\n\
         : keep-alive\r\n\r\n\
         event: message\r\ndata: {}\r\n\r\n\
         event: message\r\ndata: {{not json\r\n\r\n\
         data: {}\r\n\r\n\
         event: something-else\r\ndata: {}\r\n\r\n\
         event: message\r\ndata: [{}, {}]\r\n\r\n",
        ping(1),
        ping(2),
        ping(99),
        ping(3),
        ping(4),
    );
    let server = Server::start(move |request| {
        if request.method == "GET" {
            Reply::event_stream(body.clone(), false)
        } else {
            Reply::status(202, "text/plain", "Accepted")
        }
    });

    let mut headers = HeaderMap::new();
    headers.insert(
        header::AUTHORIZATION,
        HeaderValue::from_static("Bearer s3cret"),
    );
    let mut transport = SseClientTransport::connect(
        http_client(),
        SseClientConfig {
            url: format!("{}?token=hidden", sse_url(&server)),
            headers,
            connect_timeout: Duration::from_secs(5),
        },
    )
    .await
    .expect("connect");
    assert_eq!(
        transport.endpoint().as_str(),
        format!(
            "http://127.0.0.1:{}/message?sessionId=abc",
            server.addr().port()
        )
    );

    let mut got = VecDeque::new();
    while let Some(message) = transport.receive().await {
        got.push_back(message);
    }
    let ids: Vec<u32> = [1, 2, 3, 4]
        .into_iter()
        .filter(|id| got.iter().any(|m| is_ping(m, *id)))
        .collect();
    assert_eq!(ids, vec![1, 2, 3, 4]);
    assert_eq!(got.len(), 4, "{got:?}");

    // The stream is gone, so the session is over: sends fail fast.
    let err = transport
        .send(ClientJsonRpcMessage::response(
            rmcp::model::ClientResult::empty(()),
            rmcp::model::NumberOrString::Number(1),
        ))
        .await
        .expect_err("send after the stream ended");
    assert!(matches!(err, SseTransportError::Closed), "{err:?}");

    let get = &server.requests()[0];
    assert_eq!(get.target, "/sse?token=hidden");
    assert_eq!(
        get.header("accept"),
        Some("text/event-stream"),
        "{:?}",
        get.headers
    );
    assert_eq!(
        get.header("authorization"),
        Some("Bearer s3cret"),
        "{:?}",
        get.headers
    );
}

#[tokio::test]
async fn posts_carry_json_and_headers_and_report_http_errors() {
    let server = Server::start(|request| match request.method.as_str() {
        "GET" => Reply::event_stream("event: endpoint\ndata: /message?sessionId=xyz\n\n", true),
        _ if String::from_utf8_lossy(&request.body).contains("\"id\":7") => {
            Reply::status(202, "text/plain", "Accepted")
        }
        _ => Reply::status(500, "text/plain", "boom: no such session"),
    });
    let mut headers = HeaderMap::new();
    headers.insert(
        header::AUTHORIZATION,
        HeaderValue::from_static("Bearer s3cret"),
    );
    let mut transport = SseClientTransport::connect(
        http_client(),
        SseClientConfig {
            url: sse_url(&server),
            headers,
            connect_timeout: Duration::from_secs(5),
        },
    )
    .await
    .expect("connect");

    let accepted = ClientJsonRpcMessage::response(
        rmcp::model::ClientResult::empty(()),
        rmcp::model::NumberOrString::Number(7),
    );
    transport.send(accepted).await.expect("202 is success");

    let refused = ClientJsonRpcMessage::response(
        rmcp::model::ClientResult::empty(()),
        rmcp::model::NumberOrString::Number(8),
    );
    let err = transport.send(refused).await.expect_err("500 is an error");
    assert!(
        matches!(
            err,
            SseTransportError::Status {
                method: "POST",
                status: StatusCode::INTERNAL_SERVER_ERROR,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        format!(
            "POST http://127.0.0.1:{}/message answered 500 Internal Server Error: boom: no such session",
            server.addr().port()
        )
    );

    let posts: Vec<Request> = server
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST")
        .collect();
    assert_eq!(posts.len(), 2);
    let post = &posts[0];
    assert_eq!(post.target, "/message?sessionId=xyz");
    assert_eq!(
        post.header("content-type"),
        Some("application/json"),
        "{:?}",
        post.headers
    );
    assert_eq!(
        post.header("authorization"),
        Some("Bearer s3cret"),
        "{:?}",
        post.headers
    );
    let body: serde_json::Value = serde_json::from_slice(&post.body).expect("a JSON body");
    assert_eq!(body["jsonrpc"], "2.0");
    assert_eq!(body["id"], 7);

    // After close, nothing more is received or sent.
    transport.close().await.expect("close");
    assert!(transport.receive().await.is_none());
    let err = transport
        .send(ClientJsonRpcMessage::response(
            rmcp::model::ClientResult::empty(()),
            rmcp::model::NumberOrString::Number(9),
        ))
        .await
        .expect_err("send after close");
    assert!(matches!(err, SseTransportError::Closed), "{err:?}");
}

#[tokio::test]
async fn an_oversized_event_ends_the_stream() {
    let mut body = format!("event: endpoint\ndata: /message\n\ndata: {}\n\n", ping(1)).into_bytes();
    body.extend_from_slice(b"data: ");
    body.resize(body.len() + MAX_EVENT_BYTES + 1, b'x');
    body.extend_from_slice(format!("\n\ndata: {}\n\n", ping(2)).as_bytes());
    let body = Arc::new(body);
    let server = Server::start(move |_| Reply::event_stream(body.as_slice(), true));
    let mut transport = SseClientTransport::connect(
        http_client(),
        config(sse_url(&server), Duration::from_secs(5)),
    )
    .await
    .expect("connect");
    let first = transport
        .receive()
        .await
        .expect("the message before the big one");
    assert!(is_ping(&first, 1));
    // The oversized event ends the session even though the server holds the
    // connection open and has more to say.
    let next = tokio::time::timeout(Duration::from_secs(20), transport.receive())
        .await
        .expect("the transport gives up on the oversized event");
    assert!(next.is_none(), "{next:?}");
}

#[tokio::test]
async fn an_oversized_event_before_the_endpoint_fails_the_connect() {
    let mut body = b"event: endpoint\ndata: ".to_vec();
    body.resize(body.len() + MAX_EVENT_BYTES + 1, b'x');
    let body = Arc::new(body);
    let server = Server::start(move |_| Reply::event_stream(body.as_slice(), true));
    let err = SseClientTransport::connect(
        http_client(),
        config(sse_url(&server), Duration::from_secs(20)),
    )
    .await
    .expect_err("too large");
    assert!(
        matches!(
            err,
            SseTransportError::EventTooLarge {
                limit: MAX_EVENT_BYTES
            }
        ),
        "{err:?}"
    );
}
