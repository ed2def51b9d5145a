//! OCR through an installed `tesseract` binary, when there is one.
//!
//! A subprocess rather than a library binding: nothing to compile or link, the feature
//! simply lights up on machines that have tesseract (languages from
//! [`crate::types::ConvertOptions::ocr_languages`], default `eng`), and a hung or crashing OCR run is killed without touching our process.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// OCR languages when none are configured.
pub const DEFAULT_OCR_LANGUAGES: &str = "eng";

/// Whether `tesseract` runs on this machine (checked once).
pub(crate) fn available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        Command::new("tesseract")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// `languages` when it is a valid `-l` argument, else the default.
fn langs(languages: &str) -> &str {
    let l = languages.trim();
    if !l.is_empty()
        && l.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '+' || c == '_')
    {
        l
    } else {
        DEFAULT_OCR_LANGUAGES
    }
}

/// OCRs one image (PNG/JPEG/TIFF bytes); `None` when tesseract fails or times out.
pub(crate) fn ocr_image(
    image: &[u8],
    languages: &str,
    timeout: Duration,
) -> Result<String, String> {
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path: PathBuf =
        std::env::temp_dir().join(format!("quarry-ocr-{}-{seq}.png", std::process::id()));
    std::fs::write(&path, image).map_err(|e| format!("cannot write a temporary image ({e})"))?;
    let result = run(&path, langs(languages), timeout);
    let _ = std::fs::remove_file(&path);
    result
}

fn run(path: &std::path::Path, languages: &str, timeout: Duration) -> Result<String, String> {
    let mut child = Command::new("tesseract")
        .arg(path)
        .arg("stdout")
        .arg("-l")
        .arg(languages)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("tesseract did not start ({e})"))?;
    let Some(mut stdout) = child.stdout.take() else {
        let _ = child.kill();
        return Err("tesseract has no output".to_owned());
    };
    // Read on a thread so a full pipe cannot block the wait loop.
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        let _ = stdout.read_to_end(&mut out);
        out
    });
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                let out = reader.join().unwrap_or_default();
                if !status.success() {
                    return Err(format!("tesseract failed ({status})"));
                }
                return Ok(String::from_utf8_lossy(&out).into_owned());
            }
            Ok(None) if start.elapsed() >= timeout => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "tesseract took longer than {} s",
                    timeout.as_secs()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => {
                let _ = child.kill();
                return Err(format!("tesseract: {e}"));
            }
        }
    }
}

/// OCR output → paragraphs: lines of a paragraph joined, hyphenated line ends mended.
pub(crate) fn reflow(text: &str) -> String {
    let mut out = String::new();
    for para in text.split("\n\n") {
        let mut p = String::new();
        for line in para.lines().map(str::trim).filter(|l| !l.is_empty()) {
            if p.ends_with('-') && line.chars().next().is_some_and(char::is_lowercase) {
                p.pop();
            } else if !p.is_empty() {
                p.push(' ');
            }
            p.push_str(line);
        }
        let p = p.replace('\u{c}', "");
        if !p.trim().is_empty() {
            out.push_str(p.trim());
            out.push_str("\n\n");
        }
    }
    out
}
