//! The test databases of `quarry_store_pg::testing` (shared with other crates' PostgreSQL
//! tests, e.g. the engine's vector-backend conformance suite).

pub(crate) use quarry_store_pg::testing::{TestDatabase, with_database};
