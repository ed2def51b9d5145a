//! Sources that sync themselves (issue 43): where a knowledge base's documents come from
//! when nobody uploads them by hand.
//!
//! A [`Source`] lists what it holds now — an [`Item`] per file, with a *version* the source
//! gives for free (a Git blob id, a size and modification stamp, an ETag) — and fetches an
//! item's bytes. What a sync does is decided in two pure steps, apart from any source or
//! store:
//!
//! 1. [`plan`]: the listing against what the last sync remembered ([`Known`]): items whose
//!    version is new or changed are fetched, the rest are unchanged without reading a byte,
//!    and remembered paths missing from the listing are gone.
//! 2. [`resolve`]: the fetched items' content hashes decide the rest — a gone path whose
//!    content reappears at a new path is a **rename** (the document keeps its id), a path
//!    whose bytes did not change is only re-versioned (a `touch`), the other new paths are
//!    added, the other changed paths changed, and what is left gone is deleted.
//!
//! The kinds: [`folder`] (a directory on this machine, versions from `stat`), [`git`] (a
//! repository over HTTP(S) or on disk, through the `git` command, versions are blob ids),
//! [`s3`] (a bucket or a prefix of one, AWS or S3-compatible, versions are ETags),
//! [`webdav`] (a folder on a WebDAV server, versions are ETags) and [`site`] (the pages a
//! web site's sitemap lists, as its `robots.txt` allows, versions are `<lastmod>`). Where a
//! source is configured is a [`Location`]; its credential is a [`Secret`], which never
//! prints and never enters a child process's environment or command line, a URL or an
//! error.

mod error;
pub mod folder;
pub mod git;
mod http;
mod location;
mod mask;
mod plan;
pub mod readers;
pub mod s3;
pub mod site;
mod source;
pub mod watch;
pub mod webdav;

pub use error::SourceError;
pub use location::{Location, Secret};
pub use mask::FileMask;
pub use plan::{Change, Known, Outcome, Plan, plan, resolve};
pub use quarry_netguard::{Cidr, NetPolicy, Refused};
pub use readers::{CodeOwners, CompiledMapping, ReaderMapping, ReaderRule};
pub use source::{Item, Listing, Source, is_within};
/// Opens the source a location names, with its credential and its file mask, reaching any
/// address (for the machine's owner: see [`open_with`]). `work_dir` is where a source may
/// keep a local copy between syncs (a Git source's bare clone); it is created when missing
/// (by the sources that use it).
///
/// Credentials: a folder takes none; Git sends the secret as a token or password; S3 signs
/// with the secret's user name as the access key id and its password as the secret key
/// (without one, requests go unsigned: public buckets only, never ambient AWS credentials);
/// WebDAV sends user name and password as basic authentication; a site takes none (a
/// secret given for a site is refused, so nobody believes it is used).
pub fn open(
    location: &Location,
    secret: Option<&Secret>,
    mask: FileMask,
    work_dir: &std::path::Path,
) -> Result<Box<dyn Source>, SourceError> {
    open_with(location, secret, mask, work_dir, None)
}

/// [`open`], with the outbound address guard when `net` is given (a sync for someone other
/// than the machine's owner): every request the source makes — Git over http(s), S3, WebDAV,
/// a site — reaches only public addresses and the ranges `net` allow-lists, checked on the
/// addresses a name resolves to when the connection is made, and on every redirect. A
/// refusal is [`SourceError::Refused`]. A folder, or a Git repository on this machine,
/// makes no request (only the machine's owner attaches those).
pub fn open_with(
    location: &Location,
    secret: Option<&Secret>,
    mask: FileMask,
    work_dir: &std::path::Path,
    net: Option<&NetPolicy>,
) -> Result<Box<dyn Source>, SourceError> {
    match location {
        Location::Folder { path } => Ok(Box::new(folder::FolderSource::new(path, mask)?)),
        Location::Git { url, branch, path } => Ok(Box::new(git::GitSource::new_with(
            git::GitOptions {
                url: url.clone(),
                branch: branch.clone(),
                subdir: path.clone(),
                secret: secret.cloned(),
            },
            mask,
            work_dir,
            net,
        )?)),
        Location::S3 {
            bucket,
            prefix,
            endpoint,
            region,
        } => Ok(Box::new(s3::S3Source::new_with(
            s3::S3Options {
                bucket: bucket.clone(),
                prefix: prefix.clone(),
                endpoint: endpoint.clone(),
                region: region.clone(),
                secret: secret.cloned(),
                page_size: s3::DEFAULT_PAGE_SIZE,
            },
            mask,
            net,
        )?)),
        Location::WebDav { url } => Ok(Box::new(webdav::WebDavSource::new_with(
            url, secret, mask, net,
        )?)),
        Location::Site { sitemap } => {
            if secret.is_some() {
                return Err(SourceError::Invalid(
                    "a site source takes no credential: only public pages are synced".into(),
                ));
            }
            Ok(Box::new(site::SiteSource::new_with(sitemap, mask, net)?))
        }
    }
}

/// Checks, before a source is attached for someone other than the machine's owner, every
/// URL its location names (a Git URL, an S3 endpoint, a WebDAV folder, a sitemap) against
/// the outbound address guard: the scheme, a literal address, a metadata host name, and the
/// addresses a name resolves to now. A name that does not resolve passes (its sync will
/// say so); the guard checks again at every connection, so a name that later resolves
/// elsewhere is still refused. A folder and a Git repository on this machine make no
/// request and pass here (only the machine's owner may attach them: the engine's rule).
pub fn check_location(location: &Location, net: &NetPolicy) -> Result<(), SourceError> {
    match location_refusal(location, net)? {
        Some((url, r)) => Err(http::refused(&url, &url, &r)),
        None => Ok(()),
    }
}

/// What [`check_location`] would refuse, without making it an error: the URL the guard
/// refuses and why (its [`Refused::allow_hint`] names the range that would let it
/// through), or `None` when `net` lets every URL of the location through (or it names none).
/// A URL that does not parse is [`SourceError::Invalid`].
pub fn location_refusal(
    location: &Location,
    net: &NetPolicy,
) -> Result<Option<(url::Url, Refused)>, SourceError> {
    let urls: Vec<&str> = match location {
        Location::Folder { .. } => Vec::new(),
        Location::Git { url, .. } => {
            if url.starts_with("http://") || url.starts_with("https://") {
                vec![url.as_str()]
            } else {
                Vec::new()
            }
        }
        Location::S3 { endpoint, .. } => endpoint.iter().map(String::as_str).collect(),
        Location::WebDav { url } => vec![url.as_str()],
        Location::Site { sitemap } => vec![sitemap.as_str()],
    };
    for text in urls {
        let url = url::Url::parse(text)
            .map_err(|e| SourceError::Invalid(format!("invalid URL {text:?}: {e}")))?;
        if let Err(r) = quarry_netguard::check_url(net, &url) {
            return Ok(Some((url, r)));
        }
        if let (Some(url::Host::Domain(host)), Some(port)) =
            (url.host(), url.port_or_known_default())
        {
            match quarry_netguard::resolve_blocking(net, host, port) {
                Ok(_) => {}
                Err(quarry_netguard::ResolveError::Refused(r)) => return Ok(Some((url, r))),
                // Not resolvable now: the sync will tell (and be checked then).
                Err(_) => {}
            }
        }
    }
    Ok(None)
}
