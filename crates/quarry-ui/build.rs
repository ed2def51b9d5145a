//! Lists every file under `assets/` into `$OUT_DIR/assets.rs` as `include_bytes!` entries, so
//! a new page module or string file is embedded without touching Rust code.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            walk(&path, out);
        } else if !path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with('.') || n.ends_with('~'))
        {
            out.push(path);
        }
    }
}

fn main() {
    let root =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default()).join("assets");
    println!("cargo::rerun-if-changed={}", root.display());
    let mut files = Vec::new();
    walk(&root, &mut files);
    files.sort();
    let mut src = String::from(
        "/// (path under assets/, bytes), sorted by path.\npub(crate) static FILES: &[(&str, &[u8])] = &[\n",
    );
    for f in &files {
        // Directories are watched too, so an added file triggers a rebuild.
        if let Some(parent) = f.parent() {
            println!("cargo::rerun-if-changed={}", parent.display());
        }
        println!("cargo::rerun-if-changed={}", f.display());
        let rel = f
            .strip_prefix(&root)
            .unwrap_or(f)
            .to_string_lossy()
            .replace('\\', "/");
        let _ = writeln!(
            src,
            "    ({rel:?}, include_bytes!({:?})),",
            f.display().to_string()
        );
    }
    src.push_str("];\n");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap_or_default()).join("assets.rs");
    if let Err(e) = std::fs::write(&out, src) {
        panic!("cannot write {}: {e}", out.display());
    }
}
