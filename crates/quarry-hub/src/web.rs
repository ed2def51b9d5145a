//! The built-in `web_search` tool (seed "RAG + MCP client + plugins" §5.3: a built-in plugin,
//! DuckDuckGo by default, no API key, enabled for every user unless they switch it off).
//!
//! The backend is the server admin's choice ([`WebSearchOptions::from_lookup`]):
//!
//! - **DuckDuckGo** (default): a form POST to its HTML endpoint (`q`, `kl=wt-wt`), results
//!   read from the markup (no HTML parser: the page's result blocks are regular — see
//!   [`parse_duckduckgo`]). DuckDuckGo rate-limits automated clients with an "anomaly" page
//!   (HTTP 202, a challenge form); that is reported as a refusal that names the way out
//!   (`QUARRY_WEB_SEARCH=searxng`).
//! - **SearXNG**: `GET {url}/search?q=…&format=json` on an instance the admin runs (its
//!   `settings.yml` must list `json` in `search.formats`, or it answers 403).
//!
//! The backend URL is configuration, not user input, so requests do not pass the users'
//! outbound guard ([`quarry_netguard`]). One `reqwest::Client` is kept per [`WebSearch`]; every
//! request has the configured timeout, follows at most 3 redirects and reads at most
//! [`MAX_BODY_BYTES`]. Failures are tool errors (`isError`) whose text names the backend and
//! the reason, with at most 200 characters of a response body.
//!
//! Whether a user sees the tool is the hub's ordinary per-owner toggle (`web.web_search` is
//! enabled unless its owner disabled it).

use std::collections::HashSet;
use std::sync::{Arc, LazyLock, OnceLock};
use std::time::Duration;

use regex::Regex;
use rmcp::model::{CallToolResult, ContentBlock, Tool, ToolAnnotations};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;
use url::Url;

use crate::catalog::BuiltinPackage;
use crate::fetch::{self, RawResponse};

/// The built-in package's id (tools are `web.<name>`).
pub const WEB_PACKAGE: &str = "web";
/// The one tool of [`WEB_PACKAGE`].
pub const WEB_SEARCH_TOOL: &str = "web_search";
/// DuckDuckGo's HTML endpoint (no JavaScript, no key).
pub const DEFAULT_DUCKDUCKGO_URL: &str = "https://html.duckduckgo.com/html/";
/// The request timeout when `QUARRY_WEB_SEARCH_TIMEOUT` is not set.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// The most results one call returns (the tool's `max_results` maximum).
pub const MAX_RESULTS: usize = 10;
/// `max_results` when the call gives none.
pub const DEFAULT_RESULTS: usize = 5;
/// The longest `query`, in characters.
pub const MAX_QUERY_CHARS: usize = 400;
/// The most of a response body that is read (2 MiB).
pub const MAX_BODY_BYTES: u64 = 2 << 20;
/// The longest snippet, in characters (longer ones end in `…`).
pub const MAX_SNIPPET_CHARS: usize = 300;
/// The most redirects a search request follows.
pub const MAX_REDIRECTS: usize = 3;
/// The User-Agent sent: DuckDuckGo's HTML endpoint refuses clients without a browser-like one.
pub const USER_AGENT: &str = concat!(
    "Mozilla/5.0 (compatible; Quarry/",
    env!("CARGO_PKG_VERSION"),
    "; +https://github.com/quarry)"
);

/// Selects the backend: `duckduckgo` (default), `searxng` or `off`.
pub const ENV_BACKEND: &str = "QUARRY_WEB_SEARCH";
/// Overrides the backend's URL (required for `searxng`).
pub const ENV_URL: &str = "QUARRY_WEB_SEARCH_URL";
/// The request timeout in seconds.
pub const ENV_TIMEOUT: &str = "QUARRY_WEB_SEARCH_TIMEOUT";

/// The longest timeout `QUARRY_WEB_SEARCH_TIMEOUT` may set.
const MAX_TIMEOUT_SECS: f64 = 300.0;
/// The most of a failed response's body an error shows.
const BODY_EXCERPT_CHARS: usize = 200;

// ---------------------------------------------------------------------------------------------
// Options

/// Where searches go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WebBackend {
    /// DuckDuckGo's HTML endpoint (`url`, default [`DEFAULT_DUCKDUCKGO_URL`]), queried with a
    /// form POST.
    DuckDuckGo {
        /// The endpoint.
        url: String,
    },
    /// A SearXNG instance: `url` is its base URL, queried as `GET {url}/search?q=…&format=json`.
    Searxng {
        /// The instance's base URL.
        url: String,
    },
}

impl WebBackend {
    /// The backend's name for people (error messages).
    pub fn name(&self) -> &'static str {
        match self {
            WebBackend::DuckDuckGo { .. } => "DuckDuckGo",
            WebBackend::Searxng { .. } => "SearXNG",
        }
    }

    /// The backend's URL.
    pub fn url(&self) -> &str {
        match self {
            WebBackend::DuckDuckGo { url } | WebBackend::Searxng { url } => url,
        }
    }
}

impl Default for WebBackend {
    fn default() -> Self {
        WebBackend::DuckDuckGo {
            url: DEFAULT_DUCKDUCKGO_URL.into(),
        }
    }
}

/// The web search settings, fixed at start (the server reads them with [`Self::from_lookup`]).
#[derive(Debug, Clone, PartialEq)]
pub struct WebSearchOptions {
    /// Which search engine answers.
    pub backend: WebBackend,
    /// The whole request's limit (connect, answer and body).
    pub timeout: Duration,
    /// The most results a call returns, whatever `max_results` asks (at most [`MAX_RESULTS`]
    /// is useful: the tool's schema allows no more).
    pub max_results: usize,
}

impl Default for WebSearchOptions {
    fn default() -> Self {
        WebSearchOptions {
            backend: WebBackend::default(),
            timeout: DEFAULT_TIMEOUT,
            max_results: MAX_RESULTS,
        }
    }
}

impl WebSearchOptions {
    /// Reads `QUARRY_WEB_SEARCH` (`duckduckgo`, the default when unset; `searxng`; `off` →
    /// `Ok(None)`), `QUARRY_WEB_SEARCH_URL` (the backend's URL; required for `searxng`) and
    /// `QUARRY_WEB_SEARCH_TIMEOUT` (seconds) from the variables `get` answers (the server's,
    /// read at start). A bad value is an error naming the variable.
    pub fn from_lookup(
        get: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<WebSearchOptions>, String> {
        let var = |k: &str| {
            get(k)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let kind = var(ENV_BACKEND).map(|v| v.to_ascii_lowercase());
        if kind.as_deref() == Some("off") {
            return Ok(None);
        }
        let url = var(ENV_URL).map(|u| parse_backend_url(&u)).transpose()?;
        let backend = match kind.as_deref() {
            None | Some("duckduckgo") => WebBackend::DuckDuckGo {
                url: url.unwrap_or_else(|| DEFAULT_DUCKDUCKGO_URL.into()),
            },
            Some("searxng") => {
                let url = url.ok_or_else(|| {
                    format!(
                        "{ENV_BACKEND}=searxng needs {ENV_URL}: the base URL of a SearXNG \
                         instance (e.g. http://localhost:8888)"
                    )
                })?;
                WebBackend::Searxng {
                    url: url.trim_end_matches('/').to_owned(),
                }
            }
            Some(other) => {
                return Err(format!(
                    "{ENV_BACKEND}: unknown value '{other}': expected duckduckgo, searxng or off"
                ));
            }
        };
        let timeout = match var(ENV_TIMEOUT) {
            None => DEFAULT_TIMEOUT,
            Some(t) => match t.parse::<f64>() {
                Ok(s) if s.is_finite() && s > 0.0 && s <= MAX_TIMEOUT_SECS => {
                    Duration::from_secs_f64(s)
                }
                _ => {
                    return Err(format!(
                        "{ENV_TIMEOUT}: expected a number of seconds above 0 and at most \
                         {MAX_TIMEOUT_SECS}, got '{t}'"
                    ));
                }
            },
        };
        Ok(Some(WebSearchOptions {
            backend,
            timeout,
            max_results: MAX_RESULTS,
        }))
    }
}

/// An http(s) URL with a host, as given (trimmed).
fn parse_backend_url(raw: &str) -> Result<String, String> {
    match Url::parse(raw) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host_str().is_some() => {
            Ok(raw.to_owned())
        }
        Ok(_) => Err(format!("{ENV_URL}: expected an http(s) URL, got '{raw}'")),
        Err(e) => Err(format!("{ENV_URL}: '{raw}' is not a valid URL ({e})")),
    }
}

// ---------------------------------------------------------------------------------------------
// The tool

/// The built-in `web` package: the `web_search` tool.
pub fn web_package() -> BuiltinPackage {
    BuiltinPackage {
        id: WEB_PACKAGE.into(),
        name: "Web search".into(),
        description: "Search the public web for current information (no API key needed)".into(),
        category: "web".into(),
        tags: vec!["web".into(), "search".into(), "internet".into()],
        tools: vec![web_search_tool()],
    }
}

fn object(v: Value) -> Arc<Map<String, Value>> {
    match v {
        Value::Object(m) => Arc::new(m),
        _ => Arc::new(Map::new()),
    }
}

/// The `web_search` tool's description, schemas and annotations.
pub fn web_search_tool() -> Tool {
    let input = json!({
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_QUERY_CHARS,
                "description": "What to search for, as you would type it into a search engine"
            },
            "max_results": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_RESULTS,
                "default": DEFAULT_RESULTS,
                "description": "How many results to return"
            }
        },
        "required": ["query"]
    });
    let output = json!({
        "type": "object",
        "properties": {
            "results": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "title": {"type": "string"},
                        "url": {"type": "string", "description": "The page's http(s) URL"},
                        "snippet": {"type": "string", "description": "A short excerpt of the page"}
                    },
                    "required": ["title", "url", "snippet"]
                }
            }
        },
        "required": ["results"]
    });
    Tool::new(
        WEB_SEARCH_TOOL,
        "Search the public web and get result titles, URLs and short snippets. Use it for \
         current events, recent or fast-changing facts, and anything the knowledge bases do \
         not cover; search the knowledge bases first for the user's own documents. Snippets \
         are brief: cite the URLs you rely on.",
        object(input),
    )
    .with_title("Web search")
    .with_raw_output_schema(object(output))
    .with_annotations(
        ToolAnnotations::with_title("Web search")
            .read_only(true)
            .destructive(false)
            .open_world(true),
    )
}

/// One search result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebResult {
    /// The page's title.
    pub title: String,
    /// The page's URL.
    pub url: String,
    /// The text the search engine shows under it.
    pub snippet: String,
}

/// Validated arguments.
#[derive(Debug, PartialEq)]
struct SearchArgs {
    query: String,
    max_results: usize,
}

fn parse_args(args: &Map<String, Value>, cap: usize) -> Result<SearchArgs, String> {
    let query = match args.get("query") {
        None | Some(Value::Null) => {
            return Err(format!(
                "query: required (a string of 1 to {MAX_QUERY_CHARS} characters)"
            ));
        }
        Some(Value::String(s)) => s.trim(),
        Some(_) => return Err("query: expected a string".into()),
    };
    if query.is_empty() {
        return Err("query: must not be empty".into());
    }
    let chars = query.chars().count();
    if chars > MAX_QUERY_CHARS {
        return Err(format!(
            "query: at most {MAX_QUERY_CHARS} characters (got {chars})"
        ));
    }
    let max_results = match args.get("max_results") {
        None | Some(Value::Null) => DEFAULT_RESULTS,
        Some(Value::Number(n)) => {
            let whole = n.as_u64().or_else(|| {
                n.as_f64()
                    .filter(|f| f.fract() == 0.0 && *f >= 0.0)
                    .map(|f| f as u64)
            });
            match whole {
                Some(k) if (1..=MAX_RESULTS as u64).contains(&k) => k as usize,
                _ => {
                    return Err(format!(
                        "max_results: expected an integer from 1 to {MAX_RESULTS}, got {n}"
                    ));
                }
            }
        }
        Some(_) => {
            return Err(format!(
                "max_results: expected an integer from 1 to {MAX_RESULTS}"
            ));
        }
    };
    Ok(SearchArgs {
        query: query.to_owned(),
        max_results: max_results.min(cap.max(1)),
    })
}

fn error_result(message: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message.into())])
}

/// Results as a tool result: the compact JSON array as text (or a sentence when there are
/// none) and `{"results": [...]}` as structured content.
fn success_result(query: &str, results: &[WebResult]) -> CallToolResult {
    let list = serde_json::to_value(results).unwrap_or_else(|_| json!([]));
    let text = if results.is_empty() {
        format!("No results for \"{query}\".")
    } else {
        list.to_string()
    };
    let mut r = CallToolResult::success(vec![ContentBlock::text(text)]);
    r.structured_content = Some(json!({ "results": list }));
    r
}

/// The web search tool with its HTTP client (built on first use, then reused).
pub struct WebSearch {
    opts: WebSearchOptions,
    client: OnceLock<Result<reqwest::Client, String>>,
}

impl std::fmt::Debug for WebSearch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebSearch")
            .field("opts", &self.opts)
            .finish_non_exhaustive()
    }
}

impl WebSearch {
    /// A web search client with `opts` (connects on first use).
    pub fn new(opts: WebSearchOptions) -> WebSearch {
        WebSearch {
            opts,
            client: OnceLock::new(),
        }
    }

    /// The options it runs with.
    pub fn options(&self) -> &WebSearchOptions {
        &self.opts
    }

    fn client(&self) -> Result<&reqwest::Client, String> {
        self.client
            .get_or_init(|| build_client(&self.opts))
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Runs `web_search` with `args`. Never fails: bad arguments, refusals, HTTP errors,
    /// timeouts and cancellation (`cancel`, which drops the request at once) are error
    /// results with the reason.
    pub async fn search(
        &self,
        args: &Map<String, Value>,
        cancel: CancellationToken,
    ) -> CallToolResult {
        let args = match parse_args(args, self.opts.max_results) {
            Ok(a) => a,
            Err(m) => return error_result(format!("invalid arguments: {m}")),
        };
        if cancel.is_cancelled() {
            return error_result("cancelled");
        }
        let client = match self.client() {
            Ok(c) => c,
            Err(e) => return error_result(e),
        };
        let run = tokio::time::timeout(self.opts.timeout, self.fetch(client, &args));
        let outcome = tokio::select! {
            biased;
            _ = cancel.cancelled() => return error_result("cancelled"),
            r = run => r,
        };
        let backend = self.opts.backend.name();
        match outcome {
            Err(_) => error_result(timeout_message(backend, self.opts.timeout)),
            Ok(Err(m)) => error_result(m),
            Ok(Ok(mut results)) => {
                results.truncate(args.max_results);
                tracing::debug!(backend, count = results.len(), "web search");
                success_result(&args.query, &results)
            }
        }
    }

    /// Sends the request and reads the results (or the reason there are none).
    async fn fetch(
        &self,
        client: &reqwest::Client,
        args: &SearchArgs,
    ) -> Result<Vec<WebResult>, String> {
        let backend = &self.opts.backend;
        let name = backend.name();
        let url = Url::parse(backend.url())
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https"))
            .ok_or_else(|| {
                format!(
                    "{name}: the configured URL '{}' is not an http(s) URL",
                    backend.url()
                )
            })?;
        let (target, request) = match backend {
            WebBackend::DuckDuckGo { .. } => {
                let form = url::form_urlencoded::Serializer::new(String::new())
                    .append_pair("q", &args.query)
                    .append_pair("kl", "wt-wt")
                    .finish();
                let target = fetch::redacted(&url);
                let request = client
                    .post(url)
                    .header(
                        http::header::CONTENT_TYPE,
                        "application/x-www-form-urlencoded",
                    )
                    .header(http::header::ACCEPT, "text/html,application/xhtml+xml")
                    .body(form);
                (target, request)
            }
            WebBackend::Searxng { url: base } => {
                let mut u = Url::parse(&format!("{}/search", base.trim_end_matches('/')))
                    .map_err(|e| format!("{name}: the configured URL '{base}' is invalid ({e})"))?;
                u.query_pairs_mut()
                    .append_pair("q", &args.query)
                    .append_pair("format", "json");
                let target = fetch::redacted(&u);
                let request = client
                    .get(u)
                    .header(http::header::ACCEPT, "application/json");
                (target, request)
            }
        };
        let raw = fetch::send_and_read(request, MAX_BODY_BYTES)
            .await
            .map_err(|e| request_error(name, &target, self.opts.timeout, e))?;
        match backend {
            WebBackend::DuckDuckGo { .. } => duckduckgo_outcome(&raw),
            WebBackend::Searxng { url } => searxng_outcome(url, &raw),
        }
    }
}

fn build_client(opts: &WebSearchOptions) -> Result<reqwest::Client, String> {
    quarry_netguard::ensure_crypto_provider();
    let mut builder = reqwest::Client::builder()
        .user_agent(USER_AGENT)
        .timeout(opts.timeout)
        .connect_timeout(opts.timeout.min(Duration::from_secs(10)))
        .redirect(reqwest::redirect::Policy::limited(MAX_REDIRECTS));
    // A backend on this machine (a local SearXNG) is never reached through a proxy.
    let local = Url::parse(opts.backend.url())
        .ok()
        .and_then(|u| u.host().map(|h| h.to_owned()))
        .is_some_and(|h| match h {
            url::Host::Domain(d) => d.eq_ignore_ascii_case("localhost"),
            url::Host::Ipv4(ip) => ip.is_loopback(),
            url::Host::Ipv6(ip) => ip.is_loopback(),
        });
    if local {
        builder = builder.no_proxy();
    }
    builder.build().map_err(|e| {
        format!(
            "web search is unavailable: could not build the HTTP client: {}",
            fetch::error_chain(&e)
        )
    })
}

fn seconds(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

fn timeout_message(backend: &str, timeout: Duration) -> String {
    format!(
        "{backend} did not answer within {} (the limit is set by {ENV_TIMEOUT})",
        seconds(timeout)
    )
}

fn request_error(backend: &str, target: &str, timeout: Duration, e: reqwest::Error) -> String {
    if e.is_timeout() {
        return timeout_message(backend, timeout);
    }
    let connect = e.is_connect();
    let detail = fetch::error_chain(&e.without_url());
    if connect {
        format!("could not connect to {backend} at {target}: {detail}")
    } else {
        format!("the request to {backend} at {target} failed: {detail}")
    }
}

/// At most [`BODY_EXCERPT_CHARS`] characters of a body, tags stripped when it is HTML.
fn excerpt(raw: &RawResponse) -> String {
    let text = String::from_utf8_lossy(&raw.body);
    let html = raw
        .content_type
        .as_deref()
        .is_some_and(|c| c.to_ascii_lowercase().contains("html"))
        || text.trim_start().starts_with('<');
    let text = if html {
        clean_text(&text)
    } else {
        collapse_ws(&text)
    };
    truncate_chars(&text, BODY_EXCERPT_CHARS)
}

fn status_text(status: u16) -> String {
    match http::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
    {
        Some(reason) => format!("HTTP {status} {reason}"),
        None => format!("HTTP {status}"),
    }
}

fn http_error(backend: &str, raw: &RawResponse) -> String {
    let body = excerpt(raw);
    if body.is_empty() {
        format!("{backend} answered {}", status_text(raw.status))
    } else {
        format!("{backend} answered {}: {body}", status_text(raw.status))
    }
}

fn body_text(raw: &RawResponse) -> String {
    let mut bytes = raw.body.clone();
    if raw.truncated {
        fetch::trim_partial_utf8(&mut bytes);
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

fn duckduckgo_refused(why: &str) -> String {
    format!(
        "DuckDuckGo refused the search ({why}: rate limited or blocked). Try again later, or \
         have the server use a SearXNG instance: {ENV_BACKEND}=searxng with {ENV_URL}=<its \
         base URL>."
    )
}

fn duckduckgo_outcome(raw: &RawResponse) -> Result<Vec<WebResult>, String> {
    match raw.status {
        202 => return Err(duckduckgo_refused("HTTP 202, an anomaly page")),
        403 | 429 => return Err(duckduckgo_refused(&status_text(raw.status))),
        200..=299 => {}
        _ => return Err(http_error("DuckDuckGo", raw)),
    }
    let html = body_text(raw);
    match parse_duckduckgo(&html) {
        DdgPage::Results(r) => Ok(r),
        DdgPage::Anomaly => Err(duckduckgo_refused("a challenge page instead of results")),
        DdgPage::Unrecognized => Err(duckduckgo_refused(
            "a page without search results or a results list",
        )),
    }
}

fn searxng_outcome(base: &str, raw: &RawResponse) -> Result<Vec<WebResult>, String> {
    let target = Url::parse(base)
        .map(|u| fetch::redacted(&u))
        .unwrap_or_else(|_| base.to_owned());
    match raw.status {
        200..=299 => {}
        403 => {
            return Err(format!(
                "SearXNG at {target} refused JSON output (HTTP 403): enable `json` in \
                 search.formats of settings.yml"
            ));
        }
        429 => {
            return Err(format!(
                "SearXNG at {target} refused the search (HTTP 429 Too Many Requests: rate \
                 limited; its limiter may be blocking this server)"
            ));
        }
        _ => return Err(format!("{} (at {target})", http_error("SearXNG", raw))),
    }
    if raw.truncated {
        return Err(format!(
            "SearXNG at {target} answered more than {} MiB: not its JSON results",
            MAX_BODY_BYTES >> 20
        ));
    }
    parse_searxng(&raw.body).map_err(|e| {
        format!(
            "SearXNG at {target} answered something other than its JSON results ({e}): {}",
            excerpt(raw)
        )
    })
}

// ---------------------------------------------------------------------------------------------
// SearXNG

fn parse_searxng(body: &[u8]) -> Result<Vec<WebResult>, String> {
    let v: Value = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    let items = v
        .get("results")
        .and_then(Value::as_array)
        .ok_or("no \"results\" array")?;
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for item in items {
        let field = |k: &str| item.get(k).and_then(Value::as_str).unwrap_or("");
        let url = field("url").trim();
        if !is_http_url(url) || !seen.insert(url.to_owned()) {
            continue;
        }
        let title = collapse_ws(field("title"));
        out.push(WebResult {
            title: if title.is_empty() {
                url.to_owned()
            } else {
                truncate_chars(&title, MAX_SNIPPET_CHARS)
            },
            url: url.to_owned(),
            snippet: truncate_chars(&collapse_ws(field("content")), MAX_SNIPPET_CHARS),
        });
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// DuckDuckGo's HTML page

/// What a DuckDuckGo HTML page holds.
#[derive(Debug, PartialEq)]
enum DdgPage {
    /// Organic results (possibly none, on a "No results." page).
    Results(Vec<WebResult>),
    /// The anomaly (bot challenge) page.
    Anomaly,
    /// Neither results, a "no results" notice, nor a challenge.
    Unrecognized,
}

/// An opening `a`, `div` or `td` tag: its name and attribute text.
static OPEN_TAG: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?is)<(a|div|td)\b([^>]*)>").expect("static regex"));
/// One attribute: name, then a double-quoted, single-quoted or bare value (or none).
static ATTR: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"(?s)([A-Za-z_:][-A-Za-z0-9_:.]*)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'=<>`]+)))?"#,
    )
    .expect("static regex")
});
/// Any tag (or comment), with the element name when it has one.
static ANY_TAG: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?s)<\s*/?\s*([A-Za-z][A-Za-z0-9]*)?[^>]*>").expect("static regex")
});
/// Elements that sit inside a line of text: dropped without a space.
const INLINE_TAGS: &[&str] = &[
    "a", "abbr", "b", "bdi", "bdo", "cite", "code", "em", "font", "i", "kbd", "mark", "q", "s",
    "samp", "small", "span", "strong", "sub", "sup", "time", "u", "var", "wbr",
];
static ENTITY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"&(#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
        .expect("static regex")
});

/// An attribute's raw value (entities not decoded).
fn attr<'a>(attrs: &'a str, name: &str) -> Option<&'a str> {
    ATTR.captures_iter(attrs).find_map(|c| {
        c.get(1)
            .filter(|n| n.as_str().eq_ignore_ascii_case(name))
            .map(|_| {
                c.get(2)
                    .or_else(|| c.get(3))
                    .or_else(|| c.get(4))
                    .map_or("", |v| v.as_str())
            })
    })
}

fn has_class(attrs: &str, class: &str) -> bool {
    attr(attrs, "class").is_some_and(|c| c.split_ascii_whitespace().any(|t| t == class))
}

/// The markup between an opening tag ending at `from` and the next `</name` before `until`.
fn inner<'a>(html: &'a str, from: usize, until: usize, name: &str) -> &'a str {
    let close = format!("</{}", name.to_ascii_lowercase());
    let rest = &html[from..until.max(from)];
    let end = rest.to_ascii_lowercase().find(&close).unwrap_or(rest.len());
    &rest[..end]
}

/// Reads DuckDuckGo's HTML results page. Each organic result is a `div` with class `result`
/// (class `result--ad` marks an ad, skipped) holding an `a.result__a` (href and title) and a
/// `.result__snippet` (`a`, `div` or `td`). Hrefs are DuckDuckGo redirects
/// (`//duckduckgo.com/l/?uddg=<target>&rut=…`, decoded to the target) or direct http(s) URLs;
/// any other target is dropped, and so is a URL seen before.
fn parse_duckduckgo(html: &str) -> DdgPage {
    if html.contains("anomaly-modal") || html.contains("challenge-form") {
        return DdgPage::Anomaly;
    }
    let tags: Vec<(usize, usize, String, &str)> = OPEN_TAG
        .captures_iter(html)
        .filter_map(|c| {
            let whole = c.get(0)?;
            Some((
                whole.start(),
                whole.end(),
                c[1].to_ascii_lowercase(),
                c.get(2).map_or("", |m| m.as_str()),
            ))
        })
        .collect();
    let blocks: Vec<usize> = tags
        .iter()
        .enumerate()
        .filter(|(_, (_, _, name, attrs))| name == "div" && has_class(attrs, "result"))
        .map(|(i, _)| i)
        .collect();
    if blocks.is_empty() {
        let no_results = html.contains("no-results") || html.contains("id=\"links\"");
        return if no_results {
            DdgPage::Results(Vec::new())
        } else {
            DdgPage::Unrecognized
        };
    }
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for (k, &first) in blocks.iter().enumerate() {
        if has_class(tags[first].3, "result--ad") {
            continue;
        }
        let last = blocks.get(k + 1).copied().unwrap_or(tags.len());
        let until = tags.get(last).map_or(html.len(), |t| t.0);
        let block = &tags[first + 1..last];
        let Some((_, title_end, _, title_attrs)) = block
            .iter()
            .find(|(_, _, name, attrs)| name == "a" && has_class(attrs, "result__a"))
        else {
            continue;
        };
        let Some(url) = attr(title_attrs, "href").and_then(result_url) else {
            continue;
        };
        if !seen.insert(url.clone()) {
            continue;
        }
        let title = clean_text(inner(html, *title_end, until, "a"));
        let snippet = block
            .iter()
            .find(|(_, _, _, attrs)| has_class(attrs, "result__snippet"))
            .map(|(_, end, name, _)| clean_text(inner(html, *end, until, name)))
            .unwrap_or_default();
        out.push(WebResult {
            title: if title.is_empty() {
                url.clone()
            } else {
                truncate_chars(&title, MAX_SNIPPET_CHARS)
            },
            url,
            snippet: truncate_chars(&snippet, MAX_SNIPPET_CHARS),
        });
    }
    DdgPage::Results(out)
}

fn is_http_url(s: &str) -> bool {
    Url::parse(s).is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.host_str().is_some())
}

/// A result's target from its href: a DuckDuckGo redirect decoded to `uddg`, a direct
/// http(s) URL kept as it is; `None` for anything else (and for DuckDuckGo's ad clicks).
fn result_url(href: &str) -> Option<String> {
    let href = decode_entities(href.trim());
    let absolute = if href.starts_with("//") {
        format!("https:{href}")
    } else if href.starts_with('/') {
        format!("https://duckduckgo.com{href}")
    } else {
        href.clone()
    };
    let parsed = Url::parse(&absolute).ok()?;
    let ddg = parsed
        .host_str()
        .is_some_and(|h| h == "duckduckgo.com" || h.ends_with(".duckduckgo.com"));
    if ddg {
        if parsed.path() == "/l/" || parsed.path() == "/l" {
            let target = parsed
                .query_pairs()
                .find(|(k, _)| k == "uddg")
                .map(|(_, v)| v.trim().to_owned())?;
            return is_http_url(&target).then_some(target);
        }
        if parsed.path().starts_with("/y.js") {
            return None;
        }
    }
    is_http_url(&absolute).then_some(absolute)
}

/// Markup to plain text: inline tags (`<b>` highlights) dropped, other tags (`<br>`, `</p>`)
/// made a space, entities decoded, whitespace collapsed.
fn clean_text(html: &str) -> String {
    let text = ANY_TAG.replace_all(html, |c: &regex::Captures<'_>| {
        let inline = c.get(1).is_some_and(|n| {
            INLINE_TAGS
                .iter()
                .any(|t| n.as_str().eq_ignore_ascii_case(t))
        });
        if inline { "" } else { " " }
    });
    collapse_ws(&decode_entities(&text))
}

/// Decodes numeric character references and the common named entities (others are kept).
fn decode_entities(s: &str) -> String {
    if !s.contains('&') {
        return s.to_owned();
    }
    ENTITY
        .replace_all(s, |c: &regex::Captures<'_>| {
            let name = &c[1];
            let numeric =
                if let Some(hex) = name.strip_prefix("#x").or_else(|| name.strip_prefix("#X")) {
                    Some(u32::from_str_radix(hex, 16).ok())
                } else {
                    name.strip_prefix('#').map(|dec| dec.parse::<u32>().ok())
                };
            if let Some(code) = numeric {
                let ch = code
                    .filter(|&n| n != 0)
                    .and_then(char::from_u32)
                    .unwrap_or('\u{fffd}');
                return ch.to_string();
            }
            let named = match name {
                "amp" => "&",
                "lt" => "<",
                "gt" => ">",
                "quot" => "\"",
                "apos" => "'",
                "nbsp" => "\u{a0}",
                "ndash" => "\u{2013}",
                "mdash" => "\u{2014}",
                "hellip" => "\u{2026}",
                "lsquo" => "\u{2018}",
                "rsquo" => "\u{2019}",
                "ldquo" => "\u{201c}",
                "rdquo" => "\u{201d}",
                "laquo" => "\u{ab}",
                "raquo" => "\u{bb}",
                "middot" => "\u{b7}",
                "bull" => "\u{2022}",
                "copy" => "\u{a9}",
                "reg" => "\u{ae}",
                "trade" => "\u{2122}",
                _ => return c[0].to_owned(),
            };
            named.to_owned()
        })
        .into_owned()
}

fn collapse_ws(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// At most `max` characters: a longer text is cut on a character boundary and ends in `…`.
fn truncate_chars(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let cut: String = s.chars().take(max.saturating_sub(1)).collect();
    format!("{}…", cut.trim_end())
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use quarry_test_http::{Reply, Server, unused_port};

    use super::*;

    const RESULTS_PAGE: &str = include_str!("../tests/data/ddg_results.html");
    const NO_RESULTS_PAGE: &str = include_str!("../tests/data/ddg_no_results.html");
    const ANOMALY_PAGE: &str = include_str!("../tests/data/ddg_anomaly.html");

    fn results(page: DdgPage) -> Vec<WebResult> {
        match page {
            DdgPage::Results(r) => r,
            other => panic!("expected results, got {other:?}"),
        }
    }

    fn text_of(r: &CallToolResult) -> String {
        r.content
            .iter()
            .filter_map(|b| b.as_text().map(|t| t.text.clone()))
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn args(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => panic!("arguments must be an object"),
        }
    }

    // -----------------------------------------------------------------------------------------
    // DuckDuckGo markup

    #[test]
    fn parses_duckduckgo_results_page() {
        let r = results(parse_duckduckgo(RESULTS_PAGE));
        let urls: Vec<&str> = r.iter().map(|x| x.url.as_str()).collect();
        assert_eq!(
            urls,
            [
                "https://www.rust-lang.org/learn?q=a+b&lang=en",
                "https://doc.rust-lang.org/book/",
                "https://en.wikipedia.org/wiki/Rust_(programming_language)",
                "https://zh.wikipedia.org/wiki/Rust",
            ],
            "the ad, the duplicate and the ftp result are dropped"
        );
        // A redirect href, <b> highlights and entities in the title and snippet.
        assert_eq!(r[0].title, "The Rust Programming Language & Cargo");
        assert_eq!(
            r[0].snippet,
            "A language empowering everyone to build reliable and efficient software. \
             It's \"fast\", memory'safe and <productive> \u{2014} try it!"
        );
        // A direct href and a `div.result__snippet`.
        assert_eq!(r[1].title, "The Rust Programming Language - The Rust Book");
        assert_eq!(
            r[1].snippet,
            "by Steve Klabnik and Carol Nichols, with contributions from the Rust Community. \
             This version of the text assumes you're using Rust 1.85.0."
        );
        // A `td.result__snippet` longer than the cap.
        assert_eq!(r[2].title, "Rust (programming language) - Wikipedia");
        assert_eq!(r[2].snippet.chars().count(), MAX_SNIPPET_CHARS);
        assert!(r[2].snippet.ends_with('…'), "{}", r[2].snippet);
        assert!(
            r[2].snippet
                .starts_with("Rust is a general-purpose programming language")
        );
        assert!(r[2].snippet.contains("It enforces memory safety"));
        // Non-ASCII text and a hex entity.
        assert_eq!(r[3].title, "Rust \u{2014} 维基百科，自由的百科全书");
        assert_eq!(
            r[3].snippet,
            "Rust是由Mozilla主导开发的通用、编译型编程语言。"
        );
        assert!(r.iter().all(|x| !x.title.contains("Sponsored")));
    }

    #[test]
    fn recognizes_empty_and_anomaly_pages() {
        assert_eq!(
            parse_duckduckgo(NO_RESULTS_PAGE),
            DdgPage::Results(Vec::new())
        );
        assert_eq!(parse_duckduckgo(ANOMALY_PAGE), DdgPage::Anomaly);
        assert_eq!(
            parse_duckduckgo("<html><body><p>Service unavailable</p></body></html>"),
            DdgPage::Unrecognized
        );
        // Only ads: a results page with nothing organic on it.
        let ads_only = r#"<div id="links" class="results"><div class="result result--ad"><a class="result__a" href="https://ads.example/">Ad</a></div></div>"#;
        assert_eq!(parse_duckduckgo(ads_only), DdgPage::Results(Vec::new()));
    }

    #[test]
    fn decodes_result_hrefs() {
        let cases = [
            (
                "//duckduckgo.com/l/?uddg=https%3A%2F%2Fexample.com%2Fa%20b%3Fx%3D1%26y%3D2&amp;rut=abc",
                Some("https://example.com/a b?x=1&y=2"),
            ),
            (
                "/l/?uddg=http%3A%2F%2Fexample.org%2F&rut=1",
                Some("http://example.org/"),
            ),
            (
                "https://duckduckgo.com/l/?uddg=https%3A%2F%2Fexample.net%2F",
                Some("https://example.net/"),
            ),
            (
                "https://example.com/page?a=1&amp;b=2",
                Some("https://example.com/page?a=1&b=2"),
            ),
            ("//duckduckgo.com/l/?uddg=javascript%3Aalert(1)", None),
            ("//duckduckgo.com/l/?uddg=ftp%3A%2F%2Fexample.com%2F", None),
            ("//duckduckgo.com/l/?rut=abc", None),
            ("https://duckduckgo.com/y.js?ad_domain=x.com", None),
            ("javascript:alert(1)", None),
            ("mailto:someone@example.com", None),
            ("", None),
        ];
        for (href, want) in cases {
            assert_eq!(result_url(href).as_deref(), want, "{href}");
        }
    }

    #[test]
    fn cleans_text() {
        assert_eq!(
            clean_text(
                "  <b>Rust</b>acean&nbsp;&amp;\n\t <i>friends</i>&#33; &#x27;x&#39; &lt;y&gt; &quot;z&quot;<br/>end"
            ),
            "Rustacean & friends! 'x' <y> \"z\" end"
        );
        assert_eq!(
            decode_entities("&unknown; &amp &#0; &#x110000;"),
            "&unknown; &amp \u{fffd} \u{fffd}"
        );
        assert_eq!(decode_entities("&hellip;&mdash;&#8212;&#X2014;"), "…———");
        assert_eq!(truncate_chars("short", 10), "short");
        let long = "é".repeat(400);
        let cut = truncate_chars(&long, MAX_SNIPPET_CHARS);
        assert_eq!(cut.chars().count(), MAX_SNIPPET_CHARS);
        assert!(cut.ends_with('…'));
        assert_eq!(truncate_chars("abcdef", 4), "abc…");
    }

    // -----------------------------------------------------------------------------------------
    // SearXNG JSON

    #[test]
    fn parses_searxng_json() {
        let body = json!({
            "query": "rust",
            "number_of_results": 0,
            "results": [
                {"url": "https://www.rust-lang.org/", "title": "Rust  Programming\nLanguage", "content": "A language empowering everyone.", "engine": "duckduckgo"},
                {"url": "https://www.rust-lang.org/", "title": "Duplicate", "content": "again"},
                {"url": "ftp://example.com/x", "title": "FTP", "content": "no"},
                {"url": "https://example.com/no-title", "content": null},
                {"title": "no url"},
                {"url": "https://example.com/long", "title": "Long", "content": "x".repeat(500)}
            ],
            "answers": [],
            "suggestions": ["rust lang"]
        });
        let r = parse_searxng(body.to_string().as_bytes()).unwrap();
        assert_eq!(
            r[0],
            WebResult {
                title: "Rust Programming Language".into(),
                url: "https://www.rust-lang.org/".into(),
                snippet: "A language empowering everyone.".into(),
            }
        );
        assert_eq!(
            r[1],
            WebResult {
                title: "https://example.com/no-title".into(),
                url: "https://example.com/no-title".into(),
                snippet: String::new(),
            }
        );
        assert_eq!(r[2].snippet.chars().count(), MAX_SNIPPET_CHARS);
        assert_eq!(r.len(), 3);
        assert!(parse_searxng(b"<html>nope</html>").is_err());
        assert!(
            parse_searxng(br#"{"error": "x"}"#)
                .unwrap_err()
                .contains("results")
        );
        assert_eq!(parse_searxng(br#"{"results": []}"#).unwrap(), Vec::new());
    }

    // -----------------------------------------------------------------------------------------
    // Arguments, options, the tool

    #[test]
    fn validates_arguments() {
        let ok = parse_args(&args(json!({"query": "  rust  "})), MAX_RESULTS).unwrap();
        assert_eq!(
            ok,
            SearchArgs {
                query: "rust".into(),
                max_results: DEFAULT_RESULTS
            }
        );
        let with = |v: Value| parse_args(&args(v), MAX_RESULTS);
        assert_eq!(
            with(json!({"query": "x", "max_results": 3}))
                .unwrap()
                .max_results,
            3
        );
        assert_eq!(
            with(json!({"query": "x", "max_results": 10.0}))
                .unwrap()
                .max_results,
            10
        );
        assert_eq!(
            with(json!({"query": "x", "max_results": null}))
                .unwrap()
                .max_results,
            5
        );
        assert_eq!(
            parse_args(&args(json!({"query": "x", "max_results": 8})), 4)
                .unwrap()
                .max_results,
            4,
            "the server's cap wins"
        );
        assert!(with(json!({"query": "中".repeat(400)})).is_ok());
        for (bad, field) in [
            (json!({}), "query"),
            (json!({"query": null}), "query"),
            (json!({"query": 5}), "query"),
            (json!({"query": "   "}), "query"),
            (json!({"query": "a".repeat(401)}), "query"),
            (json!({"query": "x", "max_results": 0}), "max_results"),
            (json!({"query": "x", "max_results": 11}), "max_results"),
            (json!({"query": "x", "max_results": -1}), "max_results"),
            (json!({"query": "x", "max_results": 2.5}), "max_results"),
            (json!({"query": "x", "max_results": "5"}), "max_results"),
        ] {
            let e = with(bad.clone()).unwrap_err();
            assert!(e.starts_with(field), "{bad}: {e}");
        }
    }

    fn lookup(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
    }

    #[test]
    fn reads_options_from_variables() {
        let opts = |vars: &[(&str, &str)]| WebSearchOptions::from_lookup(lookup(vars));
        assert_eq!(opts(&[]).unwrap(), Some(WebSearchOptions::default()));
        assert_eq!(
            opts(&[(ENV_BACKEND, ""), (ENV_URL, " ")]).unwrap(),
            Some(WebSearchOptions::default()),
            "empty values count as unset"
        );
        assert_eq!(opts(&[(ENV_BACKEND, " Off ")]).unwrap(), None);
        assert_eq!(
            opts(&[(ENV_BACKEND, "off"), (ENV_URL, "nonsense")]).unwrap(),
            None
        );
        let ddg = opts(&[
            (ENV_BACKEND, "duckduckgo"),
            (ENV_URL, "http://127.0.0.1:9/html/"),
            (ENV_TIMEOUT, "2.5"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            ddg.backend,
            WebBackend::DuckDuckGo {
                url: "http://127.0.0.1:9/html/".into()
            }
        );
        assert_eq!(ddg.timeout, Duration::from_millis(2500));
        let sx = opts(&[
            (ENV_BACKEND, "SearXNG"),
            (ENV_URL, "https://search.example.com/sx/"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            sx.backend,
            WebBackend::Searxng {
                url: "https://search.example.com/sx".into()
            }
        );
        assert_eq!(sx.timeout, DEFAULT_TIMEOUT);

        let e = opts(&[(ENV_BACKEND, "searxng")]).unwrap_err();
        assert!(e.contains(ENV_URL), "{e}");
        let e = opts(&[(ENV_BACKEND, "bing")]).unwrap_err();
        assert!(
            e.contains(ENV_BACKEND) && e.contains("duckduckgo, searxng or off"),
            "{e}"
        );
        for bad in ["ftp://example.com/", "not a url", "file:///etc/passwd"] {
            let e = opts(&[(ENV_URL, bad)]).unwrap_err();
            assert!(e.starts_with(ENV_URL), "{bad}: {e}");
        }
        for bad in ["0", "-3", "ten", "301", "NaN", "inf"] {
            let e = opts(&[(ENV_TIMEOUT, bad)]).unwrap_err();
            assert!(e.starts_with(ENV_TIMEOUT), "{bad}: {e}");
        }
    }

    #[test]
    fn describes_the_tool() {
        let pkg = web_package();
        assert_eq!(pkg.id, WEB_PACKAGE);
        assert_eq!(pkg.tools.len(), 1);
        let tool = &pkg.tools[0];
        assert_eq!(tool.name, WEB_SEARCH_TOOL);
        assert_eq!(tool.title.as_deref(), Some("Web search"));
        assert!(
            tool.description
                .as_deref()
                .unwrap()
                .contains("current events")
        );
        let schema = Value::Object((*tool.input_schema).clone());
        assert_eq!(schema["required"], json!(["query"]));
        assert_eq!(schema["properties"]["query"]["maxLength"], json!(400));
        assert_eq!(schema["properties"]["max_results"]["default"], json!(5));
        assert_eq!(schema["properties"]["max_results"]["maximum"], json!(10));
        let out = Value::Object((**tool.output_schema.as_ref().unwrap()).clone());
        assert_eq!(
            out["properties"]["results"]["items"]["required"],
            json!(["title", "url", "snippet"])
        );
        let a = tool.annotations.as_ref().unwrap();
        assert_eq!(a.read_only_hint, Some(true));
        assert_eq!(a.destructive_hint, Some(false));
        assert_eq!(a.open_world_hint, Some(true));
    }

    // -----------------------------------------------------------------------------------------
    // Against a loopback HTTP server

    /// A server that gives every request the same reply.
    fn serve(reply: Reply) -> Server {
        Server::start(move |_| reply.clone())
    }

    fn ddg(server: &Server, timeout: Duration) -> WebSearch {
        WebSearch::new(WebSearchOptions {
            backend: WebBackend::DuckDuckGo {
                url: format!("{}/html/", server.base()),
            },
            timeout,
            max_results: MAX_RESULTS,
        })
    }

    fn searxng(server: &Server) -> WebSearch {
        WebSearch::new(WebSearchOptions {
            backend: WebBackend::Searxng {
                url: format!("{}/sx", server.base()),
            },
            timeout: Duration::from_secs(5),
            max_results: MAX_RESULTS,
        })
    }

    #[tokio::test]
    async fn duckduckgo_end_to_end() {
        let server = serve(Reply::status(200, "text/html; charset=UTF-8", RESULTS_PAGE));
        let web = ddg(&server, Duration::from_secs(5));
        let r = web
            .search(
                &args(json!({"query": "rust language", "max_results": 3})),
                CancellationToken::new(),
            )
            .await;
        assert_eq!(r.is_error, Some(false), "{}", text_of(&r));
        let list = r.structured_content.as_ref().unwrap()["results"]
            .as_array()
            .unwrap()
            .clone();
        assert_eq!(list.len(), 3);
        assert_eq!(
            list[0]["url"],
            "https://www.rust-lang.org/learn?q=a+b&lang=en"
        );
        assert_eq!(list[1]["url"], "https://doc.rust-lang.org/book/");
        let text: Value = serde_json::from_str(&text_of(&r)).unwrap();
        assert_eq!(
            text,
            Value::Array(list),
            "the text is the same compact JSON array"
        );
        assert!(!text_of(&r).contains('\n'));

        let seen = server.requests();
        assert_eq!(seen.len(), 1);
        let req = &seen[0];
        assert_eq!(req.method, "POST");
        assert_eq!(req.target, "/html/");
        assert_eq!(req.text(), "q=rust+language&kl=wt-wt");
        assert_eq!(
            req.header("content-type"),
            Some("application/x-www-form-urlencoded")
        );
        let ua = req.header("user-agent").unwrap();
        assert!(ua.starts_with("Mozilla/5.0 (compatible; Quarry/"), "{ua}");

        // The client is built once and reused.
        let again = web
            .search(&args(json!({"query": "rust"})), CancellationToken::new())
            .await;
        assert_eq!(again.is_error, Some(false));
        assert_eq!(
            again.structured_content.unwrap()["results"]
                .as_array()
                .unwrap()
                .len(),
            4
        );
    }

    #[tokio::test]
    async fn duckduckgo_without_results_is_a_success() {
        let server = serve(Reply::status(200, "text/html", NO_RESULTS_PAGE));
        let r = ddg(&server, Duration::from_secs(5))
            .search(
                &args(json!({"query": "qzxwvkjq"})),
                CancellationToken::new(),
            )
            .await;
        assert_eq!(r.is_error, Some(false));
        assert_eq!(r.structured_content, Some(json!({"results": []})));
        assert!(text_of(&r).contains("No results"), "{}", text_of(&r));
    }

    #[tokio::test]
    async fn duckduckgo_anomaly_is_a_refusal() {
        for answer in [
            Reply::status(202, "text/html", ANOMALY_PAGE),
            Reply::status(200, "text/html", ANOMALY_PAGE),
        ] {
            let server = serve(answer);
            let r = ddg(&server, Duration::from_secs(5))
                .search(&args(json!({"query": "rust"})), CancellationToken::new())
                .await;
            assert_eq!(r.is_error, Some(true));
            let t = text_of(&r);
            assert!(t.contains("DuckDuckGo refused the search"), "{t}");
            assert!(t.contains("rate limited or blocked"), "{t}");
            assert!(
                t.contains("QUARRY_WEB_SEARCH=searxng") && t.contains(ENV_URL),
                "{t}"
            );
        }
    }

    #[tokio::test]
    async fn http_errors_name_backend_and_status() {
        let body = format!(
            "<html><body><h1>Internal error</h1>{}</body></html>",
            "detail ".repeat(200)
        );
        let server = serve(Reply::status(500, "text/html", body.clone()));
        let r = ddg(&server, Duration::from_secs(5))
            .search(&args(json!({"query": "rust"})), CancellationToken::new())
            .await;
        assert_eq!(r.is_error, Some(true));
        let t = text_of(&r);
        assert!(
            t.starts_with(
                "DuckDuckGo answered HTTP 500 Internal Server Error: Internal error detail"
            ),
            "{t}"
        );
        assert!(t.ends_with('…'), "{t}");
        assert!(!t.contains("<h1>"), "{t}");
        assert!(t.len() < 300, "at most 200 characters of the body: {t}");

        let server = serve(Reply::status(502, "text/plain", "bad gateway"));
        let r = searxng(&server)
            .search(&args(json!({"query": "rust"})), CancellationToken::new())
            .await;
        let t = text_of(&r);
        assert!(
            t.starts_with("SearXNG answered HTTP 502 Bad Gateway: bad gateway"),
            "{t}"
        );
    }

    #[tokio::test]
    async fn searxng_end_to_end() {
        let body = json!({"results": [
            {"url": "https://www.rust-lang.org/", "title": "Rust", "content": "A language."},
            {"url": "https://doc.rust-lang.org/", "title": "Docs", "content": "Documentation."}
        ]});
        let server = serve(Reply::status(200, "application/json", body.to_string()));
        let r = searxng(&server)
            .search(
                &args(json!({"query": "rust & cargo?", "max_results": 1})),
                CancellationToken::new(),
            )
            .await;
        assert_eq!(r.is_error, Some(false), "{}", text_of(&r));
        assert_eq!(
            r.structured_content,
            Some(
                json!({"results": [{"title": "Rust", "url": "https://www.rust-lang.org/", "snippet": "A language."}]})
            )
        );
        let seen = server.requests();
        assert_eq!(seen[0].method, "GET");
        assert_eq!(seen[0].target, "/sx/search?q=rust+%26+cargo%3F&format=json");
        assert!(seen[0].header("user-agent").unwrap().contains("Quarry/"));
    }

    #[tokio::test]
    async fn searxng_refusals_and_bad_bodies() {
        let server = serve(Reply::status(403, "text/html", "<h1>403 Forbidden</h1>"));
        let t = text_of(
            &searxng(&server)
                .search(&args(json!({"query": "rust"})), CancellationToken::new())
                .await,
        );
        assert!(
            t.contains("HTTP 403") && t.contains("search.formats of settings.yml"),
            "{t}"
        );

        let server = serve(Reply::status(200, "text/html", "<html>not json</html>"));
        let r = searxng(&server)
            .search(&args(json!({"query": "rust"})), CancellationToken::new())
            .await;
        assert_eq!(r.is_error, Some(true));
        assert!(
            text_of(&r).contains("other than its JSON results"),
            "{}",
            text_of(&r)
        );

        // A body over the cap is cut off: not its JSON.
        let huge = format!("{{\"results\": [{}]}}", "\"x\",".repeat(1 << 20));
        let server = serve(Reply::status(200, "application/json", huge));
        let r = searxng(&server)
            .search(&args(json!({"query": "rust"})), CancellationToken::new())
            .await;
        assert_eq!(r.is_error, Some(true));
        assert!(text_of(&r).contains("more than 2 MiB"), "{}", text_of(&r));
    }

    #[tokio::test]
    async fn bad_arguments_send_nothing() {
        let server = serve(Reply::status(200, "text/html", RESULTS_PAGE));
        let r = ddg(&server, Duration::from_secs(5))
            .search(&args(json!({"max_results": 3})), CancellationToken::new())
            .await;
        assert_eq!(r.is_error, Some(true));
        assert!(text_of(&r).contains("query"), "{}", text_of(&r));
        assert!(server.requests().is_empty());
    }

    #[tokio::test]
    async fn a_silent_server_times_out() {
        let server = serve(Reply::hang());
        let started = Instant::now();
        let r = ddg(&server, Duration::from_millis(300))
            .search(&args(json!({"query": "rust"})), CancellationToken::new())
            .await;
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(r.is_error, Some(true));
        let t = text_of(&r);
        assert!(t.contains("DuckDuckGo did not answer within 0.3 s"), "{t}");
        assert!(t.contains(ENV_TIMEOUT), "{t}");
    }

    #[tokio::test]
    async fn cancellation_aborts_the_request() {
        let server = serve(Reply::hang());
        let web = ddg(&server, Duration::from_secs(30));
        let cancel = CancellationToken::new();
        let trigger = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(150)).await;
            trigger.cancel();
        });
        let started = Instant::now();
        let r = web.search(&args(json!({"query": "rust"})), cancel).await;
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(r.is_error, Some(true));
        assert_eq!(text_of(&r), "cancelled");
        assert_eq!(server.requests().len(), 1, "the request had been sent");

        // Cancelled before it starts: nothing is sent.
        let cancel = CancellationToken::new();
        cancel.cancel();
        let r = web.search(&args(json!({"query": "rust"})), cancel).await;
        assert_eq!(text_of(&r), "cancelled");
        assert_eq!(server.requests().len(), 1);
    }

    #[tokio::test]
    async fn connection_failures_name_the_backend() {
        let addr = format!("127.0.0.1:{}", unused_port());
        let web = WebSearch::new(WebSearchOptions {
            backend: WebBackend::Searxng {
                url: format!("http://{addr}"),
            },
            timeout: Duration::from_secs(5),
            max_results: MAX_RESULTS,
        });
        let r = web
            .search(&args(json!({"query": "rust"})), CancellationToken::new())
            .await;
        assert_eq!(r.is_error, Some(true));
        let t = text_of(&r);
        assert!(
            t.starts_with(&format!(
                "could not connect to SearXNG at http://{addr}/search"
            )),
            "{t}"
        );
    }

    // -----------------------------------------------------------------------------------------
    // Through the hub

    #[tokio::test]
    async fn the_hub_runs_web_search() {
        use crate::options::HubOptions;
        use crate::registry::Hub;
        use quarry_core::MACHINE_OWNER;

        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn quarry_store::Store> =
            Arc::new(quarry_store_sqlite::SqliteStore::open(&dir.path().join("hub.db")).unwrap());

        // Without options there is no web package.
        let plain = Hub::new(store.clone(), Vec::new(), HubOptions::default());
        assert!(
            plain
                .catalog(MACHINE_OWNER)
                .unwrap()
                .package(WEB_PACKAGE)
                .is_none()
        );

        let server = serve(Reply::status(200, "text/html", RESULTS_PAGE));
        let hub = Hub::new(
            store.clone(),
            Vec::new(),
            HubOptions {
                web: Some(WebSearchOptions {
                    backend: WebBackend::DuckDuckGo {
                        url: format!("{}/html/", server.base()),
                    },
                    timeout: Duration::from_secs(5),
                    max_results: 2,
                }),
                ..HubOptions::default()
            },
        );
        let catalog = hub.catalog(MACHINE_OWNER).unwrap();
        let tool = catalog.by_full_name("web.web_search").unwrap().clone();
        assert!(tool.enabled, "a built-in tool is enabled by default");
        assert_eq!(tool.wire_name, "web__web_search");

        let caller = quarry_core::Principal::owner("default", "");
        let route = hub.route_tool(&caller, &tool).unwrap();
        let r = hub
            .call(
                route,
                &tool,
                Some(args(json!({"query": "rust"}))),
                None,
                CancellationToken::new(),
            )
            .await
            .unwrap();
        assert_eq!(r.is_error, Some(false), "{}", text_of(&r));
        assert_eq!(
            r.structured_content.unwrap()["results"]
                .as_array()
                .unwrap()
                .len(),
            2,
            "the server's cap applies"
        );

        // The owner's toggle switches it off like any tool.
        hub.set_tool_enabled(&caller, "web.web_search", false)
            .unwrap();
        let catalog = hub.catalog(MACHINE_OWNER).unwrap();
        assert!(!catalog.by_full_name("web.web_search").unwrap().enabled);

        // A server-provided `web` package is kept, not doubled.
        let mut own = web_package();
        own.name = "Mine".into();
        let hub2 = Hub::new(
            store,
            vec![own],
            HubOptions {
                web: Some(WebSearchOptions::default()),
                ..HubOptions::default()
            },
        );
        let catalog = hub2.catalog(MACHINE_OWNER).unwrap();
        let webs: Vec<_> = catalog
            .packages
            .iter()
            .filter(|p| p.id == WEB_PACKAGE)
            .collect();
        assert_eq!(webs.len(), 1);
        assert_eq!(webs[0].name, "Mine");

        // Cancelled through the hub.
        let hang = serve(Reply::hang());
        let hub3 = Hub::new(
            Arc::new(quarry_store_sqlite::SqliteStore::open(&dir.path().join("hub3.db")).unwrap()),
            Vec::new(),
            HubOptions {
                web: Some(WebSearchOptions {
                    backend: WebBackend::DuckDuckGo {
                        url: format!("{}/html/", hang.base()),
                    },
                    timeout: Duration::from_secs(30),
                    max_results: 5,
                }),
                ..HubOptions::default()
            },
        );
        let tool = hub3
            .catalog(MACHINE_OWNER)
            .unwrap()
            .by_full_name("web.web_search")
            .unwrap()
            .clone();
        let cancel = CancellationToken::new();
        let trigger = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            trigger.cancel();
        });
        let route = hub3.route_tool(&caller, &tool).unwrap();
        let e = hub3
            .call(
                route,
                &tool,
                Some(args(json!({"query": "rust"}))),
                None,
                cancel,
            )
            .await
            .unwrap_err();
        assert!(matches!(e, crate::upstream::CallError::Cancelled), "{e}");
    }
}
