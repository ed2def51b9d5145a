//! Scopes applied by the engine: spaces never see each other, allow-lists and `?kb=`
//! narrowing hold inside the indexes (not after a top-k cut), access levels are checked, and
//! docids of one space say nothing about another's content.

use quarry_core::{Access, Error, Scope};

use crate::documents::GetRequest;
use crate::engine::Engine;
use crate::retrieval::search::SearchRequest;
use crate::test_support::{engine, note};

fn docid_of(e: &Engine, kb: &str, id: &str) -> String {
    e.kb_document(kb, id).unwrap().docid.unwrap()
}

#[test]
fn spaces_filter_inside_the_search_and_look_missing_to_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let root = engine(dir.path());
    let a = root.scoped(Scope::owner("alpha"));
    let b = root.scoped(Scope::owner("beta"));
    // Beta has many documents that match "harbor" better than alpha's single one: a filter
    // applied after a top-k cut would leave alpha with nothing.
    for i in 0..30 {
        b.create_note(
            "kb",
            note(&format!("# harbor {i}\n\nharbor harbor harbor beta {i}")),
        )
        .unwrap();
    }
    let (alpha_doc, _) = a
        .create_note("kb", note("# Notes\n\nthe harbor opens at dawn, alphaonly"))
        .unwrap();
    let mut req = SearchRequest::new("harbor");
    req.limit = 1;
    let hits = a.search(&req).unwrap();
    assert_eq!(hits.len(), 1);
    assert!(hits[0].snippet.contains("alphaonly"), "{:?}", hits[0]);
    let hits = a.query(&SearchRequest::new("harbor")).unwrap().results;
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert!(a.search(&SearchRequest::new("beta")).unwrap().is_empty());
    assert_eq!(b.search(&SearchRequest::new("alphaonly")).unwrap().len(), 0);

    // A docid from the other space is "not found", worded like a made-up one.
    let foreign = docid_of(&a, "kb", &alpha_doc.id);
    let missing = |e: &Engine, file: &str| match e.get(&GetRequest {
        file: file.into(),
        from_line: None,
        max_lines: None,
        line_numbers: false,
    }) {
        Err(Error::NotFound(m)) => m,
        other => panic!("expected not found, got {other:?}"),
    };
    assert_eq!(
        missing(&b, &foreign).replace(&foreign, "#X"),
        missing(&b, "#abcdef").replace("#abcdef", "#X")
    );
    assert!(
        a.get(&GetRequest {
            file: foreign.clone(),
            from_line: None,
            max_lines: None,
            line_numbers: false,
        })
        .is_ok()
    );
    // Knowledge bases, documents by id, and status counts are per space.
    assert!(matches!(
        b.kb_document("kb", &alpha_doc.id),
        Err(Error::NotFound(_))
    ));
    assert_eq!(a.status().unwrap().total_documents, 1);
    assert_eq!(b.status().unwrap().total_documents, 30);
}

#[test]
fn docids_do_not_reveal_other_spaces_content() {
    let dir = tempfile::tempdir().unwrap();
    let root = engine(dir.path());
    let text = "# Same\n\nidentical content in two spaces";
    let (x, _) = root
        .scoped(Scope::owner("one"))
        .create_note("kb", note(text))
        .unwrap();
    let (y, _) = root
        .scoped(Scope::owner("two"))
        .create_note("kb", note(text))
        .unwrap();
    let dx = docid_of(&root.scoped(Scope::owner("one")), "kb", &x.id);
    let dy = docid_of(&root.scoped(Scope::owner("two")), "kb", &y.id);
    assert_ne!(dx, dy);
    // Neither had to grow because of the other.
    assert_eq!(dx.len(), 7, "{dx}");
    assert_eq!(dy.len(), 7, "{dy}");
}

#[test]
fn allow_lists_narrow_inside_a_space_and_access_levels_hold() {
    let dir = tempfile::tempdir().unwrap();
    let root = engine(dir.path());
    let owner = root.scoped(Scope::owner("team"));
    owner
        .create_note("public", note("# P\n\nlighthouse public"))
        .unwrap();
    owner
        .create_note("secret", note("# S\n\nlighthouse secret"))
        .unwrap();
    let public = owner.knowledge_base("public").unwrap();
    let narrowed = owner.scoped(owner.scope().narrowed(&[public.collection_id]));
    let hits = narrowed.search(&SearchRequest::new("lighthouse")).unwrap();
    assert_eq!(hits.len(), 1);
    assert!(hits[0].file.starts_with("public/"));
    assert_eq!(narrowed.knowledge_bases().unwrap().len(), 1);
    assert!(matches!(
        narrowed.knowledge_base("secret"),
        Err(Error::NotFound(_))
    ));
    // Narrowing to something outside the scope yields nothing, never more.
    let none = narrowed.scoped(narrowed.scope().narrowed(&[]));
    assert!(
        none.search(&SearchRequest::new("lighthouse"))
            .unwrap()
            .is_empty()
    );
    assert_eq!(none.status().unwrap().total_documents, 0);
    // An allow-listed writer cannot create a knowledge base by writing to a new resource;
    // it is told which ones it may write to, and those are only the ones it can see.
    match narrowed.create_note("elsewhere", note("x")) {
        Err(Error::Forbidden(m)) => {
            assert!(m.contains("'public'"), "{m}");
            assert!(!m.contains("secret"), "{m}");
        }
        other => panic!("expected Forbidden, got {other:?}"),
    }
    // A hidden knowledge base gets the same answer as a missing one.
    assert!(matches!(
        narrowed.create_note("secret", note("x")),
        Err(Error::Forbidden(m)) if !m.contains("exists")
    ));

    let reader = owner.scoped(owner.scope().capped(Access::Read));
    assert!(matches!(
        reader.create_note("public", note("# new")),
        Err(Error::Forbidden(_))
    ));
    let doc = reader.list_knowledge("public", 0, 10).unwrap().0.remove(0);
    assert!(matches!(
        reader.delete_knowledge(&doc),
        Err(Error::Forbidden(_))
    ));
    assert!(matches!(
        reader.delete_knowledge_base("public"),
        Err(Error::Forbidden(_))
    ));
    let writer = owner.scoped(owner.scope().capped(Access::Write));
    assert!(matches!(
        writer.delete_knowledge_base("public"),
        Err(Error::Forbidden(_))
    ));
    writer.delete_knowledge(&doc).unwrap();
    // Folder collections read the server's disk: only the machine's owner adds them.
    let mut member = owner.scope().clone();
    member.machine_owner = false;
    let e = owner
        .scoped(member)
        .add_collection(
            dir.path(),
            Some("disk"),
            None,
            true,
            &crate::progress::NoProgress,
        )
        .unwrap_err();
    assert!(matches!(e, Error::Forbidden(_)), "{e}");
}

/// Per-document readers hold inside the indexes (keyword, passages, lookups), in counts and
/// listings; a hidden document looks exactly like a missing one.
#[test]
fn documents_with_readers_are_hidden_from_everyone_else_before_ranking() {
    let dir = tempfile::tempdir().unwrap();
    let root = engine(dir.path());
    // Many hidden documents match better than the one readable one: a filter after a
    // top-k cut would leave nothing.
    let mut hidden_ids = Vec::new();
    for i in 0..20 {
        let (f, _) = root
            .create_note(
                "kb",
                note(&format!(
                    "# Pay {i}\n\nsalary salary salary band {i} secretword"
                )),
            )
            .unwrap();
        root.set_document_readers("kb", &f.id, Some(&["group:hr".to_owned()]))
            .unwrap();
        hidden_ids.push(f.id);
    }
    let (open, _) = root
        .create_note("kb", note("# Handbook\n\nsalary reviews happen yearly"))
        .unwrap();
    let reader = |keys: &[&str]| {
        root.scoped(Scope {
            access: Access::Read,
            machine_owner: false,
            readers: Some(keys.iter().map(|k| (*k).to_owned()).collect()),
            ..Scope::owner(quarry_core::DEFAULT_SPACE)
        })
    };
    let eng = reader(&["user:bob", "group:eng"]);
    let hr = reader(&["user:ann", "group:hr"]);
    let mut req = SearchRequest::new("salary");
    req.limit = 1;
    let hits = eng.search(&req).unwrap();
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert!(hits[0].snippet.contains("yearly"), "{:?}", hits[0]);
    assert!(
        eng.search(&SearchRequest::new("secretword"))
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        hr.search(&SearchRequest::new("secretword")).unwrap().len(),
        10
    );
    let passages = eng
        .knowledge_search(&crate::retrieval::knowledge_search::KnowledgeSearch::new(
            "secretword",
        ))
        .unwrap();
    assert!(
        passages.results.is_empty() && passages.total_count == 0,
        "{:?}",
        passages.results
    );
    // Counts and listings.
    assert_eq!(eng.knowledge_base("kb").unwrap().document_count, 1);
    assert_eq!(hr.knowledge_base("kb").unwrap().document_count, 21);
    assert_eq!(eng.status().unwrap().total_documents, 1);
    // Nor the embedding backlog (issue 65 item 6): the hidden notes' chunks are not counted.
    let (seen, all) = (eng.status().unwrap(), hr.status().unwrap());
    assert_eq!((seen.needs_embedding, all.needs_embedding), (1, 21));
    assert!(
        seen.chunks_needing_embedding >= 1
            && seen.chunks_needing_embedding + 20 <= all.chunks_needing_embedding,
        "{} of {}",
        seen.chunks_needing_embedding,
        all.chunks_needing_embedding
    );
    assert_eq!(
        eng.kb_documents("kb", &crate::FileFilter::default())
            .unwrap()
            .len(),
        1
    );
    let (listed, total) = eng.list_knowledge("kb", 0, 100).unwrap();
    assert_eq!((listed.len(), total), (1, 1));
    // Lookups: by id, by docid, by path, by glob — missing, in the same words.
    let missing = eng
        .kb_document("kb", &hidden_ids[0])
        .unwrap_err()
        .to_string();
    let absent = eng.kb_document("kb", "no-such-id").unwrap_err().to_string();
    assert_eq!(
        missing.replace(&hidden_ids[0], "X"),
        absent.replace("no-such-id", "X")
    );
    let docid = docid_of(&root, "kb", &hidden_ids[0]);
    assert!(matches!(eng.get(&get_req(&docid)), Err(Error::NotFound(_))));
    assert!(hr.get(&get_req(&docid)).is_ok());
    let path = root
        .kb_document("kb", &hidden_ids[0])
        .unwrap()
        .display_path();
    assert!(matches!(eng.get(&get_req(&path)), Err(Error::NotFound(_))));
    let many = eng
        .multi_get(&crate::documents::MultiGetRequest::new("kb/*.md"))
        .unwrap();
    assert_eq!(many.items.len(), 1);
    // A suggestion never names a hidden document.
    let near = eng.get(&get_req("kb/pay-0.mdx")).unwrap_err().to_string();
    let suggested = near.split("Did you mean").nth(1).unwrap_or_default();
    assert!(suggested.contains("Handbook"), "{near}");
    assert!(!suggested.to_lowercase().contains("pay"), "{near}");
    // Its original is not readable either.
    let sha = root.kb_document("kb", &hidden_ids[0]).unwrap().sha256;
    assert!(eng.readable_blob(&sha).is_err());
    assert!(hr.readable_blob(&sha).is_ok());
    // An empty list: admins only.
    root.set_document_readers("kb", &open.id, Some(&[]))
        .unwrap();
    assert!(
        eng.search(&SearchRequest::new("yearly"))
            .unwrap()
            .is_empty()
    );
    assert!(hr.search(&SearchRequest::new("yearly")).unwrap().is_empty());
    assert_eq!(root.search(&SearchRequest::new("yearly")).unwrap().len(), 1);
    // Readers change: open to everyone again.
    root.set_document_readers("kb", &hidden_ids[0], None)
        .unwrap();
    assert_eq!(
        eng.search(&SearchRequest::new("secretword")).unwrap().len(),
        1
    );
    // Only admins change readers, and keys are checked.
    assert!(matches!(
        hr.set_document_readers("kb", &hidden_ids[1], None),
        Err(Error::Forbidden(_))
    ));
    assert!(matches!(
        root.set_document_readers("kb", &hidden_ids[1], Some(&["hr".to_owned()])),
        Err(Error::InvalidInput(_))
    ));
}

fn get_req(file: &str) -> GetRequest {
    GetRequest {
        file: file.to_owned(),
        from_line: None,
        max_lines: None,
        line_numbers: false,
    }
}
