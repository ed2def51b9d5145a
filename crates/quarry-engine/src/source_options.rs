//! How this process runs the syncs of sources (issue 43, `sources.rs`): how long its claim
//! on a source lasts and how it keeps it, and where a sync's requests may go.
//!
//! - **The lease.** A sync holds its source under a lease on the store's clock
//!   ([`SourceOptions::lease`], `QUARRY_SOURCE_LEASE_SECS`). A heartbeat thread renews it
//!   every quarter of its length while the sync runs — however long one request to the
//!   source takes — so a claim lapses only when its process stops (killed, frozen, cut off
//!   from the database); another node's scheduler then resumes the sync (the store lists an
//!   interrupted sync as due), planning against what the store knows, so what the first node
//!   applied counts as known. Every change is fenced by the lease: a node that lost it
//!   writes nothing more.
//! - **Where requests go.** The machine's owner (the CLI, a loopback server without
//!   `--auth`) reaches any address. Anyone else — a token-holding admin attaching or syncing
//!   a source over REST, and a server's scheduled syncs when it runs with access tokens (the
//!   source may have been attached by such a user) — goes through the outbound address guard
//!   (`quarry-netguard`) with the operator's allow-list ([`SourceOptions::net`],
//!   `--allow-net`): checked when the source is attached, and at every connection of every
//!   sync. A folder, or a Git repository by its path on this machine, reads the server's disk:
//!   only the machine's owner attaches those, whatever the surface.

use std::sync::{Condvar, Mutex};
use std::time::Duration;

use quarry_core::{Error, Result};
use quarry_sources::{Location, NetPolicy};
use quarry_store::SourceLease;

use crate::engine::Engine;

use crate::sources::SOURCE_LEASE;

/// The shortest lease accepted (a renewal every half second).
pub const MIN_SOURCE_LEASE: Duration = Duration::from_secs(2);

/// How syncs of sources run on this engine (set once, [`Engine::with_sources`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceOptions {
    /// How long a claim on a source lasts without renewal: another node takes over an
    /// interrupted sync this long after its node stopped. A running sync renews it every
    /// quarter of it. At least [`MIN_SOURCE_LEASE`].
    pub lease: Duration,
    /// The addresses besides public ones that the requests of a sync for someone other than
    /// the machine's owner may reach (`--allow-net`).
    pub net: NetPolicy,
    /// Whether this node's scheduled syncs go through the guard: a server with access
    /// tokens, whose sources users other than the machine's owner may have attached. `false`
    /// for a server without `--auth`, where every caller may act as the machine's owner.
    pub guard_scheduled: bool,
}

impl Default for SourceOptions {
    fn default() -> SourceOptions {
        SourceOptions {
            lease: SOURCE_LEASE,
            net: NetPolicy::default(),
            guard_scheduled: true,
        }
    }
}

impl SourceOptions {
    /// The lease, at least [`MIN_SOURCE_LEASE`].
    pub(crate) fn lease(&self) -> Duration {
        self.lease.max(MIN_SOURCE_LEASE)
    }

    /// The lease in milliseconds, as the store takes it.
    pub(crate) fn lease_ms(&self) -> i64 {
        i64::try_from(self.lease().as_millis()).unwrap_or(i64::MAX)
    }

    /// How often a running sync renews its claim.
    pub(crate) fn renew_every(&self) -> Duration {
        self.lease() / 4
    }
}

impl Engine {
    /// The guard a sync through this handle goes through: `None` for the machine's owner
    /// (any address), the operator's allow-list for anyone else.
    pub(crate) fn source_net(&self) -> Option<NetPolicy> {
        if self.scope().machine_owner {
            None
        } else {
            Some(self.sources.net.clone())
        }
    }

    /// Who may attach a source at `location`: a folder, or a Git repository by its path on
    /// this machine, only the machine's owner (it reads the server's disk); a URL, anyone
    /// with the right to attach, but for someone other than the machine's owner only where
    /// the outbound address guard lets requests go (checked now, and again at every
    /// connection of every sync). `Forbidden` otherwise, saying why.
    pub(crate) fn check_source_location(&self, location: &Location) -> Result<()> {
        let on_disk = match location {
            Location::Folder { .. } => Some("a folder source"),
            Location::Git { url, .. } if std::path::Path::new(url.trim()).is_absolute() => {
                Some("a Git source at a local path")
            }
            _ => None,
        };
        if let Some(what) = on_disk
            && !self.scope().machine_owner
        {
            return Err(Error::Forbidden(format!(
                "{what} reads the server's own disk: only the machine's owner may attach one \
                 (the quarry CLI on the server: 'quarry source add', or a loopback server \
                 started without --auth); attach a Git repository by its http(s):// URL instead"
            )));
        }
        match self.source_net() {
            Some(net) => Ok(quarry_sources::check_location(location, &net)?),
            None => Ok(()),
        }
    }

    /// The handle a node's scheduled sync runs through: the machine's owner's, or — when
    /// [`SourceOptions::guard_scheduled`] — the same reach without the owner's network
    /// freedom, so its requests go through the guard.
    pub(crate) fn scheduler_handle(&self) -> Engine {
        if !self.sources.guard_scheduled || !self.scope().machine_owner {
            return self.clone();
        }
        let mut scope = self.scope().clone();
        scope.machine_owner = false;
        self.scoped(scope)
    }

    /// Runs `sync` while a heartbeat thread renews `lease` every quarter of its length (see
    /// the module docs); the heartbeat stops when `sync` returns (or unwinds). A renewal that
    /// finds the lease gone stops renewing: the sync's next fenced write then fails.
    pub(crate) fn with_heartbeat<T>(
        &self,
        lease: SourceLease,
        sync: impl FnOnce() -> Result<T>,
    ) -> Result<T> {
        let stop = Stop::default();
        let every = self.sources.renew_every();
        let lease_ms = self.sources.lease_ms();
        std::thread::scope(|s| {
            std::thread::Builder::new()
                .name("quarry-source-lease".into())
                .spawn_scoped(s, || {
                    let lock = || stop.flag.lock().unwrap_or_else(|p| p.into_inner());
                    let mut stopped = lock();
                    loop {
                        // Checked before each wait: the sync may have ended before this
                        // thread first took the lock.
                        if *stopped {
                            return;
                        }
                        let (guard, _) = stop
                            .wake
                            .wait_timeout(stopped, every)
                            .unwrap_or_else(|p| p.into_inner());
                        if *guard {
                            return;
                        }
                        // Renewed without the lock held: the sync's end never waits on it.
                        drop(guard);
                        // A store that failed once may answer the next time; a lease that
                        // is gone is not coming back.
                        if let Ok(false) = self.store().renew_source(lease, lease_ms) {
                            return;
                        }
                        stopped = lock();
                    }
                })
                .map_err(|e| {
                    Error::Unavailable(format!("cannot start the source lease's heartbeat: {e}"))
                })?;
            // Stops the heartbeat however `sync` ends, so the scope can join it.
            let _stop = StopOnDrop(&stop);
            sync()
        })
    }
}

/// The heartbeat's stop flag.
#[derive(Default)]
struct Stop {
    flag: Mutex<bool>,
    wake: Condvar,
}

struct StopOnDrop<'a>(&'a Stop);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        *self.0.flag.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.0.wake.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lease_has_a_floor_and_renews_four_times_per_length() {
        let o = SourceOptions {
            lease: Duration::from_secs(8),
            ..SourceOptions::default()
        };
        assert_eq!(o.lease_ms(), 8000);
        assert_eq!(o.renew_every(), Duration::from_secs(2));
        let tiny = SourceOptions {
            lease: Duration::from_millis(10),
            ..SourceOptions::default()
        };
        assert_eq!(tiny.lease(), MIN_SOURCE_LEASE);
        assert_eq!(SourceOptions::default().lease, SOURCE_LEASE);
    }
}
