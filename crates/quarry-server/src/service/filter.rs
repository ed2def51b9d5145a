//! The one metadata filter every search surface takes (issue 44): a JSON filter node, or a
//! JSON string holding one (query strings, form fields, clients that send text), parsed by
//! `quarry_metadata`'s grammar. Errors are `InvalidInput` naming where the filter is wrong,
//! so REST answers 400 and MCP tools `isError`.

use quarry_core::{Error, Result};
use quarry_engine::Filter;
use serde_json::Value;

/// The filter in `value`: `None` when absent, null or an empty string.
pub(crate) fn parse_filter(value: Option<&Value>) -> Result<Option<Filter>> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => parse_filter_text(s),
        Some(v) => Filter::parse(v).map(Some),
    }
}

/// A filter written as JSON text (`--filter`, `?filter=`); blank text is no filter.
pub(crate) fn parse_filter_text(text: &str) -> Result<Option<Filter>> {
    if text.trim().is_empty() {
        return Ok(None);
    }
    let json: Value = serde_json::from_str(text)
        .map_err(|e| Error::invalid(format!("filter: not valid JSON: {e}")))?;
    if json.is_string() {
        return Err(Error::invalid(
            "filter: expected a JSON object or array, got a string",
        ));
    }
    Filter::parse(&json).map(Some)
}

/// Description of a `filter` argument, for tool schemas.
pub(crate) const FILTER_DESCRIPTION: &str = "Only documents whose metadata match this filter, e.g. {\"field\":\"status\",\"operator\":\"eq\",\"value\":\"published\"}. Combine with {\"and\":[...]}, {\"or\":[...]}, {\"not\":{...}} (an array means and). Operators: eq, ne, lt, lte, gt, gte, in, contains, exists, starts_with, ends_with. Dates are YYYY-MM-DD. Call the `metadata` tool to discover the fields, their types and values. Scores are unchanged by a filter.";

/// The JSON schema of a `filter` argument.
pub(crate) fn filter_schema() -> Value {
    serde_json::json!({"type": "object", "description": FILTER_DESCRIPTION})
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn accepts_objects_and_json_text_and_names_errors() {
        assert!(parse_filter(None).unwrap().is_none());
        assert!(parse_filter(Some(&json!(""))).unwrap().is_none());
        let node = json!({"field": "status", "operator": "eq", "value": "x"});
        assert!(parse_filter(Some(&node)).unwrap().is_some());
        assert!(
            parse_filter(Some(&json!(node.to_string())))
                .unwrap()
                .is_some()
        );
        let bad = json!({"field": "status", "operator": "eqq", "value": "x"});
        let e = parse_filter(Some(&bad)).unwrap_err().to_string();
        assert!(e.contains("eqq"), "{e}");
        assert!(parse_filter_text("{nope").is_err());
    }
}
