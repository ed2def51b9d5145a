-- Version 17 (issue 41): a named tool endpoint's name is unique per owner (user or space),
-- not on the whole server: a conflict with another tenant's name told one tenant that the name
-- existed elsewhere. The owner index gives way to the unique one, which serves it too.
ALTER TABLE tool_endpoints DROP CONSTRAINT tool_endpoints_name_key;
DROP INDEX tool_endpoints_owner;
CREATE UNIQUE INDEX tool_endpoints_owner_name ON tool_endpoints (owner, name);
