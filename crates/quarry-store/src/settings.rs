//! The data directory's settings and the query-expansion cache ([`SettingsStore`]).

use quarry_core::Result;

/// Small key/value settings of the data directory (active model, chunking) and the
/// query-expansion cache.
pub trait SettingsStore: Send + Sync {
    /// A setting of the data directory; `None` when unset.
    fn meta(&self, key: &str) -> Result<Option<String>>;
    /// Sets a setting of the data directory.
    fn set_meta(&self, key: &str, value: &str) -> Result<()>;
    /// The cached expansions of `query` by `model`.
    fn cached_expansion(&self, model: &str, query: &str) -> Result<Option<Vec<String>>>;
    /// Caches the expansions of `query` by `model`.
    fn cache_expansion(&self, model: &str, query: &str, variants: &[String]) -> Result<()>;
}
