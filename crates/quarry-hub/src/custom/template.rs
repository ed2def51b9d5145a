//! Request templates: `{{key}}` placeholders in a custom tool's URL and body, filled from the
//! call's arguments and encoded for where they land (the rules are in [`crate::custom`]'s
//! docs).

use std::collections::BTreeMap;
use std::fmt;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::{Map, Value};

use super::schema::type_name;

/// Characters kept as they are in a URL value: RFC 3986 unreserved. Everything else is
/// percent-encoded, which is safe in a path segment, a query and a fragment.
const URL_VALUE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Why a template cannot be read, or cannot be rendered with the given arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TemplateError {
    /// `{{` with no `}}` after it.
    Unclosed {
        /// Byte offset of the `{{`.
        at: usize,
    },
    /// A placeholder whose name is not letters, digits, `_` and `-`.
    InvalidPlaceholder {
        /// The text between the braces (its first 40 characters).
        shown: String,
        /// Byte offset of the `{{`.
        at: usize,
    },
    /// The arguments are not a JSON object.
    ArgumentsNotObject {
        /// Their JSON type.
        got: &'static str,
    },
    /// A URL template without `scheme://`.
    NoScheme,
    /// A URL template with nothing between `scheme://` and the path.
    NoHost,
    /// A URL placeholder in the scheme or host.
    PlaceholderInAuthority {
        /// The placeholder's name.
        key: String,
    },
    /// A rendered URL path with a `.` or `..` segment (possibly percent-encoded).
    DotSegment {
        /// The segment as rendered.
        segment: String,
    },
}

impl fmt::Display for TemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TemplateError::Unclosed { at } => write!(
                f,
                "unclosed placeholder at byte {at} (\"{{{{\" opens a placeholder)"
            ),
            TemplateError::InvalidPlaceholder { shown, at } => write!(
                f,
                "invalid placeholder \"{{{{{shown}}}}}\" at byte {at}: names use letters, digits, '_' and '-'"
            ),
            TemplateError::ArgumentsNotObject { got } => {
                write!(f, "arguments must be a JSON object, got {got}")
            }
            TemplateError::NoScheme => {
                f.write_str("the URL template has no scheme (http:// or https://)")
            }
            TemplateError::NoHost => f.write_str("the URL template has no host"),
            TemplateError::PlaceholderInAuthority { key } => write!(
                f,
                "placeholder {{{{{key}}}}} is in the URL's scheme or host; placeholders may \
                 appear only in the path, query and fragment"
            ),
            TemplateError::DotSegment { segment } => write!(
                f,
                "the URL path would contain a {segment:?} segment, which would change the path"
            ),
        }
    }
}

impl std::error::Error for TemplateError {}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Piece<'a> {
    Lit(&'a str),
    /// A placeholder: its name and the byte offset of its `{{` in the template.
    Var {
        key: &'a str,
        at: usize,
    },
}

/// Whether `b` may appear in a placeholder's name (and in a tool's name).
pub(super) fn is_key_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

fn parse_template(t: &str) -> Result<Vec<Piece<'_>>, TemplateError> {
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
            return Err(TemplateError::Unclosed { at: open });
        };
        let inner = &t[inner_start..inner_start + close_rel];
        let key = inner.trim();
        if key.is_empty() || !key.bytes().all(is_key_byte) {
            return Err(TemplateError::InvalidPlaceholder {
                shown: inner.chars().take(40).collect(),
                at: open,
            });
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
pub fn placeholders(template: &str) -> Result<Vec<String>, TemplateError> {
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

fn args_object(args: &Value) -> Result<&Map<String, Value>, TemplateError> {
    args.as_object()
        .ok_or_else(|| TemplateError::ArgumentsNotObject {
            got: type_name(args),
        })
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
pub fn render_url(template: &str, args: &Value) -> Result<String, TemplateError> {
    let args = args_object(args)?;
    let (authority_start, authority_end) =
        authority_span(template).ok_or(TemplateError::NoScheme)?;
    if template[authority_start..authority_end].trim().is_empty() {
        return Err(TemplateError::NoHost);
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
                    return Err(TemplateError::PlaceholderInAuthority {
                        key: key.to_owned(),
                    });
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
            return Err(TemplateError::DotSegment {
                segment: segment.to_owned(),
            });
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
pub(super) fn render_body_with(
    template: &str,
    mut fill: impl FnMut(&str, bool) -> String,
) -> Result<String, TemplateError> {
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
                out.push_str(&fill(key, in_string));
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
pub fn render_body(template: &str, args: &Value, kind: BodyKind) -> Result<String, TemplateError> {
    let args = args_object(args)?;
    if kind == BodyKind::Json {
        return render_body_with(template, |key, in_string| {
            match (args.get(key), in_string) {
                (Some(value), true) => string_content(value),
                (Some(value), false) => value.to_string(),
                (None, true) => String::new(),
                (None, false) => "null".to_owned(),
            }
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use url::Url;

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
            assert_eq!(
                e,
                TemplateError::DotSegment {
                    segment: bad.into()
                },
                "{bad}"
            );
            assert!(e.to_string().contains("segment"), "{bad}: {e}");
        }
        // A value's "%" is encoded, so "%2e%2E" is no dot segment; in the template it is one.
        assert_eq!(
            render_url("http://h/api/{{id}}/x", &json!({"id": "%2e%2E"})).unwrap(),
            "http://h/api/%252e%252E/x"
        );
        let e = render_url("http://h/api/%2e%2E/{{id}}", &json!({"id": "x"})).unwrap_err();
        assert!(matches!(e, TemplateError::DotSegment { .. }), "{e}");
        // ".." in a query is harmless.
        assert!(render_url("http://h/api?x={{id}}", &json!({"id": ".."})).is_ok());
        // "../" has its slash encoded, so the segment is "..%2F": no dot segment.
        assert_eq!(
            render_url("http://h/a/{{id}}", &json!({"id": "../b"})).unwrap(),
            "http://h/a/..%2Fb"
        );
        let e = render_url("http://{{h}}/", &json!({"h": "x"})).unwrap_err();
        assert_eq!(e, TemplateError::PlaceholderInAuthority { key: "h".into() });
        assert!(e.to_string().contains("scheme or host"), "{e}");
        let e = render_url("http://h/", &json!([1])).unwrap_err();
        assert_eq!(e, TemplateError::ArgumentsNotObject { got: "array" });
        assert!(e.to_string().contains("must be a JSON object"), "{e}");
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
}
