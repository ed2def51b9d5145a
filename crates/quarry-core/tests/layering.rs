//! The house rules every crate's files keep, read from their sources (ARCHITECTURE.md,
//! "Layering"):
//!
//! - **No import cycle between the files of a crate.** A file names another by a path
//!   (`crate::a::B`, `super::B`, `self::b::C`, `child::D`, a `pub use` re-export followed to
//!   the file that defines the item); the files of a crate with these edges form no loop.
//! - **No module imports its crate root.** What `lib.rs` (or `main.rs`) defines is for the
//!   crate's users; a module that needs it gets it from a module of its own.
//! - **Route modules of the server never import each other** (`api/<name>.rs`,
//!   `compat/<name>.rs`, the `mcp/` folder as one surface): shared work goes to `service/`
//!   or `http/`.
//!
//! Code under `#[cfg(test)]` is left out: a test module sees its parent by design. The rules
//! are the workspace's; they live with `quarry-core`, the crate every other builds on, so
//! `cargo test -p quarry-core --test layering` checks them without building the rest.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

/// A module path below the crate root (`[]` is the root).
type ModPath = Vec<String>;

/// Source text with comments removed and the contents of string and character literals
/// blanked, so neither is read as code.
fn code_only(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        let rest = &src[i..];
        if rest.starts_with("//") {
            let end = rest.find('\n').unwrap_or(rest.len());
            i += end;
        } else if rest.starts_with("/*") {
            let mut depth = 0;
            let mut j = i;
            while j < b.len() {
                if src[j..].starts_with("/*") {
                    depth += 1;
                    j += 2;
                } else if src[j..].starts_with("*/") {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            out.push(' ');
            i = j;
        } else if let Some(len) = raw_string_len(rest) {
            out.push_str("\"\"");
            i += len;
        } else if b[i] == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            out.push_str("\"\"");
            i = j + 1;
        } else if b[i] == b'\'' {
            // A character literal ('a', '\n', '\u{..}') or a lifetime ('a).
            let lit = if rest[1..].starts_with('\\') {
                rest[2..].find('\'').map(|k| k + 3)
            } else {
                let mut chars = rest[1..].char_indices();
                match (chars.next(), chars.next()) {
                    (Some((_, _)), Some((k, '\''))) => Some(k + 2),
                    _ => None,
                }
            };
            match lit {
                Some(len) => {
                    out.push_str("' '");
                    i += len;
                }
                None => {
                    out.push('\'');
                    i += 1;
                }
            }
        } else {
            let c = rest.chars().next().unwrap_or(' ');
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// The length of a raw (byte) string literal at the start of `s` (`r"…"`, `br#"…"#`).
fn raw_string_len(s: &str) -> Option<usize> {
    let after_b = s.strip_prefix('b').unwrap_or(s);
    let body = after_b.strip_prefix('r')?;
    let hashes = body.len() - body.trim_start_matches('#').len();
    let open = &body[hashes..];
    if !open.starts_with('"') {
        return None;
    }
    let close = format!("\"{}", "#".repeat(hashes));
    let end = open[1..].find(&close)?;
    Some(s.len() - open.len() + 1 + end + close.len())
}

/// A token: an identifier (or number), `::`, or one other character.
fn tokens(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = code.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c.is_alphanumeric() || c == '_' {
            let mut end = i + c.len_utf8();
            while let Some(&(j, d)) = chars.peek() {
                if d.is_alphanumeric() || d == '_' {
                    end = j + d.len_utf8();
                    chars.next();
                } else {
                    break;
                }
            }
            out.push(code[i..end].to_owned());
        } else if c == ':' && chars.peek().is_some_and(|&(_, d)| d == ':') {
            chars.next();
            out.push("::".into());
        } else if !c.is_whitespace() {
            out.push(c.to_string());
        }
    }
    out
}

/// The index after the item starting at `i` (ending at its `;` or its closing brace).
fn item_end(t: &[String], mut i: usize) -> usize {
    let mut depth = 0i32;
    while i < t.len() {
        match t[i].as_str() {
            "(" | "[" => depth += 1,
            ")" | "]" => depth -= 1,
            ";" if depth == 0 => return i + 1,
            "{" if depth == 0 => {
                let mut braces = 0;
                while i < t.len() {
                    match t[i].as_str() {
                        "{" => braces += 1,
                        "}" => {
                            braces -= 1;
                            if braces == 0 {
                                return i + 1;
                            }
                        }
                        _ => {}
                    }
                    i += 1;
                }
                return i;
            }
            _ => {}
        }
        i += 1;
    }
    i
}

/// The index after an attribute `#[…]` or `#![…]` starting at `i`.
fn attribute_end(t: &[String], mut i: usize) -> usize {
    let mut depth = 0;
    while i < t.len() {
        match t[i].as_str() {
            "[" => depth += 1,
            "]" => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    i
}

/// Whether the attribute at `i` compiles its item for tests only: `#[cfg(test)]`, or
/// `#[cfg(all(test, …))]`.
fn is_cfg_test(t: &[String], i: usize) -> bool {
    let end = attribute_end(t, i);
    let inner: Vec<&str> = t[i..end].iter().map(String::as_str).collect();
    inner.starts_with(&["#", "[", "cfg", "("])
        && inner.contains(&"test")
        && !inner.iter().any(|s| *s == "not" || *s == "any")
}

/// One `use` binding: the name it brings in (`None` for a glob) and the path it names.
#[derive(Debug, Clone)]
struct Binding {
    name: Option<String>,
    path: Vec<String>,
}

/// Parses a use tree at `i` below `prefix`; returns the index after it.
fn use_tree(t: &[String], mut i: usize, prefix: Vec<String>, out: &mut Vec<Binding>) -> usize {
    if t.get(i).is_some_and(|s| s == "::") {
        i += 1;
    }
    match t.get(i).map(String::as_str) {
        Some("{") => {
            i += 1;
            while i < t.len() && t[i] != "}" {
                if t[i] == "," {
                    i += 1;
                    continue;
                }
                i = use_tree(t, i, prefix.clone(), out);
            }
            i + 1
        }
        Some("*") => {
            out.push(Binding {
                name: None,
                path: prefix,
            });
            i + 1
        }
        Some(ident) => {
            let ident = ident.to_owned();
            let mut path = prefix;
            if ident != "self" {
                path.push(ident.clone());
            }
            i += 1;
            if t.get(i).is_some_and(|s| s == "::") {
                return use_tree(t, i + 1, path, out);
            }
            let mut name = if ident == "self" {
                path.last().cloned()
            } else {
                Some(ident)
            };
            if t.get(i).is_some_and(|s| s == "as") {
                name = t.get(i + 1).cloned();
                i += 2;
            }
            // `use x as _;` brings in no name but still names its path.
            out.push(Binding { name, path });
            i
        }
        None => i,
    }
}

/// What one file says: the modules it declares, the names it defines and binds at its top
/// level, and every path it writes.
#[derive(Debug, Default)]
struct FileFacts {
    /// `mod x;` declared here (not under `#[cfg(test)]`).
    children: BTreeSet<String>,
    /// `#[cfg(test)] mod x;`: left out with everything below it.
    test_children: BTreeSet<String>,
    /// Items defined at the top level (types, functions, constants, macros).
    defined: BTreeSet<String>,
    /// `use` bindings at the top level (visible to child modules through `super::`).
    bindings: Vec<Binding>,
    /// Every path written (use trees in full and `crate::`/`super::`/`self::`/child paths),
    /// with the inline modules (`mod x86 { … }`) it is written in.
    paths: Vec<(Vec<String>, Vec<String>)>,
}

fn facts(src: &str) -> FileFacts {
    let t = tokens(&code_only(src));
    let mut f = FileFacts::default();
    // Drop the items under `#[cfg(test)]`, noting test modules.
    let mut kept: Vec<String> = Vec::with_capacity(t.len());
    let mut i = 0;
    while i < t.len() {
        if t[i] == "#" && is_cfg_test(&t, i) {
            let mut j = attribute_end(&t, i);
            while t.get(j).is_some_and(|s| s == "#") {
                j = attribute_end(&t, j);
            }
            let end = item_end(&t, j);
            if let Some(k) = t[j..end].iter().position(|s| s == "mod")
                && let Some(name) = t.get(j + k + 1)
            {
                f.test_children.insert(name.clone());
            }
            i = end;
            continue;
        }
        kept.push(t[i].clone());
        i += 1;
    }
    let t = kept;
    let mut depth = 0i32;
    // The inline modules open here, with the depth of each one's body.
    let mut inline: Vec<(String, i32)> = Vec::new();
    let mut i = 0;
    while i < t.len() {
        let tok = t[i].as_str();
        match tok {
            "{" => {
                depth += 1;
                if i >= 2 && t[i - 2] == "mod" && is_ident(&t[i - 1]) {
                    inline.push((t[i - 1].clone(), depth));
                }
            }
            "}" => {
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
                depth -= 1;
            }
            "#" => {
                i = attribute_end(&t, i);
                continue;
            }
            "use" if t.get(i + 1).is_some_and(|s| s != "(" && s != "!") => {
                let mut found = Vec::new();
                let end = use_tree(&t, i + 1, Vec::new(), &mut found);
                let within = names_of(&inline);
                f.paths.extend(found.iter().map(|b| {
                    let mut path = b.path.clone();
                    if b.name.is_none() {
                        path.push("*".into());
                    }
                    (within.clone(), path)
                }));
                if depth == 0 {
                    f.bindings.extend(found);
                }
                i = end;
                continue;
            }
            "mod" if depth == 0 => {
                if let (Some(name), Some(next)) = (t.get(i + 1), t.get(i + 2)) {
                    if next == ";" {
                        f.children.insert(name.clone());
                    } else {
                        f.defined.insert(name.clone());
                    }
                }
            }
            "struct" | "enum" | "union" | "trait" | "type" | "fn" | "static" | "const"
                if depth == 0 =>
            {
                let mut k = i + 1;
                while t
                    .get(k)
                    .is_some_and(|s| s == "mut" || s == "fn" || s == "unsafe")
                {
                    k += 1;
                }
                if let Some(name) = t.get(k).filter(|s| is_ident(s)) {
                    f.defined.insert(name.clone());
                }
            }
            "macro_rules" if depth == 0 => {
                if let Some(name) = t.get(i + 2) {
                    f.defined.insert(name.clone());
                }
            }
            _ => {}
        }
        // A path written in code: `crate::…`, `super::…`, `self::…` or `child::…` (not a
        // macro body's `$crate::…`, which names what the macro's caller sees).
        let starts_path = i == 0 || (t[i - 1] != "::" && t[i - 1] != "$");
        if starts_path && t.get(i + 1).is_some_and(|s| s == "::") && is_ident(tok) {
            let mut path = vec![tok.to_owned()];
            let mut k = i + 1;
            while t.get(k).is_some_and(|s| s == "::") && t.get(k + 1).is_some_and(|s| is_ident(s)) {
                path.push(t[k + 1].clone());
                k += 2;
            }
            f.paths.push((names_of(&inline), path));
        }
        i += 1;
    }
    f
}

/// The names of the inline modules a token is in, outermost first.
fn names_of(inline: &[(String, i32)]) -> Vec<String> {
    inline.iter().map(|(name, _)| name.clone()).collect()
}

fn is_ident(s: &str) -> bool {
    s.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_alphanumeric() || c == '_')
}

/// The files of one crate as modules, with what each says.
struct Crate {
    name: String,
    /// Module path → (file below `src/`, facts).
    modules: BTreeMap<ModPath, (String, FileFacts)>,
}

/// What a path names, seen from the module that wrote it.
#[derive(Debug, PartialEq)]
enum Target {
    /// An item defined in (or a name left unresolved in) this module's file.
    Item(ModPath),
    /// A module as a whole (`use crate::a;`, `use super::*;`).
    Module(ModPath),
}

impl Crate {
    fn read(dir: &Path) -> Crate {
        let src = dir.join("src");
        let root_file = ["lib.rs", "main.rs"]
            .into_iter()
            .find(|f| src.join(f).exists())
            .unwrap_or("lib.rs");
        let mut modules = BTreeMap::new();
        let mut queue: Vec<(ModPath, PathBuf)> = vec![(Vec::new(), src.join(root_file))];
        while let Some((module, file)) = queue.pop() {
            let Ok(text) = std::fs::read_to_string(&file) else {
                continue;
            };
            let f = facts(&text);
            // A file's children live in a folder named after it (`a.rs` → `a/b.rs`), or
            // beside it for `lib.rs`, `main.rs` and `mod.rs`.
            let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or("");
            let folder = match file.parent() {
                Some(p) if module.is_empty() || stem == "mod" => p.to_path_buf(),
                Some(p) => p.join(stem),
                None => continue,
            };
            for child in &f.children {
                let mut path = module.clone();
                path.push(child.clone());
                let flat = folder.join(format!("{child}.rs"));
                let nested = folder.join(child).join("mod.rs");
                queue.push((path, if flat.exists() { flat } else { nested }));
            }
            let rel = file
                .strip_prefix(&src)
                .map(|p| p.to_string_lossy().replace('\\', "/"))
                .unwrap_or_default();
            modules.insert(module, (rel, f));
        }
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        Crate { name, modules }
    }

    fn file(&self, module: &ModPath) -> &str {
        self.modules.get(module).map_or("?", |(f, _)| f.as_str())
    }

    /// Where `path`, written in `from`, leads; `None` for what lies outside the crate.
    fn resolve(&self, from: &ModPath, path: &[String], depth: usize) -> Option<Target> {
        let (first, rest) = path.split_first()?;
        let at: ModPath = match first.as_str() {
            "crate" => Vec::new(),
            "self" => from.clone(),
            "super" => {
                let mut m = from.clone();
                m.pop();
                let mut rest = rest;
                while rest.first().is_some_and(|s| s == "super") {
                    m.pop();
                    rest = &rest[1..];
                }
                return self.walk(m, rest, depth);
            }
            // A child module named first.
            child if self.child_of(from, child) => {
                let mut m = from.clone();
                m.push(child.to_owned());
                m
            }
            _ => return None,
        };
        self.walk(at, rest, depth)
    }

    fn child_of(&self, module: &ModPath, name: &str) -> bool {
        self.modules
            .get(module)
            .is_some_and(|(_, f)| f.children.contains(name))
    }

    /// Follows `segs` from module `at`.
    fn walk(&self, mut at: ModPath, segs: &[String], depth: usize) -> Option<Target> {
        for (k, seg) in segs.iter().enumerate() {
            if seg == "*" {
                return Some(Target::Module(at));
            }
            if self.child_of(&at, seg) {
                at.push(seg.clone());
                continue;
            }
            let (_, f) = self.modules.get(&at)?;
            if f.defined.contains(seg) || depth > 8 {
                return Some(Target::Item(at));
            }
            // A name `at` brings in by `use` (a re-export, or a name its children see).
            if let Some(b) = f.bindings.iter().find(|b| b.name.as_deref() == Some(seg)) {
                return match self.resolve(&at, &b.path, depth + 1) {
                    Some(Target::Module(m)) => self.walk(m, &segs[k + 1..], depth + 1),
                    // A name from outside the crate, re-exported here.
                    None => None,
                    item => item,
                };
            }
            for b in f.bindings.iter().filter(|b| b.name.is_none()) {
                if let Some(Target::Module(m)) = self.resolve(&at, &b.path, depth + 1)
                    && let Some(found) = self.walk(m, &segs[k..k + 1], depth + 1)
                {
                    return Some(found);
                }
            }
            // Not found (made by a macro, say): counted as this module's.
            return Some(Target::Item(at));
        }
        Some(Target::Module(at))
    }

    /// Every file-to-file edge with the path that makes it, and every import of the root.
    fn edges(&self) -> (BTreeMap<(ModPath, ModPath), String>, Vec<String>) {
        let mut edges = BTreeMap::new();
        let mut root_imports = Vec::new();
        for (module, (file, f)) in &self.modules {
            for (within, path) in &f.paths {
                let mut from = module.clone();
                from.extend(within.iter().cloned());
                let target = match self.resolve(&from, path, 0) {
                    Some(Target::Item(m)) => {
                        if m.is_empty() && !module.is_empty() {
                            root_imports.push(format!(
                                "{file} uses {} (defined in the crate root)",
                                path.join("::")
                            ));
                        }
                        m
                    }
                    Some(Target::Module(m)) => {
                        if m.is_empty()
                            && !module.is_empty()
                            && path.last().is_some_and(|s| s == "*")
                        {
                            root_imports.push(format!(
                                "{file} uses {} (all of the crate root)",
                                path.join("::")
                            ));
                        }
                        m
                    }
                    None => continue,
                };
                if &target != module && self.modules.contains_key(&target) {
                    edges
                        .entry((module.clone(), target))
                        .or_insert_with(|| path.join("::"));
                }
            }
        }
        root_imports.sort();
        root_imports.dedup();
        (edges, root_imports)
    }

    /// The import cycles between files: each as its files and the paths that close it.
    fn cycles(&self) -> Vec<String> {
        let (edges, _) = self.edges();
        let mut graph: HashMap<&ModPath, Vec<&ModPath>> = HashMap::new();
        for (a, b) in edges.keys() {
            if !a.is_empty() {
                graph.entry(a).or_default().push(b);
            }
        }
        let mut out = Vec::new();
        for component in strongly_connected(&graph) {
            if component.len() < 2 {
                continue;
            }
            let inside: BTreeSet<&ModPath> = component.iter().copied().collect();
            let mut lines: Vec<String> = edges
                .iter()
                .filter(|((a, b), _)| inside.contains(a) && inside.contains(b))
                .map(|((a, b), p)| format!("    {} -> {} ({p})", self.file(a), self.file(b)))
                .collect();
            lines.sort();
            let mut files: Vec<&str> = component.iter().map(|m| self.file(m)).collect();
            files.sort_unstable();
            out.push(format!(
                "{}: {} files in a loop: {}\n{}",
                self.name,
                files.len(),
                files.join(", "),
                lines.join("\n")
            ));
        }
        out
    }
}

/// Tarjan's strongly connected components.
fn strongly_connected<'a>(graph: &HashMap<&'a ModPath, Vec<&'a ModPath>>) -> Vec<Vec<&'a ModPath>> {
    struct State<'a> {
        index: HashMap<&'a ModPath, usize>,
        low: HashMap<&'a ModPath, usize>,
        stack: Vec<&'a ModPath>,
        on_stack: BTreeSet<&'a ModPath>,
        out: Vec<Vec<&'a ModPath>>,
    }
    fn visit<'a>(v: &'a ModPath, g: &HashMap<&'a ModPath, Vec<&'a ModPath>>, s: &mut State<'a>) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        for &w in g.get(v).map(Vec::as_slice).unwrap_or(&[]) {
            if !s.index.contains_key(w) {
                visit(w, g, s);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w);
                if w == v {
                    break;
                }
            }
            s.out.push(component);
        }
    }
    let mut s = State {
        index: HashMap::new(),
        low: HashMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    let mut nodes: Vec<&ModPath> = graph.keys().copied().collect();
    nodes.sort();
    for v in nodes {
        if !s.index.contains_key(v) {
            visit(v, graph, &mut s);
        }
    }
    s.out
}

/// Every crate of the workspace.
fn workspace_crates() -> Vec<Crate> {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&crates)
        .expect("read crates/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("Cargo.toml").exists())
        .collect();
    dirs.sort();
    dirs.iter().map(|d| Crate::read(d)).collect()
}

#[test]
fn no_crate_has_an_import_cycle_between_its_files() {
    let crates = workspace_crates();
    assert!(crates.len() >= 20, "only {} crates found", crates.len());
    let files: usize = crates.iter().map(|c| c.modules.len()).sum();
    assert!(files >= 250, "only {files} files read");
    let found: Vec<String> = crates.iter().flat_map(Crate::cycles).collect();
    assert!(
        found.is_empty(),
        "{} import cycles between files (move what both sides need into a file below both):\n{}",
        found.len(),
        found.join("\n")
    );
}

#[test]
fn no_module_imports_its_crate_root() {
    let found: Vec<String> = workspace_crates()
        .iter()
        .flat_map(|c| {
            c.edges()
                .1
                .into_iter()
                .map(move |l| format!("{}: {l}", c.name))
        })
        .collect();
    assert!(
        found.is_empty(),
        "{} imports of a crate root (give what they use a module of its own):\n{}",
        found.len(),
        found.join("\n")
    );
}

/// The route group a server file belongs to, if it is a route module.
fn route_group(rel: &str) -> Option<String> {
    let rel = rel.trim_end_matches(".rs");
    let parts: Vec<&str> = rel.split('/').collect();
    match parts.as_slice() {
        ["mcp", ..] => Some("mcp".into()),
        ["api" | "compat", "mod"] => None,
        [top @ ("api" | "compat"), name, ..] => Some(format!("{top}::{name}")),
        _ => None,
    }
}

#[test]
fn route_modules_never_import_each_other() {
    let server = Crate::read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../quarry-server"));
    let routes = server
        .modules
        .values()
        .filter(|(f, _)| route_group(f).is_some())
        .count();
    assert!(routes >= 10, "only {routes} route modules found");
    let (edges, _) = server.edges();
    let found: Vec<String> = edges
        .iter()
        .filter_map(|((a, b), path)| {
            let (fa, fb) = (server.file(a), server.file(b));
            let (ga, gb) = (route_group(fa)?, route_group(fb)?);
            (ga != gb).then(|| format!("{fa} uses {path} ({fb})"))
        })
        .collect();
    assert!(
        found.is_empty(),
        "route modules import each other:\n{}",
        found.join("\n")
    );
}

/// A crate made of `files` (path below `src/` → text), read as the tests read a real one.
fn crate_of(files: &[(&str, &str)]) -> Crate {
    let dir = tempfile::tempdir().expect("temp dir");
    for (rel, text) in files {
        let path = dir.path().join("demo/src").join(rel);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }
    Crate::read(&dir.path().join("demo"))
}

#[test]
fn the_checks_see_cycles_through_re_exports_and_skip_tests_comments_and_strings() {
    let c = crate_of(&[
        (
            "lib.rs",
            "mod a;\nmod b;\nmod c;\npub mod d;\n#[cfg(test)]\nmod tests;\npub use b::Bee;\n\
             pub struct Root;\n",
        ),
        // a -> b through the root's re-export, b -> a through `super::`.
        ("a.rs", "use crate::Bee;\npub fn ay() {}\n"),
        ("b.rs", "pub struct Bee;\nfn f() { super::a::ay(); }\n"),
        // c names the root's own item; in a comment and a string only, d names nothing.
        (
            "c.rs",
            "use crate::{Root, d::{self, Dee}};\nuse super::*;\n",
        ),
        (
            "d/mod.rs",
            "mod inner;\npub use inner::Dee;\n// crate::c::x\nconst S: &str = \"crate::c::x\";\n\
             #[cfg(test)]\nmod tests { use crate::c; }\n#[cfg(all(test, unix))]\nmod more { use crate::c; }\n",
        ),
        (
            "d/inner.rs",
            "pub struct Dee; fn g() -> char { '\"' }\nmod x86 { use super::g; }\n\
             macro_rules! m { () => { $crate::Root }; }\n",
        ),
        ("tests.rs", "use super::*; use crate::a::ay;\n"),
    ]);
    let cycles = c.cycles();
    assert_eq!(cycles.len(), 1, "{cycles:?}");
    assert!(
        cycles[0].contains("2 files in a loop: a.rs, b.rs"),
        "{}",
        cycles[0]
    );
    let (edges, root) = c.edges();
    assert_eq!(
        root,
        [
            "c.rs uses crate::Root (defined in the crate root)",
            "c.rs uses super::* (all of the crate root)",
        ]
    );
    let named: BTreeSet<(String, String)> = edges
        .keys()
        .map(|(a, b)| (c.file(a).to_owned(), c.file(b).to_owned()))
        .collect();
    assert!(
        named.contains(&("c.rs".into(), "d/inner.rs".into())),
        "{named:?}"
    );
    assert!(
        named.contains(&("d/mod.rs".into(), "d/inner.rs".into())),
        "{named:?}"
    );
    assert!(
        !named
            .iter()
            .any(|(a, _)| a == "d/inner.rs" || a == "tests.rs"),
        "{named:?}"
    );
    assert!(
        !named.contains(&("d/mod.rs".into(), "c.rs".into())),
        "{named:?}"
    );
}

/// Every file under `dir`, as a path with `/` separators.
fn files_below(dir: &Path, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path
                .file_name()
                .is_some_and(|n| n != "target" && n != "node_modules")
            {
                files_below(&path, out);
            }
        } else {
            out.push(path.to_string_lossy().replace('\\', "/"));
        }
    }
}

/// ARCHITECTURE.md's mechanical claims hold: every Rust file it names (`state.rs`,
/// `kb/sources.rs`, `crates/quarry-core/tests/layering.rs`) exists, and it names the last
/// SQLite migration.
#[test]
fn the_map_names_files_that_exist_and_the_last_migration() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let map = std::fs::read_to_string(root.join("ARCHITECTURE.md")).expect("read ARCHITECTURE.md");
    let mut files = Vec::new();
    files_below(&root.join("crates"), &mut files);
    assert!(
        files.len() > 300,
        "only {} files below crates/",
        files.len()
    );
    let mut missing = BTreeSet::new();
    let mut named = 0;
    for (i, quoted) in map.split('`').enumerate() {
        // Odd pieces are inside backticks.
        let name = quoted.split("::").next().unwrap_or("");
        if i % 2 == 0
            || !name.ends_with(".rs")
            || !name
                .chars()
                .all(|c| c.is_alphanumeric() || "_-./".contains(c))
        {
            continue;
        }
        named += 1;
        let tail = format!("/{}", name.trim_start_matches("./"));
        if !files.iter().any(|f| f.ends_with(&tail)) {
            missing.insert(name.to_owned());
        }
    }
    assert!(named >= 50, "only {named} files named");
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names files that do not exist: {missing:?}"
    );
    let last = files
        .iter()
        .filter(|f| f.contains("/quarry-store-sqlite/migrations/v") && f.ends_with(".sql"))
        .filter_map(|f| f.rsplit('/').next())
        .max()
        .expect("SQLite migrations")
        .to_owned();
    assert!(
        map.contains(&format!("`{last}`")),
        "ARCHITECTURE.md does not name the last migration, {last}"
    );
}
