-- Version 19 (issue 43): permissions that follow the source. Groups of users per space, and
-- per-document readers: `kb_files.readers` is NULL for a file every reader of its knowledge
-- base may read, else a JSON array of reader keys (`user:<name>`, `group:<name>`); an empty
-- array is a file only the knowledge base's admins read (a source's mapping did not cover
-- it). A source's mapping rules (`sources.readers`, JSON) decide each synced file's readers.
CREATE TABLE groups (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    uid TEXT NOT NULL UNIQUE,
    space TEXT NOT NULL REFERENCES spaces(id),
    name TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL,
    UNIQUE (space, name)
);
CREATE TABLE group_members (
    group_id INTEGER NOT NULL REFERENCES groups(id),
    user_id INTEGER NOT NULL REFERENCES users(id),
    created_at INTEGER NOT NULL,
    PRIMARY KEY (group_id, user_id)
);
CREATE INDEX group_members_user ON group_members(user_id);
ALTER TABLE kb_files ADD COLUMN readers TEXT;
CREATE INDEX kb_files_restricted ON kb_files(collection_id) WHERE readers IS NOT NULL;
ALTER TABLE sources ADD COLUMN readers TEXT;
