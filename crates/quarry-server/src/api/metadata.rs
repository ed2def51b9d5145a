//! Metadata discovery over REST (issue 44): `GET /api/v1/metadata?collection=&top=&filter=`
//! answers what fields the caller's documents have — their types, how many documents have
//! each, their most frequent values — so a client can write a search `filter`.

use std::sync::Arc;

use axum::Router;
use axum::routing::get;
use serde_json::Value;

use crate::auth::Caller;
use crate::http::{ApiError, Params, run_blocking};
use crate::service::filter::parse_filter_text;
use crate::state::AppState;

/// Most top values listed per field, and the default.
const MAX_TOP: usize = 50;
const DEFAULT_TOP: usize = 10;

pub(crate) fn router() -> Router<Arc<AppState>> {
    Router::new().route("/api/v1/metadata", get(metadata))
}

fn bad(detail: String) -> ApiError {
    ApiError::from(quarry_core::Error::invalid(detail))
}

async fn metadata(
    caller: Caller,
    Params(params): Params<Vec<(String, String)>>,
) -> Result<axum::Json<Value>, ApiError> {
    let (mut collection, mut filter, mut top) = (None, None, DEFAULT_TOP);
    for (key, value) in params {
        match key.as_str() {
            "collection" if !value.is_empty() => collection = Some(value),
            "collection" => {}
            "filter" => filter = parse_filter_text(&value)?,
            "top" => {
                top = match value.trim().parse::<usize>() {
                    Ok(n) if (1..=MAX_TOP).contains(&n) => n,
                    _ => {
                        return Err(bad(format!(
                            "top must be a whole number from 1 to {MAX_TOP} (got '{value}')"
                        )));
                    }
                }
            }
            other => {
                return Err(bad(format!(
                    "unknown query parameter '{other}'; parameters: collection, filter, top"
                )));
            }
        }
    }
    let engine = caller.engine.clone();
    let report =
        run_blocking(move || engine.metadata_fields(collection.as_deref(), filter.as_ref(), top))
            .await?;
    Ok(axum::Json(
        serde_json::to_value(&report).unwrap_or_default(),
    ))
}
