-- Version 28 (issue 46): each chunk's vector beside its collection, for filtered search.
-- Vectors live per text (`embeddings`, a cache by model and text hash), a filter per chunk:
-- a filtered search read the filter's chunks, hashed their texts and tested every embedding
-- against that set (6.6-7.3 ms in psql for `sel`, 5,066 of 109,645 chunks on bench/backends'
-- data); over this table it is one range of `chunk_vectors_collection` and the distances
-- (3.1 ms). Derived and exact: a row for every chunk and every model with an embedding of
-- its text, kept by the triggers below for every write of either side; never written by
-- Quarry's code, never copied by `quarry migrate` (the triggers fill it there too).
CREATE TABLE chunk_vectors (
    chunk_id bigint NOT NULL,
    model text NOT NULL,
    collection_id bigint NOT NULL,
    vector halfvec NOT NULL,
    PRIMARY KEY (chunk_id, model)
);
INSERT INTO chunk_vectors (chunk_id, model, collection_id, vector)
    SELECT c.id, e.model, c.collection_id, e.vector
    FROM chunks c JOIN embeddings e ON e.hash = c.hash;
CREATE INDEX chunk_vectors_collection ON chunk_vectors(collection_id);
-- A chunk's embeddings of every model, found by its text alone.
CREATE INDEX embeddings_hash ON embeddings(hash);

-- Serialising the two sides: a chunk written while an embedding of its text commits would
-- otherwise be missed by both (each statement reads the other table as last committed). A
-- write of chunks holds this lock shared until it commits, one of embeddings exclusively,
-- and each reads the other side only once it holds it: whichever comes second sees the
-- first's rows. Chunk writes never wait for each other; a batch of embeddings waits for
-- the chunk writes in flight (short transactions) and they for it.
CREATE FUNCTION quarry_chunks_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(7245190455173122052);
    INSERT INTO chunk_vectors (chunk_id, model, collection_id, vector)
        SELECT n.id, e.model, n.collection_id, e.vector
        FROM added n JOIN embeddings e ON e.hash = n.hash
        ON CONFLICT (chunk_id, model) DO UPDATE
            SET collection_id = EXCLUDED.collection_id, vector = EXCLUDED.vector;
    RETURN NULL;
END
$$;
CREATE TRIGGER chunks_vectors_added AFTER INSERT ON chunks
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION quarry_chunks_added();

CREATE FUNCTION quarry_chunks_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(7245190455173122052);
    DELETE FROM chunk_vectors v USING removed o WHERE v.chunk_id = o.id;
    RETURN NULL;
END
$$;
CREATE TRIGGER chunks_vectors_removed AFTER DELETE ON chunks
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION quarry_chunks_removed();

-- Quarry changes a chunk only when its document moves (`documents_moved_chunks`); a changed
-- text is followed too, should anything ever change one.
CREATE FUNCTION quarry_chunks_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(7245190455173122052);
    DELETE FROM chunk_vectors v USING old_rows o JOIN new_rows n ON n.id = o.id
        WHERE v.chunk_id = o.id AND n.hash <> o.hash;
    INSERT INTO chunk_vectors (chunk_id, model, collection_id, vector)
        SELECT n.id, e.model, n.collection_id, e.vector
        FROM old_rows o JOIN new_rows n ON n.id = o.id JOIN embeddings e ON e.hash = n.hash
        WHERE n.hash <> o.hash
        ON CONFLICT (chunk_id, model) DO UPDATE
            SET collection_id = EXCLUDED.collection_id, vector = EXCLUDED.vector;
    UPDATE chunk_vectors v SET collection_id = n.collection_id
        FROM new_rows n WHERE v.chunk_id = n.id AND v.collection_id <> n.collection_id;
    RETURN NULL;
END
$$;
CREATE TRIGGER chunks_vectors_changed AFTER UPDATE ON chunks
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION quarry_chunks_changed();

-- New and changed embeddings (`INSERT … ON CONFLICT DO UPDATE` fires both triggers; a
-- change is a new vector, never a new model or text).
CREATE FUNCTION quarry_embeddings_stored() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(7245190455173122052);
    INSERT INTO chunk_vectors (chunk_id, model, collection_id, vector)
        SELECT c.id, n.model, c.collection_id, n.vector
        FROM stored n JOIN chunks c ON c.hash = n.hash
        ON CONFLICT (chunk_id, model) DO UPDATE
            SET collection_id = EXCLUDED.collection_id, vector = EXCLUDED.vector;
    RETURN NULL;
END
$$;
CREATE TRIGGER embeddings_vectors_added AFTER INSERT ON embeddings
    REFERENCING NEW TABLE AS stored FOR EACH STATEMENT EXECUTE FUNCTION quarry_embeddings_stored();
CREATE TRIGGER embeddings_vectors_changed AFTER UPDATE ON embeddings
    REFERENCING NEW TABLE AS stored FOR EACH STATEMENT EXECUTE FUNCTION quarry_embeddings_stored();

CREATE FUNCTION quarry_embeddings_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(7245190455173122052);
    DELETE FROM chunk_vectors v USING removed o JOIN chunks c ON c.hash = o.hash
        WHERE v.chunk_id = c.id AND v.model = o.model;
    RETURN NULL;
END
$$;
CREATE TRIGGER embeddings_vectors_removed AFTER DELETE ON embeddings
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION quarry_embeddings_removed();
