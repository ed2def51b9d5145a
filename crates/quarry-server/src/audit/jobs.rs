//! What the node's queue jobs ask of remote models (embedding what was uploaded or
//! synced), booked to the space of the job's knowledge base: no request, person or token is
//! around them (`quarry_queue::ModelUseHook`).

/// What a queue job (embedding an upload's or a sync's chunks) asked of remote models,
/// into `/metrics` and, counted for the space of the job's knowledge base, the usage counts.
pub(crate) fn background_model_use(
    log: Option<&quarry_audit::AuditLog>,
    store: &dyn quarry_store::Store,
    directory: &quarry_access::Directory,
    job: &quarry_engine::Job,
    used: &[(quarry_engine::ModelPurpose, quarry_engine::ModelCount)],
) {
    for (purpose, c) in used {
        crate::telemetry::record_model_tokens(purpose.as_str(), c.tokens);
    }
    let Some(log) = log else { return };
    let collection = match (job.collection_id, job.file_id) {
        (Some(c), _) => Some(c),
        (None, Some(file)) => store
            .kb_file_by_row(file)
            .ok()
            .flatten()
            .map(|f| f.collection_id),
        (None, None) => None,
    };
    // A knowledge base removed meanwhile: nothing is left to count it for.
    let Some(space_id) = collection
        .and_then(|c| store.collection_space(c).ok().flatten())
        .and_then(|key| directory.space(&key).ok())
        .map(|s| s.id)
    else {
        return;
    };
    for (purpose, c) in used {
        log.record_space_model_use(&space_id, purpose.as_str(), c.requests, c.tokens);
    }
}
