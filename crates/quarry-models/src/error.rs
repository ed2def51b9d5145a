//! The single error type of this crate.

use std::path::PathBuf;

/// The files a local model directory must contain (Hugging Face layout).
pub const REQUIRED_FILES_HINT: &str = "a local model needs a Hugging Face-layout directory \
containing config.json, tokenizer.json and model.safetensors (pytorch_model.bin is accepted \
as a fallback), e.g. a copy of the model's Hub repository; downloading from the Hugging Face \
Hub needs network access, so when offline copy those files into the directory yourself";

/// Everything that can go wrong while loading or running a model.
///
/// Messages are meant for end users: they name the file, URL or setting at fault and say
/// what to do. Remote errors never contain the API key (it is scrubbed from any text that
/// comes back from a server as well).
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The model directory does not exist or is not a directory.
    #[error("model directory {} does not exist or is not a directory; {REQUIRED_FILES_HINT}", path.display())]
    MissingDirectory {
        /// The path given.
        path: PathBuf,
    },

    /// A required file is missing from the model directory.
    #[error("model directory {} has no {file}; {REQUIRED_FILES_HINT}", dir.display())]
    MissingFile {
        /// The model directory.
        dir: PathBuf,
        /// The missing file's name.
        file: String,
    },

    /// A file exists but could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        #[source]
        /// Why it could not be read.
        source: std::io::Error,
    },

    /// config.json (or another metadata file) is not valid or lacks a required field.
    #[error("invalid {}: {reason}", path.display())]
    InvalidConfig {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },

    /// The architecture is not one this crate can run.
    #[error("unsupported model in {}: {reason}", path.display())]
    UnsupportedModel {
        /// The model directory.
        path: PathBuf,
        /// Why it cannot run.
        reason: String,
    },

    /// tokenizer.json could not be loaded or a text could not be tokenized.
    #[error("tokenizer error ({}): {reason}", path.display())]
    Tokenizer {
        /// The tokenizer file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },

    /// The weights do not match config.json (missing tensor, wrong shape, unreadable file).
    #[error("cannot load weights from {}: {reason}", path.display())]
    Weights {
        /// The weights file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },

    /// The forward pass failed.
    #[error("inference failed: {0}")]
    Inference(String),

    /// An argument given by the caller is not acceptable.
    #[error("invalid input: {0}")]
    InvalidInput(String),

    /// The environment variable that should hold the API key is unset or empty.
    #[error("API key environment variable {var} is not set or empty")]
    MissingApiKey {
        /// The variable.
        var: String,
    },

    /// The request could not be sent or the response not received.
    #[error("request to {url} failed: {reason}")]
    Network {
        /// The URL, with any key removed.
        url: String,
        /// What failed.
        reason: String,
    },

    /// The server answered with a non-success HTTP status.
    #[error("{url} answered HTTP {status}{}: {body}", status_hint(*status))]
    HttpStatus {
        /// The URL, with any key removed.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The start of the response body, with any API key removed.
        body: String,
    },

    /// A model could not be downloaded from the Hugging Face Hub (offline mode, network
    /// failure, refused or missing). `reason` says which; the message says how to supply the
    /// model by hand.
    #[error("cannot fetch {repo} from {endpoint} ({reason}). Download the model on a machine \
with access and pass its directory (config.json, tokenizer.json, model.safetensors) as the \
model, e.g. QUARRY_EMBED_MODEL=/path/to/{}, or copy those files into {}",
        repo_basename(repo), dir.display())]
    HubFetch {
        /// The Hub model id, `org/name`.
        repo: String,
        /// The Hub endpoint, e.g. `https://huggingface.co`.
        endpoint: String,
        /// The cache directory the model would have been stored in.
        dir: PathBuf,
        /// What went wrong and, where it helps, what to do (set `HF_TOKEN`, check the id).
        reason: String,
    },

    /// The server answered 2xx but the body is not what the API promises.
    #[error("unexpected response from {url}: {reason}")]
    InvalidResponse {
        /// The URL, with any key removed.
        url: String,
        /// What is wrong with the body.
        reason: String,
    },
}

/// `all-MiniLM-L6-v2` for `sentence-transformers/all-MiniLM-L6-v2`.
fn repo_basename(repo: &str) -> &str {
    repo.rsplit('/').next().unwrap_or(repo)
}

fn status_hint(status: u16) -> &'static str {
    match status {
        401 => " (unauthorized: check the API key)",
        403 => " (forbidden: check the API key and its permissions)",
        404 => " (not found: check the base URL and model name)",
        413 => " (payload too large: lower the batch size)",
        429 => " (rate limited: retry later or lower the batch size)",
        500..=599 => " (server error)",
        _ => "",
    }
}

impl ModelError {
    pub(crate) fn inference(e: impl std::fmt::Display) -> Self {
        ModelError::Inference(e.to_string())
    }
}
