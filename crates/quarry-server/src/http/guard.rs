//! The Host/Origin check (DNS-rebinding defence): every route passes it, 403 otherwise.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::options::HttpOptions;
use super::{ApiError, ErrorCode};

/// The Host/Origin policy derived from [`HttpOptions`].
#[derive(Clone)]
pub(crate) struct Guard {
    hosts: Vec<String>,
    origins: Vec<String>,
}

impl Guard {
    pub(crate) fn new(opts: &HttpOptions) -> Self {
        let mut hosts: Vec<String> = LOOPBACK_NAMES.iter().map(|s| s.to_string()).collect();
        if !opts.bind.is_unspecified() {
            hosts.push(opts.bind.to_string());
        }
        hosts.extend(opts.allowed_hosts.iter().map(|h| h.to_ascii_lowercase()));
        Guard {
            hosts,
            origins: opts
                .allowed_origins
                .iter()
                .map(|o| o.trim_end_matches('/').to_ascii_lowercase())
                .collect(),
        }
    }

    fn host_allowed(&self, host: &str) -> bool {
        let host = strip_port(host).to_ascii_lowercase();
        self.hosts.contains(&host)
    }

    fn origin_allowed(&self, origin: &str) -> bool {
        let origin = origin.trim_end_matches('/').to_ascii_lowercase();
        if self.origins.contains(&origin) {
            return true;
        }
        // Browsers on the same machine: http(s)://<loopback name>[:port].
        match origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"))
        {
            Some(rest) if !rest.contains('/') => {
                let host = strip_port(rest);
                LOOPBACK_NAMES.contains(&host)
            }
            _ => false,
        }
    }
}

/// Host names that always mean this machine (browsers treat them as secure contexts).
pub(crate) const LOOPBACK_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// `host:port`, `[v6]:port`, `[v6]` → host.
pub(crate) fn strip_port(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match host.rsplit_once(':') {
        Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) && !h.contains(':') => h,
        _ => host,
    }
}

pub(crate) async fn check_host_and_origin(
    State(guard): State<Arc<Guard>>,
    headers: HeaderMap,
    req: Request,
    next: Next,
) -> Response {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_owned)
        .or_else(|| req.uri().authority().map(|a| a.to_string()));
    match host {
        None => {
            return ApiError::with_code(
                StatusCode::BAD_REQUEST,
                ErrorCode::MissingHost,
                "missing Host header",
            )
            .into_response();
        }
        Some(h) if !guard.host_allowed(&h) => {
            return ApiError::with_code(
                StatusCode::FORBIDDEN,
                ErrorCode::HostNotAllowed,
                format!(
                    "Host '{h}' is not allowed (DNS rebinding protection); start the server with --allowed-host to accept it"
                ),
            )
            .into_response();
        }
        _ => {}
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("<invalid>");
        if !guard.origin_allowed(origin) {
            return ApiError::with_code(
                StatusCode::FORBIDDEN,
                ErrorCode::OriginNotAllowed,
                format!(
                    "Origin '{origin}' is not allowed; start the server with --allowed-origin to accept it"
                ),
            )
            .into_response();
        }
    }
    // A NUL in a path segment or query parameter: refused here, on every route and backend
    // alike, before it can reach a store (PostgreSQL cannot keep one in text).
    if req.uri().path().contains("%00") || req.uri().query().is_some_and(|q| q.contains("%00")) {
        return super::extract::nul_refusal().into_response();
    }
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_guard() {
        let g = Guard::new(&HttpOptions::default());
        assert!(g.host_allowed("localhost:18765"));
        assert!(g.host_allowed("127.0.0.1"));
        assert!(g.host_allowed("[::1]:80"));
        assert!(!g.host_allowed("evil.example:18765"));
        assert!(!g.host_allowed("127.0.0.1.evil.example"));
        assert!(g.origin_allowed("http://localhost:3000"));
        assert!(g.origin_allowed("https://127.0.0.1"));
        assert!(!g.origin_allowed("http://evil.example"));
        assert!(!g.origin_allowed("http://localhost.evil.example"));
        assert!(!g.origin_allowed("null"));
    }
}
