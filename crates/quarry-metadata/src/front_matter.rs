//! Front matter: a YAML (`---`) or TOML (`+++`) block at the start of a Markdown text.

use std::collections::BTreeMap;

use crate::fields::Metadata;
use crate::limits::{MAX_FIELDS, MAX_LIST_ITEMS, MAX_NAME_CHARS, MAX_STRING_CHARS};
use crate::value::{Date, Value};

/// A Markdown document's front matter.
#[derive(Debug, Clone, PartialEq)]
pub struct FrontMatter {
    /// Byte offset just past the closing delimiter line (and its newline).
    pub end: usize,
    /// The fields it holds.
    pub fields: Metadata,
}

/// The front matter at the start of `text` (already without a byte order mark, with `\n` line
/// ends): a YAML block between `---` lines (closed by `---` or `...`) or a TOML block between
/// `+++` lines. `None` when there is none, it is not closed, it does not parse, or it is not a
/// mapping (see the crate docs for how its fields are typed and flattened).
pub fn front_matter(text: &str) -> Option<FrontMatter> {
    let mut lines = text.split_inclusive('\n');
    let first = lines.next()?;
    let yaml = match delimiter(first) {
        "---" => true,
        "+++" => false,
        _ => return None,
    };
    let start = first.len();
    let mut offset = start;
    for line in lines {
        let content = delimiter(line);
        let closes = if yaml {
            content == "---" || content == "..."
        } else {
            content == "+++"
        };
        if closes {
            let block = &text[start..offset];
            let end = offset + line.len();
            let fields = if yaml {
                parse_yaml(block)?
            } else {
                parse_toml(block)?
            };
            return Some(FrontMatter { end, fields });
        }
        offset += line.len();
    }
    None
}

/// A line without its newline and trailing spaces.
fn delimiter(line: &str) -> &str {
    line.strip_suffix('\n')
        .unwrap_or(line)
        .trim_end_matches([' ', '\t'])
}

/// Collects fields in document order, keeping the first [`MAX_FIELDS`].
#[derive(Default)]
struct Fields {
    map: BTreeMap<String, Value>,
}

impl Fields {
    fn add(&mut self, name: String, value: Value) {
        if name.is_empty() || name.chars().count() > MAX_NAME_CHARS {
            return;
        }
        if self.map.len() >= MAX_FIELDS && !self.map.contains_key(&name) {
            return;
        }
        self.map.insert(name, value);
    }
}

fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_owned()
    } else {
        format!("{prefix}.{key}")
    }
}

fn text_value(s: &str) -> Option<Value> {
    (s.chars().count() <= MAX_STRING_CHARS).then(|| Value::from_text(s))
}

fn list_value(items: Vec<Value>, given: usize) -> Option<Value> {
    (given <= MAX_LIST_ITEMS).then_some(Value::List(items))
}

// ---- YAML ----

fn parse_yaml(block: &str) -> Option<Metadata> {
    let value: serde_norway::Value = serde_norway::from_str(block).ok()?;
    let mut fields = Fields::default();
    match untag(&value) {
        serde_norway::Value::Null => {}
        serde_norway::Value::Mapping(map) => yaml_mapping(map, "", &mut fields),
        _ => return None,
    }
    Some(Metadata(fields.map))
}

fn untag(value: &serde_norway::Value) -> &serde_norway::Value {
    match value {
        serde_norway::Value::Tagged(tagged) => untag(&tagged.value),
        other => other,
    }
}

fn yaml_key(key: &serde_norway::Value) -> Option<String> {
    match untag(key) {
        serde_norway::Value::String(s) => Some(s.clone()),
        serde_norway::Value::Number(n) => Some(n.to_string()),
        serde_norway::Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn yaml_mapping(map: &serde_norway::Mapping, prefix: &str, fields: &mut Fields) {
    for (key, value) in map {
        let Some(key) = yaml_key(key) else { continue };
        let name = join(prefix, &key);
        match untag(value) {
            serde_norway::Value::Mapping(inner) => yaml_mapping(inner, &name, fields),
            serde_norway::Value::Sequence(items) => {
                let values: Vec<Value> = items.iter().filter_map(yaml_scalar).collect();
                if let Some(list) = list_value(values, items.len()) {
                    fields.add(name, list);
                }
            }
            scalar => {
                if let Some(v) = yaml_scalar(scalar) {
                    fields.add(name, v);
                }
            }
        }
    }
}

fn yaml_scalar(value: &serde_norway::Value) -> Option<Value> {
    match untag(value) {
        serde_norway::Value::String(s) => text_value(s),
        serde_norway::Value::Number(n) => n.as_f64().filter(|f| f.is_finite()).map(Value::Number),
        serde_norway::Value::Bool(b) => Some(Value::Bool(*b)),
        _ => None,
    }
}

// ---- TOML ----

fn parse_toml(block: &str) -> Option<Metadata> {
    let table: toml::Table = toml::from_str(block).ok()?;
    let mut fields = Fields::default();
    toml_table(&table, "", &mut fields);
    Some(Metadata(fields.map))
}

fn toml_table(table: &toml::Table, prefix: &str, fields: &mut Fields) {
    for (key, value) in table {
        let name = join(prefix, key);
        match value {
            toml::Value::Table(inner) => toml_table(inner, &name, fields),
            toml::Value::Array(items) => {
                let values: Vec<Value> = items.iter().filter_map(toml_scalar).collect();
                if let Some(list) = list_value(values, items.len()) {
                    fields.add(name, list);
                }
            }
            scalar => {
                if let Some(v) = toml_scalar(scalar) {
                    fields.add(name, v);
                }
            }
        }
    }
}

fn toml_scalar(value: &toml::Value) -> Option<Value> {
    match value {
        toml::Value::String(s) => text_value(s),
        #[allow(clippy::cast_precision_loss)]
        toml::Value::Integer(i) => Some(Value::Number(*i as f64)),
        toml::Value::Float(f) => f.is_finite().then_some(Value::Number(*f)),
        toml::Value::Boolean(b) => Some(Value::Bool(*b)),
        toml::Value::Datetime(dt) => toml_datetime(dt),
        toml::Value::Array(_) | toml::Value::Table(_) => None,
    }
}

fn toml_datetime(dt: &toml::value::Datetime) -> Option<Value> {
    let Some(d) = dt.date else {
        // A local time alone is not a date.
        return text_value(&dt.to_string());
    };
    let date = jiff::civil::Date::new(
        i16::try_from(d.year).ok()?,
        i8::try_from(d.month).ok()?,
        i8::try_from(d.day).ok()?,
    )
    .ok()?;
    let Some(t) = dt.time else {
        return Date::from_ymd(date.year(), date.month(), date.day()).map(Value::Date);
    };
    let nanos = i32::try_from(t.nanosecond.unwrap_or(0)).ok()?;
    let time = jiff::civil::Time::new(
        i8::try_from(t.hour).ok()?,
        i8::try_from(t.minute).ok()?,
        i8::try_from(t.second.unwrap_or(0).min(59)).ok()?,
        nanos,
    )
    .ok()?;
    let civil = date.to_datetime(time);
    let offset = match dt.offset {
        None | Some(toml::value::Offset::Z) => jiff::tz::Offset::UTC,
        Some(toml::value::Offset::Custom { minutes }) => {
            jiff::tz::Offset::from_seconds(i32::from(minutes) * 60).ok()?
        }
    };
    let ts = offset.to_timestamp(civil).ok()?;
    Some(Value::Date(Date {
        millis: ts.as_millisecond(),
        has_time: true,
    }))
}
