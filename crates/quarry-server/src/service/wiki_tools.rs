//! The wiki tools (issue 68): `wiki_index`, `read_page`, `write_page` and `lint_wiki`, over the
//! pages of the connection's knowledge base (its resource: `X-Resource` or `?kb=`, as the
//! capture tools), for `/mcp`, stdio and named endpoints alike. The engine keeps pages honest
//! (`quarry_engine::Engine::write_page`); this module only reads arguments and words answers.

use std::sync::Arc;

use quarry_core::Access;
use quarry_engine::{
    Citation, CitedLines, INSTRUCTIONS_SLUG, LOG_SLUG, MAX_INDEX_LIMIT, MAX_LOG_ENTRY_CHARS,
    MAX_PAGE_SOURCES, PAGE_TYPES, PageStatus, PageWrite, WikiIndexRequest, index_line, lint_text,
    page_text,
};
use rmcp::model::{CallToolResult, Tool, ToolAnnotations, object};
use serde_json::{Value, json};

use super::entries::provenance;
use super::tool_args::{Args, read_only, with_annotations, with_structured};
use super::tool_scope::in_tool_scope;
use crate::auth::Caller;

const WIKI_INDEX: &str = "wiki_index";
const READ_PAGE: &str = "read_page";
const WRITE_PAGE: &str = "write_page";
const LINT_WIKI: &str = "lint_wiki";
const WIKI_LOG: &str = "wiki_log";

/// Whether `name` is one of the wiki tools.
pub(crate) fn handles(name: &str) -> bool {
    matches!(
        name,
        WIKI_INDEX | READ_PAGE | WRITE_PAGE | LINT_WIKI | WIKI_LOG
    )
}

fn tool(name: &str, description: &str, input: Value, annotations: ToolAnnotations) -> Tool {
    with_annotations(
        Tool::new(
            name.to_owned(),
            description.to_owned(),
            Arc::new(object(input)),
        ),
        annotations,
    )
}

/// The wiki tools, every one.
pub(crate) fn wiki_tools() -> Vec<Tool> {
    let slug = json!({"type": "string", "pattern": "^[a-z0-9][a-z0-9-]{0,99}$",
        "description": "The page's name in links ([[slug]]): lower-case letters, digits and '-'"});
    vec![
        tool(
            WIKI_INDEX,
            "List the wiki pages of this connection's knowledge base, by slug, with their type, status, whether they are stale and a one-line summary. Paged: pass `next` back as `after` for more. Start here to find what the wiki already says before writing; the answer carries the wiki's instructions page (slug 'instructions': what pages are for, naming, style) when it has one — follow it.",
            json!({
                "type": "object",
                "properties": {
                    "type": {"type": "string", "description": format!("Only pages of this type ({}, or another)", PAGE_TYPES.join(", "))},
                    "tag": {"type": "string", "description": "Only pages with this tag"},
                    "after": {"type": "string", "description": "The `next` of the previous answer"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_INDEX_LIMIT, "default": 50}
                }
            }),
            read_only("Wiki index"),
        ),
        tool(
            READ_PAGE,
            "Read one wiki page: its Markdown, its status, whether it is stale and why (which cited passage changed or went, with the old and new text), each source with its text as the document is now, its links and backlinks, and its version (the base_version of your next write_page).",
            json!({"type": "object", "properties": {"slug": slug}, "required": ["slug"]}),
            read_only("Read page"),
        ),
        tool(
            WRITE_PAGE,
            "Create or update a wiki page in this connection's knowledge base. Cite the passages it is written from: knowledge_search results' ids ('#a1b2c3:12', the passage starting at line 12) or a document and its lines ('#a1b2c3:12-20', or {\"document\": \"<knowledge_id>\", \"lines\": [12, 20]}). Quarry keeps the page honest: when a cited passage changes or its document is deleted, the page turns stale, with the reason. To update, pass the version read_page gave as base_version: if someone wrote the page since, the write is refused with the version to merge with. Link other pages with [[slug]].",
            json!({
                "type": "object",
                "properties": {
                    "slug": slug,
                    "title": {"type": "string", "minLength": 1},
                    "type": {"type": "string", "default": "summary", "description": format!("{} (or another lower-case word)", PAGE_TYPES.join(", "))},
                    "body": {"type": "string", "description": "The page's Markdown, with [[slug]] links to other pages"},
                    "status": {"type": "string", "enum": ["draft", "published", "archived"], "default": "published"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "sources": {
                        "type": "array", "maxItems": MAX_PAGE_SOURCES,
                        "description": "The passages the page is written from",
                        "items": {"anyOf": [
                            {"type": "string", "description": "'#docid:line' (a search result's id) or '#docid:first-last' / '<knowledge_id>:first-last'"},
                            {"type": "object", "properties": {
                                "document": {"type": "string", "description": "A knowledge_id or #docid"},
                                "lines": {"type": "array", "items": {"type": "integer", "minimum": 1}, "minItems": 2, "maxItems": 2}
                            }, "required": ["document", "lines"]}
                        ]}
                    },
                    "base_version": {"type": "string", "description": "The version this write replaces (read_page's `version`); leave out to create a page"}
                },
                "required": ["slug", "title", "body"]
            }),
            ToolAnnotations::with_title("Write page")
                .read_only(false)
                .destructive(false)
                .idempotent(false)
                .open_world(false),
        ),
        tool(
            WIKI_LOG,
            "Append one entry to this wiki's log (the page 'log'): what you ingested, which pages you wrote or updated and why, with [[slug]] links. Each entry is dated and signed with who wrote it.",
            json!({"type": "object", "properties": {
                "entry": {"type": "string", "minLength": 1, "maxLength": MAX_LOG_ENTRY_CHARS}
            }, "required": ["entry"]}),
            ToolAnnotations::with_title("Log to wiki")
                .read_only(false)
                .destructive(false)
                .idempotent(false)
                .open_world(false),
        ),
        tool(
            LINT_WIKI,
            "Check the wiki of this connection's knowledge base: stale pages (a cited passage changed or went), links to pages that do not exist, pages that cite nothing, pages nothing links to, titles used twice, and pages that state different values for the same keyed fact (lines 'key:: value') — each with what to do.",
            json!({"type": "object", "properties": {}}),
            read_only("Lint wiki"),
        ),
    ]
}

/// The wiki tools `caller` may use (no `write_page` for read-only callers), in its token's
/// tool scope.
pub(crate) fn wiki_tools_for(caller: &Caller) -> Vec<Tool> {
    let write = caller.engine.scope().can(Access::Write);
    wiki_tools()
        .into_iter()
        .filter(|t| write || (t.name != WRITE_PAGE && t.name != WIKI_LOG))
        .filter(|t| in_tool_scope(caller, t))
        .collect()
}

/// Whether `caller` may use the wiki tool `name`.
pub(crate) fn usable_by(caller: &Caller, name: &str) -> bool {
    !matches!(name, WRITE_PAGE | WIKI_LOG) || caller.engine.scope().can(Access::Write)
}

fn citation(i: usize, v: &Value) -> Result<Citation, String> {
    let n = i + 1;
    match v {
        Value::String(s) => {
            Citation::parse(s).map_err(|e| format!("source {n}: {}", e.public_text()))
        }
        Value::Object(o) => {
            let document = o
                .get("document")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("source {n}: `document` must be a string"))?;
            let lines: Vec<u32> = o
                .get("lines")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|x| x.as_u64().and_then(|x| u32::try_from(x).ok()))
                        .collect()
                })
                .unwrap_or_default();
            match lines.as_slice() {
                [a, b] if *a >= 1 => Ok(Citation {
                    document: document.to_owned(),
                    lines: CitedLines::Range(*a, *b),
                }),
                _ => Err(format!(
                    "source {n}: `lines` must be [first, last], two line numbers from 1"
                )),
            }
        }
        _ => Err(format!(
            "source {n}: give a passage id string or {{\"document\", \"lines\"}}"
        )),
    }
}

/// A page write from tool or request arguments (`slug` from them unless given), written as
/// `caller` through `via`.
pub(crate) fn page_write(
    caller: &Caller,
    slug: Option<String>,
    args: &Args<'_>,
    via: &str,
) -> Result<PageWrite, String> {
    let sources = match args.0.get("sources") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, v)| citation(i, v))
            .collect::<Result<_, _>>()?,
        Some(_) => return Err("`sources` must be an array".into()),
    };
    let status = match args.string("status")? {
        Some(s) => PageStatus::parse(&s).map_err(|e| e.public_text())?,
        None => PageStatus::Published,
    };
    let slug = match slug {
        Some(s) => s,
        None => args.required_string("slug")?,
    };
    Ok(PageWrite {
        slug,
        title: args.required_string("title")?,
        page_type: args.string("type")?.unwrap_or_else(|| "summary".into()),
        body: args.required_string("body")?,
        status,
        tags: args.strings("tags")?.unwrap_or_default(),
        sources,
        base_version: args.string("base_version")?,
        provenance: provenance(caller, via),
    })
}

/// Runs one of these tools as `caller` (see `tool_call::call_with_caller`).
pub(crate) fn run(caller: &Caller, name: &str, args: &Args<'_>) -> Result<CallToolResult, String> {
    let (engine, kb) = (&caller.engine, caller.resource.as_str());
    let fail = |e: quarry_core::Error| crate::http::public_detail(&e);
    match name {
        WIKI_INDEX => {
            let req = WikiIndexRequest {
                page_type: args.string("type")?,
                tag: args.string("tag")?,
                after: args.string("after")?,
                limit: args
                    .uint("limit")?
                    .unwrap_or(50)
                    .min(MAX_INDEX_LIMIT as u64) as usize,
            };
            let index = engine.wiki_index(kb, &req).map_err(fail)?;
            let mut text = format!(
                "{} page(s) in '{kb}' (showing {})",
                index.total,
                index.pages.len()
            );
            for p in &index.pages {
                text.push('\n');
                text.push_str(&index_line(p));
            }
            if let Some(next) = &index.next {
                text.push_str(&format!("\nMore: call again with after = {next:?}"));
            }
            if let Some(rules) = &index.instructions {
                text.push_str(&format!(
                    "\n\nThis wiki's instructions (page '{INSTRUCTIONS_SLUG}'):\n{rules}"
                ));
            }
            Ok(with_structured(text, json!(index)))
        }
        READ_PAGE => {
            let page = engine
                .read_page(kb, &args.required_string("slug")?)
                .map_err(fail)?;
            Ok(with_structured(page_text(&page), json!(page)))
        }
        WRITE_PAGE => {
            let write = page_write(caller, None, args, "mcp")?;
            let page = engine.write_page(kb, write).map_err(fail)?;
            Ok(with_structured(
                format!(
                    "Page written: [[{}]] version {}\n\n{}",
                    page.head.slug,
                    page.head.version,
                    page_text(&page)
                ),
                json!(page),
            ))
        }
        WIKI_LOG => {
            let page = engine
                .append_log(
                    kb,
                    &args.required_string("entry")?,
                    &provenance(caller, "mcp"),
                )
                .map_err(fail)?;
            let last = page.body.lines().last().unwrap_or_default().to_owned();
            Ok(with_structured(
                format!(
                    "Logged: {last}\n(page [[{LOG_SLUG}]] version {})",
                    page.head.version
                ),
                json!({"entry": last, "version": page.head.version}),
            ))
        }
        LINT_WIKI => {
            let findings = engine.lint_wiki(kb).map_err(fail)?;
            Ok(with_structured(
                lint_text(&findings),
                json!({"findings": findings}),
            ))
        }
        other => Err(format!("Unknown tool: {other}")),
    }
}
