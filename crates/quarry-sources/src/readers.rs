//! Who may read a synced document: a source's [`ReaderMapping`], decided per path.
//!
//! A mapping is rules — path globs → reader keys (`user:<name>`, `group:<name>`, or
//! `everyone`) — tried in order, the first that matches deciding, and optionally the
//! source's own `CODEOWNERS` file (GitHub's format: the last matching line decides; `@org/team`
//! is `group:team`, `@name` is `user:name`, e-mail owners are ignored). A path that nothing
//! maps gets no readers at all: only the knowledge base's admins read it. A source without a
//! mapping leaves its documents to every reader of the knowledge base.

use globset::{GlobBuilder, GlobMatcher};
use serde::{Deserialize, Serialize};

use crate::error::SourceError;

/// Where a `CODEOWNERS` file is looked for, in GitHub's order.
pub const CODEOWNERS_PATHS: [&str; 3] = [".github/CODEOWNERS", "CODEOWNERS", "docs/CODEOWNERS"];

/// The reader that stands for every reader of the knowledge base.
pub const EVERYONE: &str = "everyone";

/// Most rules in one mapping.
const MAX_RULES: usize = 200;

/// Largest `CODEOWNERS` file read.
pub const MAX_CODEOWNERS_BYTES: u64 = 3 * 1024 * 1024;

/// One rule: the paths it covers and who reads them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReaderRule {
    /// Comma-separated globs over the path inside the source (`hr/**`, `**/*.pdf`).
    pub paths: String,
    /// Reader keys, or [`EVERYONE`].
    pub readers: Vec<String>,
}

/// How a source's documents get their readers (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReaderMapping {
    /// Tried in order; the first whose paths match decides.
    #[serde(default)]
    pub rules: Vec<ReaderRule>,
    /// Whether the source's `CODEOWNERS` file maps the paths no rule matched.
    #[serde(default)]
    pub codeowners: bool,
}

/// A mapping ready to decide paths.
#[derive(Debug, Clone)]
pub struct CompiledMapping {
    rules: Vec<(Vec<GlobMatcher>, Option<Vec<String>>)>,
    codeowners: bool,
}

impl ReaderMapping {
    /// A mapping from its JSON (as stored and as the API takes it), checked.
    pub fn from_json(text: &str) -> Result<ReaderMapping, SourceError> {
        let mapping: ReaderMapping = serde_json::from_str(text)
            .map_err(|e| SourceError::Invalid(format!("invalid reader mapping: {e}")))?;
        mapping.compile()?;
        Ok(mapping)
    }

    /// As stored.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{}".to_owned())
    }

    /// Checks every glob and reader and makes the mapping ready to decide paths.
    pub fn compile(&self) -> Result<CompiledMapping, SourceError> {
        if self.rules.len() > MAX_RULES {
            return Err(SourceError::Invalid(format!(
                "a reader mapping has at most {MAX_RULES} rules (got {})",
                self.rules.len()
            )));
        }
        if self.rules.is_empty() && !self.codeowners {
            return Err(SourceError::Invalid(
                "a reader mapping needs at least one rule or CODEOWNERS".into(),
            ));
        }
        let mut rules = Vec::with_capacity(self.rules.len());
        for rule in &self.rules {
            let globs = rule
                .paths
                .split(',')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .map(|p| {
                    GlobBuilder::new(p)
                        .literal_separator(true)
                        .build()
                        .map(|g| g.compile_matcher())
                        .map_err(|e| {
                            SourceError::Invalid(format!("invalid path glob {p:?} in a rule: {e}"))
                        })
                })
                .collect::<Result<Vec<_>, _>>()?;
            if globs.is_empty() {
                return Err(SourceError::Invalid(
                    "a reader rule needs at least one path glob".into(),
                ));
            }
            let readers = if rule.readers.iter().any(|r| r.trim() == EVERYONE) {
                if rule.readers.len() > 1 {
                    return Err(SourceError::Invalid(format!(
                        "a rule for {:?} names \"everyone\" and other readers: give one or the other",
                        rule.paths
                    )));
                }
                None
            } else {
                Some(check_keys(&rule.readers)?)
            };
            rules.push((globs, readers));
        }
        Ok(CompiledMapping {
            rules,
            codeowners: self.codeowners,
        })
    }
}

impl CompiledMapping {
    /// Whether the source's `CODEOWNERS` file is needed.
    pub fn uses_codeowners(&self) -> bool {
        self.codeowners
    }

    /// The readers of `path`: `None` for every reader of the knowledge base, an empty list
    /// for its admins only (nothing mapped the path).
    pub fn readers_for(&self, path: &str, owners: Option<&CodeOwners>) -> Option<Vec<String>> {
        for (globs, readers) in &self.rules {
            if globs.iter().any(|g| g.is_match(path)) {
                return readers.clone();
            }
        }
        if self.codeowners
            && let Some(found) = owners.and_then(|o| o.owners_of(path))
        {
            return Some(found.to_vec());
        }
        Some(Vec::new())
    }
}

/// Reader keys a person wrote: `user:<name>` or `group:<name>`.
fn check_keys(keys: &[String]) -> Result<Vec<String>, SourceError> {
    let mut out: Vec<String> = Vec::with_capacity(keys.len());
    for key in keys {
        let key = key.trim();
        let name = key
            .strip_prefix("user:")
            .or_else(|| key.strip_prefix("group:"));
        let ok = key.len() <= 200
            && name.is_some_and(|n| {
                !n.is_empty()
                    && n.chars()
                        .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.' | '@'))
            });
        if !ok {
            return Err(SourceError::Invalid(format!(
                "reader {key:?} is not a reader: use user:<name>, group:<name> or everyone"
            )));
        }
        if !out.iter().any(|k| k == key) {
            out.push(key.to_owned());
        }
    }
    Ok(out)
}

/// A parsed `CODEOWNERS` file.
#[derive(Debug, Clone, Default)]
pub struct CodeOwners {
    lines: Vec<(GlobMatcher, Vec<String>)>,
}

impl CodeOwners {
    /// Reads a `CODEOWNERS` file. Lines that cannot be read are left out (GitHub shows
    /// them as errors and ignores them too); owners become reader keys.
    pub fn parse(text: &str) -> CodeOwners {
        let mut lines = Vec::new();
        for line in text.lines() {
            let line = match line.find(" #") {
                Some(at) => &line[..at],
                None => line,
            };
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut parts = line.split_whitespace();
            let Some(pattern) = parts.next() else {
                continue;
            };
            let owners: Vec<String> = parts.filter_map(owner_key).collect();
            let Some(glob) = codeowners_glob(pattern) else {
                continue;
            };
            lines.push((glob, owners));
        }
        CodeOwners { lines }
    }

    /// The owners of `path` as reader keys: the last matching line's (possibly none: a
    /// line without owners takes a path back out of ownership).
    pub fn owners_of(&self, path: &str) -> Option<&[String]> {
        self.lines
            .iter()
            .rev()
            .find(|(glob, _)| glob.is_match(path))
            .map(|(_, owners)| owners.as_slice())
            .filter(|o| !o.is_empty())
    }
}

/// `@org/team` → `group:team`, `@name` → `user:name`; e-mail owners have no reader key.
fn owner_key(owner: &str) -> Option<String> {
    let name = owner.strip_prefix('@')?;
    let key = match name.split_once('/') {
        Some((_, team)) => format!("group:{team}"),
        None => format!("user:{name}"),
    };
    check_keys(std::slice::from_ref(&key))
        .ok()?
        .into_iter()
        .next()
}

/// A `CODEOWNERS` pattern (gitignore rules) as a glob over paths inside the source: a
/// leading `/` anchors it at the root, otherwise a pattern without an inner `/` matches at
/// any depth; a trailing `/` (or a name that is a folder) covers everything under it.
fn codeowners_glob(pattern: &str) -> Option<GlobMatcher> {
    if pattern.starts_with('!') || pattern.contains('\\') {
        // Negation and escapes are not part of the CODEOWNERS syntax.
        return None;
    }
    let anchored = pattern.starts_with('/');
    let body = pattern.trim_start_matches('/');
    let folder = body.ends_with('/');
    let body = body.trim_end_matches('/');
    if body.is_empty() {
        return None;
    }
    let inner_slash = body.contains('/');
    let base = if anchored || inner_slash {
        body.to_owned()
    } else {
        format!("**/{body}")
    };
    let glob = if folder {
        format!("{base}/**")
    } else if body.ends_with("/**") || body == "*" {
        base
    } else {
        // `docs` is the file `docs` or everything under the folder `docs`.
        format!("{{{base},{base}/**}}")
    };
    GlobBuilder::new(&glob)
        .literal_separator(!matches!(body, "*"))
        .build()
        .ok()
        .map(|g| g.compile_matcher())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(k: &[&str]) -> Option<Vec<String>> {
        Some(k.iter().map(|s| (*s).to_owned()).collect())
    }

    #[test]
    fn the_first_matching_rule_decides_and_unmapped_paths_are_for_admins() {
        let m = ReaderMapping::from_json(
            r#"{"rules":[
                {"paths":"hr/**","readers":["group:hr","user:ann"]},
                {"paths":"public/**, README.md","readers":["everyone"]},
                {"paths":"**/*.pdf","readers":["group:eng"]}
            ]}"#,
        )
        .unwrap()
        .compile()
        .unwrap();
        assert_eq!(
            m.readers_for("hr/pay.md", None),
            keys(&["group:hr", "user:ann"])
        );
        assert_eq!(
            m.readers_for("hr/x/pay.pdf", None),
            keys(&["group:hr", "user:ann"])
        );
        assert_eq!(m.readers_for("public/a.md", None), None);
        assert_eq!(m.readers_for("README.md", None), None);
        assert_eq!(m.readers_for("docs/a.pdf", None), keys(&["group:eng"]));
        assert_eq!(m.readers_for("docs/a.md", None), Some(Vec::new()));
        // `*` does not cross folders.
        let m = ReaderMapping::from_json(r#"{"rules":[{"paths":"*.md","readers":["user:a"]}]}"#)
            .unwrap()
            .compile()
            .unwrap();
        assert_eq!(m.readers_for("a.md", None), keys(&["user:a"]));
        assert_eq!(m.readers_for("x/a.md", None), Some(Vec::new()));
    }

    #[test]
    fn bad_mappings_are_refused_with_the_reason() {
        for (bad, says) in [
            ("{", "invalid reader mapping"),
            (r#"{"rules":[]}"#, "at least one rule"),
            (r#"{"rulez":[]}"#, "unknown field"),
            (
                r#"{"rules":[{"paths":"","readers":["user:a"]}]}"#,
                "at least one path glob",
            ),
            (
                r#"{"rules":[{"paths":"a/[","readers":["user:a"]}]}"#,
                "invalid path glob",
            ),
            (
                r#"{"rules":[{"paths":"a","readers":["hr"]}]}"#,
                "not a reader",
            ),
            (
                r#"{"rules":[{"paths":"a","readers":["everyone","user:a"]}]}"#,
                "one or the other",
            ),
        ] {
            match ReaderMapping::from_json(bad) {
                Err(SourceError::Invalid(m)) => assert!(m.contains(says), "{bad}: {m}"),
                other => panic!("{bad}: {other:?}"),
            }
        }
    }

    #[test]
    fn codeowners_last_match_wins_and_owners_become_readers() {
        let owners = CodeOwners::parse(
            "# comment\n\
             *       @acme/everyone-team\n\
             /docs/  @acme/writers @ann # trailing comment\n\
             *.pdf   @bob\n\
             apps/   @acme/apps ops@example.com\n\
             /docs/public/\n\
             bad\\pattern @x\n",
        );
        let m = ReaderMapping::from_json(r#"{"codeowners":true}"#)
            .unwrap()
            .compile()
            .unwrap();
        assert!(m.uses_codeowners());
        let of = |p: &str| m.readers_for(p, Some(&owners));
        assert_eq!(of("README.md"), keys(&["group:everyone-team"]));
        assert_eq!(of("docs/guide.md"), keys(&["group:writers", "user:ann"]));
        assert_eq!(of("docs/guide.pdf"), keys(&["user:bob"]));
        assert_eq!(of("src/apps/x.md"), keys(&["group:apps"]));
        assert_eq!(
            of("x/docs/a.md"),
            keys(&["group:everyone-team"]),
            "anchored"
        );
        // A line without owners: nothing maps it, only admins read it.
        assert_eq!(of("docs/public/a.md"), Some(Vec::new()));
        // Without the file, CODEOWNERS maps nothing.
        assert_eq!(m.readers_for("README.md", None), Some(Vec::new()));
    }

    #[test]
    fn rules_come_before_codeowners() {
        let owners = CodeOwners::parse("* @acme/all\n");
        let m = ReaderMapping::from_json(
            r#"{"rules":[{"paths":"secret/**","readers":["user:root"]}],"codeowners":true}"#,
        )
        .unwrap()
        .compile()
        .unwrap();
        assert_eq!(
            m.readers_for("secret/a.md", Some(&owners)),
            keys(&["user:root"])
        );
        assert_eq!(m.readers_for("a.md", Some(&owners)), keys(&["group:all"]));
    }
}
