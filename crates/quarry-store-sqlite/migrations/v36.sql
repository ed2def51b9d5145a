-- Version 36 (issue 69): people sign in with their company's OpenID Connect provider.
-- `sign_in_requests`: a started sign-in until its callback takes it (once; ten minutes).
-- `user_identities`: which provider account (issuer + subject, never e-mail) is which user.
-- `web_sessions`: the sessions signing in made; each session's credential is an access
-- token (`qs_…`) among the others, so revoking it ends the session on every node.
CREATE TABLE sign_in_requests (
    state_hash TEXT PRIMARY KEY,
    provider TEXT NOT NULL,
    nonce TEXT NOT NULL,
    verifier TEXT NOT NULL,
    redirect_uri TEXT NOT NULL,
    return_to TEXT NOT NULL,
    expires_at INTEGER NOT NULL
);
CREATE TABLE user_identities (
    issuer TEXT NOT NULL,
    subject TEXT NOT NULL,
    user_id INTEGER NOT NULL REFERENCES users(id),
    email TEXT,
    created_at INTEGER NOT NULL,
    last_sign_in_at INTEGER NOT NULL,
    PRIMARY KEY (issuer, subject)
);
CREATE INDEX user_identities_user ON user_identities(user_id);
CREATE TABLE web_sessions (
    token_uid TEXT PRIMARY KEY,
    provider TEXT NOT NULL,
    issuer TEXT NOT NULL,
    subject TEXT NOT NULL,
    id_token TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
