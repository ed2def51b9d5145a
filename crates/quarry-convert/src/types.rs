//! What every converter shares: the [`Format`]s, the [`Limits`], [`ConvertOptions`] and
//! [`Isolation`] they honour, what they produce ([`Converted`], [`Image`]), how they fail
//! ([`ConvertError`]), the [`Converter`] trait, and the cooperative [`Deadline`].

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::ocr::{self, DEFAULT_OCR_LANGUAGES};
use quarry_core::{PageSpan, page_at};

/// Formats Quarry converts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// PDF (`pdf_oxide`).
    Pdf,
    /// Word 2007+ document.
    Docx,
    /// Excel 2007+ workbook.
    Xlsx,
    /// Excel 97–2003 workbook.
    Xls,
    /// OpenDocument spreadsheet.
    Ods,
    /// PowerPoint 2007+ presentation.
    Pptx,
    /// Comma-separated values.
    Csv,
    /// Tab-separated values.
    Tsv,
    /// HTML page.
    Html,
    /// Plain text.
    Txt,
    /// Markdown.
    Md,
    /// JSON.
    Json,
}

impl Format {
    /// Every format.
    pub const ALL: [Format; 12] = [
        Format::Pdf,
        Format::Docx,
        Format::Xlsx,
        Format::Xls,
        Format::Ods,
        Format::Pptx,
        Format::Csv,
        Format::Tsv,
        Format::Html,
        Format::Txt,
        Format::Md,
        Format::Json,
    ];

    /// Lower-case name, also the usual extension (`pdf`, `docx`, `md`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Pdf => "pdf",
            Format::Docx => "docx",
            Format::Xlsx => "xlsx",
            Format::Xls => "xls",
            Format::Ods => "ods",
            Format::Pptx => "pptx",
            Format::Csv => "csv",
            Format::Tsv => "tsv",
            Format::Html => "html",
            Format::Txt => "txt",
            Format::Md => "md",
            Format::Json => "json",
        }
    }

    /// The format a file name's extension claims (case-insensitive), if Quarry converts it.
    pub fn from_file_name(name: &str) -> Option<Format> {
        let ext = name.rsplit_once('.')?.1.to_ascii_lowercase();
        Some(match ext.as_str() {
            "pdf" => Format::Pdf,
            "docx" => Format::Docx,
            "xlsx" | "xlsm" => Format::Xlsx,
            "xls" => Format::Xls,
            "ods" => Format::Ods,
            "pptx" => Format::Pptx,
            "csv" => Format::Csv,
            "tsv" | "tab" => Format::Tsv,
            "html" | "htm" | "xhtml" => Format::Html,
            "txt" | "text" | "log" => Format::Txt,
            "md" | "markdown" | "mdx" => Format::Md,
            "json" => Format::Json,
            _ => return None,
        })
    }

    /// MIME type served for originals of this format.
    pub fn mime(self) -> &'static str {
        match self {
            Format::Pdf => "application/pdf",
            Format::Docx => {
                "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
            }
            Format::Xlsx => "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
            Format::Xls => "application/vnd.ms-excel",
            Format::Ods => "application/vnd.oasis.opendocument.spreadsheet",
            Format::Pptx => {
                "application/vnd.openxmlformats-officedocument.presentationml.presentation"
            }
            Format::Csv => "text/csv; charset=utf-8",
            Format::Tsv => "text/tab-separated-values; charset=utf-8",
            Format::Html => "text/html; charset=utf-8",
            Format::Txt => "text/plain; charset=utf-8",
            Format::Md => "text/markdown; charset=utf-8",
            Format::Json => "application/json",
        }
    }

    /// Whether pages (PDF pages, slides) number the converted text.
    pub fn is_paged(self) -> bool {
        matches!(self, Format::Pdf | Format::Pptx)
    }
}

/// Bounds on one conversion. Defaults suit a shared server.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Input size ("exceeds 100 MB").
    pub max_bytes: u64,
    /// PDF pages / slides converted.
    pub max_pages: u32,
    /// Total bytes inflated from a zip container (DOCX, XLSX, PPTX, ODS): zip bombs.
    pub max_decompressed_bytes: u64,
    /// Rows kept per sheet or CSV file; the rest is summarised in one line.
    pub max_rows: usize,
    /// Markdown produced.
    pub max_output_bytes: usize,
    /// Wall time of one conversion.
    pub timeout: Duration,
    /// Address space of a conversion in a child process ([`Isolation::Child`]); 0 = no
    /// limit. In-process conversion cannot be bounded this way.
    pub max_memory_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bytes: 100 * 1024 * 1024,
            max_pages: 2_000,
            max_decompressed_bytes: 512 * 1024 * 1024,
            max_rows: 10_000,
            max_output_bytes: 64 * 1024 * 1024,
            timeout: Duration::from_secs(300),
            max_memory_bytes: 2 * 1024 * 1024 * 1024,
        }
    }
}

/// Why pages without a text layer were not read, and what would read them: OCR is off by
/// configuration, or `tesseract` is not installed.
pub fn ocr_advice(ocr: Ocr) -> &'static str {
    match ocr {
        Ocr::Off => "OCR is off (QUARRY_OCR=off or --ocr off); turn it on to read them",
        Ocr::Auto if !ocr::available() => {
            "install tesseract (Debian/Ubuntu: apt install tesseract-ocr), then retry the document to read them by OCR (quarry kb retry KB DOC, or the web UI's Retry; uploading the same bytes again is refused as a duplicate)"
        }
        Ocr::Auto => "OCR found no text on them",
    }
}

/// Whether pages without a text layer are OCR'd.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Ocr {
    /// Use `tesseract` when it is installed.
    #[default]
    Auto,
    /// Report such pages instead.
    Off,
}

#[derive(Debug, Clone)]
/// How a file is converted: limits, OCR, image URLs, where the converter runs.
pub struct ConvertOptions {
    /// Size, page, row, time and memory limits.
    pub limits: Limits,
    /// Whether pages without a text layer are OCR'd.
    pub ocr: Ocr,
    /// Tesseract's `-l` argument (`eng`, `eng+deu`, `chi_sim`); anything but letters, digits,
    /// `+` and `_` means `eng`.
    pub ocr_languages: String,
    /// Prefix of extracted images' URLs in the Markdown; the image's file name
    /// ([`Image::file_name`]) is appended.
    pub image_url_prefix: String,
    /// Where the converter runs: a child process keeps a crashing parser from taking the
    /// caller down.
    pub isolation: Isolation,
}

/// Where conversion runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Isolation {
    /// On a thread of this process (with a large stack). A parser that overflows even that
    /// stack or exhausts memory aborts the process: for library use and tests of converters.
    #[default]
    InProcess,
    /// In a child process: `program args…` must call [`child_main`](crate::child_main). What
    /// the `quarry` binary uses for every upload and folder file. The child's environment is
    /// `env` and nothing else (no secret of the caller reaches it): what it and `tesseract`
    /// need, such as `PATH`, locale and temp dir.
    Child {
        /// The binary to run (the `quarry` binary itself).
        program: PathBuf,
        /// Arguments that make it a converter child (`__convert`).
        args: Vec<String>,
        /// The child's whole environment.
        env: Vec<(OsString, OsString)>,
    },
}

impl Default for ConvertOptions {
    fn default() -> Self {
        ConvertOptions {
            limits: Limits::default(),
            ocr: Ocr::Auto,
            ocr_languages: DEFAULT_OCR_LANGUAGES.to_owned(),
            image_url_prefix: "/api/v1/files/images/".to_owned(),
            isolation: Isolation::InProcess,
        }
    }
}

/// An image extracted from a document, referenced from the Markdown as
/// `![alt](<image_url_prefix><file_name>)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    /// Hex SHA-256 of `bytes`.
    pub sha256: String,
    /// `<sha256>.<ext>`.
    pub file_name: String,
    /// The image's content type.
    pub mime: String,
    /// The image's bytes.
    pub bytes: Vec<u8>,
}

/// The result of a conversion.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Converted {
    /// The document as Markdown.
    pub markdown: String,
    /// The document's own title (PDF metadata, DOCX core properties, first heading, HTML
    /// `<title>`), when it has one.
    pub title: Option<String>,
    /// Page map for paged sources, in order, covering the Markdown; empty otherwise.
    pub pages: Vec<PageSpan>,
    /// Tables of contents, indexes, running headers and footers, page numbers: kept in the
    /// Markdown, kept out of the passages that compete for answers. Sorted, not overlapping.
    pub furniture: Vec<quarry_core::Furniture>,
    /// Images extracted from it, referenced from the Markdown.
    pub images: Vec<Image>,
    /// Pages (from 1) that had no text layer and were not OCR'd.
    pub pages_without_text: Vec<u32>,
    /// Pages that were OCR'd.
    pub pages_ocred: Vec<u32>,
    /// Things a person should know that did not stop the conversion ("sheet 'Data' cut at
    /// 10,000 rows").
    pub warnings: Vec<String>,
    /// The document's own properties (author, dates, keywords…), when it sets them.
    pub properties: DocProperties,
}

/// A document's own properties (Office `docProps/core.xml`, a PDF's Info dictionary or XMP
/// metadata, HTML `<meta>`), when set. Strings are trimmed, runs of whitespace collapsed, each
/// cut at 1,000 characters; empty values are absent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DocProperties {
    /// Title (`dc:title`, PDF `/Title`), as the document sets it; [`Converted::title`] is
    /// the title shown, which may come from a heading instead.
    pub title: Option<String>,
    /// Author (`dc:creator`, PDF `/Author`, HTML `<meta name="author">`).
    pub author: Option<String>,
    /// Subject (`dc:subject`, PDF `/Subject`).
    pub subject: Option<String>,
    /// Keywords (`cp:keywords`, PDF `/Keywords`, HTML `<meta name="keywords">`), split on
    /// `,` and `;`, trimmed, without empties or repeats; at most 50.
    pub keywords: Vec<String>,
    /// When it was created, RFC 3339 in UTC (`2024-05-01T08:00:00Z`): `dcterms:created`,
    /// PDF `/CreationDate`. Absent when unset or unparsable.
    pub created: Option<String>,
    /// When it was last modified, RFC 3339 in UTC: `dcterms:modified`, PDF `/ModDate`.
    pub modified: Option<String>,
}

impl DocProperties {
    /// Whether no property is set.
    pub fn is_empty(&self) -> bool {
        *self == DocProperties::default()
    }
}

impl Converted {
    /// The page containing byte `offset` of the Markdown (paged sources only).
    pub fn page_at(&self, offset: usize) -> Option<u32> {
        page_at(&self.pages, offset)
    }
}

/// Why a file could not be converted. `Display` is the reason shown to people.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConvertError {
    #[error("unsupported file type {0:?}")]
    /// The file's type is not one Quarry converts.
    Unsupported(String),
    #[error("not a {} file{}", .expected.as_str().to_uppercase(), .detail.as_ref().map(|d| format!(" ({d})")).unwrap_or_default())]
    /// The bytes are not the format the name says.
    WrongFormat {
        /// The format the name says.
        expected: Format,
        /// What was found instead, when known.
        detail: Option<String>,
    },
    #[error("encrypted {}", .0.as_str().to_uppercase())]
    /// The file is encrypted.
    Encrypted(Format),
    #[error("corrupt {}: {detail}", .format.as_str().to_uppercase())]
    /// The file is damaged.
    Corrupt {
        /// The file's format.
        format: Format,
        /// What the parser said.
        detail: String,
    },
    #[error("empty file")]
    /// The file is empty.
    Empty,
    #[error("exceeds {} MB", .limit / (1024 * 1024))]
    /// The file is larger than the size limit.
    TooLarge {
        /// The limit in bytes.
        limit: u64,
    },
    #[error("has {pages} pages, more than the limit of {limit}")]
    /// More pages than the page limit.
    TooManyPages {
        /// Pages the file has.
        pages: u32,
        /// The limit.
        limit: u32,
    },
    #[error("decompresses to more than {} MB (zip bomb?)", .limit / (1024 * 1024))]
    /// A container decompresses past the limit.
    DecompressionBomb {
        /// The limit in bytes.
        limit: u64,
    },
    #[error("no text layer on {}: {}", describe_pages(.pages), ocr_advice(*.ocr))]
    /// Pages without a text layer, and no OCR: says what would read them (a person sees
    /// "no text layer" with no way to know that OCR exists, or why it did not run).
    NoText {
        /// The pages (from 1) without text.
        pages: Vec<u32>,
        /// The OCR setting the conversion ran with.
        ocr: Ocr,
    },
    #[error("conversion took longer than {} s", .0.as_secs())]
    /// The conversion ran past its time limit.
    Timeout(Duration),
    #[error("not valid text: {0}")]
    /// A text file that is not valid text (binary, unknown encoding).
    NotText(String),
    #[error("nests too deeply to convert (deeper than the {} reader takes)", .0.as_str().to_uppercase())]
    /// The file nests deeper than the reader allows (its stack, or a limit checked first).
    TooDeep(Format),
    #[error("needs more than {} MB of memory to convert", .limit / (1024 * 1024))]
    /// The converter child ran out of its address space.
    OutOfMemory {
        /// The converter's address-space limit in bytes.
        limit: u64,
    },
    #[error("too large when decompressed (a compressed stream inflates past the safety limit)")]
    /// A compressed stream inflates past the safety limit.
    TooLargeDecompressed,
    /// A reason already in words: from a child process, or a converter's own.
    #[error("{0}")]
    Failed(String),
}

/// "page 3", "pages 3–9", "pages 1, 3–9".
pub fn describe_pages(pages: &[u32]) -> String {
    let mut ranges: Vec<(u32, u32)> = Vec::new();
    for &p in pages {
        match ranges.last_mut() {
            Some((_, end)) if *end + 1 == p => *end = p,
            _ => ranges.push((p, p)),
        }
    }
    let parts: Vec<String> = ranges
        .iter()
        .map(|&(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}–{b}")
            }
        })
        .collect();
    let word = if pages.len() == 1 { "page" } else { "pages" };
    format!("{word} {}", parts.join(", "))
}

/// One format's converter.
pub trait Converter: Send + Sync {
    /// The format it converts.
    fn format(&self) -> Format;
    /// Converts `bytes` to Markdown within `opts`' limits.
    fn convert(&self, bytes: &[u8], opts: &ConvertOptions) -> Result<Converted, ConvertError>;
}

/// Runs `f`, turning a panic into [`ConvertError::Corrupt`].
pub(crate) fn catch_panic(
    format: Format,
    f: impl FnOnce() -> Result<Converted, ConvertError>,
) -> Result<Converted, ConvertError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|panic| {
        let msg = panic
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "parser failure".to_owned());
        Err(ConvertError::Corrupt {
            format,
            detail: format!("the file could not be parsed ({msg})"),
        })
    })
}

/// A cooperative wall-time budget, checked between pages, slides, rows and parts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deadline {
    at: Option<Instant>,
    timeout: Duration,
}

impl Deadline {
    pub(crate) fn new(limits: &Limits) -> Deadline {
        Deadline {
            at: Instant::now().checked_add(limits.timeout),
            timeout: limits.timeout,
        }
    }

    pub(crate) fn check(&self) -> Result<(), ConvertError> {
        match self.at {
            Some(at) if Instant::now() >= at => Err(ConvertError::Timeout(self.timeout)),
            _ => Ok(()),
        }
    }
}
