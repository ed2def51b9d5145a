//! Custom HTTP tools (seed "RAG + MCP client + plugins" §5.3): a tool defined by a JSON Schema
//! for its arguments and an HTTP request template, sent through the outbound guard
//! ([`quarry_netguard`]).
//!
//! # Templates
//!
//! `{{key}}` in `http_url` and `http_body_template` is replaced by the argument `key`
//! (whitespace inside the braces is ignored; names use letters, digits, `_` and `-`). `{{`
//! always opens a placeholder; in a run of braces (`{{{x}}}`) the placeholder opens at the last
//! two, so `{` before it stays literal.
//!
//! - **URL** ([`render_url`]): placeholders may appear only in the path, query and fragment,
//!   never in the scheme or host. A value is percent-encoded so that only unreserved characters
//!   (`A-Z a-z 0-9 - . _ ~`) stay as they are: `/`, `?`, `&`, `=`, `#`, `%` and spaces in a
//!   value cannot change the URL's structure. A rendered path with a `.` or `..` segment is
//!   refused (URL parsers collapse them, `%2e` included). Strings are used as they are; other
//!   values as their JSON text (`5`, `true`, `null`, `["a"]`).
//! - **Left-out parameters**: an optional parameter the call omits (and whose schema has no
//!   `default`) drops its `&`-separated pair from the URL's query and from a form body, and
//!   renders empty anywhere else (`null` outside strings in JSON).
//! - **Body** ([`render_body`]): values are encoded for the `Content-Type` ([`BodyKind`]):
//!   form-encoded for `application/x-www-form-urlencoded` (so `a&role=admin` stays one field's
//!   value), entity-escaped for XML, as they are for other text types. A JSON body (no
//!   `Content-Type`, or one naming JSON) is a JSON template with placeholders. A placeholder *inside a
//!   JSON string* of the template (`{"q": "{{query}}"}`) gets the value as escaped string
//!   content, without quotes (a non-string value: its JSON text, escaped). A placeholder *outside
//!   strings* (`{"n": {{count}}, "tags": {{tags}}}`) gets the value as a JSON value (a string
//!   with its quotes). "Inside a string" is decided by scanning the template's literal text for
//!   unescaped `"`. Without a `Content-Type` header the body is sent as `application/json`, and
//!   with a JSON content type the template must be valid JSON once placeholders are filled in.
//!
//! # Responses
//!
//! Any HTTP status comes back as a [`CustomResponse`] (the caller decides what a 404 means).
//! The body is read as a stream and **truncated** at `max_response_bytes` (default 1 MiB, at
//! most 10 MiB): reading stops there, `truncated` is set, the text is cut at a character
//! boundary and [`TRUNCATION_MARKER`] plus a note is appended, so a model sees both the data
//! and that it is incomplete. Guard refusals, timeouts and network failures are
//! [`CustomToolError`]s.
//!
//! Header values are secrets (API keys): they never appear in errors, logs or `Debug` output,
//! they are marked sensitive for the HTTP stack, and when a tool sends headers, redirects are
//! followed only within the first URL's origin (a cross-origin redirect comes back as the 3xx
//! response instead of carrying the headers elsewhere).
//!
//! # Files
//!
//! - `spec.rs`: [`CustomToolSpec`] and [`validate_spec`] ([`SpecError`]).
//! - `template.rs`: placeholders, [`render_url`], [`render_body`] ([`TemplateError`]).
//! - `schema.rs`: the JSON Schema subset of `parameters`: checked when a tool is saved, and
//!   [`validate_args`] at every call ([`Violations`]: each with a path and a kind).
//! - `execution.rs`: [`execute`] and [`CustomCall`], the HTTP request through the outbound
//!   guard ([`CustomToolError`]).

mod execution;
mod schema;
mod spec;
mod template;

pub use execution::{
    ArgumentError, CustomCall, CustomResponse, CustomToolError, TRUNCATION_MARKER, execute,
};
pub use schema::{
    ArgPath, PathStep, SchemaError, SchemaProblem, Violation, ViolationKind, Violations,
    validate_args,
};
pub use spec::{
    CustomToolSpec, DEFAULT_MAX_RESPONSE_BYTES, DEFAULT_TIMEOUT_SECS, MAX_RESPONSE_BYTES_LIMIT,
    MAX_TIMEOUT_SECS, METHODS, SpecError, validate_spec,
};
pub use template::{BodyKind, TemplateError, placeholders, render_body, render_url};
