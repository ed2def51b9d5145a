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
//! - **One source's own allowance.** A source may carry ranges of its own (`allow_net`, set
//!   with a management credential): its syncs go through the same guard with the operator's
//!   list and these ranges, so an owner lets one source reach its own address without
//!   opening the whole server. Never the cloud metadata address (nor a range holding it:
//!   `0.0.0.0/0`), which only the operator's `--allow-net` can open.
//! - **What scheduled syncs will meet.** A server node records the network policy its
//!   scheduled syncs run under in the store (`sources.scheduled_net`: `open`, or `guarded:`
//!   and its allow-list) when its scheduler starts, so attaching a source from any process
//!   (the CLI beside a token server) warns when that policy would refuse it; and it makes
//!   every source whose last sync the guard refused under another policy due at once
//!   ([`Engine::start_source_scheduler`]), so a restart with a changed `--allow-net` retries
//!   them instead of waiting out their back-off.

use std::time::Duration;

use quarry_core::{Error, Result};
use quarry_sources::{Cidr, NetPolicy, Refused};

/// How long a claim on a source lasts without renewal unless `QUARRY_SOURCE_LEASE_SECS`
/// says otherwise ([`crate::SourceOptions::lease`]); a running sync renews it as it goes.
pub const SOURCE_LEASE: Duration = Duration::from_secs(600);

/// The shortest lease accepted (a renewal every half second).
pub const MIN_SOURCE_LEASE: Duration = Duration::from_secs(2);

/// The store setting where a server node records the network policy of its scheduled syncs
/// ([`SourceOptions::policy_key`]) when its scheduler starts.
pub(crate) const SCHEDULED_NET: &str = "sources.scheduled_net";

/// The most ranges one source's allowance holds.
const MAX_ALLOWED_RANGES: usize = 32;

/// Addresses no source's own allowance may hold: the cloud metadata service (IPv4, its
/// IPv6 forms and AWS's IPv6 address). Only the operator's `--allow-net` opens them.
const NEVER_PER_SOURCE: [&str; 3] = ["169.254.169.254", "::ffff:169.254.169.254", "fd00:ec2::254"];

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

    /// This node's network policy for scheduled syncs, as the store records it: `open`
    /// without the guard, else [`SourceOptions::guarded_key`].
    pub fn policy_key(&self) -> String {
        if self.guard_scheduled {
            self.guarded_key()
        } else {
            "open".to_owned()
        }
    }

    /// The policy a guarded sync on this node runs under: `guarded:` and the allow-list,
    /// comma-separated in the order given. What a sync the guard refused records.
    pub(crate) fn guarded_key(&self) -> String {
        let list: Vec<String> = self.net.allowed().iter().map(Cidr::to_string).collect();
        format!("guarded:{}", list.join(","))
    }
}

/// The policy a recorded key names: `None` for `open` (no guard), the allow-list for
/// `guarded:…`; `None` for anything else (nothing to warn about).
pub(crate) fn policy_of_key(key: &str) -> Option<NetPolicy> {
    NetPolicy::parse_allow_list(key.strip_prefix("guarded:")?).ok()
}

/// A source's own allowance checked: ranges or single addresses (`127.0.0.1/32`,
/// `10.1.2.3`, `::1`), at most [`MAX_ALLOWED_RANGES`], none holding the cloud metadata
/// address; duplicates dropped. `None` when empty. `InvalidInput` naming the bad entry.
pub(crate) fn parse_allow_net(entries: &[String]) -> Result<Option<Vec<Cidr>>> {
    let mut ranges: Vec<Cidr> = Vec::new();
    for entry in entries.iter().map(|e| e.trim()) {
        if entry.is_empty() {
            return Err(Error::invalid(
                "allow_net: an entry is empty; give address ranges such as 127.0.0.1/32",
            ));
        }
        let cidr: Cidr = entry.parse().map_err(|e| {
            Error::invalid(format!(
                "allow_net: {entry:?} is not an address range ({e}); give ranges such as \
                 127.0.0.1/32 or 10.0.0.0/8"
            ))
        })?;
        if let Some(ip) = NEVER_PER_SOURCE
            .iter()
            .filter_map(|a| a.parse::<std::net::IpAddr>().ok())
            .find(|ip| cidr.contains(*ip))
        {
            return Err(Error::invalid(format!(
                "allow_net: {entry} holds the cloud metadata address {ip}, which no source may \
                 reach: allow the source's own address (its /32 or /128)"
            )));
        }
        if !ranges.contains(&cidr) {
            ranges.push(cidr);
        }
    }
    if ranges.len() > MAX_ALLOWED_RANGES {
        return Err(Error::invalid(format!(
            "allow_net: at most {MAX_ALLOWED_RANGES} ranges"
        )));
    }
    Ok((!ranges.is_empty()).then_some(ranges))
}

/// Checks a source's own allowance as attaching or changing a source would (see
/// `allow_net` on [`crate::AddSource`]), for a surface that changes several settings at once
/// and must refuse a bad one before any changes.
pub fn check_allow_net(entries: &[String]) -> Result<()> {
    parse_allow_net(entries).map(|_| ())
}

/// An allowance as the store keeps it (comma-separated ranges).
pub(crate) fn allow_net_column(ranges: Option<&[Cidr]>) -> Option<String> {
    ranges.map(|r| r.iter().map(Cidr::to_string).collect::<Vec<_>>().join(","))
}

/// The allowance a source row holds (checked when it was set; a range that no longer reads
/// is left out rather than failing the sync).
pub(crate) fn allowance_of(column: Option<&str>) -> Vec<Cidr> {
    column
        .unwrap_or_default()
        .split(',')
        .filter_map(|r| r.trim().parse().ok())
        .collect()
}

/// `net` with `extra` ranges allowed too.
pub(crate) fn widened(net: &NetPolicy, extra: &[Cidr]) -> NetPolicy {
    let mut allow = net.allowed().to_vec();
    for c in extra {
        if !allow.contains(c) {
            allow.push(*c);
        }
    }
    NetPolicy::with_allowed(allow)
}

/// The ranges that would let a refusal through (`--allow-net` hints).
pub(crate) fn allow_hints(r: &Refused) -> Vec<String> {
    let mut hints: Vec<String> = match r {
        Refused::NoAllowedAddress { refused, .. } => {
            refused.iter().filter_map(Refused::allow_hint).collect()
        }
        other => other.allow_hint().into_iter().collect(),
    };
    hints.dedup();
    hints
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
