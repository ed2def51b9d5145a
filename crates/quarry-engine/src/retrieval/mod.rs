//! Search: keyword, vector and hybrid retrieval, their scores, and passages for the knowledge surfaces.

pub mod calibration;
pub mod fusion;
pub(crate) mod hybrid;
pub(crate) mod knowledge_search;
pub(crate) mod passages;
pub(crate) mod search;
pub(crate) mod search_command;
