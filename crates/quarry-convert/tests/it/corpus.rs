//! Real documents written by people (see /work/shared/corpora/documents/README.md), read from
//! the directory in `QUARRY_TEST_DOCS`. Each test prints "skipped: QUARRY_TEST_DOCS not set"
//! and returns when the variable is unset. Assertions check content: phrases, page numbers,
//! table cells, sheet names, failure reasons.

use quarry_convert::{
    ConvertError, ConvertOptions, Converted, Format, FurnitureKind, Ocr, convert,
};

use crate::common::docs;

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

/// A table's row keeps its label with its figures (one Markdown row), where pdf_oxide's
/// reading order put the labels and the figures in different places.
#[test]
fn pdf_table_rows_keep_label_and_figures_together() {
    let Some(dir) = docs() else { return };
    let row = |md: &str, cells: &[&str]| -> bool {
        md.lines().any(|l| {
            let got: Vec<&str> = l
                .trim()
                .trim_matches('|')
                .split('|')
                .map(str::trim)
                .collect();
            got.len() >= cells.len() && got[..cells.len()] == *cells
        })
    };
    let census = ok(&dir, "pdf/en-census-table324-arrests.pdf").markdown;
    // Table 324 (figures set apart from dot-leadered labels), a label wrapped over two
    // lines, and Table 325 below it (labels and figures in one run).
    for cells in [
        &[
            "Robbery", "102.1", "25.5", "76.6", "90.0", "22.9", "67.1", "12.1", "2.5", "9.5",
        ][..],
        &["Total", "11,062.6", "1,540.0", "9,522.6"],
        &["Murder and nonnegligent manslaughter", "10.0", "0.9", "9.1"],
        &["Larceny-theft", "1,080.1", "258.1", "822.0"],
        &["Robbery", "100,496", "43,039", "55,742", "726", "989"],
    ] {
        assert!(row(&census, cells), "no row {cells:?} in\n{census}");
    }
    // The Debian manual's table 1.13 (text cells beside prose, one description wrapped
    // above and below its row).
    let debian = ok(&dir, "pdf/zh-debian-reference.zh-cn.pdf").markdown;
    for cells in [
        &["mksh", "V:6, I:13", "1459", "是", "Korn shell 的一个版本"][..],
        &[
            "bash-completion",
            "V:31, I:926",
            "1463",
            "N/A",
            "bash shell 编程补全",
        ],
    ] {
        assert!(row(&debian, cells), "no row {cells:?}");
    }
    let sash = debian
        .lines()
        .find(|l| l.starts_with("| sash |"))
        .unwrap_or_default();
    assert!(
        sash.contains("Stand-alone shell") && sash.contains("/bin/sh"),
        "{sash}"
    );
    let donors = ok(&dir, "pdf/es-campaign-donors-table.pdf").markdown;
    assert!(row(
        &donors,
        &["MENA", "JUAN MARTÍN", "27.083.460", "20-27083460-5"]
    ));
    // A paper's columns beside a figure stay columns: its Table 1 is pdf_oxide's own.
    let paper = ok(&dir, "pdf/en-naacl06-shinyama.pdf").markdown;
    assert!(
        row(&paper, &["2005-09-23", "Katrina", "New Orleans"]),
        "{paper}"
    );
    assert!(paper.contains("In Unrestricted Relation Discovery, the discovery process"));
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
    // The Arabic is stored in visual order; it comes out in reading order.
    for s in ["Hello World", "Привет", "สวัสดี", "مرحبا بالعالم"] {
        assert!(c.markdown.contains(s), "{s} missing:\n{}", c.markdown);
    }
    // RC4 owner-password file with unembedded CJK fonts: opens without a password, with a
    // warning that its vertical text may be out of order.
    let c = ok(&dir, "pdf/ja-kampo-gazette-vertical.pdf");
    assert!(
        c.warnings.iter().any(|w| w.contains("vertical writing")),
        "{:?}",
        c.warnings
    );
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
    assert_eq!(
        err,
        ConvertError::NoText {
            pages: vec![1, 2],
            ocr: Ocr::Off
        }
    );
    // It says what would read them (issue 41 item 25).
    assert_eq!(
        err.to_string(),
        "no text layer on pages 1–2: OCR is off (QUARRY_OCR=off or --ocr off); turn it on to read them"
    );
    for f in [
        "pdf/scanned-huckfinn-c03-29.pdf",
        "pdf/scanned-linn-brochure.pdf",
    ] {
        assert_eq!(
            conv(&dir, f).unwrap_err(),
            ConvertError::NoText {
                pages: vec![1],
                ocr: Ocr::Off
            },
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

/// Every furniture range checked (sorted, disjoint, char boundaries, whole lines) and
/// returned with its page and text.
fn furniture(c: &Converted) -> Vec<(FurnitureKind, Option<u32>, &str)> {
    let md = &c.markdown;
    for w in c.furniture.windows(2) {
        assert!(w[0].byte_end <= w[1].byte_start, "{:?}", &w);
    }
    c.furniture
        .iter()
        .map(|f| {
            assert!(f.byte_start < f.byte_end && f.byte_end <= md.len(), "{f:?}");
            assert!(md.is_char_boundary(f.byte_start) && md.is_char_boundary(f.byte_end));
            assert!(f.byte_start == 0 || md.as_bytes()[f.byte_start - 1] == b'\n');
            (
                f.kind,
                c.page_at(f.byte_start),
                &md[f.byte_start..f.byte_end],
            )
        })
        .collect()
}

fn marked_bytes(f: &[(FurnitureKind, Option<u32>, &str)], kind: FurnitureKind) -> usize {
    f.iter().filter(|m| m.0 == kind).map(|m| m.2.len()).sum()
}

fn in_furniture(c: &Converted, needle: &str) -> bool {
    let Some(at) = c.markdown.find(needle) else {
        return false;
    };
    c.furniture
        .iter()
        .any(|f| f.byte_start <= at && at < f.byte_end)
}

#[test]
fn chinese_manual_brackets_survive_and_furniture_is_marked() {
    let Some(dir) = docs() else { return };
    let c = ok(&dir, "pdf/zh-debian-reference.zh-cn.pdf");
    // pdftotext finds 1,674 `)` and 756 `）`; pdf_oxide's Markdown alone kept 1,365 and 644.
    let count = |ch: char| c.markdown.chars().filter(|&x| x == ch).count();
    assert!(count(')') >= 1500, "`)` {}", count(')'));
    assert!(count('）') >= 680, "`）` {}", count('）'));
    assert!(c.markdown.contains("Osamu Aoki (青木修)"));
    assert!(c.markdown.contains("第 1.2 节(基本概念)"));
    let f = furniture(&c);
    // Running headers: one a page from page 23 on ("Debian 参考手册 72 / 223"), kept in the text.
    let headers: Vec<_> = f
        .iter()
        .filter(|m| m.0 == FurnitureKind::RunningHeader && m.2.contains(" / 223"))
        .collect();
    // (On the other pages pdf_oxide glues the header to a body line: "软件包能够让 bash 进行
    // 命令补全 18 / 223"; marking that line would mark body text.)
    assert!(headers.len() >= 195, "{}", headers.len());
    assert!(
        f.iter()
            .any(|m| m.0 == FurnitureKind::RunningHeader && m.2 == "Debian 参考手册 72 / 223\n")
    );
    // The contents (pages 5–17) and the list of tables (18–22), entry by entry.
    assert!(in_furniture(&c, "1.1.1 shell 提示符 . . ."));
    assert!(in_furniture(&c, "1.2 软件包信"));
    let contents_pages: Vec<u32> = f
        .iter()
        .filter(|m| m.0 == FurnitureKind::Contents)
        .filter_map(|m| m.1)
        .collect();
    assert_eq!(contents_pages, (5..=22).collect::<Vec<u32>>());
    // Body text is never furniture.
    for body in [
        "作为系统管理员，粗略地了解",
        "源目录上的反斜杠",
        "rsync -aHAXSv",
        "旨在作为一份 Debian 系统安装后的用户指南",
    ] {
        assert!(!in_furniture(&c, body), "{body} marked");
    }
    assert!(f.iter().all(|m| !m.2.starts_with("```")));
}

#[test]
fn furniture_of_english_pdfs_and_html() {
    let Some(dir) = docs() else { return };
    // FHS: its contents (pages 4–6) are marked; the section that answers "what is /var/tmp
    // for" is not.
    let c = ok(&dir, "pdf/en-fhs-3.0.pdf");
    let f = furniture(&c);
    let contents: Vec<_> = f
        .iter()
        .filter(|m| m.0 == FurnitureKind::Contents)
        .collect();
    assert_eq!(
        contents.iter().filter_map(|m| m.1).collect::<Vec<_>>(),
        [4, 5, 6]
    );
    assert!(contents[0].2.starts_with("## Table of Contents\n"));
    assert!(in_furniture(&c, "5.15. /var/tmp"));
    let at = c
        .markdown
        .find("The /var/tmp directory is made available for programs")
        .expect("section body");
    assert!(
        c.furniture
            .iter()
            .all(|r| at < r.byte_start || at >= r.byte_end)
    );
    assert!(marked_bytes(&f, FurnitureKind::PageNumber) > 0);
    // IRS instructions: the index on the last page of the form's instructions; the tax
    // tables (pages of figures) are not contents.
    let c = ok(&dir, "pdf/en-irs-i1040nr-2007.pdf");
    let f = furniture(&c);
    let index: Vec<_> = f.iter().filter(|m| m.0 == FurnitureKind::Index).collect();
    assert_eq!(index.len(), 1);
    assert_eq!(index[0].1, Some(48));
    assert!(index[0].2.starts_with("**Index**") && index[0].2.contains("Address change"));
    assert_eq!(marked_bytes(&f, FurnitureKind::Contents), 0);
    // A table of figures is body text.
    let c = ok(&dir, "pdf/en-census-table324-arrests.pdf");
    assert!(c.furniture.is_empty(), "{:?}", furniture(&c));
    // HTML: DocBook's tables of contents are kept and marked; the body is not.
    let c = ok(&dir, "html/fhs-3.0.html");
    let f = furniture(&c);
    assert!(f.iter().all(|m| m.0 == FurnitureKind::Contents));
    assert!(in_furniture(&c, "1.1. Purpose](#purpose)"));
    assert!(!in_furniture(&c, "This standard enables"));
}

/// Document properties of real files: OOXML core properties, PDF Info dictionaries (UTF-16BE
/// strings, dates with offsets, an RC4-encrypted file's decrypted strings, a `D:0000…`
/// placeholder date). Prints every file's (`--nocapture`).
#[test]
fn document_properties_of_real_files() {
    let Some(dir) = docs() else { return };
    for sub in ["pdf", "docx", "xlsx", "pptx", "html"] {
        let Ok(entries) = std::fs::read_dir(dir.join(sub)) else {
            continue;
        };
        let mut names: Vec<String> = entries
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        for name in names {
            let rel = format!("{sub}/{name}");
            if let Ok(c) = conv(&dir, &rel) {
                println!("{rel}: {:?}", c.properties);
            }
        }
    }
    let s = |v: &str| Some(v.to_owned());

    let p = ok(&dir, "docx/sample-word2007-images.docx").properties;
    assert_eq!(p.title, s("Word 2007 Sample File"));
    assert_eq!(p.author, s("Dr Malcolm Murray"));
    assert_eq!(p.subject, None, "empty element");
    assert_eq!(p.keywords, vec!["BrowserTester"]);
    assert_eq!(p.created, s("2009-01-28T21:34:00Z"));
    assert_eq!(p.modified, s("2009-01-28T22:32:00Z"));

    let p = ok(&dir, "xlsx/opendominion-simulator-14-sheets.xlsx").properties;
    assert_eq!(p.title, s("Dominion OOP Simulator"));
    assert_eq!(p.subject, s("www.kamikazegames.com"));
    assert_eq!(p.author, None, "empty element");
    assert_eq!(p.created, s("2002-01-18T13:56:58Z"));
    assert_eq!(p.modified, s("2024-06-06T21:02:27Z"));

    let p = ok(&dir, "pptx/sample-powerpoint-stcloud.pptx").properties;
    assert_eq!(p.title, s("Sample PowerPoint File"));
    assert_eq!(p.author, s("James Falkofske"));
    assert_eq!(p.created, s("2009-05-06T22:06:09Z"));

    // UTF-16BE Info strings; `D:20230204115901-00'00'`.
    let p = ok(&dir, "pdf/zh-debian-reference.zh-cn.pdf").properties;
    assert_eq!(p.title, s("Debian 参考手册"));
    assert_eq!(p.author, s("Osamu Aoki (青木 修)"));
    assert_eq!(p.created, s("2023-02-04T11:59:01Z"));
    // `D:20150518143719-06'00'`.
    let p = ok(&dir, "pdf/en-fhs-3.0.pdf").properties;
    assert_eq!(p.created, s("2015-05-18T20:37:19Z"));
    // `D:20220606143933+02'00'`.
    let p = ok(&dir, "pdf/multi-script-hello-world.pdf").properties;
    assert_eq!(p.created, s("2022-06-06T12:39:33Z"));
    // Encrypted strings, decrypted; CreationDate `D:00000101000000Z` means "unset";
    // ModDate `D:20011017180926-03'00'`.
    let p = ok(&dir, "pdf/en-dmca-summary-1998.pdf").properties;
    assert_eq!(p.title, s("The Digital Millennium Copyright Act of 1998"));
    assert_eq!(p.author, s("United States Copyright Office - jmf"));
    assert_eq!(p.subject, s("Copyright Office Summary of the DMCA"));
    assert_eq!(p.keywords.len(), 1, "space-separated keywords stay one");
    assert_eq!(p.created, None);
    assert_eq!(p.modified, s("2001-10-17T21:09:26Z"));
}
