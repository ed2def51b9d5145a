//! The tool hub (SPEC §1 "Tool, package, catalog", "View"; §2.4): upstream MCP servers
//! reached through rmcp's client, the catalog of every tool in packages, views that expose
//! exactly what an endpoint's URL selects, custom HTTP tools behind an SSRF guard.
//!
//! Everything an owner registers lives in the store ([`quarry_store::HubStore`]); the hub
//! holds only what cannot be stored — live connections — and caches derived from the store
//! (one [`Catalog`] per owner, rebuilt when the owner's generation changes, so several nodes
//! over one database agree). No per-request state is kept here: a view is computed from a
//! request by [`View::compute`].
//!
//! [`Hub`] has two halves: the registry (`registry`: synchronous, store-backed — register,
//! toggle, catalog, route) and the connection pool (`pool`: asynchronous, no store — call,
//! read a resource, get a prompt). Who may use or change what is `access`; settings are
//! `options`. Below them: upstream connections (`upstream`, `sse`), the
//! catalog and its names (`catalog`, `package`, `names`, `search`), views (`view`,
//! `endpoint`), custom HTTP tools (`custom`), the built-in `web` package (`web`) and what they
//! share for reading HTTP responses (`fetch`). The outbound guard is the `quarry-netguard`
//! crate, which sources share.

mod access;
pub mod catalog;
pub mod custom;
pub mod endpoint;
pub mod era;
mod fetch;
pub mod names;
mod options;
mod package;
mod pool;
mod priority;
mod registry;
pub mod search;
pub mod sse;
pub mod upstream;
pub mod view;
pub mod web;

pub use quarry_core::MACHINE_OWNER;
pub use quarry_oauth_client::ClientCredentials;

pub use access::{annotated_read_only, may_use, require_write, usable};
pub use catalog::{
    APPROVALS_PACKAGE, BuiltinPackage, CUSTOM_PACKAGE, Catalog, CatalogTool, KNOWLEDGE_PACKAGE,
    Package, PackageKind,
};
pub use custom::CustomCall;
pub use endpoint::{EndpointSelection, EndpointSelectionError, ToolOverride};
pub use names::{Selection, SelectionError};
pub use options::{DEFAULT_MAX_TOOLS, HubOptions, default_upstream_starts};
pub use pool::{ANSWER_GRACE, Connecting, Refreshing, Route};
pub use priority::{FinishOnDrop, PriorityWork};
pub use quarry_netguard::NetPolicy;
pub use registry::{
    CustomToolInfo, Hub, RECONCILE_POLL, RegisterUpstream, SIGN_IN_SECS, SignInInfo, SignInStarted,
    SignedIn, UpstreamInfo, UpstreamPatch, mask_url,
};
pub use upstream::{CallError, Health, ProgressSink, TransportKind};
pub use view::{DefaultView, View, ViewError};
pub use web::{WEB_PACKAGE, WebBackend, WebSearchOptions};
