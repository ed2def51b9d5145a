//! Managing a space's policies: the space's admins and owners (and the machine's owner) list,
//! add, change and remove them with a management credential; everyone else is refused. Bodies
//! are checked by [`PolicySpec::parse`], whose errors name the field; an `applies_to` must
//! name a token or endpoint that exists here, and no token changes a policy that binds its
//! own chain (a credential never changes the guardrails that bind it).

use quarry_core::{Error, Principal, Result};
use quarry_store::{AccessStore, HubStore, PolicyStore};
use serde_json::Value;

use crate::gate::require_govern;
use crate::rule::{AppliesTo, Policy, PolicySpec};

/// What changing a policy reads besides the policies: tokens (an `applies_to` token, the
/// caller's own chain) and named endpoints (an `applies_to` endpoint). Every store is one.
pub trait GovernanceStore: PolicyStore + AccessStore + HubStore {}

impl<T: PolicyStore + AccessStore + HubStore + ?Sized> GovernanceStore for T {}

fn actor(p: &Principal) -> Option<String> {
    p.identity.as_ref().map(|i| i.user.clone())
}

/// The space's policies, by name.
pub fn policies<S: PolicyStore + ?Sized>(store: &S, p: &Principal) -> Result<Vec<Policy>> {
    require_govern(p, "reading tool policies")?;
    space_policies(store, p)
}

/// One policy, by id or name.
pub fn policy<S: PolicyStore + ?Sized>(store: &S, p: &Principal, key: &str) -> Result<Policy> {
    require_govern(p, "reading tool policies")?;
    space_policy(store, p, key)
}

/// The space's policies, for a caller already found to govern.
fn space_policies<S: PolicyStore + ?Sized>(store: &S, p: &Principal) -> Result<Vec<Policy>> {
    store
        .tool_policies(&p.space_id)?
        .iter()
        .map(|row| Policy::from_row(row).map_err(Error::Storage))
        .collect()
}

/// One policy by id or name, for a caller already found to govern.
fn space_policy<S: PolicyStore + ?Sized>(store: &S, p: &Principal, key: &str) -> Result<Policy> {
    space_policies(store, p)?
        .into_iter()
        .find(|x| x.id == key || x.name == key)
        .ok_or_else(|| Error::NotFound(format!("no policy '{key}' in this space")))
}

/// `InvalidInput` unless what `applies_to` names exists in `p`'s space: a token that may use
/// the space, or a named endpoint of the space or of one of its members (by id or name). A
/// policy attached to nothing would silently never apply.
fn check_target<S: GovernanceStore + ?Sized>(
    store: &S,
    p: &Principal,
    applies_to: &AppliesTo,
) -> Result<()> {
    match applies_to {
        AppliesTo::Space => Ok(()),
        AppliesTo::Token(id) => {
            let usable = store
                .token_chain(id)?
                .first()
                .is_some_and(|t| t.spaces.contains(&p.space_id));
            if usable {
                Ok(())
            } else {
                Err(Error::invalid(format!(
                    "applies_to.token: no token '{id}' may use this space (name a token by its id, as `quarry token list` shows it)"
                )))
            }
        }
        AppliesTo::Endpoint(key) => {
            let mut owners = vec![format!("space:{}", p.space_id)];
            // Two reads whatever the number of members (a lookup per member was N + 1).
            let members: std::collections::HashSet<String> = store
                .memberships(None)?
                .into_iter()
                .filter(|m| m.space_id == p.space_id)
                .map(|m| m.user)
                .collect();
            owners.extend(
                store
                    .users()?
                    .into_iter()
                    .filter(|u| members.contains(&u.name))
                    .map(|u| format!("user:{}", u.id)),
            );
            if let Some(i) = &p.identity {
                owners.push(format!("user:{}", i.user_id));
            }
            let found = store
                .tool_endpoints(&owners)?
                .iter()
                .any(|e| e.id == *key || e.name == *key);
            if found {
                Ok(())
            } else {
                Err(Error::invalid(format!(
                    "applies_to.endpoint: no tool endpoint '{key}' in this space (name one of `quarry endpoint list`)"
                )))
            }
        }
    }
}

/// `ManagementForbidden` when `applies_to` binds `p`'s own credential: its token or one that
/// created it, or the endpoint its token works at.
fn check_not_own<S: GovernanceStore + ?Sized>(
    store: &S,
    p: &Principal,
    applies_to: &AppliesTo,
) -> Result<()> {
    let Some(identity) = &p.identity else {
        return Ok(());
    };
    let own = match applies_to {
        AppliesTo::Space => false,
        AppliesTo::Endpoint(e) => identity.endpoint.as_deref() == Some(e.as_str()),
        AppliesTo::Token(t) => match &identity.token_id {
            Some(mine) => store.token_chain(mine)?.iter().any(|r| r.id == *t),
            None => false,
        },
    };
    if own {
        return Err(Error::ManagementForbidden(
            "this policy binds the token making the request (or a token that created it): a credential never changes the guardrails that bind it; change the policy with another management credential"
                .into(),
        ));
    }
    Ok(())
}

/// Adds a policy from a request body.
pub fn create_policy<S: GovernanceStore + ?Sized>(
    store: &S,
    p: &Principal,
    body: &Value,
    now: i64,
) -> Result<Policy> {
    require_govern(p, "adding a tool policy")?;
    let spec = PolicySpec::parse(body, None).map_err(Error::invalid)?;
    check_target(store, p, &spec.applies_to)?;
    check_not_own(store, p, &spec.applies_to)?;
    let row = spec.to_row(
        &uuid::Uuid::new_v4().to_string(),
        &p.space_id,
        actor(p).as_deref(),
        now,
    );
    store.insert_tool_policy(&row)?;
    Policy::from_row(&row).map_err(Error::Storage)
}

/// Changes a policy (by id or name) with a partial body; its version grows by one, so
/// approvals given under the old rule no longer count.
pub fn update_policy<S: GovernanceStore + ?Sized>(
    store: &S,
    p: &Principal,
    key: &str,
    body: &Value,
    now: i64,
) -> Result<Policy> {
    require_govern(p, "changing a tool policy")?;
    let current = space_policy(store, p, key)?;
    check_not_own(store, p, &current.applies_to)?;
    let spec = PolicySpec::parse(body, Some(&current)).map_err(Error::invalid)?;
    if spec.applies_to != current.applies_to {
        check_target(store, p, &spec.applies_to)?;
        check_not_own(store, p, &spec.applies_to)?;
    }
    let mut row = spec.to_row(&current.id, &p.space_id, None, now);
    row.updated_at = now;
    let changed = store
        .update_tool_policy(&row)?
        .ok_or_else(|| Error::NotFound(format!("no policy '{key}' in this space")))?;
    Policy::from_row(&changed).map_err(Error::Storage)
}

/// Removes a policy (by id or name); what it removed.
pub fn delete_policy<S: GovernanceStore + ?Sized>(
    store: &S,
    p: &Principal,
    key: &str,
) -> Result<Policy> {
    require_govern(p, "removing a tool policy")?;
    let current = space_policy(store, p, key)?;
    check_not_own(store, p, &current.applies_to)?;
    if !store.delete_tool_policy(&p.space_id, &current.id)? {
        return Err(Error::NotFound(format!("no policy '{key}' in this space")));
    }
    Ok(current)
}
