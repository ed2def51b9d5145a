//! What every surface takes for knowledge entries with time (issue 44, item 4): `as_of` on
//! reads, a knowledge entry's versioning options on `create_knowledge`, and the provenance
//! each write records — parsed once here, so MCP, QukaAI's endpoint and REST agree.

use quarry_core::{Error, Result};
use quarry_engine::{EntryOptions, OnDuplicate, parse_instant};
use serde_json::{Map, Value, json};

use crate::auth::Caller;

/// Description of an `as_of` argument.
pub(crate) const AS_OF_DESCRIPTION: &str = "Read knowledge entries as they were valid at this moment (RFC 3339 timestamp, YYYY-MM-DD or Unix milliseconds); default now. Superseded and expired entries are left out at any moment they were not valid.";

/// The JSON schema of an `as_of` argument.
pub(crate) fn as_of_schema() -> Value {
    json!({"type": "string", "description": AS_OF_DESCRIPTION})
}

/// `as_of` from a JSON value: `None` when absent, null or blank.
pub(crate) fn parse_as_of(value: Option<&Value>) -> Result<Option<i64>> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
        Some(v) => parse_instant("as_of", v).map(Some),
    }
}

/// The properties `create_knowledge` takes for an entry with time, merged into its schema.
pub(crate) fn entry_properties() -> Map<String, Value> {
    let instant = |what: &str| json!({"type": "string", "description": format!("{what} (RFC 3339 timestamp, YYYY-MM-DD or Unix milliseconds)")});
    let mut p = Map::new();
    p.insert("key".into(), json!({"type": "string", "minLength": 1, "maxLength": quarry_engine::MAX_KEY_CHARS,
        "description": "Optional: the fact's key (e.g. \"acme.ceo\"). A write with the same key in this knowledge base supersedes the current entry of that key: reads return the new one, the old one stays in its history."}));
    p.insert("supersedes".into(), json!({"type": "string",
        "description": "Optional: the id of the current entry this one replaces (it takes that entry's key)."}));
    p.insert(
        "valid_from".into(),
        instant("Optional: when the fact became true; default now"),
    );
    p.insert(
        "valid_to".into(),
        instant("Optional: when the fact stops being true"),
    );
    p.insert(
        "expires_at".into(),
        instant("Optional: when to stop returning this entry"),
    );
    p.insert(
        "ttl".into(),
        json!({"type": "integer", "minimum": 1,
        "description": "Optional: seconds until the entry expires (instead of expires_at)"}),
    );
    p.insert("derived_from".into(), json!({"type": "array", "items": {"type": "string"}, "maxItems": quarry_engine::MAX_SOURCES,
        "description": "Optional: ids of the entries this one was derived from; deleting one of them deletes this entry too."}));
    p.insert(
        "conversation_id".into(),
        json!({"type": "string", "maxLength": 200,
        "description": "Optional: the conversation this was learned in, recorded with the entry"}),
    );
    p.insert("on_duplicate".into(), json!({"type": "string", "enum": ["report", "merge"], "default": "report",
        "description": "What to do when a current entry says nearly the same (and no key is given): report it in the answer, or merge (this write becomes that entry's new version)."}));
    p
}

/// An optional instant argument.
fn instant(args: &Map<String, Value>, name: &str) -> Result<Option<i64>> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => parse_instant(name, v).map(Some),
    }
}

/// An optional string argument.
fn text(args: &Map<String, Value>, name: &str) -> Result<Option<String>> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(Error::invalid(format!("{name} must be a string"))),
    }
}

/// The entry options in a `create_knowledge` call's arguments, with the provenance of
/// `caller` (and the call's `conversation_id`).
pub(crate) fn entry_options(
    args: &Map<String, Value>,
    caller: &Caller,
    via: &str,
) -> Result<EntryOptions> {
    let ttl_seconds = match args.get("ttl") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_u64()
                .ok_or_else(|| Error::invalid("ttl must be a whole number of seconds"))?,
        ),
    };
    let derived_from = match args.get("derived_from") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| Error::invalid("derived_from must be a list of entry ids"))
            })
            .collect::<Result<_>>()?,
        Some(_) => return Err(Error::invalid("derived_from must be a list of entry ids")),
    };
    let on_duplicate = match text(args, "on_duplicate")? {
        Some(v) => OnDuplicate::parse(&v)?,
        None => OnDuplicate::Report,
    };
    let conversation = text(args, "conversation_id")?;
    if conversation
        .as_deref()
        .is_some_and(|c| c.chars().count() > 200 || c.chars().any(char::is_control))
    {
        return Err(Error::invalid(
            "conversation_id must have at most 200 characters and no control characters",
        ));
    }
    let mut provenance = provenance(caller, via);
    if let Some(c) = conversation {
        provenance.insert("conversation".into(), json!(c));
    }
    Ok(EntryOptions {
        key: text(args, "key")?,
        supersedes: text(args, "supersedes")?,
        valid_from: instant(args, "valid_from")?,
        valid_to: instant(args, "valid_to")?,
        expires_at: instant(args, "expires_at")?,
        ttl_seconds,
        derived_from,
        provenance,
        on_duplicate,
    })
}

/// Who is writing (or deleting) and from where, as an entry's history records it: the user
/// and token (ids, never secrets), the client (an MCP client's name and version, else the
/// HTTP `User-Agent`), the tool call's request id, and the surface (`mcp`, `rest`).
pub(crate) fn provenance(caller: &Caller, via: &str) -> Map<String, Value> {
    let mut p = Map::new();
    p.insert("via".into(), json!(via));
    match &caller.principal.identity {
        Some(id) => {
            p.insert("user".into(), json!(id.user));
            p.insert("user_id".into(), json!(id.user_id));
            if let Some(token) = &id.token_id {
                p.insert("token_id".into(), json!(token));
            }
        }
        None => {
            p.insert("user".into(), json!(quarry_core::MACHINE_OWNER));
        }
    }
    if let Some(client) = &caller.origin.client {
        p.insert("client".into(), json!(client));
    }
    if let Some(call) = &caller.origin.call {
        p.insert("tool_call".into(), json!(call));
    }
    p
}

/// Who a curation change is recorded as: the caller's user name (the machine's owner
/// without one), and the token's id when a token made it.
pub(crate) fn editor(caller: &Caller) -> String {
    match &caller.principal.identity {
        Some(id) => match &id.token_id {
            Some(token) => format!("{} (token {token})", id.user),
            None => id.user.clone(),
        },
        None => quarry_core::MACHINE_OWNER.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn as_of_takes_timestamps_dates_and_milliseconds_and_names_bad_ones() {
        assert_eq!(parse_as_of(None).unwrap(), None);
        assert_eq!(parse_as_of(Some(&json!(""))).unwrap(), None);
        assert_eq!(
            parse_as_of(Some(&json!(1_780_000_000_000_i64))).unwrap(),
            Some(1_780_000_000_000)
        );
        assert_eq!(
            parse_as_of(Some(&json!("2026-06-01"))).unwrap(),
            Some(1_780_272_000_000)
        );
        assert_eq!(
            parse_as_of(Some(&json!("2026-06-01T00:00:01Z"))).unwrap(),
            Some(1_780_272_001_000)
        );
        let e = parse_as_of(Some(&json!("last tuesday"))).unwrap_err();
        assert!(e.to_string().contains("as_of"), "{e}");
        assert!(parse_as_of(Some(&json!(true))).is_err());
    }
}
