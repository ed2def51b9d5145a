//! [`quarry_store::KnowledgeStore`] on PostgreSQL.
#![allow(unused_variables)] // the methods still `pending` ignore their arguments

use super::*;

impl KnowledgeStore for PgStore {
    fn create_knowledge_base(
        &self,
        space: &str,
        name: &str,
        description: &str,
        chunking: Option<(u32, u32)>,
    ) -> Result<KnowledgeBase> {
        Err(pending("create_knowledge_base"))
    }

    fn knowledge_bases(&self, space: &str) -> Result<Vec<KnowledgeBase>> {
        Err(pending("knowledge_bases"))
    }

    fn knowledge_base(&self, space: &str, key: &str) -> Result<Option<KnowledgeBase>> {
        Err(pending("knowledge_base"))
    }

    fn update_knowledge_base(
        &self,
        space: &str,
        key: &str,
        name: Option<&str>,
        description: Option<&str>,
    ) -> Result<KnowledgeBase> {
        Err(pending("update_knowledge_base"))
    }

    fn add_files(&self, collection_id: i64, files: &[NewKbFile]) -> Result<Vec<AddedFile>> {
        Err(pending("add_files"))
    }

    fn kb_files(&self, collection_id: i64, filter: &FileFilter) -> Result<Vec<KbFile>> {
        Err(pending("kb_files"))
    }

    fn kb_file(&self, collection_id: i64, key: &str) -> Result<Option<KbFile>> {
        Err(pending("kb_file"))
    }

    fn kb_file_by_row(&self, row_id: i64) -> Result<Option<KbFile>> {
        Err(pending("kb_file_by_row"))
    }

    fn kb_file_ids(&self, document_ids: &[i64]) -> Result<HashMap<i64, String>> {
        Err(pending("kb_file_ids"))
    }

    fn delete_kb_file(&self, collection_id: i64, row_id: i64) -> Result<()> {
        Err(pending("delete_kb_file"))
    }

    fn update_note(
        &self,
        collection_id: i64,
        row_id: i64,
        content: Option<(&str, u64)>,
        title: Option<Option<&str>>,
        tags: Option<&[String]>,
    ) -> Result<KbFile> {
        Err(pending("update_note"))
    }

    fn add_file_warning(&self, lease: Lease, row_id: i64, warning: &str) -> Result<()> {
        Err(pending("add_file_warning"))
    }

    fn annotate_note(
        &self,
        lease: Lease,
        row_id: i64,
        title: Option<&str>,
        tags: &[String],
        summary: Option<&str>,
    ) -> Result<()> {
        Err(pending("annotate_note"))
    }

    fn retry_kb_file(&self, collection_id: i64, row_id: i64) -> Result<KbFile> {
        Err(pending("retry_kb_file"))
    }

    fn mark_embedded(&self, collection_id: i64, model: &str) -> Result<u64> {
        Err(pending("mark_embedded"))
    }

    fn set_file_status(
        &self,
        lease: Option<Lease>,
        row_id: i64,
        status: FileStatus,
        error: Option<&str>,
    ) -> Result<bool> {
        Err(pending("set_file_status"))
    }

    fn file_converted(
        &self,
        lease: Option<Lease>,
        row_id: i64,
        converted: ConvertedFile,
    ) -> Result<Option<IndexWork>> {
        Err(pending("file_converted"))
    }

    fn blob_visible(
        &self,
        space: &str,
        collections: Option<&[i64]>,
        sha256: &str,
    ) -> Result<Option<(u64, String)>> {
        Err(pending("blob_visible"))
    }

    fn orphan_blobs(&self, limit: usize) -> Result<Vec<String>> {
        Err(pending("orphan_blobs"))
    }

    fn blob_known(&self, sha256: &str) -> Result<bool> {
        Err(pending("blob_known"))
    }

    fn forget_blobs(&self, hashes: &[String]) -> Result<()> {
        Err(pending("forget_blobs"))
    }

    fn idempotent_answer(
        &self,
        scope: &str,
        key: &str,
        since: i64,
    ) -> Result<Option<(String, String)>> {
        Err(pending("idempotent_answer"))
    }

    fn record_idempotent_answer(
        &self,
        scope: &str,
        key: &str,
        request: &str,
        response: &str,
        now: i64,
        since: i64,
    ) -> Result<(String, String)> {
        Err(pending("record_idempotent_answer"))
    }
}
