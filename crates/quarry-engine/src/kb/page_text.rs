//! Wiki pages, index lines and lint findings as plain text, the one wording the MCP tools
//! give a model and the CLI prints (each surface escapes for its medium).

use crate::kb::pages::{LintFinding, PageHead, PageSummary, PageView};

fn head_line(h: &PageHead) -> String {
    format!(
        "{} ([[{}]], {}, {}{})",
        h.title,
        h.slug,
        h.page_type,
        h.status.as_str(),
        if h.stale { ", STALE" } else { "" }
    )
}

/// A page: its title line, version, body, why it is stale, its sources as they are now and
/// the pages linking to it.
pub fn page_text(p: &PageView) -> String {
    let mut text = format!(
        "# {}\nversion: {}\n\n{}\n",
        head_line(&p.head),
        p.head.version,
        p.body
    );
    if !p.stale_reasons.is_empty() {
        text.push_str("\nStale because:\n");
        for r in &p.stale_reasons {
            text.push_str(&format!("- {r}\n"));
        }
    }
    if !p.sources.is_empty() {
        text.push_str("\nSources:\n");
        for (i, s) in p.sources.iter().enumerate() {
            text.push_str(&format!(
                "{}. {} '{}' lines {}-{} ({})\n",
                i + 1,
                s.document,
                s.title,
                s.lines[0],
                s.lines[1],
                s.state
            ));
        }
    }
    if !p.backlinks.is_empty() {
        text.push_str(&format!("\nLinked from: {}\n", p.backlinks.join(", ")));
    }
    text
}

/// One line of the wiki's index.
pub fn index_line(p: &PageSummary) -> String {
    format!("- {}: {}", head_line(&p.head), p.summary)
}

/// Lint findings, one a line, after their count.
pub fn lint_text(findings: &[LintFinding]) -> String {
    if findings.is_empty() {
        return "No findings: every page is current, cited and linked.".into();
    }
    let mut text = format!("{} finding(s):\n", findings.len());
    for f in findings {
        text.push_str(&format!("- [{}] {}: {}\n", f.kind, f.page, f.detail));
    }
    text
}
