//! Principals: spaces (tenants), users, their memberships and access tokens — the records
//! `quarry-access` authenticates against. Tokens are stored only as hashes.

use quarry_core::{Access, Result};
use serde::Serialize;

/// A tenant: a unique name (the key every other table uses) and a UUID.
#[derive(Debug, Clone, Serialize)]
pub struct Space {
    pub id: String,
    pub name: String,
    pub description: String,
    pub created_at: i64,
}

#[derive(Debug, Clone, Serialize)]
pub struct User {
    pub id: String,
    pub name: String,
    pub created_at: i64,
}

/// A member's role in a space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Viewer,
    Editor,
    Admin,
    Owner,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Editor => "editor",
            Role::Admin => "admin",
            Role::Owner => "owner",
        }
    }

    pub fn parse(s: &str) -> Option<Role> {
        Some(match s {
            "viewer" => Role::Viewer,
            "editor" => Role::Editor,
            "admin" => Role::Admin,
            "owner" => Role::Owner,
            _ => return None,
        })
    }

    /// What the role may do with a space's data.
    pub fn access(self) -> Access {
        match self {
            Role::Viewer => Access::Read,
            Role::Editor => Access::Write,
            Role::Admin | Role::Owner => Access::Admin,
        }
    }
}

/// A user's role in one space.
#[derive(Debug, Clone, Serialize)]
pub struct Membership {
    pub user: String,
    pub space: String,
    pub space_id: String,
    pub role: Role,
    /// When the user joined the space (milliseconds since the epoch); a role change keeps it.
    pub joined_at: i64,
}

/// An access token as stored: never the secret, only its hash and a short display prefix.
#[derive(Debug, Clone, Serialize)]
pub struct TokenRecord {
    pub id: String,
    #[serde(skip)]
    pub user_row: i64,
    /// The owner's UUID and name.
    pub user_id: String,
    pub user: String,
    pub label: String,
    /// The first characters of the secret (`qk_1a2b3c`), to tell tokens apart.
    pub prefix: String,
    /// UUIDs of the spaces the token may use.
    pub spaces: Vec<String>,
    /// UUIDs of the knowledge bases / collections it may use; `None`: all of its spaces'.
    pub collections: Option<Vec<String>>,
    pub read_only: bool,
    pub created_at: i64,
    pub expires_at: Option<i64>,
    pub last_used_at: Option<i64>,
    pub revoked_at: Option<i64>,
    /// The token that created this one (its UUID), if a token did: this one lives only as
    /// long as that one.
    pub parent_id: Option<String>,
}

/// What [`AccessStore::insert_token`] records.
#[derive(Debug, Clone)]
pub struct NewToken {
    pub user_row: i64,
    pub hash: String,
    pub prefix: String,
    pub label: String,
    pub spaces: Vec<String>,
    pub collections: Option<Vec<String>>,
    pub read_only: bool,
    pub expires_at: Option<i64>,
    /// The creating token's UUID.
    pub parent_id: Option<String>,
}

/// A token found by its hash, with its owner's memberships (one round trip per request).
#[derive(Debug, Clone)]
pub struct TokenGrant {
    pub token: TokenRecord,
    pub memberships: Vec<Membership>,
    /// The tokens that created it, nearest first (see [`AccessStore::token_chain`]).
    pub ancestors: Vec<TokenRecord>,
}

/// Principals behind one trait, like everything the store keeps.
pub trait AccessStore: Send + Sync {
    /// Creates a space; `Conflict` if the name is taken.
    fn create_space(&self, name: &str, description: &str) -> Result<Space>;
    fn spaces(&self) -> Result<Vec<Space>>;
    /// A space by name or UUID.
    fn space(&self, key: &str) -> Result<Option<Space>>;
    /// Forgets a space with no collections left, its memberships, and removes it from
    /// tokens (a token left with no space is revoked).
    fn delete_space(&self, name: &str) -> Result<()>;

    fn create_user(&self, name: &str) -> Result<User>;
    fn users(&self) -> Result<Vec<User>>;
    /// A user by name or UUID, with its row id.
    fn user(&self, key: &str) -> Result<Option<(i64, User)>>;
    /// Removes a user, its memberships and its tokens.
    fn delete_user(&self, user_row: i64) -> Result<()>;

    /// Gives `user_row` `role` in `space` (replacing any role it had there).
    fn grant(&self, user_row: i64, space: &str, role: Role) -> Result<()>;
    /// Takes a user out of a space; false when it was not a member.
    fn revoke_membership(&self, user_row: i64, space: &str) -> Result<bool>;
    fn memberships(&self, user_row: Option<i64>) -> Result<Vec<Membership>>;

    fn insert_token(&self, new: &NewToken) -> Result<TokenRecord>;
    fn tokens(&self, user_row: Option<i64>) -> Result<Vec<TokenRecord>>;
    fn token_by_hash(&self, hash: &str) -> Result<Option<TokenGrant>>;
    /// The token `id` (UUID) and the tokens that created it, nearest first; empty when `id`
    /// names none. A chain whose last record still has a `parent_id` lost an ancestor.
    fn token_chain(&self, id: &str) -> Result<Vec<TokenRecord>>;
    /// Revokes a token by UUID (or display prefix), of `user_row` when given, and every token
    /// it created (transitively); false when none matched.
    fn revoke_token(&self, key: &str, user_row: Option<i64>, at: i64) -> Result<bool>;
    fn touch_token(&self, id: &str, at: i64) -> Result<()>;

    /// Ids of the collections of `space` named by UUID or name (unknown keys are skipped).
    fn collection_ids(&self, space: &str, keys: &[String]) -> Result<Vec<(i64, String)>>;
}
