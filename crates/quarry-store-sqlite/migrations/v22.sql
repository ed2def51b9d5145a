-- Version 22 (issue 44): knowledge entries with time. An entry written with a key supersedes
-- the key's current one (`superseded_by`); its validity window is [valid_from or created_at,
-- valid_until), `valid_until` being the earliest of `valid_to`, `expires_at` and its
-- successor's start. `provenance` (a JSON object; NULL for files that are not entries) says
-- who wrote it and from where; `kb_derivations` what it was derived from; `kb_history` what
-- happened to entries, deleted ones included.
ALTER TABLE kb_files ADD COLUMN entry_key TEXT;
ALTER TABLE kb_files ADD COLUMN valid_from INTEGER;
ALTER TABLE kb_files ADD COLUMN valid_to INTEGER;
ALTER TABLE kb_files ADD COLUMN expires_at INTEGER;
ALTER TABLE kb_files ADD COLUMN valid_until INTEGER;
ALTER TABLE kb_files ADD COLUMN superseded_by INTEGER;
ALTER TABLE kb_files ADD COLUMN provenance TEXT;
CREATE TABLE kb_derivations (
    file_id INTEGER NOT NULL,
    source_id INTEGER NOT NULL,
    PRIMARY KEY (file_id, source_id)
);
CREATE INDEX kb_derivations_source ON kb_derivations(source_id);
CREATE TABLE kb_history (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    collection_id INTEGER NOT NULL,
    entry TEXT NOT NULL,
    entry_key TEXT,
    event TEXT NOT NULL,
    at INTEGER NOT NULL,
    detail TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX kb_history_entry ON kb_history(collection_id, entry);
CREATE INDEX kb_history_key ON kb_history(collection_id, entry_key) WHERE entry_key IS NOT NULL;
-- One current entry per key; the same content twice only among current entries (an older
-- version may say what the current one says again).
CREATE UNIQUE INDEX kb_files_current_key ON kb_files(collection_id, entry_key)
    WHERE entry_key IS NOT NULL AND superseded_by IS NULL;
DROP INDEX kb_files_upload_blob;
CREATE UNIQUE INDEX kb_files_upload_blob ON kb_files(collection_id, blob)
    WHERE source_id IS NULL AND superseded_by IS NULL;
-- A read at a moment asks for the entries whose window ended by then or starts after it:
-- range scans of these, small for a moment near now.
CREATE INDEX kb_files_valid_until ON kb_files(valid_until) WHERE valid_until IS NOT NULL;
CREATE INDEX kb_files_valid_from ON kb_files(valid_from) WHERE valid_from IS NOT NULL;
