-- Version 36 (issue 69): people sign in with an OpenID Connect provider (see the embedded store's v36.sql).
-- `sign_in_requests`: a started sign-in until its callback takes it (once; ten minutes).
-- `user_identities`: which provider account (issuer + subject, never e-mail) is which user.
-- `web_sessions`: the sessions signing in made; each session's credential is an access
-- token (`qs_…`) among the others, so revoking it ends the session on every node.
CREATE TABLE sign_in_requests (
    state_hash text PRIMARY KEY,
    provider text NOT NULL,
    nonce text NOT NULL,
    verifier text NOT NULL,
    redirect_uri text NOT NULL,
    return_to text NOT NULL,
    expires_at bigint NOT NULL
);
CREATE TABLE user_identities (
    issuer text NOT NULL,
    subject text NOT NULL,
    user_id bigint NOT NULL REFERENCES users(id),
    email text,
    created_at bigint NOT NULL,
    last_sign_in_at bigint NOT NULL,
    PRIMARY KEY (issuer, subject)
);
CREATE INDEX user_identities_user ON user_identities(user_id);
CREATE TABLE web_sessions (
    token_uid text PRIMARY KEY,
    provider text NOT NULL,
    issuer text NOT NULL,
    subject text NOT NULL,
    id_token text NOT NULL,
    created_at bigint NOT NULL
);
