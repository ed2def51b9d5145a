//! Managing a space's policies: the space's admins and owners (and the machine's owner)
//! list, add, change and remove them; everyone else is refused. Bodies are checked by
//! [`PolicySpec::parse`], whose errors name the field.

use quarry_core::{Error, Principal, Result};
use quarry_store::PolicyStore;
use serde_json::Value;

use crate::gate::may_govern;
use crate::rule::{Policy, PolicySpec};

fn require_govern(p: &Principal) -> Result<()> {
    if may_govern(p) {
        Ok(())
    } else {
        Err(Error::Forbidden(
            "only the space's admins and owners manage tool policies".into(),
        ))
    }
}

fn actor(p: &Principal) -> Option<String> {
    p.identity.as_ref().map(|i| i.user.clone())
}

/// The space's policies, by name.
pub fn policies(store: &dyn PolicyStore, p: &Principal) -> Result<Vec<Policy>> {
    require_govern(p)?;
    store
        .tool_policies(&p.space_id)?
        .iter()
        .map(|row| Policy::from_row(row).map_err(Error::Storage))
        .collect()
}

/// One policy, by id or name.
pub fn policy(store: &dyn PolicyStore, p: &Principal, key: &str) -> Result<Policy> {
    policies(store, p)?
        .into_iter()
        .find(|x| x.id == key || x.name == key)
        .ok_or_else(|| Error::NotFound(format!("no policy '{key}' in this space")))
}

/// Adds a policy from a request body.
pub fn create_policy(
    store: &dyn PolicyStore,
    p: &Principal,
    body: &Value,
    now: i64,
) -> Result<Policy> {
    require_govern(p)?;
    let spec = PolicySpec::parse(body, None).map_err(Error::invalid)?;
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
pub fn update_policy(
    store: &dyn PolicyStore,
    p: &Principal,
    key: &str,
    body: &Value,
    now: i64,
) -> Result<Policy> {
    let current = policy(store, p, key)?;
    let spec = PolicySpec::parse(body, Some(&current)).map_err(Error::invalid)?;
    let mut row = spec.to_row(&current.id, &p.space_id, None, now);
    row.updated_at = now;
    let changed = store
        .update_tool_policy(&row)?
        .ok_or_else(|| Error::NotFound(format!("no policy '{key}' in this space")))?;
    Policy::from_row(&changed).map_err(Error::Storage)
}

/// Removes a policy (by id or name); what it removed.
pub fn delete_policy(store: &dyn PolicyStore, p: &Principal, key: &str) -> Result<Policy> {
    let current = policy(store, p, key)?;
    if !store.delete_tool_policy(&p.space_id, &current.id)? {
        return Err(Error::NotFound(format!("no policy '{key}' in this space")));
    }
    Ok(current)
}
