//! Developer tool: pdf_oxide's raw Markdown (top-down reading order, as `pdf.rs` asks for it)
//! and plain text of some pages, before Quarry's clean-up.
//! `cargo run -p quarry-convert --example pdf_page_raw -- FILE PAGE…` (pages from 1)

use pdf_oxide::PdfDocument;
use pdf_oxide::converters::{ConversionOptions, ReadingOrderMode};

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next() else {
        return eprintln!("usage: pdf_page_raw FILE PAGE…");
    };
    let doc = match std::fs::read(&path)
        .map_err(|e| e.to_string())
        .and_then(|b| PdfDocument::from_bytes(b).map_err(|e| e.to_string()))
    {
        Ok(d) => d,
        Err(e) => return eprintln!("{path}: {e}"),
    };
    let on = |k: &str| std::env::var_os(k).is_none();
    let opts = ConversionOptions {
        detect_headings: on("NOHEAD"),
        extract_tables: on("NOTABLE"),
        preserve_layout: !on("LAYOUT"),
        include_images: false,
        include_form_fields: true,
        reading_order_mode: if on("XY") {
            ReadingOrderMode::TopToBottomLeftToRight
        } else {
            ReadingOrderMode::ColumnAware
        },
        ..Default::default()
    };
    for page in args.filter_map(|a| a.parse::<usize>().ok()) {
        let i = page.saturating_sub(1);
        println!("===== page {page} markdown");
        println!(
            "{}",
            doc.to_markdown(i, &opts).unwrap_or_else(|e| e.to_string())
        );
        if std::env::var_os("SPANS").is_some() {
            println!("===== page {page} spans");
            for s in doc.extract_spans(i).unwrap_or_default() {
                println!(
                    "{:?} x={:.1} y={:.1} w={:.1} h={:.1} font={} size={:.1}",
                    s.text,
                    s.bbox.x,
                    s.bbox.y,
                    s.bbox.width,
                    s.bbox.height,
                    s.font_name,
                    s.font_size
                );
            }
        }
        println!("===== page {page} text");
        println!("{}", doc.extract_text(i).unwrap_or_else(|e| e.to_string()));
    }
}
