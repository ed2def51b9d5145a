//! Typing: dates from text, values from JSON and back.

use std::fmt;

use quarry_core::{Error, Result};

use crate::limits::{MAX_LIST_ITEMS, MAX_NAME_CHARS, MAX_STRING_CHARS};

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

const MILLIS_PER_DAY: i64 = 86_400_000;

impl Date {
    /// Reads a date (`YYYY-MM-DD`, exactly) or an instant (an RFC 3339 timestamp with `Z` or
    /// an offset, converted to UTC); anything else is `None`.
    pub fn parse(text: &str) -> Option<Date> {
        if text.len() == 10 {
            return parse_ymd(text).and_then(Date::from_civil);
        }
        if !rfc3339_shape(text) {
            return None;
        }
        let ts = text.parse::<jiff::Timestamp>().ok()?;
        Some(Date {
            millis: ts.as_millisecond(),
            has_time: true,
        })
    }

    /// A date (no time of day) from its parts.
    pub fn from_ymd(year: i16, month: i8, day: i8) -> Option<Date> {
        Date::from_civil(jiff::civil::Date::new(year, month, day).ok()?)
    }

    /// A calendar date as a date (its midnight, UTC).
    fn from_civil(date: jiff::civil::Date) -> Option<Date> {
        let ts = jiff::tz::Offset::UTC
            .to_timestamp(date.at(0, 0, 0, 0))
            .ok()?;
        Some(Date {
            millis: ts.as_millisecond(),
            has_time: false,
        })
    }

    /// The UTC day it falls on (days since the Unix epoch).
    pub fn day(&self) -> i64 {
        self.millis.div_euclid(MILLIS_PER_DAY)
    }
}

/// `YYYY-MM-DD`, digits exactly where they belong, a valid calendar date.
fn parse_ymd(text: &str) -> Option<jiff::civil::Date> {
    let b = text.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let digits = |range: std::ops::Range<usize>| -> Option<i32> {
        let mut n = 0i32;
        for &c in b.get(range)? {
            if !c.is_ascii_digit() {
                return None;
            }
            n = n * 10 + i32::from(c - b'0');
        }
        Some(n)
    };
    let year = i16::try_from(digits(0..4)?).ok()?;
    let month = i8::try_from(digits(5..7)?).ok()?;
    let day = i8::try_from(digits(8..10)?).ok()?;
    jiff::civil::Date::new(year, month, day).ok()
}

/// `YYYY-MM-DD(T|t| )HH:MM:SS(.f+)?(Z|z|±HH:MM)`: the RFC 3339 shape, checked before jiff
/// (whose parser takes more ISO 8601 forms than RFC 3339 does).
fn rfc3339_shape(text: &str) -> bool {
    let b = text.as_bytes();
    if b.len() < 20 || parse_ymd(text.get(..10).unwrap_or("")).is_none() {
        return false;
    }
    let digit = |i: usize| b.get(i).is_some_and(u8::is_ascii_digit);
    let shape_ok = matches!(b[10], b'T' | b't' | b' ')
        && digit(11)
        && digit(12)
        && b[13] == b':'
        && digit(14)
        && digit(15)
        && b[16] == b':'
        && digit(17)
        && digit(18);
    if !shape_ok {
        return false;
    }
    let mut i = 19;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while digit(i) {
            i += 1;
        }
        if i == start {
            return false;
        }
    }
    match &b[i..] {
        [b'Z' | b'z'] => true,
        [b'+' | b'-', h1, h2, b':', m1, m2] => [h1, h2, m1, m2].iter().all(|c| c.is_ascii_digit()),
        _ => false,
    }
}

impl fmt::Display for Date {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Ok(ts) = jiff::Timestamp::from_millisecond(self.millis) else {
            // Out of the representable range (only a hand-built Date can be): the raw number.
            return write!(f, "{}", self.millis);
        };
        let dt = jiff::tz::Offset::UTC.to_datetime(ts);
        write!(f, "{:04}-{:02}-{:02}", dt.year(), dt.month(), dt.day())?;
        if self.has_time {
            write!(f, "T{:02}:{:02}:{:02}", dt.hour(), dt.minute(), dt.second())?;
            if dt.millisecond() != 0 {
                write!(f, ".{:03}", dt.millisecond())?;
            }
            write!(f, "Z")?;
        }
        Ok(())
    }
}

impl Value {
    /// The value as JSON: a date as its canonical text, an integral number within ±2^53 as
    /// a JSON integer.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Value::String(s) => serde_json::Value::String(s.clone()),
            Value::Number(n) => number_json(*n),
            Value::Bool(b) => serde_json::Value::Bool(*b),
            Value::Date(d) => serde_json::Value::String(d.to_string()),
            Value::List(items) => {
                serde_json::Value::Array(items.iter().map(Value::to_json).collect())
            }
        }
    }

    /// Its type's name: `string`, `number`, `bool`, `date` or `list`.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::String(_) => "string",
            Value::Number(_) => "number",
            Value::Bool(_) => "bool",
            Value::Date(_) => "date",
            Value::List(_) => "list",
        }
    }

    /// A string value typed by the date rule: a date or an instant when it reads as one,
    /// text otherwise.
    pub fn from_text(text: &str) -> Value {
        match Date::parse(text) {
            Some(date) => Value::Date(date),
            None => Value::String(text.to_owned()),
        }
    }

    /// The value as text (a date in its canonical form; a list's items joined by `, `).
    pub(crate) fn text(&self) -> String {
        match self {
            Value::String(s) => s.clone(),
            Value::List(items) => items.iter().map(Value::text).collect::<Vec<_>>().join(", "),
            other => match other.to_json() {
                serde_json::Value::String(s) => s,
                json => json.to_string(),
            },
        }
    }
}

const TWO_POW_53: f64 = 9_007_199_254_740_992.0;

pub(crate) fn number_json(n: f64) -> serde_json::Value {
    if n.fract() == 0.0 && n.abs() <= TWO_POW_53 {
        // Exact: integral and within ±2^53.
        #[allow(clippy::cast_possible_truncation)]
        return serde_json::Value::from(n as i64);
    }
    serde_json::Number::from_f64(n).map_or(serde_json::Value::Null, serde_json::Value::Number)
}

/// A field name given by a user: 1–64 letters, digits, `_ - .`, no dot at either end.
pub(crate) fn valid_name(name: &str) -> bool {
    let count = name.chars().count();
    (1..=MAX_NAME_CHARS).contains(&count)
        && !name.starts_with('.')
        && !name.ends_with('.')
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// A JSON scalar as a value (`None` for null, arrays and objects, and non-finite numbers).
pub(crate) fn scalar_from_json(json: &serde_json::Value) -> Option<Value> {
    match json {
        serde_json::Value::String(s) => Some(Value::from_text(s)),
        serde_json::Value::Number(n) => n.as_f64().filter(|f| f.is_finite()).map(Value::Number),
        serde_json::Value::Bool(b) => Some(Value::Bool(*b)),
        _ => None,
    }
}

const VALUE_HINT: &str = "a value must be a string, number, bool, date or list of those";

/// One field given by a user, checked.
pub(crate) fn from_user_json(name: &str, json: &serde_json::Value) -> Result<Option<Value>> {
    let check_len = |s: &str| {
        let n = s.chars().count();
        if n > MAX_STRING_CHARS {
            Err(Error::invalid(format!(
                "field {name:?}: a string value is at most {MAX_STRING_CHARS} characters (this one has {n})"
            )))
        } else {
            Ok(())
        }
    };
    match json {
        serde_json::Value::Null => Ok(None),
        serde_json::Value::Object(_) => {
            Err(Error::invalid(format!("field {name:?}: {VALUE_HINT}")))
        }
        serde_json::Value::Array(items) => {
            if items.len() > MAX_LIST_ITEMS {
                return Err(Error::invalid(format!(
                    "field {name:?}: a list holds at most {MAX_LIST_ITEMS} items (this one has {})",
                    items.len()
                )));
            }
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                if let serde_json::Value::String(s) = item {
                    check_len(s)?;
                }
                out.extend(scalar_from_json(item));
            }
            Ok(Some(Value::List(out)))
        }
        scalar => {
            if let serde_json::Value::String(s) = scalar {
                check_len(s)?;
            }
            scalar_from_json(scalar)
                .map(Some)
                .ok_or_else(|| Error::invalid(format!("field {name:?}: {VALUE_HINT}")))
        }
    }
}

/// A stored field, read back without checks.
pub(crate) fn from_json_lenient(json: &serde_json::Value) -> Option<Value> {
    match json {
        serde_json::Value::Array(items) => Some(Value::List(
            items.iter().filter_map(scalar_from_json).collect(),
        )),
        other => scalar_from_json(other),
    }
}
