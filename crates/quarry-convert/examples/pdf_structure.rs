//! Developer tool: what a PDF's structure became, page by page, for comparing a conversion
//! with `pdftotext -layout` and one version of the converter with another. For each file it
//! writes `DIR/<name>.md` (the Markdown with a `<!-- page N -->` line before each page) and
//! `DIR/<name>.tsv`: per page, the headings (`#` lines, joined with ` ¦ `), the table rows
//! holding a lone currency or percent cell (`$`, `**$**`, `%`, `)`), and the loose lines of
//! figures outside tables (a row's numbers torn from it).
//!
//!     cargo run --release -p quarry-convert --example pdf_structure -- --out DIR FILE...

use std::path::PathBuf;

use quarry_convert::{ConvertOptions, Ocr, convert};

fn main() {
    let mut out = PathBuf::from(".");
    let mut files = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--out" => out = args.next().map(PathBuf::from).unwrap_or(out),
            _ => files.push(PathBuf::from(a)),
        }
    }
    if let Err(e) = std::fs::create_dir_all(&out) {
        eprintln!("cannot create {}: {e}", out.display());
        std::process::exit(2);
    }
    let opts = ConvertOptions {
        ocr: Ocr::Off,
        ..ConvertOptions::default()
    };
    for path in files {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("{}: {e}", path.display());
                continue;
            }
        };
        let c = match convert(&name, &bytes, &opts) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("{}: {e}", path.display());
                continue;
            }
        };
        let mut md = String::new();
        let mut tsv = String::from("page\theadings\tlone_symbol_rows\tloose_figure_lines\n");
        let (mut headings, mut lone, mut loose) = (0, 0, 0);
        for p in &c.pages {
            let text = c.markdown.get(p.byte_start..p.byte_end).unwrap_or("");
            md.push_str(&format!("<!-- page {} -->\n", p.page));
            md.push_str(text);
            if !text.ends_with('\n') {
                md.push('\n');
            }
            let h: Vec<&str> = text.lines().filter(|l| is_heading(l)).collect();
            let l = text.lines().filter(|l| lone_symbol_row(l)).count();
            let f = text.lines().filter(|l| loose_figures(l)).count();
            headings += h.len();
            lone += l;
            loose += f;
            tsv.push_str(&format!("{}\t{}\t{l}\t{f}\n", p.page, h.join(" ¦ ")));
        }
        let write = |ext: &str, s: &str| {
            let to = out.join(format!("{name}.{ext}"));
            if let Err(e) = std::fs::write(&to, s) {
                eprintln!("{}: {e}", to.display());
            }
        };
        write("md", &md);
        write("tsv", &tsv);
        println!(
            "{name}\tpages {}\theadings {headings}\tlone-symbol rows {lone}\tloose figure lines {loose}",
            c.pages.len()
        );
    }
}

/// A Markdown heading: one to six `#` and a space.
fn is_heading(line: &str) -> bool {
    let hashes = line.len() - line.trim_start_matches('#').len();
    (1..=6).contains(&hashes) && line[hashes..].starts_with(' ')
}

/// A table row with a cell that is only a currency sign, a percent sign or a bracket.
fn lone_symbol_row(line: &str) -> bool {
    let t = line.trim();
    t.starts_with('|')
        && t.trim_matches('|').split('|').any(|cell| {
            matches!(
                cell.trim().trim_matches('*').trim(),
                "$" | "€" | "£" | "¥" | "%" | ")" | "("
            )
        })
}

/// A line outside tables made only of two or more figures ("2,605 2,921 379,680").
fn loose_figures(line: &str) -> bool {
    let t = line.trim();
    if t.starts_with('|') || t.starts_with('#') {
        return false;
    }
    let words: Vec<&str> = t.split_whitespace().collect();
    words.len() >= 2
        && words.iter().all(|w| {
            let w = w.trim_matches(|c| matches!(c, '$' | '(' | ')' | '%' | '*'));
            w.is_empty()
                || w.chars()
                    .all(|c| c.is_ascii_digit() || c == ',' || c == '.')
        })
        && words.iter().any(|w| w.chars().any(|c| c.is_ascii_digit()))
}
