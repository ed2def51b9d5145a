//! Markdown-aware chunking: the unit of embedding and of citation.
//!
//! A document is first cut into *blocks*: a fenced code block (```` ``` ```` or `~~~`, up to
//! its closing fence) is one block and is never cut; otherwise a blank line ends a block and a
//! heading starts a new one. Blocks are packed greedily into chunks of at most `max_size`
//! (measured by a [`Sizer`]: characters, or tokens of the embedding model). A heading closes
//! the current chunk once it is half full, so sections start chunks. Each chunk repeats the
//! trailing blocks of the previous one up to `overlap`. A block larger than `max_size` that is
//! not code is split at line, then sentence, then character boundaries; an oversized code block
//! becomes a chunk of its own, larger than `max_size`, rather than being cut.
//!
//! Every chunk records its byte range in the document and its 1-based line range, so a result
//! can cite `path:line`.

/// Measures text in the unit chunk sizes are given in.
pub trait Sizer {
    fn size(&self, text: &str) -> usize;
}

/// Sizes in Unicode scalar values (the RAG seed's 1000/200 characters).
pub struct CharSizer;

impl Sizer for CharSizer {
    fn size(&self, text: &str) -> usize {
        text.chars().count()
    }
}

impl<F: Fn(&str) -> usize> Sizer for F {
    fn size(&self, text: &str) -> usize {
        self(text)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkOptions {
    pub max_size: usize,
    pub overlap: usize,
}

impl ChunkOptions {
    /// QMD's defaults in tokens: ~900 with 15 % overlap.
    pub const QMD_TOKENS: ChunkOptions = ChunkOptions {
        max_size: 900,
        overlap: 135,
    };
    /// The RAG seed's defaults in characters: 1000 with 200 overlap.
    pub const RAG_CHARS: ChunkOptions = ChunkOptions {
        max_size: 1000,
        overlap: 200,
    };
}

/// A span of a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// Byte range in the document text.
    pub start: usize,
    pub end: usize,
    /// 1-based, inclusive line range.
    pub line_start: usize,
    pub line_end: usize,
}

impl Chunk {
    pub fn text<'a>(&self, doc: &'a str) -> &'a str {
        &doc[self.start..self.end]
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BlockKind {
    Heading,
    Code,
    Text,
}

#[derive(Debug, Clone, Copy)]
struct Block {
    start: usize,
    end: usize,
    kind: BlockKind,
}

fn is_heading(line: &str) -> bool {
    let t = line.trim_start();
    let hashes = t.bytes().take_while(|&b| b == b'#').count();
    (1..=6).contains(&hashes) && (t.len() == hashes || t[hashes..].starts_with([' ', '\t']))
}

fn fence_marker(line: &str) -> Option<&str> {
    let t = line.trim_start();
    if t.starts_with("```") {
        Some("```")
    } else if t.starts_with("~~~") {
        Some("~~~")
    } else {
        None
    }
}

/// Splits `text` into blocks (see module docs). Blank lines between blocks belong to no block.
fn blocks(text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut cur: Option<Block> = None;
    let mut fence: Option<&str> = None;
    let mut pos = 0;
    for line in text.split_inclusive('\n') {
        let (start, end) = (pos, pos + line.len());
        pos = end;
        let content = line.trim_end_matches(['\n', '\r']);
        if let Some(marker) = fence {
            if let Some(b) = cur.as_mut() {
                b.end = end;
            }
            if content.trim_start().starts_with(marker) {
                fence = None;
                out.extend(cur.take());
            }
            continue;
        }
        if let Some(marker) = fence_marker(content) {
            out.extend(cur.take());
            fence = Some(marker);
            cur = Some(Block {
                start,
                end,
                kind: BlockKind::Code,
            });
            continue;
        }
        if content.trim().is_empty() {
            out.extend(cur.take());
            continue;
        }
        if is_heading(content) {
            out.extend(cur.take());
            out.push(Block {
                start,
                end,
                kind: BlockKind::Heading,
            });
            continue;
        }
        match cur.as_mut() {
            Some(b) if b.kind == BlockKind::Text => b.end = end,
            _ => {
                out.extend(cur.take());
                cur = Some(Block {
                    start,
                    end,
                    kind: BlockKind::Text,
                });
            }
        }
    }
    // An unclosed fence runs to the end of the document.
    out.extend(cur);
    out
}

/// Splits an oversized text block at line, sentence, then char boundaries into pieces of at
/// most `max` (by `sizer`).
fn split_block(text: &str, base: usize, max: usize, sizer: &dyn Sizer, out: &mut Vec<Block>) {
    if sizer.size(text) <= max || text.chars().count() <= 1 {
        out.push(Block {
            start: base,
            end: base + text.len(),
            kind: BlockKind::Text,
        });
        return;
    }
    // Candidate cut points, best first: after newlines, after sentence ends, any char.
    let cuts = |pred: &dyn Fn(usize, char) -> bool| -> Vec<usize> {
        text.char_indices()
            .filter(|&(i, c)| pred(i, c))
            .map(|(i, c)| i + c.len_utf8())
            .filter(|&i| i < text.len())
            .collect()
    };
    let strategies: [Vec<usize>; 3] = [
        cuts(&|_, c| c == '\n'),
        cuts(&|_, c| matches!(c, '.' | '!' | '?' | '。' | '！' | '？' | '；' | ';')),
        cuts(&|_, _| true),
    ];
    for points in strategies {
        if points.is_empty() {
            continue;
        }
        // Greedy: the furthest cut that keeps the piece within `max`.
        let mut start = 0;
        let mut pieces = Vec::new();
        let mut ok = true;
        while start < text.len() {
            if sizer.size(&text[start..]) <= max {
                pieces.push((start, text.len()));
                break;
            }
            let best = points
                .iter()
                .copied()
                .filter(|&p| p > start)
                .take_while(|&p| sizer.size(&text[start..p]) <= max)
                .last();
            match best {
                Some(p) => {
                    pieces.push((start, p));
                    start = p;
                }
                None => {
                    ok = false;
                    break;
                }
            }
        }
        if ok {
            for (s, e) in pieces {
                split_block(&text[s..e], base + s, max, sizer, out);
            }
            return;
        }
    }
    out.push(Block {
        start: base,
        end: base + text.len(),
        kind: BlockKind::Text,
    });
}

/// Chunks a Markdown document. Empty or whitespace-only documents give no chunks.
pub fn chunk_markdown(text: &str, opts: ChunkOptions, sizer: &dyn Sizer) -> Vec<Chunk> {
    let max = opts.max_size.max(1);
    let overlap = opts.overlap.min(max / 2);
    let mut pieces = Vec::new();
    for b in blocks(text) {
        if b.kind == BlockKind::Text && sizer.size(&text[b.start..b.end]) > max {
            split_block(&text[b.start..b.end], b.start, max, sizer, &mut pieces);
        } else {
            pieces.push(b);
        }
    }
    let size_of =
        |from: usize, to: usize| sizer.size(&text[pieces[from].start..pieces[to - 1].end]);
    let mut spans: Vec<(usize, usize)> = Vec::new(); // piece index ranges [from, to)
    let mut from = 0;
    while from < pieces.len() {
        let mut to = from + 1;
        while to < pieces.len() {
            let next = pieces[to];
            if size_of(from, to + 1) > max {
                break;
            }
            // A heading starts a new chunk once the current one is half full.
            if next.kind == BlockKind::Heading && size_of(from, to) * 2 >= max {
                break;
            }
            to += 1;
        }
        spans.push((from, to));
        if to >= pieces.len() {
            break;
        }
        // Overlap: restart at the earliest trailing piece whose suffix fits in `overlap`,
        // but always make progress.
        let mut next_from = to;
        while next_from > from + 1 && overlap > 0 && size_of(next_from - 1, to) <= overlap {
            next_from -= 1;
        }
        from = next_from.max(from + 1);
    }
    spans
        .into_iter()
        .map(|(f, t)| {
            let (start, end) = (pieces[f].start, pieces[t - 1].end);
            Chunk {
                start,
                end,
                line_start: line_of(text, start),
                line_end: line_of(text, end.saturating_sub(1).max(start)),
            }
        })
        .collect()
}

/// 1-based line number of byte offset `at`.
fn line_of(text: &str, at: usize) -> usize {
    text.as_bytes()[..at.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks(text: &str, max: usize, overlap: usize) -> Vec<String> {
        chunk_markdown(
            text,
            ChunkOptions {
                max_size: max,
                overlap,
            },
            &CharSizer,
        )
        .iter()
        .map(|c| c.text(text).to_owned())
        .collect()
    }

    #[test]
    fn code_fences_are_never_cut() {
        let code = "```rust\nfn a() {}\n\nfn b() {}\n# not a heading\n```\n";
        let text = format!("intro line\n\n{code}\nafter\n");
        for max in [5, 20, 40, 1000] {
            let cs = chunks(&text, max, 0);
            let holding: Vec<&String> = cs.iter().filter(|c| c.contains("fn a")).collect();
            assert!(
                holding.iter().any(|c| c.contains(code.trim_end())),
                "max {max}: {cs:?}"
            );
            for c in &cs {
                let fences = c.matches("```").count();
                assert!(fences % 2 == 0, "max {max}: a fence was cut: {c:?}");
            }
        }
    }

    #[test]
    fn headings_start_chunks() {
        let text = "# A\n\naaaa aaaa aaaa aaaa\n\n# B\n\nbbbb bbbb bbbb bbbb\n";
        let cs = chunks(text, 30, 0);
        assert_eq!(
            cs,
            [
                "# A\n\naaaa aaaa aaaa aaaa\n",
                "# B\n\nbbbb bbbb bbbb bbbb\n"
            ]
        );
    }

    #[test]
    fn offsets_and_lines_cite_the_document() {
        let text = "# T\n\npara one\nstill one\n\npara two\n\n## Sub\n\npara three\n";
        let opts = ChunkOptions {
            max_size: 25,
            overlap: 0,
        };
        for c in chunk_markdown(text, opts, &CharSizer) {
            let lines: Vec<&str> = text.lines().collect();
            let first = lines[c.line_start - 1];
            assert!(c.text(text).starts_with(first), "{c:?}");
            let last = lines[c.line_end - 1];
            assert!(c.text(text).trim_end().ends_with(last), "{c:?}");
        }
    }

    #[test]
    fn overlap_repeats_trailing_blocks() {
        let text = "one one one\n\ntwo two two\n\nthree three\n\nfour four four\n";
        let cs = chunks(text, 30, 15);
        assert!(cs.len() >= 2, "{cs:?}");
        for pair in cs.windows(2) {
            let tail = pair[0].trim_end().rsplit("\n\n").next().unwrap_or_default();
            assert!(pair[1].starts_with(tail), "{pair:?}");
        }
        let total: usize = chunks(text, 30, 0).iter().map(String::len).sum();
        assert!(total <= text.len());
    }

    #[test]
    fn long_paragraphs_split_at_sentences_then_chars() {
        let text = "First sentence here. Second sentence here. Third one here.";
        let cs = chunks(text, 25, 0);
        assert!(cs.iter().all(|c| c.chars().count() <= 25), "{cs:?}");
        assert_eq!(cs.concat(), text);
        let cjk = "机器学习是人工智能的一个分支。深度学习使用多层神经网络。".repeat(3);
        let cs = chunks(&cjk, 20, 0);
        assert!(cs.iter().all(|c| c.chars().count() <= 20), "{cs:?}");
        assert_eq!(cs.concat(), cjk);
        assert!(cs[0].ends_with('。'));
    }

    #[test]
    fn token_sizer_and_empty_documents() {
        let words = |s: &str| s.split_whitespace().count();
        let text = "a b c d e f g h i j k l m n o p";
        let cs = chunk_markdown(
            text,
            ChunkOptions {
                max_size: 5,
                overlap: 0,
            },
            &words,
        );
        assert!(cs.iter().all(|c| words(c.text(text)) <= 5));
        assert!(chunks("", 10, 2).is_empty());
        assert!(chunks("\n\n  \n", 10, 2).is_empty());
    }
}
