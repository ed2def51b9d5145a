//! What people's sign-in through an OpenID Connect provider keeps (issue 69): the pending
//! requests of the flow (redeemed once, by one node), which provider account is which user
//! (matched by issuer and subject, never by e-mail), and the web sessions made by signing in.
//! `quarry-oidc` owns the rules; a session's credential is an access token (`qw_…`) kept
//! with the other tokens, so revoking it ends it on every node.

use quarry_core::Result;
use serde::Serialize;

/// How long a started sign-in may take before its callback is refused.
pub const SIGN_IN_REQUEST_MS: i64 = 10 * 60 * 1000;

/// A sign-in that was started and not yet finished.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignInRequest {
    /// SHA-256 of the `state` sent to the provider (the browser keeps the value).
    pub state_hash: String,
    /// The configured provider's name.
    pub provider: String,
    /// The `nonce` the ID token must carry.
    pub nonce: String,
    /// The PKCE verifier of the code.
    pub verifier: String,
    /// The redirect URI sent (the code exchange must send it again).
    pub redirect_uri: String,
    /// Where the person goes once signed in (a path on this server).
    pub return_to: String,
    /// Unix milliseconds after which the callback is refused.
    pub expires_at: i64,
}

/// A provider account linked to a user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LinkedIdentity {
    /// The provider's issuer.
    pub issuer: String,
    /// The provider's `sub` for the person.
    pub subject: String,
    /// The user's UUID.
    pub user_id: String,
    /// The user's name.
    pub user: String,
    /// The e-mail the provider last gave, if any (shown only; never used to match).
    pub email: Option<String>,
    /// First sign-in (Unix milliseconds).
    pub created_at: i64,
    /// Latest sign-in (Unix milliseconds).
    pub last_sign_in_at: i64,
}

/// A web session made by signing in with a provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebSession {
    /// The session's access token (its UUID).
    pub token_id: String,
    /// The configured provider's name.
    pub provider: String,
    /// The provider's issuer.
    pub issuer: String,
    /// The provider's `sub` for the person.
    pub subject: String,
    /// The ID token the provider issued (the `id_token_hint` of a provider sign-out).
    pub id_token: String,
    /// Unix milliseconds.
    pub created_at: i64,
}

/// Sign-in requests, linked identities and web sessions.
pub trait SignInStore: Send + Sync {
    /// Records a started sign-in; requests past their expiry are dropped on the way.
    fn put_sign_in_request(&self, request: &SignInRequest) -> Result<()>;
    /// Takes the sign-in whose state hashes to `state_hash`: it is gone afterwards, so of
    /// two callbacks with one state (a replay, two nodes) one gets it. An expired request
    /// is dropped and `None` returned.
    fn take_sign_in_request(&self, state_hash: &str, now: i64) -> Result<Option<SignInRequest>>;
    /// The user row and UUID linked to `(issuer, subject)`, if any.
    fn identity_user(&self, issuer: &str, subject: &str) -> Result<Option<(i64, String)>>;
    /// Links `(issuer, subject)` to `user_row`, or, when it is linked already, records this
    /// sign-in (time and e-mail). A link never moves to another user.
    fn link_identity(
        &self,
        issuer: &str,
        subject: &str,
        user_row: i64,
        email: Option<&str>,
        now: i64,
    ) -> Result<()>;
    /// Every linked identity, oldest first.
    fn identities(&self) -> Result<Vec<LinkedIdentity>>;
    /// Records a web session.
    fn put_web_session(&self, session: &WebSession) -> Result<()>;
    /// The web session of the token `token_id`, if it is one.
    fn web_session(&self, token_id: &str) -> Result<Option<WebSession>>;
}
