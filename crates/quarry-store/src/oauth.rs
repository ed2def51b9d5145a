//! What Quarry's OAuth 2.1 authorization server keeps (issue 27): registered clients, the
//! grants a person consented to, and the one-time secrets of the flow (authorization codes
//! and refresh tokens), each stored only as a SHA-256. `quarry-oauth` owns the rules; the
//! store only guarantees that a secret is redeemed once, by one node.

use quarry_core::Result;
use serde::Serialize;

/// A client registered through dynamic client registration (RFC 7591).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OAuthClientRow {
    /// The `client_id` Quarry issued.
    pub id: String,
    /// SHA-256 of the client secret; `None`: a public client (`token_endpoint_auth_method`
    /// `none`), which proves itself with PKCE alone.
    #[serde(skip)]
    pub secret_hash: Option<String>,
    /// `client_name`, shown on the consent page.
    pub name: String,
    /// The redirect URIs it registered.
    pub redirect_uris: Vec<String>,
    /// The registration response's metadata, as JSON (returned again as registered).
    pub metadata: String,
    /// When it registered (Unix milliseconds).
    pub created_at: i64,
}

/// Which one-time secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OAuthSecretKind {
    /// An authorization code (minutes, once).
    Code,
    /// A refresh token (rotated on every use).
    Refresh,
}

impl OAuthSecretKind {
    /// The stored word.
    pub fn as_str(self) -> &'static str {
        match self {
            OAuthSecretKind::Code => "code",
            OAuthSecretKind::Refresh => "refresh",
        }
    }
}

/// An authorization code or refresh token, as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct OAuthSecretRow {
    /// SHA-256 of the secret.
    pub hash: String,
    /// Code or refresh token.
    pub kind: OAuthSecretKind,
    /// The client it was issued to.
    pub client_id: String,
    /// The grant (an access token's UUID, parent of every token issued under it).
    pub grant_id: String,
    /// The redirect URI the code was sent to (empty for refresh tokens).
    pub redirect_uri: String,
    /// The PKCE `code_challenge` (S256; empty for refresh tokens).
    pub code_challenge: String,
    /// The resource (RFC 8707) the tokens are for.
    pub resource: String,
    /// The granted scope (`read` or `read write`).
    pub scope: String,
    /// When it stops being redeemable (Unix milliseconds).
    pub expires_at: i64,
    /// When it was redeemed, if it was.
    pub used_at: Option<i64>,
}

/// What redeeming a secret found.
#[derive(Debug, Clone, PartialEq)]
pub enum Redeemed {
    /// Unused and unexpired: now marked used, by this call alone.
    Fresh(OAuthSecretRow),
    /// Already redeemed once: a replay (the grant should be revoked).
    Reused(OAuthSecretRow),
    /// No such secret, or expired.
    Unknown,
}

/// A grant a person consented to: the access token (without a usable secret) every token of
/// the client descends from, and the client that holds it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OAuthGrantRow {
    /// The grant token's UUID.
    pub grant_id: String,
    /// The client.
    pub client_id: String,
    /// When the person consented (Unix milliseconds).
    pub created_at: i64,
}

/// The authorization server's state, shared by every node.
pub trait OAuthStore: Send + Sync {
    /// Records a registered client.
    fn insert_oauth_client(&self, client: &OAuthClientRow) -> Result<()>;
    /// A client by its `client_id`.
    fn oauth_client(&self, id: &str) -> Result<Option<OAuthClientRow>>;
    /// Records a grant.
    fn insert_oauth_grant(&self, grant: &OAuthGrantRow) -> Result<()>;
    /// A grant by its token's UUID.
    fn oauth_grant(&self, grant_id: &str) -> Result<Option<OAuthGrantRow>>;
    /// Records a code or refresh token (its `used_at` is ignored: a new secret is unused).
    fn insert_oauth_secret(&self, secret: &OAuthSecretRow) -> Result<()>;
    /// A secret by hash and kind, without redeeming it.
    fn oauth_secret(&self, hash: &str, kind: OAuthSecretKind) -> Result<Option<OAuthSecretRow>>;
    /// Redeems a secret at `now`: atomic across nodes, so two concurrent redeemers of one
    /// secret never both get [`Redeemed::Fresh`].
    fn redeem_oauth_secret(&self, hash: &str, kind: OAuthSecretKind, now: i64) -> Result<Redeemed>;
    /// Removes secrets expired before `now` and expired access tokens issued under a grant;
    /// returns how many rows went.
    fn prune_oauth(&self, now: i64) -> Result<u64>;
}
