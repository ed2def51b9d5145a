-- Version 25 (issue 46): the access generation. One number that grows, in the same
-- transaction, with every change that can change what a token resolves to (a token revoked,
-- rescoped or created; a user renamed or removed; a membership granted, changed or revoked;
-- a space or group changed or removed; a group member added or removed). The server keeps
-- the tokens it resolved beside the generation it read them at and reads this one row per
-- request. Triggers bump it, so no write path can forget to. Touching a token
-- (`last_used_at`) or relabelling it does not.
CREATE TABLE access_generation (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    n INTEGER NOT NULL
);
INSERT INTO access_generation (id, n) VALUES (1, 0);
CREATE TRIGGER access_tokens_generation_insert AFTER INSERT ON access_tokens
BEGIN UPDATE access_generation SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER access_tokens_generation_delete AFTER DELETE ON access_tokens
BEGIN UPDATE access_generation SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER access_tokens_generation_update AFTER UPDATE OF uid, user_id, hash, spaces, collections, read_only, parent, expires_at, revoked_at, tools, endpoint ON access_tokens
BEGIN UPDATE access_generation SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER users_generation_update AFTER UPDATE ON users
BEGIN UPDATE access_generation SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER users_generation_delete AFTER DELETE ON users
BEGIN UPDATE access_generation SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER spaces_generation_update AFTER UPDATE ON spaces
BEGIN UPDATE access_generation SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER spaces_generation_delete AFTER DELETE ON spaces
BEGIN UPDATE access_generation SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER memberships_generation_insert AFTER INSERT ON memberships
BEGIN UPDATE access_generation SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER memberships_generation_update AFTER UPDATE ON memberships
BEGIN UPDATE access_generation SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER memberships_generation_delete AFTER DELETE ON memberships
BEGIN UPDATE access_generation SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER groups_generation_update AFTER UPDATE ON groups
BEGIN UPDATE access_generation SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER groups_generation_delete AFTER DELETE ON groups
BEGIN UPDATE access_generation SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER group_members_generation_insert AFTER INSERT ON group_members
BEGIN UPDATE access_generation SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER group_members_generation_update AFTER UPDATE ON group_members
BEGIN UPDATE access_generation SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER group_members_generation_delete AFTER DELETE ON group_members
BEGIN UPDATE access_generation SET n = n + 1 WHERE id = 1; END;
