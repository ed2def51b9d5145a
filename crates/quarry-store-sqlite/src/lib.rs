//! The embedded [`Store`]: one SQLite database in WAL mode.
//!
//! WAL lets any number of readers run while one writer writes, so a search never sees
//! "database is locked"; writers wait on `busy_timeout` (the engine also serialises writers
//! with a lock file). `synchronous = FULL` makes every acknowledged commit durable.
//!
//! In one process, writes go through one connection ([`SqliteStore::write`]) and reads
//! through a pool of read-only ones ([`SqliteStore::conn`]): with a single connection every
//! search of every client waited for every other store call, and for each commit's fsync
//! (issue 46: 8 clients got no more queries per second than 1).

mod access;
mod audit;
mod chat;
mod collections;
mod copy;
mod documents;
#[cfg(test)]
mod embed_text_tests;
mod embed_texts;
mod entries;
mod error;
mod feed;
mod hub;
mod insight;
mod knowledge;
mod migrate;
mod oauth;
mod policies;
mod semantic;
mod sessions;
mod settings;
mod sign_ins;
mod sources;
mod sql;
mod store;
#[cfg(test)]
mod tests;

pub use store::SqliteStore;
