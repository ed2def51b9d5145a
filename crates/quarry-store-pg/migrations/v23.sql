-- Version 23 (issue 44, item 6): people curate chunks. `chunk_edits` holds what a person
-- changed in a document's chunk, keyed by the chunk as cut (a hash of its heading path and
-- text): a replacement text or "disabled". Chunks are cut with the edits applied, so an edit
-- stays while a re-sync or a re-cut produces the same chunk, and a disabled chunk is never
-- stored as a chunk (no passage, no vector). `chunks.text` is an edited chunk's text (NULL:
-- its span of the body). A document may have its own chunk size and overlap
-- (`documents.chunk_size`, `chunk_overlap`: a re-cut with other settings). `curation` counts
-- curation changes: its update puts the document on the change feed, so every node re-cuts
-- and re-indexes its passages.
ALTER TABLE chunks ADD COLUMN text text;
ALTER TABLE documents ADD COLUMN chunk_size integer;
ALTER TABLE documents ADD COLUMN chunk_overlap integer;
ALTER TABLE documents ADD COLUMN curation bigint NOT NULL DEFAULT 0;
CREATE TABLE chunk_edits (
    document_id bigint NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    key text NOT NULL,
    text text,
    disabled boolean NOT NULL DEFAULT false,
    edited_by text NOT NULL,
    edited_at bigint NOT NULL,
    PRIMARY KEY (document_id, key)
);
DROP TRIGGER documents_feed_update ON documents;
CREATE TRIGGER documents_feed_update AFTER UPDATE OF collection_id, path, title, body, curation ON documents
    FOR EACH ROW EXECUTE FUNCTION quarry_feed_append();
