//! MCP sessions any node can resume. A 2025-11-25 client opens a session with `initialize`
//! on one node and may send its next request to another (a load balancer without sticky
//! sessions, a node that restarted). rmcp keeps the live session in memory and, when a
//! request names a session this process does not know, asks its `SessionStore`: this one
//! keeps the client's `initialize` parameters in the system of record, so the node replays
//! the handshake and answers. Nothing about what the caller may reach is kept: the view is
//! computed per request, from the request's own credentials (ARCHITECTURE.md).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use rmcp::transport::streamable_http_server::session::store::{
    SessionState, SessionStore, SessionStoreError,
};

use crate::http::run_blocking_raw;

type Boxed<'a, T> = Pin<Box<dyn Future<Output = Result<T, SessionStoreError>> + Send + 'a>>;

/// rmcp's session store over [`quarry_store::Store`]'s `mcp_sessions`.
pub(crate) struct StoredSessions {
    store: Arc<dyn quarry_store::Store>,
}

impl StoredSessions {
    pub(crate) fn new(store: Arc<dyn quarry_store::Store>) -> Arc<Self> {
        Arc::new(StoredSessions { store })
    }
}

fn boxed(e: impl std::fmt::Display) -> SessionStoreError {
    e.to_string().into()
}

impl SessionStore for StoredSessions {
    fn load<'a, 'b, 'c>(&'a self, session_id: &'b str) -> Boxed<'c, Option<SessionState>>
    where
        'a: 'c,
        'b: 'c,
    {
        let store = self.store.clone();
        let id = session_id.to_owned();
        Box::pin(async move {
            let raw = run_blocking_raw(move || store.mcp_session(&id))
                .await
                .map_err(|e| boxed(e.detail))?
                .map_err(boxed)?;
            match raw {
                // A state this binary cannot read (another version wrote it) is no session:
                // the client is told to initialize again.
                Some(json) => Ok(serde_json::from_str(&json).ok()),
                None => Ok(None),
            }
        })
    }

    fn store<'a, 'b, 'c, 'd>(
        &'a self,
        session_id: &'b str,
        state: &'c SessionState,
    ) -> Boxed<'d, ()>
    where
        'a: 'd,
        'b: 'd,
        'c: 'd,
    {
        let store = self.store.clone();
        let id = session_id.to_owned();
        let json = serde_json::to_string(state);
        Box::pin(async move {
            let json = json.map_err(boxed)?;
            run_blocking_raw(move || store.put_mcp_session(&id, &json))
                .await
                .map_err(|e| boxed(e.detail))?
                .map_err(boxed)
        })
    }

    fn delete<'a, 'b, 'c>(&'a self, session_id: &'b str) -> Boxed<'c, ()>
    where
        'a: 'c,
        'b: 'c,
    {
        let store = self.store.clone();
        let id = session_id.to_owned();
        Box::pin(async move {
            run_blocking_raw(move || store.delete_mcp_session(&id))
                .await
                .map_err(|e| boxed(e.detail))?
                .map_err(boxed)
        })
    }
}
