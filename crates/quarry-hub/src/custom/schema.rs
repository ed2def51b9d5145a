//! The JSON Schema subset custom tools' `parameters` use: checking a schema when a tool is
//! saved ([`check_schema`]) and validating a call's arguments against it ([`validate_args`]),
//! with the schema's top-level `default`s filled in first ([`with_defaults`]).
//!
//! Hand-written rather than a crate, on purpose: the `jsonschema` crate brings a large tree
//! (an HTTP client for remote `$ref`s, `fancy-regex`, …) for a feature set tool schemas do not
//! use, and no lean, vetted alternative keeps what this one must: `pattern` on the `regex`
//! crate (linear time, so an owner's pattern against a model's argument cannot backtrack
//! without end), draft-4 boolean `exclusiveMinimum`/`exclusiveMaximum` (older MCP servers'
//! schemas), and violations that name their path in the words users and models see. Keywords
//! outside the subset are ignored, as the JSON Schema specification asks of unknown ones.

use std::fmt;

use serde_json::{Map, Number, Value};

const TYPE_NAMES: &[&str] = &[
    "null", "boolean", "object", "array", "number", "integer", "string",
];

// ---------------------------------------------------------------------------------------------
// Checking a schema

/// What is wrong with a schema keyword ([`SchemaError`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SchemaProblem {
    /// A schema that is neither an object nor a boolean.
    NotASchema,
    /// `type` that is neither a name nor a non-empty array of names.
    BadType,
    /// `type` naming no JSON Schema type.
    UnknownType(Value),
    /// `properties` that is not an object.
    NotAnObject,
    /// `required` that is not an array of strings.
    NotPropertyNames,
    /// `enum` that is not an array.
    NotAnArray,
    /// A bound (`minimum`, `exclusiveMaximum`, …) that is not a number.
    NotANumber,
    /// A length or count (`maxLength`, `minItems`, …) that is not a non-negative integer.
    NotACount,
    /// `pattern` that is not a string.
    NotAString,
    /// `pattern` that is not a valid regular expression.
    BadRegex(String),
}

/// A schema the validator cannot apply: where (`parameters.properties.city.pattern`) and
/// what is wrong there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaError {
    /// The keyword's location in the spec, dotted.
    pub at: String,
    /// What is wrong with it.
    pub problem: SchemaProblem,
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.at)?;
        match &self.problem {
            SchemaProblem::NotASchema => f.write_str("a schema must be an object or a boolean"),
            SchemaProblem::BadType => {
                f.write_str("must be a type name or a non-empty array of them")
            }
            SchemaProblem::UnknownType(n) => write!(f, "unknown type {n}"),
            SchemaProblem::NotAnObject => f.write_str("must be an object"),
            SchemaProblem::NotPropertyNames => f.write_str("must be an array of property names"),
            SchemaProblem::NotAnArray => f.write_str("must be an array"),
            SchemaProblem::NotANumber => f.write_str("must be a number"),
            SchemaProblem::NotACount => f.write_str("must be a non-negative integer"),
            SchemaProblem::NotAString => f.write_str("must be a string"),
            SchemaProblem::BadRegex(e) => write!(f, "invalid regular expression: {e}"),
        }
    }
}

impl std::error::Error for SchemaError {}

fn bad(at: String, problem: SchemaProblem) -> SchemaError {
    SchemaError { at, problem }
}

/// Checks that a schema uses the supported keywords correctly (recursively); `path` names
/// it in errors (`parameters`).
pub(super) fn check_schema(schema: &Value, path: &str) -> Result<(), SchemaError> {
    let obj = match schema {
        Value::Bool(_) => return Ok(()),
        Value::Object(o) => o,
        _ => return Err(bad(path.to_owned(), SchemaProblem::NotASchema)),
    };
    if let Some(t) = obj.get("type") {
        let names: Vec<&Value> = match t {
            Value::Array(a) if !a.is_empty() => a.iter().collect(),
            Value::String(_) => vec![t],
            _ => return Err(bad(format!("{path}.type"), SchemaProblem::BadType)),
        };
        for n in names {
            match n.as_str() {
                Some(n) if TYPE_NAMES.contains(&n) => {}
                _ => {
                    return Err(bad(
                        format!("{path}.type"),
                        SchemaProblem::UnknownType(n.clone()),
                    ));
                }
            }
        }
    }
    if let Some(p) = obj.get("properties") {
        let p = p
            .as_object()
            .ok_or_else(|| bad(format!("{path}.properties"), SchemaProblem::NotAnObject))?;
        for (k, s) in p {
            check_schema(s, &format!("{path}.properties.{k}"))?;
        }
    }
    if let Some(r) = obj.get("required")
        && !r.as_array().is_some_and(|a| a.iter().all(Value::is_string))
    {
        return Err(bad(
            format!("{path}.required"),
            SchemaProblem::NotPropertyNames,
        ));
    }
    if let Some(a) = obj.get("additionalProperties") {
        check_schema(a, &format!("{path}.additionalProperties"))?;
    }
    match obj.get("items") {
        Some(Value::Array(list)) => {
            for (i, s) in list.iter().enumerate() {
                check_schema(s, &format!("{path}.items[{i}]"))?;
            }
        }
        Some(s) => check_schema(s, &format!("{path}.items"))?,
        None => {}
    }
    if let Some(e) = obj.get("enum")
        && !e.is_array()
    {
        return Err(bad(format!("{path}.enum"), SchemaProblem::NotAnArray));
    }
    for kw in ["minimum", "maximum"] {
        if obj.get(kw).is_some_and(|v| !v.is_number()) {
            return Err(bad(format!("{path}.{kw}"), SchemaProblem::NotANumber));
        }
    }
    for kw in ["exclusiveMinimum", "exclusiveMaximum"] {
        if obj
            .get(kw)
            .is_some_and(|v| !v.is_number() && !v.is_boolean())
        {
            return Err(bad(format!("{path}.{kw}"), SchemaProblem::NotANumber));
        }
    }
    for kw in ["minLength", "maxLength", "minItems", "maxItems"] {
        if obj.get(kw).is_some_and(|v| v.as_u64().is_none()) {
            return Err(bad(format!("{path}.{kw}"), SchemaProblem::NotACount));
        }
    }
    if let Some(p) = obj.get("pattern") {
        let p = p
            .as_str()
            .ok_or_else(|| bad(format!("{path}.pattern"), SchemaProblem::NotAString))?;
        regex::Regex::new(p).map_err(|e| {
            bad(
                format!("{path}.pattern"),
                SchemaProblem::BadRegex(e.to_string()),
            )
        })?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Validating arguments

/// One step into the arguments: an object's property or an array's item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathStep {
    /// A property.
    Key(String),
    /// An item, from 0.
    Index(usize),
}

/// Where in the arguments a violation is: the value the failing keyword applies to (JSON
/// Schema's *instance location*: for `required` and unknown properties, the object). Shown
/// dotted (`filters.tags[1]`, empty for the arguments themselves); [`ArgPath::pointer`] gives
/// the JSON Pointer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ArgPath(Vec<PathStep>);

impl ArgPath {
    /// The steps from the arguments' root.
    pub fn steps(&self) -> &[PathStep] {
        &self.0
    }

    /// The RFC 6901 JSON Pointer (`/filters/tags/1`; `""` for the arguments themselves).
    pub fn pointer(&self) -> String {
        let mut out = String::new();
        for step in &self.0 {
            out.push('/');
            match step {
                PathStep::Key(k) => out.push_str(&k.replace('~', "~0").replace('/', "~1")),
                PathStep::Index(i) => out.push_str(&i.to_string()),
            }
        }
        out
    }

    fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    fn then(&self, step: PathStep) -> ArgPath {
        let mut steps = self.0.clone();
        steps.push(step);
        ArgPath(steps)
    }
}

impl fmt::Display for ArgPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, step) in self.0.iter().enumerate() {
            match step {
                PathStep::Key(k) if i == 0 => f.write_str(k)?,
                PathStep::Key(k) => write!(f, ".{k}")?,
                PathStep::Index(n) => write!(f, "[{n}]")?,
            }
        }
        Ok(())
    }
}

/// What kind of rule a value breaks ([`Violation`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ViolationKind {
    /// The schema here is `false`: no value is allowed.
    NotAllowed,
    /// The schema here is neither an object nor a boolean (a tool saved before checks).
    BadSchema,
    /// `type`: the value's type is none of `expected`.
    WrongType {
        /// The type names the schema allows.
        expected: Vec<String>,
        /// The value's JSON type.
        got: &'static str,
    },
    /// `enum`: the value is none of `allowed`.
    NotInEnum {
        /// The allowed values.
        allowed: Vec<Value>,
        /// The value.
        got: Value,
    },
    /// `const`: the value is not `expected`.
    NotConst {
        /// The one allowed value.
        expected: Value,
        /// The value.
        got: Value,
    },
    /// `minLength`, in characters.
    TooShort {
        /// The least length.
        min: u64,
        /// The value's length.
        len: u64,
    },
    /// `maxLength`, in characters.
    TooLong {
        /// The most length.
        max: u64,
        /// The value's length.
        len: u64,
    },
    /// `pattern`: the string does not match.
    PatternMismatch {
        /// The pattern.
        pattern: String,
    },
    /// `pattern` that is not a valid regular expression (a tool saved before checks).
    BadPattern {
        /// The pattern.
        pattern: String,
    },
    /// `minimum` (or `exclusiveMinimum`): the number is below the range.
    BelowMinimum {
        /// The bound.
        limit: Number,
        /// Whether the bound itself is outside the range.
        exclusive: bool,
        /// The value.
        got: Number,
    },
    /// `maximum` (or `exclusiveMaximum`): the number is above the range.
    AboveMaximum {
        /// The bound.
        limit: Number,
        /// Whether the bound itself is outside the range.
        exclusive: bool,
        /// The value.
        got: Number,
    },
    /// `minItems`.
    TooFewItems {
        /// The least count.
        min: u64,
        /// The array's length.
        len: u64,
    },
    /// `maxItems`.
    TooManyItems {
        /// The most count.
        max: u64,
        /// The array's length.
        len: u64,
    },
    /// `required`: the object lacks a property.
    MissingRequired {
        /// The property's name.
        property: String,
    },
    /// `additionalProperties: false`: the object has a property the schema does not declare.
    UnknownProperty {
        /// The property's name.
        property: String,
    },
}

fn short_json(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 200 {
        format!("{}…", s.chars().take(200).collect::<String>())
    } else {
        s
    }
}

impl fmt::Display for ViolationKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ViolationKind::NotAllowed => f.write_str("no value is allowed here"),
            ViolationKind::BadSchema => f.write_str("the schema is not an object"),
            ViolationKind::WrongType { expected, got } => {
                write!(f, "expected {}, got {got}", expected.join(" or "))
            }
            ViolationKind::NotInEnum { allowed, got } => {
                let list: Vec<String> = allowed.iter().map(short_json).collect();
                write!(
                    f,
                    "must be one of {}, got {}",
                    list.join(", "),
                    short_json(got)
                )
            }
            ViolationKind::NotConst { expected, got } => {
                write!(
                    f,
                    "must be {}, got {}",
                    short_json(expected),
                    short_json(got)
                )
            }
            ViolationKind::TooShort { min, len } => {
                write!(f, "must be at least {min} characters long, got {len}")
            }
            ViolationKind::TooLong { max, len } => {
                write!(f, "must be at most {max} characters long, got {len}")
            }
            ViolationKind::PatternMismatch { pattern } => {
                write!(f, "must match the pattern {pattern:?}")
            }
            ViolationKind::BadPattern { pattern } => write!(
                f,
                "the schema's pattern {pattern:?} is not a valid regular expression"
            ),
            ViolationKind::BelowMinimum {
                limit,
                exclusive: true,
                got,
            } => write!(f, "must be greater than {limit}, got {got}"),
            ViolationKind::BelowMinimum { limit, got, .. } => {
                write!(f, "must be at least {limit}, got {got}")
            }
            ViolationKind::AboveMaximum {
                limit,
                exclusive: true,
                got,
            } => write!(f, "must be less than {limit}, got {got}"),
            ViolationKind::AboveMaximum { limit, got, .. } => {
                write!(f, "must be at most {limit}, got {got}")
            }
            ViolationKind::TooFewItems { min, len } => {
                write!(f, "must have at least {min} items, got {len}")
            }
            ViolationKind::TooManyItems { max, len } => {
                write!(f, "must have at most {max} items, got {len}")
            }
            ViolationKind::MissingRequired { property } => {
                write!(f, "missing required property {property:?}")
            }
            ViolationKind::UnknownProperty { property } => {
                write!(f, "unknown property {property:?}")
            }
        }
    }
}

/// One rule the arguments break: where and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Where in the arguments.
    pub path: ArgPath,
    /// What rule.
    pub kind: ViolationKind,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_root() {
            write!(f, "{}", self.kind)
        } else {
            write!(f, "{}: {}", self.path, self.kind)
        }
    }
}

/// Arguments that break their schema: every violation found (at least one), in the order
/// found. Shown joined by `; `.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violations(Vec<Violation>);

impl Violations {
    /// The violations, in the order found.
    pub fn violations(&self) -> &[Violation] {
        &self.0
    }
}

impl fmt::Display for Violations {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, v) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{v}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Violations {}

/// The JSON type name of a value (`integer` is never returned: it is a kind of `number`).
pub(super) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn is_integer(n: &Number) -> bool {
    n.is_i64()
        || n.is_u64()
        || n.as_f64()
            .is_some_and(|f| f.is_finite() && f.fract() == 0.0)
}

fn type_matches(name: &str, v: &Value) -> bool {
    match (name, v) {
        ("null", Value::Null)
        | ("boolean", Value::Bool(_))
        | ("number", Value::Number(_))
        | ("string", Value::String(_))
        | ("array", Value::Array(_))
        | ("object", Value::Object(_)) => true,
        ("integer", Value::Number(n)) => is_integer(n),
        _ => false,
    }
}

/// JSON equality with numbers compared by value (`1` equals `1.0`).
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            match (x.as_i64(), y.as_i64(), x.as_u64(), y.as_u64()) {
                (Some(x), Some(y), ..) => x == y,
                (_, _, Some(x), Some(y)) => x == y,
                _ => x.as_f64() == y.as_f64(),
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_eq(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

/// Violations found so far.
struct Found(Vec<Violation>);

impl Found {
    fn add(&mut self, path: &ArgPath, kind: ViolationKind) {
        self.0.push(Violation {
            path: path.clone(),
            kind,
        });
    }
}

fn validate_node(schema: &Value, v: &Value, path: &ArgPath, found: &mut Found) {
    let obj = match schema {
        Value::Bool(true) => return,
        Value::Bool(false) => {
            found.add(path, ViolationKind::NotAllowed);
            return;
        }
        Value::Object(o) => o,
        _ => {
            found.add(path, ViolationKind::BadSchema);
            return;
        }
    };

    if let Some(t) = obj.get("type") {
        let names: Vec<&str> = match t {
            Value::String(s) => vec![s.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !names.is_empty() && !names.iter().any(|n| type_matches(n, v)) {
            found.add(
                path,
                ViolationKind::WrongType {
                    expected: names.iter().map(|n| (*n).to_owned()).collect(),
                    got: type_name(v),
                },
            );
            return; // further keywords would only repeat the problem
        }
    }
    if let Some(Value::Array(options)) = obj.get("enum")
        && !options.iter().any(|o| json_eq(o, v))
    {
        found.add(
            path,
            ViolationKind::NotInEnum {
                allowed: options.clone(),
                got: v.clone(),
            },
        );
    }
    if let Some(c) = obj.get("const")
        && !json_eq(c, v)
    {
        found.add(
            path,
            ViolationKind::NotConst {
                expected: c.clone(),
                got: v.clone(),
            },
        );
    }

    match v {
        Value::String(s) => validate_string(obj, s, path, found),
        Value::Number(n) => validate_number(obj, n, path, found),
        Value::Array(items) => {
            let len = items.len() as u64;
            if let Some(min) = obj.get("minItems").and_then(Value::as_u64)
                && len < min
            {
                found.add(path, ViolationKind::TooFewItems { min, len });
            }
            if let Some(max) = obj.get("maxItems").and_then(Value::as_u64)
                && len > max
            {
                found.add(path, ViolationKind::TooManyItems { max, len });
            }
            match obj.get("items") {
                Some(Value::Array(tuple)) => {
                    for (i, (item, s)) in items.iter().zip(tuple).enumerate() {
                        validate_node(s, item, &path.then(PathStep::Index(i)), found);
                    }
                }
                Some(s) => {
                    for (i, item) in items.iter().enumerate() {
                        validate_node(s, item, &path.then(PathStep::Index(i)), found);
                    }
                }
                None => {}
            }
        }
        Value::Object(map) => validate_object(obj, map, path, found),
        Value::Null | Value::Bool(_) => {}
    }
}

fn validate_string(obj: &Map<String, Value>, s: &str, path: &ArgPath, found: &mut Found) {
    let len = s.chars().count() as u64;
    if let Some(min) = obj.get("minLength").and_then(Value::as_u64)
        && len < min
    {
        found.add(path, ViolationKind::TooShort { min, len });
    }
    if let Some(max) = obj.get("maxLength").and_then(Value::as_u64)
        && len > max
    {
        found.add(path, ViolationKind::TooLong { max, len });
    }
    if let Some(p) = obj.get("pattern").and_then(Value::as_str) {
        let pattern = p.to_owned();
        match regex::Regex::new(p) {
            Ok(re) if re.is_match(s) => {}
            Ok(_) => found.add(path, ViolationKind::PatternMismatch { pattern }),
            Err(_) => found.add(path, ViolationKind::BadPattern { pattern }),
        }
    }
}

fn validate_number(obj: &Map<String, Value>, n: &Number, path: &ArgPath, found: &mut Found) {
    let x = n.as_f64().unwrap_or(f64::NAN);
    // A bound as its JSON number and as an f64 to compare with.
    let bound = |kw: &str| match obj.get(kw) {
        Some(Value::Number(limit)) => limit.as_f64().map(|f| (limit.clone(), f)),
        _ => None,
    };
    let flag = |kw: &str| obj.get(kw).and_then(Value::as_bool).unwrap_or(false);
    let below = |limit: Number, exclusive: bool| ViolationKind::BelowMinimum {
        limit,
        exclusive,
        got: n.clone(),
    };
    let above = |limit: Number, exclusive: bool| ViolationKind::AboveMaximum {
        limit,
        exclusive,
        got: n.clone(),
    };
    if let Some((limit, min)) = bound("minimum") {
        // Draft 4: "exclusiveMinimum": true turns minimum exclusive.
        let exclusive = flag("exclusiveMinimum");
        if (exclusive && x <= min) || (!exclusive && x < min) {
            found.add(path, below(limit, exclusive));
        }
    }
    if let Some((limit, max)) = bound("maximum") {
        let exclusive = flag("exclusiveMaximum");
        if (exclusive && x >= max) || (!exclusive && x > max) {
            found.add(path, above(limit, exclusive));
        }
    }
    if let Some((limit, min)) = bound("exclusiveMinimum")
        && x <= min
    {
        found.add(path, below(limit, true));
    }
    if let Some((limit, max)) = bound("exclusiveMaximum")
        && x >= max
    {
        found.add(path, above(limit, true));
    }
}

fn validate_object(
    obj: &Map<String, Value>,
    map: &Map<String, Value>,
    path: &ArgPath,
    found: &mut Found,
) {
    if let Some(Value::Array(required)) = obj.get("required") {
        for r in required.iter().filter_map(Value::as_str) {
            if !map.contains_key(r) {
                found.add(
                    path,
                    ViolationKind::MissingRequired {
                        property: r.to_owned(),
                    },
                );
            }
        }
    }
    let props = obj.get("properties").and_then(Value::as_object);
    let additional = obj.get("additionalProperties");
    for (k, val) in map {
        let at = || path.then(PathStep::Key(k.clone()));
        match props.and_then(|p| p.get(k)) {
            Some(s) => validate_node(s, val, &at(), found),
            None => match additional {
                Some(Value::Bool(false)) => found.add(
                    path,
                    ViolationKind::UnknownProperty {
                        property: k.clone(),
                    },
                ),
                Some(s @ Value::Object(_)) => validate_node(s, val, &at(), found),
                _ => {}
            },
        }
    }
}

/// Validates arguments against a JSON Schema subset: `type` (a name or an array of names;
/// `integer` accepts numbers without a fraction), `enum`, `const`, `properties`, `required`,
/// `additionalProperties` (boolean or schema), `items` (schema or tuple), `minItems`,
/// `maxItems`, `minimum`, `maximum`, `exclusiveMinimum`/`exclusiveMaximum` (number, or draft-4
/// boolean), `minLength`/`maxLength` (in characters), `pattern` (unanchored, Rust regex
/// syntax). Other keywords are ignored. Every problem is reported ([`Violations`]), each with
/// its path and kind; shown joined by `; `: `query: expected string, got number`,
/// `missing required property "city"`, `filters.tags[1]: must be at most 10 characters
/// long, got 12`.
pub fn validate_args(schema: &Value, args: &Value) -> Result<(), Violations> {
    let mut found = Found(Vec::new());
    validate_node(schema, args, &ArgPath::default(), &mut found);
    if found.0.is_empty() {
        Ok(())
    } else {
        Err(Violations(found.0))
    }
}

/// The arguments with top-level `default`s from the schema filled in (`null` counts as `{}`).
pub(super) fn with_defaults(schema: &Value, args: &Value) -> Value {
    let mut args = if args.is_null() {
        Value::Object(Map::new())
    } else {
        args.clone()
    };
    if let (Some(obj), Some(props)) = (
        args.as_object_mut(),
        schema.get("properties").and_then(Value::as_object),
    ) {
        for (k, s) in props {
            if !obj.contains_key(k)
                && let Some(d) = s.get("default")
            {
                obj.insert(k.clone(), d.clone());
            }
        }
    }
    args
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Each violation as (JSON pointer, kind).
    fn found(schema: &Value, args: Value) -> Vec<(String, ViolationKind)> {
        validate_args(schema, &args)
            .unwrap_err()
            .violations()
            .iter()
            .map(|v| (v.path.pointer(), v.kind.clone()))
            .collect()
    }

    fn one(pointer: &str, kind: ViolationKind) -> Vec<(String, ViolationKind)> {
        vec![(pointer.to_owned(), kind)]
    }

    fn num(v: Value) -> Number {
        match v {
            Value::Number(n) => n,
            other => panic!("{other} is not a number"),
        }
    }

    fn wrong_type(expected: &[&str], got: &'static str) -> ViolationKind {
        ViolationKind::WrongType {
            expected: expected.iter().map(|s| (*s).to_owned()).collect(),
            got,
        }
    }

    #[test]
    fn argument_validation_names_the_path() {
        let schema = json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 2, "maxLength": 5, "pattern": "^[a-z]+$"},
                "city": {"type": "string", "enum": ["Paris", "Oslo"]},
                "n": {"type": "integer", "minimum": 1, "maximum": 10},
                "ratio": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
                "opt": {"type": ["string", "null"]},
                "kind": {"const": "x"},
                "tags": {"type": "array", "items": {"type": "string", "maxLength": 3}, "minItems": 1, "maxItems": 2},
                "filters": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                    "additionalProperties": false,
                },
                "extra": {"type": "object", "additionalProperties": {"type": "integer"}},
            },
            "required": ["query", "city"],
            "additionalProperties": false,
        });
        let ok = json!({
            "query": "abc", "city": "Oslo", "n": 10, "ratio": 0.5, "opt": null, "kind": "x",
            "tags": ["a", "bcd"], "filters": {"city": "Oslo"}, "extra": {"a": 1, "b": 2.0},
        });
        assert_eq!(validate_args(&schema, &ok), Ok(()));

        let err = |v: Value| found(&schema, v);
        assert_eq!(
            err(json!({"query": 5, "city": "Oslo"})),
            one("/query", wrong_type(&["string"], "number"))
        );
        assert_eq!(
            err(json!({"query": "abc"})),
            one(
                "",
                ViolationKind::MissingRequired {
                    property: "city".into()
                }
            )
        );
        assert_eq!(
            err(json!({"query": "a", "city": "Oslo"})),
            one("/query", ViolationKind::TooShort { min: 2, len: 1 })
        );
        assert_eq!(
            err(json!({"query": "abcdef", "city": "Oslo"})),
            one("/query", ViolationKind::TooLong { max: 5, len: 6 })
        );
        assert_eq!(
            err(json!({"query": "ABC", "city": "Oslo"})),
            one(
                "/query",
                ViolationKind::PatternMismatch {
                    pattern: "^[a-z]+$".into()
                }
            )
        );
        assert_eq!(
            err(json!({"query": "abc", "city": "Rome"})),
            one(
                "/city",
                ViolationKind::NotInEnum {
                    allowed: vec![json!("Paris"), json!("Oslo")],
                    got: json!("Rome")
                }
            )
        );
        assert_eq!(
            err(json!({"query": "abc", "city": "Oslo", "n": 1.5})),
            one("/n", wrong_type(&["integer"], "number"))
        );
        assert_eq!(
            err(json!({"query": "abc", "city": "Oslo", "n": 0})),
            one(
                "/n",
                ViolationKind::BelowMinimum {
                    limit: num(json!(1)),
                    exclusive: false,
                    got: num(json!(0))
                }
            )
        );
        assert_eq!(
            err(json!({"query": "abc", "city": "Oslo", "n": 11})),
            one(
                "/n",
                ViolationKind::AboveMaximum {
                    limit: num(json!(10)),
                    exclusive: false,
                    got: num(json!(11))
                }
            )
        );
        assert_eq!(
            validate_args(&schema, &json!({"query": "abc", "city": "Oslo", "n": 2.0})),
            Ok(())
        );
        assert_eq!(
            err(json!({"query": "abc", "city": "Oslo", "ratio": 1})),
            one(
                "/ratio",
                ViolationKind::AboveMaximum {
                    limit: num(json!(1)),
                    exclusive: true,
                    got: num(json!(1))
                }
            )
        );
        assert_eq!(
            err(json!({"query": "abc", "city": "Oslo", "ratio": 0})),
            one(
                "/ratio",
                ViolationKind::BelowMinimum {
                    limit: num(json!(0)),
                    exclusive: true,
                    got: num(json!(0))
                }
            )
        );
        assert_eq!(
            err(json!({"query": "abc", "city": "Oslo", "opt": 1})),
            one("/opt", wrong_type(&["string", "null"], "number"))
        );
        assert_eq!(
            err(json!({"query": "abc", "city": "Oslo", "kind": "y"})),
            one(
                "/kind",
                ViolationKind::NotConst {
                    expected: json!("x"),
                    got: json!("y")
                }
            )
        );
        assert_eq!(
            err(json!({"query": "abc", "city": "Oslo", "tags": []})),
            one("/tags", ViolationKind::TooFewItems { min: 1, len: 0 })
        );
        assert_eq!(
            err(json!({"query": "abc", "city": "Oslo", "tags": ["a", "b", "c"]})),
            one("/tags", ViolationKind::TooManyItems { max: 2, len: 3 })
        );
        assert_eq!(
            err(json!({"query": "abc", "city": "Oslo", "tags": ["a", "long"]})),
            one("/tags/1", ViolationKind::TooLong { max: 3, len: 4 })
        );
        assert_eq!(
            err(json!({"query": "abc", "city": "Oslo", "filters": {"town": "x"}})),
            vec![
                (
                    "/filters".to_owned(),
                    ViolationKind::MissingRequired {
                        property: "city".into()
                    }
                ),
                (
                    "/filters".to_owned(),
                    ViolationKind::UnknownProperty {
                        property: "town".into()
                    }
                ),
            ]
        );
        assert_eq!(
            err(json!({"query": "abc", "city": "Oslo", "filters": {"city": 1}})),
            one("/filters/city", wrong_type(&["string"], "number"))
        );
        assert_eq!(
            err(json!({"query": "abc", "city": "Oslo", "extra": {"a": "x"}})),
            one("/extra/a", wrong_type(&["integer"], "string"))
        );
        assert_eq!(
            err(json!({"query": "abc", "city": "Oslo", "zzz": 1})),
            one(
                "",
                ViolationKind::UnknownProperty {
                    property: "zzz".into()
                }
            )
        );
        assert_eq!(err(json!([1])), one("", wrong_type(&["object"], "array")));
        // Several problems are all reported.
        assert_eq!(
            err(json!({"query": 1})),
            vec![
                (
                    String::new(),
                    ViolationKind::MissingRequired {
                        property: "city".into()
                    }
                ),
                ("/query".to_owned(), wrong_type(&["string"], "number")),
            ]
        );

        // What users and models read: each violation with its dotted path, joined by "; ".
        let text = |v: Value| validate_args(&schema, &v).unwrap_err().to_string();
        assert_eq!(
            text(json!({"query": 1})),
            "missing required property \"city\"; query: expected string, got number"
        );
        assert_eq!(
            text(json!({"query": "abc", "city": "Oslo", "tags": ["a", "long"]})),
            "tags[1]: must be at most 3 characters long, got 4"
        );
        assert_eq!(
            text(json!({"query": "abc", "city": "Rome", "ratio": 0})),
            "city: must be one of \"Paris\", \"Oslo\", got \"Rome\"; \
             ratio: must be greater than 0, got 0"
        );
    }

    #[test]
    fn argument_validation_edge_cases() {
        assert_eq!(validate_args(&json!(true), &json!(1)), Ok(()));
        assert_eq!(
            found(&json!(false), json!(1)),
            one("", ViolationKind::NotAllowed)
        );
        assert_eq!(
            validate_args(&json!(false), &json!(1))
                .unwrap_err()
                .to_string(),
            "no value is allowed here"
        );
        assert_eq!(
            validate_args(&json!({"enum": [1, "a"]}), &json!(1.0)),
            Ok(())
        );
        assert_eq!(
            validate_args(&json!({"type": "integer"}), &json!(-3)),
            Ok(())
        );
        assert_eq!(validate_args(&json!({"type": "number"}), &json!(3)), Ok(()));
        assert_eq!(
            found(&json!({"minimum": 5, "exclusiveMinimum": true}), json!(5)),
            one(
                "",
                ViolationKind::BelowMinimum {
                    limit: num(json!(5)),
                    exclusive: true,
                    got: num(json!(5))
                }
            )
        );
        // Tuple items.
        let tuple = json!({"items": [{"type": "string"}, {"type": "integer"}]});
        assert_eq!(validate_args(&tuple, &json!(["a", 1, "extra"])), Ok(()));
        assert_eq!(
            found(&tuple, json!([1, 1])),
            one("/0", wrong_type(&["string"], "number"))
        );
        assert_eq!(
            validate_args(&tuple, &json!([1, 1]))
                .unwrap_err()
                .to_string(),
            "[0]: expected string, got number"
        );
        // minLength counts characters, not bytes.
        assert_eq!(
            validate_args(&json!({"maxLength": 2}), &json!("éé")),
            Ok(())
        );
        // Pointer escapes (RFC 6901).
        let odd = json!({"properties": {"a/b~c": {"type": "string"}}});
        assert_eq!(
            found(&odd, json!({"a/b~c": 1})),
            one("/a~1b~0c", wrong_type(&["string"], "number"))
        );
    }

    #[test]
    fn defaults_fill_missing_arguments() {
        let schema =
            json!({"type": "object", "properties": {"n": {"type": "integer", "default": 10}}});
        assert_eq!(with_defaults(&schema, &Value::Null), json!({"n": 10}));
        assert_eq!(with_defaults(&schema, &json!({"n": 3})), json!({"n": 3}));
    }
}
