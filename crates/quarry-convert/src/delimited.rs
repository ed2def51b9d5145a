//! CSV/TSV → a Markdown table.
//!
//! The `csv` crate's streaming reader handles quoting (delimiters and newlines inside quoted
//! fields) and ragged rows (`flexible`); rows are read one at a time and only the first
//! `max_rows` are kept, the rest just counted. Text is UTF-8 (BOM stripped) or, failing that,
//! Windows-1252, which decodes Latin-1 files as people expect. Title lines above the header
//! (a common spreadsheet-export habit) become a paragraph instead of a one-cell header.

use std::borrow::Cow;

use crate::types::{ConvertError, ConvertOptions, Converted, Converter, Deadline, Format};
use crate::util::{self, grid_table};

/// Columns kept per row: a Markdown table wider than this is unreadable, and each cell
/// costs memory out of proportion to its bytes (500,000 one-byte fields made 658 MB).
const MAX_COLUMNS: usize = 1_000;
/// Bytes kept of one field: a table cell is not where a document's text lives, and one
/// 60 MB quoted field otherwise costs several copies of itself while the table is built.
const MAX_CELL_BYTES: usize = 64 * 1024;

pub(crate) struct DelimitedConverter(pub Format);

impl Converter for DelimitedConverter {
    fn format(&self) -> Format {
        self.0
    }

    fn convert(&self, bytes: &[u8], opts: &ConvertOptions) -> Result<Converted, ConvertError> {
        let format = self.0;
        let deadline = Deadline::new(&opts.limits);
        if util::looks_binary(bytes) {
            return Err(ConvertError::NotText(match util::sniff(bytes) {
                Some(kind) => format!("looks like {kind}, not {}", format.as_str().to_uppercase()),
                None => "binary data".to_owned(),
            }));
        }
        let mut warnings = Vec::new();
        let body = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
        let text: Cow<'_, str> = match std::str::from_utf8(body) {
            Ok(s) => Cow::Borrowed(s),
            Err(_) => {
                let (t, enc) = util::decode_text(bytes);
                warnings.push(format!(
                    "not UTF-8; decoded as {}",
                    enc.unwrap_or("Windows-1252")
                ));
                Cow::Owned(t)
            }
        };
        let delimiter = if format == Format::Tsv {
            b'\t'
        } else {
            sniff_delimiter(&text)
        };
        let mut reader = csv::ReaderBuilder::new()
            .delimiter(delimiter)
            .has_headers(false)
            .flexible(true)
            .from_reader(text.as_bytes());
        let max_rows = opts.limits.max_rows;
        let mut rows: Vec<Vec<String>> = Vec::new();
        let mut omitted = 0usize;
        let mut record = csv::StringRecord::new();
        let mut n = 0u64;
        let (mut wide_rows, mut widest, mut long_cells) = (0usize, 0usize, 0usize);
        loop {
            match reader.read_record(&mut record) {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => {
                    // Keep what was read; a bad line mid-file should not lose the rest.
                    warnings.push(format!("malformed line skipped ({e})"));
                    if warnings.len() > 20 {
                        break;
                    }
                    continue;
                }
            }
            n += 1;
            if n.is_multiple_of(8192) {
                deadline.check()?;
            }
            if record.iter().all(|f| f.trim().is_empty()) {
                continue;
            }
            // The header row plus `max_rows` data rows.
            if rows.len() > max_rows {
                omitted += 1;
                continue;
            }
            if record.len() > MAX_COLUMNS {
                wide_rows += 1;
                widest = widest.max(record.len());
            }
            let row = record
                .iter()
                .take(MAX_COLUMNS)
                .map(|field| {
                    if field.len() <= MAX_CELL_BYTES {
                        return field.to_owned();
                    }
                    long_cells += 1;
                    let end = util::floor_char_boundary(field, MAX_CELL_BYTES);
                    format!("{}…", &field[..end])
                })
                .collect();
            rows.push(row);
        }
        if wide_rows > 0 {
            warnings.push(format!(
                "{wide_rows} rows have more than {MAX_COLUMNS} columns (up to {widest}); \
                 only the first {MAX_COLUMNS} were kept"
            ));
        }
        if long_cells > 0 {
            warnings.push(format!(
                "{long_cells} fields longer than {} KB were cut",
                MAX_CELL_BYTES / 1024
            ));
        }
        if rows.is_empty() {
            return Err(ConvertError::Empty);
        }
        let preamble = util::split_preamble(&mut rows);
        let mut md = String::new();
        for p in preamble {
            md.push_str(&p);
            md.push_str("\n\n");
        }
        md.push_str(&grid_table(&rows));
        if omitted > 0 {
            md.push_str(&format!(
                "\n_… {omitted} more rows omitted (limit {max_rows} rows)_\n"
            ));
            warnings.push(format!("cut at {max_rows} rows ({omitted} rows omitted)"));
        }
        Ok(Converted {
            markdown: md,
            warnings,
            ..Default::default()
        })
    }
}

/// `,` unless the first line has no comma but semicolons (European exports) or tabs.
fn sniff_delimiter(text: &str) -> u8 {
    let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let count = |c: char| first.matches(c).count();
    if count(',') > 0 {
        b','
    } else if count(';') > 0 {
        b';'
    } else if count('\t') > 0 {
        b'\t'
    } else {
        b','
    }
}
