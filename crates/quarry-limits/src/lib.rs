//! Rate limits (issue 27), shared by every node through the store ([`LimitStore`]).
//!
//! - **Per token, per minute**: tool calls (every MCP endpoint's `tools/call`) and chats.
//!   The budget of a fixed one-minute window lives in the store; a node leases a slice of it
//!   (a twentieth of the limit, at least one) and spends that slice locally, so most requests
//!   cost a map lookup and only one in twenty a store write. A node that stops loses only its
//!   unspent slice of the current minute, never lets a token past its limit.
//! - **Failed authentication**, per client address and per presented token: counted in
//!   15-minute windows in the store; past the first few (`QUARRY_AUTH_FAILURES_FREE`,
//!   default 5), each refusal is answered only after a delay that doubles (250 ms, 500 ms,
//!   … at most 10 s). Successful requests never touch these counters.
//!
//! The leases are the one piece of state a process keeps between requests: they are budget
//! already taken from the store, not a registry others must see.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use quarry_core::{Result, SettingError, now_millis};
use quarry_store::LimitStore;

/// `QUARRY_RATE_TOOL_CALLS`: tool calls per token per minute (0: no limit).
pub const ENV_TOOL_CALLS: &str = "QUARRY_RATE_TOOL_CALLS";
/// `QUARRY_RATE_CHATS`: chats per token per minute (0: no limit).
pub const ENV_CHATS: &str = "QUARRY_RATE_CHATS";
/// `QUARRY_AUTH_FAILURES_FREE`: failed authentications per 15 minutes answered at once.
pub const ENV_AUTH_FREE: &str = "QUARRY_AUTH_FAILURES_FREE";
/// Model tokens per space per calendar month (0: no limit).
pub const ENV_MONTHLY_MODEL_TOKENS: &str = "QUARRY_MONTHLY_MODEL_TOKENS";

const WINDOW_MS: i64 = 60_000;
const AUTH_WINDOW_MS: i64 = 15 * 60_000;
const AUTH_FIRST_DELAY: Duration = Duration::from_millis(250);
const AUTH_MAX_DELAY: Duration = Duration::from_secs(10);
/// Leases kept before the map drops those of past windows.
const MAX_LEASES: usize = 10_000;
/// Counters of windows older than this are removed (on a lease, at most every 10 minutes).
const KEEP_COUNTERS_MS: i64 = 60 * 60_000;
const PRUNE_EVERY_MS: i64 = 10 * 60_000;

/// What is limited per token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// An MCP `tools/call`.
    ToolCall,
    /// A chat (`POST /api/v1/chat`).
    Chat,
}

impl Kind {
    fn key(self, token_id: &str) -> String {
        match self {
            Kind::ToolCall => format!("tool:{token_id}"),
            Kind::Chat => format!("chat:{token_id}"),
        }
    }
}

/// The administrator's limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitSettings {
    /// Tool calls per token per minute; 0: none.
    pub tool_calls_per_minute: u32,
    /// Chats per token per minute; 0: none.
    pub chats_per_minute: u32,
    /// Failed authentications per key and 15 minutes answered without delay.
    pub auth_failures_free: u32,
    /// Model tokens each space may spend in a calendar month (UTC), every purpose: the
    /// ceiling above any limit a space's owner sets; 0: no limit.
    pub monthly_model_tokens: u64,
}

impl Default for LimitSettings {
    fn default() -> Self {
        LimitSettings {
            tool_calls_per_minute: 600,
            chats_per_minute: 60,
            auth_failures_free: 5,
            monthly_model_tokens: 0,
        }
    }
}

impl LimitSettings {
    /// The settings from the process's variables, read through `get` (the CLI's table).
    pub fn from_lookup(
        get: impl Fn(&str) -> Option<String>,
    ) -> std::result::Result<Self, SettingError> {
        let mut s = LimitSettings::default();
        for (name, slot) in [
            (ENV_TOOL_CALLS, &mut s.tool_calls_per_minute),
            (ENV_CHATS, &mut s.chats_per_minute),
            (ENV_AUTH_FREE, &mut s.auth_failures_free),
        ] {
            if let Some(v) = get(name)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
            {
                *slot = v
                    .parse()
                    .map_err(|_| SettingError::new(name, &v, "give a whole number (0 or more)"))?;
            }
        }
        if let Some(v) = get(ENV_MONTHLY_MODEL_TOKENS)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
        {
            s.monthly_model_tokens = v.parse().map_err(|_| {
                SettingError::new(
                    ENV_MONTHLY_MODEL_TOKENS,
                    &v,
                    "give a whole number of tokens (0: no limit)",
                )
            })?;
        }
        Ok(s)
    }

    fn limit(&self, kind: Kind) -> i64 {
        i64::from(match kind {
            Kind::ToolCall => self.tool_calls_per_minute,
            Kind::Chat => self.chats_per_minute,
        })
    }
}

/// Whether a request may go ahead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Within the limit.
    Allowed,
    /// Over it: try again after this long (the rest of the window).
    Limited {
        /// Until the window ends, rounded up to a second.
        retry_after: Duration,
    },
}

struct Lease {
    window_start: i64,
    left: i64,
}

/// The process's limiter.
pub struct RateLimiter {
    store: Arc<dyn LimitStore>,
    settings: LimitSettings,
    leases: Mutex<HashMap<(Kind, String), Lease>>,
    last_prune: Mutex<i64>,
}

fn window_of(now: i64, len: i64) -> i64 {
    now - now.rem_euclid(len)
}

fn retry_after(now: i64, window_start: i64) -> Duration {
    let left_ms = (window_start + WINDOW_MS - now).max(1);
    Duration::from_secs(((left_ms + 999) / 1000) as u64)
}

impl RateLimiter {
    /// A limiter over `store`.
    pub fn new(store: Arc<dyn LimitStore>, settings: LimitSettings) -> Arc<RateLimiter> {
        Arc::new(RateLimiter {
            store,
            settings,
            leases: Mutex::new(HashMap::new()),
            last_prune: Mutex::new(0),
        })
    }

    /// The administrator's settings.
    pub fn settings(&self) -> &LimitSettings {
        &self.settings
    }

    /// The decision from this node's leased budget alone (no store call; fine on an async
    /// thread): `Some` when it is known, `None` when a lease must be taken ([`Self::take`]).
    pub fn try_local(&self, kind: Kind, token_id: &str) -> Option<Decision> {
        if self.settings.limit(kind) == 0 {
            return Some(Decision::Allowed);
        }
        let now = now_millis();
        let window = window_of(now, WINDOW_MS);
        let mut leases = self.leases.lock().unwrap_or_else(PoisonError::into_inner);
        let lease = leases.get_mut(&(kind, token_id.to_owned()))?;
        if lease.window_start != window {
            return None;
        }
        if lease.left > 0 {
            lease.left -= 1;
            return Some(Decision::Allowed);
        }
        // A spent lease: the store may still have budget this minute (another slice).
        None
    }

    /// Takes a slice of the window's budget from the store and spends one unit of it.
    /// Blocks: call it off the async runtime.
    pub fn take(&self, kind: Kind, token_id: &str) -> Result<Decision> {
        let limit = self.settings.limit(kind);
        if limit == 0 {
            return Ok(Decision::Allowed);
        }
        let now = now_millis();
        let window = window_of(now, WINDOW_MS);
        self.prune_now_and_then(now);
        let slice = (limit / 20).max(1);
        let granted = self
            .store
            .take_budget(&kind.key(token_id), window, slice, limit)?;
        let mut leases = self.leases.lock().unwrap_or_else(PoisonError::into_inner);
        if leases.len() >= MAX_LEASES {
            leases.retain(|_, l| l.window_start == window);
        }
        let lease = leases.entry((kind, token_id.to_owned())).or_insert(Lease {
            window_start: window,
            left: 0,
        });
        if lease.window_start != window {
            *lease = Lease {
                window_start: window,
                left: 0,
            };
        }
        lease.left += granted;
        if lease.left > 0 {
            lease.left -= 1;
            Ok(Decision::Allowed)
        } else {
            Ok(Decision::Limited {
                retry_after: retry_after(now, window),
            })
        }
    }

    /// [`Self::try_local`], else [`Self::take`]. Blocks when a lease is needed.
    pub fn check(&self, kind: Kind, token_id: &str) -> Result<Decision> {
        match self.try_local(kind, token_id) {
            Some(d) => Ok(d),
            None => self.take(kind, token_id),
        }
    }

    /// Counts a failed authentication under each key (a client address, a presented
    /// token's hash) and returns how long to wait before answering it. Blocks.
    pub fn auth_failure(&self, keys: &[String]) -> Result<Duration> {
        let window = window_of(now_millis(), AUTH_WINDOW_MS);
        let mut worst = 0;
        for key in keys {
            worst = worst.max(self.store.count_event(&format!("auth:{key}"), window)?);
        }
        Ok(auth_delay(
            worst,
            i64::from(self.settings.auth_failures_free),
        ))
    }

    fn prune_now_and_then(&self, now: i64) {
        {
            let mut last = self
                .last_prune
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if now - *last < PRUNE_EVERY_MS {
                return;
            }
            *last = now;
        }
        if let Err(e) = self.store.prune_limits(now - KEEP_COUNTERS_MS) {
            tracing::warn!(error = %e, "old rate-limit counters not removed");
        }
    }
}

/// The delay for the `failures`-th failure of a window: none for the first `free`, then
/// 250 ms doubling up to 10 s.
pub fn auth_delay(failures: i64, free: i64) -> Duration {
    if failures <= free {
        return Duration::ZERO;
    }
    let doublings = (failures - free - 1).min(16) as u32;
    AUTH_FIRST_DELAY
        .saturating_mul(1u32 << doublings)
        .min(AUTH_MAX_DELAY)
}

#[cfg(test)]
mod tests;
