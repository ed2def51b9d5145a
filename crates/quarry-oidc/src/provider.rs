//! Talking to a provider: its discovery document and key set (cached in this process: a
//! copy of what the provider publishes, not shared state — any node fetches its own), the
//! token endpoint and userinfo.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use quarry_core::error_chain;
use quarry_oauth_client::{metadata_list, metadata_text};
use serde_json::Value;

use crate::config::{ProviderConfig, check_endpoint};
use crate::error::OidcError;
use crate::jwt::{Jwk, parse_jwks};

/// Longest document read from a provider.
const MAX_BODY: usize = 512 * 1024;
/// Longest wait for one request to a provider.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a discovery document or key set is used before it is fetched again.
const CACHE_FOR: Duration = Duration::from_secs(3600);

/// What sign-in uses of a provider's discovery document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metadata {
    /// `issuer` (equal to the configured one).
    pub issuer: String,
    /// `authorization_endpoint`.
    pub authorization_endpoint: String,
    /// `token_endpoint`.
    pub token_endpoint: String,
    /// `jwks_uri`.
    pub jwks_uri: String,
    /// `userinfo_endpoint`, if offered.
    pub userinfo_endpoint: Option<String>,
    /// `end_session_endpoint` (RP-initiated logout), if offered.
    pub end_session_endpoint: Option<String>,
    /// `token_endpoint_auth_methods_supported` (empty: `client_secret_basic`).
    pub auth_methods: Vec<String>,
    /// `id_token_signing_alg_values_supported`.
    pub signing_algs: Vec<String>,
}

/// Reads a discovery document for the provider `p`: its issuer must be the configured one
/// (OpenID Connect Discovery §4.3) and its endpoints https (http on loopback).
pub fn read_metadata(p: &ProviderConfig, doc: &Value) -> Result<Metadata, OidcError> {
    let bad = |m: String| OidcError::Provider(format!("{}: {m}", p.issuer));
    let issuer = metadata_text(doc, "issuer").unwrap_or_default();
    if issuer != p.issuer {
        return Err(bad(format!(
            "its discovery document names issuer {issuer:?}, not the configured {:?}: configure the issuer exactly as the provider states it",
            p.issuer
        )));
    }
    let endpoint = |key: &str| -> Result<String, OidcError> {
        let url = metadata_text(doc, key)
            .ok_or_else(|| bad(format!("its discovery document has no {key}")))?;
        check_endpoint(&p.issuer, key, &url).map_err(OidcError::Provider)?;
        Ok(url)
    };
    let optional = |key: &str| -> Result<Option<String>, OidcError> {
        match metadata_text(doc, key) {
            None => Ok(None),
            Some(url) => {
                check_endpoint(&p.issuer, key, &url).map_err(OidcError::Provider)?;
                Ok(Some(url))
            }
        }
    };
    let challenge_methods = metadata_list(doc, "code_challenge_methods_supported");
    if !challenge_methods.is_empty() && !challenge_methods.iter().any(|m| m == "S256") {
        return Err(bad(
            "it does not offer PKCE with S256, which Quarry requires".into(),
        ));
    }
    Ok(Metadata {
        issuer,
        authorization_endpoint: endpoint("authorization_endpoint")?,
        token_endpoint: endpoint("token_endpoint")?,
        jwks_uri: endpoint("jwks_uri")?,
        userinfo_endpoint: optional("userinfo_endpoint")?,
        end_session_endpoint: optional("end_session_endpoint")?,
        auth_methods: metadata_list(doc, "token_endpoint_auth_methods_supported"),
        signing_algs: metadata_list(doc, "id_token_signing_alg_values_supported"),
    })
}

/// The discovery document's address: the issuer with `/.well-known/openid-configuration`
/// appended (OpenID Connect Discovery §4).
pub fn discovery_url(issuer: &str) -> String {
    format!(
        "{}/.well-known/openid-configuration",
        issuer.trim_end_matches('/')
    )
}

type Cached<T> = Mutex<HashMap<String, (Instant, Arc<T>)>>;

/// The HTTP client and the caches of documents fetched from providers.
pub(crate) struct ProviderClient {
    http: reqwest::Client,
    metadata: Cached<Metadata>,
    keys: Cached<Vec<Jwk>>,
}

fn cached<T>(cache: &Cached<T>, key: &str) -> Option<Arc<T>> {
    let map = cache.lock().unwrap_or_else(|e| e.into_inner());
    map.get(key)
        .filter(|(at, _)| at.elapsed() < CACHE_FOR)
        .map(|(_, v)| v.clone())
}

fn keep<T>(cache: &Cached<T>, key: &str, value: Arc<T>) {
    cache
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(key.to_owned(), (Instant::now(), value));
}

impl ProviderClient {
    pub(crate) fn new() -> Result<ProviderClient, String> {
        quarry_netguard::ensure_crypto_provider();
        // No redirects: a token endpoint that redirects must not take the code (and the
        // client secret) elsewhere.
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(REQUEST_TIMEOUT)
            .build()
            .map_err(|e| format!("cannot build the HTTP client for sign-in: {e}"))?;
        Ok(ProviderClient {
            http,
            metadata: Mutex::default(),
            keys: Mutex::default(),
        })
    }

    /// The provider's metadata (cached for an hour).
    pub(crate) async fn metadata(&self, p: &ProviderConfig) -> Result<Arc<Metadata>, OidcError> {
        if let Some(m) = cached(&self.metadata, &p.name) {
            return Ok(m);
        }
        let doc = self.get_json(&discovery_url(&p.issuer), None).await?;
        let m = Arc::new(read_metadata(p, &doc)?);
        keep(&self.metadata, &p.name, m.clone());
        Ok(m)
    }

    /// The provider's keys; `fresh` fetches them again (a token names a key the cached set
    /// lacks: the provider rotated its keys).
    pub(crate) async fn keys(&self, m: &Metadata, fresh: bool) -> Result<Arc<Vec<Jwk>>, OidcError> {
        if !fresh && let Some(k) = cached(&self.keys, &m.jwks_uri) {
            return Ok(k);
        }
        let doc = self.get_json(&m.jwks_uri, None).await?;
        let keys = Arc::new(parse_jwks(&doc));
        keep(&self.keys, &m.jwks_uri, keys.clone());
        Ok(keys)
    }

    /// GETs a JSON object (with a bearer token for userinfo).
    pub(crate) async fn get_json(
        &self,
        url: &str,
        bearer: Option<&str>,
    ) -> Result<Value, OidcError> {
        let mut request = self.http.get(url).header("Accept", "application/json");
        if let Some(t) = bearer {
            request = request.bearer_auth(t);
        }
        let response = request
            .send()
            .await
            .map_err(|e| OidcError::Unreachable(format!("{url}: {}", error_chain(&e))))?;
        let (status, body) = read_body(response, url).await?;
        if !(200..300).contains(&status) {
            return Err(OidcError::Provider(format!("{url} answered {status}")));
        }
        match serde_json::from_slice::<Value>(&body) {
            Ok(v @ Value::Object(_)) => Ok(v),
            _ => Err(OidcError::Provider(format!(
                "{url} did not answer a JSON object"
            ))),
        }
    }

    /// POSTs the code to the token endpoint, the client authenticating as the provider
    /// announces (`client_secret_basic` unless it offers only `client_secret_post`).
    pub(crate) async fn exchange_code(
        &self,
        p: &ProviderConfig,
        m: &Metadata,
        code: &str,
        verifier: &str,
        redirect_uri: &str,
    ) -> Result<Value, OidcError> {
        // Built in a block: the serializer is not `Send`, so it must not live across an await.
        let (body, basic) = {
            let mut form = url::form_urlencoded::Serializer::new(String::new());
            form.append_pair("grant_type", "authorization_code")
                .append_pair("code", code)
                .append_pair("redirect_uri", redirect_uri)
                .append_pair("code_verifier", verifier);
            let mut basic = None;
            match &p.client_secret {
                None => {
                    form.append_pair("client_id", &p.client_id);
                }
                Some(secret) => {
                    let post_only = !m.auth_methods.is_empty()
                        && !m.auth_methods.iter().any(|a| a == "client_secret_basic")
                        && m.auth_methods.iter().any(|a| a == "client_secret_post");
                    if post_only {
                        form.append_pair("client_id", &p.client_id)
                            .append_pair("client_secret", secret.expose());
                    } else {
                        // RFC 6749 §2.3.1: each form-urlencoded before they are joined.
                        let enc = |s: &str| {
                            url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>()
                        };
                        basic = Some(quarry_core::base64_encode(
                            format!("{}:{}", enc(&p.client_id), enc(secret.expose())).as_bytes(),
                        ));
                    }
                }
            }
            (form.finish(), basic)
        };
        let mut request = self
            .http
            .post(&m.token_endpoint)
            .header("Content-Type", "application/x-www-form-urlencoded")
            .header("Accept", "application/json")
            .body(body);
        if let Some(b) = basic {
            request = request.header("Authorization", format!("Basic {b}"));
        }
        let response = request.send().await.map_err(|e| {
            OidcError::Unreachable(format!("{}: {}", m.token_endpoint, error_chain(&e)))
        })?;
        let (status, body) = read_body(response, &m.token_endpoint).await?;
        let doc: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        if !(200..300).contains(&status) {
            return Err(OidcError::Refused {
                error: metadata_text(&doc, "error").unwrap_or_else(|| format!("status {status}")),
                description: metadata_text(&doc, "error_description"),
            });
        }
        if !doc.is_object() {
            return Err(OidcError::Provider(format!(
                "{} did not answer a JSON object",
                m.token_endpoint
            )));
        }
        Ok(doc)
    }
}

async fn read_body(response: reqwest::Response, url: &str) -> Result<(u16, Vec<u8>), OidcError> {
    let status = response.status().as_u16();
    let bytes = response
        .bytes()
        .await
        .map_err(|e| OidcError::Unreachable(format!("{url}: {}", error_chain(&e))))?;
    if bytes.len() > MAX_BODY {
        return Err(OidcError::Provider(format!(
            "{url} answered {} bytes, more than the {MAX_BODY} read",
            bytes.len()
        )));
    }
    Ok((status, bytes.to_vec()))
}
