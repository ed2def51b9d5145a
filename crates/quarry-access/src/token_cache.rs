//! Tokens this process has resolved, each kept beside the store's access generation it was
//! read at ([`quarry_store::AccessStore::access_generation`]) and trusted only while the
//! store still reports that generation. Every change that can alter what a token resolves
//! to bumps the generation in its own transaction, and every check reads it first, so a
//! revocation made on any node bites on the next request on every node: the cache saves
//! the token's rows, never the question whether they changed.
//!
//! What still depends on the clock is decided per request from the kept rows: expiry
//! (the chain's), and when the token's `last_used_at` is written again.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, Ordering};

use quarry_core::Principal;
use quarry_store::TokenRecord;

use crate::auth_failure::AuthFailure;

/// Most tokens kept; past it, entries of older generations go first, then all of them (a
/// flood of guessed tokens costs the guessers' rows, never a wrong answer).
const MAX_ENTRIES: usize = 4096;

/// What one check asked: the token (by hash), the space it named, and whether several
/// spaces resolve to the first.
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct TokenKey {
    pub(crate) hash: String,
    pub(crate) space: Option<String>,
    pub(crate) first_space: bool,
}

/// A token that resolved: the principal, its chain (for expiry at each use) and when its
/// use was last written.
pub(crate) struct Resolved {
    pub(crate) principal: Principal,
    /// The token and the tokens that created it, nearest first.
    pub(crate) chain: Vec<TokenRecord>,
    /// Milliseconds since the epoch of the last `last_used_at` written; `i64::MIN` for never.
    touched_at: AtomicI64,
}

impl Resolved {
    pub(crate) fn new(principal: Principal, chain: Vec<TokenRecord>) -> Resolved {
        let touched_at = chain
            .first()
            .and_then(|t| t.last_used_at)
            .unwrap_or(i64::MIN);
        Resolved {
            principal,
            chain,
            touched_at: AtomicI64::new(touched_at),
        }
    }

    /// Whether this use should write `last_used_at` (at most once per `every` ms, by one
    /// of the requests racing for it).
    pub(crate) fn claim_touch(&self, now: i64, every: i64) -> bool {
        let last = self.touched_at.load(Ordering::Relaxed);
        (last == i64::MIN || now.saturating_sub(last) >= every)
            && self
                .touched_at
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }
}

/// What a token resolved to at one generation.
pub(crate) type Outcome = Result<Resolved, AuthFailure>;

/// The tokens this process resolved (see the module's docs).
#[derive(Default)]
pub(crate) struct TokenCache {
    entries: Mutex<HashMap<TokenKey, (i64, Arc<Outcome>)>>,
}

impl TokenCache {
    /// The outcome kept for `key` at `generation`, if any.
    pub(crate) fn get(&self, key: &TokenKey, generation: i64) -> Option<Arc<Outcome>> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries
            .get(key)
            .filter(|(at, _)| *at == generation)
            .map(|(_, outcome)| outcome.clone())
    }

    /// Keeps `outcome` for `key`, read at `generation` (read before the rows were).
    pub(crate) fn put(&self, key: TokenKey, generation: i64, outcome: Arc<Outcome>) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if entries.len() >= MAX_ENTRIES && !entries.contains_key(&key) {
            entries.retain(|_, (at, _)| *at >= generation);
            if entries.len() >= MAX_ENTRIES {
                entries.clear();
            }
        }
        entries.insert(key, (generation, outcome));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: usize) -> TokenKey {
        TokenKey {
            hash: format!("{n:064x}"),
            space: None,
            first_space: false,
        }
    }

    #[test]
    fn an_entry_answers_only_at_its_generation() {
        let cache = TokenCache::default();
        cache.put(key(1), 7, Arc::new(Err(AuthFailure::Invalid)));
        assert!(cache.get(&key(1), 7).is_some());
        assert!(cache.get(&key(1), 8).is_none());
        assert!(cache.get(&key(2), 7).is_none());
    }

    #[test]
    fn a_full_cache_drops_older_generations_first_and_stays_bounded() {
        let cache = TokenCache::default();
        for n in 0..MAX_ENTRIES {
            cache.put(key(n), 1, Arc::new(Err(AuthFailure::Invalid)));
        }
        cache.put(key(MAX_ENTRIES), 2, Arc::new(Err(AuthFailure::Invalid)));
        assert!(cache.get(&key(MAX_ENTRIES), 2).is_some());
        assert!(cache.get(&key(0), 1).is_none());
        for n in 0..2 * MAX_ENTRIES {
            cache.put(key(n), 3, Arc::new(Err(AuthFailure::Invalid)));
        }
        let len = cache.entries.lock().unwrap().len();
        assert!(len <= MAX_ENTRIES, "{len}");
    }

    #[test]
    fn one_of_racing_uses_writes_last_used() {
        let r = Resolved::new(
            Principal::owner("s", "u"),
            vec![], // no token row: never used
        );
        assert!(r.claim_touch(1_000, 60_000));
        assert!(!r.claim_touch(2_000, 60_000));
        assert!(r.claim_touch(61_000, 60_000));
    }
}
