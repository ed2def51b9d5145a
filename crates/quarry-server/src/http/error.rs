//! The one REST error contract: `{"detail", "status_code", "error_code"}`, where
//! `error_code` comes from [`ErrorCode`] (documented in docs/errors.md). Authentication
//! refusals use the same shape with their own codes (`quarry_access::AuthFailure::code`).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use quarry_core::Error;
use serde_json::json;

/// Every machine-readable code a REST error carries besides the authentication refusals'.
/// A code names what went wrong, not where: clients branch on it, people read `detail`.
/// Adding a variant means adding its row to docs/errors.md (a test checks the table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    /// The request is malformed: bad JSON, a wrong type, a missing or unknown field, a value
    /// out of range.
    InvalidInput,
    /// The named thing does not exist, or the caller cannot see it.
    NotFound,
    /// No route has this path.
    RouteNotFound,
    /// The route exists, but not with this method.
    MethodNotAllowed,
    /// The caller may see the object but not do this to it (e.g. a read-only token writing).
    Forbidden,
    /// A name is already taken, or the change conflicts with the current state.
    Conflict,
    /// The body (or a part of it) is larger than a limit allows.
    TooLarge,
    /// The content type is not one Quarry handles.
    UnsupportedMediaType,
    /// The request's credentials are not a user's (where a route needs one, e.g. sign-in).
    Unauthenticated,
    /// Something Quarry called on the caller's behalf failed or timed out: a custom tool's
    /// HTTP endpoint, a chat provider.
    UpstreamFailed,
    /// A capability is not ready (no model, no vector index, no chat provider).
    Unavailable,
    /// The server is shutting down and takes no new requests.
    ShuttingDown,
    /// Too many connections are open.
    TooManyConnections,
    /// The token used up its rate limit for now (`Retry-After` says when to try again).
    RateLimited,
    /// The request has no `Host` header.
    MissingHost,
    /// The `Host` header names a host this server does not answer for (DNS rebinding).
    HostNotAllowed,
    /// The `Origin` header names an origin this server does not accept.
    OriginNotAllowed,
    /// Quarry failed: the store, the index or a worker thread (the detail says which).
    Internal,
}

impl ErrorCode {
    /// Every code, in the order of the documented table.
    pub const ALL: [ErrorCode; 18] = [
        ErrorCode::InvalidInput,
        ErrorCode::NotFound,
        ErrorCode::RouteNotFound,
        ErrorCode::MethodNotAllowed,
        ErrorCode::Forbidden,
        ErrorCode::Conflict,
        ErrorCode::TooLarge,
        ErrorCode::UnsupportedMediaType,
        ErrorCode::Unauthenticated,
        ErrorCode::UpstreamFailed,
        ErrorCode::Unavailable,
        ErrorCode::ShuttingDown,
        ErrorCode::TooManyConnections,
        ErrorCode::RateLimited,
        ErrorCode::MissingHost,
        ErrorCode::HostNotAllowed,
        ErrorCode::OriginNotAllowed,
        ErrorCode::Internal,
    ];

    /// The code on the wire: stable, SCREAMING_SNAKE_CASE like the auth refusals' codes.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidInput => "INVALID_INPUT",
            ErrorCode::NotFound => "NOT_FOUND",
            ErrorCode::RouteNotFound => "ROUTE_NOT_FOUND",
            ErrorCode::MethodNotAllowed => "METHOD_NOT_ALLOWED",
            ErrorCode::Forbidden => "FORBIDDEN",
            ErrorCode::Conflict => "CONFLICT",
            ErrorCode::TooLarge => "TOO_LARGE",
            ErrorCode::UnsupportedMediaType => "UNSUPPORTED_MEDIA_TYPE",
            ErrorCode::Unauthenticated => "UNAUTHENTICATED",
            ErrorCode::UpstreamFailed => "UPSTREAM_FAILED",
            ErrorCode::Unavailable => "UNAVAILABLE",
            ErrorCode::ShuttingDown => "SHUTTING_DOWN",
            ErrorCode::TooManyConnections => "TOO_MANY_CONNECTIONS",
            ErrorCode::RateLimited => "RATE_LIMITED",
            ErrorCode::MissingHost => "MISSING_HOST",
            ErrorCode::HostNotAllowed => "HOST_NOT_ALLOWED",
            ErrorCode::OriginNotAllowed => "ORIGIN_NOT_ALLOWED",
            ErrorCode::Internal => "INTERNAL",
        }
    }

    /// The code a status means when nothing more specific is known.
    pub fn for_status(status: StatusCode) -> ErrorCode {
        match status {
            StatusCode::NOT_FOUND => ErrorCode::NotFound,
            StatusCode::METHOD_NOT_ALLOWED => ErrorCode::MethodNotAllowed,
            StatusCode::FORBIDDEN => ErrorCode::Forbidden,
            StatusCode::CONFLICT => ErrorCode::Conflict,
            StatusCode::PAYLOAD_TOO_LARGE => ErrorCode::TooLarge,
            StatusCode::UNSUPPORTED_MEDIA_TYPE => ErrorCode::UnsupportedMediaType,
            StatusCode::SERVICE_UNAVAILABLE => ErrorCode::Unavailable,
            StatusCode::TOO_MANY_REQUESTS => ErrorCode::RateLimited,
            StatusCode::UNAUTHORIZED => ErrorCode::Unauthenticated,
            StatusCode::BAD_GATEWAY | StatusCode::GATEWAY_TIMEOUT => ErrorCode::UpstreamFailed,
            s if s.is_server_error() => ErrorCode::Internal,
            _ => ErrorCode::InvalidInput,
        }
    }
}

/// A REST error: status, machine code and a message for people.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: ErrorCode,
    pub detail: String,
}

impl ApiError {
    /// An error whose code follows from its status ([`ErrorCode::for_status`]).
    pub fn new(status: StatusCode, detail: impl Into<String>) -> Self {
        ApiError {
            status,
            code: ErrorCode::for_status(status),
            detail: detail.into(),
        }
    }

    /// An error with a code more specific than its status says.
    pub fn with_code(status: StatusCode, code: ErrorCode, detail: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            detail: detail.into(),
        }
    }

    /// The JSON body (also written by hand where no response type exists, e.g. the reply to a
    /// connection over the cap).
    pub fn body(&self) -> serde_json::Value {
        json!({
            "detail": self.detail,
            "status_code": self.status.as_u16(),
            "error_code": self.code.as_str(),
        })
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.detail)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, axum::Json(self.body())).into_response()
    }
}

/// The HTTP status of an engine error (REST replies, and the seed's `Search failed: <status>`
/// text of `knowledge_search`).
pub(crate) fn http_status(e: &Error) -> StatusCode {
    match e {
        Error::InvalidInput(_) => StatusCode::BAD_REQUEST,
        Error::NotFound(_) => StatusCode::NOT_FOUND,
        Error::Forbidden(_) => StatusCode::FORBIDDEN,
        Error::Conflict(_) => StatusCode::CONFLICT,
        Error::Unavailable(_) | Error::StorageUnavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
        Error::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
        Error::Unsupported(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
        Error::Io { .. } => StatusCode::BAD_REQUEST,
        Error::Storage(_) | Error::Index(_) => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// The machine code of an engine error.
fn error_code(e: &Error) -> ErrorCode {
    match e {
        Error::InvalidInput(_) | Error::Io { .. } => ErrorCode::InvalidInput,
        Error::NotFound(_) => ErrorCode::NotFound,
        Error::Forbidden(_) => ErrorCode::Forbidden,
        Error::Conflict(_) => ErrorCode::Conflict,
        Error::Unavailable(_) | Error::StorageUnavailable(_) => ErrorCode::Unavailable,
        Error::TooLarge(_) => ErrorCode::TooLarge,
        Error::Unsupported(_) => ErrorCode::UnsupportedMediaType,
        Error::Storage(_) | Error::Index(_) => ErrorCode::Internal,
    }
}

/// What a remote caller is told of `e` ([`Error::public_text`]); a store outage's detail
/// (the database's address) is logged here, never sent.
pub(crate) fn public_detail(e: &Error) -> String {
    if let Error::StorageUnavailable(detail) = e {
        tracing::error!(%detail, "storage unavailable");
    }
    e.public_text()
}

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        ApiError::with_code(http_status(&e), error_code(&e), public_detail(&e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_and_documented() {
        let doc = include_str!("../../../../docs/errors.md");
        let mut seen = std::collections::HashSet::new();
        for code in ErrorCode::ALL {
            assert!(seen.insert(code.as_str()), "{} twice", code.as_str());
            assert!(
                doc.contains(&format!("| `{}` |", code.as_str())),
                "docs/errors.md has no row for {}",
                code.as_str()
            );
        }
    }

    #[test]
    fn engine_errors_keep_their_status_and_get_a_code() {
        let e = ApiError::from(Error::Conflict("taken".into()));
        assert_eq!(
            (e.status, e.code),
            (StatusCode::CONFLICT, ErrorCode::Conflict)
        );
        let e = ApiError::from(Error::Storage("disk I/O error: disk full".into()));
        assert_eq!(e.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(e.body()["error_code"], "INTERNAL");
        assert!(e.detail.contains("disk full"), "{}", e.detail);
        // An outage is a 503 that names no host, port, user or database.
        let e = ApiError::from(Error::StorageUnavailable(
            "cannot connect to PostgreSQL at quarry@db.internal:5432/quarry: refused".into(),
        ));
        assert_eq!(e.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(e.detail, quarry_core::STORAGE_UNAVAILABLE);
    }
}
