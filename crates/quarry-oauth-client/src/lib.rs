//! Quarry as an OAuth 2.1 *client* of the remote MCP servers its hub connects (the MCP
//! authorization specification, client side; issue 45). `quarry-oauth` is the other side:
//! Quarry as an authorization server for its own clients.
//!
//! The steps, each one function over a caller's [`reqwest::Client`] (so the hub's outbound
//! address guard applies to every request made here):
//! 1. [`discover`]: ask the MCP endpoint without credentials, read its `401`'s
//!    `WWW-Authenticate` challenge, fetch the protected-resource metadata (RFC 9728) it names
//!    (or the well-known one), then the authorization server's metadata (RFC 8414, or OpenID
//!    Connect discovery). A server that offers no `S256` PKCE is refused.
//! 2. [`register`]: dynamic client registration (RFC 7591) as a public client.
//! 3. [`Pkce::new`] and [`authorization_url`]: the address a person opens to consent, with the
//!    PKCE challenge, the `state` and the resource indicator (RFC 8707).
//! 4. [`exchange_code`] and [`refresh`]: the token endpoint.
//!
//! Nothing here stores anything; the hub seals what it keeps.

use std::time::Duration;

use quarry_core::error_chain;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use url::Url;

/// Longest metadata or token document read.
const MAX_BODY: usize = 256 * 1024;
/// Longest wait for one request of the flow.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);

/// Why a step of the sign-in failed, in words for the person signing in.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum OAuthClientError {
    /// The MCP endpoint answered without asking for credentials.
    #[error("the MCP server at {0} does not ask for sign-in (it answered {1} without credentials)")]
    NotProtected(String, u16),
    /// Metadata could not be found or read.
    #[error("OAuth discovery failed: {0}")]
    Discovery(String),
    /// The authorization server refused or lacks dynamic registration.
    #[error("client registration failed: {0}")]
    Registration(String),
    /// The token endpoint refused (`error` and its description).
    #[error("the authorization server refused: {error}{}", description.as_deref().map(|d| format!(" ({d})")).unwrap_or_default())]
    Refused {
        /// The OAuth error code (`invalid_grant`, …).
        error: String,
        /// The server's description, if any.
        description: Option<String>,
    },
    /// A request could not be made or its answer not read.
    #[error("{0}")]
    Transport(String),
}

type Result<T> = std::result::Result<T, OAuthClientError>;

/// Checks a URL before anything is sent to it (the hub's outbound address policy): what a
/// `401` or a metadata document names could point anywhere.
pub type UrlGuard<'a> = &'a (dyn Fn(&str) -> std::result::Result<(), String> + Sync);

fn guarded(guard: UrlGuard<'_>, url: &str) -> Result<()> {
    guard(url).map_err(|e| OAuthClientError::Discovery(format!("{url}: {e}")))
}

/// What a `WWW-Authenticate: Bearer …` challenge says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Challenge {
    /// `resource_metadata`: where the protected-resource metadata is.
    pub resource_metadata: Option<String>,
    /// `scope`: the scopes the resource asks for.
    pub scope: Option<String>,
    /// `error` (`invalid_token` for an expired or revoked token).
    pub error: Option<String>,
}

/// Reads a Bearer challenge's parameters (quoted or not); other schemes give an empty one.
pub fn parse_challenge(header: &str) -> Challenge {
    let mut out = Challenge::default();
    let Some(pos) = header.to_ascii_lowercase().find("bearer") else {
        return out;
    };
    let mut rest = &header[pos + "bearer".len()..];
    loop {
        rest = rest.trim_start_matches([' ', ',', '\t']);
        let Some(eq) = rest.find('=') else { break };
        let key = rest[..eq].trim().to_ascii_lowercase();
        rest = &rest[eq + 1..];
        let value;
        if let Some(quoted) = rest.strip_prefix('"') {
            let mut v = String::new();
            let mut chars = quoted.char_indices();
            let mut end = quoted.len();
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, n)) = chars.next() {
                            v.push(n);
                        }
                    }
                    '"' => {
                        end = i + 1;
                        break;
                    }
                    c => v.push(c),
                }
            }
            value = v;
            rest = &quoted[end.min(quoted.len())..];
        } else {
            let end = rest.find(',').unwrap_or(rest.len());
            value = rest[..end].trim().to_owned();
            rest = &rest[end..];
        }
        match key.as_str() {
            "resource_metadata" => out.resource_metadata = Some(value),
            "scope" => out.scope = Some(value),
            "error" => out.error = Some(value),
            _ => {}
        }
    }
    out
}

/// What sign-in needs to know about an MCP server's authorization server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthServer {
    /// The protected resource's identifier (RFC 8707's `resource`).
    pub resource: String,
    /// The authorization server's issuer.
    pub issuer: String,
    /// Where a person consents.
    pub authorization_endpoint: String,
    /// Where codes and refresh tokens are exchanged.
    pub token_endpoint: String,
    /// Dynamic client registration, if offered.
    pub registration_endpoint: Option<String>,
    /// The scopes to ask for (the challenge's, else the resource's), space-separated.
    pub scope: Option<String>,
    /// Whether the token endpoint takes a client secret in the form body.
    pub secret_in_body: bool,
}

/// A registered client.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientCredentials {
    /// `client_id`.
    pub client_id: String,
    /// `client_secret`, for a confidential client.
    pub client_secret: Option<String>,
}

/// Tokens from the token endpoint.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tokens {
    /// The bearer token sent to the MCP server.
    pub access_token: String,
    /// The refresh token, if one was issued (a rotating server issues a new one each time).
    pub refresh_token: Option<String>,
    /// When the access token expires (milliseconds since the epoch), if said.
    pub expires_at: Option<i64>,
    /// The scopes granted.
    pub scope: Option<String>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokens")
            .field("expires_at", &self.expires_at)
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

/// A PKCE pair (RFC 7636, S256).
pub struct Pkce {
    /// Kept by the client until the code is exchanged.
    pub verifier: String,
    /// Sent in the authorization request.
    pub challenge: String,
}

impl Pkce {
    /// A fresh pair: 64 random hexadecimal digits and their S256 challenge.
    pub fn new() -> Result<Pkce> {
        let verifier = quarry_access::random_secret("", 32)
            .map_err(|e| OAuthClientError::Transport(e.to_string()))?;
        let challenge = quarry_oauth::s256_challenge(&verifier);
        Ok(Pkce {
            verifier,
            challenge,
        })
    }
}

async fn read_body(response: reqwest::Response) -> Result<(u16, Vec<u8>)> {
    let status = response.status().as_u16();
    let bytes = response
        .bytes()
        .await
        .map_err(|e| OAuthClientError::Transport(error_chain(&e)))?;
    if bytes.len() > MAX_BODY {
        return Err(OAuthClientError::Transport(format!(
            "an answer of {} bytes is too large",
            bytes.len()
        )));
    }
    Ok((status, bytes.to_vec()))
}

/// GETs a JSON object; `None` for a 404 (the caller tries the next place).
async fn get_json(http: &reqwest::Client, guard: UrlGuard<'_>, url: &str) -> Result<Option<Value>> {
    guarded(guard, url)?;
    let response = http
        .get(url)
        .header("Accept", "application/json")
        .timeout(REQUEST_TIMEOUT)
        .send()
        .await
        .map_err(|e| OAuthClientError::Discovery(format!("{url}: {}", error_chain(&e))))?;
    let (status, body) = read_body(response).await?;
    if status == 404 {
        return Ok(None);
    }
    if !(200..300).contains(&status) {
        return Err(OAuthClientError::Discovery(format!(
            "{url} answered {status}"
        )));
    }
    match serde_json::from_slice::<Value>(&body) {
        Ok(v @ Value::Object(_)) => Ok(Some(v)),
        _ => Err(OAuthClientError::Discovery(format!(
            "{url} did not answer a JSON object"
        ))),
    }
}

/// The first of `places` that has a document.
async fn first_json(
    http: &reqwest::Client,
    guard: UrlGuard<'_>,
    places: &[String],
) -> Result<Option<Value>> {
    for place in places {
        if let Some(doc) = get_json(http, guard, place).await? {
            return Ok(Some(doc));
        }
    }
    Ok(None)
}

/// A metadata document's (or token answer's) non-empty string field `key` (shared with
/// `quarry-oidc`, which reads an OpenID provider's documents the same way).
pub fn metadata_text(doc: &Value, key: &str) -> Option<String> {
    doc.get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// A metadata document's list of strings `key` (other items skipped; absent: empty).
pub fn metadata_list(doc: &Value, key: &str) -> Vec<String> {
    doc.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// `https://host/.well-known/<name><path>` (RFC 8414 §3.1, RFC 9728 §3.1: the well-known
/// segment goes between the host and the path).
fn well_known(base: &Url, name: &str) -> String {
    let path = base.path().trim_end_matches('/');
    format!(
        "{}/.well-known/{name}{path}",
        base.origin().ascii_serialization()
    )
}

/// Finds `mcp_url`'s authorization server from its `401` (the first step of sign-in).
/// Every URL it fetches or returns passes `guard` first.
pub async fn discover(
    http: &reqwest::Client,
    guard: UrlGuard<'_>,
    mcp_url: &str,
) -> Result<AuthServer> {
    guarded(guard, mcp_url)?;
    let url = Url::parse(mcp_url)
        .map_err(|e| OAuthClientError::Discovery(format!("{mcp_url} is not a URL: {e}")))?;
    // An `initialize` without credentials: a protected server answers 401 with a challenge.
    let probe = serde_json::json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "quarry-hub", "version": env!("CARGO_PKG_VERSION")}}
    });
    let response = http
        .post(url.as_str())
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .body(probe.to_string())
        .timeout(REQUEST_TIMEOUT)
        .send()
        .await
        .map_err(|e| OAuthClientError::Discovery(format!("{mcp_url}: {}", error_chain(&e))))?;
    let status = response.status().as_u16();
    let challenge = response
        .headers()
        .get("www-authenticate")
        .and_then(|v| v.to_str().ok())
        .map(parse_challenge)
        .unwrap_or_default();
    if status != 401 {
        return Err(OAuthClientError::NotProtected(mcp_url.to_owned(), status));
    }
    let mut places = Vec::new();
    if let Some(m) = &challenge.resource_metadata {
        places.push(m.clone());
    }
    places.push(well_known(&url, "oauth-protected-resource"));
    places.push(format!(
        "{}/.well-known/oauth-protected-resource",
        url.origin().ascii_serialization()
    ));
    let resource_doc = first_json(http, guard, &places).await?.ok_or_else(|| {
        OAuthClientError::Discovery(format!(
            "no protected-resource metadata at {}",
            places.join(" or ")
        ))
    })?;
    let issuer = metadata_list(&resource_doc, "authorization_servers")
        .into_iter()
        .next()
        .ok_or_else(|| {
            OAuthClientError::Discovery(
                "the protected-resource metadata names no authorization server".into(),
            )
        })?;
    let issuer_url = Url::parse(&issuer).map_err(|e| {
        OAuthClientError::Discovery(format!("authorization server {issuer:?}: {e}"))
    })?;
    let has_path = !issuer_url.path().trim_end_matches('/').is_empty();
    let mut as_places = vec![well_known(&issuer_url, "oauth-authorization-server")];
    as_places.push(well_known(&issuer_url, "openid-configuration"));
    if has_path {
        as_places.push(format!(
            "{}/.well-known/openid-configuration",
            issuer.trim_end_matches('/')
        ));
    }
    let as_doc = first_json(http, guard, &as_places).await?.ok_or_else(|| {
        OAuthClientError::Discovery(format!(
            "no authorization-server metadata for {issuer} (tried {})",
            as_places.join(", ")
        ))
    })?;
    if !metadata_list(&as_doc, "code_challenge_methods_supported")
        .iter()
        .any(|m| m == "S256")
    {
        return Err(OAuthClientError::Discovery(format!(
            "{issuer} does not offer PKCE with S256, which MCP requires"
        )));
    }
    let need = |key: &str| {
        metadata_text(&as_doc, key)
            .ok_or_else(|| OAuthClientError::Discovery(format!("{issuer}'s metadata has no {key}")))
    };
    let scope = challenge.scope.clone().or_else(|| {
        let s = metadata_list(&resource_doc, "scopes_supported");
        (!s.is_empty()).then(|| s.join(" "))
    });
    let auth_methods = metadata_list(&as_doc, "token_endpoint_auth_methods_supported");
    let authorization_endpoint = need("authorization_endpoint")?;
    let token_endpoint = need("token_endpoint")?;
    let registration_endpoint = metadata_text(&as_doc, "registration_endpoint");
    guarded(guard, &token_endpoint)?;
    if let Some(r) = &registration_endpoint {
        guarded(guard, r)?;
    }
    Ok(AuthServer {
        resource: metadata_text(&resource_doc, "resource").unwrap_or_else(|| mcp_url.to_owned()),
        issuer: metadata_text(&as_doc, "issuer").unwrap_or(issuer.clone()),
        authorization_endpoint,
        token_endpoint,
        registration_endpoint,
        scope,
        secret_in_body: auth_methods.iter().any(|m| m == "client_secret_post"),
    })
}

/// Registers Quarry as a public client (PKCE, no secret) that comes back to `redirect_uri`.
pub async fn register(
    http: &reqwest::Client,
    server: &AuthServer,
    redirect_uri: &str,
    client_name: &str,
) -> Result<ClientCredentials> {
    let endpoint = server.registration_endpoint.as_deref().ok_or_else(|| {
        OAuthClientError::Registration(format!(
            "{} offers no dynamic client registration: register a client there and give its client_id",
            server.issuer
        ))
    })?;
    let mut body = serde_json::json!({
        "client_name": client_name,
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    });
    if let Some(scope) = &server.scope {
        body["scope"] = Value::String(scope.clone());
    }
    let response = http
        .post(endpoint)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json")
        .body(body.to_string())
        .timeout(REQUEST_TIMEOUT)
        .send()
        .await
        .map_err(|e| OAuthClientError::Registration(format!("{endpoint}: {}", error_chain(&e))))?;
    let (status, body) = read_body(response).await?;
    let doc: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if !(200..300).contains(&status) {
        let why = metadata_text(&doc, "error_description")
            .or_else(|| metadata_text(&doc, "error"))
            .unwrap_or_else(|| format!("status {status}"));
        return Err(OAuthClientError::Registration(format!(
            "{endpoint} refused: {why}"
        )));
    }
    let client_id = metadata_text(&doc, "client_id").ok_or_else(|| {
        OAuthClientError::Registration(format!("{endpoint} returned no client_id"))
    })?;
    Ok(ClientCredentials {
        client_id,
        client_secret: metadata_text(&doc, "client_secret"),
    })
}

/// The address a person opens to consent.
pub fn authorization_url(
    server: &AuthServer,
    client: &ClientCredentials,
    redirect_uri: &str,
    state: &str,
    pkce_challenge: &str,
) -> Result<String> {
    let mut url = Url::parse(&server.authorization_endpoint).map_err(|e| {
        OAuthClientError::Discovery(format!(
            "authorization_endpoint {:?}: {e}",
            server.authorization_endpoint
        ))
    })?;
    {
        let mut q = url.query_pairs_mut();
        q.append_pair("response_type", "code")
            .append_pair("client_id", &client.client_id)
            .append_pair("redirect_uri", redirect_uri)
            .append_pair("state", state)
            .append_pair("code_challenge", pkce_challenge)
            .append_pair("code_challenge_method", "S256")
            .append_pair("resource", &server.resource);
        if let Some(scope) = &server.scope {
            q.append_pair("scope", scope);
        }
    }
    Ok(url.into())
}

/// Exchanges an authorization code (with its PKCE verifier) for tokens.
pub async fn exchange_code(
    http: &reqwest::Client,
    server: &AuthServer,
    client: &ClientCredentials,
    code: &str,
    verifier: &str,
    redirect_uri: &str,
    now_ms: i64,
) -> Result<Tokens> {
    token_request(
        http,
        server,
        client,
        &[
            ("grant_type", "authorization_code"),
            ("code", code),
            ("code_verifier", verifier),
            ("redirect_uri", redirect_uri),
        ],
        now_ms,
    )
    .await
}

/// Trades a refresh token for fresh tokens. A server that rotates refresh tokens returns a
/// new one, and the old one must never be sent again.
pub async fn refresh(
    http: &reqwest::Client,
    server: &AuthServer,
    client: &ClientCredentials,
    refresh_token: &str,
    now_ms: i64,
) -> Result<Tokens> {
    let mut tokens = token_request(
        http,
        server,
        client,
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh_token),
        ],
        now_ms,
    )
    .await?;
    // A server that does not rotate keeps the one it had.
    if tokens.refresh_token.is_none() {
        tokens.refresh_token = Some(refresh_token.to_owned());
    }
    Ok(tokens)
}

async fn token_request(
    http: &reqwest::Client,
    server: &AuthServer,
    client: &ClientCredentials,
    fields: &[(&str, &str)],
    now_ms: i64,
) -> Result<Tokens> {
    // Built before the request: the serializer is not `Send`, so it must not live across
    // an await.
    let body = {
        let mut form = url::form_urlencoded::Serializer::new(String::new());
        for (k, v) in fields {
            form.append_pair(k, v);
        }
        form.append_pair("client_id", &client.client_id)
            .append_pair("resource", &server.resource);
        if let Some(secret) = &client.client_secret {
            if !server.secret_in_body {
                return Err(OAuthClientError::Registration(format!(
                    "{}'s token endpoint does not take client_secret_post; use a public client",
                    server.issuer
                )));
            }
            form.append_pair("client_secret", secret);
        }
        form.finish()
    };
    let response = http
        .post(&server.token_endpoint)
        .header("Content-Type", "application/x-www-form-urlencoded")
        .header("Accept", "application/json")
        .body(body)
        .timeout(REQUEST_TIMEOUT)
        .send()
        .await
        .map_err(|e| {
            OAuthClientError::Transport(format!("{}: {}", server.token_endpoint, error_chain(&e)))
        })?;
    let (status, body) = read_body(response).await?;
    let doc: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if !(200..300).contains(&status) {
        return Err(OAuthClientError::Refused {
            error: metadata_text(&doc, "error").unwrap_or_else(|| format!("status {status}")),
            description: metadata_text(&doc, "error_description"),
        });
    }
    let access_token = metadata_text(&doc, "access_token").ok_or_else(|| {
        OAuthClientError::Transport(format!(
            "{} returned no access_token",
            server.token_endpoint
        ))
    })?;
    if let Some(kind) = metadata_text(&doc, "token_type")
        && !kind.eq_ignore_ascii_case("bearer")
    {
        return Err(OAuthClientError::Transport(format!(
            "{} returned a {kind} token, not a bearer token",
            server.token_endpoint
        )));
    }
    Ok(Tokens {
        access_token,
        refresh_token: metadata_text(&doc, "refresh_token"),
        expires_at: doc
            .get("expires_in")
            .and_then(Value::as_i64)
            .filter(|s| *s > 0)
            .map(|s| now_ms.saturating_add(s.saturating_mul(1000))),
        scope: metadata_text(&doc, "scope"),
    })
}

#[cfg(test)]
mod tests;
