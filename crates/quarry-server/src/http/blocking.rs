//! The one way async code runs blocking work (store, engine, directory and hub-registry
//! calls): [`run_blocking`], on Tokio's blocking pool. Handlers are
//! `parse → run_blocking(engine call) → typed response`; writes that must not interleave
//! take the server's write queue first ([`crate::state::AppState::write`]), then this runner.
//!
//! Each job runs inside [`quarry_store::thread_guard::allow_blocking`], so a debug build whose
//! async threads are marked (the router tests mark theirs) panics when a store method runs
//! anywhere else on them.

use axum::http::StatusCode;
use quarry_core::Error;
use quarry_engine::ModelMeter;

use super::ApiError;

tokio::task_local! {
    /// Where the blocking work of the current request (or MCP tool call) counts its
    /// requests to remote models: set by [`metered`], read by [`run_blocking_raw`].
    static MODEL_METER: ModelMeter;
}

/// Runs `fut` with the remote model requests of its blocking work counted in `meter` (an
/// enclosing meter counts none of them).
pub(crate) async fn metered<F: std::future::Future>(meter: ModelMeter, fut: F) -> F::Output {
    MODEL_METER.scope(meter, fut).await
}

/// Runs `f` off the async threads and maps its error into the REST shape.
pub(crate) async fn run_blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, Error> + Send + 'static,
) -> Result<T, ApiError> {
    run_blocking_raw(f).await?.map_err(ApiError::from)
}

/// Runs `f` off the async threads; only a worker that panicked is an error here (for work
/// whose result is not an engine `Result`, or whose errors the caller words itself).
pub(crate) async fn run_blocking_raw<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ApiError> {
    let meter = MODEL_METER.try_with(ModelMeter::clone).ok();
    tokio::task::spawn_blocking(move || {
        quarry_store::thread_guard::allow_blocking(|| match meter {
            Some(meter) => meter.run(f),
            None => f(),
        })
    })
    .await
    .map_err(|e| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("worker failed: {e}"),
        )
    })
}
