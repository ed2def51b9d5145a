//! [`quarry_store::HubStore`] on PostgreSQL.
#![allow(unused_variables)] // the methods still `pending` ignore their arguments

use super::*;

impl HubStore for PgStore {
    fn insert_upstream(&self, upstream: &UpstreamRow, package: &PackageRow) -> Result<()> {
        Err(pending("insert_upstream"))
    }

    fn update_upstream(&self, upstream: &UpstreamRow) -> Result<()> {
        Err(pending("update_upstream"))
    }

    fn upstreams(&self, owner: Option<&str>) -> Result<Vec<UpstreamRow>> {
        Err(pending("upstreams"))
    }

    fn upstream(&self, owner: &str, id: &str) -> Result<Option<UpstreamRow>> {
        Err(pending("upstream"))
    }

    fn delete_upstream(&self, owner: &str, id: &str) -> Result<bool> {
        Err(pending("delete_upstream"))
    }

    fn replace_package(&self, package: &PackageRow, tools: &[ToolRow]) -> Result<()> {
        Err(pending("replace_package"))
    }

    fn packages(&self, owner: &str) -> Result<Vec<PackageRow>> {
        Err(pending("packages"))
    }

    fn catalog_tools(&self, owner: &str) -> Result<Vec<ToolRow>> {
        Err(pending("catalog_tools"))
    }

    fn delete_package(&self, owner: &str, id: &str) -> Result<bool> {
        Err(pending("delete_package"))
    }

    fn hub_generation(&self, owner: &str) -> Result<i64> {
        Err(pending("hub_generation"))
    }

    fn disabled_tools(&self, owner: &str) -> Result<Vec<String>> {
        Err(pending("disabled_tools"))
    }

    fn set_tool_disabled(&self, owner: &str, full_name: &str, disabled: bool) -> Result<()> {
        Err(pending("set_tool_disabled"))
    }

    fn insert_custom_tool(&self, tool: &CustomToolRow) -> Result<()> {
        Err(pending("insert_custom_tool"))
    }

    fn update_custom_tool(&self, tool: &CustomToolRow) -> Result<()> {
        Err(pending("update_custom_tool"))
    }

    fn custom_tools(&self, owner: &str) -> Result<Vec<CustomToolRow>> {
        Err(pending("custom_tools"))
    }

    fn delete_custom_tool(&self, owner: &str, id: &str) -> Result<bool> {
        Err(pending("delete_custom_tool"))
    }
}
