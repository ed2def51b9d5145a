-- Version 24 (issue 45): tool policies and approvals. A policy is a space's rule on tool
-- calls (`rule`: tools, a condition on the arguments, deny or require approval; its grammar
-- is quarry-policy's), attached to the whole space, a named endpoint or a token (and the
-- tokens made from it); `version` grows with every change. An approval is one held call,
-- bound to its caller, tool, a digest of the exact arguments and the policies' versions;
-- it is decided once and used once (conditional updates on `status`).
CREATE TABLE tool_policies (
    id text PRIMARY KEY,
    space_id text NOT NULL,
    name text NOT NULL,
    attach text NOT NULL,
    attach_id text,
    rule text NOT NULL,
    version bigint NOT NULL DEFAULT 1,
    created_by text,
    created_at bigint NOT NULL,
    updated_at bigint NOT NULL,
    UNIQUE (space_id, name)
);
CREATE TABLE tool_approvals (
    id text PRIMARY KEY,
    space_id text NOT NULL,
    tool text NOT NULL,
    args_digest text NOT NULL,
    arguments text NOT NULL,
    caller_key text NOT NULL,
    requester_user_id text,
    requester_name text,
    requester_token_id text,
    endpoint text,
    policies text NOT NULL,
    status text NOT NULL,
    reason text,
    decided_by text,
    decided_by_token_id text,
    decided_at bigint,
    used_at bigint,
    created_at bigint NOT NULL,
    expires_at bigint NOT NULL
);
CREATE INDEX tool_approvals_call ON tool_approvals (space_id, caller_key, tool, args_digest);
CREATE INDEX tool_approvals_space ON tool_approvals (space_id, created_at);
