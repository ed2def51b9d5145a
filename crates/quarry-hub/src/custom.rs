//! Custom HTTP tools (seed "RAG + MCP client + plugins" §5.3): a tool defined by a JSON Schema
//! for its arguments and an HTTP request template, sent through the outbound guard
//! ([`crate::ssrf`]).
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

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, Instant};

use http::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use url::Url;

use crate::ssrf::{self, NetPolicy, Refused};

/// The timeout when a spec names none.
pub const DEFAULT_TIMEOUT_SECS: u64 = 30;
/// The longest timeout a spec may ask for.
pub const MAX_TIMEOUT_SECS: u64 = 300;
/// The response cap when a spec names none (1 MiB).
pub const DEFAULT_MAX_RESPONSE_BYTES: u64 = 1 << 20;
/// The largest response cap a spec may ask for (10 MiB).
pub const MAX_RESPONSE_BYTES_LIMIT: u64 = 10 << 20;
/// The HTTP methods a custom tool may use.
pub const METHODS: &[&str] = &["GET", "POST", "PUT", "PATCH", "DELETE"];
/// What a truncated body's text ends with (followed by a note and `]`).
pub const TRUNCATION_MARKER: &str = "\n[truncated:";

/// Headers the HTTP client owns; a spec may not set them.
const CLIENT_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "te",
    "upgrade",
    "keep-alive",
    "proxy-connection",
];

/// Characters kept as they are in a URL value: RFC 3986 unreserved. Everything else is
/// percent-encoded, which is safe in a path segment, a query and a fragment.
const URL_VALUE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// A custom HTTP tool (the seed's `CustomTool`).
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CustomToolSpec {
    /// The tool name: 1 to 64 of `a-z A-Z 0-9 _ -`.
    pub name: String,
    #[serde(default)]
    /// What the tool does (shown to models).
    pub description: String,
    /// JSON Schema of the arguments (an object schema).
    #[serde(default = "empty_object_schema")]
    pub parameters: Value,
    /// URL template (`https://api.example.com/v1/items/{{id}}?q={{query}}`).
    pub http_url: String,
    /// GET, POST, PUT, PATCH or DELETE (any case).
    #[serde(default = "default_method")]
    pub http_method: String,
    /// Headers sent with every request; values are treated as secrets.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub http_headers: BTreeMap<String, String>,
    /// JSON body template (`{"q": "{{query}}", "n": {{count}}}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_body_template: Option<String>,
    /// Seconds for the whole request, body included (default 30, at most 300).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<u64>,
    /// Response body cap in bytes (default 1 MiB, at most 10 MiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_response_bytes: Option<u64>,
}

fn empty_object_schema() -> Value {
    serde_json::json!({"type": "object", "properties": {}})
}

fn default_method() -> String {
    "GET".to_owned()
}

/// Header values are secrets: `Debug` shows header names only.
impl fmt::Debug for CustomToolSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let headers: BTreeMap<&str, &str> = self
            .http_headers
            .keys()
            .map(|k| (k.as_str(), "<redacted>"))
            .collect();
        f.debug_struct("CustomToolSpec")
            .field("name", &self.name)
            .field("description", &self.description)
            .field("parameters", &self.parameters)
            .field("http_url", &self.http_url)
            .field("http_method", &self.http_method)
            .field("http_headers", &headers)
            .field("http_body_template", &self.http_body_template)
            .field("timeout_secs", &self.timeout_secs)
            .field("max_response_bytes", &self.max_response_bytes)
            .finish()
    }
}

impl CustomToolSpec {
    /// The timeout for the whole request.
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout_secs.unwrap_or(DEFAULT_TIMEOUT_SECS))
    }

    /// The response body cap in bytes.
    pub fn response_cap(&self) -> u64 {
        self.max_response_bytes
            .unwrap_or(DEFAULT_MAX_RESPONSE_BYTES)
    }
}

/// What a custom tool's request returned: any HTTP status (non-2xx included).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CustomResponse {
    /// The HTTP status.
    pub status: u16,
    /// The response's `Content-Type`, if any.
    pub content_type: Option<String>,
    /// The body as text (invalid UTF-8 replaced); when `truncated`, the first
    /// `max_response_bytes` bytes (cut at a character boundary) followed by
    /// [`TRUNCATION_MARKER`] and a note.
    pub body: String,
    /// Whether the body was cut at `max_response_bytes`.
    pub truncated: bool,
    /// How long the request took, in milliseconds.
    pub elapsed_ms: u64,
}

/// Why a custom tool call produced no response. `Display` is for humans; no variant carries a
/// header value.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CustomToolError {
    /// The spec itself is invalid ([`validate_spec`]).
    InvalidSpec(String),
    /// The arguments do not fit the schema, or cannot be rendered into the request.
    InvalidArguments(String),
    /// The outbound guard refused the destination; nothing was sent there.
    Refused(Refused),
    /// No complete response within the timeout.
    Timeout {
        /// The timeout that ran out, in seconds.
        secs: u64,
    },
    /// The connection failed.
    Connect(String),
    /// Another HTTP failure (protocol error, body read error, …).
    Http(String),
}

impl fmt::Display for CustomToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CustomToolError::InvalidSpec(m) => write!(f, "invalid custom tool: {m}"),
            CustomToolError::InvalidArguments(m) => write!(f, "invalid arguments: {m}"),
            CustomToolError::Refused(r) => write!(f, "{r}"),
            CustomToolError::Timeout { secs } => {
                write!(
                    f,
                    "the request timed out after {secs} s without a complete response"
                )
            }
            CustomToolError::Connect(m) => write!(f, "connection failed: {m}"),
            CustomToolError::Http(m) => write!(f, "request failed: {m}"),
        }
    }
}

impl std::error::Error for CustomToolError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CustomToolError::Refused(r) => Some(r),
            _ => None,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Templates

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Piece<'a> {
    Lit(&'a str),
    /// A placeholder: its name and the byte offset of its `{{` in the template.
    Var {
        key: &'a str,
        at: usize,
    },
}

fn is_key_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

fn parse_template(t: &str) -> Result<Vec<Piece<'_>>, String> {
    let bytes = t.as_bytes();
    let mut pieces = Vec::new();
    let mut lit_start = 0;
    let mut from = 0;
    while let Some(rel) = t[from..].find("{{") {
        let mut open = from + rel;
        while bytes.get(open + 2) == Some(&b'{') {
            open += 1;
        }
        let inner_start = open + 2;
        let Some(close_rel) = t[inner_start..].find("}}") else {
            return Err(format!(
                "unclosed placeholder at byte {open} (\"{{{{\" opens a placeholder)"
            ));
        };
        let inner = &t[inner_start..inner_start + close_rel];
        let key = inner.trim();
        if key.is_empty() || !key.bytes().all(is_key_byte) {
            let shown: String = inner.chars().take(40).collect();
            return Err(format!(
                "invalid placeholder \"{{{{{shown}}}}}\" at byte {open}: names use letters, digits, '_' and '-'"
            ));
        }
        if open > lit_start {
            pieces.push(Piece::Lit(&t[lit_start..open]));
        }
        pieces.push(Piece::Var { key, at: open });
        from = inner_start + close_rel + 2;
        lit_start = from;
    }
    if lit_start < t.len() {
        pieces.push(Piece::Lit(&t[lit_start..]));
    }
    Ok(pieces)
}

/// The placeholder names a template uses, in order of first use.
pub fn placeholders(template: &str) -> Result<Vec<String>, String> {
    let mut keys: Vec<String> = Vec::new();
    for p in parse_template(template)? {
        if let Piece::Var { key, .. } = p
            && !keys.iter().any(|k| k == key)
        {
            keys.push(key.to_owned());
        }
    }
    Ok(keys)
}

fn args_object(args: &Value) -> Result<&Map<String, Value>, String> {
    args.as_object()
        .ok_or_else(|| format!("arguments must be a JSON object, got {}", type_name(args)))
}

/// Drops the `&`-separated pairs of `section` (a query string or form body) that name a
/// placeholder with no value: a left-out optional parameter sends no field at all, rather
/// than an empty one the API might read as a value. (Required parameters were checked
/// before rendering; a default was filled in.)
fn drop_pairs_left_out(section: &str, args: &Map<String, Value>) -> String {
    section
        .split('&')
        .filter(|pair| {
            placeholders(pair).map_or(true, |keys| keys.iter().all(|k| args.contains_key(k)))
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// A value as URL text: strings as they are, anything else as JSON text.
fn scalar_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Where the template's authority (`user@host:port` after `scheme://`) starts and ends.
/// A backslash ends it too: WHATWG parsers read it as `/` in http(s) URLs.
fn authority_span(t: &str) -> Option<(usize, usize)> {
    let start = t.find("://")? + 3;
    Some((
        start,
        start
            + t[start..]
                .find(['/', '?', '#', '\\'])
                .unwrap_or(t.len() - start),
    ))
}

/// Renders a URL template: each `{{key}}` becomes the percent-encoded value (see the module
/// docs). Errors on a missing value, a placeholder in the scheme or host, and a rendered `.` or
/// `..` path segment.
pub fn render_url(template: &str, args: &Value) -> Result<String, String> {
    let args = args_object(args)?;
    let (authority_start, authority_end) =
        authority_span(template).ok_or("the URL template has no scheme (http:// or https://)")?;
    if template[authority_start..authority_end].trim().is_empty() {
        return Err("the URL template has no host".into());
    }
    // Query pairs of left-out parameters go; the authority (and so its span) is unchanged.
    let trimmed;
    let template = match template[authority_end..].find('?') {
        Some(q) => {
            let q = authority_end + q;
            let end = template[q..].find('#').map_or(template.len(), |f| q + f);
            let query = drop_pairs_left_out(&template[q + 1..end], args);
            let sep = if query.is_empty() { "" } else { "?" };
            trimmed = format!("{}{sep}{query}{}", &template[..q], &template[end..]);
            trimmed.as_str()
        }
        None => template,
    };
    let pieces = parse_template(template)?;
    let mut out = String::with_capacity(template.len() + 16);
    for piece in pieces {
        match piece {
            Piece::Lit(s) => out.push_str(s),
            Piece::Var { key, at } => {
                if at < authority_end {
                    return Err(format!(
                        "placeholder {{{{{key}}}}} is in the URL's scheme or host; placeholders may \
                         appear only in the path, query and fragment"
                    ));
                }
                // A left-out parameter outside the query renders empty.
                if let Some(value) = args.get(key) {
                    out.extend(utf8_percent_encode(&scalar_text(value), URL_VALUE));
                }
            }
        }
    }
    // The rendered authority is the template's, so the path starts at the same offset.
    let rest = &out[authority_end..];
    let path = &rest[..rest.find(['?', '#']).unwrap_or(rest.len())];
    for segment in path.split(['/', '\\']) {
        let decoded = segment.to_ascii_lowercase().replace("%2e", ".");
        if decoded == "." || decoded == ".." {
            return Err(format!(
                "the URL path would contain a {segment:?} segment, which would change the path"
            ));
        }
    }
    Ok(out)
}

/// JSON string content (escaped, no quotes) for a value.
fn string_content(v: &Value) -> String {
    let quoted = Value::String(scalar_text(v)).to_string();
    quoted[1..quoted.len() - 1].to_owned()
}

/// Renders a body template, asking `fill(key, inside_string)` for each placeholder.
fn render_body_with(
    template: &str,
    mut fill: impl FnMut(&str, bool) -> Result<String, String>,
) -> Result<String, String> {
    let mut out = String::with_capacity(template.len() + 32);
    let mut in_string = false;
    let mut escaped = false;
    for piece in parse_template(template)? {
        match piece {
            Piece::Lit(s) => {
                for c in s.chars() {
                    if in_string {
                        if escaped {
                            escaped = false;
                        } else if c == '\\' {
                            escaped = true;
                        } else if c == '"' {
                            in_string = false;
                        }
                    } else if c == '"' {
                        in_string = true;
                    }
                }
                out.push_str(s);
            }
            Piece::Var { key, .. } => {
                escaped = false;
                out.push_str(&fill(key, in_string)?);
            }
        }
    }
    Ok(out)
}

/// How a body's values are encoded, from its `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyKind {
    /// No `Content-Type`, or one naming JSON: the quote rule (module docs).
    Json,
    /// `application/x-www-form-urlencoded`: values form-encoded (`&`, `=`, `+`, spaces and
    /// non-ASCII cannot add or split fields); pairs of left-out parameters dropped.
    Form,
    /// XML: values with `& < > " '` escaped as entities.
    Xml,
    /// Anything else: values as text, as they are.
    Text,
}

impl BodyKind {
    /// The kind the spec's `Content-Type` header names.
    pub fn of(headers: &BTreeMap<String, String>) -> BodyKind {
        let Some((_, ct)) = headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("content-type"))
        else {
            return BodyKind::Json;
        };
        let ct = ct.to_ascii_lowercase();
        if ct.contains("json") {
            BodyKind::Json
        } else if ct.contains("x-www-form-urlencoded") {
            BodyKind::Form
        } else if ct.contains("xml") {
            BodyKind::Xml
        } else {
            BodyKind::Text
        }
    }
}

fn xml_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

/// Renders a body template, encoding each value for `kind` (see [`BodyKind`]). In JSON, a
/// placeholder inside a JSON string of the template gets the value's escaped string content
/// without quotes (`"{{q}}"` → `"say \"hi\"\n"`); one outside strings gets the value as JSON
/// (`{{n}}` → `5`, `{{q}}` → `"text"`, `{{tags}}` → `["a","b"]`). A left-out (optional)
/// parameter renders empty — `null` outside JSON strings — and its pair is dropped from a
/// form body.
pub fn render_body(template: &str, args: &Value, kind: BodyKind) -> Result<String, String> {
    let args = args_object(args)?;
    if kind == BodyKind::Json {
        return render_body_with(template, |key, in_string| {
            Ok(match (args.get(key), in_string) {
                (Some(value), true) => string_content(value),
                (Some(value), false) => value.to_string(),
                (None, true) => String::new(),
                (None, false) => "null".to_owned(),
            })
        });
    }
    let kept;
    let template = if kind == BodyKind::Form {
        kept = drop_pairs_left_out(template, args);
        kept.as_str()
    } else {
        template
    };
    let mut out = String::with_capacity(template.len() + 32);
    for piece in parse_template(template)? {
        match piece {
            Piece::Lit(s) => out.push_str(s),
            Piece::Var { key, .. } => {
                let Some(value) = args.get(key) else {
                    continue;
                };
                let text = scalar_text(value);
                match kind {
                    BodyKind::Form => {
                        out.extend(url::form_urlencoded::byte_serialize(text.as_bytes()));
                    }
                    BodyKind::Xml => out.push_str(&xml_escape(&text)),
                    BodyKind::Json | BodyKind::Text => out.push_str(&text),
                }
            }
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Spec validation

fn parse_method(m: &str) -> Result<reqwest::Method, String> {
    let upper = m.trim().to_ascii_uppercase();
    if !METHODS.contains(&upper.as_str()) {
        return Err(format!(
            "http_method {m:?} is not one of {}",
            METHODS.join(", ")
        ));
    }
    reqwest::Method::from_bytes(upper.as_bytes())
        .map_err(|_| format!("http_method {m:?} is invalid"))
}

fn build_headers(headers: &BTreeMap<String, String>) -> Result<HeaderMap, String> {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        let header = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("http_headers: {name:?} is not a valid HTTP header name"))?;
        if CLIENT_HEADERS.contains(&header.as_str()) {
            return Err(format!(
                "http_headers: {name:?} is set by the HTTP client and cannot be configured"
            ));
        }
        // Never echo the value: it is likely a secret.
        let mut value = HeaderValue::from_str(value).map_err(|_| {
            format!("http_headers: the value of {name:?} is not a valid HTTP header value")
        })?;
        value.set_sensitive(true);
        map.append(header, value);
    }
    Ok(map)
}

const TYPE_NAMES: &[&str] = &[
    "null", "boolean", "object", "array", "number", "integer", "string",
];

/// Checks that a schema uses the supported keywords correctly (recursively).
fn check_schema(schema: &Value, path: &str) -> Result<(), String> {
    let obj = match schema {
        Value::Bool(_) => return Ok(()),
        Value::Object(o) => o,
        _ => return Err(format!("{path}: a schema must be an object or a boolean")),
    };
    if let Some(t) = obj.get("type") {
        let names: Vec<&Value> = match t {
            Value::Array(a) if !a.is_empty() => a.iter().collect(),
            Value::String(_) => vec![t],
            _ => {
                return Err(format!(
                    "{path}.type: must be a type name or a non-empty array of them"
                ));
            }
        };
        for n in names {
            match n.as_str() {
                Some(n) if TYPE_NAMES.contains(&n) => {}
                _ => return Err(format!("{path}.type: unknown type {n}")),
            }
        }
    }
    if let Some(p) = obj.get("properties") {
        let p = p
            .as_object()
            .ok_or_else(|| format!("{path}.properties: must be an object"))?;
        for (k, s) in p {
            check_schema(s, &format!("{path}.properties.{k}"))?;
        }
    }
    if let Some(r) = obj.get("required")
        && !r.as_array().is_some_and(|a| a.iter().all(Value::is_string))
    {
        return Err(format!(
            "{path}.required: must be an array of property names"
        ));
    }
    if let Some(a) = obj.get("additionalProperties") {
        check_schema(a, &format!("{path}.additionalProperties"))?;
    }
    match obj.get("items") {
        Some(Value::Array(list)) => {
            for (i, s) in list.iter().enumerate() {
                check_schema(s, &format!("{path}.items[{i}]"))?;
            }
        }
        Some(s) => check_schema(s, &format!("{path}.items"))?,
        None => {}
    }
    if let Some(e) = obj.get("enum")
        && !e.is_array()
    {
        return Err(format!("{path}.enum: must be an array"));
    }
    for kw in ["minimum", "maximum"] {
        if obj.get(kw).is_some_and(|v| !v.is_number()) {
            return Err(format!("{path}.{kw}: must be a number"));
        }
    }
    for kw in ["exclusiveMinimum", "exclusiveMaximum"] {
        if obj
            .get(kw)
            .is_some_and(|v| !v.is_number() && !v.is_boolean())
        {
            return Err(format!("{path}.{kw}: must be a number"));
        }
    }
    for kw in ["minLength", "maxLength", "minItems", "maxItems"] {
        if obj.get(kw).is_some_and(|v| v.as_u64().is_none()) {
            return Err(format!("{path}.{kw}: must be a non-negative integer"));
        }
    }
    if let Some(p) = obj.get("pattern") {
        let p = p
            .as_str()
            .ok_or_else(|| format!("{path}.pattern: must be a string"))?;
        regex::Regex::new(p)
            .map_err(|e| format!("{path}.pattern: invalid regular expression: {e}"))?;
    }
    Ok(())
}

/// Checks a spec: the name (`^[a-zA-Z0-9_-]{1,64}$`), the method, the parameters schema (an
/// object schema using the supported keywords correctly), the URL (http/https, parses once
/// placeholders are filled, placeholders only after the host), that every placeholder is a
/// declared property, the body template (not with GET; valid JSON once filled when the body is
/// JSON), header names and values, and the limits (timeout 1–300 s, cap 1 B–10 MiB).
pub fn validate_spec(spec: &CustomToolSpec) -> Result<(), String> {
    let name = &spec.name;
    if name.is_empty() || name.len() > 64 || !name.bytes().all(is_key_byte) {
        return Err(format!(
            "name {name:?} must be 1 to 64 characters, each a letter, digit, '_' or '-'"
        ));
    }
    let method = parse_method(&spec.http_method)?;

    let params = spec.parameters.as_object().ok_or(
        "parameters must be a JSON Schema object ({\"type\": \"object\", \"properties\": {…}})",
    )?;
    match params.get("type") {
        None => {}
        Some(Value::String(t)) if t == "object" => {}
        Some(other) => {
            return Err(format!(
                "parameters must describe an object (\"type\": \"object\"), got \"type\": {other}"
            ));
        }
    }
    check_schema(&spec.parameters, "parameters")?;
    let declared = params.get("properties").and_then(Value::as_object);
    let is_declared = |key: &str| declared.is_some_and(|p| p.contains_key(key));

    // URL
    let lower = spec.http_url.trim_start().to_ascii_lowercase();
    if !(lower.starts_with("http://") || lower.starts_with("https://")) {
        return Err(format!(
            "http_url {:?} must start with http:// or https://",
            spec.http_url
        ));
    }
    let url_keys = placeholders(&spec.http_url).map_err(|e| format!("http_url: {e}"))?;
    let mut dummy = Map::new();
    for key in &url_keys {
        if !is_declared(key) {
            return Err(format!(
                "http_url: placeholder {{{{{key}}}}} is not a declared parameter (add it to parameters.properties)"
            ));
        }
        dummy.insert(key.clone(), Value::String("x".into()));
    }
    let rendered =
        render_url(&spec.http_url, &Value::Object(dummy)).map_err(|e| format!("http_url: {e}"))?;
    let url = Url::parse(&rendered).map_err(|e| format!("http_url: not a valid URL: {e}"))?;
    if url.host().is_none() {
        return Err("http_url: the URL has no host".into());
    }

    // Body
    if let Some(template) = &spec.http_body_template {
        if method == reqwest::Method::GET {
            return Err(
                "http_body_template needs POST, PUT, PATCH or DELETE (a GET request has no body)"
                    .into(),
            );
        }
        for key in placeholders(template).map_err(|e| format!("http_body_template: {e}"))? {
            if !is_declared(&key) {
                return Err(format!(
                    "http_body_template: placeholder {{{{{key}}}}} is not a declared parameter (add it to parameters.properties)"
                ));
            }
        }
        if BodyKind::of(&spec.http_headers) == BodyKind::Json {
            let filled = render_body_with(template, |_, in_string| {
                Ok(if in_string {
                    "x".to_owned()
                } else {
                    "null".to_owned()
                })
            })?;
            if let Err(e) = serde_json::from_str::<Value>(&filled) {
                return Err(format!(
                    "http_body_template is not valid JSON once placeholders are filled in ({e}); \
                     set a Content-Type header for a non-JSON body"
                ));
            }
        }
    }

    build_headers(&spec.http_headers)?;

    if let Some(t) = spec.timeout_secs
        && !(1..=MAX_TIMEOUT_SECS).contains(&t)
    {
        return Err(format!(
            "timeout_secs must be between 1 and {MAX_TIMEOUT_SECS}, got {t}"
        ));
    }
    if let Some(m) = spec.max_response_bytes
        && !(1..=MAX_RESPONSE_BYTES_LIMIT).contains(&m)
    {
        return Err(format!(
            "max_response_bytes must be between 1 and {MAX_RESPONSE_BYTES_LIMIT} (10 MiB), got {m}"
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Argument validation (a JSON Schema subset)

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn is_integer(n: &serde_json::Number) -> bool {
    n.is_i64()
        || n.is_u64()
        || n.as_f64()
            .is_some_and(|f| f.is_finite() && f.fract() == 0.0)
}

fn type_matches(name: &str, v: &Value) -> bool {
    match (name, v) {
        ("null", Value::Null)
        | ("boolean", Value::Bool(_))
        | ("number", Value::Number(_))
        | ("string", Value::String(_))
        | ("array", Value::Array(_))
        | ("object", Value::Object(_)) => true,
        ("integer", Value::Number(n)) => is_integer(n),
        _ => false,
    }
}

/// JSON equality with numbers compared by value (`1` equals `1.0`).
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            match (x.as_i64(), y.as_i64(), x.as_u64(), y.as_u64()) {
                (Some(x), Some(y), ..) => x == y,
                (_, _, Some(x), Some(y)) => x == y,
                _ => x.as_f64() == y.as_f64(),
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_eq(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

fn at(path: &str, message: String) -> String {
    if path.is_empty() {
        message
    } else {
        format!("{path}: {message}")
    }
}

fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

fn short_json(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 200 {
        format!("{}…", s.chars().take(200).collect::<String>())
    } else {
        s
    }
}

fn validate_node(schema: &Value, v: &Value, path: &str, errors: &mut Vec<String>) {
    let obj = match schema {
        Value::Bool(true) => return,
        Value::Bool(false) => {
            errors.push(at(path, "no value is allowed here".into()));
            return;
        }
        Value::Object(o) => o,
        _ => {
            errors.push(at(path, "the schema is not an object".into()));
            return;
        }
    };

    if let Some(t) = obj.get("type") {
        let names: Vec<&str> = match t {
            Value::String(s) => vec![s.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !names.is_empty() && !names.iter().any(|n| type_matches(n, v)) {
            errors.push(at(
                path,
                format!("expected {}, got {}", names.join(" or "), type_name(v)),
            ));
            return; // further keywords would only repeat the problem
        }
    }
    if let Some(Value::Array(options)) = obj.get("enum")
        && !options.iter().any(|o| json_eq(o, v))
    {
        let list: Vec<String> = options.iter().map(short_json).collect();
        errors.push(at(
            path,
            format!("must be one of {}, got {}", list.join(", "), short_json(v)),
        ));
    }
    if let Some(c) = obj.get("const")
        && !json_eq(c, v)
    {
        errors.push(at(
            path,
            format!("must be {}, got {}", short_json(c), short_json(v)),
        ));
    }

    match v {
        Value::String(s) => {
            let n = s.chars().count() as u64;
            if let Some(min) = obj.get("minLength").and_then(Value::as_u64)
                && n < min
            {
                errors.push(at(
                    path,
                    format!("must be at least {min} characters long, got {n}"),
                ));
            }
            if let Some(max) = obj.get("maxLength").and_then(Value::as_u64)
                && n > max
            {
                errors.push(at(
                    path,
                    format!("must be at most {max} characters long, got {n}"),
                ));
            }
            if let Some(p) = obj.get("pattern").and_then(Value::as_str) {
                match regex::Regex::new(p) {
                    Ok(re) if re.is_match(s) => {}
                    Ok(_) => errors.push(at(path, format!("must match the pattern {p:?}"))),
                    Err(_) => errors.push(at(
                        path,
                        format!("the schema's pattern {p:?} is not a valid regular expression"),
                    )),
                }
            }
        }
        Value::Number(n) => {
            let x = n.as_f64().unwrap_or(f64::NAN);
            let num = |kw: &str| obj.get(kw).and_then(Value::as_f64);
            let flag = |kw: &str| obj.get(kw).and_then(Value::as_bool).unwrap_or(false);
            if let Some(min) = num("minimum") {
                // Draft 4: "exclusiveMinimum": true turns minimum exclusive.
                if flag("exclusiveMinimum") {
                    if x <= min {
                        errors.push(at(
                            path,
                            format!("must be greater than {}, got {n}", obj["minimum"]),
                        ));
                    }
                } else if x < min {
                    errors.push(at(
                        path,
                        format!("must be at least {}, got {n}", obj["minimum"]),
                    ));
                }
            }
            if let Some(max) = num("maximum") {
                if flag("exclusiveMaximum") {
                    if x >= max {
                        errors.push(at(
                            path,
                            format!("must be less than {}, got {n}", obj["maximum"]),
                        ));
                    }
                } else if x > max {
                    errors.push(at(
                        path,
                        format!("must be at most {}, got {n}", obj["maximum"]),
                    ));
                }
            }
            if let Some(min) = num("exclusiveMinimum")
                && x <= min
            {
                errors.push(at(
                    path,
                    format!("must be greater than {}, got {n}", obj["exclusiveMinimum"]),
                ));
            }
            if let Some(max) = num("exclusiveMaximum")
                && x >= max
            {
                errors.push(at(
                    path,
                    format!("must be less than {}, got {n}", obj["exclusiveMaximum"]),
                ));
            }
        }
        Value::Array(items) => {
            let n = items.len() as u64;
            if let Some(min) = obj.get("minItems").and_then(Value::as_u64)
                && n < min
            {
                errors.push(at(path, format!("must have at least {min} items, got {n}")));
            }
            if let Some(max) = obj.get("maxItems").and_then(Value::as_u64)
                && n > max
            {
                errors.push(at(path, format!("must have at most {max} items, got {n}")));
            }
            match obj.get("items") {
                Some(Value::Array(tuple)) => {
                    for (i, (item, s)) in items.iter().zip(tuple).enumerate() {
                        validate_node(s, item, &format!("{path}[{i}]"), errors);
                    }
                }
                Some(s) => {
                    for (i, item) in items.iter().enumerate() {
                        validate_node(s, item, &format!("{path}[{i}]"), errors);
                    }
                }
                None => {}
            }
        }
        Value::Object(map) => {
            if let Some(Value::Array(required)) = obj.get("required") {
                for r in required.iter().filter_map(Value::as_str) {
                    if !map.contains_key(r) {
                        errors.push(at(path, format!("missing required property {r:?}")));
                    }
                }
            }
            let props = obj.get("properties").and_then(Value::as_object);
            let additional = obj.get("additionalProperties");
            for (k, val) in map {
                match props.and_then(|p| p.get(k)) {
                    Some(s) => validate_node(s, val, &child(path, k), errors),
                    None => match additional {
                        Some(Value::Bool(false)) => {
                            errors.push(at(path, format!("unknown property {k:?}")))
                        }
                        Some(s @ Value::Object(_)) => {
                            validate_node(s, val, &child(path, k), errors)
                        }
                        _ => {}
                    },
                }
            }
        }
        Value::Null | Value::Bool(_) => {}
    }
}

/// Validates arguments against a JSON Schema subset: `type` (a name or an array of names;
/// `integer` accepts numbers without a fraction), `enum`, `const`, `properties`, `required`,
/// `additionalProperties` (boolean or schema), `items` (schema or tuple), `minItems`,
/// `maxItems`, `minimum`, `maximum`, `exclusiveMinimum`/`exclusiveMaximum` (number, or draft-4
/// boolean), `minLength`/`maxLength` (in characters), `pattern` (unanchored, Rust regex
/// syntax). Other keywords are ignored. Every problem is reported, joined by `; `, each naming
/// its path: `query: expected string, got number`, `missing required property "city"`,
/// `filters.tags[1]: must be at most 10 characters long, got 12`.
pub fn validate_args(schema: &Value, args: &Value) -> Result<(), String> {
    let mut errors = Vec::new();
    validate_node(schema, args, "", &mut errors);
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

/// The arguments with top-level `default`s from the schema filled in (`null` counts as `{}`).
fn with_defaults(schema: &Value, args: &Value) -> Value {
    let mut args = if args.is_null() {
        Value::Object(Map::new())
    } else {
        args.clone()
    };
    if let (Some(obj), Some(props)) = (
        args.as_object_mut(),
        schema.get("properties").and_then(Value::as_object),
    ) {
        for (k, s) in props {
            if !obj.contains_key(k)
                && let Some(d) = s.get("default")
            {
                obj.insert(k.clone(), d.clone());
            }
        }
    }
    args
}

// ---------------------------------------------------------------------------------------------
// Execution

/// The URL without user info, query or fragment: what errors and logs may show.
pub(crate) fn redacted(url: &Url) -> String {
    let host = url.host_str().unwrap_or("");
    match url.port() {
        Some(p) => format!("{}://{host}:{p}{}", url.scheme(), url.path()),
        None => format!("{}://{host}{}", url.scheme(), url.path()),
    }
}

/// An error and its sources, `: `-joined, repeated texts dropped.
pub(crate) fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut cur = Some(err);
    while let Some(e) = cur {
        let text = e.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        cur = e.source();
    }
    parts.join(": ")
}

fn map_error(err: reqwest::Error, secs: u64, target: &str) -> CustomToolError {
    if let Some(refused) = ssrf::refusal_in(&err) {
        return CustomToolError::Refused(refused.clone());
    }
    if err.is_timeout() {
        return CustomToolError::Timeout { secs };
    }
    let connect = err.is_connect();
    let detail = error_chain(&err.without_url());
    if connect {
        CustomToolError::Connect(format!("{target}: {detail}"))
    } else {
        CustomToolError::Http(format!("{target}: {detail}"))
    }
}

/// Drops an incomplete UTF-8 sequence at the end (left by cutting at the cap).
pub(crate) fn trim_partial_utf8(bytes: &mut Vec<u8>) {
    let len = bytes.len();
    for back in 1..=len.min(4) {
        let i = len - back;
        let b = bytes[i];
        if b & 0xc0 == 0x80 {
            continue; // a continuation byte: look further back for its lead
        }
        let need = match b {
            0x00..=0x7f => 1,
            0xc0..=0xdf => 2,
            0xe0..=0xef => 3,
            0xf0..=0xf7 => 4,
            _ => 1,
        };
        if back < need {
            bytes.truncate(i);
        }
        return;
    }
}

/// A response whose body was read up to a cap ([`send_and_read`]).
pub(crate) struct RawResponse {
    pub(crate) status: u16,
    pub(crate) content_type: Option<String>,
    pub(crate) body: Vec<u8>,
    pub(crate) truncated: bool,
}

/// Sends `request` and reads at most `cap` bytes of the body (`truncated` when there was more).
pub(crate) async fn send_and_read(
    request: reqwest::RequestBuilder,
    cap: u64,
) -> Result<RawResponse, reqwest::Error> {
    let mut response = request.send().await?;
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let cap = usize::try_from(cap).unwrap_or(usize::MAX);
    let mut body: Vec<u8> = Vec::new();
    let mut truncated = false;
    while let Some(chunk) = response.chunk().await? {
        let room = cap - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            truncated = true;
            break; // dropping the response closes the connection: nothing more is read
        }
        body.extend_from_slice(&chunk);
    }
    Ok(RawResponse {
        status,
        content_type,
        body,
        truncated,
    })
}

/// Runs a custom tool: validates the spec and the arguments (schema `default`s filled in
/// first), renders the URL and body, checks the URL with the guard, and sends the request
/// through [`ssrf::shared_guarded_client`] (DNS answers and redirect hops checked too). Nothing is
/// sent when validation, rendering or the guard fails. Any HTTP status is a response; the body
/// is truncated at the spec's cap (see the module docs).
pub async fn execute(
    spec: &CustomToolSpec,
    args: &Value,
    policy: &NetPolicy,
) -> Result<CustomResponse, CustomToolError> {
    validate_spec(spec).map_err(CustomToolError::InvalidSpec)?;
    let args = with_defaults(&spec.parameters, args);
    validate_args(&spec.parameters, &args).map_err(CustomToolError::InvalidArguments)?;

    let url_text = render_url(&spec.http_url, &args).map_err(CustomToolError::InvalidArguments)?;
    let url = Url::parse(&url_text).map_err(|e| {
        CustomToolError::InvalidArguments(format!("the rendered URL is invalid: {e}"))
    })?;
    ssrf::check_url(policy, &url).map_err(CustomToolError::Refused)?;

    let body = match &spec.http_body_template {
        Some(template) => {
            let kind = BodyKind::of(&spec.http_headers);
            let body =
                render_body(template, &args, kind).map_err(CustomToolError::InvalidArguments)?;
            if kind == BodyKind::Json
                && let Err(e) = serde_json::from_str::<Value>(&body)
            {
                return Err(CustomToolError::InvalidArguments(format!(
                    "the rendered body is not valid JSON: {e}"
                )));
            }
            Some(body)
        }
        None => None,
    };
    let method = parse_method(&spec.http_method).map_err(CustomToolError::InvalidSpec)?;
    let mut headers = build_headers(&spec.http_headers).map_err(CustomToolError::InvalidSpec)?;
    if body.is_some() && !headers.contains_key(CONTENT_TYPE) {
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    }

    let timeout = spec.timeout();
    let secs = timeout.as_secs();
    let target = redacted(&url);
    let client =
        ssrf::shared_guarded_client(policy, !spec.http_headers.is_empty()).map_err(|e| {
            CustomToolError::Http(format!(
                "could not build the HTTP client: {}",
                error_chain(&e)
            ))
        })?;
    let mut request = client
        .request(method.clone(), url)
        .headers(headers)
        .timeout(timeout);
    if let Some(body) = body {
        request = request.body(body);
    }

    tracing::debug!(tool = %spec.name, %method, %target, "custom tool: sending");
    let started = Instant::now();
    // reqwest's own timeout covers the body too; this one is a backstop.
    let outcome = tokio::time::timeout(timeout, send_and_read(request, spec.response_cap())).await;
    let elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let raw = match outcome {
        Err(_) => Err(CustomToolError::Timeout { secs }),
        Ok(Err(e)) => Err(map_error(e, secs, &target)),
        Ok(Ok(raw)) => Ok(raw),
    };
    let raw = match raw {
        Ok(raw) => raw,
        Err(e) => {
            tracing::debug!(tool = %spec.name, %target, elapsed_ms, error = %e, "custom tool: failed");
            return Err(e);
        }
    };

    let RawResponse {
        status,
        content_type,
        mut body,
        truncated,
    } = raw;
    if truncated {
        trim_partial_utf8(&mut body);
    }
    let mut text = match String::from_utf8(body) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    };
    if truncated {
        text.push_str(TRUNCATION_MARKER);
        text.push_str(&format!(
            " the response was longer than {} bytes]",
            spec.response_cap()
        ));
    }
    tracing::debug!(tool = %spec.name, %target, status, truncated, elapsed_ms, "custom tool: response");
    Ok(CustomResponse {
        status,
        content_type,
        body: text,
        truncated,
        elapsed_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(url: &str) -> CustomToolSpec {
        CustomToolSpec {
            name: "weather".into(),
            description: "Weather".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "count": {"type": "integer"},
                },
                "required": ["city"],
            }),
            http_url: url.into(),
            http_method: "GET".into(),
            http_headers: BTreeMap::new(),
            http_body_template: None,
            timeout_secs: None,
            max_response_bytes: None,
        }
    }

    #[test]
    fn spec_validation_accepts_a_good_spec() {
        let mut s = spec("https://api.example.com/v1/{{city}}?n={{count}}");
        assert_eq!(validate_spec(&s), Ok(()));
        s.http_method = "post".into();
        s.http_body_template =
            Some(r#"{"city": "{{city}}", "n": {{count}}, "x": [{{ count }}]}"#.into());
        s.http_headers
            .insert("X-Api-Key".into(), "secret-value".into());
        s.timeout_secs = Some(300);
        s.max_response_bytes = Some(10 << 20);
        assert_eq!(validate_spec(&s), Ok(()));
    }

    #[test]
    fn spec_validation_refuses_bad_specs() {
        let check = |f: &dyn Fn(&mut CustomToolSpec), needle: &str| {
            let mut s = spec("https://api.example.com/v1/{{city}}");
            f(&mut s);
            let e = validate_spec(&s).unwrap_err();
            assert!(e.contains(needle), "{e:?} should contain {needle:?}");
            assert!(!e.contains("secret-value"), "{e}");
        };
        check(&|s| s.name = "".into(), "must be 1 to 64");
        check(&|s| s.name = "a b".into(), "must be 1 to 64");
        check(&|s| s.name = "x".repeat(65), "must be 1 to 64");
        check(
            &|s| s.http_method = "TRACE".into(),
            "is not one of GET, POST, PUT, PATCH, DELETE",
        );
        check(
            &|s| s.http_url = "ftp://x/{{city}}".into(),
            "must start with http:// or https://",
        );
        check(
            &|s| s.http_url = "https://api.example.com/{{town}}".into(),
            "{{town}} is not a declared parameter",
        );
        check(
            &|s| s.http_url = "https://{{city}}.example.com/".into(),
            "scheme or host",
        );
        check(
            &|s| s.http_url = "https://api.example.com:{{count}}/".into(),
            "scheme or host",
        );
        check(
            &|s| s.http_url = "https://api.example.com/{{city".into(),
            "unclosed placeholder",
        );
        check(
            &|s| s.http_url = "https://api.example.com/{{a b}}".into(),
            "invalid placeholder",
        );
        check(
            &|s| s.http_url = "https:///{{city}}".into(),
            "the URL template has no host",
        );
        check(
            &|s| s.http_url = "https://\\{{city}}/".into(),
            "the URL template has no host",
        );
        check(
            &|s| s.parameters = json!("nope"),
            "parameters must be a JSON Schema object",
        );
        check(
            &|s| s.parameters = json!({"type": "string"}),
            "must describe an object",
        );
        check(
            &|s| s.parameters = json!({"type": "object", "properties": {"city": {"type": "text"}}}),
            "unknown type",
        );
        check(
            &|s| s.parameters = json!({"type": "object", "properties": {"city": {"pattern": "("}}}),
            "parameters.properties.city.pattern: invalid regular expression",
        );
        check(
            &|s| {
                s.parameters = json!({"type": "object", "properties": {"city": {"minLength": -1}}})
            },
            "must be a non-negative integer",
        );
        check(
            &|s| s.http_body_template = Some("{}".into()),
            "a GET request has no body",
        );
        check(
            &|s| {
                s.http_method = "POST".into();
                s.http_body_template = Some(r#"{"q": {{other}}}"#.into());
            },
            "{{other}} is not a declared parameter",
        );
        check(
            &|s| {
                s.http_method = "POST".into();
                s.http_body_template = Some(r#"{"q": {{city}}"#.into());
            },
            "not valid JSON once placeholders are filled in",
        );
        check(
            &|s| s.http_headers = BTreeMap::from([("Bad Header".into(), "v".into())]),
            "not a valid HTTP header name",
        );
        check(
            &|s| {
                s.http_headers =
                    BTreeMap::from([("X-Key".into(), "secret-value\r\nX-Evil: 1".into())])
            },
            "the value of \"X-Key\" is not a valid HTTP header value",
        );
        check(
            &|s| s.http_headers = BTreeMap::from([("Host".into(), "x".into())]),
            "set by the HTTP client",
        );
        check(
            &|s| s.timeout_secs = Some(301),
            "timeout_secs must be between 1 and 300",
        );
        check(
            &|s| s.timeout_secs = Some(0),
            "timeout_secs must be between 1 and 300",
        );
        check(
            &|s| s.max_response_bytes = Some((10 << 20) + 1),
            "max_response_bytes must be between",
        );
        check(
            &|s| s.http_url = "https://api.example.com/a/../{{city}}".into(),
            "segment",
        );
    }

    #[test]
    fn a_non_json_body_needs_no_json_template() {
        let mut s = spec("https://api.example.com/");
        s.http_method = "POST".into();
        s.http_body_template = Some("city={{city}}".into());
        assert!(validate_spec(&s).is_err());
        s.http_headers
            .insert("Content-Type".into(), "text/plain".into());
        assert_eq!(validate_spec(&s), Ok(()));
    }

    #[test]
    fn spec_serde_uses_the_seed_field_names_and_debug_hides_header_values() {
        let s: CustomToolSpec = serde_json::from_value(json!({
            "name": "t",
            "http_url": "https://api.example.com/",
            "http_headers": {"Authorization": "Bearer secret-value"},
        }))
        .unwrap();
        assert_eq!(s.http_method, "GET");
        assert_eq!(s.parameters, json!({"type": "object", "properties": {}}));
        assert_eq!(validate_spec(&s), Ok(()));
        let debug = format!("{s:?}");
        assert!(
            debug.contains("Authorization") && !debug.contains("secret-value"),
            "{debug}"
        );
        let back = serde_json::to_value(&s).unwrap();
        assert_eq!(back["http_headers"]["Authorization"], "Bearer secret-value");
        assert!(
            serde_json::from_value::<CustomToolSpec>(
                json!({"name": "t", "http_url": "x", "url": "y"})
            )
            .is_err()
        );
    }

    #[test]
    fn url_values_stay_inside_their_segment() {
        let args =
            json!({"q": "a b/c?d=1&e#f%", "n": 5, "flag": true, "none": null, "dots": "v1.2_~-"});
        let url = render_url(
            "https://h.example/s/{{q}}?q={{q}}&n={{n}}&f={{flag}}&x={{none}}&d={{dots}}",
            &args,
        )
        .unwrap();
        assert_eq!(
            url,
            "https://h.example/s/a%20b%2Fc%3Fd%3D1%26e%23f%25?q=a%20b%2Fc%3Fd%3D1%26e%23f%25&n=5&f=true&x=null&d=v1.2_~-"
        );
        let parsed = Url::parse(&url).unwrap();
        assert_eq!(parsed.path(), "/s/a%20b%2Fc%3Fd%3D1%26e%23f%25");
        let pairs: Vec<(String, String)> = parsed.query_pairs().into_owned().collect();
        assert_eq!(pairs[0], ("q".into(), "a b/c?d=1&e#f%".into()));
        assert_eq!(pairs.len(), 5);
        // Non-ASCII is UTF-8 percent-encoded.
        assert_eq!(
            render_url("http://h/{{q}}", &json!({"q": "é"})).unwrap(),
            "http://h/%C3%A9"
        );
    }

    #[test]
    fn url_rendering_errors() {
        // A left-out parameter: empty in the path, its pair dropped from the query.
        assert_eq!(
            render_url("http://h/{{q}}", &json!({})).unwrap(),
            "http://h/"
        );
        assert_eq!(
            render_url("http://h/f?q={{q}}&days={{days}}#top", &json!({"q": "a b"})).unwrap(),
            "http://h/f?q=a%20b#top"
        );
        assert_eq!(
            render_url("http://h/f?days={{days}}", &json!({})).unwrap(),
            "http://h/f"
        );
        for bad in ["..", "."] {
            let e = render_url("http://h/api/{{id}}/x", &json!({"id": bad})).unwrap_err();
            assert!(e.contains("segment"), "{bad}: {e}");
        }
        // A value's "%" is encoded, so "%2e%2E" is no dot segment; in the template it is one.
        assert_eq!(
            render_url("http://h/api/{{id}}/x", &json!({"id": "%2e%2E"})).unwrap(),
            "http://h/api/%252e%252E/x"
        );
        let e = render_url("http://h/api/%2e%2E/{{id}}", &json!({"id": "x"})).unwrap_err();
        assert!(e.contains("segment"), "{e}");
        // ".." in a query is harmless.
        assert!(render_url("http://h/api?x={{id}}", &json!({"id": ".."})).is_ok());
        // "../" has its slash encoded, so the segment is "..%2F": no dot segment.
        assert_eq!(
            render_url("http://h/a/{{id}}", &json!({"id": "../b"})).unwrap(),
            "http://h/a/..%2Fb"
        );
        assert!(
            render_url("http://{{h}}/", &json!({"h": "x"}))
                .unwrap_err()
                .contains("scheme or host")
        );
        assert!(
            render_url("http://h/", &json!([1]))
                .unwrap_err()
                .contains("must be a JSON object")
        );
    }

    #[test]
    fn body_rendering_follows_the_quote_rule() {
        let args = json!({
            "q": "he said \"hi\"\nbye \\ end",
            "n": 3,
            "tags": ["a", "b"],
            "obj": {"k": 1},
        });
        let body = render_body(
            r#"{"q": "{{q}}", "prefix": "x-{{n}}-{{q}}", "n": {{n}}, "tags": {{tags}}, "qs": {{q}}, "o": "{{obj}}"}"#,
            &args,
            BodyKind::Json,
        )
        .unwrap();
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["q"], "he said \"hi\"\nbye \\ end");
        assert_eq!(v["prefix"], "x-3-he said \"hi\"\nbye \\ end");
        assert_eq!(v["n"], 3);
        assert_eq!(v["tags"], json!(["a", "b"]));
        assert_eq!(v["qs"], "he said \"hi\"\nbye \\ end");
        assert_eq!(v["o"], "{\"k\":1}");
        // A quote escaped in the template does not end the string.
        let body = render_body(
            r#"{"a": "x\"{{n}}\"", "b": {{n}}}"#,
            &json!({"n": 7}),
            BodyKind::Json,
        )
        .unwrap();
        assert_eq!(body, r#"{"a": "x\"7\"", "b": 7}"#);
        // Braces before a placeholder stay literal.
        assert_eq!(
            render_body("[{{{n}}}]", &json!({"n": 1}), BodyKind::Json).unwrap(),
            "[{1}]"
        );
        assert_eq!(
            render_body(r#"{"n": {{n}}, "s": "{{n}}"}"#, &json!({}), BodyKind::Json).unwrap(),
            r#"{"n": null, "s": ""}"#
        );
    }

    #[test]
    fn body_values_are_encoded_for_the_content_type() {
        let form = render_body(
            "q={{q}}&role=user&days={{days}}",
            &json!({"q": "hello world&role=admin"}),
            BodyKind::Form,
        )
        .unwrap();
        assert_eq!(form, "q=hello+world%26role%3Dadmin&role=user");
        let fields: Vec<(String, String)> = url::form_urlencoded::parse(form.as_bytes())
            .into_owned()
            .collect();
        assert_eq!(
            fields,
            vec![
                ("q".to_owned(), "hello world&role=admin".to_owned()),
                ("role".to_owned(), "user".to_owned())
            ]
        );
        assert_eq!(
            render_body(
                "<q>{{q}}</q>",
                &json!({"q": "</q><role>admin"}),
                BodyKind::Xml
            )
            .unwrap(),
            "<q>&lt;/q&gt;&lt;role&gt;admin</q>"
        );
        assert_eq!(
            render_body("say {{q}}", &json!({"q": "a&b"}), BodyKind::Text).unwrap(),
            "say a&b"
        );
        let headers = |ct: &str| BTreeMap::from([("content-type".to_owned(), ct.to_owned())]);
        assert_eq!(
            BodyKind::of(&headers("application/x-www-form-urlencoded; charset=utf-8")),
            BodyKind::Form
        );
        assert_eq!(BodyKind::of(&BTreeMap::new()), BodyKind::Json);
        assert_eq!(
            BodyKind::of(&headers("application/vnd.api+json")),
            BodyKind::Json
        );
        assert_eq!(BodyKind::of(&headers("text/xml")), BodyKind::Xml);
    }

    #[test]
    fn argument_validation_names_the_path() {
        let schema = json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 2, "maxLength": 5, "pattern": "^[a-z]+$"},
                "city": {"type": "string", "enum": ["Paris", "Oslo"]},
                "n": {"type": "integer", "minimum": 1, "maximum": 10},
                "ratio": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
                "opt": {"type": ["string", "null"]},
                "kind": {"const": "x"},
                "tags": {"type": "array", "items": {"type": "string", "maxLength": 3}, "minItems": 1, "maxItems": 2},
                "filters": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                    "additionalProperties": false,
                },
                "extra": {"type": "object", "additionalProperties": {"type": "integer"}},
            },
            "required": ["query", "city"],
            "additionalProperties": false,
        });
        let ok = json!({
            "query": "abc", "city": "Oslo", "n": 10, "ratio": 0.5, "opt": null, "kind": "x",
            "tags": ["a", "bcd"], "filters": {"city": "Oslo"}, "extra": {"a": 1, "b": 2.0},
        });
        assert_eq!(validate_args(&schema, &ok), Ok(()));

        let err = |v: Value| validate_args(&schema, &v).unwrap_err();
        assert_eq!(
            err(json!({"query": 5, "city": "Oslo"})),
            "query: expected string, got number"
        );
        assert_eq!(
            err(json!({"query": "abc"})),
            "missing required property \"city\""
        );
        assert_eq!(
            err(json!({"query": "a", "city": "Oslo"})),
            "query: must be at least 2 characters long, got 1"
        );
        assert_eq!(
            err(json!({"query": "abcdef", "city": "Oslo"})),
            "query: must be at most 5 characters long, got 6"
        );
        assert_eq!(
            err(json!({"query": "ABC", "city": "Oslo"})),
            "query: must match the pattern \"^[a-z]+$\""
        );
        assert_eq!(
            err(json!({"query": "abc", "city": "Rome"})),
            "city: must be one of \"Paris\", \"Oslo\", got \"Rome\""
        );
        assert_eq!(
            err(json!({"query": "abc", "city": "Oslo", "n": 1.5})),
            "n: expected integer, got number"
        );
        assert_eq!(
            err(json!({"query": "abc", "city": "Oslo", "n": 0})),
            "n: must be at least 1, got 0"
        );
        assert_eq!(
            err(json!({"query": "abc", "city": "Oslo", "n": 11})),
            "n: must be at most 10, got 11"
        );
        assert_eq!(
            validate_args(&schema, &json!({"query": "abc", "city": "Oslo", "n": 2.0})),
            Ok(())
        );
        assert_eq!(
            err(json!({"query": "abc", "city": "Oslo", "ratio": 1})),
            "ratio: must be less than 1, got 1"
        );
        assert_eq!(
            err(json!({"query": "abc", "city": "Oslo", "ratio": 0})),
            "ratio: must be greater than 0, got 0"
        );
        assert_eq!(
            err(json!({"query": "abc", "city": "Oslo", "opt": 1})),
            "opt: expected string or null, got number"
        );
        assert_eq!(
            err(json!({"query": "abc", "city": "Oslo", "kind": "y"})),
            "kind: must be \"x\", got \"y\""
        );
        assert_eq!(
            err(json!({"query": "abc", "city": "Oslo", "tags": []})),
            "tags: must have at least 1 items, got 0"
        );
        assert_eq!(
            err(json!({"query": "abc", "city": "Oslo", "tags": ["a", "b", "c"]})),
            "tags: must have at most 2 items, got 3"
        );
        assert_eq!(
            err(json!({"query": "abc", "city": "Oslo", "tags": ["a", "long"]})),
            "tags[1]: must be at most 3 characters long, got 4"
        );
        assert_eq!(
            err(json!({"query": "abc", "city": "Oslo", "filters": {"town": "x"}})),
            "filters: missing required property \"city\"; filters: unknown property \"town\""
        );
        assert_eq!(
            err(json!({"query": "abc", "city": "Oslo", "filters": {"city": 1}})),
            "filters.city: expected string, got number"
        );
        assert_eq!(
            err(json!({"query": "abc", "city": "Oslo", "extra": {"a": "x"}})),
            "extra.a: expected integer, got string"
        );
        assert_eq!(
            err(json!({"query": "abc", "city": "Oslo", "zzz": 1})),
            "unknown property \"zzz\""
        );
        assert_eq!(err(json!([1])), "expected object, got array");
        // Several problems are all reported.
        assert_eq!(
            err(json!({"query": 1})),
            "missing required property \"city\"; query: expected string, got number"
        );
    }

    #[test]
    fn argument_validation_edge_cases() {
        assert_eq!(validate_args(&json!(true), &json!(1)), Ok(()));
        assert_eq!(
            validate_args(&json!(false), &json!(1)).unwrap_err(),
            "no value is allowed here"
        );
        assert_eq!(
            validate_args(&json!({"enum": [1, "a"]}), &json!(1.0)),
            Ok(())
        );
        assert_eq!(
            validate_args(&json!({"type": "integer"}), &json!(-3)),
            Ok(())
        );
        assert_eq!(validate_args(&json!({"type": "number"}), &json!(3)), Ok(()));
        assert_eq!(
            validate_args(&json!({"minimum": 5, "exclusiveMinimum": true}), &json!(5)).unwrap_err(),
            "must be greater than 5, got 5"
        );
        // Tuple items.
        let tuple = json!({"items": [{"type": "string"}, {"type": "integer"}]});
        assert_eq!(validate_args(&tuple, &json!(["a", 1, "extra"])), Ok(()));
        assert_eq!(
            validate_args(&tuple, &json!([1, 1])).unwrap_err(),
            "[0]: expected string, got number"
        );
        // minLength counts characters, not bytes.
        assert_eq!(
            validate_args(&json!({"maxLength": 2}), &json!("éé")),
            Ok(())
        );
    }

    #[test]
    fn defaults_fill_missing_arguments() {
        let schema =
            json!({"type": "object", "properties": {"n": {"type": "integer", "default": 10}}});
        assert_eq!(with_defaults(&schema, &Value::Null), json!({"n": 10}));
        assert_eq!(with_defaults(&schema, &json!({"n": 3})), json!({"n": 3}));
    }

    #[test]
    fn partial_utf8_is_trimmed() {
        let mut b = "aé".as_bytes().to_vec();
        b.pop(); // cut inside "é"
        trim_partial_utf8(&mut b);
        assert_eq!(b, b"a");
        let mut b = "a€".as_bytes().to_vec();
        b.truncate(3);
        trim_partial_utf8(&mut b);
        assert_eq!(b, b"a");
        let mut b = "a€".as_bytes().to_vec();
        trim_partial_utf8(&mut b);
        assert_eq!(b, "a€".as_bytes());
        let mut b = "😀".as_bytes().to_vec();
        b.truncate(3);
        trim_partial_utf8(&mut b);
        assert!(b.is_empty());
    }
}
