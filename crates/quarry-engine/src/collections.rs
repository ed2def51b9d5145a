//! Collections and contexts.

use std::path::{Path, PathBuf};

use quarry_core::{Access, Collection, CollectionKind, Context, Error, Result};

use crate::engine::Engine;
use crate::index::indexing::CollectionReport;
use crate::progress::Progress;

/// Names a new collection may not take because a REST route owns that path segment
/// (`POST /collections/add` would shadow `GET/PUT/DELETE /collections/{name}`).
/// Collections that already carry such a name keep working.
pub const RESERVED_COLLECTION_NAMES: &[&str] = &["add"];

/// Collection names become the first segment of display paths and `qmd://` URIs.
/// Checked for new names only (add, rename target), never for lookups.
pub(crate) fn validate_collection_name(name: &str) -> Result<()> {
    if RESERVED_COLLECTION_NAMES.contains(&name) {
        return Err(Error::invalid(format!(
            "invalid collection name {name:?}: it is reserved (the REST API uses /collections/{name} as a route); choose another name"
        )));
    }
    let ok = !name.is_empty()
        && name.chars().count() <= 64
        && !name.starts_with(['.', '-'])
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "invalid collection name {name:?}: use letters, digits, '-', '_' or '.', not starting with '.' or '-' (64 characters at most)"
        )))
    }
}

impl Engine {
    /// Adds a folder collection and indexes it. `name` defaults to the folder's name.
    ///
    /// A folder where the mask matches no file is refused (nothing is added) unless
    /// `allow_empty`: it is almost always a wrong path or mask.
    pub fn add_collection(
        &self,
        path: &Path,
        name: Option<&str>,
        mask: Option<&str>,
        allow_empty: bool,
        progress: &dyn Progress,
    ) -> Result<(Collection, CollectionReport)> {
        if !self.scope().machine_owner {
            return Err(Error::Forbidden(
                "folder collections index the server's own disk; add them with 'quarry collection add' on the server".into(),
            ));
        }
        self.require(Access::Admin, "adding a collection")?;
        let root = canonical_dir(path)?;
        let name = match name {
            Some(n) => n.trim().to_owned(),
            None => root
                .file_name()
                .and_then(|n| n.to_str())
                .map(str::to_owned)
                .ok_or_else(|| {
                    Error::invalid(format!(
                        "cannot derive a collection name from {}: pass --name",
                        root.display()
                    ))
                })?,
        };
        validate_collection_name(&name)?;
        let mask = mask.unwrap_or(quarry_core::DEFAULT_MASK).trim().to_owned();
        quarry_ingest::compile_mask(&mask)?;
        let root_str = root.to_str().ok_or_else(|| {
            Error::invalid(format!("folder path {} is not valid UTF-8", root.display()))
        })?;
        let guard = self.lock_writes(progress)?;
        let collection = self.store().create_collection(
            self.space(),
            &name,
            CollectionKind::Folder,
            root_str,
            &mask,
        )?;
        let mut session = crate::index::indexing::IndexSession::new(self, &guard);
        let outcome = self
            .index_collection(&mut session, &collection, progress)
            .and_then(|r| session.finish().map(|()| r))
            .and_then(|report| {
                if let Some(e) = &report.error {
                    Err(Error::invalid(format!("{}: {e}", root.display())))
                } else if report.scanned == 0 && !allow_empty {
                    Err(Error::invalid(format!(
                        "no files match '{mask}' under {root_str}; nothing was added (check the path and --mask, or allow an empty collection)"
                    )))
                } else {
                    Ok(report)
                }
            });
        let report = match outcome {
            Ok(r) => r,
            Err(e) => {
                // Leave no half-added collection behind.
                self.store().remove_collection(self.space(), &name)?;
                self.flush_index(&guard)?;
                return Err(e);
            }
        };
        let collection = self
            .store()
            .collection(self.space(), &name)?
            .unwrap_or(collection);
        Ok((collection, report))
    }

    /// The collections of the space this handle may use.
    pub fn collections(&self) -> Result<Vec<Collection>> {
        let mut all = self.store().collections(self.space())?;
        all.retain(|c| self.scope().allows(c.id));
        self.uncount_hidden(&mut all)?;
        Ok(all)
    }

    /// The id of an optional collection filter (`NotFound` for an unknown name, or one this
    /// handle may not use, exactly like [`Engine::collection`]).
    pub(crate) fn collection_id(&self, name: Option<&str>) -> Result<Option<i64>> {
        let Some(name) = name else {
            return Ok(None);
        };
        let found = self.store().collection_id(self.space(), name)?;
        self.usable(name, found, |&id| id).map(Some)
    }

    /// `found` (the collection called `name`, or something of it) when this handle may use
    /// it; otherwise the same `NotFound` as for a name that does not exist.
    fn usable<T>(&self, name: &str, found: Option<T>, id: impl Fn(&T) -> i64) -> Result<T> {
        found
            .filter(|c| self.scope().allows(id(c)))
            .ok_or_else(|| Error::not_found(format!("collection '{name}' not found")))
    }

    /// The collection ids a search must be limited to, inside the indexes: the named one,
    /// or every collection this handle may use — `None` (no filter) only when that is every
    /// collection in the index.
    pub(crate) fn search_filter(&self, name: Option<&str>) -> Result<Option<Vec<i64>>> {
        if let Some(id) = self.collection_id(name)? {
            return Ok(Some(vec![id]));
        }
        if self.scope().collections.is_none() && !self.store().collections_outside(self.space())? {
            return Ok(None);
        }
        Ok(Some(self.collections()?.iter().map(|c| c.id).collect()))
    }

    /// Names of the collections this handle may use, when it may not use all of its space's.
    pub(crate) fn allowed_names(&self) -> Result<Option<std::collections::HashSet<String>>> {
        if self.scope().collections.is_none() {
            return Ok(None);
        }
        Ok(Some(
            self.collections()?.into_iter().map(|c| c.name).collect(),
        ))
    }

    /// One collection of the space by name; one this handle may not use is not found,
    /// exactly like a missing one.
    pub fn collection(&self, name: &str) -> Result<Collection> {
        let found = self.store().collection(self.space(), name)?;
        self.usable(name, found, |c| c.id)
    }

    /// Removes a collection and everything indexed from it; returns the documents removed.
    pub fn remove_collection(&self, name: &str, progress: &dyn Progress) -> Result<u64> {
        self.collection(name)?;
        self.require(Access::Admin, "removing a collection")?;
        let guard = self.lock_writes(progress)?;
        let n = self.store().remove_collection(self.space(), name)?;
        self.flush_index(&guard)?;
        Ok(n)
    }

    /// Renames a collection; documents keep their ids and vectors.
    pub fn rename_collection(&self, old: &str, new: &str, progress: &dyn Progress) -> Result<()> {
        self.collection(old)?;
        self.require(Access::Admin, "renaming a collection")?;
        if new != old {
            self.require_whole_space("renaming a collection")?;
        }
        validate_collection_name(new)?;
        let _guard = self.lock_writes(progress)?;
        self.store().rename_collection(self.space(), old, new)
    }

    /// Attaches `text` to a path prefix. `target` may be `/` (everything), a display path
    /// (`collection/dir`), a `qmd://` URI, or a folder/file on disk inside a collection.
    pub fn add_context(&self, target: &str, text: &str) -> Result<Context> {
        self.require(Access::Admin, "adding a context")?;
        let text = text.trim();
        if text.is_empty() {
            return Err(Error::invalid("context text must not be empty"));
        }
        let path = self.context_key(target, false)?;
        self.store().set_context(self.space(), &path, text)?;
        Ok(Context {
            path,
            text: text.to_owned(),
        })
    }

    /// The space's contexts.
    pub fn contexts(&self) -> Result<Vec<Context>> {
        self.store().contexts(self.space())
    }

    /// Removes the context of `target` (as [`Engine::add_context`] reads it); returns its key.
    pub fn remove_context(&self, target: &str) -> Result<String> {
        self.require(Access::Admin, "removing a context")?;
        // A context can outlive its folder on disk: match an absolute path as written too.
        let key = self.context_key(target, true)?;
        if self.store().remove_context(self.space(), &key)? {
            Ok(key)
        } else {
            Err(Error::not_found(format!("no context for '{key}'")))
        }
    }

    /// Normalises what a user calls a path into the display-path prefix contexts are keyed by.
    /// `gone_ok`: an absolute path that no longer exists on disk is matched as written.
    fn context_key(&self, target: &str, gone_ok: bool) -> Result<String> {
        let target = target.trim();
        if target == "/" {
            return Ok("/".to_owned());
        }
        if target.is_empty() {
            return Err(Error::invalid("context path must not be empty"));
        }
        let collections = self.collections()?;
        // An absolute path names a folder or file on disk (only `/` alone is the global
        // context), even when its first segment is also a collection's name.
        if target.starts_with('/') {
            return disk_context_key(target, &collections, gone_ok)
                .ok_or_else(|| not_inside_any_collection(target));
        }
        let display = match target.strip_prefix("qmd://") {
            Some(rest) => Some(quarry_core::decode_uri_path(rest)?),
            None => None,
        };
        let display = display.as_deref().unwrap_or(target).trim_matches('/');
        // An explicit `collection/dir` wins over a same-named folder on disk.
        let first = display.split('/').next().unwrap_or_default();
        if collections.iter().any(|c| c.name == first) {
            if display.split('/').any(|s| s == ".." || s == ".") {
                return Err(Error::invalid(format!(
                    "context path {target:?} must not contain '.' or '..' segments"
                )));
            }
            return Ok(display.to_owned());
        }
        disk_context_key(target, &collections, gone_ok)
            .ok_or_else(|| not_inside_any_collection(target))
    }
}

fn not_inside_any_collection(target: &str) -> Error {
    Error::not_found(format!(
        "'{target}' is not inside any collection (use '/', a collection name such as 'notes/meetings', or a folder inside a collection)"
    ))
}

/// The context key of a folder or file on disk inside a collection root (the deepest root
/// wins). The path is resolved on disk when it exists; with `gone_ok`, an absolute one that
/// no longer does (a deleted folder whose context is being removed) is matched as written.
fn disk_context_key(target: &str, collections: &[Collection], gone_ok: bool) -> Option<String> {
    let abs = std::fs::canonicalize(target).ok().or_else(|| {
        let p = Path::new(target);
        let lexical =
            gone_ok && p.is_absolute() && !target.split('/').any(|s| s == ".." || s == ".");
        lexical.then(|| p.to_path_buf())
    })?;
    let (c, rel) = collections
        .iter()
        .filter_map(|c| abs.strip_prefix(&c.path).ok().map(|rel| (c, rel)))
        .max_by_key(|(c, _)| c.path.len())?;
    let rel = rel.to_string_lossy().replace('\\', "/");
    Some(if rel.is_empty() {
        c.name.clone()
    } else {
        format!("{}/{rel}", c.name)
    })
}

fn canonical_dir(path: &Path) -> Result<PathBuf> {
    let root = std::fs::canonicalize(path).map_err(|e| Error::io(path, e))?;
    if !root.is_dir() {
        return Err(Error::invalid(format!(
            "{} is not a directory",
            path.display()
        )));
    }
    std::fs::read_dir(&root).map_err(|e| Error::io(&root, e))?;
    Ok(root)
}
