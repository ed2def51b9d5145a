-- Version 27 (issue 46): each chunk carries its document's collection. A filtered search
-- reads the chunks of the filter's collections: through `documents` that was one probe of
-- `chunks(document_id)` per document (5,066 chunks of 4,613 documents: 4.6 ms to count);
-- now it is one range of `chunks_collection` (0.5 ms). A graph candidate is tested
-- against the filter in `chunks_hash_collection` alone (its text and collection), without
-- reading each chunk of that text and its document. A document never changes collection;
-- the trigger fills the column for every insert that leaves it out (`quarry migrate`'s copy
-- from the embedded store, whose chunks have no such column), and a second one keeps it
-- should a document ever move.
CREATE FUNCTION quarry_document_collection(document bigint) RETURNS bigint
    LANGUAGE sql STABLE AS 'SELECT collection_id FROM documents WHERE id = document';
ALTER TABLE chunks ADD COLUMN collection_id bigint;
-- Filled by rewriting the table (`USING`), not by an UPDATE, which would leave every row's
-- old version behind: the table would stay twice its size until new chunks filled the space.
ALTER TABLE chunks ALTER COLUMN collection_id TYPE bigint
    USING quarry_document_collection(document_id);
-- Chunks of no document are unreachable (every removal of a document removes its chunks in
-- the same statement); none should exist, and none may stay without a collection.
DELETE FROM chunks WHERE collection_id IS NULL;
ALTER TABLE chunks ALTER COLUMN collection_id SET NOT NULL;
CREATE INDEX chunks_collection ON chunks(collection_id);
-- Beside `chunks_hash`, which an unfiltered search probes per text: deduplicated, it holds a
-- repeated text once and is probed faster than this one.
CREATE INDEX chunks_hash_collection ON chunks(hash, collection_id);

CREATE FUNCTION quarry_chunk_collection() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.collection_id IS NULL THEN
        NEW.collection_id := quarry_document_collection(NEW.document_id);
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER chunks_collection_filled BEFORE INSERT ON chunks
    FOR EACH ROW EXECUTE FUNCTION quarry_chunk_collection();

CREATE FUNCTION quarry_document_moved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE chunks SET collection_id = NEW.collection_id WHERE document_id = NEW.id;
    RETURN NULL;
END
$$;
CREATE TRIGGER documents_moved_chunks AFTER UPDATE OF collection_id ON documents
    FOR EACH ROW WHEN (OLD.collection_id IS DISTINCT FROM NEW.collection_id)
    EXECUTE FUNCTION quarry_document_moved();
