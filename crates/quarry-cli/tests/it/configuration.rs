//! Configuration through the real binary: `serve --print-config` (values, where each came
//! from, secrets masked) and each command's `--help` listing the options it uses.

use crate::common::{Quarry, assert_success, stdout};
use serde_json::Value;

/// The `--print-config` line of `setting`.
fn line<'a>(text: &'a str, setting: &str) -> &'a str {
    text.lines()
        .find(|l| l.split_whitespace().next() == Some(setting))
        .unwrap_or_else(|| panic!("no line for {setting} in:\n{text}"))
}

#[test]
fn print_config_shows_values_and_their_sources_with_secrets_masked() {
    let q = Quarry::new();
    let envs = [
        ("QUARRY_INGEST_WORKERS", "3"),
        ("QUARRY_HTTP_MAX_CONNECTIONS", "64"),
        ("OPENAI_API_KEY", "sk-print-config-Hunter2"),
        ("QUARRY_CHAT_API_KEY", "sk-chat-Hunter2"),
    ];
    let args = ["serve", "--print-config", "--port", "9999"];
    let out = q.run_env(&args, &envs);
    assert_success(&args, &out);
    let text = stdout(&out);
    assert!(!text.contains("Hunter2"), "a key was printed:\n{text}");

    assert!(line(&text, "--port").contains("9999") && line(&text, "--port").contains("[flag]"));
    let conns = line(&text, "--max-connections");
    assert!(
        conns.contains("64") && conns.contains("[environment (QUARRY_HTTP_MAX_CONNECTIONS)]"),
        "{conns}"
    );
    let tools = line(&text, "--max-tools");
    assert!(
        tools.contains("32") && tools.contains("[default]"),
        "{tools}"
    );
    let workers = line(&text, "QUARRY_INGEST_WORKERS");
    assert!(
        workers.contains(" 3 ") && workers.contains("[environment]"),
        "{workers}"
    );
    let key = line(&text, "OPENAI_API_KEY");
    assert!(
        key.contains("****") && key.contains("[environment]"),
        "{key}"
    );
    let lease = line(&text, "QUARRY_JOB_LEASE_SECS");
    assert!(
        lease.contains("60") && lease.contains("[default]"),
        "{lease}"
    );
    assert!(line(&text, "data").contains(&q.home().display().to_string()));
    // Tests-only variables are not settings of the server.
    assert!(!text.contains("QUARRY_TEST_DOCS"), "{text}");
    // It only prints: no index was created.
    assert!(
        !q.home().join("index").exists(),
        "print-config opened the index"
    );

    // The same as JSON.
    let args = ["--json", "serve", "--print-config"];
    let out = q.run_env(&args, &envs);
    assert_success(&args, &out);
    let settings: Vec<Value> = serde_json::from_str(&stdout(&out)).expect("JSON");
    let chat_key = settings
        .iter()
        .find(|s| s["setting"] == "QUARRY_CHAT_API_KEY")
        .expect("QUARRY_CHAT_API_KEY listed");
    assert_eq!(chat_key["value"], "****");
    assert_eq!(chat_key["source"], "environment");
    let port = settings
        .iter()
        .find(|s| s["setting"] == "--port")
        .expect("--port listed");
    assert_eq!(port["source"], "default");
}

#[test]
fn each_command_lists_the_options_it_uses() {
    let q = Quarry::new();
    let help = |args: &[&str]| {
        let out = q.run(args);
        assert_success(args, &out);
        stdout(&out)
    };
    let token = help(&["token", "create", "--help"]);
    for flag in [
        "--embed-model",
        "--rerank-model",
        "--expand-model",
        "--summary-model",
        "--ocr",
    ] {
        assert!(!token.contains(flag), "token create lists {flag}:\n{token}");
    }
    assert!(
        token.contains("--space"),
        "the global --space is listed:\n{token}"
    );

    let query = help(&["query", "--help"]);
    for flag in ["--embed-model", "--rerank-model", "--expand-model"] {
        assert!(query.contains(flag), "query lacks {flag}:\n{query}");
    }
    assert!(
        !query.contains("--summary-model") && !query.contains("--ocr"),
        "{query}"
    );

    // vsearch expands queries (seed 001) but never reranks.
    let vsearch = help(&["vsearch", "--help"]);
    assert!(
        vsearch.contains("--embed-model") && vsearch.contains("--expand-model"),
        "{vsearch}"
    );
    assert!(!vsearch.contains("--rerank-model"), "{vsearch}");

    let upload = help(&["kb", "upload", "--help"]);
    for flag in ["--embed-model", "--summary-model", "--ocr"] {
        assert!(upload.contains(flag), "kb upload lacks {flag}:\n{upload}");
    }
    assert!(!upload.contains("--rerank-model"), "{upload}");

    let serve = help(&["serve", "--help"]);
    for flag in [
        "--embed-model",
        "--rerank-model",
        "--summary-model",
        "--ocr",
        "--print-config",
    ] {
        assert!(serve.contains(flag), "serve lacks {flag}:\n{serve}");
    }
    let search = help(&["search", "--help"]);
    assert!(!search.contains("--embed-model"), "{search}");
    let update = help(&["update", "--help"]);
    assert!(
        update.contains("--ocr") && !update.contains("--embed-model"),
        "{update}"
    );
}

#[test]
fn a_model_flag_on_a_command_that_loads_none_is_refused() {
    let q = Quarry::new();
    let out = q.run(&["status", "--embed-model", "openai:x"]);
    assert!(!out.status.success(), "status took --embed-model");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--embed-model"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
