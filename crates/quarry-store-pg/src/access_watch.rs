//! The access generation a node watches instead of reading it on every token check.
//!
//! A token check needs the access generation ([`quarry_store::AccessStore::access_generation`])
//! to know whether the token rows it keeps are still current; reading it is a round trip per
//! request. Instead each node keeps one connection of its own that `LISTEN`s on
//! `quarry_access` (every bump notifies at commit) and a row in `access_watchers` that it
//! renews — at once on a notification, else every [`RENEW_EVERY`] — with the generation its
//! renewal read. After a renewal commits, the node trusts that generation for [`LEASE`],
//! counted from *before* it asked.
//!
//! A change that bumps the generation is not done when it commits: its writer then waits
//! ([`PgStore::settle_access`](crate::PgStore::settle_access)) until every watcher row has seen its generation or has run out
//! ([`LEASE`] + [`MARGIN`] past its renewal at the database's clock, when the writer removes
//! it). So once a revocation returns, no node still trusts a generation from before it:
//!
//! - a node that confirmed the new generation dropped its trust in the old one *before* that
//!   confirmation committed (a node trusts nothing while a renewal is out, then the
//!   generation that renewal read);
//! - a node whose row ran out stopped trusting before the row did (its lease is counted from
//!   before its renewal was sent; the row's from when the database ran it, plus a margin for
//!   clocks that run at slightly different rates);
//! - a renewal still in flight when the writer looks holds its row's lock: the writer's removal
//!   waits for it and then sees it renewed (and waits for its confirmation) — and a renewal
//!   that read the old generation was sent before the change committed, so its lease ends
//!   before the row it leaves does;
//! - a node that registers after the change reads the new generation at its first renewal.
//!
//! Until its first renewal, and whenever its connection fails, a node asks the database on
//! every check as before: the watch only ever saves a round trip. A node that stops removes its
//! row; one that dies leaves a row that delays the next access change by at most
//! [`LEASE`] + [`MARGIN`], once.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Once};
use std::time::{Duration, Instant};

use postgres::Client;
use postgres::fallible_iterator::FallibleIterator;
use quarry_core::{Error, Result};

use crate::error::db_err;
use crate::pool::{Connector, PgConnection};
use crate::sql::col;

/// How long a node trusts a generation it confirmed, counted from before it asked.
pub(crate) const LEASE: Duration = Duration::from_secs(2);
/// How often a node confirms when nothing changes.
const RENEW_EVERY: Duration = Duration::from_millis(500);
/// Added to a row's lease before a writer counts its node gone: the node's clock and the
/// database's may run at slightly different rates.
const MARGIN: Duration = Duration::from_secs(1);
/// How long a watch whose connection failed waits before connecting again.
const RETRY_AFTER: Duration = Duration::from_secs(1);
/// A writer's first pause between looks at the watchers (a confirmation takes a
/// notification and a round trip); each pause doubles up to [`SETTLE_POLL_MAX`].
const SETTLE_POLL: Duration = Duration::from_micros(250);
const SETTLE_POLL_MAX: Duration = Duration::from_millis(8);
/// How long a writer waits for confirmations before saying so: past every live row's
/// lease, with room for a slow database.
const SETTLE_WAIT: Duration = Duration::from_secs(6);

/// One writer's look at the watchers: rows past their lease removed, then the generation
/// to wait for (`$2`, or the current one at the first look) and how many rows have not
/// seen it. A row removed here is not counted (the statement's snapshot still holds it).
const SETTLE: &str = "WITH gone AS (DELETE FROM access_watchers WHERE renewed_at < quarry_now_ms() - $1 \
       RETURNING node), \
     target AS (SELECT COALESCE($2::bigint, (SELECT n FROM access_generation)) AS n) \
     SELECT (SELECT n FROM target), \
       (SELECT count(*) FROM access_watchers w, target \
        WHERE w.seen < target.n AND w.node NOT IN (SELECT node FROM gone))";

/// This node's watch (one per store); its thread starts at the first token check.
pub(crate) struct AccessWatch {
    shared: Arc<Shared>,
    started: Once,
}

struct Shared {
    /// The node's row in `access_watchers`.
    node: String,
    trusted: Mutex<Option<Trusted>>,
    stop: AtomicBool,
}

/// A generation the node confirmed, and until when it may answer from it.
#[derive(Clone, Copy)]
struct Trusted {
    generation: i64,
    until: Instant,
}

impl AccessWatch {
    pub(crate) fn new() -> AccessWatch {
        AccessWatch {
            shared: Arc::new(Shared {
                node: uuid::Uuid::new_v4().to_string(),
                trusted: Mutex::new(None),
                stop: AtomicBool::new(false),
            }),
            started: Once::new(),
        }
    }

    /// The generation this node may answer from now, if any.
    pub(crate) fn trusted(&self) -> Option<i64> {
        let trusted = (*self.shared.lock())?;
        (Instant::now() < trusted.until).then_some(trusted.generation)
    }

    /// Starts the watching thread, once. A thread that cannot start leaves every check
    /// asking the database, as before.
    pub(crate) fn start(&self, connector: impl FnOnce() -> Connector) {
        self.started.call_once(|| {
            let shared = self.shared.clone();
            let connector = connector();
            let _ = std::thread::Builder::new()
                .name("quarry-access-watch".into())
                .spawn(move || run(&shared, &connector));
        });
    }
}

impl Drop for AccessWatch {
    fn drop(&mut self) {
        // The thread sees it within one wait, removes its row and ends.
        self.shared.stop.store(true, Ordering::Relaxed);
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Option<Trusted>> {
        // One plain value, never left half-written.
        self.trusted.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn distrust(&self) {
        *self.lock() = None;
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// Watches until the store is dropped, connecting again after each failure.
fn run(shared: &Shared, connector: &Connector) {
    while !shared.stopped() {
        let outcome = watch(shared, connector);
        shared.distrust();
        if outcome.is_ok() {
            return;
        }
        let retry_at = Instant::now() + RETRY_AFTER;
        while !shared.stopped() && Instant::now() < retry_at {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// One connection's watch; `Ok` once the store stopped (its row removed).
fn watch(shared: &Shared, connector: &Connector) -> Result<()> {
    let mut client = connector.connect()?;
    client
        .batch_execute("SET application_name = 'quarry access watch'; LISTEN quarry_access")
        .map_err(db_err)?;
    let register = client
        .prepare(
            "INSERT INTO access_watchers (node, seen, renewed_at) \
             VALUES ($1, -1, quarry_now_ms()) ON CONFLICT (node) DO NOTHING",
        )
        .map_err(db_err)?;
    let renew = client
        .prepare(
            "UPDATE access_watchers SET seen = (SELECT n FROM access_generation), \
             renewed_at = quarry_now_ms() WHERE node = $1 RETURNING seen",
        )
        .map_err(db_err)?;
    client.execute(&register, &[&shared.node]).map_err(db_err)?;
    while !shared.stopped() {
        // Nothing is trusted while a renewal is out: one that reads a newer generation
        // confirms it to the writer waiting for it as it commits, before this thread could
        // drop the older one.
        shared.distrust();
        let asked = Instant::now();
        let Some(row) = client.query_opt(&renew, &[&shared.node]).map_err(db_err)? else {
            // A writer removed the row: this node stalled past its lease. Register again.
            client.execute(&register, &[&shared.node]).map_err(db_err)?;
            continue;
        };
        *shared.lock() = Some(Trusted {
            generation: col(&row, 0)?,
            until: asked + LEASE,
        });
        wait_for_change(&mut client)?;
    }
    shared.distrust();
    client
        .execute(
            "DELETE FROM access_watchers WHERE node = $1",
            &[&shared.node],
        )
        .map_err(db_err)?;
    Ok(())
}

/// Until a bump is notified or it is time to renew anyway.
fn wait_for_change(client: &mut Client) -> Result<()> {
    let mut notifications = client.notifications();
    notifications
        .timeout_iter(RENEW_EVERY)
        .next()
        .map_err(db_err)?;
    // One renewal covers every notification already queued.
    while notifications.iter().next().map_err(db_err)?.is_some() {}
    drop(notifications);
    if client.is_closed() {
        return Err(Error::Unavailable(
            "the connection watching access changes closed".into(),
        ));
    }
    Ok(())
}

/// Waits until no node still answers token checks from a generation older than the
/// current one, asking on connections from `conn`: called after every change that bumps it
/// ([`PgStore::settle_access`](crate::PgStore::settle_access)), so that the change bites on
/// the next request on every node.
pub(crate) fn settle<'p>(mut conn: impl FnMut() -> Result<PgConnection<'p>>) -> Result<()> {
    let gone_after = i64::try_from((LEASE + MARGIN).as_millis()).unwrap_or(i64::MAX);
    let deadline = Instant::now() + SETTLE_WAIT;
    let mut target: Option<i64> = None;
    let mut pause = SETTLE_POLL;
    loop {
        let row = conn()?
            .query_one(SETTLE, &[&gone_after, &target])
            .map_err(db_err)?;
        target = Some(col(&row, 0)?);
        let behind: i64 = col(&row, 1)?;
        if behind == 0 {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(Error::Unavailable(format!(
                "the access change is saved, but {behind} Quarry node(s) have not confirmed \
                 it within {}s; until they do they may still accept what it took away",
                SETTLE_WAIT.as_secs()
            )));
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(SETTLE_POLL_MAX);
    }
}
