-- Version 10: search results name the knowledge-base file of each passage's document.
CREATE INDEX IF NOT EXISTS kb_files_document ON kb_files(document_id);
