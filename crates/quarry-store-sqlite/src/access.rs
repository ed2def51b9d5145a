//! [`AccessStore`] on SQLite.

use quarry_core::{Error, Result};
use rusqlite::{OptionalExtension, params};

use super::{SqliteStore, db_err};
use quarry_store::{AccessStore, Membership, NewToken, Role, Space, TokenGrant, TokenRecord, User};

fn space_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Space> {
    Ok(Space {
        name: r.get(0)?,
        id: r.get::<_, Option<String>>(1)?.unwrap_or_default(),
        description: r.get(2)?,
        created_at: r.get(3)?,
    })
}

const SPACE_COLUMNS: &str = "s.id, s.uid, s.description, s.created_at";

const TOKEN_COLUMNS: &str = "t.uid, t.user_id, u.name, t.label, t.prefix, t.spaces, t.collections, \
     t.read_only, t.created_at, t.expires_at, t.last_used_at, t.revoked_at, u.uid, t.parent, t.tools, t.endpoint";

/// Longest chain of tokens creating tokens that is followed (a guard: chains cannot loop,
/// since a parent exists before its child).
const MAX_TOKEN_CHAIN: i64 = 64;

fn split_list(s: &str) -> Vec<String> {
    s.split(',')
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect()
}

fn token_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<TokenRecord> {
    Ok(TokenRecord {
        id: r.get(0)?,
        user_row: r.get(1)?,
        user_id: r.get(12)?,
        user: r.get(2)?,
        label: r.get(3)?,
        prefix: r.get(4)?,
        spaces: split_list(&r.get::<_, String>(5)?),
        collections: r.get::<_, Option<String>>(6)?.map(|s| split_list(&s)),
        read_only: r.get::<_, i64>(7)? != 0,
        created_at: r.get(8)?,
        expires_at: r.get(9)?,
        last_used_at: r.get(10)?,
        revoked_at: r.get(11)?,
        parent_id: r.get(13)?,
        tools: r.get::<_, Option<String>>(14)?.map(|s| split_list(&s)),
        endpoint: r.get(15)?,
    })
}

fn membership_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Membership> {
    let role: String = r.get(3)?;
    Ok(Membership {
        user: r.get(0)?,
        space: r.get(1)?,
        space_id: r.get::<_, Option<String>>(2)?.unwrap_or_default(),
        role: Role::parse(&role).unwrap_or(Role::Viewer),
        joined_at: r.get(4)?,
    })
}

const MEMBERSHIP_SELECT: &str = "SELECT u.name, s.id, s.uid, m.role, m.created_at FROM memberships m \
     JOIN users u ON u.id = m.user_id JOIN spaces s ON s.id = m.space";

impl AccessStore for SqliteStore {
    fn create_space(&self, name: &str, description: &str) -> Result<Space> {
        self.write(|tx| {
            let taken: bool = tx
                .query_row(
                    "SELECT EXISTS(SELECT 1 FROM spaces WHERE id = ?1)",
                    [name],
                    |r| r.get(0),
                )
                .map_err(db_err)?;
            if taken {
                return Err(Error::Conflict(format!("space '{name}' already exists")));
            }
            let space = Space {
                id: uuid::Uuid::new_v4().to_string(),
                name: name.to_owned(),
                description: description.to_owned(),
                created_at: quarry_core::now_millis(),
            };
            tx.execute(
                "INSERT INTO spaces (id, uid, description, created_at) VALUES (?1, ?2, ?3, ?4)",
                params![space.name, space.id, space.description, space.created_at],
            )
            .map_err(db_err)?;
            Ok(space)
        })
    }

    fn spaces(&self) -> Result<Vec<Space>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {SPACE_COLUMNS} FROM spaces s ORDER BY s.id"
            ))
            .map_err(db_err)?;
        let rows = stmt.query_map([], space_from_row).map_err(db_err)?;
        rows.collect::<rusqlite::Result<_>>().map_err(db_err)
    }

    fn space(&self, key: &str) -> Result<Option<Space>> {
        let conn = self.conn();
        conn.query_row(
            &format!("SELECT {SPACE_COLUMNS} FROM spaces s WHERE s.id = ?1 OR s.uid = ?1"),
            [key],
            space_from_row,
        )
        .optional()
        .map_err(db_err)
    }

    fn delete_space(&self, name: &str) -> Result<()> {
        self.write(|tx| {
            let uid: Option<String> = tx
                .query_row("SELECT uid FROM spaces WHERE id = ?1", [name], |r| r.get(0))
                .optional()
                .map_err(db_err)?
                .flatten();
            let Some(uid) = uid else {
                return Err(Error::not_found(format!("space '{name}' not found")));
            };
            let collections: i64 = tx
                .query_row(
                    "SELECT COUNT(*) FROM collections WHERE space = ?1",
                    [name],
                    |r| r.get(0),
                )
                .map_err(db_err)?;
            if collections > 0 {
                return Err(Error::Conflict(format!(
                    "space '{name}' still has {collections} collection(s)"
                )));
            }
            tx.execute("DELETE FROM memberships WHERE space = ?1", [name])
                .map_err(db_err)?;
            tx.execute("DELETE FROM contexts WHERE space = ?1", [name])
                .map_err(db_err)?;
            // Tokens keep their other spaces; one left with none can never be used again.
            let now = quarry_core::now_millis();
            let mut stmt = tx
                .prepare("SELECT id, spaces FROM access_tokens WHERE ',' || spaces || ',' LIKE ?1")
                .map_err(db_err)?;
            let hits: Vec<(i64, String)> = stmt
                .query_map([format!("%,{uid},%")], |r| Ok((r.get(0)?, r.get(1)?)))
                .map_err(db_err)?
                .collect::<rusqlite::Result<_>>()
                .map_err(db_err)?;
            for (id, spaces) in hits {
                let rest: Vec<String> = split_list(&spaces).into_iter().filter(|s| *s != uid).collect();
                tx.execute(
                    "UPDATE access_tokens SET spaces = ?2, \
                     revoked_at = CASE WHEN ?2 = '' THEN COALESCE(revoked_at, ?3) ELSE revoked_at END WHERE id = ?1",
                    params![id, rest.join(","), now],
                )
                .map_err(db_err)?;
            }
            tx.execute("DELETE FROM spaces WHERE id = ?1", [name])
                .map_err(db_err)?;
            Ok(())
        })
    }

    fn create_user(&self, name: &str) -> Result<User> {
        self.write(|tx| {
            let taken: bool = tx
                .query_row(
                    "SELECT EXISTS(SELECT 1 FROM users WHERE name = ?1)",
                    [name],
                    |r| r.get(0),
                )
                .map_err(db_err)?;
            if taken {
                return Err(Error::Conflict(format!("user '{name}' already exists")));
            }
            let user = User {
                id: uuid::Uuid::new_v4().to_string(),
                name: name.to_owned(),
                created_at: quarry_core::now_millis(),
            };
            tx.execute(
                "INSERT INTO users (uid, name, created_at) VALUES (?1, ?2, ?3)",
                params![user.id, user.name, user.created_at],
            )
            .map_err(db_err)?;
            Ok(user)
        })
    }

    fn users(&self) -> Result<Vec<User>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached("SELECT uid, name, created_at FROM users ORDER BY name")
            .map_err(db_err)?;
        let rows = stmt
            .query_map([], |r| {
                Ok(User {
                    id: r.get(0)?,
                    name: r.get(1)?,
                    created_at: r.get(2)?,
                })
            })
            .map_err(db_err)?;
        rows.collect::<rusqlite::Result<_>>().map_err(db_err)
    }

    fn user(&self, key: &str) -> Result<Option<(i64, User)>> {
        let conn = self.conn();
        conn.query_row(
            "SELECT id, uid, name, created_at FROM users WHERE name = ?1 OR uid = ?1",
            [key],
            |r| {
                Ok((
                    r.get(0)?,
                    User {
                        id: r.get(1)?,
                        name: r.get(2)?,
                        created_at: r.get(3)?,
                    },
                ))
            },
        )
        .optional()
        .map_err(db_err)
    }

    fn delete_user(&self, user_row: i64) -> Result<()> {
        self.write(|tx| {
            tx.execute("DELETE FROM access_tokens WHERE user_id = ?1", [user_row])
                .map_err(db_err)?;
            tx.execute("DELETE FROM memberships WHERE user_id = ?1", [user_row])
                .map_err(db_err)?;
            tx.execute("DELETE FROM users WHERE id = ?1", [user_row])
                .map_err(db_err)?;
            Ok(())
        })
    }

    fn grant(&self, user_row: i64, space: &str, role: Role) -> Result<()> {
        self.write(|tx| {
            tx.execute(
                "INSERT INTO memberships (user_id, space, role, created_at) VALUES (?1, ?2, ?3, ?4) \
                 ON CONFLICT (user_id, space) DO UPDATE SET role = excluded.role",
                params![user_row, space, role.as_str(), quarry_core::now_millis()],
            )
            .map_err(db_err)?;
            Ok(())
        })
    }

    fn revoke_membership(&self, user_row: i64, space: &str) -> Result<bool> {
        self.write(|tx| {
            let n = tx
                .execute(
                    "DELETE FROM memberships WHERE user_id = ?1 AND space = ?2",
                    params![user_row, space],
                )
                .map_err(db_err)?;
            Ok(n > 0)
        })
    }

    fn memberships(&self, user_row: Option<i64>) -> Result<Vec<Membership>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(&format!(
                "{MEMBERSHIP_SELECT} WHERE (?1 IS NULL OR m.user_id = ?1) ORDER BY u.name, s.id"
            ))
            .map_err(db_err)?;
        let rows = stmt
            .query_map([user_row], membership_from_row)
            .map_err(db_err)?;
        rows.collect::<rusqlite::Result<_>>().map_err(db_err)
    }

    fn insert_token(&self, new: &NewToken) -> Result<TokenRecord> {
        let uid = uuid::Uuid::new_v4().to_string();
        self.write(|tx| {
            tx.execute(
                "INSERT INTO access_tokens (uid, user_id, hash, prefix, label, spaces, collections, \
                 read_only, created_at, expires_at, parent, tools, endpoint) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
                params![
                    uid,
                    new.user_row,
                    new.hash,
                    new.prefix,
                    new.label,
                    new.spaces.join(","),
                    new.collections.as_ref().map(|c| c.join(",")),
                    new.read_only as i64,
                    quarry_core::now_millis(),
                    new.expires_at,
                    new.parent_id,
                    new.tools.as_ref().map(|t| t.join(",")),
                    new.endpoint,
                ],
            )
            .map_err(db_err)?;
            tx.query_row(
                &format!(
                    "SELECT {TOKEN_COLUMNS} FROM access_tokens t JOIN users u ON u.id = t.user_id WHERE t.uid = ?1"
                ),
                [&uid],
                token_from_row,
            )
            .map_err(db_err)
        })
    }

    fn tokens(&self, user_row: Option<i64>) -> Result<Vec<TokenRecord>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {TOKEN_COLUMNS} FROM access_tokens t JOIN users u ON u.id = t.user_id \
                 WHERE (?1 IS NULL OR t.user_id = ?1) ORDER BY t.created_at, t.id"
            ))
            .map_err(db_err)?;
        let rows = stmt.query_map([user_row], token_from_row).map_err(db_err)?;
        rows.collect::<rusqlite::Result<_>>().map_err(db_err)
    }

    fn token_by_hash(&self, hash: &str) -> Result<Option<TokenGrant>> {
        let conn = self.conn();
        let token = conn
            .prepare_cached(&format!(
                "SELECT {TOKEN_COLUMNS} FROM access_tokens t JOIN users u ON u.id = t.user_id WHERE t.hash = ?1"
            ))
            .map_err(db_err)?
            .query_row([hash], token_from_row)
            .optional()
            .map_err(db_err)?;
        let Some(token) = token else {
            return Ok(None);
        };
        let mut stmt = conn
            .prepare_cached(&format!("{MEMBERSHIP_SELECT} WHERE m.user_id = ?1"))
            .map_err(db_err)?;
        let memberships = stmt
            .query_map([token.user_row], membership_from_row)
            .map_err(db_err)?
            .collect::<rusqlite::Result<_>>()
            .map_err(db_err)?;
        drop(stmt);
        drop(conn);
        let ancestors = match &token.parent_id {
            Some(parent) => self.token_chain(parent)?,
            None => Vec::new(),
        };
        Ok(Some(TokenGrant {
            token,
            memberships,
            ancestors,
        }))
    }

    fn token_chain(&self, id: &str) -> Result<Vec<TokenRecord>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(&format!(
                "WITH RECURSIVE chain(tid, depth) AS ( \
                   SELECT id, 0 FROM access_tokens WHERE uid = ?1 \
                   UNION ALL \
                   SELECT p.id, chain.depth + 1 FROM chain \
                   JOIN access_tokens c ON c.id = chain.tid \
                   JOIN access_tokens p ON p.uid = c.parent \
                   WHERE chain.depth < ?2) \
                 SELECT {TOKEN_COLUMNS} FROM chain \
                 JOIN access_tokens t ON t.id = chain.tid JOIN users u ON u.id = t.user_id \
                 ORDER BY chain.depth"
            ))
            .map_err(db_err)?;
        let rows = stmt
            .query_map(params![id, MAX_TOKEN_CHAIN], token_from_row)
            .map_err(db_err)?;
        rows.collect::<rusqlite::Result<_>>().map_err(db_err)
    }

    fn revoke_token(&self, key: &str, user_row: Option<i64>, at: i64) -> Result<bool> {
        self.write(|tx| {
            let n = tx
                .execute(
                    "UPDATE access_tokens SET revoked_at = COALESCE(revoked_at, ?3) \
                     WHERE (uid = ?1 OR prefix = ?1) AND (?2 IS NULL OR user_id = ?2)",
                    params![key, user_row, at],
                )
                .map_err(db_err)?;
            // What it created goes with it (authentication checks the chain as well; this
            // keeps listings true).
            tx.execute(
                "WITH RECURSIVE below(uid, depth) AS ( \
                   SELECT uid, 0 FROM access_tokens \
                   WHERE (uid = ?1 OR prefix = ?1) AND (?2 IS NULL OR user_id = ?2) \
                   UNION ALL \
                   SELECT t.uid, below.depth + 1 FROM access_tokens t \
                   JOIN below ON t.parent = below.uid WHERE below.depth < ?4) \
                 UPDATE access_tokens SET revoked_at = COALESCE(revoked_at, ?3) \
                 WHERE uid IN (SELECT uid FROM below)",
                params![key, user_row, at, MAX_TOKEN_CHAIN],
            )
            .map_err(db_err)?;
            Ok(n > 0)
        })
    }

    fn touch_token(&self, id: &str, at: i64) -> Result<()> {
        self.write(|tx| {
            tx.execute(
                "UPDATE access_tokens SET last_used_at = ?2 WHERE uid = ?1",
                params![id, at],
            )
            .map_err(db_err)?;
            Ok(())
        })
    }

    fn collection_ids(&self, space: &str, keys: &[String]) -> Result<Vec<(i64, String)>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(
                "SELECT id, COALESCE(uid, '') FROM collections WHERE space = ?1 AND (uid = ?2 OR name = ?2)",
            )
            .map_err(db_err)?;
        let mut out = Vec::new();
        for key in keys {
            if let Some(hit) = stmt
                .query_row(params![space, key], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()
                .map_err(db_err)?
            {
                out.push(hit);
            }
        }
        Ok(out)
    }
}
