//! Managing spaces, members and users as a caller (the web UI's Access page and
//! `/api/v1/spaces`), with the rules in one place:
//!
//! - The machine's owner sees and manages everything. A user (through a token) sees the
//!   spaces it is a member of *and* its token names; any other space is "not found", exactly
//!   like a missing one.
//! - A read-only token changes nothing.
//! - Members are managed by a space's admins and owners; only an owner grants, changes or
//!   removes the owner role; a space's last owner can be neither demoted nor removed.
//! - A space is deleted by the machine's owner or one of its owners (never `default`).
//! - Users are server-wide: only the machine's owner lists or adds them.
//! - Groups (`groups.rs`) are listed by any member of their space and managed by its admins
//!   and owners.
//!
//! The checks and the writes are separate statements: a server runs these one at a time
//! (its write queue), so two requests cannot both remove "the other" owner.

use quarry_core::{Error, Principal, Result};
use quarry_store::{Role, Space, TokenRecord, User};
use serde::Serialize;

use crate::directory::Directory;

/// Who is managing: the part of a [`Principal`] these rules read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Actor {
    /// The machine's owner (CLI, a loopback server without `--auth`): every space and user.
    MachineOwner,
    /// A user through one of its tokens.
    User {
        /// The user's name.
        name: String,
        /// UUIDs of the spaces the token names.
        token_spaces: Vec<String>,
        /// Whether the token may only read.
        read_only: bool,
        /// Whether the credential manages governance ([`quarry_core::Scope::manage`]).
        manage: bool,
    },
}

impl Actor {
    /// The actor a resolved principal manages as.
    pub(crate) fn of(principal: &Principal) -> Actor {
        match &principal.identity {
            None => Actor::MachineOwner,
            Some(c) => Actor::User {
                name: c.user.clone(),
                token_spaces: c.spaces.clone(),
                read_only: c.read_only,
                manage: principal.scope.manage,
            },
        }
    }

    /// `Forbidden` for a read-only token.
    pub(crate) fn require_write(&self) -> Result<()> {
        match self {
            Actor::User {
                read_only: true, ..
            } => Err(Error::Forbidden(
                "this token is read-only: it cannot change spaces, members, groups, users or tokens"
                    .into(),
            )),
            _ => Ok(()),
        }
    }

    /// `ManagementForbidden` for a credential that does not manage governance (members,
    /// roles, groups, a space's deletion); `what` names the action.
    pub(crate) fn require_manage(&self, what: &str) -> Result<()> {
        match self {
            Actor::User { manage: false, .. } => Err(Error::ManagementForbidden(format!(
                "{what} needs a management credential: {}",
                quarry_core::MANAGEMENT_HINT
            ))),
            _ => Ok(()),
        }
    }

    /// `Forbidden` unless this is the machine's owner; `what` names the action.
    fn require_machine_owner(&self, what: &str) -> Result<()> {
        match self {
            Actor::MachineOwner => Ok(()),
            Actor::User { .. } => Err(Error::Forbidden(format!(
                "{what}: users are server-wide, so only the machine's owner may manage them (the quarry CLI, or the web UI of a loopback server started without --auth)"
            ))),
        }
    }
}

/// A space as its viewer sees it.
#[derive(Debug, Clone, Serialize)]
pub struct SpaceView {
    /// The space's UUID.
    pub id: String,
    /// The space's name.
    pub name: String,
    /// What the space is for.
    pub description: String,
    /// Milliseconds since the epoch.
    pub created_at: i64,
    /// The caller's role (`owner` for the machine's owner).
    pub role: Role,
    /// How many members it has.
    pub members: usize,
    /// `default`, which cannot be deleted.
    pub is_default: bool,
}

/// One member of a space.
#[derive(Debug, Clone, Serialize)]
pub struct Member {
    /// The user's name.
    pub user: String,
    /// The member's role.
    pub role: Role,
    /// Milliseconds since the epoch.
    pub joined_at: i64,
}

/// The names behind the ids a space's usage counts carry ([`Directory::usage_names_as`]).
#[derive(Debug, Clone, Default)]
pub struct UsageNames {
    /// User UUID → name.
    pub users: std::collections::BTreeMap<String, String>,
    /// Token UUID → label (its prefix when it has none).
    pub tokens: std::collections::BTreeMap<String, String>,
}

/// A user with the spaces it belongs to (for the machine's owner).
#[derive(Debug, Clone, Serialize)]
pub struct UserView {
    /// The user's UUID.
    pub id: String,
    /// The user's name.
    pub name: String,
    /// Milliseconds since the epoch.
    pub created_at: i64,
    /// The spaces it belongs to, with its role in each.
    pub spaces: Vec<UserSpace>,
}

#[derive(Debug, Clone, Serialize)]
/// A space a user belongs to (a line of [`UserView::spaces`]).
pub struct UserSpace {
    /// The space's name.
    pub space: String,
    /// The space's UUID.
    pub space_id: String,
    /// The user's role there.
    pub role: Role,
}

/// The roles, highest first, for error messages.
const ROLES: &str = "owner, admin, editor, viewer";

/// A role from its name; the error lists the roles.
pub fn parse_role(s: &str) -> Result<Role> {
    Role::parse(s.trim())
        .ok_or_else(|| Error::invalid(format!("invalid role {s:?}: use one of {ROLES}")))
}

/// Longest space or group description.
const MAX_DESCRIPTION_CHARS: usize = 1000;

/// A space's or group's description, trimmed: at most [`MAX_DESCRIPTION_CHARS`], no control
/// characters but line breaks.
pub(crate) fn checked_description(description: &str) -> Result<&str> {
    let description = description.trim();
    if description.chars().count() > MAX_DESCRIPTION_CHARS {
        return Err(Error::invalid(format!(
            "description is longer than {MAX_DESCRIPTION_CHARS} characters"
        )));
    }
    if description.chars().any(|c| c.is_control() && c != '\n') {
        return Err(Error::invalid(
            "description must not contain control characters",
        ));
    }
    Ok(description)
}

fn space_not_found(key: &str) -> Error {
    Error::not_found(format!("space '{key}' not found"))
}

impl Directory {
    /// The spaces `actor` can see, with its role in each and their member counts.
    pub fn visible_spaces(&self, principal: &Principal) -> Result<Vec<SpaceView>> {
        let actor = &Actor::of(principal);
        let spaces = self.store.spaces()?;
        let all = self.store.memberships(None)?;
        let count = |id: &str| all.iter().filter(|m| m.space_id == id).count();
        let view = |s: Space, role: Role| SpaceView {
            members: count(&s.id),
            is_default: s.name == quarry_core::DEFAULT_SPACE,
            id: s.id,
            name: s.name,
            description: s.description,
            created_at: s.created_at,
            role,
        };
        Ok(match actor {
            Actor::MachineOwner => spaces.into_iter().map(|s| view(s, Role::Owner)).collect(),
            Actor::User {
                name, token_spaces, ..
            } => spaces
                .into_iter()
                .filter(|s| token_spaces.contains(&s.id))
                .filter_map(|s| {
                    let role = all
                        .iter()
                        .find(|m| m.space_id == s.id && m.user == *name)?
                        .role;
                    Some(view(s, role))
                })
                .collect(),
        })
    }

    /// A space `actor` can see (by name or UUID) and its role there; any other is "not
    /// found", like a missing one.
    pub fn visible_space(&self, principal: &Principal, key: &str) -> Result<(Space, Role)> {
        self.visible_space_of(&Actor::of(principal), key)
    }

    pub(crate) fn visible_space_of(&self, actor: &Actor, key: &str) -> Result<(Space, Role)> {
        let space = self
            .store
            .space(key.trim())?
            .ok_or_else(|| space_not_found(key))?;
        match actor {
            Actor::MachineOwner => Ok((space, Role::Owner)),
            Actor::User {
                name, token_spaces, ..
            } => {
                if !token_spaces.contains(&space.id) {
                    return Err(space_not_found(key));
                }
                let (row, _) = self.user_row(name)?;
                let role = self
                    .store
                    .memberships(Some(row))?
                    .into_iter()
                    .find(|m| m.space_id == space.id)
                    .ok_or_else(|| space_not_found(key))?
                    .role;
                Ok((space, role))
            }
        }
    }

    /// Creates a space; a user who creates one becomes its owner (its token's spaces do not
    /// change: a new token is needed to work in it).
    pub fn create_space_as(
        &self,
        principal: &Principal,
        name: &str,
        description: &str,
    ) -> Result<Space> {
        let actor = &Actor::of(principal);
        actor.require_write()?;
        let description = checked_description(description)?;
        let space = self.create_space(name.trim(), description)?;
        if let Actor::User { name: user, .. } = actor
            && let Err(e) = self.grant(user, &space.name, Role::Owner)
        {
            // Leave no ownerless space behind a failed request.
            let _ = self.store.delete_space(&space.name);
            return Err(e);
        }
        Ok(space)
    }

    /// Checks that `principal` owns the space `key` (or is the machine's owner), through a
    /// token that may write and manage, and returns it; `action` names what needs it
    /// (`deleting`: "deleting space 'x' needs the owner role").
    pub fn check_space_owner(
        &self,
        principal: &Principal,
        key: &str,
        action: &str,
    ) -> Result<Space> {
        let actor = &Actor::of(principal);
        let (space, role) = self.visible_space_of(actor, key)?;
        actor.require_write()?;
        if role < Role::Owner {
            return Err(Error::Forbidden(format!(
                "{action} space '{}' needs the owner role; you are {}",
                space.name,
                role.as_str()
            )));
        }
        actor.require_manage(&format!("{action} a space"))?;
        Ok(space)
    }

    /// Checks that `actor` may delete the space `key` and returns it: the machine's owner
    /// or an owner of the space, never the default space. The caller removes its knowledge
    /// bases, then calls [`Directory::delete_space`].
    pub fn check_delete_space(&self, principal: &Principal, key: &str) -> Result<Space> {
        let space = self.check_space_owner(principal, key, "deleting")?;
        if space.name == quarry_core::DEFAULT_SPACE {
            return Err(Error::invalid(
                "the default space cannot be deleted (it is where requests that name no space go)",
            ));
        }
        Ok(space)
    }

    /// The members of a space `actor` can see (any role may list them).
    pub fn members_as(&self, principal: &Principal, key: &str) -> Result<(Space, Vec<Member>)> {
        let actor = &Actor::of(principal);
        let (space, _) = self.visible_space_of(actor, key)?;
        let members = self.space_members(&space)?;
        Ok((space, members))
    }

    /// For the admins of space `key` reading its insight (`what` names the view in a
    /// refusal): the space, and the names behind the user and token ids its usage counts
    /// carry (users by UUID → name; tokens by UUID → label). Only this space's members and
    /// their tokens are named.
    pub fn usage_names_as(
        &self,
        principal: &Principal,
        key: &str,
        what: &str,
    ) -> Result<(Space, UsageNames)> {
        let (space, _) = self.space_admin(&Actor::of(principal), key, what)?;
        let members: Vec<String> = self
            .space_members(&space)?
            .into_iter()
            .map(|m| m.user)
            .collect();
        let mut names = UsageNames::default();
        for user in self.store.users()? {
            if members.contains(&user.name) {
                names.users.insert(user.id, user.name);
            }
        }
        for token in self.store.tokens(None)? {
            if members.contains(&token.user) {
                // An unlabelled token by its prefix, as the token list shows it.
                let name = if token.label.is_empty() {
                    format!("{}…", token.prefix)
                } else {
                    token.label
                };
                names.tokens.insert(token.id, name);
            }
        }
        Ok((space, names))
    }

    pub(crate) fn space_members(&self, space: &Space) -> Result<Vec<Member>> {
        Ok(self
            .store
            .memberships(None)?
            .into_iter()
            .filter(|m| m.space_id == space.id)
            .map(|m| Member {
                user: m.user,
                role: m.role,
                joined_at: m.joined_at,
            })
            .collect())
    }

    /// What `actor` may do to the members of `key`: the space, the actor's role there, and
    /// the member `user` (its current role, `None` when not a member).
    fn member_change(
        &self,
        actor: &Actor,
        key: &str,
        user: &str,
    ) -> Result<(Space, Role, User, Option<Role>)> {
        let (space, mine) = self.space_admin(actor, key, "managing the members")?;
        let (row, user) = self.user_row(user)?;
        let current = self
            .store
            .memberships(Some(row))?
            .into_iter()
            .find(|m| m.space_id == space.id)
            .map(|m| m.role);
        Ok((space, mine, user, current))
    }

    /// The space `key` as `actor` administers it (`what`: "managing the members"): visible,
    /// a token that may write and manage, and the admin or owner role there.
    pub(crate) fn space_admin(
        &self,
        actor: &Actor,
        key: &str,
        what: &str,
    ) -> Result<(Space, Role)> {
        let (space, mine) = self.visible_space_of(actor, key)?;
        actor.require_write()?;
        if mine < Role::Admin {
            return Err(Error::Forbidden(format!(
                "{what} of space '{}' needs the admin or owner role; you are {}",
                space.name,
                mine.as_str()
            )));
        }
        actor.require_manage(&format!("{what} of a space"))?;
        Ok((space, mine))
    }

    fn is_last_owner(&self, space: &Space) -> Result<bool> {
        let owners = self
            .space_members(space)?
            .iter()
            .filter(|m| m.role == Role::Owner)
            .count();
        Ok(owners <= 1)
    }

    /// Adds `user` to a space with `role`, or changes its role.
    pub fn set_member_as(
        &self,
        principal: &Principal,
        key: &str,
        user: &str,
        role: Role,
    ) -> Result<Member> {
        let actor = &Actor::of(principal);
        let (space, mine, user, current) = self.member_change(actor, key, user)?;
        if (role == Role::Owner || current == Some(Role::Owner)) && mine < Role::Owner {
            return Err(Error::Forbidden(format!(
                "only an owner of space '{}' can grant, change or take away the owner role",
                space.name
            )));
        }
        if current == Some(Role::Owner) && role != Role::Owner && self.is_last_owner(&space)? {
            return Err(Error::Conflict(format!(
                "'{}' is the last owner of space '{}': make another member owner first",
                user.name, space.name
            )));
        }
        let m = self.grant(&user.id, &space.id, role)?;
        Ok(Member {
            user: m.user,
            role: m.role,
            joined_at: m.joined_at,
        })
    }

    /// Takes `user` out of a space.
    pub fn remove_member_as(&self, principal: &Principal, key: &str, user: &str) -> Result<()> {
        let actor = &Actor::of(principal);
        let (space, mine, user, current) = self.member_change(actor, key, user)?;
        let Some(current) = current else {
            return Err(Error::not_found(format!(
                "user '{}' is not a member of space '{}'",
                user.name, space.name
            )));
        };
        if current == Role::Owner {
            if mine < Role::Owner {
                return Err(Error::Forbidden(format!(
                    "only an owner of space '{}' can remove an owner",
                    space.name
                )));
            }
            if self.is_last_owner(&space)? {
                return Err(Error::Conflict(format!(
                    "'{}' is the last owner of space '{}': make another member owner first",
                    user.name, space.name
                )));
            }
        }
        self.revoke_membership(&user.id, &space.id)
    }

    /// Every user with its spaces (the machine's owner only).
    pub fn users_as(&self, principal: &Principal) -> Result<Vec<UserView>> {
        let actor = &Actor::of(principal);
        actor.require_machine_owner("listing users")?;
        let members = self.store.memberships(None)?;
        Ok(self
            .store
            .users()?
            .into_iter()
            .map(|u| UserView {
                spaces: members
                    .iter()
                    .filter(|m| m.user == u.name)
                    .map(|m| UserSpace {
                        space: m.space.clone(),
                        space_id: m.space_id.clone(),
                        role: m.role,
                    })
                    .collect(),
                id: u.id,
                name: u.name,
                created_at: u.created_at,
            })
            .collect())
    }

    /// Adds a user (the machine's owner only).
    pub fn create_user_as(&self, principal: &Principal, name: &str) -> Result<User> {
        let actor = &Actor::of(principal);
        actor.require_machine_owner("adding a user")?;
        self.create_user(name.trim())
    }

    /// The tokens `principal` may list and revoke: with a management credential its user's
    /// (every token for the machine's owner); otherwise only its own token and the tokens
    /// made from it, so an agent's token never sees or revokes its person's other
    /// credentials.
    pub fn tokens_as(&self, principal: &Principal) -> Result<Vec<TokenRecord>> {
        let identity = principal.identity.as_ref();
        let all = self.tokens(identity.map(|c| c.user.as_str()))?;
        if principal.scope.manage {
            return Ok(all);
        }
        let Some(mine) = identity.and_then(|c| c.token_id.clone()) else {
            return Ok(Vec::new());
        };
        let mut reached = vec![mine];
        loop {
            let before = reached.len();
            for t in &all {
                if !reached.contains(&t.id)
                    && t.parent_id.as_ref().is_some_and(|p| reached.contains(p))
                {
                    reached.push(t.id.clone());
                }
            }
            if reached.len() == before {
                break;
            }
        }
        Ok(all
            .into_iter()
            .filter(|t| reached.contains(&t.id))
            .collect())
    }

    /// Revokes a token (UUID or display prefix) that `principal` may reach
    /// ([`Directory::tokens_as`]); any other is "not found", exactly like a missing one.
    pub fn revoke_token_as(&self, principal: &Principal, key: &str) -> Result<()> {
        let user = principal.identity.as_ref().map(|c| c.user.as_str());
        if principal.scope.manage {
            return self.revoke_token(key, user);
        }
        let key = key.trim();
        let found = self
            .tokens_as(principal)?
            .into_iter()
            .find(|t| t.id == key || t.prefix == key)
            .ok_or_else(|| Error::not_found(format!("token '{key}' not found")))?;
        self.revoke_token(&found.id, user)
    }
}
