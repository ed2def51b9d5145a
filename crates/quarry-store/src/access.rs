//! Principals: spaces (tenants), users, their memberships, groups of users per space and
//! access tokens — the records `quarry-access` authenticates against. Tokens are stored only
//! as hashes.

use quarry_core::{Access, Result};
use serde::Serialize;

/// A tenant: a unique name (the key every other table uses) and a UUID.
#[derive(Debug, Clone, Serialize)]
pub struct Space {
    /// UUID.
    pub id: String,
    /// Unique name, the key other tables use.
    pub name: String,
    /// What the space is for, in words.
    pub description: String,
    /// Milliseconds since the epoch.
    pub created_at: i64,
}

#[derive(Debug, Clone, Serialize)]
/// Someone tokens belong to (a name and a UUID).
pub struct User {
    /// UUID.
    pub id: String,
    /// Unique name.
    pub name: String,
    /// Milliseconds since the epoch.
    pub created_at: i64,
}

/// A member's role in a space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Reads.
    Viewer,
    /// Reads and writes documents and knowledge bases.
    Editor,
    /// Also manages members (below owner) and settings.
    Admin,
    /// Everything, the owner role included.
    Owner,
}

impl Role {
    /// The role's name (`viewer` … `owner`).
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Editor => "editor",
            Role::Admin => "admin",
            Role::Owner => "owner",
        }
    }

    /// The role named `s`.
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
    /// The user's name.
    pub user: String,
    /// The space's name.
    pub space: String,
    /// The space's UUID.
    pub space_id: String,
    /// What the user may do there.
    pub role: Role,
    /// When the user joined the space (milliseconds since the epoch); a role change keeps it.
    pub joined_at: i64,
}

/// A group of users in one space (a document's readers name it `group:<name>`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Group {
    /// UUID.
    pub id: String,
    /// The space's name.
    #[serde(skip)]
    pub space: String,
    /// Unique within its space.
    pub name: String,
    /// What the group is for, in words.
    pub description: String,
    /// Milliseconds since the epoch.
    pub created_at: i64,
    /// Its members' user names, in byte order.
    pub members: Vec<String>,
}

/// An access token as stored: never the secret, only its hash and a short display prefix.
#[derive(Debug, Clone, Serialize)]
pub struct TokenRecord {
    /// UUID.
    pub id: String,
    #[serde(skip)]
    /// The owner's row id (internal).
    pub user_row: i64,
    /// The owner's UUID and name.
    pub user_id: String,
    /// The owner's name.
    pub user: String,
    /// What the token is for, in words.
    pub label: String,
    /// The first characters of the secret (`qk_1a2b3c`), to tell tokens apart.
    pub prefix: String,
    /// UUIDs of the spaces the token may use.
    pub spaces: Vec<String>,
    /// UUIDs of the knowledge bases / collections it may use; `None`: all of its spaces'.
    pub collections: Option<Vec<String>>,
    /// Whether the token may only read.
    pub read_only: bool,
    /// The hub packages (`time`) and tools (`time.get_current_time`) it may use; `None`:
    /// every tool of its user.
    pub tools: Option<Vec<String>>,
    /// The named tool endpoint (its UUID) the token is for: it works there and nowhere
    /// else. `None`: every surface.
    pub endpoint: Option<String>,
    /// Milliseconds since the epoch.
    pub created_at: i64,
    /// When it stops working (milliseconds since the epoch); `None`: never.
    pub expires_at: Option<i64>,
    /// When it was last used (written at most once a minute).
    pub last_used_at: Option<i64>,
    /// When it was revoked, if it was.
    pub revoked_at: Option<i64>,
    /// The token that created this one (its UUID), if a token did: this one lives only as
    /// long as that one.
    pub parent_id: Option<String>,
    /// Whether it was made with the management scope (schema v30): with every token of its
    /// chain made so, and nothing narrowing it, it manages governance.
    pub manage: bool,
}

/// What [`AccessStore::insert_token`] records.
#[derive(Debug, Clone)]
pub struct NewToken {
    /// The owner's row id.
    pub user_row: i64,
    /// SHA-256 of the secret.
    pub hash: String,
    /// The first characters of the secret, for display.
    pub prefix: String,
    /// What the token is for, in words.
    pub label: String,
    /// UUIDs of the spaces it may use.
    pub spaces: Vec<String>,
    /// UUIDs of the knowledge bases / collections it may use; `None`: all of its spaces'.
    pub collections: Option<Vec<String>>,
    /// Whether it may only read.
    pub read_only: bool,
    /// The hub packages and tools it may use; `None`: every tool of its user.
    pub tools: Option<Vec<String>>,
    /// The named tool endpoint (UUID) it is limited to.
    pub endpoint: Option<String>,
    /// When it stops working (milliseconds since the epoch); `None`: never.
    pub expires_at: Option<i64>,
    /// The creating token's UUID.
    pub parent_id: Option<String>,
    /// Whether it is made with the management scope.
    pub manage: bool,
}

/// A token found by its hash, with its owner's memberships (one round trip per request).
#[derive(Debug, Clone)]
pub struct TokenGrant {
    /// The token.
    pub token: TokenRecord,
    /// Its owner's memberships.
    pub memberships: Vec<Membership>,
    /// The tokens that created it, nearest first (see [`AccessStore::token_chain`]).
    pub ancestors: Vec<TokenRecord>,
}

/// Principals behind one trait, like everything the store keeps.
pub trait AccessStore: crate::SignInStore + Send + Sync {
    /// Creates a space; `Conflict` if the name is taken.
    fn create_space(&self, name: &str, description: &str) -> Result<Space>;
    /// Every space, by name.
    fn spaces(&self) -> Result<Vec<Space>>;
    /// A space by name or UUID.
    fn space(&self, key: &str) -> Result<Option<Space>>;
    /// Forgets a space with no collections left, its memberships and groups, and removes it
    /// from tokens (a token left with no space is revoked).
    fn delete_space(&self, name: &str) -> Result<()>;

    /// Creates a user; `Conflict` if the name is taken.
    fn create_user(&self, name: &str) -> Result<User>;
    /// Every user, by name.
    fn users(&self) -> Result<Vec<User>>;
    /// A user by name or UUID, with its row id.
    fn user(&self, key: &str) -> Result<Option<(i64, User)>>;
    /// Removes a user, its memberships, its places in groups and its tokens.
    fn delete_user(&self, user_row: i64) -> Result<()>;

    /// Gives `user_row` `role` in `space` (replacing any role it had there).
    fn grant(&self, user_row: i64, space: &str, role: Role) -> Result<()>;
    /// Takes a user out of a space, and out of that space's groups; false when it was not a
    /// member.
    fn revoke_membership(&self, user_row: i64, space: &str) -> Result<bool>;
    /// Memberships of one user (by row id), or of everyone when `None`.
    fn memberships(&self, user_row: Option<i64>) -> Result<Vec<Membership>>;

    /// Stores a new token.
    fn insert_token(&self, new: &NewToken) -> Result<TokenRecord>;
    /// Tokens of one user (by row id), or of everyone when `None`.
    fn tokens(&self, user_row: Option<i64>) -> Result<Vec<TokenRecord>>;
    /// The token with this secret hash, with its owner's memberships and its ancestors.
    fn token_by_hash(&self, hash: &str) -> Result<Option<TokenGrant>>;
    /// The token `id` (UUID) and the tokens that created it, nearest first; empty when `id`
    /// names none. A chain whose last record still has a `parent_id` lost an ancestor.
    fn token_chain(&self, id: &str) -> Result<Vec<TokenRecord>>;
    /// Revokes a token by UUID (or display prefix), of `user_row` when given, and every token
    /// it created (transitively); false when none matched.
    fn revoke_token(&self, key: &str, user_row: Option<i64>, at: i64) -> Result<bool>;
    /// Records a token's use at `at` (milliseconds since the epoch).
    fn touch_token(&self, id: &str, at: i64) -> Result<()>;
    /// A number that grows, in the same transaction, with every change that can change
    /// what a token resolves to (tokens, users, spaces, memberships, groups and their
    /// members; not a token's use). Every node reads the same one: a token resolved at one
    /// generation resolves the same while it is unchanged. A store may answer from a value
    /// it watches rather than read it (PostgreSQL does), provided each change returns only
    /// once no node would answer an older one.
    fn access_generation(&self) -> Result<i64>;

    /// Creates a group in `space` (by name), with no members; `Conflict` if the space has a
    /// group of that name, `NotFound` if there is no such space.
    fn create_group(&self, space: &str, name: &str, description: &str) -> Result<Group>;
    /// The groups of `space`, by name in byte order, each with its members.
    fn groups(&self, space: &str) -> Result<Vec<Group>>;
    /// A group of `space` by name or UUID (a name that is also another group's UUID: the
    /// name wins).
    fn group(&self, space: &str, key: &str) -> Result<Option<Group>>;
    /// Deletes the group `name` of `space` and its memberships; false when there was none.
    fn delete_group(&self, space: &str, name: &str) -> Result<bool>;
    /// Puts `user_row` in the group `group` (its name) of `space`; false when it was there
    /// already (nothing changes). `NotFound` when the group does not exist. Whether the
    /// user is a member of the space is the caller's to check.
    fn add_group_member(&self, space: &str, group: &str, user_row: i64) -> Result<bool>;
    /// Takes `user_row` out of the group `group` of `space`; false when it was not in it.
    fn remove_group_member(&self, space: &str, group: &str, user_row: i64) -> Result<bool>;
    /// The names of the groups of `space` that `user_row` is in, in byte order.
    fn user_groups(&self, space: &str, user_row: i64) -> Result<Vec<String>>;

    /// Ids of the collections of `space` named by UUID or name (unknown keys are skipped).
    fn collection_ids(&self, space: &str, keys: &[String]) -> Result<Vec<(i64, String)>>;
}
