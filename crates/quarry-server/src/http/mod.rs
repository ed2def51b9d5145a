//! HTTP plumbing every surface shares: the error contract ([`ApiError`], [`ErrorCode`]),
//! extractors ([`Body`], [`count`]), the `/api/v1` envelopes ([`ok`], [`ok_list`]), the one
//! blocking runner ([`run_blocking`]) and the Host/Origin guard. Route modules (`api/`,
//! `compat/`, `mcp/`) use this and `auth/`; nothing here knows a route.

mod blocking;
mod envelope;
mod error;
mod extract;
pub(crate) mod guard;

pub use blocking::{run_blocking, run_blocking_raw};
pub use envelope::{ok, ok_list};
pub use error::{ApiError, ErrorCode, http_status};
pub use extract::{Body, count};
