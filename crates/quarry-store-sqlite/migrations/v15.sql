-- Version 15 (issue 27): the OAuth 2.1 authorization server — registered clients, the grants
-- people consented to, one-time secrets (codes, refresh tokens) stored as hashes — and named
-- tool endpoints, with tokens that work at one of them only.
ALTER TABLE access_tokens ADD COLUMN endpoint TEXT;
CREATE TABLE IF NOT EXISTS tool_endpoints (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    owner TEXT NOT NULL,
    selection TEXT NOT NULL,
    description TEXT NOT NULL,
    created_by TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS tool_endpoints_owner ON tool_endpoints(owner);
CREATE TABLE IF NOT EXISTS oauth_clients (
    id TEXT PRIMARY KEY,
    secret_hash TEXT,
    name TEXT NOT NULL,
    redirect_uris TEXT NOT NULL,
    metadata TEXT NOT NULL,
    created_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS oauth_grants (
    grant_id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    created_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS oauth_secrets (
    hash TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    client_id TEXT NOT NULL,
    grant_id TEXT NOT NULL,
    redirect_uri TEXT NOT NULL,
    code_challenge TEXT NOT NULL,
    resource TEXT NOT NULL,
    scope TEXT NOT NULL,
    expires_at INTEGER NOT NULL,
    used_at INTEGER
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS oauth_secrets_expiry ON oauth_secrets(expires_at);
