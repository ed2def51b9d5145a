//! Token checks answered from the access generation a node watches (src/access_watch.rs):
//! two stores on one database stand for two nodes; a change made through one must be seen
//! by the other's very next check, whatever state the other's watch is in. On the server
//! `QUARRY_TEST_DATABASE_URL` names (skipped without one).

use std::time::{Duration, Instant};

use quarry_store::Role;
use quarry_store::prelude::*;
use quarry_store_pg::PgStore;

use crate::common::TestDatabase;

/// Two nodes on a fresh database, a raw client, and a user and space to grant and revoke.
fn with_nodes(f: impl FnOnce(&PgStore, &PgStore, &mut postgres::Client, i64)) {
    let Some(db) = TestDatabase::create("quarry_w") else {
        return;
    };
    let a = PgStore::connect(&db.url).expect("connect node A");
    let b = PgStore::connect(&db.url).expect("connect node B");
    a.create_space("team", "").expect("space");
    let user = a.create_user("ann").expect("user");
    let (row, _) = a.user(&user.id).expect("read user").expect("user row");
    f(&a, &b, &mut db.client(), row);
}

fn current(raw: &mut postgres::Client) -> i64 {
    raw.query_one("SELECT n FROM access_generation WHERE id = 1", &[])
        .expect("read the generation")
        .get(0)
}

/// Checks on `node` until it answers from its watch (its first check starts it).
fn until_watching(node: &PgStore) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !node.watches_access() {
        node.access_generation().expect("check");
        assert!(Instant::now() < deadline, "the node never started watching");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Grants then revokes, alternately; after each returns, the other node's next check reads
/// a generation at least the one the change produced — while it answers from its watch
/// (without the writer's wait it would answer the old one until its watch renews).
#[test]
fn a_change_on_one_node_bites_on_the_next_check_of_another_that_watches() {
    with_nodes(|a, b, raw, user| {
        until_watching(b);
        let mut answered_from_watch = 0;
        for round in 0..40 {
            if round % 2 == 0 {
                a.grant(user, "team", Role::Viewer).expect("grant");
            } else {
                assert!(a.revoke_membership(user, "team").expect("revoke"));
            }
            let produced = current(raw);
            let watching = b.watches_access();
            let seen = b.access_generation().expect("check on B");
            assert!(
                seen >= produced,
                "round {round}: B answered generation {seen} after A's change made {produced}"
            );
            answered_from_watch += usize::from(watching && b.watches_access());
            // Spread over time: some changes land mid-renewal, some between.
            std::thread::sleep(Duration::from_millis(round % 7 * 37));
        }
        assert!(
            answered_from_watch > 20,
            "B answered from its watch in only {answered_from_watch} of 40 rounds"
        );
        // Both directions: B's change bites on A.
        until_watching(a);
        a.access_generation().expect("check on A");
        b.grant(user, "team", Role::Editor).expect("grant on B");
        assert!(a.access_generation().expect("check on A") >= current(raw));
    });
}

/// A node that stopped renewing (its row left behind, as by a node killed mid-run) delays
/// the next change until its lease ran out, then is removed; one long gone is removed at once.
#[test]
fn a_node_that_stopped_renewing_is_waited_for_until_its_lease_ends() {
    with_nodes(|a, _b, raw, user| {
        let at: i64 = raw
            .query_one(
                "WITH i AS (INSERT INTO access_watchers (node, seen, renewed_at) \
                   VALUES ('stalled', -1, quarry_now_ms()), ('gone', -1, quarry_now_ms() - 60000) \
                   RETURNING renewed_at) \
                 SELECT max(renewed_at) FROM i",
                &[],
            )
            .expect("leave rows behind")
            .get(0);
        a.grant(user, "team", Role::Viewer).expect("grant");
        let done: i64 = raw
            .query_one("SELECT quarry_now_ms()", &[])
            .expect("clock")
            .get(0);
        let left: i64 = raw
            .query_one("SELECT count(*) FROM access_watchers", &[])
            .expect("count")
            .get(0);
        assert_eq!(left, 0, "the stalled and the gone node's rows are removed");
        // Its lease (2 s) and the margin (1 s) from its renewal, at the database's clock.
        assert!(
            done - at >= 3000,
            "the change returned {} ms after the stalled node's renewal",
            done - at
        );
    });
}

/// The watching connection dies (terminated by the server): the node neither answers a
/// stale generation meanwhile nor stops watching for good.
#[test]
fn a_node_whose_watch_connection_dies_answers_no_stale_generation_and_watches_again() {
    with_nodes(|a, b, raw, user| {
        until_watching(b);
        for round in 0..3 {
            let killed: i64 = raw
                .query_one(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                     WHERE application_name = 'quarry access watch' \
                       AND datname = current_database()",
                    &[],
                )
                .expect("terminate the watch")
                .get(0);
            assert_eq!(killed, 1, "round {round}: one node watches");
            if round % 2 == 0 {
                a.grant(user, "team", Role::Viewer).expect("grant");
            } else {
                a.revoke_membership(user, "team").expect("revoke");
            }
            let produced = current(raw);
            assert!(b.access_generation().expect("check on B") >= produced);
            until_watching(b);
            assert!(b.access_generation().expect("check on B") >= produced);
        }
    });
}

/// A store that is dropped removes its row, so the next change waits for nobody.
#[test]
fn a_node_that_stops_removes_its_row() {
    let Some(db) = TestDatabase::create("quarry_w") else {
        return;
    };
    let mut raw = db.client();
    let rows = |raw: &mut postgres::Client| -> i64 {
        raw.query_one("SELECT count(*) FROM access_watchers", &[])
            .expect("count")
            .get(0)
    };
    let node = PgStore::connect(&db.url).expect("connect");
    until_watching(&node);
    assert_eq!(rows(&mut raw), 1);
    drop(node);
    let deadline = Instant::now() + Duration::from_secs(10);
    while rows(&mut raw) > 0 {
        assert!(Instant::now() < deadline, "the stopped node's row stayed");
        std::thread::sleep(Duration::from_millis(20));
    }
}
