//! `quarry`: the command line. Parses arguments, calls `quarry-engine`, prints results —
//! readable by default, JSON with `--json`. No engine logic lives here.

mod access;
mod browse;
mod cli;
mod config;
mod eval;
mod hub;
mod kb;
mod migrate;
mod output;
mod policy;
mod progress;
mod runtime;
mod settings;
mod source;

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context as _, Result};
use clap::CommandFactory;
use quarry_core::format_search_summary;
use quarry_engine::{
    EmbedOptions, Engine, GetRequest, ModelConfig, ModelSpec, MultiGetItem, MultiGetRequest,
    SearchAnswer, SearchCommand, SearchVerb, UpdateOptions, UpdateReport,
};
use serde_json::json;

use crate::cli::{
    AuthArg, Cli, CollectionCmd, Command, ContextCmd, LogFormat, SearchArgs, ServeArgs, Transport,
    parse_cli,
};
use crate::output::print_json;
use crate::progress::CliProgress;

/// A `--filter` value's JSON text: the value, or the file `@FILE` names.
fn filter_text(arg: Option<&str>) -> Result<Option<String>> {
    let Some(arg) = arg else {
        return Ok(None);
    };
    let text = match arg.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path).map_err(|e| {
            quarry_core::Error::invalid(format!("--filter: cannot read {path}: {e}"))
        })?,
        None => arg.to_owned(),
    };
    Ok(Some(text).filter(|t| !t.trim().is_empty()))
}

/// A `--filter` value: JSON text, or `@FILE` holding it.
fn parse_filter_arg(arg: Option<&str>) -> Result<Option<quarry_engine::Filter>> {
    match filter_text(arg)? {
        None => Ok(None),
        Some(text) => Ok(Some(quarry_engine::Filter::parse_str(&text)?)),
    }
}

/// The search `quarry search|vsearch|query` asks for, with the options that shape its output.
fn search_command(command: &Command) -> Result<Option<(SearchCommand, &SearchArgs)>> {
    let (mode, args, q) = match command {
        Command::Search(args) => (SearchVerb::Search, args, None),
        Command::Vsearch(v) => (SearchVerb::Vsearch, &v.search, None),
        Command::Query(q) => (SearchVerb::Query, &q.search, Some(q)),
        _ => return Ok(None),
    };
    let cmd = SearchCommand {
        verb: mode,
        query: args.query.join(" "),
        limit: args.limit,
        min_score: args.min_score,
        collection: args.collection.clone(),
        filter: filter_text(args.filter.as_deref())?,
        as_of: args.as_of.clone(),
        searches: q.map(|q| q.searches.clone()).unwrap_or_default(),
        intent: q.and_then(|q| q.intent.clone()),
        collections: q.map(|q| q.collections.clone()).unwrap_or_default(),
        candidate_limit: q.and_then(|q| q.candidate_limit),
    };
    Ok(Some((cmd, args)))
}

/// A search answered by a running server of this data directory (its index open, its
/// models loaded) when one runs with this command's settings; `None`: search here.
fn search_through_server(
    cli: &Cli,
    matches: &clap::ArgMatches,
    env: &config::Env,
    cmd: &SearchCommand,
) -> Result<Option<SearchAnswer>> {
    let dir = settings::engine_options(env, cli.index.as_deref())?.data_dir();
    let socket = dir.join(quarry_server::SOCKET_NAME);
    if !socket.exists() {
        return Ok(None);
    }
    let mode = cmd.verb.name();
    let digest = settings::search_settings_digest(&Cli::command(), matches, mode, mode, env);
    match quarry_server::ask_local(&socket, &digest, cmd) {
        quarry_server::LocalOutcome::Answer(answer) => Ok(Some(answer)),
        quarry_server::LocalOutcome::Failed(message) => Err(anyhow::anyhow!(message)),
        quarry_server::LocalOutcome::NotServed(_) => Ok(None),
    }
}

/// A search's answer as `search`, `vsearch` and `query` print it.
fn print_search_answer(
    json: bool,
    args: &SearchArgs,
    query: &str,
    answer: &SearchAnswer,
) -> Result<()> {
    if json {
        // `query --json` carries the stages that ran; the others print the results alone.
        return match answer.stages {
            Some(_) => print_json(answer),
            None => print_json(&answer.results),
        };
    }
    if let Some(stages) = &answer.stages {
        eprintln!("stages: {}", stages.join(", "));
    }
    for w in &answer.warnings {
        eprintln!("warning: {w}");
    }
    let hits = &answer.results;
    let mut out = std::io::stdout().lock();
    if args.files {
        for h in hits {
            writeln!(
                out,
                "{},{},{},{}",
                h.docid,
                h.score,
                h.file,
                h.context.as_deref().unwrap_or("")
            )?;
        }
    } else if hits.is_empty() {
        writeln!(out, "{}", format_search_summary(hits, query))?;
    } else {
        for h in hits {
            writeln!(
                out,
                "{} {}% {} - {}",
                h.docid,
                (h.score * 100.0).round(),
                h.file,
                h.title
            )?;
            if let Some(c) = &h.context {
                writeln!(out, "  Context: {c}")?;
            }
            for line in h.snippet.lines() {
                writeln!(out, "  {line}")?;
            }
            writeln!(out)?;
        }
    }
    Ok(())
}

/// A metadata report as a table: field, types, documents, top values.
fn print_metadata(out: &mut impl Write, report: &quarry_engine::MetadataReport) -> Result<()> {
    writeln!(
        out,
        "{} document{}",
        report.documents,
        if report.documents == 1 { "" } else { "s" }
    )?;
    if report.fields.is_empty() {
        return Ok(());
    }
    let rows: Vec<[String; 4]> = report
        .fields
        .iter()
        .map(|f| {
            let values: Vec<String> = f
                .top_values
                .iter()
                .map(|v| match &v.value {
                    serde_json::Value::String(s) => format!("{s} ({})", v.count),
                    other => format!("{other} ({})", v.count),
                })
                .collect();
            [
                f.field.clone(),
                f.types.join("|"),
                f.documents.to_string(),
                values.join(", "),
            ]
        })
        .collect();
    let head = ["FIELD", "TYPES", "DOCS", "TOP VALUES"];
    let width = |i: usize| {
        rows.iter()
            .map(|r| r[i].chars().count())
            .chain([head[i].len()])
            .max()
            .unwrap_or(0)
    };
    let (w0, w1, w2) = (width(0), width(1), width(2));
    writeln!(
        out,
        "{:w0$}  {:w1$}  {:>w2$}  {}",
        head[0], head[1], head[2], head[3]
    )?;
    for r in &rows {
        writeln!(out, "{:w0$}  {:w1$}  {:>w2$}  {}", r[0], r[1], r[2], r[3])?;
    }
    Ok(())
}

/// What `serve` serves, with the HTTP listener it bound before anything slow.
enum Serving {
    /// MCP over stdio only.
    Stdio,
    /// MCP over Streamable HTTP, the REST API and the web UI.
    Http(std::net::TcpListener),
    /// Both, sharing one engine.
    Both(std::net::TcpListener),
}

/// The hidden first argument that makes this binary a converter child (see
/// `quarry_convert::Isolation::Child`); not a command people type.
const CONVERT_CHILD_ARG: &str = "__convert";

/// How long `serve` waits on SIGTERM for jobs in progress. `docker stop` sends SIGKILL 10 s
/// after SIGTERM by default: the jobs get half of that, the feed follower and the audit
/// flush the rest. A job still running then (a sync waiting on a slow address, say) keeps its
/// lease and is taken over once it lapses.
const WORKER_STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

fn main() -> ExitCode {
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == CONVERT_CHILD_ARG)
    {
        return quarry_convert::child_main();
    }
    let (cli, matches) = parse_cli();
    // The one read of the environment: everything below takes options from this snapshot.
    let env = config::Env::from_process();
    let result = match &cli.command {
        Command::Serve(args) if args.print_config => print_config(&cli, &matches, &env),
        // Reads the embedded data directory whatever --database says (that names the target).
        Command::Migrate(args) => migrate::run(
            args,
            cli.index.as_deref(),
            cli.database.as_deref(),
            cli.blobs.as_deref(),
            cli.json,
            &env,
        ),
        _ => run(cli, &matches, &env),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Broken pipe (`quarry search … | head`) is not an error worth reporting.
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) {
                return ExitCode::SUCCESS;
            }
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// `serve --print-config`: the settings in effect and where each came from.
fn print_config(cli: &Cli, matches: &clap::ArgMatches, env: &config::Env) -> Result<()> {
    let settings = settings::effective(&Cli::command(), matches, "serve", env)?;
    if cli.json {
        print_json(&settings)
    } else {
        settings::print_effective(&settings, &mut std::io::stdout().lock())
    }
}

fn open(cli: &Cli, env: &config::Env) -> Result<Engine> {
    let opts = settings::engine_options(env, cli.index.as_deref())?;
    let dir = opts.data_dir();
    let spec = |flag: &str, v: Option<&String>| -> Result<Option<ModelSpec>> {
        match v.map(|s| s.trim()) {
            None | Some("") => Ok(None),
            Some(s) => ModelSpec::parse(s)
                .map(Some)
                .with_context(|| format!("invalid --{flag} {s:?}")),
        }
    };
    let chosen = cli.command.engine_choices();
    let embed_model = chosen.embed.and_then(|a| a.embed_model.as_ref());
    let embed_off = embed_model.is_some_and(|m| m.trim().eq_ignore_ascii_case("none"));
    let models = ModelConfig {
        embed: spec("embed-model", embed_model.filter(|_| !embed_off))?,
        embed_off,
        rerank: spec(
            "rerank-model",
            chosen.rerank.and_then(|a| a.rerank_model.as_ref()),
        )?,
        expand: spec(
            "expand-model",
            chosen.expand.and_then(|a| a.expand_model.as_ref()),
        )?,
        annotate: spec(
            "summary-model",
            chosen.summary.and_then(|a| a.summary_model.as_ref()),
        )?,
        env: settings::model_env(env),
    };
    let fusion = settings::fusion(env)?;
    // Every conversion runs in a child of this binary, so no file can abort the CLI or the
    // server (a parser's stack overflow or allocation failure ends only the child).
    let ingest = settings::ingest_options(
        env,
        chosen.ocr.and_then(|o| o.ocr.as_deref()),
        std::env::current_exe().context("cannot locate the quarry binary")?,
        vec![CONVERT_CHILD_ARG.to_owned()],
    )?;
    let database = cli
        .database
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty());
    let mut blob_locks: Option<std::sync::Arc<dyn quarry_blobs::BlobLocks>> = None;
    let engine = match database {
        None => Engine::open(opts)
            .with_context(|| format!("cannot open the index at {}", dir.display()))?,
        Some(url) => {
            // The database is the system of record; the index directory keeps what this
            // node derives from it.
            let store =
                std::sync::Arc::new(quarry_store_pg::PgStore::connect(url).context(
                    "cannot open the database given by --database / QUARRY_DATABASE_URL",
                )?);
            // Blobs shared by several nodes are collected under the database's lock.
            blob_locks = Some(store.clone());
            Engine::open_with(opts, store.clone())
                .with_context(|| format!("cannot open the index at {}", dir.display()))?
                .with_vector_search(store)
        }
    };
    let engine = match cli
        .blobs
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        None => engine,
        Some(url) => {
            let locks = blob_locks.unwrap_or_else(|| {
                std::sync::Arc::new(quarry_blobs::FileBlobLocks::new(dir.join("blobs.lock")))
            });
            let settings: Vec<(&str, &str)> = config::BLOBS_ENV
                .iter()
                .filter_map(|v| Some((v.name, env.get(v)?)))
                .collect();
            let blobs = quarry_blobs_object::ObjectBlobStore::open(
                url,
                &dir.join("blob-staging"),
                locks,
                &settings,
            )
            .context("cannot open the blob store given by --blobs / QUARRY_BLOBS_URL")?;
            engine.with_blobs(std::sync::Arc::new(blobs))
        }
    };
    // A server's sources: `--allow-net`, and guarded scheduled syncs when it takes tokens.
    let serving = match &cli.command {
        Command::Serve(a) => Some(a),
        _ => None,
    };
    let sources = settings::source_options(
        env,
        serving.and_then(|a| a.allow_net.as_deref()),
        serving.is_some_and(|a| auth_mode(a) == quarry_server::AuthMode::Token),
    )?;
    let engine = engine
        .with_models(models)
        .with_fusion(fusion)
        .with_ingest(ingest)
        .with_embed_checkpoint(settings::embed_checkpoint(env)?)
        .with_sources(sources);
    let engine = match settings::secret_key(env)? {
        Some(key) => engine.with_secret_key(key),
        None => engine,
    };
    match cli
        .space
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        None => Ok(engine),
        Some(key) => {
            let space = quarry_access::Directory::new(engine.store_handle())
                .space(key)
                .with_context(|| {
                    format!("--space {key:?}: create it with 'quarry space create'")
                })?;
            Ok(engine.scoped(quarry_core::Scope::owner(space.name)))
        }
    }
}

fn run(cli: Cli, matches: &clap::ArgMatches, env: &config::Env) -> Result<()> {
    let search = search_command(&cli.command)?;
    if let Some((cmd, args)) = &search
        && !args.no_server
        && let Some(answer) = search_through_server(&cli, matches, env, cmd)?
    {
        return print_search_answer(cli.json, args, &cmd.query, &answer);
    }
    let engine = open(&cli, env)?;
    if let Some((cmd, args)) = &search {
        if engine.ensure_indexes(|n| {
            eprintln!(
                "This data directory has no keyword index yet: indexing {n} documents from the store…"
            )
        })? {
            eprintln!("Indexed.");
        }
        let answer = engine.run_search_command(cmd)?;
        return print_search_answer(cli.json, args, &cmd.query, &answer);
    }
    match &cli.command {
        Command::User(cmd) => return access::user(&engine, cmd, cli.json),
        Command::Space(cmd) => return access::space(&engine, cmd, cli.json),
        Command::Group(cmd) => return access::group(&engine, cmd, cli.json),
        Command::Token(cmd) => {
            return access::token(&engine, cmd, cli.json, cli.space.as_deref(), env);
        }
        Command::Audit(args) => {
            return access::audit(&engine, args, cli.json, cli.space.as_deref());
        }
        Command::Policy(cmd) => return policy::policy(&engine, cmd, cli.json),
        Command::Approvals(cmd) => return policy::approvals(&engine, cmd, cli.json),
        _ => {}
    }
    if let Command::Kb(k) = &cli.command {
        return kb::run(engine, &k.cmd, cli.json, settings::worker_options(env)?);
    }
    if let Command::Source(k) = &cli.command {
        let space_named = cli.space.as_deref().is_some_and(|s| !s.trim().is_empty());
        return source::run(
            engine,
            &k.cmd,
            cli.json,
            settings::worker_options(env)?,
            space_named,
        );
    }
    if let Command::Hub(cmd) = &cli.command {
        return hub::run(engine, cmd, cli.json);
    }
    let progress = CliProgress::new();
    let mut out = std::io::stdout().lock();
    match &cli.command {
        Command::Collection(cmd) => match cmd {
            CollectionCmd::Add {
                path,
                name,
                mask,
                allow_empty,
                ..
            } => {
                let (c, report) = engine.add_collection(
                    path,
                    name.as_deref(),
                    Some(mask),
                    *allow_empty,
                    &progress,
                )?;
                if cli.json {
                    print_json(&json!({
                        "status": "added", "name": c.name, "path": c.path, "pattern": c.pattern,
                        "documents": c.documents, "report": report,
                    }))?;
                } else {
                    writeln!(
                        out,
                        "Added collection '{}' with {} documents ({})",
                        c.name, c.documents, c.path
                    )?;
                    if !report.skipped.is_empty() {
                        writeln!(
                            out,
                            "  {} files skipped (see warnings above)",
                            report.skipped.len()
                        )?;
                    }
                }
            }
            CollectionCmd::List => {
                let cs = engine.collections()?;
                if cli.json {
                    print_json(&json!({ "collections": cs }))?;
                } else {
                    writeln!(out, "Collections: {}", cs.len())?;
                    for c in cs {
                        writeln!(
                            out,
                            "- {} ({} docs) {} [{}]",
                            c.name, c.documents, c.path, c.pattern
                        )?;
                    }
                }
            }
            CollectionCmd::Remove { name } => {
                let n = engine.remove_collection(name, &progress)?;
                if cli.json {
                    print_json(&json!({"status": "removed", "name": name, "documents": n}))?;
                } else {
                    writeln!(out, "Removed collection '{name}' ({n} documents)")?;
                }
            }
            CollectionCmd::Rename { old, new } => {
                engine.rename_collection(old, new, &progress)?;
                if cli.json {
                    print_json(&json!({"status": "renamed", "old_name": old, "new_name": new}))?;
                } else {
                    writeln!(out, "Renamed '{old}' to '{new}'")?;
                }
            }
        },
        Command::Context(cmd) => match cmd {
            ContextCmd::Add { args } => {
                let (target, text) = match args.as_slice() {
                    [text] => (".", text.as_str()),
                    [path, text] => (path.as_str(), text.as_str()),
                    _ => anyhow::bail!("usage: quarry context add [PATH] TEXT"),
                };
                let c = engine.add_context(target, text)?;
                if cli.json {
                    print_json(&json!({"status": "added", "path": c.path, "text": c.text}))?;
                } else {
                    writeln!(out, "Added context for {}", c.path)?;
                }
            }
            ContextCmd::List => {
                let cs = engine.contexts()?;
                if cli.json {
                    print_json(&json!({ "contexts": cs }))?;
                } else if cs.is_empty() {
                    writeln!(
                        out,
                        "No contexts. Add one with: quarry context add PATH \"description\""
                    )?;
                } else {
                    for c in cs {
                        writeln!(out, "{}: {}", c.path, c.text)?;
                    }
                }
            }
            ContextCmd::Rm { path } => {
                let key = engine.remove_context(path)?;
                if cli.json {
                    print_json(&json!({"status": "removed", "path": key}))?;
                } else {
                    writeln!(out, "Removed context for {key}")?;
                }
            }
        },
        Command::Index { collections, .. } => {
            let report = engine.update(
                &UpdateOptions {
                    pull: false,
                    collections: collections.clone(),
                },
                &progress,
            )?;
            print_update(&mut out, cli.json, &report, "Indexed")?;
        }
        Command::Update {
            pull, collections, ..
        } => {
            let report = engine.update(
                &UpdateOptions {
                    pull: *pull,
                    collections: collections.clone(),
                },
                &progress,
            )?;
            print_update(&mut out, cli.json, &report, "Updated")?;
        }
        Command::Embed {
            collection, force, ..
        } => {
            let opts = EmbedOptions {
                collection: collection.clone(),
                force: *force,
            };
            // A team server's administrator embeds every space at once; `--space` or
            // `--collection` (a name within one space) narrow it to one space.
            let spaces: Vec<String> = engine
                .store_handle()
                .spaces()?
                .into_iter()
                .map(|s| s.name)
                .collect();
            let several = spaces.len() > 1;
            let every_space = cli.space.is_none() && collection.is_none();
            let runs: Vec<(String, quarry_engine::EmbedReport)> = if several && every_space {
                let mut runs = Vec::new();
                for space in spaces {
                    let scoped = engine.scoped(quarry_core::Scope::owner(space.clone()));
                    runs.push((space, scoped.embed(&opts, &progress)?));
                }
                runs
            } else {
                vec![(engine.space().to_owned(), engine.embed(&opts, &progress)?)]
            };
            let mut report = runs[0].1.clone();
            for (_, r) in &runs[1..] {
                report.model_changed |= r.model_changed;
                report.documents_chunked += r.documents_chunked;
                report.chunks_embedded += r.chunks_embedded;
                report.vectors_indexed += r.vectors_indexed;
                report.vectors_removed += r.vectors_removed;
                report.total_chunks += r.total_chunks;
                report.seconds += r.seconds;
            }
            if cli.json {
                let mut v = serde_json::to_value(&report)?;
                v["spaces"] = json!(
                    runs.iter()
                        .map(|(space, r)| {
                            let mut one = serde_json::to_value(r).unwrap_or_default();
                            one["space"] = json!(space);
                            one
                        })
                        .collect::<Vec<_>>()
                );
                print_json(&v)?;
            } else {
                if report.model_changed {
                    writeln!(
                        out,
                        "Embedding model changed: the vector index was rebuilt for {}",
                        report.model
                    )?;
                }
                if runs.len() > 1 {
                    for (space, r) in &runs {
                        writeln!(
                            out,
                            "  space {space}: {} chunks embedded from {} re-chunked documents, {} chunks",
                            r.chunks_embedded, r.documents_chunked, r.total_chunks
                        )?;
                    }
                } else if several {
                    writeln!(
                        out,
                        "  space {} only{}",
                        engine.space(),
                        if collection.is_some() {
                            " (one collection); other spaces were left as they are"
                        } else {
                            "; other spaces were left as they are"
                        }
                    )?;
                }
                writeln!(
                    out,
                    "Embedded {} chunks from {} re-chunked documents with {} ({} dims); vector index: {} added, {} removed, {} chunks in total ({:.1}s)",
                    report.chunks_embedded,
                    report.documents_chunked,
                    report.model,
                    report.dimensions,
                    report.vectors_indexed,
                    report.vectors_removed,
                    report.total_chunks,
                    report.seconds
                )?;
            }
        }
        Command::Ls(args) => browse::ls(&engine, args, cli.json)?,
        Command::Find(args) => browse::find(&engine, args, cli.json)?,
        Command::Grep(args) => browse::grep(&engine, args, cli.json)?,
        Command::Get {
            file,
            from,
            lines,
            line_numbers,
        } => {
            let view = engine.get(&GetRequest {
                file: file.clone(),
                from_line: *from,
                max_lines: *lines,
                line_numbers: *line_numbers,
            })?;
            if cli.json {
                print_json(&view)?;
            } else {
                writeln!(out, "{}", view.text)?;
            }
        }
        Command::MultiGet {
            pattern,
            max_bytes,
            max_lines,
            line_numbers,
        } => {
            let res = engine.multi_get(&MultiGetRequest {
                pattern: pattern.clone(),
                max_lines: *max_lines,
                max_bytes: *max_bytes,
                line_numbers: *line_numbers,
            })?;
            if cli.json {
                print_json(&res)?;
            } else {
                for e in &res.errors {
                    eprintln!("warning: {e}");
                }
                for item in &res.items {
                    match item {
                        MultiGetItem::Document(d) => {
                            writeln!(out, "=== {} ({}) ===\n{}\n", d.name, d.docid, d.text)?
                        }
                        MultiGetItem::Skipped { text, .. } => writeln!(out, "{text}\n")?,
                    }
                }
            }
        }
        Command::Metadata(args) => {
            let filter = parse_filter_arg(args.filter.as_deref())?;
            let report = engine.metadata_fields(
                args.collection.as_deref(),
                filter.as_ref(),
                usize::from(args.top),
            )?;
            if cli.json {
                print_json(&report)?;
            } else {
                print_metadata(&mut out, &report)?;
            }
        }
        Command::Status => {
            let s = engine.status()?;
            if cli.json {
                print_json(&s)?;
            } else {
                writeln!(out, "{}", s.summary())?;
                writeln!(out, "  Data: {}", engine.data_dir().display())?;
                for c in &s.collections {
                    writeln!(
                        out,
                        "  {}: {} [{}], last updated {}",
                        c.name,
                        c.path,
                        c.pattern,
                        c.last_updated.as_deref().unwrap_or("never")
                    )?;
                }
            }
        }
        Command::Eval(args) => eval::run(&engine, &args.eval, cli.json, &mut out)?,
        // `main` runs it before any store is opened; here only for completeness.
        Command::Migrate(args) => {
            return migrate::run(
                args,
                cli.index.as_deref(),
                cli.database.as_deref(),
                cli.blobs.as_deref(),
                cli.json,
                env,
            );
        }
        Command::Mcp(_) => {
            drop(out);
            let local = local_socket(&engine, matches, "mcp", env);
            serve(engine, env, Transport::Mcp, None, local)?
        }
        // Handled before the engine is shared (above).
        Command::Search(_)
        | Command::Vsearch(_)
        | Command::Query(_)
        | Command::Kb(_)
        | Command::Source(_)
        | Command::User(_)
        | Command::Space(_)
        | Command::Group(_)
        | Command::Token(_)
        | Command::Audit(_)
        | Command::Policy(_)
        | Command::Approvals(_)
        | Command::Hub(_) => {}
        Command::Serve(args) => {
            drop(out);
            let local = local_socket(&engine, matches, "serve", env);
            serve(engine, env, args.transport, Some(args), local)?
        }
    }
    Ok(())
}

/// Runs the servers on a tokio runtime. Logs go to stderr only: in stdio mode stdout carries
/// the MCP protocol.
/// The server's authentication: tokens when asked, or when bound beyond loopback.
fn auth_mode(a: &ServeArgs) -> quarry_server::AuthMode {
    match a.auth {
        Some(AuthArg::Token) => quarry_server::AuthMode::Token,
        None if !a.bind.is_loopback() => quarry_server::AuthMode::Token,
        Some(AuthArg::None) | None => quarry_server::AuthMode::Open,
    }
}

/// Where a server answers its command line's searches (`quarry_server::serve_local`), and
/// the settings each search command runs with here.
fn local_socket(
    engine: &Engine,
    matches: &clap::ArgMatches,
    running: &str,
    env: &config::Env,
) -> quarry_server::LocalSocket {
    let root = Cli::command();
    quarry_server::LocalSocket {
        path: engine.data_dir().join(quarry_server::SOCKET_NAME),
        settings: [SearchVerb::Search, SearchVerb::Vsearch, SearchVerb::Query]
            .into_iter()
            .map(|m| {
                let digest =
                    settings::search_settings_digest(&root, matches, running, m.name(), env);
                (m.name().to_owned(), digest)
            })
            .collect(),
    }
}

fn serve(
    engine: Engine,
    env: &config::Env,
    transport: Transport,
    args: Option<&ServeArgs>,
    local: quarry_server::LocalSocket,
) -> Result<()> {
    let json_logs = args.is_some_and(|a| a.log_format == LogFormat::Json);
    let filter = settings::log_filter(env);
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false);
    if json_logs {
        builder.json().init();
    } else {
        builder.init();
    }
    let auth = match args {
        Some(a) => auth_mode(a),
        None => quarry_server::AuthMode::Open,
    };
    let opts = match args {
        Some(a) => {
            if !a.bind.is_loopback()
                && auth == quarry_server::AuthMode::Open
                && !a.allow_unauthenticated_remote
            {
                anyhow::bail!(
                    "refusing to bind {} with --auth none: anyone who can reach it could read and change every document. Drop --auth none (a non-loopback bind requires access tokens), or pass --allow-unauthenticated-remote if the network is trusted",
                    a.bind
                );
            }
            quarry_server::HttpOptions {
                bind: a.bind,
                port: a.port,
                allowed_hosts: a.allowed_hosts.clone(),
                allowed_origins: a.allowed_origins.clone(),
                max_body_bytes: a.max_body_bytes,
                request_timeout: std::time::Duration::from_secs(a.request_timeout),
                header_timeout: std::time::Duration::from_secs(a.header_timeout),
                max_connections: usize::try_from(a.max_connections).unwrap_or(usize::MAX),
                max_connections_per_address: a
                    .max_connections_per_address
                    .map_or(a.max_connections / 4, |n| n)
                    .max(1)
                    .try_into()
                    .unwrap_or(usize::MAX),
                first_byte_timeout: std::time::Duration::from_secs(a.first_byte_timeout),
            }
        }
        None => quarry_server::HttpOptions::default(),
    };
    // Bound before anything slow (the model's load): a taken port is said at once.
    let serving = match transport {
        Transport::Mcp => Serving::Stdio,
        Transport::Http => {
            Serving::Http(quarry_server::bind_http(&opts).map_err(|e| anyhow::anyhow!(e))?)
        }
        Transport::Both => {
            Serving::Both(quarry_server::bind_http(&opts).map_err(|e| anyhow::anyhow!(e))?)
        }
    };
    // Upstreams start one at a time until the models are in: 70 children starting beside
    // the embedding model's load kept it waiting for minutes (issue 65, item 15).
    let models_loading = quarry_hub::PriorityWork::new();
    let mut hub_opts = quarry_hub::HubOptions {
        secret_key: settings::secret_key(env)?,
        upstream_starts: settings::hub_upstream_starts(env)?,
        narrow_starts_while: Some(models_loading.clone()),
        ..Default::default()
    };
    if let Some(a) = args {
        hub_opts.max_tools = usize::from(a.max_tools);
        hub_opts.users_may_run_commands = a.hub_allow_commands;
        if let Some(list) = &a.allow_net {
            hub_opts.net = quarry_hub::NetPolicy::parse_allow_list(list)
                .map_err(|e| anyhow::anyhow!("--allow-net: {e}"))?;
        }
    }
    let chat_provider = match args.and_then(|a| a.chat_model.as_deref()) {
        Some(spec) => Some(settings::chat_provider(env, spec)?),
        None => None,
    };
    let chat_settings = settings::chat_settings(env)?;
    let sign_in = match args {
        Some(a) => settings::sign_in(env, a.oidc_config.as_deref(), a.oidc_issuer.as_deref())?,
        None => quarry_oidc::OidcConfig::default(),
    };
    let audit_settings = settings::audit(env)?;
    let limit_settings = settings::limits(env)?;
    if transport != Transport::Mcp {
        hub_opts.web = settings::web_search(env)?;
    }
    // A stdio session runs no workers (see below).
    let workers = match transport {
        Transport::Mcp => None,
        _ => {
            let mut w = settings::worker_options(env)?;
            // A sync whose node stopped is resumed within its lease and one poll: never a
            // poll longer than half the lease.
            let lease = settings::source_options(env, None, false)?.lease;
            w.source_sync = Some(quarry_queue::SOURCE_SYNC_POLL.min(lease / 2));
            Some(w)
        }
    };
    let ui_assets = settings::ui_assets(env);
    let index_check = settings::index_check(env)?;
    let runtime = runtime::build()?;
    runtime::block_on(&runtime, async move {
        let state = quarry_server::AppState::with_ui_assets(engine, auth, ui_assets);
        // Models load in the background (a first start downloads the default embedding
        // model, with progress on stderr); /health reports model_loaded once they are in.
        let preload = state.root_engine().clone();
        tokio::task::spawn_blocking(move || {
            let _loaded = models_loading.finish_on_drop();
            let progress = progress::CliProgress::new();
            match quarry_store::thread_guard::allow_blocking(|| preload.preload_models(&progress)) {
                Ok(names) if !names.is_empty() => tracing::info!(models = ?names, "models loaded"),
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "models not loaded; vector search will say why")
                }
            }
            match quarry_store::thread_guard::allow_blocking(|| preload.semantic_state()) {
                Ok(quarry_engine::SemanticState::Off) => tracing::info!(
                    "keyword search only (--embed-model none): no embedding model is loaded"
                ),
                Ok(state) => {
                    if let Some(notice) = state.keyword_only_notice() {
                        tracing::warn!("{notice}");
                    }
                }
                Err(e) => tracing::warn!(error = %e, "cannot tell whether vector search is on"),
            }
        });
        // Starting reads the store (queued jobs, hub registrations), which blocks: never on
        // a thread that drives async tasks.
        runtime::off_async(|| -> Result<()> {
            if let Some(workers) = workers {
                state.start_workers(workers)?;
            }
            state.start_follower(index_check)?;
            state.start_audit(audit_settings)?;
            state.start_limits(limit_settings);
            if let Some(url) = args.and_then(|a| a.public_url.as_deref()) {
                state
                    .set_public_url(url)
                    .map_err(|e| anyhow::anyhow!("--public-url: {e}"))?;
            }
            state
                .start_sign_in(sign_in)
                .map_err(|e| anyhow::anyhow!("sign-in: {e}"))?;
            // A stdio session (`quarry mcp`, started per agent session) lists the knowledge
            // tools; it connects upstreams only if a call needs one, never all of them at
            // start.
            if transport != Transport::Mcp {
                state.start_hub(hub_opts)?;
                if let Some(p) = &chat_provider {
                    tracing::info!(model = %p.label(), "chat model configured");
                }
                state.start_chat(chat_provider, chat_settings)?;
            }
            Ok(())
        })?;
        let shutdown = quarry_server::shutdown_on_signals();
        // The command line's searches, until the servers stop (a stdio session's end stops
        // them without a signal).
        let local_stop = shutdown.child_token();
        let local_task = tokio::spawn(quarry_server::serve_local(
            state.clone(),
            local,
            local_stop.clone(),
        ));
        let workers_state = state.clone();
        let http = |state, shutdown, listener: std::net::TcpListener| async move {
            quarry_server::serve_http(state, opts, listener, shutdown, |addr| {
                tracing::info!(%addr, auth = ?auth, "serving the web UI at http://{addr}/, MCP at http://{addr}/mcp and the REST API");
            })
            .await
        };
        match serving {
            Serving::Stdio => quarry_server::serve_stdio(state, shutdown).await?,
            Serving::Http(listener) => http(state, shutdown, listener).await?,
            Serving::Both(listener) => {
                // A stdio client that ran a session and went away ends the process, HTTP
                // included (an agent started it). Stdin that never carried a session —
                // `nohup`, systemd, a closed or foreign stdin — leaves HTTP serving
                // (issue 41: it used to take HTTP down with it).
                let stdio_done = shutdown.clone();
                let stdio = tokio::spawn(quarry_server::serve_stdio(
                    state.clone(),
                    shutdown.child_token(),
                ));
                let server = http(state, shutdown, listener);
                let stdio_watch = async move {
                    match stdio.await {
                        Ok(Ok(())) => stdio_done.cancel(),
                        Ok(Err(e)) => tracing::warn!(
                            "no MCP client on stdin ({e}); serving HTTP only until stopped"
                        ),
                        Err(e) => {
                            tracing::warn!("the stdio session stopped: {e}; serving HTTP only")
                        }
                    }
                };
                let (served, ()) = tokio::join!(server, stdio_watch);
                served?;
            }
        }
        local_stop.cancel();
        let _ = local_task.await;
        // Upstream children are killed with their process groups.
        workers_state.hub().shutdown();
        tokio::task::spawn_blocking(move || {
            quarry_store::thread_guard::allow_blocking(|| {
                workers_state.stop_workers(WORKER_STOP_GRACE)
            })
        })
        .await
        .ok();
        tracing::info!("server stopped");
        Ok::<(), anyhow::Error>(())
    })
}

fn print_update(out: &mut impl Write, json: bool, report: &UpdateReport, verb: &str) -> Result<()> {
    if json {
        print_json(report)?;
    } else {
        for c in &report.collections {
            write!(
                out,
                "{}: {} added, {} updated, {} removed, {} unchanged",
                c.name, c.added, c.updated, c.removed, c.unchanged
            )?;
            if !c.skipped.is_empty() {
                write!(out, ", {} skipped", c.skipped.len())?;
            }
            writeln!(out)?;
            if let Some(p) = &c.pulled {
                writeln!(out, "  git pull: {p}")?;
            }
            if let Some(e) = &c.error {
                writeln!(out, "  error: {e}")?;
            }
        }
        let n = report.collections.len();
        writeln!(
            out,
            "{verb} {n} collection{}: {} documents",
            if n == 1 { "" } else { "s" },
            report.total_documents
        )?;
    }
    let failed: Vec<&str> = report.failures().map(|c| c.name.as_str()).collect();
    if !failed.is_empty() {
        anyhow::bail!("could not update: {}", failed.join(", "));
    }
    Ok(())
}
