//! [`AuthMode`], whether a server asks every request for a token.

/// Whether requests must carry a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMode {
    /// Loopback without `--auth`: a request without a token is the machine's owner (a token,
    /// when presented, is still checked and applied).
    Open,
    /// Every request but `/health` needs a valid token.
    Token,
}
