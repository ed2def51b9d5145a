//! Who is calling: the one principal type every crate uses — `quarry-access` makes it from a
//! token (or for the machine's owner), the engine applies its [`Scope`], the hub keys what
//! it registers by [`Principal::owner_key`], chat stores conversations under that key, and
//! the servers put it on every request.

use serde::Serialize;

use crate::Scope;

/// The owner key of the machine's owner (CLI, stdio, a loopback server without `--auth`);
/// users are keyed by their UUID.
pub const MACHINE_OWNER: &str = "local";

/// The user a principal acts as.
#[derive(Debug, Clone, Serialize)]
pub struct Identity {
    /// The user's UUID.
    pub user_id: String,
    /// The user's name.
    pub user: String,
    /// The token used (its UUID); `None` when the machine's owner acts for the user (the
    /// CLI's `--user`).
    pub token_id: Option<String>,
    /// Whether the token may only read.
    pub read_only: bool,
    /// UUIDs of the spaces the token names (the user may since have left some).
    pub spaces: Vec<String>,
    /// When the token expires (Unix milliseconds), if it does.
    pub expires_at: Option<i64>,
}

/// A resolved caller: who (no identity: the machine's owner itself) and what it may reach.
#[derive(Debug, Clone)]
pub struct Principal {
    /// The user behind the request; `None` for the machine's owner.
    pub identity: Option<Identity>,
    /// What the request may reach in its space.
    pub scope: Scope,
    /// The space's UUID.
    pub space_id: String,
}

impl Principal {
    /// The machine's owner in the space named `space` (UUID `space_id`).
    pub fn owner(space: impl Into<String>, space_id: impl Into<String>) -> Principal {
        Principal {
            identity: None,
            scope: Scope::owner(space),
            space_id: space_id.into(),
        }
    }

    /// Whether the machine's owner is calling (itself, or acting for a user): it may run
    /// commands on the server and reach any address.
    pub fn is_machine_owner(&self) -> bool {
        self.scope.machine_owner
    }

    /// Whether the token is read-only.
    pub fn read_only(&self) -> bool {
        self.identity.as_ref().is_some_and(|i| i.read_only)
    }

    /// Whose things (hub servers, custom tools, conversations) this principal works with:
    /// its user's UUID, or [`MACHINE_OWNER`].
    pub fn owner_key(&self) -> &str {
        self.identity
            .as_ref()
            .map_or(MACHINE_OWNER, |i| i.user_id.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_keys() {
        let owner = Principal::owner("default", "s1");
        assert!(owner.is_machine_owner() && !owner.read_only());
        assert_eq!(owner.owner_key(), MACHINE_OWNER);
        let user = Principal {
            identity: Some(Identity {
                user_id: "u1".into(),
                user: "ann".into(),
                token_id: Some("t1".into()),
                read_only: true,
                spaces: vec!["s1".into()],
                expires_at: None,
            }),
            scope: Scope {
                machine_owner: false,
                ..Scope::owner("default")
            },
            space_id: "s1".into(),
        };
        assert!(!user.is_machine_owner() && user.read_only());
        assert_eq!(user.owner_key(), "u1");
    }
}
