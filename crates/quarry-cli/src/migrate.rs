//! `quarry migrate`: this machine's embedded data directory into a team's PostgreSQL (and,
//! with `--blobs`, its object storage). The copy itself is `quarry_migrate`; this module
//! opens both sides and reports.

use std::io::Write;
use std::sync::Arc;

use anyhow::{Context as _, Result, bail};
use clap::Args;

use crate::output::print_json;
use crate::{config, settings};

#[derive(Args)]
pub(crate) struct MigrateArgs {
    /// The PostgreSQL database to copy into (postgres://…; default: --database /
    /// QUARRY_DATABASE_URL). It must be empty, or hold an interrupted copy of this directory.
    #[arg(long, value_name = "URL", hide_env_values = true)]
    to: Option<String>,
}

/// Runs `quarry migrate`; `index`, `database`, `blobs` and `json` are the global options
/// (given one by one rather than as `Cli`, which names `MigrateArgs` and so sits above
/// this module).
pub(crate) fn run(
    args: &MigrateArgs,
    index: Option<&str>,
    database: Option<&str>,
    blobs: Option<&str>,
    json: bool,
    env: &config::Env,
) -> Result<()> {
    let database = database.map(str::trim).filter(|s| !s.is_empty());
    let to = match (args.to.as_deref().map(str::trim), database) {
        (Some(to), Some(db)) if to != db => bail!(
            "--to and --database / QUARRY_DATABASE_URL name different databases; migrate \
             copies the embedded data directory into the one --to names"
        ),
        (Some(to), _) if !to.is_empty() => to.to_owned(),
        (_, Some(db)) => db.to_owned(),
        _ => bail!("name the PostgreSQL database to copy into: quarry migrate --to postgres://…"),
    };
    let opts = settings::engine_options(env, index)?;
    let dir = opts.data_dir();
    let db = dir.join("quarry.db");
    if !db.exists() {
        bail!(
            "no embedded data directory at {}: nothing to migrate",
            dir.display()
        );
    }
    // Nothing may write the directory while it is copied.
    let lock_path = dir.join("write.lock");
    let lock = std::fs::File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .with_context(|| format!("cannot open {}", lock_path.display()))?;
    if lock.try_lock().is_err() {
        bail!(
            "another quarry process is using {} (a server, an upload): stop it, then migrate",
            dir.display()
        );
    }
    let source = quarry_store_sqlite::SqliteStore::open(&db)
        .with_context(|| format!("cannot open {}", db.display()))?;
    let source_blobs = quarry_blobs::FsBlobStore::open(&dir.join("blobs"))
        .with_context(|| format!("cannot open the blobs in {}", dir.display()))?;
    let target = Arc::new(
        quarry_store_pg::PgStore::connect(&to).context("cannot open the target database")?,
    );
    let object_blobs;
    let target_blobs: &dyn quarry_blobs::BlobStore =
        match blobs.map(str::trim).filter(|s| !s.is_empty()) {
            Some(url) => {
                let settings: Vec<(&str, &str)> = config::BLOBS_ENV
                    .iter()
                    .filter_map(|v| Some((v.name, env.get(v)?)))
                    .collect();
                object_blobs = quarry_blobs_object::ObjectBlobStore::open(
                    url,
                    &dir.join("blob-staging"),
                    target.clone(),
                    &settings,
                )
                .context("cannot open the blob store given by --blobs / QUARRY_BLOBS_URL")?;
                &object_blobs
            }
            None => {
                eprintln!(
                    "note: uploaded originals stay in {}: a node over this database must use this \
                 directory (pass --blobs s3://… to copy them to shared storage)",
                    dir.join("blobs").display()
                );
                &source_blobs
            }
        };
    let quiet = json;
    let report = quarry_migrate::migrate(
        &source,
        &source_blobs,
        target.as_ref(),
        target_blobs,
        &mut |step| {
            if quiet {
                return;
            }
            match step {
                quarry_migrate::Step::Table { table, done, total } if done == total => {
                    eprintln!("  {table}: {total} rows read");
                }
                quarry_migrate::Step::Blobs { done, total } if done == total => {
                    eprintln!("  blobs: {total} checked");
                }
                _ => {}
            }
        },
    )
    .map_err(|e| match e {
        // Refusals (a target holding other data, a bad source) do not go away on a rerun;
        // only a copy cut short by the database, the blobs or the disk resumes.
        quarry_core::Error::Storage(_)
        | quarry_core::Error::StorageUnavailable(_)
        | quarry_core::Error::Io { .. }
        | quarry_core::Error::Unavailable(_) => {
            anyhow::Error::new(e).context("the copy stopped (run the same command again to resume)")
        }
        refusal => anyhow::Error::new(refusal).context("nothing was copied"),
    })?;
    drop(lock);
    if json {
        print_json(&report)?;
    } else {
        let mut out = std::io::stdout().lock();
        writeln!(
            out,
            "{:<20} {:>9} {:>9} {:>9} {:>9}",
            "table", "source", "copied", "skipped", "target"
        )?;
        for t in &report.tables {
            writeln!(
                out,
                "{:<20} {:>9} {:>9} {:>9} {:>9}",
                t.table, t.source, t.copied, t.skipped, t.target
            )?;
        }
        let b = &report.blobs;
        writeln!(
            out,
            "blobs: {} referenced, {} copied ({} bytes, SHA-256 checked), {} already there",
            b.referenced, b.copied, b.bytes, b.present
        )?;
        writeln!(
            out,
            "Start `quarry serve` with QUARRY_DATABASE_URL{} on each node: every node builds its \
             keyword index from the database.",
            if blobs.is_some() {
                " and QUARRY_BLOBS_URL"
            } else {
                ""
            }
        )?;
    }
    if !report.problems.is_empty() {
        for p in &report.problems {
            eprintln!("problem: {p}");
        }
        bail!(
            "{} blob(s) could not be copied (see above); the rows were",
            report.problems.len()
        );
    }
    Ok(())
}
