-- Version 21 (issue 44): typed metadata. `documents.meta`: the document's fields (front
-- matter, document properties and its file's own fields, merged) as a JSON object;
-- `kb_files.meta`: the fields given with an upload or a note.
ALTER TABLE documents ADD COLUMN meta text NOT NULL DEFAULT '{}';
ALTER TABLE kb_files ADD COLUMN meta text NOT NULL DEFAULT '{}';
-- Documents indexed before front matter became fields: a folder collection's are read again
-- by the next scan (an empty hash differs from every file's), a knowledge base's Markdown
-- files are converted again; both then keep their front matter out of chunks and the
-- keyword index.
UPDATE documents SET hash = '', stamp = 0
 WHERE (left(body, 4) = E'---\n' OR left(body, 4) = E'+++\n')
   AND collection_id IN (SELECT id FROM collections WHERE kind = 'folder');
INSERT INTO jobs (kind, file_id, status, not_before, created_at, updated_at)
SELECT 'ingest', f.id, 'enqueued', 0, 0, 0 FROM kb_files f JOIN documents d ON d.id = f.document_id
 WHERE f.format = 'md' AND f.status = 'ready'
   AND (left(d.body, 4) = E'---\n' OR left(d.body, 4) = E'+++\n')
ON CONFLICT (file_id) DO NOTHING;
