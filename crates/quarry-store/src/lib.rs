//! Quarry's system of record: collections, documents, contexts, chunks and embeddings — behind
//! the [`Store`] trait.
//!
//! This crate holds the traits and row types only, no database driver: the embedded backend
//! is `quarry-store-sqlite` (one file, WAL mode), and other backends implement the same
//! traits. Derived indexes (BM25, vectors) are rebuilt from what the store
//! holds: every document change is committed here together with an entry in the document
//! change feed, and each derived index acknowledges its position in the feed only after it
//! has committed too. A process killed at any moment therefore leaves entries that the next
//! run reads with [`FeedStore::feed_read`] and applies — nothing is lost, and applying an entry
//! twice is harmless (an upsert replaces, a delete of a missing document does nothing).

mod access;
mod audit;
mod chat;
#[cfg(feature = "conformance")]
pub mod conformance;
pub mod copy;
mod documents;
mod entries;
pub mod entry_rules;
mod entry_version;
mod feed;
mod hub;
mod insight;
mod knowledge;
mod limits;
mod oauth;
mod policies;
mod semantic;
mod sessions;
mod settings;
mod sign_ins;
mod sources;
mod store;
pub mod thread_guard;

pub use access::{
    AccessStore, Group, Membership, NewToken, Role, Space, TokenGrant, TokenRecord, User,
};
pub use audit::{AuditEvent, AuditQuery, AuditRecord, AuditStore};
pub use chat::{ChatMessageRow, ChatStore, ConversationRow, ConversationSummary};
pub use documents::{
    CollectionStore, DocChange, DocFields, DocSummary, FileState, IndexDoc, IndexWork,
};
pub use entries::{
    AddedEntry, EntryColumns, EntryStore, HistoryEvent, NewEntry, PageSource, superseded_name,
    window_end,
};
pub use entry_version::EntryVersion;
pub use feed::{
    ChangeListener, ChangeNotifier, ChangeWaiter, Channel, FeedBatch, FeedPosition, FeedStore,
    PollingListener,
};
pub use hub::{
    CustomToolRow, HubStore, PackageRow, ToolEndpointRow, ToolRow, UpstreamRow, first_by_owner,
};
pub use insight::{
    DAY_MS, InsightStore, InsightWindow, SearchRecord, UnansweredGroup, UsageCount, UsageKey,
    merge_usage,
};
pub use knowledge::{
    AddedFile, ClaimedChunks, ConvertedFile, FileFilter, FileStatus, Job, JobKind, JobQueue,
    KbFile, KnowledgeBase, KnowledgeStore, Lease, NewKbFile, NoteMeta, QueueCounts, RestrictedFile,
    SAME_BYTES_SAME_READERS, StatusCounts, StatusFilter, metadata_from_column, owner_node,
    readers_from_column, readers_to_column,
};
pub use limits::LimitStore;
pub use oauth::{
    OAuthClientRow, OAuthGrantRow, OAuthSecretKind, OAuthSecretRow, OAuthStore, Redeemed,
};
pub use policies::{ApprovalDecision, ApprovalRow, PolicyRow, PolicyStore, approval_status};
pub use semantic::{
    ChunkEdit, ChunkRef, ChunkSource, DocChunks, EF_REFERENCE_VECTORS, EMBEDDED_BATCHES_KEPT_MS,
    EmbedJob, EmbeddedBatch, EmbeddingState, IndexCensus, NewChunk, RecentEmbedding, SemanticStore,
    VectorSearch, byte_span, ef_for_size,
};
pub use sessions::{MCP_SESSION_KEPT_MS, SessionStore};
pub use settings::SettingsStore;
pub use sign_ins::{LinkedIdentity, SIGN_IN_REQUEST_MS, SignInRequest, SignInStore, WebSession};
pub use sources::{
    NewSource, RestrictedCounts, SYNC_INTERRUPTED, SourceChange, SourceFile, SourceLease,
    SourceRow, SourceStore, SyncCounts, SyncLine, SyncReport,
};
pub use store::Store;

/// Every store trait, for code that calls a backend's methods on its concrete type (tests,
/// tools): `use quarry_store::prelude::*;`.
pub mod prelude {
    pub use crate::{
        AccessStore, AuditStore, ChangeNotifier, ChatStore, CollectionStore, EntryStore, FeedStore,
        HubStore, InsightStore, JobQueue, KnowledgeStore, LimitStore, OAuthStore, PolicyStore,
        SemanticStore, SessionStore, SettingsStore, SignInStore, SourceStore, Store, VectorSearch,
    };
}
