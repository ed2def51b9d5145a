-- Version 14: governance (issue 27). A token may be limited to hub packages and tools
-- (`tools`, comma-separated; NULL: all); the audit log records who did what.
ALTER TABLE access_tokens ADD COLUMN tools TEXT;
CREATE TABLE IF NOT EXISTS audit_events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at INTEGER NOT NULL,
    space_id TEXT,
    user_id TEXT,
    user_name TEXT,
    token_id TEXT,
    client TEXT,
    action TEXT NOT NULL,
    target TEXT NOT NULL,
    outcome TEXT NOT NULL,
    duration_ms INTEGER,
    detail TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_events_space ON audit_events(space_id, id);
CREATE INDEX IF NOT EXISTS audit_events_at ON audit_events(at);
-- Rate limits shared by every node: a count per key and fixed window.
CREATE TABLE IF NOT EXISTS rate_counters (
    key TEXT NOT NULL,
    window_start INTEGER NOT NULL,
    count INTEGER NOT NULL,
    PRIMARY KEY (key, window_start)
) WITHOUT ROWID;
