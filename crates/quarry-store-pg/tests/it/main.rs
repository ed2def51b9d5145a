//! The integration tests of `quarry-store-pg`, one binary (each file a module: `cargo test -p quarry-store-pg --test it <module>::`).

mod access_watch;
mod common;
mod conformance;
mod internals;
mod vectors;
