//! Quarry's REST surfaces, one thin module each: parse the request, run the engine (or
//! directory, hub, chat) call through [`crate::http::run_blocking`], answer typed JSON.
//! A module here uses `http/`, `auth/` and `service/`, never another route module.

pub(crate) mod audit;
pub(crate) mod chat;
pub(crate) mod endpoints;
pub(crate) mod groups;
pub(crate) mod hub;
pub(crate) mod insight;
pub(crate) mod knowledge;
pub(crate) mod metadata;
pub(crate) mod metrics;
pub(crate) mod oauth;
pub(crate) mod pages;
pub(crate) mod policies;
pub(crate) mod qmd;
pub(crate) mod sign_in;
pub(crate) mod sources;
pub(crate) mod spaces;
pub(crate) mod tokens;
pub(crate) mod ui;
