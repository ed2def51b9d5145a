-- Version 11: the document change feed replaces the `fts_dirty` flag and the
-- `fts_tombstones` table, which only one consumer could clear (issue 24). Triggers write
-- the feed, so no write path can forget it; an entry names the document, and a reader
-- resolves it against the document's current row (missing: removed). What the old flags
-- still owed the keyword index enters the feed, and the keyword index (consumer
-- `keyword`) stands at its start.
CREATE TABLE IF NOT EXISTS feed (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    document_id INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS feed_consumers (
    consumer TEXT PRIMARY KEY,
    seq INTEGER NOT NULL,
    rebuilding_after INTEGER
);
INSERT INTO feed (document_id) SELECT doc_id FROM fts_tombstones ORDER BY doc_id;
INSERT INTO feed (document_id) SELECT id FROM documents WHERE fts_dirty = 1 ORDER BY id;
INSERT INTO feed_consumers (consumer, seq) VALUES ('keyword', 0);
DROP TABLE fts_tombstones;
DROP INDEX IF EXISTS documents_fts_dirty;
ALTER TABLE documents DROP COLUMN fts_dirty;
CREATE TRIGGER IF NOT EXISTS documents_feed_insert AFTER INSERT ON documents
BEGIN INSERT INTO feed (document_id) VALUES (NEW.id); END;
CREATE TRIGGER IF NOT EXISTS documents_feed_update
AFTER UPDATE OF collection_id, path, title, body ON documents
BEGIN INSERT INTO feed (document_id) VALUES (NEW.id); END;
CREATE TRIGGER IF NOT EXISTS documents_feed_delete AFTER DELETE ON documents
BEGIN INSERT INTO feed (document_id) VALUES (OLD.id); END;
