//! This process as a node of the queue: its name, its lock in the data directory, and the
//! nodes that stopped.

use std::time::Duration;

use quarry_core::{Error, Result};
use quarry_engine::{Engine, owner_node};

/// This machine's name, as node names record it (`local` where the kernel does not say).
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty() && !h.contains(':'))
        .unwrap_or_else(|| "local".into())
}

/// This process as a node of the queue: `host:pid:start`, unique per process start. Its
/// workers' lease owners are `node:index`.
pub(crate) fn node_name() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{}:{}:{nanos:x}", host_name(), std::process::id())
}

/// How often a node running workers tells the store it is alive.
pub const NODE_HEARTBEAT: Duration = Duration::from_secs(5);
/// A node silent for this long is dead: any other node releases its job leases, so its
/// jobs are taken over without waiting for the leases to lapse.
pub const NODE_DEAD_AFTER: Duration = Duration::from_secs(15);

/// Registers this node in the data directory (`nodes/<name>.lock`, locked for the process's
/// life) and finds the nodes of the directory whose lock nobody holds: processes that died.
/// Their lock files go. Portable (file locks), and exact for the processes of one machine;
/// other machines' nodes are judged by their heartbeats.
pub(crate) fn local_nodes(engine: &Engine, node: &str) -> Result<(std::fs::File, Vec<String>)> {
    let dir = engine.data_dir().join("nodes");
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    let file_name = |n: &str| format!("{}.lock", n.replace('/', "_"));
    let own_path = dir.join(file_name(node));
    let own = std::fs::File::create(&own_path).map_err(|e| Error::io(&own_path, e))?;
    own.lock().map_err(|e| Error::io(&own_path, e))?;
    let mut dead = Vec::new();
    let entries = std::fs::read_dir(&dir).map_err(|e| Error::io(&dir, e))?;
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(name) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".lock"))
            .map(str::to_owned)
        else {
            continue;
        };
        if path == own_path {
            continue;
        }
        let Ok(file) = std::fs::File::options().write(true).open(&path) else {
            continue;
        };
        // Lockable: its process is gone (the kernel drops a dead process's locks).
        if file.try_lock().is_ok() {
            let _ = std::fs::remove_file(&path);
            dead.push(name);
        }
    }
    Ok((own, dead))
}

/// Releases the leases of owners whose node stopped sending heartbeats (killed, frozen,
/// cut off); returns how many jobs were released.
pub(crate) fn release_dead_nodes(engine: &Engine) -> Result<u64> {
    let live = engine.live_nodes(NODE_DEAD_AFTER)?;
    let dead = dead_owners(engine.job_lease_owners()?, &live);
    if dead.is_empty() {
        return Ok(0);
    }
    engine.expire_job_leases(&dead)
}

/// The lease owners (`node:index`) whose node is not among `live`.
fn dead_owners(owners: Vec<String>, live: &[String]) -> Vec<String> {
    owners
        .into_iter()
        .filter(|owner| {
            let node = owner_node(owner);
            !live.iter().any(|l| l == node)
        })
        .collect()
}

/// Whether another process of this data directory runs workers now — a `quarry serve` on
/// this machine, or another CLI processing its uploads: the lock of its node in `nodes/` is
/// held (see `local_nodes`). Call it before this process starts workers of its own (their
/// lock would count too).
pub fn workers_running_elsewhere(engine: &Engine) -> Result<bool> {
    let dir = engine.data_dir().join("nodes");
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(Error::io(&dir, e)),
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) != Some("lock") {
            continue;
        }
        let Ok(file) = std::fs::File::options().write(true).open(&path) else {
            continue;
        };
        // Lockable: its process is gone (the lock goes with `file`). Held: a live node.
        if let Err(std::fs::TryLockError::WouldBlock) = file.try_lock() {
            return Ok(true);
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_of_nodes_without_a_recent_heartbeat_are_dead() {
        let live = vec!["host:12:ab".to_owned(), "other:7:cd".to_owned()];
        let owners = vec![
            "host:12:ab:0".to_owned(), // a live node's worker
            "other:7:cd:3".to_owned(), // another live node's
            "host:12:ef:0".to_owned(), // the same pid, another start: a restarted process
            "gone:9:aa:1".to_owned(),  // a node that stopped
        ];
        assert_eq!(
            dead_owners(owners, &live),
            ["host:12:ef:0".to_owned(), "gone:9:aa:1".to_owned()]
        );
        let node = node_name();
        assert_eq!(node.split(':').count(), 3, "{node}");
    }
}
