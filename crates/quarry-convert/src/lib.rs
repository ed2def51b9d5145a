//! Document conversion: a file's bytes → Markdown, a page map and extracted images.
//!
//! One [`Converter`] per format; [`convert`] detects the format (name and magic bytes must
//! agree) and dispatches. Nothing here knows about stores, HTTP or terminals: the caller
//! stores images (their URLs are built from [`ConvertOptions::image_url_prefix`] and the
//! image's SHA-256) and maps chunks to pages with [`Converted::page_at`].
//!
//! Every converter honours [`Limits`]: input size, pages, decompressed bytes (zip bombs),
//! rows per sheet or CSV, output size and wall time, so one hostile file cannot exhaust memory
//! or stall a worker. Failures are [`ConvertError`]s whose `Display` is a reason a person
//! understands ("encrypted PDF", "not a DOCX file", "no text layer on pages 3–9").

/// The page map is the domain's (`quarry-core`): documents store exactly what conversion made.
pub use quarry_core::{Furniture, FurnitureKind, PageSpan, page_at};

pub use editorjs::{EditorJsError, editorjs_to_markdown};
pub use isolate::{Isolation, child_main};
pub use types::{
    ConvertError, ConvertOptions, Converted, Converter, DEFAULT_OCR_LANGUAGES, DocProperties,
    Format, Image, Limits, Ocr, describe_pages, ocr_advice,
};

use types::catch_panic;

mod delimited;
mod docx;
mod editorjs;
mod html;
mod isolate;
mod ocr;
mod pdf;
mod pdf_columns;
mod pdf_grid;
mod pdf_structure;
mod pptx;
mod props;
mod sheet;
mod text;
mod types;
mod util;
mod xml;
mod zipc;
/// The converter for `format`.
///
/// Converters called directly honour every limit but the wall-time one cooperatively (they
/// check the deadline between pages and rows); [`convert`] also enforces it from outside.
pub fn converter(format: Format) -> Box<dyn Converter> {
    match format {
        Format::Pdf => Box::new(pdf::PdfConverter),
        Format::Docx => Box::new(docx::DocxConverter),
        Format::Xlsx | Format::Xls | Format::Ods => Box::new(sheet::SheetConverter(format)),
        Format::Pptx => Box::new(pptx::PptxConverter),
        Format::Csv | Format::Tsv => Box::new(delimited::DelimitedConverter(format)),
        Format::Html => Box::new(html::HtmlConverter),
        Format::Txt | Format::Md | Format::Json => Box::new(text::PlainText(format)),
    }
}

/// Converts a file: the format comes from `file_name`'s extension and must match the bytes.
pub fn convert(
    file_name: &str,
    bytes: &[u8],
    opts: &ConvertOptions,
) -> Result<Converted, ConvertError> {
    let format = Format::from_file_name(file_name).ok_or_else(|| {
        ConvertError::Unsupported(
            file_name
                .rsplit_once('.')
                .map_or_else(|| file_name.to_owned(), |(_, e)| format!(".{e}")),
        )
    })?;
    if bytes.len() as u64 > opts.limits.max_bytes {
        return Err(ConvertError::TooLarge {
            limit: opts.limits.max_bytes,
        });
    }
    if bytes.is_empty() {
        return Err(ConvertError::Empty);
    }
    let mut converted = match &opts.isolation {
        // Plain text is decoded, never parsed: nothing there can recurse or balloon.
        Isolation::Child { program, args, env } if !matches!(format, Format::Txt | Format::Md) => {
            isolate::convert_in_child(program, args, env, format, file_name, bytes, opts)?
        }
        _ => run_with_timeout(format, bytes, opts)?,
    };
    util::enforce_output_limit(&mut converted, opts.limits.max_output_bytes);
    Ok(converted)
}

/// Runs the converter on its own thread (a large stack: hostile PDFs nest deeply) and waits
/// at most `limits.timeout`. On timeout the thread is abandoned: it keeps running until the
/// converter's own cooperative deadline checks (between pages, rows, parts) make it give up,
/// and its result is dropped. Panics in third-party parsers are caught and reported as a
/// corrupt file.
fn run_with_timeout(
    format: Format,
    bytes: &[u8],
    opts: &ConvertOptions,
) -> Result<Converted, ConvertError> {
    let timeout = opts.limits.timeout;
    let owned = bytes.to_vec();
    let opts_owned = opts.clone();
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let spawned = std::thread::Builder::new()
        .name(format!("quarry-convert-{}", format.as_str()))
        .stack_size(64 * 1024 * 1024)
        .spawn(move || {
            let result = catch_panic(format, || converter(format).convert(&owned, &opts_owned));
            let _ = tx.send(result);
        });
    if spawned.is_err() {
        // No thread to spare: convert inline, relying on the cooperative deadline checks.
        return catch_panic(format, || converter(format).convert(bytes, opts));
    }
    match rx.recv_timeout(timeout) {
        Ok(result) => result,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Err(ConvertError::Timeout(timeout)),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Err(ConvertError::Corrupt {
            format,
            detail: "the converter stopped unexpectedly".to_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_ranges_read_like_a_person_writes_them() {
        assert_eq!(describe_pages(&[3]), "page 3");
        assert_eq!(describe_pages(&[3, 4, 5, 6, 7, 8, 9]), "pages 3–9");
        assert_eq!(describe_pages(&[1, 3, 4]), "pages 1, 3–4");
    }
}
