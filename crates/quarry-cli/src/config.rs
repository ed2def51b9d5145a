//! Every environment variable Quarry reads, declared once: name, default, meaning, which
//! commands read it. `docs/configuration.md` is rendered from this table (a test fails when
//! the file differs), and a test fails when a `QUARRY_` name appears in the code without a row.
//!
//! The rule: only the CLI reads the environment, once, at start-up ([`Env::from_process`]),
//! and hands libraries typed options (`EngineOptions`, `IngestOptions`, `ModelEnv`,
//! `WorkerOptions`, …). Libraries that parse settings themselves (models, web search, chat)
//! take a lookup over this snapshot, which answers only the variables in this table — so a
//! variable without a row is never read.

use std::collections::BTreeMap;

/// What kind of value a variable holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A setting of Quarry's.
    Setting,
    /// A key or token: never printed (`serve --print-config` masks it).
    Secret,
    /// A variable of the system or of another tool that Quarry honours.
    System,
    /// Read only by tests, benchmarks or scripts, never by the `quarry` binary.
    TestsOnly,
}

/// One environment variable.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Var {
    pub(crate) name: &'static str,
    /// The section of docs/configuration.md it is listed in.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) section: &'static str,
    pub(crate) kind: Kind,
    /// The command-line option that sets the same thing (and wins over the variable).
    pub(crate) flag: Option<&'static str>,
    /// What applies when it is unset, in words.
    pub(crate) default: &'static str,
    /// The commands that read it.
    pub(crate) read_by: &'static [&'static str],
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) meaning: &'static str,
}

/// Commands that open an index (all of them).
const EVERY: &[&str] = &["every command"];
/// Commands that index folders.
const INDEXING: &[&str] = &["collection add", "index", "update", "serve", "mcp"];
/// Commands that convert files (folders with PDFs, Office files …, and uploads).
const CONVERTING: &[&str] = &[
    "collection add",
    "index",
    "update",
    "kb",
    "source",
    "serve",
    "mcp",
];
/// Commands that run ingestion workers.
const WORKERS: &[&str] = &["kb", "source", "serve"];
/// Commands that sync sources (and may store their credentials).
const SOURCES: &[&str] = &["source", "serve"];
/// Commands that may load an embedding model.
const EMBEDDING: &[&str] = &[
    "embed", "vsearch", "query", "eval", "kb", "source", "serve", "mcp",
];
/// Commands that run an embedding backlog to its end in one run.
const EMBED: &[&str] = &["embed"];
/// Commands that may load a reranker.
const QUERYING: &[&str] = &["query", "eval", "serve", "mcp"];
/// Commands that may load a query expander (seed 001: `vsearch` expands as well as `query`).
const EXPANDING: &[&str] = &["vsearch", "query", "eval", "serve", "mcp"];
/// Commands that may load a note-annotating chat model.
const ANNOTATING: &[&str] = &["kb", "serve", "mcp"];
/// What `--blobs` passes to the object store (it never reads the environment itself).
pub(crate) const BLOBS_ENV: &[Var] = &[
    AWS_ACCESS_KEY_ID,
    AWS_SECRET_ACCESS_KEY,
    AWS_SESSION_TOKEN,
    AWS_REGION,
    AWS_DEFAULT_REGION,
    AWS_ENDPOINT_URL,
    AWS_ALLOW_HTTP,
];

/// Commands that load any model.
const MODELS: &[&str] = &["embed", "vsearch", "query", "eval", "kb", "serve", "mcp"];
const SERVE: &[&str] = &["serve"];
const SERVERS: &[&str] = &["serve", "mcp"];
const TESTS: &[&str] = &["tests"];

/// Declares the table: one constant per variable (named as the variable) and [`ALL`].
macro_rules! table {
    ($( $section:literal {
        $( $id:ident: $kind:ident, $flag:expr, $read_by:expr, $default:literal, $meaning:literal; )*
    } )*) => {
        $($(
            #[allow(dead_code)]
            pub(crate) const $id: Var = Var {
                name: stringify!($id),
                section: $section,
                kind: Kind::$kind,
                flag: $flag,
                default: $default,
                read_by: $read_by,
                meaning: $meaning,
            };
        )*)*
        /// Every variable, in the order docs/configuration.md lists them.
        pub(crate) const ALL: &[Var] = &[$($($id,)*)*];
    };
}

table! {
    "Data and indexing" {
        QUARRY_HOME: Setting, None, EVERY,
            "`$XDG_DATA_HOME/quarry`, else `~/.local/share/quarry`",
            "Root of all indexes; `--index NAME` picks one inside it.";
        XDG_DATA_HOME: System, None, EVERY, "unset",
            "Where the default `QUARRY_HOME` lives (`$XDG_DATA_HOME/quarry`).";
        HOME: System, None, EVERY, "the user's home",
            "Default data and model cache directories; a leading `~` in a path. Passed to converter children.";
        USERPROFILE: System, None, MODELS, "unset",
            "The home directory where `HOME` is unset (Windows).";
        QUARRY_DATABASE_URL: Secret, Some("--database"), EVERY,
            "the embedded SQLite database in the index directory",
            "The system of record of a team's shared server: `postgres://user:password@host:port/database` (PostgreSQL 16 or newer with pgvector). The index directory then holds only what this node derives (its keyword index, model cache, upload staging). TLS is used when the server offers it; `?sslmode=require` insists, checking the server's certificate against the public roots or, with `&sslrootcert=/path/ca.pem`, against that CA only (a managed database's or your own).";
        QUARRY_BLOBS_URL: Setting, Some("--blobs"), EVERY, "`blobs/` in the index directory",
            "Where uploaded originals and extracted images live: `s3://bucket/prefix` (S3 or an S3-compatible store, with the `AWS_*` variables below). Shared by every node of a team's server; garbage collection is safe across nodes when `QUARRY_DATABASE_URL` is set too.";
        AWS_ACCESS_KEY_ID: Secret, None, EVERY, "none",
            "Credentials of the `--blobs` bucket (with `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`).";
        AWS_SECRET_ACCESS_KEY: Secret, None, EVERY, "none", "See `AWS_ACCESS_KEY_ID`.";
        AWS_SESSION_TOKEN: Secret, None, EVERY, "none", "See `AWS_ACCESS_KEY_ID`.";
        AWS_REGION: System, None, EVERY, "`AWS_DEFAULT_REGION`, else `us-east-1`",
            "Region of the `--blobs` bucket.";
        AWS_DEFAULT_REGION: System, None, EVERY, "unset", "Region when `AWS_REGION` is unset.";
        AWS_ENDPOINT_URL: System, None, EVERY, "AWS S3",
            "Endpoint of an S3-compatible store (MinIO, Ceph, R2, …) for `--blobs`.";
        AWS_ALLOW_HTTP: System, None, EVERY, "`false`",
            "`true` lets `--blobs` use a plain-http endpoint (a store on a private network).";
        QUARRY_SECRET_KEY: Secret, None, SOURCES, "unset (no credential can be stored)",
            "Seals the credentials of sources (a Git token, a WebDAV password) and the OAuth sign-ins of upstream MCP servers at rest: 32 random bytes as 64 hexadecimal digits (`openssl rand -hex 32`). The same on every node of a team's server; a credential stored under one key does not open under another.";
        QUARRY_SPACE: Setting, Some("--space"), EVERY, "`default`",
            "Work in this space (name or UUID); the CLI acts as its owner.";
        QUARRY_MAX_FILE_BYTES: Setting, None, INDEXING, "67108864 (64 MiB)",
            "Folder files larger than this are skipped with a warning.";
    }
    "Conversion and ingestion" {
        QUARRY_OCR: Setting, Some("--ocr"), CONVERTING, "`auto`",
            "`auto` OCRs pages without a text layer when `tesseract` is installed; `off` reports them.";
        QUARRY_OCR_LANGS: Setting, None, CONVERTING, "`eng`",
            "Tesseract languages (`eng+deu`, `chi_sim`); letters, digits, `+` and `_` only, else `eng`.";
        QUARRY_MAX_UPLOAD_MB: Setting, None, CONVERTING, "100",
            "Largest file converted, in MiB.";
        QUARRY_MAX_PAGES: Setting, None, CONVERTING, "2000",
            "Most pages or slides converted per document.";
        QUARRY_CONVERT_TIMEOUT_SECS: Setting, None, CONVERTING, "300",
            "Longest conversion of one file, in seconds.";
        QUARRY_CONVERT_MEMORY_MB: Setting, None, CONVERTING, "2048",
            "Address space of a converter child process, in MiB (0: no limit).";
        QUARRY_CHUNK_TIMEOUT_SECS: Setting, None, CONVERTING, "60",
            "Longest cut of one document into chunks, in seconds. Chunking runs in the Quarry process itself, not in a converter child, and checks this as it goes: an upload past it fails with the reason (nothing of it is stored), a folder's file is skipped with it.";
        QUARRY_CHUNK_MEMORY_MB: Setting, None, CONVERTING, "1024",
            "Working memory of cutting one document into chunks, in MiB, counted as it grows (0: no limit); past it, as `QUARRY_CHUNK_TIMEOUT_SECS`. Ordinary text needs about its own size or less; a document of millions of near-empty lines needs many times its size.";
        QUARRY_INGEST_RETRY_SECS: Setting, None, CONVERTING, "5",
            "Delay before the first retry of a job that failed for a reason that may pass; doubled for each later one.";
        QUARRY_INGEST_WORKERS: Setting, None, WORKERS, "2",
            "Files converted (or embedding jobs run) at once per process (1 to 64); it runs four job threads for each, so files that wait for their keyword flush leave the next ones converting, and one flush takes them all.";
        QUARRY_JOB_LEASE_SECS: Setting, None, WORKERS, "60",
            "How long a job's claim lasts without renewal; a dead worker's job is taken over after it (at least 2).";
        QUARRY_SOURCE_LEASE_SECS: Setting, None, SOURCES, "600",
            "How long a node's claim on a source it syncs lasts without renewal (at least 2): a running sync renews it every quarter of it, and a server node resumes a sync whose node stopped (killed, cut off) this long after, from what it had applied. The same on every node.";
        PATH: System, None, CONVERTING, "the system's",
            "Passed to converter children (to find `tesseract`).";
        USER: System, None, CONVERTING, "the system's", "Passed to converter children.";
        LANG: System, None, CONVERTING, "the system's", "Passed to converter children.";
        LC_ALL: System, None, CONVERTING, "the system's", "Passed to converter children.";
        LC_CTYPE: System, None, CONVERTING, "the system's", "Passed to converter children.";
        TZ: System, None, CONVERTING, "the system's", "Passed to converter children.";
        TMPDIR: System, None, CONVERTING, "`/tmp`",
            "Temporary files (OCR images); passed to converter children.";
        TESSDATA_PREFIX: System, None, CONVERTING, "tesseract's",
            "Where `tesseract` finds its language data; passed to converter children.";
        OMP_THREAD_LIMIT: System, None, CONVERTING, "tesseract's",
            "Threads one `tesseract` run uses; passed to converter children.";
    }
    "Models" {
        QUARRY_EMBED_MODEL: Setting, Some("--embed-model"), EMBEDDING,
            "the model the index was embedded with, else `intfloat/multilingual-e5-small` (fetched from the Hub on first use)",
            "Embedding model: a model directory, a Hugging Face id (`org/name[@rev]`, `hf:name`), `openai:MODEL`, `ollama:MODEL`, or `none`: keyword search only (no model loaded or fetched, uploads not embedded). A server that cannot fetch the default model (offline) searches by keyword and says so in its log and in `/status`.";
        QUARRY_EMBED_CHECKPOINT_SECS: Setting, None, EMBED, "30",
            "How often `quarry embed` adds the vectors it embedded so far to the vector index, in seconds, so documents become searchable as it goes rather than at its end (`0`: after every batch of 64 chunks).";
        QUARRY_EMBED_QUANTIZE: Setting, None, EMBEDDING, "`none`",
            "`int8`: local embedding models run their matrix products on int8 weights and activations, about 1.5× faster on AVX2 CPUs and 1.8× on AVX512-VNNI ones, with vectors within cosine 0.99 of full precision (the same model: an index needs no re-embedding). Speed and quality figures: the README's \"Semantic search and models\".";
        QUARRY_RERANK_MODEL: Setting, Some("--rerank-model"), QUERYING, "none",
            "Reranker for `query`: a cross-encoder directory or Hugging Face id, or `jina:` / `cohere:` / `dashscope:` / `rerank:MODEL` with `QUARRY_RERANK_URL`.";
        QUARRY_EXPAND_MODEL: Setting, Some("--expand-model"), EXPANDING, "none",
            "Query expansion for `query` and `vsearch`: `openai:MODEL` or `ollama:MODEL`.";
        QUARRY_SUMMARY_MODEL: Setting, Some("--summary-model"), ANNOTATING, "none",
            "Titles, tags and a one-line summary for notes agents create: `openai:MODEL` or `ollama:MODEL`.";
        QUARRY_OPENAI_BASE_URL: Setting, None, MODELS, "`$OPENAI_BASE_URL`, else `https://api.openai.com/v1`",
            "OpenAI-compatible API for `openai:` models.";
        OPENAI_BASE_URL: System, None, MODELS, "`https://api.openai.com/v1`",
            "OpenAI-compatible API when `QUARRY_OPENAI_BASE_URL` is unset; also chat's `openai:` provider.";
        QUARRY_OPENAI_API_KEY: Secret, None, MODELS, "`$OPENAI_API_KEY`",
            "Key for `openai:` models (required by `api.openai.com`, optional elsewhere).";
        OPENAI_API_KEY: Secret, None, MODELS, "none",
            "Key for `openai:` models when `QUARRY_OPENAI_API_KEY` is unset; also chat's `openai:` provider.";
        OLLAMA_HOST: System, None, MODELS, "`http://127.0.0.1:11434`",
            "Ollama server for `ollama:` models and chat (`host`, `host:port` or a URL).";
        QUARRY_RERANK_URL: Setting, None, QUERYING, "none",
            "Full URL of the `/rerank` endpoint for `jina:` / `cohere:` / `dashscope:` / `rerank:` rerankers.";
        QUARRY_RERANK_API_KEY: Secret, None, QUERYING, "none",
            "Key for the rerank API (required by the hosted Jina, Cohere and DashScope APIs).";
        QUARRY_MODELS_DIR: Setting, None, MODELS, "`$XDG_CACHE_HOME/quarry/models`, else `~/.cache/quarry/models`",
            "Cache of models fetched from the Hugging Face Hub.";
        XDG_CACHE_HOME: System, None, MODELS, "unset",
            "Where the default model cache lives (`$XDG_CACHE_HOME/quarry/models`).";
        HF_ENDPOINT: System, None, MODELS, "`https://huggingface.co`",
            "Hugging Face Hub endpoint (a mirror).";
        HF_TOKEN: Secret, None, MODELS, "none",
            "Hugging Face access token, for private and gated models.";
        HF_HUB_OFFLINE: System, None, MODELS, "off",
            "`1` / `true`: never download; a model missing from the cache is an error.";
        QUARRY_OFFLINE: Setting, None, MODELS, "off",
            "Same as `HF_HUB_OFFLINE`.";
    }
    "Search" {
        QUARRY_FUSION: Setting, None, QUERYING, "`calibrated`",
            "Hybrid fusion: `calibrated` (confidence-weighted, calibrated scores) or `rrf` (QMD's plain RRF).";
    }
    "Server" {
        QUARRY_HTTP_HEADER_TIMEOUT: Setting, Some("--header-timeout"), SERVE, "30",
            "Seconds a client may take to send a request's headers; also how long an idle connection stays open.";
        QUARRY_HTTP_MAX_CONNECTIONS: Setting, Some("--max-connections"), SERVE, "512",
            "Most HTTP connections served at once; more are answered 503 and closed (`GET /health` is still answered, from a reserve of 16).";
        QUARRY_HTTP_MAX_CONNECTIONS_PER_ADDRESS: Setting, Some("--max-connections-per-address"), SERVE, "a quarter of `--max-connections`",
            "Most of those from one client address, so one client cannot hold them all. Behind a proxy on the same machine every client has its address: raise it there.";
        QUARRY_HTTP_FIRST_BYTE_TIMEOUT: Setting, Some("--first-byte-timeout"), SERVE, "10",
            "Seconds a new connection may stay silent before it is closed (at most the header timeout).";
        QUARRY_INDEX_CHECK_SECS: Setting, None, SERVE, "600",
            "Seconds between a node's self-checks: its keyword and passage indexes compared with the store, and every document whose entries differ re-indexed (`0`: never). The first check comes after a minute at most.";
        QUARRY_LOG: Setting, None, SERVERS, "`info`",
            "Log filter on stderr (`debug`, `quarry_server=debug,info`, …).";
        QUARRY_AUDIT_RETENTION_DAYS: Setting, None, SERVERS, "90",
            "Days the audit log keeps events (tool calls, writes, searches, refusals); `0` keeps them forever.";
        QUARRY_AUDIT_QUERIES: Setting, None, SERVERS, "`off`",
            "`on` records search query text in the audit log (off: only who searched which knowledge bases and how many results).";
        QUARRY_INSIGHT_RETENTION_DAYS: Setting, None, SERVERS, "90",
            "Days the insight log keeps searches and daily usage counts (the owners' unanswered questions and usage charts); `0` keeps them forever.";
        QUARRY_INSIGHT_QUERIES: Setting, None, SERVERS, "`on`",
            "`off` keeps no text of searches that found nothing (they still group, by a hash of their terms); answered searches never keep text.";
        QUARRY_RATE_TOOL_CALLS: Setting, None, SERVE, "600",
            "Tool calls per access token per minute, on every MCP endpoint, shared by every node (`0`: no limit); over it, a JSON-RPC error `RATE_LIMITED` with the seconds to wait.";
        QUARRY_RATE_CHATS: Setting, None, SERVE, "60",
            "Chats per access token per minute (`0`: no limit); over it, 429 with `Retry-After`.";
        QUARRY_MONTHLY_MODEL_TOKENS: Setting, None, SERVE, "`0` (no limit)",
            "Model tokens each space may spend per calendar month (UTC) on chat, remote embeddings, query expansion and reranking, counted on every node; once spent, chats are refused with 429 `RATE_LIMITED` until the month ends. A space's owner may set a lower limit of its own (`PUT /api/v1/insight/budget`); this one stays the ceiling (see docs/insight.md).";
        QUARRY_AUTH_FAILURES_FREE: Setting, None, SERVE, "5",
            "Failed authentications per client address (not loopback) and per presented token in 15 minutes answered at once; past them each refusal waits 250 ms, doubling up to 10 s.";
        QUARRY_PUBLIC_URL: Setting, Some("--public-url"), SERVE, "the origin each request was sent to",
            "The origin clients reach the server at (`https://kb.example.com`): the OAuth issuer and resource identifiers. Set it behind a proxy or load balancer, the same on every node.";
        QUARRY_OIDC_CONFIG: Setting, Some("--oidc-config"), SERVE, "none",
            "A JSON file naming the identity providers people sign in with (OpenID Connect; several allowed), each provider's mapping of its groups to spaces, roles and reader groups, and how long a web session lasts: docs/sign-in.md. A provider's `client_secret_env` names another variable that holds its client secret (read only for that). The same file on every node.";
        QUARRY_OIDC_ISSUER: Setting, Some("--oidc-issuer"), SERVE, "none",
            "One identity provider without a file (`https://login.example.com/realms/main`), with `QUARRY_OIDC_CLIENT_ID` and `QUARRY_OIDC_CLIENT_SECRET`: people sign in with it, and those in no space are told to ask an owner (group mappings need `QUARRY_OIDC_CONFIG`).";
        QUARRY_OIDC_CLIENT_ID: Setting, None, SERVE, "none",
            "The client id Quarry is registered under at `QUARRY_OIDC_ISSUER`.";
        QUARRY_OIDC_CLIENT_SECRET: Secret, None, SERVE, "none (a public client, PKCE only)",
            "The client secret of `QUARRY_OIDC_CLIENT_ID`.";
        QUARRY_UI_DIR: Setting, None, SERVE, "unset (the embedded files)",
            "Serve the web UI's files from this folder, read on every request (UI development).";
        QUARRY_WEB_SEARCH: Setting, None, SERVE, "`duckduckgo`",
            "Backend of the built-in `web.web_search` tool: `duckduckgo`, `searxng` or `off`.";
        QUARRY_WEB_SEARCH_URL: Setting, None, SERVE, "DuckDuckGo's HTML endpoint",
            "The web search backend's URL (required for `searxng`).";
        QUARRY_WEB_SEARCH_TIMEOUT: Setting, None, SERVE, "10",
            "Longest web search request, in seconds.";
        QUARRY_HUB_UPSTREAM_STARTS: Setting, None, SERVE, "twice the CPUs, 4 to 16",
            "Most stdio MCP upstreams started at once (1 to 256), each from its start to its first tool list; the others wait their turn as `connecting`, a restart reconnecting all of them included. While the server loads its models they start one at a time.";
    }
    "Chat" {
        QUARRY_CHAT_MODEL: Setting, Some("--chat-model"), SERVE, "none (chat answers 503)",
            "The LLM behind `POST /api/v1/chat`: `openai:MODEL`, `deepseek:MODEL`, `qwen:MODEL` or `ollama:MODEL`.";
        QUARRY_CHAT_BASE_URL: Setting, None, SERVE, "the provider's",
            "The chat API's base URL (vLLM, llama.cpp: `openai:MODEL` with this).";
        QUARRY_CHAT_API_KEY: Secret, None, SERVE, "the provider's variable",
            "The chat API's key; else `OPENAI_API_KEY`, `DEEPSEEK_API_KEY` or `DASHSCOPE_API_KEY` by provider.";
        DEEPSEEK_API_KEY: Secret, None, SERVE, "none", "Key for `deepseek:` chat models.";
        DASHSCOPE_API_KEY: Secret, None, SERVE, "none", "Key for `qwen:` chat models.";
        QUARRY_CHAT_TIMEOUT: Setting, None, SERVE, "120",
            "Longest chat API request, in seconds.";
        QUARRY_CHAT_RETRIES: Setting, None, SERVE, "3",
            "Retries of a chat API request on 429 or 5xx before the first byte (0 to 10).";
        QUARRY_CHAT_MAX_TOOL_ROUNDS: Setting, None, SERVE, "5",
            "Rounds of tool calls before the model must answer.";
        QUARRY_CHAT_TOOL_TIMEOUT: Setting, None, SERVE, "60",
            "Longest tool call in a chat, in seconds (1 to 3600).";
        RAG_TOP_K: Setting, None, SERVE, "5", "Passages given to the chat model.";
        RAG_ANN_TOP_K: Setting, None, SERVE, "20", "Candidates gathered before the cut.";
        RAG_USE_RERANK: Setting, None, SERVE, "`true`", "Rerank chat candidates.";
        RAG_MIN_SCORE: Setting, None, SERVE, "0", "Passages scoring below this are dropped (0 to 1).";
    }
    "Tests only" {
        QUARRY_UPDATE_DOCS: TestsOnly, None, TESTS, "unset",
            "`1`: the configuration test rewrites docs/configuration.md instead of failing.";
        QUARRY_BIN: TestsOnly, None, TESTS, "the workspace's debug build",
            "The `quarry` binary the interop tests and benchmarks run.";
        QUARRY_TEST_DATABASE_URL: TestsOnly, None, TESTS, "unset (those tests skip; under `CI=true` they fail)",
            "A PostgreSQL server with pgvector on which the store tests make their own databases (`scripts/test-services start`).";
        QUARRY_TEST_BACKEND: TestsOnly, None, TESTS, "`sqlite`",
            "`postgres`: the interop tests give every home its own database on `QUARRY_TEST_DATABASE_URL`.";
        QUARRY_TEST_S3_ENDPOINT: TestsOnly, None, TESTS, "unset (those tests skip; under `CI=true` they fail)",
            "An S3-compatible server (moto) for the object-storage blob tests.";
        QUARRY_TEST_PG_TLS_URL: TestsOnly, None, TESTS, "unset (the TLS test skips; under `CI=true` it fails)",
            "The test PostgreSQL server behind a TLS-only front (`scripts/pg-tls-front.py`).";
        QUARRY_TEST_PG_CA: TestsOnly, None, TESTS, "unset (the TLS test skips; under `CI=true` it fails)",
            "The CA (PEM) that signed the certificate of `QUARRY_TEST_PG_TLS_URL`.";
        QUARRY_TEST_PG_BIN: TestsOnly, None, TESTS, "unset (`psql` from `PATH`)",
            "Where the interop tests find `psql`.";
        QUARRY_TEST_SERVICES_DIR: TestsOnly, None, TESTS, "`/tmp/quarry-test-services-UID`",
            "State of `scripts/test-services` (pid files, logs).";
        QUARRY_TEST_DOCS: TestsOnly, None, TESTS, "unset (those tests skip)",
            "Folder of real documents (PDF, Office) for the interop tests.";
        QUARRY_TEST_MINILM: TestsOnly, None, TESTS, "unset (those tests skip)",
            "Offline all-MiniLM-L6-v2 directory (`scripts/setup-models`).";
        QUARRY_TEST_E5: TestsOnly, None, TESTS, "unset (those tests skip)",
            "Offline e5 directory (`scripts/setup-models`).";
        QUARRY_TEST_E5_XLMR: TestsOnly, None, TESTS, "unset (those tests skip)",
            "Offline XLM-R e5 directory (`scripts/setup-models`).";
        QUARRY_UI_TEST_DIR: TestsOnly, None, TESTS, "unset (the embedded files)",
            "UI interop tests serve the web UI from this folder (becomes the server's `QUARRY_UI_DIR`).";
        QUARRY_UI_ARTIFACTS: TestsOnly, None, TESTS, "`$CARGO_TARGET_DIR/ui-artifacts`",
            "Where UI tests write screenshots.";
    }
}

/// What a converter child process's environment holds (nothing else of ours reaches it).
pub(crate) const CONVERTER_CHILD_ENV: &[Var] = &[
    PATH,
    HOME,
    USER,
    LANG,
    LC_ALL,
    LC_CTYPE,
    TZ,
    TMPDIR,
    TESSDATA_PREFIX,
    OMP_THREAD_LIMIT,
];

/// A snapshot of the variables in [`ALL`], taken once at start-up.
#[derive(Debug, Clone, Default)]
pub(crate) struct Env {
    values: BTreeMap<&'static str, String>,
}

impl Env {
    /// Reads every variable of the table the binary uses (not the tests-only ones).
    pub(crate) fn from_process() -> Env {
        Env {
            values: ALL
                .iter()
                .filter(|v| v.kind != Kind::TestsOnly)
                .filter_map(|v| Some((v.name, std::env::var(v.name).ok()?)))
                .collect(),
        }
    }

    /// A snapshot holding `pairs` (names outside the table are dropped, as from the process).
    #[cfg(test)]
    pub(crate) fn from_pairs(pairs: &[(&str, &str)]) -> Env {
        Env {
            values: pairs
                .iter()
                .filter_map(|(k, v)| Some((lookup_var(k)?.name, (*v).to_owned())))
                .collect(),
        }
    }

    /// The variable's value, trimmed; `None` when unset or blank.
    pub(crate) fn get(&self, var: &Var) -> Option<&str> {
        self.values
            .get(var.name)
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
    }

    /// The value as it was set (untrimmed), for paths and child environments.
    pub(crate) fn raw(&self, var: &Var) -> Option<&str> {
        self.values.get(var.name).map(String::as_str)
    }

    /// A lookup for libraries that parse settings by name: answers only the table's variables
    /// (a debug build panics when a library asks for one without a row, so tests catch it).
    pub(crate) fn lookup(&self) -> impl Fn(&str) -> Option<String> + '_ {
        move |k| {
            debug_assert!(
                lookup_var(k).is_some(),
                "{k} is read without a row in crates/quarry-cli/src/config.rs"
            );
            self.values.get(k).cloned()
        }
    }

    /// A whole number (`None` when unset or blank; an error naming the variable otherwise).
    pub(crate) fn u64(&self, var: &Var) -> anyhow::Result<Option<u64>> {
        match self.get(var) {
            None => Ok(None),
            Some(v) => v.parse::<u64>().map(Some).map_err(|_| {
                let raw = self.raw(var).unwrap_or_default();
                anyhow::anyhow!("{}={raw:?} is not a whole number", var.name)
            }),
        }
    }
}

/// The row of `name`.
pub(crate) fn lookup_var(name: &str) -> Option<&'static Var> {
    ALL.iter().find(|v| v.name == name)
}

#[cfg(test)]
/// docs/configuration.md: the variables of [`ALL`] by section, then every command's options
/// (from the command-line definition, `cli`).
pub(crate) fn render_markdown(cli: &clap::Command) -> String {
    let mut out = String::from(
        "# Configuration\n\n\
         <!-- Generated from crates/quarry-cli/src/config.rs and the command-line definition: \
         do not edit. Regenerate with `QUARRY_UPDATE_DOCS=1 cargo test -p quarry-cli --bin quarry \
         configuration`. -->\n\n\
         Quarry reads its environment once, at start-up, in the `quarry` binary; libraries \
         receive typed options and never read the environment. A command-line option wins over \
         its variable. `quarry serve --print-config` shows the settings in effect and where \
         each came from (keys and tokens masked).\n",
    );
    let mut section = "";
    for v in ALL {
        if v.section != section {
            section = v.section;
            out.push_str(&format!(
                "\n## {section}\n\n| variable | option | default | read by | meaning |\n|---|---|---|---|---|\n"
            ));
        }
        let mut meaning = v.meaning.to_owned();
        if v.kind == Kind::Secret {
            meaning.push_str(" Secret: never printed.");
        }
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} |\n",
            v.name,
            v.flag.map(|f| format!("`{f}`")).unwrap_or_default(),
            v.default,
            v.read_by.join(", "),
            meaning
        ));
    }
    out.push_str(
        "\n## Command-line options\n\nThe options of `quarry` itself apply to every command; \
         a command's options apply to it and to its subcommands.\n",
    );
    render_commands(cli, "quarry", &mut out);
    out
}

/// One table per command that has options of its own, depth first.
#[cfg(test)]
fn render_commands(cmd: &clap::Command, path: &str, out: &mut String) {
    let own: Vec<&clap::Arg> = cmd
        .get_arguments()
        .filter(|a| !a.is_positional() && !a.is_hide_set())
        .filter(|a| !matches!(a.get_id().as_str(), "help" | "version"))
        .collect();
    if !own.is_empty() {
        out.push_str(&format!(
            "\n### `{path}`\n\n| option | variable | default | meaning |\n|---|---|---|---|\n"
        ));
        for a in own {
            let name = match (a.get_long(), a.get_short()) {
                (Some(l), Some(s)) => format!("`-{s}`, `--{l}`"),
                (Some(l), None) => format!("`--{l}`"),
                (None, Some(s)) => format!("`-{s}`"),
                (None, None) => continue,
            };
            let env = a
                .get_env()
                .map(|e| format!("`{}`", e.to_string_lossy()))
                .unwrap_or_default();
            let default = a
                .get_default_values()
                .iter()
                .map(|d| format!("`{}`", d.to_string_lossy()))
                .collect::<Vec<_>>()
                .join(", ");
            let help = a
                .get_help()
                .map(|h| h.to_string().replace('\n', " ").replace('|', "\\|"))
                .unwrap_or_default();
            out.push_str(&format!("| {name} | {env} | {default} | {help} |\n"));
        }
    }
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        render_commands(sub, &format!("{path} {}", sub.get_name()), out);
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::*;

    fn repo_root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    /// The blob store's settings are the variables the CLI passes it.
    #[test]
    fn blobs_env_is_what_the_object_store_takes() {
        let names: Vec<&str> = BLOBS_ENV.iter().map(|v| v.name).collect();
        assert_eq!(names, quarry_blobs_object::ENV_SETTINGS);
    }

    /// docs/configuration.md is what the table renders.
    #[test]
    fn configuration_doc_is_current() {
        use clap::CommandFactory as _;
        let rendered = render_markdown(&crate::cli::Cli::command());
        let path = repo_root().join("docs/configuration.md");
        if std::env::var(QUARRY_UPDATE_DOCS.name).is_ok_and(|v| v == "1") {
            std::fs::write(&path, &rendered).expect("write docs/configuration.md");
            return;
        }
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            on_disk == rendered,
            "docs/configuration.md differs from crates/quarry-cli/src/config.rs and the \
             command-line definition; regenerate it with \
             `QUARRY_UPDATE_DOCS=1 cargo test -p quarry-cli --bin quarry configuration` \
             and commit it"
        );
    }

    /// Every `QUARRY_…` name in the sources (crates/*/src) has a row.
    #[test]
    fn every_quarry_variable_in_the_code_is_in_the_table() {
        let root = repo_root();
        let mut files = Vec::new();
        for krate in std::fs::read_dir(root.join("crates")).expect("crates/") {
            collect_files(&krate.expect("crate").path().join("src"), &mut files);
        }
        let mut missing = BTreeMap::new();
        for file in files {
            let Ok(text) = std::fs::read_to_string(&file) else {
                continue;
            };
            for name in quarry_names(&text) {
                if lookup_var(&name).is_none() {
                    missing
                        .entry(name)
                        .or_insert_with(|| file.display().to_string());
                }
            }
        }
        assert!(
            missing.is_empty(),
            "variables missing from crates/quarry-cli/src/config.rs (add a row, then regenerate \
             docs/configuration.md): {missing:#?}"
        );
    }

    /// The scanner finds names, not prefixes.
    #[test]
    fn quarry_names_are_whole_names() {
        let text = "QUARRY_HOME, `QUARRY_CHAT_*`, \"QUARRY_WEB_SEARCH_URL\" xQUARRY_NOT";
        assert_eq!(
            quarry_names(text),
            vec!["QUARRY_HOME".to_owned(), "QUARRY_WEB_SEARCH_URL".to_owned()]
        );
        assert!(lookup_var(concat!("QUARRY", "_NO_SUCH_VARIABLE")).is_none());
    }

    /// Only the CLI reads the environment: no library source calls `std::env::var*`, except
    /// where a child process's own environment or `~` expansion needs the system's.
    #[test]
    fn libraries_do_not_read_the_environment() {
        const ALLOWED: &[&str] = &[
            // `~` in a model path, expanded as a shell would.
            "quarry-models/src/hub.rs",
            // PATH, HOME, locale for a stdio upstream's clean environment.
            "quarry-hub/src/upstream.rs",
            // PATH for the `git` child of a Git source, whose environment is cleared.
            "quarry-sources/src/git.rs",
            // Test-only crate (a dev-dependency): PATH for `git http-backend`'s cleared environment.
            "quarry-test-http/src/git.rs",
            // Its unit test (`#[cfg(test)]` only) finds the test server the suite started.
            "quarry-store-pg/src/pool.rs",
            // Test databases (feature `testing`, tests only) on the server the suite started.
            "quarry-store-pg/src/testing.rs",
        ];
        let root = repo_root().join("crates");
        let mut files = Vec::new();
        for krate in std::fs::read_dir(&root).expect("crates/") {
            let krate = krate.expect("crate").path();
            if krate.ends_with("quarry-cli") {
                continue;
            }
            collect_files(&krate.join("src"), &mut files);
        }
        let mut readers = Vec::new();
        for file in files {
            let rel = file
                .strip_prefix(&root)
                .unwrap_or(&file)
                .display()
                .to_string();
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            let reads = ["env::var(", "env::var_os(", "env::vars(", "env::vars_os("]
                .iter()
                .any(|call| text.contains(call));
            if reads && !ALLOWED.contains(&rel.as_str()) {
                readers.push(rel);
            }
        }
        assert!(
            readers.is_empty(),
            "libraries read the environment (read it in quarry-cli's config and pass options): \
             {readers:?}"
        );
    }

    /// The snapshot holds only the table's variables; values are trimmed for settings and
    /// kept as set for paths; a bad number names its variable.
    #[test]
    fn snapshot_answers_only_table_variables() {
        let env = Env::from_pairs(&[("QUARRY_HOME", " /x "), ("NOT_OURS", "1")]);
        assert_eq!(env.get(&QUARRY_HOME), Some("/x"));
        assert_eq!(env.raw(&QUARRY_HOME), Some(" /x "));
        assert_eq!(env.lookup()("QUARRY_OCR"), None);
        let env = Env::from_pairs(&[("QUARRY_MAX_PAGES", "12x")]);
        let err = env.u64(&QUARRY_MAX_PAGES).unwrap_err().to_string();
        assert!(err.contains("QUARRY_MAX_PAGES=\"12x\""), "{err}");
    }

    /// A library asking the snapshot for a variable without a row fails loudly in tests.
    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "without a row")]
    fn an_unlisted_variable_is_a_test_failure() {
        let _ = Env::default().lookup()("NOT_OURS");
    }

    fn collect_files(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                collect_files(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }

    /// `QUARRY_[A-Z0-9_]+` words, without a trailing `_` (a prefix such as `QUARRY_CHAT_*`).
    fn quarry_names(text: &str) -> Vec<String> {
        let bytes = text.as_bytes();
        let word = |b: u8| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_';
        let mut names = Vec::new();
        let mut i = 0;
        while let Some(at) = text[i..].find("QUARRY_") {
            let start = i + at;
            let mut end = start + "QUARRY_".len();
            while end < bytes.len() && word(bytes[end]) {
                end += 1;
            }
            i = end;
            let joined = start > 0 && (bytes[start - 1].is_ascii_alphanumeric());
            let name = &text[start..end];
            if !joined && !name.ends_with('_') {
                names.push(name.to_owned());
            }
        }
        names.sort();
        names.dedup();
        names
    }
}
