//! The `/api/v1` success envelopes (QMD's routes answer bare JSON, as the seed does), and the
//! base URL answers hand back.

use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// `{"success": true, "data": …}`.
pub(crate) fn ok(data: impl serde::Serialize) -> Response {
    axum::Json(json!({ "success": true, "data": data })).into_response()
}

/// `{"success": true, "data": [...], "total": n}`.
pub(crate) fn ok_list<T: serde::Serialize>(items: &[T]) -> Response {
    axum::Json(json!({ "success": true, "data": items, "total": items.len() })).into_response()
}

/// The origin the client addressed (its `Host`, `https` when a proxy says so): the base of
/// the URLs an answer hands back (catalog endpoints, named tool endpoints).
pub(crate) fn base_url(headers: &HeaderMap) -> String {
    let host = headers
        .get(axum::http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("127.0.0.1:18765");
    let scheme = headers
        .get("x-forwarded-proto")
        .and_then(|h| h.to_str().ok())
        .filter(|p| *p == "https" || *p == "http")
        .unwrap_or("http");
    format!("{scheme}://{host}")
}

/// Text made safe inside an HTML element or a double-quoted attribute.
pub(crate) fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
