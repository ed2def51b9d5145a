//! Fixture builders shared by the integration tests: minimal OOXML packages written with the
//! `zip` crate and a hand-written multi-page PDF.
#![allow(dead_code)]

use std::io::{Cursor, Write};
use std::path::PathBuf;

use zip::write::SimpleFileOptions;

/// A zip archive from `(name, bytes)` entries (deflated).
pub(crate) fn zip_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let opts = SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    for (name, bytes) in entries {
        w.start_file(*name, opts).expect("zip entry");
        w.write_all(bytes).expect("zip write");
    }
    w.finish().expect("zip finish").into_inner()
}

pub(crate) const CONTENT_TYPES: &str = r#"<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="xml" ContentType="application/xml"/></Types>"#;

pub(crate) fn root_rels(target: &str) -> String {
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="{target}"/></Relationships>"#
    )
}

/// A 1×1 PNG.
pub(crate) const PNG: &[u8] = &[
    0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1F, 0x15, 0xC4,
    0x89, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9C, 0x63, 0x00, 0x01, 0x00, 0x00,
    0x05, 0x00, 0x01, 0x0D, 0x0A, 0x2D, 0xB4, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4E, 0x44, 0xAE,
    0x42, 0x60, 0x82,
];

const W: &str = r#"xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships" xmlns:wp="http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing" xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" xmlns:pic="http://schemas.openxmlformats.org/drawingml/2006/picture""#;

/// A DOCX: title in core properties, Heading 1/2, a bulleted and a numbered list, a table,
/// an inline image, bold text, a footnote, Chinese text.
pub(crate) fn docx() -> Vec<u8> {
    let styles = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><w:styles {W}>
<w:style w:type="paragraph" w:styleId="Heading1"><w:name w:val="heading 1"/></w:style>
<w:style w:type="paragraph" w:styleId="Heading2"><w:name w:val="heading 2"/></w:style>
<w:style w:type="paragraph" w:styleId="MyHeading"><w:name w:val="Custom Chapter"/><w:basedOn w:val="Heading1"/></w:style>
</w:styles>"#
    );
    let numbering = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><w:numbering {W}>
<w:abstractNum w:abstractNumId="0"><w:lvl w:ilvl="0"><w:numFmt w:val="bullet"/></w:lvl><w:lvl w:ilvl="1"><w:numFmt w:val="bullet"/></w:lvl></w:abstractNum>
<w:abstractNum w:abstractNumId="1"><w:lvl w:ilvl="0"><w:numFmt w:val="decimal"/></w:lvl></w:abstractNum>
<w:num w:numId="1"><w:abstractNumId w:val="0"/></w:num>
<w:num w:numId="2"><w:abstractNumId w:val="1"/></w:num>
</w:numbering>"#
    );
    let p = |style: &str, text: &str| {
        format!(
            r#"<w:p><w:pPr><w:pStyle w:val="{style}"/></w:pPr><w:r><w:t>{text}</w:t></w:r></w:p>"#
        )
    };
    let item = |num: u32, lvl: u32, text: &str| {
        format!(
            r#"<w:p><w:pPr><w:numPr><w:ilvl w:val="{lvl}"/><w:numId w:val="{num}"/></w:numPr></w:pPr><w:r><w:t>{text}</w:t></w:r></w:p>"#
        )
    };
    let cell = |text: &str| format!(r#"<w:tc><w:p><w:r><w:t>{text}</w:t></w:r></w:p></w:tc>"#);
    let row = |cells: &[&str]| {
        format!(
            "<w:tr>{}</w:tr>",
            cells.iter().map(|c| cell(c)).collect::<String>()
        )
    };
    let body = [
        p("Heading1", "Quarterly Report"),
        r#"<w:p><w:r><w:t xml:space="preserve">Revenue grew </w:t></w:r><w:r><w:rPr><w:b/></w:rPr><w:t>twelve percent</w:t></w:r><w:r><w:t xml:space="preserve"> &amp; costs fell.</w:t></w:r><w:r><w:footnoteReference w:id="1"/></w:r></w:p>"#.to_owned(),
        p("Heading2", "Highlights"),
        item(1, 0, "First bullet"),
        item(1, 1, "Nested bullet"),
        item(1, 0, "Second bullet"),
        item(2, 0, "Step one"),
        item(2, 0, "Step two"),
        p("MyHeading", "Custom styled chapter"),
        format!(
            "<w:tbl>{}{}{}</w:tbl>",
            row(&["Region", "Sales", "Notes"]),
            row(&["North", "1,200", "a|b"]),
            row(&["南方", "3,400", "中文单元格"])
        ),
        r#"<w:p><w:r><w:drawing><wp:inline><wp:docPr id="1" name="Picture 1" descr="Company logo"/><a:graphic><a:graphicData><pic:pic><pic:blipFill><a:blip r:embed="rIdImg"/></pic:blipFill></pic:pic></a:graphicData></a:graphic></wp:inline></w:drawing></w:r></w:p>"#.to_owned(),
        p("Normal", "中文段落：数据库与搜索引擎。"),
    ]
    .concat();
    let document = format!(
        r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document {W}><w:body>{body}<w:sectPr/></w:body></w:document>"#
    );
    let doc_rels = r#"<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rIdImg" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/image" Target="media/image1.png"/></Relationships>"#;
    let footnotes = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><w:footnotes {W}><w:footnote w:type="separator" w:id="-1"><w:p><w:r><w:separator/></w:r></w:p></w:footnote><w:footnote w:id="1"><w:p><w:r><w:t>Audited figures.</w:t></w:r></w:p></w:footnote></w:footnotes>"#
    );
    let core = r#"<?xml version="1.0" encoding="UTF-8"?><cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/core-properties" xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>Report Q3</dc:title></cp:coreProperties>"#;
    zip_of(&[
        ("[Content_Types].xml", CONTENT_TYPES.as_bytes()),
        ("_rels/.rels", root_rels("word/document.xml").as_bytes()),
        ("word/document.xml", document.as_bytes()),
        ("word/_rels/document.xml.rels", doc_rels.as_bytes()),
        ("word/styles.xml", styles.as_bytes()),
        ("word/numbering.xml", numbering.as_bytes()),
        ("word/footnotes.xml", footnotes.as_bytes()),
        ("word/media/image1.png", PNG),
        ("docProps/core.xml", core.as_bytes()),
    ])
}

/// A DOCX with a Word table of contents: a `w:sdt` (gallery "Table of Contents") holding the
/// "TOC Heading" paragraph and a TOC field over `TOC1`/`TOC2` entries, then the body, then a
/// "Table of Figures" entry outside any field, then more body.
pub(crate) fn docx_with_toc() -> Vec<u8> {
    let styles = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><w:styles {W}>
<w:style w:type="paragraph" w:styleId="Heading1"><w:name w:val="heading 1"/></w:style>
<w:style w:type="paragraph" w:styleId="TOCHeading"><w:name w:val="TOC Heading"/><w:basedOn w:val="Heading1"/></w:style>
<w:style w:type="paragraph" w:styleId="TOC1"><w:name w:val="toc 1"/></w:style>
<w:style w:type="paragraph" w:styleId="TOC2"><w:name w:val="toc 2"/></w:style>
<w:style w:type="paragraph" w:styleId="TableofFigures"><w:name w:val="table of figures"/></w:style>
</w:styles>"#
    );
    let p = |style: &str, text: &str| {
        format!(
            r#"<w:p><w:pPr><w:pStyle w:val="{style}"/></w:pPr><w:r><w:t>{text}</w:t></w:r></w:p>"#
        )
    };
    let entry = |style: &str, text: &str, page: u32| {
        format!(
            r#"<w:p><w:pPr><w:pStyle w:val="{style}"/></w:pPr><w:hyperlink w:anchor="_Toc1"><w:r><w:t>{text}</w:t></w:r><w:r><w:tab/></w:r><w:r><w:fldChar w:fldCharType="begin"/></w:r><w:r><w:instrText xml:space="preserve"> PAGEREF _Toc1 \h </w:instrText></w:r><w:r><w:fldChar w:fldCharType="separate"/></w:r><w:r><w:t>{page}</w:t></w:r><w:r><w:fldChar w:fldCharType="end"/></w:r></w:hyperlink></w:p>"#
        )
    };
    let first = r#"<w:p><w:pPr><w:pStyle w:val="TOC1"/></w:pPr><w:r><w:fldChar w:fldCharType="begin"/></w:r><w:r><w:instrText xml:space="preserve"> TOC \o "1-3" \h \z \u </w:instrText></w:r><w:r><w:fldChar w:fldCharType="separate"/></w:r><w:r><w:t>Introduction</w:t></w:r><w:r><w:tab/></w:r><w:r><w:t>1</w:t></w:r></w:p>"#;
    // An entry in the field with no TOC style: the field alone makes it contents.
    let plain = r#"<w:p><w:r><w:t>Appendix</w:t></w:r><w:r><w:tab/></w:r><w:r><w:t>9</w:t></w:r><w:r><w:fldChar w:fldCharType="end"/></w:r></w:p>"#;
    let body = [
        r#"<w:sdt><w:sdtPr><w:docPartObj><w:docPartGallery w:val="Table of Contents"/><w:docPartUnique/></w:docPartObj></w:sdtPr><w:sdtContent>"#.to_owned(),
        p("TOCHeading", "Contents"),
        first.to_owned(),
        entry("TOC2", "Scope of the policy", 2),
        entry("TOC1", "Leave requests", 5),
        plain.to_owned(),
        "</w:sdtContent></w:sdt>".to_owned(),
        p("Heading1", "Introduction"),
        p("Normal", "Employees request leave through the portal at least 5 days ahead."),
        p("TableofFigures", "Figure 1 Leave workflow 6"),
        p("Heading1", "Leave requests"),
        p("Normal", "Approvals take 2 working days."),
    ]
    .concat();
    let document = format!(
        r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document {W}><w:body>{body}<w:sectPr/></w:body></w:document>"#
    );
    zip_of(&[
        ("[Content_Types].xml", CONTENT_TYPES.as_bytes()),
        ("_rels/.rels", root_rels("word/document.xml").as_bytes()),
        ("word/document.xml", document.as_bytes()),
        ("word/styles.xml", styles.as_bytes()),
    ])
}

/// A DOCX whose document.xml inflates to `size` bytes.
pub(crate) fn docx_bomb(size: usize) -> Vec<u8> {
    let mut document =
        format!(r#"<?xml version="1.0" encoding="UTF-8"?><w:document {W}><w:body><w:p><w:r><w:t>"#);
    document.push_str(&"a".repeat(size));
    document.push_str("</w:t></w:r></w:p></w:body></w:document>");
    zip_of(&[
        ("[Content_Types].xml", CONTENT_TYPES.as_bytes()),
        ("_rels/.rels", root_rels("word/document.xml").as_bytes()),
        ("word/document.xml", document.as_bytes()),
    ])
}

/// An XLSX with two sheets ("Sales" with numbers, a date, a float, text with a pipe;
/// "中文" with Chinese text).
pub(crate) fn xlsx() -> Vec<u8> {
    let workbook = r#"<?xml version="1.0" encoding="UTF-8"?><workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets><sheet name="Sales" sheetId="1" r:id="rId1"/><sheet name="中文" sheetId="2" r:id="rId2"/></sheets></workbook>"#;
    let rels = r#"<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/><Relationship Id="rId2" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet2.xml"/><Relationship Id="rId3" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/styles" Target="styles.xml"/></Relationships>"#;
    let styles = r#"<?xml version="1.0" encoding="UTF-8"?><styleSheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><cellXfs count="2"><xf numFmtId="0"/><xf numFmtId="14" applyNumberFormat="1"/></cellXfs></styleSheet>"#;
    let sheet1 = r#"<?xml version="1.0" encoding="UTF-8"?><worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>
<row r="1"><c r="A1" t="inlineStr"><is><t>Product</t></is></c><c r="B1" t="inlineStr"><is><t>Units</t></is></c><c r="C1" t="inlineStr"><is><t>Price</t></is></c><c r="D1" t="inlineStr"><is><t>Shipped</t></is></c></row>
<row r="2"><c r="A2" t="inlineStr"><is><t>Widget | large</t></is></c><c r="B2"><v>1200</v></c><c r="C2"><v>0.30000000000000004</v></c><c r="D2" s="1"><v>45306</v></c></row>
<row r="3"><c r="A3" t="inlineStr"><is><t>Gadget</t></is></c><c r="B3"><v>7</v></c><c r="C3"><v>19.99</v></c><c r="D3" s="1"><v>45337</v></c></row>
</sheetData></worksheet>"#;
    let sheet2 = r#"<?xml version="1.0" encoding="UTF-8"?><worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>
<row r="1"><c r="A1" t="inlineStr"><is><t>城市</t></is></c><c r="B1" t="inlineStr"><is><t>人口</t></is></c></row>
<row r="2"><c r="A2" t="inlineStr"><is><t>北京</t></is></c><c r="B2"><v>21540000</v></c></row>
</sheetData></worksheet>"#;
    let ct = r#"<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="xml" ContentType="application/xml"/><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/><Override PartName="/xl/worksheets/sheet1.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/><Override PartName="/xl/worksheets/sheet2.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/><Override PartName="/xl/styles.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.styles+xml"/></Types>"#;
    zip_of(&[
        ("[Content_Types].xml", ct.as_bytes()),
        ("_rels/.rels", root_rels("xl/workbook.xml").as_bytes()),
        ("xl/workbook.xml", workbook.as_bytes()),
        ("xl/_rels/workbook.xml.rels", rels.as_bytes()),
        ("xl/styles.xml", styles.as_bytes()),
        ("xl/worksheets/sheet1.xml", sheet1.as_bytes()),
        ("xl/worksheets/sheet2.xml", sheet2.as_bytes()),
    ])
}

const P: &str = r#"xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships" xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main""#;

fn sp(ph: Option<&str>, paras: &[&str]) -> String {
    let ph = ph
        .map(|t| format!(r#"<p:nvPr><p:ph type="{t}"/></p:nvPr>"#))
        .unwrap_or_else(|| "<p:nvPr/>".to_owned());
    let body: String = paras
        .iter()
        .map(|t| format!("<a:p><a:r><a:t>{t}</a:t></a:r></a:p>"))
        .collect();
    format!(
        r#"<p:sp><p:nvSpPr><p:cNvPr id="2" name="x"/><p:cNvSpPr/>{ph}</p:nvSpPr><p:txBody><a:bodyPr/>{body}</p:txBody></p:sp>"#
    )
}

/// A PPTX with two slides (titles, bullets, a table, an image) and notes on slide 1. The
/// parts are named so that file-name order (slide10 before slide2) differs from slide order.
pub(crate) fn pptx() -> Vec<u8> {
    let pres = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><p:presentation {P}><p:sldIdLst><p:sldId id="256" r:id="rId2"/><p:sldId id="257" r:id="rId3"/></p:sldIdLst></p:presentation>"#
    );
    let pres_rels = r#"<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId2" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/slide" Target="slides/slide2.xml"/><Relationship Id="rId3" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/slide" Target="slides/slide10.xml"/></Relationships>"#;
    let slide1 = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><p:sld {P}><p:cSld><p:spTree>{}{}<p:pic><p:nvPicPr><p:cNvPr id="4" name="Picture" descr="Roadmap chart"/><p:cNvPicPr/><p:nvPr/></p:nvPicPr><p:blipFill><a:blip r:embed="rId5"/></p:blipFill></p:pic></p:spTree></p:cSld></p:sld>"#,
        sp(Some("title"), &["Project Kickoff"]),
        sp(Some("body"), &["Goals &amp; scope", "Timeline: 中文时间表"])
    );
    let slide1_rels = r#"<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId5" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/image" Target="../media/image1.png"/><Relationship Id="rId9" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/notesSlide" Target="../notesSlides/notesSlide1.xml"/></Relationships>"#;
    let notes = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><p:notes {P}><p:cSld><p:spTree>{}{}</p:spTree></p:cSld></p:notes>"#,
        sp(Some("body"), &["Remember to introduce the team."]),
        sp(Some("sldNum"), &["1"])
    );
    let table = r#"<p:graphicFrame><p:nvGraphicFramePr><p:cNvPr id="5" name="Table"/><p:cNvGraphicFramePr/><p:nvPr/></p:nvGraphicFramePr><a:graphic><a:graphicData><a:tbl><a:tr><a:tc><a:txBody><a:p><a:r><a:t>Milestone</a:t></a:r></a:p></a:txBody></a:tc><a:tc><a:txBody><a:p><a:r><a:t>Date</a:t></a:r></a:p></a:txBody></a:tc></a:tr><a:tr><a:tc><a:txBody><a:p><a:r><a:t>Beta</a:t></a:r></a:p></a:txBody></a:tc><a:tc><a:txBody><a:p><a:r><a:t>2024-06-01</a:t></a:r></a:p></a:txBody></a:tc></a:tr></a:tbl></a:graphicData></a:graphic></p:graphicFrame>"#;
    let slide2 = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><p:sld {P}><p:cSld><p:spTree>{}{table}{}</p:spTree></p:cSld></p:sld>"#,
        sp(Some("title"), &["Schedule"]),
        sp(None, &["Free text box"])
    );
    zip_of(&[
        ("[Content_Types].xml", CONTENT_TYPES.as_bytes()),
        ("_rels/.rels", root_rels("ppt/presentation.xml").as_bytes()),
        ("ppt/presentation.xml", pres.as_bytes()),
        ("ppt/_rels/presentation.xml.rels", pres_rels.as_bytes()),
        ("ppt/slides/slide10.xml", slide2.as_bytes()),
        ("ppt/slides/slide2.xml", slide1.as_bytes()),
        ("ppt/slides/_rels/slide2.xml.rels", slide1_rels.as_bytes()),
        ("ppt/notesSlides/notesSlide1.xml", notes.as_bytes()),
        ("ppt/media/image1.png", PNG),
    ])
}

/// A PDF with `pages` page contents (content-stream operators), Helvetica as /F1, with a
/// correct xref table and an `/Info` title.
pub(crate) fn pdf(pages: &[String], title: &str) -> Vec<u8> {
    pdf_with_info(
        pages,
        format!("<< /Title ({title}) /Producer (quarry tests) >>").as_bytes(),
        None,
    )
}

/// A PDF like [`pdf`] whose `/Info` dictionary is `info` (raw bytes: strings may be binary)
/// and whose catalog has an XMP `/Metadata` stream when `xmp` is given.
pub(crate) fn pdf_with_info(pages: &[String], info: &[u8], xmp: Option<&str>) -> Vec<u8> {
    let n = pages.len();
    // Objects: 1 catalog, 2 pages, 3 font, 4 info, then (page, content) pairs, then XMP.
    let mut objects: Vec<String> = Vec::new();
    objects.push(match xmp {
        Some(_) => format!(
            "<< /Type /Catalog /Pages 2 0 R /Metadata {} 0 R >>",
            5 + 2 * n
        ),
        None => "<< /Type /Catalog /Pages 2 0 R >>".to_owned(),
    });
    let kids: Vec<String> = (0..n).map(|i| format!("{} 0 R", 5 + 2 * i)).collect();
    objects.push(format!(
        "<< /Type /Pages /Kids [{}] /Count {n} >>",
        kids.join(" ")
    ));
    objects.push(
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"
            .to_owned(),
    );
    objects.push(String::new()); // the Info dictionary, written as bytes below
    for (i, content) in pages.iter().enumerate() {
        objects.push(format!(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents {} 0 R >>",
            6 + 2 * i
        ));
        objects.push(format!(
            "<< /Length {} >>\nstream\n{content}\nendstream",
            content.len()
        ));
    }
    if let Some(xmp) = xmp {
        objects.push(format!(
            "<< /Type /Metadata /Subtype /XML /Length {} >>\nstream\n{xmp}\nendstream",
            xmp.len()
        ));
    }
    let mut out = b"%PDF-1.4\n%\xE2\xE3\xCF\xD3\n".to_vec();
    let mut offsets = Vec::new();
    for (i, obj) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n", i + 1).as_bytes());
        if i == 3 {
            out.extend_from_slice(info);
        } else {
            out.extend_from_slice(obj.as_bytes());
        }
        out.extend_from_slice(b"\nendobj\n");
    }
    let xref = out.len();
    out.extend_from_slice(
        format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes(),
    );
    for off in offsets {
        out.extend_from_slice(format!("{off:010} 00000 n \n").as_bytes());
    }
    out.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R /Info 4 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .as_bytes(),
    );
    out
}

/// `zip` with the part `name` set to `bytes` (replaced, or added), other parts unchanged.
pub(crate) fn with_part(zip: &[u8], name: &str, bytes: &[u8]) -> Vec<u8> {
    let mut archive = zip::ZipArchive::new(Cursor::new(zip)).expect("zip");
    let mut entries: Vec<(String, Vec<u8>)> = Vec::new();
    for i in 0..archive.len() {
        let mut f = archive.by_index(i).expect("zip entry");
        let entry = f.name().expect("entry name").into_owned();
        if entry == name {
            continue;
        }
        let mut data = Vec::new();
        std::io::Read::read_to_end(&mut f, &mut data).expect("zip read");
        entries.push((entry, data));
    }
    entries.push((name.to_owned(), bytes.to_vec()));
    let refs: Vec<(&str, &[u8])> = entries
        .iter()
        .map(|(n, b)| (n.as_str(), b.as_slice()))
        .collect();
    zip_of(&refs)
}

/// Text at (x, y) in font size `size`.
pub(crate) fn text_at(x: f32, y: f32, size: f32, text: &str) -> String {
    format!("BT /F1 {size} Tf {x} {y} Td ({text}) Tj ET\n")
}

/// A four-page report: a heading and a paragraph of several lines; a ruled 3×4 table; a
/// closing page; a page with only a drawn rectangle (no text layer).
pub(crate) fn report_pdf() -> Vec<u8> {
    let mut p1 = text_at(72.0, 720.0, 24.0, "Annual Survey Results");
    let lines = [
        "The survey reached households in every county and the response",
        "rate was higher than in any previous year. Results are grouped by",
        "region and compared with the prior survey where possible.",
    ];
    for (i, l) in lines.iter().enumerate() {
        p1.push_str(&text_at(72.0, 680.0 - 14.0 * i as f32, 11.0, l));
    }
    p1.push_str(&text_at(
        72.0,
        600.0,
        11.0,
        "A second paragraph starts here after a gap.",
    ));
    let mut p2 = text_at(72.0, 720.0, 16.0, "Table 1. Responses by region");
    let rows = [
        ["Region", "Households", "Responses"],
        ["North", "1200", "845"],
        ["South", "980", "702"],
        ["West", "1530", "1101"],
    ];
    // Rules around every cell.
    let (x0, y0, cw, rh) = (72.0f32, 680.0f32, 150.0f32, 20.0f32);
    for r in 0..=rows.len() {
        let y = y0 - rh * r as f32;
        p2.push_str(&format!("{x0} {y} m {} {y} l S\n", x0 + cw * 3.0));
    }
    for c in 0..=3 {
        let x = x0 + cw * c as f32;
        p2.push_str(&format!(
            "{x} {y0} m {x} {} l S\n",
            y0 - rh * rows.len() as f32
        ));
    }
    for (r, row) in rows.iter().enumerate() {
        for (c, cell) in row.iter().enumerate() {
            p2.push_str(&text_at(
                x0 + 5.0 + cw * c as f32,
                y0 - 14.0 - rh * r as f32,
                10.0,
                cell,
            ));
        }
    }
    let p3 = text_at(
        72.0,
        720.0,
        11.0,
        "Closing remarks appear on the third page.",
    );
    let p4 = "0.5 g 100 100 400 400 re f\n".to_owned();
    pdf(&[p1, p2, p3, p4], "Annual Survey 2024")
}

/// Rewrites the uncompressed size the zip headers declare for `name` (local header and
/// central directory), as a zip bomb would, to `size`.
pub(crate) fn lie_about_size(zip: &mut [u8], name: &str, size: u32) {
    let name = name.as_bytes();
    let mut i = 0;
    while i + 46 <= zip.len() {
        let sig = &zip[i..i + 4];
        if sig == b"PK\x03\x04" {
            let n = u16::from_le_bytes([zip[i + 26], zip[i + 27]]) as usize;
            if zip.get(i + 30..i + 30 + n) == Some(name) {
                zip[i + 22..i + 26].copy_from_slice(&size.to_le_bytes());
            }
        } else if sig == b"PK\x01\x02" {
            let n = u16::from_le_bytes([zip[i + 28], zip[i + 29]]) as usize;
            if zip.get(i + 46..i + 46 + n) == Some(name) {
                zip[i + 24..i + 28].copy_from_slice(&size.to_le_bytes());
            }
        }
        i += 1;
    }
}

/// The real documents' directory (`QUARRY_TEST_DOCS`); `None`, after saying the test is
/// skipped, when it is unset.
pub(crate) fn docs() -> Option<PathBuf> {
    match std::env::var_os("QUARRY_TEST_DOCS") {
        Some(d) if !d.is_empty() => Some(PathBuf::from(d)),
        _ => {
            println!("skipped: QUARRY_TEST_DOCS not set");
            None
        }
    }
}
