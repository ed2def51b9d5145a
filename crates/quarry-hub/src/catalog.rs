//! The catalog: every tool Quarry can expose, in packages (SPEC §1), with seed 002's
//! `manifest.json` and the MCP Registry's `server.json` as sources.
//!
//! A [`Catalog`] is one owner's snapshot: the built-in packages plus the owner's packages
//! from the store, with wire names assigned and lookups by catalog and wire name. It is
//! immutable; the hub builds a new one when the owner's generation changes.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use quarry_core::{Error, Result};
use quarry_store::{PackageRow, ToolRow};
use rmcp::model::Tool;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::names::{catalog_name, check_package_id, wire_name};
use crate::search::CatalogIndex;

pub use crate::package::{CatalogTool, EXTRA_META_KEY, Package, PackageKind};

/// Largest accepted `inputSchema` of one tool, serialised (seed 002's size guard).
pub const MAX_SCHEMA_BYTES: usize = 64 * 1024;
/// The built-in package of Quarry's own knowledge tools.
pub const KNOWLEDGE_PACKAGE: &str = "knowledge";
/// The id of the approver tools' package (`list_approvals`, `decide_approval`), which the
/// server adds: for people who decide held calls, never a chat model's tool.
pub const APPROVALS_PACKAGE: &str = "approvals";
/// The package every owner's custom HTTP tools belong to.
pub const CUSTOM_PACKAGE: &str = "custom";

/// A built-in package the server provides (its tools run in-process).
#[derive(Debug, Clone)]
pub struct BuiltinPackage {
    /// The package's id.
    pub id: String,
    /// Display name.
    pub name: String,
    /// What its tools do, in words.
    pub description: String,
    /// Catalog category.
    pub category: String,
    /// Catalog tags.
    pub tags: Vec<String>,
    /// Its tools.
    pub tools: Vec<Tool>,
}

/// One owner's catalog.
pub struct Catalog {
    /// The store's hub generation this snapshot was built from.
    pub generation: i64,
    /// Every package.
    pub packages: Vec<Package>,
    /// Every tool, in catalog order.
    pub tools: Vec<CatalogTool>,
    by_full: HashMap<String, usize>,
    by_wire: HashMap<String, usize>,
    index: OnceLock<std::result::Result<Arc<CatalogIndex>, String>>,
    /// Each tool's passage vector (in catalog order), set once a search needed them.
    vectors: OnceLock<Arc<Vec<Vec<f32>>>>,
    /// Whether someone took on computing `vectors` in the background.
    vectors_claimed: std::sync::atomic::AtomicBool,
}

impl Catalog {
    /// Builds a catalog from the built-in packages and an owner's stored rows.
    pub fn build(
        generation: i64,
        builtin: &[BuiltinPackage],
        packages: Vec<PackageRow>,
        tools: Vec<ToolRow>,
        disabled: &[String],
        disabled_upstreams: &[String],
        wire_max: usize,
    ) -> Catalog {
        let offline: std::collections::HashSet<&str> = packages
            .iter()
            .filter(|p| {
                p.upstream_id
                    .as_deref()
                    .is_some_and(|u| disabled_upstreams.iter().any(|d| d == u))
            })
            .map(|p| p.id.as_str())
            .collect();
        let offline: std::collections::HashSet<String> =
            offline.into_iter().map(str::to_owned).collect();
        let disabled: std::collections::HashSet<&str> =
            disabled.iter().map(String::as_str).collect();
        let mut out_pkgs = Vec::new();
        let mut out_tools = Vec::new();
        for b in builtin {
            out_pkgs.push(Package {
                id: b.id.clone(),
                name: b.name.clone(),
                description: b.description.clone(),
                category: b.category.clone(),
                tags: b.tags.clone(),
                kind: PackageKind::Builtin,
                upstream_id: None,
                source: "builtin".into(),
                schema_version: "builtin".into(),
                tool_count: b.tools.len(),
                missing_tools: Vec::new(),
                surface: Default::default(),
            });
            for t in &b.tools {
                let full = catalog_name(&b.id, &t.name);
                out_tools.push(CatalogTool {
                    package: b.id.clone(),
                    name: t.name.to_string(),
                    wire_name: wire_name(&b.id, &t.name, wire_max),
                    enabled: !disabled.contains(full.as_str()),
                    full_name: full,
                    raw: serde_json::to_value(t).unwrap_or(Value::Null),
                    catalog_description: t.description.as_deref().unwrap_or("").to_owned(),
                    tool: t.clone(),
                    category: b.category.clone(),
                    tags: b.tags.clone(),
                    source: "builtin".into(),
                    schema_version: "builtin".into(),
                    requires_task: false,
                    available: true,
                });
            }
        }
        let mut counts: HashMap<String, usize> = HashMap::new();
        let mut names: std::collections::HashSet<(String, String)> = Default::default();
        for row in tools {
            // A stored package never shadows a built-in one.
            if builtin.iter().any(|b| b.id == row.package) {
                continue;
            }
            let raw: Value = serde_json::from_str(&row.raw).unwrap_or(Value::Null);
            let Some(tool) = tool_from_raw(&raw, &row) else {
                continue;
            };
            *counts.entry(row.package.clone()).or_default() += 1;
            names.insert((row.package.clone(), row.tool.clone()));
            out_tools.push(CatalogTool {
                available: !offline.contains(&row.package),
                wire_name: wire_name(&row.package, &row.tool, wire_max),
                enabled: !disabled.contains(row.full_name.as_str()),
                package: row.package,
                name: row.tool,
                full_name: row.full_name,
                tool,
                raw,
                catalog_description: row.description,
                category: row.category,
                tags: row.tags,
                source: row.source,
                schema_version: row.schema_version,
                requires_task: row.requires_task,
            });
        }
        for p in packages {
            if builtin.iter().any(|b| b.id == p.id) {
                continue;
            }
            // Before the first discovery (no surface yet) the manifest's tools stand in.
            let missing_tools = match (&p.surface, &p.manifest) {
                (Some(_), Some(m)) => serde_json::from_str::<Value>(m)
                    .ok()
                    .and_then(|v| Manifest::parse(&v).ok())
                    .map(|m| {
                        m.tool_names()
                            .filter(|t| !names.contains(&(p.id.clone(), (*t).to_owned())))
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default(),
                _ => Vec::new(),
            };
            out_pkgs.push(Package {
                missing_tools,
                surface: p
                    .surface
                    .as_deref()
                    .and_then(|s| serde_json::from_str(s).ok())
                    .unwrap_or_default(),
                tool_count: counts.get(&p.id).copied().unwrap_or(0),
                kind: if p.kind == "custom" {
                    PackageKind::Custom
                } else {
                    PackageKind::Upstream
                },
                id: p.id,
                name: p.name,
                description: p.description,
                category: p.category,
                tags: p.tags,
                upstream_id: p.upstream_id,
                source: p.source,
                schema_version: p.schema_version,
            });
        }
        out_pkgs.sort_by(|a, b| a.id.cmp(&b.id));
        out_tools.sort_by(|a, b| a.full_name.cmp(&b.full_name));
        let by_full = out_tools
            .iter()
            .enumerate()
            .map(|(i, t)| (t.full_name.clone(), i))
            .collect();
        let by_wire = out_tools
            .iter()
            .enumerate()
            .map(|(i, t)| (t.wire_name.clone(), i))
            .collect();
        Catalog {
            generation,
            packages: out_pkgs,
            tools: out_tools,
            by_full,
            by_wire,
            index: OnceLock::new(),
            vectors: OnceLock::new(),
            vectors_claimed: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// A package by id.
    pub fn package(&self, id: &str) -> Option<&Package> {
        self.packages.iter().find(|p| p.id == id)
    }

    /// The position of a tool by catalog or wire name.
    pub fn position(&self, name: &str) -> Option<usize> {
        self.by_full
            .get(name)
            .or_else(|| self.by_wire.get(name))
            .copied()
    }

    /// A tool by catalog name (`pkg.tool`).
    pub fn by_full_name(&self, name: &str) -> Option<&CatalogTool> {
        self.by_full.get(name).map(|&i| &self.tools[i])
    }

    /// A tool by wire name (`pkg__tool` or its shortened form).
    pub fn by_wire_name(&self, name: &str) -> Option<&CatalogTool> {
        self.by_wire.get(name).map(|&i| &self.tools[i])
    }

    /// The tools of one package.
    pub fn tools_of<'a>(&'a self, package: &'a str) -> impl Iterator<Item = &'a CatalogTool> + 'a {
        self.tools.iter().filter(move |t| t.package == package)
    }

    /// What each tool is embedded as for vector search (in catalog order): its name in
    /// words, title, description and package. The same text always makes the same vector,
    /// so a tool that did not change is never embedded again (the store keeps them by hash).
    pub fn tool_texts(&self) -> Vec<String> {
        self.tools
            .iter()
            .map(|t| {
                let package = self
                    .package(&t.package)
                    .map(|p| p.name.as_str())
                    .unwrap_or(t.package.as_str());
                let mut text = t.name.replace(['_', '-'], " ");
                if let Some(title) = &t.tool.title {
                    text.push_str(". ");
                    text.push_str(title);
                }
                text.push_str(". ");
                text.push_str(t.description());
                text.push_str(" (");
                text.push_str(package);
                text.push(')');
                text
            })
            .collect()
    }

    /// The tools' vectors, if a search already computed them for this snapshot.
    pub fn vectors(&self) -> Option<Arc<Vec<Vec<f32>>>> {
        self.vectors.get().cloned()
    }

    /// True for the one caller that should compute the vectors in the background (every
    /// later caller gets false): a search that may not wait claims the work.
    pub fn claim_vectors(&self) -> bool {
        !self
            .vectors_claimed
            .swap(true, std::sync::atomic::Ordering::AcqRel)
    }

    /// Keeps the tools' vectors with this snapshot (the first ones set win).
    pub fn set_vectors(&self, vectors: Vec<Vec<f32>>) -> Arc<Vec<Vec<f32>>> {
        self.vectors.get_or_init(|| Arc::new(vectors)).clone()
    }

    /// The BM25 index over this catalog, built on first use.
    pub fn index(&self) -> Result<Arc<CatalogIndex>> {
        self.index
            .get_or_init(|| {
                CatalogIndex::build(&self.tools, &self.packages)
                    .map(Arc::new)
                    .map_err(|e| e.to_string())
            })
            .clone()
            .map_err(Error::Index)
    }
}

/// The typed tool from stored raw JSON; a tool whose JSON no longer parses (written by a
/// newer version) is rebuilt from the row's columns.
fn tool_from_raw(raw: &Value, row: &ToolRow) -> Option<Tool> {
    if let Ok(mut t) = serde_json::from_value::<Tool>(raw.clone()) {
        t.name = row.tool.clone().into();
        return Some(t);
    }
    let schema: serde_json::Map<String, Value> = serde_json::from_str(&row.input_schema).ok()?;
    let mut t = Tool::default();
    t.name = row.tool.clone().into();
    t.description = Some(row.description.clone().into());
    t.input_schema = Arc::new(schema);
    Some(t)
}

/// Seed 002's `manifest.json`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    /// The package's id (optional: the installer may choose one).
    pub id: Option<String>,
    /// Display name.
    pub name: Option<String>,
    #[serde(default)]
    /// What the package does.
    pub description: Option<String>,
    #[serde(default)]
    /// Catalog category.
    pub category: Option<String>,
    #[serde(default)]
    /// Catalog tags.
    pub tags: Vec<String>,
    #[serde(default)]
    /// Tools with their schemas.
    pub tools: Vec<ManifestTool>,
    /// Older packages: names and descriptions only (seed 002's `toolsSummary`).
    #[serde(default)]
    pub tools_summary: Vec<ManifestTool>,
    #[serde(default)]
    /// The manifest format's version.
    pub manifest_schema_version: Option<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
/// One tool a manifest lists.
pub struct ManifestTool {
    /// The tool's name.
    pub name: String,
    #[serde(default)]
    /// What it does.
    pub description: Option<String>,
    #[serde(default)]
    /// Its input schema (JSON Schema object).
    pub input_schema: Option<Value>,
}

impl Manifest {
    /// Whether the manifest lists tools (`tools` or `toolsSummary`): then it decides which
    /// tools its package exposes.
    pub fn declares_tools(&self) -> bool {
        !self.tools.is_empty() || !self.tools_summary.is_empty()
    }

    /// The names of the tools it lists.
    pub fn tool_names(&self) -> impl Iterator<Item = &str> {
        self.tools
            .iter()
            .chain(&self.tools_summary)
            .map(|t| t.name.as_str())
    }

    /// Reads a manifest and checks its tools (names, schemas).
    pub fn parse(value: &Value) -> Result<Manifest> {
        let m: Manifest = serde_json::from_value(value.clone())
            .map_err(|e| Error::InvalidInput(format!("invalid manifest.json: {e}")))?;
        for t in m.tools.iter().chain(&m.tools_summary) {
            if t.name.trim().is_empty() {
                return Err(Error::InvalidInput(
                    "invalid manifest.json: a tool has an empty name".into(),
                ));
            }
            if let Some(s) = &t.input_schema {
                check_schema(&t.name, s)?;
            }
        }
        Ok(m)
    }
}

/// Seed 002's size guard, and the shape MCP requires of an input schema.
pub fn check_schema(tool: &str, schema: &Value) -> Result<()> {
    if !schema.is_object() {
        return Err(Error::InvalidInput(format!(
            "tool '{tool}': inputSchema must be a JSON object"
        )));
    }
    let size = serde_json::to_string(schema).map(|s| s.len()).unwrap_or(0);
    if size > MAX_SCHEMA_BYTES {
        return Err(Error::InvalidInput(format!(
            "tool '{tool}': inputSchema is {size} bytes, more than the {MAX_SCHEMA_BYTES} allowed"
        )));
    }
    Ok(())
}

/// Metadata for a package row: from its manifest when there is one.
#[derive(Debug, Clone, Default)]
pub struct PackageMeta {
    /// Display name.
    pub name: String,
    /// What the package does.
    pub description: String,
    /// Catalog category.
    pub category: String,
    /// Catalog tags.
    pub tags: Vec<String>,
}

/// The catalog rows of an upstream package: the discovered tools, described by the manifest
/// where it names them (`source = manifest`/`summary`), the others `legacy` (seed 002 P0b).
/// Before anything was discovered, the manifest's tools stand in. Tools whose schema fails
/// the size guard are left out with a warning.
pub fn package_rows(
    owner: &str,
    package: &PackageRow,
    manifest: Option<&Manifest>,
    discovered: Option<(&[Tool], &HashMap<String, Value>)>,
    now: i64,
) -> Vec<ToolRow> {
    let described = |name: &str| -> Option<(&ManifestTool, &'static str)> {
        let m = manifest?;
        m.tools
            .iter()
            .find(|t| t.name == name)
            .map(|t| (t, "manifest"))
            .or_else(|| {
                m.tools_summary
                    .iter()
                    .find(|t| t.name == name)
                    .map(|t| (t, "summary"))
            })
    };
    // A manifest that lists tools decides what the package exposes (seed 002's `toTools()`):
    // an upstream tool it does not declare is left out.
    let declares = manifest.is_some_and(Manifest::declares_tools);
    let version = manifest
        .and_then(|m| m.manifest_schema_version.clone())
        .unwrap_or_else(|| "v2".into());
    let mut rows = Vec::new();
    let row = |tool: &str,
               description: String,
               schema: &Value,
               raw: Value,
               source: &str,
               requires_task: bool| ToolRow {
        owner: owner.to_owned(),
        package: package.id.clone(),
        tool: tool.to_owned(),
        full_name: catalog_name(&package.id, tool),
        description,
        input_schema: schema.to_string(),
        raw: raw.to_string(),
        category: package.category.clone(),
        tags: package.tags.clone(),
        source: source.to_owned(),
        schema_version: if source == "legacy" {
            "legacy".into()
        } else {
            version.clone()
        },
        requires_task,
        updated_at: now,
    };
    match discovered {
        Some((tools, wire)) => {
            for t in tools {
                let declared = described(&t.name);
                if declares && declared.is_none() {
                    tracing::info!(package = %package.id, tool = %t.name, "not in the package's manifest: not exposed");
                    continue;
                }
                // The upstream's own JSON when the wire was seen, else what rmcp kept.
                let mut raw = wire
                    .get(t.name.as_ref())
                    .cloned()
                    .unwrap_or_else(|| serde_json::to_value(t).unwrap_or(Value::Null));
                let mut schema = Value::Object((*t.input_schema).clone());
                // The manifest is the truth at run time (seed 002's `toTools()`): its
                // description and input schema replace the upstream's in the definition
                // views list; a summary has no schema, so the upstream's stays.
                let mut description = t.description.as_deref().unwrap_or("").to_owned();
                if let Some((m, _)) = declared {
                    if let Some(d) = m.description.as_deref().filter(|d| !d.is_empty()) {
                        description = d.to_owned();
                        if let Some(obj) = raw.as_object_mut() {
                            obj.insert("description".into(), Value::String(d.to_owned()));
                        }
                    }
                    if let Some(s) = &m.input_schema {
                        schema = s.clone();
                        if let Some(obj) = raw.as_object_mut() {
                            obj.insert("inputSchema".into(), s.clone());
                        }
                    }
                }
                if let Err(e) = check_schema(&t.name, &schema) {
                    tracing::warn!(package = %package.id, "skipping tool: {e}");
                    continue;
                }
                let requires_task = requires_task(&raw);
                let source = declared.map_or("legacy", |(_, source)| source);
                rows.push(row(
                    &t.name,
                    description,
                    &schema,
                    raw,
                    source,
                    requires_task,
                ));
            }
        }
        None => {
            if let Some(m) = manifest {
                for (t, source) in m
                    .tools
                    .iter()
                    .map(|t| (t, "manifest"))
                    .chain(m.tools_summary.iter().map(|t| (t, "summary")))
                {
                    if rows.iter().any(|r: &ToolRow| r.tool == t.name) {
                        continue;
                    }
                    let schema = t
                        .input_schema
                        .clone()
                        .unwrap_or_else(|| json!({"type": "object"}));
                    let raw = json!({
                        "name": t.name,
                        "description": t.description,
                        "inputSchema": schema,
                    });
                    rows.push(row(
                        &t.name,
                        t.description.clone().unwrap_or_default(),
                        &schema,
                        raw,
                        source,
                        false,
                    ));
                }
            }
        }
    }
    rows
}

/// A tool that declares `execution.taskSupport: "required"` cannot be called without tasks.
fn requires_task(raw: &Value) -> bool {
    raw.pointer("/execution/taskSupport")
        .and_then(Value::as_str)
        .is_some_and(|s| s == "required")
}

/// An upstream launch spec from the official MCP Registry's `server.json` (schema
/// 2025-12-11): a remote (Streamable HTTP or SSE) or a package run over stdio.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchSpec {
    /// The server's name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// How to connect.
    pub transport: crate::upstream::TransportKind,
    /// The command (stdio) or URL (HTTP, SSE).
    pub config: String,
    /// The command's arguments (stdio).
    pub args: Vec<String>,
    /// Environment variables the package declares required, with defaults when given.
    pub env: Vec<(String, Option<String>, bool)>,
}

/// Reads a `server.json`: the first remote if any (no install needed), else the first npm
/// or PyPI package over stdio (`npx -y id@version`, `uvx id==version`).
pub fn parse_server_json(v: &Value) -> Result<LaunchSpec> {
    use crate::upstream::TransportKind;
    let bad = |m: &str| Error::InvalidInput(format!("invalid server.json: {m}"));
    let name = v
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("missing \"name\""))?
        .to_owned();
    let description = v
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    if let Some(remote) = v
        .get("remotes")
        .and_then(Value::as_array)
        .and_then(|r| r.first())
    {
        let kind = remote.get("type").and_then(Value::as_str).unwrap_or("");
        let transport = match kind {
            "streamable-http" => TransportKind::Http,
            "sse" => TransportKind::Sse,
            other => return Err(bad(&format!("unsupported remote type '{other}'"))),
        };
        let url = remote
            .get("url")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("remote without \"url\""))?;
        return Ok(LaunchSpec {
            name,
            description,
            transport,
            config: url.to_owned(),
            args: Vec::new(),
            env: Vec::new(),
        });
    }
    let packages = v
        .get("packages")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("neither \"remotes\" nor \"packages\""))?;
    for p in packages {
        let registry = p.get("registryType").and_then(Value::as_str).unwrap_or("");
        let id = p.get("identifier").and_then(Value::as_str).unwrap_or("");
        let version = p.get("version").and_then(Value::as_str);
        let transport = p
            .pointer("/transport/type")
            .and_then(Value::as_str)
            .unwrap_or("stdio");
        if transport != "stdio" || id.is_empty() {
            continue;
        }
        let (program, mut args) = match (registry, version) {
            ("npm", Some(ver)) => ("npx".to_owned(), vec!["-y".into(), format!("{id}@{ver}")]),
            ("npm", None) => ("npx".to_owned(), vec!["-y".into(), id.to_owned()]),
            ("pypi", Some(ver)) => ("uvx".to_owned(), vec![format!("{id}=={ver}")]),
            ("pypi", None) => ("uvx".to_owned(), vec![id.to_owned()]),
            _ => continue,
        };
        if let Some(pa) = p.get("packageArguments").and_then(Value::as_array) {
            for a in pa {
                let value = a
                    .get("value")
                    .or_else(|| a.get("default"))
                    .and_then(Value::as_str);
                match (a.get("type").and_then(Value::as_str), value) {
                    (Some("named"), Some(val)) => {
                        if let Some(n) = a.get("name").and_then(Value::as_str) {
                            args.push(n.to_owned());
                        }
                        args.push(val.to_owned());
                    }
                    (_, Some(val)) => args.push(val.to_owned()),
                    _ => {}
                }
            }
        }
        let env = p
            .get("environmentVariables")
            .and_then(Value::as_array)
            .map(|vars| {
                vars.iter()
                    .filter_map(|e| {
                        let n = e.get("name").and_then(Value::as_str)?;
                        let d = e.get("default").and_then(Value::as_str).map(str::to_owned);
                        let required = e
                            .get("isRequired")
                            .and_then(Value::as_bool)
                            .unwrap_or(false);
                        Some((n.to_owned(), d, required))
                    })
                    .collect()
            })
            .unwrap_or_default();
        return Ok(LaunchSpec {
            name,
            description,
            transport: TransportKind::Stdio,
            config: program,
            args,
            env,
        });
    }
    Err(bad("no remote and no npm or PyPI package over stdio"))
}

/// Checks a package id given by a person (or derives one from a name).
pub fn package_id(explicit: Option<&str>, name: &str) -> Result<String> {
    let id = match explicit {
        Some(id) => id.trim().to_owned(),
        None => crate::names::package_id_from(name),
    };
    check_package_id(&id).map_err(|e| Error::InvalidInput(e.to_string()))?;
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkg() -> PackageRow {
        PackageRow {
            owner: "o".into(),
            id: "excel-tools".into(),
            name: "Excel".into(),
            description: String::new(),
            category: "data".into(),
            tags: vec!["excel".into()],
            kind: "upstream".into(),
            upstream_id: None,
            source: "manifest".into(),
            schema_version: "v2".into(),
            manifest: None,
            updated_at: 0,
            surface: None,
        }
    }

    #[test]
    fn manifests_parse_and_guard_schemas() {
        let m = Manifest::parse(&json!({
            "id": "excel-tools", "name": "Excel 工具集", "category": "data",
            "tags": ["excel"], "manifestSchemaVersion": "v2",
            "tools": [{"name": "create_workbook", "description": "创建", "inputSchema": {"type": "object"}}],
            "toolsSummary": [{"name": "old_tool", "description": "old"}]
        }))
        .unwrap();
        assert_eq!(m.tools.len(), 1);
        let huge = json!({"tools": [{"name": "x", "inputSchema": {"type": "object", "description": "a".repeat(MAX_SCHEMA_BYTES)}}]});
        let err = Manifest::parse(&huge).unwrap_err().to_string();
        assert!(err.contains("bytes"), "{err}");
        assert!(Manifest::parse(&json!({"tools": [{"name": "x", "inputSchema": []}]})).is_err());
    }

    #[test]
    fn rows_mark_their_source() {
        let m = Manifest::parse(&json!({
            "tools": [{"name": "a", "description": "from manifest", "inputSchema": {"type": "object"}}],
            "toolsSummary": [{"name": "b", "description": "summary"}],
            "manifestSchemaVersion": "v2"
        }))
        .unwrap();
        let before = package_rows("o", &pkg(), Some(&m), None, 1);
        assert_eq!(before.len(), 2);
        assert_eq!(before[0].source, "manifest");
        assert_eq!(before[1].source, "summary");
        let mut a = Tool::default();
        a.name = "a".into();
        a.input_schema = Arc::new(serde_json::Map::new());
        let mut c = Tool::default();
        c.name = "c".into();
        c.description = Some("discovered".into());
        let discovered = [a, c];
        // The manifest lists tools: `c`, which it does not declare, is not exposed, and `a`
        // carries the manifest's description and schema.
        let after = package_rows(
            "o",
            &pkg(),
            Some(&m),
            Some((&discovered, &HashMap::new())),
            2,
        );
        assert_eq!(after.len(), 1);
        assert_eq!(
            (after[0].tool.as_str(), after[0].source.as_str()),
            ("a", "manifest")
        );
        assert_eq!(after[0].description, "from manifest");
        let raw: Value = serde_json::from_str(&after[0].raw).unwrap();
        assert_eq!(raw["description"], "from manifest");
        assert_eq!(raw["inputSchema"], json!({"type": "object"}));
        // Without tools in the manifest (or without one), discovered tools are `legacy`.
        let bare = Manifest::parse(&json!({"name": "Excel"})).unwrap();
        for manifest in [Some(&bare), None] {
            let after = package_rows(
                "o",
                &pkg(),
                manifest,
                Some((&discovered, &HashMap::new())),
                2,
            );
            assert_eq!(after.len(), 2);
            assert_eq!(
                (after[1].tool.as_str(), after[1].source.as_str()),
                ("c", "legacy")
            );
            assert_eq!(after[1].schema_version, "legacy");
            assert_eq!(after[1].full_name, "excel-tools.c");
        }
    }

    #[test]
    fn server_json_remote_and_packages() {
        let remote = parse_server_json(&json!({
            "name": "io.example/weather", "description": "Weather",
            "remotes": [{"type": "streamable-http", "url": "https://mcp.example.com/mcp"}]
        }))
        .unwrap();
        assert_eq!(remote.transport, crate::upstream::TransportKind::Http);
        assert_eq!(remote.config, "https://mcp.example.com/mcp");
        let npm = parse_server_json(&json!({
            "name": "io.github.modelcontextprotocol/server-everything",
            "packages": [{"registryType": "npm", "identifier": "@modelcontextprotocol/server-everything",
                          "version": "2026.1.14", "transport": {"type": "stdio"},
                          "packageArguments": [{"type": "positional", "value": "stdio"}],
                          "environmentVariables": [{"name": "API_KEY", "isRequired": true, "isSecret": true}]}]
        }))
        .unwrap();
        assert_eq!(npm.config, "npx");
        assert_eq!(
            npm.args,
            vec![
                "-y",
                "@modelcontextprotocol/server-everything@2026.1.14",
                "stdio"
            ]
        );
        assert_eq!(npm.env, vec![("API_KEY".to_owned(), None, true)]);
        assert!(parse_server_json(&json!({"name": "x"})).is_err());
        assert!(parse_server_json(&json!({"packages": []})).is_err());
    }
}
