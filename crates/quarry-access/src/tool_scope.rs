//! A token's tool scope: the packages and tools it may use.

use quarry_core::{Error, Result};

/// Most entries in a token's tool scope.
pub const MAX_TOOL_SCOPE: usize = 200;
/// Longest tool name after its package (`package.` + this).
const MAX_TOOL_NAME: usize = 128;

/// A token's tool scope, checked and without duplicates: each entry is a package id
/// (lowercase letters, digits, `-`, `_`) or `package.tool`, the names `/api/catalog` shows.
/// Whether the packages exist is the caller's to check (catalogs change; see the hub).
pub fn normalize_tool_scope(entries: &[String]) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for raw in entries {
        let entry = raw.trim();
        let (package, tool) = match entry.split_once('.') {
            Some((p, t)) => (p, Some(t)),
            None => (entry, None),
        };
        let package_ok = !package.is_empty()
            && package.len() <= 40
            && package.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
            && package
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_'));
        let tool_ok = tool.is_none_or(|t| {
            !t.is_empty()
                && t.len() <= MAX_TOOL_NAME
                && !t
                    .chars()
                    .any(|c| c.is_whitespace() || c.is_control() || c == ',')
        });
        if !package_ok || !tool_ok {
            return Err(Error::invalid(format!(
                "invalid tool scope entry {entry:?}: name a package ('time') or a tool ('time.get_current_time') as /api/catalog shows them"
            )));
        }
        if !out.iter().any(|e| e == entry) {
            out.push(entry.to_owned());
        }
    }
    if out.is_empty() {
        return Err(Error::invalid(
            "the tool scope names nothing: leave it out for every tool, or name packages or tools",
        ));
    }
    if out.len() > MAX_TOOL_SCOPE {
        return Err(Error::invalid(format!(
            "the tool scope names {} entries, more than {MAX_TOOL_SCOPE}",
            out.len()
        )));
    }
    Ok(out)
}

/// Whether tool scope `outer` reaches `entry`: the same entry, or the package of a tool.
pub(crate) fn scope_covers(outer: &[String], entry: &str) -> bool {
    outer.iter().any(|o| {
        o == entry
            || entry
                .split_once('.')
                .is_some_and(|(package, _)| package == o.as_str())
    })
}
