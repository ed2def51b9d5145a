//! The server's layering rule: a route module (`api/<name>.rs`, `compat/<name>.rs`, the
//! `mcp/` folder as one surface) uses `http/`, `auth/`, `service/`, `telemetry` and the
//! crates below, never another route module. Shared work goes to `service/` or `http/`.

use std::path::{Path, PathBuf};

/// The route group a source file belongs to, if it is a route module.
fn group_of(rel: &str) -> Option<String> {
    let rel = rel.trim_end_matches(".rs");
    let parts: Vec<&str> = rel.split('/').collect();
    match parts.as_slice() {
        ["mcp", ..] => Some("mcp".into()),
        ["api" | "compat", "mod"] => None,
        [top @ ("api" | "compat"), name, ..] => Some(format!("{top}::{name}")),
        _ => None,
    }
}

/// The route group a module path (below `crate::`) points into, if any.
fn group_of_path(path: &str) -> Option<String> {
    let segs: Vec<&str> = path.split("::").collect();
    match segs.as_slice() {
        ["mcp", ..] => Some("mcp".into()),
        [top @ ("api" | "compat"), name, ..] => Some(format!("{top}::{name}")),
        [top @ ("api" | "compat")] => Some(format!("{top}::*")),
        _ => None,
    }
}

/// Source without `//` comments (doc links are not imports).
fn code_only(src: &str) -> String {
    src.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every path written after `crate::` (or `super::`, resolved against `parent`), with `use`
/// groups (`{a, b::{c, d}}`) expanded.
fn module_paths(src: &str, parent: &str) -> Vec<String> {
    let code = code_only(src);
    // In a `#[cfg(test)] mod tests`, `super::` is the file's own module: not scanned.
    let outside_tests = code.split("#[cfg(test)]").next().unwrap_or("");
    let mut out = Vec::new();
    for (prefix, base, text) in [
        ("crate::", String::new(), code.as_str()),
        ("super::", parent.to_owned(), outside_tests),
    ] {
        let mut rest = text;
        while let Some(i) = rest.find(prefix) {
            let before = rest[..i].chars().next_back();
            rest = &rest[i + prefix.len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let mut paths = Vec::new();
            parse_tree(rest, base.clone(), &mut paths);
            out.extend(paths);
        }
    }
    out
}

/// Parses `a::b::{c, d::e}` at the start of `s` into full paths below `base`.
fn parse_tree(s: &str, base: String, out: &mut Vec<String>) -> usize {
    let s_trim = s.trim_start();
    let mut used = s.len() - s_trim.len();
    if let Some(inner) = s_trim.strip_prefix('{') {
        used += 1;
        let mut pos = 0;
        loop {
            let rest = &inner[pos..];
            let skip = rest.len() - rest.trim_start_matches([' ', '\n', ',', '\t']).len();
            pos += skip;
            if inner[pos..].starts_with('}') || pos >= inner.len() {
                return used + pos + 1;
            }
            pos += parse_tree(&inner[pos..], base.clone(), out);
        }
    }
    let ident: String = s_trim
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '*')
        .collect();
    used += ident.len();
    let path = if base.is_empty() {
        ident.clone()
    } else if ident.is_empty() {
        base.clone()
    } else {
        format!("{base}::{ident}")
    };
    let after = &s_trim[ident.len()..];
    if let Some(next) = after.strip_prefix("::") {
        used + 2 + parse_tree(next, path, out)
    } else {
        out.push(path);
        used
    }
}

/// The route modules `src` (at `rel`, below `src/`) uses that are not its own.
fn violations(rel: &str, src: &str) -> Vec<String> {
    let Some(own) = group_of(rel) else {
        return Vec::new();
    };
    // `super::` in `api/x.rs` is `crate::api`; in `mcp/x.rs`, `crate::mcp`.
    let parent = rel.split('/').next().unwrap_or("").to_owned();
    module_paths(src, &parent)
        .into_iter()
        .filter(|p| !p.ends_with("::*") || p.matches("::").count() > 1)
        .filter_map(|p| group_of_path(&p).map(|g| (p, g)))
        .filter(|(_, g)| *g != own)
        .map(|(p, _)| format!("{rel} uses crate::{p}"))
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src dir") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn route_modules_never_import_each_other() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut route_modules = 0;
    let mut found = Vec::new();
    for f in &files {
        let rel = f
            .strip_prefix(&src)
            .expect("below src")
            .to_string_lossy()
            .replace('\\', "/");
        if group_of(&rel).is_some() {
            route_modules += 1;
        }
        let text = std::fs::read_to_string(f).expect("read source");
        found.extend(violations(&rel, &text));
    }
    assert!(
        route_modules >= 10,
        "only {route_modules} route modules found"
    );
    assert!(
        found.is_empty(),
        "route modules import each other:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_check_sees_every_way_of_naming_a_route_module() {
    let src = r#"
        use crate::auth::Caller;
        use crate::http::{ApiError, ok};
        use crate::api::knowledge::ok_list;
        use crate::{AppState, compat::{dify, quka::QukaMcp}};
        use super::spaces;
        fn f() { crate::mcp::lift_resource_names(&mut v); }
        // crate::api::hub::router is only a comment
        #[cfg(test)]
        mod tests { use super::*; use super::helper; }
    "#;
    let mut v = violations("api/tokens.rs", src);
    v.sort();
    assert_eq!(
        v,
        [
            "api/tokens.rs uses crate::api::knowledge::ok_list",
            "api/tokens.rs uses crate::api::spaces",
            "api/tokens.rs uses crate::compat::dify",
            "api/tokens.rs uses crate::compat::quka::QukaMcp",
            "api/tokens.rs uses crate::mcp::lift_resource_names",
        ]
    );
    // Within one surface, and from non-route modules, anything goes.
    assert!(
        violations(
            "mcp/hub_sse.rs",
            "use super::QuarryMcp; use crate::mcp::jsonrpc;"
        )
        .is_empty()
    );
    assert!(violations("lib.rs", "use crate::api::qmd;").is_empty());
    assert!(violations("api/ui.rs", "use crate::service::visible_spaces;").is_empty());
}
