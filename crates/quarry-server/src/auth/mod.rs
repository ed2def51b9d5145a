//! Who is calling: one middleware per surface resolves the request's credentials into a
//! [`Caller`] — a principal and an engine handle limited to its scope — before any handler
//! runs. Handlers get the engine only from their `Caller`, so none can forget a check.
//!
//! Credentials, in seed 004's order (URL parameters first): `?token=` then
//! `Authorization: Bearer`; the space from `?space_id=` (or `?space=`) then `X-Space-ID`; the
//! resource from `?resource=` then `X-Resource` (default `knowledge`); `?kb=a,b` narrows the
//! knowledge bases. There is deliberately no server-side fallback (seed 004 read
//! `QUKA_ACCESS_TOKEN` from the server's environment when a request had none): a server
//! would then authenticate every anonymous caller as whoever owns that variable.

use std::sync::Arc;

use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use quarry_access::{AuthFailure, Principal, owner_principal};
use quarry_engine::Engine;
use serde_json::json;

use crate::http::{ApiError, ErrorCode, run_blocking_raw, status_of};
use crate::state::AppState;

mod mode;
pub(crate) mod oauth;
pub(crate) mod session;

pub use mode::AuthMode;

/// How a surface words an authentication failure, and whether its routes read a space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Surface {
    /// REST routes about the token itself (its spaces, its user's tokens): a token with
    /// several spaces needs to name none.
    Account,
    /// `{"detail", "status_code", "error_code"}` (QMD REST and `/api/v1`).
    Rest,
    /// A JSON-RPC error envelope, code -32000, `data.error_code` (MCP endpoints, seed 004).
    JsonRpc,
    /// Dify's External Knowledge API: `{"error_code": 1002, "error_msg"}`.
    Dify,
    /// REST routes that name a source by its id (`/api/v1/sources/{id}…`), in REST's words.
    /// A source id is global: a request that names no space acts in the space the source is
    /// in, when the credential reaches it; otherwise (no such source, or a space the
    /// credential does not reach) in the credential's first space, where the handler answers
    /// the 404 of a missing source — the same answer either way, so nothing tells whether
    /// the source exists.
    Source,
}

/// The resolved caller of one request.
#[derive(Clone)]
pub(crate) struct Caller {
    pub principal: Principal,
    /// The engine, limited to the principal's scope.
    pub engine: Engine,
    /// The knowledge base agents' notes go to (`X-Resource`, default `knowledge`).
    pub resource: String,
    /// The request's `Idempotency-Key` header: a retried `create_knowledge` gets the first
    /// answer again.
    pub idempotency_key: Option<String>,
    /// Where a tool call comes from (what a knowledge entry's provenance records).
    pub origin: CallOrigin,
}

/// The client and call a request comes from, as far as the protocol says.
#[derive(Debug, Clone, Default)]
pub(crate) struct CallOrigin {
    /// An MCP client's name and version (`claude-code/2.1.0`), else the HTTP `User-Agent`.
    pub client: Option<String>,
    /// The JSON-RPC id of the tool call.
    pub call: Option<String>,
}

impl Caller {
    /// `principal` with an engine limited to its scope.
    fn new(state: &AppState, principal: Principal, resource: Option<String>) -> Caller {
        Caller {
            engine: state.root_engine().scoped(principal.scope.clone()),
            principal,
            resource: resource.unwrap_or_else(|| DEFAULT_RESOURCE.to_owned()),
            idempotency_key: None,
            origin: CallOrigin::default(),
        }
    }

    /// Who keys idempotent requests: the user, or `local` for the machine's owner.
    pub(crate) fn idempotency_owner(&self) -> &str {
        self.principal.owner_key()
    }

    /// The machine's owner (stdio, open local mode).
    pub(crate) fn owner(state: &AppState) -> Result<Caller, quarry_core::Error> {
        let space = state.default_space()?;
        Ok(Caller::new(state, owner_principal(&space), None))
    }
}

/// Where notes go when a request names no resource (seed 004).
pub(crate) const DEFAULT_RESOURCE: &str = "knowledge";

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        // Fail closed: a route mounted without the middleware serves nothing.
        parts.extensions.get::<Caller>().cloned().ok_or_else(|| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "no caller was resolved for this route",
            )
            .into_response()
        })
    }
}

/// What a request presented.
#[derive(Default)]
struct Credentials {
    token: Option<String>,
    /// The token came from the web UI's session cookie (state changes then need CSRF).
    from_cookie: bool,
    space: Option<String>,
    resource: Option<String>,
    kb: Option<Vec<String>>,
    idempotency_key: Option<String>,
    /// The source id the path names (`Surface::Source` routes).
    source_id: Option<String>,
}

/// The source id a path under `/api/v1/sources/` names.
fn source_id_of(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("/api/v1/sources/")?;
    let id = rest.split('/').next()?;
    (!id.is_empty()).then_some(id)
}

/// The endpoint name of a path that is exactly `/mcp/e/<name>`: one non-empty segment, no
/// trailing slash, nothing after it. Other paths under `/mcp/e/` fall through to the plain
/// `/mcp` service, so a token bound to an endpoint must be refused there (issue 41).
pub(crate) fn endpoint_name(path: &str) -> Option<&str> {
    path.strip_prefix("/mcp/e/")
        .filter(|name| !name.is_empty() && !name.contains('/'))
}

fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
}

fn credentials(req: &Request) -> Credentials {
    let mut c = Credentials::default();
    if let Some(q) = req.uri().query() {
        for (k, v) in form_urlencoded::parse(q.as_bytes()) {
            let v = v.trim().to_owned();
            if v.is_empty() {
                continue;
            }
            match k.as_ref() {
                "token" => c.token = Some(v),
                "space_id" | "space" => c.space = Some(v),
                "resource" => c.resource = Some(v),
                "kb" => {
                    c.kb.get_or_insert_with(Vec::new).extend(
                        v.split(',')
                            .map(str::trim)
                            .filter(|s| !s.is_empty())
                            .map(str::to_owned),
                    );
                }
                _ => {}
            }
        }
    }
    let headers = req.headers();
    if c.token.is_none() {
        c.token = header_str(headers, header::AUTHORIZATION.as_str()).and_then(|h| {
            let (scheme, rest) = h.split_once(' ')?;
            scheme
                .eq_ignore_ascii_case("bearer")
                .then(|| rest.trim().to_owned())
        });
    }
    // WeKnora's clients send the token as `X-API-Key`.
    if c.token.is_none() {
        c.token = header_str(headers, "x-api-key").map(str::to_owned);
    }
    if c.token.is_none()
        && let Some(t) = session::cookie(headers, session::SESSION_COOKIE)
    {
        c.token = Some(t.to_owned());
        c.from_cookie = true;
    }
    if c.space.is_none() {
        c.space = header_str(headers, "x-space-id").map(str::to_owned);
    }
    if c.resource.is_none() {
        c.resource = header_str(headers, "x-resource").map(str::to_owned);
    }
    c.idempotency_key = header_str(headers, "idempotency-key").map(str::to_owned);
    c
}

/// Why a request is refused: an authentication failure, a store error while checking, or
/// the checking itself failing.
enum Refusal {
    Auth(AuthFailure),
    Store(ApiError),
    Internal(String),
}

fn resolve(state: &AppState, surface: Surface, c: &Credentials) -> Result<Caller, Refusal> {
    let directory = state.directory();
    let internal = |e: quarry_core::Error| Refusal::Store(ApiError::from(e));
    // A request about a source that names no space: the source's own space.
    let source_space = match (surface, &c.space, &c.source_id) {
        (Surface::Source, None, Some(id)) => {
            state.root_engine().source_space(id).map_err(internal)?
        }
        _ => None,
    };
    // A web session's token is the browser's: taken from anywhere else it is a stolen
    // cookie or a mistake.
    if let Some(token) = &c.token
        && !c.from_cookie
        && quarry_access::is_session_token(token)
    {
        return Err(Refusal::Auth(AuthFailure::SessionOutsideBrowser));
    }
    let principal = match (&c.token, state.auth_mode()) {
        (Some(token), _) if surface == Surface::Source && c.space.is_none() => {
            let in_source_space = match &source_space {
                Some(space) => directory
                    .authenticate(token, Some(space))
                    .map_err(internal)?,
                None => Err(AuthFailure::SpaceForbidden),
            };
            match in_source_space {
                Ok(p) => p,
                // A space the credential does not reach, or no such source: its first
                // space, where the source is not found.
                Err(AuthFailure::SpaceForbidden) => directory
                    .authenticate_any_space(token, None)
                    .map_err(internal)?
                    .map_err(Refusal::Auth)?,
                Err(f) => return Err(Refusal::Auth(f)),
            }
        }
        (Some(token), _) => if surface == Surface::Account {
            directory.authenticate_any_space(token, c.space.as_deref())
        } else {
            directory.authenticate(token, c.space.as_deref())
        }
        .map_err(internal)?
        .map_err(Refusal::Auth)?,
        (None, AuthMode::Token) => return Err(Refusal::Auth(AuthFailure::Missing)),
        (None, AuthMode::Open) => {
            let space = match c.space.as_ref().or(source_space.as_ref()) {
                Some(key) => match directory.space(key) {
                    Ok(s) => s,
                    Err(quarry_core::Error::NotFound(_)) => {
                        return Err(Refusal::Auth(AuthFailure::SpaceForbidden));
                    }
                    Err(e) => return Err(internal(e)),
                },
                None => state.default_space().map_err(internal)?,
            };
            owner_principal(&space)
        }
    };
    let principal = match &c.kb {
        Some(keys) => directory
            .narrow(&principal, keys)
            .map_err(internal)?
            .map_err(Refusal::Auth)?,
        None => principal,
    };
    let mut caller = Caller::new(state, principal, c.resource.clone());
    caller.idempotency_key = c.idempotency_key.clone();
    Ok(caller)
}

/// The refusal in the surface's words. The token is never part of it.
fn refusal_response(surface: Surface, refusal: Refusal) -> Response {
    let (status, code, message) = match &refusal {
        Refusal::Auth(f) => (status_of(f.code()), f.code(), f.to_string()),
        // As every REST error maps it: an outage is a 503 without the database's address.
        Refusal::Store(e) => (
            e.status,
            e.code,
            format!("cannot check credentials: {}", e.detail),
        ),
        Refusal::Internal(m) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            ErrorCode::Internal,
            format!("cannot check credentials: {m}"),
        ),
    };
    let body = match surface {
        Surface::Rest | Surface::Account | Surface::Source => {
            ApiError::with_code(status, code, message).body()
        }
        Surface::JsonRpc => jsonrpc_refusal(code, &message),
        // Dify: 1001 malformed Authorization header, 1002 authorization failed.
        Surface::Dify => json!({
            "error_code": if matches!(refusal, Refusal::Auth(AuthFailure::Missing)) { 1001 } else { 1002 },
            "error_msg": message
        }),
    };
    let status = match (surface, &refusal) {
        (Surface::Dify, Refusal::Auth(_)) => StatusCode::FORBIDDEN,
        _ => status,
    };
    let mut response = (status, axum::Json(body)).into_response();
    if status == StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"quarry\""),
        );
    }
    response
}

/// A refusal in JSON-RPC's words (the MCP endpoints): error `-32000`, its code in
/// `data.error_code`.
pub(crate) fn jsonrpc_refusal(code: ErrorCode, message: &str) -> serde_json::Value {
    json!({
        "jsonrpc": "2.0",
        "error": {"code": -32000, "message": message, "data": {"error_code": code.as_str()}},
        "id": null
    })
}

/// An authentication failure in the REST error shape, counted like the middleware's (for
/// routes that check a token themselves, such as the web UI's sign-in).
pub(crate) fn rest_refusal(failure: AuthFailure) -> Response {
    crate::telemetry::record_auth_failure(failure.code());
    refusal_response(Surface::Rest, Refusal::Auth(failure))
}

/// A state change from a browser that the browser authenticated on its own: by the session
/// cookie, or (open mode, no token) a request another site's page made (`Sec-Fetch-Site`
/// other than `same-origin`). Non-browser clients send neither and are not affected.
fn needs_csrf(req: &Request, c: &Credentials) -> bool {
    if !session::is_unsafe(req.method()) {
        return false;
    }
    if c.from_cookie {
        return true;
    }
    c.token.is_none()
        && header_str(req.headers(), "sec-fetch-site").is_some_and(|v| {
            !v.eq_ignore_ascii_case("same-origin") && !v.eq_ignore_ascii_case("none")
        })
}

/// Middleware: resolves the caller or answers the refusal in `surface`'s words.
pub(crate) async fn authenticate(
    State((state, surface)): State<(Arc<AppState>, Surface)>,
    mut req: Request,
    next: Next,
) -> Response {
    let mut creds = credentials(&req);
    if surface == Surface::Source {
        creds.source_id = source_id_of(req.uri().path()).map(str::to_owned);
    }
    let client = crate::audit::client_of(req.extensions());
    if needs_csrf(&req, &creds) && !session::csrf_ok(req.headers()) {
        crate::telemetry::record_auth_failure(ErrorCode::CsrfFailed);
        crate::audit::auth_failure(
            &state,
            ErrorCode::CsrfFailed.as_str(),
            req.uri().path(),
            client,
        );
        return session::csrf_refusal();
    }
    // A point lookup in the store: cheap, but it may wait behind a write, so it runs on
    // the blocking pool like every other store call.
    let resolver = state.clone();
    let presented = creds.token.clone();
    let resolved = match run_blocking_raw(move || resolve(&resolver, surface, &creds)).await {
        Ok(resolved) => resolved,
        Err(e) => Err(Refusal::Internal(e.detail)),
    };
    // A token made for one named tool endpoint works at exactly `/mcp/e/<name>` and nowhere
    // else — not a trailing slash or an extra segment, which the plain `/mcp` service would
    // answer (`mcp/named.rs` checks the name is the token's own).
    let resolved = resolved.and_then(|caller| {
        let bound = caller
            .principal
            .identity
            .as_ref()
            .is_some_and(|i| i.endpoint.is_some());
        if bound && endpoint_name(req.uri().path()).is_none() {
            Err(Refusal::Auth(AuthFailure::EndpointOnly))
        } else {
            Ok(caller)
        }
    });
    match resolved {
        Ok(caller) => {
            // MCP messages are audited per tool call, not per POST.
            let audited = (surface != Surface::JsonRpc).then(|| {
                let route = req
                    .extensions()
                    .get::<axum::extract::MatchedPath>()
                    .map_or_else(|| req.uri().path().to_owned(), |m| m.as_str().to_owned());
                (
                    caller.principal.clone(),
                    req.method().clone(),
                    route,
                    req.uri().path().to_owned(),
                    std::time::Instant::now(),
                )
            });
            let endpoint = crate::audit::Endpoint(req.uri().path().to_owned());
            req.extensions_mut().insert(endpoint);
            // Remote model requests the handler's blocking work makes are booked to the
            // caller (an MCP tool call or a chat run books its own, see their meters).
            let (meter, principal) = (quarry_engine::ModelMeter::new(), caller.principal.clone());
            req.extensions_mut().insert(caller);
            let response = crate::http::metered(meter.clone(), next.run(req)).await;
            crate::audit::metered_use(&state, &principal, &meter);
            if let Some((principal, method, route, path, started)) = audited {
                crate::audit::after_request(
                    &state,
                    &principal,
                    (&method, &route, &path),
                    &response,
                    started.elapsed(),
                    client,
                );
            }
            response
        }
        Err(refusal) => {
            if let Refusal::Auth(f) = &refusal {
                crate::telemetry::record_auth_failure(f.code());
                // No credential at all (the web UI before sign-in, a client's first probe
                // for OAuth) is a 401, not a failed attempt worth a row in the audit log.
                if !matches!(f, AuthFailure::Missing) {
                    let code = f.code().as_str();
                    crate::audit::auth_failure(&state, code, req.uri().path(), client.clone());
                }
                if f.is_guess() {
                    crate::limits::auth_failure(&state, client.as_deref(), presented.as_deref())
                        .await;
                }
            }
            let mut response = refusal_response(surface, refusal);
            if response.status() == StatusCode::UNAUTHORIZED && oauth::enabled(&state) {
                // MCP endpoints are resources of their own (`/mcp`, `/api/mcp`); the rest of
                // the server is one.
                let path = if surface == Surface::JsonRpc {
                    req.uri().path()
                } else {
                    ""
                };
                if let Some(v) = oauth::challenge(&state, req.headers(), path, presented.is_some())
                {
                    response.headers_mut().insert(header::WWW_AUTHENTICATE, v);
                }
            }
            response
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(uri: &str, headers: &[(&str, &str)]) -> Request {
        let mut b = axum::http::Request::builder().uri(uri);
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        b.body(axum::body::Body::empty()).unwrap()
    }

    #[test]
    fn a_source_route_names_its_source() {
        let id = "5232236f-1c45-4597-900f-17ea3e3c8c73";
        for path in [
            format!("/api/v1/sources/{id}"),
            format!("/api/v1/sources/{id}/sync"),
            format!("/api/v1/sources/{id}/reports"),
        ] {
            assert_eq!(source_id_of(&path), Some(id), "{path}");
        }
        assert_eq!(source_id_of("/api/v1/sources/"), None);
        assert_eq!(source_id_of("/api/v1/knowledge-bases/x/sources"), None);
    }

    #[test]
    fn url_parameters_come_first() {
        let r = request(
            "/api/v1/mcp?token=qk_url&space_id=s1&resource=notes&kb=a,b&kb=c",
            &[
                ("authorization", "Bearer qk_header"),
                ("x-space-id", "s2"),
                ("x-resource", "other"),
            ],
        );
        let c = credentials(&r);
        assert_eq!(c.token.as_deref(), Some("qk_url"));
        assert_eq!(c.space.as_deref(), Some("s1"));
        assert_eq!(c.resource.as_deref(), Some("notes"));
        assert_eq!(c.kb.unwrap(), vec!["a", "b", "c"]);
        let r = request(
            "/mcp",
            &[("authorization", "bearer  qk_h "), ("x-space-id", "s2")],
        );
        let c = credentials(&r);
        assert_eq!(c.token.as_deref(), Some("qk_h"));
        assert_eq!(c.space.as_deref(), Some("s2"));
        assert!(c.resource.is_none() && c.kb.is_none());
        // Other schemes are not tokens.
        let c = credentials(&request("/", &[("authorization", "Basic eDp5")]));
        assert!(c.token.is_none());
    }
}
