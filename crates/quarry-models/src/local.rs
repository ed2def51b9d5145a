//! Local BERT / XLM-RoBERTa models from a Hugging Face-layout directory, run with candle.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use candle_nn::{Linear, Module, VarBuilder};
use candle_transformers::models::{bert, xlm_roberta};
use serde::Deserialize;
use tokenizers::{Encoding, Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy};

use crate::error::ModelError;
use crate::fused::{FusedConfig, FusedEncoder};
use crate::kernels::Act;
use crate::types::{Embedder, ModelIdentity, Reranker};

/// Upper bound on tokens per forward batch as computed (the candle engine's padding included):
/// bounds the activations' memory.
const MAX_BATCH_TOKENS: usize = 16_384;
/// Default cap on sequence length (the brief: min(max_position_embeddings, 512)).
const DEFAULT_MAX_TOKENS: usize = 512;

// ---------------------------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------------------------

/// How token vectors become one sentence vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pooling {
    /// Mean over the tokens the attention mask covers (special tokens included).
    Mean,
    /// The first token (`[CLS]` / `<s>`).
    Cls,
    /// Element-wise maximum over the masked tokens.
    Max,
}

/// Which implementation runs the encoder. `Fused` and `Candle` read the same weights and
/// agree to ~1e-6; `FusedInt8` approximates them (cosine ≥ 0.99 to fp32 on the models tested).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Engine {
    /// candle matrix products with fused element-wise kernels (bias+GELU, bias+residual+
    /// LayerNorm, masked softmax, embedding+LayerNorm): the fast default.
    #[default]
    Fused,
    /// `Fused` with the layers' matrix products on int8 weights (quantised per output column
    /// at load) and int8 activations (quantised per row on the fly): about 1.5× the chunks/s
    /// on AVX2 CPUs, a quarter of the layers' weight memory, slightly different vectors.
    FusedInt8,
    /// `candle_transformers::models::bert::BertModel` / `xlm_roberta::XLMRobertaModel` as
    /// published: the reference implementation.
    Candle,
}

/// Texts prepended to queries and passages before tokenization.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Prefixes {
    /// Prepended to queries (`query: ` for e5 models).
    pub query: String,
    /// Prepended to passages (`passage: ` for e5 models).
    pub passage: String,
}

impl Prefixes {
    /// The prefixes `query` and `passage`.
    pub fn new(query: impl Into<String>, passage: impl Into<String>) -> Self {
        Prefixes {
            query: query.into(),
            passage: passage.into(),
        }
    }
}

/// Options for [`LocalEmbedder::load`]. `LocalOptions::default()` reads everything from the
/// model directory.
#[derive(Debug, Clone)]
pub struct LocalOptions {
    /// Run forward passes in a private rayon pool of this many threads. `None` uses the
    /// global pools (sized by `RAYON_NUM_THREADS` / `CANDLE_NUM_THREADS`, default: all
    /// physical cores).
    pub threads: Option<usize>,
    /// Texts per forward batch (default 32). Batches are also capped at 16,384 tokens as
    /// computed (the fused engine packs a batch without padding; the candle engine pads).
    pub batch_size: usize,
    /// Override the pooling read from `1_Pooling/config.json`.
    pub pooling: Option<Pooling>,
    /// Override the query / passage prefixes chosen from the model name.
    pub prefixes: Option<Prefixes>,
    /// Override whether vectors are L2-normalised.
    pub normalize: Option<bool>,
    /// Override the truncation length (never above the position table).
    pub max_tokens: Option<usize>,
    /// Encoder implementation (default [`Engine::Fused`]).
    pub engine: Engine,
    /// The name reported in [`ModelIdentity::name`] and used (with the directory name) to
    /// recognise the model family for prefixes and normalisation. `None`: derived from the
    /// directory path. Set it when the directory name says nothing about the model, e.g. the
    /// `main` revision directory of a Hub download (see [`crate::fetch_model`]).
    pub name: Option<String>,
}

impl Default for LocalOptions {
    fn default() -> Self {
        LocalOptions {
            name: None,
            threads: None,
            batch_size: 32,
            pooling: None,
            prefixes: None,
            normalize: None,
            max_tokens: None,
            engine: Engine::Fused,
        }
    }
}

/// Options for [`LocalReranker::load`].
#[derive(Debug, Clone)]
pub struct RerankerOptions {
    /// As [`LocalOptions::threads`].
    pub threads: Option<usize>,
    /// (query, passage) pairs per forward batch (default 16).
    pub batch_size: usize,
    /// Override the truncation length of a (query, passage) pair.
    pub max_tokens: Option<usize>,
    /// Encoder implementation (default [`Engine::Fused`]).
    pub engine: Engine,
    /// As [`LocalOptions::name`].
    pub name: Option<String>,
}

impl Default for RerankerOptions {
    fn default() -> Self {
        RerankerOptions {
            name: None,
            threads: None,
            batch_size: 16,
            max_tokens: None,
            engine: Engine::Fused,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// config.json
// ---------------------------------------------------------------------------------------------

fn default_gelu() -> String {
    "gelu".to_string()
}
fn default_type_vocab() -> usize {
    2
}
fn default_eps() -> f64 {
    1e-12
}

#[derive(Debug, Clone, Deserialize)]
struct RawConfig {
    model_type: Option<String>,
    #[serde(default)]
    architectures: Vec<String>,
    #[serde(rename = "_name_or_path", default)]
    name_or_path: Option<String>,
    vocab_size: usize,
    hidden_size: usize,
    num_hidden_layers: usize,
    num_attention_heads: usize,
    intermediate_size: usize,
    #[serde(default = "default_gelu")]
    hidden_act: String,
    max_position_embeddings: usize,
    #[serde(default = "default_type_vocab")]
    type_vocab_size: usize,
    #[serde(default = "default_eps")]
    layer_norm_eps: f64,
    pad_token_id: Option<usize>,
    position_embedding_type: Option<String>,
    num_labels: Option<usize>,
    id2label: Option<HashMap<String, String>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    Bert,
    XlmRoberta,
}

impl RawConfig {
    fn family(&self, path: &Path) -> Result<Family, ModelError> {
        let mt = match self.model_type.as_deref() {
            Some(mt) => mt.to_ascii_lowercase(),
            None => {
                // Old configs without model_type: fall back to the architecture name.
                let arch = self.architectures.first().map(|a| a.to_ascii_lowercase());
                match arch.as_deref() {
                    Some(a) if a.starts_with("xlmroberta") || a.starts_with("roberta") => {
                        "xlm-roberta".to_string()
                    }
                    Some(a) if a.starts_with("bert") => "bert".to_string(),
                    _ => {
                        return Err(ModelError::InvalidConfig {
                            path: path.to_path_buf(),
                            reason: "no `model_type` (expected \"bert\" or \"xlm-roberta\")"
                                .to_string(),
                        });
                    }
                }
            }
        };
        match mt.as_str() {
            "bert" => Ok(Family::Bert),
            "xlm-roberta" | "xlm_roberta" | "roberta" | "camembert" => Ok(Family::XlmRoberta),
            other => Err(ModelError::UnsupportedModel {
                path: path.to_path_buf(),
                reason: format!(
                    "model_type \"{other}\" is not supported; supported: \"bert\", \"xlm-roberta\" \
                     (also \"roberta\", \"camembert\")"
                ),
            }),
        }
    }

    fn validate(&self, path: &Path) -> Result<(), ModelError> {
        let bad = |reason: String| ModelError::InvalidConfig {
            path: path.to_path_buf(),
            reason,
        };
        if self.hidden_size == 0 || self.num_attention_heads == 0 || self.num_hidden_layers == 0 {
            return Err(bad(
                "hidden_size, num_attention_heads and num_hidden_layers must be > 0".into(),
            ));
        }
        if !self.hidden_size.is_multiple_of(self.num_attention_heads) {
            return Err(bad(format!(
                "hidden_size {} is not a multiple of num_attention_heads {}",
                self.hidden_size, self.num_attention_heads
            )));
        }
        if let Some(p) = &self.position_embedding_type
            && p != "absolute"
        {
            return Err(ModelError::UnsupportedModel {
                path: path.to_path_buf(),
                reason: format!(
                    "position_embedding_type \"{p}\" is not supported (only \"absolute\")"
                ),
            });
        }
        if self.type_vocab_size == 0 {
            return Err(bad("type_vocab_size must be > 0".into()));
        }
        Ok(())
    }

    fn pad_id(&self, family: Family) -> usize {
        self.pad_token_id.unwrap_or(match family {
            Family::Bert => 0,
            Family::XlmRoberta => 1,
        })
    }

    /// Longest input the position table allows (XLM-R numbers positions from pad_id + 1).
    fn position_limit(&self, family: Family) -> usize {
        match family {
            Family::Bert => self.max_position_embeddings,
            Family::XlmRoberta => self
                .max_position_embeddings
                .saturating_sub(self.pad_id(family) + 1),
        }
    }

    fn bert_config(&self, path: &Path) -> Result<bert::Config, ModelError> {
        let hidden_act = match self.hidden_act.as_str() {
            "gelu" => bert::HiddenAct::Gelu,
            "gelu_new" | "gelu_pytorch_tanh" | "gelu_approximate" | "gelu_fast" => {
                bert::HiddenAct::GeluApproximate
            }
            "relu" => bert::HiddenAct::Relu,
            other => {
                return Err(ModelError::UnsupportedModel {
                    path: path.to_path_buf(),
                    reason: format!("hidden_act \"{other}\" is not supported"),
                });
            }
        };
        Ok(bert::Config {
            vocab_size: self.vocab_size,
            hidden_size: self.hidden_size,
            num_hidden_layers: self.num_hidden_layers,
            num_attention_heads: self.num_attention_heads,
            intermediate_size: self.intermediate_size,
            hidden_act,
            hidden_dropout_prob: 0.0,
            max_position_embeddings: self.max_position_embeddings,
            type_vocab_size: self.type_vocab_size,
            initializer_range: 0.02,
            layer_norm_eps: self.layer_norm_eps,
            pad_token_id: self.pad_id(Family::Bert),
            position_embedding_type: bert::PositionEmbeddingType::Absolute,
            use_cache: false,
            classifier_dropout: None,
            model_type: Some("bert".to_string()),
        })
    }

    fn fused_config(
        &self,
        family: Family,
        path: &Path,
        int8: bool,
    ) -> Result<FusedConfig, ModelError> {
        let act = match self.hidden_act.as_str() {
            "gelu" => Act::GeluErf,
            "gelu_new" | "gelu_pytorch_tanh" | "gelu_approximate" | "gelu_fast" => Act::GeluTanh,
            "relu" => Act::Relu,
            other => {
                return Err(ModelError::UnsupportedModel {
                    path: path.to_path_buf(),
                    reason: format!("hidden_act \"{other}\" is not supported"),
                });
            }
        };
        Ok(FusedConfig {
            vocab_size: self.vocab_size,
            hidden_size: self.hidden_size,
            intermediate_size: self.intermediate_size,
            num_layers: self.num_hidden_layers,
            num_heads: self.num_attention_heads,
            max_positions: self.max_position_embeddings,
            type_vocab_size: self.type_vocab_size,
            eps: self.layer_norm_eps,
            act,
            xlmr_pad: match family {
                Family::Bert => None,
                Family::XlmRoberta => Some(self.pad_id(family) as u32),
            },
            int8,
        })
    }

    fn xlmr_config(&self, path: &Path) -> Result<xlm_roberta::Config, ModelError> {
        let hidden_act = match self.hidden_act.as_str() {
            "gelu" => candle_nn::Activation::Gelu,
            "gelu_new" | "gelu_fast" => candle_nn::Activation::NewGelu,
            "gelu_pytorch_tanh" | "gelu_approximate" => candle_nn::Activation::GeluPytorchTanh,
            "relu" => candle_nn::Activation::Relu,
            other => {
                return Err(ModelError::UnsupportedModel {
                    path: path.to_path_buf(),
                    reason: format!("hidden_act \"{other}\" is not supported"),
                });
            }
        };
        Ok(xlm_roberta::Config {
            hidden_size: self.hidden_size,
            layer_norm_eps: self.layer_norm_eps,
            attention_probs_dropout_prob: 0.0,
            hidden_dropout_prob: 0.0,
            num_attention_heads: self.num_attention_heads,
            position_embedding_type: "absolute".to_string(),
            intermediate_size: self.intermediate_size,
            hidden_act,
            num_hidden_layers: self.num_hidden_layers,
            vocab_size: self.vocab_size,
            max_position_embeddings: self.max_position_embeddings,
            type_vocab_size: self.type_vocab_size,
            pad_token_id: self.pad_id(Family::XlmRoberta) as u32,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Loading a model directory
// ---------------------------------------------------------------------------------------------

enum Encoder {
    Fused(FusedEncoder),
    Bert(bert::BertModel),
    XlmRoberta(xlm_roberta::XLMRobertaModel),
}

/// Everything an embedder and a reranker share: tokenizer, encoder, batching.
struct Core {
    weights_path: PathBuf,
    cfg: RawConfig,
    family: Family,
    encoder: Encoder,
    tokenizer: Tokenizer,
    tokenizer_path: PathBuf,
    pad_id: u32,
    max_tokens: usize,
    batch_size: usize,
    pool: Option<rayon::ThreadPool>,
}

/// Output of the metadata/weight loading shared by both model kinds.
struct Loaded {
    core: Core,
    /// Weights with the encoder prefix stripped (heads read `pooler.*`, `classifier.*`).
    vb: VarBuilder<'static>,
    tensor_shapes: HashMap<String, Vec<usize>>,
    identity_name: String,
    revision: String,
}

fn read_text(path: &Path) -> Result<String, ModelError> {
    std::fs::read_to_string(path).map_err(|source| ModelError::Io {
        path: path.to_path_buf(),
        source,
    })
}

fn read_json_opt(path: &Path) -> Result<Option<serde_json::Value>, ModelError> {
    if !path.is_file() {
        return Ok(None);
    }
    let text = read_text(path)?;
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| ModelError::InvalidConfig {
            path: path.to_path_buf(),
            reason: format!("not valid JSON: {e}"),
        })
}

/// `sha256:` + the first 16 hex digits of the file's SHA-256.
fn file_revision(path: &Path) -> Result<String, ModelError> {
    use sha2::{Digest, Sha256};
    let io_err = |source| ModelError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = std::fs::File::open(path).map_err(io_err)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).map_err(io_err)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    let digest = hasher.finalize();
    let hex: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    Ok(format!("sha256:{hex}"))
}

/// A readable model name: the directory name, or for generic names (`model`, a Hub snapshot
/// hash) the enclosing `models--org--name` / parent directory.
fn model_name(dir: &Path, cfg: &RawConfig) -> String {
    let comps: Vec<String> = dir
        .components()
        .filter_map(|c| match c {
            std::path::Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect();
    for c in comps.iter().rev() {
        if let Some(rest) = c.strip_prefix("models--") {
            return rest.replacen("--", "/", 1);
        }
    }
    let generic = |s: &str| {
        let l = s.to_ascii_lowercase();
        l == "model"
            || l == "models"
            || l == "snapshots"
            || (s.len() == 40 && s.chars().all(|c| c.is_ascii_hexdigit()))
    };
    for c in comps.iter().rev() {
        if !generic(c) {
            return c.clone();
        }
    }
    cfg.name_or_path
        .clone()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "local-model".to_string())
}

fn name_tokens(name: &str) -> Vec<String> {
    name.to_ascii_lowercase()
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

const BGE_EN_QUERY: &str = "Represent this sentence for searching relevant passages: ";
const BGE_ZH_QUERY: &str = "为这个句子生成表示以用于检索相关文章：";

/// Query / passage prefixes: sentence-transformers `prompts`, else name heuristics.
fn default_prefixes(dir: &Path, names: &[&str]) -> Result<Prefixes, ModelError> {
    if let Some(v) = read_json_opt(&dir.join("config_sentence_transformers.json"))?
        && let Some(prompts) = v.get("prompts").and_then(|p| p.as_object())
    {
        let get = |k: &str| prompts.get(k).and_then(|x| x.as_str()).map(str::to_string);
        let query = get("query").unwrap_or_default();
        let passage = get("passage")
            .or_else(|| get("document"))
            .unwrap_or_default();
        if !query.is_empty() || !passage.is_empty() {
            return Ok(Prefixes { query, passage });
        }
    }
    let tokens: Vec<String> = names.iter().flat_map(|n| name_tokens(n)).collect();
    let has = |t: &str| tokens.iter().any(|x| x == t);
    if has("e5") {
        return Ok(Prefixes::new("query: ", "passage: "));
    }
    if has("bge") {
        if has("m3") || has("reranker") {
            return Ok(Prefixes::default());
        }
        if has("zh") {
            return Ok(Prefixes::new(BGE_ZH_QUERY, ""));
        }
        return Ok(Prefixes::new(BGE_EN_QUERY, ""));
    }
    Ok(Prefixes::default())
}

fn is_known_family(names: &[&str]) -> bool {
    names.iter().flat_map(|n| name_tokens(n)).any(|t| {
        matches!(t.as_str(), "e5" | "bge" | "gte" | "minilm" | "mpnet") || t.starts_with("minilm")
    })
}

/// Reads modules.json / 1_Pooling: (pooling, normalize-listed, modules.json present).
fn sentence_transformers_meta(dir: &Path) -> Result<(Option<Pooling>, bool, bool), ModelError> {
    let modules_path = dir.join("modules.json");
    let Some(modules) = read_json_opt(&modules_path)? else {
        // No modules.json: still honour a bare 1_Pooling/config.json.
        return Ok((
            pooling_config(&dir.join("1_Pooling/config.json"))?,
            false,
            false,
        ));
    };
    let list = modules
        .as_array()
        .ok_or_else(|| ModelError::InvalidConfig {
            path: modules_path.clone(),
            reason: "expected a JSON array of modules".into(),
        })?;
    let mut pooling = None;
    let mut normalize = false;
    for m in list {
        let ty = m.get("type").and_then(|t| t.as_str()).unwrap_or("");
        if ty.ends_with(".Pooling") {
            let sub = m
                .get("path")
                .and_then(|p| p.as_str())
                .unwrap_or("1_Pooling");
            pooling = pooling_config(&dir.join(sub).join("config.json"))?;
        } else if ty.ends_with(".Normalize") {
            normalize = true;
        }
    }
    Ok((pooling, normalize, true))
}

fn pooling_config(path: &Path) -> Result<Option<Pooling>, ModelError> {
    let Some(v) = read_json_opt(path)? else {
        return Ok(None);
    };
    let flag = |k: &str| v.get(k).and_then(|x| x.as_bool()).unwrap_or(false);
    if let Some(mode) = v.get("pooling_mode").and_then(|m| m.as_str()) {
        return match mode {
            "mean" => Ok(Some(Pooling::Mean)),
            "cls" => Ok(Some(Pooling::Cls)),
            "max" => Ok(Some(Pooling::Max)),
            other => Err(ModelError::UnsupportedModel {
                path: path.to_path_buf(),
                reason: format!("pooling_mode \"{other}\" is not supported (mean, cls, max)"),
            }),
        };
    }
    let modes = [
        ("pooling_mode_cls_token", Some(Pooling::Cls)),
        ("pooling_mode_mean_tokens", Some(Pooling::Mean)),
        ("pooling_mode_max_tokens", Some(Pooling::Max)),
        ("pooling_mode_mean_sqrt_len_tokens", None),
        ("pooling_mode_weightedmean_tokens", None),
        ("pooling_mode_lasttoken", None),
    ];
    let set: Vec<_> = modes.iter().filter(|(k, _)| flag(k)).collect();
    match set.as_slice() {
        [] => Ok(None),
        [(_, Some(p))] => Ok(Some(*p)),
        _ => Err(ModelError::UnsupportedModel {
            path: path.to_path_buf(),
            reason: format!(
                "pooling {:?} is not supported (exactly one of cls / mean / max tokens)",
                set.iter().map(|(k, _)| *k).collect::<Vec<_>>()
            ),
        }),
    }
}

fn sentence_max_seq_length(dir: &Path) -> Result<Option<usize>, ModelError> {
    Ok(read_json_opt(&dir.join("sentence_bert_config.json"))?
        .and_then(|v| v.get("max_seq_length").and_then(|x| x.as_u64()))
        .map(|x| x as usize))
}

/// Loads every tensor of the weights file, as F32-convertible candle tensors.
fn load_tensors(path: &Path) -> Result<HashMap<String, Tensor>, ModelError> {
    let werr = |e: candle_core::Error| ModelError::Weights {
        path: path.to_path_buf(),
        reason: e.to_string(),
    };
    let is_safetensors = path
        .extension()
        .map(|e| e == "safetensors")
        .unwrap_or(false);
    if is_safetensors {
        // `load` memory-maps the file and copies each tensor into owned storage; the map is
        // released before returning.
        candle_core::safetensors::load(path, &Device::Cpu).map_err(werr)
    } else {
        let v = candle_core::pickle::read_all(path).map_err(werr)?;
        Ok(v.into_iter().collect())
    }
}

/// Strips the encoder prefix (`bert.`, `roberta.`, `model.`, …) and renames the TF-era
/// `LayerNorm.gamma/beta` to `weight/bias`.
fn normalize_names(
    tensors: HashMap<String, Tensor>,
    path: &Path,
) -> Result<HashMap<String, Tensor>, ModelError> {
    const ANCHOR: &str = "embeddings.word_embeddings.weight";
    let prefix = tensors
        .keys()
        .filter_map(|k| k.strip_suffix(ANCHOR))
        .min_by_key(|p| p.len())
        .map(str::to_string)
        .ok_or_else(|| ModelError::Weights {
            path: path.to_path_buf(),
            reason: format!(
                "no tensor named `{ANCHOR}` (with or without a `bert.` / `roberta.` prefix): \
                 not a BERT / XLM-R checkpoint"
            ),
        })?;
    let mut out = HashMap::with_capacity(tensors.len());
    for (k, v) in tensors {
        let mut name = k.strip_prefix(prefix.as_str()).unwrap_or(&k).to_string();
        if let Some(base) = name.strip_suffix(".gamma") {
            name = format!("{base}.weight");
        } else if let Some(base) = name.strip_suffix(".beta") {
            name = format!("{base}.bias");
        }
        out.insert(name, v);
    }
    Ok(out)
}

fn build_pool(threads: Option<usize>) -> Result<Option<rayon::ThreadPool>, ModelError> {
    match threads {
        None => Ok(None),
        Some(0) => Err(ModelError::InvalidInput("threads must be > 0".into())),
        Some(n) => rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .thread_name(|i| format!("quarry-models-{i}"))
            .build()
            .map(Some)
            .map_err(|e| ModelError::InvalidInput(format!("cannot start {n} threads: {e}"))),
    }
}

fn load_dir(
    dir: &Path,
    engine: Engine,
    threads: Option<usize>,
    batch_size: usize,
    max_tokens_override: Option<usize>,
    name_override: Option<&str>,
    default_max_tokens: impl FnOnce(&Path) -> Result<Option<usize>, ModelError>,
) -> Result<Loaded, ModelError> {
    if !dir.is_dir() {
        return Err(ModelError::MissingDirectory {
            path: dir.to_path_buf(),
        });
    }
    if batch_size == 0 {
        return Err(ModelError::InvalidInput("batch_size must be > 0".into()));
    }
    let config_path = dir.join("config.json");
    let tokenizer_path = dir.join("tokenizer.json");
    let weights_path = ["model.safetensors", "pytorch_model.bin"]
        .iter()
        .map(|f| dir.join(f))
        .find(|p| p.is_file());
    let mut missing = Vec::new();
    if !config_path.is_file() {
        missing.push("config.json");
    }
    if !tokenizer_path.is_file() {
        missing.push("tokenizer.json");
    }
    if weights_path.is_none() {
        missing.push("model.safetensors");
    }
    if !missing.is_empty() {
        if missing.len() == 1
            && missing[0] == "model.safetensors"
            && dir.join("model.safetensors.index.json").is_file()
        {
            return Err(ModelError::UnsupportedModel {
                path: dir.to_path_buf(),
                reason: "sharded weights (model.safetensors.index.json) are not supported; merge them into one model.safetensors".into(),
            });
        }
        return Err(ModelError::MissingFile {
            dir: dir.to_path_buf(),
            file: missing.join(", "),
        });
    }
    let weights_path = weights_path.unwrap_or_else(|| dir.join("model.safetensors"));

    let cfg_text = read_text(&config_path)?;
    let cfg: RawConfig =
        serde_json::from_str(&cfg_text).map_err(|e| ModelError::InvalidConfig {
            path: config_path.clone(),
            reason: e.to_string(),
        })?;
    let family = cfg.family(&config_path)?;
    cfg.validate(&config_path)?;

    let mut tokenizer =
        Tokenizer::from_file(&tokenizer_path).map_err(|e| ModelError::Tokenizer {
            path: tokenizer_path.clone(),
            reason: e.to_string(),
        })?;
    // tokenizer.json may carry fixed padding / truncation (MiniLM: pad to 128): we batch ourselves.
    tokenizer.with_padding(None);
    tokenizer
        .with_truncation(None)
        .map_err(|e| ModelError::Tokenizer {
            path: tokenizer_path.clone(),
            reason: e.to_string(),
        })?;

    let position_limit = cfg.position_limit(family);
    if position_limit < 8 {
        return Err(ModelError::InvalidConfig {
            path: config_path,
            reason: format!(
                "max_position_embeddings {} leaves room for only {position_limit} tokens",
                cfg.max_position_embeddings
            ),
        });
    }
    let max_tokens = match max_tokens_override {
        Some(m) => m.clamp(8, position_limit),
        None => {
            let meta = default_max_tokens(dir)?.unwrap_or(usize::MAX);
            position_limit.min(DEFAULT_MAX_TOKENS).min(meta.max(8))
        }
    };

    let tensors = normalize_names(load_tensors(&weights_path)?, &weights_path)?;
    let tensor_shapes: HashMap<String, Vec<usize>> = tensors
        .iter()
        .map(|(k, v)| (k.clone(), v.dims().to_vec()))
        .collect();
    let vb = VarBuilder::from_tensors(tensors, DType::F32, &Device::Cpu);
    let werr = |e: candle_core::Error| ModelError::Weights {
        path: weights_path.clone(),
        reason: e.to_string(),
    };
    let encoder = match (engine, family) {
        (Engine::Fused | Engine::FusedInt8, _) => Encoder::Fused(
            FusedEncoder::load(
                &vb,
                cfg.fused_config(family, &config_path, engine == Engine::FusedInt8)?,
            )
            .map_err(werr)?,
        ),
        (Engine::Candle, Family::Bert) => Encoder::Bert(
            bert::BertModel::load(vb.clone(), &cfg.bert_config(&config_path)?).map_err(werr)?,
        ),
        (Engine::Candle, Family::XlmRoberta) => Encoder::XlmRoberta(
            xlm_roberta::XLMRobertaModel::new(&cfg.xlmr_config(&config_path)?, vb.clone())
                .map_err(werr)?,
        ),
    };

    let revision = file_revision(&weights_path)?;
    let identity_name = match name_override.map(str::trim).filter(|n| !n.is_empty()) {
        Some(name) => name.to_string(),
        None => model_name(dir, &cfg),
    };
    let pad_id = cfg.pad_id(family) as u32;
    Ok(Loaded {
        core: Core {
            weights_path,
            cfg,
            family,
            encoder,
            tokenizer,
            tokenizer_path,
            pad_id,
            max_tokens,
            batch_size,
            pool: build_pool(threads)?,
        },
        vb,
        tensor_shapes,
        identity_name,
        revision,
    })
}

/// One tokenized input ready for batching.
struct Item {
    ids: Vec<u32>,
    type_ids: Vec<u32>,
}

impl Core {
    fn engine(&self) -> Engine {
        match &self.encoder {
            Encoder::Fused(f) if f.int8() => Engine::FusedInt8,
            Encoder::Fused(_) => Engine::Fused,
            _ => Engine::Candle,
        }
    }

    fn tok_err(&self, e: impl std::fmt::Display) -> ModelError {
        ModelError::Tokenizer {
            path: self.tokenizer_path.clone(),
            reason: e.to_string(),
        }
    }

    /// Truncates a single-sequence encoding to `max_tokens`, keeping the trailing special
    /// tokens (`[SEP]` / `</s>`).
    fn truncate_single(&self, enc: &Encoding) -> Item {
        let ids = enc.get_ids();
        let n = ids.len();
        let max = self.max_tokens;
        if n <= max {
            return Item {
                ids: ids.to_vec(),
                type_ids: vec![0; n],
            };
        }
        let special = enc.get_special_tokens_mask();
        let trailing = special.iter().rev().take_while(|&&s| s == 1).count();
        let trailing = trailing.min(max / 2);
        let mut out = Vec::with_capacity(max);
        out.extend_from_slice(&ids[..max - trailing]);
        out.extend_from_slice(&ids[n - trailing..]);
        Item {
            ids: out,
            type_ids: vec![0; max],
        }
    }

    fn encode_singles(&self, texts: Vec<String>) -> Result<Vec<Item>, ModelError> {
        let encs = self
            .tokenizer
            .encode_batch_fast(texts, true)
            .map_err(|e| self.tok_err(e))?;
        Ok(encs.iter().map(|e| self.truncate_single(e)).collect())
    }

    fn run_in_pool<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match &self.pool {
            Some(pool) => pool.install(f),
            None => f(),
        }
    }

    /// Runs the encoder over `items` in length-sorted batches (at most `batch_size` texts and
    /// [`MAX_BATCH_TOKENS`] tokens as computed) and hands each batch's last hidden state to
    /// `sink(original_indices, lengths, hidden [rows, H], starts)`: text `r`'s tokens are rows
    /// `starts[r]..starts[r] + lengths[r]`. The fused engine packs a batch (no padding, so a
    /// short text costs only its own tokens); the candle engine pads each text to the
    /// batch's longest.
    fn for_each_batch(
        &self,
        items: &[Item],
        mut sink: impl FnMut(&[usize], &[usize], &Tensor, &[usize]) -> Result<(), ModelError> + Send,
    ) -> Result<(), ModelError> {
        // An empty encoding (a tokenizer without special tokens, an empty text) is one pad.
        let len_of = |i: usize| items[i].ids.len().max(1);
        let mut order: Vec<usize> = (0..items.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(len_of(i)));
        let packed = matches!(self.encoder, Encoder::Fused(_));
        self.run_in_pool(|| {
            let mut start = 0;
            while start < order.len() {
                let longest = len_of(order[start]);
                let (mut end, mut tokens) = (start, 0);
                while end < order.len() && end - start < self.batch_size {
                    let n = len_of(order[end]);
                    let cost = if packed {
                        tokens + n
                    } else {
                        (end - start + 1) * longest
                    };
                    if end > start && cost > MAX_BATCH_TOKENS {
                        break;
                    }
                    tokens += n;
                    end += 1;
                }
                let batch = &order[start..end];
                let lens: Vec<usize> = batch.iter().map(|&i| len_of(i)).collect();
                let (hidden, starts) = if packed {
                    self.forward_packed(items, batch, &lens)?
                } else {
                    self.forward_padded(items, batch, &lens, longest)?
                };
                sink(batch, &lens, &hidden, &starts)?;
                start = end;
            }
            Ok(())
        })
    }

    /// The texts `batch` of `items` one after another: hidden `[Σ lens, H]` and each text's
    /// first row.
    fn forward_packed(
        &self,
        items: &[Item],
        batch: &[usize],
        lens: &[usize],
    ) -> Result<(Tensor, Vec<usize>), ModelError> {
        let Encoder::Fused(m) = &self.encoder else {
            return Err(ModelError::Inference(
                "internal: only the fused encoder runs packed batches".into(),
            ));
        };
        let total: usize = lens.iter().sum();
        let use_types = self.cfg.type_vocab_size > 1;
        let (mut ids, mut types) = (Vec::with_capacity(total), vec![0u32; total]);
        let mut starts = Vec::with_capacity(batch.len());
        for &i in batch {
            let it = &items[i];
            starts.push(ids.len());
            if it.ids.is_empty() {
                ids.push(self.pad_id);
                continue;
            }
            if use_types {
                types[ids.len()..ids.len() + it.ids.len()].copy_from_slice(&it.type_ids);
            }
            ids.extend_from_slice(&it.ids);
        }
        let hidden = m
            .forward(&ids, &types, lens)
            .map_err(ModelError::inference)?;
        Ok((hidden, starts))
    }

    /// The texts `batch` of `items`, each padded to `len`: hidden `[b·len, H]` and each
    /// text's first row.
    fn forward_padded(
        &self,
        items: &[Item],
        batch: &[usize],
        lens: &[usize],
        len: usize,
    ) -> Result<(Tensor, Vec<usize>), ModelError> {
        let b = batch.len();
        let use_types = self.cfg.type_vocab_size > 1;
        let mut ids = vec![self.pad_id; b * len];
        let mut types = vec![0u32; b * len];
        let mut mask = vec![0f32; b * len];
        for (row, (&i, &n)) in batch.iter().zip(lens).enumerate() {
            let it = &items[i];
            let off = row * len;
            ids[off..off + it.ids.len()].copy_from_slice(&it.ids);
            if use_types {
                types[off..off + it.type_ids.len()].copy_from_slice(&it.type_ids);
            }
            mask[off..off + n].fill(1.0);
        }
        let dev = Device::Cpu;
        let ids = Tensor::from_vec(ids, (b, len), &dev).map_err(ModelError::inference)?;
        let types = Tensor::from_vec(types, (b, len), &dev).map_err(ModelError::inference)?;
        let mask = Tensor::from_vec(mask, (b, len), &dev).map_err(ModelError::inference)?;
        let out = match &self.encoder {
            Encoder::Bert(m) => m.forward(&ids, &types, Some(&mask)),
            Encoder::XlmRoberta(m) => m.forward(&ids, &mask, &types, None, None, None),
            Encoder::Fused(_) => unreachable_fused(),
        };
        let hidden = out
            .and_then(|t| {
                let (_, _, h) = t.dims3()?;
                t.reshape((b * len, h))
            })
            .map_err(ModelError::inference)?;
        Ok((hidden, (0..b).map(|r| r * len).collect()))
    }
}

fn unreachable_fused() -> candle_core::Result<Tensor> {
    Err(candle_core::Error::Msg(
        "internal: fused encoder reached the candle path".into(),
    ))
}

// ---------------------------------------------------------------------------------------------
// LocalEmbedder
// ---------------------------------------------------------------------------------------------

/// A sentence-embedding model (BERT / XLM-R family) loaded from a Hugging Face-layout
/// directory and run on the CPU. See the crate documentation for the rules it follows.
pub struct LocalEmbedder {
    core: Core,
    identity: ModelIdentity,
    pooling: Pooling,
    normalize: bool,
    prefixes: Prefixes,
}

impl std::fmt::Debug for LocalEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalEmbedder")
            .field("identity", &self.identity)
            .field("family", &self.core.family)
            .field("engine", &self.core.engine())
            .field("pooling", &self.pooling)
            .field("normalize", &self.normalize)
            .field("prefixes", &self.prefixes)
            .field("max_tokens", &self.core.max_tokens)
            .finish()
    }
}

impl LocalEmbedder {
    /// Loads `dir` (config.json, tokenizer.json, model.safetensors + optional
    /// sentence-transformers metadata). Hashes the weights file for [`ModelIdentity::revision`].
    pub fn load(dir: &Path, opts: LocalOptions) -> Result<Self, ModelError> {
        let loaded = load_dir(
            dir,
            opts.engine,
            opts.threads,
            opts.batch_size,
            opts.max_tokens,
            opts.name.as_deref(),
            sentence_max_seq_length,
        )?;
        let (meta_pooling, meta_normalize, has_modules) = sentence_transformers_meta(dir)?;
        let names = [
            loaded.identity_name.as_str(),
            dir.file_name().and_then(|s| s.to_str()).unwrap_or(""),
            loaded.core.cfg.name_or_path.as_deref().unwrap_or(""),
        ];
        let prefixes = match opts.prefixes {
            Some(p) => p,
            None => default_prefixes(dir, &names)?,
        };
        let normalize = opts
            .normalize
            .unwrap_or(meta_normalize || !has_modules || is_known_family(&names));
        let identity = ModelIdentity {
            name: loaded.identity_name,
            dimensions: loaded.core.cfg.hidden_size,
            revision: loaded.revision,
        };
        Ok(LocalEmbedder {
            core: loaded.core,
            identity,
            pooling: opts.pooling.or(meta_pooling).unwrap_or(Pooling::Mean),
            normalize,
            prefixes,
        })
    }

    /// The prefixes applied to queries and passages.
    pub fn prefixes(&self) -> &Prefixes {
        &self.prefixes
    }

    /// The pooling in use.
    pub fn pooling(&self) -> Pooling {
        self.pooling
    }

    /// Whether vectors are L2-normalised.
    pub fn normalizes(&self) -> bool {
        self.normalize
    }

    /// Path of the weights file that was loaded.
    pub fn weights_path(&self) -> &Path {
        &self.core.weights_path
    }

    /// Token ids the model sees for `text` (prefix not added), truncated like inputs are.
    pub fn token_ids(&self, text: &str) -> Result<Vec<u32>, ModelError> {
        let enc = self
            .core
            .tokenizer
            .encode_fast(text, true)
            .map_err(|e| self.core.tok_err(e))?;
        Ok(self.core.truncate_single(&enc).ids)
    }

    /// Embeds texts exactly as given (no prefix).
    pub fn embed_raw(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelError> {
        self.embed_with_prefix("", texts)
    }

    fn embed_with_prefix(&self, prefix: &str, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let inputs: Vec<String> = texts.iter().map(|t| format!("{prefix}{t}")).collect();
        let items = self.core.encode_singles(inputs)?;
        let h = self.identity.dimensions;
        let mut out: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
        let pooling = self.pooling;
        let normalize = self.normalize;
        self.core
            .for_each_batch(&items, |batch, lens, hidden, starts| {
                let (rows, hh) = hidden.dims2().map_err(ModelError::inference)?;
                if hh != h {
                    return Err(ModelError::Inference(format!(
                        "encoder returned {hh} dimensions, expected {h}"
                    )));
                }
                let flat: Vec<f32> = hidden
                    .flatten_all()
                    .and_then(|t| t.to_vec1::<f32>())
                    .map_err(ModelError::inference)?;
                for ((&orig, &n), &start) in batch.iter().zip(lens).zip(starts) {
                    if start + n > rows {
                        return Err(ModelError::Inference(format!(
                            "encoder returned {rows} rows, text needs {}",
                            start + n
                        )));
                    }
                    let tokens = flat[start * h..(start + n) * h].chunks_exact(h);
                    let mut v = match pooling {
                        Pooling::Cls => flat[start * h..(start + 1) * h].to_vec(),
                        Pooling::Mean => {
                            let mut acc = vec![0f32; h];
                            for tok in tokens {
                                acc.iter_mut().zip(tok).for_each(|(a, x)| *a += x);
                            }
                            let inv = 1.0 / n.max(1) as f32;
                            acc.iter_mut().for_each(|a| *a *= inv);
                            acc
                        }
                        Pooling::Max => {
                            let mut acc = vec![f32::NEG_INFINITY; h];
                            for tok in tokens {
                                acc.iter_mut().zip(tok).for_each(|(a, x)| *a = a.max(*x));
                            }
                            acc
                        }
                    };
                    if normalize {
                        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
                        v.iter_mut().for_each(|x| *x /= norm);
                    }
                    out[orig] = v;
                }
                Ok(())
            })?;
        Ok(out)
    }
}

impl Embedder for LocalEmbedder {
    fn identity(&self) -> &ModelIdentity {
        &self.identity
    }

    fn embed_queries(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelError> {
        self.embed_with_prefix(&self.prefixes.query, texts)
    }

    fn embed_passages(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelError> {
        self.embed_with_prefix(&self.prefixes.passage, texts)
    }

    fn max_tokens(&self) -> usize {
        self.core.max_tokens
    }

    fn count_tokens(&self, text: &str) -> Result<usize, ModelError> {
        let input = format!("{}{}", self.prefixes.passage, text);
        let enc = self
            .core
            .tokenizer
            .encode_fast(input.as_str(), true)
            .map_err(|e| self.core.tok_err(e))?;
        Ok(enc.len())
    }
}

// ---------------------------------------------------------------------------------------------
// LocalReranker
// ---------------------------------------------------------------------------------------------

enum Head {
    /// BertForSequenceClassification: tanh(pooler.dense(h_cls)) → classifier.
    BertPooler { pooler: Linear, classifier: Linear },
    /// XLMRobertaForSequenceClassification: out_proj(tanh(dense(h_cls))).
    Roberta { dense: Linear, out_proj: Linear },
}

/// A cross-encoder reranker (`BertForSequenceClassification` /
/// `XLMRobertaForSequenceClassification`) from a Hugging Face-layout directory.
///
/// Scores are `sigmoid(logit)` for one-label models and the softmax probability of the
/// positive class for two-label models (class 1, or class 0 when `id2label` names it
/// relevant/positive/entailment/yes/true).
pub struct LocalReranker {
    core: Core,
    head: Head,
    num_labels: usize,
    positive: usize,
    identity: ModelIdentity,
}

impl std::fmt::Debug for LocalReranker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalReranker")
            .field("identity", &self.identity)
            .field("family", &self.core.family)
            .field("num_labels", &self.num_labels)
            .field("max_tokens", &self.core.max_tokens)
            .finish()
    }
}

impl LocalReranker {
    /// Loads a cross-encoder directory (config.json, tokenizer.json, model.safetensors with
    /// `classifier.*` weights, plus `pooler.dense.*` for BERT).
    pub fn load(dir: &Path, opts: RerankerOptions) -> Result<Self, ModelError> {
        let mut loaded = load_dir(
            dir,
            opts.engine,
            opts.threads,
            opts.batch_size,
            opts.max_tokens,
            opts.name.as_deref(),
            |_| Ok(None),
        )?;
        let wpath = loaded.core.weights_path.clone();
        let cfg_path = dir.join("config.json");
        let shapes = &loaded.tensor_shapes;
        let werr = |e: candle_core::Error| ModelError::Weights {
            path: wpath.clone(),
            reason: e.to_string(),
        };
        let h = loaded.core.cfg.hidden_size;
        let vb = &loaded.vb;
        let (head, num_labels) = if let Some(s) = shapes.get("classifier.out_proj.weight") {
            let n = s.first().copied().unwrap_or(0);
            let dense = candle_nn::linear(h, h, vb.pp("classifier.dense")).map_err(werr)?;
            let out_proj = candle_nn::linear(h, n, vb.pp("classifier.out_proj")).map_err(werr)?;
            (Head::Roberta { dense, out_proj }, n)
        } else if let Some(s) = shapes.get("classifier.weight") {
            let n = s.first().copied().unwrap_or(0);
            if !shapes.contains_key("pooler.dense.weight") {
                return Err(ModelError::Weights {
                    path: wpath,
                    reason:
                        "classifier.weight is present but the BERT pooler (bert.pooler.dense.*) \
                             is missing"
                            .into(),
                });
            }
            let pooler = candle_nn::linear(h, h, vb.pp("pooler.dense")).map_err(werr)?;
            let classifier = candle_nn::linear(h, n, vb.pp("classifier")).map_err(werr)?;
            (Head::BertPooler { pooler, classifier }, n)
        } else {
            return Err(ModelError::UnsupportedModel {
                path: wpath,
                reason: "no classifier weights (classifier.weight or classifier.out_proj.weight): \
                         this is not a cross-encoder (…ForSequenceClassification) checkpoint"
                    .into(),
            });
        };
        let cfg = &loaded.core.cfg;
        let cfg_labels = cfg
            .num_labels
            .or_else(|| cfg.id2label.as_ref().map(|m| m.len()));
        if let Some(c) = cfg_labels
            && c != num_labels
        {
            return Err(ModelError::InvalidConfig {
                path: cfg_path,
                reason: format!(
                    "config.json declares {c} labels but the classifier has {num_labels} outputs"
                ),
            });
        }
        if num_labels == 0 || num_labels > 2 {
            return Err(ModelError::UnsupportedModel {
                path: cfg_path,
                reason: format!(
                    "a reranker needs 1 or 2 labels (relevance), this classifier has {num_labels}"
                ),
            });
        }
        let positive = if num_labels == 2 {
            let label0 = cfg
                .id2label
                .as_ref()
                .and_then(|m| m.get("0"))
                .map(|s| s.to_ascii_lowercase());
            match label0.as_deref() {
                Some("relevant" | "positive" | "entailment" | "yes" | "true") => 0,
                _ => 1,
            }
        } else {
            0
        };
        // Pairs are truncated longest-first by the tokenizer (usually the passage).
        let max_tokens = loaded.core.max_tokens;
        loaded
            .core
            .tokenizer
            .with_truncation(Some(TruncationParams {
                direction: TruncationDirection::Right,
                max_length: max_tokens,
                strategy: TruncationStrategy::LongestFirst,
                stride: 0,
            }))
            .map_err(|e| ModelError::Tokenizer {
                path: loaded.core.tokenizer_path.clone(),
                reason: e.to_string(),
            })?;
        let identity = ModelIdentity {
            name: loaded.identity_name,
            dimensions: 0,
            revision: loaded.revision,
        };
        Ok(LocalReranker {
            core: loaded.core,
            head,
            num_labels,
            positive,
            identity,
        })
    }

    /// Raw classifier outputs (`[passages, num_labels]`), before sigmoid / softmax.
    pub fn logits(&self, query: &str, passages: &[&str]) -> Result<Vec<Vec<f32>>, ModelError> {
        if passages.is_empty() {
            return Ok(Vec::new());
        }
        let pairs: Vec<(String, String)> = passages
            .iter()
            .map(|p| (query.to_string(), p.to_string()))
            .collect();
        let encs = self
            .core
            .tokenizer
            .encode_batch_fast(pairs, true)
            .map_err(|e| self.core.tok_err(e))?;
        let items: Vec<Item> = encs
            .iter()
            .map(|e| Item {
                ids: e.get_ids().to_vec(),
                type_ids: e.get_type_ids().to_vec(),
            })
            .collect();
        let mut out = vec![Vec::new(); passages.len()];
        self.core
            .for_each_batch(&items, |batch, _lens, hidden, starts| {
                let firsts: Vec<u32> = starts.iter().map(|&r| r as u32).collect();
                let cls = Tensor::new(firsts.as_slice(), &Device::Cpu)
                    .and_then(|rows| hidden.index_select(&rows, 0))
                    .map_err(ModelError::inference)?;
                let logits = match &self.head {
                    Head::BertPooler { pooler, classifier } => pooler
                        .forward(&cls)
                        .and_then(|x| x.tanh())
                        .and_then(|x| classifier.forward(&x)),
                    Head::Roberta { dense, out_proj } => dense
                        .forward(&cls)
                        .and_then(|x| x.tanh())
                        .and_then(|x| out_proj.forward(&x)),
                }
                .and_then(|x| x.to_vec2::<f32>())
                .map_err(ModelError::inference)?;
                for (&orig, row) in batch.iter().zip(logits) {
                    out[orig] = row;
                }
                Ok(())
            })?;
        Ok(out)
    }

    /// Number of classifier outputs (1 or 2).
    pub fn num_labels(&self) -> usize {
        self.num_labels
    }
}

fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

impl Reranker for LocalReranker {
    fn identity(&self) -> &ModelIdentity {
        &self.identity
    }

    fn score(&self, query: &str, passages: &[&str]) -> Result<Vec<f32>, ModelError> {
        let logits = self.logits(query, passages)?;
        Ok(logits
            .iter()
            .map(|row| match row.as_slice() {
                [x] => sigmoid(*x),
                [a, b] => {
                    let (pos, neg) = if self.positive == 0 {
                        (*a, *b)
                    } else {
                        (*b, *a)
                    };
                    sigmoid(pos - neg)
                }
                _ => 0.0,
            })
            .collect())
    }
}
