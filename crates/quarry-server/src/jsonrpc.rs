//! JSON-RPC framing guards in front of rmcp: input that is not JSON gets a JSON-RPC
//! `-32700 Parse error` (id `null`) instead of being dropped (stdio) or answered with a
//! plain-text 415 (HTTP), so a client never waits forever on a malformed message.

use std::io;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::de::IgnoredAny;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

fn error_value(code: i64, message: String) -> serde_json::Value {
    json!({ "jsonrpc": "2.0", "id": null, "error": { "code": code, "message": message } })
}

/// The `-32700` reply for a message that is not JSON.
pub fn parse_error(detail: &dyn std::fmt::Display) -> serde_json::Value {
    error_value(-32700, format!("Parse error: {detail}"))
}

fn is_json(req: &Request) -> bool {
    req.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("application/json"))
}

/// Middleware for the MCP endpoint: parse errors for malformed JSON bodies, 413 for bodies
/// over `limit`, and 200 (not 202) when a session is deleted — the official Python SDK
/// accepts only 200/204 there and warns otherwise.
pub async fn http_guard(State(limit): State<usize>, req: Request, next: Next) -> Response {
    if req.method() == Method::POST && is_json(&req) {
        let (parts, body) = req.into_parts();
        let bytes = match axum::body::to_bytes(body, limit).await {
            Ok(b) => b,
            Err(_) => {
                return (
                    StatusCode::PAYLOAD_TOO_LARGE,
                    axum::Json(error_value(
                        -32600,
                        format!("Request body is larger than {limit} bytes"),
                    )),
                )
                    .into_response();
            }
        };
        if let Err(e) = serde_json::from_slice::<IgnoredAny>(&bytes) {
            return (StatusCode::BAD_REQUEST, axum::Json(parse_error(&e))).into_response();
        }
        return next
            .run(Request::from_parts(parts, Body::from(bytes)))
            .await;
    }
    let delete = req.method() == Method::DELETE;
    let mut response = next.run(req).await;
    if delete && response.status() == StatusCode::ACCEPTED {
        *response.status_mut() = StatusCode::OK;
        response
            .headers_mut()
            .insert(header::CONTENT_LENGTH, HeaderValue::from_static("0"));
    }
    response
}

/// Newline-delimited JSON between the real stdio and rmcp: valid lines pass through, a line
/// that is not JSON is answered with a parse error. Returns the (reader, writer) pair rmcp
/// serves on, and the output pump, which ends once rmcp has dropped its writer and everything
/// it wrote is on stdout: await it before exiting so no response is lost.
pub fn stdio_pipes(
    stdin: impl AsyncRead + Unpin + Send + 'static,
    stdout: impl AsyncWrite + Unpin + Send + 'static,
) -> (
    impl AsyncRead + Send + 'static,
    impl AsyncWrite + Send + 'static,
    tokio::task::JoinHandle<()>,
) {
    let (to_server_rd, mut to_server_wr) = tokio::io::duplex(1 << 16);
    let (from_server_rd, from_server_wr) = tokio::io::duplex(1 << 16);
    let (err_tx, mut err_rx) = tokio::sync::mpsc::unbounded_channel::<Vec<u8>>();

    tokio::spawn(async move {
        let mut input = BufReader::new(stdin);
        let mut line = Vec::new();
        loop {
            line.clear();
            match input.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let text = line.trim_ascii();
            if text.is_empty() {
                continue;
            }
            match serde_json::from_slice::<IgnoredAny>(text) {
                Ok(_) => {
                    if to_server_wr.write_all(text).await.is_err()
                        || to_server_wr.write_all(b"\n").await.is_err()
                    {
                        break;
                    }
                }
                Err(e) => {
                    let mut reply = parse_error(&e).to_string().into_bytes();
                    reply.push(b'\n');
                    if err_tx.send(reply).is_err() {
                        break;
                    }
                }
            }
        }
        // Dropping the writer is rmcp's end of input.
    });

    let output = tokio::spawn(async move {
        let mut out = stdout;
        let mut server = BufReader::new(from_server_rd);
        let mut buf = Vec::new();
        let mut errors_open = true;
        loop {
            tokio::select! {
                // read_until keeps partial data in `buf` if the other branch wins: cancel-safe.
                n = server.read_until(b'\n', &mut buf) => {
                    match n {
                        Ok(0) | Err(_) => break,
                        Ok(_) => {
                            if write_line(&mut out, &buf).await.is_err() {
                                break;
                            }
                            buf.clear();
                        }
                    }
                }
                reply = err_rx.recv(), if errors_open => match reply {
                    Some(reply) => {
                        if write_line(&mut out, &reply).await.is_err() {
                            break;
                        }
                    }
                    None => errors_open = false,
                },
            }
        }
        while let Ok(reply) = err_rx.try_recv() {
            let _ = write_line(&mut out, &reply).await;
        }
    });

    (to_server_rd, from_server_wr, output)
}

async fn write_line(out: &mut (impl AsyncWrite + Unpin), line: &[u8]) -> io::Result<()> {
    out.write_all(line).await?;
    out.flush().await
}
