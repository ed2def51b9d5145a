//! Why a request could not be authenticated.

use std::fmt;

use quarry_core::ErrorCode;

/// Why a request could not be authenticated. The code is the seed's `data.error_code`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthFailure {
    /// No token where one is required.
    Missing,
    /// Not a token, or no such token.
    Invalid,
    /// The token is past its expiry.
    Expired,
    /// The token (or one that created it) was revoked.
    Revoked,
    /// The space is not one this token may use — or does not exist (the two are not told
    /// apart).
    SpaceForbidden,
    /// The token may use several spaces and the request named none.
    SpaceRequired,
    /// A knowledge base the URL's `?kb=` names is missing or out of reach (the two are not
    /// told apart).
    KnowledgeBaseNotFound(String),
    /// The token was made for one named tool endpoint and used somewhere else.
    EndpointOnly,
    /// A web session's token presented anywhere but the session cookie.
    SessionOutsideBrowser,
}

impl AuthFailure {
    /// The seed's `data.error_code` (`AUTH_REQUIRED`, `AUTH_FAILED` …), from the one table
    /// of codes ([`ErrorCode`]), which also gives its HTTP status.
    pub fn code(&self) -> ErrorCode {
        match self {
            AuthFailure::Missing => ErrorCode::AuthRequired,
            AuthFailure::Invalid => ErrorCode::AuthFailed,
            AuthFailure::Expired => ErrorCode::TokenExpired,
            AuthFailure::Revoked => ErrorCode::TokenRevoked,
            AuthFailure::SpaceForbidden => ErrorCode::SpaceForbidden,
            AuthFailure::SpaceRequired => ErrorCode::SpaceRequired,
            AuthFailure::KnowledgeBaseNotFound(_) => ErrorCode::KbNotFound,
            AuthFailure::EndpointOnly => ErrorCode::EndpointOnly,
            AuthFailure::SessionOutsideBrowser => ErrorCode::AuthFailed,
        }
    }

    /// Whether this refusal is what guessing looks like (a token, a space, a knowledge base):
    /// the attempts that failed-authentication throttling slows down. A valid token used
    /// outside its tool endpoint, or without naming one of its spaces, guessed nothing.
    pub fn is_guess(&self) -> bool {
        !matches!(self, AuthFailure::EndpointOnly | AuthFailure::SpaceRequired)
    }

    /// HTTP status, its code's: 401 for the token itself, 403 for the space.
    pub fn status(&self) -> u16 {
        self.code().status()
    }
}

impl fmt::Display for AuthFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let AuthFailure::KnowledgeBaseNotFound(key) = self {
            return write!(
                f,
                "knowledge base '{key}' (named by ?kb=) not found or not accessible here"
            );
        }
        f.write_str(match self {
            AuthFailure::KnowledgeBaseNotFound(_) => "knowledge base not found",
            AuthFailure::Missing => {
                "missing access token: pass Authorization: Bearer <token> or ?token=<token>"
            }
            AuthFailure::Invalid => "invalid access token",
            AuthFailure::Expired => "access token expired",
            AuthFailure::Revoked => "access token has been revoked",
            AuthFailure::SpaceForbidden => "space not found or not accessible with this token",
            AuthFailure::SpaceRequired => {
                "this token may use several spaces: name one with X-Space-ID or ?space_id="
            }
            AuthFailure::EndpointOnly => {
                "this token was made for one tool endpoint and works only there (/mcp/e/<name>)"
            }
            AuthFailure::SessionOutsideBrowser => {
                "this is a web session's token: it works only from the web UI's session cookie; make an access token for scripts and agents"
            }
        })
    }
}
