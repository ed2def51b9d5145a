//! Forwarded results between protocol eras. An upstream answers in the era it negotiated
//! with the hub (2024-11-05 … 2026-07-28); the client that asked may speak another. What one
//! era requires and another does not know is fixed here, once, for every forwarded method
//! (`tools/call`, `prompts/get`, `resources/read`):
//!
//! - 2026-07-28 requires `resultType` on every result; an older upstream never sends it (rmcp
//!   reads it as absent), so it is set to `complete` — which is what the spec says an absent
//!   one means. rmcp's server strips `resultType: "complete"` again for older clients.
//! - 2026-07-28 requires `ttlMs` and `cacheScope` on `resources/read`; rmcp's server fills
//!   missing ones for clients of that era. An older client never heard of them, so a newer
//!   upstream's hints are dropped for it.

use rmcp::model::{
    CallToolResult, GetPromptResult, ProtocolVersion, ReadResourceResult, ResultType,
};

/// Whether `client` negotiated 2026-07-28 or later (dates compare as strings).
fn is_modern(client: Option<&ProtocolVersion>) -> bool {
    client.is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

/// An upstream's `tools/call` result, as every era accepts it.
pub fn call_result(mut result: CallToolResult) -> CallToolResult {
    result.result_type.get_or_insert(ResultType::COMPLETE);
    result
}

/// An upstream's `prompts/get` result, as every era accepts it.
pub fn prompt_result(mut result: GetPromptResult) -> GetPromptResult {
    result.result_type.get_or_insert(ResultType::COMPLETE);
    result
}

/// An upstream's `resources/read` result, as `client`'s era expects it.
pub fn read_result(
    mut result: ReadResourceResult,
    client: Option<&ProtocolVersion>,
) -> ReadResourceResult {
    result.result_type.get_or_insert(ResultType::COMPLETE);
    if !is_modern(client) {
        result.ttl_ms = None;
        result.cache_scope = None;
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn results_of_older_upstreams_get_the_result_type_2026_requires() {
        let old: CallToolResult =
            serde_json::from_value(json!({"content": [{"type": "text", "text": "hi"}]})).unwrap();
        assert_eq!(old.result_type, None);
        let modern_version = ProtocolVersion::V_2026_07_28;
        let modern = Some(&modern_version);
        let v = serde_json::to_value(call_result(old)).unwrap();
        assert_eq!(v["resultType"], "complete");
        let prompt: GetPromptResult = serde_json::from_value(json!({"messages": []})).unwrap();
        let v = serde_json::to_value(prompt_result(prompt)).unwrap();
        assert_eq!(v["resultType"], "complete");
        let read: ReadResourceResult = serde_json::from_value(json!({"contents": []})).unwrap();
        let v = serde_json::to_value(read_result(read, modern)).unwrap();
        assert_eq!(v["resultType"], "complete");
    }

    #[test]
    fn a_newer_upstreams_cache_hints_are_dropped_for_older_clients() {
        let new =
            json!({"resultType": "complete", "contents": [], "ttlMs": 5, "cacheScope": "public"});
        let (legacy, modern) = (ProtocolVersion::V_2025_11_25, ProtocolVersion::V_2026_07_28);
        let read: ReadResourceResult = serde_json::from_value(new.clone()).unwrap();
        let v = serde_json::to_value(read_result(read, Some(&legacy))).unwrap();
        assert!(
            v.get("ttlMs").is_none() && v.get("cacheScope").is_none(),
            "{v}"
        );
        let read: ReadResourceResult = serde_json::from_value(new).unwrap();
        let v = serde_json::to_value(read_result(read, Some(&modern))).unwrap();
        assert_eq!(v["ttlMs"], 5);
        assert_eq!(v["cacheScope"], "public");
    }
}
