//! Spreadsheets (XLSX, XLS, ODS) → one `## <sheet>` section per sheet, each a Markdown table.
//!
//! `calamine` reads all three formats and hands back typed cells, so values are formatted
//! the way a person sees them: integers without `.0`, floats rounded to Excel's 15
//! significant digits (no `0.30000000000000004`), dates as ISO dates. Zip-based formats are
//! first inflated once through [`Package::check_all`] so a zip bomb is refused before
//! calamine allocates for it; empty rows and columns are dropped, rows past `max_rows` cut.

use std::io::Cursor;

use calamine::{Data, Reader, Sheets};

use crate::util::{escape_cell, grid_table};
use crate::zipc::{self, Package};
use crate::{ConvertError, ConvertOptions, Converted, Converter, Deadline, Format};

pub(crate) struct SheetConverter(pub Format);

impl Converter for SheetConverter {
    fn format(&self) -> Format {
        self.0
    }

    fn convert(&self, bytes: &[u8], opts: &ConvertOptions) -> Result<Converted, ConvertError> {
        let format = self.0;
        let deadline = Deadline::new(&opts.limits);
        let cursor = Cursor::new(bytes);
        let mut title = None;
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
                title = pkg
                    .read_text("docProps/core.xml")?
                    .and_then(|x| crate::docx::core_title(&x));
                calamine::open_workbook_from_rs(cursor)
                    .map(Sheets::Xlsx)
                    .map_err(|e| map_err(format, &e))?
            }
        };
        deadline.check()?;
        convert_book(book, format, title, opts, &deadline)
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
    title: Option<String>,
    opts: &ConvertOptions,
    deadline: &Deadline,
) -> Result<Converted, ConvertError> {
    let max_rows = opts.limits.max_rows;
    let mut md = String::new();
    let mut warnings = Vec::new();
    let sheets: Vec<(String, bool)> = book
        .sheets_metadata()
        .iter()
        .map(|s| (s.name.clone(), s.visible != calamine::SheetVisible::Visible))
        .collect();
    for (name, hidden) in sheets {
        deadline.check()?;
        let range = match book.worksheet_range(&name) {
            Ok(r) => r,
            Err(e) => {
                let msg = e.to_string();
                if msg.contains("password") || msg.contains("Password") {
                    return Err(ConvertError::Encrypted(format));
                }
                // Chart sheets and dialog sheets hold no cells.
                continue;
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
        for row in range.rows() {
            let cells: Vec<String> = row.iter().map(cell_text).collect();
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
        title,
        warnings,
        ..Default::default()
    })
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
