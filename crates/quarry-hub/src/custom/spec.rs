//! A custom tool's specification ([`CustomToolSpec`]) and the checks it passes before it is
//! saved or run ([`validate_spec`]).

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use http::header::{HeaderMap, HeaderName, HeaderValue};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use url::Url;

use super::schema::{SchemaError, check_schema};
use super::template::{
    BodyKind, TemplateError, is_key_byte, placeholders, render_body_with, render_url,
};

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

/// Why a spec is refused ([`validate_spec`]), or why a stored tool cannot be run. No variant
/// carries a header value.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SpecError {
    /// The name is not 1 to 64 of `a-z A-Z 0-9 _ -`.
    Name {
        /// The name given.
        name: String,
    },
    /// A method other than [`METHODS`].
    Method {
        /// The method given.
        method: String,
    },
    /// `parameters` is not a JSON object.
    ParametersNotObject,
    /// `parameters` declares a `type` other than `object`.
    ParametersNotObjectType {
        /// The `type` given.
        got: Value,
    },
    /// `parameters` misuses a keyword.
    Schema(SchemaError),
    /// `http_url` is not http or https.
    UrlScheme {
        /// The URL template.
        url: String,
    },
    /// `http_url` is not a valid template.
    UrlTemplate(TemplateError),
    /// A placeholder names no declared parameter.
    Undeclared {
        /// `http_url` or `http_body_template`.
        field: &'static str,
        /// The placeholder's name.
        key: String,
    },
    /// `http_url` does not parse once placeholders are filled in.
    InvalidUrl(url::ParseError),
    /// `http_url` has no host.
    UrlNoHost,
    /// A body template on a GET tool.
    BodyWithGet,
    /// `http_body_template` is not a valid template.
    BodyTemplate(TemplateError),
    /// A JSON body template that is not JSON once placeholders are filled in.
    BodyNotJson {
        /// The JSON parser's complaint.
        reason: String,
    },
    /// Not a valid HTTP header name.
    HeaderName {
        /// The name.
        name: String,
    },
    /// A header the HTTP client sets itself.
    ClientHeader {
        /// The name.
        name: String,
    },
    /// A header value that is not a valid HTTP header value (the value is never shown).
    HeaderValue {
        /// The header's name.
        name: String,
    },
    /// `timeout_secs` outside 1 to [`MAX_TIMEOUT_SECS`].
    Timeout {
        /// The timeout given.
        secs: u64,
    },
    /// `max_response_bytes` outside 1 to [`MAX_RESPONSE_BYTES_LIMIT`].
    ResponseCap {
        /// The cap given.
        bytes: u64,
    },
    /// The stored tool cannot be loaded (not found, or its stored spec unreadable); the text
    /// says which.
    Unavailable(String),
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpecError::Name { name } => write!(
                f,
                "name {name:?} must be 1 to 64 characters, each a letter, digit, '_' or '-'"
            ),
            SpecError::Method { method } => write!(
                f,
                "http_method {method:?} is not one of {}",
                METHODS.join(", ")
            ),
            SpecError::ParametersNotObject => f.write_str(
                "parameters must be a JSON Schema object ({\"type\": \"object\", \"properties\": {…}})",
            ),
            SpecError::ParametersNotObjectType { got } => write!(
                f,
                "parameters must describe an object (\"type\": \"object\"), got \"type\": {got}"
            ),
            SpecError::Schema(e) => write!(f, "{e}"),
            SpecError::UrlScheme { url } => {
                write!(f, "http_url {url:?} must start with http:// or https://")
            }
            SpecError::UrlTemplate(e) => write!(f, "http_url: {e}"),
            SpecError::Undeclared { field, key } => write!(
                f,
                "{field}: placeholder {{{{{key}}}}} is not a declared parameter (add it to parameters.properties)"
            ),
            SpecError::InvalidUrl(e) => write!(f, "http_url: not a valid URL: {e}"),
            SpecError::UrlNoHost => f.write_str("http_url: the URL has no host"),
            SpecError::BodyWithGet => f.write_str(
                "http_body_template needs POST, PUT, PATCH or DELETE (a GET request has no body)",
            ),
            SpecError::BodyTemplate(e) => write!(f, "http_body_template: {e}"),
            SpecError::BodyNotJson { reason } => write!(
                f,
                "http_body_template is not valid JSON once placeholders are filled in ({reason}); \
                 set a Content-Type header for a non-JSON body"
            ),
            SpecError::HeaderName { name } => {
                write!(f, "http_headers: {name:?} is not a valid HTTP header name")
            }
            SpecError::ClientHeader { name } => write!(
                f,
                "http_headers: {name:?} is set by the HTTP client and cannot be configured"
            ),
            SpecError::HeaderValue { name } => write!(
                f,
                "http_headers: the value of {name:?} is not a valid HTTP header value"
            ),
            SpecError::Timeout { secs } => write!(
                f,
                "timeout_secs must be between 1 and {MAX_TIMEOUT_SECS}, got {secs}"
            ),
            SpecError::ResponseCap { bytes } => write!(
                f,
                "max_response_bytes must be between 1 and {MAX_RESPONSE_BYTES_LIMIT} (10 MiB), got {bytes}"
            ),
            SpecError::Unavailable(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for SpecError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SpecError::Schema(e) => Some(e),
            SpecError::UrlTemplate(e) | SpecError::BodyTemplate(e) => Some(e),
            SpecError::InvalidUrl(e) => Some(e),
            _ => None,
        }
    }
}

/// The method a spec names, checked against [`METHODS`] (any case).
pub(super) fn parse_method(m: &str) -> Result<reqwest::Method, SpecError> {
    match m.trim().to_ascii_uppercase().as_str() {
        "GET" => Ok(reqwest::Method::GET),
        "POST" => Ok(reqwest::Method::POST),
        "PUT" => Ok(reqwest::Method::PUT),
        "PATCH" => Ok(reqwest::Method::PATCH),
        "DELETE" => Ok(reqwest::Method::DELETE),
        _ => Err(SpecError::Method {
            method: m.to_owned(),
        }),
    }
}

/// The spec's headers, checked, with values marked sensitive for the HTTP stack.
pub(super) fn build_headers(headers: &BTreeMap<String, String>) -> Result<HeaderMap, SpecError> {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        let header = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| SpecError::HeaderName { name: name.clone() })?;
        if CLIENT_HEADERS.contains(&header.as_str()) {
            return Err(SpecError::ClientHeader { name: name.clone() });
        }
        // Never echo the value: it is likely a secret.
        let mut value = HeaderValue::from_str(value)
            .map_err(|_| SpecError::HeaderValue { name: name.clone() })?;
        value.set_sensitive(true);
        map.append(header, value);
    }
    Ok(map)
}

/// Checks a spec: the name (`^[a-zA-Z0-9_-]{1,64}$`), the method, the parameters schema (an
/// object schema using the supported keywords correctly), the URL (http/https, parses once
/// placeholders are filled, placeholders only after the host), that every placeholder is a
/// declared property, the body template (not with GET; valid JSON once filled when the body is
/// JSON), header names and values, and the limits (timeout 1–300 s, cap 1 B–10 MiB).
pub fn validate_spec(spec: &CustomToolSpec) -> Result<(), SpecError> {
    let name = &spec.name;
    if name.is_empty() || name.len() > 64 || !name.bytes().all(is_key_byte) {
        return Err(SpecError::Name { name: name.clone() });
    }
    let method = parse_method(&spec.http_method)?;

    let params = spec
        .parameters
        .as_object()
        .ok_or(SpecError::ParametersNotObject)?;
    match params.get("type") {
        None => {}
        Some(Value::String(t)) if t == "object" => {}
        Some(other) => {
            return Err(SpecError::ParametersNotObjectType { got: other.clone() });
        }
    }
    check_schema(&spec.parameters, "parameters").map_err(SpecError::Schema)?;
    let declared = params.get("properties").and_then(Value::as_object);
    let is_declared = |key: &str| declared.is_some_and(|p| p.contains_key(key));

    // URL
    let lower = spec.http_url.trim_start().to_ascii_lowercase();
    if !(lower.starts_with("http://") || lower.starts_with("https://")) {
        return Err(SpecError::UrlScheme {
            url: spec.http_url.clone(),
        });
    }
    let url_keys = placeholders(&spec.http_url).map_err(SpecError::UrlTemplate)?;
    let mut dummy = Map::new();
    for key in &url_keys {
        if !is_declared(key) {
            return Err(SpecError::Undeclared {
                field: "http_url",
                key: key.clone(),
            });
        }
        dummy.insert(key.clone(), Value::String("x".into()));
    }
    let rendered =
        render_url(&spec.http_url, &Value::Object(dummy)).map_err(SpecError::UrlTemplate)?;
    let url = Url::parse(&rendered).map_err(SpecError::InvalidUrl)?;
    if url.host().is_none() {
        return Err(SpecError::UrlNoHost);
    }

    // Body
    if let Some(template) = &spec.http_body_template {
        if method == reqwest::Method::GET {
            return Err(SpecError::BodyWithGet);
        }
        for key in placeholders(template).map_err(SpecError::BodyTemplate)? {
            if !is_declared(&key) {
                return Err(SpecError::Undeclared {
                    field: "http_body_template",
                    key,
                });
            }
        }
        if BodyKind::of(&spec.http_headers) == BodyKind::Json {
            let filled = render_body_with(template, |_, in_string| {
                if in_string {
                    "x".to_owned()
                } else {
                    "null".to_owned()
                }
            })
            .map_err(SpecError::BodyTemplate)?;
            if let Err(e) = serde_json::from_str::<Value>(&filled) {
                return Err(SpecError::BodyNotJson {
                    reason: e.to_string(),
                });
            }
        }
    }

    build_headers(&spec.http_headers)?;

    if let Some(secs) = spec.timeout_secs
        && !(1..=MAX_TIMEOUT_SECS).contains(&secs)
    {
        return Err(SpecError::Timeout { secs });
    }
    if let Some(bytes) = spec.max_response_bytes
        && !(1..=MAX_RESPONSE_BYTES_LIMIT).contains(&bytes)
    {
        return Err(SpecError::ResponseCap { bytes });
    }
    Ok(())
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
            let e = validate_spec(&s).unwrap_err().to_string();
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
}
