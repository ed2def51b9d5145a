//! OpenAI-compatible chat completions (OpenAI, DeepSeek, Qwen/DashScope, Ollama, vLLM,
//! llama.cpp server), streamed. Tool-call deltas are put together here, by their `index`, so
//! the chat loop only ever sees whole calls (seed 003's decision: "LLM Provider 累积 tool_call
//! 增量"). Retries cover what can be retried without repeating output: HTTP 429 / 5xx and
//! connection failures before the first byte of the answer.

use std::fmt;
use std::time::Duration;

use futures_util::StreamExt;
use serde::Serialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// Longest wait a `Retry-After` may ask for.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);
/// Largest error body read from a provider.
const ERROR_BODY_BYTES: usize = 64 * 1024;
/// Largest streamed answer (text and tool arguments together): a provider that never stops
/// is cut off here rather than growing memory without bound.
const MAX_STREAM_BYTES: usize = 8 * 1024 * 1024;

/// Which API family a spec names; fixes the default base URL and key variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderKind {
    /// OpenAI or any OpenAI-compatible server (vLLM, llama.cpp).
    OpenAi,
    /// DeepSeek's API.
    DeepSeek,
    /// Qwen on DashScope's OpenAI-compatible API.
    Qwen,
    /// An Ollama server's OpenAI-compatible API.
    Ollama,
}

impl ProviderKind {
    fn prefix(self) -> &'static str {
        match self {
            ProviderKind::OpenAi => "openai",
            ProviderKind::DeepSeek => "deepseek",
            ProviderKind::Qwen => "qwen",
            ProviderKind::Ollama => "ollama",
        }
    }
}

/// A configured chat provider. `Debug` never shows the key.
#[derive(Clone)]
pub struct ProviderConfig {
    /// The API family.
    pub kind: ProviderKind,
    /// The model name sent in every request.
    pub model: String,
    /// The API base, ending before `/chat/completions`.
    pub base_url: String,
    api_key: Option<String>,
    /// Longest silence: connecting, waiting for the first byte, between two chunks.
    pub timeout: Duration,
    /// Retries after the first attempt.
    pub retries: u32,
}

impl fmt::Debug for ProviderConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProviderConfig")
            .field("kind", &self.kind)
            .field("model", &self.model)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .field("timeout", &self.timeout)
            .field("retries", &self.retries)
            .finish()
    }
}

impl ProviderConfig {
    /// Reads a spec (`openai:MODEL`, `deepseek:MODEL`, `qwen:MODEL`, `ollama:MODEL`) and the
    /// settings `env` returns (`QUARRY_CHAT_BASE_URL`, `QUARRY_CHAT_API_KEY`, the provider's
    /// own key variable, `QUARRY_CHAT_TIMEOUT`, `QUARRY_CHAT_RETRIES`, `OPENAI_BASE_URL`,
    /// `OLLAMA_HOST`).
    pub fn parse(spec: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let spec = spec.trim();
        let (prefix, model) = spec.split_once(':').ok_or_else(|| ConfigError::Spec {
            spec: spec.to_owned(),
        })?;
        let kind = match prefix {
            "openai" => ProviderKind::OpenAi,
            "deepseek" => ProviderKind::DeepSeek,
            "qwen" | "dashscope" => ProviderKind::Qwen,
            "ollama" => ProviderKind::Ollama,
            other => {
                return Err(ConfigError::UnknownProvider {
                    spec: spec.to_owned(),
                    provider: other.to_owned(),
                });
            }
        };
        let model = model.trim();
        if model.is_empty() {
            return Err(ConfigError::EmptyModel {
                spec: spec.to_owned(),
            });
        }
        let set = |k: &str| {
            env(k)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let base_url = match set("QUARRY_CHAT_BASE_URL") {
            Some(b) => b,
            None => match kind {
                ProviderKind::OpenAi => {
                    set("OPENAI_BASE_URL").unwrap_or_else(|| "https://api.openai.com/v1".into())
                }
                ProviderKind::DeepSeek => "https://api.deepseek.com/v1".into(),
                ProviderKind::Qwen => "https://dashscope.aliyuncs.com/compatible-mode/v1".into(),
                ProviderKind::Ollama => {
                    let host = set("OLLAMA_HOST").unwrap_or_else(|| "127.0.0.1:11434".into());
                    let host = if host.contains("://") {
                        host
                    } else {
                        format!("http://{host}")
                    };
                    format!("{}/v1", host.trim_end_matches('/'))
                }
            },
        };
        let base_url = base_url.trim_end_matches('/').to_owned();
        let bad_url = |reason: String| ConfigError::BaseUrl {
            url: base_url.clone(),
            reason,
        };
        let parsed = reqwest::Url::parse(&base_url).map_err(|e| bad_url(e.to_string()))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(bad_url("only http and https are supported".to_owned()));
        }
        let key_var = match kind {
            ProviderKind::OpenAi => Some("OPENAI_API_KEY"),
            ProviderKind::DeepSeek => Some("DEEPSEEK_API_KEY"),
            ProviderKind::Qwen => Some("DASHSCOPE_API_KEY"),
            ProviderKind::Ollama => None,
        };
        let api_key = set("QUARRY_CHAT_API_KEY").or_else(|| key_var.and_then(set));
        let hosted = [
            "api.openai.com",
            "api.deepseek.com",
            "dashscope.aliyuncs.com",
        ];
        if api_key.is_none() && parsed.host_str().is_some_and(|h| hosted.contains(&h)) {
            return Err(ConfigError::MissingKey {
                spec: spec.to_owned(),
                base_url,
                key_var,
            });
        }
        let secs = |k: &str, default: u64| -> Result<u64, ConfigError> {
            match set(k) {
                None => Ok(default),
                Some(v) => v
                    .parse::<u64>()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| ConfigError::setting(k, v, "a positive number of seconds")),
            }
        };
        let timeout = Duration::from_secs(secs("QUARRY_CHAT_TIMEOUT", 120)?);
        let retries = match set("QUARRY_CHAT_RETRIES") {
            None => 3,
            Some(v) => v
                .parse::<u32>()
                .ok()
                .filter(|n| *n <= 10)
                .ok_or_else(|| ConfigError::setting("QUARRY_CHAT_RETRIES", v, "0 to 10"))?,
        };
        Ok(ProviderConfig {
            kind,
            model: model.to_owned(),
            base_url,
            api_key,
            timeout,
            retries,
        })
    }

    /// `provider:model`, for logs and `/health` (no URL, no key).
    pub fn label(&self) -> String {
        format!("{}:{}", self.kind.prefix(), self.model)
    }
}

/// A complete tool call, its arguments as the model wrote them (JSON text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    /// The provider's id for the call.
    pub id: String,
    /// The function's (wire) name.
    pub name: String,
    /// The arguments as the model wrote them (JSON text).
    pub arguments: String,
}

/// Token counts as the provider reported them (zeros when it did not).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Usage {
    /// Tokens of the prompt.
    pub prompt_tokens: u64,
    /// Tokens of the answer.
    pub completion_tokens: u64,
    /// Both.
    pub total_tokens: u64,
}

impl Usage {
    /// Adds another completion's counts.
    pub fn add(&mut self, other: Usage) {
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.total_tokens += other.total_tokens;
    }
}

/// One streamed completion, put together.
#[derive(Debug, Clone, Default)]
pub struct Completion {
    /// The answer's text.
    pub content: String,
    /// Tools the model called.
    pub tool_calls: Vec<ToolCall>,
    /// `stop`, `tool_calls`, `length`, `content_filter`, … (`stop` when the stream ended
    /// without one).
    pub finish_reason: String,
    /// Tokens the provider counted.
    pub usage: Usage,
}

/// Why a completion failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderError {
    /// The provider answered an error status (after retries, for retryable ones).
    Status {
        /// The HTTP status.
        status: u16,
        /// The provider's error message.
        message: String,
    },
    /// Unreachable, timed out, or the stream broke off.
    Unavailable(String),
    /// The provider answered something that is not a chat completion.
    Protocol(String),
    /// The caller cancelled.
    Cancelled,
}

impl fmt::Display for ProviderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProviderError::Status { status, message } => {
                write!(f, "the chat model's API answered HTTP {status}: {message}")
            }
            ProviderError::Unavailable(m) => write!(f, "the chat model's API is unavailable: {m}"),
            ProviderError::Protocol(m) => write!(f, "the chat model's API answered oddly: {m}"),
            ProviderError::Cancelled => f.write_str("cancelled"),
        }
    }
}

impl std::error::Error for ProviderError {}

/// Why chat's configuration was refused: the provider spec, its API's URL or key, a setting,
/// or the HTTP client. The messages name the spec or the variable at fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// The spec is not `provider:MODEL`.
    Spec {
        /// The spec as given (trimmed).
        spec: String,
    },
    /// The spec names a provider this crate does not know.
    UnknownProvider {
        /// The spec.
        spec: String,
        /// The part before the `:`.
        provider: String,
    },
    /// The spec's model name is empty.
    EmptyModel {
        /// The spec.
        spec: String,
    },
    /// The API base URL is not an http or https URL.
    BaseUrl {
        /// The URL.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A hosted API and no key for it.
    MissingKey {
        /// The spec.
        spec: String,
        /// The API's base URL.
        base_url: String,
        /// The provider's own key variable, besides `QUARRY_CHAT_API_KEY`.
        key_var: Option<&'static str>,
    },
    /// A variable holds a value out of its range.
    Setting {
        /// The variable.
        var: String,
        /// Its value (trimmed).
        value: String,
        /// What it must be, e.g. `0 to 10`.
        expected: String,
    },
    /// The HTTP client could not be built.
    Client(String),
}

impl ConfigError {
    /// `var` holds `value`, which is not `expected`.
    pub(crate) fn setting(var: &str, value: String, expected: impl Into<String>) -> Self {
        ConfigError::Setting {
            var: var.to_owned(),
            value,
            expected: expected.into(),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Spec { spec } => write!(
                f,
                "chat model '{spec}': expected openai:MODEL, deepseek:MODEL, qwen:MODEL or ollama:MODEL"
            ),
            ConfigError::UnknownProvider { spec, provider } => write!(
                f,
                "chat model '{spec}': unknown provider '{provider}' (use openai, deepseek, qwen or ollama; vLLM and llama.cpp servers are openai:MODEL with QUARRY_CHAT_BASE_URL)"
            ),
            ConfigError::EmptyModel { spec } => {
                write!(f, "chat model '{spec}': the model name is empty")
            }
            ConfigError::BaseUrl { url, reason } => {
                write!(f, "chat API base URL '{url}': {reason}")
            }
            ConfigError::MissingKey {
                spec,
                base_url,
                key_var,
            } => {
                write!(
                    f,
                    "chat model '{spec}' at {base_url} needs an API key: set QUARRY_CHAT_API_KEY"
                )?;
                match key_var {
                    Some(v) => write!(f, " or {v}"),
                    None => Ok(()),
                }
            }
            ConfigError::Setting {
                var,
                value,
                expected,
            } => write!(f, "{var} must be {expected}, got '{value}'"),
            ConfigError::Client(reason) => write!(f, "cannot build the chat client: {reason}"),
        }
    }
}

impl std::error::Error for ConfigError {}

/// A request: OpenAI-shaped messages and tool definitions, borrowed (a tool loop sends the
/// same growing conversation every round).
#[derive(Debug, Clone, Copy, Default)]
pub struct CompletionRequest<'a> {
    /// The conversation so far.
    pub messages: &'a [Value],
    /// `{"type":"function","function":{…}}` entries; empty: none offered.
    pub tools: &'a [Value],
    /// `auto` when unset and tools are offered; `none` keeps them described but uncallable.
    pub tool_choice: Option<&'static str>,
    /// Another model at the same provider.
    pub model: Option<&'a str>,
    /// Sampling temperature; unset: the provider's default.
    pub temperature: Option<f64>,
}

/// The body of `POST /chat/completions`.
#[derive(Serialize)]
struct RequestBody<'a> {
    model: &'a str,
    messages: &'a [Value],
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<Value>,
    #[serde(skip_serializing_if = "<[Value]>::is_empty")]
    tools: &'a [Value],
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
}

/// A chat provider: one HTTP client, reused.
pub struct Provider {
    config: ProviderConfig,
    client: reqwest::Client,
}

impl Provider {
    /// A client for `config` (sends nothing yet).
    pub fn new(config: ProviderConfig) -> Result<Provider, ConfigError> {
        quarry_netguard::ensure_crypto_provider();
        let client = reqwest::Client::builder()
            .connect_timeout(config.timeout.min(Duration::from_secs(30)))
            .read_timeout(config.timeout)
            .user_agent(concat!("quarry/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ConfigError::Client(e.to_string()))?;
        Ok(Provider { config, client })
    }

    /// The configuration it runs with.
    pub fn config(&self) -> &ProviderConfig {
        &self.config
    }

    /// The request serialized once (retries resend the same bytes).
    fn body(&self, req: &CompletionRequest<'_>, stream: bool) -> Result<Vec<u8>, ProviderError> {
        let body = RequestBody {
            model: req.model.unwrap_or(&self.config.model),
            messages: req.messages,
            stream,
            stream_options: stream.then(|| json!({"include_usage": true})),
            tools: req.tools,
            tool_choice: (!req.tools.is_empty()).then(|| req.tool_choice.unwrap_or("auto")),
            temperature: req.temperature,
        };
        serde_json::to_vec(&body)
            .map_err(|e| ProviderError::Protocol(format!("cannot encode the request: {e}")))
    }

    /// Sends `body`, retrying 429 / 5xx / connection failures with backoff; returns the
    /// first successful response (headers read, body not yet).
    async fn send(
        &self,
        body: &[u8],
        cancel: &CancellationToken,
    ) -> Result<reqwest::Response, ProviderError> {
        let url = format!("{}/chat/completions", self.config.base_url);
        let mut attempt = 0u32;
        loop {
            let mut request = self
                .client
                .post(&url)
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.to_vec());
            if let Some(key) = &self.config.api_key {
                let mut value = reqwest::header::HeaderValue::from_str(&format!("Bearer {key}"))
                    .map_err(|_| {
                        ProviderError::Protocol("the API key holds invalid characters".into())
                    })?;
                value.set_sensitive(true);
                request = request.header(reqwest::header::AUTHORIZATION, value);
            }
            let sent = tokio::select! {
                r = request.send() => r,
                _ = cancel.cancelled() => return Err(ProviderError::Cancelled),
            };
            let (error, retry_after) = match sent {
                Ok(resp) if resp.status().is_success() => return Ok(resp),
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    let retry_after = resp
                        .headers()
                        .get(reqwest::header::RETRY_AFTER)
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.trim().parse::<f64>().ok())
                        .filter(|s| s.is_finite() && *s >= 0.0)
                        .map(|s| Duration::from_secs_f64(s).min(MAX_RETRY_AFTER));
                    let message = error_message(resp).await;
                    let error = ProviderError::Status { status, message };
                    if status != 429 && status < 500 {
                        return Err(error);
                    }
                    (error, retry_after)
                }
                Err(e) => (ProviderError::Unavailable(describe(&e)), None),
            };
            if attempt >= self.config.retries {
                return Err(error);
            }
            let backoff = Duration::from_millis(500u64.saturating_mul(1 << attempt.min(6)));
            let wait = retry_after.unwrap_or(backoff);
            tracing::warn!(attempt = attempt + 1, wait_ms = wait.as_millis() as u64, error = %error, "chat model request failed; retrying");
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = cancel.cancelled() => return Err(ProviderError::Cancelled),
            }
            attempt += 1;
        }
    }

    /// Streams a completion, calling `on_text` with each piece of answer text as it
    /// arrives; tool calls are returned whole.
    pub async fn stream(
        &self,
        req: &CompletionRequest<'_>,
        on_text: &mut (dyn FnMut(&str) + Send),
        cancel: &CancellationToken,
    ) -> Result<Completion, ProviderError> {
        let body = self.body(req, true)?;
        let resp = self.send(&body, cancel).await?;
        let is_json = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        if is_json {
            // Some servers ignore `stream: true` and answer one object.
            let v = read_json(resp, cancel).await?;
            let completion = parse_completion(&v)?;
            if !completion.content.is_empty() {
                on_text(&completion.content);
            }
            return Ok(completion);
        }
        let mut acc = Accumulator::default();
        let mut lines = LineBuffer::default();
        let mut stream = resp.bytes_stream();
        let mut received = 0usize;
        loop {
            let chunk = tokio::select! {
                c = stream.next() => c,
                _ = cancel.cancelled() => return Err(ProviderError::Cancelled),
            };
            let Some(chunk) = chunk else { break };
            let chunk = chunk.map_err(|e| {
                ProviderError::Unavailable(format!("the answer broke off: {}", describe(&e)))
            })?;
            received += chunk.len();
            if received > MAX_STREAM_BYTES {
                return Err(ProviderError::Protocol(format!(
                    "the answer exceeded {} MiB",
                    MAX_STREAM_BYTES / (1024 * 1024)
                )));
            }
            for line in lines.push(&chunk) {
                if acc.feed_line(&line, on_text)? {
                    return Ok(acc.finish());
                }
            }
        }
        if let Some(line) = lines.rest()
            && acc.feed_line(&line, on_text)?
        {
            return Ok(acc.finish());
        }
        if acc.saw_chunk {
            // No `[DONE]`: some servers just close the stream.
            Ok(acc.finish())
        } else {
            Err(ProviderError::Protocol(
                "the stream ended before any completion chunk".into(),
            ))
        }
    }

    /// One non-streamed completion without tools; its text.
    pub async fn complete(
        &self,
        req: &CompletionRequest<'_>,
        cancel: &CancellationToken,
    ) -> Result<String, ProviderError> {
        let body = self.body(req, false)?;
        let resp = self.send(&body, cancel).await?;
        let v = read_json(resp, cancel).await?;
        Ok(parse_completion(&v)?.content)
    }
}

/// A reqwest error without the URL's query string or anything else that might carry a
/// secret: its kind and the innermost cause.
fn describe(e: &reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "cannot connect"
    } else if e.is_body() || e.is_decode() {
        "the response body failed"
    } else {
        "request failed"
    };
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    let mut inner = None;
    while let Some(s) = source {
        inner = Some(s.to_string());
        source = s.source();
    }
    match inner {
        Some(i) => format!("{kind} ({i})"),
        None => kind.to_owned(),
    }
}

async fn read_json(
    resp: reqwest::Response,
    cancel: &CancellationToken,
) -> Result<Value, ProviderError> {
    let bytes = tokio::select! {
        b = resp.bytes() => b.map_err(|e| ProviderError::Unavailable(describe(&e)))?,
        _ = cancel.cancelled() => return Err(ProviderError::Cancelled),
    };
    serde_json::from_slice(&bytes)
        .map_err(|e| ProviderError::Protocol(format!("the response is not JSON: {e}")))
}

/// The message of an error response: OpenAI's `error.message` (also DashScope's `message`,
/// Ollama's `error` string), else the start of the body.
async fn error_message(resp: reqwest::Response) -> String {
    let mut body = Vec::new();
    let mut stream = resp.bytes_stream();
    while let Some(Ok(chunk)) = stream.next().await {
        body.extend_from_slice(&chunk);
        if body.len() >= ERROR_BODY_BYTES {
            break;
        }
    }
    let text = String::from_utf8_lossy(&body);
    if let Ok(v) = serde_json::from_str::<Value>(&text)
        && let Some(m) = error_text(&v)
    {
        return clip(&m, 500);
    }
    let text = text.trim();
    if text.is_empty() {
        "(no message)".into()
    } else {
        clip(text, 300)
    }
}

fn error_text(v: &Value) -> Option<String> {
    match v.get("error") {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Object(o)) => o
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| Some(Value::Object(o.clone()).to_string())),
        _ => v.get("message").and_then(Value::as_str).map(str::to_owned),
    }
}

fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let mut out: String = s.chars().take(max).collect();
    out.push('…');
    out
}

/// A non-streamed `chat.completion` object.
fn parse_completion(v: &Value) -> Result<Completion, ProviderError> {
    if let Some(m) = error_text(v).filter(|_| v.get("error").is_some()) {
        return Err(ProviderError::Status {
            status: 200,
            message: clip(&m, 500),
        });
    }
    let choice = v
        .get("choices")
        .and_then(|c| c.get(0))
        .ok_or_else(|| ProviderError::Protocol("no choices in the response".into()))?;
    let message = choice.get("message").cloned().unwrap_or(Value::Null);
    let content = message
        .get("content")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let mut tool_calls = Vec::new();
    for (i, call) in message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let f = call.get("function").cloned().unwrap_or(Value::Null);
        tool_calls.push(ToolCall {
            id: call
                .get("id")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .unwrap_or_else(|| format!("call_{i}")),
            name: f
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
            arguments: match f.get("arguments") {
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
                None => String::new(),
            },
        });
    }
    Ok(Completion {
        content,
        tool_calls,
        finish_reason: choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .unwrap_or("stop")
            .to_owned(),
        usage: parse_usage(v.get("usage")),
    })
}

fn parse_usage(v: Option<&Value>) -> Usage {
    let n = |k: &str| {
        v.and_then(|u| u.get(k))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    let prompt = n("prompt_tokens");
    let completion = n("completion_tokens");
    let total = match n("total_tokens") {
        0 => prompt + completion,
        t => t,
    };
    Usage {
        prompt_tokens: prompt,
        completion_tokens: completion,
        total_tokens: total,
    }
}

/// Splits a byte stream into lines (LF or CRLF), keeping a partial line (and a partial UTF-8
/// sequence) for the next chunk.
#[derive(Default)]
struct LineBuffer {
    pending: Vec<u8>,
}

impl LineBuffer {
    fn push(&mut self, chunk: &[u8]) -> Vec<String> {
        self.pending.extend_from_slice(chunk);
        let mut out = Vec::new();
        while let Some(pos) = self.pending.iter().position(|&b| b == b'\n') {
            let mut line: Vec<u8> = self.pending.drain(..=pos).collect();
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            out.push(String::from_utf8_lossy(&line).into_owned());
        }
        out
    }

    fn rest(&mut self) -> Option<String> {
        let rest = std::mem::take(&mut self.pending);
        let s = String::from_utf8_lossy(&rest).trim().to_owned();
        (!s.is_empty()).then_some(s)
    }
}

/// One tool call being put together from deltas.
#[derive(Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// Puts a stream of `chat.completion.chunk`s together.
#[derive(Default)]
struct Accumulator {
    content: String,
    /// By the delta's `index` (its position when a server sends none).
    calls: Vec<(u64, PartialCall)>,
    finish_reason: Option<String>,
    usage: Usage,
    saw_chunk: bool,
    /// SSE `data:` lines of one event (an event may span several).
    data: Vec<String>,
}

impl Accumulator {
    /// Feeds one SSE line; true at `[DONE]`.
    fn feed_line(
        &mut self,
        line: &str,
        on_text: &mut (dyn FnMut(&str) + Send),
    ) -> Result<bool, ProviderError> {
        if line.is_empty() {
            return self.dispatch(on_text);
        }
        if line.starts_with(':') {
            return Ok(false); // a comment (keep-alive)
        }
        if let Some(data) = line.strip_prefix("data:") {
            let data = data.strip_prefix(' ').unwrap_or(data);
            // Most servers send one JSON object per line without blank lines in between
            // reliably; dispatch a line as soon as it parses, so either framing works.
            if self.data.is_empty()
                && (data == "[DONE]" || serde_json::from_str::<Value>(data).is_ok())
            {
                self.data.push(data.to_owned());
                return self.dispatch(on_text);
            }
            self.data.push(data.to_owned());
        }
        // `event:`, `id:`, `retry:` lines carry nothing a completion needs.
        Ok(false)
    }

    fn dispatch(&mut self, on_text: &mut (dyn FnMut(&str) + Send)) -> Result<bool, ProviderError> {
        if self.data.is_empty() {
            return Ok(false);
        }
        let data = std::mem::take(&mut self.data).join("\n");
        let data = data.trim();
        if data == "[DONE]" {
            return Ok(true);
        }
        let v: Value = serde_json::from_str(data).map_err(|e| {
            ProviderError::Protocol(format!(
                "a stream chunk is not JSON ({e}): {}",
                clip(data, 120)
            ))
        })?;
        if v.get("error").is_some() {
            let message = error_text(&v).unwrap_or_else(|| "error".into());
            let status = v
                .get("error")
                .and_then(|e| e.get("code"))
                .and_then(Value::as_u64)
                .and_then(|c| u16::try_from(c).ok())
                .filter(|c| (400..600).contains(c))
                .unwrap_or(500);
            return Err(ProviderError::Status {
                status,
                message: clip(&message, 500),
            });
        }
        self.saw_chunk = true;
        if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
            self.usage = parse_usage(Some(u));
        }
        for choice in v
            .get("choices")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            // One answer only (`n` is never set above 1).
            if choice.get("index").and_then(Value::as_u64).unwrap_or(0) != 0 {
                continue;
            }
            let delta = choice.get("delta").or_else(|| choice.get("message"));
            if let Some(delta) = delta {
                if let Some(text) = delta.get("content").and_then(Value::as_str)
                    && !text.is_empty()
                {
                    self.content.push_str(text);
                    on_text(text);
                }
                for (pos, call) in delta
                    .get("tool_calls")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .enumerate()
                {
                    self.feed_call(pos, call);
                }
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                self.finish_reason = Some(reason.to_owned());
            }
        }
        Ok(false)
    }

    fn feed_call(&mut self, pos: usize, call: &Value) {
        let id = call
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        let index = match call.get("index").and_then(Value::as_u64) {
            Some(i) => i,
            // No index: a new id starts a call; no id continues the last one.
            None => match id {
                Some(id) => match self.calls.iter().find(|(_, c)| c.id == id) {
                    Some((i, _)) => *i,
                    None => self.calls.len() as u64 + pos as u64,
                },
                None => self.calls.last().map(|(i, _)| *i).unwrap_or(0),
            },
        };
        let slot = match self.calls.iter().position(|(i, _)| *i == index) {
            Some(p) => p,
            None => {
                self.calls.push((index, PartialCall::default()));
                self.calls.len() - 1
            }
        };
        let partial = &mut self.calls[slot].1;
        if let Some(id) = id
            && partial.id.is_empty()
        {
            partial.id = id.to_owned();
        }
        if let Some(f) = call.get("function") {
            if let Some(name) = f.get("name").and_then(Value::as_str) {
                // Names arrive whole in the first delta; a server repeating it must not
                // double it.
                if partial.name.is_empty() {
                    partial.name = name.to_owned();
                } else if partial.name != name {
                    partial.name.push_str(name);
                }
            }
            match f.get("arguments") {
                Some(Value::String(s)) => partial.arguments.push_str(s),
                // Some servers send the arguments as an object, whole.
                Some(v @ Value::Object(_)) => partial.arguments = v.to_string(),
                _ => {}
            }
        }
    }

    fn finish(self) -> Completion {
        let mut calls = self.calls;
        calls.sort_by_key(|(i, _)| *i);
        let tool_calls: Vec<ToolCall> = calls
            .into_iter()
            .enumerate()
            .filter(|(_, (_, c))| !c.name.is_empty())
            .map(|(n, (_, c))| ToolCall {
                id: if c.id.is_empty() {
                    format!("call_{n}")
                } else {
                    c.id
                },
                name: c.name,
                arguments: c.arguments,
            })
            .collect();
        Completion {
            content: self.content,
            finish_reason: self.finish_reason.unwrap_or_else(|| {
                if tool_calls.is_empty() {
                    "stop".into()
                } else {
                    "tool_calls".into()
                }
            }),
            tool_calls,
            usage: self.usage,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
    }

    fn feed(chunks: &[&str]) -> (Completion, String) {
        let mut acc = Accumulator::default();
        let mut lines = LineBuffer::default();
        let mut text = String::new();
        let mut on_text = |t: &str| text.push_str(t);
        'outer: for c in chunks {
            for line in lines.push(c.as_bytes()) {
                if acc.feed_line(&line, &mut on_text).unwrap() {
                    break 'outer;
                }
            }
        }
        (acc.finish(), text)
    }

    #[test]
    fn specs() {
        let c = ProviderConfig::parse(
            "openai:gpt-4o-mini",
            &env_of(&[("QUARRY_CHAT_BASE_URL", "http://127.0.0.1:9/v1/")]),
        )
        .unwrap();
        assert_eq!(c.base_url, "http://127.0.0.1:9/v1");
        assert_eq!(c.model, "gpt-4o-mini");
        assert!(c.api_key.is_none());
        let c = ProviderConfig::parse(
            "deepseek:deepseek-chat",
            &env_of(&[("DEEPSEEK_API_KEY", "sk-secret")]),
        )
        .unwrap();
        assert_eq!(c.base_url, "https://api.deepseek.com/v1");
        assert!(!format!("{c:?}").contains("sk-secret"));
        let e = ProviderConfig::parse("qwen:qwen-plus", &env_of(&[])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "chat model 'qwen:qwen-plus' at https://dashscope.aliyuncs.com/compatible-mode/v1 \
             needs an API key: set QUARRY_CHAT_API_KEY or DASHSCOPE_API_KEY"
        );
        let c = ProviderConfig::parse("ollama:llama3", &env_of(&[("OLLAMA_HOST", "h:1")])).unwrap();
        assert_eq!(c.base_url, "http://h:1/v1");
        assert!(ProviderConfig::parse("gpt-4", &env_of(&[])).is_err());
        assert!(ProviderConfig::parse("bard:x", &env_of(&[])).is_err());
        assert!(ProviderConfig::parse("openai:", &env_of(&[])).is_err());
        let e = ProviderConfig::parse(
            "openai:m",
            &env_of(&[
                ("QUARRY_CHAT_BASE_URL", "http://x/v1"),
                ("QUARRY_CHAT_TIMEOUT", "0"),
            ]),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "QUARRY_CHAT_TIMEOUT must be a positive number of seconds, got '0'"
        );
        assert!(
            ProviderConfig::parse("openai:m", &env_of(&[("QUARRY_CHAT_BASE_URL", "ftp://x")]))
                .is_err()
        );
    }

    #[test]
    fn text_split_across_chunks_and_lines() {
        let (c, text) = feed(&[
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hel\"}}]}\n",
            "\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo, 世",
            "界\"}}]}\r\n\r\n: keep-alive\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"length\"}]}\n\n",
            "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":3,\"total_tokens\":10}}\n\ndata: [DONE]\n\n",
        ]);
        assert_eq!(text, "Hello, 世界");
        assert_eq!(c.content, "Hello, 世界");
        assert_eq!(c.finish_reason, "length");
        assert_eq!(c.usage.total_tokens, 10);
        assert!(c.tool_calls.is_empty());
    }

    #[test]
    fn parallel_tool_calls_interleaved() {
        let (c, _) = feed(&[
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_a\",\"type\":\"function\",\"function\":{\"name\":\"w__echo\",\"arguments\":\"\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"call_b\",\"type\":\"function\",\"function\":{\"name\":\"t__time\",\"arguments\":\"{\\\"tz\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"message\\\":\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"\",\"function\":{\"arguments\":\"\\\":\\\"UTC\\\"}\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"hi\\\"}\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n",
        ]);
        assert_eq!(c.finish_reason, "tool_calls");
        assert_eq!(
            c.tool_calls,
            vec![
                ToolCall {
                    id: "call_a".into(),
                    name: "w__echo".into(),
                    arguments: "{\"message\":\"hi\"}".into()
                },
                ToolCall {
                    id: "call_b".into(),
                    name: "t__time".into(),
                    arguments: "{\"tz\":\"UTC\"}".into()
                },
            ]
        );
    }

    #[test]
    fn calls_without_index_or_done() {
        // Ollama-style: whole calls, object arguments, `stop`, no [DONE].
        let (c, _) = feed(&[
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"id\":\"c1\",\"function\":{\"name\":\"a\",\"arguments\":{\"x\":1}}}]},\"finish_reason\":\"stop\"}]}\n\n",
        ]);
        assert_eq!(c.tool_calls.len(), 1);
        assert_eq!(c.tool_calls[0].arguments, "{\"x\":1}");
        assert_eq!(c.finish_reason, "stop");
    }

    #[test]
    fn error_chunks_and_bodies() {
        let mut acc = Accumulator::default();
        let mut sink = |_: &str| {};
        let e = acc
            .feed_line(
                "data: {\"error\":{\"message\":\"overloaded\",\"code\":503}}",
                &mut sink,
            )
            .unwrap_err();
        assert_eq!(
            e,
            ProviderError::Status {
                status: 503,
                message: "overloaded".into()
            }
        );
        assert_eq!(
            error_text(&json!({"error": "model not found"})).as_deref(),
            Some("model not found")
        );
        assert_eq!(
            error_text(&json!({"code": "x", "message": "bad key"})).as_deref(),
            Some("bad key")
        );
        let c = parse_completion(&json!({
            "choices": [{"message": {"content": "ok", "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]}, "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 2, "completion_tokens": 1}
        }))
        .unwrap();
        assert_eq!(c.content, "ok");
        assert_eq!(c.tool_calls[0].id, "call_0");
        assert_eq!(c.usage.total_tokens, 3);
    }
}
