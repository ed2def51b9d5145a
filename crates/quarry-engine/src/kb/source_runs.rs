//! The engine's side of running source syncs (see `source_options.rs` for the policy):
//! the guard a sync goes through, the scheduler's start, and the heartbeat that keeps a
//! sync's lease.

use std::sync::{Condvar, Mutex};

use quarry_core::{Error, Result};
use quarry_sources::{Cidr, Location, NetPolicy};
use quarry_store::SourceLease;

use crate::engine::Engine;
use crate::kb::source_options::{SCHEDULED_NET, allow_hints, policy_of_key, widened};

impl Engine {
    /// The guard a sync through this handle goes through: `None` for the machine's owner
    /// (any address), for anyone else the operator's allow-list and `extra`, the source's
    /// own allowance.
    pub(crate) fn source_net(&self, extra: &[Cidr]) -> Option<NetPolicy> {
        if self.scope().machine_owner {
            None
        } else {
            Some(widened(&self.sources.net, extra))
        }
    }

    /// The policy a server's scheduled syncs of this data run under, as the last node to
    /// start its scheduler recorded it (else this process's own, when it guards them);
    /// `None` when they are not guarded.
    fn scheduled_net(&self) -> Result<Option<NetPolicy>> {
        match self.store().meta(SCHEDULED_NET)? {
            Some(key) => Ok(policy_of_key(&key)),
            None if self.sources.guard_scheduled => Ok(Some(self.sources.net.clone())),
            None => Ok(None),
        }
    }

    /// What to tell whoever attaches or changes source `id` at `location` (with its own
    /// allowance `extra`): that the guard of the server's scheduled syncs would refuse it,
    /// and how to allow it — though a manual sync by the machine's owner, who is not
    /// guarded, works. Empty when nothing stands in the way (or a guarded caller was already
    /// checked against the same policy when it attached).
    pub(crate) fn source_warnings(
        &self,
        id: &str,
        location: &Location,
        extra: &[Cidr],
    ) -> Result<Vec<String>> {
        let Some(server) = self.scheduled_net()? else {
            return Ok(Vec::new());
        };
        let net = widened(&server, extra);
        let Ok(Some((url, refused))) = quarry_sources::location_refusal(location, &net) else {
            return Ok(Vec::new());
        };
        let mut warning = format!(
            "scheduled syncs run on the server under its outbound address guard (it takes \
             access tokens), which will refuse this source — {url}: {refused}"
        );
        let hints = allow_hints(&refused);
        if !hints.is_empty() {
            let list = hints.join(",");
            let json = hints
                .iter()
                .map(|h| format!("\"{h}\""))
                .collect::<Vec<_>>()
                .join(", ");
            warning.push_str(&format!(
                ". Allow it for this source only: quarry source set {id} --allow-net {list} \
                 (REST: \"allow_net\": [{json}]); or for the whole server: quarry serve \
                 --allow-net {list}"
            ));
        }
        Ok(vec![warning])
    }

    /// For a node's source scheduler as it starts: records this node's network policy for
    /// scheduled syncs in the store (what attaching a source elsewhere warns against), and
    /// makes every source whose last sync the guard refused under another policy due at once
    /// (a restart with a changed `--allow-net`). Returns how many were made due.
    pub fn start_source_scheduler(&self) -> Result<u64> {
        let key = self.sources.policy_key();
        self.store().set_meta(SCHEDULED_NET, &key)?;
        self.store().retry_refused_sources(&key)
    }

    /// Who may attach a source at `location`: a folder, or a Git repository by its path on
    /// this machine, only the machine's owner (it reads the server's disk); a URL, anyone
    /// with the right to attach, but for someone other than the machine's owner only where
    /// the outbound address guard lets requests go, with the source's own allowance `extra`
    /// (checked now, and again at every connection of every sync). `Forbidden` otherwise,
    /// saying why.
    pub(crate) fn check_source_location(&self, location: &Location, extra: &[Cidr]) -> Result<()> {
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
        match self.source_net(extra) {
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
