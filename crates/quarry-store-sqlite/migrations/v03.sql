-- Version 3: knowledge bases. Uploaded originals and extracted images are blobs (by
-- SHA-256; the bytes live in the blob store, rows here say who references them); each
-- upload is a `kb_files` row whose searchable form is an ordinary document; `jobs` is the
-- ingestion queue, claimed with leases. Chunks and documents of paged sources keep pages.
ALTER TABLE collections ADD COLUMN uid TEXT;
ALTER TABLE collections ADD COLUMN description TEXT NOT NULL DEFAULT '';
ALTER TABLE collections ADD COLUMN chunk_size INTEGER;
ALTER TABLE collections ADD COLUMN chunk_overlap INTEGER;
ALTER TABLE collections ADD COLUMN updated_at INTEGER;
CREATE UNIQUE INDEX IF NOT EXISTS collections_uid ON collections(uid);
ALTER TABLE documents ADD COLUMN pages TEXT NOT NULL DEFAULT '';
ALTER TABLE chunks ADD COLUMN page INTEGER;
CREATE TABLE IF NOT EXISTS blobs (
    hash TEXT PRIMARY KEY,
    size INTEGER NOT NULL,
    mime TEXT NOT NULL,
    created_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS kb_files (
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
    UNIQUE (collection_id, name),
    UNIQUE (collection_id, blob)
);
CREATE INDEX IF NOT EXISTS kb_files_blob ON kb_files(blob);
CREATE TABLE IF NOT EXISTS file_images (
    file_id INTEGER NOT NULL,
    hash TEXT NOT NULL,
    PRIMARY KEY (file_id, hash)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS file_images_hash ON file_images(hash);
CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    file_id INTEGER UNIQUE,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    not_before INTEGER NOT NULL,
    lease_owner TEXT,
    lease_until INTEGER,
    error TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS jobs_runnable ON jobs(status, not_before);
