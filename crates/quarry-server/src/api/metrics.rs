//! `GET /metrics`: Prometheus text.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::auth::Caller;
use crate::http::ApiError;
use crate::state::AppState;
use crate::telemetry;

pub(crate) fn router() -> Router<Arc<AppState>> {
    Router::new().route("/metrics", get(metrics_text))
}

/// Prometheus text. Counters are process-wide, so with `--auth` only a caller with admin
/// access to its space may read them; the per-source gauges cover only the sources of the
/// knowledge bases the caller reaches.
async fn metrics_text(State(st): State<Arc<AppState>>, caller: Caller) -> Response {
    if !caller.engine.scope().can(quarry_core::Access::Admin) {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            "metrics need a token with the admin or owner role",
        )
        .into_response();
    }
    // Gauges of this node and the shared queue, read at scrape time.
    let engine = st.root_engine().clone();
    if let Ok(Ok((node, queue))) = crate::http::run_blocking_raw(move || {
        Ok::<_, quarry_core::Error>((engine.node_feed_state()?, engine.queue_counts()?))
    })
    .await
    {
        telemetry::record_node(&node, &queue);
    }
    // Sources are the caller's own: rendered per request from its scoped engine, never put
    // in the process-wide recorder, so no space's admin sees another space's sources.
    let engine = caller.engine.clone();
    let sources = crate::http::run_blocking(move || engine.sources(None))
        .await
        .unwrap_or_default();
    match telemetry::handle() {
        Some(h) => {
            let mut text = h.render();
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&telemetry::sources_text(
                &sources,
                quarry_core::now_millis(),
            ));
            ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
        }
        None => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "metrics recorder could not be installed",
        )
        .into_response(),
    }
}
