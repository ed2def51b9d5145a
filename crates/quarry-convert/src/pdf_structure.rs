//! A PDF page's structure as filings and reports set it, put right after conversion.
//!
//! pdf_oxide finds headings by font size and [`crate::pdf`]'s clean-up finds numbered ones
//! ("**3.1 Title**"); on SEC filings and annual reports both go wrong. Cover-page addresses,
//! a table's stray cell ("23.4 %"), a page number, "(in thousands)" or the sentence under a
//! statement become headings, and then the heading path of every passage for pages; the real
//! sections ("Item 7.", "Note 16 – Leases"), set in bold at body size, never do. So every
//! heading of a page is checked here ([`plausible_heading`]): what is no title at all —
//! mostly figures, an address, a parenthesised note, a long sentence — goes back to body
//! text. A filing's own numbering makes headings, at fixed levels whatever their font
//! ([`filing_level`]): `PART II` level 1, `Item 7.` level 2, `Note 16` level 3; a title
//! that producers split ("ITEM" / "7 MANAGEMENT'S …", "… RESULTS OF" / "OPERATIONS") is put
//! back together.
//!
//! Financial tables set the currency sign in a column of its own and the percent sign or a
//! negative's closing bracket after the figure: pdf_oxide keeps them as cells of their own
//! (`| Cash | $ | 2,605 |`), so a figure is read without its unit. [`join_symbol_cells`]
//! puts each back on its figure, in its row.

use crate::util::is_cjk;

/// The page's Markdown with its headings checked and filing sections made headings (see the
/// module documentation), and its tables' lone currency and percent cells joined to their
/// figures.
pub(crate) fn structure_page(md: &str) -> String {
    let lines: Vec<&str> = md.lines().collect();
    let mut out: Vec<String> = Vec::with_capacity(lines.len());
    let mut i = 0;
    let mut in_fence = false;
    while i < lines.len() {
        let line = lines[i];
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
        }
        if in_fence || line.trim_start().starts_with("```") {
            out.push(line.to_owned());
            i += 1;
            continue;
        }
        if line.trim_start().starts_with('|') {
            let end = (i..lines.len())
                .find(|&k| !lines[k].trim_start().starts_with('|'))
                .unwrap_or(lines.len());
            out.extend(join_symbol_cells(&lines[i..end]));
            i = end;
            continue;
        }
        let Some((level, text)) = heading_or_bold(line).or_else(|| plain_section(line)) else {
            out.push(line.to_owned());
            i += 1;
            continue;
        };
        let mut text = text;
        let mut next = i + 1;
        // A filing's section title split over two lines or two headings.
        if let Some(k) = next_text_line(&lines, i + 1)
            && let Some((_, cont)) = heading_or_bold(lines[k])
            && let Some(joined) = join_split_title(&text, &cont)
        {
            text = joined;
            next = k + 1;
        }
        if let Some(level) = filing_level(&text) {
            // The title's wrapped tail ("… RESULTS OF" / "OPERATIONS").
            if (ends_open(&text) || long_capitals(&text))
                && let Some(k) = next_text_line(&lines, next)
                && let Some((_, cont)) = heading_or_bold(lines[k])
                && cont.chars().count() <= 80
                && filing_level(&cont).is_none()
                && (ends_open(&text) || capitals(&cont))
            {
                text = format!("{text} {cont}");
                next = k + 1;
            }
            out.push(format!("{} {text}", "#".repeat(level)));
            i = next;
            continue;
        }
        match level {
            // A heading that is no title: body text again.
            Some(_) if !plausible_heading(&text) => out.push(text),
            _ => {
                for l in &lines[i..next] {
                    out.push((*l).to_owned());
                }
            }
        }
        i = next;
    }
    let mut s = out.join("\n");
    if md.ends_with('\n') {
        s.push('\n');
    }
    s
}

/// A heading's level and text, or `None` as the level of a line that is all bold (`**…**`,
/// `***…***`); `None` for anything else.
fn heading_or_bold(line: &str) -> Option<(Option<usize>, String)> {
    let t = line.trim();
    let hashes = t.len() - t.trim_start_matches('#').len();
    if (1..=6).contains(&hashes) && t[hashes..].starts_with(' ') {
        let text = t[hashes..].trim().replace("**", "");
        return Some((Some(hashes), text.trim_matches('*').trim().to_owned()));
    }
    let inner = t.strip_prefix("**")?.strip_suffix("**")?;
    // One bold run (a line of several bold runs with plain text between is body text).
    let inner = inner.trim_matches('*');
    if inner.is_empty() || inner.contains("**") && !inner.contains("** **") {
        return None;
    }
    let text = inner.replace("** **", " ").replace('*', "");
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    (!text.is_empty()).then_some((None, text))
}

/// A plain line that is a filing's section title all the same: a paragraph of its own,
/// short, in capitals or with a dash after its number ("NOTE 2 — EARNINGS PER SHARE",
/// "Note 4 – Leases").
fn plain_section(line: &str) -> Option<(Option<usize>, String)> {
    let t = line.trim();
    if t.starts_with(['|', '-', '*', '>', '#', '`']) || t.chars().count() > 120 {
        return None;
    }
    filing_level(t)?;
    let dash = t
        .split_whitespace()
        .nth(2)
        .is_some_and(|w| w.starts_with(['–', '—', '-']));
    (capitals(t) && !t.ends_with('.') || dash).then(|| (None, t.to_owned()))
}

/// The index of the first non-blank line at or after `from`.
fn next_text_line(lines: &[&str], from: usize) -> Option<usize> {
    (from..lines.len()).find(|&k| !lines[k].trim().is_empty())
}

/// "ITEM" + "7 MANAGEMENT'S …" → "ITEM 7 MANAGEMENT'S …"; "ITEM 1" + "1 EXECUTIVE …" →
/// "ITEM 11 EXECUTIVE …" (the item number set in two runs); `None` unless `first` is a
/// filing keyword, with at most a number, and `second` starts with a digit.
fn join_split_title(first: &str, second: &str) -> Option<String> {
    let words: Vec<&str> = first.split_whitespace().collect();
    let keyword = words.first()?.to_ascii_lowercase();
    if !matches!(keyword.as_str(), "item" | "part" | "note") || words.len() > 2 {
        return None;
    }
    // The second part: a number of one or two digits, then a capitalised title.
    let mut parts = second.split_whitespace();
    let number = parts.next()?.trim_end_matches('.');
    let title = parts.next()?;
    if !(1..=2).contains(&number.len())
        || !number.chars().all(|c| c.is_ascii_digit())
        || !title.chars().next()?.is_uppercase()
    {
        return None;
    }
    match words.get(1) {
        None => Some(format!("{first} {second}")),
        Some(n) if n.len() + number.len() <= 2 && n.chars().all(|c| c.is_ascii_digit()) => {
            Some(format!("{first}{second}"))
        }
        Some(_) => None,
    }
}

/// Whether a title ends in a word that needs more after it ("… RESULTS OF").
fn ends_open(text: &str) -> bool {
    let Some(last) = text.split_whitespace().last() else {
        return false;
    };
    matches!(
        last.to_ascii_lowercase().as_str(),
        "of" | "and" | "or" | "the" | "for" | "to" | "in" | "on" | "with" | "related" | "by" | "a"
    )
}

/// Whether the text's letters are all capitals.
fn capitals(text: &str) -> bool {
    text.chars().any(char::is_alphabetic) && !text.chars().any(char::is_lowercase)
}

/// A title in capitals long enough to have wrapped onto a second line.
fn long_capitals(text: &str) -> bool {
    text.chars().count() >= 60 && capitals(text)
}

/// The heading level a filing's own numbering gives a title: `PART I`–`PART IV` 1,
/// `Item 7.` / `ITEM 1A.` 2, `Note 16` / `NOTE 3 –` 3.
pub(crate) fn filing_level(text: &str) -> Option<usize> {
    let t = text.trim();
    if t.chars().count() > 200 {
        return None;
    }
    let mut words = t.split_whitespace();
    let keyword = words.next()?.to_ascii_lowercase();
    let number = words.next()?;
    let rest: Vec<&str> = words.collect();
    // What follows the number is a title (capitalised), a dash, or nothing.
    let title_follows = |rest: &[&str]| match rest.first() {
        None => true,
        Some(w) => {
            let c = w.chars().next().unwrap_or(' ');
            c.is_uppercase() || matches!(c, '–' | '—' | '-' | '[' | '(' | '“' | '"')
        }
    };
    match keyword.as_str() {
        "part" => {
            let n = number.trim_end_matches(['.', ':', ',']);
            let roman = matches!(n, "I" | "II" | "III" | "IV");
            (roman && t.chars().count() <= 80 && title_follows(&rest)).then_some(1)
        }
        "item" => {
            let n = number.trim_end_matches(['.', ':']);
            let digits = n.chars().take_while(char::is_ascii_digit).count();
            let suffix = &n[digits..];
            let ok = (1..=2).contains(&digits)
                && (suffix.is_empty()
                    || suffix.len() == 1
                        && suffix
                            .chars()
                            .all(|c| matches!(c, 'A' | 'B' | 'C' | 'a' | 'b' | 'c')));
            (ok && title_follows(&rest)).then_some(2)
        }
        "note" => {
            let n = number.trim_end_matches(['.', ':', '–', '—', '-']);
            let ok = (1..=2).contains(&n.len()) && n.chars().all(|c| c.is_ascii_digit());
            (ok && title_follows(&rest)).then_some(3)
        }
        _ => None,
    }
}

/// Whether a heading's text can be a title: some words (not mostly figures: "83", "23.4 %",
/// "#95200094v3"), not a parenthesised note ("(in thousands)"), not an address ("929 Long
/// Bridge Drive Arlington, VA", "1 Meta Way, Menlo Park, California 94025"), not a long
/// sentence ("The accompanying notes are an integral part of …"), not a paragraph.
pub(crate) fn plausible_heading(text: &str) -> bool {
    let t = text.trim();
    // Figures of the title, not of its section number ("9.6.4 LVM2"); a Chinese or
    // Japanese character counts as two letters ("1.2.7 链接").
    let title = t.trim_start_matches(|c: char| c.is_ascii_digit() || c == '.');
    let numbered = title.len() < t.len() && title.starts_with(' ');
    let title = if numbered { title } else { t };
    // A numbered section's title may be one short word ("12.3.1 C").
    if numbered
        && title.split_whitespace().count() == 1
        && title.chars().any(char::is_alphabetic)
        && !title.chars().any(|c| c.is_ascii_digit())
    {
        return true;
    }
    let letters: usize = title
        .chars()
        .filter(|c| c.is_alphabetic())
        .map(|c| if is_cjk(c) { 2 } else { 1 })
        .sum();
    let digits = title.chars().filter(char::is_ascii_digit).count();
    if letters < 3 || digits > letters {
        return false;
    }
    // A word of two letters or more: "a b c" is no title.
    if !t.split_whitespace().any(|w| {
        w.chars()
            .filter(|c| c.is_alphabetic())
            .map(|c| if is_cjk(c) { 2 } else { 1 })
            .sum::<usize>()
            >= 2
    }) {
        return false;
    }
    if t.starts_with('(') && t.ends_with(')') {
        return false;
    }
    if t.chars().count() > 200 || is_address(t) {
        return false;
    }
    let words = t.split_whitespace().count();
    !(t.ends_with('.') && words >= 8 && !numbered && filing_level(t).is_none())
}

/// A postal address: a house number before a street word ("929 Long Bridge Drive", "83
/// Tower Road North", "1 Meta Way"), a post-office box, or a US ZIP code after a state.
pub(crate) fn is_address(text: &str) -> bool {
    const STREET: &[&str] = &[
        "street",
        "st",
        "road",
        "rd",
        "drive",
        "dr",
        "avenue",
        "ave",
        "boulevard",
        "blvd",
        "way",
        "lane",
        "ln",
        "parkway",
        "pkwy",
        "place",
        "court",
        "ct",
        "plaza",
        "highway",
        "hwy",
        "circle",
        "square",
        "suite",
        "floor",
        "terrace",
        "loop",
        "center",
        "centre",
    ];
    let words: Vec<String> = text
        .split_whitespace()
        .map(|w| {
            w.trim_matches(|c: char| !c.is_alphanumeric())
                .to_ascii_lowercase()
        })
        .filter(|w| !w.is_empty())
        .collect();
    let Some(first) = words.first() else {
        return false;
    };
    let lower = text.to_ascii_lowercase();
    if lower.contains("p.o. box") || lower.starts_with("po box") {
        return true;
    }
    // A house number (digits, maybe a letter: "83", "1", "100A"), then a street word among
    // the next few.
    let house = first.chars().next().is_some_and(|c| c.is_ascii_digit())
        && first.chars().filter(char::is_ascii_digit).count() <= 6
        && first.chars().all(|c| c.is_ascii_alphanumeric());
    if house
        && words
            .iter()
            .skip(1)
            .take(5)
            .any(|w| STREET.contains(&w.as_str()))
    {
        return true;
    }
    // "…, California 94025", "…, CA 94025-1234", "…, VA".
    let last = words.last().map(String::as_str).unwrap_or("");
    let zip = |w: &str| {
        let Some((five, rest)) = w.split_at_checked(w.len().min(5)) else {
            return false;
        };
        five.len() == 5
            && five.chars().all(|c| c.is_ascii_digit())
            && (rest.is_empty()
                || rest.len() == 5
                    && rest.starts_with('-')
                    && rest[1..].chars().all(|c| c.is_ascii_digit()))
    };
    let state_abbr = |w: &str| {
        let raw = text
            .split_whitespace()
            .rev()
            .find(|r| {
                r.trim_matches(|c: char| !c.is_alphanumeric())
                    .eq_ignore_ascii_case(w)
            })
            .unwrap_or("");
        let raw = raw.trim_matches(|c: char| !c.is_alphanumeric());
        raw.len() == 2 && raw.chars().all(|c| c.is_ascii_uppercase())
    };
    let comma = text.contains(',');
    comma && words.len() >= 3 && (zip(last) || house && state_abbr(last))
}

/// Splits a Markdown table row into its cells (escaped `\|` stays inside a cell).
fn row_cells(line: &str) -> Vec<String> {
    let t = line.trim();
    let t = t.strip_prefix('|').unwrap_or(t);
    let t = t.strip_suffix('|').unwrap_or(t);
    let mut cells = Vec::new();
    let mut cell = String::new();
    let mut prev = ' ';
    for c in t.chars() {
        if c == '|' && prev != '\\' {
            cells.push(cell.trim().to_owned());
            cell.clear();
        } else {
            cell.push(c);
        }
        prev = c;
    }
    cells.push(cell.trim().to_owned());
    cells
}

fn is_separator(cells: &[String]) -> bool {
    cells.iter().all(|c| {
        let c = c.trim();
        !c.is_empty() && c.chars().all(|ch| matches!(ch, '-' | ':' | ' '))
    }) && cells.iter().any(|c| c.contains('-'))
}

/// A cell's text without bold or italic marks.
fn bare(cell: &str) -> &str {
    cell.trim().trim_matches('*').trim()
}

fn is_currency(cell: &str) -> bool {
    matches!(bare(cell), "$" | "€" | "£" | "¥" | "US$" | "C$" | "A$")
}

/// What may follow a figure in a cell of its own: percent, a negative's closing bracket.
fn is_trailer(cell: &str) -> bool {
    matches!(bare(cell), "%" | ")" | ")%" | "%)" | "pts" | "bps")
}

/// A figure, as financial tables write them: "2,605", "(24,495)", "0.94", "—", "-", "56 %";
/// or a run of them that pdf_oxide set in one cell ("(6,937) 220,714 445,785", "15,535 $
/// 40,982"), a currency sign allowed before all but the first.
fn is_figure(cell: &str) -> bool {
    let tokens: Vec<&str> = bare(cell).split_whitespace().collect();
    let one = |t: &str| {
        let t = t
            .trim_start_matches(['(', '-', '−', '+'])
            .trim_end_matches([')', '%']);
        matches!(t, "—" | "–" | "-")
            || !t.is_empty()
                && t.chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_digit() || c == '.')
                && t.chars()
                    .all(|c| c.is_ascii_digit() || matches!(c, ',' | '.'))
    };
    let Some((last, _)) = tokens.split_last() else {
        return false;
    };
    one(tokens[0])
        && one(last)
        && tokens
            .iter()
            .all(|t| one(t) || is_currency(t) || matches!(*t, "%" | ")"))
}

/// The table (its Markdown lines) with lone currency signs joined to the figure after them
/// and lone percent signs or closing brackets to the figure before them, each in its own
/// row; a sign left at the end of the cell before its figure ("57,897 $ | 90,415") moves to
/// that figure. Columns left empty in every row are dropped.
pub(crate) fn join_symbol_cells(lines: &[&str]) -> Vec<String> {
    let mut rows: Vec<Option<Vec<String>>> = lines
        .iter()
        .map(|l| {
            let cells = row_cells(l);
            (!is_separator(&cells)).then_some(cells)
        })
        .collect();
    let mut changed = false;
    for row in rows.iter_mut().flatten() {
        changed |= join_row(row);
    }
    if !changed {
        return lines.iter().map(|l| (*l).to_owned()).collect();
    }
    let width = rows.iter().flatten().map(Vec::len).max().unwrap_or(0);
    // Columns empty in every row (the header's included) go.
    let keep: Vec<bool> = (0..width)
        .map(|k| {
            rows.iter()
                .flatten()
                .any(|r| r.get(k).is_some_and(|c| !c.trim().is_empty()))
        })
        .collect();
    let kept = keep.iter().filter(|k| **k).count().max(1);
    rows.iter()
        .map(|row| match row {
            None => format!("|{}", "---|".repeat(kept)),
            Some(cells) => {
                let mut s = String::from("|");
                let mut any = false;
                for k in (0..width).filter(|&k| keep[k]) {
                    any = true;
                    s.push(' ');
                    s.push_str(cells.get(k).map_or("", String::as_str));
                    s.push_str(" |");
                }
                if !any {
                    s.push_str("  |");
                }
                s
            }
        })
        .collect()
}

/// Joins one row's lone signs to their figures (see [`join_symbol_cells`]); whether it
/// changed anything.
fn join_row(cells: &mut [String]) -> bool {
    let mut changed = false;
    let n = cells.len();
    // "57,897 $" before "90,415": the sign belongs to the next figure.
    // From the right: the next cell loses its own sign left behind first.
    for k in (0..n.saturating_sub(1)).rev() {
        let t = cells[k].trim_end().to_owned();
        for sign in ["$", "€", "£", "¥"] {
            if let Some(head) = t.strip_suffix(sign)
                && head.ends_with(char::is_whitespace)
                && is_figure(head)
                && is_figure(&cells[k + 1])
            {
                cells[k] = head.trim_end().to_owned();
                let fig = cells[k + 1].trim().to_owned();
                let gap = if fig.starts_with('(') { "" } else { " " };
                cells[k + 1] = format!("{sign}{gap}{fig}");
                changed = true;
            }
        }
    }
    for k in 0..n {
        if is_currency(&cells[k]) {
            // The next non-empty cell, when it is a figure.
            if let Some(j) = (k + 1..n).find(|&j| !cells[j].trim().is_empty())
                && is_figure(&cells[j])
                && !is_currency(&cells[j])
            {
                let sign = bare(&cells[k]).to_owned();
                let fig = cells[j].trim().to_owned();
                cells[j] = format!("{sign}{}{fig}", if fig.starts_with('(') { "" } else { " " });
                cells[k].clear();
                changed = true;
            }
        } else if is_trailer(&cells[k])
            && let Some(j) = (0..k).rev().find(|&j| !cells[j].trim().is_empty())
            && is_figure(&cells[j])
        {
            let mark = bare(&cells[k]).to_owned();
            cells[j] = format!("{}{mark}", cells[j].trim_end());
            cells[k].clear();
            changed = true;
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invented_headings_go_back_to_body_text() {
        for text in [
            "929 Long Bridge Drive Arlington, VA",
            "83 Tower Road North",
            "1 Meta Way, Menlo Park, California 94025",
            "23.4 %",
            "Washington, D.C. 20549",
            "83",
            "#95200094v3",
            "(in thousands)",
            "The accompanying notes are an integral part of these consolidated financial statements.",
        ] {
            assert!(!plausible_heading(text), "{text}");
            let md = format!("Text before.\n\n#### {text}\n\nText after.\n");
            assert_eq!(
                structure_page(&md),
                format!("Text before.\n\n{text}\n\nText after.\n"),
                "{text}"
            );
        }
        for text in [
            "Critical Accounting Policies and Estimates",
            "FORM 10-K",
            "UNITED STATES SECURITIES AND EXCHANGE COMMISSION",
            "9 Section 409A.",
            "340B Drug Pricing Program",
            "3M COMPANY AND SUBSIDIARIES",
            "1.2.7 链接",
            "12.3.1 C",
            "9.6.4 LVM2",
            "序言",
        ] {
            assert!(plausible_heading(text), "{text}");
        }
        // Words of several bytes a character are no trouble.
        assert!(plausible_heading("Résumé, Zürich café"));
        assert!(!is_address("Résumé, Zürich cafés"));
    }

    #[test]
    fn filing_numbering_makes_headings_at_fixed_levels() {
        let md = "**PART II**\n\n**Item 7. Management’s Discussion and Analysis**\n\nBody.\n\n\
                  **Note 16 – Leases**\n\nMore.\n\n**Notes to Consolidated Financial Statements**\n\n\
                  **Item 7 of this report describes it.** More text.\n";
        assert_eq!(
            structure_page(md),
            "# PART II\n\n## Item 7. Management’s Discussion and Analysis\n\nBody.\n\n\
             ### Note 16 – Leases\n\nMore.\n\n**Notes to Consolidated Financial Statements**\n\n\
             **Item 7 of this report describes it.** More text.\n"
        );
        // A plain line in capitals or with a dash after its number is a section too; a
        // sentence that starts like one is not.
        assert_eq!(
            structure_page(
                "NOTE 2 — EARNINGS PER SHARE\n\nBasic earnings.\n\nNote 4 – Leases\n\nNote 4 describes leases.\n"
            ),
            "### NOTE 2 — EARNINGS PER SHARE\n\nBasic earnings.\n\n### Note 4 – Leases\n\nNote 4 describes leases.\n"
        );
        assert_eq!(filing_level("ITEM 1A. RISK FACTORS"), Some(2));
        assert_eq!(filing_level("ITEM 6. [RESERVED]"), Some(2));
        assert_eq!(filing_level("NOTE 3 – REVENUE"), Some(3));
        assert_eq!(filing_level("Note 16"), Some(3));
        assert_eq!(filing_level("Item 123 of Regulation S-K"), None);
        assert_eq!(filing_level("item 7 describes"), None);
        assert_eq!(filing_level("Part of the business"), None);
        // pdf_oxide's own heading of an item keeps its text, at the item's level.
        assert_eq!(
            structure_page("#### ITEM 6. [RESERVED]\n"),
            "## ITEM 6. [RESERVED]\n"
        );
    }

    #[test]
    fn split_filing_titles_are_joined() {
        let md = "#### ITEM\n\n## 7 MANAGEMENT’S DISCUSSION AND ANALYSIS OF FINANCIAL CONDITION AND RESULTS OF\n\n\
                  #### OPERATIONS\n\nBody.\n\n#### ITEM 1\n\n## 1 EXECUTIVE COMPENSATION\n\nText.\n\n\
                  **ITEM 5. MARKET FOR REGISTRANT’S COMMON EQUITY, RELATED STOCKHOLDER MATTERS AND ISSUER**\n\n\
                  #### PURCHASES OF EQUITY SECURITIES\n\nText.\n";
        assert_eq!(
            structure_page(md),
            "## ITEM 7 MANAGEMENT’S DISCUSSION AND ANALYSIS OF FINANCIAL CONDITION AND RESULTS OF OPERATIONS\n\n\
             Body.\n\n## ITEM 11 EXECUTIVE COMPENSATION\n\nText.\n\n\
             ## ITEM 5. MARKET FOR REGISTRANT’S COMMON EQUITY, RELATED STOCKHOLDER MATTERS AND ISSUER PURCHASES OF EQUITY SECURITIES\n\n\
             Text.\n"
        );
    }

    #[test]
    fn currency_and_percent_cells_join_their_figures() {
        let table = [
            "| | | 2023 | | 2022 |",
            "|---|---|---|---|---|",
            "| Cash and cash equivalents | **$** | 2,605 | $ | 2,921 |",
            "| Total liabilities | $ | (24,495) | $ | 352,755 |",
            "| Accounts payable | | 1,200 | | 1,300 |",
        ];
        assert_eq!(
            join_symbol_cells(&table),
            [
                "|  | 2023 | 2022 |",
                "|---|---|---|",
                "| Cash and cash equivalents | $ 2,605 | $ 2,921 |",
                "| Total liabilities | $(24,495) | $ 352,755 |",
                "| Accounts payable | 1,200 | 1,300 |",
            ]
        );
        let uber = [
            "| Gross Bookings (2) | $ | 57,897 $ | 90,415 | 56 | % |",
            "| Revenue | $ | 11,139 $ | 17,455 | (7) | % |",
        ];
        assert_eq!(
            join_symbol_cells(&uber),
            [
                "| Gross Bookings (2) | $ 57,897 | $ 90,415 | 56% |",
                "| Revenue | $ 11,139 | $ 17,455 | (7)% |",
            ]
        );
        // Rows pdf_oxide ran together keep the sign on their first figure; a no-break
        // space before a sign left behind counts as a space.
        let merged = [
            "| Total stockholders’ equity Total liabilities | $ | (6,937) 220,714 | $ | 445,785 |",
        ];
        assert_eq!(
            join_symbol_cells(&merged),
            ["| Total stockholders’ equity Total liabilities | $(6,937) 220,714 | $ 445,785 |"]
        );
        let nbsp = ["| Commercial paper | Level 2 | $ | 3,008\u{a0}$ | 0 |"];
        assert_eq!(
            join_symbol_cells(&nbsp),
            ["| Commercial paper | Level 2 | $ 3,008 | $ 0 |"]
        );
        let chain = ["| Revenue | $ | 134,902 $ | 116,609 $ | 117,929 |"];
        assert_eq!(
            join_symbol_cells(&chain),
            ["| Revenue | $ 134,902 | $ 116,609 | $ 117,929 |"]
        );
        // A table without lone signs is left exactly as it was.
        let plain = ["| a | b |", "|---|---|", "| x | 1 |"];
        assert_eq!(join_symbol_cells(&plain), plain);
        // A sign before text stays.
        let text = ["| Price | $ | per share |"];
        assert_eq!(join_symbol_cells(&text), text);
    }
}
