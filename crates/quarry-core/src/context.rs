//! Contexts: human descriptions attached to path prefixes.

use serde::Serialize;

/// A human description attached to a path prefix (QMD `context add`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Context {
    /// Display-path prefix it applies to (`collection/dir`), or `/` for everything.
    pub path: String,
    /// The description.
    pub text: String,
}

/// Picks the most specific context for a display path: the longest matching prefix.
pub fn context_for<'a>(contexts: &'a [Context], display_path: &str) -> Option<&'a Context> {
    contexts
        .iter()
        .filter(|c| prefix_applies(&c.path, display_path))
        .max_by_key(|c| c.path.len())
}

fn prefix_applies(prefix: &str, display_path: &str) -> bool {
    if prefix == "/" {
        return true;
    }
    let prefix = prefix.trim_end_matches('/');
    display_path == prefix
        || (display_path.starts_with(prefix) && display_path[prefix.len()..].starts_with('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn most_specific_context_wins() {
        let contexts = vec![
            Context {
                path: "/".into(),
                text: "everything".into(),
            },
            Context {
                path: "notes".into(),
                text: "notes".into(),
            },
            Context {
                path: "notes/meetings".into(),
                text: "meeting notes".into(),
            },
        ];
        let pick = |p: &str| context_for(&contexts, p).map(|c| c.text.as_str());
        assert_eq!(pick("notes/meetings/2025.md"), Some("meeting notes"));
        assert_eq!(pick("notes/todo.md"), Some("notes"));
        assert_eq!(pick("notesx/todo.md"), Some("everything"));
        assert_eq!(pick("docs/a.md"), Some("everything"));
    }
}
