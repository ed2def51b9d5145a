use std::sync::Arc;
use std::time::Duration;

use quarry_store::Store;
use quarry_store_sqlite::SqliteStore;

use super::*;

fn store() -> (tempfile::TempDir, Arc<dyn Store>) {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("q.db")).unwrap());
    (dir, store)
}

fn limiter(store: &Arc<dyn Store>, tools: u32) -> Arc<RateLimiter> {
    RateLimiter::new(
        store.clone(),
        LimitSettings {
            tool_calls_per_minute: tools,
            chats_per_minute: 0,
            auth_failures_free: 3,
            monthly_model_tokens: 0,
        },
    )
}

/// Counts allowed calls until the first refusal (at most `max`).
fn allowed(l: &RateLimiter, token: &str, max: usize) -> usize {
    (0..max)
        .take_while(|_| l.check(Kind::ToolCall, token).unwrap() == Decision::Allowed)
        .count()
}

#[test]
fn a_token_gets_its_limit_per_minute_and_then_a_retry_after() {
    let (_dir, store) = store();
    let l = limiter(&store, 45);
    // Skip a window about to end, so the count is of one window.
    if now_millis() % WINDOW_MS > WINDOW_MS - 5_000 {
        std::thread::sleep(Duration::from_secs(6));
    }
    assert_eq!(allowed(&l, "t1", 100), 45);
    match l.check(Kind::ToolCall, "t1").unwrap() {
        Decision::Limited { retry_after } => {
            assert!(retry_after >= Duration::from_secs(1) && retry_after <= Duration::from_secs(60))
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        allowed(&l, "t2", 10),
        10,
        "another token has its own budget"
    );
    // Chats are not limited here (0), tool calls are per kind.
    assert_eq!(l.check(Kind::Chat, "t1").unwrap(), Decision::Allowed);
}

#[test]
fn nodes_share_one_budget_through_the_store() {
    let (_dir, store) = store();
    if now_millis() % WINDOW_MS > WINDOW_MS - 5_000 {
        std::thread::sleep(Duration::from_secs(6));
    }
    // Two limiters over one store are two nodes.
    let (a, b) = (limiter(&store, 40), limiter(&store, 40));
    let mut total = 0;
    for _ in 0..30 {
        total += allowed(&a, "shared", 1) + allowed(&b, "shared", 1);
    }
    assert_eq!(total, 40, "together no more than the limit");
    assert_eq!(allowed(&a, "shared", 5) + allowed(&b, "shared", 5), 0);
    // Most calls are served from the leases: one store write per slice of 2.
    let l = limiter(&store, 0);
    assert_eq!(allowed(&l, "free", 1000), 1000, "0 means no limit");
}

#[test]
fn failed_authentication_is_slowed_progressively() {
    let (_dir, store) = store();
    let l = limiter(&store, 0);
    let keys = vec!["ip:10.0.0.7".to_owned()];
    let delays: Vec<Duration> = (0..8).map(|_| l.auth_failure(&keys).unwrap()).collect();
    assert_eq!(&delays[..3], &[Duration::ZERO; 3]);
    assert_eq!(delays[3], Duration::from_millis(250));
    assert_eq!(delays[4], Duration::from_millis(500));
    assert_eq!(delays[6], Duration::from_secs(2));
    assert_eq!(delays[7], Duration::from_secs(4));
    // The worst of the keys counts: a new address with a token already tried many times.
    let mixed = vec!["ip:10.0.0.8".to_owned(), "ip:10.0.0.7".to_owned()];
    assert_eq!(l.auth_failure(&mixed).unwrap(), Duration::from_secs(8));
    assert_eq!(auth_delay(1000, 3), Duration::from_secs(10), "capped");
}

#[test]
fn settings_from_variables() {
    let get = |pairs: &'static [(&'static str, &'static str)]| {
        move |k: &str| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_owned())
        }
    };
    assert_eq!(
        LimitSettings::from_lookup(get(&[])).unwrap(),
        LimitSettings::default()
    );
    let s = LimitSettings::from_lookup(get(&[
        ("QUARRY_RATE_TOOL_CALLS", "0"),
        ("QUARRY_RATE_CHATS", " 5 "),
        ("QUARRY_AUTH_FAILURES_FREE", "9"),
        ("QUARRY_MONTHLY_MODEL_TOKENS", "2000000"),
    ]))
    .unwrap();
    assert_eq!(s.monthly_model_tokens, 2_000_000);
    assert_eq!(
        (
            s.tool_calls_per_minute,
            s.chats_per_minute,
            s.auth_failures_free
        ),
        (0, 5, 9)
    );
    let e = LimitSettings::from_lookup(get(&[("QUARRY_RATE_CHATS", "-1")])).unwrap_err();
    assert_eq!(
        e.to_string(),
        r#"QUARRY_RATE_CHATS="-1": give a whole number (0 or more)"#
    );
    let e = LimitSettings::from_lookup(get(&[("QUARRY_MONTHLY_MODEL_TOKENS", "2M")])).unwrap_err();
    assert_eq!(e.var, "QUARRY_MONTHLY_MODEL_TOKENS");
}
