-- Version 16 (issue 26): embed jobs of several nodes share a collection's work. Each claims
-- the chunk texts it embeds; a claim counts while its job holds a live lease.
CREATE TABLE IF NOT EXISTS embed_claims (
    model TEXT NOT NULL,
    hash TEXT NOT NULL,
    job_id INTEGER NOT NULL,
    PRIMARY KEY (model, hash)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS embed_claims_job ON embed_claims(job_id);
