//! [`HttpOptions`], the HTTP listener's settings.

use std::net::IpAddr;
use std::time::Duration;

/// Default HTTP port (seed 001).
pub const DEFAULT_PORT: u16 = 18765;

/// HTTP listener settings.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Address to listen on.
    pub bind: IpAddr,
    /// Port to listen on (0: any free port).
    pub port: u16,
    /// Extra `Host` names accepted besides loopback names and the bind address.
    pub allowed_hosts: Vec<String>,
    /// Extra `Origin`s accepted besides loopback origins (e.g. `https://app.example`).
    pub allowed_origins: Vec<String>,
    /// Largest request body accepted (uploads have their own limit).
    pub max_body_bytes: usize,
    /// Longest a REST request may run (the MCP endpoint's streams are exempt).
    pub request_timeout: Duration,
    /// Longest a client may take to send a request's headers, counted from when the
    /// connection opens or its previous response ended: so also how long an idle
    /// connection stays open.
    pub header_timeout: Duration,
    /// Most connections served at once; one more is answered 503 and closed at once (a
    /// `GET /health` is still answered, from a small reserve).
    pub max_connections: usize,
    /// Most of those from one client address.
    pub max_connections_per_address: usize,
    /// Longest a new connection may stay silent before it is closed (at most
    /// `header_timeout`).
    pub first_byte_timeout: Duration,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            bind: IpAddr::from([127, 0, 0, 1]),
            port: DEFAULT_PORT,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            max_body_bytes: 4 << 20,
            request_timeout: Duration::from_secs(300),
            header_timeout: Duration::from_secs(30),
            max_connections: 512,
            max_connections_per_address: 128,
            first_byte_timeout: Duration::from_secs(10),
        }
    }
}
