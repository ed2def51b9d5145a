//! The browse tools (issue 68): `ls`, `find`, `grep` and `cat`, a read-only view by path of
//! the collections and knowledge bases the caller may read — documents and wiki pages alike
//! — for `/mcp`, stdio and named endpoints. The engine applies readers and bounds
//! (`quarry_engine::Engine::ls`); this module only reads arguments and words answers.

use std::sync::Arc;

use quarry_engine::{FIND_LIMIT, GREP_LIMIT, GetRequest, GrepRequest, MAX_GREP_CONTEXT};
use rmcp::model::{CallToolResult, Tool, object};
use serde_json::{Value, json};

use super::tool_args::{Args, read_only, with_annotations, with_structured};
use super::tool_scope::in_tool_scope;
use crate::auth::Caller;

const LS: &str = "ls";
const FIND: &str = "find";
const GREP: &str = "grep";
const CAT: &str = "cat";
/// Most lines one `cat` shows.
const MAX_CAT_LINES: u64 = 2_000;

/// Whether `name` is one of the browse tools.
pub(crate) fn handles(name: &str) -> bool {
    matches!(name, LS | FIND | GREP | CAT)
}

fn tool(name: &str, title: &str, description: &str, input: Value) -> Tool {
    with_annotations(
        Tool::new(
            name.to_owned(),
            description.to_owned(),
            Arc::new(object(input)),
        ),
        read_only(title),
    )
}

/// The browse tools, every one (all read-only).
pub(crate) fn browse_tools() -> Vec<Tool> {
    vec![
        tool(
            LS,
            "List",
            "List what is at a path, like ls: with no path, the collections and knowledge bases you may read; with one ('handbook', 'wiki/pages'), its folders (with how many documents each holds) and documents (bytes, title, #docid). A knowledge base's wiki pages are under '<kb>/pages/'. Read a document with cat.",
            json!({"type": "object", "properties": {
                "path": {"type": "string", "description": "A collection or knowledge base, and a folder in it; empty for all"}
            }}),
        ),
        tool(
            FIND,
            "Find",
            "Find documents by path with a glob, like find: 'wiki/pages/*.md', '**/*.pdf', 'handbook/**/onboarding*'. Answers the paths (with title and #docid) and how many match in all.",
            json!({"type": "object", "properties": {
                "pattern": {"type": "string", "description": "A glob over 'collection/path' (* stays within a folder, ** crosses folders)"},
                "limit": {"type": "integer", "minimum": 1, "maximum": FIND_LIMIT.1, "default": FIND_LIMIT.0}
            }, "required": ["pattern"]}),
        ),
        tool(
            GREP,
            "Grep",
            "Search the text of documents and wiki pages line by line with a regular expression, like grep -n: each matching line with its path and line number (read on with cat from that line). For exact words, codes and names; use knowledge_search for questions.",
            json!({"type": "object", "properties": {
                "pattern": {"type": "string", "description": "A regular expression (Rust regex syntax)"},
                "path": {"type": "string", "description": "Only under this path ('wiki/pages'), or matching this glob"},
                "ignore_case": {"type": "boolean", "default": false},
                "context": {"type": "integer", "minimum": 0, "maximum": MAX_GREP_CONTEXT, "default": 0, "description": "Lines shown before and after each match"},
                "limit": {"type": "integer", "minimum": 1, "maximum": GREP_LIMIT.1, "default": GREP_LIMIT.0}
            }, "required": ["pattern"]}),
        ),
        tool(
            CAT,
            "Read lines",
            "Read a document or wiki page, or some of its lines, like cat or head: its Markdown with line numbers. 'path' is as ls, find and grep show it (or a #docid, or 'path:LINE').",
            json!({"type": "object", "properties": {
                "path": {"type": "string"},
                "from": {"type": "integer", "minimum": 1, "default": 1, "description": "First line"},
                "lines": {"type": "integer", "minimum": 1, "maximum": MAX_CAT_LINES, "default": 200, "description": "How many lines"}
            }, "required": ["path"]}),
        ),
    ]
}

/// The browse tools in `caller`'s token's tool scope.
pub(crate) fn browse_tools_for(caller: &Caller) -> Vec<Tool> {
    browse_tools()
        .into_iter()
        .filter(|t| in_tool_scope(caller, t))
        .collect()
}

fn limit(args: &Args<'_>, most: usize) -> Result<usize, String> {
    Ok(args
        .uint("limit")?
        .map_or(0, |n| usize::try_from(n).unwrap_or(most).min(most)))
}

/// Runs one of these tools as `caller` (see `tool_call::call_with_caller`).
pub(crate) fn run(caller: &Caller, name: &str, args: &Args<'_>) -> Result<CallToolResult, String> {
    let engine = &caller.engine;
    let fail = |e: quarry_core::Error| crate::http::public_detail(&e);
    match name {
        LS => {
            let path = args.string("path")?.unwrap_or_default();
            let entries = engine.ls(&path).map_err(fail)?;
            let text = entries
                .iter()
                .map(|e| match (&e.title, e.documents) {
                    (_, Some(n)) => format!("{} ({n} documents)", e.path),
                    (Some(t), None) => format!("{} — {t}", e.path),
                    _ => e.path.clone(),
                })
                .collect::<Vec<_>>()
                .join("\n");
            Ok(with_structured(text, json!({ "entries": entries })))
        }
        FIND => {
            let found = engine
                .find(
                    &args.required_string("pattern")?,
                    limit(args, FIND_LIMIT.1)?,
                )
                .map_err(fail)?;
            let mut text = format!("{} match(es)", found.total);
            for e in &found.entries {
                text.push_str(&format!("\n{}", e.path));
            }
            if found.total > found.entries.len() {
                text.push_str(&format!(
                    "\n({} shown: raise limit or narrow the pattern)",
                    found.entries.len()
                ));
            }
            Ok(with_structured(text, json!(found)))
        }
        GREP => {
            let found = engine
                .grep(&GrepRequest {
                    pattern: args.required_string("pattern")?,
                    path: args.string("path")?,
                    ignore_case: args.bool("ignore_case")?.unwrap_or(false),
                    limit: limit(args, GREP_LIMIT.1)?,
                    context: args
                        .uint("context")?
                        .map_or(0, |n| usize::try_from(n).unwrap_or(MAX_GREP_CONTEXT)),
                })
                .map_err(fail)?;
            let mut text = format!(
                "{} matching line(s) in {} document(s) searched",
                found.matches.len(),
                found.documents_searched
            );
            for m in &found.matches {
                let first = m.line - m.before.len();
                for (i, l) in m.before.iter().enumerate() {
                    text.push_str(&format!("\n{}-{}-{l}", m.path, first + i));
                }
                text.push_str(&format!("\n{}:{}:{}", m.path, m.line, m.text));
                for (i, l) in m.after.iter().enumerate() {
                    text.push_str(&format!("\n{}-{}-{l}", m.path, m.line + 1 + i));
                }
            }
            if found.truncated {
                text.push_str("\n(stopped at the limit: narrow the path or the pattern)");
            }
            Ok(with_structured(text, json!(found)))
        }
        CAT => {
            let lines = args.uint("lines")?.unwrap_or(200).clamp(1, MAX_CAT_LINES);
            let view = engine
                .get(&GetRequest {
                    file: args.required_string("path")?,
                    from_line: args
                        .uint("from")?
                        .map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
                    max_lines: Some(lines as usize),
                    line_numbers: true,
                })
                .map_err(fail)?;
            let shown_to = (view.from_line + lines as usize - 1).min(view.total_lines);
            let mut text = format!(
                "{} ({}) lines {}-{shown_to} of {}\n\n{}",
                view.name, view.docid, view.from_line, view.total_lines, view.text
            );
            if shown_to < view.total_lines {
                text.push_str(&format!("\n\n(more: cat with from = {})", shown_to + 1));
            }
            Ok(with_structured(text, json!(view)))
        }
        other => Err(format!("Unknown tool: {other}")),
    }
}
