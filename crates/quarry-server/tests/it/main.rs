//! The integration tests of `quarry-server`, one binary (each file a module: `cargo test -p quarry-server --test it <module>::`).

mod common;
mod groups;
mod openapi;
mod router;
mod sources;
