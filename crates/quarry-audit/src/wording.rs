//! How similar questions are grouped: a query's *wording* is its terms, lower-cased, without
//! the words every question has, without plural `s` or `-ing`, sorted and unique — so "How
//! do I reset my password?", "resetting passwords" and "password resets" share the wording
//! `password reset`. Where query text is
//! not kept the wording is a hash of those terms: searches still group, nothing readable is
//! stored. [`merge_similar`] then joins groups whose terms mostly overlap.

use std::collections::BTreeSet;

use quarry_core::sha256_hex;
use quarry_store::UnansweredGroup;

/// Most characters a wording keeps.
const WORDING_CHARS: usize = 200;
/// A hashed wording's prefix (never the start of a term list: terms have no `:`).
pub const HASHED: &str = "h:";
/// Groups sharing at least this share of their terms (Jaccard) are one question.
const SIMILAR: f64 = 0.6;

/// Words too common to tell questions apart (English; other languages keep all their words).
const STOPWORDS: &[&str] = &[
    "a", "about", "an", "and", "any", "are", "as", "at", "be", "can", "could", "do", "does", "for",
    "from", "get", "has", "have", "how", "i", "in", "is", "it", "me", "my", "of", "on", "or",
    "our", "please", "should", "so", "that", "the", "there", "this", "to", "was", "we", "what",
    "when", "where", "which", "who", "why", "will", "with", "you", "your",
];

/// Whether `c` is written without spaces between words (CJK and kana): such a run is cut
/// into overlapping pairs, the way the keyword index reads it.
fn unspaced(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF | 0xAC00..=0xD7AF)
}

/// A word without its plural `s` or its `-ing` ("passwords" → "password", "resetting" →
/// "reset", "parking" → "park"): enough for rephrasings of one question to meet.
fn stem(word: &str) -> &str {
    if word.len() > 5
        && let Some(base) = word.strip_suffix("ing")
    {
        let b = base.as_bytes();
        // "resetting" → "resett" → "reset"; "calling" keeps its double l.
        return match b {
            [.., x, y] if x == y && !b"lsz".contains(y) && y.is_ascii_alphabetic() => {
                &base[..base.len() - 1]
            }
            _ => base,
        };
    }
    if word.len() > 3 && word.ends_with('s') && !word.ends_with("ss") {
        &word[..word.len() - 1]
    } else {
        word
    }
}

/// The terms of `query` (see the module's rule).
pub fn terms(query: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let lower = query.to_lowercase();
    let mut word = String::new();
    let mut run: Vec<char> = Vec::new();
    let flush = |word: &mut String, run: &mut Vec<char>, out: &mut BTreeSet<String>| {
        if !word.is_empty() {
            if !STOPWORDS.contains(&word.as_str()) {
                out.insert(stem(word).to_owned());
            }
            word.clear();
        }
        match run.len() {
            0 => {}
            1 => {
                out.insert(run.iter().collect());
            }
            _ => {
                for pair in run.windows(2) {
                    out.insert(pair.iter().collect());
                }
            }
        }
        run.clear();
    };
    for c in lower.chars() {
        if unspaced(c) {
            if !word.is_empty() {
                flush(&mut word, &mut Vec::new(), &mut out);
            }
            run.push(c);
        } else if c.is_alphanumeric() {
            if !run.is_empty() {
                flush(&mut String::new(), &mut run, &mut out);
            }
            word.push(c);
        } else {
            flush(&mut word, &mut run, &mut out);
        }
    }
    flush(&mut word, &mut run, &mut out);
    out
}

/// The wording `query` groups under: its terms joined by spaces (at most 200 characters), or
/// the query lower-cased when every word is a common one; hashed (`h:` and 16 hex digits)
/// unless `readable`.
pub fn wording(query: &str, readable: bool) -> String {
    let terms = terms(query);
    let mut text = terms.into_iter().collect::<Vec<_>>().join(" ");
    if text.is_empty() {
        text = query.trim().to_lowercase();
    }
    if readable {
        text.chars().take(WORDING_CHARS).collect()
    } else {
        format!("{HASHED}{}", &sha256_hex(text.as_bytes())[..16])
    }
}

/// `groups` (most searched first) with each group whose terms mostly overlap an earlier
/// group's folded into it: counts and days added, the widest span, the best score, the
/// earlier group's text. Hashed wordings are only ever equal, never similar. The result is
/// in the same order, largest first.
pub fn merge_similar(groups: Vec<UnansweredGroup>) -> Vec<(UnansweredGroup, Vec<String>)> {
    let mut merged: Vec<(UnansweredGroup, BTreeSet<String>, Vec<String>)> = Vec::new();
    for g in groups {
        let set: BTreeSet<String> = if g.wording.starts_with(HASHED) {
            BTreeSet::new()
        } else {
            g.wording.split(' ').map(str::to_owned).collect()
        };
        let home = merged.iter_mut().find(|(_, other, _)| {
            !set.is_empty() && !other.is_empty() && jaccard(&set, other) >= SIMILAR
        });
        match home {
            Some((into, _, variants)) => {
                into.count += g.count;
                into.first_at = into.first_at.min(g.first_at);
                into.last_at = into.last_at.max(g.last_at);
                into.note_score(g.best_score);
                if into.query.is_none() {
                    into.query = g.query.clone();
                }
                for (day, n) in g.days {
                    match into.days.iter_mut().find(|(d, _)| *d == day) {
                        Some((_, c)) => *c += n,
                        None => into.days.push((day, n)),
                    }
                }
                into.days.sort_unstable();
                variants.push(g.query.unwrap_or(g.wording));
            }
            None => merged.push((g, set, Vec::new())),
        }
    }
    let mut out: Vec<(UnansweredGroup, Vec<String>)> =
        merged.into_iter().map(|(g, _, v)| (g, v)).collect();
    out.sort_by(|a, b| {
        b.0.count
            .cmp(&a.0.count)
            .then(b.0.last_at.cmp(&a.0.last_at))
    });
    out
}

fn jaccard(a: &BTreeSet<String>, b: &BTreeSet<String>) -> f64 {
    let shared = a.intersection(b).count();
    let all = a.union(b).count();
    if all == 0 {
        0.0
    } else {
        shared as f64 / all as f64
    }
}
