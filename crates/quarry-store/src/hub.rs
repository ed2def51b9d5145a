//! What the tool hub keeps: upstream MCP servers, the packages and tools of the catalog,
//! per-owner tool toggles and custom HTTP tools. Every row belongs to one *owner* (a user's
//! UUID, or the machine's owner), so one user's hub is invisible to another by construction.
//!
//! The store does not interpret the JSON columns (`options`, `secrets`, schemas, raw tool
//! JSON); `quarry-hub` owns their shape. Secrets are kept in their own column so no listing
//! query ever selects them by accident.

use quarry_core::Result;

/// A registered upstream MCP server (seed 003's `MCPServer`, plus Quarry's own options).
#[derive(Debug, Clone, PartialEq)]
pub struct UpstreamRow {
    /// UUID.
    pub id: String,
    /// Whose hub it is in (a user's UUID, or `local`).
    pub owner: String,
    /// Display name (seed: `name`).
    pub name: String,
    /// The package its tools belong to (unique per owner).
    pub package: String,
    /// `stdio`, `http` or `sse`.
    pub transport: String,
    /// The command line (stdio) or URL (http, sse).
    pub config: String,
    /// JSON: arguments, environment variable names, header names, timeouts, concurrency.
    pub options: String,
    /// JSON: environment and header values. Read only to connect.
    pub secrets: String,
    /// Whether the hub connects it.
    pub enabled: bool,
    /// Milliseconds since the epoch.
    pub created_at: i64,
    /// Milliseconds since the epoch of the last change.
    pub updated_at: i64,
}

/// A package of the catalog: the tools of one upstream, one custom-tool group, or an
/// installed manifest.
#[derive(Debug, Clone, PartialEq)]
pub struct PackageRow {
    /// Whose catalog it is in.
    pub owner: String,
    /// `^[a-z0-9][a-z0-9_-]*$`, unique per owner.
    pub id: String,
    /// Display name.
    pub name: String,
    /// What its tools do, in words.
    pub description: String,
    /// Catalog category.
    pub category: String,
    /// Catalog tags.
    pub tags: Vec<String>,
    /// `upstream` or `custom`.
    pub kind: String,
    /// The upstream that provides it (`kind = upstream`).
    pub upstream_id: Option<String>,
    /// `manifest`, `summary` or `legacy` (seed 002), `server.json`.
    pub source: String,
    /// `manifestSchemaVersion` of the manifest, `legacy` for discovered tools.
    pub schema_version: String,
    /// The manifest or `server.json` as installed (JSON), if any.
    pub manifest: Option<String>,
    /// JSON: the upstream's resources, resource templates and prompts, as discovered.
    pub surface: Option<String>,
    /// Milliseconds since the epoch of the last change.
    pub updated_at: i64,
}

/// One tool of the catalog (seed 002's `tool_catalog` row).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolRow {
    /// Whose catalog it is in.
    pub owner: String,
    /// The package's id.
    pub package: String,
    /// The tool's name inside its package.
    pub tool: String,
    /// `package.tool`.
    pub full_name: String,
    /// What the tool does.
    pub description: String,
    /// JSON.
    pub input_schema: String,
    /// JSON: the tool exactly as the upstream (or manifest) described it.
    pub raw: String,
    /// Catalog category.
    pub category: String,
    /// Catalog tags.
    pub tags: Vec<String>,
    /// Where its description came from (`manifest`, `summary`, `legacy`, `server.json`).
    pub source: String,
    /// `manifestSchemaVersion` of its manifest, `legacy` for discovered tools.
    pub schema_version: String,
    /// The tool needs task support Quarry does not speak yet: catalogued, not offered.
    pub requires_task: bool,
    /// Milliseconds since the epoch of the last change.
    pub updated_at: i64,
}

/// A custom HTTP tool (seed 003's `CustomTool`).
#[derive(Debug, Clone, PartialEq)]
pub struct CustomToolRow {
    /// UUID.
    pub id: String,
    /// Whose hub it is in.
    pub owner: String,
    /// The tool's name, unique per owner.
    pub name: String,
    /// JSON: the tool's specification without header values.
    pub spec: String,
    /// JSON: header values.
    pub secrets: String,
    /// Whether it is offered.
    pub enabled: bool,
    /// Milliseconds since the epoch.
    pub created_at: i64,
    /// Milliseconds since the epoch of the last change.
    pub updated_at: i64,
}

/// A named tool endpoint (`/mcp/e/<name>`): a saved selection of hub tools.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolEndpointRow {
    /// UUID.
    pub id: String,
    /// The URL's name, unique on the server.
    pub name: String,
    /// Whose it is: `user:<owner key>` or `space:<space UUID>`.
    pub owner: String,
    /// The selection as a query string (`tools=…&servers=…&pin=…&mode=search&names=tool&cap=N`).
    pub selection: String,
    /// What it is for, in words.
    pub description: String,
    /// The user (UUID) who made it; `None`: the machine's owner.
    pub created_by: Option<String>,
    /// Milliseconds since the epoch.
    pub created_at: i64,
    /// Milliseconds since the epoch of the last change.
    pub updated_at: i64,
}

/// Of endpoints of one name, the one whose owner comes first in `owners` (a user's own
/// before their space's): what [`HubStore::tool_endpoint`] returns, on every backend.
pub fn first_by_owner(rows: Vec<ToolEndpointRow>, owners: &[String]) -> Option<ToolEndpointRow> {
    rows.into_iter()
        .filter_map(|r| owners.iter().position(|o| *o == r.owner).map(|at| (at, r)))
        .min_by_key(|(at, _)| *at)
        .map(|(_, r)| r)
}

/// The hub's tables behind one trait, like everything the store keeps; with the wake-ups
/// ([`crate::ChangeNotifier`]) its follower waits on for changes other nodes make.
pub trait HubStore: crate::ChangeNotifier {
    /// Registers an upstream and its (empty) package in one transaction; `Conflict` when the
    /// owner already has that name or package.
    fn insert_upstream(&self, upstream: &UpstreamRow, package: &PackageRow) -> Result<()>;
    /// Replaces an upstream's mutable fields: everything but its owner, id, package and
    /// creation time.
    fn update_upstream(&self, upstream: &UpstreamRow) -> Result<()>;
    /// Replaces an upstream's secrets if they are still `expected` (compare-and-swap, so
    /// nodes refreshing one sign-in never both spend its refresh token); its `updated_at`
    /// stays, so no node reconnects for it. False when they had changed (or it is gone).
    fn swap_upstream_secrets(&self, id: &str, expected: &str, new: &str) -> Result<bool>;
    /// The owner's upstreams, or every owner's when `None` (the hub connects them at start).
    fn upstreams(&self, owner: Option<&str>) -> Result<Vec<UpstreamRow>>;
    /// One of the owner's upstreams by id.
    fn upstream(&self, owner: &str, id: &str) -> Result<Option<UpstreamRow>>;
    /// Removes an upstream with its package and tools; false when the owner has none such.
    fn delete_upstream(&self, owner: &str, id: &str) -> Result<bool>;

    /// Inserts or replaces a package and all its tools at once.
    fn replace_package(&self, package: &PackageRow, tools: &[ToolRow]) -> Result<()>;
    /// The owner's packages.
    fn packages(&self, owner: &str) -> Result<Vec<PackageRow>>;
    /// Every tool of the owner's catalog.
    fn catalog_tools(&self, owner: &str) -> Result<Vec<ToolRow>>;
    /// Removes a package that belongs to no upstream; false when there is none such.
    fn delete_package(&self, owner: &str, id: &str) -> Result<bool>;

    /// A number that changes whenever the owner's catalog, toggles or custom tools change
    /// (caches of derived data compare it; every node reads the same one).
    fn hub_generation(&self, owner: &str) -> Result<i64>;

    /// Catalog names (`package.tool`) the owner switched off.
    fn disabled_tools(&self, owner: &str) -> Result<Vec<String>>;
    /// Switches a catalog tool off (or back on) for the owner.
    fn set_tool_disabled(&self, owner: &str, full_name: &str, disabled: bool) -> Result<()>;

    /// Stores a new custom tool.
    fn insert_custom_tool(&self, tool: &CustomToolRow) -> Result<()>;
    /// Replaces a custom tool's specification, secrets and switch.
    fn update_custom_tool(&self, tool: &CustomToolRow) -> Result<()>;
    /// The owner's custom tools.
    fn custom_tools(&self, owner: &str) -> Result<Vec<CustomToolRow>>;
    /// Removes a custom tool; false when the owner has none such.
    fn delete_custom_tool(&self, owner: &str, id: &str) -> Result<bool>;

    /// Stores a new named endpoint; `Conflict` when its owner has one of that name (names are
    /// unique per owner: another user's or space's endpoint of the same name is no conflict,
    /// and a caller learns nothing of it).
    fn insert_tool_endpoint(&self, endpoint: &ToolEndpointRow) -> Result<()>;
    /// Replaces an endpoint's name, selection and description (by id); `NotFound`, or
    /// `Conflict` when its owner has another endpoint of the new name.
    fn update_tool_endpoint(&self, endpoint: &ToolEndpointRow) -> Result<()>;
    /// The endpoint `name` of the first of `owners` (in their order) that has one.
    fn tool_endpoint(&self, owners: &[String], name: &str) -> Result<Option<ToolEndpointRow>>;
    /// The endpoints of these owners, by name.
    fn tool_endpoints(&self, owners: &[String]) -> Result<Vec<ToolEndpointRow>>;
    /// Removes an endpoint by id; false when there is none.
    fn delete_tool_endpoint(&self, id: &str) -> Result<bool>;
}
