use serde_json::json;

use super::*;

fn md(json: serde_json::Value) -> Metadata {
    match Metadata::from_json(&json) {
        Ok(m) => m,
        Err(e) => panic!("metadata {json}: {e}"),
    }
}

fn filter(json: serde_json::Value) -> Filter {
    match Filter::parse(&json) {
        Ok(f) => f,
        Err(e) => panic!("filter {json}: {e}"),
    }
}

fn parse_err(json: serde_json::Value) -> String {
    match Filter::parse(&json) {
        Ok(f) => panic!("filter {json} parsed as {f:?}"),
        Err(e) => e.to_string(),
    }
}

fn cond(field: &str, op: &str, value: serde_json::Value) -> Filter {
    filter(json!({"field": field, "operator": op, "value": value}))
}

fn date(text: &str) -> Date {
    match Date::parse(text) {
        Some(d) => d,
        None => panic!("not a date: {text}"),
    }
}

fn fm(text: &str) -> FrontMatter {
    match front_matter(text) {
        Some(f) => f,
        None => panic!("no front matter in {text:?}"),
    }
}

fn dify(json: serde_json::Value) -> Filter {
    match Filter::from_dify(&json) {
        Ok(Some(f)) => f,
        other => panic!("dify {json}: {other:?}"),
    }
}

fn dify_err(json: serde_json::Value) -> String {
    match Filter::from_dify(&json) {
        Err(e) => e.to_string(),
        Ok(f) => panic!("dify {json} gave {f:?}"),
    }
}

// ---- Values and dates ----

#[test]
fn dates_parse_and_print_canonically() {
    let d = date("2026-06-01");
    assert!(!d.has_time);
    assert_eq!(d.to_string(), "2026-06-01");
    assert_eq!(d.millis, 1_780_272_000_000);
    let t = date("2026-06-01T12:30:00Z");
    assert!(t.has_time);
    assert_eq!(t.to_string(), "2026-06-01T12:30:00Z");
    assert_eq!(date("2026-06-01T14:30:00+02:00"), t);
    assert_eq!(
        date("2026-06-01T12:30:00.250Z").to_string(),
        "2026-06-01T12:30:00.250Z"
    );
    assert_eq!(date("2026-06-01t12:30:00z"), t);
    assert_eq!(date("2026-06-01 12:30:00Z"), t);
    assert_eq!(
        date("2026-06-01T12:30:00.123456789-00:00").to_string(),
        "2026-06-01T12:30:00.123Z"
    );
    assert_eq!(
        date("1969-12-31T23:59:59Z").to_string(),
        "1969-12-31T23:59:59Z"
    );
    assert_eq!(date("1969-12-31").to_string(), "1969-12-31");
}

#[test]
fn strings_that_are_not_dates() {
    for text in [
        "2026-6-01",
        "2026-02-30",
        "2026-13-01",
        "20260601",
        "2026-06-01T12:30:00",
        "2026-06-01T12:30Z",
        "2026-06-01T12:30:00+0200",
        "2026-06-01 and more",
        " 2026-06-01",
        "hello",
        "",
        "２０２６-06-01",
    ] {
        assert_eq!(Date::parse(text), None, "{text}");
        assert_eq!(Value::from_text(text), Value::String(text.into()));
    }
}

#[test]
fn from_json_types_values() {
    let m = md(json!({
        "title": "Hi",
        "count": 3,
        "ratio": 0.5,
        "draft": false,
        "published": "2026-06-01",
        "at": "2026-06-01T10:00:00+01:00",
        "tags": ["a", 2, true, null, ["nested"], {"x": 1}],
        "gone": null,
    }));
    assert_eq!(m.get("title"), Some(&Value::String("Hi".into())));
    assert_eq!(m.get("count"), Some(&Value::Number(3.0)));
    assert_eq!(m.get("ratio"), Some(&Value::Number(0.5)));
    assert_eq!(m.get("draft"), Some(&Value::Bool(false)));
    assert_eq!(m.get("published"), Some(&Value::Date(date("2026-06-01"))));
    assert_eq!(
        m.get("at"),
        Some(&Value::Date(date("2026-06-01T09:00:00Z")))
    );
    assert_eq!(
        m.get("tags"),
        Some(&Value::List(vec![
            Value::String("a".into()),
            Value::Number(2.0),
            Value::Bool(true)
        ]))
    );
    assert_eq!(m.get("gone"), None);
    assert_eq!(
        m.to_json(),
        json!({
            "title": "Hi", "count": 3, "ratio": 0.5, "draft": false, "published": "2026-06-01",
            "at": "2026-06-01T09:00:00Z", "tags": ["a", 2, true],
        })
    );
}

#[test]
fn from_json_refuses_what_is_not_fields() {
    for bad in [json!([1]), json!("x"), json!(null), json!(3)] {
        let e = Metadata::from_json(&bad).err().map(|e| e.to_string());
        assert_eq!(
            e.as_deref(),
            Some("metadata must be a JSON object of fields")
        );
    }
    let e = Metadata::from_json(&json!({"x": {"a": 1}}))
        .err()
        .map(|e| e.to_string());
    assert_eq!(
        e.as_deref(),
        Some("field \"x\": a value must be a string, number, bool, date or list of those")
    );
}

#[test]
fn from_json_limits() {
    let many: serde_json::Map<String, serde_json::Value> =
        (0..65).map(|i| (format!("f{i}"), json!(i))).collect();
    let e = Metadata::from_json(&serde_json::Value::Object(many))
        .err()
        .map(|e| e.to_string());
    assert!(
        e.as_deref().is_some_and(|e| e.contains("at most 64")),
        "{e:?}"
    );
    let ok: serde_json::Map<String, serde_json::Value> =
        (0..64).map(|i| (format!("f{i}"), json!(i))).collect();
    assert_eq!(md(serde_json::Value::Object(ok)).0.len(), 64);

    for name in ["", ".a", "a.", "a b", "a/b", &"n".repeat(65)] {
        let e = Metadata::from_json(&json!({ name: 1 }))
            .err()
            .map(|e| e.to_string());
        assert!(
            e.as_deref().is_some_and(|e| e.contains("field name")),
            "{name}: {e:?}"
        );
    }
    for name in ["a.b", "a-b_c", "Année", "x1", &"n".repeat(64)] {
        assert!(Metadata::from_json(&json!({ name: 1 })).is_ok(), "{name}");
    }
    let e = Metadata::from_json(&json!({"s": "x".repeat(1001)}))
        .err()
        .map(|e| e.to_string());
    assert!(
        e.as_deref()
            .is_some_and(|e| e.contains("\"s\"") && e.contains("1000")),
        "{e:?}"
    );
    assert!(Metadata::from_json(&json!({"s": "é".repeat(1000)})).is_ok());
    let e = Metadata::from_json(&json!({"l": ["x".repeat(1001)]}))
        .err()
        .map(|e| e.to_string());
    assert!(e.as_deref().is_some_and(|e| e.contains("1000")), "{e:?}");
    let e = Metadata::from_json(&json!({"l": vec![1; 101]}))
        .err()
        .map(|e| e.to_string());
    assert!(
        e.as_deref()
            .is_some_and(|e| e.contains("\"l\"") && e.contains("100 items")),
        "{e:?}"
    );
    assert!(Metadata::from_json(&json!({"l": vec![1; 100]})).is_ok());
}

#[test]
fn encode_decode_round_trip() {
    let m = md(json!({
        "title": "Hi \"there\"", "n": 3, "big": 1e300, "neg": -2.5, "ok": true,
        "d": "2026-06-01", "t": "2026-06-01T12:00:00.5Z", "tags": ["x", "2026-01-02"],
    }));
    let stored = m.encode();
    assert!(
        stored.contains("\"n\":3,") || stored.contains("\"n\":3}"),
        "{stored}"
    );
    assert!(!stored.contains(' ') || stored.contains("Hi"), "{stored}");
    assert_eq!(Metadata::decode(&stored), m);
    assert_eq!(Metadata::decode("not json"), Metadata::default());
    assert_eq!(Metadata::decode("[1,2]"), Metadata::default());
    assert_eq!(Metadata::decode(""), Metadata::default());
    assert!(Metadata::decode("{}").is_empty());
}

#[test]
fn numbers_in_json() {
    assert_eq!(Value::Number(3.0).to_json().to_string(), "3");
    assert_eq!(Value::Number(-0.0).to_json().to_string(), "0");
    assert_eq!(Value::Number(2.5).to_json().to_string(), "2.5");
    assert_eq!(
        Value::Number(9_007_199_254_740_992.0).to_json().to_string(),
        "9007199254740992"
    );
    assert_eq!(Value::Number(1e20).to_json().to_string(), "1e+20");
    assert_eq!(Value::Number(f64::NAN).to_json(), serde_json::Value::Null);
}

#[test]
fn merge_replaces_same_named_fields() {
    let mut a = md(json!({"x": 1, "y": 2}));
    a.merge(md(json!({"y": "two", "z": true})));
    assert_eq!(a, md(json!({"x": 1, "y": "two", "z": true})));
}

// ---- Front matter ----

#[test]
fn yaml_front_matter() {
    let text = "---\ntitle: Hello\ntags: [a, b, 3]\npublished: 2026-06-01\nupdated: 2026-06-02T10:00:00+02:00\nauthor:\n  name: Ann\n  links:\n    home: x\ndraft: true\nrating: 4.5\nempty:\nLast Modified: yesterday\n1: one\ntrue: yes\nnested: [[1], {a: 1}, ok]\n---\n# Body\n";
    let f = fm(text);
    assert_eq!(&text[f.end..], "# Body\n");
    let m = &f.fields;
    assert_eq!(m.get("title"), Some(&Value::String("Hello".into())));
    assert_eq!(
        m.get("tags"),
        Some(&Value::List(vec![
            Value::String("a".into()),
            Value::String("b".into()),
            Value::Number(3.0)
        ]))
    );
    assert_eq!(m.get("published"), Some(&Value::Date(date("2026-06-01"))));
    assert_eq!(
        m.get("updated"),
        Some(&Value::Date(date("2026-06-02T08:00:00Z")))
    );
    assert_eq!(m.get("author.name"), Some(&Value::String("Ann".into())));
    assert_eq!(m.get("author.links.home"), Some(&Value::String("x".into())));
    assert_eq!(m.get("draft"), Some(&Value::Bool(true)));
    assert_eq!(m.get("rating"), Some(&Value::Number(4.5)));
    assert_eq!(m.get("empty"), None);
    assert_eq!(
        m.get("Last Modified"),
        Some(&Value::String("yesterday".into()))
    );
    assert_eq!(m.get("1"), Some(&Value::String("one".into())));
    assert_eq!(m.get("true"), Some(&Value::String("yes".into())));
    assert_eq!(
        m.get("nested"),
        Some(&Value::List(vec![Value::String("ok".into())]))
    );
}

#[test]
fn yaml_front_matter_delimiters() {
    let f = fm("---   \na: 1\n...\nbody");
    assert_eq!(f.end, "---   \na: 1\n...\n".len());
    assert_eq!(f.fields.get("a"), Some(&Value::Number(1.0)));
    // Closed at the very end of the text.
    let text = "---\na: 1\n---";
    assert_eq!(fm(text).end, text.len());
    // Empty block.
    let f = fm("---\n---\nbody");
    assert_eq!(f.end, 8);
    assert!(f.fields.is_empty());
    // Comments only.
    assert!(fm("---\n# nothing\n---\n").fields.is_empty());
    // A closing line with trailing spaces.
    assert_eq!(fm("---\na: 1\n---  \nx").end, "---\na: 1\n---  \n".len());
}

#[test]
fn no_front_matter() {
    for text in [
        "",
        "# Title\n---\na: 1\n---\n",
        "---\na: 1\n",                                 // not closed
        "---\nSome prose here.\n\nMore prose.\n---\n", // a horizontal rule and prose
        "---\n- a\n- b\n---\n",                        // a list, not a mapping
        "---\na: [1, 2\n---\n",                        // invalid YAML
        "---\njust text\n---\n",
        "----\na: 1\n----\n",
        " ---\na: 1\n---\n",
        "---a\nb: 1\n---\n",
        "+++\ntitle = \n+++\n", // invalid TOML
        "+++\na = 1\n",         // not closed
        "+++\na = 1\n---\n",    // mismatched
    ] {
        assert_eq!(front_matter(text), None, "{text:?}");
    }
}

#[test]
fn toml_front_matter() {
    let text = "+++\ntitle = \"Hello\"\ncount = 3\nratio = 0.25\ndraft = false\ntags = [\"a\", 1, [2], { x = 1 }]\ndate = 2026-06-01\nat = 2026-06-01T12:00:00+02:00\nlocal = 2026-06-01T12:00:00\nfrac = 2026-06-01T12:00:00.123Z\ntime = 07:32:00\nwhen = \"2026-06-03\"\n[author]\nname = \"Ann\"\n[author.site]\nurl = \"x\"\n+++\nbody";
    let f = fm(text);
    assert_eq!(&text[f.end..], "body");
    let m = &f.fields;
    assert_eq!(m.get("title"), Some(&Value::String("Hello".into())));
    assert_eq!(m.get("count"), Some(&Value::Number(3.0)));
    assert_eq!(m.get("ratio"), Some(&Value::Number(0.25)));
    assert_eq!(m.get("draft"), Some(&Value::Bool(false)));
    assert_eq!(
        m.get("tags"),
        Some(&Value::List(vec![
            Value::String("a".into()),
            Value::Number(1.0)
        ]))
    );
    assert_eq!(m.get("date"), Some(&Value::Date(date("2026-06-01"))));
    assert_eq!(
        m.get("at"),
        Some(&Value::Date(date("2026-06-01T10:00:00Z")))
    );
    assert_eq!(
        m.get("local"),
        Some(&Value::Date(date("2026-06-01T12:00:00Z")))
    );
    assert_eq!(
        m.get("frac").map(|v| v.to_json()),
        Some(json!("2026-06-01T12:00:00.123Z"))
    );
    assert_eq!(m.get("time"), Some(&Value::String("07:32:00".into())));
    assert_eq!(m.get("when"), Some(&Value::Date(date("2026-06-03"))));
    assert_eq!(m.get("author.name"), Some(&Value::String("Ann".into())));
    assert_eq!(m.get("author.site.url"), Some(&Value::String("x".into())));
    assert!(fm("+++\n+++\n").fields.is_empty());
}

#[test]
fn front_matter_limits_drop_silently() {
    let long_name = "n".repeat(65);
    let mut text = format!(
        "---\n{long_name}: 1\nbig: {}\nlist: [{}]\n",
        "x".repeat(1001),
        vec!["1"; 101].join(", ")
    );
    for i in 0..70 {
        text.push_str(&format!("f{i:02}: {i}\n"));
    }
    text.push_str("---\n");
    let f = fm(&text);
    assert_eq!(f.fields.get(&long_name), None);
    assert_eq!(f.fields.get("big"), None);
    assert_eq!(f.fields.get("list"), None);
    assert_eq!(f.fields.0.len(), 64);
    assert!(f.fields.get("f00").is_some());
    assert!(f.fields.get("f63").is_some());
    assert!(f.fields.get("f64").is_none());
}

// ---- Filter parsing ----

#[test]
fn parses_the_forms() {
    let c = |field: &str, op, value: Option<Value>| Filter::condition(field, op, value);
    assert_eq!(
        cond("status", "eq", json!("published")),
        c(
            "status",
            Operator::Eq,
            Some(Value::String("published".into()))
        )
    );
    // qmd's `key` and `op`.
    assert_eq!(
        filter(json!({"key": "status", "op": "EQ", "value": "x"})),
        c("status", Operator::Eq, Some(Value::String("x".into())))
    );
    let f = filter(json!({"and": [
        {"field": "a", "operator": "gt", "value": 1},
        {"or": [{"field": "b", "operator": "exists"}, {"not": {"field": "c", "operator": "in", "value": [1, "x"]}}]}
    ]}));
    assert_eq!(
        f,
        Filter::And(vec![
            c("a", Operator::Gt, Some(Value::Number(1.0))),
            Filter::Or(vec![
                c("b", Operator::Exists, None),
                Filter::Not(Box::new(c(
                    "c",
                    Operator::In,
                    Some(Value::List(vec![
                        Value::Number(1.0),
                        Value::String("x".into())
                    ]))
                ))),
            ]),
        ])
    );
    assert_eq!(f.fields(), vec!["a", "b", "c"]);
    // A top-level array means `and`.
    assert_eq!(
        filter(
            json!([{"field": "a", "operator": "eq", "value": 1}, {"field": "a", "operator": "ne", "value": 2}])
        ),
        Filter::And(vec![
            c("a", Operator::Eq, Some(Value::Number(1.0))),
            c("a", Operator::Ne, Some(Value::Number(2.0)))
        ])
    );
    assert_eq!(
        filter(json!([{"field": "a", "operator": "eq", "value": 1}, {"field": "a", "operator": "ne", "value": 2}]))
            .fields(),
        vec!["a"]
    );
    // Dates in values.
    assert_eq!(
        cond("d", "gte", json!("2026-06-01")),
        c("d", Operator::Gte, Some(Value::Date(date("2026-06-01"))))
    );
    // starts_with keeps its text even when it reads as a date.
    assert_eq!(
        cond("d", "starts_with", json!("2026-06-01")),
        c(
            "d",
            Operator::StartsWith,
            Some(Value::String("2026-06-01".into()))
        )
    );
    assert_eq!(
        filter(json!({"field": "x", "operator": "exists", "value": false})),
        c("x", Operator::Exists, Some(Value::Bool(false)))
    );
    assert_eq!(
        filter(json!({"field": "x", "operator": "exists", "value": true})),
        c("x", Operator::Exists, None)
    );
}

#[test]
fn operator_spellings() {
    for (text, op) in [
        ("eq", Operator::Eq),
        ("=", Operator::Eq),
        ("==", Operator::Eq),
        ("Ne", Operator::Ne),
        ("!=", Operator::Ne),
        ("LT", Operator::Lt),
        ("<", Operator::Lt),
        ("lte", Operator::Lte),
        ("<=", Operator::Lte),
        ("gt", Operator::Gt),
        (">", Operator::Gt),
        ("gte", Operator::Gte),
        (">=", Operator::Gte),
        ("In", Operator::In),
        ("CONTAINS", Operator::Contains),
        ("exists", Operator::Exists),
        ("Starts_With", Operator::StartsWith),
        ("ends_with", Operator::EndsWith),
    ] {
        assert_eq!(Operator::parse(text), Some(op), "{text}");
        assert_eq!(Operator::parse(op.name()), Some(op));
    }
    assert_eq!(Operator::parse("eqq"), None);
}

#[test]
fn parse_errors_say_where_and_how() {
    let cases = [
        (
            json!({"and": [{"field": "a", "operator": "eq", "value": 1}, {"field": "b", "operator": "eqq", "value": 1}]}),
            "filter.and[1]: unknown operator \"eqq\"; operators: eq, ne, lt, lte, gt, gte, in, contains, exists, starts_with, ends_with",
        ),
        (
            json!({"or": [{"field": "a", "operator": "gt"}]}),
            "filter.or[0]: \"value\" is missing (operator \"gt\" compares with a number or a date)",
        ),
        (
            json!({"fields": "a"}),
            "filter: unknown key \"fields\"; a filter node is a condition {\"field\", \"operator\", \"value\"} or {\"and\": [...]}, {\"or\": [...]}, {\"not\": {...}}",
        ),
    ];
    for (json, want) in cases {
        assert_eq!(parse_err(json), want);
    }
    let contains = [
        (
            json!({"field": "a", "key": "b", "operator": "eq", "value": 1}),
            "filter: give \"field\" or \"key\", not both",
        ),
        (
            json!({"operator": "eq", "value": 1}),
            "filter: \"field\" is missing",
        ),
        (
            json!({"field": "a", "value": 1}),
            "filter: \"operator\" is missing; operators: eq,",
        ),
        (
            json!({"field": "a", "operator": "eq", "op": "eq", "value": 1}),
            "not both",
        ),
        (
            json!({"field": "", "operator": "eq", "value": 1}),
            "filter: \"field\" must be a field name",
        ),
        (
            json!({"key": "x".repeat(65), "operator": "eq", "value": 1}),
            "filter: \"key\" must be a field name of 1 to 64",
        ),
        (
            json!({"field": 3, "operator": "eq", "value": 1}),
            "not the number 3",
        ),
        (
            json!({"field": "a", "operator": 1, "value": 1}),
            "\"operator\" must be a string",
        ),
        (
            json!({"field": "a", "operator": "gt", "value": "soon"}),
            "filter: \"value\" must be a number or a date (operator \"gt\"), not the string \"soon\"",
        ),
        (
            json!({"field": "a", "operator": ">=", "value": true}),
            "(operator \"gte\")",
        ),
        (
            json!({"field": "a", "operator": "in", "value": []}),
            "non-empty list",
        ),
        (
            json!({"field": "a", "operator": "in", "value": "x"}),
            "non-empty list",
        ),
        (
            json!({"field": "a", "operator": "in", "value": [1, [2]]}),
            "filter: \"value\"[1] must be",
        ),
        (
            json!({"field": "a", "operator": "exists", "value": "yes"}),
            "true, false or no value",
        ),
        (
            json!({"field": "a", "operator": "starts_with", "value": 1}),
            "must be a string (operator \"starts_with\")",
        ),
        (
            json!({"field": "a", "operator": "ends_with"}),
            "\"value\" is missing (operator \"ends_with\" compares with a string)",
        ),
        (
            json!({"field": "a", "operator": "eq", "value": [1]}),
            "not a list",
        ),
        (
            json!({"field": "a", "operator": "eq", "value": {"x": 1}}),
            "not an object",
        ),
        (
            json!({"field": "a", "operator": "eq", "value": null}),
            "\"value\" is missing",
        ),
        (json!({"and": []}), "filter.and: expected a non-empty list"),
        (
            json!({"or": {"field": "a"}}),
            "filter.or: expected a non-empty list of filter nodes, not an object",
        ),
        (json!([]), "filter: expected a non-empty list"),
        (
            json!({"and": [{"field": "a", "operator": "eq", "value": 1}], "or": []}),
            "filter: a node mixes forms",
        ),
        (
            json!({"not": {"field": "a", "operator": "eq", "value": 1}, "field": "b"}),
            "a node mixes forms",
        ),
        (
            json!({"not": {"nope": 1}}),
            "filter.not: unknown key \"nope\"",
        ),
        (
            json!({"not": 3}),
            "filter.not: expected a filter node, not the number 3",
        ),
        (json!("status = x"), "filter: expected a filter node"),
        (json!({}), "filter: \"field\" is missing"),
        (
            json!({"and": [{"or": [{"not": {"key": "x", "op": "foo"}}]}]}),
            "filter.and[0].or[0].not: unknown operator \"foo\"",
        ),
    ];
    for (json, want) in contains {
        let e = parse_err(json.clone());
        assert!(e.contains(want), "{json}: {e}");
    }
}

#[test]
fn parse_str_reports_json_errors() {
    let e = Filter::parse_str("{\"field\": ")
        .err()
        .map(|e| e.to_string());
    assert!(
        e.as_deref()
            .is_some_and(|e| e.starts_with("filter is not valid JSON: ")),
        "{e:?}"
    );
    assert!(Filter::parse_str(r#"{"field":"a","operator":"eq","value":1}"#).is_ok());
}

#[test]
fn depth_and_size_limits() {
    let mut node = json!({"field": "a", "operator": "exists"});
    for _ in 0..15 {
        node = json!({"not": node});
    }
    assert!(Filter::parse(&node).is_ok());
    let deeper = json!({"not": node});
    let e = parse_err(deeper);
    assert!(e.contains("deeper than 16"), "{e}");
    let conditions: Vec<_> = (0..100)
        .map(|_| json!({"field": "a", "operator": "exists"}))
        .collect();
    assert!(Filter::parse(&json!(conditions)).is_ok());
    let conditions: Vec<_> = (0..101)
        .map(|_| json!({"field": "a", "operator": "exists"}))
        .collect();
    let e = parse_err(json!(conditions));
    assert_eq!(e, "filter[100]: the filter has more than 100 conditions");
}

// ---- Matching ----

fn doc() -> Metadata {
    md(json!({
        "status": "Published",
        "count": 3,
        "draft": false,
        "published": "2026-06-01",
        "updated": "2026-06-01T15:30:00Z",
        "tags": ["rust", "search", 7, "2026-01-15"],
        "title": "Quarry: A Search Engine",
    }))
}

fn yes(f: &Filter) {
    assert!(f.matches(&doc()), "{f:?} should match");
}

fn no(f: &Filter) {
    assert!(!f.matches(&doc()), "{f:?} should not match");
}

#[test]
fn eq_and_ne() {
    yes(&cond("status", "eq", json!("Published")));
    no(&cond("status", "eq", json!("published"))); // case-sensitive
    yes(&cond("count", "eq", json!(3)));
    yes(&cond("count", "=", json!(3.0)));
    no(&cond("count", "eq", json!("3"))); // string vs number
    yes(&cond("draft", "eq", json!(false)));
    no(&cond("draft", "eq", json!("false")));
    yes(&cond("status", "ne", json!("Draft")));
    no(&cond("status", "ne", json!("Published")));
    yes(&cond("count", "ne", json!("3"))); // mismatched type: not equal
    // A missing field.
    no(&cond("missing", "eq", json!("x")));
    yes(&cond("missing", "ne", json!("x")));
}

#[test]
fn ordering_operators() {
    yes(&cond("count", "gt", json!(2)));
    no(&cond("count", "gt", json!(3)));
    yes(&cond("count", "gte", json!(3)));
    yes(&cond("count", "lt", json!(3.5)));
    yes(&cond("count", "lte", json!(3)));
    no(&cond("count", "lt", json!(3)));
    no(&cond("status", "gt", json!(1))); // string vs number
    no(&cond("count", "gt", json!("2020-01-01"))); // number vs date
    no(&cond("missing", "gt", json!(1)));
    no(&cond("missing", "lt", json!(1)));
    no(&cond("draft", "lt", json!(1)));
}

#[test]
fn dates() {
    // A date matches an instant on its UTC day.
    yes(&cond("updated", "eq", json!("2026-06-01")));
    no(&cond("updated", "eq", json!("2026-06-02")));
    yes(&cond("updated", "eq", json!("2026-06-01T17:30:00+02:00")));
    no(&cond("updated", "eq", json!("2026-06-01T15:30:01Z")));
    yes(&cond("updated", "ne", json!("2026-06-02")));
    no(&cond("updated", "ne", json!("2026-06-01")));
    yes(&cond("published", "eq", json!("2026-06-01")));
    yes(&cond("updated", "in", json!(["2026-05-01", "2026-06-01"])));
    // Ranges compare on milliseconds: after 2026-06-01 (its midnight).
    yes(&cond("updated", "gt", json!("2026-06-01")));
    no(&cond("published", "gt", json!("2026-06-01")));
    yes(&cond("published", "gte", json!("2026-06-01")));
    yes(&cond("published", "lt", json!("2026-06-01T00:00:01Z")));
    no(&cond("updated", "lt", json!("2026-06-01T15:30:00Z")));
    yes(&cond("updated", "lte", json!("2026-06-01T15:30:00Z")));
    let range = filter(json!({"and": [
        {"field": "updated", "operator": ">=", "value": "2026-06-01"},
        {"field": "updated", "operator": "<", "value": "2026-06-02"},
    ]}));
    yes(&range);
    no(&cond("status", "gt", json!("2026-06-01"))); // string vs date
    yes(&cond("published", "starts_with", json!("2026-06")));
    yes(&cond("updated", "ends_with", json!("30:00Z")));
    no(&cond("published", "eq", json!(20260601)));
}

#[test]
fn in_contains_starts_ends() {
    yes(&cond("status", "in", json!(["Draft", "Published"])));
    no(&cond("status", "in", json!(["draft", "published"])));
    yes(&cond("count", "in", json!([1, 3])));
    no(&cond("count", "in", json!(["3"])));
    no(&cond("missing", "in", json!(["x"])));
    // contains on text: case-insensitive substring.
    yes(&cond("title", "contains", json!("search engine")));
    no(&cond("title", "contains", json!("database")));
    yes(&cond("count", "contains", json!(3)));
    no(&cond("count", "contains", json!(4)));
    no(&cond("missing", "contains", json!("x")));
    // starts_with / ends_with: case-sensitive.
    yes(&cond("title", "starts_with", json!("Quarry")));
    no(&cond("title", "starts_with", json!("quarry")));
    yes(&cond("title", "ends_with", json!("Engine")));
    no(&cond("title", "ends_with", json!("Quarry")));
    no(&cond("count", "starts_with", json!("3")));
    no(&cond("missing", "starts_with", json!("x")));
}

#[test]
fn exists() {
    yes(&filter(json!({"field": "status", "operator": "exists"})));
    no(&filter(json!({"field": "missing", "operator": "exists"})));
    yes(&filter(
        json!({"field": "missing", "operator": "exists", "value": false}),
    ));
    no(&filter(
        json!({"field": "status", "operator": "exists", "value": false}),
    ));
    yes(&filter(
        json!({"field": "status", "operator": "exists", "value": true}),
    ));
    yes(&filter(
        json!({"not": {"field": "missing", "operator": "exists"}}),
    ));
}

#[test]
fn list_fields_match_on_any_item() {
    yes(&cond("tags", "eq", json!("rust")));
    yes(&cond("tags", "contains", json!("rust")));
    yes(&cond("tags", "contains", json!("RUS")));
    yes(&cond("tags", "eq", json!(7)));
    no(&cond("tags", "eq", json!("go")));
    yes(&cond("tags", "in", json!(["go", "search"])));
    no(&cond("tags", "in", json!(["go"])));
    yes(&cond("tags", "starts_with", json!("sea")));
    yes(&cond("tags", "ends_with", json!("st")));
    yes(&cond("tags", "gt", json!(5)));
    no(&cond("tags", "gt", json!(7)));
    yes(&cond("tags", "lt", json!("2026-02-01")));
    yes(&cond("tags", "eq", json!("2026-01-15")));
    // ne: no item equals.
    yes(&cond("tags", "ne", json!("go")));
    no(&cond("tags", "ne", json!("rust")));
    no(&cond("tags", "ne", json!(7)));
    let empty = md(json!({"tags": []}));
    assert!(!cond("tags", "eq", json!("x")).matches(&empty));
    assert!(cond("tags", "ne", json!("x")).matches(&empty));
    assert!(filter(json!({"field": "tags", "operator": "exists"})).matches(&empty));
}

#[test]
fn and_or_not() {
    let a = json!({"field": "count", "operator": "eq", "value": 3});
    let b = json!({"field": "status", "operator": "eq", "value": "Draft"});
    yes(&filter(json!({"or": [a, b]})));
    no(&filter(json!({"and": [a, b]})));
    yes(&filter(json!({"and": [a, {"not": b}]})));
    no(&filter(json!({"not": a})));
    yes(&filter(json!([a])));
    assert!(!Filter::Or(vec![]).matches(&doc()));
    assert!(Filter::And(vec![]).matches(&doc()));
}

// ---- Dify ----

#[test]
fn dify_translation() {
    let c = |field: &str, op, value: Option<Value>| Filter::condition(field, op, value);
    let s = |t: &str| Some(Value::String(t.into()));
    let f = dify(json!({"logical_operator": "or", "conditions": [
        {"name": "status", "comparison_operator": "is", "value": "published"},
        {"name": "status", "comparison_operator": "is not", "value": "draft"},
        {"name": "title", "comparison_operator": "contains", "value": "rust"},
        {"name": "title", "comparison_operator": "not contains", "value": "go"},
        {"name": "title", "comparison_operator": "start with", "value": "Q"},
        {"name": "title", "comparison_operator": "end with", "value": "e"},
        {"name": "owner", "comparison_operator": "empty"},
        {"name": "owner", "comparison_operator": "not empty", "value": null},
        {"name": "count", "comparison_operator": "=", "value": "3"},
        {"name": "count", "comparison_operator": "≠", "value": 4},
        {"name": "count", "comparison_operator": ">", "value": "3"},
        {"name": "count", "comparison_operator": "<", "value": 10},
        {"name": "count", "comparison_operator": "≥", "value": "1.5"},
        {"name": "count", "comparison_operator": "<=", "value": "2"},
        {"name": "date", "comparison_operator": "before", "value": "2026-06-01"},
        {"name": "date", "comparison_operator": "after", "value": 1_780_272_000},
        {"name": "tag", "comparison_operator": "in", "value": "a, b,,c"},
        {"name": "tag", "comparison_operator": "not in", "value": ["x", "y"]},
    ]}));
    let not = |f: Filter| Filter::Not(Box::new(f));
    assert_eq!(
        f,
        Filter::Or(vec![
            c("status", Operator::Eq, s("published")),
            c("status", Operator::Ne, s("draft")),
            c("title", Operator::Contains, s("rust")),
            not(c("title", Operator::Contains, s("go"))),
            c("title", Operator::StartsWith, s("Q")),
            c("title", Operator::EndsWith, s("e")),
            not(c("owner", Operator::Exists, None)),
            c("owner", Operator::Exists, None),
            c("count", Operator::Eq, Some(Value::Number(3.0))),
            c("count", Operator::Ne, Some(Value::Number(4.0))),
            c("count", Operator::Gt, Some(Value::Number(3.0))),
            c("count", Operator::Lt, Some(Value::Number(10.0))),
            c("count", Operator::Gte, Some(Value::Number(1.5))),
            c("count", Operator::Lte, Some(Value::Number(2.0))),
            c("date", Operator::Lt, Some(Value::Date(date("2026-06-01")))),
            c(
                "date",
                Operator::Gt,
                Some(Value::Date(date("2026-06-01T00:00:00Z")))
            ),
            c(
                "tag",
                Operator::In,
                Some(Value::List(vec![
                    Value::String("a".into()),
                    Value::String("b".into()),
                    Value::String("c".into())
                ]))
            ),
            not(c(
                "tag",
                Operator::In,
                Some(Value::List(vec![
                    Value::String("x".into()),
                    Value::String("y".into())
                ]))
            )),
        ])
    );
    // Default and; "is" keeps numeric text as text.
    assert_eq!(
        dify(json!({"conditions": [{"name": "v", "comparison_operator": "is", "value": "3"}]})),
        Filter::And(vec![c("v", Operator::Eq, s("3"))])
    );
    // A list of names (the external-knowledge API's form): any of them.
    assert_eq!(
        dify(
            json!({"conditions": [{"name": ["a", "b"], "comparison_operator": "is", "value": "x"}]})
        ),
        Filter::And(vec![Filter::Or(vec![
            c("a", Operator::Eq, s("x")),
            c("b", Operator::Eq, s("x"))
        ])])
    );
    assert_eq!(
        dify(
            json!({"conditions": [{"name": "d", "comparison_operator": ">", "value": "2026-06-01"}]})
        ),
        Filter::And(vec![c(
            "d",
            Operator::Gt,
            Some(Value::Date(date("2026-06-01")))
        )])
    );
    // Matching a translated filter.
    let m = md(json!({"status": "published", "count": 3, "date": "2026-05-01"}));
    assert!(
        dify(json!({"conditions": [
            {"name": "count", "comparison_operator": "=", "value": "3"},
            {"name": "date", "comparison_operator": "before", "value": "2026-06-01"},
            {"name": "owner", "comparison_operator": "empty"},
            {"name": "status", "comparison_operator": "not in", "value": "draft,archived"},
        ]}))
        .matches(&m)
    );
}

#[test]
fn dify_nothing_to_filter() {
    for json in [
        json!(null),
        json!({}),
        json!({"logical_operator": "and"}),
        json!({"logical_operator": "or", "conditions": []}),
        json!({"conditions": null}),
    ] {
        assert_eq!(Filter::from_dify(&json).ok(), Some(None), "{json}");
    }
}

#[test]
fn dify_errors() {
    let cases = [
        (json!([1]), "metadata_condition: expected an object"),
        (
            json!({"logical_operator": "xor", "conditions": []}),
            "metadata_condition.logical_operator: must be \"and\" or \"or\", not the string \"xor\"",
        ),
        (
            json!({"conditions": {}}),
            "metadata_condition.conditions: expected a list",
        ),
        (
            json!({"conditions": [1]}),
            "metadata_condition.conditions[0]: expected a condition",
        ),
        (
            json!({"conditions": [
                {"name": "a", "comparison_operator": "is", "value": "x"},
                {"name": "a", "comparison_operator": "is", "value": "x"},
                {"name": "a", "comparison_operator": "like", "value": "x"},
            ]}),
            "metadata_condition.conditions[2].comparison_operator: unknown comparison operator \"like\"; operators: is, is not,",
        ),
        (
            json!({"conditions": [{"comparison_operator": "is", "value": "x"}]}),
            "metadata_condition.conditions[0]: \"name\" is missing",
        ),
        (
            json!({"conditions": [{"name": "", "comparison_operator": "is", "value": "x"}]}),
            "\"name\" must be a field name",
        ),
        (
            json!({"conditions": [{"name": "a", "value": "x"}]}),
            "metadata_condition.conditions[0].comparison_operator: missing",
        ),
        (
            json!({"conditions": [{"name": "a", "comparison_operator": ">", "value": "lots"}]}),
            "metadata_condition.conditions[0].value: operator \">\" compares with a number or a date, not the string \"lots\"",
        ),
        (
            json!({"conditions": [{"name": "a", "comparison_operator": "before", "value": "soon"}]}),
            "compares with a date",
        ),
        (
            json!({"conditions": [{"name": "a", "comparison_operator": "is"}]}),
            "metadata_condition.conditions[0].value: missing",
        ),
        (
            json!({"conditions": [{"name": "a", "comparison_operator": "in", "value": " , "}]}),
            "a list or comma-separated text",
        ),
        (
            json!({"conditions": [{"name": "a", "comparison_operator": "start with", "value": 3}]}),
            "compares with a string",
        ),
    ];
    for (json, want) in cases {
        let e = dify_err(json.clone());
        assert!(e.contains(want), "{json}: {e}");
    }
}

// ---- Summaries ----

#[test]
fn summaries() {
    let docs = [
        md(json!({"status": "draft", "tags": ["a", "b", "a"], "n": 1, "d": "2026-06-01"})),
        md(json!({"status": "published", "tags": ["b"], "n": "one"})),
        md(json!({"status": "draft", "tags": "b", "n": 2})),
        md(json!({"extra": true})),
    ];
    let s = summarize(&docs, 2);
    let names: Vec<&str> = s.iter().map(|f| f.field.as_str()).collect();
    assert_eq!(names, vec!["n", "status", "tags", "d", "extra"]);
    let n = &s[0];
    assert_eq!(n.types, vec!["number", "string"]);
    assert_eq!(n.documents, 3);
    assert_eq!(
        n.top_values,
        vec![
            ValueCount {
                value: json!(1),
                count: 1
            },
            ValueCount {
                value: json!(2),
                count: 1
            }
        ]
    );
    let status = &s[1];
    assert_eq!(status.types, vec!["string"]);
    assert_eq!(
        status.top_values,
        vec![
            ValueCount {
                value: json!("draft"),
                count: 2
            },
            ValueCount {
                value: json!("published"),
                count: 1
            }
        ]
    );
    let tags = &s[2];
    assert_eq!(tags.types, vec!["list", "string"]);
    assert_eq!(
        tags.top_values,
        vec![
            ValueCount {
                value: json!("b"),
                count: 3
            },
            ValueCount {
                value: json!("a"),
                count: 1
            }
        ]
    );
    assert_eq!(
        s[3].top_values,
        vec![ValueCount {
            value: json!("2026-06-01"),
            count: 1
        }]
    );
    assert_eq!(s[3].types, vec!["date"]);
    assert!(summarize(&docs, 0).iter().all(|f| f.top_values.is_empty()));
    assert!(summarize(std::iter::empty(), 5).is_empty());
    let json = serde_json::to_value(&s[1]).ok();
    assert_eq!(
        json,
        Some(
            json!({"field": "status", "types": ["string"], "documents": 3,
            "top_values": [{"value": "draft", "count": 2}, {"value": "published", "count": 1}]})
        )
    );
}

#[test]
fn a_filter_written_back_as_json_reads_back_the_same() {
    for text in [
        r#"{"field": "author", "operator": "eq", "value": "Ada"}"#,
        r#"{"key": "year", "op": "gte", "value": 2020}"#,
        r#"{"and": [{"field": "tags", "operator": "contains", "value": "ops"},
                    {"not": {"field": "draft", "operator": "exists"}}]}"#,
        r#"{"or": [{"field": "modified", "operator": "gt", "value": "2026-06-01"},
                   {"field": "team", "operator": "in", "value": ["a", "b"]}]}"#,
    ] {
        let filter = Filter::parse_str(text).unwrap();
        let json = filter.to_json();
        assert_eq!(Filter::parse(&json).unwrap(), filter, "{json}");
        assert!(
            json.get("key").is_none() && json.get("op").is_none(),
            "{json}"
        );
    }
}
