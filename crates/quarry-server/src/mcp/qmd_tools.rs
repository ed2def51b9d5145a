//! QMD's six tools (seed 001) and `metadata` (issue 44): their definitions, with the seed's
//! parameter names and defaults (the search tools add an optional `filter`), and how a call
//! runs against the engine. Arguments are checked field by field, so
//! a wrong type gets a message naming the field (`isError: true`), as the seed specifies.

use std::sync::Arc;

use quarry_core::{Error, SearchHit, StatusReport, format_search_summary};
use quarry_engine::{
    DocumentView, Engine, Filter, GetRequest, MetadataReport, MultiGetItem, MultiGetRequest,
    QueryOptions, SearchRequest, SubQuery,
};
use rmcp::model::{
    CallToolResult, ContentBlock, JsonObject, MetaObject, ResourceContents, Tool, object,
};
use serde_json::{Value, json};

use crate::service::entries::{as_of_schema, parse_as_of};
use crate::service::filter::{filter_schema, parse_filter};
use crate::service::tool_args::{Args, read_only, tool_error};

/// QMD's six (seed 001), then `metadata` (issue 44: field discovery for filters).
pub(super) const TOOL_NAMES: [&str; 7] = [
    "search",
    "vsearch",
    "query",
    "get",
    "multi_get",
    "status",
    "metadata",
];

/// Most top values `metadata` lists per field, and its default.
const MAX_TOP: u64 = 50;
const DEFAULT_TOP: u64 = 10;

fn search_input(min_score_default: f64, what: &str) -> Value {
    json!({
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": what},
            "limit": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 10, "description": "Maximum number of results"},
            "minScore": {"type": "number", "minimum": 0, "maximum": 1, "default": min_score_default, "description": "Minimum relevance score 0-1"},
            "collection": {"type": "string", "description": "Only search this collection"},
            "filter": filter_schema(),
            "as_of": as_of_schema()
        },
        "required": ["query"]
    })
}

/// The `query` tool's input: the search tools' plus qmd 2.8's `searches`, `intent`,
/// `collections`, `candidateLimit` and `rerank`; `query` or `searches` (or both) is needed.
fn query_input() -> Value {
    let mut v = search_input(
        0.0,
        "Natural-language query, expanded and searched with both retrievers. Optional when 'searches' is given; with both, it runs as the first (2x-weighted) sub-query.",
    );
    v.as_object_mut().map(|o| o.remove("required"));
    let props = v["properties"]
        .as_object_mut()
        .expect("search_input has properties");
    props.insert(
        "searches".into(),
        json!({
            "type": "array",
            "maxItems": quarry_engine::MAX_SEARCHES,
            "description": "Typed sub-queries to execute (lex/vec/hyde), run as given without expansion. First gets 2x weight.",
            "items": {
                "type": "object",
                "properties": {
                    "type": {"type": "string", "enum": ["lex", "vec", "hyde"], "description": "lex = BM25 keywords (supports \"phrase\" and -negation); vec = semantic question; hyde = hypothetical answer passage"},
                    "query": {"type": "string", "description": "The query text. For lex: keywords, \"quoted phrases\", -negation. For vec: a natural-language question. For hyde: a 50-100 word answer passage."}
                },
                "required": ["type", "query"]
            }
        }),
    );
    props.insert(
        "intent".into(),
        json!({"type": "string", "description": "Background context to disambiguate the query (e.g. query 'performance', intent 'web page load times'). When a reranker runs it scores passages against intent + newline + query. Does not search on its own."}),
    );
    props.insert(
        "collections".into(),
        json!({"type": "array", "items": {"type": "string"}, "description": "Filter to collections (OR match)"}),
    );
    props.insert(
        "candidateLimit".into(),
        json!({"type": "integer", "minimum": 1, "maximum": 1000, "default": quarry_engine::RERANK_CANDIDATES, "description": "Maximum candidates to rerank (lower = faster but may miss results)"}),
    );
    props.insert(
        "rerank".into(),
        json!({"type": "boolean", "default": true, "description": "Rerank results when a reranker is configured (default: true)"}),
    );
    v
}

fn search_output() -> Value {
    json!({
        "type": "object",
        "properties": {
            "results": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "docid": {"type": "string", "description": "Short document id (#abc123)"},
                        "file": {"type": "string", "description": "Display path collection/relative/path"},
                        "title": {"type": "string"},
                        "score": {"type": "number", "minimum": 0, "maximum": 1},
                        "context": {"type": ["string", "null"]},
                        "snippet": {"type": "string", "description": "Excerpt with N: line numbers"},
                        "page": {"type": "integer", "description": "Page of a paged source (PDF page, slide) the excerpt is on; absent otherwise"},
                        "metadata": {"type": "object", "description": "The document's metadata fields (front matter, document properties, fields given at upload); absent when it has none"}
                    },
                    "required": ["docid", "file", "title", "score", "context", "snippet"]
                }
            }
        },
        "required": ["results"]
    })
}

fn status_output() -> Value {
    json!({
        "type": "object",
        "properties": {
            "totalDocuments": {"type": "integer"},
            "needsEmbedding": {"type": "integer"},
            "chunksNeedingEmbedding": {"type": "integer", "description": "chunks cut but not embedded yet"},
            "hasVectorIndex": {"type": "boolean"},
            "collections": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "path": {"type": "string"},
                        "pattern": {"type": "string"},
                        "documents": {"type": "integer"},
                        "lastUpdated": {"type": ["string", "null"], "description": "ISO 8601"}
                    },
                    "required": ["name", "path", "pattern", "documents", "lastUpdated"]
                }
            }
        },
        "required": ["totalDocuments", "needsEmbedding", "hasVectorIndex", "collections"]
    })
}

fn metadata_output() -> Value {
    json!({
        "type": "object",
        "properties": {
            "documents": {"type": "integer", "description": "Documents summarised"},
            "fields": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "field": {"type": "string"},
                        "types": {"type": "array", "items": {"type": "string"}, "description": "string, number, bool, date, list; most frequent first"},
                        "documents": {"type": "integer", "description": "Documents that have the field"},
                        "top_values": {"type": "array", "items": {"type": "object", "properties": {"value": {}, "count": {"type": "integer"}}, "required": ["value", "count"]}}
                    },
                    "required": ["field", "types", "documents", "top_values"]
                }
            }
        },
        "required": ["documents", "fields"]
    })
}

fn tool(name: &str, title: &str, description: &str, input: Value, output: Option<Value>) -> Tool {
    let mut t = Tool::new(name.to_owned(), description.to_owned(), object(input))
        .with_title(title)
        .with_annotations(read_only(title));
    if let Some(o) = output {
        t = t.with_raw_output_schema(Arc::new(object(o)));
    }
    t
}

/// The six tools of seed 001, with its parameter names and defaults, and `metadata`.
pub(crate) fn tools() -> Vec<Tool> {
    vec![
        tool(
            "search",
            "Keyword search",
            "Fast keyword search with BM25 full-text ranking. Words are OR-ed and ranked, \"quoted phrases\" must match, +word is required, -word excluded. Best for specific terms, names, identifiers.",
            search_input(0.0, "Search query"),
            Some(search_output()),
        ),
        tool(
            "vsearch",
            "Semantic search",
            "Semantic similarity search over vector embeddings. Best for conceptual questions without exact keywords. Needs 'quarry embed' to have run.",
            search_input(quarry_engine::VSEARCH_MIN_SCORE, "Natural-language query"),
            Some(search_output()),
        ),
        tool(
            "query",
            "Hybrid search",
            "Highest-quality search: keyword plus semantic retrieval fused and re-ranked. Falls back to keyword search when no vector index exists. Give 'query' (plain text, auto-expanded) and/or 'searches' (typed lex/vec/hyde sub-queries; the first weighs 2x).",
            query_input(),
            Some(search_output()),
        ),
        tool(
            "get",
            "Get document",
            "Retrieve one document by path (collection/relative/path.md), #docid, or path:LINE, optionally a line range.",
            json!({
                "type": "object",
                "properties": {
                    "file": {"type": "string", "description": "File path, #docid, or path.md:LINE"},
                    "fromLine": {"type": "integer", "minimum": 1, "description": "First line (1-indexed)"},
                    "maxLines": {"type": "integer", "minimum": 1, "description": "Maximum number of lines"},
                    "lineNumbers": {"type": "boolean", "default": false, "description": "Prefix lines with N: "}
                },
                "required": ["file"]
            }),
            None,
        ),
        tool(
            "multi_get",
            "Get several documents",
            "Retrieve several documents by glob (journals/2025-05*.md) or comma-separated list. Files over maxBytes are skipped with a notice; use get for them.",
            json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "Glob over display paths, or a comma-separated list"},
                    "maxLines": {"type": "integer", "minimum": 1, "description": "Maximum lines per file"},
                    "maxBytes": {"type": "integer", "minimum": 1, "default": 10240, "description": "Skip files larger than this many bytes"},
                    "lineNumbers": {"type": "boolean", "default": false, "description": "Prefix lines with N: "}
                },
                "required": ["pattern"]
            }),
            None,
        ),
        tool(
            "status",
            "Index status",
            "Show the index: documents, embedding state, collections and when each was last updated.",
            json!({"type": "object", "properties": {}}),
            Some(status_output()),
        ),
        tool(
            "metadata",
            "Metadata fields",
            "List the metadata fields of the documents you can search (front matter, document properties, fields given at upload, and the built-in collection, path, title, indexed): each field's types, how many documents have it and its most frequent values. Use it to write the `filter` of search, vsearch and query.",
            json!({
                "type": "object",
                "properties": {
                    "collection": {"type": "string", "description": "Only this collection"},
                    "filter": filter_schema(),
                    "top": {"type": "integer", "minimum": 1, "maximum": MAX_TOP, "default": DEFAULT_TOP, "description": "Most frequent values listed per field"}
                }
            }),
            Some(metadata_output()),
        ),
    ]
}

/// The `query` tool's request and options (`query` may be absent when `searches` is given).
fn query_request(args: &Args<'_>) -> Result<(SearchRequest, QueryOptions), String> {
    let searches = SubQuery::list_from_json(args.0.get("searches")).map_err(|e| e.public_text())?;
    let mut req = if searches.is_empty() {
        search_request(args, 0.0)?
    } else {
        SearchRequest {
            query: args.string("query")?.unwrap_or_default(),
            ..search_request_with(args, 0.0, String::new())?
        }
    };
    req.rerank = args.bool("rerank")?.unwrap_or(true);
    let opts = QueryOptions {
        searches,
        intent: args.string("intent")?,
        collections: args.strings("collections")?.unwrap_or_default(),
        candidate_limit: args
            .uint("candidateLimit")?
            .map(|n| n.min(usize::MAX as u64) as usize),
    };
    Ok((req, opts))
}

fn search_request(args: &Args<'_>, default_min: f64) -> Result<SearchRequest, String> {
    search_request_with(args, default_min, args.required_string("query")?)
}

fn search_request_with(
    args: &Args<'_>,
    default_min: f64,
    query: String,
) -> Result<SearchRequest, String> {
    Ok(SearchRequest {
        query,
        limit: args.uint("limit")?.unwrap_or(10).min(usize::MAX as u64) as usize,
        min_score: args.number("minScore")?.unwrap_or(default_min),
        collection: args.string("collection")?,
        rerank: true,
        excerpt_chars: quarry_engine::SNIPPET_CHARS,
    })
}

/// The `filter` argument, parsed (a message naming what is wrong otherwise).
fn filter_arg(args: &Args<'_>) -> Result<Option<Filter>, String> {
    parse_filter(args.0.get("filter")).map_err(|e| e.public_text())
}

/// A short text for a metadata report: one line per field.
pub(crate) fn metadata_text(report: &MetadataReport) -> String {
    let mut text = format!(
        "{} document{}, {} field{}",
        report.documents,
        if report.documents == 1 { "" } else { "s" },
        report.fields.len(),
        if report.fields.len() == 1 { "" } else { "s" },
    );
    for f in &report.fields {
        let values: Vec<String> = f
            .top_values
            .iter()
            .take(5)
            .map(|v| match &v.value {
                Value::String(s) => format!("{s:?} ({})", v.count),
                other => format!("{other} ({})", v.count),
            })
            .collect();
        text.push_str(&format!(
            "\n- {} [{}] in {} doc{}",
            f.field,
            f.types.join("|"),
            f.documents,
            if f.documents == 1 { "" } else { "s" }
        ));
        if !values.is_empty() {
            text.push_str(&format!(": {}", values.join(", ")));
        }
    }
    text
}

fn hits_result(hits: &[SearchHit], query: &str) -> CallToolResult {
    let mut r =
        CallToolResult::success(vec![ContentBlock::text(format_search_summary(hits, query))]);
    r.structured_content = Some(json!({ "results": hits }));
    r
}

/// An embedded `text/markdown` resource. rmcp's resource contents have no `name`/`title`
/// fields, so they travel in `_meta` here and [`super::jsonrpc::lift_resource_names`] copies them onto the
/// resource object on the wire (seed shape: `uri`, `name`, `title`, `mimeType`, `text`).
fn resource_block(view: &DocumentView) -> ContentBlock {
    let mut meta = MetaObject::default();
    meta.insert("name".into(), json!(view.name));
    meta.insert("title".into(), json!(view.title));
    meta.insert("docid".into(), json!(view.docid));
    ContentBlock::resource(
        ResourceContents::text(view.text.clone(), view.uri.clone())
            .with_mime_type("text/markdown")
            .with_meta(meta),
    )
}

fn status_result(s: &StatusReport) -> CallToolResult {
    let mut r = CallToolResult::success(vec![ContentBlock::text(s.summary())]);
    r.structured_content = Some(json!({
        "totalDocuments": s.total_documents,
        "needsEmbedding": s.needs_embedding,
        "chunksNeedingEmbedding": s.chunks_needing_embedding,
        "hasVectorIndex": s.has_vector_index,
        "collections": s.collections.iter().map(|c| json!({
            "name": c.name, "path": c.path, "pattern": c.pattern,
            "documents": c.documents, "lastUpdated": c.last_updated,
        })).collect::<Vec<_>>(),
    }));
    r
}

/// Runs QMD tool `name` (one of [`TOOL_NAMES`]) with `args`: blocking, for the runner.
pub(super) fn run(engine: &Engine, name: &str, args: &JsonObject) -> CallToolResult {
    let args = Args(args);
    let out = match name {
        "search" | "vsearch" | "query" => {
            let default_min = if name == "vsearch" {
                quarry_engine::VSEARCH_MIN_SCORE
            } else {
                0.0
            };
            let parsed = if name == "query" {
                query_request(&args)
            } else {
                search_request(&args, default_min).map(|r| (r, QueryOptions::default()))
            };
            let (req, opts) = match parsed {
                Ok(r) => r,
                Err(m) => return tool_error(m),
            };
            let as_of = parse_as_of(args.0.get("as_of")).map_err(|e| e.public_text());
            let engine = match filter_arg(&args).and_then(|f| Ok((f, as_of?))) {
                Ok((f, as_of)) => engine.filtered(f).at(as_of),
                Err(m) => return tool_error(m),
            };
            let hits = match name {
                "search" => engine.search(&req),
                "vsearch" => engine.vsearch(&req),
                _ => engine.query_with(&req, &opts).map(|r| r.results),
            };
            // The summary names the query, else the first sub-query.
            let shown = match opts.searches.first() {
                Some(s) if req.query.trim().is_empty() => s.query.as_str(),
                _ => req.query.as_str(),
            };
            hits.map(|h| hits_result(&h, shown))
        }
        "get" => {
            let req = (|| -> Result<GetRequest, String> {
                Ok(GetRequest {
                    file: args.required_string("file")?,
                    from_line: args.uint("fromLine")?.map(|v| v as usize),
                    max_lines: args.uint("maxLines")?.map(|v| v as usize),
                    line_numbers: args.bool("lineNumbers")?.unwrap_or(false),
                })
            })();
            match req {
                Ok(req) => engine
                    .get(&req)
                    .map(|v| CallToolResult::success(vec![resource_block(&v)])),
                Err(m) => return tool_error(m),
            }
        }
        "multi_get" => {
            let req = (|| -> Result<MultiGetRequest, String> {
                Ok(MultiGetRequest {
                    pattern: args.required_string("pattern")?,
                    max_lines: args.uint("maxLines")?.map(|v| v as usize),
                    max_bytes: args.uint("maxBytes")?.unwrap_or(10_240),
                    line_numbers: args.bool("lineNumbers")?.unwrap_or(false),
                })
            })();
            match req {
                Ok(req) => engine.multi_get(&req).map(|res| {
                    let mut content = Vec::new();
                    // Errors and skip notices lead, as the seed lays them out.
                    if !res.errors.is_empty() {
                        content.push(ContentBlock::text(format!(
                            "Errors:\n{}",
                            res.errors.join("\n")
                        )));
                    }
                    for item in &res.items {
                        content.push(match item {
                            MultiGetItem::Document(v) => resource_block(v),
                            MultiGetItem::Skipped { text, .. } => ContentBlock::text(text.clone()),
                        });
                    }
                    CallToolResult::success(content)
                }),
                Err(m) => return tool_error(m),
            }
        }
        "metadata" => {
            let parsed = (|| -> Result<_, String> {
                let collection = args.string("collection")?;
                let filter = filter_arg(&args)?;
                let top = args.uint("top")?.unwrap_or(DEFAULT_TOP);
                if top > MAX_TOP {
                    return Err(format!("`top` must be at most {MAX_TOP}, got {top}"));
                }
                Ok((collection, filter, top as usize))
            })();
            match parsed {
                Ok((collection, filter, top)) => engine
                    .metadata_fields(collection.as_deref(), filter.as_ref(), top)
                    .map(|report| {
                        let mut r = CallToolResult::success(vec![ContentBlock::text(
                            metadata_text(&report),
                        )]);
                        r.structured_content = serde_json::to_value(&report).ok();
                        r
                    }),
                Err(m) => return tool_error(m),
            }
        }
        _ => engine.status().map(|s| status_result(&s)),
    };
    out.unwrap_or_else(|e: Error| tool_error(crate::http::public_detail(&e)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifts_name_and_title_onto_embedded_resources() {
        let view = DocumentView {
            uri: "qmd://notes/a%20b.md".into(),
            name: "notes/a b.md".into(),
            title: "A B".into(),
            docid: "#abc123".into(),
            mime_type: "text/markdown",
            text: "hello".into(),
            context: None,
            from_line: 1,
            total_lines: 1,
        };
        let result = CallToolResult::success(vec![
            ContentBlock::text("Errors:\nFile not found: x.md"),
            resource_block(&view),
        ]);
        let mut msg = json!({"jsonrpc": "2.0", "id": 7, "result": result});
        assert!(crate::mcp::jsonrpc::lift_resource_names(&mut msg));
        let res = &msg["result"]["content"][1]["resource"];
        assert_eq!(res["uri"], "qmd://notes/a%20b.md");
        assert_eq!(res["name"], "notes/a b.md");
        assert_eq!(res["title"], "A B");
        assert_eq!(res["mimeType"], "text/markdown");
        assert_eq!(res["text"], "hello");
        assert_eq!(res["_meta"]["docid"], "#abc123");
        assert_eq!(
            msg["result"]["content"][0],
            json!({"type": "text", "text": "Errors:\nFile not found: x.md"})
        );
        // Idempotent; other messages are left alone.
        assert!(!crate::mcp::jsonrpc::lift_resource_names(&mut msg));
        let mut other = json!({"jsonrpc": "2.0", "id": 1, "result": {"tools": []}});
        assert!(!crate::mcp::jsonrpc::lift_resource_names(&mut other));
        let mut err = json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -1, "message": "x"}});
        assert!(!crate::mcp::jsonrpc::lift_resource_names(&mut err));
    }
}
