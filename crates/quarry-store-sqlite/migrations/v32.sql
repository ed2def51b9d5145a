-- Version 32 (issue 65 items 11, 19): the rate of embedding is measured from what was
-- finished. Each batch of vectors an embedding run writes is recorded with the chunks it
-- finished and how long it took, at the store's clock (`ended_at`, milliseconds since the
-- epoch); every node reads the last minutes of them, so the rate and the time left that
-- /api/v1/queue, `quarry status`, the web UI and `quarry kb upload` show are what every node
-- together did, not the model time of one round. Rows older than ten minutes are removed as
-- new ones come; a copy (`quarry migrate`) leaves them out.
CREATE TABLE IF NOT EXISTS embedded_batches (
    id INTEGER PRIMARY KEY,
    model TEXT NOT NULL,
    ended_at INTEGER NOT NULL,
    elapsed_ms INTEGER NOT NULL,
    chunks INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS embedded_batches_ended ON embedded_batches(ended_at);
