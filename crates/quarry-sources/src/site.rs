//! The pages a web site lists in its sitemap, as its `robots.txt` allows, over HTTP(S) with
//! reqwest's blocking client.
//!
//! **Listing** reads the `robots.txt` of the sitemap's origin, then the sitemap: a
//! `<urlset>`, or a `<sitemapindex>` whose sitemaps (one level deep, on the same origin) are
//! read in turn; compressed sitemaps are not read. Only pages on the sitemap's origin
//! (scheme, host and port) are synced. Every URL left out says why in the listing's
//! problems — another origin, disallowed by `robots.txt`, not a URL, the same path as
//! another — so it is neither synced nor, when it was synced before, deleted (a
//! `Disallow: /` deployed by mistake must not empty the knowledge base).
//!
//! **Paths**: a page's path is its URL's path (percent-decoded) and query after the host,
//! with an `.html` ending when the last segment has no extension Quarry converts (the engine
//! picks a converter by extension): `/` → `index.html`, `/docs/` → `docs/index.html`,
//! `/docs/intro` → `docs/intro.html`, `/guide.pdf` → `guide.pdf`, `/search?q=a` →
//! `search?q=a.html`, `/file.pdf?v=2` → `file?v=2.pdf`. The path → URL map of the last
//! listing is kept in the source: `fetch` asks for the URL the sitemap gave.
//!
//! **Versions** are the sitemap's `<lastmod>`; a page without one has an empty version, so
//! it is fetched on every sync and the engine compares content hashes (no conditional
//! request: the engine does not pass the previous version to `fetch`). A site that edits a
//! page without moving its `<lastmod>` is not re-read until the `<lastmod>` moves.
//!
//! **robots.txt** (RFC 9309): the groups naming `quarry` (the product token of the
//! `User-Agent` sent) are obeyed, else the `*` groups; `Allow`/`Disallow` with `*` and `$`,
//! the longest matching rule wins and `Allow` wins a tie. A `robots.txt` that answers 4xx
//! means no rules; one that cannot be read (5xx, no connection) fails the listing as
//! [`SourceError::Unavailable`], as the RFC says to assume everything is disallowed then.
//! Its redirects are followed to any host, as the RFC says (`example.com/robots.txt` →
//! `www.example.com/robots.txt`); those of the sitemap and pages only within the host.
//!
//! **Fetching** is a `GET` limited to the size given, following redirects only within the
//! same host. A page the sitemap lists that answers 404 or 410 is
//! [`SourceError::NotFound`], which the engine reports as a skipped page (its document, if
//! any, stays); 401/403 are [`SourceError::Unauthorized`]; 5xx and transport failures
//! [`SourceError::Unavailable`]. No credential is sent: sites are public.

use std::collections::{BTreeMap, HashMap};

use quick_xml::events::Event;
use reqwest::Method;
use url::Url;

use crate::error::SourceError;
use crate::http::{Http, origin, read_body, same_origin, status_text};
use crate::mask::FileMask;
use crate::source::{Item, Listing, Source};
use crate::webdav::resolve_ref;

/// The sitemap protocol's largest sitemap (50 MB uncompressed).
const MAX_SITEMAP: u64 = 50 * 1024 * 1024;
/// RFC 9309: at least 500 KiB of a `robots.txt` must be parsed; more is ignored.
const MAX_ROBOTS: u64 = 500 * 1024;
/// The product token matched against `User-agent` lines.
const PRODUCT: &str = "quarry";
/// Extensions kept as they are (formats Quarry converts, as the engine names them).
const KEPT_EXTENSIONS: &[&str] = &[
    "pdf", "docx", "xlsx", "xlsm", "xls", "ods", "pptx", "csv", "tsv", "tab", "html", "htm",
    "xhtml", "txt", "text", "log", "md", "markdown", "mdx", "json",
];

/// A site source.
pub struct SiteSource {
    sitemap: Url,
    http: Http,
    mask: FileMask,
    /// Each listed path's URL.
    urls: HashMap<String, Url>,
    listed: bool,
}

impl std::fmt::Debug for SiteSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SiteSource")
            .field("sitemap", &self.sitemap.as_str())
            .finish_non_exhaustive()
    }
}

impl SiteSource {
    /// The pages the sitemap at `sitemap` lists.
    pub fn new(sitemap: &str, mask: FileMask) -> Result<SiteSource, SourceError> {
        SiteSource::new_with(sitemap, mask, None)
    }

    /// [`SiteSource::new`], its every request under the outbound address guard `net` when
    /// given (`crate::open_with`).
    pub fn new_with(
        sitemap: &str,
        mask: FileMask,
        net: Option<&quarry_netguard::NetPolicy>,
    ) -> Result<SiteSource, SourceError> {
        // The URL every parser reads alike, as re-serialised: what is fetched is what the
        // guard checks.
        let mut url = crate::location::unambiguous(sitemap, "sitemap URL")?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err(SourceError::Invalid(format!(
                "the sitemap URL {sitemap:?} must be an https:// (or http://) URL"
            )));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(SourceError::Invalid(
                "the sitemap URL must not carry a user name or password".into(),
            ));
        }
        url.set_fragment(None);
        Ok(SiteSource {
            sitemap: url,
            http: Http::new(None, net)?,
            mask,
            urls: HashMap::new(),
            listed: false,
        })
    }

    fn place(&self) -> String {
        format!("site {}", origin(&self.sitemap))
    }

    /// The rules of the origin's `robots.txt`.
    fn robots(&self) -> Result<Robots, SourceError> {
        let mut url = self.sitemap.clone();
        url.set_path("/robots.txt");
        url.set_query(None);
        let (_, resp) = self.http.get_anywhere(&url)?;
        let status = resp.status();
        match status.as_u16() {
            200..=299 => {}
            // RFC 9309 2.3.1.3: "unavailable", crawling is allowed.
            400..=499 => return Ok(Robots::default()),
            _ => {
                return Err(SourceError::Unavailable(format!(
                    "{url} answered {}: without it, nothing may be crawled (RFC 9309)",
                    status_text(status)
                )));
            }
        }
        // Only the first 500 KiB count; the rest is ignored rather than an error.
        let mut bytes = Vec::new();
        use std::io::Read;
        resp.take(MAX_ROBOTS)
            .read_to_end(&mut bytes)
            .map_err(|e| SourceError::Unavailable(format!("{url}: reading: {e}")))?;
        Ok(Robots::parse(&String::from_utf8_lossy(&bytes), PRODUCT))
    }

    /// A sitemap document's bytes.
    fn get_sitemap(&self, url: &Url) -> Result<Vec<u8>, SourceError> {
        let (_, resp) = self.http.send(&Method::GET, url, &[], None)?;
        let status = resp.status();
        if !status.is_success() {
            let text = status_text(status);
            return Err(match status.as_u16() {
                404 | 410 => SourceError::NotFound(format!("the sitemap {url} answered {text}")),
                401 | 403 => SourceError::Unauthorized(format!(
                    "the sitemap {url} answered {text}: only public sites can be synced"
                )),
                _ => SourceError::Unavailable(format!("the sitemap {url} answered {text}")),
            });
        }
        let bytes = read_body(resp, MAX_SITEMAP, url.as_str(), url).map_err(|e| match e {
            SourceError::TooLarge { .. } => SourceError::Invalid(format!(
                "the sitemap {url} is larger than the sitemap protocol's 50 MB"
            )),
            e => e,
        })?;
        if bytes.starts_with(&[0x1f, 0x8b]) {
            return Err(SourceError::Invalid(format!(
                "the sitemap {url} is compressed (gzip), which is not read: give an \
                 uncompressed sitemap"
            )));
        }
        Ok(bytes)
    }
}

impl Source for SiteSource {
    fn list(&mut self) -> Result<Listing, SourceError> {
        let robots = self.robots()?;
        let root = self.get_sitemap(&self.sitemap)?;
        let mut listing = Listing::default();
        let mut pages: Vec<Page> = Vec::new();
        match parse_sitemap(&root).map_err(|e| self.not_a_sitemap(&self.sitemap, &e))? {
            Sitemap::Urls(urls) => pages.extend(urls),
            Sitemap::Index(children) => {
                for loc in children {
                    let Some(child) = Url::parse(&loc)
                        .ok()
                        .filter(|u| same_origin(u, &self.sitemap))
                    else {
                        listing.problems.push((
                            loc,
                            "a sitemap on another host (or not a URL): not read".into(),
                        ));
                        continue;
                    };
                    let bytes = self.get_sitemap(&child)?;
                    match parse_sitemap(&bytes).map_err(|e| self.not_a_sitemap(&child, &e))? {
                        Sitemap::Urls(urls) => pages.extend(urls),
                        Sitemap::Index(_) => listing.problems.push((
                            loc,
                            "a sitemap index inside a sitemap index: not read (one level only)"
                                .into(),
                        )),
                    }
                }
            }
        }
        let mut by_path: BTreeMap<String, (Url, Item)> = BTreeMap::new();
        let mut seen_urls = std::collections::HashSet::new();
        for page in pages {
            let Ok(mut url) = Url::parse(&page.loc) else {
                listing
                    .problems
                    .push((page.loc, "not a URL: not synced".into()));
                continue;
            };
            url.set_fragment(None);
            if !seen_urls.insert(url.to_string()) {
                continue;
            }
            if !same_origin(&url, &self.sitemap) {
                listing.problems.push((
                    page.loc,
                    format!(
                        "on another host than the sitemap ({}): not synced",
                        origin(&self.sitemap)
                    ),
                ));
                continue;
            }
            let path = page_path(&url);
            let target = match url.query() {
                Some(q) => format!("{}?{q}", url.path()),
                None => url.path().to_owned(),
            };
            if !robots.allows(&target) {
                listing
                    .problems
                    .push((path, "disallowed by robots.txt: not synced".into()));
                continue;
            }
            if let Some((other, _)) = by_path.get(&path) {
                listing.problems.push((
                    path.clone(),
                    format!("{url} has the same path as {other}: not synced"),
                ));
                continue;
            }
            let item = Item {
                path: path.clone(),
                version: page.lastmod.unwrap_or_default(),
                size: None,
            };
            by_path.insert(path, (url, item));
        }
        self.urls.clear();
        for (path, (url, item)) in by_path {
            if self.mask.admits(&path) {
                self.urls.insert(path, url);
                listing.items.push(item);
            }
        }
        self.listed = true;
        Ok(listing)
    }

    fn fetch(&mut self, item: &Item, max_bytes: u64) -> Result<Vec<u8>, SourceError> {
        if !self.listed {
            self.list()?;
        }
        let url = self.urls.get(&item.path).cloned().ok_or_else(|| {
            SourceError::NotFound(format!(
                "{}: {} is not in the sitemap",
                self.place(),
                item.path
            ))
        })?;
        let (_, resp) = self.http.send(&Method::GET, &url, &[], None)?;
        let status = resp.status();
        if !status.is_success() {
            let text = status_text(status);
            return Err(match status.as_u16() {
                404 | 410 => {
                    SourceError::NotFound(format!("{url} answered {text} (the sitemap lists it)"))
                }
                401 | 403 => SourceError::Unauthorized(format!("{url} answered {text}")),
                _ => SourceError::Unavailable(format!("{url} answered {text}")),
            });
        }
        read_body(resp, max_bytes, &item.path, &url)
    }
}

impl SiteSource {
    fn not_a_sitemap(&self, url: &Url, why: &str) -> SourceError {
        SourceError::Invalid(format!("{url} is not a sitemap: {why}"))
    }
}

/// A `<url>` of a sitemap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Page {
    pub(crate) loc: String,
    pub(crate) lastmod: Option<String>,
}

/// What a sitemap document holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Sitemap {
    /// A `<urlset>`: pages.
    Urls(Vec<Page>),
    /// A `<sitemapindex>`: the `<loc>` of other sitemaps.
    Index(Vec<String>),
}

/// Parses a sitemap (`urlset` or `sitemapindex`, any namespace prefix).
pub(crate) fn parse_sitemap(xml: &[u8]) -> Result<Sitemap, String> {
    let mut reader = quick_xml::Reader::from_reader(xml);
    let mut buf = Vec::new();
    let mut stack: Vec<String> = Vec::new();
    let mut root: Option<String> = None;
    let mut text = String::new();
    let (mut loc, mut lastmod) = (None::<String>, None::<String>);
    let mut pages = Vec::new();
    let mut children = Vec::new();
    loop {
        let event = reader
            .read_event_into(&mut buf)
            .map_err(|e| format!("malformed XML: {e}"))?;
        match event {
            Event::Start(e) => {
                let name = e.local_name().as_ref().to_owned();
                if stack.is_empty() {
                    if name != "urlset" && name != "sitemapindex" {
                        return Err(format!(
                            "the root element is <{name}>, not <urlset> or <sitemapindex>"
                        ));
                    }
                    root = Some(name.clone());
                }
                if stack.len() == 1 {
                    (loc, lastmod) = (None, None);
                }
                stack.push(name);
                text.clear();
            }
            // An empty root: a sitemap without pages.
            Event::Empty(e) if stack.is_empty() => {
                let name = e.local_name().as_ref().to_owned();
                if name != "urlset" && name != "sitemapindex" {
                    return Err(format!(
                        "the root element is <{name}>, not <urlset> or <sitemapindex>"
                    ));
                }
                root = Some(name);
            }
            Event::End(_) => {
                let name = stack.pop().unwrap_or_default();
                let value = text.trim().to_owned();
                text.clear();
                match (stack.len(), name.as_str()) {
                    (2, "loc") => loc = Some(value),
                    (2, "lastmod") if !value.is_empty() => lastmod = Some(value),
                    (1, "url") if root.as_deref() == Some("urlset") => {
                        if let Some(l) = loc.take().filter(|l| !l.is_empty()) {
                            pages.push(Page {
                                loc: l,
                                lastmod: lastmod.take(),
                            });
                        }
                    }
                    (1, "sitemap") if root.as_deref() == Some("sitemapindex") => {
                        if let Some(l) = loc.take().filter(|l| !l.is_empty()) {
                            children.push(l);
                        }
                    }
                    _ => {}
                }
            }
            Event::Text(t) => text.push_str(&t.xml10_content()),
            Event::CData(t) => text.push_str(&t.xml10_content()),
            Event::GeneralRef(r) => text.push_str(&resolve_ref(&r)),
            Event::Eof => break,
            _ => {}
        }
        buf.clear();
    }
    if !stack.is_empty() {
        // Truncated: a partial listing would delete the pages the rest lists.
        return Err("the document ends before its elements are closed".into());
    }
    match root.as_deref() {
        Some("urlset") => Ok(Sitemap::Urls(pages)),
        Some(_) => Ok(Sitemap::Index(children)),
        None => Err("no <urlset> or <sitemapindex> element".into()),
    }
}

/// A page's path inside the site (see the module docs).
pub(crate) fn page_path(url: &Url) -> String {
    let raw = url.path().trim_start_matches('/');
    let decoded = percent_encoding::percent_decode_str(raw)
        .decode_utf8()
        .map(|c| c.into_owned())
        .unwrap_or_else(|_| raw.to_owned());
    let mut path = if decoded.is_empty() || decoded.ends_with('/') {
        format!("{decoded}index")
    } else {
        decoded
    };
    let (dir, last) = match path.rsplit_once('/') {
        Some((d, l)) => (format!("{d}/"), l.to_owned()),
        None => (String::new(), path.clone()),
    };
    let (stem, ext) = match last.rsplit_once('.') {
        Some((s, e))
            if !s.is_empty() && KEPT_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()) =>
        {
            (s.to_owned(), e.to_owned())
        }
        _ => (last.clone(), "html".to_owned()),
    };
    path = format!("{dir}{stem}");
    if let Some(q) = url.query() {
        // A `/` in the query would make folders of it.
        path.push('?');
        path.push_str(&q.replace('/', "%2F"));
    }
    path.push('.');
    path.push_str(&ext);
    quarry_ingest::nfc(&path)
}

/// One `Allow` (`true`) or `Disallow` rule and its pattern, percent-encoded as URLs are.
type Rule = (bool, String);

/// The rules of a `robots.txt` that apply to one product token.
#[derive(Debug, Default, Clone)]
pub(crate) struct Robots {
    rules: Vec<Rule>,
}

impl Robots {
    /// The rules for `product` (its groups, else the `*` groups) in a `robots.txt`.
    pub(crate) fn parse(text: &str, product: &str) -> Robots {
        // Groups: (agents, rules).
        let mut groups: Vec<(Vec<String>, Vec<Rule>)> = Vec::new();
        let mut in_agents = false;
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or_default().trim();
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            let (key, value) = (key.trim().to_ascii_lowercase(), value.trim());
            match key.as_str() {
                "user-agent" => {
                    if !in_agents {
                        groups.push((Vec::new(), Vec::new()));
                        in_agents = true;
                    }
                    let token = value
                        .split(|c: char| c == '/' || c.is_whitespace())
                        .next()
                        .unwrap_or_default()
                        .to_ascii_lowercase();
                    if let Some(g) = groups.last_mut() {
                        g.0.push(token);
                    }
                }
                "allow" | "disallow" => {
                    in_agents = false;
                    // A rule before any user-agent line belongs to no group.
                    if let Some(g) = groups.last_mut()
                        && !value.is_empty()
                    {
                        g.1.push((key == "allow", encode_pattern(value)));
                    }
                }
                _ => {
                    // Other lines (sitemap, crawl-delay) do not end the agent lines: RFC 9309
                    // lets parsers ignore them.
                }
            }
        }
        let product = product.to_ascii_lowercase();
        let pick = |name: &str| -> Vec<Rule> {
            groups
                .iter()
                .filter(|(agents, _)| agents.iter().any(|a| a == name))
                .flat_map(|(_, rules)| rules.iter().cloned())
                .collect()
        };
        let own = groups.iter().any(|(agents, _)| agents.contains(&product));
        Robots {
            rules: if own { pick(&product) } else { pick("*") },
        }
    }

    /// Whether a URL's path and query (`/docs/a?x=1`) may be crawled.
    pub(crate) fn allows(&self, target: &str) -> bool {
        if target == "/robots.txt" {
            return true;
        }
        let mut best: Option<(usize, bool)> = None;
        for (allow, pattern) in &self.rules {
            if matches_pattern(pattern, target) {
                let len = pattern.len();
                best = match best {
                    Some((l, a)) if l > len || (l == len && a) => Some((l, a)),
                    _ => Some((len, *allow)),
                };
            }
        }
        best.is_none_or(|(_, allow)| allow)
    }
}

/// A rule's pattern as URLs carry it: characters outside ASCII percent-encoded (UTF-8).
fn encode_pattern(p: &str) -> String {
    let mut out = String::with_capacity(p.len());
    for c in p.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut b = [0u8; 4];
            for byte in c.encode_utf8(&mut b).bytes() {
                out.push_str(&format!("%{byte:02X}"));
            }
        }
    }
    out
}

/// Whether `pattern` (`*` any run of characters, a final `$` the end) matches the start of
/// `target`.
fn matches_pattern(pattern: &str, target: &str) -> bool {
    let (pattern, anchored) = match pattern.strip_suffix('$') {
        Some(p) => (p, true),
        None => (pattern, false),
    };
    let p = pattern.as_bytes();
    let t = target.as_bytes();
    // Classic wildcard matching with backtracking to the last `*`.
    let (mut pi, mut ti) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    loop {
        if pi == p.len() {
            if !anchored || ti == t.len() {
                return true;
            }
        } else if p[pi] == b'*' {
            star = Some((pi, ti));
            pi += 1;
            continue;
        } else if ti < t.len() && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
            continue;
        }
        match star {
            Some((sp, st)) if st < t.len() => {
                star = Some((sp, st + 1));
                pi = sp + 1;
                ti = st + 1;
            }
            _ => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn robots_rules_longest_match_and_groups() {
        let text = "\
# comment
User-agent: Googlebot
Disallow: /

User-agent: *
Disallow: /private/
Allow: /private/open/
Disallow: /*.pdf$
Disallow: /search
Allow: /search/about
Disallow: /tmp # trailing comment
Sitemap: https://example.com/sitemap.xml
Disallow: /dup
Allow: /dup
Disallow: /caf\u{e9}/
";
        let r = Robots::parse(text, "quarry");
        for (target, allowed) in [
            ("/", true),
            ("/docs/intro", true),
            ("/private/x", false),
            ("/private/open/x", true),
            ("/guide.pdf", false),
            ("/guide.pdf?x=1", true),
            ("/search", false),
            ("/search?q=a", false),
            ("/search/about", true),
            ("/tmp", false),
            ("/tmpfile", false),
            ("/dup", true),
            ("/caf%C3%A9/menu", false),
            ("/robots.txt", true),
        ] {
            assert_eq!(r.allows(target), allowed, "{target}");
        }

        // A group of its own wins over `*`; several lines name one group; an empty
        // Disallow allows everything.
        let text = "User-agent: *\nDisallow: /\n\nUser-agent: other\nUser-agent: Quarry/1.0\nDisallow: /drafts\n";
        let r = Robots::parse(text, "quarry");
        assert!(r.allows("/docs") && !r.allows("/drafts/a"));
        let r = Robots::parse("User-agent: *\nDisallow:\n", "quarry");
        assert!(r.allows("/anything"));
        let r = Robots::parse("Disallow: /orphan\n", "quarry");
        assert!(
            r.allows("/orphan"),
            "rules before any user-agent belong to no group"
        );
        assert!(Robots::default().allows("/x"));
    }

    #[test]
    fn wildcards() {
        assert!(matches_pattern("/a*b", "/axxb/c"));
        assert!(matches_pattern("/a*b$", "/axxb"));
        assert!(!matches_pattern("/a*b$", "/axxbc"));
        assert!(matches_pattern("*", "/x"));
        assert!(matches_pattern("/*/x", "/1/2/x"));
        assert!(!matches_pattern("/b", "/a"));
        assert!(matches_pattern("/$", "/"));
        assert!(!matches_pattern("/$", "/a"));
    }

    #[test]
    fn sitemaps_and_indexes() {
        let xml = br#"<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <url><loc>https://example.com/</loc><lastmod>2025-07-01</lastmod></url>
  <url><loc> https://example.com/docs/a?x=1&amp;y=2 </loc></url>
  <url><loc><![CDATA[https://example.com/c]]></loc><changefreq>daily</changefreq></url>
  <url><lastmod>2025-01-01</lastmod></url>
</urlset>"#;
        assert_eq!(
            parse_sitemap(xml).unwrap(),
            Sitemap::Urls(vec![
                Page {
                    loc: "https://example.com/".into(),
                    lastmod: Some("2025-07-01".into())
                },
                Page {
                    loc: "https://example.com/docs/a?x=1&y=2".into(),
                    lastmod: None
                },
                Page {
                    loc: "https://example.com/c".into(),
                    lastmod: None
                },
            ])
        );
        let xml = br#"<sm:sitemapindex xmlns:sm="http://www.sitemaps.org/schemas/sitemap/0.9">
<sm:sitemap><sm:loc>https://example.com/a.xml</sm:loc><sm:lastmod>2025</sm:lastmod></sm:sitemap>
<sm:sitemap><sm:loc>https://example.com/b.xml</sm:loc></sm:sitemap></sm:sitemapindex>"#;
        assert_eq!(
            parse_sitemap(xml).unwrap(),
            Sitemap::Index(vec![
                "https://example.com/a.xml".into(),
                "https://example.com/b.xml".into()
            ])
        );
        assert_eq!(parse_sitemap(b"<urlset/>").unwrap(), Sitemap::Urls(vec![]));
        for bad in [
            &b"<html><body>Not found</body></html>"[..],
            b"<urlset><url><loc>x</loc></url>",
            b"",
            b"plain text",
        ] {
            assert!(
                parse_sitemap(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn page_paths_end_in_a_converted_extension() {
        for (url, path) in [
            ("https://e.com/", "index.html"),
            ("https://e.com", "index.html"),
            ("https://e.com/docs/", "docs/index.html"),
            ("https://e.com/docs/intro", "docs/intro.html"),
            ("https://e.com/docs/intro.html", "docs/intro.html"),
            ("https://e.com/docs/intro.HTM", "docs/intro.HTM"),
            ("https://e.com/guide.pdf", "guide.pdf"),
            ("https://e.com/v1.2", "v1.2.html"),
            ("https://e.com/page.php", "page.php.html"),
            ("https://e.com/search?q=a", "search?q=a.html"),
            ("https://e.com/file.pdf?v=2", "file?v=2.pdf"),
            ("https://e.com/?p=a/b", "index?p=a%2Fb.html"),
            ("https://e.com/caf%C3%A9/men%C3%BC", "café/menü.html"),
            ("https://e.com/a%20b/", "a b/index.html"),
            ("https://e.com/.hidden", ".hidden.html"),
        ] {
            assert_eq!(page_path(&Url::parse(url).unwrap()), path, "{url}");
        }
    }

    #[test]
    fn sources_are_checked() {
        assert!(SiteSource::new("https://e.com/sitemap.xml", FileMask::default()).is_ok());
        for bad in ["ftp://e.com/sitemap.xml", "https://u:p@e.com/s.xml", "nope"] {
            assert!(
                matches!(
                    SiteSource::new(bad, FileMask::default()),
                    Err(SourceError::Invalid(_))
                ),
                "{bad}"
            );
        }
    }
}
