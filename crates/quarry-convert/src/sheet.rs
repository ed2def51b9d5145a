//! Spreadsheets (XLSX, XLS, ODS) → one `## <sheet>` section per sheet, each a Markdown table.
//!
//! `calamine` reads all three formats and hands back typed cells, so values are formatted
//! the way a person sees them: integers without `.0`, floats rounded to Excel's 15
//! significant digits (no `0.30000000000000004`), dates as ISO dates. Zip-based formats are
//! first inflated once through [`Package::check_all`] so a zip bomb is refused before
//! calamine allocates for it; empty rows and columns are dropped, rows past `max_rows` cut.

use std::io::Cursor;

use calamine::{Data, Reader, Sheets};

use crate::types::{ConvertError, ConvertOptions, Converted, Converter, Deadline, Format};
use crate::util::{escape_cell, grid_table};
use crate::xml;
use crate::zipc::{self, Package};

pub(crate) struct SheetConverter(pub Format);

impl Converter for SheetConverter {
    fn format(&self) -> Format {
        self.0
    }

    fn convert(&self, bytes: &[u8], opts: &ConvertOptions) -> Result<Converted, ConvertError> {
        let format = self.0;
        let deadline = Deadline::new(&opts.limits);
        let cursor = Cursor::new(bytes);
        let mut properties = crate::types::DocProperties::default();
        let book = match format {
            Format::Xls => {
                if !bytes.starts_with(b"\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1") {
                    return Err(ConvertError::WrongFormat {
                        expected: format,
                        detail: crate::util::sniff(bytes).map(|s| format!("looks like {s}")),
                    });
                }
                if zipc::is_encrypted_ole(bytes) {
                    return Err(ConvertError::Encrypted(format));
                }
                calamine::open_workbook_from_rs(cursor)
                    .map(Sheets::Xls)
                    .map_err(|e| map_err(format, &e))?
            }
            Format::Ods => {
                let mut pkg = Package::open(bytes, format, &opts.limits)?;
                let mime = pkg.read("mimetype")?.unwrap_or_default();
                if !mime.starts_with(b"application/vnd.oasis.opendocument.spreadsheet") {
                    return Err(ConvertError::WrongFormat {
                        expected: format,
                        detail: Some("not an OpenDocument spreadsheet".to_owned()),
                    });
                }
                pkg.check_all()?;
                calamine::open_workbook_from_rs(cursor)
                    .map(Sheets::Ods)
                    .map_err(|e| map_err(format, &e))?
            }
            _ => {
                let mut pkg = Package::open(bytes, format, &opts.limits)?;
                if !pkg.has("xl/workbook.xml")
                    && !pkg.names().iter().any(|n| n.ends_with("workbook.xml"))
                {
                    return Err(ConvertError::WrongFormat {
                        expected: format,
                        detail: Some("no xl/workbook.xml".to_owned()),
                    });
                }
                pkg.check_all()?;
                properties = pkg
                    .read_text("docProps/core.xml")?
                    .map(|x| crate::props::core_properties(&x))
                    .unwrap_or_default();
                calamine::open_workbook_from_rs(cursor)
                    .map(Sheets::Xlsx)
                    .map_err(|e| map_err(format, &e))?
            }
        };
        deadline.check()?;
        convert_book(book, format, bytes, properties, opts, &deadline)
    }
}

fn map_err(format: Format, e: &dyn std::fmt::Display) -> ConvertError {
    let msg = e.to_string();
    if msg.contains("password") || msg.contains("encrypt") || msg.contains("Password") {
        ConvertError::Encrypted(format)
    } else {
        ConvertError::Corrupt {
            format,
            detail: msg,
        }
    }
}

fn convert_book(
    mut book: Sheets<Cursor<&[u8]>>,
    format: Format,
    bytes: &[u8],
    properties: crate::types::DocProperties,
    opts: &ConvertOptions,
    deadline: &Deadline,
) -> Result<Converted, ConvertError> {
    let max_rows = opts.limits.max_rows;
    let mut md = String::new();
    let mut warnings = Vec::new();
    let sheets: Vec<(String, bool, bool)> = book
        .sheets_metadata()
        .iter()
        .map(|s| {
            (
                s.name.clone(),
                s.visible != calamine::SheetVisible::Visible,
                matches!(
                    s.typ,
                    calamine::SheetType::ChartSheet | calamine::SheetType::DialogSheet
                ),
            )
        })
        .collect();
    for (name, hidden, chart) in sheets {
        deadline.check()?;
        let all_rows: Vec<Vec<String>> = match book.worksheet_range(&name) {
            Ok(range) => range
                .rows()
                .map(|row| row.iter().map(cell_text).collect())
                .collect(),
            // Chart and dialog sheets hold no cells: nothing is lost.
            Err(_) if chart => continue,
            Err(e) => {
                let msg = e.to_string();
                if msg.contains("password") || msg.contains("Password") {
                    return Err(ConvertError::Encrypted(format));
                }
                // calamine refuses a whole sheet for one cell it cannot parse (R's readxl
                // writes numbers as `<v> 41</v>`): read the sheet's XML ourselves, and say so.
                match (format == Format::Xlsx).then(|| raw_xlsx_sheet(bytes, &name, &opts.limits)) {
                    Some(Ok(rows)) => {
                        warnings.push(format!(
                            "sheet '{name}' was read from its XML without cell formats \
                             (dates show as serial numbers): {msg}"
                        ));
                        rows
                    }
                    Some(Err(raw)) => {
                        warnings.push(format!("sheet '{name}' could not be read: {msg}; {raw}"));
                        continue;
                    }
                    None => {
                        warnings.push(format!("sheet '{name}' could not be read: {msg}"));
                        continue;
                    }
                }
            }
        };
        md.push_str("## ");
        md.push_str(&escape_cell(&name));
        if hidden {
            md.push_str(" (hidden)");
        }
        md.push_str("\n\n");
        // Non-empty rows, formatted; columns that are empty everywhere dropped.
        let mut rows: Vec<Vec<String>> = Vec::new();
        let mut omitted = 0usize;
        for cells in all_rows {
            if cells.iter().all(|c| c.trim().is_empty()) {
                continue;
            }
            // The header row plus `max_rows` data rows.
            if rows.len() > max_rows {
                omitted += 1;
                continue;
            }
            rows.push(cells);
            if rows.len().is_multiple_of(4096) {
                deadline.check()?;
            }
        }
        if rows.is_empty() {
            md.push_str("_(empty sheet)_\n\n");
            continue;
        }
        for line in crate::util::split_preamble(&mut rows) {
            md.push_str(&line);
            md.push_str("\n\n");
        }
        let table = grid_table(&rows);
        md.push_str(&table);
        if omitted > 0 {
            md.push_str(&format!(
                "\n_… {omitted} more rows omitted (limit {max_rows} rows per sheet)_\n"
            ));
            warnings.push(format!(
                "sheet '{name}' cut at {max_rows} rows ({omitted} rows omitted)"
            ));
        }
        md.push('\n');
    }
    if md.trim().is_empty() {
        return Err(ConvertError::Empty);
    }
    Ok(Converted {
        markdown: crate::util::tidy(&md),
        title: properties.title.clone(),
        warnings,
        properties,
        ..Default::default()
    })
}

/// The cells of one XLSX worksheet read straight from its XML (shared strings, inline
/// strings, numbers, booleans), rows in order with cells at their columns: the fallback
/// when calamine refuses the sheet. Cell formats are not applied.
fn raw_xlsx_sheet(
    bytes: &[u8],
    sheet: &str,
    limits: &crate::types::Limits,
) -> Result<Vec<Vec<String>>, String> {
    use quick_xml::events::Event;

    let fail = |e: ConvertError| e.to_string();
    let mut pkg = Package::open(bytes, Format::Xlsx, limits).map_err(fail)?;
    let workbook = pkg
        .read_text("xl/workbook.xml")
        .map_err(fail)?
        .ok_or("no xl/workbook.xml")?;
    let mut rid = None;
    let mut reader = quick_xml::Reader::from_str(&workbook);
    loop {
        match reader.read_event() {
            Ok(Event::Start(e) | Event::Empty(e))
                if e.local_name().as_ref() == "sheet"
                    && xml::attr(&e, "name").as_deref() == Some(sheet) =>
            {
                rid = xml::attr(&e, "id");
                break;
            }
            Ok(Event::Eof) | Err(_) => break,
            _ => {}
        }
    }
    let rid = rid.ok_or("the sheet is not in the workbook")?;
    let rels = pkg
        .read_text("xl/_rels/workbook.xml.rels")
        .map_err(fail)?
        .ok_or("no workbook relationships")?;
    let (path, _) = xml::relationships(&rels, "xl")
        .remove(&rid)
        .ok_or("the sheet's part is not named")?;
    let strings = match pkg.read_text("xl/sharedStrings.xml").map_err(fail)? {
        Some(x) => shared_strings(&x),
        None => Vec::new(),
    };
    let sheet_xml = pkg
        .read_text(&path)
        .map_err(fail)?
        .ok_or_else(|| format!("its part {path} is missing"))?;

    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut reader = quick_xml::Reader::from_str(&sheet_xml);
    // The cell being read: its column, type, and text so far (value or inline string).
    let mut cell: Option<(usize, String, String)> = None;
    let mut in_text = false;
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) => match e.local_name().as_ref() {
                "row" => rows.push(Vec::new()),
                "c" => {
                    let col = xml::attr(&e, "r")
                        .and_then(|r| column_index(&r))
                        .unwrap_or_else(|| rows.last().map_or(0, Vec::len));
                    let typ = xml::attr(&e, "t").unwrap_or_default();
                    cell = Some((col, typ, String::new()));
                }
                "v" | "t" => in_text = cell.is_some(),
                // Phonetic runs repeat the text's reading, not its content.
                "rPh" => in_text = false,
                _ => {}
            },
            Ok(Event::Text(t)) if in_text => {
                if let Some((_, _, text)) = &mut cell {
                    text.push_str(&t.xml10_content());
                }
            }
            Ok(Event::GeneralRef(r)) if in_text => {
                if let Some((_, _, text)) = &mut cell {
                    text.push_str(&xml::resolve_ref(&r));
                }
            }
            Ok(Event::End(e)) => match e.local_name().as_ref() {
                "v" | "t" => in_text = false,
                "c" => {
                    if let (Some((col, typ, text)), Some(row)) = (cell.take(), rows.last_mut()) {
                        let shown = raw_cell_text(&typ, &text, &strings);
                        if col >= MAX_RAW_COLUMNS {
                            continue;
                        }
                        if row.len() <= col {
                            row.resize(col + 1, String::new());
                        }
                        row[col] = shown;
                    }
                }
                _ => {}
            },
            Ok(Event::Eof) => break,
            Err(e) => return Err(format!("its XML is damaged ({e})")),
            _ => {}
        }
    }
    Ok(rows)
}

/// Columns the raw reader places cells in (XFD, Excel's last column, is 16,384).
const MAX_RAW_COLUMNS: usize = 16_384;

/// `B7` → 1 (columns from 0).
fn column_index(cell_ref: &str) -> Option<usize> {
    let letters: String = cell_ref
        .chars()
        .take_while(char::is_ascii_alphabetic)
        .collect();
    if letters.is_empty() || letters.len() > 3 {
        return None;
    }
    let n = letters.bytes().fold(0usize, |n, b| {
        n * 26 + usize::from(b.to_ascii_uppercase() - b'A' + 1)
    });
    Some(n - 1)
}

/// A raw cell's text by its type: shared string index, boolean, or the value as written
/// (numbers trimmed and shown like calamine's).
fn raw_cell_text(typ: &str, text: &str, strings: &[String]) -> String {
    match typ {
        "s" => text
            .trim()
            .parse::<usize>()
            .ok()
            .and_then(|i| strings.get(i).cloned())
            .unwrap_or_default(),
        "b" => if text.trim() == "1" { "TRUE" } else { "FALSE" }.to_owned(),
        "inlineStr" | "str" | "e" => text.to_owned(),
        _ => match text.trim().parse::<f64>() {
            Ok(f) => format_number(f),
            Err(_) => text.trim().to_owned(),
        },
    }
}

/// `xl/sharedStrings.xml`: each `<si>`'s text runs joined (phonetic runs left out).
fn shared_strings(x: &str) -> Vec<String> {
    use quick_xml::events::Event;
    let mut out = Vec::new();
    let mut reader = quick_xml::Reader::from_str(x);
    let (mut current, mut in_t, mut in_phonetic) = (None::<String>, false, false);
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) => match e.local_name().as_ref() {
                "si" => current = Some(String::new()),
                "t" => in_t = !in_phonetic,
                "rPh" => in_phonetic = true,
                _ => {}
            },
            Ok(Event::Empty(e)) if e.local_name().as_ref() == "si" => out.push(String::new()),
            Ok(Event::Text(t)) if in_t => {
                if let Some(s) = &mut current {
                    s.push_str(&t.xml10_content());
                }
            }
            Ok(Event::GeneralRef(r)) if in_t => {
                if let Some(s) = &mut current {
                    s.push_str(&xml::resolve_ref(&r));
                }
            }
            Ok(Event::End(e)) => match e.local_name().as_ref() {
                "si" => out.extend(current.take()),
                "t" => in_t = false,
                "rPh" => in_phonetic = false,
                _ => {}
            },
            Ok(Event::Eof) | Err(_) => break,
            _ => {}
        }
    }
    out
}

/// A cell as displayed.
pub(crate) fn cell_text(d: &Data) -> String {
    match d {
        Data::Empty => String::new(),
        Data::String(s) => s.clone(),
        Data::Int(i) => i.to_string(),
        Data::Float(f) => format_number(*f),
        Data::Bool(b) => if *b { "TRUE" } else { "FALSE" }.to_owned(),
        Data::DateTime(dt) => {
            if dt.is_duration() {
                let secs = (dt.as_f64() * 86_400.0).round() as i64;
                let sign = if secs < 0 { "-" } else { "" };
                let s = secs.abs();
                format!("{sign}{}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60)
            } else {
                let (y, mo, d, h, mi, s, _) = dt.to_ymd_hms_milli();
                let v = dt.as_f64();
                if v.fract() == 0.0 {
                    format!("{y:04}-{mo:02}-{d:02}")
                } else if v < 1.0 {
                    format!("{h:02}:{mi:02}:{s:02}")
                } else {
                    format!("{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02}")
                }
            }
        }
        Data::DateTimeIso(s) => s.strip_suffix("T00:00:00").unwrap_or(s).to_owned(),
        Data::DurationIso(s) => s.clone(),
        Data::Error(e) => format!("{e}"),
    }
}

/// A number as a spreadsheet shows it: integers plain, others rounded to 15 significant
/// digits (what Excel stores), no exponent for everyday magnitudes.
pub(crate) fn format_number(f: f64) -> String {
    if !f.is_finite() {
        return f.to_string();
    }
    if f.fract() == 0.0 && f.abs() < 1e15 {
        return format!("{}", f as i64);
    }
    let rounded: f64 = format!("{f:.14e}").parse().unwrap_or(f);
    let s = format!("{rounded}");
    if s.len() > 24 {
        format!("{rounded:e}")
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_lose_float_noise() {
        assert_eq!(format_number(0.1 + 0.2), "0.3");
        assert_eq!(format_number(42.0), "42");
        assert_eq!(format_number(-1.5), "-1.5");
        assert_eq!(format_number(1234567.891), "1234567.891");
    }
}
