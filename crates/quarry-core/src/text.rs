//! Small pure helpers whose output is part of a public contract (seed 001).

/// `#` + the first 6 hex characters of a content hash (QMD's docid).
pub fn docid_for_hash(hash: &str, len: usize) -> String {
    let len = len.clamp(6, hash.len().max(6));
    format!("#{}", &hash[..len.min(hash.len())])
}

/// Prefixes each line with `N: `, counting from `start_line` (seed `addLineNumbers`).
pub fn add_line_numbers(text: &str, start_line: usize) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&(start_line + i).to_string());
        out.push_str(": ");
        out.push_str(line);
    }
    out
}

/// The lines of a text as editors number them: a final newline ends the last line rather
/// than starting an empty one.
pub fn lines(text: &str) -> std::str::Split<'_, char> {
    text.strip_suffix('\n').unwrap_or(text).split('\n')
}

/// Rounds a score to 2 decimals, as every surface reports it.
pub fn round_score(score: f64) -> f64 {
    (score * 100.0).round() / 100.0
}

/// The seed's `formatSearchSummary`: `Found N results for "q":` then one line per hit.
pub fn format_search_summary(hits: &[crate::search::SearchHit], query: &str) -> String {
    if hits.is_empty() {
        return format!("No results found for \"{query}\"");
    }
    let mut lines = vec![format!(
        "Found {} result{} for \"{query}\":\n",
        hits.len(),
        if hits.len() == 1 { "" } else { "s" }
    )];
    for h in hits {
        // A stale wiki page says so where the model reads the list.
        let stale = match &h.wiki_page {
            Some(p) if p.stale => " [stale wiki page: a passage it cites changed]",
            _ => "",
        };
        lines.push(format!(
            "{} {}% {} - {}{stale}",
            h.docid,
            (h.score * 100.0).round() as i64,
            h.file,
            h.title
        ));
    }
    lines.join("\n")
}

/// Percent-encodes each `/`-separated segment like JavaScript's `encodeURIComponent`,
/// keeping the separators (seed `encodeQmdPath`).
pub fn encode_uri_path(path: &str) -> String {
    path.split('/')
        .map(encode_uri_component)
        .collect::<Vec<_>>()
        .join("/")
}

fn encode_uri_component(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        let keep = b.is_ascii_alphanumeric()
            || matches!(
                b,
                b'-' | b'_' | b'.' | b'!' | b'~' | b'*' | b'\'' | b'(' | b')'
            );
        if keep {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Decodes `%XX` escapes (any segment, including `%2F`). Invalid escapes are an error
/// rather than being passed through, so a malformed URI never resolves to a document.
pub fn decode_uri_path(s: &str) -> Result<String, crate::Error> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| {
                    crate::Error::invalid(format!("invalid percent-encoding in {s:?}"))
                })?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out)
        .map_err(|_| crate::Error::invalid(format!("percent-decoded path is not UTF-8: {s:?}")))
}

/// Edit distance over characters (for "Did you mean one of these?").
pub fn levenshtein(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::SearchHit;

    #[test]
    fn line_numbers_match_seed() {
        assert_eq!(add_line_numbers("a\nb", 1), "1: a\n2: b");
        assert_eq!(add_line_numbers("x", 120), "120: x");
        assert_eq!(add_line_numbers("", 1), "1: ");
    }

    #[test]
    fn uri_encoding_matches_encode_uri_component() {
        assert_eq!(
            encode_uri_path("docs/File with spaces.md"),
            "docs/File%20with%20spaces.md"
        );
        assert_eq!(
            encode_uri_path("笔记/a+b.md"),
            "%E7%AC%94%E8%AE%B0/a%2Bb.md"
        );
        assert_eq!(
            decode_uri_path("notes%2F2025%2F%20meeting.md").unwrap(),
            "notes/2025/ meeting.md"
        );
        assert!(decode_uri_path("bad%zz").is_err());
        assert!(decode_uri_path("trunc%2").is_err());
    }

    #[test]
    fn summary_layout() {
        let hit = SearchHit {
            docid: "#abc123".into(),
            file: "notes/a.md".into(),
            title: "A".into(),
            score: 0.854,
            context: None,
            snippet: String::new(),
            page: None,
            metadata: None,
            wiki_page: None,
        };
        assert_eq!(
            format_search_summary(&[hit], "q"),
            "Found 1 result for \"q\":\n\n#abc123 85% notes/a.md - A"
        );
        assert_eq!(
            format_search_summary(&[], "q"),
            "No results found for \"q\""
        );
    }

    #[test]
    fn lines_ignore_the_final_newline() {
        assert_eq!(lines("a\nb\n").collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(lines("a\n\n").collect::<Vec<_>>(), ["a", ""]);
        assert_eq!(lines("a").count(), 1);
    }

    #[test]
    fn edit_distance() {
        assert_eq!(levenshtein("kitten", "sitting"), 3);
        assert_eq!(levenshtein("", "abc"), 3);
        assert_eq!(levenshtein("笔记", "笔迹"), 1);
    }

    #[test]
    fn terminal_safe_escapes_control_characters() {
        assert_eq!(terminal_safe("plain ü.md"), "plain ü.md");
        assert_eq!(terminal_safe("ctl\x1b[2Jclear.md"), "ctl\\u{1b}[2Jclear.md");
        assert_eq!(terminal_safe("a\nb\\c\u{9b}d"), "a\\nb\\\\c\\u{9b}d");
    }

    #[test]
    fn docid_prefix() {
        assert_eq!(docid_for_hash("abcdef0123", 6), "#abcdef");
        assert_eq!(docid_for_hash("abcdef0123", 8), "#abcdef01");
    }
}

/// `s` safe to print on a terminal: every control character (C0, DEL, C1 — an escape
/// sequence that clears the screen, moves the cursor or retitles the window) written as a
/// visible escape (`\x1b`, `\n`), backslashes doubled so nothing reads ambiguously. Names
/// that come from outside (a synced file's, an upload's) go through this before the CLI
/// prints them.
pub fn terminal_safe(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(|c| c.is_control() || c == '\\') {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => {
                use std::fmt::Write;
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Lower-case hex of some bytes (a digest).
pub fn hex_lower(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 0xf) as usize] as char);
    }
    s
}

/// Whether `a` and `b` are equal, in time that depends on their length only (secrets, their
/// hashes, CSRF values: a comparison that stops early would tell an attacker how much matched).
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Hex SHA-256 of `bytes`: content hashes, docids, blob addresses all derive from it.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    hex_lower(&Sha256::digest(bytes))
}

#[cfg(test)]
mod hash_tests {
    #[test]
    fn sha256_hex_is_the_standard_lowercase_digest() {
        assert_eq!(
            super::sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
