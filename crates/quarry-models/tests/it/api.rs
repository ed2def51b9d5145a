//! Remote embedders, rerankers and query expanders against a loopback HTTP server with canned
//! responses.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};

use quarry_models::{
    ApiKey, ApiReranker, ApiRerankerOptions, ChatOptions, Embedder, HubProgress, ModelCacheOptions,
    ModelEnv, ModelError, ModelIdentity, ModelSpec, OllamaEmbedder, OllamaOptions,
    OpenAiChatExpander, OpenAiEmbedder, OpenAiOptions, Prefixes, QueryExpander, RerankApiFlavor,
    Reranker, open_embedder, open_expander, open_reranker,
};
use quarry_test_http::{Reply, Server};
use serde_json::{Value, json};

const KEY_VAR: &str = "QUARRY_MODELS_TEST_API_KEY";
const KEY: &str = "sk-test-SUPERSECRET-0123456789";

/// Tests in this file share loopback servers' request logs: run them one at a time.
static ENV_LOCK: Mutex<()> = Mutex::new(());

fn setup() -> MutexGuard<'static, ()> {
    ENV_LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// The test key, as read from `KEY_VAR`.
fn key() -> ApiKey {
    ApiKey::new(KEY_VAR, Some(KEY.into()))
}

/// Answers with `responses` (status, JSON body) in order, one per request; a request beyond
/// them gets a 500 saying so.
fn canned(responses: Vec<(u16, String)>) -> Server {
    let queue = Mutex::new(VecDeque::from(responses));
    Server::start(move |_| match queue.lock().unwrap().pop_front() {
        Some((status, body)) => Reply::status(status, "application/json", body),
        None => Reply::status(500, "text/plain", "no canned response left"),
    })
}

fn openai_response(vectors: &[Vec<f32>], reversed: bool) -> String {
    let mut data: Vec<Value> = vectors
        .iter()
        .enumerate()
        .map(|(i, v)| json!({"object": "embedding", "index": i, "embedding": v}))
        .collect();
    if reversed {
        data.reverse();
    }
    json!({"object": "list", "data": data, "model": "text-embedding-3-small-2024",
           "usage": {"prompt_tokens": 5, "total_tokens": 5}})
    .to_string()
}

fn assert_no_key(e: &ModelError) {
    let display = e.to_string();
    let debug = format!("{e:?}");
    assert!(
        !display.contains(KEY) && !debug.contains(KEY),
        "key leaked: {display} / {debug}"
    );
    assert!(!display.contains("SUPERSECRET"), "key leaked: {display}");
}

#[test]
fn openai_embeddings_request_and_response() {
    let _g = setup();
    let server = canned(vec![
        (
            200,
            openai_response(&[vec![1.0, 0.0, 0.0], vec![0.0, 1.0, 0.5]], true),
        ),
        (200, openai_response(&[vec![0.5, 0.5, 0.5]], false)),
        (200, openai_response(&[vec![0.25, 0.0, 1.0]], false)),
    ]);
    let mut opts = OpenAiOptions::new(format!("{}/", server.base()), "text-embedding-3-small");
    opts.api_key = Some(key());
    opts.batch_size = 2;
    opts.prefixes = Prefixes::new("q: ", "p: ");
    let e = OpenAiEmbedder::new(opts).unwrap();
    assert!(!format!("{e:?}").contains(KEY), "Debug leaks the key");
    assert_eq!(
        e.identity().dimensions,
        0,
        "unknown before the first response"
    );

    let v = e.embed_passages(&["alpha", "beta", "gamma"]).unwrap();
    assert_eq!(
        v,
        vec![
            vec![1.0, 0.0, 0.0],
            vec![0.0, 1.0, 0.5],
            vec![0.5, 0.5, 0.5]
        ]
    );
    assert_eq!(e.identity().dimensions, 3);
    assert_eq!(e.identity().name, "text-embedding-3-small");
    assert_eq!(e.identity().revision, "text-embedding-3-small-2024");
    let q = e.embed_queries(&["delta"]).unwrap();
    assert_eq!(q, vec![vec![0.25, 0.0, 1.0]]);

    let reqs = server.requests();
    assert_eq!(
        reqs.len(),
        3,
        "batch_size 2 → two requests for three passages, one for the query"
    );
    for r in &reqs {
        assert_eq!(r.method, "POST");
        assert_eq!(r.target, "/v1/embeddings");
        assert_eq!(
            r.header("authorization"),
            Some(format!("Bearer {KEY}").as_str())
        );
        assert!(
            r.header("content-type")
                .unwrap()
                .starts_with("application/json")
        );
        assert_eq!(r.json()["model"], "text-embedding-3-small");
    }
    assert_eq!(reqs[0].json()["input"], json!(["p: alpha", "p: beta"]));
    assert_eq!(reqs[1].json()["input"], json!(["p: gamma"]));
    assert_eq!(reqs[2].json()["input"], json!(["q: delta"]));
}

#[test]
fn openai_base_url_with_v1_and_dimensions() {
    let _g = setup();
    let server = canned(vec![(200, openai_response(&[vec![0.1, 0.2]], false))]);
    let mut opts = OpenAiOptions::new(format!("{}/proxy/v1", server.base()), "m");
    opts.dimensions = Some(2);
    let e = OpenAiEmbedder::new(opts).unwrap();
    assert_eq!(e.identity().dimensions, 2);
    e.embed_queries(&["x"]).unwrap();
    let reqs = server.requests();
    assert_eq!(reqs[0].target, "/proxy/v1/embeddings");
    assert_eq!(reqs[0].json()["dimensions"], 2);
    assert!(
        reqs[0].header("authorization").is_none(),
        "no key configured"
    );
}

#[test]
fn openai_errors_are_clear_and_never_contain_the_key() {
    let _g = setup();
    let cases: Vec<((u16, String), &[&str])> = vec![
        (
            (401, format!(r#"{{"error":{{"message":"Incorrect API key provided: {KEY}"}}}}"#)),
            &["401", "unauthorized", "Incorrect API key", "[REDACTED]"],
        ),
        ((500, "upstream exploded".to_string()), &["500", "server error", "upstream exploded"]),
        ((200, "{not json".to_string()), &["not valid JSON"]),
        ((200, openai_response(&[vec![1.0]], false)), &["sent 2 inputs but received 1 vectors"]),
        ((200, r#"{"data": [{"index": 0, "embedding": [1, "x"]}, {"index": 1, "embedding": [1, 2]}]}"#.to_string()), &["non-number"]),
        ((200, r#"{"object": "list"}"#.to_string()), &["no `data` array"]),
    ];
    for (resp, needles) in cases {
        let server = canned(vec![resp]);
        let mut opts = OpenAiOptions::new(server.base().clone(), "m");
        opts.api_key = Some(key());
        let e = OpenAiEmbedder::new(opts).unwrap();
        let err = e.embed_passages(&["a", "b"]).unwrap_err();
        assert_no_key(&err);
        let msg = err.to_string();
        for n in needles {
            assert!(msg.contains(n), "{msg:?} should contain {n:?}");
        }
        eprintln!("ok: {msg}");
    }
}

#[test]
fn missing_key_and_unreachable_server() {
    let _g = setup();
    let mut opts = OpenAiOptions::new("http://127.0.0.1:9", "m");
    opts.api_key = Some(ApiKey::new("QUARRY_MODELS_TEST_UNSET_VAR", None));
    let err = OpenAiEmbedder::new(opts).unwrap_err();
    assert!(matches!(err, ModelError::MissingApiKey { .. }));
    assert!(err.to_string().contains("QUARRY_MODELS_TEST_UNSET_VAR"));

    // A port nobody listens on.
    let port = quarry_test_http::unused_port();
    let mut opts = OpenAiOptions::new(format!("http://127.0.0.1:{port}"), "m");
    opts.api_key = Some(key());
    let err = OpenAiEmbedder::new(opts)
        .unwrap()
        .embed_queries(&["a"])
        .unwrap_err();
    assert!(matches!(err, ModelError::Network { .. }), "{err:?}");
    assert_no_key(&err);
    eprintln!("ok: {err}");
}

#[test]
fn ollama_embed() {
    let _g = setup();
    let server = canned(vec![
        (200, json!({"model": "nomic-embed-text", "embeddings": [[0.1, 0.2, 0.3, 0.4], [0.5, 0.6, 0.7, 0.8]]}).to_string()),
        (200, json!({"model": "nomic-embed-text", "embeddings": [[0.1, 0.2]]}).to_string()),
        (500, json!({"error": "model \"nomic\" not found"}).to_string()),
    ]);
    let mut opts = OllamaOptions::new("nomic-embed-text");
    opts.base_url = server.base().clone();
    opts.prefixes = Prefixes::new("search_query: ", "search_document: ");
    let e = OllamaEmbedder::new(opts).unwrap();
    let v = e.embed_passages(&["one", "two"]).unwrap();
    assert_eq!(v.len(), 2);
    assert_eq!(v[1], vec![0.5, 0.6, 0.7, 0.8]);
    assert_eq!(e.identity().dimensions, 4);
    // Dimension change between calls is an error.
    let err = e.embed_queries(&["three"]).unwrap_err();
    assert!(
        err.to_string()
            .contains("expected 4-dimensional vectors, got 2"),
        "{err}"
    );
    let err = e.embed_queries(&["four"]).unwrap_err();
    assert!(
        err.to_string().contains("500") && err.to_string().contains("not found"),
        "{err}"
    );
    let reqs = server.requests();
    assert_eq!(reqs[0].target, "/api/embed");
    assert_eq!(reqs[0].method, "POST");
    assert_eq!(
        reqs[0].json(),
        json!({"model": "nomic-embed-text", "input": ["search_document: one", "search_document: two"]})
    );
    assert_eq!(reqs[1].json()["input"], json!(["search_query: three"]));
}

#[test]
fn jina_cohere_rerank() {
    let _g = setup();
    let server = canned(vec![(
        200,
        json!({"model": "jina-reranker-v2", "results": [
            {"index": 2, "relevance_score": 0.9, "document": {"text": "c"}},
            {"index": 0, "relevance_score": 0.25},
        ], "usage": {"total_tokens": 10}})
        .to_string(),
    )]);
    let mut opts =
        ApiRerankerOptions::new(format!("{}/v1/rerank", server.base()), "jina-reranker-v2");
    opts.api_key = Some(key());
    let r = ApiReranker::new(opts).unwrap();
    let s = r.score("what is c?", &["a", "b", "c"]).unwrap();
    assert_eq!(s, vec![0.25, 0.0, 0.9], "omitted passages score 0");
    assert_eq!(r.identity().name, "jina-reranker-v2");
    let reqs = server.requests();
    assert_eq!(reqs[0].target, "/v1/rerank");
    assert_eq!(
        reqs[0].header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(
        reqs[0].json(),
        json!({"model": "jina-reranker-v2", "query": "what is c?", "documents": ["a", "b", "c"], "top_n": 3})
    );
}

#[test]
fn dashscope_rerank() {
    let _g = setup();
    let body = json!({"output": {"results": [
        {"index": 1, "relevance_score": 0.7},
        {"index": 0, "relevance_score": 0.1},
    ]}, "usage": {"total_tokens": 7}, "request_id": "x"})
    .to_string();
    let server = canned(vec![(200, body.clone()), (200, body)]);
    let url = format!(
        "{}/api/v1/services/rerank/text-rerank/text-rerank",
        server.base()
    );
    let mut opts = ApiRerankerOptions::new(url.clone(), "gte-rerank-v2");
    opts.flavor = RerankApiFlavor::DashScope;
    let r = ApiReranker::new(opts).unwrap();
    assert_eq!(r.score("q", &["a", "b"]).unwrap(), vec![0.1, 0.7]);
    // A Standard-shaped request still understands DashScope's response shape.
    let mut opts = ApiRerankerOptions::new(url, "gte-rerank-v2");
    opts.flavor = RerankApiFlavor::Standard;
    let r = ApiReranker::new(opts).unwrap();
    assert_eq!(r.score("q", &["a", "b"]).unwrap(), vec![0.1, 0.7]);
    let reqs = server.requests();
    assert_eq!(
        reqs[0].json(),
        json!({"model": "gte-rerank-v2", "input": {"query": "q", "documents": ["a", "b"]},
               "parameters": {"top_n": 2, "return_documents": false}})
    );
    assert_eq!(reqs[1].json()["query"], "q");
}

#[test]
fn rerank_errors() {
    let _g = setup();
    let cases: Vec<((u16, String), &str)> = vec![
        ((401, format!("bad key {KEY}")), "401"),
        ((200, "[oops".into()), "not valid JSON"),
        (
            (
                200,
                json!({"results": [{"index": 5, "relevance_score": 0.5}]}).to_string(),
            ),
            "only 2 documents",
        ),
        ((200, json!({"data": []}).to_string()), "no `results` array"),
        (
            (200, json!({"results": [{"index": 0}]}).to_string()),
            "relevance_score",
        ),
    ];
    for (resp, needle) in cases {
        let server = canned(vec![resp]);
        let mut opts = ApiRerankerOptions::new(format!("{}/rerank", server.base()), "m");
        opts.api_key = Some(key());
        let err = ApiReranker::new(opts)
            .unwrap()
            .score("q", &["a", "b"])
            .unwrap_err();
        assert_no_key(&err);
        assert!(
            err.to_string().contains(needle),
            "{err} should contain {needle:?}"
        );
        eprintln!("ok: {err}");
    }
}

#[test]
fn rerank_logits_mode_and_batches() {
    let _g = setup();
    let server = canned(vec![
        (
            200,
            json!([{"index": 0, "score": 0.0}, {"index": 1, "score": 2.0}]).to_string(),
        ),
        (200, json!([{"index": 0, "score": -2.0}]).to_string()),
    ]);
    let mut opts = ApiRerankerOptions::new(format!("{}/rerank", server.base()), "bge-reranker");
    opts.scores_are_logits = true;
    opts.batch_size = 2;
    let r = ApiReranker::new(opts).unwrap();
    let s = r.score("q", &["a", "b", "c"]).unwrap();
    assert!((s[0] - 0.5).abs() < 1e-6);
    assert!((s[1] - 0.880797).abs() < 1e-5);
    assert!((s[2] - 0.119203).abs() < 1e-5);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[1].json()["documents"], json!(["c"]));
    assert_eq!(reqs[1].json()["top_n"], 1);
}

// ---------------------------------------------------------------------------------------------
// Query expansion (OpenAI-compatible chat completions)
// ---------------------------------------------------------------------------------------------

fn chat_response(content: &str) -> String {
    json!({"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o-mini-2024",
           "choices": [{"index": 0, "finish_reason": "stop",
                        "message": {"role": "assistant", "content": content}}],
           "usage": {"prompt_tokens": 30, "completion_tokens": 20, "total_tokens": 50}})
    .to_string()
}

#[test]
fn chat_expansion_parses_variants() {
    let _g = setup();
    let reply = "1. untar a file\n2) Extract TAR archive\n- how to  extract TAR\n\
                 * \"tar xvf\"\n• untar a file\n\n   \n";
    let server = canned(vec![
        (200, chat_response(reply)),
        (200, chat_response("a\nb\nc\nd\ne\nf")),
    ]);
    let mut opts = ChatOptions::new(format!("{}/v1/", server.base()), "gpt-4o-mini");
    opts.api_key = Some(key());
    let x = OpenAiChatExpander::new(opts).unwrap();
    assert!(!format!("{x:?}").contains(KEY), "Debug leaks the key");
    assert_eq!(
        x.identity(),
        &ModelIdentity {
            name: "gpt-4o-mini".into(),
            dimensions: 0,
            revision: "gpt-4o-mini".into()
        }
    );
    let v = x.expand("  How to extract tar ").unwrap();
    assert_eq!(
        v,
        vec!["untar a file", "Extract TAR archive", "tar xvf"],
        "markers and quotes stripped, the original and duplicates dropped"
    );
    let v = x.expand("letters").unwrap();
    assert_eq!(v, vec!["a", "b", "c", "d"], "capped at max_variants (4)");
    assert!(
        x.expand("   ").unwrap().is_empty(),
        "no request for a blank query"
    );

    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    let r = &reqs[0];
    assert_eq!(r.method, "POST");
    assert_eq!(r.target, "/v1/chat/completions");
    assert_eq!(
        r.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    let body = r.json();
    assert_eq!(body["model"], "gpt-4o-mini");
    assert_eq!(body["temperature"], 0);
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[0]["role"], "system");
    let system = messages[0]["content"].as_str().unwrap();
    assert!(system.contains("one per line") && system.contains("same language"));
    assert_eq!(
        messages[1],
        json!({"role": "user", "content": "How to extract tar"})
    );
}

#[test]
fn chat_expansion_urls_and_caps() {
    let _g = setup();
    let server = canned(vec![
        (200, chat_response("x\ny\nz")),
        (200, chat_response("x\ny\nz")),
        (
            200,
            json!({"choices": [{"message": {"content": [
            {"type": "text", "text": "part one"}, {"type": "text", "text": "part two"}]}}]})
            .to_string(),
        ),
    ]);
    let mut opts = ChatOptions::new(server.base().clone(), "llama3");
    opts.max_variants = 2;
    let x = OpenAiChatExpander::new(opts).unwrap();
    assert_eq!(x.url(), format!("{}/v1/chat/completions", server.base()));
    assert_eq!(x.expand("q").unwrap(), vec!["x", "y"]);
    let x = OpenAiChatExpander::new(ChatOptions::new(
        format!("{}/proxy/v1", server.base()),
        "llama3",
    ))
    .unwrap();
    assert_eq!(x.expand("q").unwrap(), vec!["x", "y", "z"]);
    assert_eq!(x.expand("q").unwrap(), vec!["part one", "part two"]);
    let mut opts = ChatOptions::new(server.base().clone(), "llama3");
    opts.max_variants = 0;
    assert!(
        OpenAiChatExpander::new(opts)
            .unwrap()
            .expand("q")
            .unwrap()
            .is_empty()
    );
    let reqs = server.requests();
    assert_eq!(reqs[0].target, "/v1/chat/completions");
    assert!(reqs[0].header("authorization").is_none());
    assert_eq!(reqs[1].target, "/proxy/v1/chat/completions");
    assert_eq!(reqs.len(), 3, "max_variants 0 sends nothing");
}

#[test]
fn chat_expansion_errors_are_clear_and_never_contain_the_key() {
    let _g = setup();
    let cases: Vec<((u16, String), &[&str])> = vec![
        (
            (500, format!("upstream exploded, key was {KEY}")),
            &["500", "server error", "upstream exploded", "[REDACTED]"],
        ),
        (
            (
                401,
                format!(r#"{{"error":{{"message":"Incorrect API key provided: {KEY}"}}}}"#),
            ),
            &["401", "unauthorized", "Incorrect API key"],
        ),
        ((200, "{not json".to_string()), &["not valid JSON"]),
        (
            (200, json!({"choices": []}).to_string()),
            &["choices[0].message.content"],
        ),
        (
            (
                200,
                json!({"choices": [{"message": {"content": null}}]}).to_string(),
            ),
            &["choices[0].message.content"],
        ),
    ];
    for (resp, needles) in cases {
        let server = canned(vec![resp]);
        let mut opts = ChatOptions::new(server.base().clone(), "m");
        opts.api_key = Some(key());
        let err = OpenAiChatExpander::new(opts)
            .unwrap()
            .expand("q")
            .unwrap_err();
        assert_no_key(&err);
        let msg = err.to_string();
        for n in needles {
            assert!(msg.contains(n), "{msg:?} should contain {n:?}");
        }
        eprintln!("ok: {msg}");
    }
    let mut opts = ChatOptions::new("http://127.0.0.1:9", "m");
    opts.api_key = Some(ApiKey::new("QUARRY_MODELS_TEST_UNSET_VAR", None));
    let err = OpenAiChatExpander::new(opts).unwrap_err();
    assert!(matches!(err, ModelError::MissingApiKey { .. }), "{err:?}");
    let err = OpenAiChatExpander::new(ChatOptions::new("http://127.0.0.1:9", " ")).unwrap_err();
    assert!(err.to_string().contains("model name is empty"), "{err}");
}

/// `open_expander` / `open_embedder` wire `openai:` and `ollama:` specs to the endpoints and key
/// variable of the `ModelEnv`.
#[test]
fn specs_open_remote_models() {
    let _g = setup();
    let server = canned(vec![
        (200, chat_response("alpha\nbeta")),
        (200, openai_response(&[vec![0.5, 0.5]], false)),
        (200, chat_response("gamma")),
        (
            200,
            json!({"model": "nomic-embed-text", "embeddings": [[0.1, 0.2, 0.3]]}).to_string(),
        ),
    ]);
    let env = ModelEnv {
        openai_base_url: format!("{}/v1", server.base()),
        openai_key: key(),
        ollama_host: server.base().clone(),
        rerank_url: None,
        rerank_key: ApiKey::new("QUARRY_MODELS_TEST_UNSET_VAR", None),
        hub: ModelCacheOptions::from_vars(&|k| std::env::var(k).ok()),
        embed_quantize: None,
    };
    let no_progress = |_: &HubProgress| {};
    let chat = ModelSpec::parse("openai:gpt-4o-mini").unwrap();
    let x = open_expander(&chat, &env).unwrap();
    assert_eq!(x.expand("q").unwrap(), vec!["alpha", "beta"]);
    let emb = ModelSpec::parse("openai:text-embedding-3-small").unwrap();
    let e = open_embedder(&emb, &env, &no_progress).unwrap();
    assert_eq!(e.embed_queries(&["q"]).unwrap(), vec![vec![0.5, 0.5]]);
    let x = open_expander(&ModelSpec::parse("ollama:qwen3").unwrap(), &env).unwrap();
    assert_eq!(x.expand("q").unwrap(), vec!["gamma"]);
    let e = open_embedder(
        &ModelSpec::parse("ollama:nomic-embed-text").unwrap(),
        &env,
        &no_progress,
    )
    .unwrap();
    assert_eq!(e.embed_passages(&["p"]).unwrap().len(), 1);
    let reqs = server.requests();
    assert_eq!(reqs[0].target, "/v1/chat/completions");
    assert_eq!(
        reqs[0].header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(reqs[1].target, "/v1/embeddings");
    assert_eq!(
        reqs[1].header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(reqs[2].target, "/v1/chat/completions");
    assert!(reqs[2].header("authorization").is_none());
    assert_eq!(reqs[2].json()["model"], "qwen3");
    assert_eq!(reqs[3].target, "/api/embed");

    // A rerank API spec goes to QUARRY_RERANK_URL; without it the error names the variable.
    let spec = ModelSpec::parse("jina:jina-reranker-v2-base-multilingual").unwrap();
    let err = err_of(open_reranker(&spec, &env, &no_progress));
    assert!(err.to_string().contains("QUARRY_RERANK_URL"), "{err}");
    let server = canned(vec![(
        200,
        json!({"results": [{"index": 0, "relevance_score": 0.75}]}).to_string(),
    )]);
    let env = ModelEnv {
        rerank_url: Some(format!("{}/v1/rerank", server.base())),
        rerank_key: key(),
        ..env
    };
    let r = open_reranker(&spec, &env, &no_progress).unwrap();
    assert_eq!(r.score("q", &["a"]).unwrap(), vec![0.75]);
    let reqs = server.requests();
    assert_eq!(reqs[0].target, "/v1/rerank");
    assert_eq!(
        reqs[0].header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(
        reqs[0].json()["model"],
        "jina-reranker-v2-base-multilingual"
    );

    // The hosted OpenAI API without its key variable: a named error, not an HTTP 401.
    let env = ModelEnv {
        openai_base_url: "https://api.openai.com/v1".into(),
        openai_key: ApiKey::new("QUARRY_MODELS_TEST_UNSET_VAR", None),
        ..env
    };
    let err = err_of(open_embedder(&emb, &env, &no_progress));
    assert!(matches!(err, ModelError::MissingApiKey { .. }), "{err:?}");
    assert!(err.to_string().contains("QUARRY_MODELS_TEST_UNSET_VAR"));
}

/// The error of a result whose success type (a boxed model) has no `Debug`.
fn err_of<T>(r: Result<T, ModelError>) -> ModelError {
    match r {
        Ok(_) => panic!("expected an error"),
        Err(e) => e,
    }
}
