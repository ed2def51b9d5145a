//! Typed predicates over a tool call's arguments: `{argument, operator, value}` conditions
//! under `and` / `or` / `not` (the shape of the metadata filter grammar).
//!
//! A condition on an argument the call does not give is false, and so is one whose value has
//! the wrong type: a rule written `deny when not (path under /srv)` therefore refuses a call
//! without a path, or with a number for one. An array argument satisfies a condition when
//! every element does (`read_multiple_files`' `paths`). Several argument names
//! (`"argument": ["source", "destination"]`) hold when at least one is given and every one
//! given satisfies the condition.

use std::path::{Component, Path, PathBuf};

use regex::Regex;
use serde_json::{Map, Value, json};

/// Most conditions in one predicate (a bound on work per call).
const MAX_NODES: usize = 64;
/// Most values in an `in`, `under` or `host_in` list.
const MAX_VALUES: usize = 256;
/// A compiled `matches` pattern's size bound (bytes), so no rule costs much per call.
const REGEX_SIZE_LIMIT: usize = 256 * 1024;

/// One condition's operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    /// A path (absolute) at or under one of the prefixes, both as written (`.`/`..` resolved
    /// lexically) and where it leads on this machine (component by component: each symbolic
    /// link by its target, a dangling one by where its target would be created, `..` after a
    /// link from the link's target; missing components as plain names).
    Under,
    /// A value (string, number or boolean) equal to one in the list.
    In,
    /// Equal to the value.
    Eq,
    /// Not equal to the value (false when the argument is missing).
    Ne,
    /// A number below the value.
    Lt,
    /// A number at most the value.
    Lte,
    /// A number above the value.
    Gt,
    /// A number at least the value.
    Gte,
    /// A string the regular expression matches whole.
    Matches,
    /// A URL whose host is one of the list (`*.example.com`: any subdomain of it); never a URL
    /// that parsers would read differently (`quarry_netguard::unambiguous_url`).
    HostIn,
    /// The argument is given (and not null); `value` is `true` or absent, or `false` for
    /// "not given".
    Exists,
}

impl Operator {
    fn parse(s: &str) -> Option<Operator> {
        Some(match s {
            "under" => Operator::Under,
            "in" => Operator::In,
            "eq" => Operator::Eq,
            "ne" => Operator::Ne,
            "lt" => Operator::Lt,
            "lte" => Operator::Lte,
            "gt" => Operator::Gt,
            "gte" => Operator::Gte,
            "matches" => Operator::Matches,
            "host_in" => Operator::HostIn,
            "exists" => Operator::Exists,
            _ => return None,
        })
    }

    /// The operator's name in the grammar.
    pub fn as_str(self) -> &'static str {
        match self {
            Operator::Under => "under",
            Operator::In => "in",
            Operator::Eq => "eq",
            Operator::Ne => "ne",
            Operator::Lt => "lt",
            Operator::Lte => "lte",
            Operator::Gt => "gt",
            Operator::Gte => "gte",
            Operator::Matches => "matches",
            Operator::HostIn => "host_in",
            Operator::Exists => "exists",
        }
    }
}

/// A condition's operand, checked and prepared when the predicate is parsed.
#[derive(Debug, Clone)]
pub enum Operand {
    /// `under`'s absolute prefixes.
    Paths(Vec<String>),
    /// `in`'s values.
    Scalars(Vec<Value>),
    /// `eq`'s and `ne`'s value.
    Scalar(Value),
    /// A comparison's bound.
    Number(f64),
    /// `matches`' expression, anchored at both ends.
    Pattern(Regex),
    /// `host_in`'s hosts, lower case.
    Hosts(Vec<String>),
    /// `exists`' expectation.
    Flag(bool),
}

/// A parsed predicate.
#[derive(Debug, Clone)]
pub enum Predicate {
    /// One condition.
    Condition {
        /// The argument names it looks at (dotted for nested objects: `options.path`).
        arguments: Vec<String>,
        /// The operator.
        operator: Operator,
        /// The operand as written (kept for display and storage).
        value: Value,
        /// The operand, prepared.
        operand: Operand,
    },
    /// Every one holds.
    And(Vec<Predicate>),
    /// At least one holds.
    Or(Vec<Predicate>),
    /// It does not hold.
    Not(Box<Predicate>),
}

impl Predicate {
    /// Parses and checks a predicate; errors name the path of the bad node (`when.and[1].value`).
    pub fn parse(v: &Value, path: &str) -> Result<Predicate, String> {
        let mut nodes = 0;
        parse_at(v, path, &mut nodes)
    }

    /// The predicate in the grammar's JSON.
    pub fn to_json(&self) -> Value {
        match self {
            Predicate::Condition {
                arguments,
                operator,
                value,
                ..
            } => {
                let argument = if arguments.len() == 1 {
                    json!(arguments[0])
                } else {
                    json!(arguments)
                };
                let mut o = Map::new();
                o.insert("argument".into(), argument);
                o.insert("operator".into(), json!(operator.as_str()));
                if !value.is_null() {
                    o.insert("value".into(), value.clone());
                }
                Value::Object(o)
            }
            Predicate::And(ps) => {
                json!({"and": ps.iter().map(Predicate::to_json).collect::<Vec<_>>()})
            }
            Predicate::Or(ps) => {
                json!({"or": ps.iter().map(Predicate::to_json).collect::<Vec<_>>()})
            }
            Predicate::Not(p) => json!({"not": p.to_json()}),
        }
    }

    /// Whether `args` satisfy the predicate.
    pub fn holds(&self, args: &Map<String, Value>) -> bool {
        match self {
            Predicate::Condition {
                arguments,
                operator,
                operand,
                ..
            } => condition_holds(arguments, *operator, operand, args),
            Predicate::And(ps) => ps.iter().all(|p| p.holds(args)),
            Predicate::Or(ps) => ps.iter().any(|p| p.holds(args)),
            Predicate::Not(p) => !p.holds(args),
        }
    }

    /// The predicate in words (`not (path under /srv/data)`), for refusals and listings.
    pub fn describe(&self) -> String {
        match self {
            Predicate::Condition {
                arguments,
                operator,
                value,
                ..
            } => {
                let value = match value {
                    Value::String(s) => s.clone(),
                    Value::Null => String::new(),
                    Value::Array(items) => items
                        .iter()
                        .map(|i| i.as_str().map_or_else(|| i.to_string(), str::to_owned))
                        .collect::<Vec<_>>()
                        .join(", "),
                    other => other.to_string(),
                };
                format!("{} {} {value}", arguments.join("|"), operator.as_str())
                    .trim_end()
                    .to_owned()
            }
            Predicate::And(ps) => join_described(ps, " and "),
            Predicate::Or(ps) => join_described(ps, " or "),
            Predicate::Not(p) => format!("not ({})", p.describe()),
        }
    }

    /// The argument names the predicate looks at, in order, each once.
    pub fn arguments(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        self.collect_arguments(&mut out);
        out
    }

    fn collect_arguments<'a>(&'a self, out: &mut Vec<&'a str>) {
        match self {
            Predicate::Condition { arguments, .. } => {
                for a in arguments {
                    if !out.contains(&a.as_str()) {
                        out.push(a);
                    }
                }
            }
            Predicate::And(ps) | Predicate::Or(ps) => {
                for p in ps {
                    p.collect_arguments(out);
                }
            }
            Predicate::Not(p) => p.collect_arguments(out),
        }
    }
}

fn join_described(ps: &[Predicate], sep: &str) -> String {
    ps.iter()
        .map(|p| match p {
            Predicate::Condition { .. } | Predicate::Not(_) => p.describe(),
            _ => format!("({})", p.describe()),
        })
        .collect::<Vec<_>>()
        .join(sep)
}

fn parse_at(v: &Value, path: &str, nodes: &mut usize) -> Result<Predicate, String> {
    *nodes += 1;
    if *nodes > MAX_NODES {
        return Err(format!(
            "{path}: a predicate has at most {MAX_NODES} conditions"
        ));
    }
    let o = v
        .as_object()
        .ok_or_else(|| format!("{path}: expected an object"))?;
    for key in ["and", "or"] {
        if let Some(list) = o.get(key) {
            if o.len() != 1 {
                return Err(format!("{path}: '{key}' stands alone in its object"));
            }
            let items = list
                .as_array()
                .filter(|a| !a.is_empty())
                .ok_or_else(|| format!("{path}.{key}: expected a non-empty array"))?;
            let parsed = items
                .iter()
                .enumerate()
                .map(|(i, item)| parse_at(item, &format!("{path}.{key}[{i}]"), nodes))
                .collect::<Result<Vec<_>, _>>()?;
            return Ok(if key == "and" {
                Predicate::And(parsed)
            } else {
                Predicate::Or(parsed)
            });
        }
    }
    if let Some(inner) = o.get("not") {
        if o.len() != 1 {
            return Err(format!("{path}: 'not' stands alone in its object"));
        }
        return Ok(Predicate::Not(Box::new(parse_at(
            inner,
            &format!("{path}.not"),
            nodes,
        )?)));
    }
    for key in o.keys() {
        if !matches!(key.as_str(), "argument" | "operator" | "value") {
            return Err(format!(
                "{path}.{key}: unknown field (a condition has argument, operator, value; or use and/or/not)"
            ));
        }
    }
    let arguments = match o.get("argument") {
        Some(Value::String(s)) => vec![argument_name(s, &format!("{path}.argument"))?],
        Some(Value::Array(items)) if !items.is_empty() => items
            .iter()
            .enumerate()
            .map(|(i, a)| match a {
                Value::String(s) => argument_name(s, &format!("{path}.argument[{i}]")),
                _ => Err(format!("{path}.argument[{i}]: expected a string")),
            })
            .collect::<Result<Vec<_>, _>>()?,
        None => return Err(format!("{path}.argument: missing (the argument's name)")),
        Some(_) => {
            return Err(format!(
                "{path}.argument: expected an argument's name or a non-empty list of names"
            ));
        }
    };
    let op_name = o
        .get("operator")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("{path}.operator: missing"))?;
    let operator = Operator::parse(op_name).ok_or_else(|| {
        format!(
            "{path}.operator: unknown operator '{op_name}' (under, in, eq, ne, lt, lte, gt, gte, matches, host_in, exists)"
        )
    })?;
    let value = o.get("value").cloned().unwrap_or(Value::Null);
    let vpath = format!("{path}.value");
    let operand = match operator {
        Operator::Under => Operand::Paths(
            strings(&value, &vpath)?
                .into_iter()
                .map(|p| {
                    if lexical(&p).is_none() {
                        Err(format!(
                            "{vpath}: '{p}' is not an absolute path (under takes absolute prefixes)"
                        ))
                    } else {
                        Ok(p)
                    }
                })
                .collect::<Result<_, _>>()?,
        ),
        Operator::HostIn => Operand::Hosts(
            strings(&value, &vpath)?
                .into_iter()
                .map(|h| h.trim_end_matches('.').to_ascii_lowercase())
                .collect(),
        ),
        Operator::In => {
            let items = match &value {
                Value::Array(items) if !items.is_empty() && items.len() <= MAX_VALUES => {
                    items.clone()
                }
                _ => {
                    return Err(format!(
                        "{vpath}: expected a list of 1-{MAX_VALUES} strings, numbers or booleans"
                    ));
                }
            };
            if items.iter().any(|i| !scalar(i)) {
                return Err(format!(
                    "{vpath}: expected strings, numbers or booleans in the list"
                ));
            }
            Operand::Scalars(items)
        }
        Operator::Eq | Operator::Ne => {
            if !scalar(&value) {
                return Err(format!("{vpath}: expected a string, number or boolean"));
            }
            Operand::Scalar(value.clone())
        }
        Operator::Lt | Operator::Lte | Operator::Gt | Operator::Gte => Operand::Number(
            value
                .as_f64()
                .ok_or_else(|| format!("{vpath}: expected a number"))?,
        ),
        Operator::Matches => {
            let pattern = value
                .as_str()
                .ok_or_else(|| format!("{vpath}: expected a regular expression"))?;
            Operand::Pattern(
                regex::RegexBuilder::new(&format!("^(?:{pattern})$"))
                    .size_limit(REGEX_SIZE_LIMIT)
                    .build()
                    .map_err(|e| format!("{vpath}: not a valid regular expression: {e}"))?,
            )
        }
        Operator::Exists => match &value {
            Value::Null | Value::Bool(true) => Operand::Flag(true),
            Value::Bool(false) => Operand::Flag(false),
            _ => return Err(format!("{vpath}: expected true or false (or leave it out)")),
        },
    };
    Ok(Predicate::Condition {
        arguments,
        operator,
        value,
        operand,
    })
}

fn argument_name(s: &str, path: &str) -> Result<String, String> {
    if s.is_empty() || s.len() > 200 || s.split('.').any(str::is_empty) {
        return Err(format!(
            "{path}: expected an argument's name (dotted for nested ones: options.path)"
        ));
    }
    Ok(s.to_owned())
}

fn scalar(v: &Value) -> bool {
    matches!(v, Value::String(_) | Value::Number(_) | Value::Bool(_))
}

fn strings(v: &Value, path: &str) -> Result<Vec<String>, String> {
    let out: Vec<String> = match v {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) if !items.is_empty() && items.len() <= MAX_VALUES => items
            .iter()
            .map(|i| i.as_str().map(str::to_owned))
            .collect::<Option<_>>()
            .ok_or_else(|| format!("{path}: expected strings"))?,
        _ => {
            return Err(format!(
                "{path}: expected a string or a list of 1-{MAX_VALUES} strings"
            ));
        }
    };
    if out.iter().any(String::is_empty) {
        return Err(format!("{path}: empty string"));
    }
    Ok(out)
}

/// The value at a dotted argument name, if given and not null.
fn lookup<'a>(args: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    let mut parts = name.split('.');
    let mut cur = args.get(parts.next()?)?;
    for p in parts {
        cur = cur.as_object()?.get(p)?;
    }
    (!cur.is_null()).then_some(cur)
}

fn condition_holds(
    arguments: &[String],
    operator: Operator,
    operand: &Operand,
    args: &Map<String, Value>,
) -> bool {
    let given: Vec<&Value> = arguments.iter().filter_map(|a| lookup(args, a)).collect();
    if let Operand::Flag(want) = operand {
        return given.is_empty() != *want;
    }
    if operator == Operator::Exists {
        return false;
    }
    !given.is_empty() && given.iter().all(|v| value_holds(v, operator, operand))
}

fn value_holds(v: &Value, operator: Operator, operand: &Operand) -> bool {
    if let Value::Array(items) = v {
        // Lists compared whole by eq/ne/in would be ambiguous: each element must satisfy.
        return !items.is_empty() && items.iter().all(|i| value_holds(i, operator, operand));
    }
    match (operator, operand) {
        (Operator::Under, Operand::Paths(prefixes)) => {
            v.as_str().is_some_and(|p| path_under(p, prefixes))
        }
        (Operator::HostIn, Operand::Hosts(hosts)) => v.as_str().is_some_and(|u| host_in(u, hosts)),
        (Operator::In, Operand::Scalars(items)) => items.iter().any(|i| scalar_eq(v, i)),
        (Operator::Eq, Operand::Scalar(want)) => scalar_eq(v, want),
        (Operator::Ne, Operand::Scalar(want)) => scalar(v) && !scalar_eq(v, want),
        (Operator::Lt, Operand::Number(n)) => v.as_f64().is_some_and(|x| x < *n),
        (Operator::Lte, Operand::Number(n)) => v.as_f64().is_some_and(|x| x <= *n),
        (Operator::Gt, Operand::Number(n)) => v.as_f64().is_some_and(|x| x > *n),
        (Operator::Gte, Operand::Number(n)) => v.as_f64().is_some_and(|x| x >= *n),
        (Operator::Matches, Operand::Pattern(re)) => v.as_str().is_some_and(|s| re.is_match(s)),
        _ => false,
    }
}

fn scalar_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

/// `p` with `.` and `..` resolved, if it is absolute and never climbs above the root.
fn lexical(p: &str) -> Option<PathBuf> {
    let path = Path::new(p);
    if !path.is_absolute() || p.contains('\0') {
        return None;
    }
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::RootDir | Component::Prefix(_) => out.push(c.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() || out.as_os_str().is_empty() {
                    return None;
                }
            }
            Component::Normal(n) => out.push(n),
        }
    }
    Some(out)
}

/// Most symbolic links followed while resolving one path (Linux's `MAXSYMLINKS`); more is a
/// loop, and the path is judged outside.
const MAX_LINK_HOPS: usize = 40;

/// Where `p` (absolute) leads on this machine, resolved component by component as the kernel
/// walks it: a symbolic link is replaced by its target (a relative target read from the
/// link's folder), recursively, so a `..` after a link climbs from where the link leads, not
/// from the link's name; a *dangling* link leads where its target would be created. Below a
/// component that does not exist, names are plain names (a file or folders a tool may
/// create); a `..` climbing back into folders that exist makes their links count again. `None` when the walk cannot be judged: more than
/// [`MAX_LINK_HOPS`] links, a component that cannot be read (permissions), or a file used as a
/// folder — the condition is then false, so `not under` fails closed.
fn physical(p: &Path) -> Option<PathBuf> {
    if !p.is_absolute() {
        return None;
    }
    let mut pending: Vec<std::ffi::OsString> = Vec::new();
    // Components still to walk, last first (so a link's target is pushed on top).
    push_components(&mut pending, p);
    let mut cur = PathBuf::from("/");
    let mut hops = 0usize;
    // How many components deep `cur` is below the last folder that exists (0: it exists).
    let mut missing = 0usize;
    while let Some(part) = pending.pop() {
        if part == "/" {
            cur = PathBuf::from("/");
            continue;
        }
        if part == "." {
            continue;
        }
        if part == ".." {
            // At the root, `..` is the root (as the kernel has it). Out of a folder still to
            // be created, back towards one that exists, whose links count again.
            cur.pop();
            missing = missing.saturating_sub(1);
            continue;
        }
        let next = cur.join(&part);
        if missing > 0 {
            missing += 1;
            cur = next;
            continue;
        }
        match std::fs::symlink_metadata(&next) {
            Ok(meta) if meta.file_type().is_symlink() => {
                hops += 1;
                if hops > MAX_LINK_HOPS {
                    return None;
                }
                let target = std::fs::read_link(&next).ok()?;
                // A relative target is read from the link's folder, `cur`; an absolute one
                // from the root (its leading `/` resets `cur`).
                push_components(&mut pending, &target);
            }
            Ok(meta) => {
                // A file with more path after it is walked no further by the kernel.
                if !meta.is_dir() && pending.iter().any(|c| c != "." && c != "/") {
                    return None;
                }
                cur = next;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                missing = 1;
                cur = next;
            }
            Err(_) => return None,
        }
    }
    Some(cur)
}

/// Pushes `p`'s components onto `stack` so that its first component is popped first (`/` for
/// the root of an absolute path; `.` and `..` kept, for the walk to resolve physically).
fn push_components(stack: &mut Vec<std::ffi::OsString>, p: &Path) {
    let parts: Vec<std::ffi::OsString> = p
        .components()
        .map(|c| match c {
            Component::RootDir | Component::Prefix(_) => std::ffi::OsString::from("/"),
            Component::CurDir => std::ffi::OsString::from("."),
            Component::ParentDir => std::ffi::OsString::from(".."),
            Component::Normal(n) => n.to_owned(),
        })
        .collect();
    stack.extend(parts.into_iter().rev());
}

/// Whether `p` is at or under one of `prefixes`, both as written (after `.`/`..`, lexically)
/// and where it leads on this machine ([`physical`]: each symbolic link judged by its target,
/// a dangling one by where its target would be created, `..` after a link climbing from the
/// link's target). A link inside the prefix that points outside it is outside.
fn path_under(p: &str, prefixes: &[String]) -> bool {
    let Some(clean) = lexical(p) else {
        return false;
    };
    let Some(real) = physical(Path::new(p)) else {
        return false;
    };
    prefixes.iter().filter_map(|pre| lexical(pre)).any(|pre| {
        physical(&pre)
            .is_some_and(|real_pre| clean.starts_with(&pre) && real.starts_with(&real_pre))
    })
}

/// Whether `u` is a URL whose host is one of `hosts`. A URL that parsers would read
/// differently (a backslash or user information before the host, whitespace or control
/// characters, `%`-escapes or odd IPv4 forms in the host: `quarry_netguard::unambiguous_url`)
/// is not: the tool behind the policy might read another host than the one checked.
fn host_in(u: &str, hosts: &[String]) -> bool {
    let Ok(url) = quarry_netguard::unambiguous_url(u) else {
        return false;
    };
    let Some(host) = url.host_str() else {
        return false;
    };
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    hosts.iter().any(|h| match h.strip_prefix("*.") {
        Some(domain) => host
            .strip_suffix(domain)
            .is_some_and(|sub| sub.ends_with('.') && sub.len() > 1),
        None => host == *h,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(v: Value) -> Predicate {
        Predicate::parse(&v, "when").unwrap()
    }

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn paths_under_a_prefix_resolve_dots_and_links() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let allowed = root.join("allowed");
        std::fs::create_dir_all(allowed.join("sub")).unwrap();
        std::fs::create_dir_all(root.join("secret")).unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(root.join("secret"), allowed.join("link")).unwrap();
        let rule =
            p(json!({"argument": "path", "operator": "under", "value": allowed.to_str().unwrap()}));
        let a = |s: String| args(json!({ "path": s }));
        let base = allowed.to_str().unwrap();
        assert!(rule.holds(&a(format!("{base}/sub/new.txt"))));
        assert!(rule.holds(&a(base.to_owned())));
        assert!(!rule.holds(&a(format!("{base}/../secret/x"))));
        assert!(!rule.holds(&a(format!("{base}2/x"))));
        assert!(!rule.holds(&a("relative/x".into())));
        assert!(!rule.holds(&a("/../../etc/passwd".into())));
        #[cfg(unix)]
        assert!(!rule.holds(&a(format!("{base}/link/file"))));
        // Missing or mistyped: false, so `not` refuses it.
        assert!(!rule.holds(&args(json!({}))));
        assert!(!rule.holds(&args(json!({"path": 3}))));
        // A list: every element.
        let many = p(json!({"argument": "paths", "operator": "under", "value": [base]}));
        assert!(many.holds(&args(
            json!({"paths": [format!("{base}/a"), format!("{base}/b")]})
        )));
        assert!(!many.holds(&args(
            json!({"paths": [format!("{base}/a"), "/etc/passwd"]})
        )));
    }

    /// The cases the OS resolves differently from a lexical reading, on a real folder tree:
    /// `files/allowed` with links into `files/outside`.
    #[cfg(unix)]
    #[test]
    fn paths_are_resolved_as_the_kernel_walks_them() {
        use std::os::unix::fs::symlink;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let allowed = root.join("allowed");
        let outside = root.join("outside");
        std::fs::create_dir_all(allowed.join("sub")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(allowed.join("hello.txt"), "hi").unwrap();
        std::fs::write(allowed.join("secret2.txt"), "inside twin").unwrap();
        std::fs::write(root.join("secret2.txt"), "SECRET").unwrap();
        // A dangling link inside `allowed` whose target would be created outside.
        symlink("../outside/pwn2.txt", allowed.join("t2.txt")).unwrap();
        // A dangling link whose target would be created inside.
        symlink("sub/new.txt", allowed.join("t3.txt")).unwrap();
        // A dangling absolute link out.
        symlink(outside.join("pwn3.txt"), allowed.join("t4.txt")).unwrap();
        // A link to a folder outside: `link/..` is `root`, not `allowed`.
        symlink("../outside", allowed.join("link")).unwrap();
        // A link inside to a folder inside: `inner/..` is `allowed`.
        symlink("sub", allowed.join("inner")).unwrap();
        // A chain ending in a dangling link outside.
        symlink("t2.txt", allowed.join("chain")).unwrap();
        // A loop.
        symlink("loop-b", allowed.join("loop-a")).unwrap();
        symlink("loop-a", allowed.join("loop-b")).unwrap();
        // A missing folder, then `..` back into `allowed`, then the link out.
        let base = allowed.to_str().unwrap().to_owned();
        let rule = p(json!({"argument": "path", "operator": "under", "value": base}));
        let holds = |s: String| rule.holds(&args(json!({ "path": s })));
        for (path, inside) in [
            (format!("{base}/hello.txt"), true),
            (format!("{base}/sub/new/deeper.txt"), true),
            (format!("{base}/t3.txt"), true),
            (format!("{base}/inner/../hello.txt"), true),
            (format!("{base}/inner/x.txt"), true),
            // Dangling links out: the file would be created outside.
            (format!("{base}/t2.txt"), false),
            (format!("{base}/t4.txt"), false),
            (format!("{base}/chain"), false),
            // `..` after a link climbs from its target: root/secret2.txt.
            (format!("{base}/link/../secret2.txt"), false),
            (format!("{base}/link/../allowed/hello.txt"), true),
            (format!("{base}/link/x"), false),
            // Through a folder that does not exist yet, back into the link.
            (format!("{base}/newdir/../link/x"), false),
            (format!("{base}/newdir/../hello.txt"), true),
            // A loop cannot be judged: not under.
            (format!("{base}/loop-a"), false),
            // A file used as a folder.
            (format!("{base}/hello.txt/x"), false),
        ] {
            assert_eq!(holds(path.clone()), inside, "{path}");
        }
        // `physical` itself: where each leads.
        assert_eq!(
            physical(&allowed.join("t2.txt")),
            Some(outside.join("pwn2.txt"))
        );
        assert_eq!(
            physical(Path::new(&format!("{base}/link/../secret2.txt"))),
            Some(root.join("secret2.txt"))
        );
        assert_eq!(physical(Path::new("/../..")), Some(PathBuf::from("/")));
        // A prefix that is itself a link is judged by its target too.
        let via = root.join("via");
        symlink(&allowed, &via).unwrap();
        let rule =
            p(json!({"argument": "path", "operator": "under", "value": via.to_str().unwrap()}));
        assert!(rule.holds(&args(
            json!({"path": format!("{}/hello.txt", via.display())})
        )));
        assert!(!rule.holds(&args(json!({"path": format!("{}/t2.txt", via.display())}))));
    }

    #[test]
    fn several_argument_names_need_one_given_and_all_given_to_hold() {
        let rule =
            p(json!({"argument": ["source", "destination"], "operator": "under", "value": "/srv"}));
        assert!(rule.holds(&args(json!({"source": "/srv/a", "destination": "/srv/b"}))));
        assert!(!rule.holds(&args(json!({"source": "/srv/a", "destination": "/tmp/b"}))));
        assert!(rule.holds(&args(json!({"source": "/srv/a"}))));
        assert!(!rule.holds(&args(json!({}))));
    }

    #[test]
    fn values_numbers_patterns_and_hosts() {
        assert!(
            p(json!({"argument": "repo", "operator": "in", "value": ["a", "b"]}))
                .holds(&args(json!({"repo": "b"})))
        );
        assert!(
            !p(json!({"argument": "repo", "operator": "in", "value": ["a"]}))
                .holds(&args(json!({"repo": "c"})))
        );
        let max = p(json!({"argument": "amount", "operator": "lte", "value": 100}));
        assert!(max.holds(&args(json!({"amount": 100}))));
        assert!(!max.holds(&args(json!({"amount": 100.5}))));
        assert!(!max.holds(&args(json!({"amount": "50"}))));
        let pat = p(json!({"argument": "branch", "operator": "matches", "value": "feature/.+"}));
        assert!(pat.holds(&args(json!({"branch": "feature/x"}))));
        assert!(!pat.holds(&args(json!({"branch": "main; feature/x"}))));
        let host = p(
            json!({"argument": "url", "operator": "host_in", "value": ["example.com", "*.corp.net"]}),
        );
        assert!(host.holds(&args(json!({"url": "https://EXAMPLE.com./x"}))));
        assert!(host.holds(&args(json!({"url": "http://a.b.corp.net/"}))));
        assert!(!host.holds(&args(json!({"url": "http://corp.net/"}))));
        assert!(!host.holds(&args(json!({"url": "http://evilcorp.net/"}))));
        assert!(!host.holds(&args(json!({"url": "http://example.com.evil.org/"}))));
        assert!(!host.holds(&args(json!({"url": "not a url"}))));
        // Parser differentials fail closed: httpx, curl and urllib would reach another host
        // than the WHATWG parser's (the first host named).
        let local = p(
            json!({"argument": "url", "operator": "host_in", "value": ["allowed.example", "127.0.0.1"]}),
        );
        assert!(local.holds(&args(json!({"url": "http://allowed.example/x"}))));
        assert!(local.holds(&args(json!({"url": "http://127.0.0.1:8080/x"}))));
        for url in [
            "http://allowed.example\\@127.0.0.1:18996/secret",
            "http://allowed.example\\.evil.org/",
            "http://allowed.example@evil.org/",
            "http://u:p@allowed.example/",
            "http://allowed.example\t/",
            "http://allowed.exa\nmple/",
            "http://allowed.example /",
            "http://allowed%2eexample/",
            "http://0x7f.1/",
            "http://127.1/",
            "http://2130706433/",
            "http:/allowed.example/",
            "http:///allowed.example/",
        ] {
            assert!(!local.holds(&args(json!({ "url": url }))), "{url:?}");
        }
        let exists = p(json!({"argument": "force", "operator": "exists"}));
        assert!(exists.holds(&args(json!({"force": false}))));
        assert!(!exists.holds(&args(json!({"force": null}))));
        let nested =
            p(json!({"not": {"argument": "opts.dry_run", "operator": "eq", "value": true}}));
        assert!(nested.holds(&args(json!({"opts": {"dry_run": false}}))));
        assert!(!nested.holds(&args(json!({"opts": {"dry_run": true}}))));
    }

    #[test]
    fn bad_predicates_say_where() {
        for (v, want) in [
            (json!([]), "when: expected an object"),
            (json!({"argument": "p"}), "when.operator: missing"),
            (
                json!({"argument": "p", "operator": "near"}),
                "unknown operator 'near'",
            ),
            (json!({"and": []}), "when.and: expected a non-empty array"),
            (
                json!({"and": [{"argument": "p", "operator": "lt", "value": "x"}]}),
                "when.and[0].value: expected a number",
            ),
            (
                json!({"argument": "p", "operator": "under", "value": "rel"}),
                "not an absolute path",
            ),
            (
                json!({"argument": "p", "operator": "matches", "value": "("}),
                "not a valid regular expression",
            ),
            (
                json!({"argument": "p", "operator": "eq", "value": 1, "x": 2}),
                "when.x: unknown field",
            ),
            (
                json!({"argument": "", "operator": "exists"}),
                "when.argument: expected",
            ),
        ] {
            let e = Predicate::parse(&v, "when").unwrap_err();
            assert!(e.contains(want), "{v}: {e}");
        }
    }

    #[test]
    fn described_and_written_back() {
        let v =
            json!({"not": {"argument": "path", "operator": "under", "value": ["/srv", "/data"]}});
        let pred = p(v.clone());
        assert_eq!(pred.describe(), "not (path under /srv, /data)");
        assert_eq!(pred.to_json(), v);
        assert_eq!(pred.arguments(), vec!["path"]);
    }
}
