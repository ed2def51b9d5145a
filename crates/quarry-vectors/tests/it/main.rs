//! The integration tests of `quarry-vectors`, one binary (each file a module: `cargo test -p quarry-vectors --test it <module>::`).

mod among;
mod common;
mod exact;
mod mutation;
mod persistence;
mod recall;
