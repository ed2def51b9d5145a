//! Choosing the converter for a file and running it: on a thread with a wall-time limit, or
//! in a child process ([`Isolation::Child`]).

use crate::types::{
    ConvertError, ConvertOptions, Converted, Converter, Format, Isolation, catch_panic,
};
use crate::{delimited, docx, html, isolate, pdf, pptx, sheet, text, util};

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
