//! The hub's settings, fixed at start ([`HubOptions`]).

use quarry_netguard::NetPolicy;

use crate::names;
use crate::priority::PriorityWork;
use crate::web::WebSearchOptions;

/// Default cap on the tools of one endpoint (Cursor stops at 40).
pub const DEFAULT_MAX_TOOLS: usize = 32;

/// Default number of stdio upstreams started at once: twice the CPUs, from 4 to 16. A child
/// starting (`npx`, `uvx`, `docker run`, an interpreter loading its packages) is mostly CPU
/// and disk; 70 at once on a busy machine each took over 10 s (issue 65, item 15).
pub fn default_upstream_starts() -> usize {
    std::thread::available_parallelism()
        .map_or(2, usize::from)
        .saturating_mul(2)
        .clamp(4, 16)
}

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
    /// Most stdio upstreams being started at once, each from its spawn to its first tool
    /// list (at least 1); the others wait their turn, showing `connecting`. A restart
    /// reconnecting every upstream goes through it too. HTTP and SSE upstreams, which start
    /// nothing here, are not counted.
    pub upstream_starts: usize,
    /// While this work is under way, stdio upstreams start one at a time (the server's
    /// model load: children starting beside it kept it waiting for minutes).
    pub narrow_starts_while: Option<PriorityWork>,
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
            upstream_starts: default_upstream_starts(),
            narrow_starts_while: None,
        }
    }
}
