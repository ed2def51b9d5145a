//! Markdown-aware chunking: the unit of embedding and of citation.
//!
//! A document is first cut into *blocks*: a fenced code block (```` ``` ```` or `~~~`, up to
//! its closing fence) is one block and is never cut inside a page; otherwise a blank line ends a
//! block and a heading starts a new one.
//!
//! **Regions.** Each page or slide of a paged source ([`Layout::pages`]) is a region of its own,
//! and [`Furniture`] (tables of contents, indexes, running headers and footers, page numbers,
//! boilerplate) is cut out of the regions. Chunks are packed inside one region, so a chunk never
//! spans two pages (its `page` is where all of its text is) and never contains furniture. A chunk
//! is one byte range, so it never spans across a skipped range either: the text before and after
//! a running header or a table of contents is never glued into one passage. A code fence that
//! runs across a page break is cut there (the page rule wins; each part stays whole on its page).
//! A chunk of nothing but headings (a heading at the foot of a page, or one whose text does not
//! fit beside it) is dropped when the next chunk's heading path carries it; a slide of nothing
//! but its title keeps its chunk.
//!
//! **Packing.** Blocks are packed greedily into chunks of at most `max_size` (measured by a
//! [`Sizer`]: characters, or tokens of the embedding model). A heading closes the current chunk
//! once it is half full, so sections start chunks, and a chunk does not end with a heading that
//! has text after it in the region (the heading goes with its text). A text block larger than
//! `max_size − overlap` is split at line, sentence, clause, word, then character boundaries, so
//! that the overlap plus one piece always fits: a chunk is larger than `max_size` only when it is
//! a code block that is.
//!
//! **Overlap.** Each chunk repeats the end of the previous one, as close to `overlap` as the text
//! allows: the trailing whole blocks when they come to ¾ of it, else the earliest line, sentence,
//! clause or word start (or a position next to a CJK character, whose text has no spaces) whose
//! tail fits. It never starts inside a word, a UTF-8 character or a code block. No overlap
//! crosses a region (page) boundary, and none is added before a heading that starts a chunk: a
//! section starts clean, so its passage and its heading path are its own.
//!
//! **Heading path.** Every chunk carries the path of headings it sits under
//! (`3 The Root Filesystem › 3.15 /tmp : Temporary files`), from the headings before its first
//! body text, those of earlier chunks included (headings inside furniture are ignored).
//! A numbered title in bold on a line of its own (`**3.18. /tmp : Temporary files**`) counts as
//! a heading. Numbered headings (`3.15`, `Chapter 2`, `第 2 章`) nest by their numbers, because
//! converters guess Markdown levels from font sizes; an unnumbered heading nests by level, under
//! the current numbered section. A bare `Chapter 1` directly followed by a heading is one entry
//! with it (`Chapter 1 GNU/Linux 教程`).
//!
//! Every chunk records its byte range in the document and its 1-based line range, so a result
//! can cite `path:line`.
//!
//! **Limits.** Converters run in child processes that are killed past their time and memory;
//! the chunker runs in the server's own process, so [`chunk_document_bounded`] keeps to its
//! [`ChunkLimits`] itself: its loops check the clock, and the working data it builds (blocks,
//! line index, heading paths, pieces, chunks) is counted as it grows. A document past either
//! is not cut ([`ChunkError`]); its time is linear in the document, so only a pathological
//! document or a starved machine meets them.

use std::cell::Cell;
use std::fmt;
use std::time::{Duration, Instant};

use quarry_core::{Furniture, PageSpan};

/// Measures text in the unit chunk sizes are given in.
pub trait Sizer {
    /// The size of `text` in this unit.
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
/// Chunk size and overlap, in a [`Sizer`]'s unit.
pub struct ChunkOptions {
    /// Largest chunk.
    pub max_size: usize,
    /// How much of the previous chunk a chunk repeats, at most.
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

/// Bounds on cutting one document (module docs, **Limits**). The default suits a shared
/// server: 60 s and 1 GiB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkLimits {
    /// Wall time of one document's cut; `None`: no limit.
    pub timeout: Option<Duration>,
    /// Bytes the cut's working data may hold at once (counted as its vectors and strings
    /// grow: about 40 bytes a line, 30 a block, 100 a chunk, plus heading paths); `None`: no
    /// limit.
    pub max_memory_bytes: Option<u64>,
}

impl ChunkLimits {
    /// No limit: what [`chunk_document`] cuts with.
    pub const NONE: ChunkLimits = ChunkLimits {
        timeout: None,
        max_memory_bytes: None,
    };
}

impl Default for ChunkLimits {
    fn default() -> Self {
        ChunkLimits {
            timeout: Some(Duration::from_secs(60)),
            max_memory_bytes: Some(1 << 30),
        }
    }
}

/// Why a document was not cut: it ran past a [`ChunkLimits`] bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChunkError {
    /// The cut ran past [`ChunkLimits::timeout`] (the limit).
    Timeout(Duration),
    /// Its working data grew past [`ChunkLimits::max_memory_bytes`].
    OutOfMemory {
        /// The limit in bytes.
        limit: u64,
    },
}

impl fmt::Display for ChunkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChunkError::Timeout(t) if t.as_secs() > 0 || t.is_zero() => write!(
                f,
                "chunking took longer than {} s (QUARRY_CHUNK_TIMEOUT_SECS)",
                t.as_secs()
            ),
            ChunkError::Timeout(t) => write!(
                f,
                "chunking took longer than {} ms (QUARRY_CHUNK_TIMEOUT_SECS)",
                t.as_millis()
            ),
            ChunkError::OutOfMemory { limit } if *limit >= 1 << 20 => write!(
                f,
                "chunking needs more than {} MB of memory (QUARRY_CHUNK_MEMORY_MB)",
                limit >> 20
            ),
            ChunkError::OutOfMemory { limit } => write!(
                f,
                "chunking needs more than {limit} bytes of memory (QUARRY_CHUNK_MEMORY_MB)"
            ),
        }
    }
}

impl std::error::Error for ChunkError {}

/// [`ChunkLimits`] applied to one cut: its deadline, and the bytes its working data holds.
struct Budget {
    deadline: Option<(Instant, Duration)>,
    max_bytes: u64,
    held: Cell<u64>,
    ticks: Cell<u32>,
}

/// Steps of a cheap loop between two looks at the clock.
const TICKS_PER_CHECK: u32 = 64;

impl Budget {
    fn new(limits: &ChunkLimits) -> Budget {
        Budget {
            deadline: limits
                .timeout
                .and_then(|t| Some((Instant::now().checked_add(t)?, t))),
            max_bytes: limits.max_memory_bytes.unwrap_or(u64::MAX),
            held: Cell::new(0),
            ticks: Cell::new(0),
        }
    }

    /// Fails once the deadline has passed.
    fn check_time(&self) -> Result<(), ChunkError> {
        match self.deadline {
            Some((at, timeout)) if Instant::now() >= at => Err(ChunkError::Timeout(timeout)),
            _ => Ok(()),
        }
    }

    /// [`Budget::check_time`] on every [`TICKS_PER_CHECK`]th call (the first included): for
    /// the steps of loops, each of which is short.
    fn tick(&self) -> Result<(), ChunkError> {
        let n = self.ticks.get();
        self.ticks.set(n.wrapping_add(1));
        if n.is_multiple_of(TICKS_PER_CHECK) {
            self.check_time()
        } else {
            Ok(())
        }
    }

    /// Counts `bytes` more of working data; fails past the limit.
    fn take(&self, bytes: usize) -> Result<(), ChunkError> {
        let held = self.held.get().saturating_add(bytes as u64);
        self.held.set(held);
        if held > self.max_bytes {
            return Err(ChunkError::OutOfMemory {
                limit: self.max_bytes,
            });
        }
        Ok(())
    }

    /// Counts `bytes` of working data freed.
    fn give(&self, bytes: usize) {
        self.held.set(self.held.get().saturating_sub(bytes as u64));
    }

    /// Brings what `v`'s allocation is counted at (`*counted`, in bytes) up to its capacity.
    fn hold<T>(&self, counted: &mut usize, v: &Vec<T>) -> Result<(), ChunkError> {
        let now = v.capacity() * std::mem::size_of::<T>();
        if now > *counted {
            let more = now - *counted;
            *counted = now;
            self.take(more)?;
        }
        Ok(())
    }
}

/// Where a document's pages lie and which of its byte ranges are furniture (both empty for a
/// plain Markdown file). Ranges out of bounds or off character boundaries are tolerated.
#[derive(Debug, Clone, Copy, Default)]
pub struct Layout<'a> {
    /// The page map (empty for unpaged text).
    pub pages: &'a [PageSpan],
    /// The furniture ranges, sorted (empty when none).
    pub furniture: &'a [Furniture],
}

/// Separates the headings of a [`Chunk::heading`] path.
pub const HEADING_SEPARATOR: &str = " › ";
/// A heading longer than this (in characters) is shortened in paths.
const MAX_HEADING_CHARS: usize = 120;
/// A path longer than this loses its outermost headings.
const MAX_PATH_CHARS: usize = 300;

/// A span of a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// Byte range in the document text.
    pub start: usize,
    /// Byte offset just past the chunk's end.
    pub end: usize,
    /// 1-based, inclusive line range.
    pub line_start: usize,
    /// Last line (1-based, inclusive).
    pub line_end: usize,
    /// The page or slide all of the chunk's text is on (paged sources).
    pub page: Option<u32>,
    /// The headings the chunk sits under, outermost first, joined by [`HEADING_SEPARATOR`];
    /// empty before the first heading.
    pub heading: String,
}

impl Chunk {
    /// The chunk's text in `doc` (the text it was cut from).
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
/// The blocks' memory stays counted in `budget` (`*counted` bytes).
fn blocks(text: &str, budget: &Budget, counted: &mut usize) -> Result<Vec<Block>, ChunkError> {
    let mut out = Vec::new();
    let mut cur: Option<Block> = None;
    let mut fence: Option<&str> = None;
    let mut pos = 0;
    for line in text.split_inclusive('\n') {
        budget.tick()?;
        budget.hold(counted, &out)?;
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
    budget.hold(counted, &out)?;
    // A numbered title set in bold on a line of its own is a heading (converters of PDF and
    // DOCX often give section titles no `#`).
    for b in &mut out {
        budget.tick()?;
        if b.kind == BlockKind::Text && is_bold_title(&text[b.start..b.end]) {
            b.kind = BlockKind::Heading;
        }
    }
    Ok(out)
}

/// `**3.18. /tmp : Temporary files**` alone on its line: bold, numbered, with a title.
fn is_bold_title(block: &str) -> bool {
    let t = block.trim();
    !t.contains('\n')
        && t.len() > 4
        && t.starts_with("**")
        && t.ends_with("**")
        && section_number(&heading_text(t).1).is_some_and(|(_, bare)| !bare)
}

/// Whether a chunk's text opens with a heading (either kind).
fn opens_with_heading(text: &str) -> bool {
    let first = text.trim_start().lines().next().unwrap_or("");
    is_heading(first) || is_bold_title(first)
}

/// Where a piece of text may be cut, from best to worst.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Cut {
    Line,
    Sentence,
    Clause,
    Word,
}

fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x2E80..=0x9FFF      // radicals, kana, CJK symbols and ideographs
        | 0xAC00..=0xD7AF    // Hangul syllables
        | 0xF900..=0xFAFF    // compatibility ideographs
        | 0xFF00..=0xFFEF    // full-width forms
        | 0x20000..=0x3FFFF) // extension ideographs
}

/// Positions inside `text` (after byte `from` and its character) where a new piece may
/// start, each with the best kind of cut it is: after a line break, after a sentence or
/// clause end, at a word start, or next to a CJK character. Positions are on character
/// boundaries and never at whitespace. Found as they are asked for (a huge block holds one per
/// word), and from 0 or from one of them they are exactly the whole text's after it: the
/// state the scan carries is the same at such a position whatever came before it.
struct CutPoints<'a> {
    chars: std::str::CharIndices<'a>,
    base: usize,
    prev: Option<char>,
    // The whitespace run just before the current char: any, with a newline.
    ws: bool,
    ws_newline: bool,
    last_visible: Option<char>,
}

impl<'a> CutPoints<'a> {
    fn new(text: &'a str, from: usize) -> CutPoints<'a> {
        CutPoints {
            chars: text[from..].char_indices(),
            base: from,
            prev: None,
            ws: false,
            ws_newline: false,
            last_visible: None,
        }
    }
}

impl Iterator for CutPoints<'_> {
    type Item = (usize, Cut);

    fn next(&mut self) -> Option<(usize, Cut)> {
        for (i, c) in self.chars.by_ref() {
            if c.is_whitespace() {
                self.ws = true;
                self.ws_newline |= c == '\n';
                self.prev = Some(c);
                continue;
            }
            let kind = self.prev.and_then(|p| {
                let lv = self.last_visible.unwrap_or(p);
                if self.ws_newline {
                    Some(Cut::Line)
                } else if self.ws {
                    Some(match lv {
                        '.' | '!' | '?' | '。' | '！' | '？' => Cut::Sentence,
                        ',' | ';' | ':' | '，' | '；' | '：' | '、' => Cut::Clause,
                        _ => Cut::Word,
                    })
                } else {
                    match p {
                        '。' | '！' | '？' => Some(Cut::Sentence),
                        '，' | '；' | '：' | '、' => Some(Cut::Clause),
                        // No spaces in CJK text: a character boundary is the word boundary we
                        // have.
                        _ if is_cjk(p) || is_cjk(c) => Some(Cut::Word),
                        _ => None,
                    }
                }
            });
            self.ws = false;
            self.ws_newline = false;
            self.last_visible = Some(c);
            self.prev = Some(c);
            if let Some(k) = kind {
                return Some((self.base + i, k));
            }
        }
        None
    }
}

/// Splits an oversized text block into pieces of at most `max` (by `sizer`): at line breaks if
/// that is enough, else sentences, clauses, words, and characters as the last resort.
fn split_block(
    text: &str,
    base: usize,
    max: usize,
    sizer: &dyn Sizer,
    out: &mut Vec<Block>,
    budget: &Budget,
) -> Result<(), ChunkError> {
    let whole = |out: &mut Vec<Block>| {
        out.push(Block {
            start: base,
            end: base + text.len(),
            kind: BlockKind::Text,
        })
    };
    if sizer.size(text) <= max || text.chars().nth(1).is_none() {
        whole(out);
        return Ok(());
    }
    // Each strategy's cut points, worst kind allowed; the last (any character) is tried only
    // if every other fails. They are found as the scan reaches them, never all at once: a
    // huge block holds one per word, or per character.
    let kinds = [
        Some(Cut::Line),
        Some(Cut::Sentence),
        Some(Cut::Clause),
        Some(Cut::Word),
        None,
    ];
    for worst in kinds {
        // Greedy: the furthest cut that keeps the piece within `max`. Linear in the block:
        // the search resumes where the last piece ended, and the rest of the block is only
        // measured when it may fit.
        let mut start = 0;
        let mut pieces = Vec::new();
        let mut ok = true;
        while start < text.len() {
            budget.tick()?;
            if fits(&text[start..], max, sizer) {
                pieces.push((start, text.len()));
                break;
            }
            let within = |p: usize| sizer.size(&text[start..p]) <= max;
            let best = match worst {
                Some(worst) => {
                    // Past a position that does not fit, none does (sizes grow with the
                    // text): the scan stops at the first it meets, looking at positions of
                    // worse kinds than the strategy's at doubling distances only.
                    let mut probe = max.max(1);
                    CutPoints::new(text, start)
                        .take_while(|&(p, _)| {
                            if p - start < probe {
                                return true;
                            }
                            probe = 2 * (p - start);
                            within(p)
                        })
                        .filter(|&(_, k)| k <= worst)
                        .map(|(p, _)| p)
                        .take_while(|&p| within(p))
                        .last()
                }
                None => text[start..]
                    .char_indices()
                    .skip(1)
                    .map(|(i, _)| start + i)
                    .take_while(|&p| within(p))
                    .last(),
            };
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
                // Whitespace at a cut stays between the pieces.
                let kept = text[s..e].trim_end().len();
                if kept > 0 {
                    out.push(Block {
                        start: base + s,
                        end: base + s + kept,
                        kind: BlockKind::Text,
                    });
                }
            }
            return Ok(());
        }
    }
    whole(out);
    Ok(())
}

/// Whether `text` measures at most `max`, without measuring all of a long text: a prefix
/// already over `max` settles it (sizes grow with the text).
fn fits(text: &str, max: usize, sizer: &dyn Sizer) -> bool {
    let probe = floor_char(text, max.saturating_mul(16).max(64));
    if sizer.size(&text[..probe]) > max {
        return false;
    }
    probe == text.len() || sizer.size(text) <= max
}

fn floor_char(text: &str, i: usize) -> usize {
    let mut i = i.min(text.len());
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_char(text: &str, i: usize) -> usize {
    let mut i = i.min(text.len());
    while !text.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// A stretch of the document chunks may not cross: a page (or the whole document) minus
/// furniture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Region {
    start: usize,
    end: usize,
    page: Option<u32>,
}

/// Furniture as sorted, merged byte ranges on character boundaries.
fn furniture_ranges(text: &str, furniture: &[Furniture]) -> Vec<(usize, usize)> {
    let mut cut: Vec<(usize, usize)> = furniture
        .iter()
        .map(|f| (floor_char(text, f.byte_start), ceil_char(text, f.byte_end)))
        .filter(|(s, e)| s < e)
        .collect();
    cut.sort_unstable();
    let mut merged: Vec<(usize, usize)> = Vec::with_capacity(cut.len());
    for (s, e) in cut {
        match merged.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    merged
}

fn in_furniture(cut: &[(usize, usize)], start: usize, end: usize) -> bool {
    let i = cut.partition_point(|c| c.1 <= start);
    cut.get(i).is_some_and(|c| c.0 < end)
}

/// The document's regions in order: its pages (text outside every page span is a region of
/// the page after it), each minus the furniture.
fn regions(text: &str, pages: &[PageSpan], cut: &[(usize, usize)]) -> Vec<Region> {
    let len = text.len();
    let mut spans = Vec::new();
    if pages.is_empty() {
        spans.push(Region {
            start: 0,
            end: len,
            page: None,
        });
    } else {
        let mut pos = 0;
        for p in pages {
            let start = floor_char(text, p.byte_start).max(pos);
            let end = floor_char(text, p.byte_end);
            if start > pos {
                spans.push(Region {
                    start: pos,
                    end: start,
                    page: quarry_core::page_at(pages, pos),
                });
            }
            if end > start {
                spans.push(Region {
                    start,
                    end,
                    page: Some(p.page),
                });
                pos = end;
            }
        }
        if pos < len {
            spans.push(Region {
                start: pos,
                end: len,
                page: pages.last().map(|p| p.page),
            });
        }
    }
    let mut out = Vec::with_capacity(spans.len());
    for r in spans {
        let mut s = r.start;
        let first = cut.partition_point(|c| c.1 <= r.start);
        for &(fs, fe) in &cut[first..] {
            if fs >= r.end {
                break;
            }
            if fs > s {
                out.push(Region {
                    start: s,
                    end: fs,
                    page: r.page,
                });
            }
            s = s.max(fe);
        }
        if s < r.end {
            out.push(Region { start: s, ..r });
        }
    }
    out
}

/// The blocks of one region, clipped to it (clipped edges lose their whitespace), oversized
/// text split to `piece_max`. Their memory stays counted in `budget` (`*counted` bytes).
fn region_pieces(
    text: &str,
    blocks: &[Block],
    r: Region,
    piece_max: usize,
    sizer: &dyn Sizer,
    budget: &Budget,
    counted: &mut usize,
) -> Result<Vec<Block>, ChunkError> {
    let mut out = Vec::new();
    let first = blocks.partition_point(|b| b.end <= r.start);
    for b in &blocks[first..] {
        budget.tick()?;
        budget.hold(counted, &out)?;
        if b.start >= r.end {
            break;
        }
        let (mut s, mut e) = (b.start.max(r.start), b.end.min(r.end));
        if (s, e) != (b.start, b.end) {
            let t = &text[s..e];
            s += t.len() - t.trim_start().len();
            e = s + text[s..e].trim_end().len();
        }
        if s >= e {
            continue;
        }
        // A "heading" many times longer than any heading shown (a megabyte `#` line) is cut
        // like text, its outline entry keeping its first words; only code stays whole.
        let cuttable = match b.kind {
            BlockKind::Text => true,
            BlockKind::Heading => e - s > 16 * MAX_HEADING_CHARS,
            BlockKind::Code => false,
        };
        if cuttable && sizer.size(&text[s..e]) > piece_max {
            split_block(&text[s..e], s, piece_max, sizer, &mut out, budget)?;
        } else {
            out.push(Block {
                start: s,
                end: e,
                kind: b.kind,
            });
        }
    }
    budget.hold(counted, &out)?;
    Ok(out)
}

/// Where the next chunk starts so that it repeats the end of `[start, end)` (the chunk made
/// of `pieces`), as close to `overlap` as possible (module docs); `None`: no overlap.
fn overlap_start(
    text: &str,
    pieces: &[Block],
    start: usize,
    end: usize,
    overlap: usize,
    sizer: &dyn Sizer,
) -> Option<usize> {
    let fits = |q: usize| sizer.size(&text[q..end]) <= overlap;
    // Candidates only in a tail long enough to hold more than `overlap`.
    let mut width = overlap.max(1);
    let low = loop {
        let low = floor_char(text, end.saturating_sub(width)).max(start);
        if low == start || !fits(low) {
            break low;
        }
        width *= 2;
    };
    // Whole trailing blocks first, then cuts inside text blocks, best kind first.
    let mut by_kind: [Vec<usize>; 5] = Default::default();
    for p in pieces.iter().filter(|p| p.end > low && p.start < end) {
        if p.start > start && p.start >= low {
            by_kind[0].push(p.start);
        }
        // Never inside a code block, nor inside a heading line.
        if p.kind != BlockKind::Text {
            continue;
        }
        for (i, k) in CutPoints::new(&text[p.start..p.end], 0) {
            let q = p.start + i;
            if q > start && q >= low {
                by_kind[1 + k as usize].push(q);
            }
        }
    }
    let mut best: Option<(usize, usize)> = None; // (size, position)
    for (kind, mut cands) in by_kind.into_iter().enumerate() {
        cands.sort_unstable();
        let i = cands.partition_point(|&q| !fits(q));
        let Some(&q) = cands.get(i) else { continue };
        let size = sizer.size(&text[q..end]);
        // Whole blocks or a line/sentence boundary win when they come close enough.
        if kind < 4 && size * 4 >= overlap * 3 {
            return Some(q);
        }
        if best.is_none_or(|(s, _)| size > s) {
            best = Some((size, q));
        }
    }
    best.map(|(_, q)| q)
}

/// Packs one region's pieces into chunks: `(start, end, body)` where `body` is where the
/// chunk's first non-heading text starts (`end` when it has none). Their memory stays counted
/// in `budget` (`*counted` bytes).
fn pack(
    text: &str,
    pieces: &[Block],
    max: usize,
    overlap: usize,
    sizer: &dyn Sizer,
    budget: &Budget,
    counted: &mut usize,
) -> Result<Vec<(usize, usize, usize)>, ChunkError> {
    let mut out = Vec::new();
    let mut carry: Option<usize> = None;
    let mut i = 0;
    while i < pieces.len() {
        budget.tick()?;
        budget.hold(counted, &out)?;
        let mut start = carry.take().unwrap_or(pieces[i].start);
        // Only an oversized code block can fail to fit after the overlap: it goes alone.
        if start < pieces[i].start && sizer.size(&text[start..pieces[i].end]) > max {
            start = pieces[i].start;
        }
        let mut j = i + 1;
        while j < pieces.len() {
            let next = pieces[j];
            if sizer.size(&text[start..next.end]) > max {
                break;
            }
            // A heading starts a new chunk once the current one is half full.
            if next.kind == BlockKind::Heading
                && sizer.size(&text[start..pieces[j - 1].end]) * 2 >= max
            {
                break;
            }
            j += 1;
        }
        // A heading goes with the text after it — unless the chunk holds nothing else (a
        // run of headings without text between them is one chunk, not one per heading).
        let has_text = pieces[i..j].iter().any(|p| p.kind != BlockKind::Heading);
        while has_text && j < pieces.len() && j > i + 1 && pieces[j - 1].kind == BlockKind::Heading
        {
            j -= 1;
        }
        let end = pieces[j - 1].end;
        // Pieces ending before `start` (the overlap's source) are not this chunk's: skip them
        // by search, so packing stays linear in the document.
        let first = pieces[..j].partition_point(|p| p.end <= start);
        let body = main_body(text, &pieces[first..j], start, sizer).unwrap_or(end);
        out.push((start, end, body));
        if j < pieces.len() && overlap > 0 && pieces[j].kind != BlockKind::Heading {
            carry = overlap_start(text, &pieces[first..j], start, end, overlap, sizer);
        }
        i = j;
    }
    budget.hold(counted, &out)?;
    Ok(out)
}

/// Where the text of the chunk's largest section starts (`None`: headings only). A chunk
/// that opens with the tail of one section and holds the whole of the next is labelled with
/// the next one's heading, not the previous section's.
fn main_body(text: &str, pieces: &[Block], start: usize, sizer: &dyn Sizer) -> Option<usize> {
    // (size of the section's text, where its text starts), one per section in the chunk.
    let mut sections: Vec<(usize, Option<usize>)> = vec![(0, None)];
    for p in pieces {
        let from = p.start.max(start);
        if p.kind == BlockKind::Heading {
            if sections.last().is_some_and(|s| s.1.is_some()) {
                sections.push((0, None));
            }
            continue;
        }
        if let Some(section) = sections.last_mut() {
            section.0 += sizer.size(&text[from..p.end.max(from)]);
            section.1.get_or_insert(from);
        }
    }
    // The largest; of equal ones, the first.
    sections
        .iter()
        .filter_map(|&(size, at)| Some((size, std::cmp::Reverse(at?))))
        .max()
        .map(|(_, std::cmp::Reverse(at))| at)
}

/// A heading's level and its text without markers, emphasis or runs of spaces.
fn heading_text(line: &str) -> (usize, String) {
    let t = line.trim();
    let level = t.bytes().take_while(|&b| b == b'#').count();
    let mut rest = t[level..].trim();
    let closed = rest.trim_end_matches('#');
    if closed.len() != rest.len() && (closed.is_empty() || closed.ends_with([' ', '\t'])) {
        rest = closed.trim_end();
    }
    'strip: loop {
        for w in ["**", "__", "*", "_"] {
            if rest.len() > 2 * w.len() && rest.starts_with(w) && rest.ends_with(w) {
                rest = rest[w.len()..rest.len() - w.len()].trim();
                continue 'strip;
            }
        }
        break;
    }
    // Built word by word up to the limit: a heading line may be megabytes long.
    let mut s = String::new();
    let spaced = rest
        .split_whitespace()
        .enumerate()
        .flat_map(|(k, word)| (k > 0).then_some(' ').into_iter().chain(word.chars()));
    for (n, c) in spaced.enumerate() {
        if n == MAX_HEADING_CHARS {
            s.push('…');
            break;
        }
        s.push(c);
    }
    (level, s)
}

/// A heading's section number (`3.15`, `Chapter 2`, `第 2 章`) and whether the heading is
/// nothing but that number.
fn section_number(text: &str) -> Option<(Vec<u32>, bool)> {
    let digits = |s: &str| -> Option<(u32, usize)> {
        let n = s.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 || n > 3 {
            return None;
        }
        Some((s[..n].parse().ok()?, n))
    };
    let lower = text.to_ascii_lowercase();
    if let Some(rest) = lower.strip_prefix("chapter ") {
        let rest = rest.trim_start();
        let (n, len) = digits(rest)?;
        let tail = &rest[len..];
        if !tail.is_empty() && !tail.starts_with([' ', '.', ':']) {
            return None;
        }
        return Some((vec![n], tail.trim_matches([' ', '.', ':']).is_empty()));
    }
    if let Some(rest) = text.strip_prefix('第') {
        let rest = rest.trim_start();
        let (n, len) = digits(rest)?;
        let tail = rest[len..].trim_start().strip_prefix('章')?;
        return Some((vec![n], tail.trim().is_empty()));
    }
    let mut parts = Vec::new();
    let mut pos = 0;
    loop {
        let (n, len) = digits(&text[pos..])?;
        parts.push(n);
        pos += len;
        match text[pos..].strip_prefix('.') {
            Some(r) if r.starts_with(|c: char| c.is_ascii_digit()) && parts.len() < 6 => pos += 1,
            Some(_) => {
                pos += 1;
                break;
            }
            None => break,
        }
    }
    let tail = &text[pos..];
    if !tail.is_empty() && !tail.starts_with(char::is_whitespace) {
        return None;
    }
    Some((parts, tail.trim().is_empty()))
}

struct Entry {
    number: Option<Vec<u32>>,
    level: usize,
    text: String,
    bare: bool,
}

/// Heading paths by position: after each heading (outside furniture), the path it makes.
struct Outline {
    events: Vec<(usize, String)>,
}

impl Outline {
    /// The outline of `blocks`; its memory stays counted in `budget` (`*counted` bytes).
    fn new(
        text: &str,
        blocks: &[Block],
        cut: &[(usize, usize)],
        budget: &Budget,
        counted: &mut usize,
    ) -> Result<Outline, ChunkError> {
        let mut stack: Vec<Entry> = Vec::new();
        let mut events = Vec::new();
        let mut paths = 0;
        // Was the previous block (furniture aside) a heading?
        let mut after_heading = false;
        for b in blocks {
            budget.tick()?;
            budget.hold(&mut paths, &events)?;
            if in_furniture(cut, b.start, b.end) {
                continue;
            }
            if b.kind != BlockKind::Heading {
                after_heading = false;
                continue;
            }
            let (level, heading) = heading_text(&text[b.start..b.end]);
            let number = section_number(&heading);
            match number {
                _ if heading.is_empty() => {}
                None if after_heading && stack.last().is_some_and(|e| e.bare) => {
                    if let Some(top) = stack.last_mut() {
                        top.text = format!("{} {heading}", top.text);
                        top.bare = false;
                    }
                }
                Some((number, bare)) => {
                    // Numbered: under the deepest heading whose number is a prefix of this one.
                    let keep = stack.iter().rposition(|e| {
                        e.number
                            .as_ref()
                            .is_some_and(|p| p.len() < number.len() && number.starts_with(p))
                    });
                    stack.truncate(keep.map_or(0, |k| k + 1));
                    stack.push(Entry {
                        number: Some(number),
                        level,
                        text: heading,
                        bare,
                    });
                }
                None => {
                    // Under the current numbered section, whatever its level: PDF converters
                    // give "Rationale", or a title's second line, any level.
                    while stack
                        .last()
                        .is_some_and(|e| e.number.is_none() && e.level >= level)
                    {
                        stack.pop();
                    }
                    stack.push(Entry {
                        number: None,
                        level,
                        text: heading,
                        bare: false,
                    });
                }
            }
            after_heading = true;
            let path = path_of(&stack);
            budget.take(path.capacity())?;
            *counted += path.capacity();
            events.push((b.start, path));
        }
        budget.hold(&mut paths, &events)?;
        *counted += paths;
        Ok(Outline { events })
    }

    /// The path in effect at byte `pos` (headings starting before it).
    fn at(&self, pos: usize) -> &str {
        let k = self.events.partition_point(|e| e.0 < pos);
        k.checked_sub(1).map_or("", |k| self.events[k].1.as_str())
    }
}

fn path_of(stack: &[Entry]) -> String {
    let mut parts: Vec<&str> = stack.iter().map(|e| e.text.as_str()).collect();
    let len = |parts: &[&str]| {
        parts.iter().map(|p| p.chars().count()).sum::<usize>()
            + parts.len().saturating_sub(1) * HEADING_SEPARATOR.chars().count()
    };
    let mut dropped = false;
    while parts.len() > 1 && len(&parts) > MAX_PATH_CHARS {
        parts.remove(0);
        dropped = true;
    }
    let path = parts.join(HEADING_SEPARATOR);
    if dropped {
        format!("…{HEADING_SEPARATOR}{path}")
    } else {
        path
    }
}

/// Chunks a Markdown document with no pages and no furniture (see [`chunk_document`]).
pub fn chunk_markdown(text: &str, opts: ChunkOptions, sizer: &dyn Sizer) -> Vec<Chunk> {
    chunk_document(text, Layout::default(), opts, sizer)
}

/// Chunks a document (module docs), without limits. Empty or whitespace-only documents give
/// no chunks.
pub fn chunk_document(
    text: &str,
    layout: Layout<'_>,
    opts: ChunkOptions,
    sizer: &dyn Sizer,
) -> Vec<Chunk> {
    // Nothing fails without limits.
    chunk_document_bounded(text, layout, opts, sizer, &ChunkLimits::NONE).unwrap_or_default()
}

/// Chunks a document (module docs) within `limits`: the clock is checked and the working data
/// counted as the cut proceeds, and a document past either is not cut. Empty or
/// whitespace-only documents give no chunks.
pub fn chunk_document_bounded(
    text: &str,
    layout: Layout<'_>,
    opts: ChunkOptions,
    sizer: &dyn Sizer,
    limits: &ChunkLimits,
) -> Result<Vec<Chunk>, ChunkError> {
    let budget = Budget::new(limits);
    budget.check_time()?;
    let max = opts.max_size.max(1);
    let overlap = opts.overlap.min(max / 2);
    let piece_max = max - overlap;
    let mut held = 0;
    let blocks = blocks(text, &budget, &mut held)?;
    let cut = furniture_ranges(text, layout.furniture);
    budget.hold(&mut held, &cut)?;
    let outline = Outline::new(text, &blocks, &cut, &budget, &mut held)?;
    let lines = LineIndex::new(text, &budget)?;
    let spans = regions(text, layout.pages, &cut);
    budget.hold(&mut held, &spans)?;
    let mut chunks = Vec::new();
    let mut counted_chunks = 0;
    let mut headings_only = Vec::new();
    let mut counted_headings = 0;
    for r in spans {
        let (mut pieces_held, mut packed_held) = (0, 0);
        let pieces = region_pieces(
            text,
            &blocks,
            r,
            piece_max,
            sizer,
            &budget,
            &mut pieces_held,
        )?;
        let packed = pack(
            text,
            &pieces,
            max,
            overlap,
            sizer,
            &budget,
            &mut packed_held,
        )?;
        for (start, end, body) in packed {
            budget.tick()?;
            if body == end {
                headings_only.push(chunks.len());
                budget.hold(&mut counted_headings, &headings_only)?;
            }
            let heading = outline.at(body).to_owned();
            budget.take(heading.capacity())?;
            chunks.push(Chunk {
                start,
                end,
                line_start: lines.line_of(start),
                line_end: lines.line_of(end.saturating_sub(1).max(start)),
                page: r.page,
                heading,
            });
            budget.hold(&mut counted_chunks, &chunks)?;
        }
        // A region's pieces are freed before the next region's are made.
        budget.give(pieces_held + packed_held);
    }
    // Headings alone (a title at the foot of a page) whose path the next chunk carries: they
    // head it, no need for a chunk of their own. A slide of nothing but its title keeps its.
    budget.take(chunks.len())?;
    let carried: Vec<bool> = (0..chunks.len())
        .map(|k| {
            headings_only.binary_search(&k).is_ok()
                && !chunks[k].heading.is_empty()
                && chunks
                    .get(k + 1)
                    .is_some_and(|next| carries(&next.heading, &chunks[k].heading))
        })
        .collect();
    let mut k = 0;
    chunks.retain(|_| {
        k += 1;
        !carried[k - 1]
    });
    Ok(chunks)
}

/// Whether heading path `next` is `path` or lies under it: whole headings, so "Heading 10"
/// does not carry "Heading 1".
fn carries(next: &str, path: &str) -> bool {
    next.strip_prefix(path)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(HEADING_SEPARATOR))
}

/// 1-based line numbers of byte offsets.
struct LineIndex {
    newlines: Vec<usize>,
}

impl LineIndex {
    /// The index of `text`, its memory counted in `budget` before it is taken.
    fn new(text: &str, budget: &Budget) -> Result<LineIndex, ChunkError> {
        let count = text.bytes().filter(|&b| b == b'\n').count();
        budget.take(count * std::mem::size_of::<usize>())?;
        budget.check_time()?;
        let mut newlines = Vec::with_capacity(count);
        newlines.extend(
            text.bytes()
                .enumerate()
                .filter(|&(_, b)| b == b'\n')
                .map(|(i, _)| i),
        );
        Ok(LineIndex { newlines })
    }

    fn line_of(&self, at: usize) -> usize {
        self.newlines.partition_point(|&nl| nl < at) + 1
    }
}

/// How a document's chunks relate to its pages and to each other (the figures issue 22
/// asks for; `examples/chunk_stats.rs` prints them for real documents).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChunkStats {
    /// Chunks cut.
    pub chunks: usize,
    /// Chunks with visible text on a page other than their `page`.
    pub off_page: usize,
    /// Chunks that contain furniture.
    pub with_furniture: usize,
    /// Consecutive chunks on one page, not separated by furniture.
    pub inner_boundaries: usize,
    /// … of which the second chunk starts with a heading (a section starts clean).
    pub section_boundaries: usize,
    /// … of which the second repeats some of the first.
    pub overlapping: usize,
    /// … of which the repeat is at least ¾ of the configured overlap.
    pub overlapping_close: usize,
    /// Chunks larger than `max_size`.
    pub oversized: usize,
}

impl ChunkStats {
    /// Measures `chunks` cut from `text` with `layout` and `opts`.
    pub fn measure(
        text: &str,
        layout: Layout<'_>,
        chunks: &[Chunk],
        opts: ChunkOptions,
        sizer: &dyn Sizer,
    ) -> ChunkStats {
        let cut = furniture_ranges(text, layout.furniture);
        let page_of = |o: usize| quarry_core::page_at(layout.pages, o);
        let mut s = ChunkStats {
            chunks: chunks.len(),
            ..ChunkStats::default()
        };
        for c in chunks {
            let t = c.text(text);
            if t.char_indices()
                .any(|(i, ch)| !ch.is_whitespace() && page_of(c.start + i) != c.page)
            {
                s.off_page += 1;
            }
            if in_furniture(&cut, c.start, c.end) {
                s.with_furniture += 1;
            }
            if sizer.size(t) > opts.max_size {
                s.oversized += 1;
            }
        }
        for w in chunks.windows(2) {
            let (a, b) = (&w[0], &w[1]);
            let between = (a.end.min(b.start), a.end.max(b.start));
            if a.page != b.page || in_furniture(&cut, between.0, between.1.max(between.0 + 1)) {
                continue;
            }
            s.inner_boundaries += 1;
            if opens_with_heading(b.text(text)) {
                s.section_boundaries += 1;
            }
            if b.start < a.end {
                s.overlapping += 1;
                if sizer.size(&text[b.start..a.end]) * 4 >= opts.overlap.min(opts.max_size / 2) * 3
                {
                    s.overlapping_close += 1;
                }
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quarry_core::FurnitureKind;

    fn opts(max: usize, overlap: usize) -> ChunkOptions {
        ChunkOptions {
            max_size: max,
            overlap,
        }
    }

    fn chunks(text: &str, max: usize, overlap: usize) -> Vec<String> {
        chunk_markdown(text, opts(max, overlap), &CharSizer)
            .iter()
            .map(|c| c.text(text).to_owned())
            .collect()
    }

    /// A page map of `parts` joined as the converters join pages (blank line between).
    fn paged(parts: &[&str]) -> (String, Vec<PageSpan>) {
        let mut text = String::new();
        let mut pages = Vec::new();
        for (i, p) in parts.iter().enumerate() {
            let start = text.len();
            text.push_str(p);
            text.push_str("\n\n");
            pages.push(PageSpan {
                page: i as u32 + 1,
                byte_start: start,
                byte_end: text.len(),
            });
        }
        (text, pages)
    }

    fn furniture(text: &str, needle: &str) -> Furniture {
        let at = text.find(needle).expect("needle in text");
        Furniture {
            kind: FurnitureKind::RunningHeader,
            byte_start: at,
            byte_end: at + needle.len(),
        }
    }

    /// English prose without blank lines or line breaks: one big block.
    fn prose(words: usize) -> String {
        let vocab = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta"];
        let mut s = String::new();
        for i in 0..words {
            s.push_str(vocab[i % vocab.len()]);
            s.push(if i % 11 == 10 { '.' } else { ',' });
            s.push(' ');
        }
        s.trim_end().to_owned()
    }

    #[test]
    fn code_fences_are_never_cut() {
        let code = "```rust\nfn a() {}\n\nfn b() {}\n# not a heading\n```\n";
        let text = format!("intro line\n\n{code}\nafter\n");
        for (max, overlap) in [(5, 0), (20, 0), (40, 0), (1000, 0), (40, 10), (60, 25)] {
            let cs = chunks(&text, max, overlap);
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
        // With overlap too: a section starts clean, never with the previous one's tail.
        assert_eq!(chunks(text, 30, 10), cs);
    }

    #[test]
    fn a_chunk_does_not_end_with_a_heading_that_has_text_after_it() {
        let text = "intro text here\n\n## Next\n\nbody of the next section that is long\n";
        let cs = chunks(text, 50, 0);
        assert_eq!(cs.len(), 2, "{cs:?}");
        assert_eq!(cs[0], "intro text here\n");
        assert!(cs[1].starts_with("## Next"), "{cs:?}");
        // A heading whose text does not fit beside it is no chunk of its own: it heads the
        // chunk of its text.
        let cs = chunk_markdown(text, opts(40, 0), &CharSizer);
        let got: Vec<(&str, &str)> = cs
            .iter()
            .map(|c| (c.text(text), c.heading.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("intro text here\n", ""),
                ("body of the next section that is long\n", "Next")
            ]
        );
    }

    #[test]
    fn offsets_and_lines_cite_the_document() {
        let text = "# T\n\npara one\nstill one\n\npara two\n\n## Sub\n\npara three\n";
        for c in chunk_markdown(text, opts(25, 0), &CharSizer) {
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

    /// Every boundary inside a region carries between ¾ of the overlap and the overlap,
    /// starting at a word, and no chunk exceeds `max`.
    fn assert_full_overlap(text: &str, max: usize, overlap: usize) {
        let cs = chunk_markdown(text, opts(max, overlap), &CharSizer);
        assert!(cs.len() >= 3, "{cs:?}");
        for c in &cs {
            assert!(c.text(text).chars().count() <= max, "{c:?}");
        }
        for w in cs.windows(2) {
            assert!(w[1].start < w[0].end, "no overlap: {w:?}");
            let repeat = &text[w[1].start..w[0].end];
            let n = repeat.chars().count();
            assert!(
                n * 4 >= overlap * 3 && n <= overlap,
                "overlap {n}: {repeat:?}"
            );
            let before = text[..w[1].start].chars().next_back();
            let first = repeat.chars().next();
            assert!(
                before.is_none_or(|c| c.is_whitespace() || is_cjk(c) || "。，、；：".contains(c))
                    || first.is_some_and(is_cjk),
                "cut inside a word: {before:?}|{repeat:?}"
            );
        }
        // The chunks still cover the text.
        assert_eq!(cs[0].start, 0);
        for w in cs.windows(2) {
            assert!(w[1].start <= w[0].end);
        }
    }

    #[test]
    fn overlap_falls_back_to_sentences_and_words_inside_big_blocks() {
        // One paragraph far larger than the chunk: the old rule (whole trailing blocks) gave
        // no overlap at all here.
        assert_full_overlap(&prose(400), 1000, 200);
        assert_full_overlap(&prose(120), 200, 60);
        // Paragraphs each larger than the overlap.
        let paras: Vec<String> = (0..8).map(|_| prose(45)).collect();
        assert_full_overlap(&paras.join("\n\n"), 1000, 200);
    }

    #[test]
    fn overlap_in_cjk_text_cuts_between_characters_not_inside_them() {
        let text = "机器学习是人工智能的一个分支，它使用统计方法让计算机从数据中学习。深度学习使用多层神经网络".repeat(30);
        assert_full_overlap(&text, 300, 60);
        let cs = chunk_markdown(&text, opts(300, 60), &CharSizer);
        for c in &cs {
            assert!(text.is_char_boundary(c.start) && text.is_char_boundary(c.end));
        }
    }

    #[test]
    fn overlap_never_starts_inside_code_or_a_heading() {
        let code = format!("```\n{}```\n", "let x = 1;\n".repeat(8));
        let text = format!("{}\n\n{code}\n{}\n", prose(20), prose(60));
        let cs = chunk_markdown(&text, opts(150, 50), &CharSizer);
        for c in &cs {
            let t = c.text(&text);
            assert!(t.matches("```").count() % 2 == 0, "{t:?}");
            assert!(!t.starts_with("let x"), "{t:?}");
        }
    }

    #[test]
    fn long_paragraphs_split_at_sentences_then_words_then_chars() {
        let text = "First sentence here. Second sentence here. Third one here.";
        let cs = chunks(text, 25, 0);
        assert!(cs.iter().all(|c| c.chars().count() <= 25), "{cs:?}");
        assert_eq!(cs.join(" "), text);
        let cjk = "机器学习是人工智能的一个分支。深度学习使用多层神经网络。".repeat(3);
        let cs = chunks(&cjk, 20, 0);
        assert!(cs.iter().all(|c| c.chars().count() <= 20), "{cs:?}");
        assert_eq!(cs.concat(), cjk);
        assert!(cs[0].ends_with('。'));
        // No sentence end in reach: cut between words, not inside one.
        let words = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do";
        let cs = chunks(words, 16, 0);
        assert_eq!(cs.join(" "), words, "{cs:?}");
        // "3.15" is not a sentence end.
        let cs = chunks("See section 3.15 for the rules of tmp directories.", 20, 0);
        assert!(cs.iter().all(|c| !c.ends_with("3.")), "{cs:?}");
        // A word longer than a chunk is cut at characters, on char boundaries.
        let cs = chunks("ééééééééééééééééééééééééé", 10, 0);
        assert!(cs.iter().all(|c| c.chars().count() <= 10), "{cs:?}");
    }

    #[test]
    fn token_sizer_and_empty_documents() {
        let words = |s: &str| s.split_whitespace().count();
        let text = "a b c d e f g h i j k l m n o p";
        let cs = chunk_markdown(text, opts(5, 0), &words);
        assert!(cs.iter().all(|c| words(c.text(text)) <= 5));
        let cs = chunk_markdown(text, opts(6, 2), &words);
        assert!(cs.iter().all(|c| words(c.text(text)) <= 6), "{cs:?}");
        assert!(chunks("", 10, 2).is_empty());
        assert!(chunks("\n\n  \n", 10, 2).is_empty());
    }

    #[test]
    fn chunks_never_span_pages_and_cite_the_page_their_text_is_on() {
        let p1 = prose(30);
        let p2 = format!("## Slide two\n\n{}", prose(80));
        let p3 = "three".to_owned();
        let (text, pages) = paged(&[&p1, &p2, &p3]);
        let layout = Layout {
            pages: &pages,
            furniture: &[],
        };
        // One chunk would hold pages 1 and 3 whole; page cuts win.
        let cs = chunk_document(&text, layout, opts(300, 60), &CharSizer);
        assert_eq!(cs.first().and_then(|c| c.page), Some(1));
        assert_eq!(cs.last().map(|c| c.text(&text).trim_end()), Some("three"));
        assert_eq!(cs.last().and_then(|c| c.page), Some(3));
        for c in &cs {
            let p = pages.iter().find(|p| Some(p.page) == c.page).unwrap();
            assert!(p.byte_start <= c.start && c.end <= p.byte_end, "{c:?}");
        }
        let stats = ChunkStats::measure(&text, layout, &cs, opts(300, 60), &CharSizer);
        assert_eq!(stats.off_page, 0);
        // Overlap stays inside page 2 too.
        assert!(stats.inner_boundaries >= 1);
        assert_eq!(stats.overlapping_close, stats.inner_boundaries, "{stats:?}");
        // Small slides: one chunk each, not one for the deck.
        let (deck, slides) = paged(&["# One\n\nfirst", "# Two\n\nsecond", "# Three\n\nthird"]);
        let cs = chunk_document(
            &deck,
            Layout {
                pages: &slides,
                furniture: &[],
            },
            ChunkOptions::RAG_CHARS,
            &CharSizer,
        );
        let got: Vec<(Option<u32>, &str, &str)> = cs
            .iter()
            .map(|c| (c.page, c.text(&deck).trim_end(), c.heading.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (Some(1), "# One\n\nfirst", "One"),
                (Some(2), "# Two\n\nsecond", "Two"),
                (Some(3), "# Three\n\nthird", "Three")
            ]
        );
    }

    #[test]
    fn a_fence_across_a_page_break_is_cut_there_and_the_next_page_is_not_code() {
        let (text, pages) = paged(&[
            "```\ncode one",
            "code two\n```\n\nplain words after",
            "# later\n\nbody",
        ]);
        let cs = chunk_document(
            &text,
            Layout {
                pages: &pages,
                furniture: &[],
            },
            ChunkOptions::RAG_CHARS,
            &CharSizer,
        );
        let got: Vec<(Option<u32>, &str)> = cs
            .iter()
            .map(|c| (c.page, c.text(&text).trim_end()))
            .collect();
        assert_eq!(
            got,
            [
                (Some(1), "```\ncode one"),
                (Some(2), "code two\n```\n\nplain words after"),
                (Some(3), "# later\n\nbody")
            ]
        );
    }

    #[test]
    fn furniture_stays_out_of_chunks_at_every_edge() {
        let body1 = prose(40);
        let body2 = prose(40);
        let (text, pages) = paged(&[
            &format!("Manual 1 / 3\n\n{body1}\n\n1"),
            &format!("Manual 2 / 3\n\n{body2} tail words\n\n2"),
        ]);
        let mut furn = vec![
            furniture(&text, "Manual 1 / 3"),
            furniture(&text, "Manual 2 / 3"),
        ];
        // Page numbers at the foot of each page, and a range in the middle of a paragraph.
        for n in ["\n1\n", "\n2\n"] {
            let at = text.find(n).unwrap() + 1;
            furn.push(Furniture {
                kind: FurnitureKind::PageNumber,
                byte_start: at,
                byte_end: at + 1,
            });
        }
        furn.push(furniture(&text, " tail words"));
        furn.sort_by_key(|f| f.byte_start);
        let layout = Layout {
            pages: &pages,
            furniture: &furn,
        };
        for (max, overlap) in [(1000, 200), (120, 30), (60, 20)] {
            let cs = chunk_document(&text, layout, opts(max, overlap), &CharSizer);
            for c in &cs {
                for f in &furn {
                    assert!(
                        c.end <= f.byte_start || c.start >= f.byte_end,
                        "{max}: {:?} holds furniture {f:?}",
                        c.text(&text)
                    );
                }
                assert!(!c.text(&text).contains("Manual"), "{max}: {c:?}");
            }
            let stats = ChunkStats::measure(&text, layout, &cs, opts(max, overlap), &CharSizer);
            assert_eq!((stats.with_furniture, stats.off_page), (0, 0), "{max}");
            // The body text is all still there.
            let all: String = cs.iter().map(|c| c.text(&text)).collect();
            assert!(all.contains(body1.split(' ').next_back().unwrap()));
        }
        // Out-of-range and off-boundary furniture does not panic, and cuts whole characters.
        let cjk = "第一段文字。\n\n第二段文字。";
        let bad = [
            Furniture {
                kind: FurnitureKind::Boilerplate,
                byte_start: 1,
                byte_end: 4,
            },
            Furniture {
                kind: FurnitureKind::Boilerplate,
                byte_start: 30,
                byte_end: 10_000,
            },
            Furniture {
                kind: FurnitureKind::Boilerplate,
                byte_start: 9,
                byte_end: 2,
            },
        ];
        let cs = chunk_document(
            cjk,
            Layout {
                pages: &[],
                furniture: &bad,
            },
            ChunkOptions::RAG_CHARS,
            &CharSizer,
        );
        for c in &cs {
            assert!(cjk.is_char_boundary(c.start) && cjk.is_char_boundary(c.end));
            assert!(c.start >= 6 && c.end <= 30, "{c:?}");
        }
    }

    #[test]
    fn a_chunk_never_glues_text_across_skipped_furniture() {
        let text = "before the contents\n\n1 Intro .... 1\n2 Usage .... 4\n\nafter the contents\n";
        let toc = furniture(text, "1 Intro .... 1\n2 Usage .... 4\n");
        let cs = chunk_document(
            text,
            Layout {
                pages: &[],
                furniture: &[toc],
            },
            ChunkOptions::RAG_CHARS,
            &CharSizer,
        );
        let got: Vec<&str> = cs.iter().map(|c| c.text(text).trim_end()).collect();
        assert_eq!(got, ["before the contents", "after the contents"]);
    }

    #[test]
    fn heading_paths_follow_levels_and_earlier_chunks() {
        let text = format!(
            "# Guide\n\nintro\n\n## Install\n\n{}\n\n### On Linux\n\n{}\n\n## Use\n\nuse it\n",
            prose(30),
            prose(60)
        );
        let cs = chunk_markdown(&text, opts(200, 40), &CharSizer);
        let path_of = |needle: &str| {
            cs.iter()
                .find(|c| c.text(&text).contains(needle))
                .map(|c| c.heading.clone())
                .unwrap_or_default()
        };
        // "intro" shares its chunk with most of Install's text: the chunk is Install's.
        assert_eq!(path_of("intro"), "Guide › Install");
        assert_eq!(path_of("### On Linux"), "Guide › Install › On Linux");
        assert_eq!(path_of("use it"), "Guide › Use");
        // A chunk in the middle of a section (its heading in an earlier chunk) keeps its path.
        let linux: Vec<&Chunk> = cs
            .iter()
            .filter(|c| c.heading == "Guide › Install › On Linux")
            .collect();
        assert!(linux.len() >= 3, "{cs:?}");
        assert!(!linux[2].text(&text).contains('#'));
        // Text before the first heading has no path.
        assert_eq!(
            chunk_markdown("just text", ChunkOptions::RAG_CHARS, &CharSizer)[0].heading,
            ""
        );
    }

    #[test]
    fn a_chunk_is_labelled_by_its_largest_section() {
        // Issue 41 item 17: a page opening with the last lines of 1.1.11, then all of
        // 1.1.12, was labelled 1.1.11 (the section its first text belongs to).
        let (text, pages) = paged(&[
            &format!("#### 1.1.11 额外用户账号\n\n{}", prose(80)),
            &format!("回答所有问题。\n\n#### 1.1.12 sudo 配置\n\n{}", prose(60)),
        ]);
        let cs = chunk_document(
            &text,
            Layout {
                pages: &pages,
                furniture: &[],
            },
            ChunkOptions::RAG_CHARS,
            &CharSizer,
        );
        let second = cs
            .iter()
            .find(|c| c.text(&text).contains("1.1.12"))
            .map(|c| (c.text(&text), c.heading.as_str()));
        assert!(
            second.is_some_and(|(t, h)| t.starts_with("回答所有问题") && h == "1.1.12 sudo 配置"),
            "{second:?}"
        );
        // Equal sections: the first one's heading, as before.
        let cs = chunks_with_headings("## A\n\none\n\n## B\n\ntwo\n", 100);
        assert_eq!(
            cs,
            [("## A\n\none\n\n## B\n\ntwo".to_owned(), "A".to_owned())]
        );
    }

    fn chunks_with_headings(text: &str, max: usize) -> Vec<(String, String)> {
        chunk_markdown(text, opts(max, 0), &CharSizer)
            .iter()
            .map(|c| (c.text(text).trim_end().to_owned(), c.heading.clone()))
            .collect()
    }

    #[test]
    fn numbered_headings_nest_by_number_whatever_their_level() {
        // Levels as a PDF converter guesses them from font sizes.
        let text = "# Filesystem Hierarchy Standard\n\ntitle page\n\n## Table of Contents\n\ntoc\n\n\
                    ## 3 The Root Filesystem\n\nroot\n\n#### 3.15 /tmp : Temporary files\n\ntmp\n\n\
                    ## Rationale\n\nwhy\n\n### 3.15.1 Purpose\n\npurpose\n\n### 3.16 /var\n\nvar\n\n\
                    # 4 The /usr Hierarchy\n\nusr\n";
        let cs = chunk_markdown(text, opts(12, 0), &CharSizer);
        let path_of = |body: &str| {
            cs.iter()
                .find(|c| c.text(text).trim_end().ends_with(body))
                .map(|c| c.heading.as_str())
                .unwrap_or("?")
        };
        assert_eq!(path_of("title page"), "Filesystem Hierarchy Standard");
        assert_eq!(path_of("root"), "3 The Root Filesystem");
        assert_eq!(
            path_of("tmp"),
            "3 The Root Filesystem › 3.15 /tmp : Temporary files"
        );
        assert_eq!(
            path_of("why"),
            "3 The Root Filesystem › 3.15 /tmp : Temporary files › Rationale"
        );
        assert_eq!(
            path_of("purpose"),
            "3 The Root Filesystem › 3.15 /tmp : Temporary files › 3.15.1 Purpose"
        );
        assert_eq!(path_of("var"), "3 The Root Filesystem › 3.16 /var");
        assert_eq!(path_of("usr"), "4 The /usr Hierarchy");
    }

    #[test]
    fn bold_numbered_titles_are_headings() {
        let text = "**3.18. /tmp : Temporary files**\n\n#### 3.18.1 Purpose\n\ntmp text\n\n\
                    **Note:** not a title\n\n**12**\n\nmore text\n";
        let cs = chunk_markdown(text, opts(40, 0), &CharSizer);
        let path_of = |body: &str| {
            cs.iter()
                .find(|c| c.text(text).contains(body))
                .map(|c| c.heading.as_str())
                .unwrap_or("?")
        };
        assert_eq!(
            path_of("tmp text"),
            "3.18. /tmp : Temporary files › 3.18.1 Purpose"
        );
        assert_eq!(
            path_of("more text"),
            "3.18. /tmp : Temporary files › 3.18.1 Purpose"
        );
        assert!(is_bold_title(
            "**3.4. /bin : Essential user command binaries**\n"
        ));
        assert!(!is_bold_title("**Note:** not a title"));
        assert!(!is_bold_title("**12**"));
        assert!(!is_bold_title("**3.1 a**\nsecond line"));
    }

    #[test]
    fn chinese_chapters_and_bare_chapter_headings() {
        let text = "# Chapter 1\n\n# GNU/Linux 教程\n\n### 1.1 控制台基础\n\n正文一\n\n\
                    ## 第 2 章 Debian 软件包管理\n\n### 2.1 前提\n\n正文二\n";
        let cs = chunk_markdown(text, opts(12, 0), &CharSizer);
        let path_of = |body: &str| {
            cs.iter()
                .find(|c| c.text(text).contains(body))
                .map(|c| c.heading.as_str())
                .unwrap_or("?")
        };
        assert_eq!(
            path_of("正文一"),
            "Chapter 1 GNU/Linux 教程 › 1.1 控制台基础"
        );
        assert_eq!(path_of("正文二"), "第 2 章 Debian 软件包管理 › 2.1 前提");
    }

    #[test]
    fn heading_text_is_cleaned_and_furniture_headings_are_ignored() {
        let text = "## **Bold  title** ##\n\nbody one\n\n# Running Header\n\nbody two\n";
        let header = furniture(text, "# Running Header\n");
        let cs = chunk_document(
            text,
            Layout {
                pages: &[],
                furniture: &[header],
            },
            opts(12, 0),
            &CharSizer,
        );
        let headings: Vec<&str> = cs.iter().map(|c| c.heading.as_str()).collect();
        assert_eq!(headings, ["Bold title", "Bold title"]);
        let long = format!("# {}\n\nbody\n", "word ".repeat(100));
        let h = &chunk_markdown(&long, ChunkOptions::RAG_CHARS, &CharSizer)[0].heading;
        assert_eq!(h.chars().count(), MAX_HEADING_CHARS + 1);
        assert!(h.ends_with('…'));
    }

    #[test]
    fn a_run_of_headings_without_text_is_packed_not_cut_one_per_heading() {
        // Issue 41 item 19: a headings-only file made one chunk per heading, found by
        // scanning every earlier piece (quadratic; examples/chunk_scaling.rs measures it).
        let text: String = (0..2000).map(|i| format!("## Heading {i}\n\n")).collect();
        let cs = chunk_markdown(&text, ChunkOptions::RAG_CHARS, &CharSizer);
        assert!(cs.len() < 100, "{} chunks for 2,000 headings", cs.len());
        let covered: String = cs
            .iter()
            .map(|c| c.text(&text))
            .collect::<Vec<_>>()
            .join("\n\n");
        for i in [0, 1, 10, 999, 1999] {
            assert!(
                covered.contains(&format!("## Heading {i}\n")),
                "heading {i} lost"
            );
        }
        assert!(cs.iter().all(|c| c.text(&text).chars().count() <= 1000));
        // A heading with text after it still goes with that text.
        let mixed = format!("{}# Real\n\nits text", "## Empty\n\n".repeat(3));
        let cs = chunks(&mixed, 30, 0);
        assert!(
            cs.iter().any(|c| c.ends_with("# Real\n\nits text")),
            "{cs:?}"
        );
    }

    #[test]
    fn a_heading_is_carried_only_by_its_own_subsections() {
        assert!(carries("Heading 1", "Heading 1"));
        assert!(carries("Heading 1 › Sub", "Heading 1"));
        assert!(!carries("Heading 10", "Heading 1"));
        assert!(!carries("Heading 10 › Sub", "Heading 1"));
    }

    #[test]
    fn a_megabyte_heading_line_costs_its_first_words_only() {
        let text = format!("# {}\n\nbody\n", "word ".repeat(200_000));
        let cs = chunk_markdown(&text, ChunkOptions::RAG_CHARS, &CharSizer);
        assert!(cs.len() > 100, "the line was not cut: {} chunks", cs.len());
        assert!(
            cs.iter()
                .all(|c| c.heading.chars().count() <= MAX_HEADING_CHARS + 1)
        );
        assert!(cs.iter().all(|c| c.text(&text).chars().count() <= 1000));
        let last = cs.last().map(|c| c.text(&text)).unwrap_or_default();
        assert!(
            last.trim_end().ends_with("body"),
            "{} chunks, last ends {:?}",
            cs.len(),
            &last[last.len().saturating_sub(40)..]
        );
    }

    #[test]
    fn a_page_of_headings_alone_heads_the_next_page() {
        let (text, pages) = paged(&[
            "body on page one",
            "## 2 Next section",
            "the section's text",
        ]);
        let cs = chunk_document(
            &text,
            Layout {
                pages: &pages,
                furniture: &[],
            },
            ChunkOptions::RAG_CHARS,
            &CharSizer,
        );
        let got: Vec<(Option<u32>, &str, &str)> = cs
            .iter()
            .map(|c| (c.page, c.text(&text).trim_end(), c.heading.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (Some(1), "body on page one", ""),
                (Some(3), "the section's text", "2 Next section")
            ]
        );
        // A document of headings alone still has its chunk, and so has a title-only slide.
        assert_eq!(chunks("# Only a title\n", 100, 10), ["# Only a title\n"]);
        let (deck, slides) = paged(&["## Slide 1: Results 2024", "## Slide 2\n\n- growth"]);
        let cs = chunk_document(
            &deck,
            Layout {
                pages: &slides,
                furniture: &[],
            },
            ChunkOptions::RAG_CHARS,
            &CharSizer,
        );
        let got: Vec<(Option<u32>, &str)> =
            cs.iter().map(|c| (c.page, c.heading.as_str())).collect();
        assert_eq!(
            got,
            [(Some(1), "Slide 1: Results 2024"), (Some(2), "Slide 2")]
        );
    }

    #[test]
    fn cut_points_found_from_a_cut_point_are_the_whole_texts_after_it() {
        for text in [
            "One. Two, three; four\nfive  six!\n\n  Seven? eight: nine",
            "知识库检索。系统，初始化；第二章：测试、结束！abc def",
            "  leading space, then words.\tTabbed\r\nCRLF line",
        ] {
            let all: Vec<(usize, Cut)> = CutPoints::new(text, 0).collect();
            assert!(!all.is_empty());
            for &(p, _) in &all {
                let after: Vec<(usize, Cut)> =
                    all.iter().copied().filter(|&(q, _)| q > p).collect();
                let from: Vec<(usize, Cut)> = CutPoints::new(text, p).collect();
                assert_eq!(from, after, "from {p} in {text:?}");
            }
        }
    }

    #[test]
    fn an_expired_deadline_or_a_small_memory_limit_stops_the_cut() {
        let text: String = (0..2000)
            .map(|i| format!("## Part {i}\n\nParagraph {i} says a little.\n\n"))
            .collect();
        let unbounded = chunk_markdown(&text, ChunkOptions::RAG_CHARS, &CharSizer);
        let bounded = |limits: ChunkLimits, sizer: &dyn Sizer| {
            chunk_document_bounded(
                &text,
                Layout::default(),
                ChunkOptions::RAG_CHARS,
                sizer,
                &limits,
            )
        };
        // Within the default limits: the same chunks as without any.
        assert_eq!(
            bounded(ChunkLimits::default(), &CharSizer).as_ref(),
            Ok(&unbounded)
        );
        // A deadline already past: nothing is cut, and the error says which limit.
        let expired = ChunkLimits {
            timeout: Some(Duration::ZERO),
            ..ChunkLimits::NONE
        };
        let e = bounded(expired, &CharSizer).unwrap_err();
        assert_eq!(e, ChunkError::Timeout(Duration::ZERO));
        assert_eq!(
            e.to_string(),
            "chunking took longer than 0 s (QUARRY_CHUNK_TIMEOUT_SECS)"
        );
        // A deadline that passes mid-cut stops it there, in the chunker's loops: each size
        // measured here takes a millisecond, and the whole cut would take seconds.
        let slow = |t: &str| {
            std::thread::sleep(Duration::from_millis(1));
            t.chars().count()
        };
        let started = Instant::now();
        let short = ChunkLimits {
            timeout: Some(Duration::from_millis(50)),
            ..ChunkLimits::NONE
        };
        assert_eq!(
            bounded(short, &slow),
            Err(ChunkError::Timeout(Duration::from_millis(50)))
        );
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(
            ChunkError::Timeout(Duration::from_millis(50)).to_string(),
            "chunking took longer than 50 ms (QUARRY_CHUNK_TIMEOUT_SECS)"
        );
        // A memory limit below what the blocks, lines and heading paths take.
        let tiny = ChunkLimits {
            max_memory_bytes: Some(4096),
            ..ChunkLimits::NONE
        };
        let e = bounded(tiny, &CharSizer).unwrap_err();
        assert_eq!(e, ChunkError::OutOfMemory { limit: 4096 });
        assert_eq!(
            e.to_string(),
            "chunking needs more than 4096 bytes of memory (QUARRY_CHUNK_MEMORY_MB)"
        );
        assert_eq!(
            ChunkError::OutOfMemory { limit: 64 << 20 }.to_string(),
            "chunking needs more than 64 MB of memory (QUARRY_CHUNK_MEMORY_MB)"
        );
    }

    #[test]
    fn the_memory_counted_grows_with_lines_and_blocks_not_with_prose() {
        let limit = |bytes: usize| ChunkLimits {
            max_memory_bytes: Some(bytes as u64),
            ..ChunkLimits::NONE
        };
        let cut = |text: &str, limits: ChunkLimits| {
            chunk_document_bounded(
                text,
                Layout::default(),
                ChunkOptions::RAG_CHARS,
                &CharSizer,
                &limits,
            )
        };
        // A megabyte of prose in one block: its working data is a small part of its size.
        let one_block = prose(200_000);
        assert!(one_block.len() > 1 << 20);
        assert!(cut(&one_block, limit(one_block.len() / 4)).is_ok());
        // Short paragraphs (46 bytes, two lines each): about their size.
        let paragraphs: String = (0..30_000)
            .map(|i| format!("Paragraph {i:05} says a little more than that.\n\n"))
            .collect();
        assert!(cut(&paragraphs, limit(2 * paragraphs.len())).is_ok());
        // The pathological shapes hold many times their size: a block per three bytes, a
        // heading (and its path) per four.
        for shape in ["a\n\n", "# a\n"] {
            let text = shape.repeat(300_000);
            assert_eq!(
                cut(&text, limit(4 * text.len())),
                Err(ChunkError::OutOfMemory {
                    limit: 4 * text.len() as u64
                }),
                "{shape:?}"
            );
            assert!(cut(&text, ChunkLimits::NONE).is_ok());
        }
    }

    #[test]
    fn section_numbers() {
        assert_eq!(section_number("3.15 /tmp"), Some((vec![3, 15], false)));
        assert_eq!(section_number("3.4. /bin : x"), Some((vec![3, 4], false)));
        assert_eq!(section_number("12"), Some((vec![12], true)));
        assert_eq!(section_number("Chapter 7"), Some((vec![7], true)));
        assert_eq!(section_number("第 3 章 系统初始化"), Some((vec![3], false)));
        assert_eq!(section_number("第3章"), Some((vec![3], true)));
        assert_eq!(section_number("2007 Tax Table"), None);
        assert_eq!(section_number("3D graphics"), None);
        assert_eq!(section_number("Rationale"), None);
    }
}
