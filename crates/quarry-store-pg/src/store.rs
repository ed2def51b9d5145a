//! Documents, collections, the change feed, chunks and vectors on PostgreSQL.
#![allow(unused_variables)] // the methods still `pending` ignore their arguments

use super::*;

impl Store for PgStore {
    fn create_collection(
        &self,
        space: &str,
        name: &str,
        kind: CollectionKind,
        path: &str,
        pattern: &str,
    ) -> Result<Collection> {
        Err(pending("create_collection"))
    }

    fn collections(&self, space: &str) -> Result<Vec<Collection>> {
        Err(pending("collections"))
    }

    fn collection(&self, space: &str, name: &str) -> Result<Option<Collection>> {
        Err(pending("collection"))
    }

    fn rename_collection(&self, space: &str, old: &str, new: &str) -> Result<()> {
        Err(pending("rename_collection"))
    }

    fn remove_collection(&self, space: &str, name: &str) -> Result<u64> {
        Err(pending("remove_collection"))
    }

    fn mark_collection_scanned(&self, collection_id: i64, at_ms: i64) -> Result<()> {
        Err(pending("mark_collection_scanned"))
    }

    fn file_states(&self, collection_id: i64) -> Result<HashMap<String, FileState>> {
        Err(pending("file_states"))
    }

    fn apply_changes(&self, collection_id: i64, changes: Vec<DocChange>) -> Result<IndexWork> {
        Err(pending("apply_changes"))
    }

    fn feed_position(&self, consumer: &str) -> Result<FeedPosition> {
        Err(pending("feed_position"))
    }

    fn feed_read(&self, from: FeedPosition, limit: usize) -> Result<FeedBatch> {
        Err(pending("feed_read"))
    }

    fn feed_ack(&self, consumer: &str, position: FeedPosition) -> Result<()> {
        Err(pending("feed_ack"))
    }

    fn feed_rebuild(&self, consumer: &str, meta: Option<(&str, &str)>) -> Result<()> {
        Err(pending("feed_rebuild"))
    }

    fn feed_forget(&self, consumer: &str) -> Result<()> {
        Err(pending("feed_forget"))
    }

    fn documents_by_ids(&self, ids: &[i64]) -> Result<Vec<Document>> {
        Err(pending("documents_by_ids"))
    }

    fn document_by_path(
        &self,
        space: &str,
        collection: &str,
        path: &str,
    ) -> Result<Option<Document>> {
        Err(pending("document_by_path"))
    }

    fn document_by_docid(&self, space: &str, docid: &str) -> Result<Option<Document>> {
        Err(pending("document_by_docid"))
    }

    fn document_summaries(&self, space: &str) -> Result<Vec<DocSummary>> {
        Err(pending("document_summaries"))
    }

    fn document_count(&self, space: &str) -> Result<u64> {
        Err(pending("document_count"))
    }

    fn chunk_sources(&self, document_ids: &[i64]) -> Result<Vec<ChunkSource>> {
        Err(pending("chunk_sources"))
    }

    fn reset_all_chunks(&self) -> Result<()> {
        Err(pending("reset_all_chunks"))
    }

    fn replace_chunks(&self, docs: &[DocChunks]) -> Result<()> {
        Err(pending("replace_chunks"))
    }

    fn embed_jobs(
        &self,
        space: &str,
        collection_id: Option<i64>,
        model: &str,
        limit: Option<usize>,
    ) -> Result<Vec<EmbedJob>> {
        Err(pending("embed_jobs"))
    }

    fn put_embeddings(&self, model: &str, vectors: &[(String, Vec<f32>)]) -> Result<()> {
        Err(pending("put_embeddings"))
    }

    fn delete_embeddings(
        &self,
        space: &str,
        collection_id: Option<i64>,
        model: &str,
    ) -> Result<u64> {
        Err(pending("delete_embeddings"))
    }

    fn ann_tombstones(&self) -> Result<Vec<i64>> {
        Err(pending("ann_tombstones"))
    }

    fn ann_dirty_chunks(
        &self,
        model: &str,
        after: i64,
        limit: usize,
    ) -> Result<Vec<(i64, Vec<f32>)>> {
        Err(pending("ann_dirty_chunks"))
    }

    fn ann_done(&self, removed: &[i64], added: &[i64]) -> Result<()> {
        Err(pending("ann_done"))
    }

    fn ann_reset(&self) -> Result<()> {
        Err(pending("ann_reset"))
    }

    fn chunk_refs(&self, ids: &[i64]) -> Result<Vec<ChunkRef>> {
        Err(pending("chunk_refs"))
    }

    fn chunks_of_documents(&self, document_ids: &[i64]) -> Result<Vec<ChunkRef>> {
        Err(pending("chunks_of_documents"))
    }

    fn chunk_ids_in_collection(&self, collection_id: i64) -> Result<Vec<i64>> {
        Err(pending("chunk_ids_in_collection"))
    }

    fn embedding_state(
        &self,
        space: &str,
        collections: Option<&[i64]>,
        model: Option<&str>,
    ) -> Result<EmbeddingState> {
        Err(pending("embedding_state"))
    }

    fn collections_outside(&self, space: &str) -> Result<bool> {
        Err(pending("collections_outside"))
    }

    fn collection_space(&self, collection_id: i64) -> Result<Option<String>> {
        Err(pending("collection_space"))
    }

    fn meta(&self, key: &str) -> Result<Option<String>> {
        Err(pending("meta"))
    }

    fn set_meta(&self, key: &str, value: &str) -> Result<()> {
        Err(pending("set_meta"))
    }

    fn cached_expansion(&self, model: &str, query: &str) -> Result<Option<Vec<String>>> {
        Err(pending("cached_expansion"))
    }

    fn cache_expansion(&self, model: &str, query: &str, variants: &[String]) -> Result<()> {
        Err(pending("cache_expansion"))
    }

    fn set_context(&self, space: &str, path: &str, text: &str) -> Result<()> {
        Err(pending("set_context"))
    }

    fn contexts(&self, space: &str) -> Result<Vec<Context>> {
        Err(pending("contexts"))
    }

    fn remove_context(&self, space: &str, path: &str) -> Result<bool> {
        Err(pending("remove_context"))
    }
}
