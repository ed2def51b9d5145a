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
/// access to its space may read them.
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
    match telemetry::handle() {
        Some(h) => (
            [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
            h.render(),
        )
            .into_response(),
        None => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "metrics recorder could not be installed",
        )
        .into_response(),
    }
}
