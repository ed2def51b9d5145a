-- Version 26 (issue 46): nodes trust the access generation they watch. Each node keeps one
-- connection listening on `quarry_access` and a row here, renewed at least every half
-- second with the generation it has seen (`seen`) at the database's clock (`renewed_at`,
-- milliseconds since the epoch). While its row is renewed a node answers token checks from
-- what it has seen, without asking the database; a change that bumps the generation is
-- not reported done until every node whose row is still live has seen it (or its row ran
-- out and was removed). See quarry-store-pg's access_watch.rs.
CREATE TABLE access_watchers (
    node text PRIMARY KEY,
    seen bigint NOT NULL,
    renewed_at bigint NOT NULL
);
CREATE OR REPLACE FUNCTION quarry_bump_access_generation() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE access_generation SET n = n + 1 WHERE id = 1;
    -- Delivered at commit: each watching node renews at once and so confirms it.
    PERFORM pg_notify('quarry_access', '');
    RETURN NULL;
END
$$;
