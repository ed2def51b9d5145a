//! What every model shares: its [`ModelIdentity`] and the [`Embedder`] and [`Reranker`]
//! traits the local and remote models implement.

use crate::error::ModelError;

/// What produced a vector or a score. Store it next to an index: when any field changes the
/// stored vectors are not comparable with new ones.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct ModelIdentity {
    /// Human-readable model name (directory name, Hub id or remote model name).
    pub name: String,
    /// Vector length (0 for rerankers, and for remote embedders before their first response).
    pub dimensions: usize,
    /// Exact version: `sha256:<16 hex>` of the weights file for local models, the model name
    /// reported by the server for remote ones.
    pub revision: String,
}

/// Hands heap memory that inference freed back to the operating system. glibc keeps freed
/// pages in each thread's arena for reuse, so a server that embedded a large upload stayed
/// about half a gigabyte above its idle size for good; call this once a batch is done.
/// A no-op where the allocator is not glibc's.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        unsafe extern "C" {
            fn malloc_trim(pad: usize) -> std::ffi::c_int;
        }
        // SAFETY: malloc_trim takes glibc's own arena locks and only returns free pages;
        // any thread may call it at any time.
        unsafe {
            malloc_trim(0);
        }
    }
}

/// Turns texts into vectors. Implementations are thread-safe; calls may run concurrently.
pub trait Embedder: Send + Sync {
    /// Name, dimensions and revision of the model.
    fn identity(&self) -> &ModelIdentity;
    /// Embeds search queries (the model's query prefix is applied). One vector per text, in order.
    fn embed_queries(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelError>;
    /// Embeds documents / chunks (the model's passage prefix is applied). One vector per text.
    fn embed_passages(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelError>;
    /// The longest input, in tokens, the model sees; longer inputs are truncated.
    fn max_tokens(&self) -> usize;
    /// Number of tokens `text` occupies as a passage (prefix and special tokens included), for
    /// token-sized chunking. Remote embedders without a tokenizer return an estimate.
    fn count_tokens(&self, text: &str) -> Result<usize, ModelError>;
}

/// Scores how relevant passages are to a query.
pub trait Reranker: Send + Sync {
    /// Name and revision of the model (`dimensions` is 0).
    fn identity(&self) -> &ModelIdentity;
    /// One relevance score in `0..=1` per passage, in input order (higher is more relevant).
    fn score(&self, query: &str, passages: &[&str]) -> Result<Vec<f32>, ModelError>;
}

impl<T: Embedder + ?Sized> Embedder for Box<T> {
    fn identity(&self) -> &ModelIdentity {
        (**self).identity()
    }
    fn embed_queries(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelError> {
        (**self).embed_queries(texts)
    }
    fn embed_passages(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelError> {
        (**self).embed_passages(texts)
    }
    fn max_tokens(&self) -> usize {
        (**self).max_tokens()
    }
    fn count_tokens(&self, text: &str) -> Result<usize, ModelError> {
        (**self).count_tokens(text)
    }
}

impl<T: Reranker + ?Sized> Reranker for Box<T> {
    fn identity(&self) -> &ModelIdentity {
        (**self).identity()
    }
    fn score(&self, query: &str, passages: &[&str]) -> Result<Vec<f32>, ModelError> {
        (**self).score(query, passages)
    }
}
