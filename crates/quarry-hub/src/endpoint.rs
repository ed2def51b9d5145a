//! Named tool endpoints (`/mcp/e/<name>`, issue 27): a saved [`Selection`] with a name and an
//! optional cap, stored as a canonical query string so an edit changes what every client of
//! the URL sees without any client changing its configuration.

use quarry_core::Error;

use crate::names::{Selection, SelectionError};

/// Longest endpoint name.
pub const MAX_NAME: usize = 64;

/// A saved selection: what `?tools=`, `?servers=`, `?pin=`, `?mode=` and `?names=` would say,
/// and the most tools it may list (never above the server's cap).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EndpointSelection {
    /// The selection.
    pub selection: Selection,
    /// The endpoint's own cap, if lower than the server's.
    pub cap: Option<usize>,
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

/// What a query value must escape (its separators and anything not plainly printable).
const QUERY_VALUE: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'.')
    .remove(b'_')
    .remove(b'-')
    .remove(b'~');

impl EndpointSelection {
    /// The canonical query string (`tools=…&servers=…&pin=…&mode=search&names=tool&cap=N`).
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
        parts.join("&")
    }

    /// Reads a stored (or hand-written) query string back.
    pub fn from_query(query: &str) -> Result<EndpointSelection, EndpointSelectionError> {
        let selection =
            Selection::from_query(Some(query)).map_err(EndpointSelectionError::Selection)?;
        let mut cap = None;
        for pair in query.split('&') {
            if let Some(v) = pair.strip_prefix("cap=") {
                cap = Some(
                    v.parse::<usize>()
                        .ok()
                        .filter(|n| *n > 0)
                        .ok_or_else(|| EndpointSelectionError::Cap(v.to_owned()))?,
                );
            }
        }
        Ok(EndpointSelection { selection, cap })
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
}

impl std::fmt::Display for EndpointSelectionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EndpointSelectionError::Selection(e) => write!(f, "{e}"),
            EndpointSelectionError::Cap(v) => {
                write!(f, "cap must be a positive whole number, not {v:?}")
            }
        }
    }
}

impl std::error::Error for EndpointSelectionError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            EndpointSelectionError::Selection(e) => Some(e),
            EndpointSelectionError::Cap(_) => None,
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
        };
        assert_eq!(
            e.to_query(),
            "tools=time.get_current_time,git.git_log&servers=git&pin=git.git_status&mode=search&names=tool&cap=12"
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
    }
}
