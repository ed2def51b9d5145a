//! Conversion in a child process, so that no file can take the caller down.
//!
//! Third-party parsers recurse on nesting they do not bound (a PDF array 200,000 levels
//! deep, 200,000 nested `<div>`s) and allocate in proportion to what a file claims. A stack
//! overflow or an allocation failure aborts the whole process — no `catch_unwind` catches
//! it — so a server converting on a thread would die, and die again on every restart while
//! the job waits in the queue. [`Isolation::Child`](crate::Isolation::Child) runs the
//! converter in a child process (the same binary, through a hidden entry point that calls
//! [`child_main`](crate::child_main), in `child.rs`) under rlimits: address space
//! ([`crate::types::Limits::max_memory_bytes`]), CPU seconds, no core file. The parent
//! kills it at the wall-time limit. Whatever happens to the child becomes a
//! [`ConvertError`] whose text says why.
//!
//! Wire format (private to one binary talking to itself): the request is
//! `u64 length + file name`, the options, then the file's bytes to EOF; the answer is one tag
//! byte (`0` = converted, `1` = error) and the fields, strings and byte strings as
//! `u64 length + bytes`.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::types::{
    ConvertError, ConvertOptions, Converted, DocProperties, Format, Image, Isolation, Limits, Ocr,
};
use quarry_core::PageSpan;

/// Extra wall time the parent allows beyond the converter's own timeout, so that the child
/// reports a cooperative timeout itself when it can.
pub(crate) const KILL_GRACE: Duration = Duration::from_secs(5);
/// Bytes of the child's stderr kept to explain how it ended.
const STDERR_KEPT: usize = 16 * 1024;

/// Converts `bytes` in a child process (see the module docs). Formats, sizes and emptiness
/// were already checked by [`crate::convert`].
pub(crate) fn convert_in_child(
    program: &PathBuf,
    args: &[String],
    env: &[(OsString, OsString)],
    format: Format,
    file_name: &str,
    bytes: &[u8],
    opts: &ConvertOptions,
) -> Result<Converted, ConvertError> {
    let failed = |detail: String| ConvertError::Failed(format!("the converter {detail}"));
    let mut command = Command::new(program);
    // The child needs no secret of this process (API keys, tokens): only what it and
    // `tesseract` read, as the caller lists it.
    command.env_clear().envs(env.iter().map(|(k, v)| (k, v)));
    let mut child = command
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| failed(format!("could not start: {e}")))?;
    let mut request = Vec::with_capacity(bytes.len() + file_name.len() + 128);
    put_str(&mut request, file_name);
    put_options(&mut request, opts);
    request.extend_from_slice(bytes);
    let (Some(mut stdin), Some(mut stdout), Some(mut stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(failed("could not be connected to".to_owned()));
    };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|s| {
        // The child reads its whole request before it writes anything, but a child that dies
        // early must not block the writer: a broken pipe just ends it.
        s.spawn(move || {
            let _ = stdin.write_all(&request);
        });
        let err_reader = s.spawn(move || {
            let mut kept = Vec::new();
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut buf) {
                if n == 0 {
                    break;
                }
                kept.extend_from_slice(&buf[..n]);
                if kept.len() > STDERR_KEPT {
                    kept.drain(..kept.len() - STDERR_KEPT);
                }
            }
            String::from_utf8_lossy(&kept).into_owned()
        });
        s.spawn(move || {
            let mut out = Vec::new();
            let read = stdout.read_to_end(&mut out).map(|_| out);
            let _ = tx.send(read);
        });
        let wall = opts.limits.timeout.saturating_add(KILL_GRACE);
        let answer = match rx.recv_timeout(wall) {
            Ok(read) => Some(read),
            Err(_) => {
                // Killing it closes its pipes, which ends the reader threads.
                let _ = child.kill();
                None
            }
        };
        let status = child.wait();
        let stderr_text = err_reader.join().unwrap_or_default();
        let Some(answer) = answer else {
            return Err(ConvertError::Timeout(opts.limits.timeout));
        };
        let status = status.map_err(|e| failed(format!("could not be waited for: {e}")))?;
        if status.success()
            && let Ok(out) = answer
        {
            return decode_answer(&out)
                .unwrap_or_else(|| Err(failed("answered something unreadable".to_owned())));
        }
        Err(explain_exit(status, &stderr_text, format, &opts.limits))
    })
}

/// Why a child ended without an answer, from its exit status and what it printed.
fn explain_exit(
    status: std::process::ExitStatus,
    stderr: &str,
    format: Format,
    limits: &Limits,
) -> ConvertError {
    if stderr.contains("has overflowed its stack") {
        return ConvertError::TooDeep(format);
    }
    if stderr.contains("memory allocation of") || stderr.contains("capacity overflow") {
        return ConvertError::OutOfMemory {
            limit: limits.max_memory_bytes,
        };
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        match status.signal() {
            Some(libc::SIGXCPU) => return ConvertError::Timeout(limits.timeout),
            // The kernel's OOM killer, or an allocation failure reported as a bare abort.
            Some(libc::SIGKILL) => {
                return ConvertError::OutOfMemory {
                    limit: limits.max_memory_bytes,
                };
            }
            Some(sig) => {
                return ConvertError::Failed(format!(
                    "the converter crashed on this file (signal {sig})"
                ));
            }
            None => {}
        }
    }
    ConvertError::Failed(format!("the converter stopped unexpectedly ({status})"))
}

// ---- wire format ----------------------------------------------------------------------

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_u64(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_bytes(out, s.as_bytes());
}

/// `0`, or `1` and the string.
fn put_opt_str(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => {
            put_u64(out, 1);
            put_str(out, s);
        }
        None => put_u64(out, 0),
    }
}

fn put_u32s(out: &mut Vec<u8>, v: &[u32]) {
    put_u64(out, v.len() as u64);
    for &x in v {
        put_u64(out, u64::from(x));
    }
}

fn put_options(out: &mut Vec<u8>, opts: &ConvertOptions) {
    let l = &opts.limits;
    put_u64(out, l.max_bytes);
    put_u64(out, u64::from(l.max_pages));
    put_u64(out, l.max_decompressed_bytes);
    put_u64(out, l.max_rows as u64);
    put_u64(out, l.max_output_bytes as u64);
    put_u64(out, l.timeout.as_millis() as u64);
    put_u64(out, l.max_memory_bytes);
    put_u64(out, u64::from(opts.ocr == Ocr::Auto));
    put_str(out, &opts.ocr_languages);
    put_str(out, &opts.image_url_prefix);
}

/// A cursor over an answer or request; every read checks bounds (`None` = malformed).
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn u64(&mut self) -> Option<u64> {
        let (head, rest) = self.0.split_first_chunk::<8>()?;
        self.0 = rest;
        Some(u64::from_le_bytes(*head))
    }

    fn usize(&mut self) -> Option<usize> {
        usize::try_from(self.u64()?).ok()
    }

    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.usize()?;
        if n > self.0.len() {
            return None;
        }
        let (b, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(b)
    }

    fn string(&mut self) -> Option<String> {
        String::from_utf8(self.bytes()?.to_vec()).ok()
    }

    fn opt_string(&mut self) -> Option<Option<String>> {
        match self.u64()? {
            0 => Some(None),
            _ => Some(Some(self.string()?)),
        }
    }

    fn u32s(&mut self) -> Option<Vec<u32>> {
        let n = self.usize()?;
        (0..n.min(self.0.len() / 8))
            .map(|_| u32::try_from(self.u64()?).ok())
            .collect::<Option<Vec<_>>>()
            .filter(|v| v.len() == n)
    }
}

pub(crate) fn decode_request(input: &[u8]) -> Option<(String, ConvertOptions, &[u8])> {
    let mut r = Reader(input);
    let file_name = r.string()?;
    let limits = Limits {
        max_bytes: r.u64()?,
        max_pages: u32::try_from(r.u64()?).ok()?,
        max_decompressed_bytes: r.u64()?,
        max_rows: r.usize()?,
        max_output_bytes: r.usize()?,
        timeout: Duration::from_millis(r.u64()?),
        max_memory_bytes: r.u64()?,
    };
    let ocr = if r.u64()? == 1 { Ocr::Auto } else { Ocr::Off };
    let ocr_languages = r.string()?;
    let image_url_prefix = r.string()?;
    let opts = ConvertOptions {
        limits,
        ocr,
        ocr_languages,
        image_url_prefix,
        isolation: Isolation::InProcess,
    };
    Some((file_name, opts, r.0))
}

pub(crate) fn encode_answer(out: &mut Vec<u8>, result: &Result<Converted, ConvertError>) {
    match result {
        Ok(c) => {
            out.push(0);
            put_str(out, &c.markdown);
            put_opt_str(out, c.title.as_deref());
            put_u64(out, c.pages.len() as u64);
            for p in &c.pages {
                put_u64(out, u64::from(p.page));
                put_u64(out, p.byte_start as u64);
                put_u64(out, p.byte_end as u64);
            }
            put_u64(out, c.images.len() as u64);
            for img in &c.images {
                put_str(out, &img.sha256);
                put_str(out, &img.file_name);
                put_str(out, &img.mime);
                put_bytes(out, &img.bytes);
            }
            put_u32s(out, &c.pages_without_text);
            put_u32s(out, &c.pages_ocred);
            put_u64(out, c.warnings.len() as u64);
            for w in &c.warnings {
                put_str(out, w);
            }
            put_str(out, &quarry_core::encode_furniture(&c.furniture));
            let p = &c.properties;
            for v in [&p.title, &p.author, &p.subject] {
                put_opt_str(out, v.as_deref());
            }
            put_u64(out, p.keywords.len() as u64);
            for k in &p.keywords {
                put_str(out, k);
            }
            put_opt_str(out, p.created.as_deref());
            put_opt_str(out, p.modified.as_deref());
        }
        Err(e) => {
            out.push(1);
            put_str(out, &e.to_string());
        }
    }
}

fn decode_answer(input: &[u8]) -> Option<Result<Converted, ConvertError>> {
    let (&tag, rest) = input.split_first()?;
    let mut r = Reader(rest);
    if tag == 1 {
        return Some(Err(ConvertError::Failed(r.string()?)));
    }
    let markdown = r.string()?;
    let title = r.opt_string()?;
    let n = r.usize()?;
    let mut pages = Vec::with_capacity(n.min(r.0.len() / 24));
    for _ in 0..n {
        pages.push(PageSpan {
            page: u32::try_from(r.u64()?).ok()?,
            byte_start: r.usize()?,
            byte_end: r.usize()?,
        });
    }
    let n = r.usize()?;
    let mut images = Vec::with_capacity(n.min(r.0.len() / 32));
    for _ in 0..n {
        images.push(Image {
            sha256: r.string()?,
            file_name: r.string()?,
            mime: r.string()?,
            bytes: r.bytes()?.to_vec(),
        });
    }
    let pages_without_text = r.u32s()?;
    let pages_ocred = r.u32s()?;
    let n = r.usize()?;
    let mut warnings = Vec::with_capacity(n.min(r.0.len() / 8));
    for _ in 0..n {
        warnings.push(r.string()?);
    }
    let furniture = quarry_core::decode_furniture(&r.string()?);
    let title_prop = r.opt_string()?;
    let author = r.opt_string()?;
    let subject = r.opt_string()?;
    let n = r.usize()?;
    let mut keywords = Vec::with_capacity(n.min(r.0.len() / 8));
    for _ in 0..n {
        keywords.push(r.string()?);
    }
    let properties = DocProperties {
        title: title_prop,
        author,
        subject,
        keywords,
        created: r.opt_string()?,
        modified: r.opt_string()?,
    };
    Some(Ok(Converted {
        markdown,
        title,
        pages,
        furniture,
        images,
        pages_without_text,
        pages_ocred,
        warnings,
        properties,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_and_requests_survive_the_wire() {
        let converted = Converted {
            markdown: "# T\n\n页一".to_owned(),
            title: Some("T".to_owned()),
            pages: vec![PageSpan {
                page: 1,
                byte_start: 0,
                byte_end: 9,
            }],
            furniture: vec![quarry_core::Furniture {
                kind: quarry_core::FurnitureKind::RunningHeader,
                byte_start: 0,
                byte_end: 3,
            }],
            images: vec![Image {
                sha256: "ab".to_owned(),
                file_name: "ab.png".to_owned(),
                mime: "image/png".to_owned(),
                bytes: vec![1, 2, 3],
            }],
            pages_without_text: vec![2, 3],
            pages_ocred: vec![4],
            warnings: vec!["w".to_owned()],
            properties: DocProperties {
                title: Some("Doc".to_owned()),
                author: Some("Ада".to_owned()),
                subject: None,
                keywords: vec!["a".to_owned(), "b c".to_owned()],
                created: Some("2024-05-01T08:00:00Z".to_owned()),
                modified: None,
            },
        };
        let mut out = Vec::new();
        encode_answer(&mut out, &Ok(converted.clone()));
        assert_eq!(decode_answer(&out), Some(Ok(converted)));
        let mut out = Vec::new();
        encode_answer(&mut out, &Err(ConvertError::Encrypted(Format::Pdf)));
        assert_eq!(
            decode_answer(&out).map(|r| r.map_err(|e| e.to_string())),
            Some(Err("encrypted PDF".to_owned()))
        );
        // Truncated answers are refused, never read past their end.
        for cut in 0..out.len() {
            assert!(decode_answer(&out[..cut]).is_none_or(|r| r.is_err()));
        }

        let opts = ConvertOptions::default();
        let mut req = Vec::new();
        put_str(&mut req, "a.pdf");
        put_options(&mut req, &opts);
        req.extend_from_slice(b"%PDF");
        let (name, back, bytes) = decode_request(&req).expect("request");
        assert_eq!((name.as_str(), bytes), ("a.pdf", &b"%PDF"[..]));
        assert_eq!(back.limits.max_memory_bytes, opts.limits.max_memory_bytes);
        assert_eq!(back.limits.timeout, opts.limits.timeout);
    }
}
