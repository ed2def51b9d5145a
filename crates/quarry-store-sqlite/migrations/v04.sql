-- Version 4: principals. Spaces get a UUID beside their unique name; users, memberships
-- with roles, and access tokens (only a SHA-256 of the secret is kept). Every collection
-- gets a UUID, so a token's allow-list survives renames.
ALTER TABLE spaces ADD COLUMN uid TEXT;
ALTER TABLE spaces ADD COLUMN description TEXT NOT NULL DEFAULT '';
CREATE UNIQUE INDEX IF NOT EXISTS spaces_uid ON spaces(uid);
CREATE TABLE IF NOT EXISTS users (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    uid TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL UNIQUE,
    created_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS memberships (
    user_id INTEGER NOT NULL REFERENCES users(id),
    space TEXT NOT NULL REFERENCES spaces(id),
    role TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (user_id, space)
);
CREATE TABLE IF NOT EXISTS access_tokens (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    uid TEXT NOT NULL UNIQUE,
    user_id INTEGER NOT NULL REFERENCES users(id),
    hash TEXT NOT NULL UNIQUE,
    prefix TEXT NOT NULL,
    label TEXT NOT NULL,
    spaces TEXT NOT NULL,
    collections TEXT,
    read_only INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER,
    last_used_at INTEGER,
    revoked_at INTEGER
);
CREATE INDEX IF NOT EXISTS access_tokens_user ON access_tokens(user_id);
ALTER TABLE kb_files ADD COLUMN note_kind TEXT;
ALTER TABLE kb_files ADD COLUMN note_title TEXT;
ALTER TABLE kb_files ADD COLUMN note_tags TEXT NOT NULL DEFAULT '';
ALTER TABLE kb_files ADD COLUMN note_summary TEXT;
