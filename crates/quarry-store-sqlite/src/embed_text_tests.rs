//! Reading the chunk texts to embed costs memory set by what is read, not by the size of
//! the document they come from (issue 65: one 4,000-chunk document took 20.5 GB to embed).

use quarry_store::{
    ConvertedFile, DocChunks, JobKind, JobQueue, KnowledgeStore, NewChunk, NewKbFile, SemanticStore,
};

use crate::store::SqliteStore;

/// Chunks of the long document, each `CHUNK` bytes: the body is `CHUNKS * CHUNK` bytes.
const CHUNKS: usize = 1_200;
const CHUNK: usize = 500;

/// A knowledge base holding one long document cut into [`CHUNKS`] chunks of [`CHUNK`] bytes
/// (the third starts with a multibyte character; the fifth carries a person's edit), none
/// embedded. Returns the store, the collection and each chunk's expected text by hash.
fn long_document() -> (
    tempfile::TempDir,
    SqliteStore,
    i64,
    std::collections::HashMap<String, String>,
) {
    let dir = tempfile::tempdir().unwrap();
    let s = SqliteStore::open(&dir.path().join("q.db")).unwrap();
    let kb = s
        .create_knowledge_base("default", "kb", "", None)
        .unwrap()
        .collection_id;
    let added = s
        .add_files(
            kb,
            &[NewKbFile {
                meta: Default::default(),
                original_name: "long.md".into(),
                sha256: "ab".repeat(32),
                format: "md".into(),
                mime: "text/markdown".into(),
                size: (CHUNKS * CHUNK) as u64,
                note: None,
                readers: None,
            }],
        )
        .unwrap();
    let file = added[0].file().clone();
    let mut body = String::with_capacity(CHUNKS * CHUNK);
    for i in 0..CHUNKS {
        // "é" is two bytes: 2 + 498 ASCII bytes keeps every chunk CHUNK bytes long.
        let lead = if i == 2 { "é" } else { "ab" };
        let line = format!("{lead}{i:07} ");
        body.push_str(&line);
        body.push_str(&"x".repeat(CHUNK - line.len()));
    }
    assert_eq!(body.len(), CHUNKS * CHUNK);
    s.file_converted(
        None,
        file.row_id,
        ConvertedFile {
            meta: Default::default(),
            title: "Long".into(),
            markdown: body.clone(),
            pages: Vec::new(),
            furniture: Vec::new(),
            page_count: None,
            pages_without_text: None,
            warnings: Vec::new(),
            images: Vec::new(),
        },
    )
    .unwrap()
    .unwrap();
    let id = s
        .kb_file_by_row(file.row_id)
        .unwrap()
        .unwrap()
        .document_id
        .unwrap();
    let source = s.chunk_sources(&[id]).unwrap();
    let mut expected = std::collections::HashMap::new();
    let chunks: Vec<NewChunk> = (0..CHUNKS)
        .map(|i| {
            let hash = format!("c{i:05}");
            let edited = (i == 4).then(|| "a person's own text".to_owned());
            let text = edited
                .clone()
                .unwrap_or_else(|| body[i * CHUNK..(i + 1) * CHUNK].to_owned());
            expected.insert(hash.clone(), text);
            NewChunk {
                byte_start: i * CHUNK,
                byte_end: (i + 1) * CHUNK,
                line_start: 1,
                line_end: 1,
                hash,
                page: None,
                heading: String::new(),
                text: edited,
            }
        })
        .collect();
    s.replace_chunks(&[DocChunks {
        document_id: id,
        doc_hash: source[0].hash.clone(),
        chunks,
    }])
    .unwrap();
    (dir, s, kb, expected)
}

/// The most memory SQLite held at once while `f` ran, above what it held before.
fn sqlite_peak_during<T>(f: impl FnOnce() -> T) -> (T, i64) {
    // SAFETY: both read (and the first resets) SQLite's own allocation statistics.
    let before = unsafe {
        rusqlite::ffi::sqlite3_memory_highwater(1);
        rusqlite::ffi::sqlite3_memory_used()
    };
    let out = f();
    let peak = unsafe { rusqlite::ffi::sqlite3_memory_highwater(0) };
    (out, peak - before)
}

/// An embed job's round claims 256 texts of a 1,200-chunk document (600 KB of body): SQLite
/// held the whole body once per chunk of the document while it grouped and sorted them
/// (1,200 × 600 KB = 720 MB here; 20.5 GB for a 4,000-chunk document), and the time grew
/// with the square of the document. Now the body is read once per round.
#[test]
fn claiming_texts_of_a_long_document_reads_its_body_once() {
    let (_d, s, kb, expected) = long_document();
    s.enqueue_embed(kb).unwrap();
    let job = loop {
        let job = s.claim_job("n1:0", 60_000).unwrap().expect("a job");
        if job.kind == JobKind::Embed {
            break job;
        }
        assert!(s.complete_job(job.lease()).unwrap());
    };
    let (claimed, peak) = sqlite_peak_during(|| {
        s.claim_embed_chunks(job.lease(), "default", kb, "m", 256)
            .unwrap()
            .expect("the lease holds")
    });
    assert!(claimed.more);
    assert_eq!(claimed.texts.len(), 256);
    for t in &claimed.texts {
        assert_eq!(t.title, "Long");
        assert_eq!(Some(&t.text), expected.get(&t.hash), "{}", t.hash);
    }
    let body = (CHUNKS * CHUNK) as i64;
    assert!(
        peak < 16 * body,
        "claiming 256 texts held {peak} bytes in SQLite at once: {} bodies of {body}",
        peak / body
    );
}

/// `quarry embed` reads every text without a vector: the same bound, and every text right
/// (a multibyte character at a chunk's start, a person's edit).
#[test]
fn reading_every_text_of_a_long_document_reads_its_body_once() {
    let (_d, s, _kb, expected) = long_document();
    let (jobs, peak) = sqlite_peak_during(|| s.embed_jobs("default", None, "m", None).unwrap());
    assert_eq!(jobs.len(), CHUNKS);
    for t in &jobs {
        assert_eq!(Some(&t.text), expected.get(&t.hash), "{}", t.hash);
    }
    assert!(expected["c00002"].starts_with('é'));
    assert_eq!(expected["c00004"], "a person's own text");
    let body = (CHUNKS * CHUNK) as i64;
    assert!(
        peak < 16 * body,
        "reading every text held {peak} bytes in SQLite at once: {} bodies of {body}",
        peak / body
    );
}
