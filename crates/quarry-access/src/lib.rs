//! Who is calling, and what may it reach (SPEC §1 "Principal / access token").
//!
//! [`Directory`] keeps users, spaces, memberships, groups and access tokens in the store and
//! turns a presented token into a [`Principal`]: its user and the [`Scope`] the engine
//! applies to every call, with its reader keys (`user:<name>` and its groups' `group:<name>`;
//! none for the space's admins and owners, who read every document). Tokens are `qk_` + 64
//! hex digits (256 random bits; the prefix lets secret scanners find leaked ones), shown once
//! and stored only as a SHA-256 — a token has too much entropy for a slow hash to add
//! anything, and a fast one keeps a check at a few microseconds. A resolved token is kept only
//! while the store's access generation is the one it was read at (`token_cache.rs`), and every
//! change to tokens or memberships bumps it: a revoked token, a removed membership or an expired
//! token fails on the very next request, on every node.
//!
//! [`Scope`]: quarry_core::Scope

mod auth_failure;
mod directory;
mod groups;
mod manage;
mod names;
mod people;
mod secrets;
mod token_cache;
mod tool_scope;

pub use quarry_core::{Identity, Principal};
pub use quarry_store::{Group, Membership, Role, Space, TokenGrant, TokenRecord, User};

pub use auth_failure::AuthFailure;
pub use directory::{
    Directory, IssuedToken, MAX_LABEL_CHARS, MAX_TOKEN_DAYS, SpaceAccess, TokenRequest,
};
pub use groups::{MAX_GROUP_NAME, group_reader_key, user_reader_key, validate_group_name};
pub use manage::{Member, SpaceView, UsageNames, UserSpace, UserView, parse_role};
pub use names::validate_name;
pub use people::{GroupRule, Person, SessionView, SignedIn};
pub use secrets::{
    SESSION_PREFIX, TOKEN_PREFIX, is_session_token, is_token_shaped, random_secret, token_hash,
};
pub use tool_scope::{MAX_TOOL_SCOPE, normalize_tool_scope};

/// The machine's owner (CLI, stdio, a loopback server without `--auth`) in `space`.
pub fn owner_principal(space: &Space) -> Principal {
    Principal::owner(space.name.clone(), space.id.clone())
}

#[cfg(test)]
mod tests;
