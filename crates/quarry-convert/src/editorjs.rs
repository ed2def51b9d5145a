//! EditorJS JSON (the "blocks" content QukaAI's `create_knowledge` accepts) → Markdown.
//!
//! Handles the standard EditorJS tools (paragraph, header, list in both the old and the
//! nested format, checklist, quote, code, delimiter, table, image, embed, linkTool, raw,
//! warning, attaches). Inline HTML inside block text goes through a small scanner: bold,
//! italic, code and links become Markdown, other tags keep only their text, and entities are
//! decoded. Malformed input is reported as a sentence a person understands; nothing panics.

use serde_json::{Map, Value};

use crate::util::push_table_row;

/// Lists nested deeper than this are refused.
const MAX_LIST_DEPTH: usize = 16;
/// Inline tags open at once; tags beyond this keep their text but lose their formatting.
const MAX_INLINE_MARKS: usize = 64;

/// Why EditorJS content was refused, as a sentence a person understands (it names the block
/// at fault, counting from 1).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EditorJsError {
    /// The content is not JSON (the parser's reason).
    #[error("content_type is 'blocks' but content is not JSON ({0})")]
    NotJson(String),
    /// JSON, but neither an object with a `blocks` array nor an array of blocks.
    #[error(
        "content_type is 'blocks' but content is not EditorJS JSON: expected an object with a \"blocks\" array"
    )]
    NotEditorJs,
    /// The document has no blocks at all.
    #[error("the EditorJS document has no blocks")]
    NoBlocks,
    /// Block `n` is not a JSON object.
    #[error("block {0} is not an object")]
    NotAnObject(usize),
    /// Block `n` has no `type`.
    #[error("block {0} has no \"type\"")]
    NoType(usize),
    /// Block `n` of type `kind` lacks what it needs or holds what cannot be converted.
    #[error("block {n} (type {kind:?}) {problem}")]
    Block {
        /// The block's position, from 1.
        n: usize,
        /// Its `type`.
        kind: String,
        /// What is wrong, e.g. `has no text`.
        problem: String,
    },
    /// Every block is empty.
    #[error("the EditorJS document has no content: every block is empty")]
    NoContent,
}

/// Converts an EditorJS document (`{"time":…, "blocks":[…], "version":…}`) or a bare array
/// of blocks to Markdown: blocks separated by one blank line, ending with a single newline.
///
/// Unknown block types keep their `data.text` as a paragraph and are skipped otherwise;
/// empty blocks are skipped. A known block missing its main field (a header without text, an
/// image without a URL) is an error naming the block.
pub fn editorjs_to_markdown(json: &str) -> Result<String, EditorJsError> {
    let doc: Value =
        serde_json::from_str(json).map_err(|e| EditorJsError::NotJson(e.to_string()))?;
    let blocks = match &doc {
        Value::Object(o) => match o.get("blocks") {
            Some(Value::Array(blocks)) => blocks,
            _ => return Err(EditorJsError::NotEditorJs),
        },
        Value::Array(blocks) => blocks,
        _ => return Err(EditorJsError::NotEditorJs),
    };
    if blocks.is_empty() {
        return Err(EditorJsError::NoBlocks);
    }
    let empty = Map::new();
    let mut parts = Vec::new();
    for (i, block) in blocks.iter().enumerate() {
        let n = i + 1;
        let Value::Object(obj) = block else {
            return Err(EditorJsError::NotAnObject(n));
        };
        let kind = match obj.get("type") {
            Some(Value::String(t)) if !t.trim().is_empty() => t.trim(),
            _ => return Err(EditorJsError::NoType(n)),
        };
        let data = match obj.get("data") {
            Some(Value::Object(d)) => d,
            _ => &empty,
        };
        if let Some(md) = convert_block(&Block { n, kind, data })? {
            parts.push(md);
        }
    }
    if parts.is_empty() {
        return Err(EditorJsError::NoContent);
    }
    let mut out = parts.join("\n\n");
    out.push('\n');
    Ok(out)
}

/// One block being converted, for error messages.
struct Block<'a> {
    n: usize,
    kind: &'a str,
    data: &'a Map<String, Value>,
}

impl Block<'_> {
    fn err(&self, what: &str) -> EditorJsError {
        EditorJsError::Block {
            n: self.n,
            kind: self.kind.to_owned(),
            problem: what.to_owned(),
        }
    }

    /// `data.<key>` as a string, or an error "has no <what>".
    fn required(&self, key: &str, what: &str) -> Result<&str, EditorJsError> {
        str_at(self.data, &[key]).ok_or_else(|| self.err(&format!("has no {what}")))
    }

    fn optional(&self, key: &str) -> Option<&str> {
        str_at(self.data, &[key])
    }
}

/// The string at `path` (object keys) under `map`.
fn str_at<'a>(map: &'a Map<String, Value>, path: &[&str]) -> Option<&'a str> {
    let (last, parents) = path.split_last()?;
    let mut cur = map;
    for key in parents {
        cur = cur.get(*key)?.as_object()?;
    }
    cur.get(*last)?.as_str()
}

/// The Markdown of one block; `None` for an empty or silently skipped block.
fn convert_block(b: &Block) -> Result<Option<String>, EditorJsError> {
    let md = match b.kind.to_ascii_lowercase().as_str() {
        "paragraph" => inline(b.required("text", "text")?),
        "header" | "heading" => header(b)?,
        "list" | "nestedlist" => list(b)?,
        "checklist" => checklist(b)?,
        "quote" => quote(b)?,
        "code" => code_block(b.required("code", "code")?, b.optional("language")),
        "delimiter" => "---".to_owned(),
        "table" => table(b)?,
        "image" | "simpleimage" => image(b)?,
        "embed" => {
            let url = b
                .optional("source")
                .filter(|s| !s.trim().is_empty())
                .or_else(|| b.optional("embed"))
                .filter(|s| !s.trim().is_empty())
                .ok_or_else(|| b.err("has no URL"))?;
            link(b.optional("caption"), url)
        }
        "linktool" => {
            let url = b.required("link", "link")?;
            if url.trim().is_empty() {
                return Err(b.err("has no link"));
            }
            link(str_at(b.data, &["meta", "title"]), url)
        }
        "attaches" => {
            let url = str_at(b.data, &["file", "url"])
                .filter(|s| !s.trim().is_empty())
                .ok_or_else(|| b.err("has no file URL"))?;
            let title = b
                .optional("title")
                .filter(|t| !t.trim().is_empty())
                .or_else(|| str_at(b.data, &["file", "name"]));
            link(title, url)
        }
        "raw" => code_block(b.required("html", "HTML")?, Some("html")),
        "warning" => warning(b)?,
        _ => b.optional("text").map(inline).unwrap_or_default(),
    };
    Ok((!md.is_empty()).then_some(md))
}

fn header(b: &Block) -> Result<String, EditorJsError> {
    let text = one_line(&inline(b.required("text", "text")?));
    if text.is_empty() {
        return Ok(String::new());
    }
    let level = match b.data.get("level") {
        Some(Value::Number(n)) => n
            .as_i64()
            .unwrap_or_else(|| n.as_f64().unwrap_or(2.0) as i64),
        Some(Value::String(s)) => s.trim().parse::<i64>().unwrap_or(2),
        _ => 2,
    }
    .clamp(1, 6);
    Ok(format!("{} {text}", "#".repeat(level as usize)))
}

#[derive(Clone, Copy)]
enum ListStyle {
    Unordered,
    Ordered,
    Checklist,
}

fn list(b: &Block) -> Result<String, EditorJsError> {
    let style = match b.optional("style").map(str::to_ascii_lowercase).as_deref() {
        Some("ordered") => ListStyle::Ordered,
        Some("checklist") => ListStyle::Checklist,
        _ => ListStyle::Unordered,
    };
    let Some(Value::Array(items)) = b.data.get("items") else {
        return Err(b.err("has no items"));
    };
    let start = match b.data.get("meta").and_then(|m| m.get("start")) {
        Some(Value::Number(n)) => n.as_u64().unwrap_or(1),
        Some(Value::String(s)) => s.trim().parse().unwrap_or(1),
        _ => 1,
    };
    let mut lines = Vec::new();
    list_items(b, items, style, 0, 1, start, &mut lines)?;
    Ok(lines.join("\n"))
}

/// Renders `items` (strings, or `{content, items, meta:{checked}}` objects) at `indent`.
fn list_items(
    b: &Block,
    items: &[Value],
    style: ListStyle,
    indent: usize,
    depth: usize,
    start: u64,
    out: &mut Vec<String>,
) -> Result<(), EditorJsError> {
    if depth > MAX_LIST_DEPTH {
        return Err(b.err(&format!("nests lists deeper than {MAX_LIST_DEPTH} levels")));
    }
    let mut number = start;
    for (j, item) in items.iter().enumerate() {
        let owned;
        let (content, checked, children): (&str, bool, &[Value]) = match item {
            Value::String(s) => (s, false, &[]),
            Value::Object(o) => {
                let content = ["content", "text"]
                    .iter()
                    .find_map(|k| o.get(*k).and_then(Value::as_str))
                    .unwrap_or("");
                let checked = o
                    .get("meta")
                    .and_then(|m| m.get("checked"))
                    .or_else(|| o.get("checked"))
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                let children = match o.get("items") {
                    Some(Value::Array(c)) => c.as_slice(),
                    _ => &[],
                };
                (content, checked, children)
            }
            Value::Number(n) => {
                owned = n.to_string();
                (owned.as_str(), false, &[])
            }
            Value::Null => ("", false, &[]),
            _ => {
                return Err(b.err(&format!(
                    "has a list item ({}) that is neither text nor an object",
                    j + 1
                )));
            }
        };
        let text = inline(content);
        if text.is_empty() && children.is_empty() {
            continue;
        }
        let (marker, width) = match style {
            ListStyle::Unordered => ("- ".to_owned(), 2),
            ListStyle::Checklist => (if checked { "- [x] " } else { "- [ ] " }.to_owned(), 2),
            ListStyle::Ordered => {
                let m = format!("{number}. ");
                let w = m.len();
                (m, w)
            }
        };
        number = number.saturating_add(1);
        push_item(out, indent, &marker, width, &text);
        if !children.is_empty() {
            list_items(b, children, style, indent + width, depth + 1, 1, out)?;
        }
    }
    Ok(())
}

/// One list item: the marker on the first line, continuation lines indented under the text.
fn push_item(out: &mut Vec<String>, indent: usize, marker: &str, width: usize, text: &str) {
    let pad = " ".repeat(indent);
    let mut lines = text.split('\n');
    match lines.next() {
        Some(first) if !first.is_empty() => out.push(format!("{pad}{marker}{first}")),
        _ => out.push(format!("{pad}{}", marker.trim_end())),
    }
    let cont = " ".repeat(indent + width);
    for line in lines {
        out.push(if line.is_empty() {
            String::new()
        } else {
            format!("{cont}{line}")
        });
    }
}

fn checklist(b: &Block) -> Result<String, EditorJsError> {
    let Some(Value::Array(items)) = b.data.get("items") else {
        return Err(b.err("has no items"));
    };
    let mut lines = Vec::new();
    for item in items {
        let (text, checked) = match item {
            Value::Object(o) => (
                o.get("text").and_then(Value::as_str).unwrap_or(""),
                o.get("checked").and_then(Value::as_bool).unwrap_or(false),
            ),
            Value::String(s) => (s.as_str(), false),
            _ => ("", false),
        };
        let text = inline(text);
        if text.is_empty() {
            continue;
        }
        let marker = if checked { "- [x] " } else { "- [ ] " };
        push_item(&mut lines, 0, marker, 2, &text);
    }
    Ok(lines.join("\n"))
}

fn quote(b: &Block) -> Result<String, EditorJsError> {
    let (text, caption) = (b.optional("text"), b.optional("caption"));
    if text.is_none() && caption.is_none() {
        return Err(b.err("has no text"));
    }
    let text = inline(text.unwrap_or(""));
    let caption = inline(caption.unwrap_or(""));
    let mut out = quoted(&text);
    if !caption.is_empty() {
        if !out.is_empty() {
            out.push_str("\n>\n");
        }
        out.push_str(&quoted(&format!("— {caption}")));
    }
    Ok(out)
}

fn warning(b: &Block) -> Result<String, EditorJsError> {
    let (title, message) = (b.optional("title"), b.optional("message"));
    if title.is_none() && message.is_none() {
        return Err(b.err("has no text"));
    }
    let title = one_line(&inline(title.unwrap_or("")));
    let message = inline(message.unwrap_or(""));
    let body = match (title.is_empty(), message.is_empty()) {
        (true, true) => return Ok(String::new()),
        (false, true) => format!("**{title}**"),
        (true, false) => message,
        (false, false) => format!("**{title}** {message}"),
    };
    Ok(quoted(&body))
}

/// `> ` before every line (`>` alone for blank ones).
fn quoted(text: &str) -> String {
    if text.is_empty() {
        return String::new();
    }
    text.split('\n')
        .map(|l| {
            if l.is_empty() {
                ">".to_owned()
            } else {
                format!("> {l}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A fenced block (raw text, not HTML) with a fence longer than any backtick run inside.
fn code_block(code: &str, language: Option<&str>) -> String {
    let code = code.replace("\r\n", "\n").replace('\r', "\n");
    let code = code.trim_end_matches([' ', '\t', '\n']);
    let code = code.trim_start_matches('\n');
    if code.trim().is_empty() {
        return String::new();
    }
    let fence = fence_for(code, 3);
    let lang = language
        .map(str::trim)
        .filter(|l| !l.chars().any(|c| c.is_whitespace() || c == '`'))
        .unwrap_or("");
    format!("{fence}{lang}\n{code}\n{fence}")
}

/// A run of backticks longer than any in `s`, at least `min` long.
fn fence_for(s: &str, min: usize) -> String {
    let (mut longest, mut run) = (0, 0);
    for c in s.chars() {
        if c == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    "`".repeat((longest + 1).max(min))
}

fn table(b: &Block) -> Result<String, EditorJsError> {
    let Some(Value::Array(content)) = b.data.get("content") else {
        return Err(b.err("has no table content"));
    };
    let mut rows: Vec<Vec<String>> = Vec::with_capacity(content.len());
    for (r, row) in content.iter().enumerate() {
        let Value::Array(cells) = row else {
            return Err(b.err(&format!(
                "has a row ({}) that is not a list of cells",
                r + 1
            )));
        };
        let mut out = Vec::with_capacity(cells.len());
        for (c, cell) in cells.iter().enumerate() {
            out.push(match cell {
                Value::String(s) => inline(s),
                Value::Number(n) => n.to_string(),
                Value::Bool(v) => v.to_string(),
                Value::Null => String::new(),
                _ => {
                    return Err(b.err(&format!(
                        "has a cell (row {}, column {}) that is not text",
                        r + 1,
                        c + 1
                    )));
                }
            });
        }
        rows.push(out);
    }
    let width = rows.iter().map(Vec::len).max().unwrap_or(0);
    if rows.iter().flatten().all(|c| c.is_empty()) {
        return Ok(String::new());
    }
    let with_headings = ["withHeadings", "withHeading"]
        .iter()
        .find_map(|k| b.data.get(*k).and_then(Value::as_bool))
        .unwrap_or(false);
    let mut out = String::new();
    let body = match rows.split_first() {
        Some((head, rest)) if with_headings => {
            push_table_row(&mut out, head, width);
            rest
        }
        _ => {
            push_table_row(&mut out, &[], width);
            &rows[..]
        }
    };
    out.push('|');
    out.push_str(&" --- |".repeat(width));
    out.push('\n');
    for row in body {
        push_table_row(&mut out, row, width);
    }
    Ok(out.trim_end().to_owned())
}

fn image(b: &Block) -> Result<String, EditorJsError> {
    let url = str_at(b.data, &["file", "url"])
        .filter(|u| !u.trim().is_empty())
        .or_else(|| b.optional("url"))
        .filter(|u| !u.trim().is_empty())
        .ok_or_else(|| b.err("has no image URL"))?;
    let alt = link_text(&inline(b.optional("caption").unwrap_or("")));
    Ok(format!("![{alt}]({})", md_url(url)))
}

/// `[text](url)`; the text is the (inline-converted) title, else the URL itself.
fn link(title: Option<&str>, url: &str) -> String {
    let mut text = link_text(&inline(title.unwrap_or("")));
    if text.is_empty() {
        text = link_text(url.trim());
    }
    format!("[{text}]({})", md_url(url))
}

/// Link or alt text on one line, brackets escaped.
fn link_text(s: &str) -> String {
    one_line(s).replace('[', "\\[").replace(']', "\\]")
}

/// A link destination: characters that would end or break it are percent-encoded.
fn md_url(url: &str) -> String {
    let mut out = String::with_capacity(url.len());
    for c in url.trim().chars() {
        match c {
            ' ' => out.push_str("%20"),
            '(' => out.push_str("%28"),
            ')' => out.push_str("%29"),
            '<' => out.push_str("%3C"),
            '>' => out.push_str("%3E"),
            '\n' | '\r' | '\t' => {}
            c => out.push(c),
        }
    }
    out
}

/// Lines joined with spaces (headers, link text).
fn one_line(s: &str) -> String {
    s.split('\n')
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum MarkKind {
    Bold,
    Italic,
    Code,
    Link,
}

/// An open inline tag: where its text starts in the output.
struct Mark {
    kind: MarkKind,
    start: usize,
    /// Whether it formats its text (not nested in the same kind or inside code).
    active: bool,
    href: Option<String>,
}

/// EditorJS inline HTML → Markdown text: `<b>`/`<strong>` → `**`, `<i>`/`<em>` → `*`,
/// `<code>` → backticks, `<a href>` → links, `<br>` → newline, other tags → their text,
/// entities decoded. Lines are trimmed and runs of blank lines collapsed.
fn inline(src: &str) -> String {
    let src = src.replace("\r\n", "\n").replace('\r', "\n");
    let mut out = String::with_capacity(src.len());
    let mut marks: Vec<Mark> = Vec::new();
    let mut rest = src.as_str();
    while !rest.is_empty() {
        let Some(pos) = rest.find(['<', '&']) else {
            out.push_str(rest);
            break;
        };
        out.push_str(&rest[..pos]);
        rest = &rest[pos..];
        if rest.starts_with('&') {
            let (decoded, used) = decode_entity(rest);
            out.push_str(&decoded);
            rest = &rest[used..];
            continue;
        }
        if rest.starts_with("<!--")
            && let Some(end) = rest.find("-->")
        {
            rest = &rest[end + 3..];
            continue;
        }
        let Some((tag, used)) = parse_tag(rest) else {
            out.push('<');
            rest = &rest[1..];
            continue;
        };
        rest = &rest[used..];
        apply_tag(&tag, &mut out, &mut marks);
    }
    tidy_lines(&out)
}

struct Tag<'a> {
    closing: bool,
    /// Lower-case; empty for `<!…>` and `<?…>`.
    name: String,
    attrs: &'a str,
}

/// Parses the tag at the start of `s` (which starts with `<`): the tag and its length in
/// bytes, or `None` when it is not a tag (a lone `<`).
fn parse_tag(s: &str) -> Option<(Tag<'_>, usize)> {
    let bytes = s.as_bytes();
    let mut i = 1;
    match bytes.get(i) {
        Some(b'!' | b'?') => {
            let end = s.find('>')?;
            return Some((
                Tag {
                    closing: false,
                    name: String::new(),
                    attrs: "",
                },
                end + 1,
            ));
        }
        Some(b'/') => i += 1,
        _ => {}
    }
    let closing = i == 2;
    let name_start = i;
    if !bytes.get(i).is_some_and(u8::is_ascii_alphabetic) {
        return None;
    }
    while bytes
        .get(i)
        .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'-')
    {
        i += 1;
    }
    let name = s[name_start..i].to_ascii_lowercase();
    let attrs_start = i;
    // Find the closing `>`, skipping quoted attribute values.
    let mut quote: Option<u8> = None;
    let mut after_eq = false;
    while let Some(&b) = bytes.get(i) {
        match quote {
            Some(q) if b == q => quote = None,
            Some(_) => {}
            None => match b {
                b'>' => {
                    let attrs = s[attrs_start..i].trim_end_matches('/');
                    return Some((
                        Tag {
                            closing,
                            name,
                            attrs,
                        },
                        i + 1,
                    ));
                }
                b'=' => after_eq = true,
                b'"' | b'\'' if after_eq => {
                    quote = Some(b);
                    after_eq = false;
                }
                b if b.is_ascii_whitespace() => {}
                _ => after_eq = false,
            },
        }
        i += 1;
    }
    None
}

/// The (entity-decoded) value of attribute `want` in `attrs`.
fn attr(attrs: &str, want: &str) -> Option<String> {
    let mut rest = attrs;
    loop {
        rest = rest.trim_start_matches(|c: char| c.is_whitespace() || c == '/');
        if rest.is_empty() {
            return None;
        }
        let name_end = rest
            .find(|c: char| c.is_whitespace() || c == '=' || c == '/')
            .unwrap_or(rest.len());
        let name = &rest[..name_end];
        rest = rest[name_end..].trim_start();
        let mut value = None;
        if let Some(after) = rest.strip_prefix('=') {
            let after = after.trim_start();
            let (v, remaining) = match after.chars().next() {
                Some(q @ ('"' | '\'')) => {
                    let body = &after[1..];
                    match body.find(q) {
                        Some(end) => (&body[..end], &body[end + 1..]),
                        None => (body, ""),
                    }
                }
                _ => {
                    let end = after.find(char::is_whitespace).unwrap_or(after.len());
                    (&after[..end], &after[end..])
                }
            };
            value = Some(v);
            rest = remaining;
        }
        if name.eq_ignore_ascii_case(want) {
            return value.map(decode_entities);
        }
        if name.is_empty() && value.is_none() {
            // Nothing consumed (a stray `=`): skip a character to make progress.
            let mut chars = rest.chars();
            chars.next();
            rest = chars.as_str();
        }
    }
}

fn apply_tag(tag: &Tag, out: &mut String, marks: &mut Vec<Mark>) {
    let kind = match tag.name.as_str() {
        "b" | "strong" => MarkKind::Bold,
        "i" | "em" => MarkKind::Italic,
        "code" => MarkKind::Code,
        "a" => MarkKind::Link,
        "br" => {
            out.push('\n');
            return;
        }
        "p" | "div" | "li" | "tr" | "blockquote" | "pre" | "h1" | "h2" | "h3" | "h4" | "h5"
        | "h6" => {
            if !out.is_empty() && !out.ends_with('\n') {
                out.push('\n');
            }
            return;
        }
        _ => return,
    };
    if !tag.closing {
        if marks.len() >= MAX_INLINE_MARKS {
            return;
        }
        let in_code = marks.iter().any(|m| m.active && m.kind == MarkKind::Code);
        let nested = marks.iter().any(|m| m.active && m.kind == kind);
        marks.push(Mark {
            kind,
            start: out.len(),
            active: !in_code && !nested,
            href: (kind == MarkKind::Link)
                .then(|| attr(tag.attrs, "href"))
                .flatten(),
        });
        return;
    }
    let Some(idx) = marks.iter().rposition(|m| m.kind == kind) else {
        return;
    };
    // Tags opened inside and left unclosed lose their formatting, never their text.
    marks.truncate(idx + 1);
    let Some(mark) = marks.pop() else {
        return;
    };
    if !mark.active || mark.start > out.len() {
        return;
    }
    let seg = out.split_off(mark.start);
    out.push_str(&wrap(&mark, seg));
}

/// The text of a closed mark, formatted; surrounding whitespace stays outside the markers.
fn wrap(mark: &Mark, seg: String) -> String {
    let inner = seg.trim();
    if inner.is_empty() {
        return seg;
    }
    let lead = &seg[..seg.len() - seg.trim_start().len()];
    let trail = &seg[seg.trim_end().len()..];
    let body = match mark.kind {
        MarkKind::Bold => format!("**{inner}**"),
        MarkKind::Italic => format!("*{inner}*"),
        MarkKind::Code => {
            let inner = inner.replace('\n', " ");
            let fence = fence_for(&inner, 1);
            let pad = if inner.starts_with('`') || inner.ends_with('`') {
                " "
            } else {
                ""
            };
            format!("{fence}{pad}{inner}{pad}{fence}")
        }
        MarkKind::Link => match mark.href.as_deref().map(str::trim) {
            Some(href) if !href.is_empty() => format!("[{inner}]({})", md_url(href)),
            _ => return seg,
        },
    };
    format!("{lead}{body}{trail}")
}

/// Decodes the entity at the start of `s` (which starts with `&`): its text and its length,
/// or a literal `&` when it is not one this knows.
fn decode_entity(s: &str) -> (String, usize) {
    let literal = ("&".to_owned(), 1);
    let Some(semi) = s.bytes().take(12).position(|b| b == b';') else {
        return literal;
    };
    let name = &s[1..semi];
    let decoded = match name {
        "amp" => Some('&'),
        "lt" => Some('<'),
        "gt" => Some('>'),
        "quot" => Some('"'),
        "apos" => Some('\''),
        "nbsp" => Some(' '),
        _ => name.strip_prefix('#').and_then(|num| {
            let code = match num.strip_prefix(['x', 'X']) {
                Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                None => num.parse::<u32>().ok()?,
            };
            char::from_u32(code).filter(|c| *c != '\0')
        }),
    };
    match decoded {
        Some(c) => (c.to_string(), semi + 1),
        None => literal,
    }
}

/// Decodes every entity in `s` (attribute values).
fn decode_entities(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(pos) = rest.find('&') {
        out.push_str(&rest[..pos]);
        let (decoded, used) = decode_entity(&rest[pos..]);
        out.push_str(&decoded);
        rest = &rest[pos + used..];
    }
    out.push_str(rest);
    out
}

/// Trims every line, collapses runs of blank lines to one, drops leading/trailing blanks.
fn tidy_lines(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut blank = false;
    for line in s.split('\n').map(str::trim) {
        if line.is_empty() {
            blank = !out.is_empty();
            continue;
        }
        if !out.is_empty() {
            out.push_str(if blank { "\n\n" } else { "\n" });
        }
        blank = false;
        out.push_str(line);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn md(json: &str) -> String {
        match editorjs_to_markdown(json) {
            Ok(md) => md,
            Err(e) => panic!("conversion failed: {e}"),
        }
    }

    fn err(json: &str) -> String {
        match editorjs_to_markdown(json) {
            Ok(md) => panic!("expected an error, got {md:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn full_document_with_every_block_type() {
        let json = r#"{
          "time": 1700000000000,
          "version": "2.28.2",
          "blocks": [
            {"id": "a1", "type": "header", "data": {"text": "Release notes", "level": 1}},
            {"id": "a2", "type": "paragraph", "data": {"text": "Quarry now reads <b>EditorJS</b> &amp; <i>more</i>. See <a href=\"https://example.com/docs\">the docs</a>."}},
            {"id": "a3", "type": "header", "data": {"text": "Details", "level": 9}},
            {"id": "a4", "type": "list", "data": {"style": "unordered", "items": ["One", "Two"]}},
            {"id": "a5", "type": "list", "data": {"style": "ordered", "meta": {}, "items": [
              {"content": "First", "meta": {}, "items": [{"content": "Nested", "meta": {}, "items": []}]},
              {"content": "Second", "meta": {}, "items": []}
            ]}},
            {"id": "a6", "type": "checklist", "data": {"items": [{"text": "Done", "checked": true}, {"text": "Todo", "checked": false}]}},
            {"id": "a7", "type": "quote", "data": {"text": "Simplicity is prerequisite for reliability.", "caption": "Dijkstra", "alignment": "left"}},
            {"id": "a8", "type": "code", "data": {"code": "fn main() {\n    println!(\"hi\");\n}", "language": "rust"}},
            {"id": "a9", "type": "delimiter", "data": {}},
            {"id": "b1", "type": "table", "data": {"withHeadings": true, "content": [["Name", "Score"], ["Ann", "9"], ["Bob", "7"]]}},
            {"id": "b2", "type": "image", "data": {"file": {"url": "https://cdn.example.com/cat.png"}, "caption": "A <b>cat</b>", "withBorder": false, "stretched": false, "withBackground": false}},
            {"id": "b3", "type": "embed", "data": {"service": "youtube", "source": "https://www.youtube.com/watch?v=abc", "embed": "https://www.youtube.com/embed/abc", "width": 580, "height": 320, "caption": "Demo video"}},
            {"id": "b4", "type": "linkTool", "data": {"link": "https://example.com", "meta": {"title": "Example Domain", "description": "An example"}}},
            {"id": "b5", "type": "raw", "data": {"html": "<div class=\"note\">Hi</div>"}},
            {"id": "b6", "type": "warning", "data": {"title": "Note:", "message": "Back up first."}},
            {"id": "b7", "type": "attaches", "data": {"file": {"url": "https://example.com/report.pdf", "size": 1024, "name": "report.pdf", "extension": "pdf"}, "title": "Q3 report"}},
            {"id": "b8", "type": "paragraph", "data": {"text": ""}},
            {"id": "b9", "type": "callout", "data": {"text": "Unknown tools keep their <i>text</i>"}},
            {"id": "c1", "type": "spacer", "data": {"height": 20}}
          ]
        }"#;
        let expected = "\
# Release notes

Quarry now reads **EditorJS** & *more*. See [the docs](https://example.com/docs).

###### Details

- One
- Two

1. First
   1. Nested
2. Second

- [x] Done
- [ ] Todo

> Simplicity is prerequisite for reliability.
>
> — Dijkstra

```rust
fn main() {
    println!(\"hi\");
}
```

---

| Name | Score |
| --- | --- |
| Ann | 9 |
| Bob | 7 |

![A **cat**](https://cdn.example.com/cat.png)

[Demo video](https://www.youtube.com/watch?v=abc)

[Example Domain](https://example.com)

```html
<div class=\"note\">Hi</div>
```

> **Note:** Back up first.

[Q3 report](https://example.com/report.pdf)

Unknown tools keep their *text*
";
        assert_eq!(md(json), expected);
    }

    #[test]
    fn bare_array_of_blocks_is_accepted() {
        let json = r#"[{"type": "paragraph", "data": {"text": "Hello"}}]"#;
        assert_eq!(md(json), "Hello\n");
    }

    #[test]
    fn old_list_format_and_new_nested_format() {
        // Old format: plain strings, inline HTML inside.
        let old = r#"{"blocks": [{"type": "list", "data": {"style": "ordered", "items": ["<b>a</b>", "b", ""]}}]}"#;
        assert_eq!(md(old), "1. **a**\n2. b\n");

        // New format, unordered: 2-space indentation per level.
        let unordered = r#"{"blocks": [{"type": "list", "data": {"style": "unordered", "meta": {}, "items": [
            {"content": "Fruit", "meta": {}, "items": [
                {"content": "Apple", "meta": {}, "items": [
                    {"content": "Gala", "meta": {}, "items": []}
                ]},
                {"content": "Pear", "meta": {}, "items": []}
            ]},
            {"content": "Veg", "meta": {}, "items": []}
        ]}}]}"#;
        assert_eq!(
            md(unordered),
            "- Fruit\n  - Apple\n    - Gala\n  - Pear\n- Veg\n"
        );

        // Ordered: 3-space indentation, numbering restarts per level, meta.start honoured.
        let ordered = r#"{"blocks": [{"type": "list", "data": {"style": "ordered", "meta": {"start": 3, "counterType": "numeric"}, "items": [
            {"content": "Three", "meta": {}, "items": [
                {"content": "Sub one", "meta": {}, "items": []},
                {"content": "Sub two", "meta": {}, "items": []}
            ]},
            {"content": "Four<br>continued", "meta": {}, "items": []}
        ]}}]}"#;
        assert_eq!(
            md(ordered),
            "3. Three\n   1. Sub one\n   2. Sub two\n4. Four\n   continued\n"
        );

        // New format, checklist style.
        let checklist = r#"{"blocks": [{"type": "list", "data": {"style": "checklist", "meta": {}, "items": [
            {"content": "Ship", "meta": {"checked": true}, "items": [
                {"content": "Tag release", "meta": {"checked": false}, "items": []}
            ]},
            {"content": "Announce", "meta": {"checked": false}, "items": []}
        ]}}]}"#;
        assert_eq!(
            md(checklist),
            "- [x] Ship\n  - [ ] Tag release\n- [ ] Announce\n"
        );

        // Old @editorjs/nested-list format: {content, items} without meta.
        let nested_list = r#"[{"type": "nestedList", "data": {"style": "unordered", "items": [
            {"content": "A", "items": [{"content": "B", "items": []}]}
        ]}}]"#;
        assert_eq!(md(nested_list), "- A\n  - B\n");
    }

    #[test]
    fn checklist_block() {
        let json = r#"{"blocks": [{"type": "checklist", "data": {"items": [
            {"text": "Buy <i>milk</i>", "checked": true},
            {"text": "", "checked": false},
            {"text": "Call &quot;Bob&quot;", "checked": false}
        ]}}]}"#;
        assert_eq!(md(json), "- [x] Buy *milk*\n- [ ] Call \"Bob\"\n");
    }

    #[test]
    fn code_fence_grows_past_backticks_inside() {
        let json = r#"[{"type": "code", "data": {"code": "Markdown:\n```js\nlet a = 1;\n```\n"}}]"#;
        assert_eq!(md(json), "````\nMarkdown:\n```js\nlet a = 1;\n```\n````\n");
        // HTML-looking code is kept as-is, not decoded.
        let html =
            r#"[{"type": "code", "data": {"code": "a &amp; <b>b</b>", "language": "html"}}]"#;
        assert_eq!(md(html), "```html\na &amp; <b>b</b>\n```\n");
    }

    #[test]
    fn tables_with_and_without_headings() {
        let with = r#"[{"type": "table", "data": {"withHeadings": true, "content": [
            ["Cmd", "Meaning"], ["a | b", "pipe<br>then line"], ["<code>x|y</code>", "short"]
        ]}}]"#;
        assert_eq!(
            md(with),
            "| Cmd | Meaning |\n| --- | --- |\n| a \\| b | pipe<br>then line |\n| `x\\|y` | short |\n"
        );
        let without = r#"[{"type": "table", "data": {"withHeadings": false, "content": [
            ["1", "2", "3"], ["4"]
        ]}}]"#;
        assert_eq!(
            md(without),
            "|  |  |  |\n| --- | --- | --- |\n| 1 | 2 | 3 |\n| 4 |  |  |\n"
        );
    }

    #[test]
    fn inline_html_and_entities() {
        let cases = [
            ("<b>bold</b> <strong>strong</strong>", "**bold** **strong**"),
            ("<i>it</i> <em>em</em>", "*it* *em*"),
            ("use <code>cargo test</code>", "use `cargo test`"),
            ("<code>a`b</code>", "``a`b``"),
            (
                "<a href=\"https://x.io/a?b=1&amp;c=2\">link</a>",
                "[link](https://x.io/a?b=1&c=2)",
            ),
            (
                "<a href='https://x.io/a b'>sp</a>",
                "[sp](https://x.io/a%20b)",
            ),
            ("<a>no href</a>", "no href"),
            (
                "line one<br>line two<br/>three",
                "line one\nline two\nthree",
            ),
            (
                "<mark class=\"cdx-marker\">marked</mark> <u>under</u> <span>s</span>",
                "marked under s",
            ),
            (
                "&lt;tag&gt; &quot;q&quot; &#39;s&#39; a&nbsp;b &#169; &#x1F600;",
                "<tag> \"q\" 's' a b © 😀",
            ),
            (
                "AT&T &unknown; &#xZZ; & done",
                "AT&T &unknown; &#xZZ; & done",
            ),
            ("<b> spaced </b>word", "**spaced** word"),
            ("<b><b>double</b></b>", "**double**"),
            ("<b>unclosed", "unclosed"),
            ("a < b > c", "a < b > c"),
            ("x<!-- comment -->y", "xy"),
            ("<code><b>raw</b></code>", "`raw`"),
            ("<b><i>both</i></b>", "***both***"),
        ];
        for (html, want) in cases {
            assert_eq!(inline(html), want, "for {html:?}");
        }
    }

    #[test]
    fn chinese_text() {
        let json = r#"{"time": 1, "version": "2.30.0", "blocks": [
            {"type": "header", "data": {"text": "知识库", "level": 2}},
            {"type": "paragraph", "data": {"text": "这是<b>重要</b>的内容，包含&nbsp;空格。"}},
            {"type": "list", "data": {"style": "unordered", "items": ["第一项", "第二项"]}},
            {"type": "table", "data": {"withHeadings": true, "content": [["名称", "说明"], ["夸克", "粒子"]]}}
        ]}"#;
        assert_eq!(
            md(json),
            "## 知识库\n\n这是**重要**的内容，包含 空格。\n\n- 第一项\n- 第二项\n\n| 名称 | 说明 |\n| --- | --- |\n| 夸克 | 粒子 |\n"
        );
    }

    #[test]
    fn header_levels_are_clamped_and_default_to_two() {
        let json = r#"[
            {"type": "header", "data": {"text": "Zero", "level": 0}},
            {"type": "header", "data": {"text": "Str", "level": "3"}},
            {"type": "header", "data": {"text": "None"}},
            {"type": "header", "data": {"text": "Huge", "level": 1e300}}
        ]"#;
        assert_eq!(md(json), "# Zero\n\n### Str\n\n## None\n\n###### Huge\n");
    }

    #[test]
    fn bad_inputs_are_explained() {
        assert!(
            err("not json at all").starts_with("content_type is 'blocks' but content is not JSON")
        );
        assert_eq!(
            err(r#"{"time": 1, "version": "2.0"}"#),
            "content_type is 'blocks' but content is not EditorJS JSON: expected an object with a \"blocks\" array"
        );
        assert_eq!(
            err(r#""just a string""#),
            "content_type is 'blocks' but content is not EditorJS JSON: expected an object with \
             a \"blocks\" array"
        );
        assert_eq!(
            err(r#"{"blocks": []}"#),
            "the EditorJS document has no blocks"
        );
        assert_eq!(err("[]"), "the EditorJS document has no blocks");
        assert_eq!(
            err(r#"[{"type": "paragraph", "data": {"text": "ok"}}, {"data": {"text": "x"}}]"#),
            "block 2 has no \"type\""
        );
        assert_eq!(err(r#"[42]"#), "block 1 is not an object");
        assert_eq!(
            err(
                r#"[{"type":"paragraph","data":{"text":"a"}},{"type":"paragraph","data":{"text":"b"}},{"type":"header","data":{"level":2}}]"#
            ),
            "block 3 (type \"header\") has no text"
        );
        assert_eq!(
            err(r#"[{"type": "image", "data": {"caption": "lost"}}]"#),
            "block 1 (type \"image\") has no image URL"
        );
        assert_eq!(
            err(r#"[{"type": "table", "data": {"content": [["a"], "b"]}}]"#),
            "block 1 (type \"table\") has a row (2) that is not a list of cells"
        );
        assert_eq!(
            err(r#"[{"type": "paragraph", "data": {"text": ""}}, {"type": "spacer"}]"#),
            "the EditorJS document has no content: every block is empty"
        );
        // An empty header is skipped, not an error.
        assert_eq!(
            md(
                r#"[{"type": "header", "data": {"text": "", "level": 2}}, {"type": "paragraph", "data": {"text": "Body"}}]"#
            ),
            "Body\n"
        );
    }

    /// A new-format list nested `levels` deep.
    fn deep_list(levels: usize) -> String {
        let mut items = String::from("[]");
        for i in (0..levels).rev() {
            items = format!(r#"[{{"content": "level {i}", "meta": {{}}, "items": {items}}}]"#);
        }
        format!(
            r#"{{"blocks": [{{"type": "list", "data": {{"style": "unordered", "items": {items}}}}}]}}"#
        )
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        // At the cap: fine.
        let ok = md(&deep_list(MAX_LIST_DEPTH));
        assert!(ok.contains(&format!("{}- level 15", " ".repeat(30))));
        // One level beyond: our error.
        assert_eq!(
            err(&deep_list(MAX_LIST_DEPTH + 1)),
            "block 1 (type \"list\") nests lists deeper than 16 levels"
        );
        // Absurdly deep JSON: refused while parsing, no stack overflow.
        let absurd = format!("{}{}", "[".repeat(200_000), "]".repeat(200_000));
        assert!(err(&absurd).starts_with("content_type is 'blocks' but content is not JSON"));
        assert!(
            err(&deep_list(5_000)).starts_with("content_type is 'blocks' but content is not JSON")
        );
        // Thousands of nested inline tags: text kept, no blow-up.
        let tags = format!("{}deep{}", "<b><i>".repeat(5_000), "</i></b>".repeat(5_000));
        assert_eq!(inline(&tags), "***deep***");
    }

    #[test]
    fn never_panics_on_odd_values() {
        let odd = [
            r#"[{"type": "list", "data": {"items": [1, null, true]}}]"#,
            r#"[{"type": "list", "data": {"items": "nope"}}]"#,
            r#"[{"type": "checklist", "data": {"items": [null, 3, {"text": 5}]}}]"#,
            r#"[{"type": "table", "data": {"content": [[{"x": 1}]]}}]"#,
            r#"[{"type": "table", "data": {"content": [[], []]}}]"#,
            r#"[{"type": "quote", "data": {}}]"#,
            r#"[{"type": "warning", "data": {"message": "<a href=>x</a> <a href"}}]"#,
            r#"[{"type": "code", "data": {"code": 5}}]"#,
            r#"[{"type": "paragraph", "data": "text"}]"#,
            r#"[{"type": "paragraph", "data": {"text": "<a href=\"x\" title='unterminated>t</a> &#xFFFFFFFF; &#0; <"}}]"#,
            r#"[{"type": "embed", "data": {"caption": "c"}}]"#,
            r#"[{"type": "header", "data": {"text": "x", "level": -5}}]"#,
        ];
        for json in odd {
            // Either answer is fine; neither may panic.
            let _ = editorjs_to_markdown(json);
        }
    }
}
