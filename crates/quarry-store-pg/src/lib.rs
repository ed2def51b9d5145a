//! The shared [`Store`]: PostgreSQL with the pgvector extension, the system of record when
//! several Quarry nodes serve one team (SPEC §3).
//!
//! - **Blocking by design.** The store traits are synchronous and are only called from
//!   blocking threads (`quarry_store::thread_guard`); this crate uses `postgres`, the
//!   synchronous facade of `tokio-postgres`, through a small connection [`pool`].
//! - **Schema** as SQL files at the embedded store's logical versions (`migrations/`),
//!   applied under an advisory lock with a checksum per version ([`migrate`]); a database
//!   newer than this binary is refused.
//! - **Native SQL**, not the embedded store's: `FOR UPDATE SKIP LOCKED` job claims with the
//!   database's clock, `halfvec` vectors with a partial HNSW index per model.

mod access;
mod access_watch;
mod audit;
mod blob_locks;
mod chat;
mod copy;
mod entries;
mod error;
mod hub;
mod insight;
mod jobs;
mod knowledge;
mod migrate;
mod oauth;
mod pg_store;
mod policies;
mod pool;
mod sign_ins;
mod sources;
mod sql;
mod store;
#[cfg(feature = "testing")]
pub mod testing;
mod vector_tuning;
mod vectors;

pub use pg_store::PgStore;
pub use pool::{PgConnection, PgTransaction};
pub use vector_tuning::EXACT_SEARCH_MAX;
