//! What the audit log keeps of a source: a sync's report without a path's contents, a
//! location or error without its credentials, and the syncs the node's scheduler runs
//! (recorded straight into the log, with no request or state around them).

use quarry_audit::{ERROR, OK};
use serde_json::{Value, json};

/// What the audit log keeps of a sync: its report's id, status, revision and counts, and why
/// it failed — never a path's contents.
pub(crate) fn sync_detail(r: &quarry_engine::SyncReport) -> Value {
    json!({
        "report": r.id,
        "status": r.status,
        "revision": r.revision,
        "counts": r.counts,
        "error": r.error.as_deref().map(without_credentials),
    })
}

/// A sync the node's scheduler ran (`quarry_queue::SourceSyncHook`): recorded in the
/// source's space, with no user (the node ran it), as `source.sync` with the source's id.
/// Blocks (store lookups): called on the scheduler's thread.
pub(crate) fn scheduled_sync(
    log: &quarry_audit::AuditLog,
    store: &dyn quarry_store::Store,
    directory: &quarry_access::Directory,
    source_id: &str,
    outcome: Result<&quarry_engine::SyncReport, &quarry_core::Error>,
) {
    // Detached since: nothing of it is left to name.
    let Ok(Some(row)) = store.source(source_id) else {
        return;
    };
    let space_id = store
        .collection_space(row.collection_id)
        .ok()
        .flatten()
        .and_then(|key| directory.space(&key).ok())
        .map(|s| s.id);
    // A failed sync's report is the store's newest.
    let latest = match outcome {
        Ok(_) => None,
        Err(_) => store
            .sync_reports(row.row_id, 1)
            .ok()
            .and_then(|r| r.into_iter().next()),
    };
    let report = outcome.ok().or(latest.as_ref());
    let mut e = quarry_audit::event(
        None,
        quarry_audit::SOURCE_SYNC,
        source_id,
        if outcome.is_ok() { OK } else { ERROR },
    );
    e.space_id = space_id;
    e.duration_ms = report.and_then(|r| Some(r.finished_at? - r.started_at));
    e.detail = json!({
        "source": source_id,
        "knowledge_base": row.knowledge_base,
        "scheduled": true,
        "sync": report.map(sync_detail),
        "error": outcome.err().map(|e| without_credentials(&e.to_string())),
    })
    .to_string();
    log.record(e);
}

/// `text` with the user information of every URL in it cut (`https://user:secret@host/…` →
/// `https://host/…`) and query strings dropped (`?private_token=…`): what the audit log may
/// keep of a location or an error that quotes one.
pub(crate) fn without_credentials(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        let (before, after) = rest.split_at(i + 3);
        out.push_str(before);
        // The authority ends at the first '/', '?', '#' or blank.
        let end = after
            .find(|c: char| matches!(c, '/' | '?' | '#') || c.is_whitespace())
            .unwrap_or(after.len());
        let authority = &after[..end];
        out.push_str(
            authority
                .rsplit_once('@')
                .map_or(authority, |(_, host)| host),
        );
        let tail = &after[end..];
        // The path, without its query or fragment.
        let path_end = tail
            .find(|c: char| c.is_whitespace() || c == '"' || c == '\'')
            .unwrap_or(tail.len());
        let path = &tail[..path_end];
        out.push_str(path.split(['?', '#']).next().unwrap_or(""));
        rest = &tail[path_end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::without_credentials;

    #[test]
    fn urls_lose_their_credentials() {
        assert_eq!(
            without_credentials("https://user:s3cret@git.example.com/team/repo.git#main:docs"),
            "https://git.example.com/team/repo.git"
        );
        assert_eq!(
            without_credentials("fetch https://tok@h.example/r.git?private_token=abc failed: 403"),
            "fetch https://h.example/r.git failed: 403"
        );
        assert_eq!(
            without_credentials("'http://a:b@127.0.0.1:9/x' unreachable; no @ here"),
            "'http://127.0.0.1:9/x' unreachable; no @ here"
        );
        assert_eq!(without_credentials("/srv/docs"), "/srv/docs");
        assert_eq!(without_credentials("https://h/"), "https://h/");
    }
}
