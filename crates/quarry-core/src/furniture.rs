//! Furniture: the stretches of a document's Markdown that are not body text, and their
//! stored form.

use serde::Serialize;

/// What a stretch of a document's Markdown is when it is not body text a question could be
/// answered from: kept in the Markdown (a person reading the document sees it), kept out of
/// the passages that compete for answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FurnitureKind {
    /// A table of contents (or list of tables/figures).
    Contents,
    /// A back-of-book index.
    Index,
    /// A line repeated at the top of many pages ("Debian 参考手册 72 / 223").
    RunningHeader,
    /// A line repeated at the bottom of many pages.
    RunningFooter,
    /// A page number on a line of its own.
    PageNumber,
    /// Other repeated boilerplate (navigation, cookie banners, legal footers).
    Boilerplate,
    /// A Markdown document's front matter: its fields are the document's metadata, its
    /// text is neither chunked nor keyword-indexed.
    FrontMatter,
}

impl FurnitureKind {
    /// The kind's name as stored (`contents`, `running_header` …).
    pub fn as_str(self) -> &'static str {
        match self {
            FurnitureKind::Contents => "contents",
            FurnitureKind::Index => "index",
            FurnitureKind::RunningHeader => "running_header",
            FurnitureKind::RunningFooter => "running_footer",
            FurnitureKind::PageNumber => "page_number",
            FurnitureKind::Boilerplate => "boilerplate",
            FurnitureKind::FrontMatter => "front_matter",
        }
    }

    /// The kind named `s`.
    pub fn parse(s: &str) -> Option<FurnitureKind> {
        Some(match s {
            "contents" => FurnitureKind::Contents,
            "index" => FurnitureKind::Index,
            "running_header" => FurnitureKind::RunningHeader,
            "running_footer" => FurnitureKind::RunningFooter,
            "page_number" => FurnitureKind::PageNumber,
            "boilerplate" => FurnitureKind::Boilerplate,
            "front_matter" => FurnitureKind::FrontMatter,
            _ => return None,
        })
    }
}

/// A byte range of a document's Markdown that is [`FurnitureKind`] furniture. A document's
/// furniture list is sorted by `byte_start` and its ranges do not overlap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Furniture {
    /// What the range holds.
    pub kind: FurnitureKind,
    /// Byte offset of the range's start.
    pub byte_start: usize,
    /// Byte offset just past the range's end.
    pub byte_end: usize,
}

/// `body` as the keyword indexes hold it: a leading front matter blanked (each of its
/// characters but line breaks replaced by as many spaces as it has bytes), so its words are
/// not indexed while every byte offset and line number — chunks', passages' — stays valid.
pub fn into_indexed_body(body: String, furniture: &[Furniture]) -> String {
    let end = match furniture.first() {
        Some(f) if f.kind == FurnitureKind::FrontMatter && f.byte_start == 0 => f.byte_end,
        _ => return body,
    };
    let Some(front) = body.get(..end) else {
        return body;
    };
    let mut out = String::with_capacity(body.len());
    for c in front.chars() {
        if c == '\n' {
            out.push('\n');
        } else {
            out.extend(std::iter::repeat_n(' ', c.len_utf8()));
        }
    }
    out.push_str(&body[end..]);
    out
}

/// A furniture list as stored: `kind:start:end` triples joined by `,`.
pub fn encode_furniture(spans: &[Furniture]) -> String {
    spans
        .iter()
        .map(|f| format!("{}:{}:{}", f.kind.as_str(), f.byte_start, f.byte_end))
        .collect::<Vec<_>>()
        .join(",")
}

/// Parses [`encode_furniture`]'s output; malformed entries are dropped.
pub fn decode_furniture(s: &str) -> Vec<Furniture> {
    s.split(',')
        .filter_map(|t| {
            let mut it = t.split(':');
            let kind = FurnitureKind::parse(it.next()?)?;
            Some(Furniture {
                kind,
                byte_start: it.next()?.parse().ok()?,
                byte_end: it.next()?.parse().ok()?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn front_matter_is_blanked_in_place() {
        let body = "---\ntitle: Café\n---\n# Body\n".to_owned();
        let front = Furniture {
            kind: FurnitureKind::FrontMatter,
            byte_start: 0,
            byte_end: 21,
        };
        let kept = into_indexed_body(body.clone(), &[front]);
        assert_eq!(kept.len(), body.len());
        assert_eq!(kept, "   \n            \n   \n# Body\n");
        assert_eq!(into_indexed_body(body.clone(), &[]), body);
    }

    #[test]
    fn furniture_lists_round_trip() {
        let spans = vec![
            Furniture {
                kind: FurnitureKind::Contents,
                byte_start: 0,
                byte_end: 40,
            },
            Furniture {
                kind: FurnitureKind::RunningHeader,
                byte_start: 90,
                byte_end: 120,
            },
        ];
        assert_eq!(decode_furniture(&encode_furniture(&spans)), spans);
        assert_eq!(decode_furniture(""), vec![]);
        assert_eq!(decode_furniture("toc:1:2,index:3:x"), vec![]);
    }
}
