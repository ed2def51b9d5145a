//! [`AppState`]'s public constructors. They live above `state.rs` because they hand the hub
//! Quarry's own tool packages (knowledge, approvals), which the MCP and service modules
//! build and which themselves use the state.

use std::sync::Arc;

use quarry_engine::Engine;

use crate::auth::AuthMode;
use crate::mcp::knowledge_package;
use crate::service::approver_tools;
use crate::state::AppState;

impl AppState {
    /// A server in open mode (no token needed on loopback); see [`AppState::with_auth`].
    pub fn new(engine: Engine) -> Arc<Self> {
        Self::with_auth(engine, AuthMode::Open)
    }

    /// A server that authenticates requests as `auth` says.
    pub fn with_auth(engine: Engine, auth: AuthMode) -> Arc<Self> {
        Self::with_ui_assets(engine, auth, quarry_ui::Assets::embedded())
    }

    /// A server whose web UI serves `ui_assets` (a directory during UI development).
    pub fn with_ui_assets(
        engine: Engine,
        auth: AuthMode,
        ui_assets: quarry_ui::Assets,
    ) -> Arc<Self> {
        AppState::from_parts(
            engine,
            auth,
            ui_assets,
            vec![knowledge_package(), approver_tools::package()],
        )
    }
}
