//! SEC filings (10-K, 10-Q) as PDFs: sections from the filing's own numbering, no headings
//! invented from addresses or figures, currency signs kept with their figures.
//!
//! The filings are public records but the PDFs are renderings by third parties, so they are
//! not in the repository: the test reads them from `QUARRY_TEST_FILINGS` (default
//! `~/.cache/quarry-filings`; see `examples/pdf_structure.rs` for where they came from) and
//! skips the files it does not find.

use std::path::PathBuf;

use quarry_convert::{ConvertOptions, Ocr, convert};

fn filings() -> Option<PathBuf> {
    let dir = match std::env::var_os("QUARRY_TEST_FILINGS") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => PathBuf::from(std::env::var_os("HOME")?).join(".cache/quarry-filings"),
    };
    dir.is_dir().then_some(dir).or_else(|| {
        println!("skipped: no filings directory (QUARRY_TEST_FILINGS)");
        None
    })
}

/// `(level, text)` of the Markdown's headings.
fn headings(md: &str) -> Vec<(usize, String)> {
    md.lines()
        .filter_map(|l| {
            let hashes = l.len() - l.trim_start_matches('#').len();
            ((1..=6).contains(&hashes) && l[hashes..].starts_with(' '))
                .then(|| (hashes, l[hashes..].trim().to_owned()))
        })
        .collect()
}

/// Table rows with a cell that is only a currency sign.
fn lone_dollar_rows(md: &str) -> usize {
    md.lines()
        .filter(|l| {
            l.starts_with('|')
                && l.trim_matches('|')
                    .split('|')
                    .any(|c| c.trim().trim_matches('*').trim() == "$")
        })
        .count()
}

#[test]
fn filings_get_their_sections_as_headings_and_signs_stay_with_figures() {
    let Some(dir) = filings() else { return };
    // (file, an item title, a note title, lone-`$` rows at most; 24, 167 and 77 before).
    let cases = [
        (
            "apple-10k.pdf",
            "Item 7. Management’s Discussion",
            "Note 1 – Summary",
            3,
        ),
        (
            "nvda-10k.pdf",
            "ITEM 7 MANAGEMENT’S DISCUSSION",
            "Note 16 - Employee",
            3,
        ),
        (
            "karthik-10q.pdf",
            "ITEM 1. FINANCIAL STATEMENTS",
            "NOTE 2 — EARNINGS",
            25,
        ),
    ];
    let opts = ConvertOptions {
        ocr: Ocr::Off,
        ..ConvertOptions::default()
    };
    for (file, item, note, lone_max) in cases {
        let Ok(bytes) = std::fs::read(dir.join(file)) else {
            println!("skipped: {file} not found");
            continue;
        };
        let c = convert(file, &bytes, &opts).unwrap_or_else(|e| panic!("{file}: {e}"));
        let hs = headings(&c.markdown);
        assert!(
            hs.iter().any(|(l, t)| *l == 2 && t.starts_with(item)),
            "{file}: no item heading {item:?} in {hs:?}"
        );
        assert!(
            hs.iter().any(|(l, t)| *l == 3 && t.starts_with(note)),
            "{file}: no note heading {note:?} in {hs:?}"
        );
        // Parts are level 1, items level 2.
        assert!(
            hs.iter()
                .any(|(l, t)| *l == 1 && t.to_ascii_lowercase().starts_with("part ii")),
            "{file}: no part heading in {hs:?}"
        );
        // No heading is figures or an address.
        for (_, t) in &hs {
            let letters = t.chars().filter(|c| c.is_alphabetic()).count();
            let digits = t.chars().filter(char::is_ascii_digit).count();
            assert!(letters >= 3 && digits <= letters, "{file}: heading {t:?}");
        }
        let lone = lone_dollar_rows(&c.markdown);
        assert!(lone <= lone_max, "{file}: {lone} rows with a lone $");
    }
    // A balance-sheet row keeps its signs on its figures, in its row.
    if let Ok(bytes) = std::fs::read(dir.join("apple-10k.pdf")) {
        let c = convert("apple-10k.pdf", &bytes, &opts).unwrap_or_else(|e| panic!("{e}"));
        let row = c
            .markdown
            .lines()
            .find(|l| l.starts_with("| Total liabilities and shareholders’ equity"))
            .unwrap_or_else(|| panic!("no total row"));
        assert!(
            row.contains("| $ 352,583 |") && row.contains("| $ 352,755 |"),
            "{row}"
        );
    }
}
