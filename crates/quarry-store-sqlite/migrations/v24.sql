-- Version 24 (issue 45): tool policies and approvals. A policy is a space's rule on tool
-- calls (`rule`: tools, a condition on the arguments, deny or require approval; its grammar
-- is quarry-policy's), attached to the whole space, a named endpoint or a token (and the
-- tokens made from it); `version` grows with every change. An approval is one held call,
-- bound to its caller, tool, a digest of the exact arguments and the policies' versions;
-- it is decided once and used once (conditional updates on `status`).
CREATE TABLE tool_policies (
    id TEXT PRIMARY KEY,
    space_id TEXT NOT NULL,
    name TEXT NOT NULL,
    attach TEXT NOT NULL,
    attach_id TEXT,
    rule TEXT NOT NULL,
    version INTEGER NOT NULL DEFAULT 1,
    created_by TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    UNIQUE (space_id, name)
) WITHOUT ROWID;
CREATE TABLE tool_approvals (
    id TEXT PRIMARY KEY,
    space_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    args_digest TEXT NOT NULL,
    arguments TEXT NOT NULL,
    caller_key TEXT NOT NULL,
    requester_user_id TEXT,
    requester_name TEXT,
    requester_token_id TEXT,
    endpoint TEXT,
    policies TEXT NOT NULL,
    status TEXT NOT NULL,
    reason TEXT,
    decided_by TEXT,
    decided_by_token_id TEXT,
    decided_at INTEGER,
    used_at INTEGER,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX tool_approvals_call ON tool_approvals (space_id, caller_key, tool, args_digest);
CREATE INDEX tool_approvals_space ON tool_approvals (space_id, created_at);
