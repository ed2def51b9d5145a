//! Upstreams that sign in with OAuth (issue 45, item 4): a Streamable HTTP upstream that
//! answers `401` is `auth_required` until a person signs in; the hub then keeps its client
//! registration and tokens sealed in the upstream's secrets, sends the access token, and
//! refreshes it before it expires or when the upstream refuses it.
//!
//! The flow: [`Hub::begin_sign_in`] discovers the authorization server from the upstream's
//! `401`, registers Quarry as a client (or uses one given), and keeps a *pending* sign-in
//! (PKCE verifier, a hash of the `state`, who started it, when); the person opens the
//! authorization URL and consents; the authorization server sends the browser back to
//! Quarry's callback, and [`Hub::finish_sign_in`] exchanges the code once.
//!
//! What is stored survives restarts and is shared by every node; nodes never spend one
//! refresh token twice: a node first *claims* the refresh with a compare-and-swap on the
//! sealed secrets ([`quarry_store::HubStore::swap_upstream_secrets`]), and the others wait
//! for the tokens it writes back.

use std::sync::Arc;
use std::time::Duration;

use quarry_core::{Error, MACHINE_OWNER, Principal, Result, now_millis};
use quarry_oauth_client::{self as oauth, AuthServer, ClientCredentials, OAuthClientError, Tokens};
use quarry_store::UpstreamRow;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::hub::{Hub, json_text, stored_settings};
use crate::access::require_write;
use crate::upstream::{self, BearerSource, TransportKind, UpstreamSecrets};

/// How long a started sign-in waits for the person to consent.
pub const SIGN_IN_SECS: i64 = 600;
/// A token that expires within this long is refreshed before it is sent.
const REFRESH_AHEAD_MS: i64 = 60_000;
/// How long one node's claim on a refresh lasts (a node that dies mid-refresh frees it).
const REFRESH_CLAIM_MS: i64 = 30_000;
/// How long a node waits for another's refresh before giving up for this attempt.
const REFRESH_WAIT: Duration = Duration::from_secs(35);
/// The client name Quarry registers with.
const CLIENT_NAME: &str = "Quarry hub";

/// What the hub keeps of an upstream's sign-in (sealed; never listed).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
struct SignIn {
    server: Option<AuthServer>,
    client: Option<ClientCredentials>,
    /// The redirect URI the client was registered with.
    redirect_uri: Option<String>,
    tokens: Option<Tokens>,
    /// Who consented (user id; the machine's owner is `local`) and when.
    user: Option<String>,
    signed_in_at: Option<i64>,
    pending: Option<Pending>,
    /// A node is refreshing the tokens until then.
    refreshing_until: Option<i64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Pending {
    /// SHA-256 (hex) of the state's random part: the state itself is never stored.
    state_hash: String,
    verifier: String,
    redirect_uri: String,
    user: String,
    created_at: i64,
}

/// What `POST /api/v1/mcp/servers/{id}/oauth` answers: where the person consents.
#[derive(Debug, Clone, Serialize)]
pub struct SignInStarted {
    /// The upstream's id.
    pub id: String,
    /// The address to open in a browser.
    pub authorization_url: String,
    /// The authorization server.
    pub issuer: String,
    /// When the started sign-in lapses (milliseconds since the epoch).
    pub expires_at: i64,
}

/// A finished sign-in (the callback's page names it).
#[derive(Debug, Clone, Serialize)]
pub struct SignedIn {
    /// The upstream's id.
    pub id: String,
    /// Its display name.
    pub name: String,
}

/// What a listing shows of an upstream's sign-in: never a token.
#[derive(Debug, Clone, Serialize)]
pub struct SignInInfo {
    /// `signed_in`, `pending` or `signed_out`; `sealed` when this node lacks the key.
    pub state: &'static str,
    /// The authorization server.
    pub issuer: Option<String>,
    /// Who consented.
    pub user: Option<String>,
    /// When.
    pub signed_in_at: Option<i64>,
    /// When the current access token expires.
    pub expires_at: Option<i64>,
    /// The scopes granted.
    pub scope: Option<String>,
}

/// Runs store work from async code on the blocking pool (store calls never run on an async
/// runtime thread).
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(move || quarry_store::thread_guard::allow_blocking(f))
        .await
        .map_err(|e| Error::Storage(format!("a hub task failed: {e}")))?
}

fn context(id: &str) -> String {
    format!("hub-upstream-oauth:{id}")
}

fn sha256_hex(text: &str) -> String {
    quarry_core::hex_lower(&Sha256::digest(text.as_bytes()))
}

fn client_error(e: OAuthClientError) -> Error {
    match e {
        OAuthClientError::Transport(m) => Error::Unavailable(m),
        other => Error::InvalidInput(other.to_string()),
    }
}

impl Hub {
    fn secret_key(&self) -> Result<&quarry_secrets::SecretKey> {
        self.opts.secret_key.as_deref().ok_or_else(|| {
            Error::Unavailable(
                "signing in to an MCP server needs QUARRY_SECRET_KEY (32 random bytes as 64 hexadecimal digits, `openssl rand -hex 32`, the same on every node): its tokens are stored sealed".into(),
            )
        })
    }

    /// The sign-in sealed in `secrets` (an empty one when there is none).
    fn open_sign_in(&self, id: &str, secrets: &UpstreamSecrets) -> Result<SignIn> {
        let Some(sealed) = &secrets.oauth else {
            return Ok(SignIn::default());
        };
        let text = self
            .secret_key()?
            .open(sealed, &context(id))
            .map_err(|e| Error::Unavailable(e.to_string()))?;
        serde_json::from_str(&text).map_err(|e| Error::Storage(format!("sign-in: {e}")))
    }

    /// `secrets` with `sign_in` sealed into them (removed when it holds nothing).
    fn with_sign_in(
        &self,
        id: &str,
        mut secrets: UpstreamSecrets,
        sign_in: &SignIn,
    ) -> Result<UpstreamSecrets> {
        secrets.oauth = if sign_in.server.is_none() && sign_in.tokens.is_none() {
            None
        } else {
            Some(
                self.secret_key()?
                    .seal(&json_text(sign_in)?, &context(id))
                    .map_err(|e| Error::Unavailable(e.to_string()))?,
            )
        };
        Ok(secrets)
    }

    /// Writes a changed sign-in if the row's secrets are still what `row` says: the secrets
    /// now stored, or `None` when another request or node changed them first.
    fn swap_sign_in(&self, row: &UpstreamRow, sign_in: &SignIn) -> Result<Option<String>> {
        let (_, secrets) = stored_settings(row)?;
        let new = json_text(&self.with_sign_in(&row.id, secrets, sign_in)?)?;
        Ok(self
            .store
            .swap_upstream_secrets(&row.id, &row.secrets, &new)?
            .then_some(new))
    }

    /// What a listing shows of `row`'s sign-in; `None` when it has none.
    pub(super) fn sign_in_info(&self, row: &UpstreamRow) -> Option<SignInInfo> {
        let (_, secrets) = stored_settings(row).ok()?;
        secrets.oauth.as_ref()?;
        let Ok(s) = self.open_sign_in(&row.id, &secrets) else {
            return Some(SignInInfo {
                state: "sealed",
                issuer: None,
                user: None,
                signed_in_at: None,
                expires_at: None,
                scope: None,
            });
        };
        let state = if s.tokens.is_some() {
            "signed_in"
        } else if s
            .pending
            .as_ref()
            .is_some_and(|p| p.created_at + SIGN_IN_SECS * 1000 > now_millis())
        {
            "pending"
        } else {
            "signed_out"
        };
        Some(SignInInfo {
            state,
            issuer: s.server.as_ref().map(|a| a.issuer.clone()),
            user: s.user.clone(),
            signed_in_at: s.signed_in_at,
            expires_at: s.tokens.as_ref().and_then(|t| t.expires_at),
            scope: s.tokens.as_ref().and_then(|t| t.scope.clone()),
        })
    }

    /// The HTTP client and address guard for `row`'s sign-in requests: the same outbound
    /// policy as its connection.
    async fn sign_in_client(
        &self,
        row: &UpstreamRow,
    ) -> Result<(reqwest::Client, Option<quarry_netguard::NetPolicy>)> {
        let net = (row.owner != MACHINE_OWNER).then(|| self.opts.net.clone());
        let http = upstream::guarded_http_client(&row.config, net.as_ref())
            .await
            .map_err(Error::InvalidInput)?;
        Ok((http, net))
    }

    /// Starts signing in to an upstream as `caller`: discovery from its `401`, client
    /// registration (unless `client` is given, or one registered for `redirect_uri` is
    /// kept), PKCE. The person then opens [`SignInStarted::authorization_url`].
    pub async fn begin_sign_in(
        self: &Arc<Self>,
        caller: &Principal,
        key: &str,
        redirect_uri: &str,
        client: Option<ClientCredentials>,
    ) -> Result<SignInStarted> {
        require_write(caller)?;
        self.secret_key()?;
        let row = self.blocking_row(caller, key).await?;
        if TransportKind::parse(&row.transport) != Some(TransportKind::Http) {
            return Err(Error::InvalidInput(format!(
                "'{}' is a {} server: OAuth sign-in is for Streamable HTTP (http) servers",
                row.name, row.transport
            )));
        }
        let (http, net) = self.sign_in_client(&row).await?;
        let guard = |u: &str| -> std::result::Result<(), String> {
            match &net {
                Some(policy) => {
                    let url = url::Url::parse(u).map_err(|e| e.to_string())?;
                    quarry_netguard::check_url(policy, &url).map_err(|e| e.to_string())
                }
                None => Ok(()),
            }
        };
        let server = oauth::discover(&http, &guard, &row.config)
            .await
            .map_err(client_error)?;
        let (_, secrets) = stored_settings(&row)?;
        let mut sign_in = self.open_sign_in(&row.id, &secrets)?;
        let kept = sign_in.client.clone().filter(|_| {
            sign_in.redirect_uri.as_deref() == Some(redirect_uri)
                && sign_in.server.as_ref().map(|s| &s.issuer) == Some(&server.issuer)
        });
        let client = match client.or(kept) {
            Some(c) => c,
            None => oauth::register(&http, &server, redirect_uri, CLIENT_NAME)
                .await
                .map_err(client_error)?,
        };
        let pkce = oauth::Pkce::new().map_err(client_error)?;
        let nonce = oauth::Pkce::new().map_err(client_error)?.verifier;
        let state = format!("{}.{nonce}", row.id);
        let authorization_url =
            oauth::authorization_url(&server, &client, redirect_uri, &state, &pkce.challenge)
                .map_err(client_error)?;
        let now = now_millis();
        sign_in.pending = Some(Pending {
            state_hash: sha256_hex(&nonce),
            verifier: pkce.verifier,
            redirect_uri: redirect_uri.to_owned(),
            user: caller
                .identity
                .as_ref()
                .map_or_else(|| MACHINE_OWNER.to_owned(), |i| i.user.clone()),
            created_at: now,
        });
        let issuer = server.issuer.clone();
        sign_in.server = Some(server);
        sign_in.client = Some(client);
        sign_in.redirect_uri = Some(redirect_uri.to_owned());
        let hub = self.clone();
        let id = row.id.clone();
        let stored = blocking(move || hub.swap_sign_in(&row, &sign_in)).await?;
        if stored.is_none() {
            return Err(Error::Conflict(
                "the MCP server changed while signing in started; try again".into(),
            ));
        }
        Ok(SignInStarted {
            id,
            authorization_url,
            issuer,
            expires_at: now + SIGN_IN_SECS * 1000,
        })
    }

    /// Finishes a sign-in when the authorization server sends the browser back: `state`
    /// names the upstream and proves the sign-in was started here (once, within
    /// [`SIGN_IN_SECS`]); `code` is exchanged, or `error` (the person declined) ends it.
    pub async fn finish_sign_in(
        self: &Arc<Self>,
        state: &str,
        code: Option<&str>,
        error: Option<&str>,
    ) -> Result<SignedIn> {
        let expired = || {
            Error::InvalidInput(
                "this sign-in link is unknown, was already used or has expired: start the sign-in again".into(),
            )
        };
        let (id, nonce) = state.split_once('.').ok_or_else(expired)?;
        let row = self.upstream_by_id(None, id).await?.ok_or_else(expired)?;
        let (_, secrets) = stored_settings(&row)?;
        let mut sign_in = self.open_sign_in(&row.id, &secrets)?;
        let pending = sign_in
            .pending
            .clone()
            .filter(|p| p.state_hash == sha256_hex(nonce))
            .filter(|p| p.created_at + SIGN_IN_SECS * 1000 > now_millis())
            .ok_or_else(expired)?;
        // Used once, whatever happens next.
        sign_in.pending = None;
        let (server, client) = match (sign_in.server.clone(), sign_in.client.clone()) {
            (Some(s), Some(c)) => (s, c),
            _ => return Err(expired()),
        };
        let hub = self.clone();
        let (row_now, cleared) = (row.clone(), sign_in.clone());
        if blocking(move || hub.swap_sign_in(&row_now, &cleared))
            .await?
            .is_none()
        {
            return Err(expired());
        }
        if let Some(e) = error {
            return Err(Error::Forbidden(format!(
                "sign-in to '{}' was not completed: the authorization server answered {e}",
                row.name
            )));
        }
        let code = code
            .filter(|c| !c.is_empty())
            .ok_or_else(|| Error::InvalidInput("the authorization server sent no code".into()))?;
        let (http, _) = self.sign_in_client(&row).await?;
        let tokens = oauth::exchange_code(
            &http,
            &server,
            &client,
            code,
            &pending.verifier,
            &pending.redirect_uri,
            now_millis(),
        )
        .await
        .map_err(client_error)?;
        sign_in.tokens = Some(tokens);
        sign_in.user = Some(pending.user);
        sign_in.signed_in_at = Some(now_millis());
        sign_in.refreshing_until = None;
        // Written as an edit, so every node reconnects with the new token now.
        let hub = self.clone();
        blocking(move || {
            let mut row = hub
                .store
                .upstream(&row.owner, &row.id)?
                .ok_or_else(|| Error::NotFound("the MCP server was deleted".into()))?;
            let (_, secrets) = stored_settings(&row)?;
            row.secrets = json_text(&hub.with_sign_in(&row.id, secrets, &sign_in)?)?;
            row.updated_at = now_millis().max(row.updated_at + 1);
            hub.store.update_upstream(&row)?;
            if row.enabled {
                hub.connect(&row)?;
            }
            Ok(SignedIn {
                id: row.id,
                name: row.name,
            })
        })
        .await
    }

    /// Forgets an upstream's sign-in (its tokens and client); it is `auth_required` again.
    pub fn sign_out(self: &Arc<Self>, caller: &Principal, key: &str) -> Result<()> {
        require_write(caller)?;
        let mut row = self.row(caller, key)?;
        let (_, mut secrets) = stored_settings(&row)?;
        if secrets.oauth.take().is_none() {
            return Err(Error::NotFound(format!(
                "'{}' has no sign-in to forget",
                row.name
            )));
        }
        row.secrets = json_text(&secrets)?;
        row.updated_at = now_millis().max(row.updated_at + 1);
        self.store.update_upstream(&row)?;
        if row.enabled {
            self.connect(&row)?;
        }
        Ok(())
    }

    /// An upstream by id: `owner`'s (a connection knows it), or any owner's (the callback
    /// knows only the id its `state` names).
    async fn upstream_by_id(
        self: &Arc<Self>,
        owner: Option<&str>,
        id: &str,
    ) -> Result<Option<UpstreamRow>> {
        let hub = self.clone();
        let (owner, wanted) = (owner.map(str::to_owned), id.to_owned());
        blocking(move || match owner {
            Some(owner) => hub.store.upstream(&owner, &wanted),
            None => Ok(hub
                .store
                .upstreams(None)?
                .into_iter()
                .find(|r| r.id == wanted)),
        })
        .await
    }

    async fn blocking_row(self: &Arc<Self>, caller: &Principal, key: &str) -> Result<UpstreamRow> {
        let hub = self.clone();
        let (caller, key) = (caller.clone(), key.to_owned());
        blocking(move || hub.row(&caller, &key)).await
    }

    /// The bearer source of `row`'s connection (see [`BearerSource`]).
    pub(super) fn bearer_source(self: &Arc<Self>, row: &UpstreamRow) -> BearerSource {
        let hub = Arc::downgrade(self);
        let (owner, id) = (row.owner.clone(), row.id.clone());
        Arc::new(move |refused: Option<String>| {
            let (hub, owner, id) = (hub.clone(), owner.clone(), id.clone());
            Box::pin(async move {
                let Some(hub) = hub.upgrade() else {
                    return Ok(None);
                };
                hub.current_bearer(&owner, &id, refused.as_deref())
                    .await
                    .map_err(|e| e.to_string())
            })
        })
    }

    /// The access token to send to `owner`'s upstream `id` now, refreshed first when it
    /// expires within [`REFRESH_AHEAD_MS`] or is the one the upstream just `refused`.
    async fn current_bearer(
        self: &Arc<Self>,
        owner: &str,
        id: &str,
        refused: Option<&str>,
    ) -> Result<Option<String>> {
        let started = std::time::Instant::now();
        loop {
            let Some(row) = self.upstream_by_id(Some(owner), id).await? else {
                return Ok(None);
            };
            let (_, secrets) = stored_settings(&row)?;
            if secrets.oauth.is_none() {
                return Ok(None);
            }
            let mut sign_in = self.open_sign_in(id, &secrets)?;
            let Some(tokens) = sign_in.tokens.clone() else {
                return Ok(None);
            };
            let now = now_millis();
            let fresh = tokens
                .expires_at
                .is_none_or(|at| at > now + REFRESH_AHEAD_MS);
            if fresh && refused != Some(tokens.access_token.as_str()) {
                return Ok(Some(tokens.access_token));
            }
            let (Some(refresh_token), Some(server), Some(client)) = (
                tokens.refresh_token.clone(),
                sign_in.server.clone(),
                sign_in.client.clone(),
            ) else {
                return Ok(None);
            };
            if sign_in.refreshing_until.is_some_and(|t| t > now) {
                // Another node (or connection) is refreshing: wait for what it writes.
                if started.elapsed() > REFRESH_WAIT {
                    return Err(Error::Unavailable(
                        "another node is refreshing this MCP server's token".into(),
                    ));
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
                continue;
            }
            sign_in.refreshing_until = Some(now + REFRESH_CLAIM_MS);
            let hub = self.clone();
            let (claim_row, claimed) = (row.clone(), sign_in.clone());
            let Some(claimed) = blocking(move || hub.swap_sign_in(&claim_row, &claimed)).await?
            else {
                continue;
            };
            // What the row now holds: the swap's expected value for the write-back.
            let claimed_row = UpstreamRow {
                secrets: claimed,
                ..row.clone()
            };
            let (http, _) = self.sign_in_client(&row).await?;
            let outcome =
                oauth::refresh(&http, &server, &client, &refresh_token, now_millis()).await;
            sign_in.refreshing_until = None;
            let answer = match outcome {
                Ok(t) => {
                    let access = t.access_token.clone();
                    sign_in.tokens = Some(t);
                    Ok(Some(access))
                }
                // The grant is gone (revoked, replayed, expired): a person signs in again.
                Err(OAuthClientError::Refused { error, description }) => {
                    tracing::warn!(upstream = %row.name, %error, ?description, "refresh refused; sign-in required");
                    sign_in.tokens = None;
                    Ok(None)
                }
                Err(e) => Err(client_error(e)),
            };
            let hub = self.clone();
            let written = blocking(move || hub.swap_sign_in(&claimed_row, &sign_in)).await?;
            if written.is_none() {
                tracing::warn!(upstream = %row.name, "the sign-in changed while its token was refreshed");
            }
            return answer;
        }
    }
}
