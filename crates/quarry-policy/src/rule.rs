//! A policy: which calls it looks at (where it is attached, which tools), the condition on
//! their arguments, and what it does when the condition holds (refuse, or hold the call for a
//! person's approval). Parsed from the REST body, stored as a [`PolicyRow`], shown as JSON.

use quarry_core::iso8601_millis;
use quarry_store::PolicyRow;
use serde_json::{Map, Value, json};

use crate::predicate::Predicate;

/// How long an approval request waits for a decision, and an approval for its use, unless the
/// policy says otherwise (seconds).
pub const DEFAULT_APPROVAL_TTL_SECS: i64 = 3600;
/// The longest a policy may let a request wait (seven days).
pub const MAX_APPROVAL_TTL_SECS: i64 = 7 * 24 * 3600;
/// Most tool patterns in one policy.
const MAX_TOOLS: usize = 100;

/// What a policy does to a call whose condition holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// The call is refused, naming the policy.
    Deny,
    /// The call waits for a person's approval of exactly it.
    RequireApproval,
}

impl Effect {
    /// The effect's name in the API.
    pub fn as_str(self) -> &'static str {
        match self {
            Effect::Deny => "deny",
            Effect::RequireApproval => "require_approval",
        }
    }
}

/// What a policy is attached to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AppliesTo {
    /// Every call in the space.
    Space,
    /// Calls through the named endpoint (`/mcp/e/<name>`; its name or UUID).
    Endpoint(String),
    /// Calls with the token (UUID) or any token made from it.
    Token(String),
}

impl AppliesTo {
    fn kind(&self) -> &'static str {
        match self {
            AppliesTo::Space => "space",
            AppliesTo::Endpoint(_) => "endpoint",
            AppliesTo::Token(_) => "token",
        }
    }

    fn id(&self) -> Option<&str> {
        match self {
            AppliesTo::Space => None,
            AppliesTo::Endpoint(s) | AppliesTo::Token(s) => Some(s),
        }
    }

    fn to_json(&self) -> Value {
        match self {
            AppliesTo::Space => json!({"space": true}),
            AppliesTo::Endpoint(e) => json!({ "endpoint": e }),
            AppliesTo::Token(t) => json!({ "token": t }),
        }
    }

    fn parse(v: &Value) -> Result<AppliesTo, String> {
        let bad = || {
            "applies_to: expected {\"space\": true}, {\"endpoint\": \"<name>\"} or {\"token\": \"<token id>\"}".to_owned()
        };
        let o = v.as_object().filter(|o| o.len() == 1).ok_or_else(bad)?;
        match o.iter().next() {
            Some((k, Value::Bool(true))) if k == "space" => Ok(AppliesTo::Space),
            Some((k, Value::String(s))) if k == "endpoint" && !s.trim().is_empty() => {
                Ok(AppliesTo::Endpoint(s.trim().to_owned()))
            }
            Some((k, Value::String(s))) if k == "token" && !s.trim().is_empty() => {
                Ok(AppliesTo::Token(s.trim().to_owned()))
            }
            _ => Err(bad()),
        }
    }
}

/// A policy as the gate and the API use it.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Its UUID.
    pub id: String,
    /// Unique in the space.
    pub name: String,
    /// Where it applies.
    pub applies_to: AppliesTo,
    /// Tool patterns (`filesystem.*`, `git.git_push`, `*`): `*` stands for any run of
    /// characters.
    pub tools: Vec<String>,
    /// The condition on the arguments; `None`: every call of those tools.
    pub when: Option<Predicate>,
    /// What happens when it holds.
    pub effect: Effect,
    /// How long a request waits and an approval stays usable (seconds).
    pub approval_ttl_secs: i64,
    /// Grows with every change.
    pub version: i64,
    /// Who made it.
    pub created_by: Option<String>,
    /// Unix milliseconds.
    pub created_at: i64,
    /// Unix milliseconds.
    pub updated_at: i64,
}

impl Policy {
    /// A stored policy; an error when its rule is not readable (the gate then refuses the
    /// calls it might govern rather than let them through).
    pub fn from_row(row: &PolicyRow) -> Result<Policy, String> {
        let rule: Value = serde_json::from_str(&row.rule)
            .map_err(|e| format!("policy '{}': stored rule is not JSON: {e}", row.name))?;
        let applies_to = match (row.attach.as_str(), &row.attach_id) {
            ("space", _) => AppliesTo::Space,
            ("endpoint", Some(e)) => AppliesTo::Endpoint(e.clone()),
            ("token", Some(t)) => AppliesTo::Token(t.clone()),
            _ => return Err(format!("policy '{}': unknown attachment", row.name)),
        };
        let mut body = rule
            .as_object()
            .cloned()
            .ok_or_else(|| format!("policy '{}': stored rule is not an object", row.name))?;
        body.insert("name".into(), json!(row.name));
        body.insert("applies_to".into(), applies_to.to_json());
        let spec = PolicySpec::parse(&Value::Object(body), None)
            .map_err(|e| format!("policy '{}': {e}", row.name))?;
        Ok(Policy {
            id: row.id.clone(),
            name: spec.name,
            applies_to: spec.applies_to,
            tools: spec.tools,
            when: spec.when,
            effect: spec.effect,
            approval_ttl_secs: spec.approval_ttl_secs,
            version: row.version,
            created_by: row.created_by.clone(),
            created_at: row.created_at,
            updated_at: row.updated_at,
        })
    }

    /// Whether one of its patterns names `tool` (`package.tool`).
    pub fn covers(&self, tool: &str) -> bool {
        self.tools.iter().any(|p| glob(p, tool))
    }

    /// The policy as the API shows it.
    pub fn to_json(&self) -> Value {
        json!({
            "id": self.id,
            "name": self.name,
            "applies_to": self.applies_to.to_json(),
            "tools": self.tools,
            "when": self.when.as_ref().map(Predicate::to_json),
            "effect": self.effect.as_str(),
            "approval_ttl_secs": self.approval_ttl_secs,
            "version": self.version,
            "created_by": self.created_by,
            "created_at": iso8601_millis(self.created_at),
            "updated_at": iso8601_millis(self.updated_at),
            "summary": self.summary(),
        })
    }

    /// The rule in words: `require_approval for git.git_push when …`.
    pub fn summary(&self) -> String {
        let mut s = format!("{} {}", self.effect.as_str(), self.tools.join(", "));
        if let Some(w) = &self.when {
            s.push_str(" when ");
            s.push_str(&w.describe());
        }
        s
    }
}

/// A policy's fields as a person gives them (REST body, CLI).
#[derive(Debug, Clone)]
pub struct PolicySpec {
    /// Unique in the space.
    pub name: String,
    /// Where it applies.
    pub applies_to: AppliesTo,
    /// Tool patterns.
    pub tools: Vec<String>,
    /// The condition.
    pub when: Option<Predicate>,
    /// What happens when it holds.
    pub effect: Effect,
    /// Seconds.
    pub approval_ttl_secs: i64,
}

impl PolicySpec {
    /// Reads a body; with `base`, a partial one (PATCH): fields left out keep `base`'s.
    /// Errors name the field.
    pub fn parse(body: &Value, base: Option<&Policy>) -> Result<PolicySpec, String> {
        let o = body
            .as_object()
            .ok_or_else(|| "expected a JSON object".to_owned())?;
        for key in o.keys() {
            if !matches!(
                key.as_str(),
                "name" | "applies_to" | "tools" | "when" | "effect" | "approval_ttl_secs"
            ) {
                return Err(format!(
                    "{key}: unknown field (name, applies_to, tools, when, effect, approval_ttl_secs)"
                ));
            }
        }
        let name = match (o.get("name"), base) {
            (Some(Value::String(s)), _) => {
                let s = s.trim();
                if s.is_empty() || s.chars().count() > 100 || s.chars().any(char::is_control) {
                    return Err("name: 1-100 characters, no control characters".into());
                }
                s.to_owned()
            }
            (None, Some(b)) => b.name.clone(),
            (None, None) => return Err("name: missing".into()),
            (Some(_), _) => return Err("name: expected a string".into()),
        };
        let applies_to = match (o.get("applies_to"), base) {
            (Some(v), _) => AppliesTo::parse(v)?,
            (None, Some(b)) => b.applies_to.clone(),
            (None, None) => AppliesTo::Space,
        };
        let tools = match (o.get("tools"), base) {
            (Some(v), _) => tool_patterns(v)?,
            (None, Some(b)) => b.tools.clone(),
            (None, None) => return Err("tools: missing (tool patterns: [\"filesystem.*\"])".into()),
        };
        let when = match (o.get("when"), base) {
            (Some(Value::Null), _) => None,
            (Some(v), _) => Some(Predicate::parse(v, "when")?),
            (None, Some(b)) => b.when.clone(),
            (None, None) => None,
        };
        let effect = match (o.get("effect").map(|v| v.as_str()), base) {
            (Some(Some("deny")), _) => Effect::Deny,
            (Some(Some("require_approval")), _) => Effect::RequireApproval,
            (Some(_), _) => return Err("effect: expected \"deny\" or \"require_approval\"".into()),
            (None, Some(b)) => b.effect,
            (None, None) => return Err("effect: missing (\"deny\" or \"require_approval\")".into()),
        };
        let approval_ttl_secs = match (o.get("approval_ttl_secs"), base) {
            (Some(v), _) => v
                .as_i64()
                .filter(|n| (1..=MAX_APPROVAL_TTL_SECS).contains(n))
                .ok_or_else(|| {
                    format!("approval_ttl_secs: expected whole seconds, 1-{MAX_APPROVAL_TTL_SECS}")
                })?,
            (None, Some(b)) => b.approval_ttl_secs,
            (None, None) => DEFAULT_APPROVAL_TTL_SECS,
        };
        Ok(PolicySpec {
            name,
            applies_to,
            tools,
            when,
            effect,
            approval_ttl_secs,
        })
    }

    /// The row to store (`id`, `version` and times filled by the caller).
    pub fn to_row(&self, id: &str, space_id: &str, by: Option<&str>, now: i64) -> PolicyRow {
        let mut rule = Map::new();
        rule.insert("tools".into(), json!(self.tools));
        if let Some(w) = &self.when {
            rule.insert("when".into(), w.to_json());
        }
        rule.insert("effect".into(), json!(self.effect.as_str()));
        rule.insert("approval_ttl_secs".into(), json!(self.approval_ttl_secs));
        PolicyRow {
            id: id.to_owned(),
            space_id: space_id.to_owned(),
            name: self.name.clone(),
            attach: self.applies_to.kind().to_owned(),
            attach_id: self.applies_to.id().map(str::to_owned),
            rule: Value::Object(rule).to_string(),
            version: 1,
            created_by: by.map(str::to_owned),
            created_at: now,
            updated_at: now,
        }
    }
}

fn tool_patterns(v: &Value) -> Result<Vec<String>, String> {
    let items = v
        .as_array()
        .filter(|a| !a.is_empty() && a.len() <= MAX_TOOLS)
        .ok_or_else(|| format!("tools: expected a list of 1-{MAX_TOOLS} tool patterns"))?;
    items
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let s = t.as_str().map(str::trim).unwrap_or_default();
            if s.is_empty()
                || s.len() > 200
                || !s
                    .chars()
                    .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '*' | '/'))
            {
                Err(format!(
                    "tools[{i}]: expected a tool pattern such as \"filesystem.*\" or \"git.git_push\""
                ))
            } else {
                Ok(s.to_owned())
            }
        })
        .collect()
}

/// Whether `pattern` (where `*` is any run of characters) matches all of `text`.
fn glob(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while ti < t.len() {
        if pi < p.len() && p[pi] != '*' && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob("*", "a.b"));
        assert!(glob("filesystem.*", "filesystem.read_file"));
        assert!(!glob("filesystem.*", "filesystem2.read_file"));
        assert!(glob("*.delete_*", "kb.delete_file"));
        assert!(glob("git.git_push", "git.git_push"));
        assert!(!glob("git.git_push", "git.git_push_all"));
    }

    #[test]
    fn specs_parse_store_and_come_back() {
        let body = json!({"name": "fs", "tools": ["filesystem.*"], "effect": "deny",
                          "when": {"not": {"argument": "path", "operator": "under", "value": "/srv"}}});
        let spec = PolicySpec::parse(&body, None).unwrap();
        let row = spec.to_row("id1", "space", Some("ann"), 5);
        let back = Policy::from_row(&row).unwrap();
        assert_eq!(back.applies_to, AppliesTo::Space);
        assert_eq!(back.approval_ttl_secs, DEFAULT_APPROVAL_TTL_SECS);
        assert_eq!(
            back.summary(),
            "deny filesystem.* when not (path under /srv)"
        );
        assert!(back.covers("filesystem.write_file"));
        // A partial body keeps the rest.
        let patched =
            PolicySpec::parse(&json!({"effect": "require_approval"}), Some(&back)).unwrap();
        assert_eq!(patched.name, "fs");
        assert!(patched.when.is_some());
        let cleared = PolicySpec::parse(&json!({"when": null}), Some(&back)).unwrap();
        assert!(cleared.when.is_none());
    }

    #[test]
    fn bad_specs_name_the_field() {
        for (body, want) in [
            (json!({"tools": ["a"], "effect": "deny"}), "name: missing"),
            (json!({"name": "x", "effect": "deny"}), "tools: missing"),
            (
                json!({"name": "x", "tools": [], "effect": "deny"}),
                "tools: expected",
            ),
            (
                json!({"name": "x", "tools": ["a b"], "effect": "deny"}),
                "tools[0]",
            ),
            (
                json!({"name": "x", "tools": ["a"], "effect": "allow"}),
                "effect: expected",
            ),
            (
                json!({"name": "x", "tools": ["a"], "effect": "deny", "applies_to": {"user": "u"}}),
                "applies_to",
            ),
            (
                json!({"name": "x", "tools": ["a"], "effect": "deny", "approval_ttl_secs": 0}),
                "approval_ttl_secs",
            ),
            (
                json!({"name": "x", "tools": ["a"], "effect": "deny", "colour": 1}),
                "colour: unknown field",
            ),
            (
                json!({"name": "x", "tools": ["a"], "effect": "deny", "when": {"argument": "p", "operator": "lt"}}),
                "when.value: expected a number",
            ),
        ] {
            let e = PolicySpec::parse(&body, None).unwrap_err();
            assert!(e.contains(want), "{body}: {e}");
        }
    }
}
