//! Tables that a PDF draws as text in columns, without ruling lines, read row by row.
//!
//! pdf_oxide's reading order takes such a table apart: on a statistical table (a row label
//! with dot leaders, then its figures) it emits the figures as one table and the labels as
//! paragraphs elsewhere; on a package table beside prose it reads the columns as separate
//! blocks. Either way a question about one row ("robberies of people under 18") finds the
//! label and its figures in different passages. So a page on which words line up in at
//! least [`MIN_ROWS`] rows of aligned, short cells is rendered here instead, top to bottom:
//! the table as a Markdown table whose rows keep each label with its figures, the lines
//! around it as paragraphs (headings by font size, monospaced lines as code).
//!
//! Prose in columns is never a grid: its cells are long (a column of running text), where a
//! table's are short or numeric ([`is_grid_row`]).

use pdf_oxide::PdfDocument;
use pdf_oxide::layout::Word;

use crate::util::is_cjk;

/// Rows of cells a page needs to be read as a table.
const MIN_ROWS: usize = 4;
/// A gap wider than this many font sizes separates two cells of a row.
const CELL_GAP: f32 = 1.2;
/// Median cell length (characters) above which a row is prose in columns, not a table row.
const MAX_MEDIAN_CELL: usize = 24;

/// One word-group of a visual line: text between two wide gaps.
#[derive(Debug, Clone)]
struct Cell {
    x0: f32,
    x1: f32,
    text: String,
}

/// Words sharing a baseline band, left to right.
#[derive(Debug, Clone)]
struct Line {
    /// Top and bottom in page space, top greater (PDF coordinates grow upwards).
    top: f32,
    bottom: f32,
    size: f32,
    mono: bool,
    /// Every word bold.
    bold: bool,
    cells: Vec<Cell>,
    /// `cells` with runs of figures split, one cell per figure ([`split_figures`]).
    parts: Vec<Cell>,
    /// Whether the line is a table row ([`is_grid_row`]).
    grid_row: bool,
}

impl Line {
    fn new(top: f32, bottom: f32, size: f32, mono: bool, cells: Vec<Cell>) -> Line {
        let parts = split_figures(&cells);
        let grid_row = !mono && is_grid_row(&parts);
        Line {
            top,
            bottom,
            size,
            mono,
            bold: false,
            cells,
            parts,
            grid_row,
        }
    }

    fn has_figures(&self) -> bool {
        self.parts.iter().any(|c| is_figure(&c.text))
    }

    fn center(&self) -> f32 {
        (self.top + self.bottom) / 2.0
    }

    fn text(&self) -> String {
        join_words(self.cells.iter().map(|c| c.text.as_str()))
    }
}

/// The page as Markdown read row by row, when it holds a grid of aligned cells that
/// `converted` (pdf_oxide's Markdown of the page) takes apart; `None` otherwise (the caller
/// keeps `converted`).
pub(crate) fn grid_page_markdown(
    doc: &PdfDocument,
    index: usize,
    converted: &str,
) -> Option<String> {
    let words = doc.extract_words(index).ok()?;
    let lines = visual_lines(&words);
    let blocks = grid_blocks(&lines);
    if blocks.is_empty()
        || prose_in_columns(&lines, &blocks)
        || rows_kept(&lines, &blocks, converted)
    {
        return None;
    }
    Some(render(&lines, &blocks))
}

/// Whether the page's running text (lines outside the grids) is set in columns: then the
/// "grid" is a paper's figure beside a column, and pdf_oxide's column reading is right.
fn prose_in_columns(lines: &[Line], blocks: &[(usize, usize)]) -> bool {
    let in_grid = |i: usize| blocks.iter().any(|&(s, e)| (s..e).contains(&i));
    let (mut prose, mut columnar) = (0usize, 0usize);
    for (i, line) in lines.iter().enumerate() {
        if in_grid(i) || line.text().chars().count() < 30 {
            continue;
        }
        prose += 1;
        let long = line
            .cells
            .iter()
            .filter(|c| c.text.chars().count() >= 15)
            .count();
        columnar += usize::from(long >= 2);
    }
    columnar * 3 > prose
}

/// Whether `converted` keeps most grid rows together: their first two cells on one line.
fn rows_kept(lines: &[Line], blocks: &[(usize, usize)], converted: &str) -> bool {
    let key = |s: &str| -> String { s.chars().filter(|c| c.is_alphanumeric()).take(12).collect() };
    let md_lines: Vec<String> = converted
        .lines()
        .map(|l| l.chars().filter(|c| c.is_alphanumeric()).collect())
        .collect();
    let (mut rows, mut kept) = (0usize, 0usize);
    for &(start, end) in blocks {
        for line in &lines[start..end] {
            let cells = &line.parts;
            if !line.grid_row || cells.len() < 2 {
                continue;
            }
            let (a, b) = (key(&label(&cells[0].text)), key(&cells[1].text));
            if a.is_empty() || b.is_empty() {
                continue;
            }
            rows += 1;
            kept += usize::from(
                md_lines
                    .iter()
                    .any(|m| m.find(&a).is_some_and(|i| m[i + a.len()..].contains(&b))),
            );
        }
    }
    kept * 2 >= rows
}

/// Groups words into visual lines (vertical centres within half a font size), each split
/// into cells at wide gaps.
fn visual_lines(words: &[Word]) -> Vec<Line> {
    let mut words: Vec<&Word> = words
        .iter()
        .filter(|w| !w.text.trim().is_empty() && w.bbox.height > 0.0)
        .collect();
    let center = |w: &Word| w.bbox.y + w.bbox.height / 2.0;
    // Top of the page first.
    words.sort_by(|a, b| center(b).total_cmp(&center(a)));
    let mut groups: Vec<Vec<&Word>> = Vec::new();
    for w in words {
        let size = w.avg_font_size.max(1.0);
        match groups.last_mut() {
            Some(g)
                if g.iter().any(|o| {
                    (center(o) - center(w)).abs() < size.min(o.avg_font_size.max(1.0)) * 0.5
                }) =>
            {
                g.push(w)
            }
            _ => groups.push(vec![w]),
        }
    }
    groups
        .into_iter()
        .map(|mut g| {
            g.sort_by(|a, b| a.bbox.x.total_cmp(&b.bbox.x));
            let size = median(g.iter().map(|w| w.avg_font_size).collect()).max(1.0);
            let mono = g.iter().all(|w| is_mono_font(&w.dominant_font));
            let bold = g.iter().all(|w| w.is_bold);
            let top = g
                .iter()
                .map(|w| w.bbox.y + w.bbox.height)
                .fold(f32::MIN, f32::max);
            let bottom = g.iter().map(|w| w.bbox.y).fold(f32::MAX, f32::min);
            let mut cells: Vec<Cell> = Vec::new();
            for w in g {
                let (x0, x1) = (w.bbox.x, w.bbox.x + w.bbox.width);
                let text = w.text.trim().to_owned();
                match cells.last_mut() {
                    Some(c) if x0 - c.x1 < size * CELL_GAP => {
                        c.text = join_words([c.text.as_str(), text.as_str()].into_iter());
                        c.x1 = c.x1.max(x1);
                    }
                    _ => cells.push(Cell { x0, x1, text }),
                }
            }
            Line {
                bold,
                ..Line::new(top, bottom, size, mono, cells)
            }
        })
        .collect()
}

fn is_mono_font(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    ["mono", "courier", "consol", "menlo", "typewriter", "fixed"]
        .iter()
        .any(|k| n.contains(k))
}

/// A cell's text without dot leaders ("Robbery. . . . . ." → "Robbery").
fn label(text: &str) -> String {
    let t = text.trim_end_matches(['.', ' ', '…', '·']);
    t.trim().to_owned()
}

/// A figure: a number (thousands separators, decimals, sign, percent), or a table's
/// placeholders for none ("–", "(X)", "N/A", "NA").
fn is_figure(token: &str) -> bool {
    let t = token.trim_matches(|c| c == '(' || c == ')');
    if matches!(t, "–" | "—" | "-" | "X" | "NA" | "N/A" | "n/a") {
        return true;
    }
    let t = t.trim_start_matches(['-', '+', '$']).trim_end_matches('%');
    !t.is_empty()
        && t.chars().any(|c| c.is_ascii_digit())
        && t.chars()
            .all(|c| c.is_ascii_digit() || c == ',' || c == '.')
}

/// The row's cells with runs of figures split into one cell per figure: a cell of several
/// figures ("102.1 25.5 76.6", set as one run), and a label whose figures follow its dot
/// leaders in the same run ("Robbery....... 100,496 43,039"). Each part gets a share of the
/// run's width in proportion to its length.
fn split_figures(cells: &[Cell]) -> Vec<Cell> {
    let mut out = Vec::with_capacity(cells.len());
    for c in cells {
        let (head, tail) = match leader_split(&c.text) {
            Some((label, figures)) => (Some(label), figures),
            None => (None, c.text.as_str()),
        };
        let tokens: Vec<&str> = tail.split_whitespace().collect();
        let all_figures = !tokens.is_empty() && tokens.iter().all(|t| is_figure(t));
        if !(all_figures && (head.is_some() || tokens.len() > 1)) {
            out.push(c.clone());
            continue;
        }
        let parts: Vec<&str> = head.into_iter().chain(tokens).collect();
        let total: usize = parts.iter().map(|t| t.chars().count() + 1).sum();
        let width = c.x1 - c.x0;
        let mut x = c.x0;
        for t in parts {
            let w = width * (t.chars().count() + 1) as f32 / total.max(1) as f32;
            out.push(Cell {
                x0: x,
                x1: x + w,
                text: t.to_owned(),
            });
            x += w;
        }
    }
    out
}

/// A label and the text after its dot leaders (three or more dots, spaced or not).
fn leader_split(text: &str) -> Option<(&str, &str)> {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'.' {
            let mut j = i;
            let mut dots = 0;
            while j < bytes.len() && (bytes[j] == b'.' || bytes[j] == b' ') {
                dots += usize::from(bytes[j] == b'.');
                j += 1;
            }
            if dots >= 3 {
                let label = text[..i].trim();
                let rest = text[j..].trim();
                return (!label.is_empty() && !rest.is_empty()).then_some((label, rest));
            }
            i = j;
        } else {
            i += 1;
        }
    }
    None
}

/// A row of a table (its cells with runs of figures split): three or more cells, or a label
/// and two or more figures, whose cells are short (prose set in columns has long ones) or
/// mostly figures.
fn is_grid_row(cells: &[Cell]) -> bool {
    let figures = cells.iter().filter(|c| is_figure(&c.text)).count();
    if cells.len() < 3 {
        return false;
    }
    let mut lengths: Vec<usize> = cells
        .iter()
        .map(|c| label(&c.text).chars().count())
        .collect();
    lengths.sort_unstable();
    let median_len = lengths[lengths.len() / 2];
    figures * 2 >= cells.len() || median_len <= MAX_MEDIAN_CELL
}

/// The runs of lines that hold at least [`MIN_ROWS`] grid rows each, allowing up to two
/// other lines between rows (a wrapped cell, a label waiting for its figures), as
/// `(start, end)` line indexes, end exclusive, top to bottom.
fn grid_blocks(lines: &[Line]) -> Vec<(usize, usize)> {
    let mut blocks = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if !lines[i].grid_row {
            i += 1;
            continue;
        }
        let start = i;
        let (mut end, mut rows, mut gap) = (i + 1, 1, 0);
        let mut j = i + 1;
        while j < lines.len() && gap <= 2 {
            if lines[j].grid_row {
                rows += 1;
                end = j + 1;
                gap = 0;
            } else {
                gap += 1;
            }
            j += 1;
        }
        if rows >= MIN_ROWS && aligned(&lines[start..end]) && regular(&lines[start..end]) {
            let end = with_wrapped_tail(lines, start, end);
            let start = with_waiting_label(
                lines,
                start,
                blocks.last().map_or(0, |b: &(usize, usize)| b.1),
            );
            blocks.push((start, end));
        }
        i = end;
    }
    blocks
}

/// The block's end extended over up to two lines that continue its last row: close below
/// it and not starting in the label column (a description cell wrapped onto the next line).
fn with_wrapped_tail(lines: &[Line], start: usize, mut end: usize) -> usize {
    let size = lines[start].size;
    let left = label_column(&lines[start..end]);
    for _ in 0..2 {
        let (Some(next), Some(prev)) = (lines.get(end), lines.get(end - 1)) else {
            break;
        };
        let close = prev.bottom - next.top < size * 0.8;
        let indented = next.cells.first().is_some_and(|c| c.x0 - left > size * 1.5);
        if !(close && indented) {
            break;
        }
        end += 1;
    }
    end
}

/// The left edge of the block's first column (where row labels start).
fn label_column(block: &[Line]) -> f32 {
    block
        .iter()
        .flat_map(|l| l.cells.first().map(|c| c.x0))
        .fold(f32::MAX, f32::min)
}

/// The block's start moved up over a label alone on the line above its first row, when
/// that row has no label of its own (figures set lower than their label), but not into the
/// block before (`floor`).
fn with_waiting_label(lines: &[Line], start: usize, floor: usize) -> usize {
    let (Some(above), Some(first)) = (
        start.checked_sub(1).and_then(|i| lines.get(i)),
        lines.get(start),
    ) else {
        return start;
    };
    let (Some(label), Some(lead)) = (above.cells.first(), first.cells.first()) else {
        return start;
    };
    let close = above.bottom - first.top < first.size * 0.8;
    if start > floor && above.cells.len() == 1 && close && lead.x0 - label.x0 > first.size * 1.5 {
        start - 1
    } else {
        start
    }
}

/// Whether most of the block's grid rows have the same number of cells, as a table's rows
/// do (boxes of a diagram line up too, but in rows of every width).
fn regular(block: &[Line]) -> bool {
    let counts: Vec<usize> = block
        .iter()
        .filter(|l| l.grid_row)
        .map(|l| l.parts.len())
        .collect();
    let mode = counts
        .iter()
        .map(|c| counts.iter().filter(|d| *d == c).count())
        .max()
        .unwrap_or(0);
    mode >= MIN_ROWS && mode * 2 >= counts.len()
}

/// Whether the block's grid rows share column starts: most cells begin where a cell of
/// another row begins (within a font size), as a table's columns do.
fn aligned(block: &[Line]) -> bool {
    // Rows whose label leads its figures through dot leaders are table rows by that alone
    // (their figures' positions inside the run are estimates).
    let rows: Vec<&[Cell]> = block
        .iter()
        .filter(|l| l.grid_row && !l.cells.iter().any(|c| leader_split(&c.text).is_some()))
        .map(|l| l.parts.as_slice())
        .collect();
    if rows.is_empty() {
        return true;
    }
    let (mut shared, mut total) = (0usize, 0usize);
    for (r, row) in rows.iter().enumerate() {
        let size = block.first().map_or(10.0, |l| l.size);
        for c in row.iter() {
            total += 1;
            let elsewhere = rows.iter().enumerate().any(|(o, other)| {
                o != r
                    && other
                        .iter()
                        .any(|d| (d.x0 - c.x0).abs() < size || (d.x1 - c.x1).abs() < size)
            });
            shared += usize::from(elsewhere);
        }
    }
    total > 0 && shared * 10 >= total * 7
}

fn render(lines: &[Line], blocks: &[(usize, usize)]) -> String {
    let body_size = median(lines.iter().map(|l| l.size).collect());
    let mut out = String::new();
    let mut at = 0;
    for &(start, end) in blocks {
        push_text_lines(&mut out, &lines[at..start], body_size);
        push_table(&mut out, &lines[start..end]);
        at = end;
    }
    push_text_lines(&mut out, &lines[at..], body_size);
    out.trim_end().to_owned() + "\n"
}

/// Lines outside the table: a heading per line set larger than the body, monospaced runs
/// as code blocks, the rest as paragraphs (a vertical gap wider than a line ends one).
fn push_text_lines(out: &mut String, lines: &[Line], body_size: f32) {
    let mut para: Vec<String> = Vec::new();
    let mut code: Vec<String> = Vec::new();
    let mut prev: Option<&Line> = None;
    let flush_para = |out: &mut String, para: &mut Vec<String>| {
        if !para.is_empty() {
            out.push_str(&join_words(para.iter().map(String::as_str)));
            out.push_str("\n\n");
            para.clear();
        }
    };
    let flush_code = |out: &mut String, code: &mut Vec<String>| {
        if !code.is_empty() {
            out.push_str("```\n");
            for l in code.iter() {
                out.push_str(l);
                out.push('\n');
            }
            out.push_str("```\n\n");
            code.clear();
        }
    };
    for line in lines {
        let text = line.text();
        if line.mono {
            flush_para(out, &mut para);
            code.push(text);
            prev = Some(line);
            continue;
        }
        flush_code(out, &mut code);
        if line.size > body_size * 1.15 {
            flush_para(out, &mut para);
            out.push_str("#### ");
            out.push_str(&text);
            out.push_str("\n\n");
            prev = Some(line);
            continue;
        }
        // A filing's section title in bold ("Note 4 – Financial Instruments") stands
        // alone, for `pdf_structure` to make it a heading.
        if line.bold && crate::pdf_structure::filing_level(&text).is_some() {
            flush_para(out, &mut para);
            out.push_str("**");
            out.push_str(&text);
            out.push_str("**\n\n");
            prev = Some(line);
            continue;
        }
        if let Some(p) = prev
            && p.bottom - line.top > line.size * 0.9
        {
            flush_para(out, &mut para);
        }
        para.push(text);
        prev = Some(line);
    }
    flush_code(out, &mut code);
    flush_para(out, &mut para);
}

/// The table block as one Markdown table. Lines before the first that has a cell in the
/// label column are its header. A line without a label cell continues a row (a wrapped
/// cell, or figures set below their label): it joins the nearer of the rows above and below,
/// or the row above when that one is a label still waiting for its figures. A row's cells
/// are its lines' cells, those that overlap horizontally joined (a wrapped cell), in
/// left-to-right order.
fn push_table(out: &mut String, block: &[Line]) {
    let size = block.first().map_or(10.0, |l| l.size);
    let left = label_column(block);
    let starts: Vec<bool> = block
        .iter()
        .map(|l| l.cells.first().is_some_and(|c| c.x0 - left < size * 1.5))
        .collect();
    let first = starts.iter().position(|&s| s).unwrap_or(0);
    // Lines of each row: the header, then one row per starting line.
    let mut rows: Vec<Vec<usize>> = Vec::new();
    if first > 0 {
        rows.push((0..first).collect());
    }
    let mut row_of: Vec<usize> = vec![0; block.len()];
    let mut label_above: Vec<usize> = Vec::new();
    for i in first..block.len() {
        if !starts[i] {
            continue;
        }
        // A label alone on its line, followed by another row's label: the first half of a
        // label wrapped over two lines ("Murder and nonnegligent" / "manslaughter . . .").
        let next_starts = (i + 1..block.len()).find(|&k| starts[k]) == Some(i + 1);
        if block[i].cells.len() == 1 && next_starts && !block[i].has_figures() {
            label_above.push(i);
            continue;
        }
        row_of[i] = rows.len();
        let mut lines = std::mem::take(&mut label_above);
        for &k in &lines {
            row_of[k] = rows.len();
        }
        lines.push(i);
        rows.push(lines);
    }
    for k in label_above {
        row_of[k] = rows.len();
        rows.push(vec![k]);
    }
    for i in first..block.len() {
        if starts[i] {
            continue;
        }
        let above = (first..i).rev().find(|&k| starts[k]);
        let below = (i + 1..block.len()).find(|&k| starts[k]);
        let target = match (above, below) {
            (Some(a), Some(b)) => {
                let da = (block[a].center() - block[i].center()).abs();
                let db = (block[b].center() - block[i].center()).abs();
                let waiting =
                    block[a].cells.len() == 1 && leader_split(&block[a].cells[0].text).is_none();
                if waiting || da <= db { a } else { b }
            }
            (Some(a), None) => a,
            (None, Some(b)) => b,
            (None, None) => continue,
        };
        rows[row_of[target]].push(i);
    }
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|lines| {
            let mut lines = lines.clone();
            lines.sort_unstable();
            row_cells(lines.iter().map(|&i| &block[i]))
        })
        .collect();
    let width = cells.iter().map(Vec::len).max().unwrap_or(0);
    if width == 0 {
        return;
    }
    for (n, row) in cells.iter().enumerate() {
        out.push('|');
        for k in 0..width {
            out.push(' ');
            out.push_str(&row.get(k).map_or(String::new(), |c| c.replace('|', "\\|")));
            out.push_str(" |");
        }
        out.push('\n');
        if n == 0 {
            out.push('|');
            out.push_str(&"---|".repeat(width));
            out.push('\n');
        }
    }
    out.push('\n');
}

/// The cells of a row's lines (top to bottom), those overlapping horizontally joined, left
/// to right; the first without its dot leaders.
fn row_cells<'a>(lines: impl Iterator<Item = &'a Line>) -> Vec<String> {
    let mut columns: Vec<Cell> = Vec::new();
    for line in lines {
        for c in line.parts.iter().cloned() {
            match columns.iter_mut().find(|k| c.x0 < k.x1 && k.x0 < c.x1) {
                Some(k) => {
                    k.text = join_words([k.text.as_str(), c.text.as_str()].into_iter());
                    k.x0 = k.x0.min(c.x0);
                    k.x1 = k.x1.max(c.x1);
                }
                None => columns.push(c),
            }
        }
    }
    columns.sort_by(|a, b| a.x0.total_cmp(&b.x0));
    columns
        .into_iter()
        .enumerate()
        .map(|(k, c)| if k == 0 { label(&c.text) } else { c.text })
        .collect()
}

fn median(mut v: Vec<f32>) -> f32 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f32::total_cmp);
    v[v.len() / 2]
}

/// Words joined with a space, except between two CJK characters.
fn join_words<'a>(words: impl Iterator<Item = &'a str>) -> String {
    let mut out = String::new();
    for w in words {
        let w = w.trim();
        if w.is_empty() {
            continue;
        }
        let glue = match (out.chars().last(), w.chars().next()) {
            (None, _) => false,
            (Some(a), Some(b)) => !(is_cjk(a) && is_cjk(b)),
            _ => true,
        };
        if glue {
            out.push(' ');
        }
        out.push_str(w);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(x0: f32, x1: f32, text: &str) -> Cell {
        Cell {
            x0,
            x1,
            text: text.into(),
        }
    }

    fn line(y: f32, cells: Vec<Cell>) -> Line {
        Line::new(y + 8.0, y, 8.0, false, cells)
    }

    #[test]
    fn a_bold_filing_section_title_stands_alone() {
        let title = Line {
            bold: true,
            ..line(
                90.0,
                vec![cell(10.0, 200.0, "Note 4 – Financial Instruments")],
            )
        };
        let lines = vec![
            line(100.0, vec![cell(10.0, 300.0, "The end of note 3.")]),
            title,
            line(
                80.0,
                vec![cell(10.0, 300.0, "Cash, Cash Equivalents and Securities")],
            ),
        ];
        let mut out = String::new();
        push_text_lines(&mut out, &lines, 8.0);
        assert_eq!(
            out,
            "The end of note 3.\n\n**Note 4 – Financial Instruments**\n\n\
             Cash, Cash Equivalents and Securities\n\n"
        );
        // A bold line that is no section title stays in its paragraph.
        let lines = vec![
            line(100.0, vec![cell(10.0, 300.0, "Some text")]),
            Line {
                bold: true,
                ..line(90.0, vec![cell(10.0, 200.0, "in bold")])
            },
        ];
        let mut out = String::new();
        push_text_lines(&mut out, &lines, 8.0);
        assert_eq!(out, "Some text in bold\n\n");
    }

    #[test]
    fn figures_and_labels() {
        assert!(is_figure("1,080.1") && is_figure("–") && is_figure("(X)") && is_figure("12%"));
        assert!(!is_figure("Robbery") && !is_figure("V:821,"));
        assert_eq!(label("Robbery. . . . . . ."), "Robbery");
    }

    #[test]
    fn label_rows_keep_their_figures_and_prose_columns_are_no_table() {
        let rows = vec![
            line(100.0, vec![cell(10.0, 60.0, "Total . . . .")]),
            line(96.0, vec![cell(200.0, 300.0, "11,062.6 1,540.0 9,522.6")]),
            line(
                80.0,
                vec![
                    cell(10.0, 60.0, "Robbery. . . ."),
                    cell(200.0, 300.0, "102.1 25.5 76.6"),
                ],
            ),
            line(
                70.0,
                vec![
                    cell(10.0, 60.0, "Burglary. . . ."),
                    cell(200.0, 300.0, "240.9 60.3 180.6"),
                ],
            ),
            line(
                60.0,
                vec![
                    cell(10.0, 60.0, "Arson. . . ."),
                    cell(200.0, 300.0, "9.8 4.3 5.5"),
                ],
            ),
            line(
                50.0,
                vec![
                    cell(10.0, 60.0, "Fraud . . ."),
                    cell(200.0, 300.0, "173.7 5.1 168.5"),
                ],
            ),
        ];
        let blocks = grid_blocks(&rows);
        assert_eq!(blocks, vec![(0, rows.len())]);
        let md = render(&rows, &blocks);
        assert!(md.contains("| Robbery | 102.1 | 25.5 | 76.6 |"), "{md}");
        assert!(
            md.contains("| Total | 11,062.6 | 1,540.0 | 9,522.6 |"),
            "{md}"
        );

        let prose = "the quick brown fox jumps over the lazy dog again and again";
        let columns: Vec<Line> = (0..8)
            .map(|i| {
                line(
                    100.0 - 10.0 * i as f32,
                    vec![
                        cell(10.0, 150.0, prose),
                        cell(170.0, 310.0, prose),
                        cell(330.0, 470.0, prose),
                    ],
                )
            })
            .collect();
        assert!(grid_blocks(&columns).is_empty());
    }
}
