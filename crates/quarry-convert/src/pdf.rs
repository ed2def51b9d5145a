//! PDF → Markdown, page by page, with `pdf_oxide`.
//!
//! pdf_oxide is pure Rust (no poppler/mupdf to ship), opens RC4/AES owner-password files,
//! and converts one page at a time, which is what the page map needs: each page's Markdown is
//! appended and its byte range recorded, so the engine can cite "page 12". Its Markdown
//! converter does the reading order, heading detection (font-size clusters) and table
//! detection; we post-process its output ([`clean_page`]) because on real layouts it can glue
//! a heading to the following body text, emit a heading per visual line, and leave
//! hyphenated line ends. Pages whose text layer is empty go to OCR (`tesseract`, when
//! installed and allowed) or to `pages_without_text`; a file with no text at all is
//! [`ConvertError::NoText`]. Every call into the parser runs under `catch_unwind`: one bad
//! page costs a warning, not the document.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Duration;

use pdf_oxide::PdfDocument;
use pdf_oxide::converters::{ConversionOptions, ReadingOrderMode};

use crate::util;
use crate::{ConvertError, ConvertOptions, Converted, Converter, Deadline, Format, Ocr, ocr};

pub(crate) struct PdfConverter;

impl Converter for PdfConverter {
    fn format(&self) -> Format {
        Format::Pdf
    }

    fn convert(&self, bytes: &[u8], opts: &ConvertOptions) -> Result<Converted, ConvertError> {
        crate::catch_panic(Format::Pdf, || convert_pdf(bytes, opts))
    }
}

fn corrupt(detail: impl Into<String>) -> ConvertError {
    ConvertError::Corrupt {
        format: Format::Pdf,
        detail: detail.into(),
    }
}

fn convert_pdf(bytes: &[u8], opts: &ConvertOptions) -> Result<Converted, ConvertError> {
    let deadline = Deadline::new(&opts.limits);
    // The header may follow some junk, but must come early (as readers allow: 1 KiB).
    if util::find(&bytes[..bytes.len().min(1024)], b"%PDF-").is_none() {
        return Err(ConvertError::WrongFormat {
            expected: Format::Pdf,
            detail: util::sniff(bytes).map(|s| format!("looks like {s}")),
        });
    }
    let mut warnings = Vec::new();
    let (doc, count) = match open(bytes.to_vec()) {
        Ok(opened) => opened,
        Err(ConvertError::Encrypted(f)) => return Err(ConvertError::Encrypted(f)),
        Err(e) => {
            // A damaged cross-reference table: make the parser rebuild it by scanning objects.
            let Some((doc, count)) = without_xref(bytes).and_then(|b| open(b).ok()) else {
                return Err(e);
            };
            warnings.push("damaged cross-reference table; rebuilt from the objects".to_owned());
            (doc, count)
        }
    };
    let limit = opts.limits.max_pages;
    if count > limit as usize {
        return Err(ConvertError::TooManyPages {
            pages: count.min(u32::MAX as usize) as u32,
            limit,
        });
    }
    let title = doc_title(&doc);
    let xy_cut = ConversionOptions {
        detect_headings: true,
        extract_tables: true,
        include_images: false,
        include_form_fields: true,
        ..Default::default()
    };
    let top_down = ConversionOptions {
        reading_order_mode: ReadingOrderMode::TopToBottomLeftToRight,
        ..xy_cut.clone()
    };
    let use_ocr = opts.ocr == Ocr::Auto && ocr::available();

    let mut md = String::new();
    let mut pages = Vec::with_capacity(count);
    let mut pages_without_text = Vec::new();
    let mut pages_ocred = Vec::new();
    let mut failed = Vec::new();
    let mut blank = 0usize;
    let mut bombs = 0usize;
    let mut page_texts: Vec<String> = Vec::with_capacity(count);
    let mut vertical = Vec::new();
    for i in 0..count {
        deadline.check()?;
        let page = i as u32 + 1;
        let raw = catch_unwind(AssertUnwindSafe(|| {
            page_markdown(&doc, i, &xy_cut, &top_down)
        }));
        if page_uses_vertical_writing(&doc, i) {
            vertical.push(page);
        }
        let text = match raw {
            Ok(Ok(t)) => clean_page(&t),
            Ok(Err(e)) => {
                if is_encryption_error(&e) {
                    return Err(ConvertError::Encrypted(Format::Pdf));
                }
                failed.push(page);
                if is_decompression_bomb(&e.to_string()) {
                    bombs += 1;
                    warnings.push(format!("page {page} is too large when decompressed"));
                } else {
                    warnings.push(format!("page {page} could not be read ({e})"));
                }
                String::new()
            }
            Err(_) => {
                failed.push(page);
                warnings.push(format!("page {page} could not be read (parser failure)"));
                String::new()
            }
        };
        let text = if has_words(&text) {
            text
        } else if failed.last() == Some(&page) {
            String::new()
        } else if content_too_large(&doc, i) {
            failed.push(page);
            bombs += 1;
            warnings.push(format!("page {page} is too large when decompressed"));
            String::new()
        } else if page_is_blank(&doc, i) {
            blank += 1;
            pages_without_text.push(page);
            String::new()
        } else if use_ocr {
            match ocr_page(&doc, i, &deadline, opts) {
                Ok(t) if has_words(&t) => {
                    pages_ocred.push(page);
                    t
                }
                Ok(_) => {
                    pages_without_text.push(page);
                    String::new()
                }
                Err(why) => {
                    warnings.push(format!("page {page} not OCR'd: {why}"));
                    pages_without_text.push(page);
                    String::new()
                }
            }
        } else {
            pages_without_text.push(page);
            String::new()
        };
        page_texts.push(text);
    }
    strip_running_lines(&mut page_texts);
    for (i, text) in page_texts.iter().enumerate() {
        util::push_page(&mut md, &mut pages, i as u32 + 1, text);
    }
    if failed.len() == count {
        if bombs > 0 {
            return Err(ConvertError::TooLargeDecompressed);
        }
        return Err(corrupt(warnings.first().cloned().unwrap_or_default()));
    }
    if pages_ocred.is_empty() && pages_without_text.len() + failed.len() == count {
        if blank + failed.len() == count {
            return Err(corrupt("no readable content on any page (damaged file?)"));
        }
        return Err(ConvertError::NoText {
            pages: pages_without_text,
        });
    }
    // Pages without text are reported once, in `pages_without_text` (stored with the
    // document and shown beside it); a warning saying the same would show it twice.
    if !vertical.is_empty() {
        // The text extractor reads lines left to right, top to bottom; vertical columns come
        // out as characters in the wrong order.
        warnings.push(format!(
            "vertical writing on {}: its text order may be wrong",
            crate::describe_pages(&vertical)
        ));
    }
    // Trailing blank line of the last page is not content.
    while md.ends_with("\n\n") {
        md.pop();
    }
    util::end_pages_at(&mut pages, md.len());
    Ok(Converted {
        markdown: md,
        title,
        pages,
        furniture: Vec::new(),
        images: Vec::new(),
        pages_without_text,
        pages_ocred,
        warnings,
    })
}

/// Opens the document (authenticating with the empty user password when it is encrypted)
/// and reads its page count.
fn open(bytes: Vec<u8>) -> Result<(PdfDocument, usize), ConvertError> {
    let doc = PdfDocument::from_bytes(bytes).map_err(|e| open_error(&e))?;
    if doc.is_encrypted() && !doc.is_authenticated() {
        // Owner-password-only files open with the empty user password.
        if !matches!(doc.authenticate(b""), Ok(true)) {
            return Err(ConvertError::Encrypted(Format::Pdf));
        }
    }
    let count = doc.page_count().map_err(|e| {
        if is_encryption_error(&e) {
            ConvertError::Encrypted(Format::Pdf)
        } else {
            corrupt(format!("no readable page tree ({e})"))
        }
    })?;
    if count == 0 {
        return Err(corrupt("no pages"));
    }
    Ok((doc, count))
}

/// The file with its last `startxref` pointing nowhere, so the parser reconstructs the
/// cross-reference table by scanning for objects (what poppler does with a bad xref).
fn without_xref(bytes: &[u8]) -> Option<Vec<u8>> {
    let at = bytes.windows(9).rposition(|w| w == b"startxref")?;
    let mut fixed = bytes[..at].to_vec();
    fixed.extend_from_slice(b"startxref\n0\n%%EOF\n");
    Some(fixed)
}

/// Whether the page's content streams inflate past pdf_oxide's limits (its text extractor
/// then reports the page as empty).
fn content_too_large(doc: &PdfDocument, index: usize) -> bool {
    matches!(
        catch_unwind(AssertUnwindSafe(|| doc.get_page_content_data(index))),
        Ok(Err(e)) if is_decompression_bomb(&e.to_string())
    )
}

/// A page with nothing on it at all: no content operators, no images (its content streams
/// are missing or empty).
fn page_is_blank(doc: &PdfDocument, index: usize) -> bool {
    let empty_content = doc
        .get_page_content_data(index)
        .map(|d| d.iter().all(u8::is_ascii_whitespace))
        .unwrap_or(true);
    empty_content
        && doc
            .extract_images(index)
            .map(|v| v.is_empty())
            .unwrap_or(true)
}

fn open_error(e: &pdf_oxide::Error) -> ConvertError {
    if is_encryption_error(e) {
        return ConvertError::Encrypted(Format::Pdf);
    }
    let msg = e.to_string();
    if is_decompression_bomb(&msg) {
        return ConvertError::TooLargeDecompressed;
    }
    if msg.to_ascii_lowercase().contains("header") {
        return ConvertError::WrongFormat {
            expected: Format::Pdf,
            detail: Some(msg),
        };
    }
    corrupt(msg)
}

/// pdf_oxide's refusal of a stream that inflates past its limits ("Decompression bomb
/// detected: …", "FlateDecode output reached the … safety limit").
fn is_decompression_bomb(msg: &str) -> bool {
    let msg = msg.to_ascii_lowercase();
    msg.contains("decompression bomb") || msg.contains("safety limit")
}

fn is_encryption_error(e: &pdf_oxide::Error) -> bool {
    if matches!(e, pdf_oxide::Error::EncryptedPdf) {
        return true;
    }
    let msg = e.to_string().to_ascii_lowercase();
    msg.contains("password") || msg.contains("encrypted")
}

/// Whether a font of the page writes vertically (a CID font with the `Identity-V` or
/// another `-V` CMap, as Japanese and Chinese vertical layouts use).
fn page_uses_vertical_writing(doc: &PdfDocument, index: usize) -> bool {
    let check = || -> Option<bool> {
        let page = doc.get_page(index).ok()?;
        let resources = doc.resolve_object(page.as_dict()?.get("Resources")?).ok()?;
        let fonts = doc.resolve_object(resources.as_dict()?.get("Font")?).ok()?;
        Some(fonts.as_dict()?.values().any(|f| {
            doc.resolve_object(f).ok().is_some_and(|font| {
                font.as_dict()
                    .and_then(|d| d.get("Encoding"))
                    .and_then(|e| e.as_name())
                    .is_some_and(|name| name.ends_with("-V"))
            })
        }))
    };
    catch_unwind(AssertUnwindSafe(check))
        .ok()
        .flatten()
        .unwrap_or(false)
}

/// At least one letter or digit.
fn has_words(s: &str) -> bool {
    s.chars().any(char::is_alphanumeric)
}

/// The document-information `/Title`, when it says something (not "untitled", not a file
/// name like `Microsoft Word - draft3.doc`).
fn doc_title(doc: &PdfDocument) -> Option<String> {
    let info = doc.trailer().as_dict()?.get("Info")?.clone();
    let info = match info.as_reference() {
        Some(r) => doc.load_object(r).ok()?,
        None => info,
    };
    let title = info.as_dict()?.get("Title")?.clone();
    let title = match title.as_reference() {
        Some(r) => doc.load_object(r).ok()?,
        None => title,
    };
    let t = decode_text_string(title.as_string()?);
    let t = t.split_whitespace().collect::<Vec<_>>().join(" ");
    let lower = t.to_ascii_lowercase();
    let meaningless = t.chars().filter(|c| c.is_alphanumeric()).count() < 3
        || lower.starts_with("untitled")
        || lower.starts_with("microsoft word")
        || lower.ends_with(".doc")
        || lower.ends_with(".docx")
        || lower.ends_with(".pdf")
        || lower.ends_with(".dvi")
        || lower.ends_with(".tex")
        || lower.ends_with(".indd");
    (!meaningless).then_some(t)
}

/// A PDF text string: UTF-16BE or UTF-8 with a BOM, else PDFDocEncoding (≈ Latin-1).
fn decode_text_string(b: &[u8]) -> String {
    if let Some(rest) = b.strip_prefix(b"\xFE\xFF") {
        let units: Vec<u16> = rest
            .chunks_exact(2)
            .map(|c| u16::from_be_bytes([c[0], c[1]]))
            .collect();
        return String::from_utf16_lossy(&units);
    }
    if let Some(rest) = b.strip_prefix(b"\xEF\xBB\xBF") {
        return String::from_utf8_lossy(rest).into_owned();
    }
    b.iter().map(|&c| c as char).collect()
}

/// OCRs the images of a page with no text layer (the large ones, in page order).
fn ocr_page(
    doc: &PdfDocument,
    index: usize,
    deadline: &Deadline,
    opts: &ConvertOptions,
) -> Result<String, String> {
    let images = catch_unwind(AssertUnwindSafe(|| doc.extract_images(index)))
        .map_err(|_| "its images could not be read".to_owned())?
        .map_err(|e| format!("its images could not be read ({e})"))?;
    let area =
        |im: &pdf_oxide::extractors::PdfImage| u64::from(im.width()) * u64::from(im.height());
    let Some(largest) = images.iter().map(area).max() else {
        return Ok(String::new());
    };
    let mut out = String::new();
    let mut last_error = None;
    for im in images
        .iter()
        .filter(|im| area(im) * 10 >= largest && area(im) >= 10_000)
    {
        deadline.check().map_err(|e| e.to_string())?;
        let png = match catch_unwind(AssertUnwindSafe(|| im.to_png_bytes())) {
            Ok(Ok(png)) => png,
            Ok(Err(e)) => {
                last_error = Some(format!("its image could not be decoded ({e})"));
                continue;
            }
            Err(_) => {
                last_error = Some("its image could not be decoded".to_owned());
                continue;
            }
        };
        let timeout = opts.limits.timeout.min(Duration::from_secs(120));
        match ocr::ocr_image(&png, timeout) {
            Ok(text) => out.push_str(&ocr::reflow(&text)),
            Err(e) => last_error = Some(e),
        }
    }
    match last_error {
        Some(e) if out.trim().is_empty() => Err(e),
        _ => Ok(out),
    }
}

/// One page's Markdown, choosing the reading order.
///
/// pdf_oxide's default (XY-cut) reading order is right for multi-column pages, but on real
/// single-column layouts it can drop or displace spans (inline monospace words, text under a
/// link annotation). So a single-column page is read top to bottom, once; only a page laid
/// out in columns is read both ways, the XY-cut order winning unless the other kept visibly
/// more text. (Reading every page both ways cost a third more time on the Chinese manual for
/// the same text.)
fn page_markdown(
    doc: &PdfDocument,
    index: usize,
    xy_cut: &ConversionOptions,
    top_down: &ConversionOptions,
) -> pdf_oxide::Result<String> {
    if !is_multi_column(doc, index) {
        return match doc.to_markdown(index, top_down) {
            Ok(td) => Ok(td),
            Err(_) => doc.to_markdown(index, xy_cut),
        };
    }
    let xy = doc.to_markdown(index, xy_cut)?;
    let Ok(td) = doc.to_markdown(index, top_down) else {
        return Ok(xy);
    };
    let (xy_chars, td_chars) = (text_chars(&xy), text_chars(&td));
    if td_chars > xy_chars + xy_chars / 200 + 2 {
        return Ok(td);
    }
    Ok(xy)
}

/// Letters and digits outside link targets.
fn text_chars(md: &str) -> usize {
    strip_links(md)
        .chars()
        .filter(|c| c.is_alphanumeric())
        .count()
}

/// Whether the page's text sits in side-by-side columns: little text crosses the vertical
/// middle and a good share starts right of it.
fn is_multi_column(doc: &PdfDocument, index: usize) -> bool {
    let Ok(spans) = doc.extract_spans(index) else {
        return false;
    };
    let Ok((x0, _, x1, _)) = doc.get_page_media_box(index) else {
        return false;
    };
    let mid = (x0 + x1) / 2.0;
    let (mut cross, mut right, mut total) = (0usize, 0usize, 0usize);
    for s in &spans {
        let n = s.text.trim().chars().count();
        if n < 3 {
            continue;
        }
        total += n;
        let (a, b) = (s.bbox.x, s.bbox.x + s.bbox.width);
        if a < mid - 10.0 && b > mid + 10.0 {
            cross += n;
        } else if a >= mid - 10.0 {
            right += n;
        }
    }
    total > 0 && cross * 100 < total * 15 && right * 100 > total * 25
}

/// Post-processes one page of pdf_oxide Markdown: link markup dropped (PDF link rectangles
/// often cover the wrong words), per-word bold runs merged, spaces from line wraps between
/// CJK characters removed, and numbered section titles glued to their paragraph split off as
/// headings.
pub(crate) fn clean_page(md: &str) -> String {
    let md = strip_links(md);
    let mut out = String::with_capacity(md.len());
    let mut in_fence = false;
    for line in md.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
        }
        if in_fence || line.trim_start().starts_with("```") {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        let line = line.replace("** **", " ");
        let line = join_cjk(&line);
        match split_section_heading(&line) {
            Some((heading, rest)) => {
                out.push_str(&heading);
                out.push_str("\n\n");
                if !rest.is_empty() {
                    out.push_str(&rest);
                    out.push('\n');
                }
            }
            None => {
                out.push_str(&line);
                out.push('\n');
            }
        }
    }
    util::tidy(&out)
}

/// Removes running headers and footers: a first or last line that recurs (digits aside, so
/// "Debian 参考手册 72 / 223" matches "… 73 / 223") on at least half of the pages with text,
/// when there are at least four. Such lines are layout, and left in the body they split
/// sentences that run across pages and fill search results with the book's title.
fn strip_running_lines(pages: &mut [String]) {
    use std::collections::HashMap;
    const MIN_PAGES: usize = 4;
    let with_text = pages.iter().filter(|p| !p.trim().is_empty()).count();
    if with_text < MIN_PAGES {
        return;
    }
    let key = |line: &str| -> String {
        let mut k = String::new();
        let mut digits = false;
        for c in line
            .trim()
            .trim_start_matches('#')
            .replace("**", "")
            .trim()
            .chars()
        {
            if c.is_ascii_digit() {
                if !digits {
                    k.push('#');
                }
                digits = true;
            } else {
                digits = false;
                if !c.is_whitespace() {
                    k.push(c);
                }
            }
        }
        k
    };
    let first = |p: &str| p.lines().find(|l| !l.trim().is_empty()).map(str::to_owned);
    let last = |p: &str| {
        p.lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .map(str::to_owned)
    };
    let mut counts: [HashMap<String, usize>; 2] = [HashMap::new(), HashMap::new()];
    for p in pages.iter() {
        for (slot, line) in [first(p), last(p)].into_iter().enumerate() {
            if let Some(k) = line.map(|l| key(&l)).filter(|k| !k.is_empty()) {
                *counts[slot].entry(k).or_default() += 1;
            }
        }
    }
    let running = |slot: usize, line: &str| {
        let k = key(line);
        // Long lines are prose, not a running header, even when a book repeats them.
        line.chars().count() <= 120 && counts[slot].get(&k).is_some_and(|&n| n * 2 >= with_text)
    };
    for p in pages.iter_mut() {
        if p.trim().is_empty() {
            continue;
        }
        let mut lines: Vec<&str> = p.lines().collect();
        if let Some(i) = lines.iter().position(|l| !l.trim().is_empty())
            && running(0, lines[i])
        {
            lines.remove(i);
        }
        if let Some(i) = lines.iter().rposition(|l| !l.trim().is_empty())
            && running(1, lines[i])
        {
            lines.remove(i);
        }
        let mut kept = lines.join("\n").trim_matches('\n').to_owned();
        if !kept.is_empty() {
            kept.push('\n');
        }
        *p = kept;
    }
}

/// `[text](url)` → `text`.
fn strip_links(md: &str) -> String {
    let mut out = String::with_capacity(md.len());
    let mut rest = md;
    while let Some(open) = rest.find('[') {
        let after = &rest[open + 1..];
        let link = after.find("](").and_then(|close| {
            let text = &after[..close];
            if text.contains('\n') || text.contains('[') {
                return None;
            }
            let url_part = &after[close + 2..];
            let end = url_part.find(')')?;
            let url = &url_part[..end];
            (!url.contains(char::is_whitespace)).then_some((text, close + 2 + end + 1))
        });
        match link {
            Some((text, consumed)) => {
                out.push_str(&rest[..open]);
                out.push_str(text);
                rest = &after[consumed..];
            }
            None => {
                out.push_str(&rest[..open + 1]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3000..=0x303F | 0x3040..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF
        | 0xF900..=0xFAFF | 0xFF00..=0xFFEF | 0x20000..=0x2FFFF)
}

/// Removes single spaces between two CJK characters (line wraps joined with a space).
fn join_cjk(line: &str) -> String {
    let chars: Vec<char> = line.chars().collect();
    let mut out = String::with_capacity(line.len());
    for (i, &c) in chars.iter().enumerate() {
        if c == ' ' && i > 0 && chars.get(i + 1).is_some_and(|&n| is_cjk(n)) && is_cjk(chars[i - 1])
        {
            continue;
        }
        out.push(c);
    }
    out
}

/// `**3.1** Title` or `**3.1. Title** Body text…` → (`### 3.1 Title`, `Body text…`).
fn split_section_heading(line: &str) -> Option<(String, String)> {
    let t = line.trim();
    let inner = t.strip_prefix("**")?;
    let close = inner.find("**")?;
    let bold = inner[..close].trim();
    let after = inner[close + 2..].trim();
    // The bold part starts with a section number: 3 / 3.1 / 3.1.2 / 3.4.3.
    let number_end = bold
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(bold.len());
    let number = bold[..number_end].trim_end_matches('.');
    if number.is_empty() || !number.chars().next().is_some_and(|c| c.is_ascii_digit()) {
        return None;
    }
    let depth = number.split('.').filter(|p| !p.is_empty()).count();
    if depth == 0 || depth > 5 || number.split('.').any(|p| p.len() > 3) {
        return None;
    }
    let bold_title = bold[number_end..].trim();
    let (title, body) = if bold_title.is_empty() {
        // Only the number is bold: the title is the rest of a short line.
        let after = after.replace("**", "");
        let words = after.split_whitespace().count();
        if after.is_empty()
            || after.chars().count() > 60
            || words > 10
            || after.ends_with(['.', '。', ':', ',', ';'])
        {
            return None;
        }
        (after, String::new())
    } else {
        if bold_title.chars().count() > 80 {
            return None;
        }
        (bold_title.replace("**", ""), after.to_owned())
    };
    if !title
        .chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || is_cjk(c))
    {
        return None;
    }
    let level = (depth + 1).min(6);
    Some((format!("{} {number} {title}", "#".repeat(level)), body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_headers_and_page_numbers_are_removed() {
        let mut pages: Vec<String> = (1..=5)
            .map(|n| format!("Debian 参考手册 {n} / 223\n\nBody of page {n}.\n\n{n}\n"))
            .collect();
        pages.push(String::new());
        strip_running_lines(&mut pages);
        assert_eq!(pages[0], "Body of page 1.\n");
        assert_eq!(pages[4], "Body of page 5.\n");
        // Three pages are too few to tell a running header from content.
        let mut few: Vec<String> = (1..=3).map(|n| format!("Title\n\nBody {n}\n")).collect();
        let before = few.clone();
        strip_running_lines(&mut few);
        assert_eq!(few, before);
    }

    #[test]
    fn cleanup_splits_glued_headings_and_fixes_cjk() {
        assert_eq!(
            clean_page("**3.4.3. Specific Options** The following programs\n"),
            "#### 3.4.3 Specific Options\n\nThe following programs\n"
        );
        assert_eq!(
            clean_page("**3.1** 启动过程概述\n"),
            "### 3.1 启动过程概述\n"
        );
        assert_eq!(
            clean_page("**1.** **Introduction** Dynamic languages\n"),
            "## 1 Introduction\n\nDynamic languages\n"
        );
        assert_eq!(
            clean_page("文档 中，但 [这些](http://x.y/z) 知识\n"),
            "文档中，但这些知识\n"
        );
        assert_eq!(
            clean_page("**12,000** people came.\n"),
            "**12,000** people came.\n"
        );
        assert_eq!(clean_page("a [b] c [d](e f)\n"), "a [b] c [d](e f)\n");
    }
}
