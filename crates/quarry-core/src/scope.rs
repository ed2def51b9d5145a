//! What one caller may touch: a space, optionally an allow-list of its collections, and a
//! level of access. Surfaces resolve it once per request (from a token, or the machine's
//! owner in local mode) and hand it to the engine, which applies it on every call.

use std::sync::Arc;

use serde::Serialize;

/// Levels of access, ordered: each includes the ones before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    /// Search, list and read.
    Read,
    /// Also add, change and delete documents and notes (uploads, `create_knowledge`).
    Write,
    /// Also create, change and delete knowledge bases, collections and contexts; index and
    /// embed.
    Admin,
}

impl Access {
    /// The level's name (`read`, `write`, `admin`).
    pub fn as_str(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Write => "write",
            Access::Admin => "admin",
        }
    }
}

/// A caller's reach inside one space.
#[derive(Debug, Clone)]
pub struct Scope {
    /// The space's key (its unique name; `default` in local mode).
    pub space: String,
    /// Collection ids the caller may use; `None` means every collection of the space.
    pub collections: Option<Arc<[i64]>>,
    /// What the caller may do there.
    pub access: Access,
    /// The machine's owner (CLI, stdio, a loopback server without `--auth`): may also point
    /// collections at folders on the server's disk.
    pub machine_owner: bool,
    /// Who the caller is as a reader of documents with readers of their own (a source's
    /// mapping, an upload's `readers`): its reader keys (`user:<name>` and a
    /// `group:<name>` per group of the space it is in). `None`: it reads every document of
    /// the collections it may use (the space's admins and owners, the machine's owner).
    pub readers: Option<Arc<[String]>>,
    /// Whether the credential may manage governance — policies, approvals, groups, roles
    /// and members, other chains' tokens, sources, the audit log — within what its role
    /// allows: the machine's owner, or a token made with the management scope that nothing
    /// narrows (docs/governance.md). A credential never changes the guardrails that bind
    /// it, so a token narrowed to tools, knowledge bases or an endpoint, an MCP connector's
    /// (OAuth) token, and a request narrowed by `?kb=` have no such power.
    pub manage: bool,
}

/// What a refused management request is told: which credentials manage, and how to get one.
pub const MANAGEMENT_HINT: &str = "this token is narrowed (to tools, knowledge bases or an endpoint), was made for an MCP connector, or was made without the management scope. Guardrails are changed with a credential made for it: the quarry CLI on the server, or a token made with `quarry token create --manage` (REST: \"manage\": true) that no narrowing limits";

impl Scope {
    /// Everything in `space`, as the machine's owner.
    pub fn owner(space: impl Into<String>) -> Scope {
        Scope {
            space: space.into(),
            collections: None,
            access: Access::Admin,
            machine_owner: true,
            readers: None,
            manage: true,
        }
    }

    /// Whether the caller may read a document whose readers are `readers` (`None`: every
    /// reader of its collection; an empty list: only those who read every document).
    pub fn may_read(&self, readers: Option<&[String]>) -> bool {
        match (&self.readers, readers) {
            (None, _) | (_, None) => true,
            (Some(mine), Some(theirs)) => theirs.iter().any(|k| mine.contains(k)),
        }
    }

    /// Whether the caller may use collection `id` (of its space).
    pub fn allows(&self, collection_id: i64) -> bool {
        self.collections
            .as_ref()
            .is_none_or(|ids| ids.contains(&collection_id))
    }

    /// Whether the caller has at least `access`.
    pub fn can(&self, access: Access) -> bool {
        self.access >= access
    }

    /// The same scope narrowed to `ids` (kept only where already allowed): a URL's `?kb=`
    /// can narrow a token's reach, never widen it. A narrowed scope manages nothing.
    pub fn narrowed(&self, ids: &[i64]) -> Scope {
        let kept: Vec<i64> = ids.iter().copied().filter(|id| self.allows(*id)).collect();
        Scope {
            collections: Some(kept.into()),
            manage: false,
            ..self.clone()
        }
    }

    /// `Ok` when the caller may manage governance (`what`, e.g. "changing a policy") at
    /// `access` or above: [`Error::Forbidden`](crate::Error::Forbidden) for a role too low,
    /// else [`Error::ManagementForbidden`](crate::Error::ManagementForbidden) for a
    /// credential without the management scope.
    pub fn require_manage(&self, access: Access, what: &str) -> crate::Result<()> {
        if !self.can(access) {
            return Err(crate::Error::Forbidden(format!(
                "{what} needs {} access; this caller has {} access",
                access.as_str(),
                self.access.as_str()
            )));
        }
        if !self.manage {
            return Err(crate::Error::ManagementForbidden(format!(
                "{what} needs a management credential: {MANAGEMENT_HINT}"
            )));
        }
        Ok(())
    }

    /// The same scope with at most `access`.
    pub fn capped(&self, access: Access) -> Scope {
        Scope {
            access: self.access.min(access),
            ..self.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn narrowing_never_widens() {
        let s = Scope::owner("a").narrowed(&[1, 2]);
        assert!(s.allows(1) && s.allows(2) && !s.allows(3));
        let t = s.narrowed(&[2, 3]);
        assert!(t.allows(2) && !t.allows(3) && !t.allows(1));
        let r = t.capped(Access::Read);
        assert!(r.can(Access::Read) && !r.can(Access::Write));
        assert!(!r.capped(Access::Admin).can(Access::Write));
    }

    #[test]
    fn readers_limit_only_documents_that_name_readers() {
        let owner = Scope::owner("a");
        assert!(owner.may_read(Some(&[])));
        let reader = Scope {
            readers: Some(vec!["user:ann".to_owned(), "group:hr".to_owned()].into()),
            ..owner
        };
        assert!(reader.may_read(None));
        assert!(reader.may_read(Some(&["group:hr".to_owned()])));
        assert!(!reader.may_read(Some(&["group:eng".to_owned()])));
        assert!(!reader.may_read(Some(&[])));
    }
}
