//! The command line's grammar: the global options, the commands and their arguments (clap
//! definitions), and the parse that spells help under the name the binary runs as.

use std::path::PathBuf;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::{access, config, eval, hub, kb, migrate, policy, source};

#[derive(Parser)]
#[command(
    name = "quarry",
    version,
    about = "A private knowledge base for AI agents: index markdown folders, search them (BM25, CJK-aware), fetch documents.",
    long_about = None,
    after_help = "Data lives in $QUARRY_HOME (default: $XDG_DATA_HOME/quarry or ~/.local/share/quarry)."
)]
pub(crate) struct Cli {
    /// Use a named index inside $QUARRY_HOME (default: "index").
    #[arg(long, global = true, value_name = "NAME")]
    pub(crate) index: Option<String>,
    /// Print machine-readable JSON instead of text.
    #[arg(long, global = true)]
    pub(crate) json: bool,
    /// Work in this space (name or UUID) instead of `default`; the CLI acts as its owner.
    #[arg(long, global = true, env = config::QUARRY_SPACE.name, value_name = "SPACE")]
    pub(crate) space: Option<String>,
    /// A team's shared database: postgres://user:password@host:port/database (PostgreSQL
    /// with pgvector). Default: the embedded database in the index directory.
    #[arg(
        long,
        global = true,
        env = config::QUARRY_DATABASE_URL.name,
        value_name = "URL",
        hide_env_values = true
    )]
    pub(crate) database: Option<String>,
    /// Where uploaded originals live: s3://bucket/prefix (S3 or an S3-compatible store,
    /// configured with the usual AWS_* variables). Default: blobs/ in the index directory.
    #[arg(long, global = true, env = config::QUARRY_BLOBS_URL.name, value_name = "URL")]
    pub(crate) blobs: Option<String>,
    #[command(subcommand)]
    pub(crate) command: Command,
}

// `--embed-model`, for the commands that embed text.
#[derive(Args, Default)]
pub(crate) struct EmbedModelArg {
    /// Embedding model: a model directory, a Hugging Face id (`org/name[@rev]`, fetched and
    /// cached when online), `openai:MODEL`, `ollama:MODEL`, or `none` (keyword search only).
    /// Default: the model the index was embedded with, else intfloat/multilingual-e5-small
    /// (fetched on first use).
    #[arg(
        long,
        global = true,
        env = config::QUARRY_EMBED_MODEL.name,
        value_name = "SPEC",
        hide_env_values = true
    )]
    pub(crate) embed_model: Option<String>,
}

// `--rerank-model`, for the commands that run hybrid queries.
#[derive(Args, Default)]
pub(crate) struct RerankModelArg {
    /// Reranker for `query`: a cross-encoder directory or Hugging Face id, or
    /// `jina:MODEL` / `cohere:MODEL` / `dashscope:MODEL` with QUARRY_RERANK_URL. Default: none.
    #[arg(
        long,
        global = true,
        env = config::QUARRY_RERANK_MODEL.name,
        value_name = "SPEC",
        hide_env_values = true
    )]
    pub(crate) rerank_model: Option<String>,
}

// `--expand-model`, for the commands that search by meaning (seed 001: `vsearch` expands too).
#[derive(Args, Default)]
pub(crate) struct ExpandModelArg {
    /// Query expansion for `query` and `vsearch`: `openai:MODEL` (any OpenAI-compatible chat
    /// API, see QUARRY_OPENAI_BASE_URL). Default: none.
    #[arg(
        long,
        global = true,
        env = config::QUARRY_EXPAND_MODEL.name,
        value_name = "SPEC",
        hide_env_values = true
    )]
    pub(crate) expand_model: Option<String>,
}

// Both, for the commands that run hybrid queries.
#[derive(Args, Default)]
pub(crate) struct QueryModelArgs {
    #[command(flatten)]
    rerank: RerankModelArg,
    #[command(flatten)]
    expand: ExpandModelArg,
}

// `--summary-model`, for the commands that process agents' notes.
#[derive(Args, Default)]
pub(crate) struct SummaryModelArg {
    /// Titles, tags and a one-line summary for notes agents create (`create_knowledge`),
    /// written in the background: `openai:MODEL` or `ollama:MODEL`. Default: none.
    #[arg(
        long,
        global = true,
        env = config::QUARRY_SUMMARY_MODEL.name,
        value_name = "SPEC",
        hide_env_values = true
    )]
    pub(crate) summary_model: Option<String>,
}

// `--ocr`, for the commands that convert files.
#[derive(Args, Default)]
pub(crate) struct OcrArg {
    /// OCR for pages without a text layer (scans) during uploads and indexing: `auto` uses
    /// `tesseract` when it is installed; `off` reports such pages instead.
    #[arg(long, global = true, env = config::QUARRY_OCR.name, value_name = "auto|off")]
    pub(crate) ocr: Option<String>,
}

/// The options a command chose for models and conversion (unset where it takes none).
#[derive(Default)]
pub(crate) struct EngineChoices<'a> {
    pub(crate) embed: Option<&'a EmbedModelArg>,
    pub(crate) rerank: Option<&'a RerankModelArg>,
    pub(crate) expand: Option<&'a ExpandModelArg>,
    pub(crate) summary: Option<&'a SummaryModelArg>,
    pub(crate) ocr: Option<&'a OcrArg>,
}

// `quarry vsearch`: a search with the embedding model.
#[derive(Args)]
pub(crate) struct VsearchArgs {
    #[command(flatten)]
    pub(crate) search: SearchArgs,
    #[command(flatten)]
    embed: EmbedModelArg,
    #[command(flatten)]
    expand: ExpandModelArg,
}

// `quarry query`: a search with every model.
#[derive(Args)]
#[command(mut_arg("query", |a| a.required(false)))]
pub(crate) struct QueryArgs {
    #[command(flatten)]
    pub(crate) search: SearchArgs,
    /// A typed sub-query `TYPE:TEXT`, TYPE one of lex (keywords), vec (a question), hyde (a
    /// hypothetical answer passage); repeatable, up to 10, the first weighs 2x. The query,
    /// when given too, runs first through both retrievers.
    #[arg(long = "search", value_name = "TYPE:TEXT")]
    pub(crate) searches: Vec<String>,
    /// What you are looking for, for the reranker (it scores against intent + query).
    #[arg(long)]
    pub(crate) intent: Option<String>,
    /// Results from any of these collections (comma-separated or repeated; with `-c`).
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    pub(crate) collections: Vec<String>,
    /// Fused candidates the reranker scores (default 30).
    #[arg(long, value_name = "N")]
    pub(crate) candidate_limit: Option<usize>,
    #[command(flatten)]
    embed: EmbedModelArg,
    #[command(flatten)]
    query: QueryModelArgs,
}

// `quarry eval`: scores the search modes, models included.
#[derive(Args)]
pub(crate) struct EvalCmd {
    #[command(flatten)]
    pub(crate) eval: eval::EvalArgs,
    #[command(flatten)]
    embed: EmbedModelArg,
    #[command(flatten)]
    query: QueryModelArgs,
}

// `quarry kb …`: uploads are converted and embedded.
#[derive(Args)]
pub(crate) struct KbArgs {
    #[command(subcommand)]
    pub(crate) cmd: kb::KbCmd,
    #[command(flatten)]
    embed: EmbedModelArg,
    #[command(flatten)]
    summary: SummaryModelArg,
    #[command(flatten)]
    ocr: OcrArg,
}

// `quarry source …`: synced documents are converted and embedded like uploads.
#[derive(Args)]
pub(crate) struct SourceArgs {
    #[command(subcommand)]
    pub(crate) cmd: source::SourceCmd,
    #[command(flatten)]
    embed: EmbedModelArg,
    #[command(flatten)]
    ocr: OcrArg,
}

// The models and conversion options of the servers.
#[derive(Args)]
pub(crate) struct ServerModelArgs {
    #[command(flatten)]
    embed: EmbedModelArg,
    #[command(flatten)]
    query: QueryModelArgs,
    #[command(flatten)]
    summary: SummaryModelArg,
    #[command(flatten)]
    ocr: OcrArg,
}

impl ServerModelArgs {
    fn choices(&self) -> EngineChoices<'_> {
        EngineChoices {
            embed: Some(&self.embed),
            rerank: Some(&self.query.rerank),
            expand: Some(&self.query.expand),
            summary: Some(&self.summary),
            ocr: Some(&self.ocr),
        }
    }
}

impl Command {
    /// The model and conversion options this command takes.
    pub(crate) fn engine_choices(&self) -> EngineChoices<'_> {
        let none = EngineChoices::default();
        match self {
            Command::Collection(CollectionCmd::Add { ocr, .. })
            | Command::Index { ocr, .. }
            | Command::Update { ocr, .. } => EngineChoices {
                ocr: Some(ocr),
                ..none
            },
            Command::Kb(k) => EngineChoices {
                embed: Some(&k.embed),
                summary: Some(&k.summary),
                ocr: Some(&k.ocr),
                ..none
            },
            Command::Source(k) => EngineChoices {
                embed: Some(&k.embed),
                ocr: Some(&k.ocr),
                ..none
            },
            Command::Embed { embed, .. } => EngineChoices {
                embed: Some(embed),
                ..none
            },
            Command::Vsearch(VsearchArgs { embed, expand, .. }) => EngineChoices {
                embed: Some(embed),
                expand: Some(expand),
                ..none
            },
            Command::Query(QueryArgs { embed, query, .. })
            | Command::Eval(EvalCmd { embed, query, .. }) => EngineChoices {
                embed: Some(embed),
                rerank: Some(&query.rerank),
                expand: Some(&query.expand),
                ..none
            },
            Command::Mcp(m) => m.choices(),
            Command::Serve(s) => s.models.choices(),
            _ => none,
        }
    }
}

#[derive(Subcommand)]
pub(crate) enum Command {
    /// Manage folder collections.
    #[command(subcommand)]
    Collection(CollectionCmd),
    /// Knowledge bases: upload PDFs, Office files, spreadsheets, CSV, HTML, Markdown.
    Kb(KbArgs),
    /// Sources that sync a knowledge base: a folder, a Git repository, an S3 bucket, a
    /// WebDAV folder or a website's sitemap.
    Source(SourceArgs),
    /// Users of a shared server (who tokens belong to).
    #[command(subcommand)]
    User(access::UserCmd),
    /// Spaces (tenants) and who may use them, with which role.
    #[command(subcommand)]
    Space(access::SpaceCmd),
    /// Groups of users in a space (--space): documents' readers name them.
    #[command(subcommand)]
    Group(access::GroupCmd),
    /// Access tokens for a shared server: create (shown once), list, revoke.
    #[command(subcommand)]
    Token(access::TokenCmd),
    /// The audit log: tool calls, changes, searches, sign-ins and refusals, newest first.
    Audit(access::AuditArgs),
    /// Tool policies of a space (--space): refuse calls, or hold them for approval, by
    /// tool and arguments.
    #[command(subcommand)]
    Policy(policy::PolicyCmd),
    /// Tool calls held for a person's approval: list, show, approve, deny.
    #[command(subcommand)]
    Approvals(policy::ApprovalCmd),
    /// The tool hub: register MCP servers, browse and search the tool catalog.
    #[command(subcommand)]
    Hub(hub::HubCmd),
    /// Describe what lives under a path; shown with results and documents.
    #[command(subcommand)]
    Context(ContextCmd),
    /// Index all collections (or those named): add new, update changed, drop deleted files.
    Index {
        /// Only these collections.
        collections: Vec<String>,
        #[command(flatten)]
        ocr: OcrArg,
    },
    /// Re-scan collections, optionally running `git pull` in each first.
    Update {
        /// Run `git pull --ff-only` in each collection folder that is a git repository.
        #[arg(long)]
        pull: bool,
        /// Only these collections.
        collections: Vec<String>,
        #[command(flatten)]
        ocr: OcrArg,
    },
    /// Keyword (BM25) search. Words are OR-ed and ranked; "quoted phrase", +required, -excluded.
    Search(SearchArgs),
    /// Show one document, or some of its lines: path, #docid, or path:LINE.
    #[command(visible_alias = "cat")]
    Get {
        file: String,
        /// First line to show (1-based); `file:LINE` takes precedence.
        #[arg(long = "from", value_name = "LINE")]
        from: Option<usize>,
        /// Show at most this many lines.
        #[arg(short = 'l', long = "lines", value_name = "N")]
        lines: Option<usize>,
        /// Prefix each line with its number.
        #[arg(long)]
        line_numbers: bool,
    },
    /// List what is at a path: collections and knowledge bases, then their folders and
    /// documents (wiki pages under `<kb>/pages/`), as far as you may read them.
    Ls(crate::browse::LsArgs),
    /// Documents whose path matches a glob (`wiki/pages/*.md`, `**/*.pdf`).
    Find(crate::browse::FindArgs),
    /// Lines matching a regular expression, with their numbers (`get PATH:LINE` reads on).
    Grep(crate::browse::GrepArgs),
    /// Show several documents by glob (`notes/2025-*.md`) or comma list.
    MultiGet {
        pattern: String,
        /// Skip documents larger than this many bytes.
        #[arg(long, default_value_t = quarry_engine::MultiGetRequest::new("").max_bytes)]
        max_bytes: u64,
        /// Show at most this many lines per document.
        #[arg(short = 'l', long = "max-lines", value_name = "N")]
        max_lines: Option<usize>,
        #[arg(long)]
        line_numbers: bool,
    },
    /// Chunk documents and embed the chunks that changed (resumable; a progress bar on a
    /// terminal). Builds the vector index `vsearch` and `query` use.
    Embed {
        /// Only this collection.
        #[arg(short = 'c', long)]
        collection: Option<String>,
        /// Re-chunk and re-embed everything in scope, even unchanged text.
        #[arg(short = 'f', long)]
        force: bool,
        #[command(flatten)]
        embed: EmbedModelArg,
    },
    /// Semantic (vector) search; needs `quarry embed` to have run.
    Vsearch(VsearchArgs),
    /// Hybrid search (keyword + vectors, fused and re-ranked); keyword-only until `embed` ran.
    Query(QueryArgs),
    /// Index health: documents, embeddings, collections.
    Status,
    /// Metadata fields of the documents (front matter, document properties, fields given at
    /// upload, and the built-in collection, path, title, indexed): types, counts, top values.
    Metadata(MetadataArgs),
    /// Run the MCP server over stdio (for Claude Code, Cursor, Claude Desktop, …).
    Mcp(ServerModelArgs),
    /// Run the servers: MCP over Streamable HTTP at /mcp plus the REST API (`http`, default),
    /// MCP over stdio (`mcp`), or both in one process sharing one engine.
    // `server` is accepted too (QMD's spelling: `qmd server --transport both`).
    #[command(visible_alias = "server")]
    Serve(ServeArgs),
    /// Score search, vsearch and query against a judged query set (Hit@3, MRR@10, nDCG@10,
    /// Recall@10, Recall@100).
    Eval(EvalCmd),
    /// Copy this machine's data directory (every table, vectors, uploaded originals) into
    /// PostgreSQL and, with --blobs, object storage; run it again to resume.
    Migrate(migrate::MigrateArgs),
}

#[derive(Subcommand)]
pub(crate) enum CollectionCmd {
    /// Add a folder and index it.
    Add {
        path: PathBuf,
        /// Collection name (default: the folder's name).
        #[arg(long)]
        name: Option<String>,
        /// Glob of files to index, relative to the folder.
        #[arg(long, default_value = quarry_core::DEFAULT_MASK)]
        mask: String,
        /// Add the collection even when no file matches the mask yet.
        #[arg(long)]
        allow_empty: bool,
        #[command(flatten)]
        ocr: OcrArg,
    },
    /// List collections.
    #[command(alias = "ls")]
    List,
    /// Remove a collection and its index entries (files on disk are untouched).
    #[command(alias = "rm")]
    Remove { name: String },
    /// Rename a collection.
    #[command(alias = "mv")]
    Rename { old: String, new: String },
}

#[derive(Subcommand)]
pub(crate) enum ContextCmd {
    /// `context add [PATH] TEXT`: PATH is '/', collection/dir, qmd://…, or a folder (default: .).
    Add {
        #[arg(num_args = 1..=2, value_names = ["PATH", "TEXT"], required = true)]
        args: Vec<String>,
    },
    /// List contexts.
    #[command(alias = "ls")]
    List,
    /// Remove the context of a path.
    #[command(alias = "remove")]
    Rm { path: String },
}

#[derive(Args)]
pub(crate) struct ServeArgs {
    /// Which transports to serve.
    #[arg(long, value_enum, default_value_t = Transport::Http)]
    pub(crate) transport: Transport,
    /// HTTP port.
    #[arg(long, default_value_t = quarry_server::DEFAULT_PORT)]
    pub(crate) port: u16,
    /// Address to bind. Anything but loopback exposes your documents to the network.
    #[arg(long, default_value = "127.0.0.1")]
    pub(crate) bind: std::net::IpAddr,
    /// Accept this Host header too (besides loopback names and the bind address).
    #[arg(long = "allowed-host", value_name = "HOST")]
    pub(crate) allowed_hosts: Vec<String>,
    /// Accept requests carrying this Origin (besides loopback origins).
    #[arg(long = "allowed-origin", value_name = "ORIGIN")]
    pub(crate) allowed_origins: Vec<String>,
    /// Largest request body in bytes (larger ones get 413).
    #[arg(long, default_value_t = 4 << 20)]
    pub(crate) max_body_bytes: usize,
    /// Longest a REST request may run, in seconds.
    #[arg(long, default_value_t = 300)]
    pub(crate) request_timeout: u64,
    /// Seconds a client may take to send a request's headers; also how long an idle
    /// connection stays open between requests.
    #[arg(long, env = config::QUARRY_HTTP_HEADER_TIMEOUT.name, default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub(crate) header_timeout: u64,
    /// Most HTTP connections open at once; more are answered 503 and closed. Keep it
    /// below the process's open-file limit (`ulimit -n`).
    #[arg(long, env = config::QUARRY_HTTP_MAX_CONNECTIONS.name, default_value_t = 512,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub(crate) max_connections: u64,
    /// Most of those from one client address (default: a quarter of --max-connections).
    /// Behind a proxy on this machine every client has the proxy's address: raise it there.
    #[arg(long, env = config::QUARRY_HTTP_MAX_CONNECTIONS_PER_ADDRESS.name,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub(crate) max_connections_per_address: Option<u64>,
    /// Seconds a new connection may stay silent before it is closed (at most
    /// --header-timeout).
    #[arg(long, env = config::QUARRY_HTTP_FIRST_BYTE_TIMEOUT.name, default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub(crate) first_byte_timeout: u64,
    /// `token`: every route but /health needs an access token (see the `token` command).
    /// Default: `token` when --bind is not a loopback address, else `none` (local use).
    #[arg(long, value_enum)]
    pub(crate) auth: Option<AuthArg>,
    /// With --auth none, allow a non-loopback --bind anyway (anyone who can reach the port
    /// reads and writes everything).
    #[arg(long)]
    pub(crate) allow_unauthenticated_remote: bool,
    /// The origin clients reach this server at (`https://kb.example.com`), when it differs
    /// from what they send as `Host` or sits behind a load balancer: OAuth sign-in names it
    /// as issuer and resource. Every node of a team server gets the same one.
    #[arg(long, env = config::QUARRY_PUBLIC_URL.name, value_name = "URL")]
    pub(crate) public_url: Option<String>,
    /// Identity providers people sign in with (OpenID Connect), from a JSON file:
    /// providers, their group mappings and the session length (docs/sign-in.md). Needs
    /// --auth token.
    #[arg(long, env = config::QUARRY_OIDC_CONFIG.name, value_name = "FILE")]
    pub(crate) oidc_config: Option<std::path::PathBuf>,
    /// One identity provider's issuer, without a file (its client id and secret from
    /// QUARRY_OIDC_CLIENT_ID and QUARRY_OIDC_CLIENT_SECRET).
    #[arg(long, env = config::QUARRY_OIDC_ISSUER.name, value_name = "URL")]
    pub(crate) oidc_issuer: Option<String>,
    /// Most tools one MCP endpoint (`/api/mcp`, `/mcp?tools=…`) may expose; a wider
    /// selection is refused with an error naming the cap.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub(crate) max_tools: u16,
    /// Addresses users' HTTP MCP servers, custom tools and sources (Git, S3, WebDAV, sites
    /// attached by anyone but the machine's owner, and scheduled syncs of a server with
    /// tokens) may reach besides public ones (comma-separated CIDRs, e.g.
    /// `10.1.0.0/16,127.0.0.1/32`). Loopback, private, link-local and metadata addresses are
    /// refused otherwise. One source may reach more of its own (`quarry source set ID
    /// --allow-net`); a restart with another list retries at once the sources it refused.
    #[arg(long, value_name = "CIDRS")]
    pub(crate) allow_net: Option<String>,
    /// Let users (not only the machine's owner) register stdio MCP servers — commands run
    /// on this machine with this process's rights. Only for a team that trusts every user.
    #[arg(long)]
    pub(crate) hub_allow_commands: bool,
    /// The LLM behind `POST /api/v1/chat`: openai:MODEL, deepseek:MODEL, qwen:MODEL or
    /// ollama:MODEL (vLLM and llama.cpp servers: openai:MODEL with QUARRY_CHAT_BASE_URL).
    /// The key comes from QUARRY_CHAT_API_KEY or the provider's variable; see docs/chat.md.
    #[arg(long, env = config::QUARRY_CHAT_MODEL.name, value_name = "SPEC")]
    pub(crate) chat_model: Option<String>,
    /// Log format on stderr.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub(crate) log_format: LogFormat,
    /// Print the settings in effect (options, variables, defaults; keys and tokens masked)
    /// and where each came from, then exit.
    #[arg(long)]
    pub(crate) print_config: bool,
    #[command(flatten)]
    models: ServerModelArgs,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Transport {
    Mcp,
    Http,
    Both,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum AuthArg {
    None,
    Token,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum LogFormat {
    Text,
    Json,
}

#[derive(Args)]
pub(crate) struct SearchArgs {
    /// The query (several words may be given unquoted).
    #[arg(required = true, num_args = 1..)]
    pub(crate) query: Vec<String>,
    /// Number of results.
    #[arg(short = 'n', long = "limit", default_value_t = 10)]
    pub(crate) limit: usize,
    /// Drop results scoring below this (0–1; default 0, vsearch 0.3).
    #[arg(long)]
    pub(crate) min_score: Option<f64>,
    /// Only this collection.
    #[arg(short = 'c', long)]
    pub(crate) collection: Option<String>,
    /// Print `docid,score,file,context` lines only.
    #[arg(long)]
    pub(crate) files: bool,
    /// Only documents whose metadata match this JSON filter (`@FILE` reads it from a file),
    /// e.g. '{"field":"status","operator":"eq","value":"published"}'; see `quarry metadata`.
    #[arg(long, value_name = "JSON")]
    pub(crate) filter: Option<String>,
    /// Read knowledge entries as they were valid at this moment (RFC 3339 timestamp,
    /// YYYY-MM-DD or Unix milliseconds): superseded and expired entries are left out.
    #[arg(long, value_name = "WHEN")]
    pub(crate) as_of: Option<String>,
    /// Search in this process even when a server of this data directory is running (by
    /// default it answers, with its index open and its models loaded, when it runs with
    /// this command's settings).
    #[arg(long)]
    pub(crate) no_server: bool,
}

#[derive(Args)]
pub(crate) struct MetadataArgs {
    /// Only this collection.
    #[arg(short = 'c', long)]
    pub(crate) collection: Option<String>,
    /// Only the documents this JSON filter matches (`@FILE` reads it from a file).
    #[arg(long, value_name = "JSON")]
    pub(crate) filter: Option<String>,
    /// Most frequent values shown per field (1–50).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u16).range(1..=50))]
    pub(crate) top: u16,
}

/// The name usage and help text show: `qmd` when the binary runs under that name (a
/// symlink or copy installed as a QMD drop-in, e.g. for `claude mcp add qmd -- qmd mcp`),
/// else `quarry`. Either name runs the same commands.
fn invoked_name() -> &'static str {
    let argv0 = std::env::args_os().next().map(PathBuf::from);
    let stem = argv0.as_deref().and_then(|p| p.file_stem());
    if stem.is_some_and(|s| s.eq_ignore_ascii_case("qmd")) {
        "qmd"
    } else {
        "quarry"
    }
}

/// `cmd` with the commands its help names (`quarry embed`) spelled under `name`, the name
/// it runs as: a user of the `qmd` drop-in is told to run `qmd embed`.
fn named_in_help(cmd: clap::Command, name: &str) -> clap::Command {
    if name == "quarry" {
        return cmd;
    }
    let respell = |text: &clap::builder::StyledStr| {
        text.to_string()
            .replace("`quarry ", &format!("`{name} "))
            .replace("'quarry ", &format!("'{name} "))
    };
    let about = cmd.get_about().map(respell);
    let long_about = cmd.get_long_about().map(respell);
    let mut cmd = cmd
        .mut_args(|arg| {
            let help = arg.get_help().map(respell);
            let long_help = arg.get_long_help().map(respell);
            let arg = match help {
                Some(h) => arg.help(h),
                None => arg,
            };
            match long_help {
                Some(h) => arg.long_help(h),
                None => arg,
            }
        })
        .mut_subcommands(|sub| named_in_help(sub, name));
    if let Some(a) = about {
        cmd = cmd.about(a);
    }
    if let Some(a) = long_about {
        cmd = cmd.long_about(a);
    }
    cmd
}

/// The command line, parsed, and its matches (which say where each value came from).
pub(crate) fn parse_cli() -> (Cli, clap::ArgMatches) {
    let name = invoked_name();
    let matches = named_in_help(Cli::command(), name)
        .name(name)
        .bin_name(name)
        .get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    (cli, matches)
}
