//! Conformance cases for knowledge bases, their files, blobs, idempotency keys (`KnowledgeStore`) and the job queue (`JobQueue`). Each case is a `pub fn knowledge_…(store: &dyn Store)`
//! listed in the macro below.

use quarry_core::{Error, PageSpan};

use crate::{
    AddedFile, ConvertedFile, DocChunks, FileFilter, FileStatus, Job, JobKind, KbFile, Lease,
    NewChunk, NewKbFile, NoteMeta, QueueCounts, StatusFilter, Store,
};

/// The cases of this module, for [`store_conformance!`](crate::store_conformance).
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_knowledge {
    ($open:expr) => {
        $crate::conformance::harness::__conformance_tests!($open; [$crate::conformance::knowledge];
            knowledge_bases_are_created_listed_found_and_updated,
            knowledge_same_bytes_make_no_second_file_and_same_names_get_distinct_ones,
            knowledge_files_are_filtered_and_found_by_id_or_name,
            knowledge_a_restricted_file_holds_no_bytes_against_other_readers,
            knowledge_a_name_names_one_file_per_set_of_readers,
            knowledge_deleting_a_file_queues_a_cleanup_and_orphans_its_blob,
            knowledge_converting_a_file_stores_its_document_and_keeps_its_docid,
            knowledge_blobs_are_visible_only_to_their_space_and_collections,
            knowledge_fenced_effects_need_the_live_lease,
            knowledge_notes_are_updated_and_queued_again,
            knowledge_only_failed_files_are_retried,
            knowledge_mark_embedded_needs_chunked_documents,
            knowledge_idempotency_keys_keep_the_first_answer,
            knowledge_jobs_uploads_first_and_one_embedding_at_a_time,
            knowledge_jobs_concurrent_claimers_take_one_embedding,
            knowledge_jobs_nodes_share_a_collections_embedding,
            knowledge_jobs_failing_for_good_fails_the_files,
            knowledge_jobs_expired_owners_lose_their_leases,
            knowledge_nodes_are_live_while_they_send_heartbeats,
            knowledge_concurrent_uploads_get_distinct_names_and_one_file_per_content,
            knowledge_concurrent_enqueues_keep_one_waiting_job,
            knowledge_forgetting_blobs_never_drops_a_referenced_one,
            knowledge_concurrent_conversions_of_the_same_bytes_get_distinct_docids,
            knowledge_files_with_readers_are_listed_apart_and_their_readers_change,
        );
    };
}

#[doc(hidden)]
pub use __conformance_knowledge;

const SPACE: &str = "default";

fn hash(i: u64) -> String {
    format!("{i:064x}")
}

fn new_file(name: &str, sha: &str) -> NewKbFile {
    NewKbFile {
        meta: Default::default(),
        original_name: name.into(),
        sha256: sha.into(),
        format: "md".into(),
        mime: "text/markdown".into(),
        size: 3,
        note: None,
        readers: None,
    }
}

fn new_note(name: &str, sha: &str, title: Option<&str>, tags: &[&str]) -> NewKbFile {
    NewKbFile {
        note: Some(NoteMeta {
            title: title.map(str::to_owned),
            tags: tags.iter().map(|t| (*t).to_owned()).collect(),
            kind: "text".into(),
            summary: None,
        }),
        ..new_file(name, sha)
    }
}

fn kb(store: &dyn Store, name: &str) -> i64 {
    store
        .create_knowledge_base(SPACE, name, "", None)
        .expect("create_knowledge_base")
        .collection_id
}

fn add(store: &dyn Store, collection: i64, files: &[NewKbFile]) -> Vec<KbFile> {
    store
        .add_files(collection, files)
        .expect("add_files")
        .iter()
        .map(|a| a.file().clone())
        .collect()
}

fn file(store: &dyn Store, row: i64) -> KbFile {
    store
        .kb_file_by_row(row)
        .expect("kb_file_by_row")
        .expect("the file")
}

fn claim(store: &dyn Store, owner: &str) -> Option<Job> {
    store.claim_job(owner, 60_000).expect("claim_job")
}

fn converted(markdown: &str) -> ConvertedFile {
    ConvertedFile {
        meta: Default::default(),
        title: "A".into(),
        markdown: markdown.into(),
        pages: Vec::new(),
        furniture: Vec::new(),
        page_count: None,
        pages_without_text: None,
        warnings: Vec::new(),
        images: Vec::new(),
    }
}

fn expect_conflict<T: std::fmt::Debug>(what: &str, r: quarry_core::Result<T>) {
    match r {
        Err(Error::Conflict(_)) => {}
        other => panic!("{what}: expected Conflict, got {other:?}"),
    }
}

fn expect_not_found<T: std::fmt::Debug>(what: &str, r: quarry_core::Result<T>) {
    match r {
        Err(Error::NotFound(_)) => {}
        other => panic!("{what}: expected NotFound, got {other:?}"),
    }
}

/// Knowledge bases: names unique in a space (shared with collections), listed by name,
/// found by public id or name, renamed and described; unknown ones are `NotFound`/`None`.
pub fn knowledge_bases_are_created_listed_found_and_updated(store: &dyn Store) {
    let b = store
        .create_knowledge_base(SPACE, "b", "second", Some((800, 80)))
        .expect("create b");
    assert_eq!((b.name.as_str(), b.description.as_str()), ("b", "second"));
    assert_eq!((b.chunk_size, b.chunk_overlap), (Some(800), Some(80)));
    assert_eq!((b.document_count, b.total_bytes), (0, 0));
    assert!(!b.id.is_empty() && b.updated_at >= b.created_at);
    let a = store
        .create_knowledge_base(SPACE, "a", "", None)
        .expect("create a");
    assert_eq!((a.chunk_size, a.chunk_overlap), (None, None));
    expect_conflict(
        "the same name twice",
        store.create_knowledge_base(SPACE, "a", "", None),
    );
    store
        .create_knowledge_base("elsewhere", "a", "", None)
        .expect("the same name in another space");
    let names: Vec<String> = store
        .knowledge_bases(SPACE)
        .expect("knowledge_bases")
        .into_iter()
        .map(|k| k.name)
        .collect();
    assert_eq!(names, ["a", "b"], "listed by name");
    assert!(store.knowledge_bases("nowhere").expect("list").is_empty());
    let by_id = store.knowledge_base(SPACE, &b.id).expect("by id");
    assert_eq!(
        by_id.as_ref().map(|k| k.collection_id),
        Some(b.collection_id)
    );
    let by_name = store.knowledge_base(SPACE, "b").expect("by name");
    assert_eq!(by_name, by_id, "by id and by name: the same");
    assert_eq!(store.knowledge_base(SPACE, "zzz").expect("unknown"), None);
    assert_eq!(
        store
            .knowledge_base("elsewhere", &b.id)
            .expect("other space"),
        None,
        "a knowledge base is not found from another space"
    );
    let renamed = store
        .update_knowledge_base(SPACE, &b.id, Some("c"), Some("third"))
        .expect("update");
    assert_eq!(
        (renamed.name.as_str(), renamed.description.as_str()),
        ("c", "third")
    );
    assert_eq!(renamed.id, b.id, "the public id stays");
    assert_eq!(store.knowledge_base(SPACE, "b").expect("old name"), None);
    let same = store
        .update_knowledge_base(SPACE, "c", Some("c"), None)
        .expect("renamed to its own name");
    assert_eq!(same.description, "third", "description untouched");
    expect_conflict(
        "renamed onto a taken name",
        store.update_knowledge_base(SPACE, "c", Some("a"), None),
    );
    expect_not_found(
        "update of an unknown knowledge base",
        store.update_knowledge_base(SPACE, "zzz", None, Some("x")),
    );
}

/// The same bytes twice in one knowledge base give the existing file back; the same name
/// twice gets `name (2).ext`; counts follow.
pub fn knowledge_same_bytes_make_no_second_file_and_same_names_get_distinct_ones(
    store: &dyn Store,
) {
    let c = kb(store, "kb");
    let out = store
        .add_files(
            c,
            &[
                new_file("a.md", &hash(1)),
                new_file("a.md", &hash(2)),
                new_file("copy.md", &hash(1)),
                new_file("a.md", &hash(3)),
                new_file("README", &hash(4)),
                new_file("README", &hash(5)),
            ],
        )
        .expect("add_files");
    let names: Vec<(&str, bool)> = out
        .iter()
        .map(|a| {
            (
                a.file().file_name.as_str(),
                matches!(a, AddedFile::Added { .. }),
            )
        })
        .collect();
    assert_eq!(
        names,
        [
            ("a.md", true),
            ("a (2).md", true),
            ("a.md", false),
            ("a (3).md", true),
            ("README", true),
            ("README (2)", true)
        ],
        "{out:?}"
    );
    assert_eq!(out[0].file().row_id, out[2].file().row_id, "the duplicate");
    let again = store
        .add_files(c, &[new_file("other.md", &hash(2))])
        .expect("add again");
    assert!(
        matches!(&again[0], AddedFile::Duplicate { file } if file.file_name == "a (2).md"),
        "{again:?}"
    );
    let f = out[1].file();
    assert_eq!(
        (f.status, f.original_name.as_str(), f.sha256.as_str()),
        (FileStatus::Pending, "a.md", hash(2).as_str())
    );
    assert_eq!((f.size, f.attempts, f.chunk_count), (3, 0, 0));
    assert_eq!(
        (f.docid.clone(), f.document_id, f.note.clone()),
        (None, None, None)
    );
    assert_eq!(f.knowledge_base, "kb");
    let k = store.knowledge_base(SPACE, "kb").expect("kb").expect("kb");
    assert_eq!(k.document_count, 5);
    assert_eq!(k.status_counts.pending, 5);
    assert_eq!(k.total_bytes, 15);
    // Each new file is queued once; the same bytes in another knowledge base are its own.
    assert_eq!(store.queue_counts(None).expect("counts").enqueued, 5);
    let other = kb(store, "other");
    let there = store
        .add_files(other, &[new_file("a.md", &hash(1))])
        .expect("add elsewhere");
    assert!(matches!(&there[0], AddedFile::Added { file } if file.file_name == "a.md"));
    assert!(store.add_files(other, &[]).expect("nothing").is_empty());
}

/// Listing filters by status and by a case-insensitive part of the name; a file is found by
/// public id or name, only in its own knowledge base.
pub fn knowledge_files_are_filtered_and_found_by_id_or_name(store: &dyn Store) {
    let c = kb(store, "kb");
    let files = add(
        store,
        c,
        &[
            new_file("Report.md", &hash(1)),
            new_file("notes.md", &hash(2)),
            new_note("idea.md", &hash(3), Some("An idea"), &["x", "y"]),
        ],
    );
    let all = store.kb_files(c, &FileFilter::default()).expect("kb_files");
    assert_eq!(all, files, "every file, in the order added");
    let named = store
        .kb_files(
            c,
            &FileFilter {
                name: Some("rEPo".into()),
                status: None,
            },
        )
        .expect("by name");
    assert_eq!(named.len(), 1);
    assert_eq!(named[0].file_name, "Report.md");
    assert!(
        store
            .set_file_status(None, files[1].row_id, FileStatus::Failed, Some("broken"))
            .expect("set_file_status")
    );
    let failed = store
        .kb_files(
            c,
            &FileFilter {
                status: Some(StatusFilter::Is(FileStatus::Failed)),
                name: None,
            },
        )
        .expect("by status");
    assert_eq!(failed.len(), 1);
    assert_eq!(
        (failed[0].file_name.as_str(), failed[0].error.as_deref()),
        ("notes.md", Some("broken"))
    );
    let none = store
        .kb_files(
            c,
            &FileFilter {
                status: Some(StatusFilter::Is(FileStatus::Failed)),
                name: Some("report".into()),
            },
        )
        .expect("both filters");
    assert!(none.is_empty());
    let by_id = store.kb_file(c, &files[0].id).expect("by id");
    assert_eq!(by_id.as_ref(), Some(&files[0]));
    let by_name = store.kb_file(c, "Report.md").expect("by name");
    assert_eq!(by_name.as_ref(), Some(&files[0]));
    assert_eq!(store.kb_file(c, "report.md").expect("case"), None);
    let other = kb(store, "other");
    assert_eq!(store.kb_file(other, &files[0].id).expect("elsewhere"), None);
    assert_eq!(store.kb_file_by_row(i64::MAX).expect("unknown row"), None);
    // Many at once: those that exist, each as read one by one, an unknown row skipped.
    let mut many = store
        .kb_files_by_rows(&[files[2].row_id, i64::MAX, files[0].row_id, files[1].row_id])
        .expect("by rows");
    many.sort_by_key(|f| f.row_id);
    let one_by_one: Vec<KbFile> = files.iter().map(|f| file(store, f.row_id)).collect();
    assert_eq!(many, one_by_one);
    assert!(store.kb_files_by_rows(&[]).expect("none").is_empty());
    let note = file(store, files[2].row_id).note.expect("a note");
    assert_eq!(note.kind, "text");
    assert_eq!(note.title.as_deref(), Some("An idea"));
    assert_eq!(note.tags, ["x", "y"]);
    assert_eq!(note.summary, None);
    // `processing` is converting, indexing or embedding: the word the queue and the UI use.
    let processing = |store: &dyn Store| {
        store
            .kb_files(
                c,
                &FileFilter {
                    status: Some(StatusFilter::Processing),
                    name: None,
                },
            )
            .expect("processing")
            .into_iter()
            .map(|f| f.file_name)
            .collect::<Vec<_>>()
    };
    assert!(
        processing(store).is_empty(),
        "pending and failed files are not processing"
    );
    assert!(
        store
            .set_file_status(None, files[0].row_id, FileStatus::Embedding, None)
            .expect("set_file_status")
    );
    assert_eq!(processing(store), vec![files[0].file_name.clone()]);
    assert!(
        store
            .set_file_status(None, files[0].row_id, FileStatus::Pending, None)
            .expect("set_file_status")
    );
}

/// The same bytes are one document only among files with the same readers: an upload of a
/// restricted file's bytes with other readers is a document of its own, so the answer does not
/// tell its uploader that a hidden one exists (issue 65 item 6); with the same readers it is
/// the same document, as before. Readers that would make two current copies alike conflict.
/// The jobs of given files are counted apart (what a caller who may not read them is not
/// shown).
pub fn knowledge_a_restricted_file_holds_no_bytes_against_other_readers(store: &dyn Store) {
    let c = kb(store, "kb");
    let hr = |name: &str, sha: &str| NewKbFile {
        readers: Some(vec!["group:hr".to_owned()]),
        ..new_file(name, sha)
    };
    let hidden = add(store, c, &[hr("layoffs.md", &hash(9))]).remove(0);
    let added = store
        .add_files(
            c,
            &[
                new_file("layoffs.md", &hash(10)),
                new_file("copy.md", &hash(9)),
                hr("again.md", &hash(9)),
                hr("layoffs.md", &hash(11)),
            ],
        )
        .expect("add_files");
    let results: Vec<&str> = added
        .iter()
        .map(|a| match a {
            AddedFile::Added { .. } => "added",
            AddedFile::Duplicate { .. } => "duplicate",
        })
        .collect();
    assert_eq!(
        results,
        ["added", "added", "duplicate", "added"],
        "a hidden file holds no bytes against other readers; the same readers' files do"
    );
    assert_eq!(added[2].file().id, hidden.id);
    // Readers that would make two current copies of the same bytes alike: a conflict, and
    // nothing changes.
    let copy = added[1].file().clone();
    match store.set_file_readers(c, copy.row_id, Some(&["group:hr".to_owned()])) {
        Err(Error::Conflict(why)) => assert!(why.contains("these readers"), "{why}"),
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert_eq!(file(store, copy.row_id).readers, None);
    // What a count for a caller who may not read the hidden file leaves out: its job.
    assert_eq!(
        store.file_queue_counts(&[hidden.row_id]).expect("counts"),
        QueueCounts {
            enqueued: 1,
            processing: 0,
            failed: 0
        }
    );
    assert_eq!(
        store.file_queue_counts(&[]).expect("none"),
        QueueCounts::default()
    );
}

/// A name names one file per set of readers (issue 65 item 6): an upload of a name that
/// only a restricted file holds gets that name exactly, as a free name would, and a
/// document of its own beside the restricted one's (same path); the same readers' names
/// still go `(2)`. A look-up by name finds every file of it (by id, one). Readers that
/// bring a name into a set that has it move the file (and its document) to the next free one.
pub fn knowledge_a_name_names_one_file_per_set_of_readers(store: &dyn Store) {
    let c = kb(store, "kb");
    let hr = |name: &str, sha: &str| NewKbFile {
        readers: Some(vec!["group:hr".to_owned()]),
        ..new_file(name, sha)
    };
    let hidden = add(store, c, &[hr("layoffs-2027.md", &hash(20))]).remove(0);
    let added = add(
        store,
        c,
        &[
            new_file("layoffs-2027.md", &hash(21)),
            new_file("layoffs-2027.md", &hash(22)),
            hr("layoffs-2027.md", &hash(23)),
        ],
    );
    let names: Vec<&str> = added.iter().map(|f| f.file_name.as_str()).collect();
    assert_eq!(
        names,
        [
            "layoffs-2027.md",
            "layoffs-2027 (2).md",
            "layoffs-2027 (2).md"
        ],
        "another set of readers' name is free; the same readers' is not"
    );
    let open = added[0].clone();
    // Each file converts into a document of its own, under the same path.
    let document = |row: i64, markdown: &str| {
        store
            .file_converted(None, row, converted(markdown))
            .expect("file_converted")
            .expect("converted")
            .upserts[0]
            .id
    };
    let hidden_doc = document(hidden.row_id, "# Hidden\n\nthe hr plan");
    let open_doc = document(open.row_id, "# Open\n\nthe public note");
    assert_ne!(hidden_doc, open_doc);
    assert_eq!(
        document(hidden.row_id, "# Hidden\n\nthe hr plan, revised"),
        hidden_doc,
        "converting again replaces the file's own document"
    );
    let docs = store
        .documents_by_ids(&[hidden_doc, open_doc])
        .expect("documents");
    let mut seen: Vec<(&str, &str)> = docs
        .iter()
        .map(|d| (d.path.as_str(), d.body.as_str()))
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            ("layoffs-2027.md", "# Hidden\n\nthe hr plan, revised"),
            ("layoffs-2027.md", "# Open\n\nthe public note")
        ]
    );
    // Found by name: both, oldest first; by id: that one.
    let ids = |key: &str| -> Vec<String> {
        store
            .kb_files_by_key(c, key)
            .expect("by key")
            .into_iter()
            .map(|f| f.id)
            .collect()
    };
    assert_eq!(ids("layoffs-2027.md"), [hidden.id.clone(), open.id.clone()]);
    assert_eq!(ids(&open.id), std::slice::from_ref(&open.id));
    // The open file given hr's readers: hr has its name and `(2)` already.
    assert!(
        store
            .set_file_readers(c, open.row_id, Some(&["group:hr".to_owned()]))
            .expect("set readers")
    );
    let moved = file(store, open.row_id);
    assert_eq!(moved.file_name, "layoffs-2027 (3).md");
    let doc = store.documents_by_ids(&[open_doc]).expect("document");
    assert_eq!(doc[0].path, "layoffs-2027 (3).md", "its document follows");
    // And back: the name it has is free among every reader's files, so it keeps it.
    assert!(store.set_file_readers(c, open.row_id, None).expect("unset"));
    assert_eq!(file(store, open.row_id).file_name, "layoffs-2027 (3).md");
}

/// Deleting a file takes its job and document with it and queues one cleanup; its blob is
/// then an orphan (unless another file holds the same bytes), and forgetting it works once.
pub fn knowledge_deleting_a_file_queues_a_cleanup_and_orphans_its_blob(store: &dyn Store) {
    let c = kb(store, "kb");
    let other = kb(store, "other");
    let files = add(
        store,
        c,
        &[new_file("a.md", &hash(1)), new_file("b.md", &hash(2))],
    );
    add(store, other, &[new_file("b.md", &hash(2))]);
    store
        .file_converted(None, files[0].row_id, converted("# A\n\nbody"))
        .expect("file_converted");
    let doc = file(store, files[0].row_id)
        .document_id
        .expect("a document");
    expect_not_found(
        "delete from another knowledge base",
        store.delete_kb_file(other, files[0].row_id),
    );
    expect_not_found(
        "delete of an unknown file",
        store.delete_kb_file(c, i64::MAX),
    );
    assert!(store.orphan_blobs(10).expect("orphans").is_empty());
    store.delete_kb_file(c, files[0].row_id).expect("delete a");
    store.delete_kb_file(c, files[1].row_id).expect("delete b");
    assert_eq!(store.kb_file_by_row(files[0].row_id).expect("gone"), None);
    assert!(
        store.kb_file_ids(&[doc]).expect("kb_file_ids").is_empty(),
        "its document went with it"
    );
    // Two deletes, one waiting cleanup; the other knowledge base's upload stays queued.
    assert_eq!(store.queue_counts(None).expect("counts").enqueued, 2);
    assert_eq!(
        store.queue_counts(Some(&[c])).expect("counts").enqueued,
        0,
        "the deleted files' jobs went"
    );
    let job = claim(store, "A").expect("a job");
    assert_eq!(job.kind, JobKind::Ingest, "uploads before cleanups");
    let job = claim(store, "A").expect("a job");
    assert_eq!(job.kind, JobKind::Cleanup);
    assert_eq!(job.file_id, None);
    assert_eq!(
        store.orphan_blobs(10).expect("orphans"),
        [hash(1)],
        "b's bytes are still another knowledge base's"
    );
    assert!(store.orphan_blobs(0).expect("limit 0").is_empty());
    assert!(store.blob_known(&hash(1)).expect("known"));
    assert_eq!(
        store
            .known_blobs(&[hash(1), hash(2), hash(99)])
            .expect("known_blobs"),
        [hash(1), hash(2)].into_iter().collect(),
        "known_blobs names the rows there are, and only those"
    );
    assert!(store.known_blobs(&[]).expect("none asked").is_empty());
    store
        .forget_blobs(&[hash(1), hash(2), hash(99)])
        .expect("forget_blobs");
    assert!(!store.blob_known(&hash(1)).expect("forgotten"));
    assert!(
        store.blob_known(&hash(2)).expect("kept"),
        "a referenced blob is never forgotten"
    );
    store.forget_blobs(&[]).expect("nothing to forget");
    store.enqueue_cleanup().expect("enqueue_cleanup");
    store.enqueue_cleanup().expect("enqueue_cleanup");
    assert_eq!(
        store.queue_counts(None).expect("counts").enqueued,
        1,
        "one waiting cleanup at most"
    );
}

/// A converted file becomes a document (docid from its hash, kept when converted again);
/// the file moves to `indexing` with its pages and warnings; a deleted file or a stale
/// lease stores nothing.
pub fn knowledge_converting_a_file_stores_its_document_and_keeps_its_docid(store: &dyn Store) {
    let c = kb(store, "kb");
    let files = add(
        store,
        c,
        &[
            new_file("a.md", &hash(0xabcdef0123)),
            new_file("b.md", &hash(7)),
        ],
    );
    let row = files[0].row_id;
    let first = store
        .file_converted(None, row, converted("# A\n\nbody"))
        .expect("file_converted")
        .expect("stored");
    assert_eq!(first.upserts.len(), 1);
    assert!(first.deletes.is_empty());
    let d = &first.upserts[0];
    assert_eq!(
        (
            d.collection_id,
            d.path.as_str(),
            d.title.as_str(),
            d.body.as_str()
        ),
        (c, "a.md", "A", "# A\n\nbody")
    );
    let again = store
        .file_converted(
            None,
            row,
            ConvertedFile {
                pages: vec![PageSpan {
                    page: 1,
                    byte_start: 0,
                    byte_end: 3,
                }],
                page_count: Some(4),
                pages_without_text: Some("pages 2–4".into()),
                warnings: vec!["w1".into(), "w2".into()],
                ..converted("# A\n\nnew body")
            },
        )
        .expect("file_converted")
        .expect("stored");
    assert_eq!(again.upserts[0].id, d.id, "the same document");
    let f = file(store, row);
    assert_eq!(f.docid.as_deref(), Some("#000000"), "{f:?}");
    assert_eq!(f.document_id, Some(d.id));
    assert_eq!(f.status, FileStatus::Indexing);
    assert_eq!(
        (f.pages, f.pages_without_text.as_deref()),
        (Some(4), Some("pages 2–4"))
    );
    assert_eq!(f.warnings, ["w1", "w2"]);
    assert_eq!(f.error, None);
    // Another file whose hash starts the same gets a longer docid.
    store
        .file_converted(None, files[1].row_id, converted("b"))
        .expect("file_converted b");
    let b = file(store, files[1].row_id);
    assert_eq!(b.docid.as_deref(), Some("#0000000"), "{b:?}");
    let ids = store
        .kb_file_ids(&[d.id, b.document_id.expect("b's document"), i64::MAX])
        .expect("kb_file_ids");
    assert_eq!(ids.len(), 2);
    assert_eq!(ids.get(&d.id), Some(&f.id));
    assert!(store.kb_file_ids(&[]).expect("none").is_empty());
    // A stale lease stores nothing.
    let job = claim(store, "A").expect("a job");
    let stale = Lease {
        job: job.id,
        token: job.token - 1,
    };
    let fid = job.file_id.expect("an ingest job");
    assert_eq!(
        store
            .file_converted(Some(stale), fid, converted("stale"))
            .expect("stale")
            .map(|w| w.upserts.len()),
        None
    );
    assert!(
        store
            .file_converted(Some(job.lease()), fid, converted("fresh"))
            .expect("held")
            .is_some()
    );
    // A file deleted meanwhile: nothing.
    store.delete_kb_file(c, row).expect("delete");
    assert!(
        store
            .file_converted(None, row, converted("late"))
            .expect("deleted")
            .is_none()
    );
}

/// A blob (original or extracted image) is visible to the space of a file referencing it,
/// and only through that file's collections when they are given.
pub fn knowledge_blobs_are_visible_only_to_their_space_and_collections(store: &dyn Store) {
    let c = kb(store, "kb");
    let other = kb(store, "other");
    let files = add(store, c, &[new_file("a.md", &hash(1))]);
    let image = hash(50);
    store
        .file_converted(
            None,
            files[0].row_id,
            ConvertedFile {
                images: vec![
                    (image.clone(), 42, "image/png".into()),
                    (image.clone(), 42, "image/png".into()),
                ],
                ..converted("![x](y)")
            },
        )
        .expect("file_converted");
    assert_eq!(
        store
            .blob_visible(SPACE, None, &[], &hash(1))
            .expect("visible"),
        Some((3, "text/markdown".to_owned()))
    );
    assert_eq!(
        store.blob_visible(SPACE, None, &[], &image).expect("image"),
        Some((42, "image/png".to_owned()))
    );
    assert!(
        store
            .blob_visible(SPACE, Some(&[c]), &[], &image)
            .expect("in c")
            .is_some()
    );
    assert_eq!(
        store
            .blob_visible(SPACE, Some(&[other]), &[], &image)
            .expect("not in other"),
        None
    );
    assert_eq!(
        store
            .blob_visible(SPACE, Some(&[]), &[], &hash(1))
            .expect("no collections"),
        None
    );
    assert_eq!(
        store
            .blob_visible("elsewhere", None, &[], &hash(1))
            .expect("other space"),
        None
    );
    assert_eq!(
        store
            .blob_visible(SPACE, None, &[], &hash(77))
            .expect("unknown"),
        None
    );
    // Hidden from a caller who may not read the file: neither the original nor the image.
    let hidden = [files[0].row_id];
    assert_eq!(
        store
            .blob_visible(SPACE, None, &hidden, &hash(1))
            .expect("hidden original"),
        None
    );
    assert_eq!(
        store
            .blob_visible(SPACE, None, &hidden, &image)
            .expect("hidden image"),
        None
    );
    // Converted again without images: the image is no longer referenced.
    store
        .file_converted(None, files[0].row_id, converted("no images"))
        .expect("file_converted");
    assert_eq!(
        store.blob_visible(SPACE, None, &[], &image).expect("image"),
        None
    );
    assert_eq!(store.orphan_blobs(10).expect("orphans"), [image]);
}

/// A job's side effects (file status, warnings, note annotations) apply only under the
/// claim's live lease; without a lease, status changes apply to existing files only.
pub fn knowledge_fenced_effects_need_the_live_lease(store: &dyn Store) {
    let c = kb(store, "kb");
    let files = add(store, c, &[new_note("n.md", &hash(1), None, &[])]);
    let row = files[0].row_id;
    let job = claim(store, "A").expect("the ingest job");
    let stale = Lease {
        job: job.id,
        token: job.token + 1,
    };
    store
        .add_file_warning(stale, row, "ignored")
        .expect("stale warning");
    store
        .annotate_note(stale, row, Some("ignored"), &["t".into()], Some("s"))
        .expect("stale annotation");
    assert!(
        !store
            .set_file_status(Some(stale), row, FileStatus::Failed, None)
            .expect("stale status")
    );
    let f = file(store, row);
    assert!(f.warnings.is_empty());
    assert_eq!(f.status, FileStatus::Pending);
    assert_eq!(f.note.as_ref().and_then(|n| n.title.clone()), None);
    store
        .add_file_warning(job.lease(), row, "one\ntwo")
        .expect("warning");
    store
        .add_file_warning(job.lease(), row, "three")
        .expect("warning");
    store
        .annotate_note(
            job.lease(),
            row,
            Some("Title"),
            &["a".into(), "b".into()],
            Some("summary"),
        )
        .expect("annotate");
    // What the agent gave wins over the model's: a second annotation changes only the
    // summary.
    store
        .annotate_note(job.lease(), row, Some("Other"), &["c".into()], None)
        .expect("annotate again");
    assert!(
        store
            .set_file_status(Some(job.lease()), row, FileStatus::Converting, None)
            .expect("status")
    );
    let f = file(store, row);
    assert_eq!(f.warnings, ["one two", "three"]);
    assert_eq!(f.status, FileStatus::Converting);
    let note = f.note.expect("a note");
    assert_eq!(note.title.as_deref(), Some("Title"));
    assert_eq!(note.tags, ["a", "b"]);
    assert_eq!(note.summary.as_deref(), Some("summary"));
    assert!(store.complete_job(job.lease()).expect("complete"));
    assert!(
        !store
            .set_file_status(Some(job.lease()), row, FileStatus::Ready, None)
            .expect("after completion")
    );
    assert!(
        !store
            .set_file_status(None, i64::MAX, FileStatus::Ready, None)
            .expect("unknown file"),
        "no file, nothing recorded"
    );
}

/// Notes change title, tags and content; a new title or content queues the note again; an
/// upload is not a note.
pub fn knowledge_notes_are_updated_and_queued_again(store: &dyn Store) {
    let c = kb(store, "kb");
    let files = add(
        store,
        c,
        &[
            new_note("n.md", &hash(1), Some("T"), &["a"]),
            new_file("up.md", &hash(2)),
        ],
    );
    let row = files[0].row_id;
    expect_not_found(
        "an upload is not a note",
        store.update_note(c, files[1].row_id, None, Some(Some("x")), None),
    );
    let other = kb(store, "other");
    expect_not_found(
        "a note of another knowledge base",
        store.update_note(other, row, None, Some(Some("x")), None),
    );
    // Processing it, then finishing.
    let job = claim(store, "A").expect("a job");
    assert!(store.complete_job(job.lease()).expect("complete"));
    assert!(
        store
            .set_file_status(None, row, FileStatus::Ready, None)
            .expect("ready")
    );
    let tags: Vec<String> = vec!["x".into(), "y".into()];
    let f = store
        .update_note(c, row, None, None, Some(&tags))
        .expect("tags only");
    assert_eq!(f.note.as_ref().map(|n| n.tags.clone()), Some(tags.clone()));
    assert_eq!(f.status, FileStatus::Ready, "new tags queue nothing");
    assert_eq!(store.queue_counts(None).expect("counts").enqueued, 1);
    let f = store
        .update_note(c, row, None, Some(None), None)
        .expect("title removed");
    assert_eq!(f.note.as_ref().and_then(|n| n.title.clone()), None);
    assert_eq!(
        f.status,
        FileStatus::Pending,
        "a new title is converted again"
    );
    assert_eq!(store.queue_counts(None).expect("counts").enqueued, 2);
    let f = store
        .update_note(c, row, Some((&hash(3), 10)), Some(Some("New")), None)
        .expect("new content");
    assert_eq!((f.sha256.as_str(), f.size), (hash(3).as_str(), 10));
    assert_eq!(
        f.note.as_ref().and_then(|n| n.title.as_deref()),
        Some("New")
    );
    assert_eq!(f.note.as_ref().map(|n| n.tags.clone()), Some(tags));
    assert!(store.blob_known(&hash(3)).expect("the new content's blob"));
    assert_eq!(
        store.orphan_blobs(10).expect("orphans"),
        [hash(1)],
        "the old content is no longer referenced"
    );
    assert_eq!(
        store.queue_counts(None).expect("counts").enqueued,
        2,
        "queued once, however often it changes"
    );
}

/// Only a failed file is retried: back to `pending`, attempts reset, queued again.
pub fn knowledge_only_failed_files_are_retried(store: &dyn Store) {
    let c = kb(store, "kb");
    let files = add(store, c, &[new_file("a.md", &hash(1))]);
    let row = files[0].row_id;
    expect_conflict("a pending file", store.retry_kb_file(c, row));
    expect_not_found("an unknown file", store.retry_kb_file(c, i64::MAX));
    let job = claim(store, "A").expect("a job");
    assert!(store.fail_job(job.lease(), "bad", None).expect("fail"));
    let f = file(store, row);
    assert_eq!(
        (f.status, f.error.as_deref(), f.attempts),
        (FileStatus::Failed, Some("bad"), 1)
    );
    assert_eq!(
        store.queue_counts(None).expect("counts"),
        QueueCounts {
            enqueued: 0,
            processing: 0,
            failed: 1
        }
    );
    let other = kb(store, "other");
    expect_not_found("another knowledge base", store.retry_kb_file(other, row));
    let f = store.retry_kb_file(c, row).expect("retry");
    assert_eq!(
        (f.status, f.error, f.attempts),
        (FileStatus::Pending, None, 0)
    );
    assert_eq!(
        store.queue_counts(None).expect("counts"),
        QueueCounts {
            enqueued: 1,
            processing: 0,
            failed: 0
        }
    );
    let again = claim(store, "B").expect("the retried job");
    assert_eq!((again.id, again.attempts), (job.id, 0));
    assert!(again.token > job.token);
}

/// Files waiting for embedding become ready only once their document is chunked.
pub fn knowledge_mark_embedded_needs_chunked_documents(store: &dyn Store) {
    let c = kb(store, "kb");
    let files = add(
        store,
        c,
        &[new_file("a.md", &hash(1)), new_file("b.md", &hash(2))],
    );
    store
        .file_converted(None, files[0].row_id, converted("# A"))
        .expect("file_converted");
    for f in &files {
        assert!(
            store
                .set_file_status(None, f.row_id, FileStatus::Embedding, None)
                .expect("embedding")
        );
    }
    assert_eq!(store.mark_embedded(c, "m").expect("mark_embedded"), 0);
    assert_eq!(file(store, files[0].row_id).status, FileStatus::Embedding);
    assert_eq!(store.mark_embedded(i64::MAX, "m").expect("unknown"), 0);
}

/// The first answer recorded for a key wins; keys older than `since` are gone.
pub fn knowledge_idempotency_keys_keep_the_first_answer(store: &dyn Store) {
    assert_eq!(store.idempotent_answer("s", "k", 0).expect("none"), None);
    let first = store
        .record_idempotent_answer("s", "k", "req1", "resp1", 1_000, 0)
        .expect("record");
    assert_eq!(first, ("req1".to_owned(), "resp1".to_owned()));
    let second = store
        .record_idempotent_answer("s", "k", "req2", "resp2", 1_500, 0)
        .expect("record again");
    assert_eq!(second, first, "the first answer wins");
    assert_eq!(
        store.idempotent_answer("s", "k", 1_000).expect("answer"),
        Some(first.clone())
    );
    assert_eq!(
        store.idempotent_answer("s", "k", 1_001).expect("too old"),
        None
    );
    assert_eq!(store.idempotent_answer("t", "k", 0).expect("scope"), None);
    store
        .record_idempotent_answer("t", "k", "other", "answer", 2_000, 0)
        .expect("another scope");
    // Recording at a later `since` forgets the old key: a new answer is recorded.
    let third = store
        .record_idempotent_answer("s", "k", "req3", "resp3", 5_000, 1_500)
        .expect("after expiry");
    assert_eq!(third, ("req3".to_owned(), "resp3".to_owned()));
    assert_eq!(
        store.idempotent_answer("t", "k", 0).expect("kept"),
        Some(("other".to_owned(), "answer".to_owned()))
    );
}

/// Uploads are claimed before embedding; one waiting embed job per collection; one
/// embedding at a time runs on a node.
pub fn knowledge_jobs_uploads_first_and_one_embedding_at_a_time(store: &dyn Store) {
    let c = kb(store, "kb");
    let other = kb(store, "other");
    for _ in 0..30 {
        store.enqueue_embed(c).expect("enqueue_embed");
    }
    store.enqueue_embed(other).expect("enqueue_embed");
    assert_eq!(store.queue_counts(None).expect("counts").enqueued, 2);
    assert_eq!(store.queue_counts(Some(&[c])).expect("counts").enqueued, 1);
    assert_eq!(
        store.queue_counts(Some(&[])).expect("counts"),
        QueueCounts::default()
    );
    // A file uploaded after the embed jobs were queued is claimed first.
    add(store, c, &[new_file("late.md", &hash(9))]);
    assert_eq!(store.queue_counts(Some(&[c])).expect("counts").enqueued, 2);
    let first = claim(store, "n1:A").expect("a job");
    assert_eq!(first.kind, JobKind::Ingest);
    assert!(!first.interrupted && first.attempts == 0);
    let embed = claim(store, "n1:B").expect("an embed job");
    assert_eq!((embed.kind, embed.collection_id), (JobKind::Embed, Some(c)));
    assert_eq!(embed.file_id, None);
    // The other collection's embedding waits for this one on this node (a worker stays
    // free)...
    assert_eq!(claim(store, "n1:C"), None);
    // ...while a new request for the running collection queues a job of its own.
    store.enqueue_embed(c).expect("enqueue_embed");
    assert_eq!(
        store.queue_counts(None).expect("counts"),
        QueueCounts {
            enqueued: 2,
            processing: 2,
            failed: 0
        }
    );
    assert!(store.renew_job(embed.lease(), 60_000).expect("renew"));
    assert!(store.complete_job(embed.lease()).expect("complete"));
    assert!(
        !store.complete_job(embed.lease()).expect("twice"),
        "once only"
    );
    let next = claim(store, "n1:C").expect("the next embed job");
    assert_eq!(
        (next.kind, next.collection_id),
        (JobKind::Embed, Some(other))
    );
    assert_eq!(claim(store, "n1:D"), None);
}

/// Claimers of one node racing never take two embed jobs at once, nor one job twice.
pub fn knowledge_jobs_concurrent_claimers_take_one_embedding(store: &dyn Store) {
    let collections: Vec<i64> = (0..6).map(|i| kb(store, &format!("kb{i}"))).collect();
    for round in 0..5 {
        for &c in &collections {
            store.enqueue_embed(c).expect("enqueue_embed");
        }
        let claimed: Vec<Option<Job>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|i| s.spawn(move || claim(store, &format!("n1:w{i}"))))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("claimer"))
                .collect()
        });
        let jobs: Vec<&Job> = claimed.iter().flatten().collect();
        assert_eq!(
            jobs.len(),
            1,
            "round {round}: one embedding at a time, got {claimed:?}"
        );
        assert!(store.complete_job(jobs[0].lease()).expect("complete"));
        // Finish the round's other jobs one by one.
        while let Some(job) = claim(store, "n1:drain") {
            assert_eq!(job.kind, JobKind::Embed);
            assert_eq!(
                claim(store, "n1:other"),
                None,
                "round {round}: a second embedding"
            );
            assert!(store.complete_job(job.lease()).expect("complete"));
        }
    }
}

/// Embed jobs of several nodes share a collection: each node runs one; each job claims
/// texts without vectors that no live job claimed; a job's claims end with it (done, or its
/// lease ended); a claim under a lost lease claims nothing.
pub fn knowledge_jobs_nodes_share_a_collections_embedding(store: &dyn Store) {
    let c = kb(store, "kb");
    let other = kb(store, "other");
    let mut texts_of = Vec::new();
    for (collection, name, n) in [(c, "a.md", 10usize), (other, "b.md", 3)] {
        let [f] = &add(store, collection, &[new_file(name, &hash(n as u64))])[..] else {
            panic!("one file")
        };
        let body = "x".repeat(n);
        store
            .file_converted(None, f.row_id, converted(&body))
            .expect("file_converted")
            .expect("stored");
        let doc = store.kb_file_by_row(f.row_id).expect("file").expect("file");
        let id = doc.document_id.expect("a document");
        let source = store.chunk_sources(&[id]).expect("chunk_sources");
        let chunks: Vec<NewChunk> = (0..n)
            .map(|i| NewChunk {
                byte_start: i,
                byte_end: i + 1,
                line_start: 1,
                line_end: 1,
                hash: format!("{name}-{i}"),
                page: None,
                heading: String::new(),
                text: None,
            })
            .collect();
        texts_of.push(chunks.iter().map(|k| k.hash.clone()).collect::<Vec<_>>());
        store
            .replace_chunks(&[DocChunks {
                document_id: id,
                doc_hash: source[0].hash.clone(),
                chunks,
            }])
            .expect("replace_chunks");
        let ingest = claim(store, "n0:0").expect("the ingest job");
        assert!(store.complete_job(ingest.lease()).expect("complete"));
    }
    store.enqueue_embed(c).expect("enqueue_embed");
    let a = claim(store, "n1:0").expect("node 1's embed job");
    store.enqueue_embed(c).expect("enqueue_embed");
    store.enqueue_embed(other).expect("enqueue_embed");
    assert_eq!(claim(store, "n1:1"), None, "one embedding per node");
    let b = claim(store, "n2:0").expect("node 2's embed job");
    assert_eq!((a.collection_id, b.collection_id), (Some(c), Some(c)));
    assert_eq!(store.live_embed_jobs().expect("live_embed_jobs"), 2);
    let hashes = |claimed: &crate::ClaimedChunks| -> Vec<String> {
        let mut h: Vec<String> = claimed.texts.iter().map(|t| t.hash.clone()).collect();
        h.sort();
        h
    };
    let share = |job: &Job, limit| {
        store
            .claim_embed_chunks(job.lease(), SPACE, c, "m", limit)
            .expect("claim_embed_chunks")
            .expect("the lease holds")
    };
    let first_a = share(&a, 4);
    let first_b = share(&b, 4);
    assert!(first_a.more && first_b.more);
    let (ha, hb) = (hashes(&first_a), hashes(&first_b));
    assert_eq!((ha.len(), hb.len()), (4, 4));
    assert!(
        ha.iter().all(|h| !hb.contains(h)),
        "{ha:?} and {hb:?} overlap"
    );
    assert!(
        ha.iter().chain(&hb).all(|h| texts_of[0].contains(h)),
        "only the collection's texts"
    );
    assert_eq!(first_a.texts[0].title, "A");
    // Node 1 embedded its share; its next round takes what nobody holds: the two left.
    let vectors: Vec<(String, Vec<f32>)> = ha.iter().map(|h| (h.clone(), vec![1.0])).collect();
    store.put_embeddings("m", &vectors).expect("put_embeddings");
    let second_a = share(&a, 10);
    assert!(!second_a.more);
    let h2 = hashes(&second_a);
    assert_eq!(h2.len(), 2);
    assert!(h2.iter().all(|h| !ha.contains(h) && !hb.contains(h)));
    // Node 2's job ends: its texts are free again; its lease claims nothing any more.
    assert!(store.complete_job(b.lease()).expect("complete"));
    assert_eq!(store.live_embed_jobs().expect("live_embed_jobs"), 1);
    assert_eq!(
        store
            .claim_embed_chunks(b.lease(), SPACE, c, "m", 10)
            .expect("claim_embed_chunks"),
        None
    );
    let third_a = share(&a, 10);
    assert_eq!(hashes(&third_a).len(), 6, "{:?}", hashes(&third_a));
    // Node 1 is known dead: its lease ends, and node 3 takes over its texts.
    assert_eq!(
        store.expire_leases(&["n1:0".to_owned()]).expect("expire"),
        1
    );
    assert_eq!(store.live_embed_jobs().expect("live_embed_jobs"), 0);
    store.enqueue_embed(c).expect("enqueue_embed");
    let mut taken = Vec::new();
    while let Some(job) = claim(store, "n3:0") {
        taken.push(job.collection_id);
        if job.collection_id == Some(c) {
            let claimed = share(&job, 10);
            assert_eq!(hashes(&claimed).len(), 6);
        }
        assert!(store.complete_job(job.lease()).expect("complete"));
    }
    assert!(taken.contains(&Some(other)), "{taken:?}");
}

/// A job failed for good fails its file; a failed embed job fails the files waiting for
/// the collection's embedding; a retry comes back with its attempt counted.
pub fn knowledge_jobs_failing_for_good_fails_the_files(store: &dyn Store) {
    let c = kb(store, "kb");
    let files = add(
        store,
        c,
        &[new_file("a.md", &hash(1)), new_file("b.md", &hash(2))],
    );
    let a = claim(store, "A").expect("a's job");
    assert_eq!(a.file_id, Some(files[0].row_id));
    assert!(store.complete_job(a.lease()).expect("complete"));
    assert!(
        store
            .set_file_status(None, files[0].row_id, FileStatus::Embedding, None)
            .expect("embedding")
    );
    let b = claim(store, "A").expect("b's job");
    assert!(store.fail_job(b.lease(), "flaky", Some(0)).expect("retry"));
    let f = file(store, files[1].row_id);
    assert_eq!(
        (f.status, f.error.as_deref(), f.attempts),
        (FileStatus::Pending, Some("flaky (will retry)"), 1)
    );
    let b = claim(store, "A").expect("b's retry");
    assert_eq!((b.attempts, b.interrupted), (1, false));
    assert!(store.fail_job(b.lease(), "broken", None).expect("fail"));
    assert!(!store.fail_job(b.lease(), "again", None).expect("twice"));
    let f = file(store, files[1].row_id);
    assert_eq!(
        (f.status, f.error.as_deref(), f.attempts),
        (FileStatus::Failed, Some("broken"), 2)
    );
    store.enqueue_embed(c).expect("enqueue_embed");
    let e = claim(store, "A").expect("the embed job");
    assert_eq!(e.kind, JobKind::Embed);
    assert!(store.fail_job(e.lease(), "no model", None).expect("fail"));
    let f = file(store, files[0].row_id);
    assert_eq!(
        (f.status, f.error.as_deref()),
        (FileStatus::Failed, Some("no model"))
    );
    assert_eq!(
        file(store, files[1].row_id).error.as_deref(),
        Some("broken"),
        "a file not waiting for embedding is untouched"
    );
    assert_eq!(store.queue_counts(None).expect("counts").failed, 2);
    assert_eq!(store.queue_counts(Some(&[c])).expect("counts").failed, 2);
    assert_eq!(claim(store, "A"), None, "failed jobs are not claimed");
}

/// Owners holding leases are listed; expiring a dead owner's leases makes its jobs
/// claimable at once, as interrupted attempts.
pub fn knowledge_jobs_expired_owners_lose_their_leases(store: &dyn Store) {
    let c = kb(store, "kb");
    add(
        store,
        c,
        &[new_file("a.md", &hash(1)), new_file("b.md", &hash(2))],
    );
    assert!(store.lease_owners().expect("owners").is_empty());
    let a = claim(store, "A").expect("a job");
    let b = claim(store, "B").expect("a job");
    let mut owners = store.lease_owners().expect("owners");
    owners.sort();
    assert_eq!(owners, ["A", "B"]);
    assert_eq!(store.expire_leases(&[]).expect("none"), 0);
    assert_eq!(
        store
            .expire_leases(&["A".to_owned(), "Z".to_owned()])
            .expect("expire"),
        1
    );
    let taken = claim(store, "C").expect("A's job");
    assert_eq!(taken.id, a.id);
    assert!(taken.interrupted);
    assert_eq!(taken.attempts, 1);
    assert_eq!(claim(store, "D"), None, "B's lease holds");
    assert!(!store.renew_job(a.lease(), 60_000).expect("A's lease"));
    assert!(store.renew_job(b.lease(), 60_000).expect("B's lease"));
    let mut owners = store.lease_owners().expect("owners");
    owners.sort();
    assert_eq!(owners, ["B", "C"]);
}

/// A node is live while its heartbeats are recent, on the store's clock; a silent one
/// drops out of the live list (its owners' leases are then released by the queue).
pub fn knowledge_nodes_are_live_while_they_send_heartbeats(store: &dyn Store) {
    assert!(store.live_nodes(60_000).expect("live").is_empty());
    store.node_heartbeat("h:1:a").expect("heartbeat");
    std::thread::sleep(std::time::Duration::from_millis(2_500));
    store.node_heartbeat("h:2:b").expect("heartbeat");
    store
        .node_heartbeat("h:2:b")
        .expect("a second heartbeat is an update");
    assert_eq!(store.live_nodes(60_000).expect("live"), ["h:1:a", "h:2:b"]);
    assert_eq!(
        store.live_nodes(1_000).expect("live"),
        ["h:2:b"],
        "the node silent for 2.5 s is not live within 1 s"
    );
    store.node_heartbeat("h:1:a").expect("back");
    assert_eq!(store.live_nodes(1_000).expect("live").len(), 2);
}

/// Two nodes uploading to one knowledge base at once: the same name twice still gets
/// distinct names, the same bytes twice still make one file, and neither upload fails.
pub fn knowledge_concurrent_uploads_get_distinct_names_and_one_file_per_content(store: &dyn Store) {
    let c = kb(store, "kb");
    for round in 0..5u64 {
        let upload = |who: u64| {
            let files: Vec<NewKbFile> = (0..4)
                .map(|i| new_file("same.md", &hash(1000 * round + 10 * who + i)))
                .chain(std::iter::once(new_file(
                    "shared.md",
                    &hash(1000 * round + 999),
                )))
                .collect();
            store.add_files(c, &files).expect("concurrent add_files")
        };
        let (a, b) = std::thread::scope(|s| {
            let a = s.spawn(|| upload(1));
            let b = s.spawn(|| upload(2));
            (a.join().expect("uploader a"), b.join().expect("uploader b"))
        });
        let shared: Vec<&AddedFile> = a
            .iter()
            .chain(&b)
            .filter(|x| x.file().sha256 == hash(1000 * round + 999))
            .collect();
        assert_eq!(shared.len(), 2);
        assert_eq!(
            shared
                .iter()
                .filter(|x| matches!(x, AddedFile::Added { .. }))
                .count(),
            1,
            "round {round}: the same bytes added once: {shared:?}"
        );
        assert_eq!(shared[0].file().row_id, shared[1].file().row_id);
    }
    let files = store.kb_files(c, &FileFilter::default()).expect("kb_files");
    assert_eq!(files.len(), 5 * 9, "every distinct content is one file");
    let mut names: Vec<&str> = files.iter().map(|f| f.file_name.as_str()).collect();
    names.sort_unstable();
    let n = names.len();
    names.dedup();
    assert_eq!(names.len(), n, "names are unique in a knowledge base");
    assert_eq!(store.queue_counts(None).expect("counts").enqueued, 45);
}

/// Enqueues racing (several nodes) still leave one waiting cleanup job, and one waiting
/// embed job per collection.
pub fn knowledge_concurrent_enqueues_keep_one_waiting_job(store: &dyn Store) {
    let c = kb(store, "kb");
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..10 {
                    store.enqueue_embed(c).expect("enqueue_embed");
                    store.enqueue_cleanup().expect("enqueue_cleanup");
                }
            });
        }
    });
    assert_eq!(store.queue_counts(None).expect("counts").enqueued, 2);
    assert_eq!(store.queue_counts(Some(&[c])).expect("counts").enqueued, 1);
}

/// Blob collection racing new references (an upload of the same bytes while the cleanup
/// forgets them): a blob a file references is never forgotten.
pub fn knowledge_forgetting_blobs_never_drops_a_referenced_one(store: &dyn Store) {
    let c = kb(store, "kb");
    let h = hash(1);
    use std::sync::atomic::{AtomicBool, Ordering};
    /// Stops the collector when the uploader ends, panicking or not.
    struct StopOnDrop<'a>(&'a AtomicBool);
    impl Drop for StopOnDrop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                store
                    .forget_blobs(std::slice::from_ref(&h))
                    .expect("forget_blobs");
            }
        });
        let _stop = StopOnDrop(&stop);
        for i in 0..40 {
            let f = add(store, c, &[new_file("a.md", &h)]);
            assert!(
                store.blob_known(&h).expect("blob_known"),
                "iteration {i}: a referenced blob was forgotten"
            );
            store.delete_kb_file(c, f[0].row_id).expect("delete");
        }
    });
}

/// The same bytes in several knowledge bases, converted at once (several nodes' workers):
/// every conversion succeeds and each document gets a docid of its own.
pub fn knowledge_concurrent_conversions_of_the_same_bytes_get_distinct_docids(store: &dyn Store) {
    for round in 1..=3u32 {
        // Hashes of each round start with their own digit: the rounds share no docid.
        let sha = format!("{round:x}{}", "0".repeat(63));
        let rows: Vec<i64> = (0..4)
            .map(|i| {
                let c = kb(store, &format!("kb{round}-{i}"));
                add(store, c, &[new_file("a.md", &sha)])[0].row_id
            })
            .collect();
        std::thread::scope(|s| {
            for &row in &rows {
                s.spawn(move || {
                    store
                        .file_converted(None, row, converted("# same"))
                        .expect("concurrent file_converted")
                        .expect("stored")
                });
            }
        });
        let mut docids: Vec<String> = rows
            .iter()
            .map(|&r| file(store, r).docid.expect("a docid"))
            .collect();
        docids.sort();
        let want: Vec<String> = (6..10).map(|n| format!("#{}", &sha[..n])).collect();
        assert_eq!(docids, want, "round {round}: the shortest free docid each");
    }
}

/// A file's readers are kept as given (none, some, or an empty list: only admins); the
/// files with readers of their own are listed per collection, and their readers change.
pub fn knowledge_files_with_readers_are_listed_apart_and_their_readers_change(store: &dyn Store) {
    let a = kb(store, "a");
    let b = kb(store, "b");
    let hr = vec!["group:hr".to_owned(), "user:ann".to_owned()];
    let files = add(
        store,
        a,
        &[
            new_file("open.md", &hash(1)),
            NewKbFile {
                readers: Some(hr.clone()),
                ..new_file("hr.md", &hash(2))
            },
            NewKbFile {
                readers: Some(Vec::new()),
                ..new_file("admins.md", &hash(3))
            },
        ],
    );
    add(
        store,
        b,
        &[NewKbFile {
            readers: Some(hr.clone()),
            ..new_file("b.md", &hash(4))
        }],
    );
    assert_eq!(files[0].readers, None);
    assert_eq!(file(store, files[1].row_id).readers, Some(hr.clone()));
    assert_eq!(file(store, files[2].row_id).readers, Some(Vec::new()));
    let mut restricted = store.restricted_files(&[a]).expect("restricted_files");
    restricted.sort_by_key(|f| f.row_id);
    assert_eq!(
        restricted
            .iter()
            .map(|f| (f.row_id, f.readers.clone(), f.collection_id, f.size))
            .collect::<Vec<_>>(),
        [
            (files[1].row_id, hr.clone(), a, 3),
            (files[2].row_id, Vec::new(), a, 3)
        ]
    );
    assert_eq!(store.restricted_files(&[a, b]).expect("both").len(), 3);
    assert!(store.restricted_files(&[]).expect("none").is_empty());
    // Changed, opened to everyone, and never through another collection.
    assert!(
        !store
            .set_file_readers(b, files[0].row_id, Some(&hr))
            .expect("wrong collection")
    );
    assert_eq!(file(store, files[0].row_id).readers, None);
    assert!(
        store
            .set_file_readers(a, files[0].row_id, Some(&hr[..1]))
            .expect("set")
    );
    assert_eq!(file(store, files[0].row_id).readers, Some(hr[..1].to_vec()));
    assert!(
        store
            .set_file_readers(a, files[1].row_id, None)
            .expect("open")
    );
    assert_eq!(file(store, files[1].row_id).readers, None);
    assert_eq!(store.restricted_files(&[a]).expect("again").len(), 2);
}
