//! [`SignInStore`] on SQLite.

use quarry_core::Result;
use rusqlite::{OptionalExtension, params};

use crate::error::db_err;
use crate::store::SqliteStore;
use quarry_store::{LinkedIdentity, SignInRequest, SignInStore, WebSession};

impl SignInStore for SqliteStore {
    fn put_sign_in_request(&self, r: &SignInRequest) -> Result<()> {
        self.write(|tx| {
            tx.execute(
                "DELETE FROM sign_in_requests WHERE expires_at <= ?1",
                [quarry_core::now_millis()],
            )
            .map_err(db_err)?;
            tx.execute(
                "INSERT INTO sign_in_requests \
                 (state_hash, provider, nonce, verifier, redirect_uri, return_to, expires_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![
                    r.state_hash,
                    r.provider,
                    r.nonce,
                    r.verifier,
                    r.redirect_uri,
                    r.return_to,
                    r.expires_at
                ],
            )
            .map_err(db_err)?;
            Ok(())
        })
    }

    fn take_sign_in_request(&self, state_hash: &str, now: i64) -> Result<Option<SignInRequest>> {
        self.write(|tx| {
            let row = tx
                .query_row(
                    "DELETE FROM sign_in_requests WHERE state_hash = ?1 \
                     RETURNING state_hash, provider, nonce, verifier, redirect_uri, return_to, expires_at",
                    [state_hash],
                    |r| {
                        Ok(SignInRequest {
                            state_hash: r.get(0)?,
                            provider: r.get(1)?,
                            nonce: r.get(2)?,
                            verifier: r.get(3)?,
                            redirect_uri: r.get(4)?,
                            return_to: r.get(5)?,
                            expires_at: r.get(6)?,
                        })
                    },
                )
                .optional()
                .map_err(db_err)?;
            Ok(row.filter(|r| r.expires_at > now))
        })
    }

    fn identity_user(&self, issuer: &str, subject: &str) -> Result<Option<(i64, String)>> {
        self.conn()
            .query_row(
                "SELECT u.id, u.uid FROM user_identities i JOIN users u ON u.id = i.user_id \
                 WHERE i.issuer = ?1 AND i.subject = ?2",
                params![issuer, subject],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(db_err)
    }

    fn link_identity(
        &self,
        issuer: &str,
        subject: &str,
        user_row: i64,
        email: Option<&str>,
        now: i64,
    ) -> Result<()> {
        self.write(|tx| {
            // The link's user is never replaced: a second link of the same account keeps
            // the first user and records only the sign-in.
            tx.execute(
                "INSERT INTO user_identities (issuer, subject, user_id, email, created_at, last_sign_in_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?5) \
                 ON CONFLICT (issuer, subject) DO UPDATE \
                 SET email = excluded.email, last_sign_in_at = excluded.last_sign_in_at",
                params![issuer, subject, user_row, email, now],
            )
            .map_err(db_err)?;
            Ok(())
        })
    }

    fn identities(&self) -> Result<Vec<LinkedIdentity>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(
                "SELECT i.issuer, i.subject, u.uid, u.name, i.email, i.created_at, i.last_sign_in_at \
                 FROM user_identities i JOIN users u ON u.id = i.user_id \
                 ORDER BY i.created_at, i.issuer, i.subject",
            )
            .map_err(db_err)?;
        let rows = stmt
            .query_map([], |r| {
                Ok(LinkedIdentity {
                    issuer: r.get(0)?,
                    subject: r.get(1)?,
                    user_id: r.get(2)?,
                    user: r.get(3)?,
                    email: r.get(4)?,
                    created_at: r.get(5)?,
                    last_sign_in_at: r.get(6)?,
                })
            })
            .map_err(db_err)?;
        rows.collect::<rusqlite::Result<_>>().map_err(db_err)
    }

    fn put_web_session(&self, s: &WebSession) -> Result<()> {
        self.write(|tx| {
            tx.execute(
                "INSERT INTO web_sessions (token_uid, provider, issuer, subject, id_token, created_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    s.token_id,
                    s.provider,
                    s.issuer,
                    s.subject,
                    s.id_token,
                    s.created_at
                ],
            )
            .map_err(db_err)?;
            Ok(())
        })
    }

    fn web_session(&self, token_id: &str) -> Result<Option<WebSession>> {
        self.conn()
            .query_row(
                "SELECT token_uid, provider, issuer, subject, id_token, created_at \
                 FROM web_sessions WHERE token_uid = ?1",
                [token_id],
                |r| {
                    Ok(WebSession {
                        token_id: r.get(0)?,
                        provider: r.get(1)?,
                        issuer: r.get(2)?,
                        subject: r.get(3)?,
                        id_token: r.get(4)?,
                        created_at: r.get(5)?,
                    })
                },
            )
            .optional()
            .map_err(db_err)
    }
}
