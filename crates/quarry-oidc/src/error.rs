//! Why a sign-in failed.

use crate::jwt::TokenError;

/// Why sign-in failed, in words for the person signing in.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OidcError {
    /// No provider of that name is configured.
    #[error("no identity provider named '{0}' is configured")]
    UnknownProvider(String),
    /// The provider could not be reached.
    #[error("the identity provider cannot be reached: {0}")]
    Unreachable(String),
    /// The provider answered something Quarry cannot use.
    #[error("the identity provider's answer cannot be used: {0}")]
    Provider(String),
    /// The provider refused (at the authorization or the token endpoint).
    #[error("the identity provider refused: {error}{}", description.as_deref().map(|d| format!(" ({d})")).unwrap_or_default())]
    Refused {
        /// The OAuth error code (`access_denied`, `invalid_grant`, …).
        error: String,
        /// The provider's description, if any.
        description: Option<String>,
    },
    /// The ID token was refused.
    #[error(transparent)]
    Token(#[from] TokenError),
    /// The person is not allowed here (domain, required claim).
    #[error("{0}")]
    NotAllowed(String),
}
