-- Version 34 (issue 65 item 6): a name names one document per set of readers, so a hidden
-- document's name no longer shows through an upload's name (`layoffs-2027 (2).md`): the
-- upload of a name that only a document of other readers holds gets that name exactly, as
-- when the name is free. Files: the unique name goes from (knowledge base, name) to
-- (knowledge base, name, readers). Documents: a knowledge-base file's document is its own
-- (`kb_file`), no longer one per path — two files of one name have two documents of one
-- path; a folder's documents stay one per path.
ALTER TABLE kb_files DROP CONSTRAINT kb_files_collection_id_name_key;
CREATE UNIQUE INDEX kb_files_name ON kb_files(collection_id, name, COALESCE(readers, ''));
-- The knowledge-base file this is the document of; NULL for a folder's document.
ALTER TABLE documents ADD COLUMN kb_file bigint;
UPDATE documents d SET kb_file = f.id
    FROM (SELECT document_id, MIN(id) AS id FROM kb_files WHERE document_id IS NOT NULL
          GROUP BY document_id) f
    WHERE f.document_id = d.id;
ALTER TABLE documents DROP CONSTRAINT documents_collection_id_path_key;
CREATE UNIQUE INDEX documents_path ON documents(collection_id, path) WHERE kb_file IS NULL;
CREATE UNIQUE INDEX documents_kb_file ON documents(kb_file) WHERE kb_file IS NOT NULL;
