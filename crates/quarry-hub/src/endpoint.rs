//! Named tool endpoints (`/mcp/e/<name>`, issue 27): a saved [`Selection`] with a name and an
//! optional cap, stored as a canonical query string so an edit changes what every client of
//! the URL sees without any client changing its configuration. An endpoint may also rename
//! its tools and replace their descriptions ([`ToolOverride`]), which the view it serves
//! applies ([`crate::View::with_overrides`]).

use std::collections::BTreeMap;

use quarry_core::Error;

use crate::names::{CALL_TOOL, SEARCH_TOOLS, Selection, SelectionError};

/// Longest endpoint name.
pub const MAX_NAME: usize = 64;
/// Longest new name an endpoint gives a tool (what every client accepts).
pub const MAX_TOOL_NAME: usize = 64;
/// Longest description an endpoint gives a tool, in characters.
pub const MAX_TOOL_DESCRIPTION: usize = 4000;

/// What one endpoint shows of one tool instead of the catalog's: another name, another
/// description, or both (at least one). Policies and the gate keep matching the tool's
/// catalog name.
/// As the REST API reads and shows it: `{"name"?, "description"?}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolOverride {
    /// The name the endpoint lists the tool under, and the one it answers to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The description the endpoint lists the tool with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// A saved selection: what `?tools=`, `?servers=`, `?pin=`, `?mode=` and `?names=` would say,
/// the most tools it may list (never above the server's cap), and its tools' overrides.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EndpointSelection {
    /// The selection.
    pub selection: Selection,
    /// The endpoint's own cap, if lower than the server's.
    pub cap: Option<usize>,
    /// New names and descriptions, by catalog name (`package.tool`).
    pub overrides: BTreeMap<String, ToolOverride>,
}

/// Checks one override on its own (what needs no catalog): a new name of 1–[`MAX_TOOL_NAME`]
/// letters, digits, `_` or `-` that is not a meta-tool's; a description of
/// 1–[`MAX_TOOL_DESCRIPTION`] characters; at least one of them. The message names the tool.
pub fn check_override(full_name: &str, o: &ToolOverride) -> Result<(), String> {
    if o.name.is_none() && o.description.is_none() {
        return Err(format!(
            "override of '{full_name}' sets neither a name nor a description"
        ));
    }
    if let Some(name) = &o.name {
        if name.is_empty()
            || name.len() > MAX_TOOL_NAME
            || !name.chars().all(crate::names::wire_char_ok)
        {
            return Err(format!(
                "invalid new name {name:?} for '{full_name}': use 1-{MAX_TOOL_NAME} letters, digits, '_' or '-'"
            ));
        }
        if name == SEARCH_TOOLS || name == CALL_TOOL {
            return Err(format!(
                "'{full_name}' cannot be renamed '{name}': that name belongs to search mode's own tool"
            ));
        }
    }
    if let Some(description) = &o.description {
        let n = description.chars().count();
        if n == 0 || n > MAX_TOOL_DESCRIPTION || description.trim().is_empty() {
            return Err(format!(
                "the new description of '{full_name}' must be 1-{MAX_TOOL_DESCRIPTION} characters and not blank (it has {n})"
            ));
        }
    }
    Ok(())
}

/// Checks an endpoint's name: `[a-z0-9][a-z0-9_-]*`, at most [`MAX_NAME`] — it is a path
/// segment people type.
pub fn check_name(name: &str) -> Result<(), Error> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME
        && name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_'));
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "invalid endpoint name {name:?}: use lowercase letters, digits, '-' or '_', starting with a letter or digit ({MAX_NAME} at most)"
        )))
    }
}

fn join(list: &[String]) -> String {
    list.iter()
        .map(|s| percent_encoding::utf8_percent_encode(s, QUERY_VALUE).to_string())
        .collect::<Vec<_>>()
        .join(",")
}

fn encode(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, QUERY_VALUE).to_string()
}

/// A query value as a form would send it: `+` is a space, `%XX` a byte.
fn decode(s: &str) -> String {
    let s = s.replace('+', " ");
    percent_encoding::percent_decode_str(&s)
        .decode_utf8_lossy()
        .into_owned()
}

/// `rename=` / `describe=`: `<package.tool>:<value>`, each part percent-encoded (so the first
/// `:` of the raw value is the separator).
fn override_part(key: &str, raw: &str) -> Result<(String, String), EndpointSelectionError> {
    let bad = || EndpointSelectionError::Override(format!("{key}={raw}"));
    let (tool, value) = raw.split_once(':').ok_or_else(bad)?;
    let tool = decode(tool);
    if tool.is_empty() {
        return Err(bad());
    }
    Ok((tool, decode(value)))
}

/// What a query value must escape (its separators and anything not plainly printable).
const QUERY_VALUE: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'.')
    .remove(b'_')
    .remove(b'-')
    .remove(b'~');

impl EndpointSelection {
    /// The canonical query string
    /// (`tools=…&servers=…&pin=…&mode=search&names=tool&cap=N&rename=…&describe=…`): each
    /// override as `rename=<package.tool>:<name>` and `describe=<package.tool>:<text>`, both
    /// parts percent-encoded, tools in name order.
    pub fn to_query(&self) -> String {
        let s = &self.selection;
        let mut parts = Vec::new();
        if let Some(t) = &s.tools {
            parts.push(format!("tools={}", join(t)));
        }
        if let Some(p) = &s.servers {
            parts.push(format!("servers={}", join(p)));
        }
        if !s.pin.is_empty() {
            parts.push(format!("pin={}", join(&s.pin)));
        }
        if s.search_mode {
            parts.push("mode=search".into());
        }
        if s.own_names {
            parts.push("names=tool".into());
        }
        if let Some(cap) = self.cap {
            parts.push(format!("cap={cap}"));
        }
        for (tool, o) in &self.overrides {
            if let Some(name) = &o.name {
                parts.push(format!("rename={}:{}", encode(tool), encode(name)));
            }
            if let Some(description) = &o.description {
                parts.push(format!("describe={}:{}", encode(tool), encode(description)));
            }
        }
        parts.join("&")
    }

    /// Reads a stored (or hand-written) query string back.
    pub fn from_query(query: &str) -> Result<EndpointSelection, EndpointSelectionError> {
        let selection =
            Selection::from_query(Some(query)).map_err(EndpointSelectionError::Selection)?;
        let mut cap = None;
        let mut overrides: BTreeMap<String, ToolOverride> = BTreeMap::new();
        for pair in query.split('&') {
            if let Some(v) = pair.strip_prefix("cap=") {
                cap = Some(
                    v.parse::<usize>()
                        .ok()
                        .filter(|n| *n > 0)
                        .ok_or_else(|| EndpointSelectionError::Cap(v.to_owned()))?,
                );
            } else if let Some(v) = pair.strip_prefix("rename=") {
                let (tool, name) = override_part("rename", v)?;
                overrides.entry(tool).or_default().name = Some(name);
            } else if let Some(v) = pair.strip_prefix("describe=") {
                let (tool, description) = override_part("describe", v)?;
                overrides.entry(tool).or_default().description = Some(description);
            }
        }
        Ok(EndpointSelection {
            selection,
            cap,
            overrides,
        })
    }
}

/// A saved selection that cannot be read ([`EndpointSelection::from_query`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum EndpointSelectionError {
    /// A selection parameter with a value it does not take.
    Selection(SelectionError),
    /// `cap=` that is not a positive whole number (the value given).
    Cap(String),
    /// `rename=` or `describe=` that is not `<package.tool>:<value>` (the pair given).
    Override(String),
}

impl std::fmt::Display for EndpointSelectionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EndpointSelectionError::Selection(e) => write!(f, "{e}"),
            EndpointSelectionError::Cap(v) => {
                write!(f, "cap must be a positive whole number, not {v:?}")
            }
            EndpointSelectionError::Override(v) => {
                write!(
                    f,
                    "{v:?}: use rename=<package.tool>:<name> or describe=<package.tool>:<text>"
                )
            }
        }
    }
}

impl std::error::Error for EndpointSelectionError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            EndpointSelectionError::Selection(e) => Some(e),
            EndpointSelectionError::Cap(_) | EndpointSelectionError::Override(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_path_segments() {
        for ok in ["ops", "team-ops_2", "0day"] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "Ops", "-ops", "a/b", "a b", "é", &"x".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn selections_round_trip_through_their_query() {
        let e = EndpointSelection {
            selection: Selection {
                tools: Some(vec!["time.get_current_time".into(), "git.git_log".into()]),
                servers: Some(vec!["git".into()]),
                pin: vec!["git.git_status".into()],
                search_mode: true,
                own_names: true,
            },
            cap: Some(12),
            overrides: BTreeMap::from([
                (
                    "time.get_current_time".to_owned(),
                    ToolOverride {
                        name: Some("clock_now".into()),
                        description: Some("Current time".into()),
                    },
                ),
                (
                    "git.git_log".to_owned(),
                    ToolOverride {
                        name: Some("history".into()),
                        description: None,
                    },
                ),
            ]),
        };
        assert_eq!(
            e.to_query(),
            "tools=time.get_current_time,git.git_log&servers=git&pin=git.git_status&mode=search&names=tool&cap=12\
             &rename=git.git_log:history\
             &rename=time.get_current_time:clock_now&describe=time.get_current_time:Current%20time"
        );
        assert_eq!(EndpointSelection::from_query(&e.to_query()).unwrap(), e);
        let back = EndpointSelection::from_query(
            "servers=git&pin=git.git_status&mode=search&names=tool&cap=12",
        )
        .unwrap();
        assert_eq!(back.cap, Some(12));
        assert!(back.selection.search_mode && back.selection.own_names);
        assert_eq!(
            EndpointSelection::from_query(&back.to_query()).unwrap(),
            back
        );
        assert_eq!(
            EndpointSelection::from_query("cap=0"),
            Err(EndpointSelectionError::Cap("0".into()))
        );
        assert_eq!(
            EndpointSelection::from_query("cap=0")
                .unwrap_err()
                .to_string(),
            "cap must be a positive whole number, not \"0\""
        );
        assert_eq!(
            EndpointSelection::from_query("mode=weird"),
            Err(EndpointSelectionError::Selection(
                SelectionError::UnknownMode("weird".into())
            ))
        );
        assert_eq!(
            EndpointSelection::from_query("").unwrap(),
            EndpointSelection::default()
        );
        // The selection itself ignores the override parameters.
        let only =
            EndpointSelection::from_query("tools=git.git_log&rename=git.git_log:history").unwrap();
        assert_eq!(only.selection.tools, Some(vec!["git.git_log".to_owned()]));
        assert_eq!(
            only.overrides["git.git_log"].name.as_deref(),
            Some("history")
        );
        assert_eq!(only.overrides["git.git_log"].description, None);
        for bad in ["rename=git.git_log", "describe=:text", "rename="] {
            let e = EndpointSelection::from_query(bad).unwrap_err();
            assert!(matches!(e, EndpointSelectionError::Override(_)), "{bad}");
            assert!(
                e.to_string().contains("rename=<package.tool>:<name>"),
                "{e}"
            );
        }
    }

    #[test]
    fn overrides_with_any_text_round_trip() {
        let tricky = "a:b, c&d=e f+g %20 100% 时间：现在\nsecond line\r\n\ttab / ? # 'q' \"qq\"";
        let e = EndpointSelection {
            selection: Selection {
                tools: Some(vec!["time.get_current_time".into(), "odd:pkg.a&c=d".into()]),
                ..Selection::default()
            },
            cap: None,
            overrides: BTreeMap::from([
                (
                    "time.get_current_time".to_owned(),
                    ToolOverride {
                        name: Some("clock-now_2".into()),
                        description: Some(tricky.into()),
                    },
                ),
                (
                    "odd:pkg.a&c=d".to_owned(),
                    ToolOverride {
                        name: None,
                        description: Some("当前时间 = now: a,b & c".into()),
                    },
                ),
            ]),
        };
        let q = e.to_query();
        assert!(
            q.split('&').all(|p| p.matches('=').count() == 1),
            "every separator inside a value is encoded: {q}"
        );
        assert!(!q.contains('\n') && !q.contains(' '), "{q}");
        assert_eq!(EndpointSelection::from_query(&q).unwrap(), e);
        // Hand-written: `+` is a space, as in any form.
        let hand = EndpointSelection::from_query(
            "servers=time&describe=time.get_current_time:Now+in%20UTC%3A%20%E6%97%B6",
        )
        .unwrap();
        assert_eq!(
            hand.overrides["time.get_current_time"]
                .description
                .as_deref(),
            Some("Now in UTC: 时")
        );
    }

    #[test]
    fn overrides_are_checked_on_their_own() {
        let o = |name: Option<&str>, description: Option<&str>| ToolOverride {
            name: name.map(str::to_owned),
            description: description.map(str::to_owned),
        };
        assert!(check_override("git.git_log", &o(Some("history"), None)).is_ok());
        assert!(check_override("git.git_log", &o(None, Some("时间"))).is_ok());
        assert!(
            check_override(
                "git.git_log",
                &o(
                    Some("x".repeat(64).as_str()),
                    Some("y".repeat(4000).as_str())
                )
            )
            .is_ok()
        );
        for (bad, fragment) in [
            (o(None, None), "sets neither"),
            (o(Some(""), None), "invalid new name"),
            (o(Some("has space"), None), "invalid new name"),
            (o(Some("pkg.tool"), None), "invalid new name"),
            (o(Some("时间"), None), "invalid new name"),
            (o(Some("x".repeat(65).as_str()), None), "invalid new name"),
            (o(Some("search_tools"), None), "search mode"),
            (o(Some("call_tool"), None), "search mode"),
            (o(None, Some("")), "1-4000"),
            (o(None, Some("  \n")), "not blank"),
            (o(None, Some("y".repeat(4001).as_str())), "1-4000"),
        ] {
            let e = check_override("git.git_log", &bad).unwrap_err();
            assert!(
                e.contains("git.git_log") && e.contains(fragment),
                "{bad:?}: {e}"
            );
        }
    }
}
