//! Names: package ids, catalog names (`package.tool`) and wire names (`package__tool`).
//!
//! A wire name must be accepted by every major LLM API and client: `^[a-zA-Z0-9_-]+$`, and
//! short enough that a client's own prefix (Claude Code's `mcp__server__`) keeps the whole
//! under 64 characters. A name that does not fit is cut and given a hash of its catalog name,
//! so it depends on nothing but that name: adding packages never renames a tool, and the
//! catalog maps a wire name back to its tool.

use std::fmt;

use sha2::{Digest, Sha256};

/// Separates package and tool in wire names.
pub const WIRE_SEPARATOR: &str = "__";
/// Default longest wire name.
pub const DEFAULT_WIRE_NAME_MAX: usize = 48;
/// Longest package id.
pub const PACKAGE_ID_MAX: usize = 40;
/// The meta-tools of search mode.
pub const SEARCH_TOOLS: &str = "search_tools";
/// The meta-tool of search mode that calls a tool found by `search_tools`.
pub const CALL_TOOL: &str = "call_tool";

/// A package id that breaks the rules ([`check_package_id`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidPackageId {
    /// The id given.
    pub id: String,
}

impl fmt::Display for InvalidPackageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid package id '{}': use 1-{PACKAGE_ID_MAX} lowercase letters, digits, '-' or '_', starting with a letter or digit, without '__'",
            self.id
        )
    }
}

impl std::error::Error for InvalidPackageId {}

/// Checks a package id: lowercase ASCII letters, digits, `-` and `_`, starting with a letter
/// or digit, no `__` (the wire separator), at most 40 characters.
pub fn check_package_id(id: &str) -> Result<(), InvalidPackageId> {
    let ok = !id.is_empty()
        && id.len() <= PACKAGE_ID_MAX
        && id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
        && id.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && !id.contains(WIRE_SEPARATOR);
    if ok {
        Ok(())
    } else {
        Err(InvalidPackageId { id: id.to_owned() })
    }
}

/// A package id derived from a display name (`My Git Server` → `my-git-server`).
pub fn package_id_from(name: &str) -> String {
    let mut out = String::new();
    for c in name.trim().chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    while out.ends_with('-') {
        out.pop();
    }
    out.truncate(PACKAGE_ID_MAX);
    while out.ends_with('-') {
        out.pop();
    }
    if out.is_empty() {
        // A name with no ASCII letters (e.g. Chinese): a stable id from its hash.
        out = format!("pkg-{}", &hex_hash(name)[..8]);
    }
    out
}

/// `package.tool`.
pub fn catalog_name(package: &str, tool: &str) -> String {
    format!("{package}.{tool}")
}

/// Splits a catalog name at its first `.` (package ids hold none; tool names may).
pub fn split_catalog_name(name: &str) -> Option<(&str, &str)> {
    name.split_once('.')
        .filter(|(p, t)| !p.is_empty() && !t.is_empty())
}

fn hex_hash(s: &str) -> String {
    let digest = Sha256::digest(s.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

pub(crate) fn wire_char_ok(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// The wire name of `package.tool`: `package__tool` when that is valid and at most `max`
/// characters; otherwise `package__tool_` plus 8 hex digits of the catalog name's SHA-256,
/// invalid characters replaced by `_` and cut to fit — the package first (down to a few
/// characters), since the tool's name is what a model reads to choose it.
pub fn wire_name(package: &str, tool: &str, max: usize) -> String {
    let plain = format!("{package}{WIRE_SEPARATOR}{tool}");
    if plain.len() <= max && plain.chars().all(wire_char_ok) {
        return plain;
    }
    let hash = &hex_hash(&catalog_name(package, tool))[..8];
    // Each invalid character becomes one `_`, so the cleaned names are ASCII and can be cut
    // at any byte.
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| if wire_char_ok(c) { c } else { '_' })
            .collect()
    };
    let (package, tool) = (clean(package), clean(tool));
    let room = max.saturating_sub(hash.len() + 1 + WIRE_SEPARATOR.len());
    let package_keep = room
        .saturating_sub(tool.len())
        .max(WIRE_PACKAGE_MIN)
        .min(package.len())
        .min(room);
    let tool_keep = room.saturating_sub(package_keep).min(tool.len());
    format!(
        "{}{WIRE_SEPARATOR}{}_{hash}",
        &package[..package_keep],
        &tool[..tool_keep]
    )
}

/// Fewest characters of the package a shortened wire name keeps.
const WIRE_PACKAGE_MIN: usize = 8;

/// A client's selection, from the endpoint URL (seed 002): `?tools=pkg.tool,…`,
/// `?servers=pkg,…`, `?pin=pkg.tool,…`, `?mode=search`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    /// `?tools=pkg.tool,…`: exactly these tools.
    pub tools: Option<Vec<String>>,
    /// `?servers=pkg,…`: every tool of these packages.
    pub servers: Option<Vec<String>>,
    /// `?pin=pkg.tool,…`: tools listed in search mode besides `search_tools` and `call_tool`.
    pub pin: Vec<String>,
    /// `?mode=search`: list only the search tools (and pins); find the rest by searching.
    pub search_mode: bool,
    /// `?names=tool`: list tools under their own names (no `package__` prefix) — for an
    /// endpoint in front of one server; refused when two selected tools share a name.
    pub own_names: bool,
}

/// A selection parameter with a value it does not take ([`Selection::from_query`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SelectionError {
    /// `?names=` other than `tool` or `package`.
    UnknownNames(String),
    /// `?mode=` other than `search` or `list`.
    UnknownMode(String),
}

impl fmt::Display for SelectionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SelectionError::UnknownNames(other) => write!(
                f,
                "unknown names '{other}': use names=tool (the tools' own names) or names=package (package__tool, the default)"
            ),
            SelectionError::UnknownMode(other) => {
                write!(f, "unknown mode '{other}': use mode=search or leave it out")
            }
        }
    }
}

impl std::error::Error for SelectionError {}

impl Selection {
    /// Parses the query string's selection parameters; a parameter given twice is joined.
    pub fn from_query(query: Option<&str>) -> Result<Selection, SelectionError> {
        let mut sel = Selection::default();
        let Some(q) = query else {
            return Ok(sel);
        };
        for (key, value) in form_pairs(q) {
            let list = || -> Vec<String> {
                value
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect()
            };
            match key.as_str() {
                "tools" => sel.tools.get_or_insert_with(Vec::new).extend(list()),
                "servers" => sel.servers.get_or_insert_with(Vec::new).extend(list()),
                "pin" => sel.pin.extend(list()),
                "names" => match value.as_str() {
                    "tool" => sel.own_names = true,
                    "" | "package" => sel.own_names = false,
                    other => return Err(SelectionError::UnknownNames(other.to_owned())),
                },
                "mode" => match value.as_str() {
                    "search" => sel.search_mode = true,
                    "" | "list" => sel.search_mode = false,
                    other => return Err(SelectionError::UnknownMode(other.to_owned())),
                },
                _ => {}
            }
        }
        Ok(sel)
    }

    /// Whether the URL names tools or packages (`?tools=`, `?servers=`, `?pin=`): what the
    /// max-tools cap limits. Without, an endpoint lists its whole default view (SPEC §2.2).
    pub fn chooses_tools(&self) -> bool {
        self.tools.is_some() || self.servers.is_some() || !self.pin.is_empty()
    }

    /// Whether the URL chose anything (otherwise the endpoint's default view applies).
    pub fn is_empty(&self) -> bool {
        self.tools.is_none()
            && self.servers.is_none()
            && self.pin.is_empty()
            && !self.search_mode
            && !self.own_names
    }
}

/// `application/x-www-form-urlencoded` pairs, percent-decoded.
fn form_pairs(q: &str) -> Vec<(String, String)> {
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect()
}

fn decode(s: &str) -> String {
    let s = s.replace('+', " ");
    percent_encoding::percent_decode_str(&s)
        .decode_utf8_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_names_are_plain_when_they_fit() {
        assert_eq!(wire_name("everything", "echo", 48), "everything__echo");
    }

    #[test]
    fn wire_names_are_valid_short_and_stable_otherwise() {
        let long = wire_name(
            "filesystem",
            "read_multiple_files_with_a_very_long_name",
            48,
        );
        assert!(long.len() <= 48, "{long}");
        assert!(long.chars().all(wire_char_ok));
        assert_eq!(
            long,
            wire_name(
                "filesystem",
                "read_multiple_files_with_a_very_long_name",
                48
            )
        );
        let dotted = wire_name("git", "repo.status", 48);
        assert!(dotted.starts_with("git__repo_status_"), "{dotted}");
        // Two names that clean to the same text still differ.
        assert_ne!(
            wire_name("git", "repo.status", 48),
            wire_name("git", "repo/status", 48)
        );
    }

    #[test]
    fn shortened_wire_names_keep_the_tool_name() {
        let package = "a-package-id-of-exactly-forty-characters";
        assert_eq!(package.len(), PACKAGE_ID_MAX);
        // Fits whole: left alone.
        assert_eq!(wire_name(package, "echo", 48), format!("{package}__echo"));
        let w = wire_name(package, "get_current_time", 48);
        assert!(w.len() <= 48 && w.chars().all(wire_char_ok), "{w}");
        assert!(w.contains("__get_current_time_"), "{w}");
        let w = wire_name(package, "read_multiple_files_with_a_very_long_name", 48);
        assert!(
            w.len() <= 48 && w.starts_with("a-packag__read_multiple_files"),
            "{w}"
        );
        // Tiny limits still give valid names.
        assert!(wire_name(package, "echo", 5).chars().all(wire_char_ok));
    }

    #[test]
    fn package_ids() {
        assert_eq!(package_id_from("My Git Server"), "my-git-server");
        assert_eq!(package_id_from("  everything!! "), "everything");
        assert!(package_id_from("文件工具").starts_with("pkg-"));
        assert!(check_package_id("my-git_server2").is_ok());
        assert_eq!(
            check_package_id("a__b"),
            Err(InvalidPackageId { id: "a__b".into() })
        );
        assert!(check_package_id("Upper").is_err());
        assert!(check_package_id("").is_err());
        assert!(check_package_id("-x").is_err());
    }

    #[test]
    fn selections_parse() {
        let s = Selection::from_query(Some(
            "tools=everything.echo,%20time.get_current_time&servers=git&pin=a.b&mode=search&token=x",
        ))
        .unwrap();
        assert_eq!(
            s.tools.as_deref(),
            Some(
                &[
                    "everything.echo".to_owned(),
                    "time.get_current_time".to_owned()
                ][..]
            )
        );
        assert_eq!(s.servers.as_deref(), Some(&["git".to_owned()][..]));
        assert_eq!(s.pin, vec!["a.b".to_owned()]);
        assert!(s.search_mode);
        assert_eq!(
            Selection::from_query(Some("mode=bogus")),
            Err(SelectionError::UnknownMode("bogus".into()))
        );
        assert_eq!(
            Selection::from_query(Some("names=x"))
                .unwrap_err()
                .to_string(),
            "unknown names 'x': use names=tool (the tools' own names) or names=package (package__tool, the default)"
        );
        assert!(Selection::from_query(None).unwrap().is_empty());
        assert!(
            Selection::from_query(Some("token=x&kb=a"))
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn catalog_names_split_at_the_first_dot() {
        assert_eq!(
            split_catalog_name("git.repo.status"),
            Some(("git", "repo.status"))
        );
        assert_eq!(split_catalog_name("nodot"), None);
        assert_eq!(split_catalog_name(".x"), None);
    }
}
