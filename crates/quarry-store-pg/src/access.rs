//! [`quarry_store::AccessStore`] on PostgreSQL.
//!
//! Times the store stamps itself (`created_at`, a revocation by `delete_space`) come from the
//! database's clock (`quarry_now_ms()`), so every node stamps alike. Names sort bytewise
//! (`COLLATE "C"`), as SQLite's default collation does, whatever the database's locale.
//!
//! Secrets never reach the database; hashes never leave it in an error: a unique violation on
//! `access_tokens` becomes a `Conflict` without PostgreSQL's `DETAIL`, which quotes the key.

use postgres::Row;
use postgres::types::ToSql;
use quarry_core::{Error, Result};
use quarry_store::{
    AccessStore, Group, Membership, NewToken, Role, Space, TokenGrant, TokenRecord, User,
};

use crate::error::{conflict_or_db, db_err, is_unique_violation};
use crate::pg_store::PgStore;
use crate::sql::col;

/// Longest chain of tokens creating tokens that is followed (a guard: chains cannot loop,
/// since a parent exists before its child). The same bound as the embedded store's.
const MAX_TOKEN_CHAIN: i64 = 64;

const SPACE_COLUMNS: &str = "s.id, s.uid, s.description, s.created_at";

/// The columns [`token_from_row`] reads, from `access_tokens t JOIN users u`.
const TOKEN_COLUMNS: &str = "t.uid, t.user_id, u.name, t.label, t.prefix, t.spaces, \
     t.collections, t.read_only, t.created_at, t.expires_at, t.last_used_at, t.revoked_at, \
     u.uid, t.parent, t.tools, t.endpoint, t.manage";

/// The columns [`group_from_row`] reads, from `groups g`: the members as one array, by
/// name in byte order.
const GROUP_COLUMNS: &str = "g.uid, g.space, g.name, g.description, g.created_at, \
     (SELECT array_agg(u.name ORDER BY u.name COLLATE \"C\") FROM group_members m \
      JOIN users u ON u.id = m.user_id WHERE m.group_id = g.id)";

const MEMBERSHIP_SELECT: &str = "SELECT u.name, s.id, s.uid, m.role, m.created_at \
     FROM memberships m JOIN users u ON u.id = m.user_id JOIN spaces s ON s.id = m.space";

impl PgStore {
    /// `out`, once every node answers from the generation the change produced
    /// ([`PgStore::settle_access`]): what each access write returns.
    fn settled<T>(&self, out: T) -> Result<T> {
        self.settle_access()?;
        Ok(out)
    }
}

impl AccessStore for PgStore {
    fn create_space(&self, name: &str, description: &str) -> Result<Space> {
        let conflict = || format!("space '{name}' already exists");
        let id = uuid::Uuid::new_v4().to_string();
        // ON CONFLICT: two nodes creating one name at once get one space and one Conflict.
        let row = self
            .conn()?
            .query_opt(
                "INSERT INTO spaces (id, uid, description, created_at) \
                 VALUES ($1, $2, $3, quarry_now_ms()) \
                 ON CONFLICT (id) DO NOTHING RETURNING created_at",
                &[&name, &id, &description],
            )
            .map_err(|e| conflict_or_db(e, conflict))?
            .ok_or_else(|| Error::Conflict(conflict()))?;
        Ok(Space {
            id,
            name: name.to_owned(),
            description: description.to_owned(),
            created_at: row.try_get(0).map_err(db_err)?,
        })
    }

    fn spaces(&self) -> Result<Vec<Space>> {
        self.conn()?
            .query(
                &format!("SELECT {SPACE_COLUMNS} FROM spaces s ORDER BY s.id COLLATE \"C\""),
                &[],
            )
            .map_err(db_err)?
            .iter()
            .map(space_from_row)
            .collect()
    }

    fn space(&self, key: &str) -> Result<Option<Space>> {
        // A name that is also another space's UUID: the name wins.
        self.conn()?
            .query_opt(
                &format!(
                    "SELECT {SPACE_COLUMNS} FROM spaces s WHERE s.id = $1 OR s.uid = $1 \
                     ORDER BY s.id = $1 DESC LIMIT 1"
                ),
                &[&key],
            )
            .map_err(db_err)?
            .as_ref()
            .map(space_from_row)
            .transpose()
    }

    fn delete_space(&self, name: &str) -> Result<()> {
        self.write(|tx| {
            // The row lock conflicts with the key-share lock every insert referencing the
            // space takes (collections, memberships, contexts): one committed before it is
            // counted below, one after it fails its foreign key instead of orphaning a row.
            let uid: String = tx
                .query_opt("SELECT uid FROM spaces WHERE id = $1 FOR UPDATE", &[&name])
                .map_err(db_err)?
                .ok_or_else(|| Error::not_found(format!("space '{name}' not found")))?
                .try_get(0)
                .map_err(db_err)?;
            // A statement of its own, so its snapshot is taken after the lock was granted.
            let collections: i64 = tx
                .query_one(
                    "SELECT count(*) FROM collections WHERE space = $1",
                    &[&name],
                )
                .map_err(db_err)?
                .try_get(0)
                .map_err(db_err)?;
            if collections > 0 {
                return Err(Error::Conflict(format!(
                    "space '{name}' still has {collections} collection(s)"
                )));
            }
            // Memberships, contexts and the space's place in tokens in one round trip. Tokens
            // keep their other spaces; one left with none can never be used again, so it is
            // revoked. Empty list items are dropped as the embedded store's rewrite does.
            // A group's members go before the group (one statement's sub-statements see
            // the same snapshot, so the groups are deleted apart).
            tx.execute(
                "DELETE FROM group_members WHERE group_id IN \
                 (SELECT id FROM groups WHERE space = $1)",
                &[&name],
            )
            .map_err(db_err)?;
            tx.execute(
                "WITH m AS (DELETE FROM memberships WHERE space = $1), \
                 g AS (DELETE FROM groups WHERE space = $1), \
                 c AS (DELETE FROM contexts WHERE space = $1), \
                 hit AS (SELECT id, array_to_string(array_remove(array_remove( \
                            string_to_array(spaces, ','), $2), ''), ',') AS rest \
                         FROM access_tokens WHERE $2 = ANY (string_to_array(spaces, ','))) \
                 UPDATE access_tokens t SET spaces = hit.rest, revoked_at = CASE \
                     WHEN hit.rest = '' THEN COALESCE(t.revoked_at, quarry_now_ms()) \
                     ELSE t.revoked_at END \
                 FROM hit WHERE t.id = hit.id",
                &[&name, &uid],
            )
            .map_err(db_err)?;
            tx.execute("DELETE FROM spaces WHERE id = $1", &[&name])
                .map_err(db_err)?;
            Ok(())
        })?;
        self.settled(())
    }

    fn create_user(&self, name: &str) -> Result<User> {
        let conflict = || format!("user '{name}' already exists");
        let id = uuid::Uuid::new_v4().to_string();
        let row = self
            .conn()?
            .query_opt(
                "INSERT INTO users (uid, name, created_at) VALUES ($1, $2, quarry_now_ms()) \
                 ON CONFLICT (name) DO NOTHING RETURNING created_at",
                &[&id, &name],
            )
            .map_err(|e| conflict_or_db(e, conflict))?
            .ok_or_else(|| Error::Conflict(conflict()))?;
        Ok(User {
            id,
            name: name.to_owned(),
            created_at: row.try_get(0).map_err(db_err)?,
        })
    }

    fn users(&self) -> Result<Vec<User>> {
        self.conn()?
            .query(
                "SELECT uid, name, created_at FROM users ORDER BY name COLLATE \"C\"",
                &[],
            )
            .map_err(db_err)?
            .iter()
            .map(|r| {
                Ok(User {
                    id: r.try_get(0).map_err(db_err)?,
                    name: r.try_get(1).map_err(db_err)?,
                    created_at: r.try_get(2).map_err(db_err)?,
                })
            })
            .collect()
    }

    fn user(&self, key: &str) -> Result<Option<(i64, User)>> {
        // A name that is also another user's UUID: the name wins.
        let Some(r) = self
            .conn()?
            .query_opt(
                "SELECT id, uid, name, created_at FROM users WHERE name = $1 OR uid = $1 \
                 ORDER BY name = $1 DESC LIMIT 1",
                &[&key],
            )
            .map_err(db_err)?
        else {
            return Ok(None);
        };
        Ok(Some((
            r.try_get(0).map_err(db_err)?,
            User {
                id: r.try_get(1).map_err(db_err)?,
                name: r.try_get(2).map_err(db_err)?,
                created_at: r.try_get(3).map_err(db_err)?,
            },
        )))
    }

    fn delete_user(&self, user_row: i64) -> Result<()> {
        self.write(|tx| {
            // Locked first: a grant or token for this user racing the removal waits, then
            // fails its foreign key, rather than making the final DELETE fail on a row it
            // added after the sweep below.
            if tx
                .query_opt("SELECT 1 FROM users WHERE id = $1 FOR UPDATE", &[&user_row])
                .map_err(db_err)?
                .is_none()
            {
                return Ok(());
            }
            tx.execute(
                "WITH w AS (DELETE FROM web_sessions WHERE token_uid IN \
                   (SELECT uid FROM access_tokens WHERE user_id = $1)), \
                 i AS (DELETE FROM user_identities WHERE user_id = $1), \
                 t AS (DELETE FROM access_tokens WHERE user_id = $1), \
                 g AS (DELETE FROM group_members WHERE user_id = $1) \
                 DELETE FROM memberships WHERE user_id = $1",
                &[&user_row],
            )
            .map_err(db_err)?;
            tx.execute("DELETE FROM users WHERE id = $1", &[&user_row])
                .map_err(db_err)?;
            Ok(())
        })?;
        self.settled(())
    }

    fn grant(&self, user_row: i64, space: &str, role: Role) -> Result<()> {
        // One statement: two nodes granting at once leave one membership, the last role.
        self.conn()?
            .execute(
                "INSERT INTO memberships (user_id, space, role, created_at) \
                 VALUES ($1, $2, $3, quarry_now_ms()) \
                 ON CONFLICT (user_id, space) DO UPDATE SET role = EXCLUDED.role",
                &[&user_row, &space, &role.as_str()],
            )
            .map_err(db_err)?;
        self.settled(())
    }

    fn revoke_membership(&self, user_row: i64, space: &str) -> Result<bool> {
        // A user who left a space is in none of its groups: both in one statement.
        let row = self
            .conn()?
            .query_one(
                "WITH g AS (DELETE FROM group_members WHERE user_id = $1 \
                   AND group_id IN (SELECT id FROM groups WHERE space = $2)), \
                 m AS (DELETE FROM memberships WHERE user_id = $1 AND space = $2 RETURNING 1) \
                 SELECT count(*) FROM m",
                &[&user_row, &space],
            )
            .map_err(db_err)?;
        self.settled(col::<i64>(&row, 0)? > 0)
    }

    fn memberships(&self, user_row: Option<i64>) -> Result<Vec<Membership>> {
        self.conn()?
            .query(
                &format!(
                    "{MEMBERSHIP_SELECT} WHERE ($1::bigint IS NULL OR m.user_id = $1) \
                     ORDER BY u.name COLLATE \"C\", s.id COLLATE \"C\""
                ),
                &[&user_row],
            )
            .map_err(db_err)?
            .iter()
            .map(membership_from_row)
            .collect()
    }

    fn insert_token(&self, new: &NewToken) -> Result<TokenRecord> {
        let uid = uuid::Uuid::new_v4().to_string();
        let spaces = new.spaces.join(",");
        let collections = new.collections.as_ref().map(|c| c.join(","));
        let tools = new.tools.as_ref().map(|t| t.join(","));
        let params: [&(dyn ToSql + Sync); 13] = [
            &uid,
            &new.user_row,
            &new.hash,
            &new.prefix,
            &new.label,
            &spaces,
            &collections,
            &new.read_only,
            &new.expires_at,
            &new.parent_id,
            &tools,
            &new.endpoint,
            &new.manage,
        ];
        // Insert and read back with the owner's name and UUID in one round trip.
        let row = self
            .conn()?
            .query_opt(
                &format!(
                    "WITH t AS (INSERT INTO access_tokens (uid, user_id, hash, prefix, label, \
                       spaces, collections, read_only, created_at, expires_at, parent, tools, \
                       endpoint, manage) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, quarry_now_ms(), $9, $10, $11, $12, \
                       $13) \
                     RETURNING *) \
                     SELECT {TOKEN_COLUMNS} FROM t JOIN users u ON u.id = t.user_id"
                ),
                &params,
            )
            // Not `conflict_or_db`'s storage error: its DETAIL would quote the hash.
            .map_err(|e| {
                if is_unique_violation(&e) {
                    Error::Conflict("the access token already exists".into())
                } else {
                    db_err(e)
                }
            })?;
        // The owner's foreign key makes the join certain; a miss would be a broken schema.
        let row = row.ok_or_else(|| {
            Error::Storage(format!(
                "user row {} not found for a new token",
                new.user_row
            ))
        })?;
        self.settled(token_from_row(&row)?)
    }

    fn tokens(&self, user_row: Option<i64>) -> Result<Vec<TokenRecord>> {
        self.conn()?
            .query(
                &format!(
                    "SELECT {TOKEN_COLUMNS} FROM access_tokens t JOIN users u ON u.id = t.user_id \
                     WHERE ($1::bigint IS NULL OR t.user_id = $1) ORDER BY t.created_at, t.id"
                ),
                &[&user_row],
            )
            .map_err(db_err)?
            .iter()
            .map(token_from_row)
            .collect()
    }

    fn token_by_hash(&self, hash: &str) -> Result<Option<TokenGrant>> {
        // One round trip per authentication: the token (depth 0), its ancestors (nearest
        // first, as `token_chain` of its parent gives them) and, on the token's row only, its
        // owner's memberships as parallel arrays in one order.
        let rows = self
            .conn()?
            .query(
                &format!(
                    "WITH RECURSIVE chain(tid, depth) AS ( \
                       SELECT id, 0 FROM access_tokens WHERE hash = $1 \
                       UNION ALL \
                       SELECT p.id, chain.depth + 1 FROM chain \
                       JOIN access_tokens c ON c.id = chain.tid \
                       JOIN access_tokens p ON p.uid = c.parent \
                       WHERE chain.depth < $2::bigint) \
                     SELECT {TOKEN_COLUMNS}, ms.spaces, ms.space_ids, ms.roles, ms.joined \
                     FROM chain JOIN access_tokens t ON t.id = chain.tid \
                     JOIN users u ON u.id = t.user_id \
                     LEFT JOIN LATERAL ( \
                       SELECT array_agg(s.id ORDER BY s.id COLLATE \"C\") AS spaces, \
                              array_agg(s.uid ORDER BY s.id COLLATE \"C\") AS space_ids, \
                              array_agg(m.role ORDER BY s.id COLLATE \"C\") AS roles, \
                              array_agg(m.created_at ORDER BY s.id COLLATE \"C\") AS joined \
                       FROM memberships m JOIN spaces s ON s.id = m.space \
                       WHERE m.user_id = t.user_id) ms ON chain.depth = 0 \
                     ORDER BY chain.depth"
                ),
                // The chain below the token is as long as `token_chain(parent)` allows.
                &[&hash, &(MAX_TOKEN_CHAIN + 1)],
            )
            .map_err(db_err)?;
        let Some((first, rest)) = rows.split_first() else {
            return Ok(None);
        };
        let token = token_from_row(first)?;
        let spaces: Vec<String> = list(first, 17)?;
        let space_ids: Vec<String> = list(first, 18)?;
        let roles: Vec<String> = list(first, 19)?;
        let joined: Vec<i64> = list(first, 20)?;
        if [space_ids.len(), roles.len(), joined.len()] != [spaces.len(); 3] {
            return Err(Error::Storage("memberships read unevenly".into()));
        }
        let memberships = spaces
            .into_iter()
            .zip(space_ids)
            .zip(roles)
            .zip(joined)
            .map(|(((space, space_id), role), joined_at)| Membership {
                user: token.user.clone(),
                space,
                space_id,
                role: Role::parse(&role).unwrap_or(Role::Viewer),
                joined_at,
            })
            .collect();
        let ancestors = rest.iter().map(token_from_row).collect::<Result<_>>()?;
        Ok(Some(TokenGrant {
            token,
            memberships,
            ancestors,
        }))
    }

    fn token_chain(&self, id: &str) -> Result<Vec<TokenRecord>> {
        self.conn()?
            .query(
                &format!(
                    "WITH RECURSIVE chain(tid, depth) AS ( \
                       SELECT id, 0 FROM access_tokens WHERE uid = $1 \
                       UNION ALL \
                       SELECT p.id, chain.depth + 1 FROM chain \
                       JOIN access_tokens c ON c.id = chain.tid \
                       JOIN access_tokens p ON p.uid = c.parent \
                       WHERE chain.depth < $2::bigint) \
                     SELECT {TOKEN_COLUMNS} FROM chain \
                     JOIN access_tokens t ON t.id = chain.tid JOIN users u ON u.id = t.user_id \
                     ORDER BY chain.depth"
                ),
                &[&id, &MAX_TOKEN_CHAIN],
            )
            .map_err(db_err)?
            .iter()
            .map(token_from_row)
            .collect()
    }

    fn revoke_token(&self, key: &str, user_row: Option<i64>, at: i64) -> Result<bool> {
        // The tokens matched and everything they created (transitively), in one statement:
        // one snapshot, so the answer and the revocations agree. A child created by another
        // node after it runs is still refused, since authentication checks the chain.
        let row = self
            .conn()?
            .query_one(
                "WITH RECURSIVE below(uid, depth) AS ( \
                   SELECT uid, 0 FROM access_tokens \
                   WHERE (uid = $1 OR prefix = $1) AND ($2::bigint IS NULL OR user_id = $2) \
                   UNION ALL \
                   SELECT t.uid, below.depth + 1 FROM access_tokens t \
                   JOIN below ON t.parent = below.uid WHERE below.depth < $4::bigint), \
                 revoked AS ( \
                   UPDATE access_tokens SET revoked_at = COALESCE(revoked_at, $3) \
                   WHERE uid IN (SELECT uid FROM below)) \
                 SELECT EXISTS (SELECT 1 FROM below WHERE depth = 0)",
                &[&key, &user_row, &at, &MAX_TOKEN_CHAIN],
            )
            .map_err(db_err)?;
        self.settled(row.try_get(0).map_err(db_err)?)
    }

    fn access_generation(&self) -> Result<i64> {
        quarry_store::thread_guard::check();
        if let Some(n) = self.access_watch.trusted() {
            return Ok(n);
        }
        self.access_watch.start(|| self.pool.connector());
        let row = self
            .conn()?
            .query_one("SELECT n FROM access_generation WHERE id = 1", &[])
            .map_err(db_err)?;
        col(&row, 0)
    }

    fn touch_token(&self, id: &str, at: i64) -> Result<()> {
        self.conn()?
            .execute(
                "UPDATE access_tokens SET last_used_at = $2 WHERE uid = $1",
                &[&id, &at],
            )
            .map_err(db_err)?;
        Ok(())
    }

    fn create_group(&self, space: &str, name: &str, description: &str) -> Result<Group> {
        let conflict = || format!("space '{space}' already has a group '{name}'");
        let id = uuid::Uuid::new_v4().to_string();
        let mut conn = self.conn()?;
        // ON CONFLICT: two nodes creating one name at once get one group and one Conflict.
        // No row and no conflict: the space is missing (the SELECT found none).
        let row = conn
            .query_opt(
                "WITH s AS (SELECT id FROM spaces WHERE id = $2), \
                 g AS (INSERT INTO groups (uid, space, name, description, created_at) \
                   SELECT $1, s.id, $3, $4, quarry_now_ms() FROM s \
                   ON CONFLICT (space, name) DO NOTHING RETURNING created_at) \
                 SELECT (SELECT created_at FROM g), EXISTS (SELECT 1 FROM s)",
                &[&id, &space, &name, &description],
            )
            .map_err(|e| conflict_or_db(e, conflict))?
            .ok_or_else(|| Error::Storage("creating a group returned no row".into()))?;
        let created_at: Option<i64> = col(&row, 0)?;
        let known: bool = col(&row, 1)?;
        match created_at {
            Some(created_at) => Ok(Group {
                id,
                space: space.to_owned(),
                name: name.to_owned(),
                description: description.to_owned(),
                created_at,
                members: Vec::new(),
            }),
            None if known => Err(Error::Conflict(conflict())),
            None => Err(Error::not_found(format!("space '{space}' not found"))),
        }
    }

    fn groups(&self, space: &str) -> Result<Vec<Group>> {
        self.conn()?
            .query(
                &format!(
                    "SELECT {GROUP_COLUMNS} FROM groups g WHERE g.space = $1 \
                     ORDER BY g.name COLLATE \"C\""
                ),
                &[&space],
            )
            .map_err(db_err)?
            .iter()
            .map(group_from_row)
            .collect()
    }

    fn group(&self, space: &str, key: &str) -> Result<Option<Group>> {
        self.conn()?
            .query_opt(
                &format!(
                    "SELECT {GROUP_COLUMNS} FROM groups g WHERE g.space = $1 \
                     AND (g.name = $2 OR g.uid = $2) ORDER BY g.name = $2 DESC LIMIT 1"
                ),
                &[&space, &key],
            )
            .map_err(db_err)?
            .as_ref()
            .map(group_from_row)
            .transpose()
    }

    fn delete_group(&self, space: &str, name: &str) -> Result<bool> {
        let out = self.write(|tx| {
            // Locked first: a member being added waits, then fails its foreign key.
            let Some(row) = tx
                .query_opt(
                    "SELECT id FROM groups WHERE space = $1 AND name = $2 FOR UPDATE",
                    &[&space, &name],
                )
                .map_err(db_err)?
            else {
                return Ok(false);
            };
            let id: i64 = col(&row, 0)?;
            tx.execute("DELETE FROM group_members WHERE group_id = $1", &[&id])
                .map_err(db_err)?;
            tx.execute("DELETE FROM groups WHERE id = $1", &[&id])
                .map_err(db_err)?;
            Ok(true)
        })?;
        self.settled(out)
    }

    fn add_group_member(&self, space: &str, group: &str, user_row: i64) -> Result<bool> {
        // One statement: the group looked up and the member added (a second add, or two
        // nodes adding at once, leave one row). No group: no row from `g`.
        let row = self
            .conn()?
            .query_one(
                "WITH g AS (SELECT id FROM groups WHERE space = $1 AND name = $2), \
                 i AS (INSERT INTO group_members (group_id, user_id, created_at) \
                   SELECT g.id, $3, quarry_now_ms() FROM g \
                   ON CONFLICT (group_id, user_id) DO NOTHING RETURNING 1) \
                 SELECT EXISTS (SELECT 1 FROM g), EXISTS (SELECT 1 FROM i)",
                &[&space, &group, &user_row],
            )
            .map_err(db_err)?;
        if !col::<bool>(&row, 0)? {
            return Err(Error::not_found(format!(
                "group '{group}' not found in space '{space}'"
            )));
        }
        self.settled(col(&row, 1)?)
    }

    fn remove_group_member(&self, space: &str, group: &str, user_row: i64) -> Result<bool> {
        let n = self
            .conn()?
            .execute(
                "DELETE FROM group_members WHERE user_id = $3 AND group_id IN \
                 (SELECT id FROM groups WHERE space = $1 AND name = $2)",
                &[&space, &group, &user_row],
            )
            .map_err(db_err)?;
        self.settled(n > 0)
    }

    fn user_groups(&self, space: &str, user_row: i64) -> Result<Vec<String>> {
        self.conn()?
            .query(
                "SELECT g.name FROM group_members m JOIN groups g ON g.id = m.group_id \
                 WHERE g.space = $1 AND m.user_id = $2 ORDER BY g.name COLLATE \"C\"",
                &[&space, &user_row],
            )
            .map_err(db_err)?
            .iter()
            .map(|r| col(r, 0))
            .collect()
    }

    fn collection_ids(&self, space: &str, keys: &[String]) -> Result<Vec<(i64, String)>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        // One round trip for every key, in the keys' order, at most one collection each (a
        // key that is one collection's UUID and another's name: the UUID wins).
        self.conn()?
            .query(
                "SELECT c.id, c.uid FROM unnest($2::text[]) WITH ORDINALITY AS k(key, ord) \
                 CROSS JOIN LATERAL ( \
                   SELECT id, uid FROM collections \
                   WHERE space = $1 AND (uid = k.key OR name = k.key) \
                   ORDER BY uid = k.key DESC LIMIT 1) c \
                 ORDER BY k.ord",
                &[&space, &keys],
            )
            .map_err(db_err)?
            .iter()
            .map(|r| Ok((r.try_get(0).map_err(db_err)?, r.try_get(1).map_err(db_err)?)))
            .collect()
    }
}

fn space_from_row(r: &Row) -> Result<Space> {
    Ok(Space {
        name: r.try_get(0).map_err(db_err)?,
        id: r.try_get(1).map_err(db_err)?,
        description: r.try_get(2).map_err(db_err)?,
        created_at: r.try_get(3).map_err(db_err)?,
    })
}

/// A group read through [`GROUP_COLUMNS`].
fn group_from_row(r: &Row) -> Result<Group> {
    Ok(Group {
        id: col(r, 0)?,
        space: col(r, 1)?,
        name: col(r, 2)?,
        description: col(r, 3)?,
        created_at: col(r, 4)?,
        members: list(r, 5)?,
    })
}

fn membership_from_row(r: &Row) -> Result<Membership> {
    let role: String = r.try_get(3).map_err(db_err)?;
    Ok(Membership {
        user: r.try_get(0).map_err(db_err)?,
        space: r.try_get(1).map_err(db_err)?,
        space_id: r.try_get(2).map_err(db_err)?,
        role: Role::parse(&role).unwrap_or(Role::Viewer),
        joined_at: r.try_get(4).map_err(db_err)?,
    })
}

/// A token read through [`TOKEN_COLUMNS`].
fn token_from_row(r: &Row) -> Result<TokenRecord> {
    let spaces: String = r.try_get(5).map_err(db_err)?;
    let collections: Option<String> = r.try_get(6).map_err(db_err)?;
    let tools: Option<String> = r.try_get(14).map_err(db_err)?;
    Ok(TokenRecord {
        id: r.try_get(0).map_err(db_err)?,
        user_row: r.try_get(1).map_err(db_err)?,
        user_id: r.try_get(12).map_err(db_err)?,
        user: r.try_get(2).map_err(db_err)?,
        label: r.try_get(3).map_err(db_err)?,
        prefix: r.try_get(4).map_err(db_err)?,
        spaces: split_list(&spaces),
        collections: collections.as_deref().map(split_list),
        read_only: r.try_get(7).map_err(db_err)?,
        created_at: r.try_get(8).map_err(db_err)?,
        expires_at: r.try_get(9).map_err(db_err)?,
        last_used_at: r.try_get(10).map_err(db_err)?,
        revoked_at: r.try_get(11).map_err(db_err)?,
        parent_id: r.try_get(13).map_err(db_err)?,
        tools: tools.as_deref().map(split_list),
        endpoint: r.try_get(15).map_err(db_err)?,
        manage: r.try_get(16).map_err(db_err)?,
    })
}

/// A comma-separated list column (the embedded store's encoding), empty items dropped.
fn split_list(s: &str) -> Vec<String> {
    s.split(',')
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect()
}

/// An aggregated array column; NULL (no rows aggregated) is empty.
fn list<T>(r: &Row, i: usize) -> Result<Vec<T>>
where
    for<'a> T: postgres::types::FromSql<'a>,
{
    Ok(r.try_get::<_, Option<Vec<T>>>(i)
        .map_err(db_err)?
        .unwrap_or_default())
}
