//! What every HTML answer of this server carries (the web UI's shell and assets, and the
//! few pages the server renders itself: a sign-in that failed), and those pages.

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::http::html_escape;

/// Everything a page loads comes from this origin; nothing inline, nothing evaluated.
/// `frame-src 'self'` lets the UI's preview drawer show an original PDF from the API.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; \
font-src 'self'; connect-src 'self'; frame-src 'self'; object-src 'none'; base-uri 'none'; \
form-action 'self'; frame-ancestors 'none'";

/// The content security policy and the other headers every HTML answer carries.
pub(crate) fn security_headers(headers: &mut HeaderMap) {
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
}

/// A small page that says what went wrong and links back to the web UI (its stylesheet,
/// so it looks like the rest; no script).
pub(crate) fn message_page(status: StatusCode, title: &str, message: &str) -> Response {
    let body = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<title>{title} · Quarry</title><link rel=\"stylesheet\" href=\"/assets/app.css\"></head>\
<body><main id=\"main\" class=\"main\"><section class=\"card login\" role=\"alert\">\
<h1 id=\"sign-in-problem\">{title}</h1><p id=\"sign-in-message\">{message}</p>\
<p><a class=\"btn btn-primary\" href=\"/\">Back to sign-in</a></p></section></main></body></html>\n",
        title = html_escape(title),
        message = html_escape(message),
    );
    let mut response = (status, body).into_response();
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    security_headers(h);
    response
}
