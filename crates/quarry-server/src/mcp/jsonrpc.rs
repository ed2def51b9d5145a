//! JSON-RPC framing guards around rmcp: input that is not JSON gets a JSON-RPC
//! `-32700 Parse error` (id `null`) instead of being dropped (stdio) or answered with a
//! plain-text 415 (HTTP), so a client never waits forever on a malformed message. Over HTTP,
//! JSON that is not one JSON-RPC 2.0 message (another `jsonrpc` version, no `method`,
//! non-object `params`, a batch — MCP since 2025-06-18 sends one message per POST) gets
//! `-32600 Invalid Request` with HTTP 400, echoing the message's id when it has a valid one.
//!
//! Output passes [`rewrite_message`] on its way out (stdio lines, HTTP JSON bodies and SSE
//! `data:` lines), which adds the seed fields rmcp's types cannot carry
//! ([`lift_resource_names`]).

use std::io;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde::de::IgnoredAny;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

fn error_value(code: i64, message: String) -> serde_json::Value {
    json!({ "jsonrpc": "2.0", "id": null, "error": { "code": code, "message": message } })
}

/// The `-32700` reply for a message that is not JSON.
pub(crate) fn parse_error(detail: &dyn std::fmt::Display) -> serde_json::Value {
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
pub(crate) async fn http_guard(State(limit): State<usize>, req: Request, next: Next) -> Response {
    if req.method() == Method::POST && is_json(&req) {
        let (mut parts, body) = req.into_parts();
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
        let message = match serde_json::from_slice::<serde_json::Value>(&bytes) {
            Ok(m) => m,
            Err(e) => {
                return (StatusCode::BAD_REQUEST, axum::Json(parse_error(&e))).into_response();
            }
        };
        if let Err(refusal) = check_message(&message) {
            return (StatusCode::BAD_REQUEST, axum::Json(refusal)).into_response();
        }
        // Only a tool call may write documents; whether it does, its tool tells
        // (`service::tool_call::answer_is_read_unless_it_writes`).
        if message.get("method").and_then(Value::as_str) != Some("tools/call") {
            parts
                .extensions
                .insert(crate::http::consistency::ReadMark::read());
        }
        let response = next
            .run(Request::from_parts(parts, Body::from(bytes)))
            .await;
        return rewrite_response(response).await;
    }
    let delete = req.method() == Method::DELETE;
    // A GET stream can replay responses too (resumption with Last-Event-ID).
    let mut response = rewrite_response(next.run(req).await).await;
    if delete && response.status() == StatusCode::ACCEPTED {
        *response.status_mut() = StatusCode::OK;
        response
            .headers_mut()
            .insert(header::CONTENT_LENGTH, HeaderValue::from_static("0"));
    }
    response
}

/// The `-32600 Invalid Request` reply for `message` when it is not one JSON-RPC 2.0 message
/// rmcp can take (rmcp would answer it with a plain-text 415).
fn check_message(message: &Value) -> Result<(), Value> {
    let invalid = |id: Value, why: &str| {
        let mut reply = error_value(-32600, format!("Invalid Request: {why}"));
        reply["id"] = id;
        Err(reply)
    };
    let obj = match message {
        Value::Object(obj) => obj,
        Value::Array(batch) if batch.is_empty() => {
            return invalid(Value::Null, "an empty batch");
        }
        Value::Array(_) => {
            return invalid(
                Value::Null,
                "JSON-RPC batches are not supported; send one message per request (MCP 2025-06-18 and later)",
            );
        }
        _ => return invalid(Value::Null, "a JSON-RPC message must be a JSON object"),
    };
    // The id is echoed only when it is one a reply may carry.
    let id = match obj.get("id") {
        Some(id @ Value::String(_)) => id.clone(),
        Some(Value::Number(n)) if n.is_i64() || n.is_u64() => Value::Number(n.clone()),
        None => Value::Null,
        Some(_) => return invalid(Value::Null, "\"id\" must be a string or an integer"),
    };
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return invalid(id, "\"jsonrpc\" must be \"2.0\"");
    }
    match obj.get("method") {
        Some(Value::String(_)) => {}
        Some(_) => return invalid(id, "\"method\" must be a string"),
        None if obj.contains_key("result") || obj.contains_key("error") => {}
        None => return invalid(id, "a request needs a \"method\""),
    }
    match obj.get("params") {
        None | Some(Value::Object(_)) => {}
        Some(_) => return invalid(id, "\"params\" must be an object"),
    }
    // Anything else rmcp has no model for (a response of the wrong shape …).
    if let Err(e) = serde_json::from_value::<rmcp::model::ClientJsonRpcMessage>(message.clone()) {
        return invalid(id, &format!("not an MCP message ({e})"));
    }
    Ok(())
}

/// The same message with the seed's extra fields, or `None` when it needs none (most do not,
/// and those are passed on byte for byte).
pub(crate) fn rewrite_message(json: &[u8]) -> Option<Vec<u8>> {
    // Cheap filters: only tool results with embedded resources, and tool lists carrying
    // upstream fields rmcp has no model for, change.
    let text = std::str::from_utf8(json).ok()?;
    let resources = text.contains(r#""resource""#);
    let extras = text.contains(quarry_hub::catalog::EXTRA_META_KEY);
    if !resources && !extras {
        return None;
    }
    let mut msg: serde_json::Value = serde_json::from_str(text).ok()?;
    let mut changed = false;
    if resources {
        changed |= lift_resource_names(&mut msg);
    }
    if extras {
        changed |= lift_tool_extras(&mut msg);
    }
    if !changed {
        return None;
    }
    serde_json::to_vec(&msg).ok()
}

/// Puts the upstream fields a view parked in each listed tool's `_meta` (see
/// `quarry_hub::catalog::EXTRA_META_KEY`) back at the top level of the tool, where the
/// upstream had them. Returns whether anything changed.
fn lift_tool_extras(msg: &mut serde_json::Value) -> bool {
    if let Some(batch) = msg.as_array_mut() {
        return batch
            .iter_mut()
            .fold(false, |changed, m| lift_tool_extras(m) | changed);
    }
    let Some(tools) = msg
        .get_mut("result")
        .and_then(|r| r.get_mut("tools"))
        .and_then(serde_json::Value::as_array_mut)
    else {
        return false;
    };
    let mut changed = false;
    for tool in tools {
        let Some(obj) = tool.as_object_mut() else {
            continue;
        };
        let Some(meta) = obj
            .get_mut("_meta")
            .and_then(serde_json::Value::as_object_mut)
        else {
            continue;
        };
        let Some(serde_json::Value::Object(extra)) =
            meta.remove(quarry_hub::catalog::EXTRA_META_KEY)
        else {
            continue;
        };
        if meta.is_empty() {
            obj.remove("_meta");
        }
        for (k, v) in extra {
            obj.entry(k).or_insert(v);
        }
        changed = true;
    }
    changed
}

/// One line of output (stdio message or SSE line), rewritten if it carries a message that
/// needs it; the line ending is kept.
fn rewrite_line(line: &[u8]) -> Option<Vec<u8>> {
    let body_end = line.len()
        - line
            .iter()
            .rev()
            .take_while(|b| matches!(b, b'\n' | b'\r'))
            .count();
    let (body, ending) = line.split_at(body_end);
    let (prefix, json) = match body.strip_prefix(b"data:") {
        Some(rest) => {
            let rest = rest.strip_prefix(b" ").unwrap_or(rest);
            (&body[..body.len() - rest.len()], rest)
        }
        None => (&body[..0], body),
    };
    let new = rewrite_message(json)?;
    Some([prefix, &new, ending].concat())
}

/// Rewrites what an HTTP response from rmcp carries: a JSON body whole, an SSE stream line by
/// line as lines complete (so events are never held back); anything else untouched.
async fn rewrite_response(response: Response) -> Response {
    let content_type = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_ascii_lowercase();
    if content_type.starts_with("application/json") {
        let (mut parts, body) = response.into_parts();
        let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                axum::Json(error_value(-32603, "response body failed".to_owned())),
            )
                .into_response();
        };
        let bytes = match rewrite_message(&bytes) {
            Some(new) => {
                parts.headers.remove(header::CONTENT_LENGTH);
                Bytes::from(new)
            }
            None => bytes,
        };
        Response::from_parts(parts, Body::from(bytes))
    } else if content_type.starts_with("text/event-stream") {
        let (mut parts, body) = response.into_parts();
        parts.headers.remove(header::CONTENT_LENGTH);
        Response::from_parts(parts, rewrite_sse(body))
    } else {
        response
    }
}

/// An SSE body whose complete lines pass [`rewrite_line`]; a partial line waits for its end.
fn rewrite_sse(body: Body) -> Body {
    let stream = futures_util::stream::unfold(
        (body.into_data_stream(), Vec::new(), false),
        |(mut inner, mut pending, done): (_, Vec<u8>, bool)| async move {
            if done {
                return None;
            }
            loop {
                match inner.next().await {
                    Some(Ok(chunk)) => {
                        pending.extend_from_slice(&chunk);
                        let Some(last_nl) = pending.iter().rposition(|&b| b == b'\n') else {
                            continue;
                        };
                        let rest = pending.split_off(last_nl + 1);
                        let out = rewrite_lines(&pending);
                        return Some((Ok(Bytes::from(out)), (inner, rest, false)));
                    }
                    Some(Err(e)) => return Some((Err(e), (inner, pending, true))),
                    None if pending.is_empty() => return None,
                    None => {
                        let out = rewrite_lines(&pending);
                        return Some((Ok(Bytes::from(out)), (inner, Vec::new(), true)));
                    }
                }
            }
        },
    );
    Body::from_stream(stream)
}

fn rewrite_lines(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    for line in text.split_inclusive(|&b| b == b'\n') {
        match rewrite_line(line) {
            Some(new) => out.extend_from_slice(&new),
            None => out.extend_from_slice(line),
        }
    }
    out
}

/// Newline-delimited JSON between the real stdio and rmcp: valid lines pass through, a line
/// that is not JSON is answered with a parse error. Returns the (reader, writer) pair rmcp
/// serves on, and the output pump, which ends once rmcp has dropped its writer and everything
/// it wrote is on stdout: await it before exiting so no response is lost.
pub(crate) fn stdio_pipes(
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
                            let line = rewrite_line(&buf);
                            if write_line(&mut out, line.as_deref().unwrap_or(&buf)).await.is_err() {
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

/// Seed 001 puts `name` and `title` on each embedded document resource of `get` and
/// `multi_get`; rmcp's `ResourceContents` has no such fields, so `qmd_tools::resource_block` puts them
/// in the resource's `_meta` and this copies them onto the resource itself (they stay in
/// `_meta` too). It runs on each outgoing JSON-RPC message (see [`rewrite_message`]),
/// after rmcp has serialised it. Returns whether anything changed.
pub(crate) fn lift_resource_names(msg: &mut Value) -> bool {
    if let Some(batch) = msg.as_array_mut() {
        return batch
            .iter_mut()
            .fold(false, |changed, m| lift_resource_names(m) | changed);
    }
    let Some(content) = msg
        .get_mut("result")
        .and_then(|r| r.get_mut("content"))
        .and_then(Value::as_array_mut)
    else {
        return false;
    };
    let mut changed = false;
    for item in content {
        if item.get("type").and_then(Value::as_str) != Some("resource") {
            continue;
        }
        let Some(res) = item.get_mut("resource").and_then(Value::as_object_mut) else {
            continue;
        };
        let Some(meta) = res.get("_meta").and_then(Value::as_object).cloned() else {
            continue;
        };
        for key in ["name", "title"] {
            if let Some(v) = meta.get(key)
                && !res.contains_key(key)
            {
                res.insert(key.to_owned(), v.clone());
                changed = true;
            }
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    const RESULT: &str = r#"{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"resource","resource":{"uri":"qmd://n/a.md","mimeType":"text/markdown","text":"x","_meta":{"name":"n/a.md","title":"A"}}}]}}"#;

    #[test]
    fn messages_rmcp_cannot_take_get_json_rpc_errors() {
        let code = |text: &str| {
            check_message(&serde_json::from_str(text).unwrap())
                .err()
                .map(|e| (e["error"]["code"].as_i64().unwrap(), e["id"].clone()))
        };
        for ok in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
            r#"{"jsonrpc":"2.0","id":"a","method":"ping","params":{}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":7,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-1,"message":"no"}}"#,
        ] {
            assert_eq!(code(ok), None, "{ok}");
        }
        assert_eq!(
            code(r#"{"jsonrpc":"1.0","id":1,"method":"x"}"#),
            Some((-32600, json!(1)))
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":"b"}"#),
            Some((-32600, json!("b")))
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":true,"method":"x"}"#),
            Some((-32600, json!(null)))
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":1,"method":"x","params":"s"}"#),
            Some((-32600, json!(1)))
        );
        assert_eq!(code("[]"), Some((-32600, json!(null))));
        assert_eq!(
            code(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#),
            Some((-32600, json!(null)))
        );
    }

    #[test]
    fn lines_keep_their_framing() {
        let stdio = format!("{RESULT}\n");
        let new = String::from_utf8(rewrite_line(stdio.as_bytes()).unwrap()).unwrap();
        assert!(new.ends_with("}\n") && !new.ends_with("\n\n"), "{new}");
        let v: serde_json::Value = serde_json::from_str(new.trim_end()).unwrap();
        assert_eq!(v["result"]["content"][0]["resource"]["name"], "n/a.md");
        assert_eq!(v["result"]["content"][0]["resource"]["title"], "A");
        let sse = format!("data: {RESULT}\r\n");
        let new = String::from_utf8(rewrite_line(sse.as_bytes()).unwrap()).unwrap();
        assert!(
            new.starts_with("data: {") && new.ends_with("}\r\n"),
            "{new}"
        );
        // Lines that need nothing are not touched.
        for line in [
            "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n",
            "id: 0/3\n",
            "\n",
            ": keep-alive\n",
            "data:\n",
            "data: {not json \"resource\"\n",
        ] {
            assert_eq!(rewrite_line(line.as_bytes()), None, "{line:?}");
        }
    }

    #[tokio::test]
    async fn sse_bodies_are_rewritten_across_chunk_boundaries() {
        let event = format!("id: 7\ndata: {RESULT}\n\n: ping\n\n");
        let (a, b) = event.as_bytes().split_at(30);
        let chunks: Vec<Result<Bytes, std::io::Error>> =
            vec![Ok(Bytes::copy_from_slice(a)), Ok(Bytes::copy_from_slice(b))];
        let body = rewrite_sse(Body::from_stream(futures_util::stream::iter(chunks)));
        let out = axum::body::to_bytes(body, usize::MAX).await.unwrap();
        let out = String::from_utf8(out.to_vec()).unwrap();
        assert!(out.starts_with("id: 7\ndata: {"), "{out}");
        assert!(out.ends_with("}\n\n: ping\n\n"), "{out}");
        assert!(out.contains(r#""name":"n/a.md""#), "{out}");
    }
}
