//! A loopback HTTP/1.1 server for tests.
//!
//! Quarry's tests talk to fake model APIs, a Hugging Face Hub look-alike, web-search backends,
//! custom-tool endpoints and hand-written SSE servers. They all need the same thing: listen on a
//! loopback port, read one request per connection, answer it from a closure, and remember what
//! was asked. This crate is that one server.
//!
//! ```
//! use quarry_test_http::{Reply, Server};
//!
//! let server = Server::start(|request| {
//!     if request.path() == "/hello" {
//!         Reply::ok("text/plain", "hi")
//!     } else {
//!         Reply::status(404, "text/plain", "not here")
//!     }
//! });
//! let url = server.url("/hello?x=1");
//! # let _ = url;
//! assert!(server.requests().is_empty());
//! ```
//!
//! Every connection runs on its own thread, so a handler may sleep (a slow backend) and a reply
//! may stay open (a live SSE stream) without holding up other requests. It works the same from
//! synchronous tests and from `#[tokio::test]`s: no async runtime is involved. Connections are
//! closed after one reply (`Connection: close`).

pub mod git;
mod server;

pub use server::{Reply, Request, Server, cgi, unused_port};
