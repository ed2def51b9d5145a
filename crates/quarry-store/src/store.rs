//! [`Store`]: every part of the system of record together.

use crate::{
    AccessStore, AuditStore, ChatStore, CollectionStore, EntryStore, FeedStore, HubStore,
    InsightStore, JobQueue, KnowledgeStore, LimitStore, OAuthStore, PolicyStore, SemanticStore,
    SessionStore, SettingsStore, SignInStore, SourceStore,
};

/// Storage of Quarry's metadata and documents for one data directory.
///
/// Every method is scoped to a space; names are unique within a space. Implementations
/// must be safe to share between threads and must tolerate other processes reading while
/// one writes.
///
/// `Store` is every part together, for the engine and the server that use them all; each
/// service takes only the part it uses (the hub a [`HubStore`], the directory an
/// [`AccessStore`], …). Any type that implements every part is a `Store`.
pub trait Store:
    CollectionStore
    + FeedStore
    + SessionStore
    + SemanticStore
    + SettingsStore
    + KnowledgeStore
    + EntryStore
    + JobQueue
    + AccessStore
    + AuditStore
    + InsightStore
    + LimitStore
    + OAuthStore
    + HubStore
    + ChatStore
    + SourceStore
    + PolicyStore
    + SignInStore
    + Send
    + Sync
{
}

impl<T> Store for T
where
    T: CollectionStore,
    T: FeedStore,
    T: EntryStore,
    T: SessionStore,
    T: SemanticStore,
    T: SettingsStore,
    T: KnowledgeStore,
    T: JobQueue,
    T: AccessStore,
    T: AuditStore,
    T: InsightStore,
    T: LimitStore,
    T: PolicyStore,
    T: OAuthStore,
    T: HubStore,
    T: ChatStore,
    T: SourceStore,
    T: SignInStore,
    T: Send + Sync,
{
}
