//! [`AccessStore`] on SQLite.

use quarry_core::{Error, Result};
use rusqlite::{OptionalExtension, params};

use crate::error::db_err;
use crate::store::SqliteStore;
use quarry_store::{
    AccessStore, Group, Membership, NewToken, Role, Space, TokenGrant, TokenRecord, User,
};

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
     t.read_only, t.created_at, t.expires_at, t.last_used_at, t.revoked_at, u.uid, t.parent, t.tools, t.endpoint, t.manage";

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
        manage: r.get::<_, i64>(16)? != 0,
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

/// The columns [`group_from_row`] reads, from `groups g`.
const GROUP_COLUMNS: &str = "g.id, g.uid, g.space, g.name, g.description, g.created_at";

/// A group's row id and the group, its members left empty.
fn group_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<(i64, Group)> {
    Ok((
        r.get(0)?,
        Group {
            id: r.get(1)?,
            space: r.get(2)?,
            name: r.get(3)?,
            description: r.get(4)?,
            created_at: r.get(5)?,
            members: Vec::new(),
        },
    ))
}

/// The row id of the group `name` of `space`, or `NotFound`.
fn group_row(tx: &rusqlite::Transaction<'_>, space: &str, name: &str) -> Result<i64> {
    tx.query_row(
        "SELECT id FROM groups WHERE space = ?1 AND name = ?2",
        [space, name],
        |r| r.get(0),
    )
    .optional()
    .map_err(db_err)?
    .ok_or_else(|| Error::not_found(format!("group '{name}' not found in space '{space}'")))
}

/// Deletes the groups of `space` and their memberships.
fn delete_groups_of(tx: &rusqlite::Transaction<'_>, space: &str) -> Result<()> {
    tx.execute(
        "DELETE FROM group_members WHERE group_id IN (SELECT id FROM groups WHERE space = ?1)",
        [space],
    )
    .map_err(db_err)?;
    tx.execute("DELETE FROM groups WHERE space = ?1", [space])
        .map_err(db_err)?;
    Ok(())
}

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
            delete_groups_of(tx, name)?;
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
            // A removed user's sessions and provider links go with it: signing in again
            // makes a new user.
            tx.execute(
                "DELETE FROM web_sessions WHERE token_uid IN \
                 (SELECT uid FROM access_tokens WHERE user_id = ?1)",
                [user_row],
            )
            .map_err(db_err)?;
            tx.execute("DELETE FROM user_identities WHERE user_id = ?1", [user_row])
                .map_err(db_err)?;
            tx.execute("DELETE FROM access_tokens WHERE user_id = ?1", [user_row])
                .map_err(db_err)?;
            tx.execute("DELETE FROM memberships WHERE user_id = ?1", [user_row])
                .map_err(db_err)?;
            tx.execute("DELETE FROM group_members WHERE user_id = ?1", [user_row])
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
            // A user who left a space is in none of its groups.
            tx.execute(
                "DELETE FROM group_members WHERE user_id = ?1 \
                 AND group_id IN (SELECT id FROM groups WHERE space = ?2)",
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
                 read_only, created_at, expires_at, parent, tools, endpoint, manage) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
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
                    new.manage as i64,
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

    fn access_generation(&self) -> Result<i64> {
        self.conn()
            .prepare_cached("SELECT n FROM access_generation WHERE id = 1")
            .and_then(|mut s| s.query_row([], |r| r.get(0)))
            .map_err(db_err)
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

    fn create_group(&self, space: &str, name: &str, description: &str) -> Result<Group> {
        self.write(|tx| {
            let known: bool = tx
                .query_row(
                    "SELECT EXISTS(SELECT 1 FROM spaces WHERE id = ?1)",
                    [space],
                    |r| r.get(0),
                )
                .map_err(db_err)?;
            if !known {
                return Err(Error::not_found(format!("space '{space}' not found")));
            }
            let taken: bool = tx
                .query_row(
                    "SELECT EXISTS(SELECT 1 FROM groups WHERE space = ?1 AND name = ?2)",
                    [space, name],
                    |r| r.get(0),
                )
                .map_err(db_err)?;
            if taken {
                return Err(Error::Conflict(format!(
                    "space '{space}' already has a group '{name}'"
                )));
            }
            let group = Group {
                id: uuid::Uuid::new_v4().to_string(),
                space: space.to_owned(),
                name: name.to_owned(),
                description: description.to_owned(),
                created_at: quarry_core::now_millis(),
                members: Vec::new(),
            };
            tx.execute(
                "INSERT INTO groups (uid, space, name, description, created_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![
                    group.id,
                    group.space,
                    group.name,
                    group.description,
                    group.created_at
                ],
            )
            .map_err(db_err)?;
            Ok(group)
        })
    }

    fn groups(&self, space: &str) -> Result<Vec<Group>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {GROUP_COLUMNS} FROM groups g WHERE g.space = ?1 ORDER BY g.name"
            ))
            .map_err(db_err)?;
        let mut groups: Vec<(i64, Group)> = stmt
            .query_map([space], group_from_row)
            .map_err(db_err)?
            .collect::<rusqlite::Result<_>>()
            .map_err(db_err)?;
        let mut stmt = conn
            .prepare_cached(
                "SELECT m.group_id, u.name FROM group_members m \
                 JOIN groups g ON g.id = m.group_id JOIN users u ON u.id = m.user_id \
                 WHERE g.space = ?1 ORDER BY u.name",
            )
            .map_err(db_err)?;
        let rows = stmt
            .query_map([space], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
            })
            .map_err(db_err)?;
        for row in rows {
            let (group_id, user) = row.map_err(db_err)?;
            if let Some((_, g)) = groups.iter_mut().find(|(id, _)| *id == group_id) {
                g.members.push(user);
            }
        }
        Ok(groups.into_iter().map(|(_, g)| g).collect())
    }

    fn group(&self, space: &str, key: &str) -> Result<Option<Group>> {
        let conn = self.conn();
        let found = conn
            .prepare_cached(&format!(
                "SELECT {GROUP_COLUMNS} FROM groups g WHERE g.space = ?1 \
                 AND (g.name = ?2 OR g.uid = ?2) ORDER BY g.name = ?2 DESC LIMIT 1"
            ))
            .map_err(db_err)?
            .query_row([space, key], group_from_row)
            .optional()
            .map_err(db_err)?;
        let Some((row, mut group)) = found else {
            return Ok(None);
        };
        let mut stmt = conn
            .prepare_cached(
                "SELECT u.name FROM group_members m JOIN users u ON u.id = m.user_id \
                 WHERE m.group_id = ?1 ORDER BY u.name",
            )
            .map_err(db_err)?;
        group.members = stmt
            .query_map([row], |r| r.get(0))
            .map_err(db_err)?
            .collect::<rusqlite::Result<_>>()
            .map_err(db_err)?;
        Ok(Some(group))
    }

    fn delete_group(&self, space: &str, name: &str) -> Result<bool> {
        self.write(|tx| {
            tx.execute(
                "DELETE FROM group_members WHERE group_id IN \
                 (SELECT id FROM groups WHERE space = ?1 AND name = ?2)",
                [space, name],
            )
            .map_err(db_err)?;
            let n = tx
                .execute(
                    "DELETE FROM groups WHERE space = ?1 AND name = ?2",
                    [space, name],
                )
                .map_err(db_err)?;
            Ok(n > 0)
        })
    }

    fn add_group_member(&self, space: &str, group: &str, user_row: i64) -> Result<bool> {
        self.write(|tx| {
            let id = group_row(tx, space, group)?;
            let n = tx
                .execute(
                    "INSERT INTO group_members (group_id, user_id, created_at) \
                     VALUES (?1, ?2, ?3) ON CONFLICT (group_id, user_id) DO NOTHING",
                    params![id, user_row, quarry_core::now_millis()],
                )
                .map_err(db_err)?;
            Ok(n > 0)
        })
    }

    fn remove_group_member(&self, space: &str, group: &str, user_row: i64) -> Result<bool> {
        self.write(|tx| {
            let n = tx
                .execute(
                    "DELETE FROM group_members WHERE user_id = ?3 AND group_id IN \
                     (SELECT id FROM groups WHERE space = ?1 AND name = ?2)",
                    params![space, group, user_row],
                )
                .map_err(db_err)?;
            Ok(n > 0)
        })
    }

    fn user_groups(&self, space: &str, user_row: i64) -> Result<Vec<String>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(
                "SELECT g.name FROM group_members m JOIN groups g ON g.id = m.group_id \
                 WHERE g.space = ?1 AND m.user_id = ?2 ORDER BY g.name",
            )
            .map_err(db_err)?;
        let rows = stmt
            .query_map(params![space, user_row], |r| r.get(0))
            .map_err(db_err)?;
        rows.collect::<rusqlite::Result<_>>().map_err(db_err)
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
