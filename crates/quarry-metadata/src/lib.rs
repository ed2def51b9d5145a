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

mod fields;
mod filter;
mod front_matter;
mod limits;
mod summary;
mod value;

pub use fields::{DOCUMENT_FIELDS, Fields, Metadata};
pub use filter::{Condition, Filter, Operator};
pub use front_matter::{FrontMatter, front_matter};
pub use limits::{
    MAX_CONDITIONS, MAX_DEPTH, MAX_FIELDS, MAX_LIST_ITEMS, MAX_NAME_CHARS, MAX_STRING_CHARS,
};
pub use summary::{FieldSummary, ValueCount, summarize};
pub use value::{Date, Value};

#[cfg(test)]
mod tests;
