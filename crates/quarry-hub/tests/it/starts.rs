//! How stdio upstreams start (issue 65, item 15): a slow modern server is started once, not
//! a second time after rmcp's 10 s `server/discover` probe; a restart asks with the protocol
//! the upstream answered; at most `HubOptions::upstream_starts` start at once, and one at a
//! time while `HubOptions::narrow_starts_while` is under way (the server's model load).
//!
//! The upstreams are `sh` scripts that log, one line each, their start (`start <ns>`), the
//! methods they are asked (`<start number> <method>`) and their first tool list (`ready <ns>`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use quarry_core::Principal;
use quarry_hub::{Hub, HubOptions, PriorityWork, RegisterUpstream, UpstreamInfo};

/// A stdio MCP server in `sh`, run as `sh -c SCRIPT fake LOG SLEEP ERA [exit-once]`: it logs
/// its start, sleeps `SLEEP` seconds before reading anything (a cold `npx`, `uvx` or `docker
/// run`), then answers as a 2026-07-28 server (`ERA` = `modern`: `server/discover`, and
/// `initialize` refused) or an older one (`legacy`: `server/discover` refused, `initialize`
/// answered), and lists one tool. With `exit-once`, its first start exits after its tool list.
const SERVER: &str = r#"
log="$1"; era="$3"
echo "start $(date +%s%N)" >> "$log"
n=$(grep -c '^start' "$log")
sleep "$2"
while IFS= read -r line; do
  id=$(printf '%s\n' "$line" | sed -n 's/^{"jsonrpc":"2.0","id":\([0-9]*\).*/\1/p')
  [ -n "$id" ] || continue
  case "$line" in
    *'"method":"server/discover"'*)
      echo "$n server/discover" >> "$log"
      if [ "$era" = modern ]; then
        printf '{"jsonrpc":"2.0","id":%s,"result":{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"ttlMs":0,"cacheScope":"private","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"fake","version":"1.0.0"}}}}\n' "$id"
      else
        printf '{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"method not found"}}\n' "$id"
      fi ;;
    *'"method":"initialize"'*)
      echo "$n initialize" >> "$log"
      if [ "$era" = modern ]; then
        printf '{"jsonrpc":"2.0","id":%s,"error":{"code":-32600,"message":"initialize is not part of 2026-07-28"}}\n' "$id"
      else
        printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"fake","version":"1.0.0"}}}\n' "$id"
      fi ;;
    *'"method":"tools/list"'*)
      echo "$n tools/list" >> "$log"
      echo "ready $(date +%s%N)" >> "$log"
      printf '{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"echo","description":"Echoes.","inputSchema":{"type":"object"}}]}}\n' "$id"
      if [ "$4" = exit-once ] && [ "$n" = 1 ]; then exit 0; fi ;;
    *)
      printf '{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"method not found"}}\n' "$id" ;;
  esac
done
"#;

/// A hub over a fresh SQLite store (kept in `dir`).
fn hub(dir: &Path, opts: HubOptions) -> Arc<Hub> {
    let store = quarry_store_sqlite::SqliteStore::open(&dir.join("hub.db")).unwrap();
    Hub::new(Arc::new(store), Vec::new(), opts)
}

fn owner() -> Principal {
    Principal::owner("default", "")
}

/// Registers the script as upstream `name`, logging to `log`; answers its id.
async fn register(hub: &Arc<Hub>, name: &str, log: &Path, args: &[&str]) -> String {
    let mut all = vec![SERVER.to_owned(), "fake".into(), log.display().to_string()];
    all.extend(args.iter().map(|a| (*a).to_owned()));
    let (hub, name) = (hub.clone(), name.to_owned());
    tokio::task::spawn_blocking(move || {
        hub.register(
            &owner(),
            RegisterUpstream {
                name,
                transport_type: "stdio".into(),
                config: "sh -c".into(),
                args: all,
                connect_timeout_secs: Some(40),
                ..Default::default()
            },
        )
    })
    .await
    .unwrap()
    .unwrap()
    .id
}

/// Waits (up to `wait`) for upstream `id`'s first discovery; answers its row.
async fn settled(hub: &Arc<Hub>, id: &str, wait: Duration) -> UpstreamInfo {
    let connecting = {
        let (hub, id) = (hub.clone(), id.to_owned());
        tokio::task::spawn_blocking(move || hub.connecting(&owner(), &id))
            .await
            .unwrap()
            .unwrap()
            .expect("the registration opened a connection")
    };
    connecting.discovered(wait).await;
    let (hub, id) = (hub.clone(), id.to_owned());
    tokio::task::spawn_blocking(move || hub.upstream(&owner(), &id).unwrap())
        .await
        .unwrap()
}

fn lines(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The `start` and `ready` times (ns since the epoch) of one script's first start.
fn span(log: &Path) -> (u128, u128) {
    let at = |what: &str| {
        lines(log)
            .iter()
            .find_map(|l| l.strip_prefix(what)?.trim().parse::<u128>().ok())
            .unwrap_or_else(|| panic!("{} has no '{what}' line: {:?}", log.display(), lines(log)))
    };
    (at("start "), at("ready "))
}

/// Most spans overlapping at one instant (at or before `until`, if given).
fn most_at_once(spans: &[(u128, u128)], until: Option<u128>) -> usize {
    spans
        .iter()
        .map(|&(t, _)| t)
        .filter(|&t| until.is_none_or(|u| t <= u))
        .map(|t| spans.iter().filter(|&&(s, e)| s <= t && t < e).count())
        .max()
        .unwrap_or(0)
}

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// A 2026-07-28 server that answers `server/discover` 11 s after it starts — past rmcp's
/// 10 s probe, within the connect timeout — is started once and becomes ready: the late
/// answer, then its refusal of the `initialize` sent meanwhile, are read, and the same
/// process is asked again with `server/discover`. Before, it was killed and started a second
/// time ("answered server/discover after the 10 s probe; starting it again").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_modern_upstream_is_started_once() {
    let dir = tempfile::tempdir().unwrap();
    let hub = hub(dir.path(), HubOptions::default());
    let log = dir.path().join("slow.log");
    let id = register(&hub, "slow", &log, &["11", "modern"]).await;
    let row = settled(&hub, &id, Duration::from_secs(60)).await;
    assert_eq!(row.health.status, "ready", "{row:?}\n{:?}", lines(&log));
    assert_eq!(row.tool_count, 1, "{row:?}");
    assert_eq!(
        row.health.protocol_version.as_deref(),
        Some("2026-07-28"),
        "{row:?}"
    );
    let starts = lines(&log)
        .iter()
        .filter(|l| l.starts_with("start"))
        .count();
    assert_eq!(starts, 1, "started {starts} times: {:?}", lines(&log));
    hub.shutdown();
}

/// A restart asks with the protocol the upstream answered before: a legacy server that
/// exits after its first tool list is asked `initialize` alone the second time, never
/// `server/discover` again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_asks_with_the_protocol_answered_before() {
    let dir = tempfile::tempdir().unwrap();
    let hub = hub(dir.path(), HubOptions::default());
    let log = dir.path().join("legacy.log");
    let id = register(&hub, "legacy", &log, &["0", "legacy", "exit-once"]).await;
    let first = settled(&hub, &id, Duration::from_secs(30)).await;
    assert_eq!(first.tool_count, 1, "{first:?}\n{:?}", lines(&log));
    // It exits; the supervisor starts it again (after half a second).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !lines(&log).iter().any(|l| l == "2 tools/list") {
        assert!(
            std::time::Instant::now() < deadline,
            "never restarted: {:?}",
            lines(&log)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let seen = lines(&log);
    assert!(
        seen.iter().any(|l| l == "1 server/discover"),
        "the first start was not probed: {seen:?}"
    );
    assert!(
        seen.iter().any(|l| l == "2 initialize") && !seen.iter().any(|l| l == "2 server/discover"),
        "the restart probed again: {seen:?}"
    );
    hub.shutdown();
}

/// Six slow upstreams registered at once start at most `upstream_starts` (2) at a time,
/// each from its spawn to its first tool list; all become ready. Before, all six started
/// together.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstreams_start_at_most_the_limit_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let hub = hub(
        dir.path(),
        HubOptions {
            upstream_starts: 2,
            ..HubOptions::default()
        },
    );
    let mut ids = Vec::new();
    let logs: Vec<PathBuf> = (0..6)
        .map(|i| dir.path().join(format!("u{i}.log")))
        .collect();
    for (i, log) in logs.iter().enumerate() {
        ids.push(register(&hub, &format!("u{i}"), log, &["1", "legacy"]).await);
    }
    for id in &ids {
        let row = settled(&hub, id, Duration::from_secs(60)).await;
        assert_eq!(row.health.status, "ready", "{row:?}");
    }
    let spans: Vec<_> = logs.iter().map(|l| span(l)).collect();
    let most = most_at_once(&spans, None);
    assert!(most <= 2, "{most} upstreams started at once: {spans:?}");
    hub.shutdown();
}

/// While priority work is under way (the server's model load), upstreams start one at a
/// time whatever the limit; once it is done, the others go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstreams_start_one_at_a_time_during_priority_work() {
    let dir = tempfile::tempdir().unwrap();
    let work = PriorityWork::new();
    let hub = hub(
        dir.path(),
        HubOptions {
            upstream_starts: 4,
            narrow_starts_while: Some(work.clone()),
            ..HubOptions::default()
        },
    );
    let mut ids = Vec::new();
    let logs: Vec<PathBuf> = (0..4)
        .map(|i| dir.path().join(format!("p{i}.log")))
        .collect();
    for (i, log) in logs.iter().enumerate() {
        ids.push(register(&hub, &format!("p{i}"), log, &["1", "legacy"]).await);
    }
    // The first start is done before the work ends (each takes about a second).
    let first = settled(&hub, &ids[0], Duration::from_secs(30)).await;
    assert_eq!(first.health.status, "ready", "{first:?}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let finished = now_ns();
    {
        let _done = work.finish_on_drop();
    }
    for id in &ids {
        let row = settled(&hub, id, Duration::from_secs(60)).await;
        assert_eq!(row.health.status, "ready", "{row:?}");
    }
    let spans: Vec<_> = logs.iter().map(|l| span(l)).collect();
    let most = most_at_once(&spans, Some(finished));
    assert_eq!(
        most, 1,
        "{most} upstreams started at once during the work: {spans:?}"
    );
    hub.shutdown();
}
