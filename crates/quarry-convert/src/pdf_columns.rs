//! Reading regions of a PDF page, found from the whitespace between its text spans.
//!
//! pdf_oxide reads a page either straight across (which interleaves side-by-side columns) or
//! by its own XY-cut, whose minimum gutter (15 pt) is wider than the 11–12 pt gutters of,
//! e.g., the IRS instructions' three columns of prose, so those columns came out interleaved
//! ("2. 183 days during the period 2007, See Pub. 519 …") and questions retrieved the wrong
//! page. Here the page is cut, recursively, into regions each read top to bottom:
//!
//! * at a clean vertical corridor: a gap in the union of the spans' x-extents (each shrunk by
//!   1 pt) at least `max(7 pt, 0.6 × median font size)` wide, with prose on both sides (each
//!   side at least 80 pt wide, holding at least 12% of the characters, mostly letters, in
//!   lines of 20 characters or more, the lines on the left mostly running up to the gutter),
//!   so that a table's label column is not cut from its figures nor code from its comments;
//!   columns are read left to right;
//! * otherwise, where a few lines (a title over the columns, a worksheet's head or rows: at
//!   most 40% of the characters, judged by whole line segments so that words taken out of
//!   every line cannot fake a gutter) are all that cross such a corridor, into horizontal
//!   bands: each run of those lines is a band read full width, and the stretches between
//!   are cut again, top to bottom (more than six bands is a figure or listing: not cut);
//! * otherwise the region is a leaf.
//!
//! Functions here work on span rectangles only (PDF user space, y up); `pdf.rs` turns the
//! regions into pdf_oxide `include_region` conversions.

/// A text span: its box (y up), non-space characters (a wide CJK character counts two),
/// letters among them, and font size.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Item {
    pub x0: f32,
    pub y0: f32,
    pub x1: f32,
    pub y1: f32,
    pub chars: usize,
    pub letters: usize,
    pub size: f32,
}

impl Item {
    fn cx(&self) -> f32 {
        (self.x0 + self.x1) / 2.0
    }

    fn cy(&self) -> f32 {
        (self.y0 + self.y1) / 2.0
    }

    fn width(&self) -> f32 {
        self.x1 - self.x0
    }
}

/// A rectangle of the page (y up).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Area {
    pub x0: f32,
    pub y0: f32,
    pub x1: f32,
    pub y1: f32,
}

const MAX_DEPTH: usize = 8;
const MAX_REGIONS: usize = 40;
/// Share of a region's characters that spans crossing a corridor may hold.
const STRADDLE_BUDGET: f32 = 0.4;
/// Most runs of crossing rows a region is cut at.
const MAX_BANDS: usize = 6;

/// The page's regions in reading order; a single region (`page`) when it has no columns.
pub(crate) fn reading_regions(items: &[Item], page: Area) -> Vec<Area> {
    let items: Vec<Item> = items
        .iter()
        .copied()
        .filter(|i| {
            [i.x0, i.x1, i.y0, i.y1, i.size]
                .iter()
                .all(|v| v.is_finite())
                && i.x1 >= i.x0
                && i.y1 >= i.y0
                && i.chars > 0
        })
        .collect();
    let mut out = Vec::new();
    split(&items, page, 0, &mut out);
    if out.len() > MAX_REGIONS {
        return vec![page];
    }
    out
}

fn split(items: &[Item], area: Area, depth: usize, out: &mut Vec<Area>) {
    if depth >= MAX_DEPTH || items.len() < 2 {
        out.push(area);
        return;
    }
    if let Some((gl, gr)) = clean_corridor(items) {
        let x = (gl + gr) / 2.0;
        let (left, right): (Vec<Item>, Vec<Item>) = items.iter().partition(|i| i.cx() < x);
        split(&left, Area { x1: x, ..area }, depth + 1, out);
        split(&right, Area { x0: x, ..area }, depth + 1, out);
        return;
    }
    if let Some(groups) = bands_around_straddlers(items, area) {
        for (group, band_area, full_width) in groups {
            if full_width {
                out.push(band_area);
            } else {
                split(&group, band_area, depth + 1, out);
            }
        }
        return;
    }
    out.push(area);
}

fn median(mut v: Vec<f32>) -> f32 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f32::total_cmp);
    v[v.len() / 2]
}

/// The leftmost clean vertical corridor `(left, right)` with prose on both sides.
fn clean_corridor(items: &[Item]) -> Option<(f32, f32)> {
    if items.len() < 2 {
        return None;
    }
    let min_gap = (0.6 * median(items.iter().map(|i| i.size).collect())).max(7.0);
    let total: usize = items.iter().map(|i| i.chars).sum();
    let mut spans: Vec<(f32, f32)> = items.iter().map(shrunk).collect();
    spans.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut end = spans[0].1;
    for &(a, b) in &spans[1..] {
        if a - end >= min_gap {
            let (gl, gr) = (end, a);
            let x = (gl + gr) / 2.0;
            let (left, right): (Vec<Item>, Vec<Item>) = items.iter().partition(|i| i.cx() < x);
            if side_is_prose(&left, total)
                && side_is_prose(&right, total)
                && lines_reach_gutter(&left, gl, min_gap)
            {
                return Some((gl, gr));
            }
        }
        end = end.max(b);
    }
    None
}

/// A span's x-extent less 1 pt each side (touching neighbours do not close a gutter).
fn shrunk(i: &Item) -> (f32, f32) {
    if i.width() > 2.0 {
        (i.x0 + 1.0, i.x1 - 1.0)
    } else {
        (i.cx(), i.cx())
    }
}

/// Whether one side of a corridor reads as a column of prose: wide enough, a fair share of
/// the characters, mostly letters, in lines of some length.
fn side_is_prose(side: &[Item], total: usize) -> bool {
    let chars: usize = side.iter().map(|i| i.chars).sum();
    let letters: usize = side.iter().map(|i| i.letters).sum();
    let x0 = side.iter().map(|i| i.x0).fold(f32::INFINITY, f32::min);
    let x1 = side.iter().map(|i| i.x1).fold(f32::NEG_INFINITY, f32::max);
    if side.is_empty() || x1 - x0 < 80.0 || chars * 100 < total * 12 || letters * 2 < chars {
        return false;
    }
    median(lines(side).into_iter().map(|l| l.0 as f32).collect()) >= 20.0
}

/// Text lines (spans grouped by vertical centre): characters, left and right ends.
fn lines(items: &[Item]) -> Vec<(usize, f32, f32)> {
    let mut sorted: Vec<&Item> = items.iter().collect();
    sorted.sort_by(|a, b| b.cy().total_cmp(&a.cy()));
    let mut lines = Vec::new();
    // Current line: centre, font size, characters, left, right.
    let mut current: Option<(f32, f32, usize, f32, f32)> = None;
    for i in sorted {
        match current.as_mut() {
            Some((cy, size, n, x0, x1))
                if (*cy - i.cy()).abs() <= 0.4 * size.max(i.size).max(1.0) =>
            {
                *n += i.chars;
                *x0 = x0.min(i.x0);
                *x1 = x1.max(i.x1);
            }
            _ => {
                if let Some((_, _, n, x0, x1)) = current {
                    lines.push((n, x0, x1));
                }
                current = Some((i.cy(), i.size, i.chars, i.x0, i.x1));
            }
        }
    }
    if let Some((_, _, n, x0, x1)) = current {
        lines.push((n, x0, x1));
    }
    lines
}

/// Whether the lines left of a gutter at `gutter` mostly run up to it, as set prose does
/// (a paragraph's last line and headings aside); code beside its comments, or a table's
/// label column, ends anywhere. Only line segments ending in the right half of the side
/// count (the side may hold further columns, or a box, left of the one at the gutter).
fn lines_reach_gutter(left: &[Item], gutter: f32, min_gap: f32) -> bool {
    let (_, extents, chars, _) = segments(left, min_gap);
    let x0 = left.iter().map(|i| i.x0).fold(f32::INFINITY, f32::min);
    let mid = (x0 + gutter) / 2.0;
    let near: Vec<(f32, f32)> = extents
        .iter()
        .zip(&chars)
        .filter(|(e, n)| **n >= 3 && e.1 > mid)
        .map(|(e, _)| *e)
        .collect();
    let start = median(near.iter().map(|e| e.0).collect());
    let slack = ((gutter - start) * 0.2).max(15.0);
    let full = near.iter().filter(|e| e.1 >= gutter - slack).count();
    !near.is_empty() && full * 10 >= near.len() * 6
}

/// Where only a few wide spans cross an otherwise clean corridor: the region cut into
/// horizontal groups, top to bottom, each with its items, its area, and whether it is a run
/// of those crossing rows (read full width) rather than a stretch to cut again.
fn bands_around_straddlers(items: &[Item], area: Area) -> Option<Vec<(Vec<Item>, Area, bool)>> {
    let total: usize = items.iter().map(|i| i.chars).sum();
    let budget = (total as f32 * STRADDLE_BUDGET) as usize;
    let min_gap = (0.6 * median(items.iter().map(|i| i.size).collect())).max(7.0);
    let left = items.iter().map(|i| i.x0).fold(f32::INFINITY, f32::min);
    let right = items.iter().map(|i| i.x1).fold(f32::NEG_INFINITY, f32::max);
    // Spans cross (or not) as whole line segments, so that taking out the words of lines
    // that cross cannot leave a gutter behind.
    let (segment_of, extents, seg_chars, line_of) = segments(items, min_gap);
    let across = |(a, b): (f32, f32), x0: f32, x1: f32| a < x1 && b > x0;
    // Windows as wide as a gutter, 1 pt apart, each side leaving room for a column; each
    // costs the characters of the segments across it.
    let cost = |x: f32| -> usize {
        extents
            .iter()
            .zip(&seg_chars)
            .filter(|(e, _)| across(**e, x, x + min_gap))
            .map(|(_, n)| n)
            .sum()
    };
    let mut windows: Vec<(usize, f32)> = Vec::new();
    let mut x = left + 80.0;
    while x + min_gap <= right - 80.0 && windows.len() < 2000 {
        let c = cost(x);
        if c <= budget {
            windows.push((c, x));
        }
        x += 1.0;
    }
    windows.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
    let mut tried: Vec<f32> = Vec::new();
    let mut corridor = None;
    for &(_, x) in &windows {
        if tried.len() >= 3 {
            break;
        }
        if tried.iter().any(|t| (t - x).abs() < 20.0) {
            continue;
        }
        tried.push(x);
        let rest: Vec<Item> = items
            .iter()
            .zip(&segment_of)
            .filter(|(_, s)| !across(extents[**s], x, x + min_gap))
            .map(|(i, _)| *i)
            .collect();
        if let Some(c) = clean_corridor(&rest) {
            corridor = Some(c);
            break;
        }
    }
    let (gl, gr) = corridor?;
    // A line with a segment across the corridor goes whole into its band (code with its
    // comment, a worksheet line with its amount).
    let mut line_crosses = vec![false; line_of.iter().max().map_or(0, |m| m + 1)];
    for (n, &s) in segment_of.iter().enumerate() {
        if across(extents[s], gl, gr) {
            line_crosses[line_of[n]] = true;
        }
    }
    let crossing: Vec<bool> = line_of.iter().map(|&l| line_crosses[l]).collect();
    let crosses = |n: usize| crossing.get(n).copied().unwrap_or(false);
    // Rows of crossing spans, merged where they touch, top first.
    let mut bands: Vec<(f32, f32)> = items
        .iter()
        .enumerate()
        .filter(|(n, _)| crosses(*n))
        .map(|(_, i)| (i.y0, i.y1))
        .collect();
    bands.sort_by(|a, b| b.1.total_cmp(&a.1));
    // Consecutive crossing rows with nothing else between them are one band.
    let between = |low: f32, high: f32| {
        items
            .iter()
            .enumerate()
            .any(|(n, i)| !crosses(n) && i.cy() > low && i.cy() < high)
    };
    let mut merged: Vec<(f32, f32)> = Vec::new();
    for (y0, y1) in bands {
        match merged.last_mut() {
            Some(last) if y1 >= last.0 - 1.0 || !between(y1, last.0) => {
                last.0 = last.0.min(y0);
            }
            _ => merged.push((y0, y1)),
        }
    }
    // Many bands are a figure or a listing with lines across, not a title over columns.
    if merged.len() > MAX_BANDS {
        return None;
    }
    // Group index: 2k+1 for band k, 2k for the stretch above band k (2·len below the last).
    let group_of = |n: usize, i: &Item| -> usize {
        if crosses(n) {
            let cy = i.cy();
            let k = merged
                .iter()
                .position(|&(y0, y1)| cy >= y0 - 0.5 && cy <= y1 + 0.5)
                .unwrap_or(0);
            return 2 * k + 1;
        }
        let cy = i.cy();
        for (k, &(y0, y1)) in merged.iter().enumerate() {
            if cy >= y0 && cy <= y1 {
                return 2 * k + 1;
            }
            if cy > y1 {
                return 2 * k;
            }
        }
        2 * merged.len()
    };
    let mut groups: Vec<Vec<Item>> = vec![Vec::new(); 2 * merged.len() + 1];
    for (n, i) in items.iter().enumerate() {
        groups[group_of(n, i)].push(*i);
    }
    let nonempty: Vec<(usize, Vec<Item>)> = groups
        .into_iter()
        .enumerate()
        .filter(|(_, g)| !g.is_empty())
        .collect();
    if !nonempty.iter().any(|(g, _)| g % 2 == 0) {
        return None;
    }
    let mut out = Vec::with_capacity(nonempty.len());
    let mut top = area.y1;
    for (n, (g, group)) in nonempty.iter().enumerate() {
        let bottom = match nonempty.get(n + 1) {
            Some((_, below)) => {
                let low = group.iter().map(|i| i.y0).fold(f32::INFINITY, f32::min);
                let high = below.iter().map(|i| i.y1).fold(f32::NEG_INFINITY, f32::max);
                ((low + high) / 2.0).clamp(area.y0, top)
            }
            None => area.y0,
        };
        out.push((
            group.clone(),
            Area {
                y0: bottom,
                y1: top,
                ..area
            },
            g % 2 == 1,
        ));
        top = bottom;
    }
    Some(out)
}

/// Line segments: spans on one line (by vertical centre) with no gap of `min_gap` between
/// them. Returns each item's segment, each segment's x-extent less 1 pt each side, its
/// characters, and each item's line.
#[allow(clippy::type_complexity)]
fn segments(items: &[Item], min_gap: f32) -> (Vec<usize>, Vec<(f32, f32)>, Vec<usize>, Vec<usize>) {
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by(|&a, &b| items[b].cy().total_cmp(&items[a].cy()));
    // Lines: runs of the order with close centres.
    let mut lines: Vec<Vec<usize>> = Vec::new();
    let mut line_cy = f32::NAN;
    let mut line_size = 0.0f32;
    for n in order {
        let i = &items[n];
        match lines.last_mut() {
            Some(line) if (line_cy - i.cy()).abs() <= 0.4 * line_size.max(i.size).max(1.0) => {
                line.push(n);
            }
            _ => {
                lines.push(vec![n]);
                line_cy = i.cy();
                line_size = i.size;
            }
        }
    }
    let mut segment_of = vec![0; items.len()];
    let mut line_of = vec![0; items.len()];
    let mut extents: Vec<(f32, f32)> = Vec::new();
    let mut chars: Vec<usize> = Vec::new();
    for (l, mut line) in lines.into_iter().enumerate() {
        line.sort_by(|&a, &b| items[a].x0.total_cmp(&items[b].x0));
        let mut end = f32::NEG_INFINITY;
        for n in line {
            let i = &items[n];
            if extents.is_empty() || i.x0 - end >= min_gap {
                extents.push(shrunk(i));
                chars.push(0);
            }
            let s = extents.len() - 1;
            let (a, b) = shrunk(i);
            extents[s] = (extents[s].0.min(a), extents[s].1.max(b));
            chars[s] += i.chars;
            segment_of[n] = s;
            line_of[n] = l;
            end = end.max(i.x1);
        }
    }
    (segment_of, extents, chars, line_of)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: Area = Area {
        x0: 0.0,
        y0: 0.0,
        x1: 612.0,
        y1: 1008.0,
    };

    /// A line of prose from `x0` to `x1` with its baseline at `y`.
    fn line(x0: f32, x1: f32, y: f32) -> Item {
        let chars = ((x1 - x0) / 4.5) as usize;
        Item {
            x0,
            y0: y,
            x1,
            y1: y + 9.0,
            chars,
            letters: chars * 9 / 10,
            size: 9.0,
        }
    }

    fn column(x0: f32, x1: f32, top: f32, lines: usize) -> Vec<Item> {
        (0..lines)
            .map(|n| {
                // Ragged last lines of paragraphs.
                let end = if n % 7 == 6 { x0 + (x1 - x0) * 0.4 } else { x1 };
                line(x0, end, top - 11.0 * n as f32)
            })
            .collect()
    }

    fn lefts(regions: &[Area]) -> Vec<f32> {
        regions.iter().map(|r| r.x0.round()).collect()
    }

    #[test]
    fn three_columns_with_narrow_gutters_are_read_left_to_right() {
        let mut items = column(42.0, 210.0, 950.0, 80);
        items.extend(column(222.0, 390.0, 950.0, 80));
        items.extend(column(402.0, 570.0, 950.0, 60));
        let regions = reading_regions(&items, PAGE);
        assert_eq!(regions.len(), 3, "{regions:?}");
        assert_eq!(lefts(&regions), [0.0, 216.0, 396.0]);
        assert!(regions.iter().all(|r| r.y0 == 0.0 && r.y1 == 1008.0));
    }

    #[test]
    fn two_columns_are_two_regions() {
        let mut items = column(72.0, 300.0, 720.0, 60);
        items.extend(column(312.0, 540.0, 720.0, 60));
        let regions = reading_regions(&items, PAGE);
        assert_eq!(lefts(&regions), [0.0, 306.0]);
    }

    #[test]
    fn one_column_with_indents_and_short_lines_is_one_region() {
        let mut items = column(72.0, 540.0, 720.0, 50);
        for n in 0..10 {
            items.push(line(100.0, 540.0, 140.0 - 11.0 * n as f32));
        }
        items.push(line(72.0, 160.0, 20.0));
        assert_eq!(reading_regions(&items, PAGE), [PAGE]);
    }

    #[test]
    fn a_title_over_three_columns_is_read_first_then_each_column() {
        let mut items = vec![line(120.0, 490.0, 960.0)];
        items.extend(column(42.0, 210.0, 930.0, 70));
        items.extend(column(222.0, 390.0, 930.0, 70));
        items.extend(column(402.0, 570.0, 930.0, 70));
        let regions = reading_regions(&items, PAGE);
        assert_eq!(regions.len(), 4, "{regions:?}");
        let title = regions[0];
        assert_eq!((title.x0, title.x1, title.y1), (0.0, 612.0, 1008.0));
        assert!(title.y0 < 960.0 && title.y0 > 939.0, "{title:?}");
        assert_eq!(lefts(&regions[1..]), [0.0, 216.0, 396.0]);
        assert!(regions[1..].iter().all(|r| r.y1 == title.y0 && r.y0 == 0.0));
    }

    #[test]
    fn a_full_width_paragraph_between_two_column_stretches_is_its_own_band() {
        let mut items = column(72.0, 300.0, 900.0, 20);
        items.extend(column(312.0, 540.0, 900.0, 20));
        for n in 0..3 {
            items.push(line(72.0, 540.0, 660.0 - 11.0 * n as f32));
        }
        items.extend(column(72.0, 300.0, 600.0, 30));
        items.extend(column(312.0, 540.0, 600.0, 30));
        let regions = reading_regions(&items, PAGE);
        assert_eq!(regions.len(), 5, "{regions:?}");
        assert_eq!(lefts(&regions), [0.0, 306.0, 0.0, 0.0, 306.0]);
        assert_eq!(regions[2].x1, 612.0);
    }

    #[test]
    fn code_beside_its_comments_is_not_cut() {
        let mut items = Vec::new();
        for n in 0..30 {
            let y = 700.0 - 10.0 * n as f32;
            let end = 100.0 + (n % 5) as f32 * 10.0;
            items.push(Item {
                chars: 12,
                letters: 7,
                ..line(54.0, end, y)
            });
            items.push(line(167.0, 300.0 + (n % 3) as f32 * 30.0, y));
        }
        assert_eq!(reading_regions(&items, PAGE), [PAGE]);
    }

    #[test]
    fn a_table_of_figures_is_not_cut_into_columns() {
        let mut items = Vec::new();
        for n in 0..40 {
            let y = 900.0 - 11.0 * n as f32;
            items.push(line(42.0, 200.0, y));
            for c in 0..5 {
                let x = 230.0 + 70.0 * c as f32;
                items.push(Item {
                    x0: x,
                    x1: x + 40.0,
                    chars: 7,
                    letters: 0,
                    ..line(x, x + 40.0, y)
                });
            }
        }
        assert_eq!(reading_regions(&items, PAGE), [PAGE]);
    }
}
