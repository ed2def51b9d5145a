//! A document's fields: checked from a user's JSON, put together from the store, and the
//! view a filter reads them through.

use std::collections::BTreeMap;

use quarry_core::{Error, Result};

use crate::limits::{MAX_FIELDS, MAX_NAME_CHARS};
use crate::value::{self, Date, Value};

/// A document's fields by name (sorted).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Metadata(pub BTreeMap<String, Value>);

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
