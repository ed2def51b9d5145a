//! Document properties (`Converted::properties`): OOXML core properties of DOCX, XLSX and
//! PPTX, a PDF's Info dictionary and XMP metadata, HTML `<meta>`; other formats have none.

use quarry_convert::{ConvertOptions, DocProperties, Ocr, convert};

use crate::common::{self, text_at, with_part};

fn opts() -> ConvertOptions {
    ConvertOptions {
        ocr: Ocr::Off,
        ..Default::default()
    }
}

const CORE: &str = r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/core-properties" xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:dcterms="http://purl.org/dc/terms/" xmlns:dcmitype="http://purl.org/dc/dcmitype/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><dc:title>Budget 2024</dc:title><dc:subject>Finance &amp; planning</dc:subject><dc:creator>  Grace
 Hopper </dc:creator><cp:keywords>budget; forecast, 2024 ;; </cp:keywords><dc:description>Not the subject</dc:description><cp:lastModifiedBy>Someone Else</cp:lastModifiedBy><dcterms:created xsi:type="dcterms:W3CDTF">2024-05-01T10:00:00Z</dcterms:created><dcterms:modified xsi:type="dcterms:W3CDTF">2024-06-02T01:30:00+02:00</dcterms:modified></cp:coreProperties>"#;

fn expected() -> DocProperties {
    DocProperties {
        title: Some("Budget 2024".to_owned()),
        author: Some("Grace Hopper".to_owned()),
        subject: Some("Finance & planning".to_owned()),
        keywords: vec!["budget".into(), "forecast".into(), "2024".into()],
        created: Some("2024-05-01T10:00:00Z".to_owned()),
        modified: Some("2024-06-01T23:30:00Z".to_owned()),
    }
}

#[test]
fn office_core_properties_for_docx_xlsx_pptx() {
    for (name, file) in [
        ("a.docx", common::docx()),
        ("a.xlsx", common::xlsx()),
        ("a.pptx", common::pptx()),
    ] {
        let file = with_part(&file, "docProps/core.xml", CORE.as_bytes());
        let c = convert(name, &file, &opts()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(c.properties, expected(), "{name}");
        assert_eq!(c.title.as_deref(), Some("Budget 2024"), "{name}");
    }
}

#[test]
fn office_without_or_with_bad_core_properties() {
    // The fixtures' own: a DOCX with only a title, an XLSX and a PPTX with none.
    let c = convert("a.docx", &common::docx(), &opts()).expect("docx");
    assert_eq!(
        c.properties,
        DocProperties {
            title: Some("Report Q3".to_owned()),
            ..Default::default()
        }
    );
    assert!(
        convert("a.xlsx", &common::xlsx(), &opts())
            .expect("xlsx")
            .properties
            .is_empty()
    );
    let c = convert("a.pptx", &common::pptx(), &opts()).expect("pptx");
    assert!(c.properties.is_empty());
    assert_eq!(
        c.title.as_deref(),
        Some("Project Kickoff"),
        "first slide title"
    );
    // Bad dates and broken XML never fail the conversion.
    let core = r#"<cp:coreProperties xmlns:cp="c" xmlns:dc="d" xmlns:dcterms="t"><dc:creator>Ada</dc:creator><dcterms:created>last Tuesday</dcterms:created><dcterms:modified>2024-02-30T00:00:00Z</dcterms:modified><cp:keywords>"#;
    let file = with_part(&common::docx(), "docProps/core.xml", core.as_bytes());
    let c = convert("a.docx", &file, &opts()).expect("docx with broken core.xml");
    assert_eq!(
        c.properties,
        DocProperties {
            author: Some("Ada".to_owned()),
            ..Default::default()
        }
    );
    assert_eq!(
        c.title.as_deref(),
        Some("Quarterly Report"),
        "first heading"
    );
}

fn one_page() -> Vec<String> {
    vec![text_at(
        72.0,
        720.0,
        12.0,
        "Properties of a small PDF document.",
    )]
}

/// `s` as a PDF hex string in UTF-16BE with a BOM.
fn utf16_hex(s: &str) -> String {
    let mut hex = "<FEFF".to_owned();
    for u in s.encode_utf16() {
        hex.push_str(&format!("{u:04X}"));
    }
    hex.push('>');
    hex
}

#[test]
fn pdf_info_dictionary() {
    let mut info = format!(
        "<< /Title (Annual   Survey) /Author {} /Keywords (survey; households, county ; ) /CreationDate (D:20240501100000+02'00') /ModDate (D:2024) /Subject (",
        utf16_hex("Zoë 中文")
    )
    .into_bytes();
    // PDFDocEncoding: 0x93 is "ﬁ", 0x84 an em dash.
    info.extend_from_slice(b"\x93nal \x84 draft) >>");
    let pdf = common::pdf_with_info(&one_page(), &info, None);
    let c = convert("a.pdf", &pdf, &opts()).expect("pdf");
    assert_eq!(
        c.properties,
        DocProperties {
            title: Some("Annual Survey".to_owned()),
            author: Some("Zoë 中文".to_owned()),
            subject: Some("ﬁnal — draft".to_owned()),
            keywords: vec!["survey".into(), "households".into(), "county".into()],
            created: Some("2024-05-01T08:00:00Z".to_owned()),
            modified: Some("2024-01-01T00:00:00Z".to_owned()),
        }
    );
    assert_eq!(c.title.as_deref(), Some("Annual Survey"));
}

#[test]
fn pdf_bad_dates_and_meaningless_title() {
    let info = b"<< /Title (Microsoft Word - draft.doc) /CreationDate (D:20241301) /ModDate (yesterday) /Author () >>";
    let c = convert(
        "a.pdf",
        &common::pdf_with_info(&one_page(), info, None),
        &opts(),
    )
    .expect("pdf");
    // The display title skips a producer's placeholder; the property keeps what was set.
    assert_eq!(c.title, None);
    assert_eq!(
        c.properties,
        DocProperties {
            title: Some("Microsoft Word - draft.doc".to_owned()),
            ..Default::default()
        }
    );
}

#[test]
fn pdf_xmp_fills_what_info_lacks() {
    let xmp = r#"<?xpacket begin="" id="W5M0MpCehiHzreSzNTczkc9d"?>
<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">
<rdf:Description rdf:about="" xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:xmp="http://ns.adobe.com/xap/1.0/" xmlns:pdf="http://ns.adobe.com/pdf/1.3/">
<dc:title><rdf:Alt><rdf:li xml:lang="x-default">XMP Title</rdf:li></rdf:Alt></dc:title>
<dc:creator><rdf:Seq><rdf:li>Alan Turing</rdf:li></rdf:Seq></dc:creator>
<pdf:Keywords>machines, thinking</pdf:Keywords>
<xmp:CreateDate>2023-11-05T09:15:00-05:00</xmp:CreateDate>
<xmp:ModifyDate>2023-11-06T00:00:00Z</xmp:ModifyDate>
</rdf:Description></rdf:RDF></x:xmpmeta>
<?xpacket end="w"?>"#;
    let info = b"<< /Title (Info Title) /Producer (quarry tests) >>";
    let c = convert(
        "a.pdf",
        &common::pdf_with_info(&one_page(), info, Some(xmp)),
        &opts(),
    )
    .expect("pdf");
    let p = &c.properties;
    assert_eq!(p.title.as_deref(), Some("Info Title"), "Info comes first");
    assert_eq!(p.author.as_deref(), Some("Alan Turing"));
    assert_eq!(p.keywords, vec!["machines", "thinking"]);
    assert_eq!(p.created.as_deref(), Some("2023-11-05T14:15:00Z"));
    assert_eq!(p.modified.as_deref(), Some("2023-11-06T00:00:00Z"));
}

#[test]
fn html_meta_and_plain_formats() {
    let html = r#"<!doctype html><html><head><title>Page</title><meta name="Author" content=" Jane  Doe "><meta name="keywords" content="rust, search;  , index"></head><body><h1>Hello</h1><p>Some text here.</p></body></html>"#;
    let c = convert("a.html", html.as_bytes(), &opts()).expect("html");
    assert_eq!(
        c.properties,
        DocProperties {
            author: Some("Jane Doe".to_owned()),
            keywords: vec!["rust".into(), "search".into(), "index".into()],
            ..Default::default()
        }
    );
    for (name, bytes) in [
        ("a.csv", &b"a,b\n1,2\n"[..]),
        ("a.md", b"# T\n\ntext\n"),
        ("a.txt", b"plain text\n"),
        ("a.json", b"{\"a\": 1}"),
    ] {
        let c = convert(name, bytes, &opts()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(c.properties.is_empty(), "{name}");
    }
}
