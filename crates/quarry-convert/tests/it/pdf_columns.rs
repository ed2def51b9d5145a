//! Reading order of PDFs laid out in columns, on real documents read from the directory in
//! `QUARRY_TEST_DOCS` (the tests print "skipped: QUARRY_TEST_DOCS not set" and return when it
//! is unset). The IRS instructions set three columns of prose with 12 pt gutters; reading them
//! across interleaved the columns ("2. 183 days during the period 2007, See Pub. 519 …"), so a
//! question about who must file retrieved the wrong page. Two-column papers must keep reading
//! down each column. Each conversion prints its time; with `QUARRY_DUMP_DIR` set, the
//! Markdown is also written there, page by page, for inspection.

use std::path::PathBuf;
use std::time::Instant;

use quarry_convert::{ConvertOptions, Converted, Ocr, convert};

use crate::common::docs;

fn ok(dir: &std::path::Path, rel: &str) -> Converted {
    let bytes = std::fs::read(dir.join(rel))
        .unwrap_or_else(|e| panic!("{rel}: {e} (run the corpus fetch script)"));
    let opts = ConvertOptions {
        ocr: Ocr::Off,
        ..Default::default()
    };
    let start = Instant::now();
    let c = convert(rel, &bytes, &opts).unwrap_or_else(|e| panic!("{rel}: {e}"));
    println!("{rel}: {} pages in {:.2?}", c.pages.len(), start.elapsed());
    if let Some(out) = std::env::var_os("QUARRY_DUMP_DIR") {
        let name = rel.replace('/', "_");
        let mut paged = String::new();
        for p in &c.pages {
            let text = c.markdown.get(p.byte_start..p.byte_end).unwrap_or("");
            paged.push_str(&format!("\n<<< page {} >>>\n{text}", p.page));
        }
        let _ = std::fs::write(PathBuf::from(out).join(format!("{name}.md")), paged);
    }
    c
}

/// Whitespace collapsed to single spaces and Markdown emphasis dropped.
fn flat(s: &str) -> String {
    s.replace('*', "")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether `after` starts within `within` characters after the end of an occurrence of
/// `first`.
fn followed_by(hay: &str, first: &str, after: &str, within: usize) -> bool {
    hay.match_indices(first).any(|(at, _)| {
        let rest = &hay[at + first.len()..];
        let window: String = rest.chars().take(within + after.chars().count()).collect();
        window.contains(after)
    })
}

#[test]
fn three_column_irs_instructions_read_down_each_column() {
    let Some(dir) = docs() else { return };
    let c = ok(&dir, "pdf/en-irs-i1040nr-2007.pdf");
    let text = flat(&c.markdown);
    assert!(
        followed_by(&text, "Who Must File", "File Form 1040NR if any", 10),
        "\"Who Must File\" is not followed by its paragraph"
    );
    assert!(
        text.contains("File Form 1040NR if any of the following four conditions applies to you."),
        "the paragraph under \"Who Must File\" is interleaved with the next column"
    );
    // The end of one column runs on into the next column, not across into its neighbour.
    assert!(
        !text.contains("2. 183 days during the period 2007, See Pub. 519"),
        "columns are interleaved"
    );
}

#[test]
fn two_column_papers_still_read_down_each_column() {
    let Some(dir) = docs() else { return };
    let c = ok(&dir, "pdf/en-tracemonkey-pldi09.pdf");
    let text = flat(&c.markdown);
    assert!(followed_by(
        &text,
        "Dynamic languages such as JavaScript are more difficult to com-",
        "pile than statically typed ones",
        10
    ));
    let c = ok(&dir, "pdf/en-naacl06-shinyama.pdf");
    let text = flat(&c.markdown);
    assert!(text.contains("In Unrestricted Relation Discovery, the discovery process"));
}
