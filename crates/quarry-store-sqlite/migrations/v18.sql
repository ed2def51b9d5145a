-- Version 18 (issue 43): sources that sync a knowledge base. A source row holds where it is
-- (no credential: that is `secret`, sealed by the engine), its schedule, the lease of the
-- node syncing it and its failures; each sync leaves a report. A synced document is a
-- `kb_files` row that also names its source, path and version. Uploads still refuse a
-- second copy of the same bytes in a knowledge base; synced files do not (a source may hold
-- two equal files), so that uniqueness becomes a partial index over uploads: SQLite changes
-- a constraint by rebuilding the table.
CREATE TABLE sources (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    uid TEXT NOT NULL UNIQUE,
    collection_id INTEGER NOT NULL REFERENCES collections(id),
    kind TEXT NOT NULL,
    location TEXT NOT NULL,
    mask TEXT NOT NULL,
    interval_ms INTEGER,
    secret TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    last_sync_at INTEGER,
    last_success_at INTEGER,
    next_sync_at INTEGER,
    failures INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    lease_owner TEXT,
    lease_until INTEGER,
    lease_token INTEGER NOT NULL DEFAULT 0,
    UNIQUE (collection_id, kind, location)
);
CREATE INDEX sources_due ON sources(next_sync_at);
CREATE TABLE sync_reports (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    uid TEXT NOT NULL UNIQUE,
    source_id INTEGER NOT NULL,
    lease_token INTEGER NOT NULL,
    started_at INTEGER NOT NULL,
    finished_at INTEGER,
    status TEXT NOT NULL,
    revision TEXT,
    counts TEXT NOT NULL DEFAULT '{}',
    details TEXT NOT NULL DEFAULT '[]',
    error TEXT
);
CREATE INDEX sync_reports_source ON sync_reports(source_id, id);
CREATE TABLE kb_files_v18 (
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
    UNIQUE (collection_id, name)
);
INSERT INTO kb_files_v18 (id, uid, collection_id, name, original_name, blob, format, mime, size,
        status, error, pages, pages_without_text, warnings, document_id, attempts, created_at,
        updated_at, note_kind, note_title, note_tags, note_summary)
    SELECT id, uid, collection_id, name, original_name, blob, format, mime, size, status, error,
        pages, pages_without_text, warnings, document_id, attempts, created_at, updated_at,
        note_kind, note_title, note_tags, note_summary FROM kb_files;
-- Row ids of deleted files are not handed out again.
UPDATE sqlite_sequence
    SET seq = MAX(seq, COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'kb_files'), 0))
    WHERE name = 'kb_files_v18';
INSERT INTO sqlite_sequence (name, seq)
    SELECT 'kb_files_v18', seq FROM sqlite_sequence WHERE name = 'kb_files'
    AND NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'kb_files_v18');
DROP TABLE kb_files;
ALTER TABLE kb_files_v18 RENAME TO kb_files;
CREATE INDEX kb_files_blob ON kb_files(blob);
CREATE INDEX kb_files_document ON kb_files(document_id);
CREATE UNIQUE INDEX kb_files_upload_blob ON kb_files(collection_id, blob) WHERE source_id IS NULL;
CREATE UNIQUE INDEX kb_files_source_path ON kb_files(source_id, source_path) WHERE source_id IS NOT NULL;
