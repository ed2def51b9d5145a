//! What the cases share: the space they write in, a document and a collection to write, and
//! a derived index's model of the document change feed.

use std::collections::BTreeMap;

use quarry_core::CollectionKind;

use crate::{DocChange, FeedBatch, FeedPosition, Store};

pub(super) const SPACE: &str = "default";

pub(super) fn doc(path: &str, body: &str) -> DocChange {
    DocChange::Upsert {
        meta: Default::default(),
        path: path.into(),
        title: path.into(),
        // Distinct content, distinct hash (hex, as SHA-256 digests are).
        hash: body.bytes().map(|b| format!("{b:02x}")).collect(),
        size: body.len() as u64,
        stamp: 1,
        body: body.into(),
        pages: Vec::new(),
        furniture: Vec::new(),
    }
}

/// What a consumer's index holds: document id → body.
pub(super) type Model = BTreeMap<i64, String>;

/// Reads and acknowledges the feed until it is empty, applying each batch to `model` as a
/// derived index would; returns how many batches it took.
pub(super) fn drain(store: &dyn Store, consumer: &str, limit: usize, model: &mut Model) -> usize {
    let mut from = store.feed_position(consumer).expect("feed_position");
    let mut batches = 0;
    loop {
        let batch = read(store, from, limit);
        let done = batch.work.is_empty();
        for id in &batch.work.deletes {
            model.remove(id);
        }
        for d in batch.work.upserts {
            model.insert(d.id, d.body);
        }
        if batch.position != from {
            from = batch.position;
            store.feed_ack(consumer, from).expect("feed_ack");
        }
        if done {
            return batches;
        }
        batches += 1;
        assert!(batches < 10_000, "{consumer}: the feed never ends");
    }
}

/// Reads a batch that covers every write committed before the call: a store with several
/// writers at once hands out entries only below its oldest running transaction, which
/// another writer (another test on the same database) may hold back for a moment.
pub(super) fn read(store: &dyn Store, from: FeedPosition, limit: usize) -> FeedBatch {
    let token = store.feed_horizon().expect("feed_horizon");
    for _ in 0..1_000 {
        let batch = store.feed_read(from, limit).expect("feed_read");
        match batch.horizon {
            Some(h) if h < token && batch.work.is_empty() => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            _ => return batch,
        }
    }
    panic!("the feed's horizon never reached {token}");
}

pub(super) fn position(store: &dyn Store, consumer: &str) -> FeedPosition {
    store.feed_position(consumer).expect("feed_position")
}

/// The store's documents, as a derived index should hold them.
pub(super) fn truth(store: &dyn Store) -> Model {
    let ids: Vec<i64> = store
        .document_summaries(SPACE)
        .expect("document_summaries")
        .iter()
        .map(|d| d.id)
        .collect();
    store
        .documents_by_ids(&ids)
        .expect("documents_by_ids")
        .into_iter()
        .map(|d| (d.id, d.body))
        .collect()
}

pub(super) fn collection(store: &dyn Store, name: &str) -> i64 {
    store
        .create_collection(SPACE, name, CollectionKind::Folder, "/x", "**/*.md")
        .expect("create_collection")
        .id
}

pub(super) fn id_of(store: &dyn Store, path: &str) -> i64 {
    store
        .document_summaries(SPACE)
        .expect("document_summaries")
        .into_iter()
        .find(|d| d.path == path)
        .unwrap_or_else(|| panic!("no document {path}"))
        .id
}
