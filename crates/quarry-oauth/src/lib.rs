//! Quarry as its own OAuth 2.1 authorization server, so MCP connectors in browser and
//! desktop assistants can sign in without a pasted token (the MCP authorization
//! specification; issue 27).
//!
//! - **Metadata**: [`Endpoints`] renders authorization-server metadata (RFC 8414) and
//!   protected-resource metadata (RFC 9728) for one public origin.
//! - **Registration** (RFC 7591): [`OAuthServer::register`]; public clients (PKCE only) and
//!   confidential ones (`client_secret_basic` / `client_secret_post`).
//! - **Authorization code + PKCE (S256 only)**: [`OAuthServer::check_authorize`] validates a
//!   request before a person sees it; the web UI's consent page then calls
//!   [`OAuthServer::approve`] with what the signed-in person picked.
//! - **Tokens**: [`OAuthServer::token`] exchanges a code or rotates a refresh token;
//!   [`OAuthServer::revoke`] (RFC 7009) ends the grant.
//!
//! A consent becomes a *grant*: an access token (its secret discarded) created by the token
//! the person signed in with, limited to the spaces, knowledge bases, tools and write access
//! they picked. Every access token the client gets is a short-lived child of that grant, so
//! it maps to the same principals and scopes as any access token, reaches no further than
//! the person who consented, and stops on the next request once the grant (or the token
//! above it) is revoked. Refresh tokens rotate on every use; presenting a used one again is
//! a replay and revokes the grant. Codes and refresh tokens are stored only as SHA-256.

use std::collections::HashMap;
use std::sync::Arc;

use quarry_access::{Directory, Principal, TokenRequest};
use quarry_core::Error;
use quarry_store::{
    OAuthClientRow, OAuthGrantRow, OAuthSecretKind, OAuthSecretRow, OAuthStore, Redeemed,
};
use serde_json::{Value, json};
use url::Url;

#[cfg(test)]
mod tests;

/// How long an access token lives.
pub const ACCESS_TOKEN_SECS: i64 = 3_600;
/// How long a refresh token may wait to be used (each use issues a new one).
pub const REFRESH_TOKEN_DAYS: i64 = 30;
/// How long an authorization code may wait to be exchanged.
pub const CODE_SECS: i64 = 600;
/// The scopes a client may ask for: `read` (search and read, read-only tools) and `write`
/// (also create and change knowledge, every granted tool).
pub const SCOPES: [&str; 2] = ["read", "write"];
/// Prefix of refresh tokens (secret scanners find leaked ones).
pub const REFRESH_PREFIX: &str = "qr_";
/// Prefix of authorization codes.
const CODE_PREFIX: &str = "qc_";
/// Prefix of client secrets.
const CLIENT_SECRET_PREFIX: &str = "qs_";
/// Most redirect URIs one client registers.
const MAX_REDIRECT_URIS: usize = 10;
/// Longest redirect URI, client name or other string accepted.
const MAX_STRING: usize = 2_000;
const DAY_MS: i64 = 86_400_000;

/// An OAuth error response (RFC 6749 §5.2, RFC 7591 §3.2.2): the `error` code, a
/// description for people, and the HTTP status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthError {
    /// `invalid_request`, `invalid_client`, `invalid_grant` …
    pub error: &'static str,
    /// What was wrong, in words.
    pub description: String,
    /// HTTP status to answer with.
    pub status: u16,
}

impl OAuthError {
    fn new(error: &'static str, description: impl Into<String>) -> OAuthError {
        let status = match error {
            "invalid_client" => 401,
            "server_error" => 500,
            _ => 400,
        };
        OAuthError {
            error,
            description: description.into(),
            status,
        }
    }

    /// `{"error", "error_description"}`.
    pub fn body(&self) -> Value {
        json!({"error": self.error, "error_description": self.description})
    }
}

impl From<Error> for OAuthError {
    fn from(e: Error) -> OAuthError {
        match e {
            Error::Forbidden(m) | Error::NotFound(m) => OAuthError::new("invalid_grant", m),
            Error::InvalidInput(m) => OAuthError::new("invalid_request", m),
            // RFC 6749 §4.1.2.1's code for a server that cannot answer now, without the
            // database's address (the server logs it).
            Error::StorageUnavailable(detail) => {
                tracing::error!(%detail, "storage unavailable");
                OAuthError {
                    error: "temporarily_unavailable",
                    description: quarry_core::STORAGE_UNAVAILABLE.to_owned(),
                    status: 503,
                }
            }
            other => OAuthError::new("server_error", other.to_string()),
        }
    }
}

type OAuthResult<T> = std::result::Result<T, OAuthError>;

/// Why a refresh with the token `row` is refused, if it is: another client's token, or a
/// scope wider than the grant's (the resource is [`resource_refusal`]'s).
fn refresh_refusal(row: &OAuthSecretRow, client: &OAuthClientRow, form: &Form) -> OAuthResult<()> {
    if row.client_id != client.id {
        return Err(OAuthError::new(
            "invalid_grant",
            "the refresh token was issued to another client",
        ));
    }
    if let Some(scope) = form.get("scope")
        && parse_scope(Some(scope))?
        && row.scope == "read"
    {
        return Err(OAuthError::new(
            "invalid_scope",
            "the grant is read-only: 'write' cannot be added by refreshing",
        ));
    }
    Ok(())
}

/// `invalid_target` when the request names a resource that is neither its grant's nor on
/// this server.
fn resource_refusal(row: &OAuthSecretRow, form: &Form, endpoints: &Endpoints) -> OAuthResult<()> {
    if let Some(r) = form.get("resource")
        && *r != row.resource
        && !endpoints.owns(r)
    {
        return Err(OAuthError::new(
            "invalid_target",
            format!("resource {r:?} is not on this server"),
        ));
    }
    Ok(())
}

/// The server's public origin and the URLs derived from it.
#[derive(Debug, Clone)]
pub struct Endpoints {
    origin: String,
}

impl Endpoints {
    /// Endpoints at `origin` (`https://kb.example.com`, no path).
    pub fn new(origin: &str) -> Endpoints {
        Endpoints {
            origin: origin.trim_end_matches('/').to_owned(),
        }
    }

    /// From a configured public URL (`https://kb.example.com`): `http` or `https`, a host
    /// and optional port, and no path, query or fragment — OAuth identifies the server by
    /// its origin.
    pub fn from_public_url(url: &str) -> quarry_core::Result<Endpoints> {
        let bad = |why: &str| Error::invalid(format!("public URL {url:?}: {why}"));
        let u = Url::parse(url.trim()).map_err(|e| bad(&e.to_string()))?;
        if !matches!(u.scheme(), "http" | "https") {
            return Err(bad("use http:// or https://"));
        }
        if u.host().is_none() || u.cannot_be_a_base() {
            return Err(bad("name a host"));
        }
        if u.path() != "/" || u.query().is_some() || u.fragment().is_some() {
            return Err(bad(
                "give the origin only (scheme, host, port): Quarry serves from the root",
            ));
        }
        if !u.username().is_empty() || u.password().is_some() {
            return Err(bad("must not carry a user name or password"));
        }
        Ok(Endpoints::new(u.origin().ascii_serialization().as_str()))
    }

    /// The public origin, without a trailing slash.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The issuer identifier: the origin with its root path (`https://kb.example.com/`),
    /// written as URL libraries write it, so clients comparing strings agree (RFC 8414 §3.3,
    /// RFC 9207).
    pub fn issuer(&self) -> String {
        format!("{}/", self.origin)
    }

    /// RFC 8414 authorization server metadata.
    pub fn authorization_server_metadata(&self) -> Value {
        let o = &self.origin;
        json!({
            "issuer": self.issuer(),
            "authorization_endpoint": format!("{o}/oauth/authorize"),
            "token_endpoint": format!("{o}/oauth/token"),
            "registration_endpoint": format!("{o}/oauth/register"),
            "revocation_endpoint": format!("{o}/oauth/revoke"),
            "scopes_supported": SCOPES,
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "token_endpoint_auth_methods_supported": ["none", "client_secret_basic", "client_secret_post"],
            "revocation_endpoint_auth_methods_supported": ["none", "client_secret_basic", "client_secret_post"],
            "code_challenge_methods_supported": ["S256"],
            "authorization_response_iss_parameter_supported": true,
            "service_documentation": format!("{o}/#/access"),
        })
    }

    /// RFC 9728 protected resource metadata for the resource at `path` (`/mcp`; `/` for
    /// the server as a whole).
    pub fn protected_resource_metadata(&self, path: &str) -> Value {
        json!({
            "resource": self.resource(path),
            "authorization_servers": [self.issuer()],
            "scopes_supported": SCOPES,
            "bearer_methods_supported": ["header"],
            "resource_name": "Quarry",
        })
    }

    /// The resource identifier of `path` on this server.
    pub fn resource(&self, path: &str) -> String {
        let path = path.trim_end_matches('/');
        if path.is_empty() {
            self.issuer()
        } else {
            format!("{}{path}", self.origin)
        }
    }

    /// Where the protected resource metadata of `path` is (the `resource_metadata` of a
    /// `WWW-Authenticate` challenge).
    pub fn resource_metadata_url(&self, path: &str) -> String {
        let path = path.trim_end_matches('/');
        format!("{}/.well-known/oauth-protected-resource{path}", self.origin)
    }

    /// Whether `resource` (RFC 8707) names something on this server: same scheme, host and
    /// port, no fragment.
    fn owns(&self, resource: &str) -> bool {
        let (Ok(r), Ok(o)) = (Url::parse(resource), Url::parse(&self.origin)) else {
            return false;
        };
        r.fragment().is_none() && r.origin() == o.origin()
    }
}

/// What an authorization request asks for, as its query parameters carried it.
#[derive(Debug, Clone, Default)]
pub struct AuthorizeParams {
    /// `response_type` (must be `code`).
    pub response_type: Option<String>,
    /// `client_id`.
    pub client_id: Option<String>,
    /// `redirect_uri` (optional when the client registered exactly one).
    pub redirect_uri: Option<String>,
    /// `code_challenge` (PKCE).
    pub code_challenge: Option<String>,
    /// `code_challenge_method` (must be `S256`).
    pub code_challenge_method: Option<String>,
    /// `state`, returned as it came.
    pub state: Option<String>,
    /// `scope`: `read`, `write` or both; absent: both.
    pub scope: Option<String>,
    /// `resource` (RFC 8707): a URL on this server; absent: the server as a whole.
    pub resource: Option<String>,
}

impl AuthorizeParams {
    /// From query pairs (unknown parameters are ignored, as RFC 6749 §3.1 says).
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> AuthorizeParams {
        let mut p = AuthorizeParams::default();
        for (k, v) in pairs {
            let v = Some(v.to_owned());
            match k {
                "response_type" => p.response_type = v,
                "client_id" => p.client_id = v,
                "redirect_uri" => p.redirect_uri = v,
                "code_challenge" => p.code_challenge = v,
                "code_challenge_method" => p.code_challenge_method = v,
                "state" => p.state = v,
                "scope" => p.scope = v,
                "resource" => p.resource = v,
                _ => {}
            }
        }
        p
    }
}

/// An authorization request that passed every check: what the consent page shows and
/// what [`OAuthServer::approve`] needs.
#[derive(Debug, Clone)]
pub struct CheckedAuthorize {
    /// The client.
    pub client: OAuthClientRow,
    /// Where the answer goes.
    pub redirect_uri: String,
    /// The PKCE challenge.
    pub code_challenge: String,
    /// The client's `state`.
    pub state: Option<String>,
    /// Whether the client asked for `write`.
    pub wants_write: bool,
    /// The resource the tokens are for.
    pub resource: String,
}

/// Why an authorization request was refused.
#[derive(Debug, Clone)]
pub enum AuthorizeRefusal {
    /// The client or redirect URI cannot be trusted: tell the person, never redirect.
    Show(OAuthError),
    /// Tell the client at its redirect URI (this URL carries `error`, `state`, `iss`).
    Redirect(String),
}

/// What the signed-in person granted on the consent page.
#[derive(Debug, Clone, Default)]
pub struct Consent {
    /// Space names or UUIDs (at least one).
    pub spaces: Vec<String>,
    /// Knowledge bases (names or UUIDs) in those spaces; `None`: all.
    pub knowledge_bases: Option<Vec<String>>,
    /// Hub packages and tools; `None`: every tool the signing-in token reaches.
    pub tools: Option<Vec<String>>,
    /// Read only, even if the client asked for `write`.
    pub read_only: bool,
}

/// The authorization server over the store.
#[derive(Clone)]
pub struct OAuthServer {
    store: Arc<dyn OAuthStore>,
    directory: Directory,
}

/// A new random secret: `prefix` + 64 hex digits.
fn new_secret(prefix: &str) -> OAuthResult<String> {
    Ok(quarry_access::random_secret(prefix, 32)?)
}

/// The client id and secret of an `Authorization: Basic …` header value (RFC 6749 §2.3.1:
/// each form-urlencoded, then joined by `:` and base64-encoded); `None` for any other
/// scheme or a malformed value.
pub fn basic_credentials(header: &str) -> Option<(String, String)> {
    let (scheme, rest) = header.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let raw = String::from_utf8(quarry_core::base64_decode(rest.trim())?).ok()?;
    let (id, secret) = raw.split_once(':')?;
    let decode = |s: &str| -> String {
        url::form_urlencoded::parse(format!("x={s}").as_bytes())
            .next()
            .map(|(_, v)| v.into_owned())
            .unwrap_or_default()
    };
    Some((decode(id), decode(secret)))
}

/// The S256 challenge of a PKCE verifier.
pub fn s256_challenge(verifier: &str) -> String {
    use sha2::{Digest, Sha256};
    quarry_core::base64url_encode(&Sha256::digest(verifier.as_bytes()))
}

/// RFC 7636 §4.1: 43–128 characters of `[A-Za-z0-9-._~]`.
fn valid_verifier(v: &str) -> bool {
    (43..=128).contains(&v.len())
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'))
}

/// Schemes no redirect may use: they run code or read local files in the browser.
const FORBIDDEN_SCHEMES: [&str; 7] = [
    "javascript",
    "data",
    "file",
    "vbscript",
    "about",
    "blob",
    "filesystem",
];

/// Why `uri` may not be a redirect URI (RFC 8252 and OAuth 2.1 §2.3.1): absolute, no
/// fragment; `https`, `http` only to a loopback host, or an app's private-use scheme.
fn redirect_uri_problem(uri: &str) -> Option<String> {
    let Ok(u) = Url::parse(uri) else {
        return Some(format!("redirect URI {uri:?} is not an absolute URL"));
    };
    if u.fragment().is_some() {
        return Some(format!("redirect URI {uri:?} must not have a fragment"));
    }
    // `https://claude.ai@evil.example/` reads as claude.ai to a person and goes elsewhere.
    if !u.username().is_empty() || u.password().is_some() {
        return Some(format!(
            "redirect URI {uri:?} must not carry a user name or password before its host"
        ));
    }
    match u.scheme() {
        "https" => None,
        "http" if is_loopback(&u) => None,
        "http" => Some(format!(
            "redirect URI {uri:?} uses http to a host other than this machine's loopback: use https"
        )),
        s if FORBIDDEN_SCHEMES.contains(&s) || s == "ws" || s == "wss" || s == "ftp" => Some(
            format!("redirect URI {uri:?} uses the scheme {s:?}, which cannot receive a code"),
        ),
        _ => None,
    }
}

/// The part of a redirect URI a person recognises, as a browser would follow it: the
/// parsed URL's host and port (`claude.ai`, `127.0.0.1:6274`), or an app's scheme when it
/// has no host. Parsed, not split by hand: in `https://evil.example\@claude.ai/cb` the
/// backslash ends the host, so that URI returns to `evil.example`.
pub fn redirect_host(uri: &str) -> String {
    let Ok(u) = Url::parse(uri) else {
        return uri.to_owned();
    };
    match (u.host_str(), u.port()) {
        (Some(host), Some(port)) if !host.is_empty() => format!("{host}:{port}"),
        (Some(host), None) if !host.is_empty() => host.to_owned(),
        _ => u.scheme().to_owned(),
    }
}

fn is_loopback(u: &Url) -> bool {
    matches!(
        u.host(),
        Some(url::Host::Domain("localhost"))
            | Some(url::Host::Ipv4(std::net::Ipv4Addr::LOCALHOST))
            | Some(url::Host::Ipv6(std::net::Ipv6Addr::LOCALHOST))
    )
}

/// Whether `given` matches the registered `registered`: exactly, or (RFC 8252 §7.3) a
/// loopback `http` URI differing only in its port, which native apps choose at run time.
fn redirect_matches(registered: &str, given: &str) -> bool {
    if registered == given {
        return true;
    }
    let (Ok(mut r), Ok(mut g)) = (Url::parse(registered), Url::parse(given)) else {
        return false;
    };
    if r.scheme() != "http" || !is_loopback(&r) || g.scheme() != "http" || !is_loopback(&g) {
        return false;
    }
    let _ = r.set_port(None);
    let _ = g.set_port(None);
    r == g
}

/// `uri` with `pairs` added to its query.
fn with_query(uri: &str, pairs: &[(&str, &str)]) -> String {
    match Url::parse(uri) {
        Ok(mut u) => {
            {
                let mut q = u.query_pairs_mut();
                for (k, v) in pairs {
                    q.append_pair(k, v);
                }
            }
            u.to_string()
        }
        Err(_) => uri.to_owned(),
    }
}

/// The scope words of `scope`, checked.
fn parse_scope(scope: Option<&str>) -> OAuthResult<bool> {
    let Some(scope) = scope.map(str::trim).filter(|s| !s.is_empty()) else {
        return Ok(true);
    };
    let mut write = false;
    for word in scope.split_ascii_whitespace() {
        match word {
            "read" => {}
            "write" => write = true,
            other => {
                return Err(OAuthError::new(
                    "invalid_scope",
                    format!("unknown scope {other:?}: this server grants 'read' and 'write'"),
                ));
            }
        }
    }
    Ok(write)
}

/// A token label naming the client: `prefix` and the client's name, cut to fit a label (a
/// client may register a name as long as a label).
fn label(prefix: &str, client_name: &str) -> String {
    let room = quarry_access::MAX_LABEL_CHARS.saturating_sub(prefix.chars().count());
    let name: String = client_name.chars().take(room).collect();
    format!("{prefix}{name}")
}

fn scope_words(read_only: bool) -> &'static str {
    if read_only { "read" } else { "read write" }
}

/// A form's parameters: each at most once (RFC 6749 §3.1: parameters must not repeat).
pub type Form = HashMap<String, String>;

/// Parses an `application/x-www-form-urlencoded` body; a repeated parameter is refused.
pub fn parse_form(body: &[u8]) -> OAuthResult<Form> {
    let mut form = Form::new();
    for (k, v) in url::form_urlencoded::parse(body) {
        if form.insert(k.to_string(), v.to_string()).is_some() {
            return Err(OAuthError::new(
                "invalid_request",
                format!("parameter '{k}' is repeated"),
            ));
        }
    }
    Ok(form)
}

fn required<'a>(form: &'a Form, name: &str) -> OAuthResult<&'a str> {
    form.get(name)
        .map(String::as_str)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| OAuthError::new("invalid_request", format!("missing parameter '{name}'")))
}

impl OAuthServer {
    /// The authorization server over `store`, issuing and revoking tokens in `directory`.
    pub fn new(store: Arc<dyn OAuthStore>, directory: Directory) -> OAuthServer {
        OAuthServer { store, directory }
    }

    /// RFC 7591 dynamic client registration: checks the metadata and returns the client's
    /// information (with `client_secret` for a confidential client, shown once).
    pub fn register(&self, meta: &Value) -> OAuthResult<Value> {
        let bad = |m: String| OAuthError::new("invalid_client_metadata", m);
        let Some(obj) = meta.as_object() else {
            return Err(bad("the registration must be a JSON object".into()));
        };
        let uris: Vec<String> = match obj.get("redirect_uris") {
            Some(Value::Array(a)) if !a.is_empty() => a
                .iter()
                .map(|v| v.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| bad("redirect_uris must be a list of strings".into()))?,
            _ => {
                return Err(OAuthError::new(
                    "invalid_redirect_uri",
                    "redirect_uris is required: at least one URI the code can be sent to",
                ));
            }
        };
        if uris.len() > MAX_REDIRECT_URIS {
            return Err(OAuthError::new(
                "invalid_redirect_uri",
                format!("at most {MAX_REDIRECT_URIS} redirect URIs"),
            ));
        }
        for uri in &uris {
            if uri.len() > MAX_STRING {
                return Err(OAuthError::new(
                    "invalid_redirect_uri",
                    "redirect URI too long",
                ));
            }
            if let Some(problem) = redirect_uri_problem(uri) {
                return Err(OAuthError::new("invalid_redirect_uri", problem));
            }
        }
        let method = match obj.get("token_endpoint_auth_method") {
            None | Some(Value::Null) => "client_secret_basic",
            Some(Value::String(m)) => match m.as_str() {
                "none" => "none",
                "client_secret_basic" => "client_secret_basic",
                "client_secret_post" => "client_secret_post",
                other => {
                    return Err(bad(format!(
                        "token_endpoint_auth_method {other:?} is not supported: use none, client_secret_basic or client_secret_post"
                    )));
                }
            },
            Some(_) => return Err(bad("token_endpoint_auth_method must be a string".into())),
        };
        let strings = |key: &str, default: &[&str]| -> OAuthResult<Vec<String>> {
            match obj.get(key) {
                None | Some(Value::Null) => Ok(default.iter().map(|s| (*s).to_owned()).collect()),
                Some(Value::Array(a)) => a
                    .iter()
                    .map(|v| v.as_str().map(str::to_owned))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| bad(format!("{key} must be a list of strings"))),
                Some(_) => Err(bad(format!("{key} must be a list of strings"))),
            }
        };
        let grant_types = strings("grant_types", &["authorization_code"])?;
        if let Some(g) = grant_types
            .iter()
            .find(|g| !matches!(g.as_str(), "authorization_code" | "refresh_token"))
        {
            return Err(bad(format!(
                "grant type {g:?} is not supported: authorization_code and refresh_token are"
            )));
        }
        let response_types = strings("response_types", &["code"])?;
        if response_types.iter().any(|r| r != "code") {
            return Err(bad("only the response type 'code' is supported".into()));
        }
        let name = match obj.get("client_name") {
            None | Some(Value::Null) => "an unnamed application".to_owned(),
            Some(Value::String(n))
                if n.chars().count() <= 200 && !n.chars().any(char::is_control) =>
            {
                n.trim().to_owned()
            }
            Some(_) => {
                return Err(bad(
                    "client_name must be text of at most 200 characters".into()
                ));
            }
        };
        if let Some(scope) = obj.get("scope") {
            parse_scope(scope.as_str()).map_err(|e| bad(e.description))?;
        }
        let id = quarry_access::random_secret("", 16)?;
        let secret = match method {
            "none" => None,
            _ => Some(new_secret(CLIENT_SECRET_PREFIX)?),
        };
        let now = quarry_core::now_millis();
        let mut info = json!({
            "client_id": id,
            "client_id_issued_at": now / 1000,
            "client_name": name,
            "redirect_uris": uris,
            "grant_types": grant_types,
            "response_types": response_types,
            "token_endpoint_auth_method": method,
        });
        for key in [
            "client_uri",
            "logo_uri",
            "scope",
            "software_id",
            "software_version",
        ] {
            if let Some(Value::String(v)) = obj.get(key)
                && v.len() <= MAX_STRING
            {
                info[key] = Value::String(v.clone());
            }
        }
        let row = OAuthClientRow {
            id: id.clone(),
            secret_hash: secret
                .as_deref()
                .map(|s| quarry_core::sha256_hex(s.as_bytes())),
            name,
            redirect_uris: uris,
            metadata: info.to_string(),
            created_at: now,
        };
        self.store.insert_oauth_client(&row)?;
        if let Some(secret) = secret {
            info["client_secret"] = Value::String(secret);
            info["client_secret_expires_at"] = json!(0);
        }
        Ok(info)
    }

    /// The client `id`, if registered.
    pub fn client(&self, id: &str) -> OAuthResult<Option<OAuthClientRow>> {
        Ok(self.store.oauth_client(id)?)
    }

    /// Checks an authorization request (OAuth 2.1 §4.1.1) before the person sees it. A
    /// request naming an unknown client or an unregistered redirect URI is shown to the
    /// person and never redirected (it could be a phishing relay); anything else wrong is
    /// reported to the client at its redirect URI.
    pub fn check_authorize(
        &self,
        endpoints: &Endpoints,
        p: &AuthorizeParams,
    ) -> std::result::Result<CheckedAuthorize, AuthorizeRefusal> {
        let show = |e: &'static str, m: String| AuthorizeRefusal::Show(OAuthError::new(e, m));
        let Some(client_id) = p.client_id.as_deref().filter(|c| !c.is_empty()) else {
            return Err(show(
                "invalid_request",
                "missing parameter 'client_id'".into(),
            ));
        };
        let client = match self.store.oauth_client(client_id) {
            Ok(Some(c)) => c,
            Ok(None) => {
                return Err(show(
                    "invalid_client",
                    format!("no application is registered with client_id {client_id:?}"),
                ));
            }
            Err(e) => return Err(AuthorizeRefusal::Show(e.into())),
        };
        let redirect_uri = match p.redirect_uri.as_deref() {
            Some(given) => match client
                .redirect_uris
                .iter()
                .find(|r| redirect_matches(r, given))
            {
                Some(_) => given.to_owned(),
                None => {
                    return Err(show(
                        "invalid_request",
                        format!(
                            "redirect_uri {given:?} is not one {} registered",
                            client.name
                        ),
                    ));
                }
            },
            None if client.redirect_uris.len() == 1 => client.redirect_uris[0].clone(),
            None => {
                return Err(show(
                    "invalid_request",
                    "missing parameter 'redirect_uri' (the application registered several)".into(),
                ));
            }
        };
        let refuse = |error: &'static str, description: &str| {
            let mut pairs = vec![("error", error), ("error_description", description)];
            if let Some(s) = &p.state {
                pairs.push(("state", s));
            }
            let issuer = endpoints.issuer();
            pairs.push(("iss", &issuer));
            AuthorizeRefusal::Redirect(with_query(&redirect_uri, &pairs))
        };
        if p.response_type.as_deref() != Some("code") {
            return Err(refuse(
                "unsupported_response_type",
                "response_type must be 'code'",
            ));
        }
        let Some(challenge) = p.code_challenge.as_deref().filter(|c| !c.is_empty()) else {
            return Err(refuse(
                "invalid_request",
                "PKCE is required: send code_challenge with code_challenge_method=S256",
            ));
        };
        if p.code_challenge_method.as_deref() != Some("S256") {
            return Err(refuse(
                "invalid_request",
                "code_challenge_method must be S256 (plain is not accepted)",
            ));
        }
        if challenge.len() != 43
            || !challenge
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(refuse(
                "invalid_request",
                "code_challenge must be the 43-character base64url SHA-256 of the verifier",
            ));
        }
        let wants_write = match parse_scope(p.scope.as_deref()) {
            Ok(w) => w,
            Err(e) => return Err(refuse(e.error, &e.description)),
        };
        let resource = match p.resource.as_deref() {
            None => endpoints.issuer(),
            Some(r) if endpoints.owns(r) => r.to_owned(),
            Some(r) => {
                return Err(refuse(
                    "invalid_target",
                    &format!("resource {r:?} is not on this server"),
                ));
            }
        };
        if p.state.as_ref().is_some_and(|s| s.len() > MAX_STRING) {
            return Err(refuse("invalid_request", "state is too long"));
        }
        Ok(CheckedAuthorize {
            client,
            redirect_uri,
            code_challenge: challenge.to_owned(),
            state: p.state.clone(),
            wants_write,
            resource,
        })
    }

    /// The person said no: where to send the browser.
    pub fn deny(&self, endpoints: &Endpoints, req: &CheckedAuthorize) -> String {
        let issuer = endpoints.issuer();
        let mut pairs = vec![
            ("error", "access_denied"),
            ("error_description", "the person declined"),
        ];
        if let Some(s) = &req.state {
            pairs.push(("state", s));
        }
        pairs.push(("iss", &issuer));
        with_query(&req.redirect_uri, &pairs)
    }

    /// The signed-in `principal` consented: records the grant (a token under the one they
    /// signed in with, limited to what they picked) and returns where to send the browser
    /// (the redirect URI with `code`, `state` and `iss`). Tool names are the caller's to
    /// check against the catalog first.
    pub fn approve(
        &self,
        endpoints: &Endpoints,
        req: &CheckedAuthorize,
        principal: &Principal,
        consent: &Consent,
    ) -> quarry_core::Result<String> {
        let Some(who) = &principal.identity else {
            return Err(Error::invalid(
                "sign in with a user's access token to connect an application (the machine's owner has no account to lend)",
            ));
        };
        if who.token_id.is_none() {
            return Err(Error::invalid(
                "sign in with an access token to connect an application",
            ));
        }
        if consent.spaces.is_empty() {
            return Err(Error::invalid(
                "pick at least one space the application may use",
            ));
        }
        let read_only = consent.read_only || !req.wants_write;
        let grant = self.directory.create_token(&TokenRequest {
            user: who.user_id.clone(),
            label: label("OAuth: ", &req.client.name),
            spaces: consent.spaces.clone(),
            collections: consent.knowledge_bases.clone(),
            read_only,
            tools: consent.tools.clone(),
            expires_at: None,
            endpoint: None,
            // Under the token the person signed in with, so it reaches no further (a web
            // session's grant outlives the session: `parent_for_new_tokens`).
            parent: who.parent_for_new_tokens(),
            // A connector's token never manages what binds the agent using it.
            manage: false,
        })?;
        let now = quarry_core::now_millis();
        self.store.insert_oauth_grant(&OAuthGrantRow {
            grant_id: grant.record.id.clone(),
            client_id: req.client.id.clone(),
            created_at: now,
        })?;
        let code = new_secret(CODE_PREFIX).map_err(|e| Error::Storage(e.description))?;
        self.store.insert_oauth_secret(&OAuthSecretRow {
            hash: quarry_core::sha256_hex(code.as_bytes()),
            kind: OAuthSecretKind::Code,
            client_id: req.client.id.clone(),
            grant_id: grant.record.id,
            redirect_uri: req.redirect_uri.clone(),
            code_challenge: req.code_challenge.clone(),
            resource: req.resource.clone(),
            scope: scope_words(grant.record.read_only).to_owned(),
            expires_at: now + CODE_SECS * 1000,
            used_at: None,
        })?;
        let issuer = endpoints.issuer();
        let mut pairs = vec![("code", code.as_str())];
        if let Some(s) = &req.state {
            pairs.push(("state", s));
        }
        pairs.push(("iss", &issuer));
        Ok(with_query(&req.redirect_uri, &pairs))
    }

    /// Authenticates the client of a token or revocation request: `client_secret_basic`
    /// (`basic` = the decoded `Authorization: Basic` pair), `client_secret_post`, or a
    /// public client naming itself.
    fn authenticate_client(
        &self,
        form: &Form,
        basic: Option<(String, String)>,
    ) -> OAuthResult<OAuthClientRow> {
        let (id, secret) = match basic {
            Some((id, secret)) => {
                if form.get("client_id").is_some_and(|c| *c != id) {
                    return Err(OAuthError::new(
                        "invalid_request",
                        "client_id differs from the Authorization header's",
                    ));
                }
                (id, Some(secret))
            }
            None => (
                required(form, "client_id")?.to_owned(),
                form.get("client_secret").cloned(),
            ),
        };
        let client = self
            .store
            .oauth_client(&id)?
            .ok_or_else(|| OAuthError::new("invalid_client", "unknown client"))?;
        if let Some(hash) = &client.secret_hash {
            let Some(secret) = secret else {
                return Err(OAuthError::new(
                    "invalid_client",
                    "this client authenticates with its client_secret",
                ));
            };
            if !quarry_core::constant_time_eq(
                quarry_core::sha256_hex(secret.as_bytes()).as_bytes(),
                hash.as_bytes(),
            ) {
                return Err(OAuthError::new("invalid_client", "wrong client secret"));
            }
        }
        Ok(client)
    }

    /// The token endpoint (OAuth 2.1 §3.2): `authorization_code` (with the PKCE verifier) or
    /// `refresh_token` (rotated). Returns the token response.
    pub fn token(
        &self,
        endpoints: &Endpoints,
        form: &Form,
        basic: Option<(String, String)>,
    ) -> OAuthResult<Value> {
        let grant_type = required(form, "grant_type")?;
        if !matches!(grant_type, "authorization_code" | "refresh_token") {
            return Err(OAuthError::new(
                "unsupported_grant_type",
                format!(
                    "grant_type {grant_type:?} is not supported: authorization_code and refresh_token are"
                ),
            ));
        }
        let client = self.authenticate_client(form, basic)?;
        let now = quarry_core::now_millis();
        // Expired codes, refresh tokens and access tokens go now and then (cheap: indexed).
        let _ = self.store.prune_oauth(now);
        let row = if grant_type == "authorization_code" {
            let code = required(form, "code")?;
            let verifier = required(form, "code_verifier")?;
            let row = self.redeem(code, OAuthSecretKind::Code, now)?;
            if row.client_id != client.id {
                return Err(OAuthError::new(
                    "invalid_grant",
                    "the code was issued to another client",
                ));
            }
            if form
                .get("redirect_uri")
                .is_some_and(|r| *r != row.redirect_uri)
            {
                return Err(OAuthError::new(
                    "invalid_grant",
                    "redirect_uri differs from the authorization request's",
                ));
            }
            if !valid_verifier(verifier)
                || !quarry_core::constant_time_eq(
                    s256_challenge(verifier).as_bytes(),
                    row.code_challenge.as_bytes(),
                )
            {
                return Err(OAuthError::new(
                    "invalid_grant",
                    "code_verifier does not match the code_challenge",
                ));
            }
            row
        } else {
            let refresh = required(form, "refresh_token")?;
            // Checked before the token is spent, as well as after: a refused request (a
            // wider scope, another resource) leaves it usable. Spending it first made the
            // client's next, correct refresh look like a replay, which ends the grant.
            if let Some(unspent) = self
                .store
                .oauth_secret(
                    &quarry_core::sha256_hex(refresh.as_bytes()),
                    OAuthSecretKind::Refresh,
                )?
                .filter(|r| r.used_at.is_none())
            {
                refresh_refusal(&unspent, &client, form)?;
                resource_refusal(&unspent, form, endpoints)?;
            }
            let row = self.redeem(refresh, OAuthSecretKind::Refresh, now)?;
            refresh_refusal(&row, &client, form)?;
            row
        };
        resource_refusal(&row, form, endpoints)?;
        let access = self.directory.create_child_token(
            &row.grant_id,
            &label("OAuth access: ", &client.name),
            ACCESS_TOKEN_SECS * 1000,
        )?;
        let refresh = new_secret(REFRESH_PREFIX)?;
        self.store.insert_oauth_secret(&OAuthSecretRow {
            hash: quarry_core::sha256_hex(refresh.as_bytes()),
            kind: OAuthSecretKind::Refresh,
            client_id: client.id.clone(),
            grant_id: row.grant_id.clone(),
            redirect_uri: String::new(),
            code_challenge: String::new(),
            resource: row.resource.clone(),
            scope: row.scope.clone(),
            expires_at: now + REFRESH_TOKEN_DAYS * DAY_MS,
            used_at: None,
        })?;
        let expires_in = access
            .record
            .expires_at
            .map_or(ACCESS_TOKEN_SECS, |at| ((at - now) / 1000).max(1));
        Ok(json!({
            "access_token": access.token,
            "token_type": "Bearer",
            "expires_in": expires_in,
            "refresh_token": refresh,
            "scope": scope_words(access.record.read_only),
        }))
    }

    /// Redeems a code or refresh token; a replay revokes the grant (OAuth 2.1 §4.3.1,
    /// §6.1: the secret was stolen, or the client lost track of it).
    fn redeem(&self, secret: &str, kind: OAuthSecretKind, now: i64) -> OAuthResult<OAuthSecretRow> {
        let what = match kind {
            OAuthSecretKind::Code => "authorization code",
            OAuthSecretKind::Refresh => "refresh token",
        };
        match self.store.redeem_oauth_secret(
            &quarry_core::sha256_hex(secret.as_bytes()),
            kind,
            now,
        )? {
            Redeemed::Fresh(row) => Ok(row),
            Redeemed::Reused(row) => {
                let _ = self.directory.revoke_token(&row.grant_id, None);
                Err(OAuthError::new(
                    "invalid_grant",
                    format!("the {what} was already used: the grant is revoked, sign in again"),
                ))
            }
            Redeemed::Unknown => Err(OAuthError::new(
                "invalid_grant",
                format!("unknown or expired {what}"),
            )),
        }
    }

    /// RFC 7009 revocation: a refresh token or an access token of this client ends the
    /// whole grant (every token under it stops on its next request). Unknown tokens are not
    /// an error (§2.2).
    pub fn revoke(&self, form: &Form, basic: Option<(String, String)>) -> OAuthResult<()> {
        let client = self.authenticate_client(form, basic)?;
        let token = required(form, "token")?;
        let hash = quarry_core::sha256_hex(token.as_bytes());
        let grant_id = if token.starts_with(REFRESH_PREFIX) {
            self.store
                .oauth_secret(&hash, OAuthSecretKind::Refresh)?
                .filter(|r| r.client_id == client.id)
                .map(|r| r.grant_id)
        } else {
            match self.directory.token_by_hash(&hash)? {
                Some(found) => match &found.token.parent_id {
                    Some(parent) => self
                        .store
                        .oauth_grant(parent)?
                        .filter(|g| g.client_id == client.id)
                        .map(|g| g.grant_id),
                    None => None,
                },
                None => None,
            }
        };
        if let Some(grant_id) = grant_id {
            match self.directory.revoke_token(&grant_id, None) {
                Ok(()) | Err(Error::NotFound(_)) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }
}
