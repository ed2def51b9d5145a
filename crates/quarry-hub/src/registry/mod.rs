//! The registry: [`Hub`], the hub's synchronous, store-backed half. What an owner registered
//! (upstreams, packages, tools, toggles, custom tools) lives in the store; the registry keeps
//! one [`Catalog`](crate::Catalog) snapshot per owner, rebuilt when the owner's generation changes, and
//! resolves where a call goes ([`Route`](crate::Route)) so the connection pool (`pool.rs`) runs it
//! without touching the store.
//!
//! Files: `hub.rs` holds the type, its catalogs, routing and the follower of other nodes'
//! changes; `upstreams.rs` registering, editing and listing upstream MCP servers;
//! `signin.rs` their OAuth sign-ins; `custom_tools.rs` the owner's custom HTTP tools.

mod custom_tools;
mod hub;
mod signin;
mod upstreams;

pub use custom_tools::CustomToolInfo;
pub use hub::{Hub, RECONCILE_POLL};
pub use signin::{SIGN_IN_SECS, SignInInfo, SignInStarted, SignedIn};
pub use upstreams::{RegisterUpstream, UpstreamInfo, UpstreamPatch, mask_url};
