//! Real documents written by people (see /work/shared/corpora/documents/README.md), read from
//! the directory in `QUARRY_TEST_DOCS`. Each test prints "skipped: QUARRY_TEST_DOCS not set"
//! and returns when the variable is unset. Assertions check content: phrases, page numbers,
//! table cells, sheet names, failure reasons.

use std::path::PathBuf;

use quarry_convert::{ConvertError, ConvertOptions, Converted, Format, Ocr, convert};

fn docs() -> Option<PathBuf> {
    match std::env::var_os("QUARRY_TEST_DOCS") {
        Some(d) if !d.is_empty() => Some(PathBuf::from(d)),
        _ => {
            println!("skipped: QUARRY_TEST_DOCS not set");
            None
        }
    }
}

fn opts() -> ConvertOptions {
    ConvertOptions {
        ocr: Ocr::Off,
        ..Default::default()
    }
}

fn read(dir: &std::path::Path, rel: &str) -> Vec<u8> {
    std::fs::read(dir.join(rel))
        .unwrap_or_else(|e| panic!("{rel}: {e} (run the corpus fetch script)"))
}

fn conv(dir: &std::path::Path, rel: &str) -> Result<Converted, ConvertError> {
    convert(rel, &read(dir, rel), &opts())
}

fn ok(dir: &std::path::Path, rel: &str) -> Converted {
    conv(dir, rel).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// Page holding the first occurrence of `needle`.
fn page_of(c: &Converted, needle: &str) -> Option<u32> {
    c.markdown.find(needle).and_then(|at| c.page_at(at))
}

/// Whitespace-insensitive containment (PDF text may break lines anywhere).
fn contains_loose(hay: &str, needle: &str) -> bool {
    let squash = |s: &str| s.chars().filter(|c| !c.is_whitespace()).collect::<String>();
    squash(hay).contains(&squash(needle))
}

#[test]
fn chinese_manual_pdf_text_and_page_map() {
    let Some(dir) = docs() else { return };
    let c = ok(&dir, "pdf/zh-debian-reference.zh-cn.pdf");
    assert_eq!(c.pages.len(), 251);
    assert_eq!(c.title.as_deref(), Some("Debian 参考手册"));
    // Phrases located with `pdftotext`, on pages 100 and 200 (and 20, a list of tables).
    assert_eq!(page_of(&c, "粗略地了解"), Some(100), "page 100 phrase");
    assert_eq!(
        page_of(&c, "源目录上的反斜杠"),
        Some(200),
        "page 200 phrase"
    );
    assert!(contains_loose(
        &c.markdown,
        "作为系统管理员，粗略地了解 Debian 系统的启动和配置方式是明智的"
    ));
    assert!(c.markdown.contains("系统初始化"));
    assert!(c.markdown.contains("rsync -aHAXSv"));
    // Page spans are contiguous and in order.
    for (i, w) in c.pages.windows(2).enumerate() {
        assert_eq!(w[0].byte_end, w[1].byte_start, "gap after page {}", i + 1);
        assert_eq!(w[0].page + 1, w[1].page);
    }
}

#[test]
fn census_table_pdf_keeps_cells() {
    let Some(dir) = docs() else { return };
    let c = ok(&dir, "pdf/en-census-table324-arrests.pdf");
    let md = &c.markdown;
    assert!(md.contains("Arrests by Sex and Age"));
    for cell in [
        "11,062.6",
        "1,540.0",
        "9,522.6",
        "Robbery",
        "102.1",
        "Aggravated assault",
        "338.4",
    ] {
        assert!(md.contains(cell), "cell {cell} missing");
    }
    assert_eq!(c.pages.len(), 1);
}

#[test]
fn english_pdfs_convert_with_pages() {
    let Some(dir) = docs() else { return };
    let c = ok(&dir, "pdf/en-fhs-3.0.pdf");
    assert!(c.pages.len() >= 40);
    assert!(c.markdown.contains("Filesystem Hierarchy Standard"));
    assert!(c.markdown.contains("/usr/local"));
    let c = ok(&dir, "pdf/en-tracemonkey-pldi09.pdf");
    assert_eq!(c.pages.len(), 14);
    assert!(contains_loose(&c.markdown, "Trace-based Just-in-Time"));
    assert!(contains_loose(
        &c.markdown,
        "Dynamic languages such as JavaScript are more difficult to com-pile than statically typed ones"
    ));
    let c = ok(&dir, "pdf/en-irs-i1040nr-2007.pdf");
    assert!(c.markdown.contains("1040NR"));
}

#[test]
fn multi_script_and_japanese_pdfs() {
    let Some(dir) = docs() else { return };
    let c = ok(&dir, "pdf/multi-script-hello-world.pdf");
    for s in ["Hello World", "Привет", "สวัสดี"] {
        assert!(c.markdown.contains(s), "{s} missing:\n{}", c.markdown);
    }
    // RC4 owner-password file with unembedded CJK fonts: opens without a password.
    let c = ok(&dir, "pdf/ja-kampo-gazette-vertical.pdf");
    assert!(
        c.markdown
            .chars()
            .any(|ch| ('\u{4e00}'..='\u{9fff}').contains(&ch)),
        "no kanji"
    );
}

#[test]
fn owner_password_pdfs_open() {
    let Some(dir) = docs() else { return };
    let c = ok(&dir, "pdf/en-dmca-summary-1998.pdf");
    assert!(c.markdown.contains("Digital Millennium Copyright Act"));
    assert_eq!(c.pages.len(), 18);
    let c = ok(&dir, "pdf/encrypted-ownerpw-aes-xfa-dd0293.pdf");
    assert_eq!(c.pages.len(), 4);
}

#[test]
fn user_password_pdf_is_encrypted() {
    let Some(dir) = docs() else { return };
    let err = conv(&dir, "pdf/encrypted-userpw-openpassword.pdf").unwrap_err();
    assert_eq!(err, ConvertError::Encrypted(Format::Pdf));
    assert_eq!(err.to_string(), "encrypted PDF");
}

#[test]
fn corrupt_pdf_is_refused() {
    let Some(dir) = docs() else { return };
    let err = conv(&dir, "pdf/broken-invalid-xref.pdf").unwrap_err();
    assert!(
        matches!(
            err,
            ConvertError::Corrupt {
                format: Format::Pdf,
                ..
            } | ConvertError::WrongFormat { .. }
        ),
        "{err:?}"
    );
}

#[test]
fn scans_have_no_text() {
    let Some(dir) = docs() else { return };
    let err = conv(&dir, "pdf/scanned-grumman-service-bulletin-1974.pdf").unwrap_err();
    assert_eq!(err, ConvertError::NoText { pages: vec![1, 2] });
    assert_eq!(err.to_string(), "no text layer on pages 1–2");
    for f in [
        "pdf/scanned-huckfinn-c03-29.pdf",
        "pdf/scanned-linn-brochure.pdf",
    ] {
        assert_eq!(
            conv(&dir, f).unwrap_err(),
            ConvertError::NoText { pages: vec![1] },
            "{f}"
        );
    }
    // A scan with an invisible OCR layer has text.
    let c = ok(&dir, "pdf/scanned-ocr-layer-siege-of-vicksburg.pdf");
    assert_eq!(c.pages.len(), 6);
    assert!(c.markdown.to_lowercase().contains("vicksburg"));
}

#[test]
fn scans_are_ocred_when_tesseract_is_installed() {
    let Some(dir) = docs() else { return };
    let has_tesseract = std::process::Command::new("tesseract")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_tesseract {
        println!("skipped: tesseract not installed");
        return;
    }
    let o = ConvertOptions::default();
    let c = convert(
        "scan.pdf",
        &read(&dir, "pdf/scanned-huckfinn-c03-29.pdf"),
        &o,
    )
    .expect("OCR");
    assert_eq!(c.pages_ocred, vec![1]);
    assert!(c.pages_without_text.is_empty());
    assert!(c.markdown.split_whitespace().count() > 50, "{}", c.markdown);
}

#[test]
fn docx_real_documents() {
    let Some(dir) = docs() else { return };
    let c = ok(&dir, "docx/officer-example-headings-table.docx");
    assert!(c.markdown.contains("# Title 1"), "{}", c.markdown);
    assert!(c.markdown.contains("## Title 2") || c.markdown.contains("# Title 2"));
    assert!(c.markdown.contains("| --- |"), "table");
    let c = ok(&dir, "docx/mammoth-tables.docx");
    assert!(c.markdown.contains("Above"));
    assert!(c.markdown.contains("| --- |"));
    let c = ok(&dir, "docx/mammoth-footnotes.docx");
    assert!(
        c.markdown.contains("[^1]:")
            || c.markdown.contains("[^0]:")
            || c.markdown.contains("[^2]:"),
        "{}",
        c.markdown
    );
    let c = ok(&dir, "docx/python-docx-having-images.docx");
    assert!(c.images.len() >= 3, "{} images", c.images.len());
    for img in &c.images {
        assert!(c.markdown.contains(&img.file_name));
        assert!(img.mime.starts_with("image/"));
    }
    let c = ok(&dir, "docx/sample-word2007-images.docx");
    assert!(!c.images.is_empty());
    let c = ok(&dir, "docx/python-docx-comments-rich-para.docx");
    assert!(
        c.markdown.contains("[^c"),
        "comments as footnotes: {}",
        c.markdown
    );
    let c = ok(&dir, "docx/id-filosofi-logo.docx");
    assert!(c.markdown.to_lowercase().contains("filosofi"));
}

#[test]
fn xlsx_real_workbooks() {
    let Some(dir) = docs() else { return };
    let c = ok(&dir, "xlsx/readxl-deaths-messy-layout.xlsx");
    assert!(c.markdown.contains("## arts"));
    assert!(c.markdown.contains("## other"));
    assert!(c.markdown.contains("David Bowie"));
    assert!(c.markdown.contains("1947-01-08"), "dates as ISO dates");
    let c = ok(&dir, "xlsx/opendominion-simulator-14-sheets.xlsx");
    for s in ["## Overview", "## Population", "## Military", "## Races"] {
        assert!(c.markdown.contains(s), "{s}");
    }
    let c = ok(&dir, "xlsx/ne-1033-program-data.xlsx");
    assert!(c.markdown.lines().filter(|l| l.starts_with('|')).count() > 900);
    ok(&dir, "xlsx/workload-headcount-charts.xlsx");
    ok(&dir, "xlsx/openxlsx-loadExample-pivot.xlsx");
}

#[test]
fn password_protected_xlsx_is_encrypted() {
    let Some(dir) = docs() else { return };
    let err = conv(&dir, "xlsx/encrypted-password-open-sesame.xlsx").unwrap_err();
    assert_eq!(err, ConvertError::Encrypted(Format::Xlsx));
    assert_eq!(err.to_string(), "encrypted XLSX");
}

#[test]
fn pptx_real_decks() {
    let Some(dir) = docs() else { return };
    let c = ok(&dir, "pptx/ja-pptx2json-test.pptx");
    assert_eq!(c.pages.len(), 3);
    assert!(c.markdown.starts_with("## Slide 1"));
    assert!(
        c.markdown
            .chars()
            .any(|ch| ('\u{3040}'..='\u{30ff}').contains(&ch)),
        "no kana"
    );
    assert!(!c.images.is_empty());
    let c = ok(&dir, "pptx/sample-powerpoint-stcloud.pptx");
    assert_eq!(c.pages.len(), 2);
    let c = ok(&dir, "pptx/python-pptx-shapes-chart-table.pptx");
    assert!(c.markdown.contains("| --- |"), "table: {}", c.markdown);
    let c = ok(&dir, "pptx/python-pptx-populated-placeholders.pptx");
    assert_eq!(c.pages.len(), 9);
    for (i, p) in c.pages.iter().enumerate() {
        assert_eq!(p.page, i as u32 + 1);
        assert!(c.markdown[p.byte_start..p.byte_end].starts_with(&format!("## Slide {}", i + 1)));
    }
}

#[test]
fn csv_real_files() {
    let Some(dir) = docs() else { return };
    let c = ok(&dir, "csv/acs2012-population-ne.csv");
    assert!(
        c.markdown.contains("Adams County, NE"),
        "quoted comma kept in one cell"
    );
    let c = ok(&dir, "csv/ks-1033-program-data.csv");
    assert!(c.markdown.lines().filter(|l| l.starts_with('|')).count() > 1500);
    let c = ok(&dir, "csv/latin1-encoded.csv");
    assert!(
        c.markdown.contains("| 4 | 5 | ©"),
        "Latin-1 0xA9 is ©: {}",
        c.markdown
    );
    let c = ok(&dir, "csv/fy10-va-edu-recipients-title-rows.csv");
    assert!(
        c.markdown
            .lines()
            .next()
            .is_some_and(|l| !l.starts_with('|')),
        "title row as text"
    );
    let c = ok(&dir, "csv/fy09-va-edu-recipients-by-state.csv");
    assert!(c.markdown.contains("| --- |"));
}

#[test]
fn html_real_pages() {
    let Some(dir) = docs() else { return };
    let c = ok(&dir, "html/git-gittutorial.html");
    let fences = c.markdown.matches("\n```").count() / 2;
    assert!(fences >= 40, "{fences} code blocks");
    assert!(c.markdown.contains("git init"));
    assert!(
        c.title
            .as_deref()
            .is_some_and(|t| t.contains("gittutorial"))
    );
    let c = ok(&dir, "html/zh-debian-reference-ch01.html");
    assert!(
        c.markdown.contains("GNU/Linux 教程"),
        "{}",
        &c.markdown[..500.min(c.markdown.len())]
    );
    assert!(c.markdown.matches("| --- |").count() >= 20);
    let c = ok(&dir, "html/debian-policy-ch-controlfields.html");
    assert!(c.markdown.contains("Source"));
    let c = ok(&dir, "html/firefox-developer-edition.html");
    assert!(c.markdown.contains("Firefox"));
    let c = ok(&dir, "html/fhs-3.0.html");
    assert!(c.markdown.contains("/usr/local"));
}
