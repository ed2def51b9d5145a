//! The spaces a principal sees, in seed 004's fields (the tokens API and the UI session).

use quarry_core::Error;
use serde_json::{Value, json};

/// The spaces `principal` may use, with its role in each (seed 004's fields): a token's
/// spaces where its user is (still) a member; every space for the machine's owner.
pub(crate) fn visible_spaces(
    directory: &quarry_access::Directory,
    principal: &quarry_core::Principal,
) -> Result<Vec<Value>, Error> {
    Ok(directory
        .visible_spaces(principal)?
        .into_iter()
        .map(|s| json!({"space_id": s.id, "id": s.id, "name": s.name, "description": s.description, "role": s.role}))
        .collect())
}
