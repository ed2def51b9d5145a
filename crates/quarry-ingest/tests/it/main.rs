//! The integration tests of `quarry-ingest`, one binary (each file a module: `cargo test -p quarry-ingest --test it <module>::`).

mod chunk_real;
