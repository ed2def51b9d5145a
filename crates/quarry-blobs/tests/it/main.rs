//! The integration tests of `quarry-blobs`, one binary (each file a module: `cargo test -p quarry-blobs --test it <module>::`).

mod conformance;
