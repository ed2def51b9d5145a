//! Chunks of real documents (see /work/shared/corpora/documents/README.md), converted by the
//! real converter, read from the directory in `QUARRY_TEST_DOCS`. Each test prints "skipped:
//! QUARRY_TEST_DOCS not set" and returns when the variable is unset.

use std::path::PathBuf;

use quarry_convert::{ConvertOptions, Converted, Ocr, convert};
use quarry_ingest::chunk::{CharSizer, Chunk, ChunkOptions, ChunkStats, Layout, chunk_document};

fn docs() -> Option<PathBuf> {
    match std::env::var_os("QUARRY_TEST_DOCS") {
        Some(d) if !d.is_empty() => Some(PathBuf::from(d)),
        _ => {
            println!("skipped: QUARRY_TEST_DOCS not set");
            None
        }
    }
}

fn chunked(dir: &std::path::Path, rel: &str) -> (Converted, Vec<Chunk>, ChunkStats) {
    let bytes = std::fs::read(dir.join(rel))
        .unwrap_or_else(|e| panic!("{rel}: {e} (run the corpus fetch script)"));
    let opts = ConvertOptions {
        ocr: Ocr::Off,
        ..Default::default()
    };
    let c = convert(rel, &bytes, &opts).unwrap_or_else(|e| panic!("{rel}: {e}"));
    let layout = Layout {
        pages: &c.pages,
        furniture: &c.furniture,
    };
    let chunks = chunk_document(&c.markdown, layout, ChunkOptions::RAG_CHARS, &CharSizer);
    let stats = ChunkStats::measure(
        &c.markdown,
        layout,
        &chunks,
        ChunkOptions::RAG_CHARS,
        &CharSizer,
    );
    println!("{rel}: {} pages, {stats:?}", c.pages.len());
    (c, chunks, stats)
}

/// What every document must show: each chunk on its page, no furniture, and overlap at
/// (nearly) every boundary inside a page that is not a section start — all but those next to a
/// code block, which is never cut — close to the configured size at most of them (a table of
/// contents' dot leaders leave few word starts to cut at).
fn assert_rules(rel: &str, s: &ChunkStats) {
    assert_eq!(s.off_page, 0, "{rel}: chunks citing the wrong page");
    assert_eq!(s.with_furniture, 0, "{rel}: chunks holding furniture");
    let mid_text = s.inner_boundaries - s.section_boundaries;
    assert!(
        s.overlapping * 100 >= mid_text * 95,
        "{rel}: overlap at {} of {mid_text} boundaries",
        s.overlapping
    );
    assert!(
        s.overlapping_close * 100 >= mid_text * 80,
        "{rel}: overlap of ≥ ¾ the size at {} of {mid_text} boundaries",
        s.overlapping_close
    );
}

#[test]
fn english_standard_pdf_chunks_cite_their_pages_and_carry_overlap() {
    let Some(dir) = docs() else { return };
    let (c, chunks, s) = chunked(&dir, "pdf/en-fhs-3.0.pdf");
    assert_rules("fhs", &s);
    assert!(
        s.chunks > 86,
        "page cuts make more chunks than the 86 of before: {s:?}"
    );
    // Before, 7 chunks started on one page and ran onto the next; now each lies on one.
    for k in &chunks {
        let page = c
            .pages
            .iter()
            .find(|p| Some(p.page) == k.page)
            .expect("a page");
        assert!(
            page.byte_start <= k.start && k.end <= page.byte_end,
            "{k:?}"
        );
    }
    // Numbered sections (bold titles included) head the chunks of their bodies.
    assert!(
        chunks.iter().any(|k| k
            .heading
            .starts_with("3.18. /tmp : Temporary files › 3.18.1 Purpose")),
        "{:?}",
        chunks.iter().map(|k| &k.heading).collect::<Vec<_>>()
    );
}

#[test]
fn chinese_manual_pdf_chunks_cite_their_pages_and_carry_overlap() {
    let Some(dir) = docs() else { return };
    let (c, chunks, s) = chunked(&dir, "pdf/zh-debian-reference.zh-cn.pdf");
    assert_rules("debian", &s);
    let pages: Vec<u32> = chunks.iter().filter_map(|k| k.page).collect();
    assert!(pages.windows(2).all(|w| w[0] <= w[1]) && pages.last() > Some(&200));
    assert!(
        chunks.iter().any(|k| k.heading.contains("1.1 控制台基础")),
        "{:?}",
        chunks.iter().map(|k| &k.heading).collect::<Vec<_>>()
    );
    assert!(chunks.iter().all(|k| c.markdown.is_char_boundary(k.start)));
}

#[test]
fn irs_instructions_pdf_chunks_cite_their_pages() {
    let Some(dir) = docs() else { return };
    let (_, _, s) = chunked(&dir, "pdf/en-irs-i1040nr-2007.pdf");
    assert_rules("irs", &s);
}

#[test]
fn slides_become_chunks_of_their_own() {
    let Some(dir) = docs() else { return };
    for rel in [
        "pptx/sample-powerpoint-stcloud.pptx",
        "pptx/python-pptx-populated-placeholders.pptx",
        "pptx/python-pptx-shapes-chart-table.pptx",
        "pptx/ja-pptx2json-test.pptx",
    ] {
        let (c, chunks, s) = chunked(&dir, rel);
        assert_rules(rel, &s);
        // Every slide with text has a chunk citing it.
        for p in &c.pages {
            let text = &c.markdown[p.byte_start..p.byte_end];
            if text
                .lines()
                .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
            {
                assert!(
                    chunks.iter().any(|k| k.page == Some(p.page)),
                    "{rel}: slide {} has no chunk",
                    p.page
                );
            }
        }
    }
}
