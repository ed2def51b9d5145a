//! The one REST error contract: `{"detail", "status_code", "error_code"}`, where
//! `error_code` comes from [`ErrorCode`], quarry-core's one table of codes (authentication
//! refusals' included: `quarry_access::AuthFailure::code`), documented in docs/errors.md.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use quarry_core::{Error, ErrorCode};
use serde_json::json;

/// The HTTP status of `code`, from the one table ([`ErrorCode::status`]).
pub(crate) fn status_of(code: ErrorCode) -> StatusCode {
    // Every status in the table is a valid one; the fallback is never taken.
    StatusCode::from_u16(code.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
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
            code: ErrorCode::for_status(status.as_u16()),
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
    status_of(error_code(e))
}

/// The machine code of an engine error (its status is the code's).
fn error_code(e: &Error) -> ErrorCode {
    match e {
        Error::InvalidInput(_) | Error::Io { .. } => ErrorCode::InvalidInput,
        Error::NotFound(_) => ErrorCode::NotFound,
        Error::Forbidden(_) => ErrorCode::Forbidden,
        Error::ManagementForbidden(_) => ErrorCode::ManagementForbidden,
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
        let code = error_code(&e);
        ApiError::with_code(status_of(code), code, public_detail(&e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quarry_core::CodeTable;

    #[test]
    fn codes_are_unique_and_documented() {
        let doc = include_str!("../../../../docs/errors.md");
        // docs/errors.md's two tables: each row a code, in the table the code names.
        let tables: Vec<(&str, Vec<&str>)> = doc
            .split("\n## ")
            .map(|section| {
                let title = section.lines().next().unwrap_or("");
                let rows = section
                    .lines()
                    .filter(|l| l.starts_with("| `") && !l.starts_with("| `error_code` |"))
                    .collect();
                (title, rows)
            })
            .collect();
        let rows_of = |table: CodeTable| {
            let title = match table {
                CodeTable::Request => "Request and engine errors",
                CodeTable::Authentication => "Authentication refusals",
            };
            tables
                .iter()
                .find(|(t, _)| *t == title)
                .map(|(_, rows)| rows.clone())
                .unwrap_or_default()
        };
        let mut seen = std::collections::HashSet::new();
        for &code in ErrorCode::ALL {
            assert!(seen.insert(code.as_str()), "{} twice", code.as_str());
            let row = format!("| `{}` | {} | {} |", code, code.http(), code.meaning());
            assert!(
                rows_of(code.table()).contains(&row.as_str()),
                "docs/errors.md has no row for {} in its {:?} table; it should read:\n{row}",
                code.as_str(),
                code.table()
            );
            assert!(
                code.http().starts_with(&code.status().to_string()),
                "{code}: HTTP column {} does not start with its status {}",
                code.http(),
                code.status()
            );
            // An error made from this status alone gets a code with the same status.
            assert_eq!(ErrorCode::for_status(code.status()).status(), code.status());
        }
        for table in [CodeTable::Request, CodeTable::Authentication] {
            let rows = rows_of(table);
            assert!(!rows.is_empty(), "docs/errors.md has no {table:?} table");
            for row in rows {
                assert!(
                    ErrorCode::ALL
                        .iter()
                        .any(|c| row.starts_with(&format!("| `{c}` |"))),
                    "docs/errors.md lists a code the table does not have: {row}"
                );
            }
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
