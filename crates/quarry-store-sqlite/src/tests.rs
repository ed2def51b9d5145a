//! Tests of the store as a whole: docids, renames, chunks and the migrations from old
//! schemas.

use quarry_core::{CollectionKind, Error, Result};
use rusqlite::Connection;

use quarry_store::{ChunkSource, CollectionStore, DocChange, DocChunks, SemanticStore};

use crate::migrate::{MIGRATIONS, SCHEMA_VERSION, schema_at};
use crate::store::SqliteStore;

/// The default space's documents whose chunks are missing or stale.
fn to_chunk(store: &SqliteStore) -> Result<Vec<ChunkSource>> {
    let ids: Vec<i64> = store
        .document_summaries("default")?
        .iter()
        .map(|d| d.id)
        .collect();
    store.chunk_sources(&ids)
}

fn upsert(path: &str, hash: &str) -> DocChange {
    DocChange::Upsert {
        meta: Default::default(),
        path: path.into(),
        title: path.into(),
        hash: hash.into(),
        size: 1,
        stamp: 1,
        body: "body".into(),
        pages: Vec::new(),
        furniture: Vec::new(),
    }
}

#[test]
fn docid_collisions_get_longer_ids() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("q.db")).unwrap();
    let c = store
        .create_collection("default", "c", CollectionKind::Folder, "/x", "**/*.md")
        .unwrap();
    store
        .apply_changes(
            c.id,
            vec![
                upsert("a.md", "abcdef111111"),
                upsert("b.md", "abcdef222222"),
                upsert("c.md", "abcdef111111"),
            ],
        )
        .unwrap();
    let ids: Vec<String> = store
        .document_summaries("default")
        .unwrap()
        .into_iter()
        .map(|d| d.docid)
        .collect();
    assert_eq!(ids, ["#abcdef", "#abcdef2", "#abcdef1"]);
}

#[test]
fn rename_moves_contexts_and_refuses_clash() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("q.db")).unwrap();
    for n in ["a", "b"] {
        store
            .create_collection("default", n, CollectionKind::Folder, "/x", "**/*.md")
            .unwrap();
    }
    store.set_context("default", "a/notes", "n").unwrap();
    store.set_context("default", "ab/x", "other").unwrap();
    assert!(matches!(
        store.rename_collection("default", "a", "b"),
        Err(Error::Conflict(_))
    ));
    store.rename_collection("default", "a", "z").unwrap();
    let paths: Vec<String> = store
        .contexts("default")
        .unwrap()
        .into_iter()
        .map(|c| c.path)
        .collect();
    assert_eq!(paths, ["ab/x", "z/notes"]);
}

fn chunk(start: usize, end: usize, hash: &str) -> quarry_store::NewChunk {
    quarry_store::NewChunk {
        page: None,
        heading: String::new(),
        byte_start: start,
        byte_end: end,
        line_start: 1,
        line_end: 1,
        hash: hash.into(),
        text: None,
    }
}

#[test]
fn migrations_run_from_one_to_the_schema_version_without_gaps() {
    let versions: Vec<i64> = MIGRATIONS.iter().map(|(v, _)| *v).collect();
    assert_eq!(versions, (1..=SCHEMA_VERSION).collect::<Vec<_>>());
    // Every file applies on top of the ones before it, and a new database ends there.
    let conn = Connection::open_in_memory().unwrap();
    schema_at(&conn, SCHEMA_VERSION);
}

#[test]
fn version_1_databases_are_upgraded_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("q.db");
    {
        let conn = Connection::open(&path).unwrap();
        schema_at(&conn, 1);
        conn.execute_batch(
            "PRAGMA user_version = 1; \
             INSERT INTO spaces VALUES ('default', 0); \
             INSERT INTO collections (space, name, kind, path, pattern, created_at) VALUES ('default', 'c', 'folder', '/x', '*.md', 0); \
             INSERT INTO documents (collection_id, path, title, hash, docid, size, stamp, body, body_bytes, fts_dirty, indexed_at) \
             VALUES (1, 'a.md', 'A', 'aaaaaaaa', '#aaaaaa', 4, 1, 'body', 4, 0, 0);",
        )
        .unwrap();
    }
    let store = SqliteStore::open(&path).unwrap();
    let version: i64 = store
        .conn()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
    let todo = to_chunk(&store).unwrap();
    assert_eq!(todo.len(), 1);
    assert_eq!(todo[0].body, "body");
    // Opening again does not migrate twice.
    drop(store);
    SqliteStore::open(&path).unwrap();
}

#[test]
fn version_33_databases_keep_their_rows_when_names_go_per_readers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("q.db");
    {
        let conn = Connection::open(&path).unwrap();
        schema_at(&conn, 33);
        conn.execute_batch(
            "PRAGMA user_version = 33; PRAGMA foreign_keys = ON; \
             INSERT INTO spaces (id, created_at) VALUES ('default', 0); \
             INSERT INTO collections (space, name, kind, path, pattern, created_at) VALUES ('default', 'kb', 'knowledge_base', '', '', 0); \
             INSERT INTO collections (space, name, kind, path, pattern, created_at) VALUES ('default', 'f', 'folder', '/x', '*.md', 0); \
             INSERT INTO documents (id, collection_id, path, title, hash, docid, size, stamp, body, body_bytes, indexed_at) \
             VALUES (7, 1, 'a.md', 'A', 'aaaaaaaa', '#aaaaaa', 4, 0, 'body', 4, 0), \
                    (8, 2, 'b.md', 'B', 'bbbbbbbb', '#bbbbbb', 4, 7, 'body', 4, 0), \
                    (40, 2, 'gone.md', 'G', 'cccccccc', '#cccccc', 4, 7, 'body', 4, 0); \
             DELETE FROM documents WHERE id = 40; \
             INSERT INTO kb_files (id, uid, collection_id, name, original_name, blob, format, mime, size, status, created_at, updated_at, document_id) \
             VALUES (3, 'u3', 1, 'a.md', 'a.md', 'aaaaaaaa', 'md', 'text/markdown', 4, 'ready', 0, 0, 7), \
                    (90, 'u90', 1, 'x.md', 'x.md', 'dddddddd', 'md', 'text/markdown', 4, 'ready', 0, 0, NULL); \
             DELETE FROM kb_files WHERE id = 90; \
             INSERT INTO chunk_edits (document_id, key, text, disabled, edited_by, edited_at) VALUES (7, 'k', 'edited', 0, 'ann', 0);",
        )
        .unwrap();
    }
    let feed = |conn: &Connection| -> i64 {
        conn.query_row("SELECT count(*) FROM feed", [], |r| r.get(0))
            .unwrap()
    };
    let before = feed(&Connection::open(&path).unwrap());
    let store = SqliteStore::open(&path).unwrap();
    let conn = store.conn();
    assert_eq!(feed(&conn), before, "no document enters the feed");
    let owners: Vec<(i64, Option<i64>)> = conn
        .prepare("SELECT id, kb_file FROM documents ORDER BY id")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    assert_eq!(owners, [(7, Some(3)), (8, None)]);
    let edits: i64 = conn
        .query_row(
            "SELECT count(*) FROM chunk_edits WHERE document_id = 7",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(edits, 1, "curation edits survive the rebuild");
    let seq = |table: &str| -> i64 {
        conn.query_row(
            "SELECT seq FROM sqlite_sequence WHERE name = ?1",
            [table],
            |r| r.get(0),
        )
        .unwrap()
    };
    assert_eq!(
        (seq("documents"), seq("kb_files")),
        (40, 90),
        "ids are never handed out again"
    );
    drop(conn);
    let found = quarry_store::KnowledgeStore::kb_file(&store, 1, "a.md").unwrap();
    assert_eq!(found.map(|f| f.row_id), Some(3));
}

#[test]
fn version_20_documents_with_front_matter_are_read_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("q.db");
    {
        let conn = Connection::open(&path).unwrap();
        schema_at(&conn, 20);
        conn.execute_batch(
            "PRAGMA user_version = 20; \
             INSERT INTO spaces (id, created_at) VALUES ('default', 0); \
             INSERT INTO collections (space, name, kind, path, pattern, created_at) VALUES ('default', 'c', 'folder', '/x', '*.md', 0); \
             INSERT INTO documents (collection_id, path, title, hash, docid, size, stamp, body, body_bytes, indexed_at) \
             VALUES (1, 'a.md', 'A', 'aaaaaaaa', '#aaaaaa', 4, 7, '---
tag: x
---
body', 4, 0), \
                    (1, 'b.md', 'B', 'bbbbbbbb', '#bbbbbb', 4, 7, '# B

body', 4, 0);",
        )
        .unwrap();
    }
    let store = SqliteStore::open(&path).unwrap();
    let states = store.file_states(1).unwrap();
    assert_eq!(
        (states["a.md"].hash.as_str(), states["a.md"].stamp),
        ("", 0)
    );
    assert_eq!(
        (states["b.md"].hash.as_str(), states["b.md"].stamp),
        ("bbbbbbbb", 7)
    );
    let docs = store.documents_by_ids(&[1, 2]).unwrap();
    assert!(docs.iter().all(|d| d.meta == "{}"));
}

#[test]
fn version_7_databases_gain_furniture_and_headings_and_are_chunked_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("q.db");
    {
        let conn = Connection::open(&path).unwrap();
        schema_at(&conn, 7);
        conn.execute_batch(
            "PRAGMA user_version = 7; \
             INSERT INTO spaces (id, created_at) VALUES ('default', 0); \
             INSERT INTO collections (space, name, kind, path, pattern, created_at) VALUES ('default', 'c', 'folder', '/x', '*.pdf', 0); \
             INSERT INTO documents (collection_id, path, title, hash, docid, size, stamp, body, body_bytes, fts_dirty, indexed_at, pages, chunked_hash) \
             VALUES (1, 'a.pdf', 'A', 'aaaaaaaa', '#aaaaaa', 4, 1, 'body', 4, 0, 0, '1:0:4', 'aaaaaaaa'); \
             INSERT INTO chunks (document_id, seq, byte_start, byte_end, line_start, line_end, hash, ann_dirty, page) \
             VALUES (1, 0, 0, 4, 1, 1, 'k0', 0, 1);",
        )
        .unwrap();
    }
    let store = SqliteStore::open(&path).unwrap();
    let version: i64 = store
        .conn()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
    // The old chunk still serves, without a heading, until the document is cut again.
    let old = store.chunks_of_documents(&[1]).unwrap();
    assert_eq!((old.len(), old[0].heading.as_str()), (1, ""));
    let todo = to_chunk(&store).unwrap();
    assert_eq!(todo.len(), 1, "every document is cut again");
    assert!(todo[0].furniture.is_empty());
    store
        .replace_chunks(&[DocChunks {
            document_id: 1,
            doc_hash: "aaaaaaaa".into(),
            chunks: vec![quarry_store::NewChunk {
                heading: "3 Root › 3.15 /tmp".into(),
                ..chunk(0, 4, "k1")
            }],
        }])
        .unwrap();
    let refs = store.chunks_of_documents(&[1]).unwrap();
    assert_eq!(refs[0].heading, "3 Root › 3.15 /tmp");
    assert_eq!(
        store.chunk_refs(&[refs[0].id]).unwrap()[0].heading,
        refs[0].heading
    );
    let jobs = store.embed_jobs("default", None, "m", None).unwrap();
    assert_eq!(jobs[0].heading, "3 Root › 3.15 /tmp");
    // Opening again does not migrate twice (nor cut everything again).
    drop(store);
    let store = SqliteStore::open(&path).unwrap();
    assert!(to_chunk(&store).unwrap().is_empty());
}

#[test]
fn furniture_is_kept_and_a_new_layout_of_the_same_file_is_cut_again() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("q.db")).unwrap();
    let c = store
        .create_collection("default", "c", CollectionKind::Folder, "/x", "**/*.pdf")
        .unwrap();
    let toc = quarry_core::Furniture {
        kind: quarry_core::FurnitureKind::Contents,
        byte_start: 0,
        byte_end: 2,
    };
    let with = |furniture: Vec<quarry_core::Furniture>| DocChange::Upsert {
        meta: Default::default(),
        path: "a.pdf".into(),
        title: "A".into(),
        hash: "h1111111".into(),
        size: 1,
        stamp: 1,
        body: "body".into(),
        pages: Vec::new(),
        furniture,
    };
    let work = store.apply_changes(c.id, vec![with(vec![toc])]).unwrap();
    let id = work.upserts[0].id;
    assert_eq!(store.documents_by_ids(&[id]).unwrap()[0].furniture, [toc]);
    let todo = to_chunk(&store).unwrap();
    assert_eq!(todo[0].furniture, [toc]);
    let cut = || {
        store
            .replace_chunks(&[DocChunks {
                document_id: id,
                doc_hash: "h1111111".into(),
                chunks: vec![chunk(2, 4, "k1")],
            }])
            .unwrap()
    };
    cut();
    // The same file converted the same way keeps its chunks.
    store.apply_changes(c.id, vec![with(vec![toc])]).unwrap();
    assert_eq!(store.chunks_of_documents(&[id]).unwrap().len(), 1);
    assert!(to_chunk(&store).unwrap().is_empty());
    // Converted again with other furniture (a newer converter): cut again.
    store.apply_changes(c.id, vec![with(Vec::new())]).unwrap();
    assert!(store.chunks_of_documents(&[id]).unwrap().is_empty());
    assert_eq!(to_chunk(&store).unwrap().len(), 1);
    assert!(
        store.documents_by_ids(&[id]).unwrap()[0]
            .furniture
            .is_empty()
    );
}

#[test]
fn chunks_embeddings_and_ann_flags_follow_the_documents() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("q.db")).unwrap();
    let c = store
        .create_collection("default", "c", CollectionKind::Folder, "/x", "**/*.md")
        .unwrap();
    let work = store
        .apply_changes(c.id, vec![upsert("a.md", "h1111111")])
        .unwrap();
    let doc = work.upserts[0].id;
    // Chunks cut from content that has since changed are refused.
    store
        .replace_chunks(&[DocChunks {
            document_id: doc,
            doc_hash: "stale".into(),
            chunks: vec![chunk(0, 4, "x")],
        }])
        .unwrap();
    assert_eq!(
        store.embedding_state("default", None, None).unwrap().chunks,
        0
    );
    store
        .replace_chunks(&[DocChunks {
            document_id: doc,
            doc_hash: "h1111111".into(),
            chunks: vec![chunk(0, 2, "k1"), chunk(2, 4, "k1"), chunk(0, 4, "k2")],
        }])
        .unwrap();
    assert!(to_chunk(&store).unwrap().is_empty());
    // Distinct texts only, sliced by byte range.
    let jobs = store.embed_jobs("default", None, "m", None).unwrap();
    assert_eq!(jobs.len(), 2);
    assert!(jobs.iter().any(|j| j.hash == "k2" && j.text == "body"));
    store
        .put_embeddings("m", &[("k1".into(), vec![1.0, 0.0])])
        .unwrap();
    assert_eq!(
        store.embed_jobs("default", None, "m", None).unwrap().len(),
        1
    );
    assert_eq!(
        store
            .embed_jobs("default", None, "other", None)
            .unwrap()
            .len(),
        2
    );
    let dirty = store.ann_dirty_chunks("m", 0, 10).unwrap();
    assert_eq!(dirty.len(), 2, "both chunks with text k1 have a vector");
    assert_eq!(dirty[0].1, vec![1.0, 0.0]);
    let ids: Vec<i64> = dirty.iter().map(|d| d.0).collect();
    store.ann_done(&[], &ids).unwrap();
    assert!(store.ann_dirty_chunks("m", 0, 10).unwrap().is_empty());
    assert_eq!(
        store
            .embedding_state("default", None, Some("m"))
            .unwrap()
            .documents_pending,
        1,
        "chunk k2 has no vector yet"
    );
    // New content: the old chunks go, leaving tombstones for the ANN index.
    store
        .apply_changes(c.id, vec![upsert("a.md", "h2222222")])
        .unwrap();
    let mut tomb = store.ann_tombstones().unwrap();
    tomb.sort();
    let mut all = ids.clone();
    all.push(ids[1] + 1);
    all.sort();
    assert_eq!(tomb, all);
    assert_eq!(to_chunk(&store).unwrap().len(), 1);
    store.ann_done(&tomb, &[]).unwrap();
    assert!(store.ann_tombstones().unwrap().is_empty());
    // A model switch re-flags every chunk; vectors of other models stay stored.
    store
        .replace_chunks(&[DocChunks {
            document_id: doc,
            doc_hash: "h2222222".into(),
            chunks: vec![chunk(0, 4, "k1")],
        }])
        .unwrap();
    let fresh: Vec<i64> = store
        .ann_dirty_chunks("m", 0, 10)
        .unwrap()
        .iter()
        .map(|d| d.0)
        .collect();
    store.ann_done(&[], &fresh).unwrap();
    store.ann_reset().unwrap();
    assert_eq!(store.ann_dirty_chunks("m", 0, 10).unwrap().len(), 1);
    // Removing the collection drops its chunks with tombstones.
    store.remove_collection("default", "c").unwrap();
    assert_eq!(store.ann_tombstones().unwrap(), fresh);
}
