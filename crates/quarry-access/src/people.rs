//! People who sign in through an identity provider (issue 69): who they are here, what
//! their provider groups give them, and the web session signing in makes.
//!
//! - **Who.** A provider account is `(issuer, subject)`; the first sign-in makes a user (named
//!   after the account's preferred username or e-mail, made unique) and links the account to
//!   it. Later sign-ins find the user by that link alone, never by e-mail, so an account that
//!   claims someone else's address is still someone else.
//! - **Groups.** A provider's rules map a group of its group claim to a role in a space and to
//!   reader groups there. The spaces and reader groups the rules name are the provider's to
//!   decide for its people: at each sign-in a person gets the highest role of the rules their
//!   groups match and leaves the spaces none match; they join the named reader groups they
//!   match and leave the others. Spaces and groups no rule names are left as owners set them.
//! - **Session.** A session is an access token with the `qw_` prefix, reaching every space the
//!   person is a member of, expiring after the provider's bound; the web UI keeps it in an
//!   HttpOnly cookie and the server accepts it from that cookie only.

use quarry_core::{Error, Principal, Result};
use quarry_store::{Role, Space, User};
use serde::Serialize;

use crate::directory::{Directory, IssuedToken, TokenRequest};
use crate::manage::Actor;
use crate::names::validate_name;
use crate::secrets::SESSION_PREFIX;

/// A provider account as its ID token describes it.
#[derive(Debug, Clone, Default)]
pub struct Person {
    /// The provider's issuer.
    pub issuer: String,
    /// The provider's `sub`.
    pub subject: String,
    /// `preferred_username`, else `name`: what a new user is named after.
    pub preferred_name: Option<String>,
    /// `email`, shown and used to name a new user; never used to find one.
    pub email: Option<String>,
    /// The provider's groups the person is in (its group claim).
    pub groups: Vec<String>,
}

/// One rule of a provider's group mapping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupRule {
    /// The provider group (a value of its group claim).
    pub group: String,
    /// The space (name) the rule is about.
    pub space: String,
    /// The role members of the group get there; `None`: the rule gives reader groups only
    /// (to people who have a role there by another rule or an owner's grant).
    pub role: Option<Role>,
    /// Reader groups of that space members of the group join.
    pub reader_groups: Vec<String>,
}

/// What signing in did.
#[derive(Debug)]
pub struct SignedIn {
    /// The user.
    pub user: User,
    /// Whether this sign-in made the user.
    pub created: bool,
    /// The session's token (its secret goes into the cookie and nowhere else).
    pub session: IssuedToken,
}

/// A web session as a space's admins see it.
#[derive(Debug, Clone, Serialize)]
pub struct SessionView {
    /// The session token's UUID (what revoking names).
    pub id: String,
    /// Whose session.
    pub user: String,
    /// The provider and the browser (`web session: Company SSO (Mozilla/5.0 …)`).
    pub label: String,
    /// When it was made (Unix milliseconds).
    pub created_at: i64,
    /// When it was last used (written at most once a minute).
    pub last_used_at: Option<i64>,
    /// When it ends.
    pub expires_at: Option<i64>,
}

/// The user name a new account gets: its preferred name, else its e-mail's local part,
/// lower-cased and cut to the characters names allow.
fn name_for(person: &Person) -> String {
    let raw = person
        .preferred_name
        .as_deref()
        .filter(|s| !s.trim().is_empty())
        .or_else(|| person.email.as_deref().and_then(|e| e.split('@').next()))
        .unwrap_or("person");
    let mut name: String = raw
        .trim()
        .to_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect();
    name = name
        .trim_start_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_owned();
    name.truncate(56);
    if validate_name("user", &name).is_err() {
        name = "person".to_owned();
    }
    name
}

impl Directory {
    /// Signs `person` in: finds or makes their user, applies `rules` to their groups, and
    /// issues a session token labelled `label` for `lifetime_ms`. Refused (`Forbidden`, in
    /// words for the person) when they are a member of no space afterwards.
    pub fn sign_in_person(
        &self,
        person: &Person,
        rules: &[GroupRule],
        label: &str,
        lifetime_ms: i64,
    ) -> Result<SignedIn> {
        if person.issuer.is_empty() || person.subject.is_empty() {
            return Err(Error::invalid("an identity needs an issuer and a subject"));
        }
        let now = quarry_core::now_millis();
        let (row, user, created) =
            match self.store.identity_user(&person.issuer, &person.subject)? {
                Some((row, id)) => (row, self.user(&id)?, false),
                None => {
                    let user = self.create_unique_user(&name_for(person))?;
                    let (row, _) = self.user_row(&user.id)?;
                    (row, user, true)
                }
            };
        self.store.link_identity(
            &person.issuer,
            &person.subject,
            row,
            person.email.as_deref(),
            now,
        )?;
        // Two first sign-ins racing: the link keeps the first user; the loser's is removed.
        let (linked_row, linked_id) = self
            .store
            .identity_user(&person.issuer, &person.subject)?
            .ok_or_else(|| Error::Storage("the identity link was not kept".into()))?;
        let (row, user, created) = if linked_row == row {
            (row, user, created)
        } else {
            if created {
                self.store.delete_user(row)?;
            }
            let (r, u) = self.user_row(&linked_id)?;
            (r, u, false)
        };
        self.apply_group_rules(row, &person.groups, rules)?;
        if self.store.memberships(Some(row))?.is_empty() {
            return Err(Error::Forbidden(format!(
                "you signed in as '{}', but that account is not a member of any space here yet: ask a space owner to add you{}",
                user.name,
                if rules.is_empty() {
                    ""
                } else {
                    " (or to put you in a provider group this server maps to a space)"
                }
            )));
        }
        let session = self.issue(
            &TokenRequest {
                user: user.id.clone(),
                label: label.to_owned(),
                expires_at: Some(now.saturating_add(lifetime_ms.max(1000))),
                // A person signed in acts with their full role, as the token they used to
                // paste did.
                manage: true,
                ..TokenRequest::default()
            },
            SESSION_PREFIX,
        )?;
        Ok(SignedIn {
            user,
            created,
            session,
        })
    }

    /// The live web sessions of the members of space `key`, for its admins and owners: a
    /// session reaches every space of its person, so each space's admins see it.
    pub fn sessions_as(
        &self,
        principal: &Principal,
        key: &str,
    ) -> Result<(Space, Vec<SessionView>)> {
        let (space, _) = self.space_admin(&Actor::of(principal), key, "seeing the sessions")?;
        let members: Vec<String> = self
            .space_members(&space)?
            .into_iter()
            .map(|m| m.user)
            .collect();
        let now = quarry_core::now_millis();
        let sessions = self
            .store
            .tokens(None)?
            .into_iter()
            .filter(|t| {
                t.prefix.starts_with(SESSION_PREFIX)
                    && t.revoked_at.is_none()
                    && t.expires_at.is_none_or(|at| at > now)
                    && members.contains(&t.user)
            })
            .map(|t| SessionView {
                id: t.id,
                user: t.user,
                label: t.label,
                created_at: t.created_at,
                last_used_at: t.last_used_at,
                expires_at: t.expires_at,
            })
            .collect();
        Ok((space, sessions))
    }

    /// Ends the web session `id` of a member of space `key` (its admins and owners): the
    /// person is signed out on every node at their next request. Any other id is "not found".
    pub fn revoke_session_as(&self, principal: &Principal, key: &str, id: &str) -> Result<()> {
        let (space, sessions) = self.sessions_as(principal, key)?;
        if !sessions.iter().any(|s| s.id == id) {
            return Err(Error::not_found(format!(
                "no session '{id}' in space '{}'",
                space.name
            )));
        }
        self.revoke_token(id, None)
    }

    /// A new user named `base`, or `base-2`, `base-3`, … when taken.
    fn create_unique_user(&self, base: &str) -> Result<User> {
        for n in 1..=1000 {
            let name = if n == 1 {
                base.to_owned()
            } else {
                format!("{base}-{n}")
            };
            match self.create_user(&name) {
                Err(Error::Conflict(_)) => continue,
                other => return other,
            }
        }
        Err(Error::Conflict(format!(
            "no free user name starting with '{base}'"
        )))
    }

    /// Applies `rules` to a person in `groups` (see the module): roles first, so that
    /// reader groups are joined in spaces the person is now a member of.
    fn apply_group_rules(&self, row: i64, groups: &[String], rules: &[GroupRule]) -> Result<()> {
        // A rule about a space that does not exist (yet) waits for it (the server warns at
        // start-up).
        let mut existing: Vec<&str> = Vec::new();
        for r in rules {
            if !existing.contains(&r.space.as_str()) && self.store.space(&r.space)?.is_some() {
                existing.push(&r.space);
            }
        }
        let rules: Vec<&GroupRule> = rules
            .iter()
            .filter(|r| existing.contains(&r.space.as_str()))
            .collect();
        let matches = |r: &GroupRule| groups.contains(&r.group);
        let mut spaces: Vec<&str> = rules
            .iter()
            .filter(|r| r.role.is_some())
            .map(|r| r.space.as_str())
            .collect();
        spaces.sort_unstable();
        spaces.dedup();
        for space in spaces {
            let role = rules
                .iter()
                .filter(|r| r.space == space && matches(r))
                .filter_map(|r| r.role)
                .max();
            match role {
                Some(role) => self.store.grant(row, space, role)?,
                None => {
                    self.store.revoke_membership(row, space)?;
                }
            }
        }
        let member_of: Vec<String> = self
            .store
            .memberships(Some(row))?
            .into_iter()
            .map(|m| m.space)
            .collect();
        let mut named: Vec<(&str, &str)> = rules
            .iter()
            .flat_map(|r| {
                r.reader_groups
                    .iter()
                    .map(move |g| (r.space.as_str(), g.as_str()))
            })
            .collect();
        named.sort_unstable();
        named.dedup();
        for (space, group) in named {
            let wanted = member_of.iter().any(|s| s == space)
                && rules.iter().any(|r| {
                    r.space == space && matches(r) && r.reader_groups.iter().any(|g| g == group)
                });
            if wanted {
                if self.store.group(space, group)?.is_none() {
                    match self.store.create_group(
                        space,
                        group,
                        "members come from the identity provider's groups",
                    ) {
                        Ok(_) | Err(Error::Conflict(_)) => {}
                        Err(e) => return Err(e),
                    }
                }
                self.store.add_group_member(space, group, row)?;
            } else if member_of.iter().any(|s| s == space)
                && self.store.group(space, group)?.is_some()
            {
                self.store.remove_group_member(space, group, row)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn person(preferred: Option<&str>, email: Option<&str>) -> Person {
        Person {
            issuer: "https://idp".into(),
            subject: "1".into(),
            preferred_name: preferred.map(str::to_owned),
            email: email.map(str::to_owned),
            groups: vec![],
        }
    }

    #[test]
    fn new_users_are_named_after_the_account() {
        assert_eq!(name_for(&person(Some("Ann.Lee"), None)), "ann.lee");
        assert_eq!(
            name_for(&person(None, Some("Bob Smith@example.com"))),
            "bob-smith"
        );
        assert_eq!(name_for(&person(Some("  "), Some("x@y"))), "x");
        assert_eq!(name_for(&person(Some("李雷"), None)), "person");
        assert_eq!(name_for(&person(Some("__ok"), None)), "ok");
        assert_eq!(name_for(&person(None, None)), "person");
    }
}
