//! The integration tests of `quarry-models`, one binary (each file a module: `cargo test -p quarry-models --test it <module>::`).

mod api;
mod bad_inputs;
mod common;
mod hub;
mod parity;
mod paths;
mod reranker;
mod spec;
