//! Converts files given on the command line and prints, per file: format, input bytes,
//! milliseconds, pages, Markdown bytes, images and the outcome. With `--out DIR` the Markdown
//! is written to `DIR/<file name>.md`. `--no-ocr` turns OCR off. Directories are walked.
//!
//!     cargo run --release -p quarry-convert --example convert -- [--out DIR] [--no-ocr] FILE|DIR...

use std::path::{Path, PathBuf};
use std::time::Instant;

use quarry_convert::{ConvertOptions, Format, Ocr, convert};

fn main() {
    let mut out: Option<PathBuf> = None;
    let mut opts = ConvertOptions::default();
    let mut inputs = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--out" => out = args.next().map(PathBuf::from),
            "--no-ocr" => opts.ocr = Ocr::Off,
            "-h" | "--help" => {
                eprintln!("usage: convert [--out DIR] [--no-ocr] FILE|DIR...");
                return;
            }
            _ => collect(Path::new(&a), &mut inputs),
        }
    }
    if let Some(dir) = &out
        && let Err(e) = std::fs::create_dir_all(dir)
    {
        eprintln!("cannot create {}: {e}", dir.display());
        std::process::exit(2);
    }
    println!("format\tbytes\tms\tpages\tmd_bytes\timages\tresult\tfile");
    let (mut total_bytes, mut total_ms, mut ok, mut failed) = (0u64, 0f64, 0, 0);
    for path in inputs {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) => {
                println!("-\t-\t-\t-\t-\t-\tunreadable: {e}\t{}", path.display());
                continue;
            }
        };
        let format = Format::from_file_name(&name).map_or("?", |f| f.as_str());
        let start = Instant::now();
        let result = convert(&name, &bytes, &opts);
        let ms = start.elapsed().as_secs_f64() * 1000.0;
        total_bytes += bytes.len() as u64;
        total_ms += ms;
        match result {
            Ok(c) => {
                ok += 1;
                let mut outcome = "ok".to_owned();
                if !c.pages_without_text.is_empty() {
                    outcome.push_str(&format!(" (no text: {:?})", c.pages_without_text));
                }
                if !c.pages_ocred.is_empty() {
                    outcome.push_str(&format!(" (OCR: {:?})", c.pages_ocred));
                }
                println!(
                    "{format}\t{}\t{ms:.1}\t{}\t{}\t{}\t{outcome}\t{}",
                    bytes.len(),
                    c.pages.len(),
                    c.markdown.len(),
                    c.images.len(),
                    path.display()
                );
                if let Some(dir) = &out {
                    let target = dir.join(format!("{name}.md"));
                    if let Err(e) = std::fs::write(&target, &c.markdown) {
                        eprintln!("cannot write {}: {e}", target.display());
                    }
                }
            }
            Err(e) => {
                failed += 1;
                println!(
                    "{format}\t{}\t{ms:.1}\t-\t-\t-\terror: {e}\t{}",
                    bytes.len(),
                    path.display()
                );
            }
        }
    }
    eprintln!(
        "{} files ({ok} converted, {failed} refused), {:.1} MB in {:.0} ms ({:.1} MB/s)",
        ok + failed,
        total_bytes as f64 / 1e6,
        total_ms,
        if total_ms > 0.0 {
            total_bytes as f64 / 1e6 / (total_ms / 1000.0)
        } else {
            0.0
        }
    );
}

fn collect(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_dir() {
        let Ok(entries) = std::fs::read_dir(path) else {
            return;
        };
        let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        paths.sort();
        for p in paths {
            collect(&p, out);
        }
    } else if path
        .file_name()
        .is_some_and(|n| Format::from_file_name(&n.to_string_lossy()).is_some())
    {
        out.push(path.to_path_buf());
    }
}
