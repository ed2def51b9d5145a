//! The one table of machine-readable error codes every surface answers with: a REST error's
//! `error_code`, an MCP or QukaAI refusal's `data.error_code`, the metrics' and the audit
//! log's reason for a refused request. Each code's wire string, HTTP status and meaning are
//! written once, below; docs/errors.md shows the same rows (a test in `quarry-server` fails
//! when they differ). Wire strings and statuses are a contract: clients branch on them.

use std::fmt;

/// Which table of docs/errors.md a code is listed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CodeTable {
    /// "Request and engine errors": what a handler answers.
    Request,
    /// "Authentication refusals": what the credential check answers before any handler.
    Authentication,
}

/// Defines [`ErrorCode`] from one row per code: `table Variant = "WIRE", status, "HTTP
/// column", "meaning";`. The meaning is the variant's documentation and docs/errors.md's
/// text; the HTTP column starts with the status (a test checks it).
macro_rules! error_codes {
    ($($table:ident $variant:ident = $wire:literal, $status:literal, $http:literal, $meaning:literal;)*) => {
        /// A machine-readable error code: it names what went wrong, not where. Clients branch
        /// on it; people read the message beside it.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ErrorCode {
            $(#[doc = $meaning] $variant,)*
        }

        impl ErrorCode {
            /// Every code, in the order of docs/errors.md's tables.
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant,)*];

            /// The code on the wire: stable, SCREAMING_SNAKE_CASE.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $wire,)*
                }
            }

            /// The HTTP status a response with this code has (where a code has several,
            /// [`ErrorCode::http`] lists them; this is the first).
            pub const fn status(self) -> u16 {
                match self {
                    $(ErrorCode::$variant => $status,)*
                }
            }

            /// docs/errors.md's HTTP column: the status, and any other a route answers.
            pub const fn http(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $http,)*
                }
            }

            /// What the code means, as docs/errors.md says it.
            pub const fn meaning(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $meaning,)*
                }
            }

            /// The table of docs/errors.md that lists the code.
            pub const fn table(self) -> CodeTable {
                match self {
                    $(ErrorCode::$variant => CodeTable::$table,)*
                }
            }
        }
    };
}

error_codes! {
    Request InvalidInput = "INVALID_INPUT", 400, "400 (422 on a few `/api/v1` routes)",
        "The request is malformed: bad JSON, a wrong type, a missing or unknown field, a value out of range; an upload with no file (422).";
    Request NotFound = "NOT_FOUND", 404, "404",
        "The named thing (collection, document, knowledge base, space, token, …) does not exist, or the caller cannot see it (the two are not told apart).";
    Request RouteNotFound = "ROUTE_NOT_FOUND", 404, "404",
        "No route has this path.";
    Request MethodNotAllowed = "METHOD_NOT_ALLOWED", 405, "405",
        "The route exists, but not with this method.";
    Request Forbidden = "FORBIDDEN", 403, "403",
        "The caller may see the object but not do this to it (a read-only token writing, a role too low).";
    Request ManagementForbidden = "MANAGEMENT_FORBIDDEN", 403, "403",
        "The credential may not manage governance (policies, approvals, groups, roles and members, other chains' tokens, sources, the audit log): a token narrowed to tools, knowledge bases or an endpoint, an MCP connector's token, or one made without the management scope (`quarry token create --manage`); or the change would alter a policy that binds the calling token's own chain.";
    Request Conflict = "CONFLICT", 409, "409",
        "A name is already taken, or the change conflicts with the current state.";
    Request TooLarge = "TOO_LARGE", 413, "413",
        "The body, an upload or a list in it is larger than a limit allows.";
    Request UnsupportedMediaType = "UNSUPPORTED_MEDIA_TYPE", 415, "415",
        "The content type is not one Quarry handles (including a JSON route called without `Content-Type: application/json`).";
    Request Unauthenticated = "UNAUTHENTICATED", 401, "401",
        "The credentials are not a user's where a route needs one (the web UI's sign-in).";
    Request UpstreamFailed = "UPSTREAM_FAILED", 502, "502, 504",
        "Something Quarry called for the caller failed or timed out: a custom tool's endpoint, the chat provider, a source being synced.";
    Request Unavailable = "UNAVAILABLE", 503, "503",
        "A capability is not ready: no embedding model, no vector index yet, no chat provider.";
    Request ShuttingDown = "SHUTTING_DOWN", 503, "503",
        "The server is shutting down and takes no new requests.";
    Request TooManyConnections = "TOO_MANY_CONNECTIONS", 503, "503",
        "Too many connections are open; retry after a moment.";
    Request RateLimited = "RATE_LIMITED", 429, "429",
        "The token used up its rate limit (chats or tool calls per minute); `Retry-After` says how many seconds to wait. Over MCP a `tools/call` answers the JSON-RPC error `-32000` with `data.error_code` `RATE_LIMITED` and `data.retry_after_secs`.";
    Request MissingHost = "MISSING_HOST", 400, "400",
        "The request has no `Host` header.";
    Request HostNotAllowed = "HOST_NOT_ALLOWED", 403, "403",
        "The `Host` header names a host this server does not answer for (DNS-rebinding defence; see `--allowed-host`).";
    Request OriginNotAllowed = "ORIGIN_NOT_ALLOWED", 403, "403",
        "The `Origin` header names an origin this server does not accept (see `--allowed-origin`).";
    Request Internal = "INTERNAL", 500, "500",
        "Quarry failed: the store, the keyword index or a worker thread, or the credentials could not be checked (a store error). `detail` carries the cause (the database's own message, for store errors).";
    Authentication AuthRequired = "AUTH_REQUIRED", 401, "401",
        "No token where one is required (`--auth`, or a non-loopback bind).";
    Authentication AuthFailed = "AUTH_FAILED", 401, "401",
        "Not a token, or no such token.";
    Authentication TokenExpired = "TOKEN_EXPIRED", 401, "401",
        "The token (or one that created it) has expired.";
    Authentication TokenRevoked = "TOKEN_REVOKED", 401, "401",
        "The token (or one that created it) was revoked.";
    Authentication SpaceForbidden = "SPACE_FORBIDDEN", 403, "403",
        "The space is not one this token may use, or does not exist.";
    Authentication SpaceRequired = "SPACE_REQUIRED", 400, "400",
        "The token may use several spaces and the request named none.";
    Authentication KbNotFound = "KB_NOT_FOUND", 404, "404",
        "A knowledge base named by `?kb=` is missing or out of reach.";
    Authentication EndpointOnly = "ENDPOINT_ONLY", 403, "403",
        "The token was made for one named tool endpoint (`/mcp/e/<name>`) and works there only.";
    Authentication CsrfFailed = "CSRF_FAILED", 403, "403",
        "A state-changing request signed in with the web UI's session cookie did not echo the `quarry_csrf` cookie in `X-Quarry-CSRF`.";
}

impl ErrorCode {
    /// The code an HTTP status means when nothing more specific is known.
    pub const fn for_status(status: u16) -> ErrorCode {
        match status {
            404 => ErrorCode::NotFound,
            405 => ErrorCode::MethodNotAllowed,
            403 => ErrorCode::Forbidden,
            409 => ErrorCode::Conflict,
            413 => ErrorCode::TooLarge,
            415 => ErrorCode::UnsupportedMediaType,
            503 => ErrorCode::Unavailable,
            429 => ErrorCode::RateLimited,
            401 => ErrorCode::Unauthenticated,
            502 | 504 => ErrorCode::UpstreamFailed,
            500..=599 => ErrorCode::Internal,
            _ => ErrorCode::InvalidInput,
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
