//! The integration tests of `quarry-store-sqlite`, one binary (each file a module: `cargo test -p quarry-store-sqlite --test it <module>::`).

mod conformance;
