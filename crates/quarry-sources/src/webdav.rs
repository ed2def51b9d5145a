//! A folder on a WebDAV server (Nextcloud, ownCloud, SharePoint, Apache `mod_dav`,
//! `rclone serve webdav`, …), over HTTP(S) with reqwest's blocking client.
//!
//! **Listing** is `PROPFIND` with `Depth: 1` on the folder, then on every sub-folder it
//! names, one request per folder (many servers refuse `Depth: infinity`). The multistatus
//! answers are parsed with `quick-xml`, namespaces resolved (`DAV:` under any prefix). An
//! item's path is its `href`, percent-decoded, after the folder's own path; the `href`s
//! listed are kept, so `fetch` asks for exactly what the server named. Entries outside the
//! folder are ignored; a name that is not UTF-8 is a listing problem.
//!
//! **Versions** are the `getetag` property; a server that gives none gets
//! `getlastmodified` and `getcontentlength` (`Tue, 01 Jul 2025 10:00:00 GMT|1234`), which
//! misses a rewrite within the same second to the same length — a server without ETags
//! cannot do better; with neither, the version is empty and the item is fetched every sync
//! (the engine then compares content hashes).
//!
//! **Credentials**: a [`Secret`] with a user name is sent as HTTP basic authentication on
//! every request, and on redirects only within the same host (redirects elsewhere are not
//! followed). Never in a URL, an error or a log.
//!
//! **Errors**: 401 and 403 are [`SourceError::Unauthorized`]; the folder answering 404 is
//! [`SourceError::NotFound`]; a sub-folder that vanished between two requests of a listing
//! is skipped (it is gone); any other failure of any folder fails the whole listing — a
//! listing without that folder's files would delete their documents. 5xx and transport
//! failures are [`SourceError::Unavailable`].

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use quick_xml::events::Event;
use quick_xml::name::{Namespace, ResolveResult};
use reqwest::Method;
use url::Url;

use crate::error::SourceError;
use crate::http::{Http, read_body, same_origin, status_text};
use crate::location::Secret;
use crate::mask::FileMask;
use crate::source::{Item, Listing, Source};

/// The largest multistatus answer read for one folder.
const MAX_MULTISTATUS: u64 = 64 * 1024 * 1024;
/// The most folders one listing visits.
const MAX_FOLDERS: usize = 100_000;

const PROPFIND_BODY: &str = r#"<?xml version="1.0" encoding="utf-8"?>
<D:propfind xmlns:D="DAV:"><D:prop><D:resourcetype/><D:getetag/><D:getlastmodified/><D:getcontentlength/></D:prop></D:propfind>"#;

/// A WebDAV source.
pub struct WebDavSource {
    /// The folder, its path ending in `/`.
    root: Url,
    http: Http,
    mask: FileMask,
    /// Each listed path's URL, as the server named it.
    urls: HashMap<String, Url>,
}

impl std::fmt::Debug for WebDavSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebDavSource")
            .field("root", &self.root.as_str())
            .finish_non_exhaustive()
    }
}

/// One `<response>` of a multistatus.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    /// The `href`, as sent (percent-encoded).
    pub(crate) href: String,
    pub(crate) collection: bool,
    pub(crate) etag: Option<String>,
    pub(crate) last_modified: Option<String>,
    pub(crate) length: Option<u64>,
    /// The response's own status, when it has one instead of property stats.
    pub(crate) status: Option<String>,
}

impl WebDavSource {
    /// The folder at `url` (`https://…`), with a credential when the server wants one.
    pub fn new(url: &str, secret: Option<&Secret>, mask: FileMask) -> Result<Self, SourceError> {
        WebDavSource::new_with(url, secret, mask, None)
    }

    /// [`WebDavSource::new`], its every request under the outbound address guard `net` when
    /// given (`crate::open_with`).
    pub fn new_with(
        url: &str,
        secret: Option<&Secret>,
        mask: FileMask,
        net: Option<&quarry_netguard::NetPolicy>,
    ) -> Result<Self, SourceError> {
        // The URL every parser reads alike, as re-serialised: what is fetched is what the
        // guard checks.
        let mut root = crate::location::unambiguous(url, "WebDAV URL")?;
        if !matches!(root.scheme(), "http" | "https") {
            return Err(SourceError::Invalid(format!(
                "the WebDAV URL {url:?} must start with https:// (or http://)"
            )));
        }
        if !root.username().is_empty() || root.password().is_some() {
            return Err(SourceError::Invalid(
                "the WebDAV URL must not carry a user name or password".into(),
            ));
        }
        if secret.is_some_and(|s| s.username().is_none()) {
            return Err(SourceError::Invalid(
                "a WebDAV credential needs its user name (HTTP basic authentication)".into(),
            ));
        }
        root.set_fragment(None);
        root.set_query(None);
        if !root.path().ends_with('/') {
            let p = format!("{}/", root.path());
            root.set_path(&p);
        }
        Ok(WebDavSource {
            root,
            http: Http::new(secret, net)?,
            mask,
            urls: HashMap::new(),
        })
    }

    fn place(&self) -> String {
        format!("WebDAV folder {}", self.root)
    }

    /// `PROPFIND` with `Depth: 1`; `None` when the folder is not there (404).
    fn propfind(&self, folder: &Url) -> Result<Option<Vec<Entry>>, SourceError> {
        let method = Method::from_bytes(b"PROPFIND").map_err(|e| {
            SourceError::Invalid(format!("PROPFIND is not an HTTP method here: {e}"))
        })?;
        let (_, resp) = self.http.send(
            &method,
            folder,
            &[
                ("Depth", "1"),
                ("Content-Type", "application/xml; charset=utf-8"),
            ],
            Some(PROPFIND_BODY.as_bytes()),
        )?;
        let status = resp.status();
        match status.as_u16() {
            207 => {}
            404 | 410 => return Ok(None),
            code => return Err(self.status_error(code, &status_text(status), folder)),
        }
        let body = read_body(resp, MAX_MULTISTATUS, folder.as_str(), folder)?;
        parse_multistatus(&body)
            .map(Some)
            .map_err(|e| SourceError::Unavailable(format!("{folder}: not a WebDAV answer: {e}")))
    }

    fn status_error(&self, code: u16, text: &str, url: &Url) -> SourceError {
        match code {
            401 | 403 => {
                let hint = if self.http.has_credential() {
                    "the server refused the user name and password"
                } else {
                    "the server needs a user name and password"
                };
                SourceError::Unauthorized(format!("{}: {hint} ({text})", self.place()))
            }
            404 | 410 => SourceError::NotFound(format!("{url}: {text}")),
            405 | 501 => {
                SourceError::Invalid(format!("{url} answered {text}: it is not a WebDAV folder"))
            }
            _ => SourceError::Unavailable(format!("{url} answered {text}")),
        }
    }

    /// The path of `url` inside the folder (decoded, without a trailing `/`); `None` for a
    /// URL outside it. `Err` carries the raw path when it is not UTF-8.
    fn relative(&self, url: &Url) -> Option<Result<String, String>> {
        if !same_origin(url, &self.root) {
            return None;
        }
        let root = decode(self.root.path()).ok()?;
        let rest = url.path().to_owned();
        let decoded = match decode(&rest) {
            Ok(d) => d,
            Err(()) => {
                let raw = rest.strip_prefix(self.root.path())?;
                return Some(Err(raw.to_owned()));
            }
        };
        let root_bare = root.trim_end_matches('/');
        if decoded.trim_end_matches('/') == root_bare {
            return Some(Ok(String::new()));
        }
        let rel = decoded.strip_prefix(&root)?;
        Some(Ok(rel.trim_end_matches('/').to_owned()))
    }
}

/// Percent-decodes a URL path as UTF-8.
fn decode(path: &str) -> Result<String, ()> {
    percent_encoding::percent_decode_str(path)
        .decode_utf8()
        .map(|c| c.into_owned())
        .map_err(|_| ())
}

impl Source for WebDavSource {
    fn list(&mut self) -> Result<Listing, SourceError> {
        let mut listing = Listing::default();
        let mut items: BTreeMap<String, (Url, Item)> = BTreeMap::new();
        let mut queue: VecDeque<Url> = VecDeque::from([self.root.clone()]);
        let mut seen: HashSet<String> = HashSet::from([String::new()]);
        let mut first = true;
        while let Some(folder) = queue.pop_front() {
            let Some(entries) = self.propfind(&folder)? else {
                if first {
                    return Err(SourceError::NotFound(format!(
                        "{}: no such folder (404)",
                        self.place()
                    )));
                }
                // Deleted since its parent was listed: it is gone.
                continue;
            };
            first = false;
            for entry in entries {
                if entry
                    .status
                    .as_deref()
                    .is_some_and(|s| !status_is_success(s))
                {
                    continue;
                }
                let Ok(url) = folder.join(&entry.href) else {
                    continue;
                };
                let rel = match self.relative(&url) {
                    None => continue,
                    Some(Ok(rel)) => rel,
                    Some(Err(raw)) => {
                        listing
                            .problems
                            .push((raw, "the name is not valid UTF-8: not synced".into()));
                        continue;
                    }
                };
                if rel.is_empty() {
                    if !entry.collection && folder == self.root {
                        // A file there lists only itself: nothing, which would delete every
                        // document.
                        return Err(SourceError::Invalid(format!(
                            "{} is a file, not a folder",
                            self.root
                        )));
                    }
                    continue;
                }
                let path = quarry_ingest::nfc(&rel);
                if entry.collection {
                    if seen.insert(path.clone()) {
                        if seen.len() > MAX_FOLDERS {
                            return Err(SourceError::Unavailable(format!(
                                "{}: more than {MAX_FOLDERS} folders",
                                self.place()
                            )));
                        }
                        let mut sub = url.clone();
                        if !sub.path().ends_with('/') {
                            let p = format!("{}/", sub.path());
                            sub.set_path(&p);
                        }
                        queue.push_back(sub);
                    }
                    continue;
                }
                if path
                    .split('/')
                    .any(|s| s.is_empty() || s == "." || s == "..")
                {
                    listing
                        .problems
                        .push((path, "not a usable file name: not synced".into()));
                    continue;
                }
                let version = match (&entry.etag, &entry.last_modified, entry.length) {
                    (Some(tag), _, _) => tag.clone(),
                    (None, Some(modified), length) => {
                        format!(
                            "{modified}|{}",
                            length.map(|l| l.to_string()).unwrap_or_default()
                        )
                    }
                    (None, None, Some(length)) => format!("|{length}"),
                    (None, None, None) => String::new(),
                };
                items.insert(
                    path.clone(),
                    (
                        url,
                        Item {
                            path,
                            version,
                            size: entry.length,
                        },
                    ),
                );
            }
        }
        self.urls.clear();
        for (path, (url, item)) in items {
            if self.mask.admits(&path) {
                self.urls.insert(path, url);
                listing.items.push(item);
            }
        }
        Ok(listing)
    }

    fn fetch(&mut self, item: &Item, max_bytes: u64) -> Result<Vec<u8>, SourceError> {
        if let Some(size) = item.size.filter(|s| *s > max_bytes) {
            return Err(SourceError::TooLarge {
                path: item.path.clone(),
                size,
                limit: max_bytes,
            });
        }
        let url = match self.urls.get(&item.path) {
            Some(u) => u.clone(),
            None => {
                if item
                    .path
                    .split('/')
                    .any(|s| s.is_empty() || s == "." || s == "..")
                {
                    return Err(SourceError::Invalid(format!(
                        "invalid path {:?}",
                        item.path
                    )));
                }
                let encoded: Vec<String> = item
                    .path
                    .split('/')
                    .map(|s| percent_encoding::utf8_percent_encode(s, SEGMENT).to_string())
                    .collect();
                self.root.join(&encoded.join("/")).map_err(|e| {
                    SourceError::Invalid(format!("invalid path {:?}: {e}", item.path))
                })?
            }
        };
        let (_, resp) = self.http.send(&Method::GET, &url, &[], None)?;
        let status = resp.status();
        if !status.is_success() {
            return Err(match status.as_u16() {
                404 | 410 => SourceError::NotFound(format!(
                    "{}: {} is no longer there ({})",
                    self.place(),
                    item.path,
                    status_text(status)
                )),
                code => self.status_error(code, &status_text(status), &url),
            });
        }
        read_body(resp, max_bytes, &item.path, &url)
    }
}

/// What a path segment percent-encodes: everything but unreserved characters.
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Whether a `HTTP/1.1 200 OK` status line is a success.
fn status_is_success(line: &str) -> bool {
    line.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse::<u16>().ok())
        .is_some_and(|c| (200..300).contains(&c))
}

/// The responses of a `DAV:multistatus` document. Properties count only from a `propstat`
/// whose status is a success.
pub(crate) fn parse_multistatus(xml: &[u8]) -> Result<Vec<Entry>, String> {
    const DAV: Namespace<'static> = Namespace("DAV:");
    let mut reader = quick_xml::NsReader::from_reader(xml);
    let mut buf = Vec::new();
    let mut p = Multistatus::default();
    loop {
        let (ns, event) = reader
            .read_resolved_event_into(&mut buf)
            .map_err(|e| format!("malformed XML: {e}"))?;
        let dav_name = |local: &str| match ns {
            ResolveResult::Bound(n) if n == DAV => local.to_owned(),
            _ => String::new(),
        };
        match event {
            Event::Start(e) => p.start(dav_name(e.local_name().as_ref()))?,
            Event::Empty(e) => {
                p.start(dav_name(e.local_name().as_ref()))?;
                p.end();
            }
            Event::End(_) => p.end(),
            Event::Text(t) => p.text.push_str(&t.xml10_content()),
            Event::CData(t) => p.text.push_str(&t.xml10_content()),
            Event::GeneralRef(r) => p.text.push_str(&resolve_ref(&r)),
            Event::Eof => break,
            _ => {}
        }
        buf.clear();
    }
    if !p.saw_root {
        return Err("no DAV:multistatus element".into());
    }
    if !p.stack.is_empty() {
        // Truncated: a partial listing would delete what the rest holds.
        return Err("the document ends before its elements are closed".into());
    }
    Ok(p.out)
}

/// The state of [`parse_multistatus`].
#[derive(Default)]
struct Multistatus {
    /// Open elements: DAV local names, other elements as "" (innermost last).
    stack: Vec<String>,
    entry: Option<Entry>,
    /// Properties of the current `propstat`, applied when its status is a success.
    pending: Entry,
    propstat_status: Option<String>,
    text: String,
    saw_root: bool,
    out: Vec<Entry>,
}

impl Multistatus {
    fn start(&mut self, name: String) -> Result<(), String> {
        if self.stack.is_empty() {
            if name != "multistatus" {
                return Err("the root element is not DAV:multistatus".into());
            }
            self.saw_root = true;
        }
        match (self.stack.last().map(String::as_str), name.as_str()) {
            (Some("multistatus"), "response") => self.entry = Some(Entry::default()),
            (Some("response"), "propstat") => {
                self.pending = Entry::default();
                self.propstat_status = None;
            }
            (Some("resourcetype"), "collection") => self.pending.collection = true,
            _ => {}
        }
        self.text.clear();
        self.stack.push(name);
        Ok(())
    }

    fn end(&mut self) {
        let name = self.stack.pop().unwrap_or_default();
        let value = self.text.trim().to_owned();
        self.text.clear();
        let pending = &mut self.pending;
        match (self.stack.last().map(String::as_str), name.as_str()) {
            (Some("response"), "href") => {
                if let Some(en) = self.entry.as_mut() {
                    en.href = value;
                }
            }
            (Some("response"), "status") => {
                if let Some(en) = self.entry.as_mut() {
                    en.status = Some(value);
                }
            }
            (Some("propstat"), "status") => self.propstat_status = Some(value),
            (Some("prop"), "getetag") if !value.is_empty() => pending.etag = Some(value),
            (Some("prop"), "getlastmodified") if !value.is_empty() => {
                pending.last_modified = Some(value);
            }
            (Some("prop"), "getcontentlength") => pending.length = value.parse().ok(),
            (Some("response"), "propstat") => {
                let ok = self
                    .propstat_status
                    .as_deref()
                    .is_none_or(status_is_success);
                if let (true, Some(en)) = (ok, self.entry.as_mut()) {
                    en.collection |= pending.collection;
                    en.etag = en.etag.take().or(pending.etag.take());
                    en.last_modified = en.last_modified.take().or(pending.last_modified.take());
                    en.length = en.length.or(pending.length);
                }
            }
            (Some("multistatus"), "response") => {
                if let Some(en) = self.entry.take()
                    && !en.href.is_empty()
                {
                    self.out.push(en);
                }
            }
            _ => {}
        }
    }
}

/// The text an entity or character reference (`&amp;`, `&#233;`) stands for.
pub(crate) fn resolve_ref(r: &quick_xml::events::BytesRef<'_>) -> String {
    if let Ok(Some(c)) = r.resolve_char_ref() {
        return c.to_string();
    }
    match r.xml10_content().as_ref() {
        "amp" => "&".to_owned(),
        "lt" => "<".to_owned(),
        "gt" => ">".to_owned(),
        "quot" => "\"".to_owned(),
        "apos" => "'".to_owned(),
        other => format!("&{other};"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multistatus_with_any_prefix_and_failed_propstats() {
        // Apache-style: `lp1:` live properties, a default namespace, a 404 propstat for the
        // properties a collection lacks, and a response with its own status.
        let xml = br#"<?xml version="1.0" encoding="utf-8"?>
<D:multistatus xmlns:D="DAV:" xmlns:ns0="DAV:">
<D:response xmlns:lp1="DAV:">
  <D:href>/dav/</D:href>
  <D:propstat><D:prop><lp1:resourcetype><D:collection/></lp1:resourcetype>
    <lp1:getlastmodified>Tue, 01 Jul 2025 10:00:00 GMT</lp1:getlastmodified></D:prop>
    <D:status>HTTP/1.1 200 OK</D:status></D:propstat>
  <D:propstat><D:prop><D:getetag/><D:getcontentlength/></D:prop>
    <D:status>HTTP/1.1 404 Not Found</D:status></D:propstat>
</D:response>
<D:response>
  <D:href>/dav/a%20b&amp;c.md</D:href>
  <D:propstat><D:prop><D:resourcetype/><D:getetag>"abc-1"</D:getetag>
    <D:getcontentlength>12</D:getcontentlength></D:prop>
    <D:status>HTTP/1.1 200 OK</D:status></D:propstat>
</D:response>
<D:response><D:href>/dav/gone.md</D:href><D:status>HTTP/1.1 404 Not Found</D:status></D:response>
</D:multistatus>"#;
        let entries = parse_multistatus(xml).unwrap();
        assert_eq!(entries.len(), 3);
        assert_eq!(entries[0].href, "/dav/");
        assert!(entries[0].collection);
        assert_eq!(entries[0].etag, None);
        assert_eq!(
            entries[0].last_modified.as_deref(),
            Some("Tue, 01 Jul 2025 10:00:00 GMT")
        );
        assert_eq!(entries[1].href, "/dav/a%20b&c.md");
        assert!(!entries[1].collection);
        assert_eq!(entries[1].etag.as_deref(), Some("\"abc-1\""));
        assert_eq!(entries[1].length, Some(12));
        assert_eq!(entries[2].status.as_deref(), Some("HTTP/1.1 404 Not Found"));
        assert!(!status_is_success("HTTP/1.1 404 Not Found"));
        assert!(status_is_success("HTTP/1.1 200 OK"));

        // A default namespace, no prefix at all (lighttpd, some Java servers).
        let xml = br#"<multistatus xmlns="DAV:"><response><href>http://h/dav/x.md</href>
<propstat><prop><getlastmodified>Mon, 30 Jun 2025 08:00:00 GMT</getlastmodified>
<getcontentlength>3</getcontentlength><resourcetype/></prop><status>HTTP/1.1 200 OK</status>
</propstat></response></multistatus>"#;
        let entries = parse_multistatus(xml).unwrap();
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].href, "http://h/dav/x.md");
        assert_eq!(entries[0].length, Some(3));
    }

    #[test]
    fn what_is_not_a_multistatus_is_refused() {
        for bad in [
            &b"<html><body>Login</body></html>"[..],
            b"<multistatus><response/></multistatus>",
            b"<D:multistatus xmlns:D=\"DAV:\"><D:response>",
            b"",
        ] {
            assert!(
                parse_multistatus(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn paths_inside_the_folder() {
        let src = WebDavSource::new(
            "https://h.example/dav/Team%20Docs",
            None,
            FileMask::default(),
        )
        .unwrap();
        assert_eq!(src.root.as_str(), "https://h.example/dav/Team%20Docs/");
        let rel = |u: &str| src.relative(&Url::parse(u).unwrap());
        assert_eq!(
            rel("https://h.example/dav/Team%20Docs/"),
            Some(Ok(String::new()))
        );
        assert_eq!(
            rel("https://h.example/dav/Team%20Docs"),
            Some(Ok(String::new()))
        );
        assert_eq!(
            rel("https://h.example/dav/Team Docs/sub/%C3%A9t%C3%A9.md"),
            Some(Ok("sub/été.md".into()))
        );
        assert_eq!(
            rel("https://h.example/dav/Team%20Docs/sub/"),
            Some(Ok("sub".into()))
        );
        assert_eq!(rel("https://h.example/dav/Other/x.md"), None);
        assert_eq!(rel("https://other.example/dav/Team%20Docs/x.md"), None);
        assert_eq!(
            rel("https://h.example/dav/Team%20Docs/bad%FF.md"),
            Some(Err("bad%FF.md".into()))
        );
        assert!(matches!(
            WebDavSource::new(
                "https://h.example/dav",
                Some(&Secret::new(None, "pw").unwrap()),
                FileMask::default()
            ),
            Err(SourceError::Invalid(_))
        ));
    }
}
