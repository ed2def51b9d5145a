//! Printing results: `--json` output.

use std::io::Write;

use anyhow::Result;

/// Prints `v` as pretty JSON on stdout, then a newline.
pub(crate) fn print_json(v: &impl serde::Serialize) -> Result<()> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, v)?;
    writeln!(out)?;
    Ok(())
}
