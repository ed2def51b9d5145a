//! Custom HTTP tools in the registry: an owner's tools kept in the store (header values
//! apart, as secrets), their `custom` package in the catalog, and a tool made ready to run
//! ([`Hub::custom_call`]; the request itself is [`crate::custom`]'s).

use std::collections::BTreeMap;

use quarry_core::{Error, Principal, Result, now_millis};
use quarry_store::{CustomToolRow, PackageRow};
use serde::Serialize;
use serde_json::Value;

use super::hub::{Hub, json_text, uuid_v4};
use crate::access::{may_use_custom, require_write};
use crate::catalog::CUSTOM_PACKAGE;
use crate::custom::{self, CustomCall, CustomToolError, CustomToolSpec, SpecError};
use crate::names;

/// A custom HTTP tool as listed: its specification with header *names* only.
#[derive(Debug, Clone, Serialize)]
pub struct CustomToolInfo {
    /// UUID.
    pub id: String,
    /// The tool's name, unique per owner.
    pub name: String,
    /// `custom.<name>`.
    pub full_name: String,
    /// What the tool does (shown to models).
    pub description: String,
    /// JSON Schema of its arguments.
    pub parameters: Value,
    /// The URL it requests (`{{arg}}` placeholders filled from the arguments).
    pub http_url: String,
    /// The HTTP method.
    pub http_method: String,
    /// Names of the headers sent (values are never shown).
    pub http_headers: Vec<String>,
    /// The request body with `{{arg}}` placeholders, if any.
    pub http_body_template: Option<String>,
    /// Longest request, in seconds (default: the hub's).
    pub timeout_secs: Option<u64>,
    /// Largest response kept, in bytes (default: the hub's).
    pub max_response_bytes: Option<u64>,
    /// Whether it is offered.
    pub enabled: bool,
    /// Always `http`.
    pub tool_type: &'static str,
    /// ISO 8601.
    pub created_at: String,
    /// ISO 8601 of the last change.
    pub updated_at: String,
}

fn custom_info(row: &CustomToolRow) -> Result<CustomToolInfo> {
    let spec: CustomToolSpec = serde_json::from_str(&row.spec)
        .map_err(|e| Error::Storage(format!("custom tool '{}': {e}", row.name)))?;
    let headers: BTreeMap<String, String> = serde_json::from_str(&row.secrets).unwrap_or_default();
    Ok(CustomToolInfo {
        id: row.id.clone(),
        full_name: names::catalog_name(CUSTOM_PACKAGE, &spec.name),
        name: spec.name,
        description: spec.description,
        parameters: spec.parameters,
        http_url: spec.http_url,
        http_method: spec.http_method.to_ascii_uppercase(),
        http_headers: headers.into_keys().collect(),
        http_body_template: spec.http_body_template,
        timeout_secs: spec.timeout_secs,
        max_response_bytes: spec.max_response_bytes,
        enabled: row.enabled,
        tool_type: "http",
        created_at: quarry_core::iso8601_millis(row.created_at),
        updated_at: quarry_core::iso8601_millis(row.updated_at),
    })
}

/// Header values go to the secrets column; the spec keeps none.
fn split_headers(mut spec: CustomToolSpec) -> (CustomToolSpec, BTreeMap<String, String>) {
    let headers = std::mem::take(&mut spec.http_headers);
    (spec, headers)
}

impl Hub {
    /// Rewrites the owner's `custom` package from its enabled custom tools.
    fn write_custom_package(&self, owner: &str) -> Result<()> {
        let now = now_millis();
        let rows = self.store.custom_tools(owner)?;
        let package = PackageRow {
            owner: owner.to_owned(),
            id: CUSTOM_PACKAGE.into(),
            name: "Custom HTTP tools".into(),
            description: "HTTP endpoints registered as tools".into(),
            category: "custom".into(),
            tags: vec!["http".into(), "webhook".into()],
            kind: "custom".into(),
            upstream_id: None,
            source: "custom".into(),
            schema_version: "custom".into(),
            manifest: None,
            updated_at: now,
            surface: None,
        };
        let mut tools = Vec::new();
        // Every custom tool is catalogued; a disabled one is switched off like any tool.
        for row in &rows {
            let info = custom_info(row)?;
            let raw = serde_json::json!({
                "name": info.name,
                "description": info.description,
                "inputSchema": info.parameters,
                "annotations": {"openWorldHint": true},
            });
            tools.push(quarry_store::ToolRow {
                owner: owner.to_owned(),
                package: CUSTOM_PACKAGE.into(),
                tool: info.name.clone(),
                full_name: info.full_name.clone(),
                description: info.description.clone(),
                input_schema: info.parameters.to_string(),
                raw: raw.to_string(),
                category: "custom".into(),
                tags: package.tags.clone(),
                source: "custom".into(),
                schema_version: "custom".into(),
                requires_task: false,
                updated_at: now,
            });
        }
        if rows.is_empty() {
            self.store.delete_package(owner, CUSTOM_PACKAGE)?;
            return Ok(());
        }
        self.store.replace_package(&package, &tools)
    }

    /// The caller's custom HTTP tools.
    pub fn custom_tools(&self, caller: &Principal) -> Result<Vec<CustomToolInfo>> {
        self.store
            .custom_tools(caller.owner_key())?
            .iter()
            .filter(|r| may_use_custom(caller, r))
            .map(custom_info)
            .collect()
    }

    /// A custom tool by id, by its name, or by the names the tool listings give it (the
    /// catalog name `custom.NAME` and the wire name an MCP client calls it by).
    fn custom_row(&self, caller: &Principal, id: &str) -> Result<CustomToolRow> {
        let mut rows = self.store.custom_tools(caller.owner_key())?;
        // Out of the token's tool scope: as missing as a tool that does not exist.
        rows.retain(|r| may_use_custom(caller, r));
        if let Some(row) = rows.iter().find(|r| r.id == id || r.name == id) {
            return Ok(row.clone());
        }
        let catalog = self.catalog(caller.owner_key())?;
        let named = catalog
            .tools
            .iter()
            .find(|t| t.package == CUSTOM_PACKAGE && (t.wire_name == id || t.full_name == id))
            .map(|t| t.name.clone());
        named
            .and_then(|n| rows.into_iter().find(|r| r.name == n))
            .ok_or_else(|| Error::NotFound(format!("custom tool '{id}' not found")))
    }

    /// One of the caller's custom tools.
    pub fn custom_tool(&self, caller: &Principal, id: &str) -> Result<CustomToolInfo> {
        custom_info(&self.custom_row(caller, id)?)
    }

    /// Creates a custom HTTP tool (seed 003's `CustomTool`); header values are kept apart.
    pub fn create_custom_tool(
        &self,
        caller: &Principal,
        spec: CustomToolSpec,
        enabled: bool,
    ) -> Result<CustomToolInfo> {
        require_write(caller)?;
        custom::validate_spec(&spec).map_err(|e| Error::InvalidInput(e.to_string()))?;
        let now = now_millis();
        let (spec, headers) = split_headers(spec);
        let row = CustomToolRow {
            id: uuid_v4(),
            owner: caller.owner_key().to_owned(),
            name: spec.name.clone(),
            spec: json_text(&spec)?,
            secrets: json_text(&headers)?,
            enabled,
            created_at: now,
            updated_at: now,
        };
        self.store.insert_custom_tool(&row)?;
        self.store.set_tool_disabled(
            caller.owner_key(),
            &names::catalog_name(CUSTOM_PACKAGE, &row.name),
            !enabled,
        )?;
        self.write_custom_package(caller.owner_key())?;
        custom_info(&row)
    }

    /// Changes a custom tool: `patch` holds the fields to replace (any of the spec's, and
    /// `enabled`). Header values not given are kept.
    pub fn update_custom_tool(
        &self,
        caller: &Principal,
        id: &str,
        patch: serde_json::Map<String, Value>,
    ) -> Result<CustomToolInfo> {
        require_write(caller)?;
        let mut row = self.custom_row(caller, id)?;
        let mut spec_json: serde_json::Map<String, Value> =
            serde_json::from_str(&row.spec).map_err(|e| Error::Storage(e.to_string()))?;
        let mut headers: BTreeMap<String, String> =
            serde_json::from_str(&row.secrets).unwrap_or_default();
        for (k, v) in patch {
            match k.as_str() {
                "enabled" => {
                    row.enabled = v.as_bool().ok_or_else(|| {
                        Error::InvalidInput("enabled: expected true or false".into())
                    })?
                }
                "http_headers" => {
                    headers = serde_json::from_value(v).map_err(|e| {
                        Error::InvalidInput(format!(
                            "http_headers: expected an object of strings ({e})"
                        ))
                    })?
                }
                _ => {
                    spec_json.insert(k, v);
                }
            }
        }
        spec_json.insert(
            "http_headers".into(),
            serde_json::to_value(&headers).unwrap_or_default(),
        );
        let spec: CustomToolSpec = serde_json::from_value(Value::Object(spec_json))
            .map_err(|e| Error::InvalidInput(format!("invalid custom tool: {e}")))?;
        custom::validate_spec(&spec).map_err(|e| Error::InvalidInput(e.to_string()))?;
        let (spec, headers) = split_headers(spec);
        row.name = spec.name.clone();
        row.spec = json_text(&spec)?;
        row.secrets = json_text(&headers)?;
        row.updated_at = now_millis();
        let old_name = names::catalog_name(CUSTOM_PACKAGE, &self.custom_row(caller, id)?.name);
        self.store.update_custom_tool(&row)?;
        self.store
            .set_tool_disabled(caller.owner_key(), &old_name, false)?;
        self.store.set_tool_disabled(
            caller.owner_key(),
            &names::catalog_name(CUSTOM_PACKAGE, &row.name),
            !row.enabled,
        )?;
        self.write_custom_package(caller.owner_key())?;
        custom_info(&row)
    }

    /// Removes one of the caller's custom tools.
    pub fn delete_custom_tool(&self, caller: &Principal, id: &str) -> Result<()> {
        require_write(caller)?;
        let row = self.custom_row(caller, id)?;
        self.store.delete_custom_tool(caller.owner_key(), &row.id)?;
        self.store.set_tool_disabled(
            caller.owner_key(),
            &names::catalog_name(CUSTOM_PACKAGE, &row.name),
            false,
        )?;
        self.write_custom_package(caller.owner_key())
    }

    /// A custom tool ready to run ([`CustomCall::run`]): its spec, and where the caller's
    /// requests may go (the "test" button, and `tools/call`).
    pub fn custom_call(
        &self,
        caller: &Principal,
        id: &str,
    ) -> std::result::Result<CustomCall, CustomToolError> {
        let row = self
            .custom_row(caller, id)
            .map_err(|e| CustomToolError::InvalidSpec(SpecError::Unavailable(e.to_string())))?;
        let mut spec: CustomToolSpec = serde_json::from_str(&row.spec)
            .map_err(|e| CustomToolError::InvalidSpec(SpecError::Unavailable(e.to_string())))?;
        spec.http_headers = serde_json::from_str(&row.secrets).unwrap_or_default();
        Ok(CustomCall::new(spec, self.net_policy(caller)))
    }
}
