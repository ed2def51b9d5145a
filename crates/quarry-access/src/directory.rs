//! The directory of users, spaces, memberships and tokens, and how a presented token
//! becomes a [`Principal`].

use std::sync::Arc;

use quarry_core::{Access, Error, Identity, Principal, Result, Scope};
use quarry_store::{AccessStore, Membership, NewToken, Role, Space, TokenGrant, TokenRecord, User};
use serde::Serialize;

use crate::auth_failure::AuthFailure;
use crate::names::validate_name;
use crate::secrets::{
    DISPLAY_PREFIX, SESSION_PREFIX, TOKEN_PREFIX, is_token_shaped, new_secret, token_hash,
};
use crate::token_cache::{self, Resolved, TokenCache, TokenKey};
use crate::tool_scope::{normalize_tool_scope, scope_covers};

/// `last_used_at` is written at most this often per token (a write per request would cost
/// more than the check itself).
const TOUCH_EVERY_MS: i64 = 60_000;
/// Longest token label.
pub const MAX_LABEL_CHARS: usize = 200;
/// Latest expiry a token may have, in days from its creation: a hundred years, far enough
/// for any real date, near enough that no arithmetic on it overflows.
pub const MAX_TOKEN_DAYS: i64 = 36_500;
pub(crate) const DAY_MS: i64 = 86_400_000;

/// A token as created: the secret (shown once, never stored) and its record.
#[derive(Debug, Clone, Serialize)]
pub struct IssuedToken {
    /// The secret (`qk_` + 64 hex): shown once, never stored.
    pub token: String,
    #[serde(flatten)]
    /// What is stored for it.
    pub record: TokenRecord,
}

/// What a new token may do.
#[derive(Debug, Clone, Default)]
pub struct TokenRequest {
    /// User name or UUID.
    pub user: String,
    /// What the token is for, in words.
    pub label: String,
    /// Space names or UUIDs; empty: every space the user is a member of now.
    pub spaces: Vec<String>,
    /// Knowledge bases / collections (names or UUIDs) in those spaces; `None`: all.
    pub collections: Option<Vec<String>>,
    /// Whether the token may only read.
    pub read_only: bool,
    /// Hub packages (`time`) and tools (`time.get_current_time`) it may use; `None`: every
    /// tool of its user. A read-only token calls only tools annotated read-only, and those
    /// named here one by one.
    pub tools: Option<Vec<String>>,
    /// Milliseconds since the epoch.
    pub expires_at: Option<i64>,
    /// The named tool endpoint (its UUID; the caller resolves the name) the token is for: it
    /// works there only. A token limited to an endpoint creates tokens for that one alone.
    pub endpoint: Option<String>,
    /// The token creating this one (its UUID), when a token does: the new one reaches no
    /// further than it (spaces, knowledge bases, read-only), expires no later (by default,
    /// when it does), and stops working when it does.
    pub parent: Option<String>,
    /// Whether the token manages governance (policies, approvals, groups, roles and
    /// members, other chains' tokens, sources, the audit log) as far as its user's role
    /// allows. Refused with any narrowing (tools, knowledge bases, an endpoint), and under a
    /// parent whose chain lacks it.
    pub manage: bool,
}

/// A space a user belongs to, as `GET /api/v1/user/spaces` lists it.
#[derive(Debug, Clone, Serialize)]
pub struct SpaceAccess {
    /// The space's UUID.
    pub id: String,
    /// The space's name.
    pub name: String,
    /// What the space is for.
    pub description: String,
    /// The user's role there.
    pub role: Role,
}

/// Users, spaces, memberships and tokens over the store.
#[derive(Clone)]
pub struct Directory {
    pub(crate) store: Arc<dyn AccessStore>,
    /// Tokens resolved here, trusted while the access generation holds (see the module).
    tokens: Arc<TokenCache>,
}

fn bad(msg: impl Into<String>) -> Error {
    Error::invalid(msg)
}

/// Whether a token (first in `chain`, followed by the tokens that created it, nearest
/// first) may be used at `now`: revoked or expired if any of them is, revoked if one of them
/// is gone. Otherwise the earliest expiry of the chain — the token's effective one.
fn chain_state(chain: &[TokenRecord], now: i64) -> std::result::Result<Option<i64>, AuthFailure> {
    if chain.last().is_none_or(|t| t.parent_id.is_some()) {
        return Err(AuthFailure::Revoked);
    }
    if chain.iter().any(|t| t.revoked_at.is_some()) {
        return Err(AuthFailure::Revoked);
    }
    let expires_at = chain.iter().filter_map(|t| t.expires_at).min();
    if expires_at.is_some_and(|at| at <= now) {
        return Err(AuthFailure::Expired);
    }
    Ok(expires_at)
}

/// Whether every token of `chain` was made with the management scope and the first is not
/// narrowed: what lets it manage governance. A token made by one without the scope (an
/// agent's child, an OAuth connector's grant) never has it.
fn chain_manages(chain: &[TokenRecord]) -> bool {
    chain
        .first()
        .is_some_and(|t| t.tools.is_none() && t.collections.is_none() && t.endpoint.is_none())
        && chain.iter().all(|t| t.manage)
}

/// The first token of `chain` (see [`quarry_store::AccessStore::token_chain`]) as a parent of a new token:
/// usable now (its whole chain unrevoked and unexpired) and, when `user_row` is given, that
/// user's. Its `expires_at` is the earliest of its chain's.
fn usable_parent(chain: &[TokenRecord], user_row: Option<i64>, now: i64) -> Result<TokenRecord> {
    let Some(first) = chain.first() else {
        return Err(Error::Forbidden(
            "the token creating this one no longer exists".into(),
        ));
    };
    if user_row.is_some_and(|row| first.user_row != row) {
        return Err(Error::Forbidden(
            "a token creates tokens for its own user only".into(),
        ));
    }
    match chain_state(chain, now) {
        Ok(expires_at) => Ok(TokenRecord {
            expires_at,
            manage: chain_manages(chain),
            ..first.clone()
        }),
        Err(f) => Err(Error::Forbidden(format!(
            "the token creating this one: {f}"
        ))),
    }
}

impl Directory {
    /// A directory over `store`.
    pub fn new(store: Arc<dyn AccessStore>) -> Directory {
        Directory {
            store,
            tokens: Arc::default(),
        }
    }

    // Spaces.

    /// Creates a space; a taken or invalid name is refused.
    pub fn create_space(&self, name: &str, description: &str) -> Result<Space> {
        validate_name("space", name)?;
        self.store.create_space(name, description.trim())
    }

    /// Every space, by name.
    pub fn spaces(&self) -> Result<Vec<Space>> {
        self.store.spaces()
    }

    /// A space by name or UUID.
    pub fn space(&self, key: &str) -> Result<Space> {
        self.store
            .space(key.trim())?
            .ok_or_else(|| Error::not_found(format!("space '{key}' not found")))
    }

    /// The local default space (created on first use).
    pub fn default_space(&self) -> Result<Space> {
        if let Some(s) = self.store.space(quarry_core::DEFAULT_SPACE)? {
            return Ok(s);
        }
        match self.store.create_space(quarry_core::DEFAULT_SPACE, "") {
            Err(Error::Conflict(_)) => self.space(quarry_core::DEFAULT_SPACE),
            other => other,
        }
    }

    /// Forgets a space whose collections are gone (the caller removes them through the
    /// engine first).
    pub fn delete_space(&self, name: &str) -> Result<()> {
        if name == quarry_core::DEFAULT_SPACE {
            return Err(bad("the default space cannot be removed"));
        }
        self.store.delete_space(name)
    }

    // Users and memberships.

    /// Creates a user; a taken or invalid name is refused.
    pub fn create_user(&self, name: &str) -> Result<User> {
        validate_name("user", name)?;
        self.store.create_user(name)
    }

    /// Every user, by name.
    pub fn users(&self) -> Result<Vec<User>> {
        self.store.users()
    }

    pub(crate) fn user_row(&self, key: &str) -> Result<(i64, User)> {
        self.store
            .user(key.trim())?
            .ok_or_else(|| Error::not_found(format!("user '{key}' not found")))
    }

    /// A user by name or UUID.
    pub fn user(&self, key: &str) -> Result<User> {
        Ok(self.user_row(key)?.1)
    }

    /// Removes a user (by name or UUID) with its memberships and tokens; returns it.
    pub fn delete_user(&self, key: &str) -> Result<User> {
        let (row, user) = self.user_row(key)?;
        self.store.delete_user(row)?;
        Ok(user)
    }

    /// Gives a user a role in a space (replacing the role it had there).
    pub fn grant(&self, user: &str, space: &str, role: Role) -> Result<Membership> {
        let (row, user) = self.user_row(user)?;
        let space = self.space(space)?;
        self.store.grant(row, &space.name, role)?;
        let joined_at = self
            .store
            .memberships(Some(row))?
            .into_iter()
            .find(|m| m.space_id == space.id)
            .map_or_else(quarry_core::now_millis, |m| m.joined_at);
        Ok(Membership {
            user: user.name,
            space: space.name,
            space_id: space.id,
            role,
            joined_at,
        })
    }

    /// Takes a user out of a space.
    pub fn revoke_membership(&self, user: &str, space: &str) -> Result<()> {
        let (row, user) = self.user_row(user)?;
        let space = self.space(space)?;
        if self.store.revoke_membership(row, &space.name)? {
            Ok(())
        } else {
            Err(Error::not_found(format!(
                "user '{}' is not a member of space '{}'",
                user.name, space.name
            )))
        }
    }

    /// The owners of the named tool endpoints `user` (name or UUID) may see, in the order a
    /// name is looked up in: the user's own, then each space they are a member of.
    pub fn endpoint_owners(&self, user: &str) -> Result<Vec<String>> {
        let found = self.user(user)?;
        Ok(std::iter::once(format!("user:{}", found.id))
            .chain(
                self.memberships(Some(&found.id))?
                    .into_iter()
                    .map(|m| format!("space:{}", m.space_id)),
            )
            .collect())
    }

    /// Memberships, of one user (name or UUID) or of everyone.
    pub fn memberships(&self, user: Option<&str>) -> Result<Vec<Membership>> {
        let row = user.map(|u| self.user_row(u).map(|(r, _)| r)).transpose()?;
        self.store.memberships(row)
    }

    /// The spaces a user belongs to, with the role in each.
    pub fn user_spaces(&self, user: &str) -> Result<Vec<SpaceAccess>> {
        let memberships = self.memberships(Some(user))?;
        let spaces = self.store.spaces()?;
        Ok(memberships
            .into_iter()
            .filter_map(|m| {
                let s = spaces.iter().find(|s| s.name == m.space)?;
                Some(SpaceAccess {
                    id: s.id.clone(),
                    name: s.name.clone(),
                    description: s.description.clone(),
                    role: m.role,
                })
            })
            .collect())
    }

    // Tokens.

    /// Creates a token; the secret is in the result and nowhere else.
    pub fn create_token(&self, req: &TokenRequest) -> Result<IssuedToken> {
        self.issue(req, TOKEN_PREFIX)
    }

    /// [`Directory::create_token`] with a secret starting `prefix`: `qk_` for tokens,
    /// `qw_` for web sessions (`people.rs`).
    pub(crate) fn issue(&self, req: &TokenRequest, prefix: &str) -> Result<IssuedToken> {
        let (row, user) = self.user_row(&req.user)?;
        let label = req.label.trim();
        if label.chars().count() > MAX_LABEL_CHARS {
            return Err(bad(format!(
                "label is longer than {MAX_LABEL_CHARS} characters"
            )));
        }
        if label.chars().any(char::is_control) {
            return Err(bad("label must not contain control characters"));
        }
        let now = quarry_core::now_millis();
        if let Some(at) = req.expires_at {
            if at <= now {
                return Err(bad("expiry must be in the future"));
            }
            if at > now.saturating_add(MAX_TOKEN_DAYS * DAY_MS) {
                return Err(bad(format!(
                    "expiry is too far away: at most {MAX_TOKEN_DAYS} days from now"
                )));
            }
        }
        let parent = match &req.parent {
            Some(id) => Some(self.parent_token(id, row, now)?),
            None => None,
        };
        let memberships = self.store.memberships(Some(row))?;
        let mut spaces = Vec::new();
        if req.spaces.is_empty() {
            spaces.extend(
                memberships
                    .iter()
                    .map(|m| (m.space.clone(), m.space_id.clone())),
            );
        } else {
            for key in &req.spaces {
                let m = memberships
                    .iter()
                    .find(|m| m.space == *key || m.space_id == *key)
                    .ok_or_else(|| {
                        Error::not_found(format!(
                            "user '{}' is not a member of space '{key}'",
                            user.name
                        ))
                    })?;
                if !spaces.iter().any(|(_, id)| *id == m.space_id) {
                    spaces.push((m.space.clone(), m.space_id.clone()));
                }
            }
        }
        if spaces.is_empty() {
            return Err(bad(format!(
                "user '{}' is not a member of any space; grant one first (quarry space grant)",
                user.name
            )));
        }
        let collections = match &req.collections {
            None => None,
            Some(keys) => {
                let mut uids = Vec::new();
                for key in keys {
                    let mut found = None;
                    for (name, _) in &spaces {
                        if let Some((_, uid)) = self
                            .store
                            .collection_ids(name, std::slice::from_ref(key))?
                            .into_iter()
                            .next()
                        {
                            found = Some(uid);
                            break;
                        }
                    }
                    let uid = found.ok_or_else(|| {
                        Error::not_found(format!(
                            "knowledge base '{key}' not found in the token's spaces"
                        ))
                    })?;
                    if !uids.contains(&uid) {
                        uids.push(uid);
                    }
                }
                Some(uids)
            }
        };
        let spaces: Vec<String> = spaces.into_iter().map(|(_, id)| id).collect();
        let mut tools = req.tools.as_deref().map(normalize_tool_scope).transpose()?;
        let (mut collections, mut read_only, mut expires_at, mut endpoint) = (
            collections,
            req.read_only,
            req.expires_at,
            req.endpoint.clone(),
        );
        if let Some(p) = &parent {
            // Never further than the parent: a space, knowledge base or write access it
            // lacks is refused rather than silently dropped, so the caller knows.
            if let Some(s) = spaces.iter().find(|s| !p.spaces.contains(s)) {
                return Err(Error::Forbidden(format!(
                    "the token creating this one may not use space '{s}'"
                )));
            }
            if let Some(allowed) = &p.collections {
                match &collections {
                    None => collections = Some(allowed.clone()),
                    Some(wanted) => {
                        if wanted.iter().any(|c| !allowed.contains(c)) {
                            return Err(Error::Forbidden(
                                "the token creating this one may not use every knowledge base named"
                                    .into(),
                            ));
                        }
                    }
                }
            }
            if let Some(allowed) = &p.tools {
                match &tools {
                    None => tools = Some(allowed.clone()),
                    Some(wanted) => {
                        if let Some(e) = wanted.iter().find(|e| !scope_covers(allowed, e)) {
                            return Err(Error::Forbidden(format!(
                                "the token creating this one may not use tool '{e}'"
                            )));
                        }
                    }
                }
            }
            read_only |= p.read_only;
            match (&endpoint, &p.endpoint) {
                (Some(wanted), Some(limit)) if wanted != limit => {
                    return Err(Error::Forbidden(
                        "the token creating this one works at another tool endpoint only".into(),
                    ));
                }
                (None, Some(limit)) => endpoint = Some(limit.clone()),
                _ => {}
            }
            match (expires_at, p.expires_at) {
                (Some(at), Some(limit)) if at > limit => {
                    return Err(bad(format!(
                        "a token cannot outlive the token creating it: expiry must be at most {} ({limit} ms since the epoch)",
                        quarry_core::iso8601_millis(limit)
                    )));
                }
                (None, Some(limit)) => expires_at = Some(limit),
                _ => {}
            }
        }
        if req.manage {
            if tools.is_some() || collections.is_some() || endpoint.is_some() {
                return Err(bad(
                    "a management token cannot be narrowed to tools, knowledge bases or an endpoint: make one token to manage with and narrowed ones for agents",
                ));
            }
            if parent.as_ref().is_some_and(|p| !p.manage) {
                return Err(Error::ManagementForbidden(
                    "a token without the management scope cannot create one with it".into(),
                ));
            }
        }
        let token = new_secret(prefix)?;
        let record = self.store.insert_token(&NewToken {
            user_row: row,
            hash: token_hash(&token),
            prefix: token[..DISPLAY_PREFIX].to_owned(),
            label: label.to_owned(),
            spaces,
            collections,
            read_only,
            tools,
            endpoint,
            expires_at,
            parent_id: parent.map(|p| p.id),
            manage: req.manage,
        })?;
        Ok(IssuedToken { token, record })
    }

    /// A token under `parent_id` (a token's UUID) reaching exactly as far as it — same
    /// spaces, knowledge bases, tools and read-only flag — for `lifetime_ms` or until the
    /// parent's chain expires, whichever is sooner. The OAuth server issues its short-lived
    /// access tokens this way, under the grant a person consented to.
    pub fn create_child_token(
        &self,
        parent_id: &str,
        label: &str,
        lifetime_ms: i64,
    ) -> Result<IssuedToken> {
        let now = quarry_core::now_millis();
        // Any user's token may have children here: the child is made for the parent's user.
        let parent = usable_parent(&self.store.token_chain(parent_id)?, None, now)?;
        let until = now.saturating_add(lifetime_ms.max(1));
        self.create_token(&TokenRequest {
            user: parent.user_id.clone(),
            label: label.to_owned(),
            spaces: parent.spaces.clone(),
            collections: None,
            read_only: parent.read_only,
            tools: None,
            expires_at: Some(parent.expires_at.map_or(until, |at| at.min(until))),
            endpoint: None,
            parent: Some(parent.id),
            manage: false,
        })
    }

    /// The token `id` as a parent of a new token of `user_row` (see [`usable_parent`]).
    fn parent_token(&self, id: &str, user_row: i64, now: i64) -> Result<TokenRecord> {
        usable_parent(&self.store.token_chain(id)?, Some(user_row), now)
    }

    /// Tokens, of one user (name or UUID) or of everyone.
    pub fn tokens(&self, user: Option<&str>) -> Result<Vec<TokenRecord>> {
        let row = user.map(|u| self.user_row(u).map(|(r, _)| r)).transpose()?;
        self.store.tokens(row)
    }

    /// Revokes a token by UUID or display prefix (of `user` when given).
    pub fn revoke_token(&self, key: &str, user: Option<&str>) -> Result<()> {
        let row = user.map(|u| self.user_row(u).map(|(r, _)| r)).transpose()?;
        if self
            .store
            .revoke_token(key.trim(), row, quarry_core::now_millis())?
        {
            Ok(())
        } else {
            Err(Error::not_found(format!("token '{key}' not found")))
        }
    }

    /// The token whose secret hashes to `hash`, with its grant, if there is one (an OAuth
    /// client revoking a token it presents).
    pub fn token_by_hash(&self, hash: &str) -> Result<Option<TokenGrant>> {
        self.store.token_by_hash(hash)
    }

    /// Resolves a presented token (and the space the request names, by name or UUID) into
    /// a principal. Errors other than [`AuthFailure`] are the store's.
    pub fn authenticate(
        &self,
        secret: &str,
        space: Option<&str>,
    ) -> Result<std::result::Result<Principal, AuthFailure>> {
        self.resolve(secret, space, false)
    }

    /// As [`Directory::authenticate`], but a token with several spaces and none named
    /// resolves to the first of them: for requests about the token itself (its spaces, its
    /// user's tokens), which read no space's data.
    pub fn authenticate_any_space(
        &self,
        secret: &str,
        space: Option<&str>,
    ) -> Result<std::result::Result<Principal, AuthFailure>> {
        self.resolve(secret, space, true)
    }

    fn resolve(
        &self,
        secret: &str,
        space: Option<&str>,
        first_space: bool,
    ) -> Result<std::result::Result<Principal, AuthFailure>> {
        if !is_token_shaped(secret) {
            return Ok(Err(AuthFailure::Invalid));
        }
        let key = TokenKey {
            hash: token_hash(secret),
            space: space
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned),
            first_space,
        };
        // Read before the token's rows: a change committed after this read bumps it past
        // the generation the rows are kept at.
        let generation = self.store.access_generation()?;
        let outcome = match self.tokens.get(&key, generation) {
            Some(kept) => kept,
            None => {
                let read = Arc::new(self.read_token(&key)?);
                self.tokens.put(key, generation, read.clone());
                read
            }
        };
        let resolved = match &*outcome {
            Ok(resolved) => resolved,
            Err(f) => return Ok(Err(f.clone())),
        };
        let now = quarry_core::now_millis();
        if let Err(f) = chain_state(&resolved.chain, now) {
            return Ok(Err(f));
        }
        if resolved.claim_touch(now, TOUCH_EVERY_MS)
            && let Some(token) = resolved.chain.first()
        {
            self.store.touch_token(&token.id, now)?;
        }
        Ok(Ok(resolved.principal.clone()))
    }

    /// What the token `key` names resolves to, read from the store now.
    fn read_token(&self, key: &TokenKey) -> Result<token_cache::Outcome> {
        let Some(grant) = self.store.token_by_hash(&key.hash)? else {
            return Ok(Err(AuthFailure::Invalid));
        };
        let token = &grant.token;
        let now = quarry_core::now_millis();
        let chain: Vec<TokenRecord> = std::iter::once(token.clone())
            .chain(grant.ancestors.iter().cloned())
            .collect();
        let expires_at = match chain_state(&chain, now) {
            Ok(at) => at,
            Err(f) => return Ok(Err(f)),
        };
        // Usable: the token's spaces where the user is (still) a member.
        let usable: Vec<&Membership> = grant
            .memberships
            .iter()
            .filter(|m| token.spaces.contains(&m.space_id))
            .collect();
        let chosen = match key.space.as_deref() {
            Some(wanted) => usable
                .iter()
                .find(|m| m.space == wanted || m.space_id == wanted)
                .copied(),
            None => match usable.as_slice() {
                [one] => Some(*one),
                [] => None,
                [first, ..] if key.first_space => Some(*first),
                _ => return Ok(Err(AuthFailure::SpaceRequired)),
            },
        };
        let Some(m) = chosen else {
            return Ok(Err(AuthFailure::SpaceForbidden));
        };
        let collections = match &token.collections {
            None => None,
            Some(uids) => Some(
                self.store
                    .collection_ids(&m.space, uids)?
                    .into_iter()
                    .map(|(id, _)| id)
                    .collect::<Vec<i64>>()
                    .into(),
            ),
        };
        // Who the caller is as a reader, from its role before a read-only token caps it:
        // an admin's read-only token still reads every document.
        let readers = self.readers_for(&m.space, token.user_row, &token.user, m.role)?;
        let mut access = m.role.access();
        if token.read_only {
            access = access.min(Access::Read);
        }
        let principal = Principal {
            identity: Some(Identity {
                user_id: token.user_id.clone(),
                user: token.user.clone(),
                token_id: Some(token.id.clone()),
                read_only: token.read_only,
                spaces: token.spaces.clone(),
                expires_at,
                tools: token.tools.clone(),
                endpoint: token.endpoint.clone(),
                root_token_id: Some(chain.last().unwrap_or(token).id.clone()),
                session: token.prefix.starts_with(SESSION_PREFIX),
            }),
            scope: Scope {
                space: m.space.clone(),
                collections,
                access,
                machine_owner: false,
                readers,
                manage: chain_manages(&chain),
            },
            space_id: m.space_id.clone(),
        };
        Ok(Ok(Resolved::new(principal, chain)))
    }

    /// The principal narrowed to the knowledge bases named by `keys` (names or UUIDs, a
    /// URL's `?kb=`): never wider than before. A key naming nothing the principal can see
    /// is refused — a typo would otherwise search nothing and look like "no results" — in
    /// the same words whether or not it exists out of reach.
    pub fn narrow(
        &self,
        principal: &Principal,
        keys: &[String],
    ) -> Result<std::result::Result<Principal, AuthFailure>> {
        let mut ids = Vec::with_capacity(keys.len());
        for key in keys {
            let found = self
                .store
                .collection_ids(&principal.scope.space, std::slice::from_ref(key))?
                .into_iter()
                .map(|(id, _)| id)
                .find(|id| principal.scope.allows(*id));
            match found {
                Some(id) => ids.push(id),
                None => return Ok(Err(AuthFailure::KnowledgeBaseNotFound(key.clone()))),
            }
        }
        Ok(Ok(Principal {
            scope: principal.scope.narrowed(&ids),
            ..principal.clone()
        }))
    }
}
