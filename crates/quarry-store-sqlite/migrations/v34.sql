-- Version 34 (issue 65 item 6): a name names one document per set of readers, so a hidden
-- document's name no longer shows through an upload's name (`layoffs-2027 (2).md`): the
-- upload of a name that only a document of other readers holds gets that name exactly, as
-- when the name is free. Files: the unique name goes from (knowledge base, name) to
-- (knowledge base, name, readers). Documents: a knowledge-base file's document is its own
-- (`kb_file`), no longer one per path — two files of one name have two documents of one
-- path; a folder's documents stay one per path. Both tables are rebuilt (SQLite cannot drop
-- a table's UNIQUE constraint); row ids, and the ids never handed out again, are kept.

-- Files.
CREATE TABLE kb_files_v34 (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    uid TEXT NOT NULL UNIQUE,
    collection_id INTEGER NOT NULL REFERENCES collections(id),
    name TEXT NOT NULL,
    original_name TEXT NOT NULL,
    blob TEXT NOT NULL,
    format TEXT NOT NULL,
    mime TEXT NOT NULL,
    size INTEGER NOT NULL,
    status TEXT NOT NULL,
    error TEXT,
    pages INTEGER,
    pages_without_text TEXT,
    warnings TEXT NOT NULL DEFAULT '',
    document_id INTEGER,
    attempts INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    note_kind TEXT,
    note_title TEXT,
    note_tags TEXT NOT NULL DEFAULT '',
    note_summary TEXT,
    source_id INTEGER,
    source_path TEXT,
    source_version TEXT,
    readers TEXT,
    meta TEXT NOT NULL DEFAULT '{}',
    entry_key TEXT,
    valid_from INTEGER,
    valid_to INTEGER,
    expires_at INTEGER,
    valid_until INTEGER,
    superseded_by INTEGER,
    provenance TEXT
);
INSERT INTO kb_files_v34 (id, uid, collection_id, name, original_name, blob, format, mime, size,
        status, error, pages, pages_without_text, warnings, document_id, attempts, created_at,
        updated_at, note_kind, note_title, note_tags, note_summary, source_id, source_path,
        source_version, readers, meta, entry_key, valid_from, valid_to, expires_at, valid_until,
        superseded_by, provenance)
    SELECT id, uid, collection_id, name, original_name, blob, format, mime, size, status, error,
        pages, pages_without_text, warnings, document_id, attempts, created_at, updated_at,
        note_kind, note_title, note_tags, note_summary, source_id, source_path, source_version,
        readers, meta, entry_key, valid_from, valid_to, expires_at, valid_until, superseded_by,
        provenance FROM kb_files;
-- Row ids of deleted files are not handed out again.
UPDATE sqlite_sequence
    SET seq = MAX(seq, COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'kb_files'), 0))
    WHERE name = 'kb_files_v34';
INSERT INTO sqlite_sequence (name, seq)
    SELECT 'kb_files_v34', seq FROM sqlite_sequence WHERE name = 'kb_files'
    AND NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'kb_files_v34');
DROP TABLE kb_files;
ALTER TABLE kb_files_v34 RENAME TO kb_files;
CREATE INDEX kb_files_blob ON kb_files(blob);
CREATE INDEX kb_files_document ON kb_files(document_id);
CREATE UNIQUE INDEX kb_files_source_path ON kb_files(source_id, source_path) WHERE source_id IS NOT NULL;
CREATE INDEX kb_files_restricted ON kb_files(collection_id) WHERE readers IS NOT NULL;
CREATE INDEX kb_files_valid_until ON kb_files(valid_until) WHERE valid_until IS NOT NULL;
CREATE INDEX kb_files_valid_from ON kb_files(valid_from) WHERE valid_from IS NOT NULL;
CREATE INDEX kb_files_superseded_by ON kb_files(superseded_by) WHERE superseded_by IS NOT NULL;
CREATE UNIQUE INDEX kb_files_current_key ON kb_files(collection_id, entry_key, COALESCE(readers, ''))
    WHERE entry_key IS NOT NULL AND superseded_by IS NULL;
CREATE UNIQUE INDEX kb_files_upload_blob ON kb_files(collection_id, blob, COALESCE(readers, ''))
    WHERE source_id IS NULL AND superseded_by IS NULL;
CREATE UNIQUE INDEX kb_files_name ON kb_files(collection_id, name, COALESCE(readers, ''));

-- Documents. Dropping the old table would cascade to the curation edits (foreign keys are on
-- during migrations) and would record every document in the change feed: the edits are kept
-- aside, and the triggers dropped first.
CREATE TEMP TABLE chunk_edits_v34 AS SELECT * FROM chunk_edits;
CREATE TABLE documents_v34 (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    collection_id INTEGER NOT NULL REFERENCES collections(id),
    path TEXT NOT NULL,
    title TEXT NOT NULL,
    hash TEXT NOT NULL,
    docid TEXT NOT NULL UNIQUE,
    size INTEGER NOT NULL,
    stamp INTEGER NOT NULL,
    body TEXT NOT NULL,
    body_bytes INTEGER NOT NULL,
    indexed_at INTEGER NOT NULL,
    chunked_hash TEXT,
    pages TEXT NOT NULL DEFAULT '',
    furniture TEXT NOT NULL DEFAULT '',
    meta TEXT NOT NULL DEFAULT '{}',
    chunk_size INTEGER,
    chunk_overlap INTEGER,
    curation INTEGER NOT NULL DEFAULT 0,
    -- The knowledge-base file this is the document of; NULL for a folder's document.
    kb_file INTEGER
);
INSERT INTO documents_v34 (id, collection_id, path, title, hash, docid, size, stamp, body,
        body_bytes, indexed_at, chunked_hash, pages, furniture, meta, chunk_size, chunk_overlap,
        curation, kb_file)
    SELECT d.id, d.collection_id, d.path, d.title, d.hash, d.docid, d.size, d.stamp, d.body,
        d.body_bytes, d.indexed_at, d.chunked_hash, d.pages, d.furniture, d.meta, d.chunk_size,
        d.chunk_overlap, d.curation,
        (SELECT MIN(f.id) FROM kb_files f WHERE f.document_id = d.id)
    FROM documents d;
UPDATE sqlite_sequence
    SET seq = MAX(seq, COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'documents'), 0))
    WHERE name = 'documents_v34';
INSERT INTO sqlite_sequence (name, seq)
    SELECT 'documents_v34', seq FROM sqlite_sequence WHERE name = 'documents'
    AND NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'documents_v34');
DROP TRIGGER documents_feed_insert;
DROP TRIGGER documents_feed_update;
DROP TRIGGER documents_feed_delete;
DROP TABLE documents;
ALTER TABLE documents_v34 RENAME TO documents;
CREATE INDEX documents_hash ON documents(hash);
CREATE UNIQUE INDEX documents_path ON documents(collection_id, path) WHERE kb_file IS NULL;
CREATE UNIQUE INDEX documents_kb_file ON documents(kb_file) WHERE kb_file IS NOT NULL;
CREATE TRIGGER documents_feed_insert AFTER INSERT ON documents
BEGIN INSERT INTO feed (document_id) VALUES (NEW.id); END;
CREATE TRIGGER documents_feed_delete AFTER DELETE ON documents
BEGIN INSERT INTO feed (document_id) VALUES (OLD.id); END;
CREATE TRIGGER documents_feed_update
AFTER UPDATE OF collection_id, path, title, body, curation ON documents
BEGIN INSERT INTO feed (document_id) VALUES (NEW.id); END;
INSERT INTO chunk_edits SELECT * FROM temp.chunk_edits_v34;
DROP TABLE temp.chunk_edits_v34;
