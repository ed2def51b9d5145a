//! Page maps of paged sources (PDF pages, slides), and their stored form.

use serde::Serialize;

/// One page of a paged source (PDF page, slide): its number (from 1) and its byte range in
/// the document's Markdown. A document's page map lists them in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PageSpan {
    /// The page or slide number, from 1.
    pub page: u32,
    /// Byte offset of the page's start in the Markdown.
    pub byte_start: usize,
    /// Byte offset just past the page's end.
    pub byte_end: usize,
}

/// The page containing byte `offset` of a document, given its page map (`None` when the
/// document has no pages).
pub fn page_at(pages: &[PageSpan], offset: usize) -> Option<u32> {
    let last = pages.len().checked_sub(1)?;
    let i = pages.partition_point(|p| p.byte_end <= offset);
    Some(pages[i.min(last)].page)
}

/// A page map as stored: `page:start:end` triples joined by `,`.
pub fn encode_pages(pages: &[PageSpan]) -> String {
    pages
        .iter()
        .map(|p| format!("{}:{}:{}", p.page, p.byte_start, p.byte_end))
        .collect::<Vec<_>>()
        .join(",")
}

/// Parses [`encode_pages`]' output; malformed entries are dropped.
pub fn decode_pages(s: &str) -> Vec<PageSpan> {
    s.split(',')
        .filter_map(|t| {
            let mut it = t.split(':').map(|n| n.parse::<usize>().ok());
            Some(PageSpan {
                page: u32::try_from(it.next()??).ok()?,
                byte_start: it.next()??,
                byte_end: it.next()??,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_maps_round_trip_and_locate_offsets() {
        let pages = vec![
            PageSpan {
                page: 1,
                byte_start: 0,
                byte_end: 10,
            },
            PageSpan {
                page: 2,
                byte_start: 10,
                byte_end: 25,
            },
        ];
        assert_eq!(decode_pages(&encode_pages(&pages)), pages);
        assert_eq!(decode_pages(""), vec![]);
        assert_eq!(page_at(&pages, 0), Some(1));
        assert_eq!(page_at(&pages, 10), Some(2));
        assert_eq!(page_at(&pages, 400), Some(2));
        assert_eq!(page_at(&[], 3), None);
    }
}
