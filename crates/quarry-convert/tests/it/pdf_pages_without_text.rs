//! A page without a text layer is reported once: in `pages_without_text`, which the
//! knowledge-base API stores and the web UI shows beside the document, not also as a warning
//! (the UI showed "No text on page 4 · no text layer on page 4").

use quarry_convert::{ConvertOptions, Ocr, convert};

#[test]
fn a_page_without_text_is_reported_once() {
    let opts = ConvertOptions {
        ocr: Ocr::Off,
        ..Default::default()
    };
    let c = convert("report.pdf", &crate::common::report_pdf(), &opts).expect("converts");
    assert_eq!(c.pages_without_text, vec![4]);
    assert!(
        !c.warnings.iter().any(|w| w.contains("text layer")),
        "the missing text layer is also a warning: {:?}",
        c.warnings
    );
}
