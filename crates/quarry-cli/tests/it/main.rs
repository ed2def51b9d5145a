//! The integration tests of `quarry-cli`, one binary (each file a module: `cargo test -p quarry-cli --test it <module>::`).

mod collections;
mod common;
mod compat;
mod configuration;
mod crash_and_concurrency;
mod get;
mod indexing;
mod search;
mod semantic;
mod sources;
