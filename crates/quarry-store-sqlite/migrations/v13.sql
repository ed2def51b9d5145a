-- Version 13: several nodes' indexes follow one database (issue 25). Each consumer's last
-- acknowledgement is timed (`seen_at`), so a node that stopped is forgotten and the feed
-- trimmed below the slowest live one; processes running workers send heartbeats (`nodes`),
-- so a node that stopped loses its job leases; `meta['feed.trimmed']` is how far the feed was
-- trimmed (an index older than that rebuilds); `meta['database.id']` names this database,
-- so an index built from another one is recognised.
ALTER TABLE feed_consumers ADD COLUMN seen_at INTEGER NOT NULL DEFAULT 0;
UPDATE feed_consumers SET seen_at = CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER);
-- The single consumer of version 11 stays only where an index may follow it (a node adopts
-- its position once, then forgets it); a new database has none to wait for.
DELETE FROM feed_consumers WHERE consumer = 'keyword' AND NOT EXISTS (SELECT 1 FROM documents);
CREATE TABLE IF NOT EXISTS nodes (
    id TEXT PRIMARY KEY,
    seen_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS mcp_sessions (
    id TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    updated_at INTEGER NOT NULL
);
INSERT OR IGNORE INTO meta (key, value) VALUES ('database.id', lower(hex(randomblob(16))));
