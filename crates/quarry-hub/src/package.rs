//! What a catalog is made of: packages and their tools. The catalog ([`crate::catalog`])
//! and its search index ([`crate::search`]) both read these.

use rmcp::model::Tool;
use serde::Serialize;
use serde_json::Value;

/// Where a view puts fields of an upstream's tool that rmcp's `Tool` has no place for (such
/// as `execution`); the server moves them back to the top level of each listed tool.
pub const EXTRA_META_KEY: &str = "io.quarry.hub/extra";
/// Fields of a tool definition rmcp's `Tool` keeps.
const TOOL_FIELDS: [&str; 8] = [
    "name",
    "title",
    "description",
    "inputSchema",
    "outputSchema",
    "annotations",
    "icons",
    "_meta",
];

/// Where a package's tools come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PackageKind {
    /// Quarry's own tools, served in-process.
    Builtin,
    /// An upstream MCP server.
    Upstream,
    /// The owner's custom HTTP tools.
    Custom,
}

/// One package of a catalog.
#[derive(Debug, Clone, Serialize)]
pub struct Package {
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
    /// Where its tools come from.
    pub kind: PackageKind,
    /// The upstream that provides it, for upstream packages.
    pub upstream_id: Option<String>,
    /// Where its description came from (`manifest`, `summary`, `legacy`, `server.json`).
    pub source: String,
    /// `manifestSchemaVersion` of its manifest, `legacy` for discovered tools.
    pub schema_version: String,
    /// Tools it holds.
    pub tool_count: usize,
    /// Tools its manifest declares that the upstream did not offer when last discovered.
    pub missing_tools: Vec<String>,
    /// The upstream's resources, templates and prompts (empty for other packages).
    #[serde(skip)]
    pub surface: crate::upstream::Surface,
}

/// One tool of a catalog.
#[derive(Debug, Clone)]
pub struct CatalogTool {
    /// The package's id.
    pub package: String,
    /// The name the tool has at its source (the upstream's name).
    pub name: String,
    /// `package.tool`.
    pub full_name: String,
    /// `package__tool`, or its shortened form.
    pub wire_name: String,
    /// The tool as its source described it (name, title, description, schemas,
    /// annotations, icons, `_meta`).
    pub tool: Tool,
    /// The source's JSON for the tool, as stored.
    pub raw: Value,
    /// The catalog's description (a manifest's, else the source's).
    pub catalog_description: String,
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
    /// Not switched off by its owner.
    pub enabled: bool,
    /// Its upstream is enabled (tools of a disabled server stay catalogued, unoffered).
    pub available: bool,
}

impl CatalogTool {
    /// The catalog's description of the tool.
    pub fn description(&self) -> &str {
        &self.catalog_description
    }

    /// The tool as a view shows it: its wire name, everything else as the source sent it
    /// (fields rmcp has no model for ride in `_meta` under [`EXTRA_META_KEY`]).
    pub fn exposed(&self, bare: bool) -> Tool {
        let mut t = self.tool.clone();
        if !bare {
            t.name = self.wire_name.clone().into();
        }
        if let Some(raw) = self.raw.as_object() {
            let extra: serde_json::Map<String, Value> = raw
                .iter()
                .filter(|(k, _)| !TOOL_FIELDS.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            if !extra.is_empty() {
                let mut meta = t.meta.take().unwrap_or_default();
                meta.0
                    .insert(EXTRA_META_KEY.to_owned(), Value::Object(extra));
                t.meta = Some(meta);
            }
        }
        t
    }
}
