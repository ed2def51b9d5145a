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

pub use child::child_main;
pub use dispatch::{convert, converter};
pub use editorjs::{EditorJsError, editorjs_to_markdown};
pub use ocr::DEFAULT_OCR_LANGUAGES;
pub use types::{
    ConvertError, ConvertOptions, Converted, Converter, DocProperties, Format, Image, Isolation,
    Limits, Ocr, describe_pages, ocr_advice,
};

mod child;
mod delimited;
mod dispatch;
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
