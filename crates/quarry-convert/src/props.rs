//! Document properties ([`DocProperties`]): the OOXML core-properties part
//! (`docProps/core.xml`, shared by DOCX, XLSX and PPTX), the cleaning every value goes
//! through, and dates (W3CDTF/ISO 8601 and PDF `D:` dates) turned into RFC 3339 UTC.

use quick_xml::Reader;
use quick_xml::events::Event;

use crate::types::DocProperties;
use crate::xml::resolve_ref;

/// Characters kept of one value.
const MAX_CHARS: usize = 1000;
/// Keywords kept.
const MAX_KEYWORDS: usize = 50;

/// A value as stored: control characters dropped, whitespace runs collapsed to one space,
/// trimmed, cut at [`MAX_CHARS`] characters; `None` when nothing is left.
pub(crate) fn clean(s: &str) -> Option<String> {
    let mut out = String::new();
    let mut chars = 0usize;
    for word in s
        .split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|w| !w.is_empty())
    {
        if chars >= MAX_CHARS {
            break;
        }
        if !out.is_empty() {
            out.push(' ');
            chars += 1;
        }
        for c in word.chars() {
            if chars >= MAX_CHARS {
                break;
            }
            out.push(c);
            chars += 1;
        }
    }
    let out = out.trim_end().to_owned();
    (!out.is_empty()).then_some(out)
}

/// Keywords from one or more keyword strings: split on `,` and `;`, cleaned, empties and
/// repeats dropped, at most [`MAX_KEYWORDS`].
pub(crate) fn keywords<'a>(sources: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for source in sources {
        for k in source.split([',', ';']).filter_map(clean) {
            if out.len() >= MAX_KEYWORDS {
                return out;
            }
            if !out.contains(&k) {
                out.push(k);
            }
        }
    }
    out
}

/// The properties in an OOXML `docProps/core.xml` part. Unreadable XML yields what was read
/// before the error; bad dates are absent.
pub(crate) fn core_properties(xml: &str) -> DocProperties {
    #[derive(Clone, Copy, PartialEq)]
    enum Field {
        Title,
        Creator,
        Subject,
        Keywords,
        Created,
        Modified,
    }
    let field_of = |local: &str| match local {
        "title" => Some(Field::Title),
        "creator" => Some(Field::Creator),
        "subject" => Some(Field::Subject),
        "keywords" => Some(Field::Keywords),
        "created" => Some(Field::Created),
        "modified" => Some(Field::Modified),
        _ => None,
    };
    let mut reader = Reader::from_str(xml);
    let mut current: Option<Field> = None;
    let mut texts: [String; 6] = Default::default();
    let slot = |f: Field| f as usize;
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) if current.is_none() => {
                current = field_of(e.local_name().as_ref());
            }
            Ok(Event::End(e))
                if current.is_some() && field_of(e.local_name().as_ref()) == current =>
            {
                current = None;
            }
            Ok(Event::Text(t)) => {
                if let Some(f) = current {
                    // A hostile part cannot grow a value past what is kept (and then some).
                    if texts[slot(f)].len() < 16 * MAX_CHARS {
                        texts[slot(f)].push_str(&t.xml10_content());
                    }
                }
            }
            Ok(Event::CData(t)) => {
                if let Some(f) = current
                    && texts[slot(f)].len() < 16 * MAX_CHARS
                {
                    texts[slot(f)].push_str(&t.into_inner());
                }
            }
            Ok(Event::GeneralRef(r)) => {
                if let Some(f) = current {
                    texts[slot(f)].push_str(&resolve_ref(&r));
                }
            }
            Ok(Event::Eof) | Err(_) => break,
            _ => {}
        }
    }
    let text = |f: Field| texts[slot(f)].as_str();
    DocProperties {
        title: clean(text(Field::Title)),
        author: clean(text(Field::Creator)),
        subject: clean(text(Field::Subject)),
        keywords: keywords([text(Field::Keywords)]),
        created: iso_date_to_utc(text(Field::Created)),
        modified: iso_date_to_utc(text(Field::Modified)),
    }
}

/// Fills the fields of `props` that are absent from `other`.
pub(crate) fn fill_missing(props: &mut DocProperties, other: DocProperties) {
    let DocProperties {
        title,
        author,
        subject,
        keywords,
        created,
        modified,
    } = other;
    props.title = props.title.take().or(title);
    props.author = props.author.take().or(author);
    props.subject = props.subject.take().or(subject);
    if props.keywords.is_empty() {
        props.keywords = keywords;
    }
    props.created = props.created.take().or(created);
    props.modified = props.modified.take().or(modified);
}

/// A W3CDTF / ISO 8601 date (`2024-05-01T10:00:00Z`, `2024-05-01T12:00:00.5+02:00`,
/// `2024-05-01`, `2024`) as RFC 3339 UTC; missing parts are the start of the period, a
/// missing zone is UTC. `None` when it is not such a date.
pub(crate) fn iso_date_to_utc(s: &str) -> Option<String> {
    let s = s.trim();
    let b = s.as_bytes();
    let mut p = Cursor { b, at: 0 };
    let year = p.digits(4)?;
    let mut month = 1;
    let mut day = 1;
    let (mut hour, mut minute, mut second) = (0, 0, 0);
    let mut offset = 0i64;
    if p.eat(b'-') {
        month = p.digits(2)?;
        if p.eat(b'-') {
            day = p.digits(2)?;
            if p.eat(b'T') || p.eat(b't') || p.eat(b' ') {
                hour = p.digits(2)?;
                if !p.eat(b':') {
                    return None;
                }
                minute = p.digits(2)?;
                if p.eat(b':') {
                    second = p.digits(2)?;
                    if p.eat(b'.') || p.eat(b',') {
                        if !p.peek().is_some_and(|c| c.is_ascii_digit()) {
                            return None;
                        }
                        while p.peek().is_some_and(|c| c.is_ascii_digit()) {
                            p.at += 1;
                        }
                    }
                }
                match p.peek() {
                    None => {}
                    Some(b'Z' | b'z') => p.at += 1,
                    Some(sign @ (b'+' | b'-')) => {
                        p.at += 1;
                        let oh = p.digits(2)?;
                        p.eat(b':');
                        let om = if p.peek().is_some() { p.digits(2)? } else { 0 };
                        if oh > 23 || om > 59 {
                            return None;
                        }
                        offset = (oh * 60 + om) * if sign == b'-' { -1 } else { 1 };
                    }
                    Some(_) => return None,
                }
            }
        }
    }
    if p.at != b.len() {
        return None;
    }
    to_utc(year, month, day, hour, minute, second, offset)
}

/// A PDF date (`D:YYYYMMDDHHmmSSOHH'mm'`; everything after the year optional, the `D:`
/// too) as RFC 3339 UTC: missing parts are the start of the period, a missing zone is UTC.
/// `None` when it is not such a date.
pub(crate) fn pdf_date_to_utc(s: &str) -> Option<String> {
    let s = s.trim();
    let s = s.strip_prefix("D:").unwrap_or(s).trim_start();
    let b = s.as_bytes();
    let mut p = Cursor { b, at: 0 };
    let year = p.digits(4)?;
    let mut parts = [1i64, 1, 0, 0, 0];
    for part in &mut parts {
        if !p.peek().is_some_and(|c| c.is_ascii_digit()) {
            break;
        }
        *part = p.digits(2)?;
    }
    let [month, day, hour, minute, second] = parts;
    let mut offset = 0i64;
    match p.peek() {
        None => {}
        Some(b'Z' | b'z') => {
            p.at += 1;
            // `Z00'00'` is common; any zone after `Z` must be zero.
            if p.peek().is_some_and(|c| c.is_ascii_digit()) {
                let oh = p.digits(2)?;
                p.eat(b'\'');
                let om = if p.peek().is_some_and(|c| c.is_ascii_digit()) {
                    p.digits(2)?
                } else {
                    0
                };
                if oh != 0 || om != 0 {
                    return None;
                }
                p.eat(b'\'');
            }
        }
        Some(sign @ (b'+' | b'-')) => {
            p.at += 1;
            let oh = p.digits(2)?;
            p.eat(b'\'');
            let om = if p.peek().is_some_and(|c| c.is_ascii_digit()) {
                p.digits(2)?
            } else {
                0
            };
            p.eat(b'\'');
            if oh > 23 || om > 59 {
                return None;
            }
            offset = (oh * 60 + om) * if sign == b'-' { -1 } else { 1 };
        }
        Some(_) => return None,
    }
    if p.at != b.len() {
        return None;
    }
    to_utc(year, month, day, hour, minute, second, offset)
}

/// Reads ASCII digits from a byte string.
struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.at).copied()
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    /// Exactly `n` digits as a number.
    fn digits(&mut self, n: usize) -> Option<i64> {
        let d = self.b.get(self.at..self.at + n)?;
        if !d.iter().all(u8::is_ascii_digit) {
            return None;
        }
        self.at += n;
        Some(d.iter().fold(0, |v, &c| v * 10 + i64::from(c - b'0')))
    }
}

/// Local date and time at `offset` minutes east of UTC, as RFC 3339 UTC; `None` when a part
/// is out of range or the year (in UTC) is outside 1900–9999 (`1601-01-01`, `0001-01-01`
/// mean "never set").
fn to_utc(
    year: i64,
    month: i64,
    day: i64,
    hour: i64,
    minute: i64,
    second: i64,
    offset: i64,
) -> Option<String> {
    if !(1..=12).contains(&month)
        || day < 1
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    // A leap second is the last second of its minute.
    let second = second.min(59);
    let secs = quarry_core::days_from_civil(year, month, day) * 86_400
        + hour * 3600
        + minute * 60
        + second
        - offset * 60;
    let days = secs.div_euclid(86_400);
    let rest = secs.rem_euclid(86_400);
    let (y, m, d) = quarry_core::civil_from_days(days);
    if !(1900..=9999).contains(&y) {
        return None;
    }
    Some(format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    ))
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pdf_dates_become_utc() {
        let d = |s| pdf_date_to_utc(s);
        assert_eq!(
            d("D:20240501100000+02'00'").as_deref(),
            Some("2024-05-01T08:00:00Z")
        );
        assert_eq!(
            d("D:20240501100000-05'30'").as_deref(),
            Some("2024-05-01T15:30:00Z")
        );
        assert_eq!(
            d("D:20240501100000Z").as_deref(),
            Some("2024-05-01T10:00:00Z")
        );
        assert_eq!(
            d("D:20240501100000Z00'00'").as_deref(),
            Some("2024-05-01T10:00:00Z")
        );
        // Offsets without the closing apostrophe, without minutes, or without apostrophes.
        assert_eq!(
            d("D:20240501100000+02'00").as_deref(),
            Some("2024-05-01T08:00:00Z")
        );
        assert_eq!(
            d("D:20240501100000+02").as_deref(),
            Some("2024-05-01T08:00:00Z")
        );
        assert_eq!(
            d("D:20240501100000+0200").as_deref(),
            Some("2024-05-01T08:00:00Z")
        );
        // Missing parts: the start of the period, UTC.
        assert_eq!(d("D:2024").as_deref(), Some("2024-01-01T00:00:00Z"));
        assert_eq!(d("D:202405").as_deref(), Some("2024-05-01T00:00:00Z"));
        assert_eq!(d("D:2024050113").as_deref(), Some("2024-05-01T13:00:00Z"));
        assert_eq!(d("20240501101500").as_deref(), Some("2024-05-01T10:15:00Z"));
        // Crossing a day, a month, a year and a leap day.
        assert_eq!(
            d("D:20240101003000+01'00'").as_deref(),
            Some("2023-12-31T23:30:00Z")
        );
        assert_eq!(
            d("D:20240228230000-02'00'").as_deref(),
            Some("2024-02-29T01:00:00Z")
        );
        assert_eq!(
            d("D:20231231230000-02'00'").as_deref(),
            Some("2024-01-01T01:00:00Z")
        );
        // Garbage and impossible dates are absent, never an error.
        for bad in [
            "",
            "D:",
            "D:20",
            "D:2024131",
            "D:20241301",
            "D:20240230",
            "D:20230229",
            "D:20240501250000",
            "D:20240501106000",
            "D:20240501100000+25'00'",
            "D:20240501100000X",
            "D:20240501100000+02'00'junk",
            "D:2024050",
            "D:16010101000000Z",
            "Tuesday",
            "D:১২৩৪",
        ] {
            assert_eq!(d(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn iso_dates_become_utc() {
        let d = |s| iso_date_to_utc(s);
        assert_eq!(
            d("2024-05-01T10:00:00Z").as_deref(),
            Some("2024-05-01T10:00:00Z")
        );
        assert_eq!(
            d(" 2024-05-01T10:00:00+02:00 ").as_deref(),
            Some("2024-05-01T08:00:00Z")
        );
        assert_eq!(
            d("2024-05-01T10:00:00.123-0130").as_deref(),
            Some("2024-05-01T11:30:00Z")
        );
        assert_eq!(
            d("2024-05-01T10:00Z").as_deref(),
            Some("2024-05-01T10:00:00Z")
        );
        assert_eq!(
            d("2024-05-01T10:00:00").as_deref(),
            Some("2024-05-01T10:00:00Z")
        );
        assert_eq!(d("2024-05-01").as_deref(), Some("2024-05-01T00:00:00Z"));
        assert_eq!(d("2024-05").as_deref(), Some("2024-05-01T00:00:00Z"));
        assert_eq!(d("2024").as_deref(), Some("2024-01-01T00:00:00Z"));
        for bad in [
            "",
            "2024-5-1",
            "2024-05-01T10",
            "2024-05-01T10:00:00+",
            "2024-02-30T00:00:00Z",
            "1601-01-01T00:00:00Z",
            "0001-01-01T00:00:00Z",
            "2024-05-01T10:00:00Zjunk",
            "yesterday",
        ] {
            assert_eq!(d(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn values_are_cleaned_and_keywords_split() {
        assert_eq!(clean("  a \n\t b\u{0}c  ").as_deref(), Some("a b c"));
        assert_eq!(clean(" \n "), None);
        let long = "é".repeat(1500);
        assert_eq!(clean(&long).map(|s| s.chars().count()), Some(1000));
        assert_eq!(
            keywords(["alpha, beta;gamma ;; , alpha", "delta"]),
            vec!["alpha", "beta", "gamma", "delta"]
        );
        let many = (0..80)
            .map(|i| format!("k{i}"))
            .collect::<Vec<_>>()
            .join(",");
        let k = keywords([many.as_str()]);
        assert_eq!(k.len(), 50);
        assert_eq!(k[49], "k49");
    }

    #[test]
    fn core_xml_properties() {
        let xml = r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/core-properties" xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:dcterms="http://purl.org/dc/terms/" xmlns:dcmitype="http://purl.org/dc/dcmitype/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
<dc:title>Quarterly   Report</dc:title><dc:subject>Finance &amp; Ops</dc:subject>
<dc:creator>Ada Lovelace</dc:creator><cp:keywords>revenue; costs, 2024</cp:keywords>
<cp:lastModifiedBy>Someone Else</cp:lastModifiedBy><dc:description>Not the subject</dc:description>
<dcterms:created xsi:type="dcterms:W3CDTF">2024-05-01T10:00:00Z</dcterms:created>
<dcterms:modified xsi:type="dcterms:W3CDTF">2024-05-02T12:30:00+02:00</dcterms:modified>
</cp:coreProperties>"#;
        assert_eq!(
            core_properties(xml),
            DocProperties {
                title: Some("Quarterly Report".to_owned()),
                author: Some("Ada Lovelace".to_owned()),
                subject: Some("Finance & Ops".to_owned()),
                keywords: vec!["revenue".to_owned(), "costs".to_owned(), "2024".to_owned()],
                created: Some("2024-05-01T10:00:00Z".to_owned()),
                modified: Some("2024-05-02T10:30:00Z".to_owned()),
            }
        );
        // Empty elements, bad dates and broken XML give absent values, not errors.
        let xml = r#"<cp:coreProperties xmlns:cp="c" xmlns:dc="d" xmlns:dcterms="t"><dc:title/><dc:creator>  </dc:creator><dcterms:created>soon</dcterms:created><dc:subject>S</dc:subject><dcterms:modified>2024-01-01T00:00:00Z</dcterms:mod"#;
        let p = core_properties(xml);
        assert_eq!(p.title, None);
        assert_eq!(p.author, None);
        assert_eq!(p.created, None);
        assert_eq!(p.subject.as_deref(), Some("S"));
        assert!(core_properties("not xml at all <<<").is_empty());
    }
}
