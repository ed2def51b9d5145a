-- Version 21 (issue 44): typed metadata. `documents.meta`: the document's fields (front
-- matter, document properties and its file's own fields, merged) as a JSON object;
-- `kb_files.meta`: the fields given with an upload or a note.
ALTER TABLE documents ADD COLUMN meta text NOT NULL DEFAULT '{}';
ALTER TABLE kb_files ADD COLUMN meta text NOT NULL DEFAULT '{}';
