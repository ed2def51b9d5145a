//! The integration tests of `quarry-hub`, one binary (each file a module: `cargo test -p quarry-hub --test it <module>::`).

mod custom;
mod registry;
mod sse;
mod starts;
