//! The integration tests of `quarry-convert`, one binary (each file a module: `cargo test -p quarry-convert --test it <module>::`).

mod common;
mod corpus;
mod generated;
mod pdf_columns;
mod pdf_filings;
mod pdf_pages_without_text;
mod properties;
