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
    /// The hub tools the token may use: packages (`time`) and tools (`time.get_current_time`);
    /// `None`: every tool of its user.
    pub tools: Option<Vec<String>>,
    /// The named tool endpoint (its UUID) the token works at, and nowhere else.
    pub endpoint: Option<String>,
    /// The first token of this one's chain (the one no token created; this token itself when
    /// a person made it): what rate limits count, so tokens minted from a throttled token,
    /// or refreshed by an OAuth grant, share its budget.
    pub root_token_id: Option<String>,
    /// Whether the token is a web session's (`qw_…`, made by signing in with an identity
    /// provider): it authenticates only from the browser's session cookie, and what a
    /// person consents to while signed in does not end with the session.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub session: bool,
}

impl Identity {
    /// The token that tokens this credential makes are made under (they then live and reach
    /// no further than it): the credential's own, except a web session's, which is the
    /// person themself signed in: what they make outlives the browser's session.
    pub fn parent_for_new_tokens(&self) -> Option<String> {
        if self.session {
            None
        } else {
            self.token_id.clone()
        }
    }
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

    /// Whether the caller may only read: a read-only token, or any token of a user whose
    /// role in the space is viewer (docs/governance.md: a viewer calls read-only tools only
    /// and changes nothing in the hub).
    pub fn read_only(&self) -> bool {
        self.identity
            .as_ref()
            .is_some_and(|i| i.read_only || !self.scope.can(crate::Access::Write))
    }

    /// Whether this principal may use the hub tool `full_name` (`package.tool`) of `package`,
    /// annotated read-only (`readOnlyHint`) or not. A token with a tool scope reaches only
    /// the packages and tools it names; a read-only token only tools annotated read-only,
    /// unless its scope names the tool itself (a grant of that one tool, made on purpose).
    pub fn may_use_tool(&self, package: &str, full_name: &str, read_only_tool: bool) -> bool {
        let Some(identity) = &self.identity else {
            return true;
        };
        let named = identity
            .tools
            .as_ref()
            .is_some_and(|t| t.iter().any(|e| e == full_name));
        if let Some(scope) = &identity.tools
            && !named
            && !scope.iter().any(|e| e == package)
        {
            return false;
        }
        !self.read_only() || read_only_tool || named
    }

    /// Whether this principal may use `package` whole (its resources and prompts): no tool
    /// scope, or one naming the package.
    pub fn may_use_package(&self, package: &str) -> bool {
        self.identity
            .as_ref()
            .and_then(|i| i.tools.as_ref())
            .is_none_or(|t| t.iter().any(|e| e == package))
    }

    /// Whether this principal reaches anything of `package`: no tool scope, or one naming
    /// the package or one of its tools (what decides whether it sees the MCP server).
    pub fn reaches_package(&self, package: &str) -> bool {
        self.identity
            .as_ref()
            .and_then(|i| i.tools.as_ref())
            .is_none_or(|t| {
                t.iter()
                    .any(|e| e == package || e.split_once('.').is_some_and(|(p, _)| p == package))
            })
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
                tools: None,
                endpoint: None,
                root_token_id: Some("t1".into()),
                session: false,
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

    fn token(read_only: bool, tools: Option<&[&str]>) -> Principal {
        Principal {
            identity: Some(Identity {
                user_id: "u1".into(),
                user: "ann".into(),
                token_id: Some("t1".into()),
                read_only,
                spaces: vec!["s1".into()],
                expires_at: None,
                tools: tools.map(|t| t.iter().map(|s| (*s).to_owned()).collect()),
                endpoint: None,
                root_token_id: Some("t1".into()),
                session: false,
            }),
            scope: Scope::owner("default"),
            space_id: "s1".into(),
        }
    }

    #[test]
    fn tool_scopes() {
        let owner = Principal::owner("default", "s1");
        assert!(owner.may_use_tool("git", "git.git_commit", false) && owner.may_use_package("git"));
        // No scope: every tool; read-only: only read-only tools.
        assert!(token(false, None).may_use_tool("git", "git.git_commit", false));
        let ro = token(true, None);
        assert!(ro.may_use_tool("git", "git.git_status", true));
        assert!(!ro.may_use_tool("git", "git.git_commit", false));
        // A package scope: that package only.
        let pkg = token(false, Some(&["time"]));
        assert!(pkg.may_use_tool("time", "time.convert_time", false));
        assert!(!pkg.may_use_tool("git", "git.git_status", true));
        assert!(pkg.may_use_package("time") && !pkg.may_use_package("git"));
        // A tool scope: that tool only, and not its package's resources.
        let one = token(false, Some(&["git.git_status"]));
        assert!(one.may_use_tool("git", "git.git_status", true));
        assert!(!one.may_use_tool("git", "git.git_log", true));
        assert!(!one.may_use_package("git"));
        assert!(one.reaches_package("git") && !one.reaches_package("time"));
        // Read-only with a named tool: granted more on purpose; with its package: not.
        let ro_named = token(true, Some(&["git.git_commit", "time"]));
        assert!(ro_named.may_use_tool("git", "git.git_commit", false));
        assert!(!ro_named.may_use_tool("time", "time.set_clock", false));
        assert!(ro_named.may_use_tool("time", "time.convert_time", true));
        // A viewer's token (read access in its space) is read-only whatever its flag says.
        let mut viewer = token(false, None);
        viewer.scope.access = crate::Access::Read;
        assert!(viewer.read_only());
        assert!(!viewer.may_use_tool("git", "git.git_commit", false));
        assert!(viewer.may_use_tool("git", "git.git_status", true));
        // A prefix is not a package: `git` does not cover `git-extra`.
        assert!(!token(false, Some(&["git"])).may_use_tool("git-extra", "git-extra.x", true));
    }
}
