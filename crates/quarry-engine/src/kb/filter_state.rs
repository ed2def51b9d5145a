//! A request's metadata filter, held by the engine handle that serves the request.

use std::collections::HashSet;
use std::sync::{Arc, OnceLock};

use quarry_metadata::Filter;

/// A request's metadata filter and, once resolved, the documents it lets through (kept
/// for the request: its keyword and vector halves and every query variant share it).
pub(crate) struct FilterState {
    pub(crate) filter: Filter,
    pub(crate) allowed: OnceLock<Arc<HashSet<u64>>>,
}
