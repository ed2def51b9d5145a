//! # quarry-models — embedding, reranking and query-expansion models for Quarry
//!
//! Three traits, six implementations:
//!
//! | trait | implementation | what it runs |
//! |---|---|---|
//! | [`Embedder`] | [`LocalEmbedder`] | a BERT or XLM-RoBERTa sentence-embedding model from a Hugging Face-layout directory, on the CPU with candle |
//! | [`Embedder`] | [`OpenAiEmbedder`] | any OpenAI-compatible `POST /v1/embeddings` endpoint |
//! | [`Embedder`] | [`OllamaEmbedder`] | Ollama's `POST /api/embed` |
//! | [`Reranker`] | [`LocalReranker`] | a cross-encoder (`BertForSequenceClassification`, `XLMRobertaForSequenceClassification`) from a Hugging Face-layout directory |
//! | [`Reranker`] | [`ApiReranker`] | a Jina / Cohere / DashScope-shaped `/rerank` API |
//! | [`QueryExpander`] | [`OpenAiChatExpander`] | alternative phrasings of a query from an OpenAI-compatible `POST /v1/chat/completions` |
//!
//! Surfaces name a model with one spec string ([`ModelSpec`]) and load it with
//! [`open_embedder`], [`open_reranker`] or [`open_expander`]; Hub models are downloaded into a
//! local cache by [`fetch_model`].
//!
//! Every model reports a [`ModelIdentity`] (name, dimensions, revision) so that an index can
//! tell when its vectors were produced by a different model and must be rebuilt.
//!
//! ## Local models
//!
//! A model directory must contain `config.json`, `tokenizer.json` and `model.safetensors`
//! (`pytorch_model.bin` is accepted as a fallback). [`LocalEmbedder::load`] never downloads;
//! [`fetch_model`] (below) fills such a directory from the Hugging Face Hub.
//!
//! * The architecture is chosen from `config.json`'s `model_type`: `bert`, or `xlm-roberta`
//!   (also `roberta`, `camembert`), whose positions start at `pad_token_id + 1`. Weight names
//!   with a `bert.` / `roberta.` / other prefix (and TF-era `LayerNorm.gamma/beta`) are
//!   recognised.
//! * Two engines run the encoder ([`Engine`]): [`Engine::Candle`] is
//!   `candle_transformers::models::bert::BertModel` / `xlm_roberta::XLMRobertaModel` as
//!   published; [`Engine::Fused`] (the default) uses the same weights and candle's matrix
//!   products but fuses the element-wise work (bias + erf-GELU, bias + residual + LayerNorm,
//!   softmax, embeddings + LayerNorm) into vectorised single passes, with AVX2 + FMA where
//!   the CPU has them; batches are packed (no padding) and attention runs per sequence and
//!   head. Both match an independent float64 reference to `1 - cos < 1e-9`.
//!   [`Engine::FusedInt8`] runs the fused engine's layer products on int8 weights and
//!   activations (`qgemm.rs`; `QUARRY_EMBED_QUANTIZE=int8` through [`open_embedder`]): about
//!   1.5× faster with AVX2, 1.8× with AVX512-VNNI, vectors within cosine 0.99 of fp32.
//!   The products' kernels are chosen once, at load, from the CPU (`cpu.rs`: AVX-512 fp32 in
//!   `sgemm.rs`, VNNI / AVX2 int8 in `qgemm.rs`).
//! * Pooling comes from the sentence-transformers metadata (`modules.json` →
//!   `1_Pooling/config.json`: mean, CLS or max); the default is the mean over the attention
//!   mask. Vectors are L2-normalised when `modules.json` lists `Normalize`, when there is no
//!   `modules.json`, or for known families (e5, bge, gte, MiniLM); [`LocalOptions`] overrides.
//! * Prefixes: `config_sentence_transformers.json` `prompts` when present, otherwise by name:
//!   e5 → `query: ` / `passage: `; bge → `Represent this sentence for searching relevant
//!   passages: ` on queries only (the Chinese instruction for `bge-*-zh`, nothing for
//!   `bge-m3`); anything else (MiniLM, …) → none. [`LocalOptions::prefixes`] overrides.
//! * Inputs are truncated to [`Embedder::max_tokens`] = the smallest of
//!   `sentence_bert_config.json`'s `max_seq_length`, the position table (minus XLM-R's
//!   `pad_token_id + 1` offset: 514 positions → 512 tokens) and 512, special tokens included.
//!   [`Embedder::count_tokens`] counts the same way (passage prefix and special tokens
//!   included, no truncation) so `count_tokens(chunk) <= max_tokens()` means "not truncated".
//! * Batching: texts are sorted by token length, cut into batches of at most `batch_size`
//!   texts (default 32) and at most 16,384 padded tokens, padded per batch with the model's
//!   `pad_token_id`, and results are returned in input order.
//! * Inference is F32 on the CPU (weights in F16/BF16 files are converted at load time). candle parallelises matrix products with rayon and its own
//!   worker pool; both size themselves from `RAYON_NUM_THREADS` (or `CANDLE_NUM_THREADS`),
//!   defaulting to the number of physical cores. [`LocalOptions::threads`] additionally runs
//!   the forward pass inside a private rayon pool of that size.
//!
//! ## Hugging Face Hub
//!
//! [`fetch_model`] downloads `config.json`, `tokenizer.json`, the weights and the
//! sentence-transformers metadata of `org/name` at a revision into
//! `cache_dir/org--name/revision/` ([`ModelCacheOptions::from_vars`]: `$QUARRY_MODELS_DIR`, else
//! `$XDG_CACHE_HOME/quarry/models`, else `~/.cache/quarry/models`; endpoint `$HF_ENDPOINT`;
//! token `$HF_TOKEN`). A directory that already has the required files is used without any
//! request, so a model fetched once works offline; files are written as `.part` and renamed,
//! so an interrupted download is never mistaken for a complete one. In offline mode
//! (`HF_HUB_OFFLINE` / `QUARRY_OFFLINE`), or when the Hub cannot be reached, the error
//! ([`ModelError::HubFetch`]) says how to download the model elsewhere and pass its directory.
//!
//! ## Model specs
//!
//! [`ModelSpec::parse`] reads `./dir`, `/dir`, `~/dir` (a local directory), `org/name[@rev]` or
//! `hf:name[@rev]` (Hub), `openai:MODEL`, `ollama:MODEL`, and `jina:` / `cohere:` /
//! `dashscope:` / `rerank:MODEL` (a `/rerank` API at `$QUARRY_RERANK_URL`). Endpoints and key
//! keys come from [`ModelEnv::from_vars`] (`QUARRY_OPENAI_BASE_URL`, `OPENAI_API_KEY`,
//! `OLLAMA_HOST`, …: variables the caller hands over; this crate never reads the environment,
//! except `HOME` to expand a leading `~` in a path). A Hub model is named by its id in [`ModelIdentity::name`]
//! ([`LocalOptions::name`]).
//!
//! ## Query expansion
//!
//! [`OpenAiChatExpander`] asks a chat model (temperature 0) for 3–5 alternative search queries
//! in the query's language and cleans the reply: list markers, quotes and commentary lines are
//! removed, the original query and case-insensitive duplicates are dropped, and at most
//! [`ChatOptions::max_variants`] (default 4) are kept.
//!
//! ## Remote models
//!
//! The API key comes in the options with the name of the variable it was read from (named in
//! errors); the key itself is never logged, never put in an error, and is scrubbed from any error
//! text a server sends back.
//!
//! ```no_run
//! use quarry_models::{Embedder, LocalEmbedder, LocalOptions};
//! # fn main() -> Result<(), quarry_models::ModelError> {
//! let model = LocalEmbedder::load("models/multilingual-e5-small".as_ref(), LocalOptions::default())?;
//! let q = model.embed_queries(&["南瓜的家常做法"])?;          // "query: " prefix added
//! let p = model.embed_passages(&["Pumpkin soup recipe ..."])?; // "passage: " prefix added
//! let cos: f32 = q[0].iter().zip(&p[0]).map(|(a, b)| a * b).sum();
//! println!("{} dims={} cos={cos}", model.identity().name, model.identity().dimensions);
//! # Ok(()) }
//! ```

mod annotate;
mod cpu;
mod error;
mod expand;
mod fused;
mod hub;
mod kernels;
mod local;
mod meter;
mod qgemm;
mod remote;
mod sgemm;
mod spec;
mod types;

pub use annotate::{NoteAnnotation, NoteAnnotator};
pub use cpu::{KernelPath, with_kernel_path};
pub use error::{ModelError, REQUIRED_FILES_HINT};
pub use expand::{ChatOptions, OpenAiChatExpander, QueryExpander};
pub use hub::{HubProgress, ModelCacheOptions, fetch_model};
pub use local::{
    Engine, LocalEmbedder, LocalOptions, LocalReranker, Pooling, Prefixes, RerankerOptions,
};
pub use meter::{ModelCount, ModelMeter, ModelPurpose};
pub use remote::{
    ApiKey, ApiReranker, ApiRerankerOptions, OllamaEmbedder, OllamaOptions, OpenAiEmbedder,
    OpenAiOptions, RerankApiFlavor,
};
pub use spec::{ModelEnv, ModelSpec, open_annotator, open_embedder, open_expander, open_reranker};
pub use types::{Embedder, ModelIdentity, Reranker, release_free_memory};
