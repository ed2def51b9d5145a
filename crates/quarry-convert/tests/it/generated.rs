//! Conversions of files the tests write themselves: one well-formed file per format, and the
//! bad inputs every converter must refuse with the right reason.

use std::time::Duration;

use quarry_convert::{ConvertError, ConvertOptions, Format, Ocr, convert, converter};

fn opts() -> ConvertOptions {
    ConvertOptions {
        ocr: Ocr::Off,
        image_url_prefix: "/img/".to_owned(),
        ..Default::default()
    }
}

#[test]
fn pdf_pages_headings_and_table() {
    let pdf = crate::common::report_pdf();
    let c = convert("report.pdf", &pdf, &opts()).expect("converts");
    let md = &c.markdown;
    println!("{md}");
    assert_eq!(c.title.as_deref(), Some("Annual Survey 2024"));
    assert_eq!(c.pages.len(), 4, "one span per page");
    assert_eq!(c.pages_without_text, vec![4]);
    // Spans are ordered, contiguous and cover the Markdown.
    assert_eq!(c.pages[0].byte_start, 0);
    for w in c.pages.windows(2) {
        assert_eq!(w[0].byte_end, w[1].byte_start);
    }
    assert_eq!(c.pages.last().map(|p| p.byte_end), Some(md.len()));
    let page_of = |needle: &str| md.find(needle).and_then(|at| c.page_at(at));
    assert_eq!(page_of("Annual Survey Results"), Some(1));
    assert_eq!(page_of("Responses by region"), Some(2));
    assert_eq!(page_of("Closing remarks"), Some(3));
    // The paragraph's three visual lines are one paragraph.
    assert!(
        md.contains("the response rate was higher"),
        "reflowed: {md}"
    );
    // Heading kept apart from the body text.
    let heading_line = md
        .lines()
        .find(|l| l.contains("Annual Survey Results"))
        .unwrap_or_default();
    assert!(
        !heading_line.contains("survey reached"),
        "heading merged with body: {heading_line}"
    );
    // Table cells survive, in row order.
    for cell in ["Households", "North", "1200", "845", "West", "1101"] {
        assert!(md.contains(cell), "table cell {cell} missing");
    }
    let north = md.find("North").unwrap_or(0);
    let south = md.find("South").unwrap_or(0);
    assert!(north < south);
}

#[test]
fn pdf_without_any_text_is_no_text() {
    let pdf = crate::common::pdf(
        &[
            "0 g 10 10 100 100 re f".to_owned(),
            "0 g 20 20 50 50 re f".to_owned(),
        ],
        "x",
    );
    let err = convert("scan.pdf", &pdf, &opts()).unwrap_err();
    assert_eq!(
        err,
        ConvertError::NoText {
            pages: vec![1, 2],
            ocr: Ocr::Off
        }
    );
    assert!(
        err.to_string()
            .starts_with("no text layer on pages 1–2: OCR is off"),
        "{err}"
    );
    // With OCR on and no tesseract, it says to install it.
    if which_tesseract().is_none() {
        let on = ConvertOptions {
            ocr: Ocr::Auto,
            ..opts()
        };
        let err = convert("scan.pdf", &pdf, &on).unwrap_err();
        assert!(err.to_string().contains("install tesseract"), "{err}");
    }
}

#[test]
fn pdf_page_limit_is_checked_first() {
    let pages: Vec<String> = (0..5)
        .map(|i| crate::common::text_at(72.0, 700.0, 12.0, &format!("page {i}")))
        .collect();
    let pdf = crate::common::pdf(&pages, "many");
    let mut o = opts();
    o.limits.max_pages = 3;
    let err = convert("many.pdf", &pdf, &o).unwrap_err();
    assert_eq!(err, ConvertError::TooManyPages { pages: 5, limit: 3 });
}

#[test]
fn pdf_truncated_or_garbage_is_refused() {
    let pdf = crate::common::report_pdf();
    let truncated = &pdf[..pdf.len() / 3];
    match convert("cut.pdf", truncated, &opts()) {
        Err(
            ConvertError::Corrupt { .. }
            | ConvertError::WrongFormat { .. }
            | ConvertError::NoText { .. },
        ) => {}
        // A lenient parser may recover the first page from a truncated file.
        Ok(c) => assert!(c.markdown.contains("Annual Survey")),
        Err(e) => panic!("unexpected error {e:?}"),
    }
    let err = convert("junk.pdf", b"this is not a pdf at all", &opts()).unwrap_err();
    assert!(
        matches!(
            err,
            ConvertError::WrongFormat {
                expected: Format::Pdf,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().starts_with("not a PDF file"));
    let err = convert("header-only.pdf", b"%PDF-1.7\n%%EOF", &opts()).unwrap_err();
    assert!(
        matches!(
            err,
            ConvertError::Corrupt { .. } | ConvertError::WrongFormat { .. }
        ),
        "{err:?}"
    );
}

#[test]
fn docx_headings_lists_table_image_footnote() {
    let c = convert("report.docx", &crate::common::docx(), &opts()).expect("converts");
    let md = &c.markdown;
    println!("{md}");
    assert_eq!(c.title.as_deref(), Some("Report Q3"));
    assert!(md.contains("# Quarterly Report\n"));
    assert!(md.contains("## Highlights\n"));
    assert!(
        md.contains("# Custom styled chapter"),
        "heading through basedOn"
    );
    assert!(md.contains("Revenue grew **twelve percent** & costs fell.[^1]"));
    assert!(md.contains("[^1]: Audited figures."));
    assert!(md.contains("- First bullet\n   - Nested bullet\n- Second bullet"));
    assert!(md.contains("1. Step one\n2. Step two"));
    assert!(md.contains("| Region | Sales | Notes |\n| --- | --- | --- |\n| North | 1,200 | a\\|b |\n| 南方 | 3,400 | 中文单元格 |"));
    assert!(md.contains("中文段落：数据库与搜索引擎。"));
    assert_eq!(c.images.len(), 1);
    let img = &c.images[0];
    assert_eq!(img.mime, "image/png");
    assert_eq!(img.file_name, format!("{}.png", img.sha256));
    assert_eq!(img.bytes, crate::common::PNG);
    assert!(md.contains(&format!("![Company logo](/img/{})", img.file_name)));
    // The image sits between the table and the last paragraph.
    let at_img = md.find("![Company logo]").unwrap_or(0);
    assert!(md.find("中文单元格").unwrap_or(usize::MAX) < at_img);
    assert!(at_img < md.find("中文段落").unwrap_or(0));
    assert!(c.pages.is_empty());
}

#[test]
fn xlsx_two_sheets_with_displayed_values() {
    let c = convert("book.xlsx", &crate::common::xlsx(), &opts()).expect("converts");
    let md = &c.markdown;
    println!("{md}");
    assert!(md.contains("## Sales\n"));
    assert!(md.contains("## 中文\n"));
    assert!(md.contains("| Product | Units | Price | Shipped |"));
    assert!(
        md.contains("| Widget \\| large | 1200 | 0.3 | 2024-01-15 |"),
        "{md}"
    );
    assert!(md.contains("| Gadget | 7 | 19.99 | 2024-02-15 |"));
    assert!(md.contains("| 北京 | 21540000 |"));
    assert!(md.find("## Sales").unwrap_or(0) < md.find("## 中文").unwrap_or(0));
}

#[test]
fn xlsx_rows_are_capped() {
    let mut o = opts();
    o.limits.max_rows = 1;
    let c = convert("book.xlsx", &crate::common::xlsx(), &o).expect("converts");
    assert!(c.markdown.contains("Widget"));
    assert!(!c.markdown.contains("Gadget"));
    assert!(c.markdown.contains("1 more rows omitted"));
    assert!(
        c.warnings
            .iter()
            .any(|w| w.contains("Sales") && w.contains("cut at 1 rows"))
    );
}

#[test]
fn pptx_slides_in_order_with_notes_table_and_pages() {
    let c = convert("deck.pptx", &crate::common::pptx(), &opts()).expect("converts");
    let md = &c.markdown;
    println!("{md}");
    assert_eq!(c.pages.len(), 2);
    assert!(md.starts_with("## Slide 1: Project Kickoff\n"));
    assert!(md.contains("- Goals & scope\n- Timeline: 中文时间表"));
    assert!(md.contains("### Notes:\n\nRemember to introduce the team."));
    assert!(md.contains("## Slide 2: Schedule"));
    assert!(md.contains("| Milestone | Date |\n| --- | --- |\n| Beta | 2024-06-01 |"));
    assert!(md.contains("Free text box"));
    assert_eq!(c.images.len(), 1);
    assert!(md.contains(&format!("![Roadmap chart](/img/{})", c.images[0].file_name)));
    let at = |s: &str| md.find(s).and_then(|i| c.page_at(i));
    assert_eq!(at("Remember to introduce"), Some(1));
    assert_eq!(at("Milestone"), Some(2));
    assert_eq!(c.title.as_deref(), Some("Project Kickoff"));
    let mut o = opts();
    o.limits.max_pages = 1;
    assert_eq!(
        convert("deck.pptx", &crate::common::pptx(), &o).unwrap_err(),
        ConvertError::TooManyPages { pages: 2, limit: 1 }
    );
}

#[test]
fn csv_quotes_newlines_ragged_rows_and_latin1() {
    let csv = "name,comment,amount\r\n\"Smith, J.\",\"line one\nline two\",\"1,000\"\r\nLee,short\r\n\"Quote \"\"q\"\"\",x|y,3,extra\r\n";
    let c = convert("data.csv", csv.as_bytes(), &opts()).expect("converts");
    let md = &c.markdown;
    println!("{md}");
    assert!(md.starts_with("| name | comment | amount |  |\n| --- | --- | --- | --- |\n"));
    assert!(md.contains("| Smith, J. | line one<br>line two | 1,000 |  |"));
    assert!(md.contains("| Lee | short |  |  |"));
    assert!(md.contains("| Quote \"q\" | x\\|y | 3 | extra |"));

    let latin1 = b"caf\xe9,na\xefve\n1,2\n";
    let c = convert("l.csv", latin1, &opts()).expect("latin-1");
    assert!(c.markdown.contains("| café | naïve |"));
    assert!(c.warnings.iter().any(|w| w.contains("Windows-1252")));

    let tsv = "a\tb\n1\t\"x, y\"\n";
    let c = convert("t.tsv", tsv.as_bytes(), &opts()).expect("tsv");
    assert!(c.markdown.contains("| 1 | x, y |"));

    let mut o = opts();
    o.limits.max_rows = 2;
    let many: String = std::iter::once("n\n".to_owned())
        .chain((0..10).map(|i| format!("{i}\n")))
        .collect();
    let c = convert("many.csv", many.as_bytes(), &o).expect("rows");
    assert!(c.markdown.contains("| 1 |") && !c.markdown.contains("| 2 |"));
    assert!(c.markdown.contains("8 more rows omitted"));
}

#[test]
fn html_keeps_content_drops_boilerplate() {
    let html = r#"<!doctype html><html><head><title>Install Guide</title><style>body{}</style>
<script>var tracking = 1;</script></head><body>
<header><a href="/">Home</a> <a href="/about">About us</a></header>
<nav><ul><li>Menu item</li></ul></nav>
<main><h1>Installing</h1><p>Run the <a href="https://example.com/x">installer</a> first.</p>
<ul><li>Step A</li><li>Step B</li></ul>
<pre><code class="language-rust">fn main() {
    println!("hi");
}</code></pre>
<div class="highlight-python"><div class="highlight"><pre>print("x")</pre></div></div>
<table><tr><th>Key</th><th>Value</th></tr><tr><td>a</td><td>1</td></tr></table>
<p>中文内容保持不变。</p></main>
<aside>Related posts</aside><footer>Copyright 2024</footer></body></html>"#;
    let c = convert("page.html", html.as_bytes(), &opts()).expect("converts");
    let md = &c.markdown;
    println!("{md}");
    assert_eq!(c.title.as_deref(), Some("Install Guide"));
    assert!(md.contains("# Installing"));
    assert!(md.contains("[installer](https://example.com/x)"));
    assert!(md.contains("Step A") && md.contains("Step B"));
    assert!(md.contains("```rust\nfn main() {\n    println!(\"hi\");\n}\n```"));
    assert!(md.contains("```python\nprint(\"x\")\n```"));
    assert!(md.contains("| Key | Value |"));
    assert!(md.contains("中文内容保持不变。"));
    for junk in [
        "tracking",
        "Menu item",
        "About us",
        "Related posts",
        "Copyright",
        "body{}",
    ] {
        assert!(!md.contains(junk), "boilerplate {junk} kept");
    }
    // A declared legacy charset.
    let gbk =
        b"<html><head><meta charset=\"gbk\"></head><body><p>\xd6\xd0\xce\xc4</p></body></html>";
    let c = convert("gbk.html", gbk, &opts()).expect("gbk");
    assert!(c.markdown.contains("中文"), "{}", c.markdown);
}

#[test]
fn text_markdown_json() {
    let c = convert("notes.txt", "\u{feff}hello 世界".as_bytes(), &opts()).expect("txt");
    assert_eq!(c.markdown, "hello 世界");
    let c = convert("old.txt", b"na\xefve", &opts()).expect("latin-1 txt");
    assert_eq!(c.markdown, "naïve");
    let c = convert(
        "readme.md",
        "intro\n\n```\n# not a title\n```\n# Real Title\n".as_bytes(),
        &opts(),
    )
    .expect("md");
    assert_eq!(c.title.as_deref(), Some("Real Title"));
    let err = convert("bad.md", b"ab\xff", &opts()).unwrap_err();
    assert!(matches!(err, ConvertError::NotText(_)));
    let c = convert("d.json", r#"{"a":[1,2],"b":"中"}"#.as_bytes(), &opts()).expect("json");
    assert!(c.markdown.starts_with("```json\n{\n  \"a\": ["));
    assert!(c.markdown.contains("\"b\": \"中\""));
    let err = convert("d.json", b"{\"a\": 1,\n \"b\": }", &opts()).unwrap_err();
    assert!(err.to_string().contains("line 2, column"), "{err}");
}

#[test]
fn bad_inputs_get_clear_reasons() {
    let o = opts();
    assert_eq!(
        convert("empty.docx", b"", &o).unwrap_err(),
        ConvertError::Empty
    );
    assert_eq!(
        convert("empty.docx", b"", &o).unwrap_err().to_string(),
        "empty file"
    );
    assert!(matches!(
        convert("x.exe", b"MZ", &o).unwrap_err(),
        ConvertError::Unsupported(_)
    ));

    // A PDF renamed .docx.
    let err = convert("renamed.docx", &crate::common::report_pdf(), &o).unwrap_err();
    assert!(
        matches!(
            err,
            ConvertError::WrongFormat {
                expected: Format::Docx,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().starts_with("not a DOCX file"), "{err}");
    // A zip without word/document.xml.
    let zip = crate::common::zip_of(&[("hello.txt", b"hi")]);
    let err = convert("nodoc.docx", &zip, &o).unwrap_err();
    assert_eq!(err.to_string(), "not a DOCX file (no word/document.xml)");
    // An XLSX given as PPTX and vice versa.
    assert!(matches!(
        convert("x.pptx", &crate::common::xlsx(), &o).unwrap_err(),
        ConvertError::WrongFormat {
            expected: Format::Pptx,
            ..
        }
    ));
    assert!(matches!(
        convert("x.xlsx", &crate::common::docx(), &o).unwrap_err(),
        ConvertError::WrongFormat {
            expected: Format::Xlsx,
            ..
        }
    ));
    // Truncated zip containers.
    let docx = crate::common::docx();
    let err = convert("cut.docx", &docx[..docx.len() / 2], &o).unwrap_err();
    assert!(
        matches!(
            err,
            ConvertError::Corrupt {
                format: Format::Docx,
                ..
            }
        ),
        "{err:?}"
    );
    let xlsx = crate::common::xlsx();
    let err = convert("cut.xlsx", &xlsx[..xlsx.len() - 30], &o).unwrap_err();
    assert!(matches!(err, ConvertError::Corrupt { .. }), "{err:?}");
    // Encrypted OOXML: an OLE file with an EncryptionInfo stream.
    let mut ole = b"\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1".to_vec();
    ole.extend(vec![0u8; 200]);
    ole.extend("EncryptionInfo".encode_utf16().flat_map(u16::to_le_bytes));
    assert_eq!(
        convert("secret.docx", &ole, &o).unwrap_err(),
        ConvertError::Encrypted(Format::Docx)
    );
    assert_eq!(
        convert("secret.xlsx", &ole, &o).unwrap_err().to_string(),
        "encrypted XLSX"
    );
    // Binary data named as text.
    assert!(matches!(
        convert("x.csv", b"\x00\x01\x02PK", &o).unwrap_err(),
        ConvertError::NotText(_)
    ));
}

#[test]
fn zip_bomb_is_refused() {
    let bomb = crate::common::docx_bomb(4 << 20);
    assert!(bomb.len() < 100_000, "compresses well: {}", bomb.len());
    let mut o = opts();
    o.limits.max_decompressed_bytes = 1 << 20;
    let err = convert("bomb.docx", &bomb, &o).unwrap_err();
    assert_eq!(err, ConvertError::DecompressionBomb { limit: 1 << 20 });
    assert_eq!(
        err.to_string(),
        "decompresses to more than 1 MB (zip bomb?)"
    );
    // Within the default limit it converts.
    assert!(convert("big.docx", &bomb, &opts()).is_ok());
}

#[test]
fn zip_bomb_with_lying_headers_never_inflates_past_the_limit() {
    let mut bomb = crate::common::docx_bomb(4 << 20);
    crate::common::lie_about_size(&mut bomb, "word/document.xml", 1000);
    let mut o = opts();
    o.limits.max_decompressed_bytes = 1 << 20;
    let result = convert("liar.docx", &bomb, &o);
    println!("{:?}", result.as_ref().map(|c| c.markdown.len()));
    match result {
        Err(ConvertError::DecompressionBomb { .. } | ConvertError::Corrupt { .. }) => {}
        Ok(c) => assert!(c.markdown.len() < 1 << 20, "inflated past the limit"),
        Err(e) => panic!("unexpected {e:?}"),
    }
}

#[test]
fn oversized_input_is_refused() {
    let mut o = opts();
    o.limits.max_bytes = 1024 * 1024;
    let big = vec![b'a'; 2 * 1024 * 1024];
    let err = convert("big.txt", &big, &o).unwrap_err();
    assert_eq!(err, ConvertError::TooLarge { limit: 1024 * 1024 });
    assert_eq!(err.to_string(), "exceeds 1 MB");
}

#[test]
fn output_limit_and_timeout() {
    let mut o = opts();
    o.limits.max_output_bytes = 1000;
    let text = "word ".repeat(10_000);
    let c = convert("long.txt", text.as_bytes(), &o).expect("converts");
    assert!(c.markdown.len() <= 1000);
    assert!(c.warnings.iter().any(|w| w.contains("output cut")));

    let mut o = opts();
    o.limits.timeout = Duration::from_nanos(1);
    let pages: Vec<String> = (0..200)
        .map(|i| crate::common::text_at(72.0, 700.0, 12.0, &format!("page {i}")))
        .collect();
    let err = convert("slow.pdf", &crate::common::pdf(&pages, "t"), &o).unwrap_err();
    assert!(matches!(err, ConvertError::Timeout(_)), "{err:?}");
}

#[test]
fn every_format_has_a_converter() {
    for f in Format::ALL {
        assert_eq!(converter(f).format(), f);
    }
}

/// A workbook whose second sheet calamine refuses (numbers written as `<v> 41</v>`, as R's
/// readxl did in `datasets.xlsx`) and which references a drawing part it lacks.
fn xlsx_with_unparsable_sheet() -> Vec<u8> {
    let workbook = r#"<?xml version="1.0" encoding="UTF-8"?><workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets><sheet name="iris" sheetId="1" r:id="rId1"/><sheet name="quakes" sheetId="2" r:id="rId2"/></sheets></workbook>"#;
    let rels = r#"<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/><Relationship Id="rId2" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet2.xml"/><Relationship Id="rId3" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/sharedStrings" Target="sharedStrings.xml"/></Relationships>"#;
    let strings = r#"<?xml version="1.0" encoding="UTF-8"?><sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><si><t>Species</t></si><si><t>setosa</t></si><si><t>lat</t></si><si><t>mag &amp; depth</t></si><si><r><t>sta</t></r><r><t>tions</t></r></si></sst>"#;
    let sheet1 = r#"<?xml version="1.0" encoding="UTF-8"?><worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData><row r="1"><c r="A1" t="s"><v>0</v></c></row><row r="2"><c r="A2" t="s"><v>1</v></c></row></sheetData></worksheet>"#;
    let sheet2 = r#"<?xml version="1.0" encoding="UTF-8"?><worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData><row r="1"><c r="A1" t="s"><v>2</v></c><c r="B1" t="s"><v>3</v></c><c r="D1" t="s"><v>4</v></c></row><row r="2"><c r="A2" t="n"><v>-20.42</v></c><c r="B2" t="n"><v> 41</v></c><c r="D2" t="n"><v>4.8</v></c></row></sheetData></worksheet>"#;
    let sheet2_rels = r#"<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/drawing" Target="../drawings/drawing2.xml"/></Relationships>"#;
    crate::common::zip_of(&[
        (
            "[Content_Types].xml",
            crate::common::CONTENT_TYPES.as_bytes(),
        ),
        (
            "_rels/.rels",
            crate::common::root_rels("xl/workbook.xml").as_bytes(),
        ),
        ("xl/workbook.xml", workbook.as_bytes()),
        ("xl/_rels/workbook.xml.rels", rels.as_bytes()),
        ("xl/sharedStrings.xml", strings.as_bytes()),
        ("xl/worksheets/sheet1.xml", sheet1.as_bytes()),
        ("xl/worksheets/sheet2.xml", sheet2.as_bytes()),
        (
            "xl/worksheets/_rels/sheet2.xml.rels",
            sheet2_rels.as_bytes(),
        ),
    ])
}

#[test]
fn xlsx_sheet_the_reader_refuses_is_read_from_its_xml_with_a_warning() {
    let c = convert("datasets.xlsx", &xlsx_with_unparsable_sheet(), &opts()).expect("converts");
    let md = &c.markdown;
    assert!(md.contains("## iris") && md.contains("setosa"), "{md}");
    assert!(md.contains("## quakes"), "the refused sheet is kept: {md}");
    assert!(md.contains("| lat | mag & depth | stations |"), "{md}");
    assert!(md.contains("| -20.42 | 41 | 4.8 |"), "{md}");
    assert!(
        c.warnings
            .iter()
            .any(|w| w.starts_with("sheet 'quakes' was read from its XML")),
        "{:?}",
        c.warnings
    );
}

#[test]
fn csv_columns_and_fields_are_bounded_with_warnings() {
    let wide: String = (0..5_000).map(|i| format!("c{i},")).collect::<String>() + "\n";
    let c = convert("wide.csv", wide.as_bytes(), &opts()).expect("converts");
    assert!(c.markdown.contains("c999") && !c.markdown.contains("c1000"));
    assert!(
        c.warnings
            .iter()
            .any(|w| w.contains("more than 1000 columns")),
        "{:?}",
        c.warnings
    );
    let long = format!("name,notes\nalpha,\"{}\"\n", "x".repeat(200_000));
    let c = convert("long.csv", long.as_bytes(), &opts()).expect("converts");
    assert!(c.markdown.len() < 70_000, "{}", c.markdown.len());
    assert!(
        c.warnings
            .iter()
            .any(|w| w.contains("1 fields longer than 64 KB were cut")),
        "{:?}",
        c.warnings
    );
}

/// Every furniture range: sorted, not overlapping, on char boundaries, whole lines.
fn furniture_texts(c: &quarry_convert::Converted) -> Vec<(quarry_core::FurnitureKind, &str)> {
    let md = &c.markdown;
    for w in c.furniture.windows(2) {
        assert!(w[0].byte_end <= w[1].byte_start, "{:?}", c.furniture);
    }
    c.furniture
        .iter()
        .map(|f| {
            assert!(f.byte_start < f.byte_end && f.byte_end <= md.len(), "{f:?}");
            assert!(md.is_char_boundary(f.byte_start) && md.is_char_boundary(f.byte_end));
            assert!(f.byte_start == 0 || md.as_bytes()[f.byte_start - 1] == b'\n');
            (f.kind, &md[f.byte_start..f.byte_end])
        })
        .collect()
}

#[test]
fn pdf_running_headers_and_page_numbers_are_marked_not_body_text() {
    use quarry_core::FurnitureKind;
    let body = [
        "Chapter one begins here.",
        "Second chapter text.",
        "Third part explains.",
        "Fourth page of prose.",
        "Fifth and last page.",
    ];
    let pages: Vec<String> = (1..=5)
        .map(|n| {
            crate::common::text_at(72.0, 760.0, 10.0, &format!("Field Manual {n} / 5"))
                + &crate::common::text_at(72.0, 600.0, 12.0, body[n - 1])
                + &crate::common::text_at(300.0, 40.0, 10.0, &format!("{n}"))
        })
        .collect();
    let c = convert(
        "manual.pdf",
        &crate::common::pdf(&pages, "Field Manual"),
        &opts(),
    )
    .expect("converts");
    // Kept in the Markdown (the reader sees the page as printed), marked as furniture.
    assert!(c.markdown.contains("Field Manual 3 / 5"), "{}", c.markdown);
    let marked = furniture_texts(&c);
    assert!(body.iter().all(|b| c.markdown.contains(b)));
    // (pdf_oxide's text-table fallback grids page 4 of this synthetic file; a table row is
    // never furniture, so that page keeps its header unmarked.)
    for n in [1, 2, 3, 5] {
        let header = format!("Field Manual {n} / 5\n");
        assert!(
            marked.contains(&(FurnitureKind::RunningHeader, &header)),
            "{marked:?}"
        );
        let number = format!("{n}\n");
        assert!(
            marked.contains(&(FurnitureKind::PageNumber, &number)),
            "{marked:?}"
        );
    }
    assert!(
        marked
            .iter()
            .all(|(_, t)| !body.iter().any(|b| t.contains(b)))
    );
    assert_eq!(c.pages.len(), 5);
}

#[test]
fn docx_table_of_contents_is_marked() {
    use quarry_core::FurnitureKind;
    let c = convert("policy.docx", &crate::common::docx_with_toc(), &opts()).expect("converts");
    println!("{}", c.markdown);
    let marked = furniture_texts(&c);
    assert_eq!(marked.len(), 2, "{marked:?}");
    assert_eq!(
        marked[0],
        (
            FurnitureKind::Contents,
            "# Contents\n\nIntroduction 1\n\nScope of the policy 2\n\nLeave requests 5\n\nAppendix 9\n"
        )
    );
    assert_eq!(
        marked[1],
        (FurnitureKind::Contents, "Figure 1 Leave workflow 6\n")
    );
    // The body and its headings are not furniture; the title is not "Contents".
    assert!(
        c.markdown
            .contains("# Introduction\n\nEmployees request leave")
    );
    assert!(c.markdown.contains("Approvals take 2 working days."));
    assert_eq!(c.title.as_deref(), Some("Introduction"));
}

#[test]
fn html_table_of_contents_is_kept_and_marked_site_chrome_is_not_kept() {
    use quarry_core::FurnitureKind;
    let html = r##"<html><head><title>Guide</title></head><body>
<nav class="site"><a href="/">Home</a> <a href="/blog">Blog</a></nav>
<div class="book"><h1>Guide</h1>
<div class="toc"><p><b>Table of Contents</b></p><dl class="toc"><dt><a href="#a">1. Install</a></dt>
<dd><dl><dt><a href="#b">1.1. Requirements</a></dt></dl></dd><dt><a href="#c">2. Use</a></dt></dl></div>
<h2 id="a">1. Install</h2><p>Run the installer.</p>
<nav><ul><li><a href="#a">Install</a></li><li><a href="#b">Requirements</a></li><li><a href="#c">Use</a></li></ul></nav>
<h2 id="c">2. Use</h2><p>Open the app.</p></div>
<footer>Copyright 2024</footer></body></html>"##;
    let c = convert("guide.html", html.as_bytes(), &opts()).expect("converts");
    println!("{}", c.markdown);
    let marked = furniture_texts(&c);
    assert_eq!(marked.len(), 2, "{marked:?}");
    assert!(marked.iter().all(|(k, _)| *k == FurnitureKind::Contents));
    assert!(
        marked[0].1.starts_with("**Table of Contents**"),
        "{marked:?}"
    );
    assert!(marked[0].1.contains("1.1. Requirements") && marked[0].1.contains("Use](#c)"));
    assert!(marked[1].1.contains("[Requirements](#b)"), "{marked:?}");
    assert!(marked.iter().all(|(_, t)| !t.contains("Run the installer")));
    // Site navigation and the page footer are still cut.
    assert!(!c.markdown.contains("Blog") && !c.markdown.contains("Copyright"));
}

fn which_tesseract() -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("tesseract"))
            .find(|p| p.is_file())
    })
}
