//! The blocking HTTP client the WebDAV and site sources share: rustls with ring, redirects
//! followed by hand and only within the same host (so a credential never leaves it), bodies
//! read with a size limit, and errors that name the URL asked for, never a credential.
//!
//! Under the outbound address guard (a sync for someone other than the machine's owner) the
//! client resolves names through `quarry_netguard::GuardedResolver` (a connection goes only
//! to an address the policy allows, checked when it is made), uses no proxy, and every URL
//! it sends to — the first and each redirect's — passes `quarry_netguard::check_url` first
//! (the scheme, literal addresses, metadata host names).

use std::io::Read;
use std::sync::Arc;
use std::time::Duration;

use quarry_netguard::{GuardedResolver, NetPolicy, Refused};

use reqwest::Method;
use reqwest::blocking::{Client, Response};
use reqwest::header::{HeaderValue, LOCATION};
use url::Url;

use crate::error::SourceError;
use crate::location::Secret;

/// Redirects followed before giving up.
const MAX_REDIRECTS: usize = 5;
/// Connecting, and every wait for a response head or a read of a body.
const STALL: Duration = Duration::from_secs(60);
const CONNECT: Duration = Duration::from_secs(15);

/// What the source sends as `User-Agent` (`quarry` is the product token `robots.txt`
/// groups name).
pub(crate) const USER_AGENT: &str = concat!("quarry/", env!("CARGO_PKG_VERSION"));

/// A blocking client and the basic-authentication credential it sends.
///
/// Blocking: call it from plain threads, never from an async runtime's worker (reqwest's
/// blocking client panics there).
pub(crate) struct Http {
    client: Client,
    basic: Option<(String, String)>,
    /// The outbound address guard; `None`: any address (the machine's owner).
    net: Option<NetPolicy>,
}

impl Http {
    /// A client; with `basic`, every request carries it as HTTP basic authentication; with
    /// `net`, every request goes through the outbound address guard (module docs).
    pub(crate) fn new(
        basic: Option<&Secret>,
        net: Option<&NetPolicy>,
    ) -> Result<Http, SourceError> {
        quarry_netguard::ensure_crypto_provider();
        let mut builder = Client::builder()
            // Redirects are followed by `send`, which refuses those to other hosts.
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(USER_AGENT)
            .timeout(STALL)
            .connect_timeout(CONNECT);
        if let Some(policy) = net {
            builder = builder
                .no_proxy()
                .dns_resolver(Arc::new(GuardedResolver::new(Arc::new(policy.clone()))));
        }
        let client = builder.build().map_err(|e| {
            SourceError::Unavailable(format!(
                "cannot start the HTTP client: {}",
                quarry_core::error_chain(&e)
            ))
        })?;
        Ok(Http {
            client,
            basic: basic.map(|s| {
                (
                    s.username().unwrap_or_default().to_owned(),
                    s.password().to_owned(),
                )
            }),
            net: net.cloned(),
        })
    }

    /// Whether a credential is sent.
    pub(crate) fn has_credential(&self) -> bool {
        self.basic.is_some()
    }

    /// `method url` with `headers` and `body`, following redirects within the same host
    /// (the same scheme and port, or up from http to https); a redirect elsewhere is an
    /// error. Any status is returned; only transport failures are errors. Returns the URL
    /// that answered.
    pub(crate) fn send(
        &self,
        method: &Method,
        url: &Url,
        headers: &[(&'static str, &str)],
        body: Option<&[u8]>,
    ) -> Result<(Url, Response), SourceError> {
        self.follow(method, url, headers, body, false)
    }

    /// `GET url`, following redirects to any http(s) host (as RFC 9309 says to for a
    /// `robots.txt`); the credential, if any, goes only to `url`'s host.
    pub(crate) fn get_anywhere(&self, url: &Url) -> Result<(Url, Response), SourceError> {
        self.follow(&Method::GET, url, &[], None, true)
    }

    fn follow(
        &self,
        method: &Method,
        url: &Url,
        headers: &[(&'static str, &str)],
        body: Option<&[u8]>,
        any_host: bool,
    ) -> Result<(Url, Response), SourceError> {
        let mut target = url.clone();
        let mut method = method.clone();
        let mut body = body;
        for _ in 0..=MAX_REDIRECTS {
            if let Some(policy) = &self.net {
                guard_url(policy, url, &target)?;
            }
            let mut req = self.client.request(method.clone(), target.clone());
            for (k, v) in headers {
                req = req.header(*k, *v);
            }
            if let Some(b) = body {
                req = req.body(b.to_vec());
            }
            if let Some((user, password)) = &self.basic
                && same_host(url, &target)
            {
                req = req.basic_auth(user, Some(password));
            }
            let resp = req.send().map_err(|e| {
                // The guard's resolver refused every address of the name.
                if let Some(r) = quarry_netguard::refusal_in(&e) {
                    return refused(url, &target, r);
                }
                SourceError::Unavailable(format!(
                    "{url}: {}",
                    self.scrub(&quarry_core::error_chain(&e.without_url()))
                ))
            })?;
            let status = resp.status().as_u16();
            if !matches!(status, 301 | 302 | 303 | 307 | 308) {
                return Ok((target, resp));
            }
            let Some(next) = resp
                .headers()
                .get(LOCATION)
                .and_then(|l: &HeaderValue| l.to_str().ok())
                .and_then(|l| target.join(l).ok())
                .filter(|u| matches!(u.scheme(), "http" | "https"))
            else {
                return Ok((target, resp));
            };
            if !any_host && !same_host(&target, &next) {
                return Err(SourceError::Unavailable(format!(
                    "{url} redirects to another host ({}), which is not followed",
                    origin(&next)
                )));
            }
            if status == 303 {
                method = Method::GET;
                body = None;
            }
            target = next;
        }
        Err(SourceError::Unavailable(format!(
            "{url}: more than {MAX_REDIRECTS} redirects"
        )))
    }

    /// `text` without the password.
    pub(crate) fn scrub(&self, text: &str) -> String {
        match &self.basic {
            Some((_, p)) if !p.is_empty() => text.replace(p.as_str(), "[redacted]"),
            _ => text.to_owned(),
        }
    }
}

/// Checks `target` (the URL asked for, `asked`, or a redirect from it) against the guard
/// before anything is sent: the scheme, a literal address, a metadata host name.
pub(crate) fn guard_url(policy: &NetPolicy, asked: &Url, target: &Url) -> Result<(), SourceError> {
    quarry_netguard::check_url(policy, target).map_err(|r| refused(asked, target, &r))
}

/// The guard's refusal of `target`, reached from `asked`, as a [`SourceError`].
pub(crate) fn refused(asked: &Url, target: &Url, r: &Refused) -> SourceError {
    if asked == target {
        SourceError::Refused(format!("{asked}: {r}"))
    } else {
        SourceError::Refused(format!("{asked} redirects to {target}: {r}"))
    }
}

/// A response's body, at most `max_bytes` of it: more (announced or read) is
/// [`SourceError::TooLarge`] for `path`.
pub(crate) fn read_body(
    resp: Response,
    max_bytes: u64,
    path: &str,
    url: &Url,
) -> Result<Vec<u8>, SourceError> {
    if let Some(len) = resp.content_length().filter(|l| *l > max_bytes) {
        return Err(SourceError::TooLarge {
            path: path.to_owned(),
            size: len,
            limit: max_bytes,
        });
    }
    let mut bytes = Vec::new();
    resp.take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| {
            SourceError::Unavailable(format!(
                "{url}: reading the response: {}",
                quarry_core::error_chain(&e)
            ))
        })?;
    if bytes.len() as u64 > max_bytes {
        return Err(SourceError::TooLarge {
            path: path.to_owned(),
            size: bytes.len() as u64,
            limit: max_bytes,
        });
    }
    Ok(bytes)
}

/// Whether a redirect from `from` to `to` stays on the same host: the same scheme, host and
/// port, or from http up to https on the same host name.
pub(crate) fn same_host(from: &Url, to: &Url) -> bool {
    if from.host_str() != to.host_str() {
        return false;
    }
    match (from.scheme(), to.scheme()) {
        (a, b) if a == b => from.port_or_known_default() == to.port_or_known_default(),
        ("http", "https") => to.port().is_none(),
        _ => false,
    }
}

/// Whether `a` and `b` are on the same origin: scheme, host and port.
pub(crate) fn same_origin(a: &Url, b: &Url) -> bool {
    a.scheme() == b.scheme()
        && a.host_str() == b.host_str()
        && a.port_or_known_default() == b.port_or_known_default()
}

/// `scheme://host[:port]` of a URL.
pub(crate) fn origin(u: &Url) -> String {
    u.origin().ascii_serialization()
}

/// The reason phrase for a status, for messages (`404 Not Found`).
pub(crate) fn status_text(status: reqwest::StatusCode) -> String {
    match status.canonical_reason() {
        Some(r) => format!("{} {r}", status.as_u16()),
        None => status.as_u16().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirects_stay_on_the_host() {
        let u = |s: &str| Url::parse(s).unwrap();
        assert!(same_host(&u("https://a.com/x"), &u("https://a.com/y")));
        assert!(same_host(&u("http://a.com/x"), &u("https://a.com/x")));
        assert!(same_host(&u("https://a.com/x"), &u("https://a.com:443/x")));
        assert!(!same_host(&u("https://a.com/x"), &u("http://a.com/x")));
        assert!(!same_host(&u("https://a.com/x"), &u("https://b.com/x")));
        assert!(!same_host(
            &u("http://a.com:8080/x"),
            &u("http://a.com:9090/x")
        ));
        assert!(!same_host(
            &u("http://a.com:8080/x"),
            &u("https://a.com:8443/x")
        ));
        assert!(same_origin(
            &u("https://a.com/x"),
            &u("https://a.com:443/y?q")
        ));
        assert!(!same_origin(&u("http://a.com/x"), &u("https://a.com/x")));
        assert_eq!(origin(&u("http://a.com:8080/x")), "http://a.com:8080");
    }
}
