//! Prometheus metrics: HTTP requests by route and status with latency histograms, and MCP
//! tool calls by tool and outcome. One process-wide recorder, rendered at `/metrics`.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

const LATENCY_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0, 30.0,
];

/// Installs the recorder once per process (later calls reuse it).
pub(crate) fn handle() -> Option<PrometheusHandle> {
    static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), LATENCY_BUCKETS)
                .ok()?
                .install_recorder()
                .ok()
        })
        .clone()
}

/// An authentication failure, by reason (`AUTH_FAILED`, `TOKEN_EXPIRED`, …).
pub(crate) fn record_auth_failure(reason: quarry_core::ErrorCode) {
    metrics::counter!("quarry_auth_failures_total", "reason" => reason.as_str()).increment(1);
}

/// This node's place in the store's change feed, and the shared job queue's depth.
pub(crate) fn record_node(node: &quarry_engine::NodeFeedState, queue: &quarry_store::QueueCounts) {
    metrics::gauge!("quarry_feed_behind_changes").set(node.behind_changes as f64);
    metrics::gauge!("quarry_feed_behind_seconds").set(node.behind_seconds);
    metrics::gauge!("quarry_feed_caught_up").set(if node.caught_up { 1.0 } else { 0.0 });
    metrics::gauge!("quarry_index_repaired_documents").set(node.repaired_documents as f64);
    metrics::gauge!("quarry_queue_jobs", "state" => "enqueued").set(queue.enqueued as f64);
    metrics::gauge!("quarry_queue_jobs", "state" => "processing").set(queue.processing as f64);
    metrics::gauge!("quarry_queue_jobs", "state" => "failed").set(queue.failed as f64);
}

/// The per-source gauges of `sources` (a caller's own, rendered per request: they never
/// enter the process-wide recorder, which every space's admins read) as Prometheus text:
/// seconds since each source's last successful sync (since it was attached, when none has
/// succeeded yet) — how stale its knowledge base may be — and its failed syncs in a row,
/// labelled by source id and knowledge base name.
pub(crate) fn sources_text(sources: &[quarry_engine::SourceView], now_ms: i64) -> String {
    use std::fmt::Write as _;
    if sources.is_empty() {
        return String::new();
    }
    let labels = |s: &quarry_engine::SourceView| {
        format!(
            "source=\"{}\",knowledge_base=\"{}\"",
            label_value(&s.id),
            label_value(&s.knowledge_base)
        )
    };
    let mut out = String::new();
    out.push_str(
        "# HELP quarry_source_sync_lag_seconds Seconds since the source's last successful sync (since it was attached, before one succeeded).\n\
         # TYPE quarry_source_sync_lag_seconds gauge\n",
    );
    for s in sources {
        let since = s.last_success_at.unwrap_or(s.created_at);
        let lag = (now_ms.saturating_sub(since)).max(0) as f64 / 1000.0;
        let _ = writeln!(out, "quarry_source_sync_lag_seconds{{{}}} {lag}", labels(s));
    }
    out.push_str(
        "# HELP quarry_source_sync_consecutive_failures Syncs of the source that failed in a row (0 after a success).\n\
         # TYPE quarry_source_sync_consecutive_failures gauge\n",
    );
    for s in sources {
        let _ = writeln!(
            out,
            "quarry_source_sync_consecutive_failures{{{}}} {}",
            labels(s),
            s.failures
        );
    }
    out
}

/// A label value as Prometheus's text format escapes it (backslash, quote, newline).
fn label_value(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

pub(crate) fn record_tool_call(tool: &str, outcome: &'static str, elapsed: Duration) {
    let labels = [("tool", tool.to_owned()), ("outcome", outcome.to_owned())];
    metrics::counter!("quarry_mcp_tool_calls_total", &labels).increment(1);
    metrics::histogram!("quarry_mcp_tool_call_duration_seconds", "tool" => tool.to_owned())
        .record(elapsed.as_secs_f64());
}

/// Middleware: counts every HTTP request and times it, labelled by route template (never
/// the raw path, which would let clients create unbounded label values).
pub(crate) async fn track_http(req: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = req.method().to_string();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| {
            if req.uri().path().starts_with("/mcp") {
                "/mcp".to_owned()
            } else {
                "unmatched".to_owned()
            }
        });
    let response = next.run(req).await;
    let elapsed = started.elapsed();
    tracing::info!(
        target: "quarry::http",
        method = %method,
        route = %route,
        status = response.status().as_u16(),
        elapsed_ms = elapsed.as_secs_f64() * 1000.0,
        "request"
    );
    let status = response.status().as_u16().to_string();
    metrics::counter!("quarry_http_requests_total", "method" => method.clone(), "route" => route.clone(), "status" => status).increment(1);
    metrics::histogram!("quarry_http_request_duration_seconds", "method" => method, "route" => route)
        .record(elapsed.as_secs_f64());
    response
}

/// Tokens a model took for `purpose` on someone's behalf (`quarry_model_tokens_total`).
pub(crate) fn record_model_tokens(purpose: &str, tokens: u64) {
    metrics::counter!("quarry_model_tokens_total", "purpose" => purpose.to_owned())
        .increment(tokens);
}

/// A search on `surface` that found something or nothing (`quarry_searches_total`; the
/// insight log keeps them per space, person and token).
pub(crate) fn record_search(surface: &str, answered: bool) {
    metrics::counter!(
        "quarry_searches_total",
        "surface" => surface.to_owned(),
        "answered" => if answered { "yes" } else { "no" }
    )
    .increment(1);
}

#[cfg(test)]
mod tests {
    use super::label_value;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(label_value("plain"), "plain");
        assert_eq!(label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
