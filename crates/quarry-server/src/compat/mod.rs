//! Other products' APIs over Quarry's engine, each in its own wire shape: WeKnora's
//! knowledge search, Dify's External Knowledge API, QukaAI's MCP endpoint.

pub(crate) mod dify;
pub(crate) mod quka;
pub(crate) mod weknora;
