//! Reading one file for indexing: binary and non-UTF-8 content refused with a reason, the
//! title, content hash and front matter taken out.

use std::fs;

use crate::scan::FileEntry;

/// Files larger than this are skipped with a warning unless configured otherwise.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// A file read and checked for indexing.
#[derive(Debug, Clone)]
pub struct LoadedFile {
    /// Markdown text with a leading BOM removed and CRLF normalised to LF.
    pub text: String,
    /// Hex SHA-256 of the raw bytes.
    pub hash: String,
    /// The document's title (its first heading, else the file name).
    pub title: String,
    /// Page map when the text was converted from a paged source (PDF, slides).
    pub pages: Vec<quarry_core::PageSpan>,
    /// Furniture: what the converter found, or a Markdown file's front matter.
    pub furniture: Vec<quarry_core::Furniture>,
    /// Its metadata fields, encoded (a Markdown file's front matter; `{}`: none).
    pub meta: String,
}

/// Why a file was not indexed. The message is shown to the user as-is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skip(pub String);

/// Reads and validates one file.
pub fn load(entry: &FileEntry, max_bytes: u64) -> Result<LoadedFile, Skip> {
    if entry.size > max_bytes {
        return Err(Skip(format!(
            "file is {} bytes, over the {max_bytes}-byte limit (QUARRY_MAX_FILE_BYTES)",
            entry.size
        )));
    }
    let bytes = fs::read(&entry.abs_path).map_err(|e| Skip(format!("cannot read: {e}")))?;
    decode(&bytes, &entry.rel_path)
}

/// Validates raw bytes as a Markdown/text document and extracts its title.
pub fn decode(bytes: &[u8], rel_path: &str) -> Result<LoadedFile, Skip> {
    let probe = &bytes[..bytes.len().min(8192)];
    if probe.contains(&0) {
        return Err(Skip("binary file (contains NUL bytes)".into()));
    }
    let hash = content_hash(bytes);
    let body = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let text = match std::str::from_utf8(body) {
        Ok(t) => t,
        Err(e) => {
            return Err(Skip(format!(
                "not valid UTF-8 (invalid byte at offset {})",
                e.valid_up_to()
            )));
        }
    };
    let text = if text.contains('\r') {
        text.replace("\r\n", "\n")
    } else {
        text.to_owned()
    };
    let title = extract_title(&text, rel_path);
    let mut furniture = Vec::new();
    let meta = front_matter_fields(&text, &mut furniture).encode();
    Ok(LoadedFile {
        text,
        hash,
        title,
        pages: Vec::new(),
        furniture,
        meta,
    })
}

/// A Markdown text's front matter fields; its range is added to `furniture` (first: it
/// starts the text), so it is neither chunked nor keyword-indexed.
pub fn front_matter_fields(
    text: &str,
    furniture: &mut Vec<quarry_core::Furniture>,
) -> quarry_metadata::Metadata {
    let Some(front) = quarry_metadata::front_matter(text) else {
        return quarry_metadata::Metadata::default();
    };
    furniture.retain(|f| f.byte_start >= front.end);
    furniture.insert(
        0,
        quarry_core::Furniture {
            kind: quarry_core::FurnitureKind::FrontMatter,
            byte_start: 0,
            byte_end: front.end,
        },
    );
    front.fields
}

/// Hex SHA-256 of `bytes`.
pub fn content_hash(bytes: &[u8]) -> String {
    quarry_core::sha256_hex(bytes)
}

/// Title: front-matter `title:`, else the first `# ` heading (outside code fences), else
/// the first heading of any level, else the file name without extension.
pub fn extract_title(text: &str, rel_path: &str) -> String {
    let mut lines = text.lines().peekable();
    if lines.peek().is_some_and(|l| l.trim() == "---") {
        lines.next();
        for line in lines.by_ref() {
            if line.trim() == "---" {
                break;
            }
            if let Some(v) = line.strip_prefix("title:") {
                let v = v.trim().trim_matches(|c| c == '"' || c == '\'').trim();
                if !v.is_empty() {
                    return v.to_owned();
                }
            }
        }
    }
    let mut in_fence = false;
    let mut first_any: Option<String> = None;
    for line in lines {
        let t = line.trim_start();
        if t.starts_with("```") || t.starts_with("~~~") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence || !t.starts_with('#') {
            continue;
        }
        let level = t.chars().take_while(|&c| c == '#').count();
        let rest = &t[level..];
        if level > 6 || !(rest.is_empty() || rest.starts_with(' ')) {
            continue;
        }
        let heading = rest.trim().trim_end_matches('#').trim();
        if heading.is_empty() {
            continue;
        }
        if level == 1 {
            return heading.to_owned();
        }
        first_any.get_or_insert_with(|| heading.to_owned());
    }
    first_any.unwrap_or_else(|| file_stem(rel_path))
}

fn file_stem(rel_path: &str) -> String {
    let name = rel_path.rsplit('/').next().unwrap_or(rel_path);
    match name.rfind('.') {
        Some(i) if i > 0 => name[..i].to_owned(),
        _ => name.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles() {
        assert_eq!(extract_title("# Hello\ntext", "a/b.md"), "Hello");
        assert_eq!(extract_title("intro\n## Sub\n# Main", "b.md"), "Main");
        assert_eq!(extract_title("intro\n## Sub\n", "b.md"), "Sub");
        assert_eq!(extract_title("```\n# not\n```\nplain", "dir/x.y.md"), "x.y");
        assert_eq!(
            extract_title("---\ntitle: \"Front\"\n---\n# H", "a.md"),
            "Front"
        );
        assert_eq!(extract_title("#hashtag only", "n.md"), "n");
    }

    #[test]
    fn decode_rejects_binary_and_bad_utf8() {
        assert!(decode(b"abc\0def", "x").unwrap_err().0.contains("binary"));
        let err = decode(b"ok \xff\xfe", "x").unwrap_err();
        assert!(
            err.0.contains("UTF-8") && err.0.contains("offset 3"),
            "{err:?}"
        );
        let ok = decode(b"\xEF\xBB\xBF# T\r\nline\r\n", "x").unwrap();
        assert_eq!(ok.text, "# T\nline\n");
        assert_eq!(ok.title, "T");
    }
}
