//! Model spec strings (`openai:text-embedding-3-small`, `BAAI/bge-m3`, `./models/e5`, …) and
//! the one place that turns them into loaded models.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::annotate::NoteAnnotator;
use crate::error::ModelError;
use crate::expand::{ChatOptions, OpenAiChatExpander, QueryExpander};
use crate::hub::{HubProgress, ModelCacheOptions};
use crate::hub::{expand_tilde, fetch_model, validate_repo_id, validate_revision};
use crate::local::{Engine, LocalEmbedder, LocalOptions, LocalReranker, RerankerOptions};
use crate::remote::ApiKey;
use crate::remote::{
    ApiReranker, ApiRerankerOptions, OllamaEmbedder, OllamaOptions, OpenAiEmbedder, OpenAiOptions,
    RerankApiFlavor,
};
use crate::types::{Embedder, Reranker};

const DEFAULT_OPENAI_BASE_URL: &str = "https://api.openai.com/v1";
const DEFAULT_OLLAMA_HOST: &str = "http://127.0.0.1:11434";
const GRAMMAR: &str = "expected a model directory (/path, ./path, ~/path), a Hugging Face model \
id ORG/NAME[@REVISION] or hf:NAME[@REVISION], openai:MODEL, ollama:MODEL, or a rerank API \
model jina:MODEL, cohere:MODEL, dashscope:MODEL or rerank:MODEL";

/// Where remote model endpoints and keys come from. [`ModelEnv::from_vars`] reads them from
/// variables the caller hands over (the CLI, from its start-up snapshot of the environment).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelEnv {
    /// OpenAI-compatible API base: `$QUARRY_OPENAI_BASE_URL`, else `$OPENAI_BASE_URL`, else
    /// `https://api.openai.com/v1`.
    pub openai_base_url: String,
    /// The OpenAI key: from `QUARRY_OPENAI_API_KEY` if that variable is set, else from
    /// `OPENAI_API_KEY`. When neither holds one no key is sent, except to `api.openai.com`,
    /// where its absence is an error naming the variable.
    pub openai_key: ApiKey,
    /// Ollama base URL: `$OLLAMA_HOST` (`http://` added when it has no scheme, port 11434 when
    /// it has neither scheme nor port), else `http://127.0.0.1:11434`.
    pub ollama_host: String,
    /// Full URL of the `/rerank` endpoint for `jina:` / `cohere:` / `dashscope:` /
    /// `rerank:` models: `$QUARRY_RERANK_URL`.
    pub rerank_url: Option<String>,
    /// The rerank API key, from `QUARRY_RERANK_API_KEY`. When it is unset no key is sent,
    /// except to the well-known hosted APIs, where its absence is an error.
    pub rerank_key: ApiKey,
    /// Hub endpoint, cache directory, token and offline mode for Hub models.
    pub hub: ModelCacheOptions,
    /// How local embedding models run their matrix products: `$QUARRY_EMBED_QUANTIZE`, as
    /// given (`int8`, or `none` / unset for fp32); [`open_embedder`] checks it.
    pub embed_quantize: Option<String>,
}

impl ModelEnv {
    /// The settings from the variables `get` answers (see the field docs).
    pub fn from_vars(get: &dyn Fn(&str) -> Option<String>) -> ModelEnv {
        let var = |k: &str| get(k).filter(|v| !v.trim().is_empty());
        let openai_key_var = if var("QUARRY_OPENAI_API_KEY").is_some() {
            "QUARRY_OPENAI_API_KEY"
        } else {
            "OPENAI_API_KEY"
        };
        ModelEnv {
            openai_base_url: var("QUARRY_OPENAI_BASE_URL")
                .or_else(|| var("OPENAI_BASE_URL"))
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|| DEFAULT_OPENAI_BASE_URL.to_string()),
            openai_key: ApiKey::new(openai_key_var, var(openai_key_var)),
            ollama_host: var("OLLAMA_HOST")
                .map(|h| ollama_base(&h))
                .unwrap_or_else(|| DEFAULT_OLLAMA_HOST.to_string()),
            rerank_url: var("QUARRY_RERANK_URL").map(|s| s.trim().to_string()),
            rerank_key: ApiKey::new("QUARRY_RERANK_API_KEY", var("QUARRY_RERANK_API_KEY")),
            hub: ModelCacheOptions::from_vars(get),
            embed_quantize: var("QUARRY_EMBED_QUANTIZE").map(|s| s.trim().to_ascii_lowercase()),
        }
    }
}

/// No variables: the public endpoints, no keys, a cache in the temporary directory.
impl Default for ModelEnv {
    fn default() -> Self {
        ModelEnv::from_vars(&|_| None)
    }
}

/// `OLLAMA_HOST` as Ollama's own client reads it: `0.0.0.0`, `:11434`, `host:port` or a URL.
fn ollama_base(host: &str) -> String {
    let host = host.trim().trim_end_matches('/');
    if let Some((scheme, rest)) = host.split_once("://") {
        return format!("{scheme}://{rest}");
    }
    let (hostport, path) = match host.find('/') {
        Some(i) => (&host[..i], &host[i..]),
        None => (host, ""),
    };
    let hostport = hostport.trim_end_matches(':');
    let hostport = if hostport.is_empty() || hostport.starts_with(':') {
        format!("127.0.0.1{hostport}")
    } else {
        hostport.to_string()
    };
    // `[::1]` is an IPv6 address without a port, `[::1]:5` one with.
    let has_port = match hostport.strip_prefix('[') {
        Some(v6) => v6.split_once(']').is_some_and(|(_, p)| p.starts_with(':')),
        None => hostport.contains(':'),
    };
    let hostport = if has_port {
        hostport
    } else {
        format!("{hostport}:11434")
    };
    format!("http://{hostport}{path}")
}

/// A parsed model spec string. [`ModelSpec::parse`] reads one; `Display` writes it back so that
/// `parse(spec.to_string()) == spec`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelSpec {
    /// A local Hugging Face-layout model directory (`~` expanded).
    Dir(PathBuf),
    /// A model on the Hugging Face Hub, fetched into the cache on first use.
    Hub {
        /// `ORG/NAME` (or a legacy `NAME`).
        repo: String,
        /// Branch, tag or commit; `main` by default.
        revision: String,
    },
    /// `openai:MODEL`: an OpenAI-compatible API (embeddings or chat, by use).
    OpenAi(String),
    /// `ollama:MODEL`: an Ollama server.
    Ollama(String),
    /// `jina:MODEL` / `cohere:MODEL` (Standard), `dashscope:MODEL` (DashScope) or
    /// `rerank:MODEL` (Auto): a `/rerank` API at `$QUARRY_RERANK_URL`.
    RerankApi {
        /// Request shape.
        flavor: RerankApiFlavor,
        /// Model name sent to the API.
        model: String,
    },
}

impl ModelSpec {
    /// Parses a spec:
    ///
    /// * `openai:MODEL`, `ollama:MODEL`;
    /// * `jina:MODEL`, `cohere:MODEL` (a Standard-shaped `/rerank` API), `dashscope:MODEL`
    ///   (DashScope-shaped), `rerank:MODEL` (shape chosen from the URL);
    /// * `hf:NAME[@REV]` or `hf:ORG/NAME[@REV]`: a Hub model;
    /// * a string starting with `/`, `./`, `../`, `~/` (or `~`), or naming an existing path: a
    ///   local directory, which must exist;
    /// * otherwise `ORG/NAME[@REV]`: a Hub model (revision `main` by default).
    ///
    /// Errors name the problem and the accepted forms.
    pub fn parse(s: &str) -> Result<ModelSpec, ModelError> {
        let s = s.trim();
        if s.is_empty() {
            return Err(ModelError::InvalidInput(format!(
                "the model spec is empty: {GRAMMAR}"
            )));
        }
        if let Some((scheme, rest)) = s.split_once(':') {
            let model = || -> Result<String, ModelError> {
                let model = rest.trim();
                if model.is_empty() {
                    return Err(ModelError::InvalidInput(format!(
                        "model spec {s:?} names no model after \"{scheme}:\", e.g. {scheme}:{}",
                        example_model(scheme)
                    )));
                }
                Ok(model.to_string())
            };
            let rerank = |flavor| {
                Ok(ModelSpec::RerankApi {
                    flavor,
                    model: model()?,
                })
            };
            match scheme.to_ascii_lowercase().as_str() {
                "openai" => return Ok(ModelSpec::OpenAi(model()?)),
                "ollama" => return Ok(ModelSpec::Ollama(model()?)),
                "jina" | "cohere" => return rerank(RerankApiFlavor::Standard),
                "dashscope" => return rerank(RerankApiFlavor::DashScope),
                "rerank" => return rerank(RerankApiFlavor::Auto),
                "hf" => return parse_hub(&model()?),
                _ => {}
            }
        }
        let path_like = s == "~"
            || ["/", "./", "../", "~/"].iter().any(|p| s.starts_with(p))
            || Path::new(s).is_absolute()
            || (cfg!(windows) && (s.starts_with(".\\") || s.starts_with("..\\")));
        if path_like || Path::new(s).exists() {
            let path = expand_tilde(s)?;
            if !path.is_dir() {
                return Err(ModelError::MissingDirectory { path });
            }
            return Ok(ModelSpec::Dir(path));
        }
        if !s.contains('/') {
            return Err(ModelError::InvalidInput(format!(
                "model spec {s:?} is not an existing directory and not a Hugging Face id \
                 ORG/NAME (write hf:{s} for a Hub model without an organisation, or ./{s} for a \
                 directory); {GRAMMAR}"
            )));
        }
        parse_hub(s)
    }
}

fn example_model(scheme: &str) -> &'static str {
    match scheme.to_ascii_lowercase().as_str() {
        "openai" => "text-embedding-3-small",
        "ollama" => "nomic-embed-text",
        "jina" => "jina-reranker-v2-base-multilingual",
        "cohere" => "rerank-v3.5",
        "dashscope" => "gte-rerank-v2",
        "hf" => "sentence-transformers/all-MiniLM-L6-v2",
        _ => "MODEL",
    }
}

/// `ORG/NAME[@REV]` → `Hub`.
fn parse_hub(id: &str) -> Result<ModelSpec, ModelError> {
    let (repo, revision) = match id.split_once('@') {
        Some((repo, rev)) => (repo, rev),
        None => (id, "main"),
    };
    validate_repo_id(repo)?;
    validate_revision(revision)?;
    Ok(ModelSpec::Hub {
        repo: repo.to_string(),
        revision: revision.to_string(),
    })
}

impl fmt::Display for ModelSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelSpec::Dir(p) => f.write_str(&p.to_string_lossy()),
            // Always `hf:` so that a local directory of the same name can never shadow it.
            ModelSpec::Hub { repo, revision } if revision == "main" => write!(f, "hf:{repo}"),
            ModelSpec::Hub { repo, revision } => write!(f, "hf:{repo}@{revision}"),
            ModelSpec::OpenAi(m) => write!(f, "openai:{m}"),
            ModelSpec::Ollama(m) => write!(f, "ollama:{m}"),
            ModelSpec::RerankApi { flavor, model } => {
                let scheme = match flavor {
                    RerankApiFlavor::Auto => "rerank",
                    // `cohere:` parses to the same flavor; both APIs take the same request.
                    RerankApiFlavor::Standard => "jina",
                    RerankApiFlavor::DashScope => "dashscope",
                };
                write!(f, "{scheme}:{model}")
            }
        }
    }
}

/// The key to use for `url`: `Some` when its variable holds one, or when `url` is a hosted API
/// that always needs a key (so that its absence is reported by name instead of as an HTTP
/// 401); `None` (no key) for local servers, which usually need none.
fn key_for(key: &ApiKey, url: &str) -> Option<ApiKey> {
    const HOSTED: [&str; 6] = [
        "api.openai.com",
        "api.jina.ai",
        "api.cohere.com",
        "api.cohere.ai",
        "dashscope.aliyuncs.com",
        "dashscope-intl.aliyuncs.com",
    ];
    let host = url
        .split_once("://")
        .map_or(url, |(_, rest)| rest)
        .split(['/', ':', '?'])
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    if key.is_set() || HOSTED.contains(&host.as_str()) {
        Some(key.clone())
    } else {
        None
    }
}

/// Loads an embedding model: a directory or Hub model runs locally ([`LocalEmbedder`]; Hub
/// models are fetched into `env.hub.cache_dir` first, reporting `progress`), `openai:` and
/// `ollama:` use those APIs (nothing is sent until the first embedding). A rerank API spec is
/// an error. `env.embed_quantize` `int8` runs local models on [`Engine::FusedInt8`]; an
/// unknown value is an error, whatever the model.
pub fn open_embedder(
    spec: &ModelSpec,
    env: &ModelEnv,
    progress: &dyn Fn(&HubProgress),
) -> Result<Box<dyn Embedder>, ModelError> {
    let engine = match env.embed_quantize.as_deref() {
        None | Some("none") => Engine::Fused,
        Some("int8") => Engine::FusedInt8,
        Some(other) => {
            return Err(ModelError::InvalidInput(format!(
                "QUARRY_EMBED_QUANTIZE is '{other}': use int8, or none for full precision"
            )));
        }
    };
    let local = LocalOptions {
        engine,
        ..LocalOptions::default()
    };
    match spec {
        ModelSpec::Dir(dir) => Ok(Box::new(LocalEmbedder::load(dir, local)?)),
        ModelSpec::Hub { repo, revision } => {
            let dir = fetch_model(repo, revision, &env.hub, progress)?;
            let opts = LocalOptions {
                // The directory is named after the revision ("main"): name the model by its id.
                name: Some(repo.clone()),
                ..local
            };
            Ok(Box::new(LocalEmbedder::load(&dir, opts)?))
        }
        ModelSpec::OpenAi(model) => {
            let mut opts = OpenAiOptions::new(env.openai_base_url.clone(), model.clone());
            opts.api_key = key_for(&env.openai_key, &env.openai_base_url);
            Ok(Box::new(OpenAiEmbedder::new(opts)?))
        }
        ModelSpec::Ollama(model) => {
            let mut opts = OllamaOptions::new(model.clone());
            opts.base_url = env.ollama_host.clone();
            Ok(Box::new(OllamaEmbedder::new(opts)?))
        }
        ModelSpec::RerankApi { .. } => Err(ModelError::InvalidInput(format!(
            "{spec} is a reranker, not an embedding model (use a model directory, a Hugging \
             Face id, openai:MODEL or ollama:MODEL)"
        ))),
    }
}

/// Loads a reranker: a directory or Hub model is a local cross-encoder ([`LocalReranker`]),
/// a rerank API spec uses `env.rerank_url` ([`ApiReranker`]). `openai:` and `ollama:` are
/// errors (they have no rerank endpoint).
pub fn open_reranker(
    spec: &ModelSpec,
    env: &ModelEnv,
    progress: &dyn Fn(&HubProgress),
) -> Result<Box<dyn Reranker>, ModelError> {
    match spec {
        ModelSpec::Dir(dir) => Ok(Box::new(LocalReranker::load(
            dir,
            RerankerOptions::default(),
        )?)),
        ModelSpec::Hub { repo, revision } => {
            let dir = fetch_model(repo, revision, &env.hub, progress)?;
            let opts = RerankerOptions {
                name: Some(repo.clone()),
                ..RerankerOptions::default()
            };
            Ok(Box::new(LocalReranker::load(&dir, opts)?))
        }
        ModelSpec::RerankApi { flavor, model } => {
            let url = env.rerank_url.as_deref().ok_or_else(|| {
                ModelError::InvalidInput(format!(
                    "{spec} needs the URL of the rerank endpoint: set QUARRY_RERANK_URL to it, \
                     e.g. https://api.jina.ai/v1/rerank, https://api.cohere.com/v2/rerank or \
                     https://dashscope.aliyuncs.com/api/v1/services/rerank/text-rerank/text-rerank \
                     (and the key in {})",
                    env.rerank_key.var()
                ))
            })?;
            let mut opts = ApiRerankerOptions::new(url, model.clone());
            opts.flavor = *flavor;
            opts.api_key = key_for(&env.rerank_key, url);
            Ok(Box::new(ApiReranker::new(opts)?))
        }
        ModelSpec::OpenAi(_) | ModelSpec::Ollama(_) => Err(ModelError::InvalidInput(format!(
            "{spec} cannot rerank: use a cross-encoder directory or Hugging Face id (e.g. \
             BAAI/bge-reranker-base) or a rerank API (jina:MODEL, cohere:MODEL, dashscope:MODEL \
             with QUARRY_RERANK_URL)"
        ))),
    }
}

/// Opens a query expander: `openai:MODEL` is a chat model behind `env.openai_base_url`;
/// `ollama:MODEL` uses Ollama's OpenAI-compatible `/v1` chat API. Anything else is an error.
/// Nothing is sent until the first expansion.
pub fn open_expander(
    spec: &ModelSpec,
    env: &ModelEnv,
) -> Result<Box<dyn QueryExpander>, ModelError> {
    Ok(Box::new(open_chat(spec, env, "expand queries")?))
}

/// Opens a note annotator (title, tags, summary of agents' notes): the same chat models as
/// [`open_expander`].
pub fn open_annotator(
    spec: &ModelSpec,
    env: &ModelEnv,
) -> Result<Box<dyn NoteAnnotator>, ModelError> {
    Ok(Box::new(open_chat(spec, env, "annotate notes")?))
}

/// A chat model for `purpose` (named in the error when `spec` is not one).
fn open_chat(
    spec: &ModelSpec,
    env: &ModelEnv,
    purpose: &str,
) -> Result<OpenAiChatExpander, ModelError> {
    match spec {
        ModelSpec::OpenAi(model) => {
            let mut opts = ChatOptions::new(env.openai_base_url.clone(), model.clone());
            opts.api_key = key_for(&env.openai_key, &env.openai_base_url);
            OpenAiChatExpander::new(opts)
        }
        ModelSpec::Ollama(model) => {
            let base = format!("{}/v1", env.ollama_host.trim_end_matches('/'));
            OpenAiChatExpander::new(ChatOptions::new(base, model.clone()))
        }
        _ => Err(ModelError::InvalidInput(format!(
            "{spec} cannot {purpose}: that needs a chat model, openai:MODEL (an \
             OpenAI-compatible chat API) or ollama:MODEL"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ollama_hosts() {
        assert_eq!(ollama_base("0.0.0.0"), "http://0.0.0.0:11434");
        assert_eq!(ollama_base(":11434"), "http://127.0.0.1:11434");
        assert_eq!(ollama_base("example.com:8080"), "http://example.com:8080");
        assert_eq!(ollama_base("example.com/"), "http://example.com:11434");
        assert_eq!(
            ollama_base("https://ollama.example.com/"),
            "https://ollama.example.com"
        );
        assert_eq!(ollama_base("http://h:1"), "http://h:1");
        assert_eq!(ollama_base("[::1]"), "http://[::1]:11434");
        assert_eq!(ollama_base("[::1]:5"), "http://[::1]:5");
        assert_eq!(ollama_base("h/proxy"), "http://h:11434/proxy");
    }

    #[test]
    fn hosted_keys() {
        let unset = ApiKey::new("SOME_UNSET_KEY", None);
        assert_eq!(
            key_for(&unset, "https://api.openai.com/v1").as_ref(),
            Some(&unset)
        );
        assert_eq!(key_for(&unset, "http://127.0.0.1:8080/v1"), None);
        assert_eq!(
            key_for(&unset, "https://api.jina.ai/v1/rerank").as_ref(),
            Some(&unset)
        );
        let set = ApiKey::new("SOME_KEY", Some("sk-1".into()));
        assert_eq!(
            key_for(&set, "http://127.0.0.1:8080/v1").as_ref(),
            Some(&set)
        );
    }
}
