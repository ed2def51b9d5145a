//! Per-document readers (issue 43): what a caller may not read among the collections it
//! may use, applied before anything is ranked, counted or suggested.
//!
//! A knowledge-base file may name its readers (an upload's `readers`, a source's mapping):
//! reader keys `user:<name>` and `group:<name>`; no list means every reader of the knowledge
//! base, an empty list only its admins. A caller whose [`Scope::readers`] is `None` (the
//! space's admins and owners, the machine's owner) reads everything; anyone else has the
//! files that name none of its keys *hidden*: their documents are taken out of every
//! candidate list before scores are computed (so a score never moves because of one), out
//! of every count, listing, lookup and suggestion, and a lookup of one answers exactly as
//! for a document that does not exist.
//!
//! [`Scope::readers`]: quarry_core::Scope::readers

use std::collections::HashSet;
use std::sync::Arc;

use quarry_core::{Error, Result};
use quarry_store::{FileStatus, KbFile, KnowledgeBase, RestrictedFile};

use crate::Engine;

/// Longest reader key accepted (`user:` or `group:` and a name).
const MAX_READER_KEY: usize = 200;
/// Most reader keys on one document.
pub const MAX_READERS: usize = 100;

/// What one caller may not read in some collections.
#[derive(Debug, Default)]
pub(crate) struct Hidden {
    /// Searchable documents of hidden files (as the keyword indexes key them).
    pub documents: Arc<HashSet<u64>>,
    /// The hidden files themselves.
    pub files: Vec<RestrictedFile>,
}

impl Hidden {
    /// Whether the document `id` is hidden.
    pub(crate) fn hides(&self, document_id: i64) -> bool {
        u64::try_from(document_id).is_ok_and(|id| self.documents.contains(&id))
    }

    /// Row ids of the hidden files.
    pub(crate) fn file_rows(&self) -> Vec<i64> {
        self.files.iter().map(|f| f.row_id).collect()
    }
}

/// The hidden documents of a request, if any (`None`: the caller reads everything it
/// reaches). Shared by the keyword and vector halves of one search.
pub(crate) type HiddenSet = Option<Arc<Hidden>>;

/// Checks reader keys given by a person (an upload, a mapping rule): `user:<name>` or
/// `group:<name>`, names of letters, digits and `-_.@`; duplicates dropped, order kept.
pub fn parse_reader_keys<S: AsRef<str>>(keys: &[S]) -> Result<Vec<String>> {
    if keys.len() > MAX_READERS {
        return Err(Error::invalid(format!(
            "at most {MAX_READERS} readers per document (got {})",
            keys.len()
        )));
    }
    let mut out: Vec<String> = Vec::with_capacity(keys.len());
    for key in keys {
        let key = key.as_ref().trim();
        let name = key
            .strip_prefix("user:")
            .or_else(|| key.strip_prefix("group:"));
        let ok = key.len() <= MAX_READER_KEY
            && name.is_some_and(|n| {
                !n.is_empty()
                    && n.chars()
                        .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.' | '@'))
            });
        if !ok {
            return Err(Error::invalid(format!(
                "reader {key:?} is not a reader key: use user:<name> or group:<name>"
            )));
        }
        if !out.iter().any(|k| k == key) {
            out.push(key.to_owned());
        }
    }
    Ok(out)
}

impl Engine {
    /// Whether this handle may read `file` (its collection already in reach).
    pub(crate) fn may_read_file(&self, file: &KbFile) -> bool {
        self.scope().may_read(file.readers.as_deref())
    }

    /// What this handle may not read in `collections` (every collection it may use when
    /// `None`); `None` when it reads all of it.
    pub(crate) fn hidden_in(&self, collections: Option<&[i64]>) -> Result<HiddenSet> {
        if self.scope().readers.is_none() {
            return Ok(None);
        }
        let ids: Vec<i64> = match collections {
            Some(ids) => ids.to_vec(),
            None => self.collections()?.iter().map(|c| c.id).collect(),
        };
        let files: Vec<RestrictedFile> = self
            .store()
            .restricted_files(&ids)?
            .into_iter()
            .filter(|f| !self.scope().may_read(Some(&f.readers)))
            .collect();
        if files.is_empty() {
            return Ok(None);
        }
        let documents = files
            .iter()
            .filter_map(|f| f.document_id)
            .filter_map(|id| u64::try_from(id).ok())
            .collect();
        Ok(Some(Arc::new(Hidden {
            documents: Arc::new(documents),
            files,
        })))
    }

    /// The documents a search by this handle must leave out, in the scope its scores are
    /// computed against (the ranking scope of a narrowed search, see
    /// [`Engine::rank_among`]): those hidden from the caller, and the knowledge entries not
    /// valid at its moment ([`Engine::at`]: superseded, expired, not yet valid). Either kind
    /// neither comes back nor moves a score. Read once per request on a request's handle
    /// ([`Engine::for_one_request`]).
    pub(crate) fn hidden_for_search(&self) -> Result<Option<Arc<HashSet<u64>>>> {
        crate::engine::read_once(self.request.as_deref().map(|r| &r.hidden), || {
            self.read_hidden_for_search()
        })
    }

    fn read_hidden_for_search(&self) -> Result<Option<Arc<HashSet<u64>>>> {
        let ranking = match &self.ranking_scope {
            Some(scope) => self.scoped((**scope).clone()).at(self.as_of),
            None => self.clone(),
        };
        let hidden = ranking.hidden_in(None)?.map(|h| h.documents.clone());
        // One indexed query per search, whatever the size of the collections.
        let out_of_time = ranking.out_of_time(None)?;
        if out_of_time.is_empty() {
            return Ok(hidden);
        }
        let mut documents: HashSet<u64> = hidden.map(|h| (*h).clone()).unwrap_or_default();
        documents.extend(
            out_of_time
                .into_iter()
                .filter_map(|d| u64::try_from(d).ok()),
        );
        Ok(Some(Arc::new(documents)))
    }

    /// The chunks of the documents a search must leave out (see
    /// [`Engine::hidden_for_search`]); empty when none.
    pub(crate) fn hidden_chunks(&self) -> Result<HashSet<u64>> {
        let Some(hidden) = self.hidden_for_search()? else {
            return Ok(HashSet::new());
        };
        let ids: Vec<i64> = hidden.iter().map(|&id| id as i64).collect();
        Ok(self
            .store()
            .chunks_of_documents(&ids)?
            .into_iter()
            .filter_map(|c| u64::try_from(c.id).ok())
            .collect())
    }

    /// The collections' document counts as this handle sees them (hidden documents left
    /// out).
    pub(crate) fn uncount_hidden(&self, collections: &mut [quarry_core::Collection]) -> Result<()> {
        let ids: Vec<i64> = collections.iter().map(|c| c.id).collect();
        let Some(hidden) = self.hidden_in(Some(&ids))? else {
            return Ok(());
        };
        for f in hidden.files.iter().filter(|f| f.document_id.is_some()) {
            if let Some(c) = collections.iter_mut().find(|c| c.id == f.collection_id) {
                c.documents = c.documents.saturating_sub(1);
            }
        }
        Ok(())
    }

    /// An embedding backlog as this handle sees it: the chunks and documents of files hidden
    /// from it left out (issue 65 item 6: `/api/v1/queue` and `status` counted them).
    pub(crate) fn uncount_hidden_embedding(
        &self,
        state: &mut quarry_store::EmbeddingState,
        model: Option<&str>,
    ) -> Result<()> {
        let Some(hidden) = self.hidden_in(None)? else {
            return Ok(());
        };
        let documents: Vec<i64> = hidden.files.iter().filter_map(|f| f.document_id).collect();
        if documents.is_empty() {
            return Ok(());
        }
        let theirs = self.store().documents_embedding_state(&documents, model)?;
        state.documents_pending = state
            .documents_pending
            .saturating_sub(theirs.documents_pending);
        state.chunks = state.chunks.saturating_sub(theirs.chunks);
        state.chunks_pending = state.chunks_pending.saturating_sub(theirs.chunks_pending);
        Ok(())
    }

    /// A knowledge base's counts as this handle sees them: hidden files left out.
    pub(crate) fn counted_for_caller(&self, mut kb: KnowledgeBase) -> Result<KnowledgeBase> {
        let Some(hidden) = self.hidden_in(Some(&[kb.collection_id]))? else {
            return Ok(kb);
        };
        for f in &hidden.files {
            kb.document_count = kb.document_count.saturating_sub(1);
            kb.total_bytes = kb.total_bytes.saturating_sub(f.size);
            let counts = &mut kb.status_counts;
            let slot = match f.status {
                FileStatus::Pending => &mut counts.pending,
                FileStatus::Failed => &mut counts.failed,
                FileStatus::Ready => &mut counts.ready,
                _ => &mut counts.processing,
            };
            *slot = slot.saturating_sub(1);
        }
        Ok(kb)
    }
}

#[cfg(test)]
mod tests {
    use super::parse_reader_keys;

    #[test]
    fn reader_keys_are_checked_and_deduplicated() {
        assert_eq!(
            parse_reader_keys(&["group:hr", " user:ann@example.com ", "group:hr"]).unwrap(),
            ["group:hr", "user:ann@example.com"]
        );
        assert!(parse_reader_keys::<&str>(&[]).unwrap().is_empty());
        for bad in [
            "hr",
            "group:",
            "role:admin",
            "user:a b",
            "user:a/b",
            "group:*",
        ] {
            assert!(parse_reader_keys(&[bad]).is_err(), "{bad}");
        }
        let many: Vec<String> = (0..101).map(|i| format!("user:u{i}")).collect();
        assert!(parse_reader_keys(&many).is_err());
    }
}
