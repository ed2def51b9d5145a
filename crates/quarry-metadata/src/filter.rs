//! The filter grammar: parsing (ours and Dify's), matching, the fields a filter names.

use std::collections::BTreeSet;

use quarry_core::{Error, Result};

use crate::fields::Fields;
use crate::limits::{MAX_CONDITIONS, MAX_DEPTH, MAX_NAME_CHARS};
use crate::value::{Date, Value};

/// A filter: conditions combined with and/or/not.
#[derive(Debug, Clone, PartialEq)]
pub enum Filter {
    /// Every one matches.
    And(Vec<Filter>),
    /// At least one matches.
    Or(Vec<Filter>),
    /// It does not match.
    Not(Box<Filter>),
    /// One field compared to a value.
    Condition(Condition),
}

/// `field operator value`.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    /// The field's name.
    pub field: String,
    /// The comparison.
    pub operator: Operator,
    /// The value compared to (`None` for `exists`; `exists` with `Some(Bool(false))` means
    /// the field is absent).
    pub value: Option<Value>,
}

/// The comparisons a condition can make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    /// Equal.
    Eq,
    /// Not equal.
    Ne,
    /// Less than.
    Lt,
    /// Less than or equal.
    Lte,
    /// Greater than.
    Gt,
    /// Greater than or equal.
    Gte,
    /// One of a list.
    In,
    /// A list holding the value, or text holding it.
    Contains,
    /// The field is present.
    Exists,
    /// Text starting with the value.
    StartsWith,
    /// Text ending with the value.
    EndsWith,
}

const OPERATORS: &str = "eq, ne, lt, lte, gt, gte, in, contains, exists, starts_with, ends_with";
const NODE_HINT: &str = "a filter node is a condition {\"field\", \"operator\", \"value\"} or \
                         {\"and\": [...]}, {\"or\": [...]}, {\"not\": {...}}";
const DIFY_OPERATORS: &str = "is, is not, contains, not contains, start with, end with, empty, \
                              not empty, =, ≠, >, <, ≥, ≤, before, after, in, not in";

impl Operator {
    /// Reads an operator: its name in any case, or a symbol (`=`, `==`, `!=`, `<`, `<=`, `>`,
    /// `>=`).
    pub fn parse(text: &str) -> Option<Operator> {
        Some(match text.trim().to_ascii_lowercase().as_str() {
            "eq" | "=" | "==" => Operator::Eq,
            "ne" | "!=" => Operator::Ne,
            "lt" | "<" => Operator::Lt,
            "lte" | "<=" => Operator::Lte,
            "gt" | ">" => Operator::Gt,
            "gte" | ">=" => Operator::Gte,
            "in" => Operator::In,
            "contains" => Operator::Contains,
            "exists" => Operator::Exists,
            "starts_with" => Operator::StartsWith,
            "ends_with" => Operator::EndsWith,
            _ => return None,
        })
    }

    /// Its name in the grammar (`eq`, `starts_with`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Operator::Eq => "eq",
            Operator::Ne => "ne",
            Operator::Lt => "lt",
            Operator::Lte => "lte",
            Operator::Gt => "gt",
            Operator::Gte => "gte",
            Operator::In => "in",
            Operator::Contains => "contains",
            Operator::Exists => "exists",
            Operator::StartsWith => "starts_with",
            Operator::EndsWith => "ends_with",
        }
    }

    /// What it compares with, in words.
    fn takes(self) -> &'static str {
        match self {
            Operator::Eq | Operator::Ne | Operator::Contains => "a string, number, bool or date",
            Operator::Lt | Operator::Lte | Operator::Gt | Operator::Gte => "a number or a date",
            Operator::In => "a non-empty list of strings, numbers, bools or dates",
            Operator::Exists => "true, false or no value",
            Operator::StartsWith | Operator::EndsWith => "a string",
        }
    }
}

fn describe(json: &serde_json::Value) -> String {
    match json {
        serde_json::Value::Null => "null".into(),
        serde_json::Value::Bool(b) => format!("the bool {b}"),
        serde_json::Value::Number(n) => format!("the number {n}"),
        serde_json::Value::String(s) => {
            let short: String = s.chars().take(40).collect();
            let more = if short.len() < s.len() { "..." } else { "" };
            format!("the string {short:?}{more}")
        }
        serde_json::Value::Array(_) => "a list".into(),
        serde_json::Value::Object(_) => "an object".into(),
    }
}

/// The value a condition compares with, typed and checked for its operator.
fn condition_value(
    path: &str,
    op: Operator,
    json: Option<&serde_json::Value>,
) -> Result<Option<Value>> {
    let json = json.filter(|j| !j.is_null());
    let wrong = |json: &serde_json::Value| {
        Error::invalid(format!(
            "{path}: \"value\" must be {} (operator \"{}\"), not {}",
            op.takes(),
            op.name(),
            describe(json)
        ))
    };
    let Some(json) = json else {
        if op == Operator::Exists {
            return Ok(None);
        }
        return Err(Error::invalid(format!(
            "{path}: \"value\" is missing (operator \"{}\" compares with {})",
            op.name(),
            op.takes()
        )));
    };
    match op {
        Operator::Exists => match json {
            serde_json::Value::Bool(true) => Ok(None),
            serde_json::Value::Bool(false) => Ok(Some(Value::Bool(false))),
            other => Err(wrong(other)),
        },
        Operator::Eq | Operator::Ne | Operator::Contains => crate::value::scalar_from_json(json)
            .map(Some)
            .ok_or_else(|| wrong(json)),
        Operator::Lt | Operator::Lte | Operator::Gt | Operator::Gte => {
            match crate::value::scalar_from_json(json) {
                Some(v @ (Value::Number(_) | Value::Date(_))) => Ok(Some(v)),
                _ => Err(wrong(json)),
            }
        }
        Operator::StartsWith | Operator::EndsWith => match json {
            serde_json::Value::String(s) => Ok(Some(Value::String(s.clone()))),
            other => Err(wrong(other)),
        },
        Operator::In => {
            let serde_json::Value::Array(items) = json else {
                return Err(wrong(json));
            };
            if items.is_empty() {
                return Err(wrong(json));
            }
            let mut values = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                let v = crate::value::scalar_from_json(item).ok_or_else(|| {
                    Error::invalid(format!(
                        "{path}: \"value\"[{i}] must be a string, number, bool or date (operator \"in\"), not {}",
                        describe(item)
                    ))
                })?;
                values.push(v);
            }
            Ok(Some(Value::List(values)))
        }
    }
}

fn check_field(path: &str, key: &str, json: &serde_json::Value) -> Result<String> {
    match json {
        serde_json::Value::String(s) if !s.is_empty() && s.chars().count() <= MAX_NAME_CHARS => {
            Ok(s.clone())
        }
        other => Err(Error::invalid(format!(
            "{path}: \"{key}\" must be a field name of 1 to {MAX_NAME_CHARS} characters, not {}",
            describe(other)
        ))),
    }
}

struct Parser {
    conditions: usize,
}

impl Parser {
    fn node(&mut self, json: &serde_json::Value, path: &str, depth: usize) -> Result<Filter> {
        if depth > MAX_DEPTH {
            return Err(Error::invalid(format!(
                "{path}: the filter nests deeper than {MAX_DEPTH} levels"
            )));
        }
        let map = match json {
            serde_json::Value::Object(map) => map,
            serde_json::Value::Array(items) => {
                return self.list(items, path, "", depth).map(Filter::And);
            }
            other => {
                return Err(Error::invalid(format!(
                    "{path}: expected a filter node, not {}; {NODE_HINT}",
                    describe(other)
                )));
            }
        };
        if let Some(key) = map.keys().find(|k| {
            !matches!(
                k.as_str(),
                "field" | "key" | "operator" | "op" | "value" | "and" | "or" | "not"
            )
        }) {
            return Err(Error::invalid(format!(
                "{path}: unknown key {key:?}; {NODE_HINT}"
            )));
        }
        let logical: Vec<&str> = ["and", "or", "not"]
            .into_iter()
            .filter(|k| map.contains_key(*k))
            .collect();
        match logical.as_slice() {
            [] => self.condition(map, path),
            [one] if map.len() == 1 => {
                let inner = &map[*one];
                match *one {
                    "not" => Ok(Filter::Not(Box::new(self.node(
                        inner,
                        &format!("{path}.not"),
                        depth + 1,
                    )?))),
                    "and" | "or" => {
                        let serde_json::Value::Array(items) = inner else {
                            return Err(Error::invalid(format!(
                                "{path}.{one}: expected a non-empty list of filter nodes, not {}",
                                describe(inner)
                            )));
                        };
                        let nodes = self.list(items, path, one, depth + 1)?;
                        Ok(if *one == "and" {
                            Filter::And(nodes)
                        } else {
                            Filter::Or(nodes)
                        })
                    }
                    _ => Err(Error::invalid(format!("{path}: {NODE_HINT}"))),
                }
            }
            _ => {
                let keys: Vec<String> = map.keys().map(|k| format!("{k:?}")).collect();
                Err(Error::invalid(format!(
                    "{path}: a node mixes forms ({}); {NODE_HINT}",
                    keys.join(", ")
                )))
            }
        }
    }

    fn list(
        &mut self,
        items: &[serde_json::Value],
        path: &str,
        key: &str,
        depth: usize,
    ) -> Result<Vec<Filter>> {
        let base = if key.is_empty() {
            path.to_owned()
        } else {
            format!("{path}.{key}")
        };
        if items.is_empty() {
            return Err(Error::invalid(format!(
                "{base}: expected a non-empty list of filter nodes, not an empty list"
            )));
        }
        items
            .iter()
            .enumerate()
            .map(|(i, item)| self.node(item, &format!("{base}[{i}]"), depth))
            .collect()
    }

    fn condition(
        &mut self,
        map: &serde_json::Map<String, serde_json::Value>,
        path: &str,
    ) -> Result<Filter> {
        self.conditions += 1;
        if self.conditions > MAX_CONDITIONS {
            return Err(Error::invalid(format!(
                "{path}: the filter has more than {MAX_CONDITIONS} conditions"
            )));
        }
        let field = match (map.get("field"), map.get("key")) {
            (Some(_), Some(_)) => {
                return Err(Error::invalid(format!(
                    "{path}: give \"field\" or \"key\", not both"
                )));
            }
            (Some(f), None) => check_field(path, "field", f)?,
            (None, Some(k)) => check_field(path, "key", k)?,
            (None, None) => {
                return Err(Error::invalid(format!(
                    "{path}: \"field\" is missing; {NODE_HINT}"
                )));
            }
        };
        let op_json = match (map.get("operator"), map.get("op")) {
            (Some(_), Some(_)) => {
                return Err(Error::invalid(format!(
                    "{path}: give \"operator\" or \"op\", not both"
                )));
            }
            (Some(o), None) | (None, Some(o)) => o,
            (None, None) => {
                return Err(Error::invalid(format!(
                    "{path}: \"operator\" is missing; operators: {OPERATORS}"
                )));
            }
        };
        let operator = match op_json {
            serde_json::Value::String(s) => Operator::parse(s).ok_or_else(|| {
                Error::invalid(format!(
                    "{path}: unknown operator {s:?}; operators: {OPERATORS}"
                ))
            })?,
            other => {
                return Err(Error::invalid(format!(
                    "{path}: \"operator\" must be a string, not {}; operators: {OPERATORS}",
                    describe(other)
                )));
            }
        };
        let value = condition_value(path, operator, map.get("value"))?;
        Ok(Filter::Condition(Condition {
            field,
            operator,
            value,
        }))
    }
}

impl Filter {
    /// Reads a filter from JSON (see the crate docs for the grammar). Errors say where, as a
    /// path from `filter`.
    pub fn parse(json: &serde_json::Value) -> Result<Filter> {
        Parser { conditions: 0 }.node(json, "filter", 1)
    }

    /// Reads a filter from JSON text.
    pub fn parse_str(text: &str) -> Result<Filter> {
        let json: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| Error::invalid(format!("filter is not valid JSON: {e}")))?;
        Filter::parse(&json)
    }

    /// A condition (`Filter::Condition`) from its parts.
    pub fn condition(field: impl Into<String>, operator: Operator, value: Option<Value>) -> Filter {
        Filter::Condition(Condition {
            field: field.into(),
            operator,
            value,
        })
    }

    /// Translates Dify's knowledge-retrieval `metadata_condition`
    /// (`{"logical_operator": "and"|"or", "conditions": [{"name", "comparison_operator",
    /// "value"}]}`). `None` when it is null or has no conditions.
    pub fn from_dify(json: &serde_json::Value) -> Result<Option<Filter>> {
        const ROOT: &str = "metadata_condition";
        let map = match json {
            serde_json::Value::Null => return Ok(None),
            serde_json::Value::Object(map) => map,
            other => {
                return Err(Error::invalid(format!(
                    "{ROOT}: expected an object {{\"logical_operator\", \"conditions\"}}, not {}",
                    describe(other)
                )));
            }
        };
        let or = match map.get("logical_operator") {
            None | Some(serde_json::Value::Null) => false,
            Some(serde_json::Value::String(s)) if s.trim().eq_ignore_ascii_case("and") => false,
            Some(serde_json::Value::String(s)) if s.trim().eq_ignore_ascii_case("or") => true,
            Some(other) => {
                return Err(Error::invalid(format!(
                    "{ROOT}.logical_operator: must be \"and\" or \"or\", not {}",
                    describe(other)
                )));
            }
        };
        let items = match map.get("conditions") {
            None | Some(serde_json::Value::Null) => return Ok(None),
            Some(serde_json::Value::Array(items)) => items,
            Some(other) => {
                return Err(Error::invalid(format!(
                    "{ROOT}.conditions: expected a list of conditions, not {}",
                    describe(other)
                )));
            }
        };
        if items.is_empty() {
            return Ok(None);
        }
        if items.len() > MAX_CONDITIONS {
            return Err(Error::invalid(format!(
                "{ROOT}.conditions: more than {MAX_CONDITIONS} conditions"
            )));
        }
        let nodes = items
            .iter()
            .enumerate()
            .map(|(i, item)| dify_condition(item, &format!("{ROOT}.conditions[{i}]")))
            .collect::<Result<Vec<_>>>()?;
        Ok(Some(if or {
            Filter::Or(nodes)
        } else {
            Filter::And(nodes)
        }))
    }

    /// Whether a document's fields match (see the crate docs for the rules).
    pub fn matches<F: Fields + ?Sized>(&self, fields: &F) -> bool {
        match self {
            Filter::And(nodes) => nodes.iter().all(|n| n.matches(fields)),
            Filter::Or(nodes) => nodes.iter().any(|n| n.matches(fields)),
            Filter::Not(node) => !node.matches(fields),
            Filter::Condition(c) => c.matches(fields),
        }
    }

    /// The filter in the canonical form of the grammar (`field`/`operator`/`value` under
    /// `and`/`or`/`not`): how a qmd or Dify shape was understood. [`Filter::parse`] reads it
    /// back to the same filter.
    pub fn to_json(&self) -> serde_json::Value {
        let list = |nodes: &[Filter]| {
            serde_json::Value::Array(nodes.iter().map(Filter::to_json).collect())
        };
        match self {
            Filter::And(nodes) => serde_json::json!({ "and": list(nodes) }),
            Filter::Or(nodes) => serde_json::json!({ "or": list(nodes) }),
            Filter::Not(node) => serde_json::json!({ "not": node.to_json() }),
            Filter::Condition(c) => {
                let mut map = serde_json::Map::new();
                map.insert("field".into(), c.field.clone().into());
                map.insert("operator".into(), c.operator.name().into());
                if let Some(v) = &c.value {
                    map.insert("value".into(), v.to_json());
                }
                serde_json::Value::Object(map)
            }
        }
    }

    /// The distinct field names the filter mentions, sorted.
    pub fn fields(&self) -> Vec<&str> {
        fn walk<'a>(f: &'a Filter, out: &mut BTreeSet<&'a str>) {
            match f {
                Filter::And(nodes) | Filter::Or(nodes) => nodes.iter().for_each(|n| walk(n, out)),
                Filter::Not(node) => walk(node, out),
                Filter::Condition(c) => {
                    out.insert(c.field.as_str());
                }
            }
        }
        let mut out = BTreeSet::new();
        walk(self, &mut out);
        out.into_iter().collect()
    }
}

// ---- Dify ----

#[derive(Clone, Copy, PartialEq)]
enum DifyValue {
    /// Typed by the date rule; a numeric string stays text.
    Scalar,
    /// A numeric string is a number.
    Numeric,
    /// A number or a date; a numeric string is a number.
    Ordered,
    /// A date; a number is Unix seconds.
    Date,
    /// Text as given.
    Text,
    /// A list, or comma-separated text.
    List,
    /// Ignored.
    None,
}

fn dify_condition(json: &serde_json::Value, path: &str) -> Result<Filter> {
    let serde_json::Value::Object(map) = json else {
        return Err(Error::invalid(format!(
            "{path}: expected a condition {{\"name\", \"comparison_operator\", \"value\"}}, not {}",
            describe(json)
        )));
    };
    let names: Vec<String> = match map.get("name") {
        Some(serde_json::Value::String(s)) => vec![check_field(
            path,
            "name",
            &serde_json::Value::String(s.clone()),
        )?],
        // Dify's external-knowledge API sends the name as a list of names.
        Some(serde_json::Value::Array(items)) if !items.is_empty() => items
            .iter()
            .map(|n| check_field(path, "name", n))
            .collect::<Result<_>>()?,
        Some(other) => {
            return Err(Error::invalid(format!(
                "{path}.name: expected a field name, not {}",
                describe(other)
            )));
        }
        None => {
            return Err(Error::invalid(format!(
                "{path}: \"name\" is missing (the field to compare)"
            )));
        }
    };
    let op_path = format!("{path}.comparison_operator");
    let op_text = match map.get("comparison_operator") {
        Some(serde_json::Value::String(s)) => s.trim().to_lowercase(),
        Some(other) => {
            return Err(Error::invalid(format!(
                "{op_path}: expected an operator, not {}; operators: {DIFY_OPERATORS}",
                describe(other)
            )));
        }
        None => {
            return Err(Error::invalid(format!(
                "{op_path}: missing; operators: {DIFY_OPERATORS}"
            )));
        }
    };
    let op_text = op_text.split_whitespace().collect::<Vec<_>>().join(" ");
    let (negate, operator, kind) = match op_text.as_str() {
        "is" => (false, Operator::Eq, DifyValue::Scalar),
        "=" | "==" => (false, Operator::Eq, DifyValue::Numeric),
        "is not" => (false, Operator::Ne, DifyValue::Scalar),
        "≠" | "!=" => (false, Operator::Ne, DifyValue::Numeric),
        "contains" => (false, Operator::Contains, DifyValue::Scalar),
        "not contains" => (true, Operator::Contains, DifyValue::Scalar),
        "start with" | "starts with" => (false, Operator::StartsWith, DifyValue::Text),
        "end with" | "ends with" => (false, Operator::EndsWith, DifyValue::Text),
        "empty" => (true, Operator::Exists, DifyValue::None),
        "not empty" => (false, Operator::Exists, DifyValue::None),
        ">" => (false, Operator::Gt, DifyValue::Ordered),
        "<" => (false, Operator::Lt, DifyValue::Ordered),
        "≥" | ">=" => (false, Operator::Gte, DifyValue::Ordered),
        "≤" | "<=" => (false, Operator::Lte, DifyValue::Ordered),
        "before" => (false, Operator::Lt, DifyValue::Date),
        "after" => (false, Operator::Gt, DifyValue::Date),
        "in" => (false, Operator::In, DifyValue::List),
        "not in" => (true, Operator::In, DifyValue::List),
        _ => {
            return Err(Error::invalid(format!(
                "{op_path}: unknown comparison operator {op_text:?}; operators: {DIFY_OPERATORS}"
            )));
        }
    };
    let value = dify_value(&format!("{path}.value"), &op_text, kind, map.get("value"))?;
    let mut nodes: Vec<Filter> = names
        .into_iter()
        .map(|field| {
            let c = Filter::condition(field, operator, value.clone());
            if negate { Filter::Not(Box::new(c)) } else { c }
        })
        .collect();
    Ok(match nodes.len() {
        1 => nodes.remove(0),
        _ => Filter::Or(nodes),
    })
}

fn numeric(text: &str) -> Option<f64> {
    text.trim().parse::<f64>().ok().filter(|f| f.is_finite())
}

fn dify_value(
    path: &str,
    op: &str,
    kind: DifyValue,
    json: Option<&serde_json::Value>,
) -> Result<Option<Value>> {
    if kind == DifyValue::None {
        return Ok(None);
    }
    let expects = match kind {
        DifyValue::Scalar | DifyValue::Numeric => "a string, number, bool or date",
        DifyValue::Ordered => "a number or a date",
        DifyValue::Date => "a date (YYYY-MM-DD, an RFC 3339 timestamp or Unix seconds)",
        DifyValue::Text => "a string",
        DifyValue::List => "a list or comma-separated text",
        DifyValue::None => "no value",
    };
    let json = json.filter(|j| !j.is_null());
    let Some(json) = json else {
        return Err(Error::invalid(format!(
            "{path}: missing (operator {op:?} compares with {expects})"
        )));
    };
    let wrong = || {
        Error::invalid(format!(
            "{path}: operator {op:?} compares with {expects}, not {}",
            describe(json)
        ))
    };
    let scalar = crate::value::scalar_from_json;
    let value = match kind {
        DifyValue::Scalar => scalar(json),
        DifyValue::Numeric => match json {
            serde_json::Value::String(s) => {
                Some(numeric(s).map_or_else(|| Value::from_text(s), Value::Number))
            }
            other => scalar(other),
        },
        DifyValue::Ordered => match json {
            serde_json::Value::String(s) => numeric(s)
                .map(Value::Number)
                .or_else(|| Date::parse(s.trim()).map(Value::Date)),
            other => scalar(other).filter(|v| matches!(v, Value::Number(_))),
        },
        DifyValue::Date => match json {
            serde_json::Value::String(s) => Date::parse(s.trim())
                .or_else(|| numeric(s).and_then(unix_seconds))
                .map(Value::Date),
            serde_json::Value::Number(n) => n.as_f64().and_then(unix_seconds).map(Value::Date),
            _ => None,
        },
        DifyValue::Text => match json {
            serde_json::Value::String(s) => Some(Value::String(s.clone())),
            _ => None,
        },
        DifyValue::List => {
            let items: Vec<Value> = match json {
                serde_json::Value::Array(items) => {
                    let mut out = Vec::with_capacity(items.len());
                    for item in items {
                        out.push(scalar(item).ok_or_else(wrong)?);
                    }
                    out
                }
                serde_json::Value::String(s) => s
                    .split(',')
                    .map(str::trim)
                    .filter(|p| !p.is_empty())
                    .map(Value::from_text)
                    .collect(),
                other => scalar(other).into_iter().collect(),
            };
            (!items.is_empty()).then_some(Value::List(items))
        }
        DifyValue::None => None,
    };
    value.map(Some).ok_or_else(wrong)
}

/// Unix seconds as an instant.
fn unix_seconds(seconds: f64) -> Option<Date> {
    let millis = (seconds * 1000.0).round();
    if !millis.is_finite() || millis.abs() > 1e15 {
        return None;
    }
    #[allow(clippy::cast_possible_truncation)]
    let millis = millis as i64;
    jiff::Timestamp::from_millisecond(millis).ok()?;
    Some(Date {
        millis,
        has_time: true,
    })
}

// ---- Matching ----

impl Condition {
    /// Whether a document's fields match this condition.
    pub fn matches<F: Fields + ?Sized>(&self, fields: &F) -> bool {
        let Some(field) = fields.field(&self.field) else {
            return match self.operator {
                Operator::Ne => true,
                Operator::Exists => self.value == Some(Value::Bool(false)),
                _ => false,
            };
        };
        let Some(want) = &self.value else {
            // Only `exists` goes without a value.
            return self.operator == Operator::Exists;
        };
        match self.operator {
            Operator::Exists => *want != Value::Bool(false),
            Operator::Ne => match field {
                Value::List(items) => !items.iter().any(|item| equal(item, want)),
                scalar => !equal(scalar, want),
            },
            op => match field {
                Value::List(items) => items.iter().any(|item| scalar_matches(op, item, want)),
                scalar => scalar_matches(op, scalar, want),
            },
        }
    }
}

/// `have op want` for one scalar `have`.
fn scalar_matches(op: Operator, have: &Value, want: &Value) -> bool {
    match op {
        Operator::Eq => equal(have, want),
        Operator::Ne => !equal(have, want),
        Operator::Exists => true,
        Operator::Lt | Operator::Lte | Operator::Gt | Operator::Gte => {
            let ordering = match (have, want) {
                (Value::Number(a), Value::Number(b)) => a.partial_cmp(b),
                (Value::Date(a), Value::Date(b)) => Some(a.millis.cmp(&b.millis)),
                _ => None,
            };
            ordering.is_some_and(|o| match op {
                Operator::Lt => o.is_lt(),
                Operator::Lte => o.is_le(),
                Operator::Gt => o.is_gt(),
                _ => o.is_ge(),
            })
        }
        Operator::In => match want {
            Value::List(options) => options.iter().any(|w| equal(have, w)),
            single => equal(have, single),
        },
        Operator::Contains => match (have, want) {
            (Value::String(text), want) if !matches!(want, Value::List(_)) => {
                text.to_lowercase().contains(&want.text().to_lowercase())
            }
            _ => equal(have, want),
        },
        Operator::StartsWith | Operator::EndsWith => {
            let text = match have {
                Value::String(s) => s.clone(),
                Value::Date(d) => d.to_string(),
                _ => return false,
            };
            let Value::String(affix) = want else {
                return false;
            };
            if op == Operator::StartsWith {
                text.starts_with(affix.as_str())
            } else {
                text.ends_with(affix.as_str())
            }
        }
    }
}

/// Equality of same-typed scalars; a date with no time equals any instant on its UTC day.
fn equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Number(x), Value::Number(y)) => x == y,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Date(x), Value::Date(y)) => {
            if x.has_time && y.has_time {
                x.millis == y.millis
            } else {
                x.day() == y.day()
            }
        }
        _ => false,
    }
}
