//! `quarry kb …`: knowledge bases from the command line. Uploads are queued in the store
//! and processed right here (a progress bar on a terminal) unless `--no-wait`; a running
//! server shares the queue, so either may process what the other enqueued. While a server
//! of the same data directory runs, the command leaves the processing to it and waits,
//! rather than convert and embed beside it on the same cores.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Result, bail};
use clap::Subcommand;
use quarry_engine::{
    Citation, CreateKnowledgeBase, Engine, FileFilter, FileStatus, KbFile, MAX_INDEX_LIMIT,
    PageStatus, PageWrite, Progress, StatusFilter, UploadOptions, UploadOutcome, WikiExport,
    WikiFile, WikiIndexRequest,
};
use serde_json::json;

use crate::output::print_json;
use crate::progress::CliProgress;

#[derive(Subcommand)]
pub(crate) enum KbCmd {
    /// Create a knowledge base (documents are uploaded into it).
    Create {
        name: String,
        #[arg(long, default_value = "")]
        description: String,
        /// Chunk size in characters; default: seed 003's 1,000 characters with 200 overlap
        /// (the embedding model never re-cuts chunks).
        #[arg(long, value_name = "CHARS")]
        chunk_size: Option<u32>,
        /// Chunk overlap in characters (default: a fifth of --chunk-size).
        #[arg(long, value_name = "CHARS", requires = "chunk_size")]
        chunk_overlap: Option<u32>,
    },
    /// List knowledge bases with their document counts.
    #[command(alias = "ls")]
    List,
    /// Delete a knowledge base, its documents and their originals.
    #[command(alias = "remove")]
    Rm { name: String },
    /// Upload files (globs and folders too) and process them.
    Upload {
        name: String,
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
        /// Only queue the files; a running `quarry serve` (or a later upload) processes them.
        #[arg(long)]
        no_wait: bool,
        /// Only these readers (comma-separated `user:<name>`, `group:<name>`) and the
        /// knowledge base's admins read the uploaded documents.
        #[arg(long, value_name = "KEYS", value_delimiter = ',')]
        readers: Option<Vec<String>>,
        /// Metadata fields for every uploaded document, a JSON object
        /// (`{"status":"published","priority":3}`); they win over front matter and
        /// document properties.
        #[arg(long, value_name = "JSON")]
        metadata: Option<String>,
    },
    /// Change who reads a document beside the knowledge base's admins.
    Readers {
        name: String,
        /// The document (id or file name).
        document: String,
        /// Reader keys (`user:<name>`, `group:<name>`), comma-separated; an empty value
        /// leaves it to the admins alone.
        #[arg(
            long,
            value_name = "KEYS",
            value_delimiter = ',',
            conflicts_with = "everyone"
        )]
        set: Option<Vec<String>>,
        /// Every reader of the knowledge base reads it.
        #[arg(long)]
        everyone: bool,
    },
    /// List a knowledge base's documents with their status.
    Docs {
        name: String,
        /// Only documents in this state.
        #[arg(long, value_parser = StatusFilter::parse)]
        status: Option<StatusFilter>,
        /// Only file names containing this text.
        #[arg(long = "name", value_name = "TEXT")]
        name_filter: Option<String>,
    },
    /// Process a failed document again.
    Retry {
        name: String,
        /// Document id or file name.
        doc: String,
        #[arg(long)]
        no_wait: bool,
    },
    /// Delete one document.
    #[command(name = "rm-doc")]
    RmDoc { name: String, doc: String },
    /// List a knowledge base's wiki pages (docs/wiki.md), stale ones marked.
    Pages {
        name: String,
        /// Only pages of this type.
        #[arg(long = "type", value_name = "TYPE")]
        page_type: Option<String>,
        /// Only pages with this tag.
        #[arg(long)]
        tag: Option<String>,
    },
    /// Show one wiki page: its Markdown, why it is stale, its sources as they are now.
    Page { name: String, slug: String },
    /// Write a wiki page (a new one, or the next version of --base-version).
    #[command(name = "write-page")]
    WritePage {
        name: String,
        slug: String,
        #[arg(long)]
        title: String,
        /// A file with the page's Markdown (`-`: standard input).
        #[arg(long, value_name = "FILE")]
        body: PathBuf,
        /// A cited passage: `#docid:12`, `#docid:12-20` or `<document id>:12-20` (repeat).
        #[arg(long = "source", value_name = "CITATION")]
        sources: Vec<String>,
        /// The version this write replaces (`kb page` shows it).
        #[arg(long, value_name = "VERSION")]
        base_version: Option<String>,
        #[arg(long = "type", value_name = "TYPE", default_value = "summary")]
        page_type: String,
        /// draft, published or archived.
        #[arg(long, default_value = "published")]
        status: String,
        #[arg(long, value_delimiter = ',')]
        tags: Vec<String>,
    },
    /// Check a knowledge base's wiki: stale pages, broken links, pages citing nothing,
    /// orphans, titles used twice. Exits 1 when there are findings.
    Lint { name: String },
    /// Append an entry to a knowledge base's wiki log (the page `log`).
    Log { name: String, entry: String },
    /// Write a knowledge base's wiki into a folder: a Markdown tree (index.md, log.md,
    /// pages/<slug>.md with its sources in front matter) that `import-wiki` reads back, or
    /// with --skill an Agent Skills folder (SKILL.md, references/<slug>.md).
    #[command(name = "export-wiki")]
    ExportWiki {
        name: String,
        dir: PathBuf,
        /// An Agent Skills folder instead of the tree.
        #[arg(long)]
        skill: bool,
    },
    /// Write the pages of an exported tree (DIR/pages/*.md) into a knowledge base: new
    /// pages created, changed ones as their next version, unchanged ones left. Exits 1 when
    /// a page was refused (each is named, with why).
    #[command(name = "import-wiki")]
    ImportWiki {
        name: String,
        dir: PathBuf,
        /// Cite the lines as they are now where a passage changed since the export (else
        /// such a page is refused).
        #[arg(long)]
        recite: bool,
    },
}

/// The files of an exported wiki tree under `dir`: `pages/*.md`.
fn read_wiki_tree(dir: &Path) -> Result<Vec<WikiFile>> {
    let pages = dir.join("pages");
    let entries = std::fs::read_dir(&pages).map_err(|e| {
        anyhow::anyhow!(
            "cannot read {}: {e} (import-wiki reads the pages/ folder export-wiki writes)",
            pages.display()
        )
    })?;
    let mut files = Vec::new();
    for entry in entries {
        let path = entry?.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if !name.ends_with(".md") || !path.is_file() {
            continue;
        }
        let content = std::fs::read_to_string(&path)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
        files.push(WikiFile {
            path: format!("pages/{name}"),
            content,
        });
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

const GLOB_CHARS: &[char] = &['*', '?', '[', '{'];

/// Files named on the command line: files as given, folders recursed (supported
/// extensions only, `.gitignore` honoured), and quoted globs expanded.
fn expand(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        let s = p.to_string_lossy();
        if p.is_dir() {
            let mask = quarry_ingest::compile_mask("**/*")?;
            let scan = quarry_ingest::scan(p, &mask)?;
            out.extend(
                scan.files
                    .into_iter()
                    .filter(|f| quarry_engine::is_supported_file(&f.rel_path))
                    .map(|f| f.abs_path),
            );
        } else if !p.exists() && s.contains(GLOB_CHARS) {
            // Split at the first component holding a glob character: root + mask.
            let mut root = PathBuf::new();
            let mut mask = Vec::new();
            for c in p.components() {
                let part = c.as_os_str().to_string_lossy();
                if mask.is_empty() && !part.contains(GLOB_CHARS) {
                    root.push(c);
                } else {
                    mask.push(part.into_owned());
                }
            }
            let root = if root.as_os_str().is_empty() {
                PathBuf::from(".")
            } else {
                root
            };
            let matcher = quarry_ingest::compile_mask(&mask.join("/"))?;
            let found = quarry_ingest::scan(&root, &matcher)?.files;
            if found.is_empty() {
                bail!("no file matches {s}");
            }
            out.extend(found.into_iter().map(|f| f.abs_path));
        } else if p.is_file() {
            out.push(p.clone());
        } else {
            bail!("{}: no such file or directory", p.display());
        }
    }
    Ok(out)
}

/// Runs a `kb` command; uploads and retries are processed by workers with `workers`.
pub(crate) fn run(
    engine: Engine,
    cmd: &KbCmd,
    json_out: bool,
    workers: quarry_queue::WorkerOptions,
) -> Result<()> {
    let engine = Arc::new(engine);
    let progress = CliProgress::new();
    let mut out = std::io::stdout().lock();
    match cmd {
        KbCmd::Create {
            name,
            description,
            chunk_size,
            chunk_overlap,
        } => {
            let kb = engine.create_knowledge_base(&CreateKnowledgeBase {
                name: name.clone(),
                description: description.clone(),
                chunk_size: *chunk_size,
                chunk_overlap: *chunk_overlap,
            })?;
            if json_out {
                print_json(&kb)?;
            } else {
                writeln!(out, "Created knowledge base '{}' ({})", kb.name, kb.id)?;
            }
        }
        KbCmd::List => {
            let kbs = engine.knowledge_bases()?;
            if json_out {
                print_json(&json!({ "knowledge_bases": kbs }))?;
            } else if kbs.is_empty() {
                writeln!(
                    out,
                    "No knowledge bases. Create one with: quarry kb create NAME"
                )?;
            } else {
                for kb in kbs {
                    let c = kb.status_counts;
                    writeln!(
                        out,
                        "- {} ({} documents: {} ready, {} processing, {} pending, {} failed) {}",
                        kb.name,
                        kb.document_count,
                        c.ready,
                        c.processing,
                        c.pending,
                        c.failed,
                        kb.description
                    )?;
                }
            }
        }
        KbCmd::Rm { name } => {
            let kb = engine.delete_knowledge_base(name)?;
            let n = kb.document_count;
            // Readers already no longer see it; take its index entries and originals now
            // rather than leaving them to the next server or upload.
            engine.cleanup(&progress)?;
            if json_out {
                print_json(&json!({"status": "removed", "name": kb.name, "documents": n}))?;
            } else {
                writeln!(out, "Removed knowledge base '{}' ({n} documents)", kb.name)?;
            }
        }
        KbCmd::Readers {
            name,
            document,
            set,
            everyone,
        } => {
            let readers: Option<Vec<String>> = match (set, everyone) {
                (_, true) => None,
                (Some(keys), false) => Some(
                    keys.iter()
                        .map(|k| k.trim().to_owned())
                        .filter(|k| !k.is_empty())
                        .collect(),
                ),
                (None, false) => {
                    bail!("say who reads it: --set KEYS (empty: admins only) or --everyone")
                }
            };
            let d = engine.set_document_readers(name, document, readers.as_deref())?;
            if json_out {
                print_json(&d)?;
            } else {
                let who = match &d.readers {
                    None => "every reader of the knowledge base".to_owned(),
                    Some(k) if k.is_empty() => "the knowledge base's admins only".to_owned(),
                    Some(k) => format!("{} and the knowledge base's admins", k.join(", ")),
                };
                writeln!(
                    out,
                    "{} is read by {who}",
                    quarry_core::terminal_safe(&d.display_path())
                )?;
            }
        }
        KbCmd::Upload {
            name,
            files,
            no_wait,
            readers,
            metadata,
        } => {
            let fields = match metadata {
                Some(text) => {
                    let json: serde_json::Value = serde_json::from_str(text)
                        .map_err(|e| anyhow::anyhow!("--metadata is not valid JSON: {e}"))?;
                    quarry_metadata::Metadata::from_json(&json)?
                }
                None => quarry_metadata::Metadata::default(),
            };
            let kb = engine.knowledge_base(name)?;
            let paths = expand(files)?;
            if paths.is_empty() {
                bail!("no supported files to upload");
            }
            let mut uploads = Vec::new();
            let mut rejected = Vec::new();
            for p in &paths {
                match engine.upload_from_path(p)? {
                    Ok(u) => uploads.push(u),
                    Err(r) => rejected.push(r),
                }
            }
            let outcomes = engine.add_uploads(
                &kb.id,
                uploads,
                &UploadOptions {
                    readers: readers.clone(),
                    fields,
                },
            )?;
            let mut queued = Vec::new();
            let mut duplicates = Vec::new();
            for o in outcomes {
                match o {
                    UploadOutcome::Added { document } => queued.push(document),
                    UploadOutcome::Duplicate { document } => duplicates.push(document),
                    r @ UploadOutcome::Rejected { .. } => rejected.push(r),
                }
            }
            for r in &rejected {
                if let UploadOutcome::Rejected {
                    file_name, reason, ..
                } = r
                {
                    progress.warn(&format!("{file_name}: not uploaded: {reason}"));
                }
            }
            for d in &duplicates {
                progress.warn(&format!(
                    "{}: already in '{}' as {} (same content); not added again",
                    d.original_name,
                    kb.name,
                    d.display_path()
                ));
            }
            let finished = if *no_wait || queued.is_empty() {
                queued.clone()
            } else {
                wait_for_uploads(&engine, &queued, workers.clone(), &progress)?
            };
            report_upload(
                &mut out,
                json_out,
                &finished,
                &duplicates,
                &rejected,
                *no_wait,
            )?;
            let failed = finished
                .iter()
                .filter(|d| d.status == FileStatus::Failed)
                .count();
            if failed + rejected.len() > 0 {
                bail!(
                    "{} of {} files were not ingested",
                    failed + rejected.len(),
                    paths.len()
                );
            }
        }
        KbCmd::Docs {
            name,
            status,
            name_filter,
        } => {
            let docs = engine.kb_documents(
                name,
                &FileFilter {
                    status: *status,
                    name: name_filter.clone(),
                },
            )?;
            if json_out {
                print_json(&json!({ "documents": docs }))?;
            } else {
                for d in &docs {
                    print_doc(&mut out, d)?;
                }
                writeln!(out, "{} documents", docs.len())?;
            }
        }
        KbCmd::Retry { name, doc, no_wait } => {
            let d = engine.retry_kb_document(name, doc)?;
            let finished = if *no_wait {
                vec![d]
            } else {
                wait_for_uploads(&engine, &[d], workers.clone(), &progress)?
            };
            if json_out {
                print_json(&json!({ "documents": finished }))?;
            } else {
                for d in &finished {
                    print_doc(&mut out, d)?;
                }
            }
            if finished.iter().any(|d| d.status == FileStatus::Failed) {
                bail!("the document failed again");
            }
        }
        KbCmd::Pages {
            name,
            page_type,
            tag,
        } => {
            let req = WikiIndexRequest {
                page_type: page_type.clone(),
                tag: tag.clone(),
                after: None,
                limit: MAX_INDEX_LIMIT,
            };
            let pages = engine.wiki_index_all(name, &req)?.pages;
            if json_out {
                print_json(&json!({ "pages": pages }))?;
            } else {
                for p in &pages {
                    print_lines(&mut out, &quarry_engine::index_line(p))?;
                }
                writeln!(out, "{} pages", pages.len())?;
            }
        }
        KbCmd::Page { name, slug } => {
            let page = engine.read_page(name, slug)?;
            if json_out {
                print_json(&page)?;
            } else {
                print_lines(&mut out, &quarry_engine::page_text(&page))?;
            }
        }
        KbCmd::WritePage {
            name,
            slug,
            title,
            body,
            sources,
            base_version,
            page_type,
            status,
            tags,
        } => {
            let text = if body.as_os_str() == "-" {
                std::io::read_to_string(std::io::stdin())?
            } else {
                std::fs::read_to_string(body)
                    .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", body.display()))?
            };
            let mut cited = Vec::with_capacity(sources.len());
            for (i, s) in sources.iter().enumerate() {
                cited.push(
                    Citation::parse(s).map_err(|e| anyhow::anyhow!("--source {}: {e}", i + 1))?,
                );
            }
            let mut provenance = serde_json::Map::new();
            provenance.insert("via".into(), json!("cli"));
            provenance.insert("user".into(), json!(quarry_core::MACHINE_OWNER));
            let page = engine.write_page(
                name,
                PageWrite {
                    slug: slug.clone(),
                    title: title.clone(),
                    page_type: page_type.clone(),
                    body: text,
                    status: PageStatus::parse(status)?,
                    tags: tags.clone(),
                    sources: cited,
                    base_version: base_version.clone(),
                    provenance,
                },
            )?;
            if json_out {
                print_json(&page)?;
            } else {
                writeln!(
                    out,
                    "Wrote page {} version {}",
                    page.head.slug, page.head.version
                )?;
            }
        }
        KbCmd::Lint { name } => {
            let findings = engine.lint_wiki(name)?;
            if json_out {
                print_json(&json!({ "findings": findings }))?;
            } else {
                print_lines(&mut out, &quarry_engine::lint_text(&findings))?;
            }
            if !findings.is_empty() {
                bail!("the wiki has {} findings", findings.len());
            }
        }
        KbCmd::Log { name, entry } => {
            let mut provenance = serde_json::Map::new();
            provenance.insert("via".into(), json!("cli"));
            provenance.insert("user".into(), json!(quarry_core::MACHINE_OWNER));
            let page = engine.append_log(name, entry, &provenance)?;
            if json_out {
                print_json(&page)?;
            } else {
                let last = page.body.lines().last().unwrap_or_default();
                print_lines(&mut out, &format!("Logged: {last}"))?;
            }
        }
        KbCmd::ExportWiki { name, dir, skill } => {
            let shape = if *skill {
                WikiExport::Skill
            } else {
                WikiExport::Tree
            };
            let files = engine.export_wiki(name, shape)?;
            for f in &files {
                // Paths are the engine's (`pages/<slug>.md`, slugs of [a-z0-9-]).
                let path = dir.join(&f.path);
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent)
                        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", parent.display()))?;
                }
                std::fs::write(&path, &f.content)
                    .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
            }
            if json_out {
                let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
                print_json(&json!({ "dir": dir, "files": paths }))?;
            } else {
                writeln!(out, "Wrote {} files into {}", files.len(), dir.display())?;
            }
        }
        KbCmd::ImportWiki { name, dir, recite } => {
            let files = read_wiki_tree(dir)?;
            let mut provenance = serde_json::Map::new();
            provenance.insert("via".into(), json!("cli import-wiki"));
            provenance.insert("user".into(), json!(quarry_core::MACHINE_OWNER));
            let report = engine.import_wiki(name, &files, *recite, &provenance)?;
            if json_out {
                print_json(&report)?;
            } else {
                writeln!(
                    out,
                    "{} written, {} unchanged, {} refused",
                    report.written.len(),
                    report.unchanged.len(),
                    report.refused.len()
                )?;
                for r in &report.refused {
                    print_lines(&mut out, &format!("refused {}: {}", r.path, r.reason))?;
                }
            }
            if !report.refused.is_empty() {
                bail!("{} page(s) refused", report.refused.len());
            }
        }
        KbCmd::RmDoc { name, doc } => {
            let d = engine.delete_kb_document(name, doc)?;
            engine.cleanup(&progress)?;
            if json_out {
                print_json(&json!({"status": "removed", "document": d}))?;
            } else {
                writeln!(
                    out,
                    "Removed {}",
                    quarry_core::terminal_safe(&d.display_path())
                )?;
            }
        }
    }
    Ok(())
}

/// `text` a line at a time, each made safe for a terminal.
fn print_lines(out: &mut impl Write, text: &str) -> Result<()> {
    for line in text.lines() {
        writeln!(out, "{}", quarry_core::terminal_safe(line))?;
    }
    Ok(())
}

fn print_doc(out: &mut impl Write, d: &KbFile) -> Result<()> {
    let pages = d
        .pages
        .map(|p| format!(", {p} {}", if p == 1 { "page" } else { "pages" }))
        .unwrap_or_default();
    let docid = d.docid.as_deref().unwrap_or("-");
    write!(
        out,
        "{:<10} {} {docid} ({}, {} bytes{pages})",
        d.status.as_str(),
        quarry_core::terminal_safe(&d.display_path()),
        d.format,
        d.size
    )?;
    if let Some(e) = &d.error {
        write!(out, ": {}", quarry_core::terminal_safe(e))?;
    }
    if let Some(p) = &d.pages_without_text {
        write!(out, " [no text layer on {p}]")?;
    }
    writeln!(out)?;
    Ok(())
}

fn report_upload(
    out: &mut impl Write,
    json_out: bool,
    finished: &[KbFile],
    duplicates: &[KbFile],
    rejected: &[UploadOutcome],
    no_wait: bool,
) -> Result<()> {
    if json_out {
        return print_json(&json!({
            "documents": finished,
            "duplicates": duplicates,
            "rejected": rejected,
        }));
    }
    for d in finished {
        print_doc(out, d)?;
    }
    let ready = finished
        .iter()
        .filter(|d| d.status == FileStatus::Ready)
        .count();
    let failed = finished
        .iter()
        .filter(|d| d.status == FileStatus::Failed)
        .count();
    if no_wait {
        writeln!(
            out,
            "Queued {} documents ({} duplicates, {} rejected); `quarry serve` or the next upload processes them",
            finished.len(),
            duplicates.len(),
            rejected.len()
        )?;
    } else {
        writeln!(
            out,
            "{ready} ready, {failed} failed, {} duplicates, {} rejected",
            duplicates.len(),
            rejected.len()
        )?;
    }
    Ok(())
}

/// How often the wait for uploads reads what their embedding still needs.
const BACKLOG_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// Waits until `waiting` are `ready` or `failed` ([`quarry_queue::wait_for`]): processed
/// here, or by a server of this data directory while one runs — this process then runs no
/// workers of its own, so it neither converts nor embeds beside it (issue 65 item 11). The
/// progress line counts the documents finished, those still converting, and what their
/// embedding needs: chunks without vectors, the rate embedding proceeds at (what every node
/// finished lately, from the store) and the time that leaves.
fn wait_for_uploads(
    engine: &Arc<Engine>,
    waiting: &[KbFile],
    workers: quarry_queue::WorkerOptions,
    progress: &CliProgress,
) -> Result<Vec<KbFile>> {
    progress.begin_detailed("Processing", waiting.len() as u64);
    // Whether the last look found another process doing the work (`None`: not looked yet).
    let mut elsewhere: Option<bool> = None;
    let mut backlog: Option<(std::time::Instant, String)> = None;
    let result = quarry_queue::wait_for(engine, waiting, workers, progress, &mut |r| {
        let now_elsewhere = !r.working_here;
        if now_elsewhere && elsewhere != Some(true) {
            progress.waiting(
                "another quarry process of this data directory (a server) processes the queue: \
                 waiting for it to process these uploads",
            );
        } else if !now_elsewhere && elsewhere == Some(true) {
            progress
                .waiting("no other process processes the queue any more: processing the rest here");
        }
        elsewhere = Some(now_elsewhere);
        if backlog
            .as_ref()
            .is_none_or(|(at, _)| at.elapsed() >= BACKLOG_EVERY)
        {
            backlog = Some((std::time::Instant::now(), backlog_text(engine, r.pending)));
        }
        let text = backlog.as_ref().map_or("", |(_, t)| t.as_str());
        progress.update(r.finished as u64, text);
    });
    progress.end();
    Ok(result?)
}

/// What the documents still processed need, after the count of those finished: `; 2
/// converting; 1234 chunks to embed (12.8/s, about 1 min 36 s left)`. Empty when nothing
/// can be said (a store error is the wait's to report, not the line's).
fn backlog_text(engine: &Engine, pending: &[KbFile]) -> String {
    let mut text = String::new();
    let converting = pending
        .iter()
        .filter(|f| f.status != FileStatus::Embedding)
        .count();
    if converting > 0 {
        text.push_str(&format!("; {converting} converting"));
    }
    let embedding: Vec<i64> = pending
        .iter()
        .filter(|f| f.status == FileStatus::Embedding)
        .filter_map(|f| f.document_id)
        .collect();
    if embedding.is_empty() {
        return text;
    }
    let Ok(e) = engine.documents_embedding_progress(&embedding) else {
        return text;
    };
    text.push_str(&format!("; {} chunks to embed", e.chunks_pending));
    if let (Some(rate), Some(eta)) = (e.chunks_per_second, e.eta_seconds)
        && e.chunks_pending > 0
    {
        text.push_str(&format!(
            " ({rate:.1}/s, about {} left)",
            crate::progress::duration_text(eta as f64)
        ));
    }
    text
}
