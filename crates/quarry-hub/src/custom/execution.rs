//! Running a custom tool: the arguments checked and rendered into a request, the request sent
//! through the outbound guard, the response read up to the spec's cap ([`execute`]).

use std::fmt;
use std::time::Instant;

use http::header::{CONTENT_TYPE, HeaderValue};
use quarry_netguard::{NetPolicy, Refused};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use url::Url;

use super::schema::{Violations, validate_args, with_defaults};
use super::spec::{CustomToolSpec, SpecError, build_headers, parse_method, validate_spec};
use super::template::{BodyKind, TemplateError, render_body, render_url};
use crate::fetch::{RawResponse, error_chain, redacted, send_and_read, trim_partial_utf8};

/// What a truncated body's text ends with (followed by a note and `]`).
pub const TRUNCATION_MARKER: &str = "\n[truncated:";

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

/// Why a call's arguments make no request.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ArgumentError {
    /// They break the tool's `parameters` schema.
    Schema(Violations),
    /// They cannot be rendered into the URL or body.
    Template(TemplateError),
    /// The rendered URL does not parse.
    RenderedUrl(url::ParseError),
    /// The rendered JSON body is not JSON.
    RenderedBody {
        /// The JSON parser's complaint.
        reason: String,
    },
}

impl fmt::Display for ArgumentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgumentError::Schema(e) => write!(f, "{e}"),
            ArgumentError::Template(e) => write!(f, "{e}"),
            ArgumentError::RenderedUrl(e) => write!(f, "the rendered URL is invalid: {e}"),
            ArgumentError::RenderedBody { reason } => {
                write!(f, "the rendered body is not valid JSON: {reason}")
            }
        }
    }
}

impl std::error::Error for ArgumentError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ArgumentError::Schema(e) => Some(e),
            ArgumentError::Template(e) => Some(e),
            ArgumentError::RenderedUrl(e) => Some(e),
            ArgumentError::RenderedBody { .. } => None,
        }
    }
}

/// Why a custom tool call produced no response. `Display` is for humans; no variant carries a
/// header value.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CustomToolError {
    /// The spec itself is invalid ([`validate_spec`]), or the tool cannot be loaded.
    InvalidSpec(SpecError),
    /// The arguments do not fit the schema, or cannot be rendered into the request.
    InvalidArguments(ArgumentError),
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
            CustomToolError::InvalidSpec(e) => Some(e),
            CustomToolError::InvalidArguments(e) => Some(e),
            CustomToolError::Refused(r) => Some(r),
            _ => None,
        }
    }
}

fn map_error(err: reqwest::Error, secs: u64, target: &str) -> CustomToolError {
    if let Some(refused) = quarry_netguard::refusal_in(&err) {
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

/// Runs a custom tool: validates the spec and the arguments (schema `default`s filled in
/// first), renders the URL and body, checks the URL with the guard, and sends the request
/// through [`quarry_netguard::shared_guarded_client`] (DNS answers and redirect hops checked
/// too). Nothing is sent when validation, rendering or the guard fails. Any HTTP status is a
/// response; the body is truncated at the spec's cap (see [`crate::custom`]'s docs).
pub async fn execute(
    spec: &CustomToolSpec,
    args: &Value,
    policy: &NetPolicy,
) -> Result<CustomResponse, CustomToolError> {
    use CustomToolError::InvalidArguments;
    validate_spec(spec).map_err(CustomToolError::InvalidSpec)?;
    let args = with_defaults(&spec.parameters, args);
    validate_args(&spec.parameters, &args)
        .map_err(|e| InvalidArguments(ArgumentError::Schema(e)))?;

    let url_text = render_url(&spec.http_url, &args)
        .map_err(|e| InvalidArguments(ArgumentError::Template(e)))?;
    let url = Url::parse(&url_text).map_err(|e| InvalidArguments(ArgumentError::RenderedUrl(e)))?;
    quarry_netguard::check_url(policy, &url).map_err(CustomToolError::Refused)?;

    let body = match &spec.http_body_template {
        Some(template) => {
            let kind = BodyKind::of(&spec.http_headers);
            let body = render_body(template, &args, kind)
                .map_err(|e| InvalidArguments(ArgumentError::Template(e)))?;
            if kind == BodyKind::Json
                && let Err(e) = serde_json::from_str::<Value>(&body)
            {
                return Err(InvalidArguments(ArgumentError::RenderedBody {
                    reason: e.to_string(),
                }));
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
    let client = quarry_netguard::shared_guarded_client(policy, !spec.http_headers.is_empty())
        .map_err(|e| {
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

/// A custom tool ready to run: its spec, and where the caller's requests may go (made by
/// the registry's `Hub::custom_call`; run without touching the store).
pub struct CustomCall {
    spec: CustomToolSpec,
    net: NetPolicy,
}

impl CustomCall {
    /// A call of `spec` under `net`.
    pub(crate) fn new(spec: CustomToolSpec, net: NetPolicy) -> CustomCall {
        CustomCall { spec, net }
    }

    /// Sends the tool's HTTP request with `arguments`.
    pub async fn run(&self, arguments: &Value) -> Result<CustomResponse, CustomToolError> {
        execute(&self.spec, arguments, &self.net).await
    }
}
