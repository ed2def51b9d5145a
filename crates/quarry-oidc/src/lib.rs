//! People sign in to Quarry's web UI (and to the consent page MCP connectors open) with
//! their company's OpenID Connect provider; Quarry is the relying party (issue 69).
//!
//! The flow, each step one call; the server keeps what must survive between them in the
//! store (`quarry_store::SignInStore`), so any node can finish what another started:
//! 1. [`SignIn::start`]: discovery (cached), a fresh `state`, `nonce` and PKCE verifier, and
//!    the authorization URL. The server stores the [`SignInRequest`] (keyed by the state's
//!    hash) and gives the browser the state in a cookie.
//! 2. The server takes the request back once (the callback's state, which must equal the
//!    cookie's) and calls [`SignIn::finish`]: the code is exchanged (client secret by HTTP
//!    Basic, or in the body where that is all the provider offers; PKCE verifier), the ID
//!    token verified (signature against the provider's JWKS, fetched again when it names a
//!    key the cached set lacks; `iss`, `aud`, `azp`, `exp`, `iat`, `nonce`, `sub`), claims the
//!    ID token lacks read from userinfo (same `sub`), and the allow-list applied. The result
//!    is a [`Person`] for `quarry_access::Directory::sign_in_person`.
//! 3. [`SignIn::logout_url`]: where the browser goes to end the provider's session too
//!    (RP-initiated logout), when the provider offers it.
//!
//! Nothing here serves HTTP or touches the store. Secrets (the client secret, codes, tokens)
//! are never in an error or a log line.

mod config;
mod error;
pub mod jwt;
mod provider;

use quarry_access::Person;
use quarry_oauth_client::Pkce;
use quarry_store::{SIGN_IN_REQUEST_MS, SignInRequest};
use serde_json::{Map, Value};

pub use config::{
    ClientSecret, ConfigSources, DEFAULT_SESSION_MINUTES, MAX_SESSION_MINUTES, MIN_SESSION_MINUTES,
    OidcConfig, ProviderConfig, RequiredClaim, load,
};
pub use error::OidcError;
pub use provider::{Metadata, discovery_url, read_metadata};

use crate::jwt::{Expected, TokenError, UnverifiedToken, check_claims};
use crate::provider::ProviderClient;

/// A sign-in just started: store `request`, give the browser `state`, send it to `url`.
#[derive(Debug)]
pub struct Started {
    /// What the callback needs (stored by the server).
    pub request: SignInRequest,
    /// The state value (the browser's cookie; only its hash is stored).
    pub state: String,
    /// The provider's authorization URL.
    pub url: String,
}

/// A verified sign-in.
#[derive(Debug)]
pub struct Verified {
    /// Who signed in.
    pub person: Person,
    /// The ID token (the `id_token_hint` of a later provider sign-out).
    pub id_token: String,
}

/// The configured providers and a client to reach them.
pub struct SignIn {
    config: OidcConfig,
    client: ProviderClient,
}

fn random(bytes: usize) -> Result<String, OidcError> {
    quarry_access::random_secret("", bytes)
        .map_err(|e| OidcError::Provider(format!("no secure random numbers: {e}")))
}

impl SignIn {
    /// A sign-in service for `config`.
    pub fn new(config: OidcConfig) -> Result<SignIn, String> {
        Ok(SignIn {
            config,
            client: ProviderClient::new()?,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &OidcConfig {
        &self.config
    }

    fn provider(&self, name: &str) -> Result<&ProviderConfig, OidcError> {
        self.config
            .provider(name)
            .ok_or_else(|| OidcError::UnknownProvider(name.to_owned()))
    }

    /// Starts a sign-in with provider `name`, the provider sending the person back to
    /// `redirect_uri` and Quarry then to `return_to`.
    pub async fn start(
        &self,
        name: &str,
        redirect_uri: &str,
        return_to: &str,
    ) -> Result<Started, OidcError> {
        let p = self.provider(name)?;
        let m = self.client.metadata(p).await?;
        let state = random(32)?;
        let nonce = random(32)?;
        let pkce = Pkce::new().map_err(|e| OidcError::Provider(e.to_string()))?;
        let mut url = url::Url::parse(&m.authorization_endpoint)
            .map_err(|e| OidcError::Provider(format!("authorization_endpoint: {e}")))?;
        url.query_pairs_mut()
            .append_pair("response_type", "code")
            .append_pair("client_id", &p.client_id)
            .append_pair("redirect_uri", redirect_uri)
            .append_pair("scope", &p.scopes.join(" "))
            .append_pair("state", &state)
            .append_pair("nonce", &nonce)
            .append_pair("code_challenge", &pkce.challenge)
            .append_pair("code_challenge_method", "S256");
        Ok(Started {
            request: SignInRequest {
                state_hash: state_hash(&state),
                provider: p.name.clone(),
                nonce,
                verifier: pkce.verifier,
                redirect_uri: redirect_uri.to_owned(),
                return_to: return_to.to_owned(),
                expires_at: quarry_core::now_millis() + SIGN_IN_REQUEST_MS,
            },
            state,
            url: url.into(),
        })
    }

    /// Finishes the sign-in `request` (taken from the store) with the callback's `code`.
    pub async fn finish(&self, request: &SignInRequest, code: &str) -> Result<Verified, OidcError> {
        let p = self.provider(&request.provider)?;
        let m = self.client.metadata(p).await?;
        let tokens = self
            .client
            .exchange_code(p, &m, code, &request.verifier, &request.redirect_uri)
            .await?;
        let id_token = tokens
            .get("id_token")
            .and_then(Value::as_str)
            .ok_or_else(|| {
                OidcError::Provider(
                    "the token endpoint returned no ID token (is the openid scope granted?)".into(),
                )
            })?
            .to_owned();
        let parsed = UnverifiedToken::parse(&id_token)?;
        parsed.check_algorithm(&m.signing_algs)?;
        let mut keys = self.client.keys(&m, false).await?;
        if parsed.pick_key(&keys).is_none() {
            keys = self.client.keys(&m, true).await?;
        }
        let key = parsed
            .pick_key(&keys)
            .ok_or_else(|| TokenError::UnknownKey(parsed.kid().unwrap_or("none").to_owned()))?;
        parsed.verify(key, &m.signing_algs)?;
        check_claims(
            &parsed.claims,
            &Expected {
                issuer: &p.issuer,
                client_id: &p.client_id,
                nonce: &request.nonce,
                now_ms: quarry_core::now_millis(),
            },
        )?;
        let mut claims = parsed.claims.clone();
        let wants_userinfo = ["email", "preferred_username", p.groups_claim.as_str()]
            .iter()
            .any(|k| !claims.contains_key(*k));
        if wants_userinfo
            && let (Some(endpoint), Some(access)) = (
                &m.userinfo_endpoint,
                tokens.get("access_token").and_then(Value::as_str),
            )
        {
            let info = self.client.get_json(endpoint, Some(access)).await?;
            if info.get("sub") != claims.get("sub") {
                return Err(OidcError::Provider(
                    "userinfo describes another subject than the ID token".into(),
                ));
            }
            if let Value::Object(more) = info {
                for (k, v) in more {
                    claims.entry(k).or_insert(v);
                }
            }
        }
        let person = person_from(p, &claims)?;
        Ok(Verified { person, id_token })
    }

    /// Where to send the browser to end the provider's session too, when it offers
    /// RP-initiated logout (`None` too when the provider cannot be reached: signing out of
    /// Quarry does not wait for it).
    pub async fn logout_url(
        &self,
        name: &str,
        id_token: &str,
        post_logout_redirect_uri: &str,
    ) -> Option<String> {
        let p = self.config.provider(name)?;
        let m = self.client.metadata(p).await.ok()?;
        let mut url = url::Url::parse(m.end_session_endpoint.as_deref()?).ok()?;
        url.query_pairs_mut()
            .append_pair("id_token_hint", id_token)
            .append_pair("client_id", &p.client_id)
            .append_pair("post_logout_redirect_uri", post_logout_redirect_uri);
        Some(url.into())
    }
}

/// What is stored for a state value.
pub fn state_hash(state: &str) -> String {
    quarry_core::sha256_hex(state.as_bytes())
}

fn claim_text<'a>(claims: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    claims
        .get(key)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

/// The person the claims describe, if the provider's allow-list lets them in.
fn person_from(p: &ProviderConfig, claims: &Map<String, Value>) -> Result<Person, OidcError> {
    let email = claim_text(claims, "email").map(str::to_owned);
    if !p.allowed_domains.is_empty() {
        let verified = claims.get("email_verified") != Some(&Value::Bool(false));
        let domain = email
            .as_deref()
            .and_then(|e| e.rsplit_once('@'))
            .map(|(_, d)| d.to_ascii_lowercase());
        let allowed = verified && domain.is_some_and(|d| p.allowed_domains.contains(&d));
        if !allowed {
            return Err(OidcError::NotAllowed(format!(
                "this server admits accounts with a verified e-mail address at {} only",
                p.allowed_domains.join(", ")
            )));
        }
    }
    if let Some(req) = &p.required_claim {
        let has = match claims.get(&req.claim) {
            Some(Value::String(s)) => *s == req.value,
            Some(Value::Array(a)) => a.iter().any(|v| v.as_str() == Some(req.value.as_str())),
            Some(Value::Bool(b)) => b.to_string() == req.value,
            _ => false,
        };
        if !has {
            return Err(OidcError::NotAllowed(format!(
                "this server admits accounts whose {} claim is {:?} only",
                req.claim, req.value
            )));
        }
    }
    let groups = match claims.get(&p.groups_claim) {
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        Some(Value::String(s)) => s.split_whitespace().map(str::to_owned).collect(),
        _ => Vec::new(),
    };
    Ok(Person {
        issuer: p.issuer.clone(),
        // The subject exactly as issued (check_claims made sure there is one).
        subject: claims
            .get("sub")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        preferred_name: claim_text(claims, "preferred_username")
            .or_else(|| claim_text(claims, "name"))
            .map(str::to_owned),
        email,
        groups,
    })
}

#[cfg(test)]
mod tests;
