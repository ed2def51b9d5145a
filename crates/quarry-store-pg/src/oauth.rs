//! [`quarry_store::OAuthStore`] on PostgreSQL: a secret is redeemed by one conditional
//! `UPDATE … RETURNING`, so of two nodes redeeming it at once only one gets it.

use postgres::Row;
use quarry_core::Result;
use quarry_store::{
    OAuthClientRow, OAuthGrantRow, OAuthSecretKind, OAuthSecretRow, OAuthStore, Redeemed,
};

use crate::error::db_err;
use crate::pg_store::PgStore;

const SECRET_COLUMNS: &str = "hash, kind, client_id, grant_id, redirect_uri, code_challenge, resource, scope, expires_at, used_at";

fn secret_row(r: &Row) -> OAuthSecretRow {
    let kind: String = r.get(1);
    OAuthSecretRow {
        hash: r.get(0),
        kind: if kind == "code" {
            OAuthSecretKind::Code
        } else {
            OAuthSecretKind::Refresh
        },
        client_id: r.get(2),
        grant_id: r.get(3),
        redirect_uri: r.get(4),
        code_challenge: r.get(5),
        resource: r.get(6),
        scope: r.get(7),
        expires_at: r.get(8),
        used_at: r.get(9),
    }
}

impl OAuthStore for PgStore {
    fn insert_oauth_client(&self, c: &OAuthClientRow) -> Result<()> {
        let uris = serde_json::to_string(&c.redirect_uris).unwrap_or_else(|_| "[]".into());
        self.conn()?
            .execute(
                "INSERT INTO oauth_clients (id, secret_hash, name, redirect_uris, metadata, created_at) \
                 VALUES ($1, $2, $3, $4, $5, $6)",
                &[&c.id, &c.secret_hash, &c.name, &uris, &c.metadata, &c.created_at],
            )
            .map_err(db_err)?;
        Ok(())
    }

    fn oauth_client(&self, id: &str) -> Result<Option<OAuthClientRow>> {
        let row = self
            .conn()?
            .query_opt(
                "SELECT id, secret_hash, name, redirect_uris, metadata, created_at FROM oauth_clients WHERE id = $1",
                &[&id],
            )
            .map_err(db_err)?;
        Ok(row.map(|r| {
            let uris: String = r.get(3);
            OAuthClientRow {
                id: r.get(0),
                secret_hash: r.get(1),
                name: r.get(2),
                redirect_uris: serde_json::from_str(&uris).unwrap_or_default(),
                metadata: r.get(4),
                created_at: r.get(5),
            }
        }))
    }

    fn insert_oauth_grant(&self, g: &OAuthGrantRow) -> Result<()> {
        self.conn()?
            .execute(
                "INSERT INTO oauth_grants (grant_id, client_id, created_at) VALUES ($1, $2, $3)",
                &[&g.grant_id, &g.client_id, &g.created_at],
            )
            .map_err(db_err)?;
        Ok(())
    }

    fn oauth_grant(&self, grant_id: &str) -> Result<Option<OAuthGrantRow>> {
        let row = self
            .conn()?
            .query_opt(
                "SELECT grant_id, client_id, created_at FROM oauth_grants WHERE grant_id = $1",
                &[&grant_id],
            )
            .map_err(db_err)?;
        Ok(row.map(|r| OAuthGrantRow {
            grant_id: r.get(0),
            client_id: r.get(1),
            created_at: r.get(2),
        }))
    }

    fn insert_oauth_secret(&self, s: &OAuthSecretRow) -> Result<()> {
        self.conn()?
            .execute(
                &format!(
                    "INSERT INTO oauth_secrets ({SECRET_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, NULL)"
                ),
                &[
                    &s.hash,
                    &s.kind.as_str(),
                    &s.client_id,
                    &s.grant_id,
                    &s.redirect_uri,
                    &s.code_challenge,
                    &s.resource,
                    &s.scope,
                    &s.expires_at,
                ],
            )
            .map_err(db_err)?;
        Ok(())
    }

    fn oauth_secret(&self, hash: &str, kind: OAuthSecretKind) -> Result<Option<OAuthSecretRow>> {
        let row = self
            .conn()?
            .query_opt(
                &format!(
                    "SELECT {SECRET_COLUMNS} FROM oauth_secrets WHERE hash = $1 AND kind = $2"
                ),
                &[&hash, &kind.as_str()],
            )
            .map_err(db_err)?;
        Ok(row.as_ref().map(secret_row))
    }

    fn redeem_oauth_secret(&self, hash: &str, kind: OAuthSecretKind, now: i64) -> Result<Redeemed> {
        let mut conn = self.conn()?;
        let fresh = conn
            .query_opt(
                &format!(
                    "UPDATE oauth_secrets SET used_at = $3 \
                     WHERE hash = $1 AND kind = $2 AND used_at IS NULL AND expires_at > $3 \
                     RETURNING {SECRET_COLUMNS}"
                ),
                &[&hash, &kind.as_str(), &now],
            )
            .map_err(db_err)?;
        if let Some(r) = fresh {
            return Ok(Redeemed::Fresh(secret_row(&r)));
        }
        let row = conn
            .query_opt(
                &format!(
                    "SELECT {SECRET_COLUMNS} FROM oauth_secrets WHERE hash = $1 AND kind = $2"
                ),
                &[&hash, &kind.as_str()],
            )
            .map_err(db_err)?;
        Ok(match row.as_ref().map(secret_row) {
            Some(r) if r.used_at.is_some() => Redeemed::Reused(r),
            _ => Redeemed::Unknown,
        })
    }

    fn prune_oauth(&self, now: i64) -> Result<u64> {
        self.write(|tx| {
            let secrets = tx
                .execute("DELETE FROM oauth_secrets WHERE expires_at < $1", &[&now])
                .map_err(db_err)?;
            let tokens = tx
                .execute(
                    "DELETE FROM access_tokens WHERE expires_at < $1 \
                     AND parent IN (SELECT grant_id FROM oauth_grants)",
                    &[&now],
                )
                .map_err(db_err)?;
            Ok(secrets + tokens)
        })
    }
}
