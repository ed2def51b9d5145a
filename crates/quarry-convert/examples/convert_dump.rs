//! Developer tool: converts files and prints the Markdown (`--md`) or, per file, how many
//! bytes were marked as furniture by kind (`--furniture` also prints each marked range).
//! `cargo run -p quarry-convert --example convert_dump -- [--md|--furniture] FILE…`

use quarry_convert::{ConvertOptions, Ocr, convert};

fn main() {
    let mut mode = "summary";
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--md" => mode = "md",
            "--furniture" => mode = "furniture",
            path => dump(path, mode),
        }
    }
}

fn dump(path: &str, mode: &str) {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => return eprintln!("{path}: {e}"),
    };
    let opts = ConvertOptions {
        ocr: Ocr::Off,
        ..Default::default()
    };
    let c = match convert(path, &bytes, &opts) {
        Ok(c) => c,
        Err(e) => return println!("{path}\tfailed: {e}"),
    };
    if mode == "md" {
        print!("{}", c.markdown);
        return;
    }
    let mut by_kind = std::collections::BTreeMap::<&str, (usize, usize)>::new();
    for f in &c.furniture {
        let e = by_kind.entry(f.kind.as_str()).or_default();
        e.0 += 1;
        e.1 += f.byte_end - f.byte_start;
    }
    let kinds: Vec<String> = by_kind
        .iter()
        .map(|(k, (n, b))| format!("{k}={n}x/{b}B"))
        .collect();
    println!(
        "{path}\t{} bytes\t{}",
        c.markdown.len(),
        if kinds.is_empty() {
            "-".to_owned()
        } else {
            kinds.join(" ")
        }
    );
    if mode == "furniture" {
        for f in &c.furniture {
            let text = &c.markdown[f.byte_start..f.byte_end];
            let page = c
                .page_at(f.byte_start)
                .map(|p| format!("p{p} "))
                .unwrap_or_default();
            let shown: String = text.chars().take(160).collect();
            println!(
                "  {page}{} {}..{} {:?}",
                f.kind.as_str(),
                f.byte_start,
                f.byte_end,
                shown
            );
        }
    }
}
