//! Helpers shared by the converters: Markdown tables and escaping, text decoding, images,
//! and the output-size limit.

use crate::types::{Converted, Image};
use quarry_core::{Furniture, FurnitureKind, sha256_hex};

/// Escapes a table cell: pipes, line breaks (→ `<br>`), surrounding whitespace.
pub(crate) fn escape_cell(cell: &str) -> String {
    let cell = cell.trim();
    let mut out = String::with_capacity(cell.len());
    let mut pending_break = false;
    for line in cell.lines() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if pending_break {
            out.push_str("<br>");
        }
        for c in line.chars() {
            match c {
                '|' => out.push_str("\\|"),
                '\t' => out.push(' '),
                c => out.push(c),
            }
        }
        pending_break = true;
    }
    out
}

/// A Markdown table; the first row is the header. Ragged rows are padded; cells escaped.
pub(crate) fn md_table(rows: &[Vec<String>]) -> String {
    let width = rows.iter().map(Vec::len).max().unwrap_or(0);
    if width == 0 {
        return String::new();
    }
    let mut out = String::new();
    for (i, row) in rows.iter().enumerate() {
        push_table_row(&mut out, row, width);
        if i == 0 {
            out.push('|');
            for _ in 0..width {
                out.push_str(" --- |");
            }
            out.push('\n');
        }
    }
    out
}

/// A Markdown table from a grid: the first row is the header, columns empty in every row
/// are dropped, ragged rows padded.
pub(crate) fn grid_table(rows: &[Vec<String>]) -> String {
    let width = rows.iter().map(Vec::len).max().unwrap_or(0);
    let used: Vec<usize> = (0..width)
        .filter(|&c| {
            rows.iter()
                .any(|r| r.get(c).is_some_and(|v| !v.trim().is_empty()))
        })
        .collect();
    if used.is_empty() {
        return String::new();
    }
    let mut table = String::new();
    for (i, row) in rows.iter().enumerate() {
        let kept: Vec<String> = used
            .iter()
            .map(|&c| row.get(c).cloned().unwrap_or_default())
            .collect();
        push_table_row(&mut table, &kept, used.len());
        if i == 0 {
            table.push('|');
            for _ in 0..used.len() {
                table.push_str(" --- |");
            }
            table.push('\n');
        }
    }
    table
}

/// Title lines above a table (rows with at most one filled cell before a table at least
/// three columns wide) split off as text, so they do not become a one-cell header.
pub(crate) fn split_preamble(rows: &mut Vec<Vec<String>>) -> Vec<String> {
    let filled = |r: &Vec<String>| r.iter().filter(|c| !c.trim().is_empty()).count();
    let widest = rows.iter().take(50).map(filled).max().unwrap_or(0);
    let mut preamble = Vec::new();
    if widest < 3 {
        return preamble;
    }
    let lead = rows
        .iter()
        .take_while(|r| filled(r) <= 1)
        .count()
        .min(rows.len().saturating_sub(1));
    for row in rows.drain(..lead) {
        let text = row.join(" ").trim().to_owned();
        if !text.is_empty() {
            preamble.push(text);
        }
    }
    preamble
}

/// One `| a | b |` line, cells escaped and the row padded to `width`.
pub(crate) fn push_table_row(out: &mut String, row: &[String], width: usize) {
    out.push('|');
    for i in 0..width {
        out.push(' ');
        if let Some(cell) = row.get(i) {
            out.push_str(&escape_cell(cell));
        }
        out.push_str(" |");
    }
    out.push('\n');
}

/// Decodes text: UTF-8 (BOM stripped), UTF-16 with a BOM, else Windows-1252 (a superset of
/// Latin-1 for printable characters). Returns the text and the fallback encoding used, if any.
pub(crate) fn decode_text(bytes: &[u8]) -> (String, Option<&'static str>) {
    if let Some(rest) = bytes.strip_prefix(b"\xEF\xBB\xBF") {
        return (String::from_utf8_lossy(rest).into_owned(), None);
    }
    if bytes.starts_with(b"\xFF\xFE") || bytes.starts_with(b"\xFE\xFF") {
        let (text, enc, _) = encoding_rs::Encoding::for_bom(bytes)
            .map(|(e, _)| e)
            .unwrap_or(encoding_rs::UTF_16LE)
            .decode(bytes);
        return (text.into_owned(), Some(enc.name()));
    }
    match std::str::from_utf8(bytes) {
        Ok(s) => (s.to_owned(), None),
        Err(_) => {
            let (text, _, _) = encoding_rs::WINDOWS_1252.decode(bytes);
            (text.into_owned(), Some("Windows-1252"))
        }
    }
}

/// Whether bytes look like a binary file rather than text (NUL bytes in the first 8 KiB,
/// outside UTF-16).
pub(crate) fn looks_binary(bytes: &[u8]) -> bool {
    if bytes.starts_with(b"\xFF\xFE") || bytes.starts_with(b"\xFE\xFF") {
        return false;
    }
    bytes.iter().take(8192).any(|&b| b == 0)
}

/// What a file's first bytes say it is, for "not a DOCX file (looks like a PDF)".
pub(crate) fn sniff(bytes: &[u8]) -> Option<&'static str> {
    let head = &bytes[..bytes.len().min(1024)];
    if head.starts_with(b"PK\x03\x04") {
        Some("a zip archive")
    } else if head.starts_with(b"\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1") {
        Some("an OLE compound file")
    } else if find(head, b"%PDF-").is_some() {
        Some("a PDF")
    } else if head.starts_with(b"\x89PNG") || head.starts_with(b"\xFF\xD8\xFF") {
        Some("an image")
    } else if head.starts_with(b"\x1F\x8B") {
        Some("a gzip archive")
    } else {
        None
    }
}

/// Position of `needle` in `hay`.
pub(crate) fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || hay.len() < needle.len() {
        return None;
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

/// An extracted image: hashed, named `<sha256>.<ext>`, MIME from its magic bytes (falling back
/// to the part name's extension).
pub(crate) fn make_image(bytes: Vec<u8>, name_hint: &str) -> Image {
    let (ext, mime) = image_kind(&bytes, name_hint);
    let sha256 = sha256_hex(&bytes);
    Image {
        file_name: format!("{sha256}.{ext}"),
        sha256,
        mime: mime.to_owned(),
        bytes,
    }
}

fn image_kind(bytes: &[u8], name_hint: &str) -> (String, &'static str) {
    let by_magic = if bytes.starts_with(b"\x89PNG") {
        Some(("png", "image/png"))
    } else if bytes.starts_with(b"\xFF\xD8\xFF") {
        Some(("jpg", "image/jpeg"))
    } else if bytes.starts_with(b"GIF8") {
        Some(("gif", "image/gif"))
    } else if bytes.starts_with(b"BM") {
        Some(("bmp", "image/bmp"))
    } else if bytes.starts_with(b"II*\0") || bytes.starts_with(b"MM\0*") {
        Some(("tif", "image/tiff"))
    } else if bytes.len() > 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some(("webp", "image/webp"))
    } else if bytes.starts_with(b"\x01\0\0\0")
        && find(&bytes[..bytes.len().min(64)], b" EMF").is_some()
    {
        Some(("emf", "image/emf"))
    } else if bytes.starts_with(b"\xD7\xCD\xC6\x9A") {
        Some(("wmf", "image/wmf"))
    } else {
        None
    };
    if let Some((ext, mime)) = by_magic {
        return (ext.to_owned(), mime);
    }
    let ext = name_hint
        .rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase())
        .filter(|e| !e.is_empty() && e.len() <= 5 && e.bytes().all(|b| b.is_ascii_alphanumeric()))
        .unwrap_or_else(|| "bin".to_owned());
    let mime = match ext.as_str() {
        "svg" => "image/svg+xml",
        "emf" => "image/emf",
        "wmf" => "image/wmf",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        _ => "application/octet-stream",
    };
    (ext, mime)
}

/// Adds `image` unless an identical one is already there; returns its file name.
pub(crate) fn add_image(images: &mut Vec<Image>, image: Image) -> String {
    let name = image.file_name.clone();
    if !images.iter().any(|i| i.sha256 == image.sha256) {
        images.push(image);
    }
    name
}

/// Collapses runs of blank lines to one and trims the ends.
pub(crate) fn tidy(md: &str) -> String {
    let mut out = String::with_capacity(md.len());
    let mut blank = 0;
    let mut in_fence = false;
    for line in md.lines() {
        let trimmed = line.trim_end();
        if trimmed.trim_start().starts_with("```") {
            in_fence = !in_fence;
        }
        if trimmed.is_empty() && !in_fence {
            blank += 1;
            continue;
        }
        if !out.is_empty() {
            out.push('\n');
            if blank > 0 {
                out.push('\n');
            }
        }
        blank = 0;
        out.push_str(if in_fence { line } else { trimmed });
    }
    out.push('\n');
    if out.trim().is_empty() {
        out.clear();
    }
    out
}

/// Largest char boundary ≤ `at`.
pub(crate) fn floor_char_boundary(s: &str, at: usize) -> usize {
    if at >= s.len() {
        return s.len();
    }
    let mut i = at;
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Cuts the Markdown at `max` bytes (on a line or char boundary), clipping the page map.
pub(crate) fn enforce_output_limit(c: &mut Converted, max: usize) {
    if c.markdown.len() <= max {
        return;
    }
    let mut cut = floor_char_boundary(&c.markdown, max);
    if let Some(nl) = c.markdown[..cut].rfind('\n')
        && nl > cut / 2
    {
        cut = nl + 1;
    }
    c.markdown.truncate(cut);
    c.furniture.retain(|f| f.byte_start < cut);
    for f in &mut c.furniture {
        f.byte_end = f.byte_end.min(cut);
    }
    c.pages
        .retain(|p| p.byte_start < cut || (p.byte_start == 0 && cut == 0));
    for p in &mut c.pages {
        p.byte_end = p.byte_end.min(cut);
    }
    c.warnings.push(format!(
        "output cut at {} MB (the limit on converted text)",
        max / (1024 * 1024)
    ));
}

/// After the Markdown was trimmed to `len` bytes: spans clamped to it, the last one ending
/// there.
pub(crate) fn end_pages_at(pages: &mut [quarry_core::PageSpan], len: usize) {
    for p in pages.iter_mut() {
        p.byte_start = p.byte_start.min(len);
        p.byte_end = p.byte_end.min(len);
    }
    if let Some(last) = pages.last_mut() {
        last.byte_end = len;
    }
}

/// Appends Markdown text for one page and records its span.
pub(crate) fn push_page(
    out: &mut String,
    pages: &mut Vec<quarry_core::PageSpan>,
    page: u32,
    text: &str,
) {
    let start = out.len();
    out.push_str(text);
    if !out.is_empty() && !out.ends_with("\n\n") {
        if out.ends_with('\n') {
            out.push('\n');
        } else {
            out.push_str("\n\n");
        }
    }
    pages.push(quarry_core::PageSpan {
        page,
        byte_start: start,
        byte_end: out.len(),
    });
}

/// Furniture marks while Markdown is being built (HTML, DOCX): a converter puts
/// [`mark_open`] before the first character of a furniture block and [`MARK_CLOSE`] after its
/// last, and [`take_marks`] removes them from the finished Markdown, returning the ranges.
/// Unicode noncharacters, so no document text can contain them ([`strip_marks`] makes sure).
pub(crate) const MARK_CLOSE: char = '\u{FDDF}';

const MARKED_KINDS: [FurnitureKind; 3] = [
    FurnitureKind::Contents,
    FurnitureKind::Index,
    FurnitureKind::Boilerplate,
];

pub(crate) fn mark_open(kind: FurnitureKind) -> char {
    let i = MARKED_KINDS.iter().position(|k| *k == kind).unwrap_or(0);
    char::from_u32(0xFDD0 + i as u32).unwrap_or('\u{FDD0}')
}

fn is_mark(c: char) -> bool {
    matches!(c as u32, 0xFDD0..=0xFDD2 | 0xFDDF)
}

/// Text with the mark characters removed (input text must not forge marks).
pub(crate) fn strip_marks(s: &str) -> std::borrow::Cow<'_, str> {
    if s.chars().any(is_mark) {
        std::borrow::Cow::Owned(s.chars().filter(|c| !is_mark(*c)).collect())
    } else {
        std::borrow::Cow::Borrowed(s)
    }
}

/// Removes the marks from tidied Markdown. A range covers whole lines: from the start of
/// the line holding its opening mark to the end (newline included) of the line holding its
/// closing mark. Lines left empty by the removal go, with the blank lines around them
/// collapsed as [`tidy`] does. Ranges come back sorted; touching ranges of one kind merge.
pub(crate) fn take_marks(md: &str) -> (String, Vec<Furniture>) {
    if !md.chars().any(is_mark) {
        return (md.to_owned(), Vec::new());
    }
    let mut out = String::with_capacity(md.len());
    let mut spans: Vec<Furniture> = Vec::new();
    let mut open: Option<(FurnitureKind, Option<usize>)> = None;
    let mut blank = false;
    for line in md.lines() {
        let clean: String = line.chars().filter(|c| !is_mark(*c)).collect();
        let clean = clean.trim_end();
        let line_start = if clean.trim().is_empty() {
            None
        } else {
            if blank && !out.is_empty() {
                out.push('\n');
            }
            blank = false;
            Some(out.len())
        };
        for c in line.chars().filter(|c| is_mark(*c)) {
            if c == MARK_CLOSE {
                if let Some((kind, start)) = open.take() {
                    // A block closed on an empty line ends after the last line written.
                    let start = start.or(line_start).unwrap_or(out.len());
                    let end = if line_start.is_some() {
                        out.len() + clean.len() + 1
                    } else {
                        out.len()
                    };
                    spans.push(Furniture {
                        kind,
                        byte_start: start,
                        byte_end: end,
                    });
                }
            } else if open.is_none() {
                let kind = MARKED_KINDS[(c as u32 - 0xFDD0) as usize];
                open = Some((kind, line_start));
            }
        }
        match line_start {
            Some(_) => {
                if let Some((_, start @ None)) = open.as_mut() {
                    *start = Some(out.len());
                }
                out.push_str(clean);
                out.push('\n');
            }
            None => blank = true,
        }
    }
    if let Some((kind, Some(start))) = open {
        spans.push(Furniture {
            kind,
            byte_start: start,
            byte_end: out.len(),
        });
    }
    if out.trim().is_empty() {
        out.clear();
    }
    let len = out.len();
    let mut spans = normalize_furniture(spans, len);
    // Blocks of one kind separated only by blank lines are one range.
    spans.dedup_by(|next, prev| {
        let joined = prev.kind == next.kind
            && out
                .get(prev.byte_end..next.byte_start)
                .is_some_and(|gap| gap.trim().is_empty());
        if joined {
            prev.byte_end = next.byte_end;
        }
        joined
    });
    (out, spans)
}

/// Sorted, clamped to `len`, empty ranges dropped, overlapping or touching ranges of one kind
/// merged, and an overlap between kinds resolved in favour of the earlier range.
pub(crate) fn normalize_furniture(mut spans: Vec<Furniture>, len: usize) -> Vec<Furniture> {
    for f in &mut spans {
        f.byte_end = f.byte_end.min(len);
    }
    spans.retain(|f| f.byte_start < f.byte_end);
    spans.sort_by_key(|f| (f.byte_start, f.byte_end));
    let mut out: Vec<Furniture> = Vec::with_capacity(spans.len());
    for mut f in spans {
        if let Some(last) = out.last_mut() {
            if last.kind == f.kind && f.byte_start <= last.byte_end {
                last.byte_end = last.byte_end.max(f.byte_end);
                continue;
            }
            if f.byte_start < last.byte_end {
                f.byte_start = last.byte_end;
                if f.byte_start >= f.byte_end {
                    continue;
                }
            }
        }
        out.push(f);
    }
    out
}

/// Whether `c` is a CJK ideograph, kana, or CJK or full-width punctuation.
pub(crate) fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3000..=0x303F | 0x3040..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF
        | 0xF900..=0xFAFF | 0xFF00..=0xFFEF | 0x20000..=0x2FFFF)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_become_line_ranges_of_the_final_text() {
        let o = mark_open(FurnitureKind::Contents);
        let md = format!(
            "# Title\n\n{o}\n\n- [One](#one)\n- [Two](#two){MARK_CLOSE}\n\n{MARK_CLOSE}\nBody text.\n"
        );
        let (out, spans) = take_marks(&md);
        assert_eq!(
            out,
            "# Title\n\n- [One](#one)\n- [Two](#two)\n\nBody text.\n"
        );
        assert_eq!(spans.len(), 1);
        let f = spans[0];
        assert_eq!(f.kind, FurnitureKind::Contents);
        assert_eq!(
            &out[f.byte_start..f.byte_end],
            "- [One](#one)\n- [Two](#two)\n"
        );
        // A mark-only line between blank lines leaves one blank line, as tidy would.
        let md = format!("a\n\n{o}\n\nb{MARK_CLOSE}\n\nc\n");
        let (out, spans) = take_marks(&md);
        assert_eq!(out, "a\n\nb\n\nc\n");
        assert_eq!(&out[spans[0].byte_start..spans[0].byte_end], "b\n");
        assert_eq!(strip_marks("x\u{FDD0}y"), "xy");
        // Paragraphs marked one by one make one range.
        let md = format!("{o}A 1{MARK_CLOSE}\n\n{o}B 2{MARK_CLOSE}\n\nBody\n");
        let (out, spans) = take_marks(&md);
        assert_eq!(spans.len(), 1);
        assert_eq!(&out[spans[0].byte_start..spans[0].byte_end], "A 1\n\nB 2\n");
    }

    #[test]
    fn cells_escape_pipes_and_newlines() {
        assert_eq!(escape_cell(" a|b \n c "), "a\\|b<br>c");
        let t = md_table(&[vec!["h1".into(), "h2".into()], vec!["x".into()]]);
        assert_eq!(t, "| h1 | h2 |\n| --- | --- |\n| x |  |\n");
    }

    #[test]
    fn latin1_falls_back() {
        let (s, enc) = decode_text(b"caf\xe9");
        assert_eq!(s, "café");
        assert_eq!(enc, Some("Windows-1252"));
        assert_eq!(decode_text("\u{feff}中文".as_bytes()).0, "中文");
    }

    #[test]
    fn tidy_collapses_blank_lines_outside_fences() {
        assert_eq!(
            tidy("a\n\n\n\nb\n```\nx\n\n\ny\n```\n"),
            "a\n\nb\n```\nx\n\n\ny\n```\n"
        );
    }
}
