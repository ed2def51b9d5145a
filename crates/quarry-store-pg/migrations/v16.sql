-- Version 16 (issue 26): embed jobs of several nodes share a collection's work. Each claims
-- the chunk texts it embeds; a claim counts while its job holds a live lease.
CREATE TABLE embed_claims (
    model text NOT NULL,
    hash text NOT NULL,
    job_id bigint NOT NULL,
    PRIMARY KEY (model, hash)
);
CREATE INDEX embed_claims_job ON embed_claims(job_id);
