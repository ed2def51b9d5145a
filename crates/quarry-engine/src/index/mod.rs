//! Indexes: documents cut into chunks and kept in the keyword, passage and vector indexes, models, and this process as a node on the store's feed.

pub(crate) mod chunking;
pub(crate) mod embed_rate;
pub(crate) mod indexing;
pub(crate) mod models;
pub(crate) mod node;
pub(crate) mod node_state;
pub(crate) mod semantic;
pub(crate) mod vectors;
pub(crate) mod write_lock;
