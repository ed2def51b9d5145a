//! [`OAuthStore`] on SQLite.

use quarry_core::Result;
use rusqlite::{OptionalExtension, Row, params};

use crate::error::db_err;
use crate::store::SqliteStore;
use quarry_store::{
    OAuthClientRow, OAuthGrantRow, OAuthSecretKind, OAuthSecretRow, OAuthStore, Redeemed,
};

const SECRET_COLUMNS: &str = "hash, kind, client_id, grant_id, redirect_uri, code_challenge, resource, scope, expires_at, used_at";

fn secret_row(r: &Row<'_>) -> rusqlite::Result<OAuthSecretRow> {
    let kind: String = r.get(1)?;
    Ok(OAuthSecretRow {
        hash: r.get(0)?,
        kind: if kind == "code" {
            OAuthSecretKind::Code
        } else {
            OAuthSecretKind::Refresh
        },
        client_id: r.get(2)?,
        grant_id: r.get(3)?,
        redirect_uri: r.get(4)?,
        code_challenge: r.get(5)?,
        resource: r.get(6)?,
        scope: r.get(7)?,
        expires_at: r.get(8)?,
        used_at: r.get(9)?,
    })
}

impl OAuthStore for SqliteStore {
    fn insert_oauth_client(&self, c: &OAuthClientRow) -> Result<()> {
        let uris = serde_json::to_string(&c.redirect_uris).unwrap_or_else(|_| "[]".into());
        self.write(|tx| {
            tx.execute(
                "INSERT INTO oauth_clients (id, secret_hash, name, redirect_uris, metadata, created_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![c.id, c.secret_hash, c.name, uris, c.metadata, c.created_at],
            )
            .map_err(db_err)?;
            Ok(())
        })
    }

    fn oauth_client(&self, id: &str) -> Result<Option<OAuthClientRow>> {
        self.conn()
            .prepare_cached(
                "SELECT id, secret_hash, name, redirect_uris, metadata, created_at FROM oauth_clients WHERE id = ?1",
            )
            .and_then(|mut s| {
                s.query_row([id], |r| {
                    let uris: String = r.get(3)?;
                    Ok(OAuthClientRow {
                        id: r.get(0)?,
                        secret_hash: r.get(1)?,
                        name: r.get(2)?,
                        redirect_uris: serde_json::from_str(&uris).unwrap_or_default(),
                        metadata: r.get(4)?,
                        created_at: r.get(5)?,
                    })
                })
                .optional()
            })
            .map_err(db_err)
    }

    fn insert_oauth_grant(&self, g: &OAuthGrantRow) -> Result<()> {
        self.write(|tx| {
            tx.execute(
                "INSERT INTO oauth_grants (grant_id, client_id, created_at) VALUES (?1, ?2, ?3)",
                params![g.grant_id, g.client_id, g.created_at],
            )
            .map_err(db_err)?;
            Ok(())
        })
    }

    fn oauth_grant(&self, grant_id: &str) -> Result<Option<OAuthGrantRow>> {
        self.conn()
            .prepare_cached(
                "SELECT grant_id, client_id, created_at FROM oauth_grants WHERE grant_id = ?1",
            )
            .and_then(|mut s| {
                s.query_row([grant_id], |r| {
                    Ok(OAuthGrantRow {
                        grant_id: r.get(0)?,
                        client_id: r.get(1)?,
                        created_at: r.get(2)?,
                    })
                })
                .optional()
            })
            .map_err(db_err)
    }

    fn insert_oauth_secret(&self, s: &OAuthSecretRow) -> Result<()> {
        self.write(|tx| {
            tx.execute(
                &format!("INSERT INTO oauth_secrets ({SECRET_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, NULL)"),
                params![
                    s.hash,
                    s.kind.as_str(),
                    s.client_id,
                    s.grant_id,
                    s.redirect_uri,
                    s.code_challenge,
                    s.resource,
                    s.scope,
                    s.expires_at
                ],
            )
            .map_err(db_err)?;
            Ok(())
        })
    }

    fn oauth_secret(&self, hash: &str, kind: OAuthSecretKind) -> Result<Option<OAuthSecretRow>> {
        self.conn()
            .prepare_cached(&format!(
                "SELECT {SECRET_COLUMNS} FROM oauth_secrets WHERE hash = ?1 AND kind = ?2"
            ))
            .and_then(|mut s| {
                s.query_row(params![hash, kind.as_str()], secret_row)
                    .optional()
            })
            .map_err(db_err)
    }

    fn redeem_oauth_secret(&self, hash: &str, kind: OAuthSecretKind, now: i64) -> Result<Redeemed> {
        self.write(|tx| {
            let row = tx
                .query_row(
                    &format!(
                        "SELECT {SECRET_COLUMNS} FROM oauth_secrets WHERE hash = ?1 AND kind = ?2"
                    ),
                    params![hash, kind.as_str()],
                    secret_row,
                )
                .optional()
                .map_err(db_err)?;
            let Some(row) = row else {
                return Ok(Redeemed::Unknown);
            };
            if row.used_at.is_some() {
                return Ok(Redeemed::Reused(row));
            }
            if row.expires_at <= now {
                return Ok(Redeemed::Unknown);
            }
            tx.execute(
                "UPDATE oauth_secrets SET used_at = ?2 WHERE hash = ?1",
                params![hash, now],
            )
            .map_err(db_err)?;
            Ok(Redeemed::Fresh(OAuthSecretRow {
                used_at: Some(now),
                ..row
            }))
        })
    }

    fn prune_oauth(&self, now: i64) -> Result<u64> {
        self.write(|tx| {
            let secrets = tx
                .execute("DELETE FROM oauth_secrets WHERE expires_at < ?1", [now])
                .map_err(db_err)?;
            let tokens = tx
                .execute(
                    "DELETE FROM access_tokens WHERE expires_at < ?1 \
                     AND parent IN (SELECT grant_id FROM oauth_grants)",
                    [now],
                )
                .map_err(db_err)?;
            Ok((secrets + tokens) as u64)
        })
    }
}
