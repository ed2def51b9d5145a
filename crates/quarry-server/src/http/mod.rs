//! HTTP plumbing every surface shares: the error contract ([`ApiError`], [`ErrorCode`]),
//! extractors ([`Body`], [`Params`], [`count`]), the `/api/v1` envelopes ([`ok`], [`ok_list`]), the one
//! blocking runner ([`run_blocking`]), the Host/Origin guard and the listener's settings
//! ([`options::HttpOptions`]). Route modules (`api/`, `compat/`, `mcp/`) use this and
//! `auth/`; nothing here knows a route.

pub(crate) mod admission;
mod blocking;
pub(crate) mod consistency;
mod envelope;
mod error;
mod extract;
pub(crate) mod guard;
pub(crate) mod options;
mod page;

pub(crate) use blocking::{metered, run_blocking, run_blocking_raw};
pub(crate) use envelope::{base_url, html_escape, ok, ok_list};
pub(crate) use error::{ApiError, http_status, public_detail, status_of};
pub(crate) use extract::{Body, Params, count, nullable};
pub(crate) use page::{message_page, security_headers};
pub(crate) use quarry_core::ErrorCode;
