//! HTML → Markdown: `htmd` for the conversion, after pruning the DOM ourselves.
//!
//! `htmd` converts faithfully but converts *everything*; a knowledge base wants the readable
//! content. So the page is parsed once (html5ever, via htmd), scripts, styles, navigation,
//! sidebars, banners and footers are cut out of the tree (by tag, ARIA role and common
//! class/id names), the content root is `<main>`/`[role=main]`/a lone `<article>` when there
//! is one, and `<pre>` blocks become fenced code with the language taken from
//! `language-x`/`lang-x`/`highlight-x` classes. Inline `data:` images are dropped (their alt
//! text kept) so a pasted screenshot does not become megabytes of base64.
//!
//! The document's own table of contents (`class="toc"` as DocBook and many generators write
//! it, `role="doc-toc"`, a `<nav>` inside the content whose links all stay on the page) is
//! part of the document: it is kept in the Markdown and returned as
//! [`FurnitureKind::Contents`] furniture, so it does not compete with the sections it lists.
//! Site chrome (menus, sidebars, page headers and footers, cookie banners) is still cut.

use std::rc::Rc;

use htmd::element_handler::{HandlerResult, Handlers};
use htmd::{Element, HtmlToMarkdown};
use markup5ever_rcdom::{Handle, NodeData};

use crate::types::{ConvertError, ConvertOptions, Converted, Converter, Format};
use crate::util;
use quarry_core::FurnitureKind;

pub(crate) struct HtmlConverter;

impl Converter for HtmlConverter {
    fn format(&self) -> Format {
        Format::Html
    }

    fn convert(&self, bytes: &[u8], _opts: &ConvertOptions) -> Result<Converted, ConvertError> {
        if util::looks_binary(bytes) {
            return Err(ConvertError::NotText(match util::sniff(bytes) {
                Some(kind) => format!("looks like {kind}, not HTML"),
                None => "binary data".to_owned(),
            }));
        }
        let (html, warning) = decode_html(bytes);
        // The parser and the Markdown writer both walk the open elements for each new one:
        // a page nested thousands deep costs minutes before it fails. Refuse it up front.
        if nests_deeper_than(&html, MAX_NESTING) {
            return Err(ConvertError::TooDeep(Format::Html));
        }
        let html = util::strip_marks(&html).into_owned();
        let converter = HtmlToMarkdown::builder()
            .skip_tags(vec![
                // `nav` is cut by `prune` (unless it is the page's table of contents).
                "script", "style", "noscript", "template", "aside", "svg", "iframe", "button",
                "select", "object", "embed", "canvas", "head",
            ])
            .add_handler(vec!["pre"], pre_handler)
            .add_handler(vec!["img"], img_handler)
            .build();
        let dom = converter
            .html_to_tree(&html)
            .map_err(|e| ConvertError::Corrupt {
                format: Format::Html,
                detail: e.to_string(),
            })?;
        let title = find_title(&dom);
        let properties = meta_properties(&dom);
        let root = content_root(&dom).unwrap_or_else(|| dom.clone());
        let is_body = !matches!(tag(&root).as_deref(), Some("main") | Some("article"));
        prune(&root, is_body, false, 0);
        let md = converter.tree_to_markdown(&root);
        let (md, furniture) = util::take_marks(&util::tidy(&compact_tables(&md)));
        let title = title.or_else(|| first_h1(&md));
        Ok(Converted {
            markdown: md,
            title,
            furniture,
            warnings: warning.into_iter().collect(),
            properties,
            ..Default::default()
        })
    }
}

/// Elements nested deeper than this are refused ([`nests_deeper_than`]); real pages stay
/// well under a hundred.
const MAX_NESTING: usize = 1_000;

/// Elements with no content and no end tag.
const VOID: [&str; 14] = [
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source",
    "track", "wbr",
];

/// Elements whose end tag may be left out: the parser closes them itself, so they are not
/// counted as nesting (a list of a thousand unclosed `<li>` is flat).
const OPTIONAL_END: [&str; 15] = [
    "p", "li", "dt", "dd", "tr", "td", "th", "thead", "tbody", "tfoot", "option", "optgroup", "rt",
    "rp", "colgroup",
];

/// Elements whose content is text up to their end tag.
const RAW_TEXT: [&str; 6] = ["script", "style", "textarea", "title", "xmp", "noscript"];

/// Whether start tags nest deeper than `limit`, by one linear pass over the markup (tags,
/// comments, quoted attributes and raw-text elements understood; no tree built).
fn nests_deeper_than(html: &str, limit: usize) -> bool {
    let b = html.as_bytes();
    let find = |from: usize, needle: &[u8]| -> Option<usize> {
        b.get(from..)?
            .windows(needle.len())
            .position(|w| w.eq_ignore_ascii_case(needle))
            .map(|k| from + k)
    };
    let mut depth = 0usize;
    let mut i = 0;
    while let Some(k) = b
        .get(i..)
        .and_then(|rest| rest.iter().position(|&c| c == b'<'))
    {
        i += k + 1;
        match b.get(i) {
            Some(b'!') if b[i..].starts_with(b"!--") => {
                i = find(i + 3, b"-->").map_or(b.len(), |e| e + 3);
                continue;
            }
            Some(b'!' | b'?') => {
                i = find(i, b">").map_or(b.len(), |e| e + 1);
                continue;
            }
            _ => {}
        }
        let closing = b.get(i) == Some(&b'/');
        let name_start = i + usize::from(closing);
        if !b.get(name_start).is_some_and(u8::is_ascii_alphabetic) {
            continue;
        }
        let name_len = b[name_start..]
            .iter()
            .take_while(|c| c.is_ascii_alphanumeric() || **c == b'-')
            .count();
        let name = html[name_start..name_start + name_len].to_ascii_lowercase();
        // The tag's end: the first `>` outside a quoted attribute value.
        let mut j = name_start + name_len;
        let mut quote = None;
        while let Some(&c) = b.get(j) {
            match (quote, c) {
                (None, b'"' | b'\'') => quote = Some(c),
                (Some(q), c) if c == q => quote = None,
                (None, b'>') => break,
                _ => {}
            }
            j += 1;
        }
        let self_closing = j > 0 && b.get(j - 1) == Some(&b'/');
        i = j + 1;
        let flat = VOID.contains(&name.as_str()) || OPTIONAL_END.contains(&name.as_str());
        if closing {
            if !flat {
                depth = depth.saturating_sub(1);
            }
            continue;
        }
        if RAW_TEXT.contains(&name.as_str()) {
            i = find(i, format!("</{name}").as_bytes()).unwrap_or(b.len());
            continue;
        }
        if flat || self_closing {
            continue;
        }
        depth += 1;
        if depth > limit {
            return true;
        }
    }
    false
}

/// UTF-8 when valid; otherwise the declared charset (`<meta charset>`, `http-equiv`), else
/// Windows-1252.
fn decode_html(bytes: &[u8]) -> (String, Option<String>) {
    let body = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    if let Ok(s) = std::str::from_utf8(body) {
        return (s.to_owned(), None);
    }
    if bytes.starts_with(b"\xFF\xFE") || bytes.starts_with(b"\xFE\xFF") {
        return (util::decode_text(bytes).0, None);
    }
    let head = String::from_utf8_lossy(&bytes[..bytes.len().min(4096)]).to_ascii_lowercase();
    let declared = head.find("charset=").and_then(|i| {
        let rest = head[i + 8..].trim_start_matches(['"', '\'', ' ']);
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
            .unwrap_or(rest.len());
        encoding_rs::Encoding::for_label(&rest.as_bytes()[..end])
    });
    let enc = declared.unwrap_or(encoding_rs::WINDOWS_1252);
    let (text, _, _) = enc.decode(bytes);
    (
        text.into_owned(),
        Some(format!("not UTF-8; decoded as {}", enc.name())),
    )
}

/// htmd pads table columns to equal width; with long cells that doubles the output. Rows
/// are re-emitted with single spaces and `---` separators.
fn compact_tables(md: &str) -> String {
    let mut out = String::with_capacity(md.len());
    let mut in_fence = false;
    for line in md.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
        }
        let t = line.trim();
        if !in_fence && t.len() > 1 && t.starts_with('|') && t.ends_with('|') {
            let cells: Vec<&str> = split_row(t);
            let is_sep = cells.iter().all(|c| {
                let c = c.trim();
                !c.is_empty() && c.chars().all(|ch| matches!(ch, '-' | ':'))
            });
            out.push('|');
            for c in cells {
                out.push(' ');
                out.push_str(if is_sep { "---" } else { c.trim() });
                out.push_str(" |");
            }
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

/// Cells of a `| a | b |` row, honouring `\|` escapes.
fn split_row(row: &str) -> Vec<&str> {
    let inner = &row[1..row.len() - 1];
    let mut cells = Vec::new();
    let mut start = 0;
    let bytes = inner.as_bytes();
    for i in 0..bytes.len() {
        if bytes[i] == b'|' && (i == 0 || bytes[i - 1] != b'\\') {
            cells.push(&inner[start..i]);
            start = i + 1;
        }
    }
    cells.push(&inner[start..]);
    cells
}

fn tag(node: &Handle) -> Option<String> {
    match &node.data {
        NodeData::Element { name, .. } => Some(name.local.to_string()),
        _ => None,
    }
}

fn attr_of(node: &Handle, key: &str) -> Option<String> {
    match &node.data {
        NodeData::Element { attrs, .. } => attrs
            .borrow()
            .iter()
            .find(|a| &*a.name.local == key)
            .map(|a| a.value.to_string()),
        _ => None,
    }
}

/// All text below `node`, `<br>` as newlines.
fn raw_text(node: &Handle, out: &mut String) {
    match &node.data {
        NodeData::Text { contents } => out.push_str(&contents.borrow()),
        NodeData::Element { name, .. } if &*name.local == "br" => out.push('\n'),
        _ => {
            for child in node.children.borrow().iter() {
                raw_text(child, out);
            }
        }
    }
}

fn find_first(node: &Handle, pred: &dyn Fn(&Handle) -> bool, depth: usize) -> Option<Handle> {
    if pred(node) {
        return Some(node.clone());
    }
    if depth > 200 {
        return None;
    }
    for child in node.children.borrow().iter() {
        if let Some(found) = find_first(child, pred, depth + 1) {
            return Some(found);
        }
    }
    None
}

fn count(node: &Handle, pred: &dyn Fn(&Handle) -> bool, depth: usize) -> usize {
    let me = usize::from(pred(node));
    if depth > 200 {
        return me;
    }
    me + node
        .children
        .borrow()
        .iter()
        .map(|c| count(c, pred, depth + 1))
        .sum::<usize>()
}

/// `<meta name="author">` and `<meta name="keywords">` (the first of each). The
/// `<title>` stays [`Converted::title`]'s alone: pages rarely set a title apart from it.
fn meta_properties(dom: &Handle) -> crate::types::DocProperties {
    let meta = |name: &str| {
        let node = find_first(
            dom,
            &|n| {
                tag(n).as_deref() == Some("meta")
                    && attr_of(n, "name").is_some_and(|v| v.trim().eq_ignore_ascii_case(name))
            },
            0,
        )?;
        attr_of(&node, "content")
    };
    crate::types::DocProperties {
        author: meta("author").as_deref().and_then(crate::props::clean),
        keywords: meta("keywords")
            .map(|k| crate::props::keywords([k.as_str()]))
            .unwrap_or_default(),
        ..Default::default()
    }
}

fn find_title(dom: &Handle) -> Option<String> {
    let t = find_first(dom, &|n| tag(n).as_deref() == Some("title"), 0)?;
    let mut s = String::new();
    raw_text(&t, &mut s);
    let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
    (!s.is_empty()).then_some(s)
}

fn first_h1(md: &str) -> Option<String> {
    md.lines()
        .find_map(|l| l.strip_prefix("# "))
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
}

/// `<main>`, `[role=main]`, or the only `<article>`.
fn content_root(dom: &Handle) -> Option<Handle> {
    let main = find_first(
        dom,
        &|n| tag(n).as_deref() == Some("main") || attr_of(n, "role").as_deref() == Some("main"),
        0,
    );
    if let Some(main) = main {
        // A `main` with almost nothing in it is a layout artefact, not the content.
        let mut text = String::new();
        raw_text(&main, &mut text);
        if text.trim().len() > 200 {
            return Some(main);
        }
    }
    let is_article = |n: &Handle| tag(n).as_deref() == Some("article");
    if count(dom, &is_article, 0) == 1 {
        return find_first(dom, &is_article, 0);
    }
    None
}

const BOILERPLATE_ROLES: [&str; 5] = [
    "navigation",
    "banner",
    "contentinfo",
    "complementary",
    "search",
];
const BOILERPLATE_TOKENS: [&str; 19] = [
    "nav",
    "navbar",
    "navigation",
    "menu",
    "sidebar",
    "sphinxsidebar",
    "breadcrumb",
    "breadcrumbs",
    "footer",
    "site-footer",
    "site-header",
    "cookie",
    "cookie-banner",
    "skip-link",
    "toc",
    "related",
    "navheader",
    "navfooter",
    "headerlink",
];

fn is_boilerplate(node: &Handle, drop_header_footer: bool) -> bool {
    let Some(t) = tag(node) else {
        return matches!(node.data, NodeData::Comment { .. });
    };
    if drop_header_footer && (t == "header" || t == "footer") {
        // A header holding the page's only h1 is content.
        let has_h1 = find_first(node, &|n| tag(n).as_deref() == Some("h1"), 0).is_some();
        return !has_h1;
    }
    if t == "body" || t == "html" || t == "main" || t == "article" {
        return false;
    }
    if t == "nav" {
        return true;
    }
    if attr_of(node, "hidden").is_some() || attr_of(node, "aria-hidden").as_deref() == Some("true")
    {
        return true;
    }
    if attr_of(node, "role").is_some_and(|r| BOILERPLATE_ROLES.contains(&r.as_str())) {
        return true;
    }
    let tokens = format!(
        "{} {}",
        attr_of(node, "class").unwrap_or_default(),
        attr_of(node, "id").unwrap_or_default()
    )
    .to_ascii_lowercase();
    tokens
        .split_whitespace()
        .any(|tok| BOILERPLATE_TOKENS.contains(&tok))
}

/// The document's own table of contents: `class`/`id` token `toc` or `table-of-contents`,
/// `role="doc-toc"`, or a `<nav>` whose links (at least three) all point into the page.
fn is_contents(node: &Handle) -> bool {
    let Some(t) = tag(node) else {
        return false;
    };
    if attr_of(node, "hidden").is_some() || attr_of(node, "aria-hidden").as_deref() == Some("true")
    {
        return false;
    }
    if attr_of(node, "role").as_deref() == Some("doc-toc") {
        return true;
    }
    let tokens = format!(
        "{} {}",
        attr_of(node, "class").unwrap_or_default(),
        attr_of(node, "id").unwrap_or_default()
    )
    .to_ascii_lowercase();
    if tokens
        .split_whitespace()
        .any(|tok| matches!(tok, "toc" | "table-of-contents"))
    {
        return true;
    }
    if t != "nav" {
        return false;
    }
    let is_link = |n: &Handle| tag(n).as_deref() == Some("a") && attr_of(n, "href").is_some();
    let links = count(node, &is_link, 0);
    let on_page = count(
        node,
        &|n| is_link(n) && attr_of(n, "href").is_some_and(|h| h.starts_with('#')),
        0,
    );
    links >= 3 && on_page == links
}

/// Cuts boilerplate below `node`; a table of contents is kept between furniture marks
/// (text nodes that `util::take_marks` turns into a range of the Markdown).
fn prune(node: &Handle, drop_header_footer: bool, in_contents: bool, depth: usize) {
    if depth > 400 {
        return;
    }
    node.children
        .borrow_mut()
        .retain(|c| is_contents(c) || !is_boilerplate(c, drop_header_footer));
    let children: Vec<Handle> = node.children.borrow().iter().cloned().collect();
    let mut marked = Vec::new();
    for c in &children {
        // Nested contents lists (DocBook's `dl.toc` in `div.toc`) are inside the outer mark.
        let contents = !in_contents && is_contents(c);
        if contents {
            marked.push(c.clone());
        }
        prune(c, drop_header_footer, in_contents || contents, depth + 1);
    }
    if marked.is_empty() {
        return;
    }
    let text_node = |s: String| {
        let n = markup5ever_rcdom::Node::new(NodeData::Text {
            contents: std::cell::RefCell::new(s.as_str().into()),
        });
        n.parent.set(Some(Rc::downgrade(node)));
        n
    };
    let mut kids = node.children.borrow_mut();
    let mut out = Vec::with_capacity(kids.len() + 2 * marked.len());
    for c in kids.drain(..) {
        let is_marked = marked.iter().any(|m| Rc::ptr_eq(m, &c));
        if is_marked {
            out.push(text_node(format!(
                "\n{}\n",
                util::mark_open(FurnitureKind::Contents)
            )));
        }
        out.push(c);
        if is_marked {
            out.push(text_node(format!("\n{}\n", util::MARK_CLOSE)));
        }
    }
    *kids = out;
}

/// The code language from `language-x`, `lang-x`, `highlight-x`, `brush: x` classes on the
/// block, its `<code>` child or a few ancestors (Sphinx puts it on a wrapper `div`).
fn code_language(node: &Handle) -> Option<String> {
    let from_class = |n: &Handle| -> Option<String> {
        let class = attr_of(n, "class")?;
        if let Some(i) = class.find("brush:") {
            let lang = class[i + 6..].trim().split([' ', ';']).next()?.to_owned();
            return (!lang.is_empty()).then_some(lang);
        }
        class.split_whitespace().find_map(|c| {
            let lang = c
                .strip_prefix("language-")
                .or_else(|| c.strip_prefix("lang-"))
                .or_else(|| c.strip_prefix("highlight-"))?;
            let lang = lang.trim();
            (!lang.is_empty() && lang != "default" && lang != "none" && lang != "text")
                .then(|| lang.to_owned())
        })
    };
    if let Some(l) = from_class(node) {
        return Some(l);
    }
    for child in node.children.borrow().iter() {
        if tag(child).as_deref() == Some("code")
            && let Some(l) = from_class(child)
        {
            return Some(l);
        }
    }
    let mut cur = parent(node);
    for _ in 0..3 {
        let Some(p) = cur else { break };
        if let Some(l) = from_class(&p) {
            return Some(l);
        }
        cur = parent(&p);
    }
    None
}

fn parent(node: &Handle) -> Option<Handle> {
    let weak = node.parent.take();
    let strong = weak.as_ref().and_then(|w| w.upgrade());
    node.parent.set(weak);
    strong
}

fn pre_handler(_handlers: &dyn Handlers, element: Element) -> Option<HandlerResult> {
    let node: &Rc<markup5ever_rcdom::Node> = element.node;
    let mut text = String::new();
    raw_text(node, &mut text);
    let text = text.trim_matches('\n').trim_end();
    if text.trim().is_empty() {
        return Some(HandlerResult::from(String::new()));
    }
    let lang = code_language(node).unwrap_or_default();
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        if c == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    let fence = "`".repeat((longest + 1).max(3));
    Some(HandlerResult::from(format!(
        "\n\n{fence}{lang}\n{text}\n{fence}\n\n"
    )))
}

fn img_handler(handlers: &dyn Handlers, element: Element) -> Option<HandlerResult> {
    let src = element
        .attrs
        .iter()
        .find(|a| &*a.name.local == "src")
        .map(|a| a.value.to_string())
        .unwrap_or_default();
    if src.is_empty() || src.starts_with("data:") {
        let alt = element
            .attrs
            .iter()
            .find(|a| &*a.name.local == "alt")
            .map(|a| a.value.trim().to_string())
            .unwrap_or_default();
        return Some(HandlerResult::from(alt));
    }
    handlers.fallback(element)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nesting_is_measured_without_building_a_tree() {
        let deep = |n: usize| {
            format!(
                "<html><body>{}x{}</body></html>",
                "<div>".repeat(n),
                "</div>".repeat(n)
            )
        };
        assert!(!nests_deeper_than(&deep(990), MAX_NESTING));
        assert!(nests_deeper_than(&deep(1_001), MAX_NESTING));
        // Siblings, void and self-closed elements, unclosed list items and paragraphs,
        // comments, quoted `>` and script text do not nest.
        let flat = format!(
            "{}{}{}{}{}{}",
            "<div><span>a</span></div>".repeat(5_000),
            "<br><img src=x><input/>".repeat(5_000),
            "<ul>".to_owned() + &"<li>item".repeat(5_000) + "</ul>",
            "<p>one<p>two".repeat(5_000),
            "<!-- <div><div> --><a title='>'>x</a>".repeat(5_000),
            "<script>if (a<b) { document.write('<div><div><div>') }</script>".repeat(5_000),
        );
        assert!(!nests_deeper_than(&flat, MAX_NESTING));
        // A quote left open or a stray `<` ends the scan without error.
        assert!(!nests_deeper_than("<div title='open", MAX_NESTING));
        assert!(!nests_deeper_than("a < b and <3", MAX_NESTING));
    }

    #[test]
    fn a_deep_page_fails_at_once() {
        let html = format!(
            "<html><body>{}deep{}</body></html>",
            "<div>".repeat(200_000),
            "</div>".repeat(200_000)
        );
        // Before the pre-scan this went through the parser for minutes.
        let err = HtmlConverter
            .convert(html.as_bytes(), &ConvertOptions::default())
            .err();
        assert!(
            matches!(err, Some(ConvertError::TooDeep(Format::Html))),
            "{err:?}"
        );
    }
}
