//! Converts documents and chunks them as a knowledge base does (the RAG seed's 1,000
//! characters with 200 overlap, or `--size N --overlap N`), then prints per document: pages,
//! chunks, chunks with text on a page other than their `page`, chunks holding furniture,
//! boundaries inside a page (section starts among them) and how many carry the overlap
//! (any, and at least ¾ of it). `--show N` prints the first N chunks with page and heading.
//!
//!     cargo run -p quarry-ingest --example chunk_stats -- [--size N] [--overlap N] [--show N] FILE...

use quarry_convert::{ConvertOptions, Ocr, convert};
use quarry_ingest::chunk::{CharSizer, ChunkOptions, ChunkStats, Layout, chunk_document};

fn main() {
    let mut opts = ChunkOptions::RAG_CHARS;
    let mut show = 0usize;
    let mut files = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut num = |name: &str| -> usize {
            match args.next().and_then(|v| v.parse().ok()) {
                Some(n) => n,
                None => {
                    eprintln!("{name} needs a number");
                    std::process::exit(2);
                }
            }
        };
        match a.as_str() {
            "--size" => opts.max_size = num("--size"),
            "--overlap" => opts.overlap = num("--overlap"),
            "--show" => show = num("--show"),
            _ => files.push(a),
        }
    }
    let convert_opts = ConvertOptions {
        ocr: Ocr::Off,
        ..Default::default()
    };
    println!(
        "file\tpages\tchunks\toff_page\twith_furniture\tinner_boundaries\tsection_starts\toverlapping\toverlap>=3/4\toversized"
    );
    for f in files {
        let bytes = match std::fs::read(&f) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("{f}: {e}");
                continue;
            }
        };
        let c = match convert(&f, &bytes, &convert_opts) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("{f}: {e}");
                continue;
            }
        };
        let layout = Layout {
            pages: &c.pages,
            furniture: &c.furniture,
        };
        let chunks = chunk_document(&c.markdown, layout, opts, &CharSizer);
        let s = ChunkStats::measure(&c.markdown, layout, &chunks, opts, &CharSizer);
        let name = f.rsplit('/').next().unwrap_or(&f);
        println!(
            "{name}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
            c.pages.len(),
            s.chunks,
            s.off_page,
            s.with_furniture,
            s.inner_boundaries,
            s.section_boundaries,
            s.overlapping,
            s.overlapping_close,
            s.oversized
        );
        for k in chunks.iter().take(show) {
            let text: String = k.text(&c.markdown).chars().take(80).collect();
            println!("  p{:?} [{}] {:?}", k.page, k.heading, text);
        }
    }
}
