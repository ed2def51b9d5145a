//! Which accepted connections are served: at most `max_connections` at once, at most
//! `max_connections_per_address` of them from one client address, and a connection that
//! sends nothing is closed after `first_byte_timeout` — so one client holding idle sockets
//! can take neither the node's slots nor its `/health` (issue 41, item 5). A connection
//! that finds no slot gets a short look: if it is a `GET /health` (a load balancer's probe)
//! it is answered from a small reserve; anything else is answered 503 and closed.
//!
//! Counts live in this process: connections are a node's own, never shared state.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Connections answered from the health reserve at once.
pub(crate) const HEALTH_RESERVE: usize = 16;

/// How long a connection without a slot may take to show its first bytes: a probe sends its
/// request with the handshake's last packet, so it is there as soon as the connection is.
const PROBE_WAIT: Duration = Duration::from_millis(100);

/// Connections without a slot being looked at at once; past it they are refused unread.
/// With [`HEALTH_RESERVE`], what a node may hold open beyond `max_connections`.
pub(crate) const PROBING_MAX: usize = 16;

/// What a connection holds while it is served; dropping it frees its slots.
pub(crate) struct Admitted {
    _permit: OwnedSemaphorePermit,
    _address: Option<AddressSlot>,
}

/// Why a connection was not admitted.
pub(crate) enum Refused {
    /// No slot, and not a health probe: answer 503 and close.
    Busy,
    /// Sent nothing within its deadline (or went away): close.
    Silent,
}

/// The admission state of one listener.
pub(crate) struct Admission {
    general: Arc<Semaphore>,
    reserve: Arc<Semaphore>,
    probing: Arc<Semaphore>,
    per_address: Arc<PerAddress>,
    first_byte_timeout: Duration,
}

impl Admission {
    pub(crate) fn new(
        max_connections: usize,
        max_per_address: usize,
        first_byte_timeout: Duration,
    ) -> Admission {
        Admission {
            general: Arc::new(Semaphore::new(max_connections.max(1))),
            reserve: Arc::new(Semaphore::new(HEALTH_RESERVE)),
            probing: Arc::new(Semaphore::new(PROBING_MAX)),
            per_address: Arc::new(PerAddress {
                max: max_per_address.max(1),
                open: Mutex::new(HashMap::new()),
            }),
            first_byte_timeout,
        }
    }

    /// At accept time, without waiting: a general slot and one of the address's, when both
    /// are free.
    pub(crate) fn try_admit(&self, peer: IpAddr) -> Option<Admitted> {
        let address = self.per_address.try_take(peer)?;
        let permit = self.general.clone().try_acquire_owned().ok()?;
        Some(Admitted {
            _permit: permit,
            _address: Some(address),
        })
    }

    /// At accept time, for a connection without a slot: leave to look at it
    /// ([`Admission::second_look`]), or `None` when too many are being looked at already
    /// (refuse it unread).
    pub(crate) fn try_look(&self) -> Option<OwnedSemaphorePermit> {
        self.probing.clone().try_acquire_owned().ok()
    }

    /// Waits for an admitted connection's first bytes: a connection silent past
    /// `first_byte_timeout` is not handed to the HTTP server at all.
    pub(crate) async fn first_bytes(&self, tcp: &TcpStream) -> Result<(), Refused> {
        // `peek`, not `readable()`: a newly accepted socket can report readiness before any
        // byte has arrived; `peek` waits for data (or the end of the stream).
        let mut one = [0u8; 1];
        match tokio::time::timeout(self.first_byte_timeout, tcp.peek(&mut one)).await {
            Ok(Ok(n)) if n > 0 => Ok(()),
            _ => Err(Refused::Silent),
        }
    }

    /// A connection that found no slot, looked at under `_looking`: answered from the
    /// health reserve if it is a `GET /health`, else refused.
    pub(crate) async fn second_look(
        &self,
        tcp: &TcpStream,
        _looking: OwnedSemaphorePermit,
    ) -> Result<Admitted, Refused> {
        let deadline = tokio::time::Instant::now() + PROBE_WAIT;
        let mut head = [0u8; 16];
        // Enough of the request line to tell (it may arrive in pieces), or the deadline.
        loop {
            let n = match tokio::time::timeout_at(deadline, tcp.peek(&mut head)).await {
                Ok(Ok(n)) if n > 0 => n,
                Ok(_) => return Err(Refused::Silent),
                Err(_) => return Err(Refused::Busy),
            };
            let probe = b"GET /health ";
            if n >= probe.len() || !probe.starts_with(&head[..n]) {
                if !is_health_probe(&head[..n]) {
                    return Err(Refused::Busy);
                }
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        let permit = self
            .reserve
            .clone()
            .try_acquire_owned()
            .map_err(|_| Refused::Busy)?;
        Ok(Admitted {
            _permit: permit,
            _address: None,
        })
    }
}

/// Whether a request starts as `GET /health` (with a query or not).
fn is_health_probe(head: &[u8]) -> bool {
    head.strip_prefix(b"GET /health")
        .is_some_and(|rest| matches!(rest.first(), Some(b' ' | b'?')))
}

/// Open connections per client address.
struct PerAddress {
    max: usize,
    open: Mutex<HashMap<IpAddr, usize>>,
}

impl PerAddress {
    fn try_take(self: &Arc<Self>, peer: IpAddr) -> Option<AddressSlot> {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let n = open.entry(peer).or_insert(0);
        if *n >= self.max {
            return None;
        }
        *n += 1;
        Some(AddressSlot {
            owner: self.clone(),
            peer,
        })
    }
}

/// One connection counted against its address.
struct AddressSlot {
    owner: Arc<PerAddress>,
    peer: IpAddr,
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let mut open = self.owner.open.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = open.get_mut(&self.peer) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.peer);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_probes_are_recognised_by_their_request_line() {
        assert!(is_health_probe(b"GET /health HTTP/1.1"));
        assert!(is_health_probe(b"GET /health?x=1 HT"));
        assert!(!is_health_probe(b"GET /healthz HTTP/1.1"));
        assert!(!is_health_probe(b"POST /health HTTP"));
        assert!(!is_health_probe(b"GET /heal"));
    }

    #[test]
    fn an_address_holds_at_most_its_share() {
        let a = Admission::new(8, 2, Duration::from_secs(1));
        let one: IpAddr = [10, 0, 0, 1].into();
        let two: IpAddr = [10, 0, 0, 2].into();
        let first = a.try_admit(one);
        let second = a.try_admit(one);
        assert!(first.is_some() && second.is_some());
        assert!(a.try_admit(one).is_none(), "a third from one address");
        assert!(a.try_admit(two).is_some(), "another address");
        drop(first);
        assert!(a.try_admit(one).is_some(), "a slot freed");
        // The general pool bounds every address together.
        let all = Admission::new(2, 2, Duration::from_secs(1));
        let _held = (all.try_admit(one), all.try_admit(two));
        assert!(all.try_admit([10, 0, 0, 3].into()).is_none());
    }
}
