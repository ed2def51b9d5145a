//! The web UI's cookie session as the auth middleware sees it: the session cookie carries
//! the access token (one pasted at `/ui/login`, or a web session's `qw_…` token made by
//! signing in with an identity provider); state changes it authenticates must echo the CSRF
//! cookie in [`CSRF_HEADER`] (double submit). Setting the cookies is the UI routes' job
//! (`api/ui.rs`); reading and checking them is here, so both sides share one definition.

use axum::http::{HeaderMap, Method, header};
use axum::response::{IntoResponse, Response};

use crate::http::guard::{LOOPBACK_NAMES, strip_port};
use crate::http::{ApiError, ErrorCode, status_of};

/// The session cookie: the access token (HttpOnly, Secure, SameSite=Strict).
pub(crate) const SESSION_COOKIE: &str = "quarry_session";
/// The CSRF cookie: random, readable by the page, echoed in [`CSRF_HEADER`].
pub(crate) const CSRF_COOKIE: &str = "quarry_csrf";
pub(crate) const CSRF_HEADER: &str = "x-quarry-csrf";
/// A started sign-in's `state` (`api/sign_in.rs`), until the provider sends the browser back.
pub(crate) const SIGN_IN_STATE_COOKIE: &str = "quarry_oidc_state";

/// The `Set-Cookie` value of a session cookie holding `token` for `max_age` seconds.
pub(crate) fn session_cookie(token: &str, max_age: i64) -> String {
    format!(
        "{SESSION_COOKIE}={token}; Path=/; HttpOnly; Secure; SameSite=Strict; Max-Age={max_age}"
    )
}

/// Whether the browser will keep a Secure cookie from this request: loopback (browsers
/// treat it as a secure context) or HTTPS through a proxy that says so.
pub(crate) fn secure_for(headers: &HeaderMap) -> bool {
    let forwarded_https = headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("https"));
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(strip_port)
        .unwrap_or("");
    forwarded_https || LOOPBACK_NAMES.contains(&host)
}

/// The value of cookie `name` in the request's `Cookie` headers.
pub(crate) fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim())
        .filter(|v| !v.is_empty())
}

/// Double submit: the `X-Quarry-CSRF` header equals the `quarry_csrf` cookie (compared in
/// constant time). A page on another origin can send the cookie but cannot read it.
pub(crate) fn csrf_ok(headers: &HeaderMap) -> bool {
    let (Some(c), Some(h)) = (
        cookie(headers, CSRF_COOKIE),
        headers.get(CSRF_HEADER).and_then(|v| v.to_str().ok()),
    ) else {
        return false;
    };
    c.len() >= 32 && quarry_core::constant_time_eq(c.as_bytes(), h.as_bytes())
}

pub(crate) fn csrf_refusal() -> Response {
    let code = ErrorCode::CsrfFailed;
    ApiError::with_code(
        status_of(code),
        code,
        "missing or wrong X-Quarry-CSRF header: a browser request signed in with the session cookie must echo the quarry_csrf cookie (reload the page to get one)",
    )
    .into_response()
}

/// Methods that change state and so need the CSRF check when a cookie authenticates them.
pub(crate) fn is_unsafe(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

pub(crate) fn random_hex() -> String {
    let mut bytes = [0u8; 32];
    // getrandom failing leaves zeros, which `csrf_ok` still accepts only when echoed, and
    // the OS RNG does not fail on any platform Quarry runs on.
    let _ = getrandom::fill(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    #[test]
    fn cookies_are_parsed_across_headers() {
        let h = headers(&[("cookie", "a=1; quarry_csrf=abc"), ("cookie", "b=2")]);
        assert_eq!(cookie(&h, "quarry_csrf"), Some("abc"));
        assert_eq!(cookie(&h, "b"), Some("2"));
        assert_eq!(cookie(&h, "quarry"), None);
    }

    #[test]
    fn csrf_needs_the_cookie_echoed() {
        let v = "0123456789abcdef0123456789abcdef";
        let c = format!("quarry_csrf={v}");
        assert!(csrf_ok(&headers(&[("cookie", &c), ("x-quarry-csrf", v)])));
        assert!(!csrf_ok(&headers(&[("cookie", &c)])));
        assert!(!csrf_ok(&headers(&[("x-quarry-csrf", v)])));
        let other = "0123456789abcdef0123456789abcdee";
        assert!(!csrf_ok(&headers(&[
            ("cookie", &c),
            ("x-quarry-csrf", other)
        ])));
        // Too short to be ours.
        assert!(!csrf_ok(&headers(&[
            ("cookie", "quarry_csrf=x"),
            ("x-quarry-csrf", "x")
        ])));
    }

    #[test]
    fn cookies_are_secure_on_loopback_and_behind_tls() {
        assert!(secure_for(&headers(&[("host", "127.0.0.1:18765")])));
        assert!(secure_for(&headers(&[("host", "localhost")])));
        assert!(secure_for(&headers(&[
            ("host", "kb.example"),
            ("x-forwarded-proto", "https")
        ])));
        assert!(!secure_for(&headers(&[("host", "kb.example")])));
    }
}
