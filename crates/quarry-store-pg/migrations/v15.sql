-- Version 15 (issue 27): the OAuth 2.1 authorization server, and named tool endpoints.
--
-- Clients registered through dynamic client registration (RFC 7591); the grants people
-- consented to (each the parent token of every access token its client gets); one-time
-- secrets — authorization codes and rotating refresh tokens — stored as SHA-256 hashes and
-- redeemed once (`used_at`), so a replay is seen and revokes the grant.
CREATE TABLE oauth_clients (
    id text PRIMARY KEY,
    secret_hash text,
    name text NOT NULL,
    redirect_uris text NOT NULL,
    metadata text NOT NULL,
    created_at bigint NOT NULL
);

CREATE TABLE oauth_grants (
    grant_id text PRIMARY KEY,
    client_id text NOT NULL,
    created_at bigint NOT NULL
);

CREATE TABLE oauth_secrets (
    hash text PRIMARY KEY,
    kind text NOT NULL,
    client_id text NOT NULL,
    grant_id text NOT NULL,
    redirect_uri text NOT NULL,
    code_challenge text NOT NULL,
    resource text NOT NULL,
    scope text NOT NULL,
    expires_at bigint NOT NULL,
    used_at bigint
);
CREATE INDEX oauth_secrets_expiry ON oauth_secrets (expires_at);

-- Named tool endpoints (`/mcp/e/<name>`): a saved selection of hub tools owned by a user
-- (`user:<owner key>`) or a space (`space:<uuid>`); a token may be limited to one of them.
CREATE TABLE tool_endpoints (
    id text PRIMARY KEY,
    name text NOT NULL UNIQUE,
    owner text NOT NULL,
    selection text NOT NULL,
    description text NOT NULL,
    created_by text,
    created_at bigint NOT NULL,
    updated_at bigint NOT NULL
);
CREATE INDEX tool_endpoints_owner ON tool_endpoints (owner);
ALTER TABLE access_tokens ADD COLUMN endpoint text;
