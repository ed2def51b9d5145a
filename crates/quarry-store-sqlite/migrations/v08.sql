-- Version 8: passages. A document keeps the furniture its converter found (contents, running
-- headers …: `kind:start:end` byte ranges of the body, kept out of chunks); a chunk keeps the
-- heading path it sits under. Chunks were cut at page boundaries from this version on, so every
-- document is cut again (its old chunks serve until then).
ALTER TABLE documents ADD COLUMN furniture TEXT NOT NULL DEFAULT '';
ALTER TABLE chunks ADD COLUMN heading TEXT NOT NULL DEFAULT '';
UPDATE documents SET chunked_hash = NULL;
