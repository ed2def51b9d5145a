//! `quarry ls`, `quarry find` and `quarry grep`: the read-only path view of what this
//! caller may read (docs/wiki.md, "Browse like files"); `quarry get` (alias `cat`) reads a
//! document's lines.

use std::io::Write;

use anyhow::Result;
use clap::Args;
use quarry_engine::{BrowseEntry, Engine, GrepRequest};

use crate::output::print_json;

/// `quarry ls [PATH]`.
#[derive(Debug, Args)]
pub(crate) struct LsArgs {
    /// A collection or knowledge base and a folder in it (`wiki/pages`); none: every
    /// collection and knowledge base.
    #[arg(default_value = "")]
    pub path: String,
}

/// `quarry find GLOB`.
#[derive(Debug, Args)]
pub(crate) struct FindArgs {
    /// A glob over display paths (`wiki/pages/*.md`, `**/*.pdf`).
    pub pattern: String,
    /// Show at most this many (0: 200; at most 2,000).
    #[arg(short = 'n', long, default_value_t = 0)]
    pub limit: usize,
}

/// `quarry grep PATTERN [PATH]`.
#[derive(Debug, Args)]
pub(crate) struct GrepArgs {
    /// A regular expression, matched line by line.
    pub pattern: String,
    /// Only documents under this path, or matching this glob.
    pub path: Option<String>,
    /// Match case-insensitively.
    #[arg(short = 'i', long)]
    pub ignore_case: bool,
    /// Lines of context around each match (at most 3).
    #[arg(short = 'C', long, default_value_t = 0)]
    pub context: usize,
    /// Show at most this many matches (0: 50; at most 500).
    #[arg(short = 'n', long, default_value_t = 0)]
    pub limit: usize,
}

fn entry_line(e: &BrowseEntry) -> String {
    let what = match (e.documents, e.bytes) {
        (Some(n), _) => format!("{n} documents"),
        (None, Some(b)) => format!("{b} bytes"),
        _ => String::new(),
    };
    let mut line = format!("{:<50} {:<10} {what}", e.path, e.kind);
    if let (Some(docid), Some(title)) = (&e.docid, &e.title) {
        line.push_str(&format!("  {docid}  {title}"));
    }
    quarry_core::terminal_safe(line.trim_end()).into_owned()
}

pub(crate) fn ls(engine: &Engine, args: &LsArgs, json: bool) -> Result<()> {
    let entries = engine.ls(&args.path)?;
    if json {
        return print_json(&entries);
    }
    let mut out = std::io::stdout().lock();
    for e in &entries {
        writeln!(out, "{}", entry_line(e))?;
    }
    Ok(())
}

pub(crate) fn find(engine: &Engine, args: &FindArgs, json: bool) -> Result<()> {
    let found = engine.find(&args.pattern, args.limit)?;
    if json {
        return print_json(&found);
    }
    let mut out = std::io::stdout().lock();
    for e in &found.entries {
        writeln!(out, "{}", entry_line(e))?;
    }
    if found.total > found.entries.len() {
        writeln!(
            out,
            "({} of {} shown: raise --limit, or narrow the pattern)",
            found.entries.len(),
            found.total
        )?;
    }
    Ok(())
}

pub(crate) fn grep(engine: &Engine, args: &GrepArgs, json: bool) -> Result<()> {
    let found = engine.grep(&GrepRequest {
        pattern: args.pattern.clone(),
        path: args.path.clone(),
        ignore_case: args.ignore_case,
        limit: args.limit,
        context: args.context,
    })?;
    if json {
        return print_json(&found);
    }
    let mut out = std::io::stdout().lock();
    let safe = quarry_core::terminal_safe;
    for m in &found.matches {
        let first = m.line - m.before.len();
        for (i, l) in m.before.iter().enumerate() {
            writeln!(out, "{}-{}-{}", safe(&m.path), first + i, safe(l))?;
        }
        writeln!(out, "{}:{}:{}", safe(&m.path), m.line, safe(&m.text))?;
        for (i, l) in m.after.iter().enumerate() {
            writeln!(out, "{}-{}-{}", safe(&m.path), m.line + 1 + i, safe(l))?;
        }
    }
    if found.truncated {
        writeln!(
            out,
            "(stopped at {} matches: raise --limit, or narrow the path)",
            found.matches.len()
        )?;
    }
    if found.matches.is_empty() {
        anyhow::bail!("no line matches in {} documents", found.documents_searched);
    }
    Ok(())
}
