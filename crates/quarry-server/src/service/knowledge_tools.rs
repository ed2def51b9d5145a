//! The knowledge tools beyond QMD's six: `knowledge_search` (seed 000) and the knowledge
//! capture tools of seed 004 (`create_knowledge`, `get_knowledge`, `query_knowledge` — alias
//! `search_knowledges` —, `list_knowledge`, `update_knowledge`, `delete_knowledge`).
//!
//! Which knowledge bases they reach and whose credentials apply come only from the
//! connection's [`Caller`] (token scope, `?kb=`, `X-Resource`), never from arguments.

use std::sync::Arc;

use quarry_core::{Access, Error};
use quarry_engine::{
    KbFile, KnowledgeSearch, KnowledgeSearchResult, NewNote, NoteChange, NoteFormat, NoteView,
    SearchMode,
};
use rmcp::model::{CallToolResult, ContentBlock, Tool, ToolAnnotations, object};
use serde_json::{Value, json};

use super::entries::{as_of_schema, entry_options, entry_properties, parse_as_of, provenance};
use super::filter::{filter_schema, parse_filter};
use super::tool_args::{Args, read_only, tool_error, with_annotations, with_structured};
use super::tool_call::run_own_tool;
use super::tool_scope::in_tool_scope;
use crate::auth::Caller;
use crate::state::AppState;

pub(crate) const KNOWLEDGE_SEARCH: &str = "knowledge_search";
const CREATE: &str = "create_knowledge";
const GET: &str = "get_knowledge";
const QUERY: &str = "query_knowledge";
/// QukaAI's own name for `query_knowledge`, accepted on calls (not listed).
const QUERY_ALIAS: &str = "search_knowledges";
const LIST: &str = "list_knowledge";
const UPDATE: &str = "update_knowledge";
const DELETE: &str = "delete_knowledge";
/// `create_knowledge`'s optional argument naming an idempotency key.
const IDEMPOTENCY_KEY: &str = "idempotency_key";

/// Tools that change data (hidden from read-only callers).
const WRITE_TOOLS: [&str; 3] = [CREATE, UPDATE, DELETE];

/// Whether `name` is one of this module's tools (aliases included).
pub(crate) fn handles(name: &str) -> bool {
    matches!(
        name,
        KNOWLEDGE_SEARCH | CREATE | GET | QUERY | QUERY_ALIAS | LIST | UPDATE | DELETE
    )
}

/// Seed 000's description, with the tool's Quarry name and no other product's.
const KNOWLEDGE_SEARCH_DESCRIPTION: &str = r#"Search knowledge bases for relevant information using hybrid search (vector + keyword).

This tool queries the knowledge bases this connection may read to find documents and chunks matching your query.
It supports both semantic understanding and keyword matching for comprehensive results.

**When to use:**
- Answer questions requiring specific knowledge from documents
- Find relevant context for complex topics
- Verify facts against stored knowledge

**Query strategies:**
- Use specific keywords for precise matches
- Use natural language for semantic search
- Combine both for best results

**Response interpretation:**
- High relevance (score > 0.8): Directly relevant content
- Medium relevance (0.5-0.8): Related but may need verification
- Low relevance (< 0.5): Tangentially related

If results are insufficient, consider:
1. Rephrasing with different keywords
2. Breaking complex queries into simpler parts
3. Using more specific terminology from the domain"#;

fn writes(title: &str, destructive: bool) -> ToolAnnotations {
    ToolAnnotations::with_title(title)
        .read_only(false)
        .destructive(destructive)
        .idempotent(false)
        .open_world(false)
}

/// `schema` with `extra` added to its properties.
fn with_properties(mut schema: Value, extra: serde_json::Map<String, Value>) -> Value {
    if let Some(properties) = schema["properties"].as_object_mut() {
        properties.extend(extra);
    }
    schema
}

fn make(name: &str, description: &str, input: Value, output: Option<Value>) -> Tool {
    let mut t = Tool::new(name.to_owned(), description.to_owned(), object(input));
    if let Some(o) = output {
        t = t.with_raw_output_schema(Arc::new(object(o)));
    }
    t
}

pub(crate) fn knowledge_search_tool() -> Tool {
    with_annotations(
        make(
            KNOWLEDGE_SEARCH,
            KNOWLEDGE_SEARCH_DESCRIPTION,
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "minLength": 1, "maxLength": 2000,
                        "description": "Search query. Can be natural language question or keywords. For best results, include domain-specific terms."},
                    "search_mode": {"type": "string", "enum": ["hybrid", "vector", "keyword"], "default": "hybrid",
                        "description": "Search mode: \"hybrid\" (recommended) combines vector and keyword search, \"vector\" for semantic similarity, \"keyword\" for exact matches."},
                    "top_k": {"type": "integer", "minimum": 1, "maximum": 50, "default": 10,
                        "description": "Maximum number of results to return (1-50). Use smaller values for focused queries, larger for exploratory searches."},
                    "min_score": {"type": "number", "minimum": 0, "maximum": 1, "default": 0.5,
                        "description": "Minimum relevance score threshold (0-1). Higher values return more relevant but fewer results."},
                    "rerank": {"type": "boolean", "default": true,
                        "description": "Whether to apply reranking for improved relevance ordering. Recommended for important queries."},
                    "filter": filter_schema(),
                    "as_of": as_of_schema()
                },
                "required": ["query"]
            }),
            Some(json!({
                "type": "object",
                "properties": {
                    "results": {"type": "array", "items": {"type": "object", "properties": {
                        "id": {"type": "string"}, "content": {"type": "string"},
                        "score": {"type": "number"}, "knowledge_id": {"type": "string"},
                        "knowledge_title": {"type": "string"}, "knowledge_filename": {"type": "string"},
                        "match_type": {"type": "string", "enum": ["hybrid", "vector", "keyword"]},
                        "page": {"type": "integer"}, "docid": {"type": "string"},
                        "knowledge_base": {"type": "string"}, "file": {"type": "string"},
                        "metadata": {"type": "object", "description": "The document's metadata fields (absent when it has none)"}
                    }, "required": ["id", "content", "score", "knowledge_id", "knowledge_title", "knowledge_filename", "match_type", "docid"]}},
                    "total_count": {"type": "integer"},
                    "search_mode": {"type": "string"}
                },
                "required": ["results", "total_count", "search_mode"]
            })),
        ),
        read_only("Knowledge search"),
    )
}

/// Seed 004 §3.1's `create_knowledge`, and its siblings (§9.1).
pub(crate) fn capture_tools() -> Vec<Tool> {
    let id = json!({"type": "string", "description": "The knowledge entry's id (from create_knowledge, list_knowledge or query_knowledge)"});
    let status_output = json!({
        "type": "object",
        "properties": {"id": {"type": "string"}, "status": {"type": "string"}, "message": {"type": "string"}},
        "required": ["id", "status", "message"]
    });
    vec![
        with_annotations(
            make(
                CREATE,
                "Create a new knowledge entry. The knowledge will be processed asynchronously (summarization and embedding) in the background. Content already stored is not stored twice: the answer names the existing entry. To correct a fact, write it again with the same `key` (or `supersedes` the entry's id): searches then return the new version and the old one stays in the history. Entries may carry a validity window (valid_from, valid_to) or expire (expires_at, ttl). An entry that nearly repeats a current one is reported in the answer (or merged with on_duplicate: merge). To retry a call safely, send the same idempotency_key (or Idempotency-Key header): the retry gets the first answer instead of creating again.",
                with_properties(
                    json!({
                        "type": "object",
                        "properties": {
                            "content": {"type": "string", "description": "The content of the knowledge (markdown or plain text)"},
                            "content_type": {"type": "string", "enum": ["markdown", "blocks"], "default": "markdown",
                                "description": "Content format type. Default is markdown, use 'blocks' for EditorJS format."},
                            "kind": {"type": "string", "enum": ["text", "image", "video", "url"], "default": "text", "description": "Type of knowledge"},
                            "title": {"type": "string", "description": "Optional title for the knowledge (will be auto-generated if not provided)"},
                            "tags": {"type": "array", "items": {"type": "string"}, "description": "Optional tags for categorization"},
                            "metadata": {"type": "object", "description": "Optional metadata fields to filter by later, e.g. {\"status\": \"published\", \"priority\": 2, \"due\": \"2026-06-01\", \"tags\": [\"a\"]}: strings, numbers, bools, YYYY-MM-DD dates or lists of those (no nested objects)"},
                            "idempotency_key": {"type": "string", "minLength": 1, "maxLength": 255,
                                "description": "Optional: a unique string per entry you create (e.g. a UUID). Retrying with the same key returns the first answer (for 24 hours) instead of creating the entry again."}
                        },
                        "required": ["content"]
                    }),
                    entry_properties(),
                ),
                Some(status_output.clone()),
            ),
            writes("Create knowledge", false),
        ),
        with_annotations(
            make(
                GET,
                "Get one knowledge entry: its title, tags, processing status, full Markdown content and, for an entry with versions, its validity, key and provenance. With history: true, also every version of its key and what happened to them.",
                json!({"type": "object", "properties": {"id": id, "history": {"type": "boolean", "default": false, "description": "Also return every version of the entry's key and its history (superseded, deleted, derived)"}}, "required": ["id"]}),
                None,
            ),
            read_only("Get knowledge"),
        ),
        with_annotations(
            make(
                QUERY,
                "Search the knowledge entries this connection may read (keyword and semantic). Returns ids to pass to get_knowledge.",
                json!({
                    "type": "object",
                    "properties": {
                        "query": {"type": "string", "minLength": 1, "maxLength": 2000, "description": "What to look for"},
                        "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 10, "description": "Maximum number of results (entries, each once)"},
                        "min_score": {"type": "number", "minimum": 0, "maximum": 1, "default": 0.5, "description": "Minimum relevance score (0-1); lower it for more, weaker results"},
                        "filter": filter_schema(),
                        "as_of": as_of_schema()
                    },
                    "required": ["query"]
                }),
                None,
            ),
            read_only("Query knowledge"),
        ),
        with_annotations(
            make(
                LIST,
                "List the knowledge entries of this connection's resource valid now (or as_of a moment), newest first.",
                json!({
                    "type": "object",
                    "properties": {
                        "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20},
                        "offset": {"type": "integer", "minimum": 0, "default": 0},
                        "as_of": as_of_schema()
                    }
                }),
                None,
            ),
            read_only("List knowledge"),
        ),
        with_annotations(
            make(
                UPDATE,
                "Update a knowledge entry created by an agent: new content (re-processed in the background), title or tags.",
                json!({
                    "type": "object",
                    "properties": {
                        "id": id,
                        "content": {"type": "string", "description": "New content (markdown, or EditorJS JSON with content_type 'blocks')"},
                        "content_type": {"type": "string", "enum": ["markdown", "blocks"], "default": "markdown"},
                        "title": {"type": "string"},
                        "tags": {"type": "array", "items": {"type": "string"}}
                    },
                    "required": ["id"]
                }),
                Some(status_output),
            ),
            writes("Update knowledge", false),
        ),
        with_annotations(
            make(
                DELETE,
                "Delete a knowledge entry, and every entry derived from it (the answer names them).",
                json!({"type": "object", "properties": {"id": id}, "required": ["id"]}),
                None,
            ),
            writes("Delete knowledge", true),
        ),
    ]
}

/// Whether `caller` may use the knowledge tool `name` (read-only callers lose the write
/// tools) — without building any tool definition.
pub(crate) fn usable_by(caller: &Caller, name: &str) -> bool {
    !WRITE_TOOLS.contains(&name) || caller.engine.scope().can(Access::Write)
}

/// The capture tools `caller` may use (no write tools for read-only callers).
pub(crate) fn capture_tools_for(caller: &Caller) -> Vec<Tool> {
    let write = caller.engine.scope().can(Access::Write);
    capture_tools()
        .into_iter()
        .filter(|t| write || !WRITE_TOOLS.contains(&t.name.as_ref()))
        .filter(|t| in_tool_scope(caller, t))
        .collect()
}

/// A capture tool's own name: seed 004's alias `search_knowledges` is `query_knowledge`.
pub(crate) fn capture_tool_name(name: &str) -> &str {
    if name == QUERY_ALIAS { QUERY } else { name }
}

/// The capture tool called by name ([`capture_tool_name`]) when it is in the caller's
/// scope ([`in_tool_scope`]); `None` for a name that is none or out of scope.
pub(crate) fn capture_tool_in_scope(caller: &Caller, name: &str) -> Option<Tool> {
    let name = capture_tool_name(name);
    capture_tools()
        .into_iter()
        .find(|t| t.name == name)
        .filter(|t| in_tool_scope(caller, t))
}

/// The seed's result text for `knowledge_search`, plus `structuredContent`.
pub(crate) fn knowledge_search_result(
    req: &KnowledgeSearch,
    requested: SearchMode,
    found: &KnowledgeSearchResult,
) -> CallToolResult {
    let query = &req.query;
    let results = &found.results;
    // The mode that ran (issue 41: the text said "hybrid" when it had run as keyword); the
    // one asked for beside it when they differ, since the text is what the model reads.
    let mode = if found.search_mode == requested {
        found.search_mode.as_str().to_owned()
    } else {
        format!(
            "{} ({} asked)",
            found.search_mode.as_str(),
            requested.as_str()
        )
    };
    let mut content = vec![ContentBlock::text(format!(
        "## Search Results\n\n**Query:** {query}\n**Total Found:** {}\n**Returned:** {}\n**Search Mode:** {mode}\n\n",
        if found.total_count > 0 {
            found.total_count
        } else {
            results.len()
        },
        results.len(),
    ))];
    if !results.is_empty() {
        let mut text = String::from("### Matched Documents\n\n");
        for (i, r) in results.iter().enumerate() {
            let title = if r.knowledge_title.is_empty() {
                "Untitled"
            } else {
                &r.knowledge_title
            };
            let file = if r.knowledge_filename.is_empty() {
                "Unknown"
            } else {
                &r.knowledge_filename
            };
            let excerpt: String = r.content.chars().take(500).collect();
            let more = if r.content.chars().count() > 500 {
                "..."
            } else {
                ""
            };
            // A paged source's page, in the text as well as structuredContent: the text is
            // what most clients give the model, and a citation needs the page.
            let page = r
                .page
                .map(|p| format!("- **Page:** {p}\n"))
                .unwrap_or_default();
            text.push_str(&format!(
                "#### [{}] {title}\n- **Score:** {:.1}%\n- **Source:** {file}\n{page}- **Match Type:** {}\n\n> {excerpt}{more}\n\n",
                i + 1,
                r.score * 100.0,
                r.match_type
            ));
        }
        content.push(ContentBlock::text(text));
    }
    if results.len() < 3 {
        let mut s = String::from("\n### Suggestions for Better Results\n\n");
        if results.is_empty() {
            s.push_str("- Try different keywords or rephrase your query\n");
            s.push_str("- Use more general terms if query is too specific\n");
            s.push_str("- Check if the topic exists in the knowledge bases\n");
        } else {
            // Only a threshold that cut something can be lowered.
            if req.min_score > 0.0 {
                s.push_str("- Consider lowering min_score to get more results\n");
            }
            s.push_str("- Try breaking the query into smaller parts\n");
            s.push_str("- Use \"keyword\" mode if looking for exact terms\n");
        }
        content.push(ContentBlock::text(s));
    }
    let mut r = CallToolResult::success(content);
    r.structured_content = serde_json::to_value(found).ok();
    r
}

fn parse_search(args: &Args<'_>) -> Result<(KnowledgeSearch, SearchMode), String> {
    let mut req = KnowledgeSearch::new(args.required_string("query")?);
    if let Some(m) = args.string("search_mode")? {
        req.mode = SearchMode::parse(&m).map_err(|e| e.to_string())?;
    }
    if let Some(k) = args.uint("top_k")? {
        req.top_k = k.min(usize::MAX as u64) as usize;
    }
    if let Some(m) = args.number("min_score")? {
        req.min_score = m;
    }
    if let Some(r) = args.bool("rerank")? {
        req.rerank = r;
    }
    let mode = req.mode;
    Ok((req, mode))
}

fn note_json(file: &KbFile) -> Value {
    let note = file.note.as_ref();
    json!({
        "id": file.id,
        "knowledge_base": file.knowledge_base,
        "file_name": file.file_name,
        "title": note.and_then(|n| n.title.clone()),
        "kind": note.map_or("document", |n| n.kind.as_str()),
        "tags": note.map(|n| n.tags.clone()).unwrap_or_default(),
        "summary": note.and_then(|n| n.summary.clone()),
        "status": file.status.as_str(),
        "error": file.error,
        "docid": file.docid,
        "created_at": file.created_at,
        "updated_at": file.updated_at,
        "entry": file.entry,
    })
}

/// A moment as text (`2026-06-01T10:30:00Z`).
fn instant_text(millis: i64) -> String {
    quarry_metadata::Date {
        millis,
        has_time: true,
    }
    .to_string()
}

/// An entry's versions and history, as text after its content.
fn history_text(h: &quarry_engine::EntryHistory) -> String {
    let mut text = String::from("\n\n## Versions\n");
    for v in &h.versions {
        let e = v.entry.as_ref();
        text.push_str(&format!(
            "\n- [{}] valid from {}{}{}",
            v.id,
            e.map_or(String::new(), |e| instant_text(e.valid_from)),
            e.and_then(|e| e.valid_until)
                .map_or(String::new(), |u| format!(" until {}", instant_text(u))),
            e.and_then(|e| e.superseded_by.as_deref())
                .map_or(String::new(), |s| format!(", superseded by {s}")),
        ));
    }
    text.push_str("\n\n## History\n");
    for ev in &h.events {
        text.push_str(&format!(
            "\n- {} {} {}",
            instant_text(ev.at),
            ev.entry,
            ev.event
        ));
    }
    text
}

fn view_json(v: &NoteView) -> Value {
    let mut j = note_json(&v.file);
    j["title"] = json!(v.title);
    j["content"] = json!(v.content);
    j
}

/// A knowledge entry as Markdown under its title, unless the content already opens with
/// that title as a heading (a note's own `# Title`), which would then show twice.
fn titled(title: &str, content: &str) -> String {
    let opens_with_title = content
        .lines()
        .find(|l| !l.trim().is_empty())
        .and_then(|l| l.trim_start().strip_prefix('#'))
        .map(|h| h.trim_start_matches('#').trim())
        .is_some_and(|h| h == title.trim());
    if opens_with_title {
        content.to_owned()
    } else {
        format!("# {title}\n\n{content}")
    }
}

fn content_change(args: &Args<'_>) -> Result<Option<(String, NoteFormat)>, String> {
    let format = match args.string("content_type")? {
        Some(f) => NoteFormat::parse(&f).map_err(|e| e.to_string())?,
        None => NoteFormat::Markdown,
    };
    Ok(args.string("content")?.map(|c| (c, format)))
}

/// Runs one of this module's tools on a blocking thread. Failures are tool errors
/// (`isError`), worded for the model.
pub(crate) async fn call(
    state: &Arc<AppState>,
    caller: &Caller,
    name: &str,
    args: rmcp::model::JsonObject,
) -> CallToolResult {
    let conn = Connection {
        engine: caller.engine.clone(),
        resource: caller.resource.clone(),
        owner: caller.idempotency_owner().to_owned(),
        idempotency_key: caller.idempotency_key.clone(),
        caller: caller.clone(),
    };
    let name = name.to_owned();
    run_own_tool(state, "Search", move || run(&conn, &name, &Args(&args))).await
}

/// What a tool call may use of its connection.
struct Connection {
    engine: quarry_engine::Engine,
    resource: String,
    /// Who keys idempotent calls (a user's UUID, or `local`).
    owner: String,
    /// The request's `Idempotency-Key` header.
    idempotency_key: Option<String>,
    /// Who calls, from where (a knowledge entry's provenance).
    caller: Caller,
}

/// The `filter` argument of a search tool (issue 44), parsed.
fn filter_arg(args: &Args<'_>) -> Result<Option<quarry_engine::Filter>, String> {
    parse_filter(args.0.get("filter")).map_err(|e| e.public_text())
}

/// The `as_of` argument of a read tool (issue 44), parsed.
fn as_of_arg(args: &Args<'_>) -> Result<Option<i64>, String> {
    parse_as_of(args.0.get("as_of")).map_err(|e| e.public_text())
}

fn run(conn: &Connection, name: &str, args: &Args<'_>) -> CallToolResult {
    let engine = &conn.engine;
    match name {
        KNOWLEDGE_SEARCH => {
            let (req, mode) = match parse_search(args) {
                Ok(r) => r,
                Err(m) => return tool_error(format!("Search failed: 400 - {m}")),
            };
            let engine = match filter_arg(args).and_then(|f| Ok((f, as_of_arg(args)?))) {
                Ok((f, as_of)) => engine.filtered(f).at(as_of),
                Err(m) => return tool_error(format!("Search failed: 400 - {m}")),
            };
            match engine.knowledge_search(&req) {
                Ok(found) => knowledge_search_result(&req, mode, &found),
                Err(e) => tool_error(format!(
                    "Search failed: {} - {e}",
                    crate::http::http_status(&e).as_u16()
                )),
            }
        }
        CREATE => match create_once(conn, args) {
            Ok(r) => r,
            Err(m) => tool_error(m),
        },
        _ => match capture(conn, name, args) {
            Ok(r) => r,
            Err(m) => tool_error(m),
        },
    }
}

/// `create_knowledge`, once per idempotency key (the argument, or the request's header).
fn create_once(conn: &Connection, args: &Args<'_>) -> Result<CallToolResult, String> {
    let key = match (args.string(IDEMPOTENCY_KEY)?, &conn.idempotency_key) {
        (Some(a), Some(h)) if a != *h => {
            return Err(format!(
                "the `{IDEMPOTENCY_KEY}` argument and the Idempotency-Key header differ; send one key"
            ));
        }
        (Some(key), _) => Some(key),
        (None, header) => header.clone(),
    };
    let Some(key) = key else {
        return create(conn, args);
    };
    // What makes a retry the same request: the resource and every argument but the key.
    let sorted: std::collections::BTreeMap<&String, &Value> = args
        .0
        .iter()
        .filter(|(k, _)| k.as_str() != IDEMPOTENCY_KEY)
        .collect();
    let fingerprint = quarry_core::sha256_hex(
        format!("{CREATE}\n{}\n{}", conn.resource, json!(sorted)).as_bytes(),
    );
    let mut failure = None;
    let answer = conn.engine.once(&conn.owner, &key, &fingerprint, || {
        match create(conn, args) {
            Ok(r) => Ok(json!({
                "text": first_text(&r),
                "structured": r.structured_content,
            })),
            Err(m) => {
                // Not recorded: a retry runs again.
                failure = Some(m);
                Err(Error::invalid("create_knowledge failed"))
            }
        }
    });
    match answer {
        Ok(a) => Ok(with_structured(
            a["text"].as_str().unwrap_or_default().to_owned(),
            a["structured"].clone(),
        )),
        Err(e) => Err(failure.unwrap_or_else(|| crate::http::public_detail(&e))),
    }
}

fn first_text(r: &CallToolResult) -> String {
    r.content
        .iter()
        .find_map(|c| c.as_text().map(|t| t.text.clone()))
        .unwrap_or_default()
}

/// `create_knowledge` itself.
fn create(conn: &Connection, args: &Args<'_>) -> Result<CallToolResult, String> {
    let (engine, resource) = (&conn.engine, conn.resource.as_str());
    let fail = |e: Error| crate::http::public_detail(&e);
    let format = match args.string("content_type")? {
        Some(f) => NoteFormat::parse(&f).map_err(fail)?,
        None => NoteFormat::Markdown,
    };
    let title = args.string("title")?;
    let tags = args.strings("tags")?.unwrap_or_default();
    let fields = match args.0.get("metadata") {
        None | Some(Value::Null) => quarry_metadata::Metadata::default(),
        Some(v) => quarry_metadata::Metadata::from_json(v)
            .map_err(|e| format!("`metadata`: {}", e.public_text()))?,
    };
    let options = entry_options(args.0, &conn.caller, "mcp").map_err(fail)?;
    let note = NewNote {
        fields,
        content: args.required_string("content")?,
        format,
        kind: args.string("kind")?.unwrap_or_else(|| "text".into()),
        title: title.clone(),
        tags: tags.clone(),
    };
    let created = engine
        .create_entry(resource, note, &options)
        .map_err(fail)?;
    let file = &created.file;
    if !created.duplicate {
        let mut text = format!("Knowledge created: {}", file.id);
        let mut structured = json!({"id": file.id, "status": "processing", "message": "Knowledge created successfully, processing in background"});
        if let Some(entry) = &file.entry {
            structured["valid_from"] = json!(entry.valid_from);
            if let Some(key) = &entry.key {
                structured["key"] = json!(key);
            }
            if let Some(until) = entry.valid_until {
                structured["valid_until"] = json!(until);
            }
        }
        if let Some(old) = &created.superseded {
            text.push_str(&format!(
                "\nIt supersedes {}{}: searches return the new entry; the old one stays in its history (get_knowledge with history: true).",
                old.id,
                if created.merged { " (merged: it said nearly the same)" } else { "" }
            ));
            structured["superseded"] = json!(old.id);
            structured["merged"] = json!(created.merged);
        }
        if !created.merged && !created.near_duplicates.is_empty() {
            text.push_str("\nCurrent entries that say nearly the same (to replace one, write again with its key, or supersedes: its id):");
            for d in &created.near_duplicates {
                text.push_str(&format!(
                    "\n- [{}] {} ({:.0}% of words shared)",
                    d.id,
                    d.title,
                    d.similarity * 100.0
                ));
            }
            structured["near_duplicates"] = json!(created.near_duplicates);
        }
        return Ok(with_structured(text, structured));
    }
    // Nothing new was stored: say so, and what became of the title and tags given.
    let existing = file
        .note
        .as_ref()
        .and_then(|n| n.title.clone())
        .unwrap_or_else(|| file.file_name.clone());
    let given = title.as_deref().is_some_and(|t| !t.trim().is_empty())
        || tags.iter().any(|t| !t.trim().is_empty());
    let mut message = format!(
        "Knowledge already exists with the same content: {} ('{existing}' in '{}'); nothing new was created.",
        file.id, file.knowledge_base
    );
    if given {
        message.push_str(if file.note.is_some() {
            " The title and tags given were not applied; change them with update_knowledge."
        } else {
            " The title and tags given were not applied: the existing entry is an uploaded document, whose title and tags cannot be changed."
        });
    }
    Ok(with_structured(
        message.clone(),
        json!({"id": file.id, "status": file.status.as_str(), "message": message}),
    ))
}

fn capture(conn: &Connection, name: &str, args: &Args<'_>) -> Result<CallToolResult, String> {
    let (engine, resource) = (&conn.engine, conn.resource.as_str());
    let fail = |e: Error| crate::http::public_detail(&e);
    match name {
        GET => {
            let id = args.required_string("id")?;
            let file = engine.find_knowledge(Some(resource), &id).map_err(fail)?;
            let history = if args.bool("history")?.unwrap_or(false) {
                Some(engine.entry_history(&file).map_err(fail)?)
            } else {
                None
            };
            let view = engine.knowledge_view(file).map_err(fail)?;
            let mut text = titled(&view.title, &view.content);
            let mut structured = view_json(&view);
            if let Some(h) = history {
                text.push_str(&history_text(&h));
                structured["versions"] =
                    json!(h.versions.iter().map(note_json).collect::<Vec<_>>());
                structured["history"] = json!(h.events);
            }
            Ok(with_structured(text, structured))
        }
        QUERY | QUERY_ALIAS => {
            let mut req = KnowledgeSearch::new(args.required_string("query")?);
            let engine = engine.filtered(filter_arg(args)?).at(as_of_arg(args)?);
            let limit = args.uint("limit")?.unwrap_or(10).clamp(1, 50) as usize;
            // The same bar as knowledge_search (0.5 unless asked): ten results of which nine
            // score 0–4 % bury the one that answers.
            if let Some(m) = args.number("min_score")? {
                req.min_score = m;
            }
            // Entries, not passages: each once, at its best passage; ask for more passages
            // than entries so one long document does not fill the list.
            req.top_k = quarry_engine::MAX_TOP_K;
            let mut found = engine.knowledge_search(&req).map_err(fail)?;
            let mut seen = std::collections::HashSet::new();
            found
                .results
                .retain(|r| seen.insert(r.knowledge_id.clone()));
            found.results.truncate(limit);
            let mut text = format!(
                "Found {} knowledge entr{} for \"{}\"",
                found.results.len(),
                if found.results.len() == 1 { "y" } else { "ies" },
                req.query
            );
            for r in &found.results {
                let excerpt: String = r.content.chars().take(200).collect();
                text.push_str(&format!(
                    "\n\n- [{}] {} ({:.0}%, {})\n  {}",
                    r.knowledge_id,
                    r.knowledge_title,
                    r.score * 100.0,
                    r.file,
                    excerpt.replace('\n', " ")
                ));
            }
            Ok(with_structured(
                text,
                json!({"results": found.results, "total_count": found.total_count}),
            ))
        }
        LIST => {
            let limit = args.uint("limit")?.unwrap_or(20).min(100) as usize;
            let offset = args.index("offset")?.unwrap_or(0).min(usize::MAX as u64) as usize;
            let (items, total) = engine
                .at(as_of_arg(args)?)
                .list_knowledge(resource, offset, limit)
                .map_err(fail)?;
            let mut text = format!(
                "{total} knowledge entr{} in '{resource}' (showing {} from {offset})",
                if total == 1 { "y" } else { "ies" },
                items.len()
            );
            for f in &items {
                let title = f
                    .note
                    .as_ref()
                    .and_then(|n| n.title.clone())
                    .unwrap_or_else(|| f.file_name.clone());
                text.push_str(&format!("\n- [{}] {title} ({})", f.id, f.status.as_str()));
            }
            let items: Vec<Value> = items.iter().map(note_json).collect();
            Ok(with_structured(
                text,
                json!({"items": items, "total": total, "offset": offset, "limit": limit}),
            ))
        }
        UPDATE => {
            let id = args.required_string("id")?;
            let change = NoteChange {
                content: content_change(args)?,
                title: args.string("title")?,
                tags: args.strings("tags")?,
            };
            let file = engine.resource_knowledge(resource, &id).map_err(fail)?;
            let file = engine.update_note(&file, change).map_err(fail)?;
            Ok(with_structured(
                format!("Knowledge updated: {}", file.id),
                json!({"id": file.id, "status": "processing", "message": "Knowledge updated, processing in background"}),
            ))
        }
        DELETE => {
            let id = args.required_string("id")?;
            let file = engine.resource_knowledge(resource, &id).map_err(fail)?;
            let deleted = engine
                .delete_knowledge_by(&file, &provenance(&conn.caller, "mcp"))
                .map_err(fail)?;
            let mut text = format!("Knowledge deleted: {}", deleted.file.id);
            if !deleted.derived.is_empty() {
                text.push_str(&format!(
                    "\nDeleted with it, as derived from it: {}",
                    deleted.derived.join(", ")
                ));
            }
            Ok(with_structured(
                text,
                json!({"id": deleted.file.id, "deleted": true, "derived_deleted": deleted.derived}),
            ))
        }
        other => Err(format!("Unknown tool: {other}")),
    }
}
