//! Typed document metadata: the fields a document carries, where they come from (Markdown
//! front matter in YAML or TOML, a converter's document properties, fields given at upload or
//! on `create_knowledge`), the one JSON filter grammar every search surface takes, and
//! per-field summaries for discovery.
//!
//! This page is the reference for the grammar and the typing rules.
//!
//! # Values
//!
//! A field holds one [`Value`]: a string, a number, a bool, a [`Date`] or a list of those.
//!
//! * **Dates.** A string is a date when it is exactly `YYYY-MM-DD` (a valid calendar date),
//!   and an instant when it is an RFC 3339 timestamp with `Z` or an offset
//!   (`2026-06-01T12:30:00+02:00`); instants are converted to UTC. Any other string stays a
//!   string. The canonical text of a date is `2026-06-01`; of an instant
//!   `2026-06-01T10:30:00Z`, with `.sss` milliseconds only when they are not zero.
//! * **Numbers.** Integers and decimals alike are numbers (`f64`); NaN and infinities are
//!   refused. In JSON an integral number within ±2^53 is written as an integer (`3`, not `3.0`).
//! * **Lists** hold scalars only: nested lists and maps inside a list are dropped, as are nulls.
//! * **Null** means the field is absent.
//!
//! # Fields given by a user
//!
//! [`Metadata::from_json`] takes a JSON object of fields and checks it: at most
//! [`MAX_FIELDS`] fields; names of 1–[`MAX_NAME_CHARS`] letters, digits, `_`, `-` or `.`,
//! neither starting nor ending with a dot; strings of at most [`MAX_STRING_CHARS`]
//! characters; lists of at most [`MAX_LIST_ITEMS`] items; no nested objects.
//!
//! # Front matter
//!
//! [`front_matter`] reads a block at the very start of a Markdown text:
//!
//! * YAML: a first line `---` and a later line `---` or `...` closing it;
//! * TOML: a first line `+++` and a later line `+++` closing it.
//!
//! (Trailing spaces on a delimiter line are allowed.) The block counts only when it parses and
//! is a mapping, so a document that opens with a `---` horizontal rule followed by prose has
//! no front matter. Nested mappings are flattened with dots (`author: {name: Ann}` gives the
//! field `author.name`); YAML keys that are numbers or bools are turned into text; dates
//! written unquoted in YAML are dates by the rule above; TOML datetimes are dates (an offset
//! datetime an instant in UTC, a local date a date, a local datetime an instant read as UTC,
//! a local time alone a string). Field names are not checked (people write
//! `Last Modified:`), but names longer than [`MAX_NAME_CHARS`] characters and values beyond
//! the limits are dropped silently, and only the first [`MAX_FIELDS`] fields are kept.
//!
//! # Filters
//!
//! A filter is JSON. A node is one of:
//!
//! * a condition `{"field": "status", "operator": "eq", "value": "published"}` (`"key"` is
//!   accepted for `"field"`, `"op"` for `"operator"`);
//! * `{"and": [node, ...]}`, `{"or": [node, ...]}` (non-empty lists), `{"not": node}`;
//! * a JSON array of nodes, which means `and`.
//!
//! Operators (case-insensitive; the symbols `=`/`==`, `!=`, `<`, `<=`, `>`, `>=` are accepted
//! too):
//!
//! | operator | value | matches when the field |
//! |---|---|---|
//! | `eq` | string, number, bool or date | equals the value |
//! | `ne` | string, number, bool or date | does not equal it (also when absent, see below) |
//! | `lt`, `lte`, `gt`, `gte` | number or date | compares so with it |
//! | `in` | non-empty list of scalars | equals one of them |
//! | `contains` | string, number, bool or date | is text holding the value (case-insensitive), or equals it |
//! | `exists` | none, `true` or `false` | is present (`false`: is absent) |
//! | `starts_with`, `ends_with` | string | is text (or a date's canonical text) starting/ending with it (case-sensitive) |
//!
//! Every other key, a node mixing forms or a missing part is an error naming where it is, as
//! a path (`filter.and[1]: unknown operator "eqq"; ...`). A filter nests at most
//! [`MAX_DEPTH`] levels and holds at most [`MAX_CONDITIONS`] conditions.
//!
//! Matching:
//!
//! * Values compare only with values of the same type: numbers with numbers, dates with
//!   dates, text with text (case-sensitive, except `contains`), bools with bools. A value of
//!   another type does not match (so `ne` holds).
//! * A date and an instant compare on their milliseconds (a date is its midnight, UTC), except
//!   that `eq`, `ne` and `in` with a date match any instant on that UTC day.
//! * A missing field matches nothing except `ne` (a document without the field is "not equal
//!   to X") and `exists` with `false`.
//! * A list field matches when any item matches (`tags eq "x"` and `tags contains "x"` both
//!   work; `contains` on a text item is a substring test); `ne` holds when no item equals the
//!   value.
//!
//! [`Filter::from_dify`] translates Dify's knowledge-retrieval `metadata_condition` into this
//! grammar.

mod filter;
mod front_matter;
mod summary;
mod value;

use std::collections::BTreeMap;

use quarry_core::{Error, Result};

pub use front_matter::front_matter;
pub use summary::summarize;

/// The most fields a document keeps.
pub const MAX_FIELDS: usize = 64;
/// The longest field name, in characters.
pub const MAX_NAME_CHARS: usize = 64;
/// The longest string value, in characters.
pub const MAX_STRING_CHARS: usize = 1000;
/// The most items a list value holds.
pub const MAX_LIST_ITEMS: usize = 100;
/// The deepest a filter nests.
pub const MAX_DEPTH: usize = 16;
/// The most conditions a filter holds.
pub const MAX_CONDITIONS: usize = 100;

/// A date or an instant, kept as milliseconds since the Unix epoch (UTC) and shown in its
/// canonical form: `2026-06-01` for a date, `2026-06-01T12:30:00Z` for an instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Date {
    /// Milliseconds since the Unix epoch (a date: its midnight, UTC).
    pub millis: i64,
    /// Whether it has a time of day (an instant) or not (a date).
    pub has_time: bool,
}

/// One field's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// Text.
    String(String),
    /// A number (integers and decimals alike).
    Number(f64),
    /// `true` or `false`.
    Bool(bool),
    /// A date or an instant.
    Date(Date),
    /// A list of scalars.
    List(Vec<Value>),
}

/// A document's fields by name (sorted).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Metadata(pub BTreeMap<String, Value>);

/// A Markdown document's front matter.
#[derive(Debug, Clone, PartialEq)]
pub struct FrontMatter {
    /// Byte offset just past the closing delimiter line (and its newline).
    pub end: usize,
    /// The fields it holds.
    pub fields: Metadata,
}

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

/// What discovery says about one field in a scope.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FieldSummary {
    /// The field's name.
    pub field: String,
    /// Its types, most frequent first (`string`, `number`, `bool`, `date`, `list`).
    pub types: Vec<&'static str>,
    /// Documents that have it.
    pub documents: u64,
    /// Its most frequent values (list items counted one by one), with their counts.
    pub top_values: Vec<ValueCount>,
}

/// A value and how many documents have it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ValueCount {
    /// The value as JSON.
    pub value: serde_json::Value,
    /// Documents with it.
    pub count: u64,
}

/// Where a filter reads a document's fields: a [`Metadata`], or a view that adds fields to
/// one without copying it (a search adds the document's collection name, which a rename
/// changes without touching the document).
pub trait Fields {
    /// The value of a field, if the document has it.
    fn field(&self, name: &str) -> Option<&Value>;
}

impl Fields for Metadata {
    fn field(&self, name: &str) -> Option<&Value> {
        self.0.get(name)
    }
}

/// The built-in fields every document has, beside `collection` (see [`Metadata::of_document`]).
pub const DOCUMENT_FIELDS: [&str; 3] = ["path", "title", "indexed"];

impl Metadata {
    /// A document's fields as filters and discovery read them: its stored fields (the
    /// storage form, [`Metadata::encode`]) over the built-in `path`, `title` and `indexed`
    /// (the instant it was last indexed, Unix milliseconds) — stored fields win where names
    /// meet. The one place a document's fields are put together, whether they are read from
    /// the store or from a node's keyword index.
    pub fn of_document(path: &str, title: &str, indexed_at: i64, stored: &str) -> Metadata {
        let mut fields = BTreeMap::new();
        fields.insert("path".to_owned(), Value::String(path.to_owned()));
        fields.insert("title".to_owned(), Value::String(title.to_owned()));
        fields.insert(
            "indexed".to_owned(),
            Value::Date(Date {
                millis: indexed_at,
                has_time: true,
            }),
        );
        let mut fields = Metadata(fields);
        if stored.len() > 2 {
            fields.merge(Metadata::decode(stored));
        }
        fields
    }

    /// Fields given by a user (an upload form, `create_knowledge`): a JSON object of fields,
    /// checked against the limits (see the crate docs). Nulls are left out; strings that are
    /// dates become [`Value::Date`].
    pub fn from_json(json: &serde_json::Value) -> Result<Metadata> {
        let serde_json::Value::Object(map) = json else {
            return Err(Error::invalid("metadata must be a JSON object of fields"));
        };
        if map.len() > MAX_FIELDS {
            return Err(Error::invalid(format!(
                "metadata has {} fields; at most {MAX_FIELDS} are allowed",
                map.len()
            )));
        }
        let mut fields = BTreeMap::new();
        for (name, value) in map {
            if !value::valid_name(name) {
                return Err(Error::invalid(format!(
                    "field {name:?}: a field name is 1 to {MAX_NAME_CHARS} letters, digits, \
                     `_`, `-` or `.`, not starting or ending with a dot"
                )));
            }
            if let Some(value) = value::from_user_json(name, value)? {
                fields.insert(name.clone(), value);
            }
        }
        Ok(Metadata(fields))
    }

    /// The fields as a JSON object: dates in their canonical text, numbers as JSON numbers.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::Value::Object(
            self.0
                .iter()
                .map(|(name, value)| (name.clone(), value.to_json()))
                .collect(),
        )
    }

    /// The storage form: compact JSON text of [`Metadata::to_json`].
    pub fn encode(&self) -> String {
        self.to_json().to_string()
    }

    /// Reads the storage form back. Text that is not a JSON object gives no fields; it never
    /// fails.
    pub fn decode(stored: &str) -> Metadata {
        match serde_json::from_str::<serde_json::Value>(stored) {
            Ok(serde_json::Value::Object(map)) => Metadata(
                map.iter()
                    .filter_map(|(name, value)| {
                        value::from_json_lenient(value).map(|v| (name.clone(), v))
                    })
                    .collect(),
            ),
            _ => Metadata::default(),
        }
    }

    /// Adds `other`'s fields; they replace fields of the same name.
    pub fn merge(&mut self, other: Metadata) {
        self.0.extend(other.0);
    }

    /// Whether there are no fields.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The value of a field.
    pub fn get(&self, field: &str) -> Option<&Value> {
        self.0.get(field)
    }
}

#[cfg(test)]
mod tests;
