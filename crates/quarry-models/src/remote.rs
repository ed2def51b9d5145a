//! Remote embedders (OpenAI-compatible, Ollama) and `/rerank` APIs over blocking HTTP.

use std::io::Read;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::error::ModelError;
use crate::local::Prefixes;
use crate::meter::{ModelPurpose, estimate_tokens};
use crate::types::{Embedder, ModelIdentity, Reranker};

/// Largest response body accepted (embeddings of a big batch are a few MB of JSON).
const MAX_BODY: u64 = 256 * 1024 * 1024;
/// How much of an error body is quoted in [`ModelError::HttpStatus`].
const ERROR_BODY_CHARS: usize = 300;

// ---------------------------------------------------------------------------------------------
// HTTP plumbing
// ---------------------------------------------------------------------------------------------

/// An API key that never prints.
#[derive(Clone)]
pub(crate) struct Secret(String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[REDACTED]")
    }
}

/// An API key and the variable it was read from: the variable is named in errors (a key the
/// options require but the variable did not hold), the key itself never prints.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey {
    var: String,
    value: Option<String>,
}

impl ApiKey {
    /// The key `value` read from `var` (blank or `None`: the variable was unset).
    pub fn new(var: impl Into<String>, value: Option<String>) -> ApiKey {
        ApiKey {
            var: var.into(),
            value: value
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty()),
        }
    }

    /// The variable the key comes from.
    pub fn var(&self) -> &str {
        &self.var
    }

    /// Whether the variable held a key.
    pub fn is_set(&self) -> bool {
        self.value.is_some()
    }
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let value = if self.is_set() { "[REDACTED]" } else { "unset" };
        write!(f, "ApiKey({} = {value})", self.var)
    }
}

/// The key to send: none when the options name none; an error naming the variable when they
/// name one that held no key.
pub(crate) fn read_key(key: Option<&ApiKey>) -> Result<Option<Secret>, ModelError> {
    let Some(key) = key.filter(|k| !k.var.is_empty()) else {
        return Ok(None);
    };
    match &key.value {
        Some(v) => Ok(Some(Secret(v.clone()))),
        None => Err(ModelError::MissingApiKey {
            var: key.var.clone(),
        }),
    }
}

/// The key when its variable held one; unset means "no key" (for services where a key is
/// optional, such as public Hub models).
pub(crate) fn read_optional_key(key: &ApiKey) -> Option<Secret> {
    key.value.clone().map(Secret)
}

/// The start of an error body, trimmed to [`ERROR_BODY_CHARS`] characters.
pub(crate) fn excerpt(text: &str) -> String {
    let mut snippet: String = text.chars().take(ERROR_BODY_CHARS).collect();
    if text.chars().count() > ERROR_BODY_CHARS {
        snippet.push('…');
    }
    snippet.trim().to_string()
}

/// Redirects followed before a request gives up.
const MAX_REDIRECTS: usize = 10;

/// Which redirects keep the `Authorization` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RedirectAuth {
    /// None: a redirected API call goes on without the key.
    Never,
    /// Those to the same host, with the same scheme or up to https. The Hub redirects file
    /// downloads to a CDN with a signed URL: the token must not go there, but may follow a
    /// redirect within the Hub (a renamed repository).
    SameHost,
}

/// A blocking HTTP client plus the API key it sends as `Authorization: Bearer`.
///
/// Blocking: call it from plain threads (the engine's callers hand model work to blocking
/// threads), never from an async runtime's worker (reqwest's blocking client panics there).
pub(crate) struct Http {
    client: reqwest::blocking::Client,
    key: Option<Secret>,
    /// The whole request's limit, redirects and body included; `None` for downloads, which
    /// are bounded per wait instead.
    timeout: Option<Duration>,
    redirect_auth: RedirectAuth,
}

impl std::fmt::Debug for Http {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Http").field("key", &self.key).finish()
    }
}

impl Http {
    /// For JSON APIs at `url` (named if the client cannot start): the whole request must
    /// finish within `timeout`.
    pub(crate) fn new(
        key: Option<Secret>,
        timeout: Duration,
        url: &str,
    ) -> Result<Self, ModelError> {
        Self::build(key, Some(timeout), RedirectAuth::Never, None, url)
    }

    /// For large downloads from `url`: no limit on the whole transfer (a multi-GB file may
    /// take a long time), but connecting, waiting for the response head and every read are
    /// bounded by `stall` so a stalled server cannot hang the caller forever.
    pub(crate) fn new_download(
        key: Option<Secret>,
        stall: Duration,
        url: &str,
    ) -> Result<Self, ModelError> {
        Self::build(key, None, RedirectAuth::SameHost, Some(stall), url)
    }

    fn build(
        key: Option<Secret>,
        timeout: Option<Duration>,
        redirect_auth: RedirectAuth,
        stall: Option<Duration>,
        url: &str,
    ) -> Result<Self, ModelError> {
        quarry_netguard::ensure_crypto_provider();
        let mut builder = reqwest::blocking::Client::builder()
            // Redirects are followed by `send`, which decides hop by hop whether the key goes
            // along: reqwest's own policy restores the first request's headers on every hop
            // and drops `Authorization` only when a hop changes host, so the second hop
            // within a CDN would carry the token again.
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("quarry-models/", env!("CARGO_PKG_VERSION")))
            // Waiting for a response head and each read of a body (`None`: requests set
            // their own limit).
            .timeout(stall);
        if let Some(stall) = stall {
            builder = builder.connect_timeout(stall);
        }
        let client = builder.build().map_err(|e| ModelError::Network {
            url: scrub(key.as_ref(), url),
            reason: format!(
                "cannot start the HTTP client: {}",
                quarry_core::error_chain(&e)
            ),
        })?;
        Ok(Http {
            client,
            key,
            timeout,
            redirect_auth,
        })
    }

    /// Whether an API key will be sent.
    pub(crate) fn has_key(&self) -> bool {
        self.key.is_some()
    }

    /// Removes the API key from any text that may reach a log or an error message.
    pub(crate) fn scrub(&self, text: &str) -> String {
        scrub(self.key.as_ref(), text)
    }

    /// A transport failure of a request to `url`, key scrubbed.
    fn network(&self, url: &str, reason: &str) -> ModelError {
        ModelError::Network {
            url: self.scrub(url),
            reason: self.scrub(reason),
        }
    }

    /// `GET url` with the key as a bearer token; redirects are followed (the key only to the
    /// same host, see [`RedirectAuth`]). Any HTTP status is returned as a response; only
    /// transport failures are errors.
    pub(crate) fn get(&self, url: &str) -> Result<reqwest::blocking::Response, ModelError> {
        self.send(url, None)
    }

    /// `url` with the key, `POST` with `json` as the body or else `GET`, following up to
    /// [`MAX_REDIRECTS`] redirects: 301, 302 and 303 go on as a `GET` without the body; 307
    /// and 308 repeat a `GET`, while one with a body is answered as it is rather than sent
    /// again.
    fn send(
        &self,
        url: &str,
        json: Option<&[u8]>,
    ) -> Result<reqwest::blocking::Response, ModelError> {
        use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderValue, LOCATION};
        let deadline = self.timeout.map(|t| Instant::now() + t);
        let mut target = reqwest::Url::parse(url)
            .map_err(|e| self.network(url, &format!("invalid URL: {e}")))?;
        let mut body = json;
        let mut key = self.key.as_ref();
        for _ in 0..=MAX_REDIRECTS {
            let mut req = match body {
                Some(b) => self
                    .client
                    .post(target.clone())
                    .header(CONTENT_TYPE, "application/json")
                    .body(b.to_vec()),
                None => self.client.get(target.clone()),
            };
            if json.is_some() {
                req = req.header(ACCEPT, "application/json");
            }
            if let Some(Secret(k)) = key {
                let mut value = HeaderValue::from_str(&format!("Bearer {k}")).map_err(|_| {
                    self.network(url, "the API key holds characters a header cannot carry")
                })?;
                value.set_sensitive(true);
                req = req.header(AUTHORIZATION, value);
            }
            if let Some(deadline) = deadline {
                // What is left of the whole request's time (at least a millisecond, so an
                // expired deadline fails as a timeout).
                let left = deadline.saturating_duration_since(Instant::now());
                req = req.timeout(left.max(Duration::from_millis(1)));
            }
            // Errors name the URL asked for, not a hop (a CDN's signed URL is a credential).
            let resp = req
                .send()
                .map_err(|e| self.network(url, &quarry_core::error_chain(&e.without_url())))?;
            let status = resp.status().as_u16();
            let repeat = match status {
                301..=303 => false,
                307 | 308 if body.is_none() => true,
                _ => return Ok(resp),
            };
            let Some(location) = resp.headers().get(LOCATION) else {
                return Ok(resp);
            };
            let next = location
                .to_str()
                .ok()
                .and_then(|l| target.join(l).ok())
                .filter(|u| matches!(u.scheme(), "http" | "https"))
                .ok_or_else(|| {
                    self.network(
                        url,
                        &format!("HTTP {status} redirects to an invalid location"),
                    )
                })?;
            if !repeat {
                body = None;
            }
            if !(self.redirect_auth == RedirectAuth::SameHost && same_host(&target, &next)) {
                key = None;
            }
            target = next;
        }
        Err(self.network(url, &format!("more than {MAX_REDIRECTS} redirects")))
    }

    /// `POST url` with a JSON body; a non-2xx status or a non-JSON body is an error. An
    /// answered request is counted for `purpose` in the thread's [`crate::ModelMeter`].
    pub(crate) fn post_json(
        &self,
        url: &str,
        body: &Value,
        purpose: ModelPurpose,
    ) -> Result<Value, ModelError> {
        let safe_url = self.scrub(url);
        let bytes = serde_json::to_vec(body)
            .map_err(|e| self.network(url, &format!("cannot encode the request: {e}")))?;
        let resp = self.send(url, Some(&bytes))?;
        let status = resp.status().as_u16();
        let mut raw = Vec::new();
        resp.take(MAX_BODY + 1)
            .read_to_end(&mut raw)
            .map_err(|e| ModelError::Network {
                url: safe_url.clone(),
                reason: format!(
                    "reading the response body: {}",
                    self.scrub(&quarry_core::error_chain(&e))
                ),
            })?;
        if raw.len() as u64 > MAX_BODY {
            return Err(ModelError::Network {
                url: safe_url,
                reason: format!("reading the response body: it is larger than {MAX_BODY} bytes"),
            });
        }
        let text = String::from_utf8_lossy(&raw);
        if !(200..300).contains(&status) {
            return Err(ModelError::HttpStatus {
                url: safe_url,
                status,
                // Scrub before cutting: a key split by the cut would escape the scrubber.
                body: excerpt(&self.scrub(&text)),
            });
        }
        let answer = serde_json::from_str(&text).map_err(|e| ModelError::InvalidResponse {
            url: safe_url,
            reason: format!("body is not valid JSON ({})", self.scrub(&e.to_string())),
        })?;
        crate::meter::record(purpose, body, &answer);
        Ok(answer)
    }
}

/// `text` with `key` replaced by `[REDACTED]`.
fn scrub(key: Option<&Secret>, text: &str) -> String {
    match key {
        Some(Secret(k)) if !k.is_empty() => text.replace(k.as_str(), "[REDACTED]"),
        _ => text.to_string(),
    }
}

/// Whether a redirect from `from` to `to` may keep the key: the same host, and the same
/// scheme or an upgrade to https (never down to plain http).
fn same_host(from: &reqwest::Url, to: &reqwest::Url) -> bool {
    from.host_str() == to.host_str() && (from.scheme() == to.scheme() || to.scheme() == "https")
}

pub(crate) fn invalid(url: &str, reason: impl Into<String>) -> ModelError {
    ModelError::InvalidResponse {
        url: url.to_string(),
        reason: reason.into(),
    }
}

fn parse_vector(url: &str, v: &Value, what: &str) -> Result<Vec<f32>, ModelError> {
    let arr = v
        .as_array()
        .ok_or_else(|| invalid(url, format!("{what} is not an array of numbers")))?;
    arr.iter()
        .map(|x| {
            x.as_f64()
                .map(|f| f as f32)
                .ok_or_else(|| invalid(url, format!("{what} contains a non-number")))
        })
        .collect()
}

/// Shared state of remote embedders: identity discovered from the first response.
#[derive(Debug)]
struct RemoteIdentity {
    pending: ModelIdentity,
    known: OnceLock<ModelIdentity>,
}

impl RemoteIdentity {
    fn new(model: &str, dimensions: Option<usize>) -> Self {
        RemoteIdentity {
            pending: ModelIdentity {
                name: model.to_string(),
                dimensions: dimensions.unwrap_or(0),
                revision: model.to_string(),
            },
            known: OnceLock::new(),
        }
    }

    fn get(&self) -> &ModelIdentity {
        self.known.get().unwrap_or(&self.pending)
    }

    /// Checks every vector has the same length as the first one ever seen.
    fn check(
        &self,
        url: &str,
        vectors: &[Vec<f32>],
        reported_model: Option<&str>,
    ) -> Result<(), ModelError> {
        let Some(first) = vectors.first() else {
            return Ok(());
        };
        let dim = first.len();
        if dim == 0 {
            return Err(invalid(url, "the server returned an empty vector"));
        }
        if let Some(v) = vectors.iter().find(|v| v.len() != dim) {
            return Err(invalid(
                url,
                format!("vectors of different lengths ({dim} and {})", v.len()),
            ));
        }
        let expected = self.get().dimensions;
        if expected != 0 && expected != dim {
            return Err(invalid(
                url,
                format!("expected {expected}-dimensional vectors, got {dim}"),
            ));
        }
        let _ = self.known.set(ModelIdentity {
            name: self.pending.name.clone(),
            dimensions: dim,
            revision: reported_model
                .filter(|m| !m.is_empty())
                .unwrap_or(&self.pending.revision)
                .to_string(),
        });
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// OpenAI-compatible embeddings
// ---------------------------------------------------------------------------------------------

/// Options for [`OpenAiEmbedder`].
#[derive(Debug, Clone)]
pub struct OpenAiOptions {
    /// `https://api.openai.com`, `http://localhost:8080/v1`, … (`/v1/embeddings` is appended
    /// unless the URL already ends in `/v1` or `/embeddings`).
    pub base_url: String,
    /// Model name sent in every request.
    pub model: String,
    /// The API key (`None`: no Authorization header).
    pub api_key: Option<ApiKey>,
    /// Texts per request (default 64).
    pub batch_size: usize,
    /// Ask for this many dimensions (OpenAI `dimensions` parameter); `None` lets the server decide.
    pub dimensions: Option<usize>,
    /// Prefixes applied to queries / passages (default none).
    pub prefixes: Prefixes,
    /// Value reported by [`Embedder::max_tokens`] (default 8191).
    pub max_tokens: usize,
    /// Whole-request timeout (default 120 s).
    pub timeout: Duration,
}

impl OpenAiOptions {
    /// Options for `model` at `base_url`: no key, batches of 64, no prefixes, 120 s timeout.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        OpenAiOptions {
            base_url: base_url.into(),
            model: model.into(),
            api_key: None,
            batch_size: 64,
            dimensions: None,
            prefixes: Prefixes::default(),
            max_tokens: 8191,
            timeout: Duration::from_secs(120),
        }
    }
}

/// An embedder behind an OpenAI-compatible `POST /v1/embeddings` endpoint.
#[derive(Debug)]
pub struct OpenAiEmbedder {
    http: Http,
    url: String,
    opts: OpenAiOptions,
    identity: RemoteIdentity,
}

fn openai_url(base: &str) -> String {
    openai_endpoint(base, "embeddings")
}

/// `{base}/{endpoint}` for an OpenAI-compatible API: `/v1` is inserted unless `base` already
/// ends in `/v1`, and a `base` that already ends in `/{endpoint}` is used as is.
pub(crate) fn openai_endpoint(base: &str, endpoint: &str) -> String {
    let base = base.trim().trim_end_matches('/');
    if base.ends_with(&format!("/{endpoint}")) {
        base.to_string()
    } else if base.ends_with("/v1") {
        format!("{base}/{endpoint}")
    } else {
        format!("{base}/v1/{endpoint}")
    }
}

impl OpenAiEmbedder {
    /// Takes the API key from `opts.api_key` (error if its variable held none); sends nothing.
    pub fn new(opts: OpenAiOptions) -> Result<Self, ModelError> {
        if opts.batch_size == 0 {
            return Err(ModelError::InvalidInput("batch_size must be > 0".into()));
        }
        if opts.model.trim().is_empty() {
            return Err(ModelError::InvalidInput("model name is empty".into()));
        }
        let key = read_key(opts.api_key.as_ref())?;
        let url = openai_url(&opts.base_url);
        Ok(OpenAiEmbedder {
            http: Http::new(key, opts.timeout, &url)?,
            url,
            identity: RemoteIdentity::new(&opts.model, opts.dimensions),
            opts,
        })
    }

    /// The endpoint requests go to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Embeds one probe text so that [`Embedder::identity`] knows the dimensions.
    pub fn probe(&self) -> Result<&ModelIdentity, ModelError> {
        self.embed_with_prefix("", &["dimension probe"])?;
        Ok(self.identity.get())
    }

    fn embed_batch(&self, inputs: &[String]) -> Result<Vec<Vec<f32>>, ModelError> {
        let url = self.http.scrub(&self.url);
        let mut body = json!({
            "model": self.opts.model,
            "input": inputs,
            "encoding_format": "float",
        });
        if let Some(d) = self.opts.dimensions {
            body["dimensions"] = json!(d);
        }
        let resp = self
            .http
            .post_json(&self.url, &body, ModelPurpose::Embedding)?;
        let data = resp
            .get("data")
            .and_then(|d| d.as_array())
            .ok_or_else(|| invalid(&url, "no `data` array in the response"))?;
        if data.len() != inputs.len() {
            return Err(invalid(
                &url,
                format!(
                    "sent {} inputs but received {} vectors",
                    inputs.len(),
                    data.len()
                ),
            ));
        }
        let mut out: Vec<Option<Vec<f32>>> = vec![None; inputs.len()];
        for (pos, item) in data.iter().enumerate() {
            let index = match item.get("index") {
                Some(i) => i
                    .as_u64()
                    .map(|i| i as usize)
                    .ok_or_else(|| invalid(&url, "`index` is not a non-negative integer"))?,
                None => pos,
            };
            let vector = parse_vector(
                &url,
                item.get("embedding").unwrap_or(&Value::Null),
                "data[].embedding",
            )?;
            let slot = out
                .get_mut(index)
                .ok_or_else(|| invalid(&url, format!("index {index} is out of range")))?;
            if slot.is_some() {
                return Err(invalid(&url, format!("index {index} appears twice")));
            }
            *slot = Some(vector);
        }
        let vectors: Vec<Vec<f32>> = out.into_iter().map(Option::unwrap_or_default).collect();
        self.identity
            .check(&url, &vectors, resp.get("model").and_then(|m| m.as_str()))?;
        Ok(vectors)
    }
}

/// The `Embedder` face shared by the HTTP embedders: prefix the texts, send them in batches of
/// `opts.batch_size` through the type's `embed_batch`, check the model identity there.
macro_rules! remote_embedder {
    ($name:ident) => {
        impl $name {
            fn embed_with_prefix(
                &self,
                prefix: &str,
                texts: &[&str],
            ) -> Result<Vec<Vec<f32>>, ModelError> {
                let inputs: Vec<String> = texts.iter().map(|t| format!("{prefix}{t}")).collect();
                let mut out = Vec::with_capacity(texts.len());
                for chunk in inputs.chunks(self.opts.batch_size) {
                    out.extend(self.embed_batch(chunk)?);
                }
                Ok(out)
            }
        }

        impl Embedder for $name {
            fn identity(&self) -> &ModelIdentity {
                self.identity.get()
            }
            fn embed_queries(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelError> {
                self.embed_with_prefix(&self.opts.prefixes.query, texts)
            }
            fn embed_passages(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelError> {
                self.embed_with_prefix(&self.opts.prefixes.passage, texts)
            }
            fn max_tokens(&self) -> usize {
                self.opts.max_tokens
            }
            fn count_tokens(&self, text: &str) -> Result<usize, ModelError> {
                Ok(estimate_tokens(&self.opts.prefixes.passage) + estimate_tokens(text))
            }
        }
    };
}

remote_embedder!(OpenAiEmbedder);

// ---------------------------------------------------------------------------------------------
// Ollama
// ---------------------------------------------------------------------------------------------

/// Options for [`OllamaEmbedder`].
#[derive(Debug, Clone)]
pub struct OllamaOptions {
    /// Default `http://localhost:11434`; requests go to `{base_url}/api/embed`.
    pub base_url: String,
    /// Model name, e.g. `nomic-embed-text`.
    pub model: String,
    /// Optional bearer token (for proxies in front of Ollama).
    pub api_key: Option<ApiKey>,
    /// Texts per request (default 32).
    pub batch_size: usize,
    /// Prefixes applied to queries / passages (default none).
    pub prefixes: Prefixes,
    /// Value reported by [`Embedder::max_tokens`] (default 2048).
    pub max_tokens: usize,
    /// Whole-request timeout (default 300 s: the first call may load the model).
    pub timeout: Duration,
}

impl OllamaOptions {
    /// Options for `model` at `http://localhost:11434`: batches of 32, 300 s timeout.
    pub fn new(model: impl Into<String>) -> Self {
        OllamaOptions {
            base_url: "http://localhost:11434".to_string(),
            model: model.into(),
            api_key: None,
            batch_size: 32,
            prefixes: Prefixes::default(),
            max_tokens: 2048,
            timeout: Duration::from_secs(300),
        }
    }
}

/// An embedder served by Ollama (`POST /api/embed`).
#[derive(Debug)]
pub struct OllamaEmbedder {
    http: Http,
    url: String,
    opts: OllamaOptions,
    identity: RemoteIdentity,
}

impl OllamaEmbedder {
    /// Checks the options and takes the key; sends nothing.
    pub fn new(opts: OllamaOptions) -> Result<Self, ModelError> {
        if opts.batch_size == 0 {
            return Err(ModelError::InvalidInput("batch_size must be > 0".into()));
        }
        if opts.model.trim().is_empty() {
            return Err(ModelError::InvalidInput("model name is empty".into()));
        }
        let key = read_key(opts.api_key.as_ref())?;
        let base = opts.base_url.trim().trim_end_matches('/');
        let url = if base.ends_with("/api/embed") {
            base.to_string()
        } else {
            format!("{base}/api/embed")
        };
        Ok(OllamaEmbedder {
            http: Http::new(key, opts.timeout, &url)?,
            url,
            identity: RemoteIdentity::new(&opts.model, None),
            opts,
        })
    }

    /// Embeds one probe text so that [`Embedder::identity`] knows the dimensions.
    pub fn probe(&self) -> Result<&ModelIdentity, ModelError> {
        self.embed_with_prefix("", &["dimension probe"])?;
        Ok(self.identity.get())
    }

    fn embed_batch(&self, inputs: &[String]) -> Result<Vec<Vec<f32>>, ModelError> {
        let url = self.http.scrub(&self.url);
        let body = json!({ "model": self.opts.model, "input": inputs });
        let resp = self
            .http
            .post_json(&self.url, &body, ModelPurpose::Embedding)?;
        let embs = resp
            .get("embeddings")
            .and_then(|d| d.as_array())
            .ok_or_else(|| invalid(&url, "no `embeddings` array in the response"))?;
        if embs.len() != inputs.len() {
            return Err(invalid(
                &url,
                format!(
                    "sent {} inputs but received {} vectors",
                    inputs.len(),
                    embs.len()
                ),
            ));
        }
        let vectors = embs
            .iter()
            .map(|v| parse_vector(&url, v, "embeddings[]"))
            .collect::<Result<Vec<_>, _>>()?;
        self.identity.check(&url, &vectors, None)?;
        Ok(vectors)
    }
}

remote_embedder!(OllamaEmbedder);

// ---------------------------------------------------------------------------------------------
// /rerank APIs
// ---------------------------------------------------------------------------------------------

/// Request shape of a rerank API. Responses of every shape are understood either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RerankApiFlavor {
    /// DashScope when the URL looks like DashScope's native `…/services/rerank/…`, else Standard.
    #[default]
    Auto,
    /// Jina / Cohere / compatible: `{model, query, documents, top_n}`.
    Standard,
    /// DashScope native: `{model, input: {query, documents}, parameters: {top_n, return_documents}}`.
    DashScope,
}

/// Options for [`ApiReranker`].
#[derive(Debug, Clone)]
pub struct ApiRerankerOptions {
    /// Full endpoint URL, e.g. `https://api.jina.ai/v1/rerank`.
    pub url: String,
    /// Model name sent in every request.
    pub model: String,
    /// The API key (`None`: no Authorization header).
    pub api_key: Option<ApiKey>,
    /// Request and response shape.
    pub flavor: RerankApiFlavor,
    /// Documents per request (default 100).
    pub batch_size: usize,
    /// The API returns raw logits: map them through a sigmoid instead of clamping to 0..1.
    pub scores_are_logits: bool,
    /// Whole-request timeout (default 120 s).
    pub timeout: Duration,
}

impl ApiRerankerOptions {
    /// Options for `model` at `url`: no key, shape chosen from the URL, 100 documents per request.
    pub fn new(url: impl Into<String>, model: impl Into<String>) -> Self {
        ApiRerankerOptions {
            url: url.into(),
            model: model.into(),
            api_key: None,
            flavor: RerankApiFlavor::Auto,
            batch_size: 100,
            scores_are_logits: false,
            timeout: Duration::from_secs(120),
        }
    }
}

/// A reranker behind a Jina / Cohere / DashScope-shaped `/rerank` endpoint.
///
/// Parses `results[].{index, relevance_score}` (Jina, Cohere), `output.results[]`
/// (DashScope) and a bare `[{index, score}]` array (text-embeddings-inference). Passages the
/// server leaves out of its results score 0.
#[derive(Debug)]
pub struct ApiReranker {
    http: Http,
    opts: ApiRerankerOptions,
    flavor: RerankApiFlavor,
    identity: ModelIdentity,
}

impl ApiReranker {
    /// Checks the options and takes the key; sends nothing.
    pub fn new(opts: ApiRerankerOptions) -> Result<Self, ModelError> {
        if opts.batch_size == 0 {
            return Err(ModelError::InvalidInput("batch_size must be > 0".into()));
        }
        let key = read_key(opts.api_key.as_ref())?;
        let flavor = match opts.flavor {
            RerankApiFlavor::Auto => {
                let u = opts.url.to_ascii_lowercase();
                if u.contains("dashscope") && u.contains("/services/rerank") {
                    RerankApiFlavor::DashScope
                } else {
                    RerankApiFlavor::Standard
                }
            }
            f => f,
        };
        Ok(ApiReranker {
            http: Http::new(key, opts.timeout, &opts.url)?,
            identity: ModelIdentity {
                name: opts.model.clone(),
                dimensions: 0,
                revision: opts.model.clone(),
            },
            flavor,
            opts,
        })
    }

    fn score_batch(&self, query: &str, docs: &[&str]) -> Result<Vec<f32>, ModelError> {
        let url = self.http.scrub(&self.opts.url);
        let body = match self.flavor {
            RerankApiFlavor::DashScope => json!({
                "model": self.opts.model,
                "input": { "query": query, "documents": docs },
                "parameters": { "top_n": docs.len(), "return_documents": false },
            }),
            _ => json!({
                "model": self.opts.model,
                "query": query,
                "documents": docs,
                "top_n": docs.len(),
            }),
        };
        let resp = self
            .http
            .post_json(&self.opts.url, &body, ModelPurpose::Rerank)?;
        let results = resp
            .get("results")
            .or_else(|| resp.get("output").and_then(|o| o.get("results")))
            .or(if resp.is_array() { Some(&resp) } else { None })
            .and_then(|r| r.as_array())
            .ok_or_else(|| {
                invalid(
                    &url,
                    "no `results` array (expected `results[]`, `output.results[]` or a bare array)",
                )
            })?;
        let mut scores = vec![0f32; docs.len()];
        let mut seen = vec![false; docs.len()];
        for r in results {
            let index = r
                .get("index")
                .and_then(|i| i.as_u64())
                .ok_or_else(|| invalid(&url, "a result has no integer `index`"))?
                as usize;
            let raw = r
                .get("relevance_score")
                .or_else(|| r.get("score"))
                .and_then(|s| s.as_f64())
                .ok_or_else(|| invalid(&url, "a result has no numeric `relevance_score`"))?
                as f32;
            if index >= docs.len() {
                return Err(invalid(
                    &url,
                    format!(
                        "result index {index} but only {} documents were sent",
                        docs.len()
                    ),
                ));
            }
            if seen[index] {
                return Err(invalid(&url, format!("result index {index} appears twice")));
            }
            seen[index] = true;
            scores[index] = if self.opts.scores_are_logits {
                1.0 / (1.0 + (-raw).exp())
            } else if raw.is_finite() {
                raw.clamp(0.0, 1.0)
            } else {
                0.0
            };
        }
        Ok(scores)
    }
}

impl Reranker for ApiReranker {
    fn identity(&self) -> &ModelIdentity {
        &self.identity
    }

    fn score(&self, query: &str, passages: &[&str]) -> Result<Vec<f32>, ModelError> {
        let mut out = Vec::with_capacity(passages.len());
        for chunk in passages.chunks(self.opts.batch_size) {
            out.extend(self.score_batch(query, chunk)?);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(
            openai_url("https://api.openai.com"),
            "https://api.openai.com/v1/embeddings"
        );
        assert_eq!(openai_url("http://h:1/v1/"), "http://h:1/v1/embeddings");
        assert_eq!(
            openai_url("http://h:1/v1/embeddings"),
            "http://h:1/v1/embeddings"
        );
    }

    #[test]
    fn estimates() {
        assert_eq!(estimate_tokens(""), 0);
        assert_eq!(estimate_tokens("abcd"), 1);
        assert_eq!(estimate_tokens("南瓜 soup"), 4);
    }

    #[test]
    fn the_key_follows_redirects_to_the_same_host_only() {
        let u = |s: &str| reqwest::Url::parse(s).unwrap();
        let hub = u("https://hf.co/org/m/resolve/main/x");
        assert!(same_host(&hub, &u("https://hf.co/api/other")));
        assert!(
            same_host(&u("http://h:1/a"), &u("https://h:2/b")),
            "up to https"
        );
        assert!(!same_host(&hub, &u("http://hf.co/x")), "never down to http");
        assert!(!same_host(&hub, &u("https://cdn.hf.co/x")));
        assert!(!same_host(&hub, &u("https://127.0.0.2/x")));
    }

    #[test]
    fn secret_debug_is_redacted() {
        let s = Secret("sk-very-secret".into());
        assert_eq!(format!("{s:?}"), "[REDACTED]");
    }
}
