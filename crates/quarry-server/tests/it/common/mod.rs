//! What the in-process HTTP tests share: a server over a temp-dir engine, driven with
//! `tower::ServiceExt::oneshot` on a runtime whose threads are marked as async threads, so in
//! debug builds a store call that skips the blocking runner panics
//! (`quarry_store::thread_guard`).
#![allow(dead_code)] // each test crate uses a part

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use quarry_access::TokenRequest;
use quarry_engine::{Engine, EngineOptions};
use quarry_server::{AppState, AuthMode, HttpOptions};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

/// A server over a fresh index, in `mode`, with a user `ann` (an admin of the default space)
/// and a space `other` she is not in.
pub(crate) struct Fixture {
    _home: tempfile::TempDir,
    pub state: Arc<AppState>,
    app: Router,
    rt: tokio::runtime::Runtime,
}

impl Fixture {
    pub(crate) fn new(mode: AuthMode) -> Fixture {
        let home = tempfile::tempdir().expect("temp dir");
        let engine = Engine::open(EngineOptions {
            home: home.path().to_path_buf(),
            index: "index".into(),
            space: quarry_core::DEFAULT_SPACE.into(),
            max_file_bytes: u64::MAX,
        })
        .expect("engine");
        let state = AppState::with_auth(engine, mode);
        // The default space is made on first use; the grant below names it.
        state.default_space().expect("default space");
        let directory = state.directory();
        directory.create_user("ann").expect("user");
        directory
            .grant(
                "ann",
                quarry_core::DEFAULT_SPACE,
                quarry_access::Role::Admin,
            )
            .expect("grant");
        directory.create_space("other", "").expect("space");
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .on_thread_start(quarry_store::thread_guard::mark_async_thread)
            .enable_all()
            .build()
            .expect("runtime");
        let app = {
            let _entered = rt.enter();
            quarry_server::app(
                state.clone(),
                &HttpOptions::default(),
                &CancellationToken::new(),
            )
        };
        Fixture {
            _home: home,
            state,
            app,
            rt,
        }
    }

    /// A token for `ann`, expiring at `expires_at` (ms) if given.
    pub(crate) fn token(&self, expires_at: Option<i64>) -> (String, String) {
        let issued = self
            .state
            .directory()
            .create_token(&TokenRequest {
                user: "ann".into(),
                label: "test".into(),
                expires_at,
                // ann's own credential: the tests here probe roles, not the management scope
                // (tests/interop/test_guardrails.py walks that).
                manage: true,
                ..TokenRequest::default()
            })
            .expect("token");
        (issued.token, issued.record.id)
    }

    /// Sends `req` (a loopback `Host` unless it has one) and returns status, headers and
    /// the JSON body (`Null` when the body is not JSON).
    pub(crate) fn send(&self, mut req: Request<Body>) -> (StatusCode, header::HeaderMap, Value) {
        if !req.headers().contains_key(header::HOST) {
            req.headers_mut()
                .insert(header::HOST, "127.0.0.1:18765".parse().expect("host"));
        }
        self.send_raw(req)
    }

    /// Sends `req` as it is.
    pub(crate) fn send_raw(&self, req: Request<Body>) -> (StatusCode, header::HeaderMap, Value) {
        let app = self.app.clone();
        quarry_store::thread_guard::mark_async_thread();
        let (status, headers, bytes) = self.rt.block_on(async move {
            let response = app.oneshot(req).await.expect("infallible");
            let (parts, body) = response.into_parts();
            let bytes = axum::body::to_bytes(body, 1 << 20).await.expect("body");
            (parts.status, parts.headers, bytes)
        });
        quarry_store::thread_guard::unmark_async_thread();
        let json = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        (status, headers, json)
    }
}

pub(crate) fn get(uri: &str) -> axum::http::request::Builder {
    Request::builder().method("GET").uri(uri)
}

pub(crate) fn post_json(uri: &str, body: Value) -> Request<Body> {
    Request::builder()
        .method("POST")
        .uri(uri)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .expect("request")
}

pub(crate) fn empty(b: axum::http::request::Builder) -> Request<Body> {
    b.body(Body::empty()).expect("request")
}

/// A REST error: the status, and a body of exactly `detail`, `status_code`, `error_code`.
pub(crate) fn assert_error(
    got: &(StatusCode, header::HeaderMap, Value),
    status: StatusCode,
    code: &str,
) {
    let (s, _, body) = got;
    assert_eq!(*s, status, "{body}");
    let keys: Vec<&str> = body
        .as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default();
    assert_eq!(keys.len(), 3, "{body}");
    assert_eq!(body["status_code"], status.as_u16(), "{body}");
    assert_eq!(body["error_code"], code, "{body}");
    assert!(
        body["detail"].as_str().is_some_and(|d| !d.is_empty()),
        "{body}"
    );
}
