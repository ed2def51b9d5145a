//! The start-up snapshot of the environment ([`config::Env`]) turned into the typed options
//! libraries take, and `serve --print-config`.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, Result};
use quarry_engine::fusion::Fusion;
use quarry_engine::{EngineOptions, IngestOptions, ModelEnv, parse_ocr};

use crate::config::{self, Env, Kind};

/// `$QUARRY_HOME`, else `$XDG_DATA_HOME/quarry`, else `~/.local/share/quarry`.
pub(crate) fn data_home(env: &Env) -> Result<PathBuf> {
    let set = |v| env.raw(v).filter(|s| !s.is_empty()).map(PathBuf::from);
    if let Some(home) = set(&config::QUARRY_HOME) {
        return Ok(home);
    }
    if let Some(xdg) = set(&config::XDG_DATA_HOME) {
        return Ok(xdg.join("quarry"));
    }
    match set(&config::HOME) {
        Some(home) => Ok(home.join(".local/share/quarry")),
        None => anyhow::bail!("cannot find a data directory: set QUARRY_HOME"),
    }
}

/// Where the index lives and which folder files are too large.
pub(crate) fn engine_options(env: &Env, index: Option<&str>) -> Result<EngineOptions> {
    let mut opts = EngineOptions::new(data_home(env)?, index);
    if let Some(v) = env.raw(&config::QUARRY_MAX_FILE_BYTES) {
        opts.max_file_bytes = v
            .trim()
            .parse()
            .map_err(|_| anyhow::anyhow!("QUARRY_MAX_FILE_BYTES={v:?} is not a number of bytes"))?;
    }
    Ok(opts)
}

/// The key source credentials are sealed with (`QUARRY_SECRET_KEY`), when set.
pub(crate) fn secret_key(env: &Env) -> Result<Option<std::sync::Arc<quarry_secrets::SecretKey>>> {
    match env.get(&config::QUARRY_SECRET_KEY) {
        None => Ok(None),
        Some(text) => quarry_secrets::SecretKey::from_hex(text)
            .map(|k| Some(std::sync::Arc::new(k)))
            .map_err(|e| anyhow::anyhow!("QUARRY_SECRET_KEY: {e}")),
    }
}

/// Conversion limits, OCR and retries; every conversion runs in a child of this binary
/// (`program args…`), whose environment holds only [`config::CONVERTER_CHILD_ENV`].
pub(crate) fn ingest_options(
    env: &Env,
    ocr: Option<&str>,
    program: PathBuf,
    args: Vec<String>,
) -> Result<IngestOptions> {
    let mut o = IngestOptions::default();
    let limits = &mut o.convert.limits;
    if let Some(mb) = env.u64(&config::QUARRY_MAX_UPLOAD_MB)? {
        limits.max_bytes = mb.max(1) * 1024 * 1024;
    }
    if let Some(p) = env.u64(&config::QUARRY_MAX_PAGES)? {
        limits.max_pages = u32::try_from(p).unwrap_or(u32::MAX).max(1);
    }
    if let Some(s) = env.u64(&config::QUARRY_CONVERT_TIMEOUT_SECS)? {
        limits.timeout = Duration::from_secs(s.max(1));
    }
    if let Some(mb) = env.u64(&config::QUARRY_CONVERT_MEMORY_MB)? {
        limits.max_memory_bytes = mb.saturating_mul(1024 * 1024);
    }
    if let Some(s) = env.u64(&config::QUARRY_CHUNK_TIMEOUT_SECS)? {
        o.chunk.timeout = Some(Duration::from_secs(s.max(1)));
    }
    if let Some(mb) = env.u64(&config::QUARRY_CHUNK_MEMORY_MB)? {
        o.chunk.max_memory_bytes = (mb > 0).then(|| mb.saturating_mul(1024 * 1024));
    }
    if let Some(s) = env.u64(&config::QUARRY_INGEST_RETRY_SECS)? {
        o.retry_base = Duration::from_secs(s);
    }
    if let Some(ocr) = ocr {
        o.convert.ocr = parse_ocr(ocr)?;
    }
    if let Some(langs) = env.get(&config::QUARRY_OCR_LANGS) {
        o.convert.ocr_languages = langs.to_owned();
    }
    o.convert.isolation = quarry_convert::Isolation::Child {
        program,
        args,
        env: config::CONVERTER_CHILD_ENV
            .iter()
            .filter_map(|v| Some((v.name.into(), env.raw(v)?.into())))
            .collect(),
    };
    Ok(o)
}

/// How often `quarry embed` adds what it embedded so far to the vector index
/// (`QUARRY_EMBED_CHECKPOINT_SECS`).
pub(crate) fn embed_checkpoint(env: &Env) -> Result<Duration> {
    Ok(env
        .u64(&config::QUARRY_EMBED_CHECKPOINT_SECS)?
        .map_or(quarry_engine::EMBED_CHECKPOINT, Duration::from_secs))
}

/// How many ingestion workers run and how long their leases last.
pub(crate) fn worker_options(env: &Env) -> Result<quarry_queue::WorkerOptions> {
    let mut o = quarry_queue::WorkerOptions::default();
    if let Some(n) = env.u64(&config::QUARRY_INGEST_WORKERS)? {
        if n == 0 || n > 64 {
            anyhow::bail!("QUARRY_INGEST_WORKERS={n}: use 1 to 64");
        }
        o.concurrency = n as usize;
    }
    if let Some(s) = env.u64(&config::QUARRY_JOB_LEASE_SECS)? {
        o.lease = Duration::from_secs(s.max(2));
    }
    Ok(o)
}

/// How syncs of sources run (`QUARRY_SOURCE_LEASE_SECS`; for `serve`, `--allow-net` and
/// whether its callers may be other than the machine's owner).
pub(crate) fn source_options(
    env: &Env,
    allow_net: Option<&str>,
    guard_scheduled: bool,
) -> Result<quarry_engine::SourceOptions> {
    let mut o = quarry_engine::SourceOptions {
        guard_scheduled,
        ..quarry_engine::SourceOptions::default()
    };
    if let Some(s) = env.u64(&config::QUARRY_SOURCE_LEASE_SECS)? {
        let min = quarry_engine::MIN_SOURCE_LEASE.as_secs();
        if s < min {
            anyhow::bail!("QUARRY_SOURCE_LEASE_SECS={s}: use at least {min} (seconds)");
        }
        o.lease = Duration::from_secs(s);
    }
    if let Some(list) = allow_net {
        o.net = quarry_hub::NetPolicy::parse_allow_list(list)
            .map_err(|e| anyhow::anyhow!("--allow-net: {e}"))?;
    }
    Ok(o)
}

/// Model endpoints, keys and the Hub cache.
pub(crate) fn model_env(env: &Env) -> ModelEnv {
    ModelEnv::from_vars(&env.lookup())
}

/// `QUARRY_FUSION`: calibrated (default) or rrf.
pub(crate) fn fusion(env: &Env) -> Result<Fusion> {
    match env.raw(&config::QUARRY_FUSION) {
        Some(v) if !v.trim().is_empty() => Fusion::parse(v)
            .with_context(|| format!("QUARRY_FUSION={v:?}: use 'calibrated' (default) or 'rrf'")),
        _ => Ok(Fusion::default()),
    }
}

/// The built-in web search's backend (`None`: off).
pub(crate) fn web_search(env: &Env) -> Result<Option<quarry_hub::WebSearchOptions>> {
    quarry_hub::WebSearchOptions::from_lookup(env.lookup()).map_err(|e| anyhow::anyhow!(e))
}

/// Most stdio upstreams the hub starts at once (`QUARRY_HUB_UPSTREAM_STARTS`).
pub(crate) fn hub_upstream_starts(env: &Env) -> Result<usize> {
    match env.u64(&config::QUARRY_HUB_UPSTREAM_STARTS)? {
        None => Ok(quarry_hub::default_upstream_starts()),
        Some(n @ 1..=256) => Ok(n as usize),
        Some(n) => anyhow::bail!("QUARRY_HUB_UPSTREAM_STARTS={n}: use 1 to 256"),
    }
}

/// The audit log's retention and whether it keeps query text.
pub(crate) fn audit(env: &Env) -> Result<quarry_audit::AuditSettings> {
    quarry_audit::AuditSettings::from_lookup(env.lookup()).map_err(|e| anyhow::anyhow!(e))
}

/// Rate limits per token and for failed authentication.
pub(crate) fn limits(env: &Env) -> Result<quarry_limits::LimitSettings> {
    quarry_limits::LimitSettings::from_lookup(env.lookup()).map_err(|e| anyhow::anyhow!(e))
}

/// The identity providers people sign in with (`--oidc-config`, `--oidc-issuer`); an error
/// names the file or variable and what is wrong, so the server does not start.
pub(crate) fn sign_in(
    env: &Env,
    file: Option<&std::path::Path>,
    issuer: Option<&str>,
) -> Result<quarry_oidc::OidcConfig> {
    let text = match file {
        Some(path) => Some((
            path.display().to_string(),
            std::fs::read_to_string(path)
                .map_err(|e| anyhow::anyhow!("--oidc-config {}: {e}", path.display()))?,
        )),
        None => None,
    };
    let sources = quarry_oidc::ConfigSources {
        file: text.as_ref().map(|(p, t)| (p.as_str(), t.as_str())),
        issuer: issuer.map(str::trim).filter(|s| !s.is_empty()),
        client_id: env.get(&config::QUARRY_OIDC_CLIENT_ID),
        client_secret: env.get(&config::QUARRY_OIDC_CLIENT_SECRET),
    };
    // `client_secret_env` names a variable the operator chose: read for that alone.
    let named = |var: &str| std::env::var(var).ok();
    quarry_oidc::load(&sources, &named).map_err(|e| anyhow::anyhow!("sign-in: {e}"))
}

/// Chat's retrieval and tool-loop settings.
pub(crate) fn chat_settings(env: &Env) -> Result<quarry_chat::ChatSettings> {
    quarry_chat::ChatSettings::from_vars(&env.lookup()).map_err(|e| anyhow::anyhow!(e))
}

/// The chat provider for `spec` (its URL and key from the variables).
pub(crate) fn chat_provider(env: &Env, spec: &str) -> Result<quarry_chat::ProviderConfig> {
    quarry_chat::ProviderConfig::parse(spec, &env.lookup())
        .map_err(|e| anyhow::anyhow!("--chat-model: {e}"))
}

/// How often a server checks its indexes against the store (`QUARRY_INDEX_CHECK_SECS`;
/// `0`: never).
pub(crate) fn index_check(env: &Env) -> Result<Option<Duration>> {
    Ok(match env.u64(&config::QUARRY_INDEX_CHECK_SECS)? {
        None => Some(quarry_queue::INDEX_CHECK),
        Some(0) => None,
        Some(secs) => Some(Duration::from_secs(secs)),
    })
}

/// The web UI's files: embedded, or read from `QUARRY_UI_DIR` (UI development).
pub(crate) fn ui_assets(env: &Env) -> quarry_ui::Assets {
    match env.raw(&config::QUARRY_UI_DIR).filter(|d| !d.is_empty()) {
        Some(dir) => quarry_ui::Assets::from_dir(dir),
        None => quarry_ui::Assets::embedded(),
    }
}

/// The log filter: `QUARRY_LOG`, else `info` (also when it does not parse).
pub(crate) fn log_filter(env: &Env) -> tracing_subscriber::EnvFilter {
    env.raw(&config::QUARRY_LOG)
        .and_then(|f| tracing_subscriber::EnvFilter::try_new(f).ok())
        .unwrap_or_else(|| tracing_subscriber::EnvFilter::new("info"))
}

/// One line of `--print-config`.
#[derive(Debug, serde::Serialize)]
pub(crate) struct Effective {
    /// The option (`--port`) or, for a setting without one, the variable.
    pub(crate) setting: String,
    /// The variable that sets it, when there is one.
    pub(crate) variable: Option<&'static str>,
    /// The value in effect (`****` for keys and tokens; empty when unset).
    pub(crate) value: String,
    /// `flag`, `environment`, `default` or `unset`.
    pub(crate) source: &'static str,
}

/// The settings `quarry serve` runs with: every option of the command (from `matches`, so a
/// flag, the environment or the default), then every variable it reads that has no option.
pub(crate) fn effective(
    root: &clap::Command,
    matches: &clap::ArgMatches,
    command: &str,
    env: &Env,
) -> Result<Vec<Effective>> {
    let mut out = Vec::new();
    let mut from_args = |cmd: &clap::Command, m: &clap::ArgMatches| {
        for arg in cmd.get_arguments() {
            let id = arg.get_id().as_str();
            if matches!(id, "help" | "version") || arg.is_hide_set() {
                continue;
            }
            let variable = arg
                .get_env()
                .and_then(|e| config::lookup_var(&e.to_string_lossy()))
                .map(|v| v.name);
            let source = match m.value_source(id) {
                Some(clap::parser::ValueSource::CommandLine) => "flag",
                Some(clap::parser::ValueSource::EnvVariable) => "environment",
                Some(clap::parser::ValueSource::DefaultValue) => "default",
                _ => "unset",
            };
            let value = m
                .get_raw(id)
                .map(|vals| {
                    vals.map(|v| v.to_string_lossy().into_owned())
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .unwrap_or_default();
            let name = arg
                .get_long()
                .map(|l| format!("--{l}"))
                .unwrap_or_else(|| id.to_owned());
            out.push(Effective {
                setting: name,
                variable,
                value,
                source,
            });
        }
    };
    from_args(root, matches);
    let sub_cmd = root
        .find_subcommand(command)
        .with_context(|| format!("no command {command}"))?;
    let sub = matches
        .subcommand_matches(command)
        .with_context(|| format!("not running {command}"))?;
    from_args(sub_cmd, sub);
    out.push(Effective {
        setting: "data directory".into(),
        variable: None,
        value: data_home(env)?.display().to_string(),
        source: "derived",
    });
    for v in config::ALL {
        let reads = v
            .read_by
            .iter()
            .any(|c| *c == command || *c == "every command");
        if !reads || v.flag.is_some() || v.kind == Kind::TestsOnly {
            continue;
        }
        let (value, source) = match env.raw(v) {
            Some(x) if v.kind == Kind::Secret && !x.trim().is_empty() => {
                ("****".into(), "environment")
            }
            Some(x) => (x.to_owned(), "environment"),
            None => (v.default.to_owned(), "default"),
        };
        out.push(Effective {
            setting: v.name.into(),
            variable: Some(v.name),
            value,
            source,
        });
    }
    Ok(out)
}

/// A digest of the settings `reader` (`search`, `vsearch` or `query`) runs with in the
/// running command `matched` (that command itself, or `serve` / `mcp`): every variable
/// `reader` reads, the value of its option where `matched` has one. The CLI asks a running
/// server to search for it only when both digests agree ([`quarry_server::LocalSocket`]).
/// The variables that only locate the data directory are left out: the socket is in it.
pub(crate) fn search_settings_digest(
    root: &clap::Command,
    matches: &clap::ArgMatches,
    matched: &str,
    reader: &str,
    env: &Env,
) -> String {
    let levels = [
        (
            root.find_subcommand(matched),
            matches.subcommand_matches(matched),
        ),
        (Some(root), Some(matches)),
    ];
    // `Some(value)` when the running command has the option (`None` inside: not given).
    let option = |long: &str| -> Option<Option<String>> {
        levels.iter().find_map(|(cmd, m)| {
            let arg = (*cmd)?
                .get_arguments()
                .find(|a| a.get_long() == Some(long))?;
            Some((*m)?.get_raw(arg.get_id().as_str()).map(|vals| {
                vals.map(|v| v.to_string_lossy().into_owned())
                    .collect::<Vec<_>>()
                    .join(",")
            }))
        })
    };
    let mut text = String::new();
    for v in config::ALL {
        let reads = v
            .read_by
            .iter()
            .any(|c| *c == reader || *c == "every command");
        if !reads
            || v.kind == Kind::TestsOnly
            || v.name == config::QUARRY_HOME.name
            || v.name == config::XDG_DATA_HOME.name
        {
            continue;
        }
        let value = match v.flag.and_then(|f| option(f.trim_start_matches("--"))) {
            Some(given) => given,
            None => env.raw(v).map(str::to_owned),
        };
        match value {
            Some(value) => text.push_str(&format!("{}={value}\n", v.name)),
            None => text.push_str(&format!("{} unset\n", v.name)),
        }
    }
    quarry_core::sha256_hex(text.as_bytes())
}

/// `--print-config` as text: one setting per line, its value and where it came from.
pub(crate) fn print_effective(settings: &[Effective], out: &mut impl std::io::Write) -> Result<()> {
    let width = settings.iter().map(|s| s.setting.len()).max().unwrap_or(0);
    for s in settings {
        let via = match (s.source, s.variable) {
            ("environment", Some(var)) if var != s.setting => format!("environment ({var})"),
            (source, _) => source.to_owned(),
        };
        writeln!(out, "{:width$}  {}  [{via}]", s.setting, s.value)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_home_precedence() {
        let home = |pairs: &[(&str, &str)]| data_home(&Env::from_pairs(pairs)).ok();
        assert_eq!(
            home(&[
                ("QUARRY_HOME", "/q"),
                ("XDG_DATA_HOME", "/x"),
                ("HOME", "/h")
            ]),
            Some(PathBuf::from("/q"))
        );
        assert_eq!(
            home(&[("QUARRY_HOME", ""), ("XDG_DATA_HOME", "/x"), ("HOME", "/h")]),
            Some(PathBuf::from("/x/quarry"))
        );
        assert_eq!(
            home(&[("HOME", "/h")]),
            Some(PathBuf::from("/h/.local/share/quarry"))
        );
        assert_eq!(home(&[]), None);
    }

    #[test]
    fn ingest_and_worker_options_from_variables() {
        let env = Env::from_pairs(&[
            ("QUARRY_MAX_UPLOAD_MB", "0"),
            ("QUARRY_MAX_PAGES", "7"),
            ("QUARRY_CONVERT_TIMEOUT_SECS", "0"),
            ("QUARRY_CONVERT_MEMORY_MB", "64"),
            ("QUARRY_CHUNK_TIMEOUT_SECS", "0"),
            ("QUARRY_CHUNK_MEMORY_MB", "0"),
            ("QUARRY_EMBED_CHECKPOINT_SECS", "0"),
            ("QUARRY_INGEST_RETRY_SECS", "1"),
            ("QUARRY_OCR_LANGS", "eng+deu"),
            ("PATH", "/bin"),
            ("OPENAI_API_KEY", "sk-secret"),
            ("QUARRY_INGEST_WORKERS", "3"),
            ("QUARRY_JOB_LEASE_SECS", "1"),
        ]);
        let o = ingest_options(&env, Some("off"), "/q".into(), vec!["__convert".into()]).unwrap();
        assert_eq!(o.convert.limits.max_bytes, 1024 * 1024);
        assert_eq!(o.convert.limits.max_pages, 7);
        assert_eq!(o.convert.limits.timeout, Duration::from_secs(1));
        assert_eq!(o.convert.limits.max_memory_bytes, 64 * 1024 * 1024);
        assert_eq!(o.chunk.timeout, Some(Duration::from_secs(1)));
        assert_eq!(o.chunk.max_memory_bytes, None);
        assert_eq!(embed_checkpoint(&env).unwrap(), Duration::ZERO);
        let defaults = ingest_options(&Env::default(), None, "/q".into(), vec![]).unwrap();
        assert_eq!(defaults.chunk, quarry_engine::ChunkLimits::default());
        assert_eq!(
            embed_checkpoint(&Env::default()).unwrap(),
            Duration::from_secs(30)
        );
        let chunk = Env::from_pairs(&[("QUARRY_CHUNK_MEMORY_MB", "16")]);
        let o16 = ingest_options(&chunk, None, "/q".into(), vec![]).unwrap();
        assert_eq!(o16.chunk.max_memory_bytes, Some(16 << 20));
        assert_eq!(o.retry_base, Duration::from_secs(1));
        assert_eq!(o.convert.ocr, quarry_convert::Ocr::Off);
        assert_eq!(o.convert.ocr_languages, "eng+deu");
        let quarry_convert::Isolation::Child { env: child, .. } = &o.convert.isolation else {
            panic!("conversions run in a child");
        };
        // The child gets PATH, never a key.
        assert_eq!(child, &vec![("PATH".into(), "/bin".into())]);
        let w = worker_options(&env).unwrap();
        assert_eq!(w.concurrency, 3);
        assert_eq!(w.lease, Duration::from_secs(2));

        let bad = Env::from_pairs(&[("QUARRY_INGEST_WORKERS", "65")]);
        assert!(
            worker_options(&bad)
                .unwrap_err()
                .to_string()
                .contains("use 1 to 64")
        );
        let bad = Env::from_pairs(&[("QUARRY_MAX_PAGES", "many")]);
        let err = ingest_options(&bad, None, "/q".into(), vec![]).unwrap_err();
        assert!(
            err.to_string().contains("QUARRY_MAX_PAGES=\"many\""),
            "{err}"
        );
        let bad = Env::from_pairs(&[("QUARRY_FUSION", "best")]);
        assert!(fusion(&bad).unwrap_err().to_string().contains("'rrf'"));
        assert_eq!(fusion(&Env::default()).unwrap(), Fusion::default());
    }
}
