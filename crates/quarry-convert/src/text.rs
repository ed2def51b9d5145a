//! Text formats that need no parsing beyond decoding: TXT, MD, JSON.
//!
//! TXT falls back to Windows-1252 (old Latin-1 notes are common); Markdown must be UTF-8
//! since a wrong guess would corrupt its syntax silently; JSON is validated with `serde_json`
//! and pretty-printed in a fenced block so chunks keep its structure readable.

use crate::types::{ConvertError, ConvertOptions, Converted, Converter, Format};
use crate::util;

pub(crate) struct PlainText(pub Format);

impl Converter for PlainText {
    fn format(&self) -> Format {
        self.0
    }

    fn convert(&self, bytes: &[u8], _opts: &ConvertOptions) -> Result<Converted, ConvertError> {
        let format = self.0;
        if util::looks_binary(bytes) {
            return Err(ConvertError::NotText(match util::sniff(bytes) {
                Some(kind) => format!("looks like {kind}"),
                None => "binary data".to_owned(),
            }));
        }
        let body = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
        let mut warnings = Vec::new();
        let text = match std::str::from_utf8(body) {
            Ok(s) => s.to_owned(),
            Err(e) if format == Format::Txt => {
                let (t, enc) = util::decode_text(bytes);
                let _ = e;
                warnings.push(format!(
                    "not UTF-8; decoded as {}",
                    enc.unwrap_or("Windows-1252")
                ));
                t
            }
            Err(e) => {
                return Err(ConvertError::NotText(format!(
                    "invalid UTF-8 at byte {}",
                    e.valid_up_to()
                )));
            }
        };
        if text.trim().is_empty() {
            return Err(ConvertError::Empty);
        }
        match format {
            Format::Json => {
                let value: serde_json::Value =
                    serde_json::from_str(&text).map_err(|e| ConvertError::Corrupt {
                        format,
                        detail: format!(
                            "invalid JSON at line {}, column {}: {e}",
                            e.line(),
                            e.column()
                        ),
                    })?;
                let pretty = serde_json::to_string_pretty(&value).unwrap_or(text);
                let fence = fence_for(&pretty);
                Ok(Converted {
                    markdown: format!("{fence}json\n{pretty}\n{fence}\n"),
                    warnings,
                    ..Default::default()
                })
            }
            Format::Md => {
                let title = md_title(&text);
                Ok(Converted {
                    markdown: text,
                    title,
                    warnings,
                    ..Default::default()
                })
            }
            _ => Ok(Converted {
                markdown: text,
                warnings,
                ..Default::default()
            }),
        }
    }
}

/// The first `# ` heading outside code fences.
fn md_title(text: &str) -> Option<String> {
    let mut in_fence = false;
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with("```") || t.starts_with("~~~") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        if let Some(h) = t.strip_prefix("# ") {
            let h = h.trim().trim_end_matches('#').trim();
            if !h.is_empty() {
                return Some(h.to_owned());
            }
        }
    }
    None
}

/// A backtick fence longer than any run of backticks in `s`.
fn fence_for(s: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in s.chars() {
        if c == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    "`".repeat((longest + 1).max(3))
}
