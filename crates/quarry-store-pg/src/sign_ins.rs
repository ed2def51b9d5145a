//! [`quarry_store::SignInStore`] on PostgreSQL: a sign-in request is taken by one
//! `DELETE … RETURNING`, so of two nodes handling the same callback only one gets it.

use postgres::Row;
use quarry_core::Result;
use quarry_store::{LinkedIdentity, SignInRequest, SignInStore, WebSession};

use crate::error::db_err;
use crate::pg_store::PgStore;

fn web_session(r: &Row) -> WebSession {
    WebSession {
        token_id: r.get(0),
        provider: r.get(1),
        issuer: r.get(2),
        subject: r.get(3),
        id_token: r.get(4),
        created_at: r.get(5),
    }
}

impl SignInStore for PgStore {
    fn put_sign_in_request(&self, r: &SignInRequest) -> Result<()> {
        self.write(|tx| {
            tx.execute(
                "DELETE FROM sign_in_requests WHERE expires_at <= quarry_now_ms()",
                &[],
            )
            .map_err(db_err)?;
            tx.execute(
                "INSERT INTO sign_in_requests \
                 (state_hash, provider, nonce, verifier, redirect_uri, return_to, expires_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7)",
                &[
                    &r.state_hash,
                    &r.provider,
                    &r.nonce,
                    &r.verifier,
                    &r.redirect_uri,
                    &r.return_to,
                    &r.expires_at,
                ],
            )
            .map_err(db_err)?;
            Ok(())
        })
    }

    fn take_sign_in_request(&self, state_hash: &str, now: i64) -> Result<Option<SignInRequest>> {
        let row = self
            .conn()?
            .query_opt(
                "DELETE FROM sign_in_requests WHERE state_hash = $1 \
                 RETURNING state_hash, provider, nonce, verifier, redirect_uri, return_to, expires_at",
                &[&state_hash],
            )
            .map_err(db_err)?;
        Ok(row
            .map(|r| SignInRequest {
                state_hash: r.get(0),
                provider: r.get(1),
                nonce: r.get(2),
                verifier: r.get(3),
                redirect_uri: r.get(4),
                return_to: r.get(5),
                expires_at: r.get(6),
            })
            .filter(|r| r.expires_at > now))
    }

    fn identity_user(&self, issuer: &str, subject: &str) -> Result<Option<(i64, String)>> {
        let row = self
            .conn()?
            .query_opt(
                "SELECT u.id, u.uid FROM user_identities i JOIN users u ON u.id = i.user_id \
                 WHERE i.issuer = $1 AND i.subject = $2",
                &[&issuer, &subject],
            )
            .map_err(db_err)?;
        Ok(row.map(|r| (r.get(0), r.get(1))))
    }

    fn link_identity(
        &self,
        issuer: &str,
        subject: &str,
        user_row: i64,
        email: Option<&str>,
        now: i64,
    ) -> Result<()> {
        // One statement: two nodes linking the same account at once keep the first user.
        self.conn()?
            .execute(
                "INSERT INTO user_identities (issuer, subject, user_id, email, created_at, last_sign_in_at) \
                 VALUES ($1, $2, $3, $4, $5, $5) \
                 ON CONFLICT (issuer, subject) DO UPDATE \
                 SET email = EXCLUDED.email, last_sign_in_at = EXCLUDED.last_sign_in_at",
                &[&issuer, &subject, &user_row, &email, &now],
            )
            .map_err(db_err)?;
        Ok(())
    }

    fn identities(&self) -> Result<Vec<LinkedIdentity>> {
        let rows = self
            .conn()?
            .query(
                "SELECT i.issuer, i.subject, u.uid, u.name, i.email, i.created_at, i.last_sign_in_at \
                 FROM user_identities i JOIN users u ON u.id = i.user_id \
                 ORDER BY i.created_at, i.issuer, i.subject",
                &[],
            )
            .map_err(db_err)?;
        Ok(rows
            .iter()
            .map(|r| LinkedIdentity {
                issuer: r.get(0),
                subject: r.get(1),
                user_id: r.get(2),
                user: r.get(3),
                email: r.get(4),
                created_at: r.get(5),
                last_sign_in_at: r.get(6),
            })
            .collect())
    }

    fn put_web_session(&self, s: &WebSession) -> Result<()> {
        self.conn()?
            .execute(
                "INSERT INTO web_sessions (token_uid, provider, issuer, subject, id_token, created_at) \
                 VALUES ($1, $2, $3, $4, $5, $6)",
                &[
                    &s.token_id,
                    &s.provider,
                    &s.issuer,
                    &s.subject,
                    &s.id_token,
                    &s.created_at,
                ],
            )
            .map_err(db_err)?;
        Ok(())
    }

    fn web_session(&self, token_id: &str) -> Result<Option<WebSession>> {
        let row = self
            .conn()?
            .query_opt(
                "SELECT token_uid, provider, issuer, subject, id_token, created_at \
                 FROM web_sessions WHERE token_uid = $1",
                &[&token_id],
            )
            .map_err(db_err)?;
        Ok(row.as_ref().map(web_session))
    }
}
