-- Version 1: spaces, collections, documents, the keyword index's dirty flags and contexts.
CREATE TABLE IF NOT EXISTS spaces (
    id TEXT PRIMARY KEY,
    created_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS collections (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    space TEXT NOT NULL REFERENCES spaces(id),
    name TEXT NOT NULL,
    kind TEXT NOT NULL,
    path TEXT NOT NULL,
    pattern TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    last_updated INTEGER,
    UNIQUE (space, name)
);
-- AUTOINCREMENT: ids are never reused, so a stale tombstone can never delete a newer
-- document from a derived index.
CREATE TABLE IF NOT EXISTS documents (
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
    fts_dirty INTEGER NOT NULL DEFAULT 1,
    indexed_at INTEGER NOT NULL,
    UNIQUE (collection_id, path)
);
CREATE INDEX IF NOT EXISTS documents_fts_dirty ON documents(fts_dirty) WHERE fts_dirty = 1;
CREATE INDEX IF NOT EXISTS documents_hash ON documents(hash);
-- Documents removed from the store but maybe still present in a derived index.
CREATE TABLE IF NOT EXISTS fts_tombstones (
    doc_id INTEGER PRIMARY KEY
);
CREATE TABLE IF NOT EXISTS contexts (
    space TEXT NOT NULL REFERENCES spaces(id),
    path TEXT NOT NULL,
    text TEXT NOT NULL,
    PRIMARY KEY (space, path)
);
