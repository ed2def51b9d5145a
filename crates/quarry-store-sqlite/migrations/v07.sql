-- Version 7: a token created by another token names it (`parent`) and lives only as long
-- as it; the first answer of a request sent with an idempotency key, kept for a day so a
-- retry gets that answer again (on any node).
ALTER TABLE access_tokens ADD COLUMN parent TEXT;
CREATE INDEX IF NOT EXISTS access_tokens_parent ON access_tokens(parent);
CREATE TABLE IF NOT EXISTS idempotency_keys (
    scope TEXT NOT NULL,
    key TEXT NOT NULL,
    request TEXT NOT NULL,
    response TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (scope, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS idempotency_keys_created ON idempotency_keys(created_at);
