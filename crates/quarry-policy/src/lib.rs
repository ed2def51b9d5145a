//! Tool policies (issue 45): rules a space's admins attach to the space, a named endpoint or
//! a token, which refuse a tool call or hold it for a person's approval when a typed
//! predicate over its arguments holds (`predicate.rs`: a path under a prefix, a value in a
//! list, a number at most N, a pattern, a URL's host), and the gate every surface's tool
//! call passes (`gate.rs`: `check` before a call runs, `decide` for approvers). No I/O but
//! the store's [`quarry_store::PolicyStore`]; the surfaces audit what the gate decides.

mod gate;
mod manage;
mod predicate;
mod rule;

pub use gate::{
    Call, EndpointRef, Gate, Verdict, approval_json, caller_key, check, decide, digest, list,
    may_decide, may_govern, may_see, policy_names, shown_status,
};
pub use manage::{GovernanceStore, create_policy, delete_policy, policies, policy, update_policy};
pub use predicate::{Operand, Operator, Predicate};
pub use rule::{
    AppliesTo, DEFAULT_APPROVAL_TTL_SECS, Effect, MAX_APPROVAL_TTL_SECS, Policy, PolicySpec,
};
