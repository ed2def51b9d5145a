//! Per-field summaries for discovery.

use std::collections::{BTreeMap, BTreeSet};

use crate::fields::Metadata;
use crate::value::Value;

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

#[derive(Default)]
struct Tally {
    documents: u64,
    types: BTreeMap<&'static str, u64>,
    /// By the value's text (for ordering ties): its JSON and the documents having it.
    values: BTreeMap<(String, &'static str), (serde_json::Value, u64)>,
}

/// For every field across `docs`: its types (most frequent first), how many documents have
/// it, and its `top` most frequent values (list items counted one by one, each at most once a
/// document; ties broken by the value's text ascending). Sorted by documents (most first),
/// then field name.
pub fn summarize<'a>(
    docs: impl IntoIterator<Item = &'a Metadata>,
    top: usize,
) -> Vec<FieldSummary> {
    let mut tallies: BTreeMap<&'a str, Tally> = BTreeMap::new();
    for doc in docs {
        for (name, value) in &doc.0 {
            let tally = tallies.entry(name.as_str()).or_default();
            tally.documents += 1;
            *tally.types.entry(value.type_name()).or_default() += 1;
            let items: &[Value] = match value {
                Value::List(items) => items,
                scalar => std::slice::from_ref(scalar),
            };
            let mut seen = BTreeSet::new();
            for item in items {
                let key = (item.text(), item.type_name());
                if seen.insert(key.clone()) {
                    let entry = tally
                        .values
                        .entry(key)
                        .or_insert_with(|| (item.to_json(), 0));
                    entry.1 += 1;
                }
            }
        }
    }
    let mut out: Vec<FieldSummary> = tallies
        .into_iter()
        .map(|(field, tally)| {
            let mut types: Vec<(&'static str, u64)> = tally.types.into_iter().collect();
            types.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
            // The map is in text order; a stable sort by count keeps it for ties.
            let mut values: Vec<(serde_json::Value, u64)> = tally.values.into_values().collect();
            values.sort_by_key(|v| std::cmp::Reverse(v.1));
            values.truncate(top);
            FieldSummary {
                field: field.to_owned(),
                types: types.into_iter().map(|(t, _)| t).collect(),
                documents: tally.documents,
                top_values: values
                    .into_iter()
                    .map(|(value, count)| ValueCount { value, count })
                    .collect(),
            }
        })
        .collect();
    out.sort_by(|a, b| {
        b.documents
            .cmp(&a.documents)
            .then_with(|| a.field.cmp(&b.field))
    });
    out
}
