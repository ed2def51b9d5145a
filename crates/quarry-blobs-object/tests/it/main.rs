//! The integration tests of `quarry-blobs-object`, one binary (each file a module: `cargo test -p quarry-blobs-object --test it <module>::`).

mod s3;
