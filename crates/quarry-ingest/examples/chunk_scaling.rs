//! How chunking time grows with the document (issue 41 item 19): chunks generated documents
//! of doubling size — headings only, one line without a break, short paragraphs, Chinese
//! without punctuation — and prints seconds, chunks and the growth exponent between sizes
//! (1.0 is linear). A benchmark, not a test: run it in release for figures.
//!
//!     cargo run --release -p quarry-ingest --example chunk_scaling -- [MAX_MB]

use std::time::Instant;

use quarry_ingest::chunk::{CharSizer, ChunkOptions, chunk_markdown};

/// A generated document's shape: its name and how to make about `n` bytes of it.
type Shape = (&'static str, fn(usize) -> String);

fn main() {
    let max_mb: f64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(4.0);
    let shapes: [Shape; 4] = [
        ("headings only", |n| {
            (0..n / 16).map(|i| format!("## Heading {i}\n\n")).collect()
        }),
        ("one line", |n| "word ".repeat(n / 5)),
        ("paragraphs", |n| {
            (0..n / 40)
                .map(|i| format!("Paragraph {i} says a little.\n\n"))
                .collect()
        }),
        ("chinese run", |n| "知识库检索".repeat(n / 15)),
    ];
    println!("shape\tMB\tseconds\tchunks\texponent");
    for (name, make) in shapes {
        let mut last: Option<(f64, f64)> = None;
        let mut bytes = 256 * 1024;
        while bytes as f64 <= max_mb * 1024.0 * 1024.0 {
            let text = make(bytes);
            let t = Instant::now();
            let chunks = chunk_markdown(&text, ChunkOptions::RAG_CHARS, &CharSizer);
            let secs = t.elapsed().as_secs_f64();
            let mb = text.len() as f64 / 1048576.0;
            let exponent = last
                .map(|(m, s)| format!("{:.2}", (secs / s).ln() / (mb / m).ln()))
                .unwrap_or_default();
            println!("{name}\t{mb:.2}\t{secs:.3}\t{}\t{exponent}", chunks.len());
            last = Some((mb, secs));
            bytes *= 2;
        }
    }
}
