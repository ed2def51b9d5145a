//! Groups of users in a space, as a caller manages them (`/api/v1/groups`, `quarry group`),
//! and the reader keys a principal gets from them. The rules, beside `manage.rs`'s:
//!
//! - A group belongs to one space; its name (1–64 letters, digits, `-`, `_`, `.`, starting
//!   with a letter or digit, not shaped like a UUID) is unique there. A document's readers
//!   name it `group:<name>`.
//! - Any member of the space (any role, a read-only token too) lists its groups; creating
//!   and deleting groups and changing their members needs the space's admin or owner role,
//!   and a token that is not read-only. The machine's owner does everything.
//! - Only members of the space are put in its groups; a user who leaves the space leaves
//!   its groups (the store does that).
//! - A space the caller cannot see is "not found", like a missing one.

use std::sync::Arc;

use quarry_core::{Error, Principal, Result};
use quarry_store::{Group, Role, Space};

use crate::directory::Directory;
use crate::manage::{Actor, checked_description};
use crate::names::looks_like_uuid;

/// Longest group name.
pub const MAX_GROUP_NAME: usize = 64;

/// The reader key of a user (`user:<name>`), as a document's readers name it.
pub fn user_reader_key(user: &str) -> String {
    format!("user:{user}")
}

/// The reader key of a group (`group:<name>`), as a document's readers name it.
pub fn group_reader_key(group: &str) -> String {
    format!("group:{group}")
}

/// A group name: 1–64 ASCII letters, digits, `-`, `_` or `.`, starting with a letter or a
/// digit, and not shaped like a UUID (groups are found by name or UUID alike).
pub fn validate_group_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= MAX_GROUP_NAME
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !ok {
        return Err(Error::invalid(format!(
            "invalid group name {name:?}: use letters, digits, '-', '_' or '.', starting with a letter or digit ({MAX_GROUP_NAME} at most)"
        )));
    }
    if looks_like_uuid(name) {
        return Err(Error::invalid(format!(
            "invalid group name {name:?}: it looks like a UUID, which would be ambiguous"
        )));
    }
    Ok(())
}

fn group_not_found(key: &str, space: &Space) -> Error {
    Error::not_found(format!("group '{key}' not found in space '{}'", space.name))
}

impl Directory {
    /// The space `key` as `actor` manages its groups: visible, a token that may write, and
    /// the admin or owner role there.
    fn group_admin(&self, actor: &Actor, key: &str) -> Result<Space> {
        Ok(self.space_admin(actor, key, "managing the groups")?.0)
    }

    /// The group `key` (name or UUID) of `space`, or `NotFound`.
    fn space_group(&self, space: &Space, key: &str) -> Result<Group> {
        let key = key.trim();
        self.store
            .group(&space.name, key)?
            .ok_or_else(|| group_not_found(key, space))
    }

    /// The groups of space `key` (name or UUID), by name, with their members: any member of
    /// the space may list them.
    pub fn groups_as(&self, principal: &Principal, key: &str) -> Result<(Space, Vec<Group>)> {
        let (space, _) = self.visible_space_of(&Actor::of(principal), key)?;
        let groups = self.store.groups(&space.name)?;
        Ok((space, groups))
    }

    /// One group (name or UUID) of space `key`, as [`Directory::groups_as`] shows it.
    pub fn group_as(&self, principal: &Principal, key: &str, group: &str) -> Result<Group> {
        let (space, _) = self.visible_space_of(&Actor::of(principal), key)?;
        self.space_group(&space, group)
    }

    /// Creates a group in space `key`, with no members (admins and owners).
    pub fn create_group_as(
        &self,
        principal: &Principal,
        key: &str,
        name: &str,
        description: &str,
    ) -> Result<Group> {
        let space = self.group_admin(&Actor::of(principal), key)?;
        let name = name.trim();
        validate_group_name(name)?;
        let description = checked_description(description)?;
        self.store.create_group(&space.name, name, description)
    }

    /// Deletes a group (name or UUID) of space `key` with its memberships (admins and
    /// owners); returns it as it was.
    pub fn delete_group_as(&self, principal: &Principal, key: &str, group: &str) -> Result<Group> {
        let space = self.group_admin(&Actor::of(principal), key)?;
        let found = self.space_group(&space, group)?;
        if !self.store.delete_group(&space.name, &found.name)? {
            return Err(group_not_found(group.trim(), &space));
        }
        Ok(found)
    }

    /// Puts `users` (names or UUIDs; each a member of the space) in a group of space `key`
    /// (admins and owners). One already in it stays, unchanged. Every user is checked before
    /// any is added. Returns the group as it is now.
    pub fn add_group_members_as(
        &self,
        principal: &Principal,
        key: &str,
        group: &str,
        users: &[String],
    ) -> Result<Group> {
        let space = self.group_admin(&Actor::of(principal), key)?;
        let found = self.space_group(&space, group)?;
        if users.is_empty() {
            return Err(Error::invalid("name at least one user to add to the group"));
        }
        let mut rows: Vec<i64> = Vec::with_capacity(users.len());
        for user in users {
            let (row, u) = self.user_row(user)?;
            let member = self
                .store
                .memberships(Some(row))?
                .iter()
                .any(|m| m.space_id == space.id);
            if !member {
                return Err(Error::Conflict(format!(
                    "user '{}' is not a member of space '{}': make them a member of the space first",
                    u.name, space.name
                )));
            }
            if !rows.contains(&row) {
                rows.push(row);
            }
        }
        for row in rows {
            self.store.add_group_member(&space.name, &found.name, row)?;
        }
        self.space_group(&space, &found.id)
    }

    /// Takes `users` (names or UUIDs) out of a group of space `key` (admins and owners).
    /// Every user is checked before any is removed: one that is not in the group is
    /// `NotFound`. Returns the group as it is now.
    pub fn remove_group_members_as(
        &self,
        principal: &Principal,
        key: &str,
        group: &str,
        users: &[String],
    ) -> Result<Group> {
        let space = self.group_admin(&Actor::of(principal), key)?;
        let found = self.space_group(&space, group)?;
        if users.is_empty() {
            return Err(Error::invalid(
                "name at least one user to take out of the group",
            ));
        }
        let mut rows: Vec<i64> = Vec::with_capacity(users.len());
        for user in users {
            let (row, u) = self.user_row(user)?;
            if !found.members.contains(&u.name) {
                return Err(Error::not_found(format!(
                    "user '{}' is not in group '{}' of space '{}'",
                    u.name, found.name, space.name
                )));
            }
            if !rows.contains(&row) {
                rows.push(row);
            }
        }
        for row in rows {
            self.store
                .remove_group_member(&space.name, &found.name, row)?;
        }
        self.space_group(&space, &found.id)
    }

    /// The reader keys of a user with `role` in `space` (see `quarry_core::Scope::readers`):
    /// `None` for the space's admins and owners, who read every document; else
    /// `user:<name>` and `group:<name>` for each group of the space the user is in.
    pub(crate) fn readers_for(
        &self,
        space: &str,
        user_row: i64,
        user: &str,
        role: Role,
    ) -> Result<Option<Arc<[String]>>> {
        if role.access() >= quarry_core::Access::Admin {
            return Ok(None);
        }
        let keys: Vec<String> = std::iter::once(user_reader_key(user))
            .chain(
                self.store
                    .user_groups(space, user_row)?
                    .iter()
                    .map(|g| group_reader_key(g)),
            )
            .collect();
        Ok(Some(keys.into()))
    }

    /// The reader keys of `user` (name or UUID) in `space` (name or UUID), as a token of
    /// theirs for that space gets them: `None` for its admins and owners; `NotFound` when
    /// the user is not a member.
    pub fn reader_keys(&self, space: &str, user: &str) -> Result<Option<Arc<[String]>>> {
        let space = self.space(space)?;
        let (row, u) = self.user_row(user)?;
        let role = self
            .store
            .memberships(Some(row))?
            .into_iter()
            .find(|m| m.space_id == space.id)
            .ok_or_else(|| {
                Error::not_found(format!(
                    "user '{}' is not a member of space '{}'",
                    u.name, space.name
                ))
            })?
            .role;
        self.readers_for(&space.name, row, &u.name, role)
    }
}
