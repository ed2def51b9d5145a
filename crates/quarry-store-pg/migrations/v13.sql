-- Version 13: several nodes follow one database (issue 25).
--
-- The feed is read in (txid, seq) order, and only entries of transactions older than every
-- one still running (below pg_snapshot_xmin(pg_current_snapshot())): a transaction that
-- took its seq early and commits late is then never skipped, whatever the commit order, so
-- the trigger no longer serialises every document writer behind one advisory lock (writers
-- that allocate docids still take it themselves). A statement-level trigger announces new
-- entries on the `quarry_feed` channel (delivered at commit), so followers wake at once.
ALTER TABLE feed ADD COLUMN txid xid8 NOT NULL DEFAULT pg_current_xact_id();
CREATE INDEX feed_order ON feed (txid, seq);

CREATE OR REPLACE FUNCTION quarry_feed_append() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        INSERT INTO feed (document_id) VALUES (OLD.id);
    ELSE
        INSERT INTO feed (document_id) VALUES (NEW.id);
    END IF;
    RETURN NULL;
END $$;

CREATE FUNCTION quarry_feed_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('quarry_feed', '');
    RETURN NULL;
END $$;
CREATE TRIGGER feed_notify AFTER INSERT ON feed
    FOR EACH STATEMENT EXECUTE FUNCTION quarry_feed_notify();

-- Each consumer's last acknowledgement is timed on the database's clock, so a node that
-- stopped is forgotten and the feed trimmed below the slowest live one.
ALTER TABLE feed_consumers ADD COLUMN txid bigint NOT NULL DEFAULT 0;
ALTER TABLE feed_consumers ADD COLUMN seen_at bigint NOT NULL DEFAULT 0;
UPDATE feed_consumers SET seen_at = quarry_now_ms();

-- How far the feed was trimmed (an index older than that rebuilds), and this database's
-- name, so an index built from another database is recognised.
INSERT INTO meta (key, value) VALUES ('feed.trimmed', '0:0') ON CONFLICT (key) DO NOTHING;
INSERT INTO meta (key, value) VALUES ('database.id', replace(gen_random_uuid()::text, '-', ''))
    ON CONFLICT (key) DO NOTHING;

-- Hub changes (every write bumps its owner's generation in the same transaction) are
-- announced on `quarry_hub`, so every node stops an upstream disabled or deleted elsewhere.
CREATE FUNCTION quarry_hub_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('quarry_hub', '');
    RETURN NULL;
END $$;
CREATE TRIGGER hub_generations_notify AFTER INSERT OR UPDATE ON hub_generations
    FOR EACH STATEMENT EXECUTE FUNCTION quarry_hub_notify();

-- Processes running workers send heartbeats on the database's clock; a node that stops
-- loses its job leases (any other node releases them), whatever machine it ran on.
CREATE TABLE nodes (
    id text PRIMARY KEY,
    seen_at bigint NOT NULL
);

-- MCP sessions (2025-11-25 clients) any node can resume: the client's `initialize`
-- parameters by session id (rmcp's session store).
CREATE TABLE mcp_sessions (
    id text PRIMARY KEY,
    state text NOT NULL,
    updated_at bigint NOT NULL
);
