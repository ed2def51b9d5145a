-- Version 2: the semantic layer. Chunks are derived from a document's body (`chunked_hash`
-- says which content they were cut from); embeddings are keyed by (model, chunk hash) so
-- unchanged text is never re-embedded and two models' vectors never mix; the ANN index over
-- chunk ids follows the same dirty-flag / tombstone protocol as the keyword index.
ALTER TABLE documents ADD COLUMN chunked_hash TEXT;
CREATE TABLE IF NOT EXISTS chunks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    document_id INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    byte_start INTEGER NOT NULL,
    byte_end INTEGER NOT NULL,
    line_start INTEGER NOT NULL,
    line_end INTEGER NOT NULL,
    hash TEXT NOT NULL,
    ann_dirty INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX IF NOT EXISTS chunks_document ON chunks(document_id);
CREATE INDEX IF NOT EXISTS chunks_hash ON chunks(hash);
CREATE INDEX IF NOT EXISTS chunks_ann_dirty ON chunks(ann_dirty) WHERE ann_dirty = 1;
-- Chunks removed from the store but maybe still present in the ANN index.
CREATE TABLE IF NOT EXISTS ann_tombstones (
    chunk_id INTEGER PRIMARY KEY
);
CREATE TABLE IF NOT EXISTS embeddings (
    model TEXT NOT NULL,
    hash TEXT NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (model, hash)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS expansions (
    model TEXT NOT NULL,
    query TEXT NOT NULL,
    variants TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (model, query)
);
