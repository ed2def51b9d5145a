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
//!
//! pdf_oxide's Markdown converter drops some lone bracket spans set in another font than
//! their neighbours ("Osamu Aoki (青木修"); its plain-text extractor keeps them, so a page
//! whose Markdown has fewer brackets and quotes gets them back from it
//! ([`restore_from_plain`]). Arabic or Hebrew that a producer stored in visual order is put
//! in reading order ([`rtl_in_visual_order`]).
//!
//! Each page's headings and tables are then checked against how filings and reports are set
//! (`pdf_structure`): headings that are no titles (addresses, figures) go back to body text,
//! a filing's `PART`/`Item`/`Note` numbering makes headings, and lone currency or percent
//! cells join their figures.
//!
//! Layout furniture stays in the Markdown and is reported as byte ranges
//! ([`find_furniture`]): running headers and footers, page numbers, tables of contents (and
//! lists of tables/figures) and back-of-book indexes.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Duration;

use pdf_oxide::PdfDocument;
use pdf_oxide::converters::{ConversionOptions, ReadingOrderMode};
use pdf_oxide::geometry::Rect;
use pdf_oxide::layout::RectFilterMode;

use quarry_core::{Furniture, FurnitureKind};

use crate::ocr;
use crate::props;
use crate::types::{
    ConvertError, ConvertOptions, Converted, Converter, Deadline, DocProperties, Format, Ocr,
};
use crate::util::is_cjk;
use crate::{pdf_columns, util};

pub(crate) struct PdfConverter;

impl Converter for PdfConverter {
    fn format(&self) -> Format {
        Format::Pdf
    }

    fn convert(&self, bytes: &[u8], opts: &ConvertOptions) -> Result<Converted, ConvertError> {
        crate::types::catch_panic(Format::Pdf, || convert_pdf(bytes, opts))
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
    let properties = doc_properties(&doc);
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
            let md = page_markdown(&doc, i, &xy_cut, &top_down)?;
            // Tables that pdf_oxide's reading order takes apart (vertical writing is read
            // in columns, never as rows).
            if page_uses_vertical_writing(&doc, i) {
                return Ok(md);
            }
            Ok(crate::pdf_grid::grid_page_markdown(&doc, i, &md).unwrap_or(md))
        }));
        if page_uses_vertical_writing(&doc, i) {
            vertical.push(page);
        }
        let text = match raw {
            Ok(Ok(t)) => restore_dropped_punctuation(&doc, i, clean_page(&t)),
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
    if rtl_in_visual_order(&page_texts) {
        for t in &mut page_texts {
            *t = rtl_to_logical(t);
        }
    }
    let page_furniture = find_furniture(&page_texts);
    let mut furniture = Vec::new();
    for (i, text) in page_texts.iter().enumerate() {
        let start = md.len();
        util::push_page(&mut md, &mut pages, i as u32 + 1, text);
        furniture.extend(page_furniture[i].iter().map(|&(from, to, kind)| Furniture {
            kind,
            byte_start: start + from,
            byte_end: start + to,
        }));
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
            ocr: opts.ocr,
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
    let furniture = util::normalize_furniture(furniture, md.len());
    Ok(Converted {
        markdown: md,
        title,
        pages,
        furniture,
        images: Vec::new(),
        pages_without_text,
        pages_ocred,
        warnings,
        properties,
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
    let t = info_text(doc, &info_dict(doc)?, "Title")?;
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

/// The trailer's `/Info` dictionary, resolved.
fn info_dict(doc: &PdfDocument) -> Option<pdf_oxide::object::Object> {
    let info = doc.trailer().as_dict()?.get("Info")?.clone();
    let info = match info.as_reference() {
        Some(r) => doc.load_object(r).ok()?,
        None => info,
    };
    info.as_dict().is_some().then_some(info)
}

/// A text string of the `/Info` dictionary `info`, decoded, following an indirect value.
fn info_text(doc: &PdfDocument, info: &pdf_oxide::object::Object, key: &str) -> Option<String> {
    let value = info.as_dict()?.get(key)?.clone();
    let value = match value.as_reference() {
        Some(r) => doc.load_object(r).ok()?,
        None => value,
    };
    Some(decode_text_string(value.as_string()?))
}

/// The document's properties: the `/Info` dictionary, with the XMP metadata stream filling
/// what it lacks. Never fails: what cannot be read is absent.
fn doc_properties(doc: &PdfDocument) -> DocProperties {
    let mut props = catch_unwind(AssertUnwindSafe(|| info_properties(doc))).unwrap_or_default();
    if props.title.is_none()
        || props.author.is_none()
        || props.subject.is_none()
        || props.keywords.is_empty()
        || props.created.is_none()
        || props.modified.is_none()
    {
        let xmp = catch_unwind(AssertUnwindSafe(|| {
            pdf_oxide::extractors::XmpExtractor::extract(doc)
        }));
        if let Ok(Ok(Some(xmp))) = xmp {
            props::fill_missing(&mut props, xmp_properties(&xmp));
        }
    }
    props
}

fn info_properties(doc: &PdfDocument) -> DocProperties {
    let Some(info) = info_dict(doc) else {
        return DocProperties::default();
    };
    let get = |key: &str| info_text(doc, &info, key);
    DocProperties {
        title: get("Title").as_deref().and_then(props::clean),
        author: get("Author").as_deref().and_then(props::clean),
        subject: get("Subject").as_deref().and_then(props::clean),
        keywords: get("Keywords")
            .map(|k| props::keywords([k.as_str()]))
            .unwrap_or_default(),
        created: get("CreationDate")
            .as_deref()
            .and_then(props::pdf_date_to_utc),
        modified: get("ModDate").as_deref().and_then(props::pdf_date_to_utc),
    }
}

/// Properties from XMP (`dc:title`, `dc:creator`, `dc:description`, `pdf:Keywords` and
/// `dc:subject`, `xmp:CreateDate`, `xmp:ModifyDate`).
fn xmp_properties(xmp: &pdf_oxide::extractors::XmpMetadata) -> DocProperties {
    let creators: Vec<&str> = xmp
        .dc_creator
        .iter()
        .map(|c| c.trim())
        .filter(|c| !c.is_empty())
        .collect();
    // XMP dates are ISO 8601; some producers copy the PDF form.
    let date = |d: &Option<String>| {
        d.as_deref()
            .and_then(|d| props::iso_date_to_utc(d).or_else(|| props::pdf_date_to_utc(d)))
    };
    DocProperties {
        title: xmp.dc_title.as_deref().and_then(props::clean),
        author: props::clean(&creators.join("; ")),
        subject: xmp.dc_description.as_deref().and_then(props::clean),
        keywords: props::keywords(
            xmp.pdf_keywords
                .as_deref()
                .into_iter()
                .chain(xmp.dc_subject.iter().map(String::as_str)),
        ),
        created: date(&xmp.xmp_create_date),
        modified: date(&xmp.xmp_modify_date),
    }
}

/// A PDF text string: UTF-16BE (or, from some producers, UTF-16LE) or UTF-8 with a BOM, else
/// PDFDocEncoding. Language marks in UTF-16 strings (`ESC lang ESC`) are dropped.
fn decode_text_string(b: &[u8]) -> String {
    let utf16 = |rest: &[u8], be: bool| {
        let units: Vec<u16> = rest
            .chunks_exact(2)
            .map(|c| {
                if be {
                    u16::from_be_bytes([c[0], c[1]])
                } else {
                    u16::from_le_bytes([c[0], c[1]])
                }
            })
            .collect();
        let text = String::from_utf16_lossy(&units);
        let mut out = String::with_capacity(text.len());
        for (i, part) in text.split('\u{1B}').enumerate() {
            // Even parts are text, odd ones the language codes between two escapes.
            if i % 2 == 0 {
                out.push_str(part);
            }
        }
        out
    };
    if let Some(rest) = b.strip_prefix(b"\xFE\xFF") {
        return utf16(rest, true);
    }
    if let Some(rest) = b.strip_prefix(b"\xFF\xFE") {
        return utf16(rest, false);
    }
    if let Some(rest) = b.strip_prefix(b"\xEF\xBB\xBF") {
        return String::from_utf8_lossy(rest).into_owned();
    }
    b.iter().map(|&c| pdf_doc_char(c)).collect()
}

/// A PDFDocEncoding byte (ISO 32000 Annex D): Latin-1 but for accents in 0x18–0x1F and
/// typographic marks in 0x80–0xA0.
fn pdf_doc_char(c: u8) -> char {
    const LOW: [char; 8] = ['˘', 'ˇ', 'ˆ', '˙', '˝', '˛', '˚', '˜'];
    const HIGH: [char; 33] = [
        '•', '†', '‡', '…', '—', '–', 'ƒ', '⁄', '‹', '›', '−', '‰', '„', '“', '”', '‘', '’', '‚',
        '™', 'ﬁ', 'ﬂ', 'Ł', 'Œ', 'Š', 'Ÿ', 'Ž', 'ı', 'ł', 'œ', 'š', 'ž', '\u{FFFD}', '€',
    ];
    match c {
        0x18..=0x1F => LOW[usize::from(c - 0x18)],
        0x80..=0xA0 => HIGH[usize::from(c - 0x80)],
        _ => char::from(c),
    }
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
        match ocr::ocr_image(&png, &opts.ocr_languages, timeout) {
            Ok(text) => out.push_str(&ocr::reflow(&text)),
            Err(e) => last_error = Some(e),
        }
    }
    match last_error {
        Some(e) if out.trim().is_empty() => Err(e),
        _ => Ok(out),
    }
}

/// Brackets and quotes that pdf_oxide's Markdown converter can drop (a lone `)` or `）`
/// span next to text in another font: "Osamu Aoki (青木修", "（版本 2.100 (2023-…").
const DROPPABLE: &[char] = &[
    ')', '）', '(', '（', '”', '“', '’', '‘', ']', '】', '[', '【', '」', '「', '』', '『', '》',
    '《',
];

/// Puts back brackets and quotes that the Markdown lost but the page's plain text (pdf_oxide's
/// own `extract_text`, which keeps them) has.
fn restore_dropped_punctuation(doc: &PdfDocument, index: usize, md: String) -> String {
    let Ok(Ok(plain)) = catch_unwind(AssertUnwindSafe(|| doc.extract_text(index))) else {
        return md;
    };
    let count = |s: &str| s.chars().filter(|c| DROPPABLE.contains(c)).count();
    if count(&plain) <= count(&md) {
        return md;
    }
    restore_from_plain(&md, &plain)
}

/// Where a lost bracket goes between the last character both texts agree on (ending at
/// `agreed`) and the next one (at `next`): an opening one right before the next character; a
/// closing one right after the agreed one, unless a line break separates them and nothing
/// is open on the earlier line (then it opens the next: "”$HOME”" in this manual).
fn insertion_point(
    md: &str,
    pending: &[(usize, char)],
    agreed: usize,
    next: usize,
    c: char,
) -> usize {
    const PAIRS: [(char, char); 9] = [
        ('(', ')'),
        ('（', '）'),
        ('“', '”'),
        ('‘', '’'),
        ('[', ']'),
        ('【', '】'),
        ('「', '」'),
        ('『', '』'),
        ('《', '》'),
    ];
    // Openers (and anything unpaired) go with what follows them.
    let Some(&(open, close)) = PAIRS.iter().find(|p| p.1 == c) else {
        return next;
    };
    // A closer goes with what precedes it on the same line.
    if !md[agreed..next].contains('\n') {
        return agreed;
    }
    let start = md[..agreed].rfind('\n').map_or(0, |i| i + 1);
    // Brackets already put back on that line count too.
    let n = |x: char| {
        md[start..agreed].chars().filter(|&y| y == x).count()
            + pending
                .iter()
                .filter(|&&(at, y)| y == x && (start..=agreed).contains(&at))
                .count()
    };
    if n(open) > n(close) { agreed } else { next }
}

/// Markdown syntax pdf_oxide or [`clean_page`] adds that the plain text lacks.
fn is_markup(c: char) -> bool {
    matches!(c, '*' | '#' | '|' | '`' | '_' | '>' | '-')
}

/// Aligns the Markdown with the plain text (whitespace and markup aside) and inserts a
/// [`DROPPABLE`] character the plain text has where the Markdown skips it: only right after
/// a character both agree on, and only when the next three characters agree too. Where the
/// two disagree otherwise (reading order, tables), it looks ahead for the Markdown's next
/// words to pick up the thread, and inserts nothing until it has.
fn restore_from_plain(md: &str, plain: &str) -> String {
    // Bullets the plain text has where the Markdown writes `- `.
    let p: Vec<char> = plain
        .chars()
        .filter(|c| !c.is_whitespace() && !matches!(c, '•' | '◦' | '▪' | '●' | '‣'))
        .collect();
    let m: Vec<(usize, char)> = md.char_indices().collect();
    // Content characters of the Markdown (positions in `m`).
    let content: Vec<usize> = (0..m.len()).filter(|&k| !m[k].1.is_whitespace()).collect();
    let mut inserts: Vec<(usize, char)> = Vec::new();
    let mut j = 0usize;
    let mut synced = false;
    let mut last_end = 0usize; // byte offset after the last agreed character
    let mut ci = 0usize;
    while ci < content.len() && j <= p.len() {
        let (at, c) = m[content[ci]];
        if j < p.len() && p[j] == c {
            j += 1;
            ci += 1;
            synced = true;
            last_end = at + c.len_utf8();
            continue;
        }
        if synced && j + 3 < p.len() && DROPPABLE.contains(&p[j]) && p[j + 1] == c {
            let ahead: Vec<char> = content[ci..]
                .iter()
                .map(|&k| m[k].1)
                .filter(|c| !is_markup(*c))
                .take(3)
                .collect();
            if ahead.len() == 3 && ahead[..] == p[j + 1..j + 4] {
                let point = insertion_point(md, &inserts, last_end, at, p[j]);
                inserts.push((point, p[j]));
                j += 1;
                continue;
            }
        }
        if is_markup(c) {
            ci += 1;
            continue;
        }
        // Lost the thread: find the Markdown's next six characters ahead in the plain text.
        synced = false;
        let window: Vec<char> = content[ci..]
            .iter()
            .map(|&k| m[k].1)
            .filter(|c| !is_markup(*c))
            .take(6)
            .collect();
        // Brackets the Markdown lost may sit inside the window: skip them in the plain text.
        let matches_at = |k: usize| {
            let mut q = k;
            for &w in &window {
                while q < p.len() && p[q] != w && DROPPABLE.contains(&p[q]) && q > k {
                    q += 1;
                }
                if q >= p.len() || p[q] != w {
                    return false;
                }
                q += 1;
            }
            true
        };
        // Ahead first; then behind, where the plain text put a block earlier than the Markdown.
        let limit = p.len().min(j + 4000);
        match (j..limit)
            .chain(j.saturating_sub(4000)..j)
            .find(|&k| matches_at(k))
        {
            Some(k) if window.len() == 6 => j = k,
            _ => ci += 1,
        }
    }
    // The page ends where the Markdown lost its last bracket ("Osamu Aoki (青木修").
    // (Nothing follows, so it closes the last line whatever it is.)
    if synced && ci == content.len() && j < p.len() && p.len() - j <= 2 {
        inserts.extend(
            p[j..]
                .iter()
                .filter(|c| DROPPABLE.contains(c))
                .map(|&c| (last_end, c)),
        );
    }
    if inserts.is_empty() {
        return md.to_owned();
    }
    let mut out = String::with_capacity(md.len() + inserts.len() * 3);
    let mut from = 0;
    for (at, c) in inserts {
        out.push_str(&md[from..at]);
        out.push(c);
        from = at;
    }
    out.push_str(&md[from..]);
    out
}

fn is_rtl_letter(c: char) -> bool {
    matches!(c as u32, 0x05D0..=0x05EA | 0x0620..=0x064A | 0x066E..=0x06D3 | 0x06FA..=0x06FF
        | 0x0750..=0x077F | 0xFB1D..=0xFB4F | 0xFB50..=0xFDFF | 0xFE70..=0xFEFC)
}

/// Whether the document's Arabic or Hebrew came out in visual order (the glyphs left to
/// right, as some producers store them; pdf_oxide then keeps that order). Words tell: in
/// reading order Arabic words start with the article "ال" (also "بال", "وال" …) and end in
/// "ة" or "ى", Hebrew words end in final letters (ך ם ן ף ץ); reversed, the same words end
/// in "لا" and start with those letters. Decided once for the document.
fn rtl_in_visual_order(pages: &[String]) -> bool {
    let (mut logical, mut visual) = (0usize, 0usize);
    for page in pages {
        for word in page.split(|c: char| !is_rtl_letter(c)) {
            let chars: Vec<char> = word.chars().collect();
            if chars.len() < 3 {
                continue;
            }
            let (first, last) = (chars[0], chars[chars.len() - 1]);
            let starts_article = chars[0] == 'ا' && chars[1] == 'ل'
                || matches!(chars[0], 'ب' | 'و' | 'ف' | 'ك') && chars[1] == 'ا' && chars[2] == 'ل';
            let n = chars.len();
            let ends_article = chars[n - 1] == 'ا' && chars[n - 2] == 'ل'
                || matches!(chars[n - 1], 'ب' | 'و' | 'ف' | 'ك')
                    && chars[n - 2] == 'ا'
                    && chars[n - 3] == 'ل';
            let hebrew_final = |c: char| matches!(c, 'ך' | 'ם' | 'ן' | 'ף' | 'ץ');
            logical += usize::from(starts_article)
                + usize::from(matches!(last, 'ة' | 'ى'))
                + usize::from(hebrew_final(last));
            visual += usize::from(ends_article)
                + usize::from(matches!(first, 'ة' | 'ى'))
                + usize::from(hebrew_final(first));
        }
    }
    visual > logical
}

/// Each right-to-left run of `text` (what pdf_oxide wraps in U+2067 … U+2069, or a line with
/// no left-to-right letters) put in reading order: its characters reversed, numbers and
/// Latin words inside it kept as they are, brackets mirrored.
fn rtl_to_logical(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let (body, nl) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        if !body.chars().any(is_rtl_letter) {
            out.push_str(line);
            continue;
        }
        if body.contains('\u{2067}') {
            let mut rest = body;
            while let Some(open) = rest.find('\u{2067}') {
                out.push_str(&rest[..open + '\u{2067}'.len_utf8()]);
                let after = &rest[open + '\u{2067}'.len_utf8()..];
                let close = after.find('\u{2069}').unwrap_or(after.len());
                out.push_str(&reverse_run(&after[..close]));
                rest = &after[close..];
            }
            out.push_str(rest);
        } else if !body.chars().any(|c| c.is_alphabetic() && !is_rtl_letter(c)) {
            // A whole right-to-left line: Markdown's own prefix ("# ", "- ") stays in front.
            let lead = body.len() - body.trim_start_matches(['#', '-', '*', '>', ' ']).len();
            out.push_str(&body[..lead]);
            out.push_str(&reverse_run(&body[lead..]));
        } else {
            out.push_str(body);
        }
        out.push_str(nl);
    }
    out
}

fn reverse_run(run: &str) -> String {
    let mut tokens: Vec<String> = Vec::new();
    let mut ltr = String::new();
    for c in run.chars() {
        if c.is_ascii_alphanumeric() || (!ltr.is_empty() && matches!(c, '.' | ',' | ':')) {
            ltr.push(c);
            continue;
        }
        if !ltr.is_empty() {
            tokens.push(std::mem::take(&mut ltr));
        }
        let mirrored = match c {
            '(' => ')',
            ')' => '(',
            '[' => ']',
            ']' => '[',
            '{' => '}',
            '}' => '{',
            '<' => '>',
            '>' => '<',
            '«' => '»',
            '»' => '«',
            c => c,
        };
        tokens.push(mirrored.to_string());
    }
    if !ltr.is_empty() {
        tokens.push(ltr);
    }
    tokens.reverse();
    tokens.concat()
}

/// One page's Markdown, choosing the reading order.
///
/// A page whose text falls into several reading regions that the checks below miss (three
/// columns with narrow gutters, columns under a full-width title) is read region by region
/// (`regions_markdown`).
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
    let multi_column = is_multi_column(doc, index);
    // Two columns split at the middle are read well as they are (pdf_oxide's XY-cut keeps
    // their sub- and superscripts in line); vertical writing reads its columns right to left.
    if !multi_column
        && !page_uses_vertical_writing(doc, index)
        && let Some(md) = regions_markdown(doc, index, top_down)
    {
        return Ok(md);
    }
    if !multi_column {
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

/// The page read region by region (columns left to right, bands top to bottom; see
/// `pdf_columns`), when its spans fall into more than one reading region and the regions
/// keep the page's text: the top-down reading's letters and digits, less 1% (text lost) and
/// no more than 2% over (text repeated). `None` for a page of one region, or when any
/// conversion fails.
fn regions_markdown(
    doc: &PdfDocument,
    index: usize,
    top_down: &ConversionOptions,
) -> Option<String> {
    let spans = doc.extract_spans(index).ok()?;
    let (x0, y0, x1, y1) = doc.get_page_media_box(index).ok()?;
    let items: Vec<pdf_columns::Item> = spans
        .iter()
        .map(|s| {
            let text = s.text.trim();
            pdf_columns::Item {
                x0: s.bbox.x,
                y0: s.bbox.y,
                x1: s.bbox.x + s.bbox.width,
                y1: s.bbox.y + s.bbox.height,
                chars: text
                    .chars()
                    .filter(|c| !c.is_whitespace())
                    .map(|c| if is_cjk(c) { 2 } else { 1 })
                    .sum(),
                letters: text
                    .chars()
                    .filter(|c| c.is_alphabetic())
                    .map(|c| if is_cjk(c) { 2 } else { 1 })
                    .sum(),
                size: s.font_size,
            }
        })
        .collect();
    // The media box may sit anywhere; widen it to every span so none falls outside.
    let page = items.iter().fold(
        pdf_columns::Area {
            x0: x0.min(x1),
            y0: y0.min(y1),
            x1: x0.max(x1),
            y1: y0.max(y1),
        },
        |a, i| pdf_columns::Area {
            x0: a.x0.min(i.x0 - 1.0),
            y0: a.y0.min(i.y0 - 1.0),
            x1: a.x1.max(i.x1 + 1.0),
            y1: a.y1.max(i.y1 + 1.0),
        },
    );
    let regions = pdf_columns::reading_regions(&items, page);
    if regions.len() < 2 {
        return None;
    }
    let whole = text_chars(&doc.to_markdown(index, top_down).ok()?);
    let mut parts = Vec::with_capacity(regions.len());
    let mut tables_seen = std::collections::HashSet::new();
    for r in regions {
        let opts = ConversionOptions {
            include_region: Some((
                Rect::new(r.x0, r.y0, r.x1 - r.x0, r.y1 - r.y0),
                RectFilterMode::MinOverlap(0.5),
            )),
            // Widgets would be repeated in every region.
            include_form_fields: false,
            ..top_down.clone()
        };
        let md = doc.to_markdown(index, &opts).ok()?;
        let md = without_repeated_tables(&md, &mut tables_seen);
        let md = md.trim();
        if !md.is_empty() {
            parts.push(md.to_owned());
        }
    }
    let md = parts.join("\n\n");
    let chars = text_chars(&md);
    // Less text is text lost; more is text repeated.
    (chars + whole / 100 >= whole && chars <= whole + whole / 50 + 10).then_some(md)
}

/// `md` less the Markdown tables already in `seen` (pdf_oxide finds a page's ruled tables
/// whatever region it is asked for, so each region would repeat them); the others are
/// added to `seen`.
fn without_repeated_tables(md: &str, seen: &mut std::collections::HashSet<String>) -> String {
    let mut out = String::with_capacity(md.len());
    let mut table = String::new();
    let flush =
        |table: &mut String, out: &mut String, seen: &mut std::collections::HashSet<String>| {
            if !table.is_empty() && seen.insert(table.clone()) {
                out.push_str(table);
            }
            table.clear();
        };
    for line in md.split_inclusive('\n') {
        if line.trim_start().starts_with('|') {
            table.push_str(line);
        } else {
            flush(&mut table, &mut out, seen);
            out.push_str(line);
        }
    }
    flush(&mut table, &mut out, seen);
    out
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
    crate::pdf_structure::structure_page(&util::tidy(&out))
}

/// Furniture of each page: `(start, end, kind)` byte ranges of whole lines (newline
/// included) of that page's text, sorted and not overlapping.
///
/// - Running headers and footers: among the first and last three lines of a page, those
///   that recur (digits and roman numerals aside, so "Debian 参考手册 72 / 223" matches "… 73 /
///   223") at the same edge of at least a fifth of the pages with text (and at least three of
///   them, four pages at least), read from the edge inward; a bare page number ("12", "iv",
///   "Page 3 of 48", "- 7 -") is a page number. Table rows never count: a data table repeats
///   its header on every page.
/// - Contents: from a "Contents" / "Table of Contents" / "目录" / "List of Tables" … heading
///   to the last entry of that page (an entry ends in a page number after dot leaders), and
///   the following pages while entries still make up much of them.
/// - Index: the same, from an "Index" / "索引" heading.
///
/// Body text is never marked on its own evidence: a worksheet full of dot leaders or a data
/// table of figures has no contents heading before it, and lines in the middle of a page are
/// running lines only through the edge rule.
fn find_furniture(pages: &[String]) -> Vec<Vec<(usize, usize, FurnitureKind)>> {
    let lines: Vec<Vec<(usize, usize)>> = pages.iter().map(|p| line_spans(p)).collect();
    let mut out: Vec<Vec<(usize, usize, FurnitureKind)>> = vec![Vec::new(); pages.len()];
    let running = running_lines(pages, &lines);
    for (i, marks) in running.into_iter().enumerate() {
        out[i].extend(marks);
    }
    // Contents and index, page by page; a section carries on while pages are entries.
    let mut open: Option<FurnitureKind> = None;
    let mut last_ref = 0u32;
    for (i, page) in pages.iter().enumerate() {
        let taken: Vec<(usize, usize)> = out[i].iter().map(|m| (m.0, m.1)).collect();
        let body: Vec<(usize, usize)> = lines[i]
            .iter()
            .copied()
            .filter(|l| !taken.contains(l))
            .collect();
        if body.is_empty() {
            continue;
        }
        let text = |l: &(usize, usize)| &page[l.0..l.1];
        let heading = body
            .iter()
            .position(|l| section_heading(text(l)).is_some())
            .map(|k| {
                (
                    k,
                    section_heading(text(&body[k])).unwrap_or(FurnitureKind::Contents),
                )
            });
        let entries: Vec<bool> = body.iter().map(|l| is_entry(text(l))).collect();
        let (from, kind) = match (heading, open) {
            (Some((k, kind)), _) => (k, kind),
            // A continuation page: mostly entries, at least three, no chapter heading before
            // the first, and page references that go on from the previous page's.
            (None, Some(kind)) => {
                let n = entries.iter().filter(|e| **e).count();
                let first = entries.iter().position(|e| *e).unwrap_or(0);
                let chapter_first = body[..first].iter().any(|l| text(l).starts_with("# "));
                let refs_go_on = body
                    .get(first)
                    .and_then(|l| entry_ref(text(l)))
                    .is_none_or(|r| r >= last_ref);
                if n >= 3 && n * 2 >= body.len() && !chapter_first && refs_go_on {
                    (0, kind)
                } else {
                    open = None;
                    continue;
                }
            }
            (None, None) => continue,
        };
        let after = &entries[from..];
        let n = after.iter().filter(|e| **e).count();
        // A heading followed by fewer than three entries is a heading, not a list.
        if n < 3 {
            open = None;
            continue;
        }
        let last = from + after.iter().rposition(|e| *e).unwrap_or(0);
        out[i].push((body[from].0, body[last].1, kind));
        out[i].sort_by_key(|m| m.0);
        // The list runs on to the next page when it fills this one to its end.
        let tail_entries = entries[last + 1..].len() <= 2;
        open = tail_entries.then_some(kind);
        last_ref = entry_ref(text(&body[last])).unwrap_or(0);
    }
    out
}

/// Byte ranges of the non-blank lines of `page`, each with its newline.
fn line_spans(page: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut at = 0;
    for line in page.split_inclusive('\n') {
        if !line.trim().is_empty() {
            spans.push((at, at + line.len()));
        }
        at += line.len();
    }
    spans
}

/// A line without its Markdown emphasis and heading marks.
fn plain_line(line: &str) -> String {
    line.trim()
        .trim_start_matches('#')
        .replace("**", "")
        .replace('*', "")
        .trim()
        .to_owned()
}

fn is_roman(word: &str) -> bool {
    !word.is_empty()
        && word.len() <= 7
        && (word.chars().all(|c| "ivxlc".contains(c)) || word.chars().all(|c| "IVXLC".contains(c)))
}

/// A line that is only a page number: "12", "iv", "- 7 -", "Page 3", "Page 3 of 48",
/// "3 / 48", "第 3 页".
fn is_page_number(line: &str) -> bool {
    let t = plain_line(line);
    let t = t.trim_matches(|c: char| c == '-' || c == '–' || c == '—' || c.is_whitespace());
    let words: Vec<&str> = t
        .split(|c: char| c.is_whitespace() || c == '/')
        .filter(|w| !w.is_empty())
        .collect();
    let number = |w: &str| w.len() <= 5 && w.chars().all(|c| c.is_ascii_digit()) || is_roman(w);
    match words.as_slice() {
        [n] => {
            number(n)
                || t.strip_prefix('第')
                    .and_then(|r| r.strip_suffix('页'))
                    .is_some_and(|n| number(n.trim()))
        }
        [p, n] => p.eq_ignore_ascii_case("page") && number(n) || number(p) && number(n),
        [p, n, of, m] => {
            p.eq_ignore_ascii_case("page")
                && number(n)
                && of.eq_ignore_ascii_case("of")
                && number(m)
        }
        [n, of, m] => number(n) && of.eq_ignore_ascii_case("of") && number(m),
        _ => false,
    }
}

/// What makes a running line recognisable from page to page: the line without spaces,
/// emphasis, digits and roman numerals.
fn running_key(line: &str) -> String {
    let mut k = String::new();
    for word in plain_line(line).split_whitespace() {
        if is_roman(word) {
            k.push('#');
            continue;
        }
        let mut digits = false;
        for c in word.chars() {
            if c.is_ascii_digit() {
                if !digits {
                    k.push('#');
                }
                digits = true;
            } else {
                digits = false;
                k.push(c);
            }
        }
    }
    k
}

/// Running headers, footers and page numbers of each page (see [`find_furniture`]).
fn running_lines(
    pages: &[String],
    lines: &[Vec<(usize, usize)>],
) -> Vec<Vec<(usize, usize, FurnitureKind)>> {
    use std::collections::{HashMap, HashSet};
    const EDGE: usize = 3;
    let mut out = vec![Vec::new(); pages.len()];
    let with_text = lines.iter().filter(|l| !l.is_empty()).count();
    if with_text < 4 {
        return out;
    }
    // Table rows and code fences are the document's own structure.
    let eligible = |line: &str| {
        let t = line.trim();
        !t.is_empty()
            && !t.starts_with('|')
            && !t.starts_with("```")
            && !t.starts_with("~~~")
            && t.chars().count() <= 120
    };
    // Pages on which each key appears at each edge (top 0, bottom 1), counted once a page.
    let mut counts: [HashMap<String, usize>; 2] = [HashMap::new(), HashMap::new()];
    for (p, ls) in pages.iter().zip(lines) {
        let top = ls.iter().take(EDGE);
        let bottom = ls.iter().rev().take(EDGE);
        for (edge, zone) in [top.collect::<Vec<_>>(), bottom.collect()]
            .into_iter()
            .enumerate()
        {
            let keys: HashSet<String> = zone
                .into_iter()
                .map(|l| &p[l.0..l.1])
                .filter(|l| eligible(l))
                .map(running_key)
                .filter(|k| !k.is_empty())
                .collect();
            for k in keys {
                *counts[edge].entry(k).or_default() += 1;
            }
        }
    }
    let needed = (with_text / 5).max(3);
    let running = |edge: usize, line: &str| {
        let k = running_key(line);
        let n = counts[edge].get(&k).copied().unwrap_or(0);
        // Bare page numbers at a page's edge on three pages or more: front matter numbered
        // i, ii, iii … is a few pages of a long book.
        if is_page_number(line) && n >= 3 {
            return eligible(line);
        }
        if !k.chars().any(|c| c.is_alphanumeric()) {
            return false;
        }
        // A heading recurring at a page edge is more often the document's own structure.
        let needed = if line.trim_start().starts_with('#') {
            needed.max(with_text / 2)
        } else {
            needed
        };
        eligible(line) && !k.is_empty() && n >= needed
    };
    for (i, (p, ls)) in pages.iter().zip(lines).enumerate() {
        let mut marked = 0;
        for l in ls.iter().take(EDGE) {
            let line = &p[l.0..l.1];
            if !running(0, line) {
                break;
            }
            let kind = if is_page_number(line) {
                FurnitureKind::PageNumber
            } else {
                FurnitureKind::RunningHeader
            };
            out[i].push((l.0, l.1, kind));
            marked += 1;
        }
        let mut bottom = Vec::new();
        for l in ls.iter().skip(marked).rev().take(EDGE) {
            let line = &p[l.0..l.1];
            if !running(1, line) {
                break;
            }
            let kind = if is_page_number(line) {
                FurnitureKind::PageNumber
            } else {
                FurnitureKind::RunningFooter
            };
            bottom.push((l.0, l.1, kind));
        }
        bottom.reverse();
        out[i].extend(bottom);
    }
    out
}

/// The kind of list a heading line opens: "Contents", "Table of Contents", "List of
/// Tables", "目录", "目次", "表格清单" … or "Index", "索引".
fn section_heading(line: &str) -> Option<FurnitureKind> {
    let t = plain_line(line);
    if t.chars().count() > 40 {
        return None;
    }
    let lower = t.to_lowercase();
    let lower = lower.trim_end_matches([':', '：']).trim();
    match lower {
        "contents"
        | "table of contents"
        | "brief contents"
        | "contents at a glance"
        | "list of tables"
        | "list of figures"
        | "list of examples"
        | "list of illustrations"
        | "目录"
        | "目錄"
        | "目次"
        | "表格清单"
        | "插图清单"
        | "图片清单"
        | "表目录"
        | "图目录"
        | "table des matières"
        | "inhaltsverzeichnis"
        | "índice"
        | "sommaire" => Some(FurnitureKind::Contents),
        "index" | "general index" | "subject index" | "索引" | "index des matières" => {
            Some(FurnitureKind::Index)
        }
        _ => None,
    }
}

/// The page number an entry ends with (arabic; roman front-matter numbers count as 0).
fn entry_ref(line: &str) -> Option<u32> {
    let t = plain_line(line);
    let last = t
        .rsplit(|c: char| c.is_whitespace() || c == '.' || c == ',')
        .next()?;
    if is_roman(last) {
        return Some(0);
    }
    last.parse().ok()
}

/// A contents or index entry: a line holding a page reference after dot leaders
/// ("1.1.3 root 账户 . . . . . 2", "Annuities ........ 13, 29"), or an index entry's
/// "term, 12, 45–47" tail.
fn is_entry(line: &str) -> bool {
    let t = plain_line(line);
    if t.starts_with('|') {
        return false;
    }
    let chars: Vec<char> = t.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        // A leader: four or more dots (spaced or not), or ellipses, then a page number.
        let mut j = i;
        let mut dots = 0;
        while j < chars.len() && matches!(chars[j], '.' | '…' | '·' | ' ') {
            if chars[j] != ' ' {
                dots += if chars[j] == '…' { 3 } else { 1 };
            }
            j += 1;
        }
        if dots >= 4 {
            let digits = chars[j..]
                .iter()
                .take_while(|c| c.is_ascii_digit() || "ivxlc".contains(**c))
                .count();
            if (1..=5).contains(&digits) {
                return true;
            }
        }
        i = j.max(i + 1);
    }
    false
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
    // A number run into a word is part of a name, not a section number: "340B Drug Pricing
    // Program", "3M COMPANY" (Chinese and Japanese titles may follow without a space).
    if bold[number_end..]
        .chars()
        .next()
        .is_some_and(|c| c.is_alphanumeric() && !is_cjk(c))
    {
        return None;
    }
    let depth = number.split('.').filter(|p| !p.is_empty()).count();
    if depth == 0 || depth > 5 || number.split('.').any(|p| p.len() > 3) {
        return None;
    }
    // A chapter numbered past 99 is a house number or an amount ("929 Long Bridge Drive").
    if depth == 1 && number.len() > 2 {
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
        // "**1.1.12 sudo** 配置": the Chinese half of a mixed title falls outside the bold
        // run. A short CJK remainder with no sentence punctuation is the title's, not body.
        let continues_title = after.chars().next().is_some_and(|c| is_cjk(c) || c == '（')
            && after.chars().count() <= 20
            && !after.contains([
                '。', '.', ':', '：', ',', '，', ';', '；', '!', '?', '！', '？',
            ]);
        if continues_title {
            (
                format!(
                    "{} {}",
                    bold_title.replace("**", ""),
                    after.replace("**", "")
                ),
                String::new(),
            )
        } else {
            (bold_title.replace("**", ""), after.to_owned())
        }
    };
    if !title
        .chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || is_cjk(c))
    {
        return None;
    }
    // Addresses and figures are no titles ("1 Meta Way, Menlo Park, California 94025").
    let numbered = format!("{number} {title}");
    if crate::pdf_structure::is_address(&numbered)
        || !crate::pdf_structure::plausible_heading(&numbered)
    {
        return None;
    }
    let level = (depth + 1).min(6);
    Some((format!("{} {number} {title}", "#".repeat(level)), body))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each marked range: on char boundaries, whole lines, and the text expected.
    fn marked(pages: &[String]) -> Vec<(usize, FurnitureKind, String)> {
        let found = find_furniture(pages);
        let mut out = Vec::new();
        for (i, marks) in found.iter().enumerate() {
            for w in marks.windows(2) {
                assert!(w[0].1 <= w[1].0, "overlap on page {}", i + 1);
            }
            for &(a, b, kind) in marks {
                let p = &pages[i];
                assert!(p.is_char_boundary(a) && p.is_char_boundary(b) && a < b);
                assert!(a == 0 || p.as_bytes()[a - 1] == b'\n');
                assert!(b == p.len() || p.as_bytes()[b - 1] == b'\n');
                out.push((i + 1, kind, p[a..b].to_owned()));
            }
        }
        out
    }

    const BODY: [&str; 6] = [
        "Zero.",
        "The shell prompt.",
        "安装系统之前先备份。",
        "Use sudo with care.",
        "Files live in /usr.",
        "Links point elsewhere.",
    ];

    #[test]
    fn running_headers_and_page_numbers_are_marked_not_removed() {
        let mut pages: Vec<String> = (1..=5)
            .map(|n| format!("Debian 参考手册 {n} / 223\n\n{}\n\n{n}\n", BODY[n]))
            .collect();
        pages.push(String::new());
        let got = marked(&pages);
        assert_eq!(got.len(), 10, "{got:?}");
        assert_eq!(
            got[0],
            (
                1,
                FurnitureKind::RunningHeader,
                "Debian 参考手册 1 / 223\n".to_owned()
            )
        );
        assert_eq!(
            got[1],
            (1, FurnitureKind::PageNumber, "5\n".replace('5', "1"))
        );
        assert!(got.iter().all(|g| !BODY.iter().any(|b| g.2.contains(b))));
        // Roman page numbers of front matter are page numbers too.
        let front: Vec<String> = ["i", "ii", "iii", "iv"]
            .iter()
            .zip(BODY)
            .map(|(n, body)| format!("{body}\n\n{n}\n"))
            .collect();
        let got = marked(&front);
        assert_eq!(got.len(), 4, "{got:?}");
        assert!(got.iter().all(|g| g.1 == FurnitureKind::PageNumber));
        // Three pages are too few to tell a running header from content.
        let few: Vec<String> = (1..=3).map(|n| format!("Title\n\nBody {n}\n")).collect();
        assert!(marked(&few).is_empty());
        // A data table repeating its header row on every page is content.
        let table: Vec<String> = (1..=6)
            .map(|n| format!("| State | Arrests |\n|---|---|\n| S{n} | {n}0 |\n"))
            .collect();
        assert!(marked(&table).is_empty(), "{:?}", marked(&table));
    }

    #[test]
    fn contents_and_index_sections_are_marked_and_body_lists_are_not() {
        let toc = "Preface text.\n\n# Contents\n\n## 1 GNU/Linux\n\n1.1 控制台基础 . . . . . . . . 1\n\n1.1.1 shell 提示符 . . . . . . . 1\n\n1.1.2 GUI 下的 shell 提示符 . . . . . 2\n";
        let toc2 = "1.1.3 root 账户 . . . . . . . 2\n\n1.2 类 Unix 文件系统 . . . . . . 6\n\n1.2.1 Unix 文件基础 . . . . . . 6\n";
        let body = "# Chapter 1\n\nThe shell prompt comes first.\n\nStep one ........ 1\n\nStep two ........ 2\n\nStep three ........ 3\n";
        let pages = vec![toc.to_owned(), toc2.to_owned(), body.to_owned()];
        let got = marked(&pages);
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0].1, FurnitureKind::Contents);
        assert!(got[0].2.starts_with("# Contents\n") && got[0].2.ends_with("提示符 . . . . . 2\n"));
        assert_eq!(got[1], (2, FurnitureKind::Contents, toc2.to_owned()));
        // A worksheet of dot leaders with no contents heading before it is body text.
        assert!(marked(&[body.to_owned()]).is_empty());
        // A heading "Contents" followed by prose is not a list.
        let prose = "## Contents\n\nThis box holds tools and a manual of 12 pages.\n";
        assert!(marked(&[prose.to_owned()]).is_empty());
        let index = "**Index**\n\n**A**\n\nAddress change ............31 Adjustments ........15\n\nAnnuities ............... 13, 29\n\nAmended return .............31\n";
        let got = marked(&[index.to_owned()]);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].1, FurnitureKind::Index);
        assert_eq!(got[0].2, index);
    }

    #[test]
    fn arabic_in_visual_order_is_put_in_reading_order() {
        // pdf_oxide's Markdown for multi-script-hello-world.pdf ("مرحبا بالعالم").
        let pages = vec!["Arabic: \u{2067}ملاعلاب ابحرم\u{2069}\n".to_owned()];
        assert!(rtl_in_visual_order(&pages));
        assert_eq!(
            rtl_to_logical(&pages[0]),
            "Arabic: \u{2067}مرحبا بالعالم\u{2069}\n"
        );
        // Text already in reading order is left alone; numbers keep their digits' order.
        let logical = vec!["# السلام عليكم\n\nالمكتبة في المدينة 2024\n".to_owned()];
        assert!(!rtl_in_visual_order(&logical));
        assert_eq!(reverse_run("4202 ةنيدملا"), "المدينة 4202");
        assert_eq!(rtl_to_logical("- ملاعلاب (2)\n"), "- (2) بالعالم\n");
        assert!(!rtl_in_visual_order(&["שלום עולם".to_owned()]));
        assert!(rtl_in_visual_order(&["םלוע םולש".to_owned()]));
    }

    #[test]
    fn dropped_brackets_come_back_from_the_plain_text() {
        assert_eq!(
            restore_from_plain(
                "## Osamu Aoki (青木修\n\nDebian 参考手册\n",
                "Osamu Aoki (青木修)\nDebian 参考手册"
            ),
            "## Osamu Aoki (青木修)\n\nDebian 参考手册\n"
        );
        assert_eq!(
            restore_from_plain(
                "Debian 参考手册（版本 2.100 (2023-02-04 11:59:01 UTC) 旨在",
                "Debian 参考手册（版本2.100）(2023-02-04 11:59:01 UTC)旨在"
            ),
            "Debian 参考手册（版本 2.100） (2023-02-04 11:59:01 UTC) 旨在"
        );
        // Text the plain text does not have, or has elsewhere, gets nothing.
        assert_eq!(restore_from_plain("a (b c d e", "x y z"), "a (b c d e");
        // A list whose every line lost its brackets: the thread is picked up past them.
        assert_eq!(
            restore_from_plain(
                "x y z\n- 第 1.2 节基本概念\n- 第 1.3 节生存方式\n",
                "q\n• 第 1.2 节(基本概念)\n• 第 1.3 节(生存方式)"
            ),
            "x y z\n- 第 1.2 节(基本概念)\n- 第 1.3 节(生存方式)\n"
        );
        // An opening quote lost before bold text on the next line stays with that text.
        assert_eq!(
            restore_from_plain(
                "Manual 26 / 223\n\n**$HOME”** 变量的值\n",
                "Manual 26 / 223\n”$HOME” 变量的值"
            ),
            "Manual 26 / 223\n\n**”$HOME”** 变量的值\n"
        );
        // Bullets of the plain text are `- ` in the Markdown.
        assert_eq!(
            restore_from_plain(
                "- 维基百科（https://w.org/\n- Debian 手册\n",
                "• 维基百科（https://w.org/）\n• Debian 手册"
            ),
            "- 维基百科（https://w.org/）\n- Debian 手册\n"
        );
        assert_eq!(
            restore_from_plain("**Total** 12 34\n", "Total 12 34"),
            "**Total** 12 34\n"
        );
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
        // The Chinese half of a mixed title, outside the bold run, stays in the title
        // (issue 41 item 17); a sentence after a bold title stays body text.
        assert_eq!(
            clean_page("**1.1.12 sudo** 配置\n"),
            "#### 1.1.12 sudo 配置\n"
        );
        assert_eq!(
            clean_page("**7 GUI** （图形用户界面）系统\n"),
            "## 7 GUI （图形用户界面）系统\n"
        );
        assert_eq!(
            clean_page("**2.1 dpkg** 还有一些特殊的设备文件。\n"),
            "### 2.1 dpkg\n\n还有一些特殊的设备文件。\n"
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

    #[test]
    fn names_and_addresses_in_bold_are_no_numbered_sections() {
        // A number run into a word is a name: no heading, no space put inside it.
        for line in [
            "**340B Drug Pricing Program**\n",
            "**3M COMPANY AND SUBSIDIARIES**\n",
            "**929 Long Bridge Drive Arlington, VA**\n",
            "**83 Tower Road North**\n",
            "**1 Meta Way, Menlo Park, California 94025**\n",
        ] {
            assert_eq!(clean_page(line), line, "{line}");
        }
        assert_eq!(
            clean_page("**3.1启动过程概述**\n"),
            "### 3.1 启动过程概述\n"
        );
        assert_eq!(
            clean_page("**12 Leases** The Company leases offices.\n"),
            "## 12 Leases\n\nThe Company leases offices.\n"
        );
    }
}
