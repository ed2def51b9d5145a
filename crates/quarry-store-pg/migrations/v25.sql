-- Version 25 (issue 46): the access generation. One number that grows, in the same
-- transaction, with every change that can change what a token resolves to (a token revoked,
-- rescoped or created; a user renamed or removed; a membership granted, changed or revoked;
-- a space or group changed or removed; a group member added or removed). Each node keeps the
-- tokens it resolved beside the generation it read them at and reads this one row per
-- request: a revocation bites on the next request on every node. Triggers bump it, so no
-- write path can forget to. Touching a token (`last_used_at`) or relabelling it does not.
CREATE TABLE access_generation (
    id integer PRIMARY KEY CHECK (id = 1),
    n bigint NOT NULL
);
INSERT INTO access_generation (id, n) VALUES (1, 0);
CREATE FUNCTION quarry_bump_access_generation() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE access_generation SET n = n + 1 WHERE id = 1;
    RETURN NULL;
END
$$;
CREATE TRIGGER access_tokens_generation
    AFTER INSERT OR DELETE OR UPDATE OF uid, user_id, hash, spaces, collections, read_only,
        parent, expires_at, revoked_at, tools, endpoint ON access_tokens
    FOR EACH STATEMENT EXECUTE FUNCTION quarry_bump_access_generation();
CREATE TRIGGER users_generation AFTER UPDATE OR DELETE ON users
    FOR EACH STATEMENT EXECUTE FUNCTION quarry_bump_access_generation();
CREATE TRIGGER spaces_generation AFTER UPDATE OR DELETE ON spaces
    FOR EACH STATEMENT EXECUTE FUNCTION quarry_bump_access_generation();
CREATE TRIGGER memberships_generation AFTER INSERT OR UPDATE OR DELETE ON memberships
    FOR EACH STATEMENT EXECUTE FUNCTION quarry_bump_access_generation();
CREATE TRIGGER groups_generation AFTER UPDATE OR DELETE ON groups
    FOR EACH STATEMENT EXECUTE FUNCTION quarry_bump_access_generation();
CREATE TRIGGER group_members_generation AFTER INSERT OR UPDATE OR DELETE ON group_members
    FOR EACH STATEMENT EXECUTE FUNCTION quarry_bump_access_generation();
