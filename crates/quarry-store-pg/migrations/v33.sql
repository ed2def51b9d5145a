-- Version 33 (issue 65 items 5 and 6): what a writer may not read no longer answers its write.
-- The same bytes are one document among current uploads with the same readers: an upload of a
-- hidden document's exact bytes becomes a document of the uploader's own instead of "the
-- same bytes are already in this knowledge base". And a key names one current entry per set
-- of readers: a write of a key whose current entry the writer may not read starts a chain of
-- its own, answered exactly as for a free key, instead of superseding (or being refused by)
-- the hidden one.
DROP INDEX kb_files_current_key;
CREATE UNIQUE INDEX kb_files_current_key ON kb_files(collection_id, entry_key, COALESCE(readers, ''))
    WHERE entry_key IS NOT NULL AND superseded_by IS NULL;
DROP INDEX kb_files_upload_blob;
CREATE UNIQUE INDEX kb_files_upload_blob ON kb_files(collection_id, blob, COALESCE(readers, ''))
    WHERE source_id IS NULL AND superseded_by IS NULL;
