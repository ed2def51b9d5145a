//! The test databases of `quarry_store_pg::testing` (shared with other crates' PostgreSQL
//! tests, e.g. the engine's vector-backend conformance suite).

pub(crate) use quarry_store_pg::testing::{TestDatabase, with_database};

/// Waits until at least `n` sessions of `raw`'s database whose statement is `LIKE query`
/// wait for a lock (writers a test paused on purpose); their process ids.
pub(crate) fn wait_for_lock_waiters(raw: &mut postgres::Client, n: usize, query: &str) -> Vec<i32> {
    for _ in 0..1_000 {
        let waiting: Vec<i32> = raw
            .query(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() \
                 AND wait_event_type = 'Lock' AND query LIKE $1",
                &[&query],
            )
            .expect("pg_stat_activity")
            .iter()
            .map(|r| r.get(0))
            .collect();
        if waiting.len() >= n {
            return waiting;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("{n} sessions running {query:?} never waited for a lock");
}
