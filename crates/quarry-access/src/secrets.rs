//! Token secrets: their shape, how they are made, and what is stored for them.

use quarry_core::{Error, Result};

/// Every access token starts with this.
pub const TOKEN_PREFIX: &str = "qk_";
/// Every web session's token starts with this: the server takes it from the session cookie
/// only, never as a bearer token or URL parameter.
pub const SESSION_PREFIX: &str = "qw_";
/// Hex digits after the prefix (32 random bytes).
const TOKEN_HEX: usize = 64;
/// Characters of a token kept for display (`qk_` and 6 hex digits).
pub(crate) const DISPLAY_PREFIX: usize = TOKEN_PREFIX.len() + 6;

/// `prefix` and `bytes` random bytes from the OS as lower-case hex: access tokens here, and
/// the OAuth server's codes, refresh tokens, client secrets and ids.
pub fn random_secret(prefix: &str, bytes: usize) -> Result<String> {
    let mut buf = vec![0u8; bytes];
    getrandom::fill(&mut buf)
        .map_err(|e| Error::Storage(format!("no secure random numbers available: {e}")))?;
    Ok(format!("{prefix}{}", quarry_core::hex_lower(&buf)))
}

/// A new random token secret starting `prefix` ([`TOKEN_PREFIX`] or [`SESSION_PREFIX`]).
pub(crate) fn new_secret(prefix: &str) -> Result<String> {
    random_secret(prefix, TOKEN_HEX / 2)
}

/// Whether `s` has a token's shape, an access token's or a session's (checked before any
/// lookup).
pub fn is_token_shaped(s: &str) -> bool {
    s.strip_prefix(TOKEN_PREFIX)
        .or_else(|| s.strip_prefix(SESSION_PREFIX))
        .is_some_and(|hex| {
            hex.len() == TOKEN_HEX && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        })
}

/// Whether `s` is shaped like a web session's token.
pub fn is_session_token(s: &str) -> bool {
    s.starts_with(SESSION_PREFIX) && is_token_shaped(s)
}

/// What is stored for a secret.
pub fn token_hash(secret: &str) -> String {
    quarry_core::sha256_hex(secret.as_bytes())
}
