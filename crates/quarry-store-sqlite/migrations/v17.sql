-- Version 17 (issue 41): a named tool endpoint's name is unique per owner (user or space),
-- not on the whole server — a conflict with another tenant's name told one tenant that the
-- name existed elsewhere. SQLite changes a constraint by rebuilding the table.
CREATE TABLE tool_endpoints_v17 (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    owner TEXT NOT NULL,
    selection TEXT NOT NULL,
    description TEXT NOT NULL,
    created_by TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    UNIQUE (owner, name)
) WITHOUT ROWID;
INSERT INTO tool_endpoints_v17 (id, name, owner, selection, description, created_by, created_at, updated_at)
    SELECT id, name, owner, selection, description, created_by, created_at, updated_at FROM tool_endpoints;
DROP TABLE tool_endpoints;
ALTER TABLE tool_endpoints_v17 RENAME TO tool_endpoints;
