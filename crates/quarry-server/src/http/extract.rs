//! Request extractors whose rejections answer in the REST error shape.

use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::ApiError;

/// `Json<T>` whose rejections (bad JSON, wrong types, missing fields, too large) answer in
/// the seed's error shape with a message that says what is wrong.
pub(crate) struct Body<T>(pub T);

impl<S: Send + Sync, T: serde::de::DeserializeOwned> FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        if !is_json(req.headers()) {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "Expected request with `Content-Type: application/json`",
            ));
        }
        let bytes = axum::body::Bytes::from_request(req, state)
            .await
            .map_err(|r| ApiError::new(r.status(), r.body_text()))?;
        if has_nul(&bytes) {
            return Err(nul_refusal());
        }
        match axum::Json::<T>::from_bytes(&bytes) {
            Ok(axum::Json(v)) => Ok(Body(v)),
            Err(rejection) => Err(rejection_error(rejection)),
        }
    }
}

/// `Query<T>` whose rejections (an unknown parameter, `limit=-1`, a word for a number) answer
/// in the REST error shape, 400 with the parameter named, instead of axum's plain text.
pub(crate) struct Params<T>(pub T);

impl<S: Send + Sync, T: serde::de::DeserializeOwned> axum::extract::FromRequestParts<S>
    for Params<T>
{
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, Self::Rejection> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(v)) => Ok(Params(v)),
            Err(rejection) => {
                let text = rejection.body_text();
                let detail = text
                    .split_once("Failed to deserialize query string: ")
                    .map(|(_, why)| format!("invalid query parameters: {why}"))
                    .unwrap_or(text);
                Err(ApiError::new(StatusCode::BAD_REQUEST, detail))
            }
        }
    }
}

/// `application/json` or a `+json` type (parameters aside), as axum's `Json` accepts.
fn is_json(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .is_some_and(|m| {
            m == "application/json" || (m.starts_with("application/") && m.ends_with("+json"))
        })
}

/// Whether a JSON text holds a NUL character in a string: `\u0000` whose backslash is not
/// itself escaped (a raw NUL is not valid JSON). No store keeps NUL in text alike (SQLite
/// would, PostgreSQL refuses it), so every backend refuses it here, with one message.
pub(crate) fn has_nul(json: &[u8]) -> bool {
    let mut i = 0;
    while let Some(at) = json[i..]
        .windows(6)
        .position(|w| w.eq_ignore_ascii_case(b"\\u0000"))
    {
        let start = i + at;
        let backslashes = json[..start]
            .iter()
            .rev()
            .take_while(|b| **b == b'\\')
            .count();
        if backslashes % 2 == 0 {
            return true;
        }
        i = start + 1;
    }
    false
}

/// The refusal of text holding a NUL character.
pub(crate) fn nul_refusal() -> ApiError {
    ApiError::new(
        StatusCode::BAD_REQUEST,
        "text must not contain NUL characters (\\u0000)",
    )
}

fn rejection_error(r: JsonRejection) -> ApiError {
    let status = match r.status() {
        StatusCode::PAYLOAD_TOO_LARGE => StatusCode::PAYLOAD_TOO_LARGE,
        StatusCode::UNSUPPORTED_MEDIA_TYPE => StatusCode::UNSUPPORTED_MEDIA_TYPE,
        _ => StatusCode::BAD_REQUEST,
    };
    // axum's text names its own internals ("…into the target type: "); callers need only
    // what was wrong and where.
    let text = r.body_text();
    let detail = text
        .split_once("into the target type: ")
        .map(|(_, why)| format!("invalid body: {why}"))
        .unwrap_or(text);
    ApiError::new(status, detail)
}

/// An optional count: a non-negative whole number, also written as a float (`5.0`, as
/// JavaScript clients send it). `5.5`, `-1` and non-numbers are refused; the extractor
/// prefixes the message with the field's name.
pub(crate) fn count<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: TryFrom<u64>,
{
    use serde::de::Error as _;
    let Some(v) = Option::<Value>::deserialize(d)? else {
        return Ok(None);
    };
    let Value::Number(n) = &v else {
        let got = match &v {
            Value::Bool(_) => format!("a boolean ({v})"),
            Value::String(_) => format!("a string ({v})"),
            _ => v.to_string(),
        };
        return Err(D::Error::custom(format!(
            "expected a whole number, got {got}"
        )));
    };
    let too_large = || D::Error::custom(format!("{n} is too large"));
    if let Some(u) = n.as_u64() {
        return T::try_from(u).map(Some).map_err(|_| too_large());
    }
    let f = n.as_f64().unwrap_or(f64::NAN);
    if f < 0.0 {
        Err(D::Error::custom(format!("must not be negative, got {n}")))
    } else if f.fract() != 0.0 {
        Err(D::Error::custom(format!(
            "expected a whole number, got {n}"
        )))
    } else if f >= u64::MAX as f64 {
        Err(too_large())
    } else {
        T::try_from(f as u64).map(Some).map_err(|_| too_large())
    }
}

/// A field that may be absent (`None`), `null` (`Some(None)`) or a value: for changes where
/// `null` means "back to the default" and absence "leave it".
pub(crate) fn nullable<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

#[cfg(test)]
mod tests {
    use super::has_nul;

    #[test]
    fn nul_characters_are_found_only_where_json_encodes_one() {
        assert!(has_nul(br#"{"name": "a\u0000b"}"#));
        assert!(
            has_nul(br#"{"name": "\\\u0000"}"#),
            "an escaped backslash, then a NUL"
        );
        assert!(
            !has_nul(br#"{"name": "\\u0000"}"#),
            "a backslash, then the text u0000"
        );
        assert!(!has_nul(br#"{"name": "u0000", "n": 0}"#));
    }
}
