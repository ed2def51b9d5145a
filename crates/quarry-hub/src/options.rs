//! The hub's settings, fixed at start ([`HubOptions`]).

use crate::names;
use crate::ssrf::NetPolicy;
use crate::web::WebSearchOptions;

/// Default cap on the tools of one endpoint (Cursor stops at 40).
pub const DEFAULT_MAX_TOOLS: usize = 32;

/// Hub settings, fixed at start.
#[derive(Debug, Clone)]
pub struct HubOptions {
    /// Most tools one endpoint may expose.
    pub max_tools: usize,
    /// Longest wire name.
    pub wire_name_max: usize,
    /// Where users' HTTP upstreams and custom tools may connect.
    pub net: NetPolicy,
    /// Whether users (not only the machine's owner) may register stdio upstreams, which
    /// run commands on the server.
    pub users_may_run_commands: bool,
    /// The built-in `web` package (`web.web_search`) and its backend; `None` leaves it out.
    /// The server sets it from [`WebSearchOptions::from_lookup`].
    pub web: Option<WebSearchOptions>,
    /// Seals the OAuth sign-ins of upstreams (`QUARRY_SECRET_KEY`); `None`: they cannot
    /// sign in.
    pub secret_key: Option<std::sync::Arc<quarry_secrets::SecretKey>>,
}

impl Default for HubOptions {
    fn default() -> Self {
        HubOptions {
            max_tools: DEFAULT_MAX_TOOLS,
            wire_name_max: names::DEFAULT_WIRE_NAME_MAX,
            net: NetPolicy::default(),
            users_may_run_commands: false,
            web: None,
            secret_key: None,
        }
    }
}
