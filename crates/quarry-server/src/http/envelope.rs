//! The `/api/v1` success envelopes (QMD's routes answer bare JSON, as the seed does).

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
