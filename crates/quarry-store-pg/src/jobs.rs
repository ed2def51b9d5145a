//! [`quarry_store::JobQueue`] on PostgreSQL.
#![allow(unused_variables)] // the methods still `pending` ignore their arguments

use super::*;

impl JobQueue for PgStore {
    fn claim_job(&self, owner: &str, lease_ms: i64) -> Result<Option<Job>> {
        Err(pending("claim_job"))
    }

    fn renew_job(&self, lease: Lease, lease_ms: i64) -> Result<bool> {
        Err(pending("renew_job"))
    }

    fn complete_job(&self, lease: Lease) -> Result<bool> {
        Err(pending("complete_job"))
    }

    fn fail_job(&self, lease: Lease, error: &str, retry_after_ms: Option<i64>) -> Result<bool> {
        Err(pending("fail_job"))
    }

    fn lease_owners(&self) -> Result<Vec<String>> {
        Err(pending("lease_owners"))
    }

    fn expire_leases(&self, owners: &[String]) -> Result<u64> {
        Err(pending("expire_leases"))
    }

    fn enqueue_cleanup(&self) -> Result<()> {
        Err(pending("enqueue_cleanup"))
    }

    fn enqueue_embed(&self, collection_id: i64) -> Result<()> {
        Err(pending("enqueue_embed"))
    }

    fn queue_counts(&self, collections: Option<&[i64]>) -> Result<QueueCounts> {
        Err(pending("queue_counts"))
    }
}
