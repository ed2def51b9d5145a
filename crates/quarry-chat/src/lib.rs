//! Chat over knowledge bases and tools (seed 003 §5.1–5.3): a request is checked and stored
//! ([`ChatService::prepare`], before anything is streamed, so a bad request is an ordinary
//! error), then run ([`ChatService::run`]): retrieval from the named knowledge bases with
//! numbered sources, then up to `max_tool_rounds` rounds of the model calling the caller's
//! hub tools, then the answer — each step reported as a [`ChatEvent`].
//!
//! The crate knows nothing of HTTP: the server turns events into Server-Sent Events. It
//! holds no per-user state: the caller's engine handle (already scoped) and hub identity come
//! with each request, conversations live in the store.

pub mod drafts;
pub mod events;
pub mod prompt;
pub mod provider;
pub mod tools;

use std::sync::Arc;
use std::time::{Duration, Instant};

use quarry_core::{Error, Result};
use quarry_engine::{Engine, KnowledgeSearch, MAX_QUERY_CHARS, SearchMode};
use quarry_hub::{
    APPROVALS_PACKAGE, DefaultView, Hub, KNOWLEDGE_PACKAGE, Selection, View, ViewError,
};
use quarry_store::{ChatMessageRow, ChatStore, ConversationRow};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

pub use events::{ChatEvent, ChatFailure, Done, Source, Timings, ToolCallRecord};
pub use provider::{ConfigError, Provider, ProviderConfig, ProviderError, Usage};
use tools::ToolSet;

/// Most rounds of tool calls a request may ask for.
pub const MAX_TOOL_ROUNDS_LIMIT: usize = 10;
/// Longest conversation a request may send (characters over all its messages).
const MAX_REQUEST_CHARS: usize = 400_000;
/// Most messages one request may send.
const MAX_REQUEST_MESSAGES: usize = 200;
/// Longest conversation title.
const TITLE_CHARS: usize = 60;

/// Retrieval and tool-loop settings (seed 003's `RAG_*`, Quarry's `QUARRY_CHAT_*`).
#[derive(Debug, Clone, PartialEq)]
pub struct ChatSettings {
    /// Passages given to the model (`RAG_TOP_K`).
    pub rag_top_k: usize,
    /// Candidates gathered before the cut (`RAG_ANN_TOP_K`).
    pub rag_ann_top_k: usize,
    /// Rerank candidates (`RAG_USE_RERANK`).
    pub rag_use_rerank: bool,
    /// Passages below this score are dropped (`RAG_MIN_SCORE`; the seed has no threshold:
    /// the top `RAG_TOP_K` always go to the model, which is told to say when they do not
    /// answer the question).
    pub rag_min_score: f64,
    /// Rounds of tool calls before the model must answer (`QUARRY_CHAT_MAX_TOOL_ROUNDS`).
    pub max_tool_rounds: usize,
    /// Longest tool call (`QUARRY_CHAT_TOOL_TIMEOUT`).
    pub tool_timeout: Duration,
}

impl Default for ChatSettings {
    fn default() -> Self {
        ChatSettings {
            rag_top_k: 5,
            rag_ann_top_k: 20,
            rag_use_rerank: true,
            rag_min_score: 0.0,
            max_tool_rounds: 5,
            tool_timeout: Duration::from_secs(60),
        }
    }
}

impl ChatSettings {
    /// Reads the settings `env` returns; a malformed value is an error naming its variable.
    pub fn from_vars(
        env: &dyn Fn(&str) -> Option<String>,
    ) -> std::result::Result<Self, ConfigError> {
        let mut s = ChatSettings::default();
        let get = |k: &str| {
            env(k)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let int =
            |k: &str, lo: usize, hi: usize| -> std::result::Result<Option<usize>, ConfigError> {
                match get(k) {
                    None => Ok(None),
                    Some(v) => match v.parse::<usize>() {
                        Ok(n) if (lo..=hi).contains(&n) => Ok(Some(n)),
                        _ => Err(ConfigError::setting(
                            k,
                            v,
                            format!("a whole number from {lo} to {hi}"),
                        )),
                    },
                }
            };
        if let Some(n) = int("RAG_TOP_K", 1, quarry_engine::MAX_TOP_K)? {
            s.rag_top_k = n;
        }
        if let Some(n) = int("RAG_ANN_TOP_K", 1, 1000)? {
            s.rag_ann_top_k = n;
        }
        if let Some(v) = get("RAG_USE_RERANK") {
            s.rag_use_rerank = match v.to_ascii_lowercase().as_str() {
                "1" | "true" | "yes" | "on" => true,
                "0" | "false" | "no" | "off" => false,
                _ => return Err(ConfigError::setting("RAG_USE_RERANK", v, "true or false")),
            };
        }
        if let Some(v) = get("RAG_MIN_SCORE") {
            s.rag_min_score = match v.parse::<f64>() {
                Ok(x) if (0.0..=1.0).contains(&x) => x,
                _ => {
                    return Err(ConfigError::setting(
                        "RAG_MIN_SCORE",
                        v,
                        "a number from 0 to 1",
                    ));
                }
            };
        }
        if let Some(n) = int("QUARRY_CHAT_MAX_TOOL_ROUNDS", 0, MAX_TOOL_ROUNDS_LIMIT)? {
            s.max_tool_rounds = n;
        }
        if let Some(n) = int("QUARRY_CHAT_TOOL_TIMEOUT", 1, 3600)? {
            s.tool_timeout = Duration::from_secs(n as u64);
        }
        Ok(s)
    }
}

/// A chat request (`POST /api/v1/chat`); see docs/chat.md. Fields it does not know are
/// ignored, so clients of seed 003 that send more still work.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ChatRequest {
    #[serde(default)]
    /// OpenAI-shaped messages; the last user message is the question.
    pub messages: Option<Vec<Value>>,
    /// Shorthand for one user message.
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default)]
    /// Continue this conversation (UUID); none: a new one.
    pub conversation_id: Option<String>,
    #[serde(default)]
    /// Knowledge bases (names or UUIDs) to search; none: the conversation's, else none.
    pub kb_ids: Option<Vec<String>>,
    #[serde(default)]
    /// Another model at the configured provider.
    pub model: Option<String>,
    #[serde(default)]
    /// Tools to offer (`package.tool`), as the hub's `?tools=`.
    pub tools: Option<Vec<String>>,
    #[serde(default)]
    /// Packages to offer whole, as the hub's `?servers=`.
    pub servers: Option<Vec<String>>,
    #[serde(default)]
    /// `false`: offer no tools.
    pub use_tools: Option<bool>,
    #[serde(default)]
    /// Fewer tool rounds than the server's limit.
    pub max_tool_rounds: Option<usize>,
    #[serde(default)]
    /// `false`: one JSON answer instead of an event stream.
    pub stream: Option<bool>,
    #[serde(default)]
    /// Sampling temperature passed to the model.
    pub temperature: Option<f64>,
    #[serde(default)]
    /// A metadata filter (issue 44) on the passages retrieved from the knowledge bases: a
    /// JSON filter node, or a JSON string holding one. The server parses it and runs the
    /// chat through a filtered engine handle ([`quarry_engine::Engine::filtered`]).
    pub filter: Option<Value>,
    #[serde(default)]
    /// The moment knowledge entries are read at (issue 44): RFC 3339, `YYYY-MM-DD` or Unix
    /// milliseconds; absent: now. The server runs the chat through
    /// [`quarry_engine::Engine::at`].
    pub as_of: Option<Value>,
}

impl ChatRequest {
    /// Whether the answer streams (the default).
    pub fn streaming(&self) -> bool {
        self.stream.unwrap_or(true)
    }
}

/// Who is chatting: the caller's engine handle (scoped to what it may read) and its
/// principal. Conversations belong to the principal's owner key.
#[derive(Clone)]
pub struct ChatContext {
    /// The caller's engine, scoped to what it may read.
    pub engine: Engine,
    /// Who is chatting: owner of the conversation, and what tools it may reach.
    pub principal: quarry_core::Principal,
    /// Where retrieval's requests to remote models (query embeddings, expansion, reranking)
    /// are counted, for the caller to book to the principal; the chat model's own use is
    /// in [`ChatEvent::Done`].
    pub meter: quarry_engine::ModelMeter,
}

/// A checked request with its conversation stored, ready to run.
pub struct Prepared {
    /// The conversation's UUID.
    pub conversation_id: String,
    /// The assistant message's UUID.
    pub message_id: String,
    /// The conversation's title.
    pub title: String,
    /// The latest user question.
    question: String,
    /// Earlier turns (stored history, then the request's own) as (role, text); empty on a
    /// first question.
    earlier: Vec<(String, String)>,
    knowledge_bases: Vec<String>,
    tools: ToolSet,
    model: Option<String>,
    temperature: Option<f64>,
    max_tool_rounds: usize,
}

impl Prepared {
    /// The latest user question, as asked.
    pub fn question(&self) -> &str {
        &self.question
    }

    /// The knowledge bases it retrieves from (none: no retrieval).
    pub fn knowledge_bases(&self) -> &[String] {
        &self.knowledge_bases
    }
}

/// Chat for one server: the provider client and settings. Shared by every request.
pub struct ChatService {
    provider: Option<Provider>,
    settings: ChatSettings,
    store: Arc<dyn ChatStore>,
    hub: Arc<Hub>,
    /// Tool policies: a tool the model calls passes them as an agent's call does.
    gate: quarry_policy::Gate,
}

/// How a run ended (the server maps it to a status for `stream: false`).
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The model answered.
    Answered(Done),
    /// The provider failed.
    Failed(ChatFailure),
    /// The client went away.
    Cancelled,
}

/// `d` in milliseconds, to the microsecond.
fn millis(d: Duration) -> f64 {
    d.as_micros() as f64 / 1000.0
}

/// Milliseconds since `t`, to the microsecond.
fn ms(t: Instant) -> f64 {
    millis(t.elapsed())
}

/// A message's text: a string, or OpenAI's content parts (`[{type: text, text}]`).
fn message_text(v: &Value, i: usize) -> Result<String> {
    match v {
        Value::String(s) => Ok(s.clone()),
        Value::Array(parts) => {
            let mut out = Vec::new();
            for p in parts {
                match (p.get("type").and_then(Value::as_str), p.get("text")) {
                    (Some("text"), Some(Value::String(t))) => out.push(t.clone()),
                    _ => {
                        return Err(Error::invalid(format!(
                            "messages[{i}].content: only text parts ({{\"type\": \"text\", \"text\": …}}) are supported"
                        )));
                    }
                }
            }
            Ok(out.join("\n"))
        }
        Value::Null => Err(Error::invalid(format!("messages[{i}].content is missing"))),
        _ => Err(Error::invalid(format!(
            "messages[{i}].content must be a string"
        ))),
    }
}

/// The same words whether the conversation is missing or another owner's.
fn no_conversation(id: &str) -> Error {
    Error::not_found(format!("conversation '{id}' not found"))
}

fn title_of(question: &str) -> String {
    let line = question
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let mut t: String = line.chars().take(TITLE_CHARS).collect();
    if line.chars().count() > TITLE_CHARS {
        t.push('…');
    }
    if t.is_empty() { "New chat".into() } else { t }
}

fn view_error(e: ViewError) -> Error {
    match e {
        ViewError::UnknownTool(t) => Error::invalid(format!(
            "unknown tool '{t}' in tools: use package.tool names from GET /api/v1/mcp/tools (Quarry's own knowledge tools are not offered in chat; kb_ids retrieves from knowledge bases)"
        )),
        ViewError::UnknownPackage(p) => Error::invalid(format!(
            "unknown package '{p}' in servers (see GET /api/v1/mcp/servers)"
        )),
        ViewError::TooMany { count, cap } => Error::invalid(format!(
            "the chat would offer {count} tools, more than this server's cap of {cap}; choose some with \"tools\": [\"package.tool\", …] or \"servers\": [\"package\", …], or switch some off"
        )),
        ViewError::Invalid(m) => Error::invalid(m),
    }
}

impl ChatService {
    /// Without a provider, chat answers 503 saying how to configure one (conversations
    /// still list).
    pub fn new(
        provider: Option<Provider>,
        settings: ChatSettings,
        store: Arc<dyn ChatStore>,
        hub: Arc<Hub>,
        gate: quarry_policy::Gate,
    ) -> ChatService {
        ChatService {
            provider,
            settings,
            store,
            hub,
            gate,
        }
    }

    /// What a client may know before chatting: whether a model is configured, which one
    /// (`provider:model`, never its URL or key), and the limits that apply.
    pub fn config(&self) -> Value {
        json!({
            "configured": self.provider.is_some(),
            "model": self.provider.as_ref().map(|p| p.config().label()),
            "max_tool_rounds": self.settings.max_tool_rounds,
            "rag_top_k": self.settings.rag_top_k,
        })
    }

    /// The configured model, or `Unavailable` saying how to configure one.
    pub fn provider(&self) -> Result<&Provider> {
        self.provider.as_ref().ok_or_else(|| {
            Error::Unavailable(
                "no chat model is configured: start the server with --chat-model openai:MODEL (or deepseek:, qwen:, ollama:), or set QUARRY_CHAT_MODEL; QUARRY_CHAT_BASE_URL and QUARRY_CHAT_API_KEY point it at the API (see docs/chat.md)".into(),
            )
        })
    }

    /// Checks a request and stores its turn: the conversation (new, or the caller's), the
    /// new messages, and the assistant message as `interrupted` until the run finishes it.
    /// Blocking (store and engine reads): call it off the async threads.
    pub fn prepare(&self, ctx: &ChatContext, req: ChatRequest) -> Result<Prepared> {
        self.provider()?;
        let owner = ctx.principal.owner_key();
        // The new turn.
        let mut incoming: Vec<(String, String)> = Vec::new();
        if let Some(m) = &req.message {
            if req.messages.is_some() {
                return Err(Error::invalid("give either message or messages, not both"));
            }
            incoming.push(("user".into(), m.clone()));
        }
        for (i, m) in req.messages.iter().flatten().enumerate() {
            let Some(obj) = m.as_object() else {
                return Err(Error::invalid(format!(
                    "messages[{i}] must be an object with role and content"
                )));
            };
            let role = obj
                .get("role")
                .and_then(Value::as_str)
                .ok_or_else(|| Error::invalid(format!("messages[{i}].role is missing")))?;
            if !matches!(role, "system" | "user" | "assistant") {
                return Err(Error::invalid(format!(
                    "messages[{i}].role must be system, user or assistant, got '{role}'"
                )));
            }
            let content = message_text(obj.get("content").unwrap_or(&Value::Null), i)?;
            incoming.push((role.to_owned(), content));
        }
        if incoming.len() > MAX_REQUEST_MESSAGES {
            return Err(Error::invalid(format!(
                "at most {MAX_REQUEST_MESSAGES} messages per request, got {}",
                incoming.len()
            )));
        }
        let total: usize = incoming.iter().map(|(_, c)| c.chars().count()).sum();
        if total > MAX_REQUEST_CHARS {
            return Err(Error::invalid(format!(
                "the messages hold {total} characters, more than the {MAX_REQUEST_CHARS} a request may send"
            )));
        }
        let question = match incoming.last() {
            None => {
                return Err(Error::invalid(
                    "messages is empty: send at least one user message",
                ));
            }
            Some((role, _)) if role != "user" => {
                return Err(Error::invalid(format!(
                    "the last message must be from the user, not the {role}"
                )));
            }
            Some((_, content)) if content.trim().is_empty() => {
                return Err(Error::invalid("the user's message is empty"));
            }
            Some((_, content)) => content.clone(),
        };
        let max_tool_rounds = match req.max_tool_rounds {
            None => self.settings.max_tool_rounds,
            Some(n) if n <= MAX_TOOL_ROUNDS_LIMIT => n.min(self.settings.max_tool_rounds),
            Some(n) => {
                return Err(Error::invalid(format!(
                    "max_tool_rounds must be 0 to {MAX_TOOL_ROUNDS_LIMIT}, got {n}"
                )));
            }
        };
        if let Some(t) = req.temperature
            && !(0.0..=2.0).contains(&t)
        {
            return Err(Error::invalid(format!(
                "temperature must be between 0 and 2, got {t}"
            )));
        }
        if let Some(m) = &req.model
            && (m.trim().is_empty() || m.len() > 200)
        {
            return Err(Error::invalid(
                "model must be a model name (1 to 200 characters)",
            ));
        }
        // The conversation.
        let existing = match &req.conversation_id {
            Some(id) => Some(
                self.store
                    .conversation(owner, id)?
                    .ok_or_else(|| no_conversation(id))?,
            ),
            None => None,
        };
        let stored_kbs: Vec<String> = existing
            .as_ref()
            .and_then(|c| serde_json::from_str(&c.kb_ids).ok())
            .unwrap_or_default();
        let knowledge_bases = match &req.kb_ids {
            Some(k) => k.clone(),
            None => stored_kbs,
        };
        if knowledge_bases.len() > 50 {
            return Err(Error::invalid("at most 50 knowledge bases per chat"));
        }
        // Checked now, so a bad one is a 404 before anything streams.
        ctx.engine.knowledge_base_ids(&knowledge_bases)?;
        let tools = self.tools(ctx, &req, max_tool_rounds)?;
        // History.
        let mut earlier: Vec<(String, String)> = Vec::new();
        if let Some(c) = &existing {
            for m in self.store.messages(owner, &c.id)? {
                if m.role == "assistant" && (m.status == "failed" || m.content.trim().is_empty()) {
                    continue;
                }
                earlier.push((m.role, m.content));
            }
        }
        earlier.extend(incoming[..incoming.len() - 1].iter().cloned());
        // Store the turn: the conversation, the new messages and the assistant's message
        // (`interrupted` until the run finishes it), in one commit.
        let now = quarry_core::now_millis();
        let (conversation, new) = match existing {
            Some(mut c) => {
                c.kb_ids = json!(knowledge_bases).to_string();
                if req.model.is_some() {
                    c.model = req.model.clone();
                }
                (c, false)
            }
            None => (
                ConversationRow {
                    id: uuid::Uuid::new_v4().to_string(),
                    owner: owner.to_owned(),
                    title: title_of(&question),
                    kb_ids: json!(knowledge_bases).to_string(),
                    model: req.model.clone(),
                    created_at: now,
                    updated_at: now,
                },
                true,
            ),
        };
        let message = |id: String, role: &str, content: &str, status: &str| ChatMessageRow {
            id,
            conversation_id: conversation.id.clone(),
            seq: 0,
            role: role.to_owned(),
            content: content.to_owned(),
            sources: "[]".into(),
            tool_calls: "[]".into(),
            status: status.to_owned(),
            usage: None,
            created_at: now,
        };
        let message_id = uuid::Uuid::new_v4().to_string();
        let mut rows: Vec<ChatMessageRow> = incoming
            .iter()
            .map(|(role, content)| {
                message(uuid::Uuid::new_v4().to_string(), role, content, "complete")
            })
            .collect();
        rows.push(message(message_id.clone(), "assistant", "", "interrupted"));
        self.store.store_turn(&conversation, new, &rows)?;
        let model = conversation.model.clone();
        let (conversation_id, title) = (conversation.id, conversation.title);
        Ok(Prepared {
            conversation_id,
            message_id,
            title,
            question,
            earlier,
            knowledge_bases,
            tools,
            // A conversation keeps the model it was given until a turn names another.
            model,
            temperature: req.temperature,
            max_tool_rounds,
        })
    }

    fn tools(&self, ctx: &ChatContext, req: &ChatRequest, rounds: usize) -> Result<ToolSet> {
        if req.use_tools == Some(false) || rounds == 0 {
            return Ok(ToolSet::none());
        }
        let catalog = self.hub.catalog(ctx.principal.owner_key())?;
        let selection = Selection {
            tools: req.tools.clone(),
            servers: req.servers.clone(),
            ..Selection::default()
        };
        let view = View::compute(
            catalog,
            &selection,
            &DefaultView::Everything,
            // Retrieval covers the knowledge tools, which run in the server, not the hub.
            &ctx.principal,
            // Quarry's knowledge is the chat's own retrieval; approvals are for people.
            &|t| t.package != KNOWLEDGE_PACKAGE && t.package != APPROVALS_PACKAGE,
            self.hub.options().max_tools,
        )
        .map_err(view_error)?;
        Ok(ToolSet::from_view(view))
    }

    /// Runs a prepared chat, reporting through `emit`, until the answer, a failure, or
    /// `cancel` (the client left). The assistant message is stored either way.
    pub async fn run(
        self: &Arc<Self>,
        ctx: &ChatContext,
        prepared: Prepared,
        emit: &(dyn Fn(ChatEvent) + Send + Sync),
        cancel: CancellationToken,
    ) -> Outcome {
        let started = Instant::now();
        let mut run = Run {
            content: String::new(),
            sources: Vec::new(),
            calls: Vec::new(),
            usage: Usage::default(),
        };
        emit(ChatEvent::Conversation {
            id: prepared.conversation_id.clone(),
            message_id: prepared.message_id.clone(),
            title: prepared.title.clone(),
        });
        let outcome = self
            .converse(ctx, &prepared, &mut run, emit, &cancel, started)
            .await;
        let status = match &outcome {
            Outcome::Answered(_) => "complete",
            Outcome::Failed(_) => "failed",
            Outcome::Cancelled => "interrupted",
        };
        let row = ChatMessageRow {
            id: prepared.message_id.clone(),
            conversation_id: prepared.conversation_id.clone(),
            seq: 0,
            role: "assistant".into(),
            content: run.content,
            sources: json!(run.sources).to_string(),
            tool_calls: json!(run.calls).to_string(),
            status: status.into(),
            usage: Some(json!(run.usage).to_string()),
            created_at: quarry_core::now_millis(),
        };
        let store = self.store.clone();
        let owner = ctx.principal.owner_key().to_owned();
        let saved = tokio::task::spawn_blocking(move || {
            quarry_store::thread_guard::allow_blocking(|| store.update_message(&owner, &row))
        })
        .await;
        match saved {
            Ok(Ok(true)) => {}
            Ok(Ok(false)) => tracing::warn!(
                "chat message vanished before it was finished (conversation deleted meanwhile)"
            ),
            Ok(Err(e)) => tracing::warn!(error = %e, "cannot store the chat answer"),
            Err(e) => tracing::warn!(error = %e, "cannot store the chat answer"),
        }
        match &outcome {
            Outcome::Answered(d) => emit(ChatEvent::Done(d.clone())),
            Outcome::Failed(f) => emit(ChatEvent::Error(f.clone())),
            Outcome::Cancelled => {}
        }
        outcome
    }

    async fn converse(
        self: &Arc<Self>,
        ctx: &ChatContext,
        p: &Prepared,
        run: &mut Run,
        emit: &(dyn Fn(ChatEvent) + Send + Sync),
        cancel: &CancellationToken,
        started: Instant,
    ) -> Outcome {
        let provider = match self.provider() {
            Ok(p) => p,
            Err(e) => {
                return Outcome::Failed(ChatFailure {
                    message: e.to_string(),
                    code: "internal",
                    status: None,
                });
            }
        };
        let mut messages: Vec<Value> = Vec::new();
        let mut retrieval_query = None;
        let retrieval_started = Instant::now();
        if !p.knowledge_bases.is_empty() {
            let query = self.retrieval_query(provider, p, cancel).await;
            if cancel.is_cancelled() {
                return Outcome::Cancelled;
            }
            match self.retrieve(ctx, &p.knowledge_bases, &query).await {
                Ok(sources) => {
                    emit(ChatEvent::RagSource(sources.clone()));
                    messages.push(if sources.is_empty() {
                        prompt::no_sources_message()
                    } else {
                        prompt::sources_message(&sources)
                    });
                    run.sources = sources;
                }
                Err(e) => {
                    return Outcome::Failed(ChatFailure {
                        message: format!("retrieval failed: {e}"),
                        code: "internal",
                        status: None,
                    });
                }
            }
            retrieval_query = Some(query);
        }
        let retrieval_ms = ms(retrieval_started);
        let mut model_ms = 0f64;
        let mut tools_ms = 0f64;
        // System messages the client sent stay first; the sources follow them.
        let turn = |(role, content): &(String, String)| json!({"role": role, "content": content});
        let leading_system = p.earlier.iter().take_while(|(r, _)| r == "system").count();
        let mut convo: Vec<Value> = p.earlier[..leading_system].iter().map(turn).collect();
        convo.extend(messages);
        convo.extend(p.earlier[leading_system..].iter().map(turn));
        convo.push(json!({"role": "user", "content": p.question}));

        let mut rounds = 0usize;
        let mut tool_rounds = 0usize;
        loop {
            rounds += 1;
            let offer_tools = !p.tools.is_empty() && tool_rounds < p.max_tool_rounds;
            if !p.tools.is_empty() && !offer_tools {
                // The cap: the tools stay described (the conversation refers to them) but
                // the model may not call them now. This is the last round.
                convo.push(json!({
                    "role": "system",
                    "content": format!("You have used the {} rounds of tool calls this chat allows. Answer now from what you have; do not call tools.", p.max_tool_rounds)
                }));
            }
            let request = provider::CompletionRequest {
                messages: &convo,
                tools: p.tools.definitions(),
                tool_choice: (!offer_tools).then_some("none"),
                model: p.model.as_deref(),
                temperature: p.temperature,
            };
            let mut on_text = |t: &str| {
                run.content.push_str(t);
                emit(ChatEvent::Delta(t.to_owned()));
            };
            let asked = Instant::now();
            let streamed = provider.stream(&request, &mut on_text, cancel).await;
            model_ms += ms(asked);
            let completion = match streamed {
                Ok(c) => c,
                Err(ProviderError::Cancelled) => return Outcome::Cancelled,
                Err(e) => return Outcome::Failed(failure(&e)),
            };
            run.usage.add(completion.usage);
            if completion.tool_calls.is_empty() || !offer_tools {
                return Outcome::Answered(Done {
                    conversation_id: p.conversation_id.clone(),
                    message_id: p.message_id.clone(),
                    finish_reason: completion.finish_reason,
                    rounds,
                    tool_rounds,
                    usage: run.usage,
                    retrieval_query,
                    timings: Timings {
                        retrieval_ms,
                        model_ms,
                        tools_ms,
                        total_ms: ms(started),
                    },
                });
            }
            tool_rounds += 1;
            convo.push(json!({
                "role": "assistant",
                "content": if completion.content.is_empty() { Value::Null } else { json!(completion.content) },
                "tool_calls": completion.tool_calls.iter().map(|c| json!({
                    "id": c.id, "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                })).collect::<Vec<_>>(),
            }));
            let calling = Instant::now();
            let results = self
                .call_tools(
                    ctx,
                    p,
                    &completion.tool_calls,
                    tool_rounds,
                    run,
                    emit,
                    cancel,
                )
                .await;
            tools_ms += ms(calling);
            if cancel.is_cancelled() {
                return Outcome::Cancelled;
            }
            for (call, text) in completion.tool_calls.iter().zip(results) {
                convo.push(json!({"role": "tool", "tool_call_id": call.id, "content": text}));
            }
        }
    }

    /// The query retrieval runs: the question, or on a follow-up the model's standalone
    /// rewrite of it (the question itself when the rewrite fails).
    async fn retrieval_query(
        &self,
        provider: &Provider,
        p: &Prepared,
        cancel: &CancellationToken,
    ) -> String {
        if !p.earlier.iter().any(|(role, _)| role == "user") {
            return p.question.clone();
        }
        let messages = prompt::rewrite_messages(&p.earlier, &p.question);
        let req = provider::CompletionRequest {
            messages: &messages,
            model: p.model.as_deref(),
            temperature: Some(0.0),
            ..Default::default()
        };
        match provider.complete(&req, cancel).await {
            Ok(raw) => {
                prompt::clean_rewrite(&raw, MAX_QUERY_CHARS).unwrap_or_else(|| p.question.clone())
            }
            Err(e) => {
                if e != ProviderError::Cancelled {
                    tracing::warn!(error = %e, "follow-up rewrite failed; retrieving with the question as asked");
                }
                p.question.clone()
            }
        }
    }

    async fn retrieve(
        &self,
        ctx: &ChatContext,
        knowledge_bases: &[String],
        query: &str,
    ) -> Result<Vec<Source>> {
        let mut req = KnowledgeSearch::new(query.chars().take(MAX_QUERY_CHARS).collect::<String>());
        req.mode = SearchMode::Hybrid;
        req.top_k = self.settings.rag_top_k;
        req.depth = Some(self.settings.rag_ann_top_k);
        req.rerank = self.settings.rag_use_rerank;
        req.min_score = self.settings.rag_min_score;
        req.knowledge_bases = Some(knowledge_bases.to_vec());
        let engine = ctx.engine.clone();
        let meter = ctx.meter.clone();
        let found = tokio::task::spawn_blocking(move || {
            quarry_store::thread_guard::allow_blocking(|| {
                meter.run(|| engine.knowledge_passages(&req))
            })
        })
        .await
        .map_err(|e| Error::Storage(format!("retrieval stopped: {e}")))??;
        Ok(found
            .results
            .into_iter()
            .enumerate()
            .map(|(i, h)| Source {
                index: i + 1,
                content: h.content,
                score: h.score,
                source: h.knowledge_filename,
                page: h.page,
                docid: h.docid,
                document_id: h.knowledge_id,
                knowledge_base: h.knowledge_base,
                file: h.file,
            })
            .collect())
    }

    /// Runs one round's calls concurrently; reports each call at once and each result as it
    /// comes; returns the results in the calls' order.
    #[allow(clippy::too_many_arguments)]
    async fn call_tools(
        &self,
        ctx: &ChatContext,
        p: &Prepared,
        calls: &[provider::ToolCall],
        round: usize,
        run: &mut Run,
        emit: &(dyn Fn(ChatEvent) + Send + Sync),
        cancel: &CancellationToken,
    ) -> Vec<String> {
        use futures_util::stream::{FuturesUnordered, StreamExt};
        let first = run.calls.len();
        let mut pending = FuturesUnordered::new();
        for (i, call) in calls.iter().enumerate() {
            let tool = p.tools.resolve(&call.name);
            let parsed = tools::parse_arguments(&call.arguments);
            let record = ToolCallRecord {
                id: call.id.clone(),
                name: tool
                    .map(|t| t.name.clone())
                    .unwrap_or_else(|| call.name.clone()),
                tool: tool.map(|t| t.full_name.clone()).unwrap_or_default(),
                arguments: match &parsed {
                    Ok(m) => Value::Object(m.clone()),
                    Err(_) => Value::String(call.arguments.clone()),
                },
                status: "calling".into(),
                result: None,
                round,
                duration_ms: None,
                gate: None,
            };
            emit(ChatEvent::ToolCall(record.clone()));
            run.calls.push(record);
            let hub = self.hub.clone();
            let gate = self.gate.clone();
            let caller = ctx.principal.clone();
            let timeout = self.settings.tool_timeout;
            let name = call.name.clone();
            let tool = tool.cloned();
            let tools = &p.tools;
            pending.push(async move {
                let outcome = match (tool, parsed) {
                    (None, _) => tools::ToolOutcome {
                        ok: false,
                        text: format!("there is no tool named '{name}' in this chat; use one of the tools offered"),
                        duration: Duration::ZERO,
                        gate: None,
                    },
                    (Some(_), Err(why)) => tools::ToolOutcome {
                        ok: false,
                        text: format!("{why}; call {name} again with a JSON object of arguments"),
                        duration: Duration::ZERO,
                        gate: None,
                    },
                    (Some(t), Ok(args)) => {
                        tools.call(&hub, &gate, &caller, &t, args, timeout, cancel).await
                    }
                };
                (i, outcome)
            });
        }
        let mut texts = vec![String::new(); calls.len()];
        while let Some((i, outcome)) = pending.next().await {
            let record = &mut run.calls[first + i];
            record.status = if outcome.ok { "success" } else { "error" }.into();
            record.result = Some(outcome.text.clone());
            record.duration_ms = Some(millis(outcome.duration));
            record.gate = outcome.gate.clone();
            if !cancel.is_cancelled() {
                emit(ChatEvent::ToolResult(record.clone()));
            }
            texts[i] = outcome.text;
        }
        texts
    }

    // Conversations.

    /// The owner's conversations (at most `limit`), with their message counts.
    pub fn conversations(&self, owner: &str, limit: usize) -> Result<Vec<Value>> {
        Ok(self
            .store
            .conversations(owner, limit)?
            .into_iter()
            .map(|s| {
                let mut v = conversation_json(&s.conversation);
                v["message_count"] = json!(s.message_count);
                v
            })
            .collect())
    }

    /// One of the owner's conversations with its messages.
    pub fn conversation(&self, owner: &str, id: &str) -> Result<Value> {
        let c = self
            .store
            .conversation(owner, id)?
            .ok_or_else(|| no_conversation(id))?;
        let messages: Vec<Value> = self
            .store
            .messages(owner, id)?
            .into_iter()
            .map(|m| {
                json!({
                    "id": m.id,
                    "role": m.role,
                    "content": m.content,
                    "sources": serde_json::from_str::<Value>(&m.sources).unwrap_or(json!([])),
                    "tool_calls": serde_json::from_str::<Value>(&m.tool_calls).unwrap_or(json!([])),
                    "status": m.status,
                    "usage": m.usage.as_deref().and_then(|u| serde_json::from_str::<Value>(u).ok()),
                    "created_at": quarry_core::iso8601_millis(m.created_at),
                })
            })
            .collect();
        let mut v = conversation_json(&c);
        v["message_count"] = json!(messages.len());
        v["messages"] = Value::Array(messages);
        Ok(v)
    }

    /// Renames one of the owner's conversations.
    pub fn rename_conversation(&self, owner: &str, id: &str, title: &str) -> Result<Value> {
        let title = title.trim();
        if title.is_empty() || title.chars().count() > 200 {
            return Err(Error::invalid("title must be 1 to 200 characters"));
        }
        let mut c = self
            .store
            .conversation(owner, id)?
            .ok_or_else(|| no_conversation(id))?;
        c.title = title.to_owned();
        if !self.store.update_conversation(&c)? {
            return Err(no_conversation(id));
        }
        Ok(conversation_json(&c))
    }

    /// Deletes one of the owner's conversations with its messages.
    pub fn delete_conversation(&self, owner: &str, id: &str) -> Result<()> {
        if self.store.delete_conversation(owner, id)? {
            Ok(())
        } else {
            Err(no_conversation(id))
        }
    }
}

/// What an answer accumulates while it runs (stored at the end, whatever the end).
struct Run {
    content: String,
    sources: Vec<Source>,
    calls: Vec<ToolCallRecord>,
    usage: Usage,
}

fn failure(e: &ProviderError) -> ChatFailure {
    match e {
        ProviderError::Status { status, .. } => ChatFailure {
            message: e.to_string(),
            code: "provider_error",
            status: Some(*status),
        },
        ProviderError::Protocol(_) => ChatFailure {
            message: e.to_string(),
            code: "provider_error",
            status: None,
        },
        ProviderError::Unavailable(_) | ProviderError::Cancelled => ChatFailure {
            message: e.to_string(),
            code: "provider_unavailable",
            status: None,
        },
    }
}

fn conversation_json(c: &ConversationRow) -> Value {
    json!({
        "id": c.id,
        "title": c.title,
        "kb_ids": serde_json::from_str::<Value>(&c.kb_ids).unwrap_or(json!([])),
        "model": c.model,
        "created_at": quarry_core::iso8601_millis(c.created_at),
        "updated_at": quarry_core::iso8601_millis(c.updated_at),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_from_env() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        let s = ChatSettings::from_vars(&env(&[])).unwrap();
        assert_eq!(s, ChatSettings::default());
        let s = ChatSettings::from_vars(&env(&[
            ("RAG_TOP_K", "3"),
            ("RAG_ANN_TOP_K", "40"),
            ("RAG_USE_RERANK", "false"),
            ("QUARRY_CHAT_MAX_TOOL_ROUNDS", "2"),
        ]))
        .unwrap();
        assert_eq!(
            (
                s.rag_top_k,
                s.rag_ann_top_k,
                s.rag_use_rerank,
                s.max_tool_rounds
            ),
            (3, 40, false, 2)
        );
        assert_eq!(
            ChatSettings::from_vars(&env(&[("RAG_TOP_K", "0")]))
                .unwrap_err()
                .to_string(),
            format!(
                "RAG_TOP_K must be a whole number from 1 to {}, got '0'",
                quarry_engine::MAX_TOP_K
            )
        );
        for bad in [
            &[("RAG_TOP_K", "0")][..],
            &[("RAG_USE_RERANK", "maybe")],
            &[("RAG_MIN_SCORE", "2")],
            &[("QUARRY_CHAT_MAX_TOOL_ROUNDS", "11")],
        ] {
            let e = ChatSettings::from_vars(&env(bad)).unwrap_err();
            assert!(
                matches!(&e, ConfigError::Setting { var, value, .. } if (var.as_str(), value.as_str()) == bad[0]),
                "{e}"
            );
        }
    }

    #[test]
    fn titles() {
        assert_eq!(title_of("\n  Hello there\nmore"), "Hello there");
        assert_eq!(title_of(""), "New chat");
        assert_eq!(title_of(&"x".repeat(70)).chars().count(), TITLE_CHARS + 1);
    }
}
