//! Metadata filters and discovery through the engine (issue 44): front matter becomes
//! fields and leaves the ranked text, a filter narrows results without moving scores, a
//! bad field names the ones there are, and discovery counts only what the caller may read.

use quarry_core::{Access, Error, Scope};
use quarry_metadata::{Filter, Metadata};
use serde_json::json;

use crate::kb::notes::NewNote;
use crate::retrieval::search::SearchRequest;
use crate::test_support::{drain, engine};

fn note(text: &str, fields: serde_json::Value) -> NewNote {
    NewNote {
        fields: Metadata::from_json(&fields).unwrap(),
        ..crate::test_support::note(text)
    }
}

fn filter(v: serde_json::Value) -> Option<Filter> {
    Some(Filter::parse(&v).unwrap())
}

#[test]
fn filters_narrow_without_moving_scores_and_front_matter_is_not_ranked() {
    let dir = tempfile::tempdir().unwrap();
    let e = engine(dir.path());
    e.create_note(
        "kb",
        note(
            "---\nstatus: published\npriority: 3\nreviewed: 2026-07-01\ntags: [rust, db]\nsecret_word: zanzibar\n---\n# Pools\n\nconnection pooling in rust services",
            json!({}),
        ),
    )
    .unwrap();
    e.create_note(
        "kb",
        note(
            "+++\nstatus = \"draft\"\npriority = 1\nreviewed = 2026-05-01\n+++\n# Drafts\n\nconnection pooling drafts for rust",
            json!({"team": "infra"}),
        ),
    )
    .unwrap();
    e.create_note(
        "kb",
        note("# Plain\n\nconnection notes without fields", json!({})),
    )
    .unwrap();
    drain(&e);

    // Front matter is neither keyword-ranked nor shown, in documents or passages; the
    // passages of a document with front matter are found like any other's.
    assert!(
        e.search(&SearchRequest::new("zanzibar"))
            .unwrap()
            .is_empty()
    );
    let passages = e
        .knowledge_search(&crate::retrieval::knowledge_search::KnowledgeSearch::new(
            "pooling",
        ))
        .unwrap();
    assert_eq!(passages.results.len(), 2, "{passages:?}");
    assert!(
        passages
            .results
            .iter()
            .all(|p| !p.content.contains("status"))
    );
    assert!(
        e.knowledge_search(&crate::retrieval::knowledge_search::KnowledgeSearch::new(
            "zanzibar"
        ))
        .unwrap()
        .results
        .is_empty()
    );
    let all = e.search(&SearchRequest::new("connection pooling")).unwrap();
    assert_eq!(all.len(), 3, "{all:?}");
    assert!(all.iter().all(|h| !h.snippet.contains("status")), "{all:?}");
    let pools = all.iter().find(|h| h.title == "Pools").unwrap();
    assert_eq!(pools.metadata.as_ref().unwrap()["priority"], json!(3));
    assert_eq!(
        pools.metadata.as_ref().unwrap()["tags"],
        json!(["rust", "db"])
    );

    let run = |f: serde_json::Value| {
        e.filtered(filter(f))
            .search(&SearchRequest::new("connection pooling"))
            .unwrap()
    };
    let published = run(json!({"field": "status", "operator": "eq", "value": "published"}));
    assert_eq!(published.len(), 1, "{published:?}");
    assert_eq!(published[0].title, "Pools");
    // The filter chose the document; its score is the unfiltered search's.
    assert_eq!(published[0].score, pools.score);
    let after = run(json!({"field": "reviewed", "operator": "gt", "value": "2026-06-01"}));
    assert_eq!(
        after.iter().map(|h| &h.title).collect::<Vec<_>>(),
        ["Pools"]
    );
    let low = run(json!({"and": [
        {"field": "priority", "operator": "lt", "value": 2},
        {"not": {"field": "status", "operator": "eq", "value": "published"}}
    ]}));
    assert_eq!(low.iter().map(|h| &h.title).collect::<Vec<_>>(), ["Drafts"]);
    // Fields given with the note win beside front matter; `tags contains`.
    assert_eq!(
        run(json!({"key": "team", "op": "eq", "value": "infra"})).len(),
        1
    );
    assert_eq!(
        run(json!({"field": "tags", "operator": "contains", "value": "rust"})).len(),
        1
    );
    // Built-in fields, and a filter that matches nothing.
    assert_eq!(
        run(json!({"field": "title", "operator": "in", "value": ["Plain", "Drafts"]})).len(),
        2
    );
    assert!(run(json!({"field": "priority", "operator": "gt", "value": 100})).is_empty());

    // A field no document has is an error naming the fields there are.
    let err = e
        .filtered(filter(
            json!({"field": "statuss", "operator": "eq", "value": "x"}),
        ))
        .search(&SearchRequest::new("connection"))
        .unwrap_err();
    match err {
        Error::InvalidInput(m) => {
            assert!(m.contains("\"statuss\""), "{m}");
            assert!(m.contains("status") && m.contains("priority"), "{m}");
        }
        other => panic!("{other:?}"),
    }

    // Discovery: types, counts and top values.
    let report = e.metadata_fields(None, None, 5).unwrap();
    assert_eq!(report.documents, 3);
    let status = report.fields.iter().find(|f| f.field == "status").unwrap();
    assert_eq!(status.documents, 2);
    assert_eq!(status.types, ["string"]);
    let reviewed = report
        .fields
        .iter()
        .find(|f| f.field == "reviewed")
        .unwrap();
    assert_eq!(reviewed.types, ["date"]);
    assert!(
        !report
            .fields
            .iter()
            .any(|f| f.field == "secret_word" && f.documents != 1)
    );
}

#[test]
fn a_reader_neither_finds_nor_discovers_fields_of_documents_it_may_not_read() {
    let dir = tempfile::tempdir().unwrap();
    let e = engine(dir.path());
    let (hidden, _) = e
        .create_note("kb", note("# Pay\n\nsalary bands", json!({"grade": "L7"})))
        .unwrap();
    e.set_document_readers("kb", &hidden.id, Some(&["group:hr".to_owned()]))
        .unwrap();
    e.create_note(
        "kb",
        note("# Handbook\n\nsalary reviews", json!({"area": "people"})),
    )
    .unwrap();
    drain(&e);
    let bob = e.scoped(Scope {
        access: Access::Read,
        machine_owner: false,
        readers: Some(["user:bob".to_owned()].into_iter().collect()),
        ..Scope::owner(quarry_core::DEFAULT_SPACE)
    });
    let report = bob.metadata_fields(None, None, 10).unwrap();
    assert_eq!(report.documents, 1);
    assert!(
        report.fields.iter().all(|f| f.field != "grade"),
        "{report:?}"
    );
    // Filtering on a field only a hidden document has looks like a field nobody has.
    let err = bob
        .filtered(filter(json!({"field": "grade", "operator": "exists"})))
        .search(&SearchRequest::new("salary"))
        .unwrap_err();
    assert!(
        matches!(err, Error::InvalidInput(ref m) if !m.contains("L7")),
        "{err:?}"
    );
    assert_eq!(e.metadata_fields(None, None, 10).unwrap().documents, 2);
}

/// Filters resolve against this node's keyword index, which follows every write: a note's
/// changed tags, a deleted note, and an index an older version wrote with another schema
/// (rebuilt from the store, fields included).
#[test]
fn filters_follow_edits_deletes_and_a_rebuilt_index() {
    let dir = tempfile::tempdir().unwrap();
    let e = engine(dir.path());
    let mut first = note("# Ferry\n\nferry timetable for the harbour", json!({}));
    first.tags = vec!["harbour".into()];
    let (ferry, _) = e.create_note("kb", first).unwrap();
    let (tram, _) = e
        .create_note("kb", note("# Tram\n\ntram timetable", json!({"line": 4})))
        .unwrap();
    drain(&e);
    let titles = |f: serde_json::Value| -> Vec<String> {
        let mut t: Vec<String> = e
            .filtered(filter(f))
            .search(&SearchRequest::new("timetable"))
            .unwrap()
            .into_iter()
            .map(|h| h.title)
            .collect();
        t.sort();
        t
    };
    let tagged = |tag: &str| json!({"field": "tags", "operator": "contains", "value": tag});
    assert_eq!(titles(tagged("harbour")), ["Ferry"]);

    // New tags replace the old ones for filters at once.
    e.update_note(
        &ferry,
        crate::kb::notes::NoteChange {
            content: None,
            title: None,
            tags: Some(vec!["night".into()]),
        },
    )
    .unwrap();
    assert!(titles(tagged("harbour")).is_empty());
    assert_eq!(titles(tagged("night")), ["Ferry"]);

    // A deleted note leaves discovery and filters once the node has followed the feed (a
    // server's follower does at once; search results never show it meanwhile).
    e.delete_knowledge(&tram).unwrap();
    e.follow_feed().unwrap();
    let report = e.metadata_fields(None, None, 5).unwrap();
    assert_eq!(report.documents, 1, "{report:?}");
    assert!(
        !report.fields.iter().any(|f| f.field == "line"),
        "{report:?}"
    );

    // An index written with another schema: unreadable, then rebuilt with every field.
    *e.fts.write().unwrap() = None;
    std::fs::remove_dir_all(e.fts_dir()).unwrap();
    drop(quarry_fts::FtsIndex::open_or_create_passages(&e.fts_dir()).unwrap());
    assert!(matches!(e.fts(), Err(Error::Index(_))));
    assert!(e.ensure_indexes(|_| {}).unwrap());
    assert_eq!(titles(tagged("night")), ["Ferry"]);
}
