//! `quarry source …`: sources that sync a knowledge base — a folder or a Git repository
//! attached once, synced when asked (and, on a server, on their schedule). A sync's added and
//! changed documents are processed right here (a progress bar on a terminal) unless
//! `--no-wait`. A source id is global: without `--space`, the verbs that take one find the
//! source in whichever space it is (the CLI is the machine's owner, who reaches them all);
//! with `--space`, only there.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Result, bail};
use clap::{Args, Subcommand};
use quarry_engine::{
    AddSource, Engine, Location, ReaderMapping, ReaderRule, Secret, SourceView, SyncReport,
};
use serde_json::json;

use crate::output::print_json;
use crate::progress::CliProgress;

#[derive(Subcommand)]
pub(crate) enum SourceCmd {
    /// Attach a source to a knowledge base: a Git repository, a folder, an S3 bucket, a
    /// WebDAV folder or a website (then `quarry source sync ID`).
    Add(Box<AddArgs>),
    /// List sources, of one knowledge base or of all.
    #[command(alias = "ls")]
    List {
        /// Only this knowledge base's.
        kb: Option<String>,
    },
    /// Sync a source now: fetch what changed, apply additions, changes, renames and
    /// deletions, and process the new content.
    Sync {
        /// The source's id.
        id: String,
        /// Only queue the changed documents; a running `quarry serve` processes them.
        #[arg(long)]
        no_wait: bool,
    },
    /// A source's settings, state and latest sync reports.
    Status {
        /// The source's id.
        id: String,
        /// Reports to show.
        #[arg(long, default_value_t = 5)]
        reports: usize,
    },
    /// Change which files a source syncs, how often, its credential, readers or the
    /// addresses it may reach.
    Set {
        /// The source's id.
        id: String,
        /// Comma-separated globs over paths in the source (`**/*.md, docs/**/*.pdf`).
        #[arg(long)]
        mask: Option<String>,
        /// Sync every this long (`15m`, `1h`, `1d`); `off` for only when asked.
        #[arg(long, value_name = "DURATION")]
        every: Option<String>,
        /// Sync on change (a folder): a running server watches it.
        #[arg(long, conflicts_with = "no_watch")]
        watch: bool,
        /// Stop syncing on change.
        #[arg(long)]
        no_watch: bool,
        #[command(flatten)]
        credential: CredentialArgs,
        /// Forget the stored credential.
        #[arg(long, conflicts_with_all = ["token_env", "password_stdin"])]
        forget_credential: bool,
        #[command(flatten)]
        readers: ReaderArgs,
        /// Every reader of the knowledge base reads the source's documents again (no
        /// mapping).
        #[arg(long, conflicts_with_all = ["readers", "codeowners"])]
        no_readers: bool,
        #[command(flatten)]
        net: AllowNetArgs,
        /// Forget the source's own address allowance.
        #[arg(long, conflicts_with = "allow_net")]
        no_allow_net: bool,
    },
    /// Detach a source; its documents are deleted unless --keep-documents.
    #[command(alias = "remove")]
    Rm {
        /// The source's id.
        id: String,
        /// Keep its documents as ordinary documents of the knowledge base.
        #[arg(long)]
        keep_documents: bool,
    },
}

#[derive(Args)]
#[command(group = clap::ArgGroup::new("where").required(true))]
pub(crate) struct AddArgs {
    /// The knowledge base (name or id).
    kb: String,
    /// A Git repository: an http(s):// URL or an absolute path.
    #[arg(long, group = "where", value_name = "URL")]
    git: Option<String>,
    /// The branch (Git; default: the repository's default branch).
    #[arg(long, requires = "git")]
    branch: Option<String>,
    /// Only files under this folder of the repository (Git).
    #[arg(long, requires = "git", value_name = "DIR")]
    path: Option<String>,
    /// A folder on this machine.
    #[arg(long, group = "where", value_name = "PATH")]
    folder: Option<PathBuf>,
    /// An S3 bucket and prefix (`s3://bucket/handbook/`); the credential's user name is the
    /// access key id (none: a public bucket).
    #[arg(long, group = "where", value_name = "URL")]
    s3: Option<String>,
    /// An S3-compatible endpoint (MinIO, Ceph, R2 …) for --s3.
    #[arg(long, requires = "s3", value_name = "URL")]
    endpoint: Option<String>,
    /// The bucket's region (--s3).
    #[arg(long, requires = "s3")]
    region: Option<String>,
    /// A WebDAV folder (Nextcloud, ownCloud, Apache mod_dav …), basic authentication.
    #[arg(long, group = "where", value_name = "URL")]
    webdav: Option<String>,
    /// A website: the pages its sitemap lists, on the sitemap's host, as robots.txt allows.
    #[arg(long, group = "where", value_name = "SITEMAP_URL")]
    site: Option<String>,
    /// Comma-separated globs over paths in the source (default: every file Quarry converts).
    #[arg(long)]
    mask: Option<String>,
    /// Sync every this long (`15m`, `1h`, `1d`); default: only when asked.
    #[arg(long, value_name = "DURATION")]
    every: Option<String>,
    /// Sync on change (--folder): a running server (`quarry serve`) watches the folder,
    /// syncs it in full when it starts watching, then each change within seconds.
    #[arg(long, requires = "folder")]
    watch: bool,
    #[command(flatten)]
    credential: CredentialArgs,
    #[command(flatten)]
    readers: ReaderArgs,
    #[command(flatten)]
    net: AllowNetArgs,
}

/// A source's own address allowance: ranges its syncs may reach on a server whose outbound
/// address guard would refuse them, without opening the whole server (`serve --allow-net`).
#[derive(Args)]
pub(crate) struct AllowNetArgs {
    /// Address ranges this source's syncs may reach besides public ones and the server's
    /// --allow-net, comma-separated or repeated (`127.0.0.1/32`, `10.1.2.3`): the server's
    /// scheduled syncs (on a server with access tokens) go through its outbound address
    /// guard. Never the cloud metadata address.
    #[arg(long, value_name = "RANGES", value_delimiter = ',')]
    allow_net: Vec<String>,
}

/// Who reads a source's documents: rules over its paths, optionally its CODEOWNERS file.
#[derive(Args)]
pub(crate) struct ReaderArgs {
    /// Who reads the documents at these paths: `GLOBS=READERS`, e.g.
    /// `--readers 'hr/**=group:hr,user:ann'` or `--readers 'public/**=everyone'`. Repeat it;
    /// the first rule whose globs match a path decides. A path no rule (nor CODEOWNERS)
    /// maps is read only by the knowledge base's admins.
    #[arg(long, value_name = "GLOBS=READERS")]
    readers: Vec<String>,
    /// Map the paths no --readers rule matched by the source's CODEOWNERS file (`@org/team`
    /// is group:team, `@name` is user:name).
    #[arg(long)]
    codeowners: bool,
}

impl ReaderArgs {
    /// The mapping given, if any.
    fn mapping(&self) -> Result<Option<ReaderMapping>> {
        if self.readers.is_empty() && !self.codeowners {
            return Ok(None);
        }
        let mut rules = Vec::with_capacity(self.readers.len());
        for rule in &self.readers {
            let Some((paths, readers)) = rule.split_once('=') else {
                bail!(
                    "--readers {rule:?}: give GLOBS=READERS, e.g. 'hr/**=group:hr' or 'public/**=everyone'"
                );
            };
            rules.push(ReaderRule {
                paths: paths.trim().to_owned(),
                readers: readers
                    .split(',')
                    .map(str::trim)
                    .filter(|r| !r.is_empty())
                    .map(str::to_owned)
                    .collect(),
            });
        }
        let mapping = ReaderMapping {
            rules,
            codeowners: self.codeowners,
        };
        mapping.compile()?;
        Ok(Some(mapping))
    }
}

/// A credential, never on the command line itself (it would show in `ps` and shell
/// history): read from a named environment variable or from standard input.
#[derive(Args)]
pub(crate) struct CredentialArgs {
    /// Read the token or password from this environment variable.
    #[arg(long, value_name = "VAR", conflicts_with = "password_stdin")]
    token_env: Option<String>,
    /// Read the token or password from standard input (one line).
    #[arg(long)]
    password_stdin: bool,
    /// The user name sent with it (Git: `x-access-token` unless given).
    #[arg(long)]
    username: Option<String>,
}

impl CredentialArgs {
    /// The credential given, if any; `QUARRY_SECRET_KEY` seals it.
    fn secret(&self) -> Result<Option<Secret>> {
        let password = if let Some(var) = &self.token_env {
            match std::env::var(var) {
                Ok(v) if !v.is_empty() => v,
                _ => bail!("--token-env {var}: that environment variable is not set"),
            }
        } else if self.password_stdin {
            let mut line = String::new();
            std::io::stdin().read_line(&mut line)?;
            let line = line.trim_end_matches(['\r', '\n']).to_owned();
            if line.is_empty() {
                bail!("--password-stdin: nothing was read from standard input");
            }
            line
        } else {
            if self.username.is_some() {
                bail!("--username goes with --token-env VAR or --password-stdin");
            }
            return Ok(None);
        };
        Ok(Some(Secret::new(self.username.as_deref(), &password)?))
    }
}

/// `90s`, `15m`, `2h`, `1d`; `off` is `None`.
fn parse_every(text: &str) -> Result<Option<Duration>> {
    let t = text.trim();
    if t.eq_ignore_ascii_case("off") {
        return Ok(None);
    }
    let (digits, unit) = t.split_at(t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len()));
    let n: u64 = digits
        .parse()
        .map_err(|_| anyhow::anyhow!("invalid interval {text:?}: use e.g. 15m, 1h or 1d"))?;
    let secs = match unit {
        "s" => 1,
        "m" | "" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => bail!("invalid interval {text:?}: use s, m, h or d (15m, 1h, 1d)"),
    };
    Ok(Some(Duration::from_secs(n.saturating_mul(secs))))
}

/// Runs a `source` command; a sync's documents are processed by workers with `workers`.
/// `space_named`: `--space` was given, so a source id is looked up there only; otherwise in
/// whichever space the source is.
pub(crate) fn run(
    engine: Engine,
    cmd: &SourceCmd,
    json_out: bool,
    workers: quarry_queue::WorkerOptions,
    space_named: bool,
) -> Result<()> {
    let engine = match cmd.source_id() {
        Some(id) if !space_named => engine.in_source_space(id)?,
        _ => engine,
    };
    let engine = Arc::new(engine);
    let progress = CliProgress::new();
    let mut out = std::io::stdout().lock();
    match cmd {
        SourceCmd::Add(a) => {
            let location = if let Some(url) = &a.git {
                Location::git(url, a.branch.as_deref(), a.path.as_deref())?
            } else if let Some(folder) = &a.folder {
                Location::folder(&std::path::absolute(folder)?)?
            } else if let Some(url) = &a.s3 {
                Location::s3(url, a.endpoint.as_deref(), a.region.as_deref())?
            } else if let Some(url) = &a.webdav {
                Location::webdav(url)?
            } else if let Some(url) = &a.site {
                Location::site(url)?
            } else {
                bail!(
                    "say where the source is: --git URL, --folder PATH, --s3 URL, --webdav URL or --site SITEMAP_URL"
                )
            };
            let interval = match &a.every {
                Some(e) => parse_every(e)?,
                None => None,
            };
            let s = engine.add_source(
                &a.kb,
                &AddSource {
                    location,
                    mask: a.mask.clone(),
                    interval,
                    secret: a.credential.secret()?,
                    watch: a.watch,
                    readers: a.readers.mapping()?,
                    allow_net: a.net.allow_net.clone(),
                },
            )?;
            warn(&s);
            if json_out {
                print_json(&s)?;
            } else {
                writeln!(
                    out,
                    "Attached {} source {} to '{}': {}\nSync it with: quarry source sync {}",
                    s.location.kind(),
                    s.id,
                    s.knowledge_base,
                    s.location.describe(),
                    s.id
                )?;
                if s.watch {
                    writeln!(
                        out,
                        "Synced on change while a server runs on this machine (quarry serve): in full when it starts watching, then each change"
                    )?;
                }
            }
        }
        SourceCmd::List { kb } => {
            let sources = engine.sources(kb.as_deref())?;
            if json_out {
                print_json(&json!({ "sources": sources }))?;
            } else if sources.is_empty() {
                writeln!(
                    out,
                    "No sources. Attach one with: quarry source add KB --git URL | --folder PATH | --s3 URL | --webdav URL | --site SITEMAP_URL"
                )?;
            } else {
                for s in &sources {
                    print_source(&mut out, s)?;
                }
            }
        }
        SourceCmd::Sync { id, no_wait } => {
            let owner = format!("cli:{}", std::process::id());
            let outcome = engine.sync_source(id, &owner, &progress)?;
            let finished = if *no_wait || outcome.queued.is_empty() {
                outcome.queued.clone()
            } else {
                quarry_queue::drain(&engine, &outcome.queued, workers, &progress)?
            };
            let failed: Vec<_> = finished
                .iter()
                .filter(|d| d.status == quarry_engine::FileStatus::Failed)
                .collect();
            if json_out {
                print_json(&json!({ "report": outcome.report, "documents": finished }))?;
            } else {
                print_report(&mut out, &outcome.report)?;
                for d in &failed {
                    writeln!(
                        out,
                        "  failed    {}: {}",
                        d.display_path(),
                        d.error.as_deref().unwrap_or("unknown reason")
                    )?;
                }
            }
        }
        SourceCmd::Status { id, reports } => {
            let s = engine.source(id)?;
            let list = engine.sync_reports(id, *reports)?;
            if json_out {
                print_json(&json!({ "source": s, "reports": list }))?;
            } else {
                print_source(&mut out, &s)?;
                if list.is_empty() {
                    writeln!(
                        out,
                        "Never synced. Sync it with: quarry source sync {}",
                        s.id
                    )?;
                }
                for r in &list {
                    print_report(&mut out, r)?;
                }
            }
        }
        SourceCmd::Set {
            id,
            mask,
            every,
            watch,
            no_watch,
            credential,
            forget_credential,
            readers,
            no_readers,
            net,
            no_allow_net,
        } => {
            let secret = credential.secret()?;
            let watch = (*watch || *no_watch).then_some(*watch);
            let mapping = readers.mapping()?;
            if mask.is_none()
                && every.is_none()
                && watch.is_none()
                && secret.is_none()
                && !forget_credential
                && mapping.is_none()
                && !no_readers
                && net.allow_net.is_empty()
                && !no_allow_net
            {
                bail!(
                    "nothing to change: give --mask, --every, --watch/--no-watch, a credential (--token-env or --password-stdin), --forget-credential, --readers/--codeowners, --no-readers, --allow-net or --no-allow-net"
                );
            }
            let interval = match every {
                Some(e) => Some(parse_every(e)?),
                None => None,
            };
            let mut s = engine.source(id)?;
            if secret.is_some() || *forget_credential {
                s = engine.set_source_secret(id, secret.as_ref())?;
            }
            if mask.is_some() || interval.is_some() {
                s = engine.update_source(id, mask.as_deref(), interval)?;
            }
            if let Some(w) = watch {
                s = engine.set_source_watch(id, w)?;
            }
            if mapping.is_some() || *no_readers {
                s = engine.set_source_readers(id, mapping.as_ref())?;
            }
            if !net.allow_net.is_empty() || *no_allow_net {
                s = engine.set_source_allow_net(id, &net.allow_net)?;
                warn(&s);
            }
            if json_out {
                print_json(&s)?;
            } else {
                print_source(&mut out, &s)?;
            }
        }
        SourceCmd::Rm { id, keep_documents } => {
            let s = engine.remove_source(id, *keep_documents)?;
            if !*keep_documents {
                engine.cleanup(&progress)?;
            }
            if json_out {
                print_json(
                    &json!({"status": "removed", "id": s.id, "documents": s.documents,
                    "documents_kept": keep_documents}),
                )?;
            } else if *keep_documents {
                writeln!(
                    out,
                    "Detached source {} from '{}'; its {} documents stay (no longer synced)",
                    s.id, s.knowledge_base, s.documents
                )?;
            } else {
                writeln!(
                    out,
                    "Removed source {} and its {} documents from '{}'",
                    s.id, s.documents, s.knowledge_base
                )?;
            }
        }
    }
    Ok(())
}

impl SourceCmd {
    /// The source id the command names, if it names one.
    fn source_id(&self) -> Option<&str> {
        match self {
            SourceCmd::Sync { id, .. }
            | SourceCmd::Status { id, .. }
            | SourceCmd::Set { id, .. }
            | SourceCmd::Rm { id, .. } => Some(id),
            SourceCmd::Add(_) | SourceCmd::List { .. } => None,
        }
    }
}

/// The warnings of an attach or a change (the guard of the server's scheduled syncs would
/// refuse the source), on standard error whatever the output format.
fn warn(s: &SourceView) {
    for w in &s.warnings {
        eprintln!("warning: {}", quarry_core::terminal_safe(w));
    }
}

fn print_source(out: &mut impl Write, s: &SourceView) -> Result<()> {
    let every = match (s.interval_seconds, s.watch) {
        (Some(secs), true) => format!("on change and every {secs}s"),
        (Some(secs), false) => format!("every {secs}s"),
        (None, true) => "on change".to_owned(),
        (None, false) => "when asked".to_owned(),
    };
    writeln!(
        out,
        "{} {} → '{}' ({} documents; mask {}; synced {every})",
        s.id,
        quarry_core::terminal_safe(&s.location.describe()),
        s.knowledge_base,
        s.documents,
        s.mask
    )?;
    if let Some(m) = &s.readers {
        for rule in &m.rules {
            writeln!(
                out,
                "  readers of {}: {}",
                rule.paths,
                rule.readers.join(", ")
            )?;
        }
        if m.codeowners {
            writeln!(out, "  readers of other paths: their CODEOWNERS")?;
        }
        writeln!(
            out,
            "  readers of unmapped paths: the knowledge base's admins"
        )?;
    }
    if !s.allow_net.is_empty() {
        writeln!(out, "  may also reach: {}", s.allow_net.join(", "))?;
    }
    if let Some(e) = &s.last_error {
        writeln!(
            out,
            "  failing ({} in a row): {}",
            s.failures,
            quarry_core::terminal_safe(e)
        )?;
    }
    Ok(())
}

fn print_report(out: &mut impl Write, r: &SyncReport) -> Result<()> {
    let c = &r.counts;
    writeln!(
        out,
        "Sync {} {}: {} added, {} changed, {} renamed, {} deleted, {} unchanged, {} skipped{}",
        r.id,
        r.status,
        c.added,
        c.changed,
        c.renamed,
        c.deleted,
        c.unchanged,
        c.skipped,
        r.revision
            .as_deref()
            .map(|rev| format!(" (at {})", &rev[..rev.len().min(12)]))
            .unwrap_or_default()
    )?;
    if let Some(e) = &r.error {
        writeln!(out, "  error: {}", quarry_core::terminal_safe(e))?;
    }
    // Paths and reasons come from the source (a synced file's name): nothing in them may
    // drive the terminal.
    let safe = quarry_core::terminal_safe;
    for l in &r.details {
        match &l.detail {
            Some(d) => writeln!(out, "  {:<9} {} ({})", l.action, safe(&l.path), safe(d))?,
            None => writeln!(out, "  {:<9} {}", l.action, safe(&l.path))?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals() {
        assert_eq!(parse_every("15m").unwrap(), Some(Duration::from_secs(900)));
        assert_eq!(parse_every("2h").unwrap(), Some(Duration::from_secs(7200)));
        assert_eq!(
            parse_every("1d").unwrap(),
            Some(Duration::from_secs(86_400))
        );
        assert_eq!(parse_every("90s").unwrap(), Some(Duration::from_secs(90)));
        assert_eq!(parse_every("off").unwrap(), None);
        for bad in ["", "h", "5w", "-1m", "1.5h"] {
            assert!(parse_every(bad).is_err(), "{bad}");
        }
    }
}
