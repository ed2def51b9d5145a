//! Text analysis shared by indexing and querying, so both sides see the same terms.
//!
//! - Latin/other alphabetic runs: lower-cased, English-stemmed parts; a run joined by
//!   `-`, `.`, `_`, `+`, `&` or `/` between alphanumerics (`gpt-4o`, `v1.2.3`, `foo_bar`,
//!   `AT&T`, `PP&E`) is also emitted whole, unstemmed, so identifiers and versions can be
//!   found exactly; a path's
//!   tails and segments of several parts are emitted too (`sources.list`,
//!   `apt/sources.list` in `/etc/apt/sources.list`), so a file is found by its name.
//! - Beside its stem, each word of three or more ASCII letters is also emitted as written ([`TokenKind::Exact`]:
//!   lower-cased, its inflection folded, marked with a leading `=` so it never meets a stem):
//!   stemming finds `customers` for `customer`, and the exact form ranks `customer` above
//!   `custom`, which has the same stem.
//! - Han runs: jieba word segmentation in search mode (dictionary words inside longer
//!   words are emitted too, at the position of the word that contains them).
//! - Kana runs: overlapping character bigrams (no dictionary is needed for recall).
//! - Hangul runs: whole space-delimited words.
//! - Thai, Lao, Khmer and Myanmar runs (written without spaces between words): overlapping
//!   bigrams of character clusters (a letter with its vowel and tone marks), as for kana, so
//!   a word inside a run is found without a dictionary.
//! - Command-line flags: a word that starts a token with `-` or `--` (`-p`, `--force`,
//!   `-xzf`) is also emitted whole, case kept, as a compound, so `lsof -p` and `--force` find
//!   the page that documents that flag.

/// Bumped whenever the terms produced for a text, or what a keyword index holds for an entry,
/// change: indexes built by an older version are rebuilt from the store by the next writer
/// (5: documents' stored fields for metadata filters; 6: exact forms beside stems, `&` joins;
/// 7: exact forms fold inflections, in a field of their own).
pub const ANALYZER_VERSION: u32 = 7;

use std::sync::OnceLock;

use jieba_rs::Jieba;
use rust_stemmers::{Algorithm, Stemmer};

/// Tokens longer than this (in bytes) are dropped: they are hashes, base64, minified code.
const MAX_TOKEN_BYTES: usize = 64;

/// What role a token plays, which decides how queries use it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    /// A word in sequence; phrases are built from these.
    Primary,
    /// A whole joined identifier (`gpt-4o`), at the position of its first part.
    Compound,
    /// A dictionary word inside a longer CJK word, at the position of that word.
    Sub,
    /// A word of three or more ASCII letters as written (lower-cased, its inflection folded:
    /// [`inflection_base`]), prefixed with
    /// [`EXACT_MARK`], at its stem's position: ranks the word above others of its stem.
    Exact,
}

/// What starts an [`TokenKind::Exact`] token's text; no other token starts with it.
pub const EXACT_MARK: char = '=';

#[derive(Debug, Clone, PartialEq, Eq)]
/// One token of analysed text.
pub struct Token {
    /// The indexed form (lower-cased, stemmed …).
    pub text: String,
    /// Byte range in the analysed text.
    pub from: usize,
    /// End of the byte range (exclusive).
    pub to: usize,
    /// Token position (sub-words share their parent's).
    pub position: usize,
    /// What kind of token it is.
    pub kind: TokenKind,
}

fn jieba() -> &'static Jieba {
    // Loading the dictionary costs ~100 ms: only texts that contain Han characters pay it.
    static JIEBA: OnceLock<Jieba> = OnceLock::new();
    JIEBA.get_or_init(Jieba::new)
}

fn stemmer() -> &'static Stemmer {
    static STEMMER: OnceLock<Stemmer> = OnceLock::new();
    STEMMER.get_or_init(|| Stemmer::create(Algorithm::English))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Word,
    Han,
    Kana,
    Hangul,
    /// Thai, Lao, Khmer, Myanmar: scripts without spaces between words.
    Unspaced,
    Joiner,
    Other,
}

fn classify(c: char) -> Class {
    match c as u32 {
        0x4E00..=0x9FFF | 0x3400..=0x4DBF | 0x20000..=0x2A6DF | 0xF900..=0xFAFF | 0x3005 => {
            Class::Han
        }
        0x3040..=0x309F | 0x30A0..=0x30FF | 0x31F0..=0x31FF | 0xFF66..=0xFF9D => Class::Kana,
        0xAC00..=0xD7AF | 0x1100..=0x11FF | 0x3130..=0x318F => Class::Hangul,
        // Letters, signs and digits of Thai, Lao, Khmer and Myanmar (not their punctuation).
        0x0E01..=0x0E3A
        | 0x0E40..=0x0E4E
        | 0x0E50..=0x0E59
        | 0x0E81..=0x0EDF
        | 0x1780..=0x17D3
        | 0x17D7
        | 0x17DC..=0x17DD
        | 0x17E0..=0x17E9
        | 0x1000..=0x1049
        | 0x1050..=0x109F => Class::Unspaced,
        _ if c.is_alphanumeric() => Class::Word,
        _ if matches!(c, '-' | '.' | '_' | '+' | '/' | '&') => Class::Joiner,
        _ => Class::Other,
    }
}

/// Splits `text` into index/query tokens, calling `emit` for each in position order. A
/// query is cut exactly as the text it searches: a word the index lacks matches nothing but
/// still counts against a result's coverage, where its single characters would match
/// unrelated pages (一堆 → 一, 堆 found the "heap" page).
pub fn analyze(text: &str, mut emit: impl FnMut(Token)) {
    let mut position = 0usize;
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut i = 0;
    while i < chars.len() {
        let (start, c) = chars[i];
        let class = classify(c);
        match class {
            Class::Word => {
                // A run of word chars, possibly joined by single joiners between word chars.
                let mut j = i + 1;
                let mut parts = vec![(start, 0usize)];
                loop {
                    while j < chars.len() && classify(chars[j].1) == Class::Word {
                        j += 1;
                    }
                    let end = byte_at(&chars, j, text.len());
                    if let Some(last) = parts.last_mut() {
                        last.1 = end;
                    }
                    let joined = j + 1 < chars.len()
                        && classify(chars[j].1) == Class::Joiner
                        && classify(chars[j + 1].1) == Class::Word;
                    if !joined {
                        break;
                    }
                    parts.push((chars[j + 1].0, 0));
                    j += 1;
                }
                let run_end = byte_at(&chars, j, text.len());
                if let Some(flag_start) = flag_prefix(&chars, i) {
                    push(
                        &mut emit,
                        text[flag_start..run_end].to_owned(),
                        flag_start,
                        run_end,
                        position,
                        TokenKind::Compound,
                    );
                }
                if parts.len() > 1 {
                    push(
                        &mut emit,
                        text[start..run_end].to_lowercase(),
                        start,
                        run_end,
                        position,
                        TokenKind::Compound,
                    );
                }
                // Languages named by a trailing `++` or `#` (`C++`, `g++`, `clang++`, `C#`):
                // without it the name is one letter, which no query keeps.
                let rest = &text[run_end..];
                let suffix = ["++", "#"].into_iter().find(|s| rest.starts_with(s));
                if let Some(suffix) = suffix
                    && !rest[suffix.len()..]
                        .chars()
                        .next()
                        .is_some_and(|c| classify(c) == Class::Word)
                {
                    let end = run_end + suffix.len();
                    push(
                        &mut emit,
                        text[start..end].to_lowercase(),
                        start,
                        end,
                        position,
                        TokenKind::Compound,
                    );
                }
                for (k, &(from, to)) in parts.iter().enumerate() {
                    // A path is also found by its tail and its segments: `sources.list` and
                    // `apt/sources.list` in `/etc/apt/sources.list`, `sources.list.d` in
                    // `/etc/apt/sources.list.d/x`.
                    if k > 0 && text[..from].ends_with('/') && k + 1 < parts.len() {
                        push(
                            &mut emit,
                            text[from..run_end].to_lowercase(),
                            from,
                            run_end,
                            position,
                            TokenKind::Compound,
                        );
                    }
                    if k == 0 || text[..from].ends_with('/') {
                        let segment_end = parts[k + 1..]
                            .iter()
                            .find(|(next, _)| text[..*next].ends_with('/'))
                            .map(|&(next, _)| next - 1);
                        // A segment of several parts that is neither the whole run nor a tail.
                        if let Some(segment_end) = segment_end
                            && parts[k..].iter().take_while(|p| p.1 <= segment_end).count() > 1
                        {
                            push(
                                &mut emit,
                                text[from..segment_end].to_lowercase(),
                                from,
                                segment_end,
                                position,
                                TokenKind::Compound,
                            );
                        }
                    }
                    let lower = text[from..to].to_lowercase();
                    let stemmed = stemmer().stem(&lower).into_owned();
                    if push(&mut emit, stemmed, from, to, position, TokenKind::Primary) {
                        // Words the stemmer can change (Porter leaves shorter ones alone).
                        if lower.len() >= 3 && lower.bytes().all(|b| b.is_ascii_lowercase()) {
                            let exact = format!("{EXACT_MARK}{}", inflection_base(&lower));
                            push(&mut emit, exact, from, to, position, TokenKind::Exact);
                        }
                        position += 1;
                    }
                }
                i = j;
            }
            Class::Han => {
                let j = run_end(&chars, i, Class::Han);
                let end = byte_at(&chars, j, text.len());
                let run = &text[start..end];
                position = emit_han(run, jieba_spans(run), start, position, &mut emit);
                i = j;
            }
            Class::Kana => {
                let j = run_end(&chars, i, Class::Kana);
                if j - i == 1 {
                    let end = byte_at(&chars, j, text.len());
                    push_primary(&mut emit, &text[start..end], start, end, &mut position);
                } else {
                    for k in i..j - 1 {
                        let (from, to) = (chars[k].0, byte_at(&chars, k + 2, text.len()));
                        push_primary(&mut emit, &text[from..to], from, to, &mut position);
                    }
                }
                i = j;
            }
            Class::Hangul => {
                let j = run_end(&chars, i, Class::Hangul);
                let end = byte_at(&chars, j, text.len());
                push_primary(&mut emit, &text[start..end], start, end, &mut position);
                i = j;
            }
            Class::Unspaced => {
                let j = run_end(&chars, i, Class::Unspaced);
                // Cluster starts: a mark belongs to the letter before it, so a bigram never
                // begins or ends inside a syllable.
                let mut starts: Vec<usize> = (i..j)
                    .filter(|&k| k == i || !is_combining_mark(chars[k].1))
                    .collect();
                starts.push(j);
                if starts.len() <= 3 {
                    let end = byte_at(&chars, j, text.len());
                    push_primary(&mut emit, &text[start..end], start, end, &mut position);
                } else {
                    for w in starts.windows(3) {
                        let (from, to) = (chars[w[0]].0, byte_at(&chars, w[2], text.len()));
                        push_primary(&mut emit, &text[from..to], from, to, &mut position);
                    }
                }
                i = j;
            }
            Class::Joiner | Class::Other => i += 1,
        }
    }
}

/// `word` (lower-case ASCII) with its inflection folded, so the forms of one word meet and
/// the words of one stem do not: a plural (`files`, `policies`, `boxes`), `-ed` and `-ing`
/// (`limited`, `stopped`, `running`) and a final `e` (`use`, `used`, `using` all give `us`)
/// go; `status`, `class`, `analysis`, `news` and `string` stay. Derivations stay apart:
/// `customer` ≠ `custom`, `configuration` ≠ `configure`, `ownership` ≠ `own`. Deliberately
/// lighter than a stemmer; the same on both sides, which is all an exact form needs.
fn inflection_base(word: &str) -> String {
    const KEEP: &[&str] = &[
        "news", "series", "species", "always", "perhaps", "whereas", "need", "seed", "feed",
        "speed", "bed", "red", "shed", "hundred", "indeed",
    ];
    if KEEP.contains(&word) {
        return word.to_owned();
    }
    let plural_free = plural_base(word);
    let mut base = plural_free.as_str();
    for ending in ["ing", "ed"] {
        if let Some(b) = base.strip_suffix(ending)
            && b.len() >= 2
            && b.bytes().any(|c| b"aeiouy".contains(&c))
        {
            base = b;
            break;
        }
    }
    let mut base = base.to_owned();
    // A doubled final consonant of `stopped`, `running` (not `ll`, `ss`: `called`, `passed`).
    let bytes = base.as_bytes();
    if base.len() >= 4
        && base.len() < plural_free.len()
        && bytes[bytes.len() - 1] == bytes[bytes.len() - 2]
        && !b"aeioulsz".contains(&bytes[bytes.len() - 1])
    {
        base.pop();
    }
    if base.len() >= 3 && base.ends_with('e') && !base.ends_with("ee") {
        base.pop();
    }
    base
}

/// `word` without a plural ending (`files` → `file`, `policies` → `policy`, `boxes` →
/// `box`; `status`, `class`, `analysis` stay).
fn plural_base(word: &str) -> String {
    let n = word.len();
    if n < 4 || !word.ends_with('s') {
        return word.to_owned();
    }
    if let Some(base) = word.strip_suffix("ies")
        && !base.ends_with(['a', 'e'])
    {
        return format!("{base}y");
    }
    if let Some(base) = word.strip_suffix("es")
        && (base.ends_with(['x', 'z'])
            || base.ends_with("ss")
            || base.ends_with("ch")
            || base.ends_with("sh"))
    {
        return base.to_owned();
    }
    if word.ends_with("ss") || word.ends_with("us") || word.ends_with("is") {
        return word.to_owned();
    }
    word[..n - 1].to_owned()
}

/// Vowel signs, tone marks and other combining marks of the unspaced scripts: they attach to
/// the letter before them.
fn is_combining_mark(c: char) -> bool {
    matches!(c as u32,
        0x0E31 | 0x0E34..=0x0E3A | 0x0E47..=0x0E4E
        | 0x0EB1 | 0x0EB4..=0x0EBC | 0x0EC8..=0x0ECE
        | 0x17B4..=0x17D3 | 0x17DD
        | 0x102B..=0x103E | 0x1056..=0x1059 | 0x105E..=0x1060 | 0x1062..=0x1064
        | 0x1067..=0x106D | 0x1071..=0x1074 | 0x1082..=0x108D | 0x108F | 0x109A..=0x109D)
}

/// Byte offset of the `-` or `--` that makes the word starting at char `i` a command-line
/// flag: the dashes must follow the start of the text, whitespace or an opening bracket,
/// quote, `|`, `=` or `,` (tldr writes `{{[-p|--pid]}}`), so `git-rebase` is no flag.
fn flag_prefix(chars: &[(usize, char)], i: usize) -> Option<usize> {
    let dashes = chars[..i].iter().rev().take_while(|c| c.1 == '-').count();
    if !(1..=2).contains(&dashes) {
        return None;
    }
    let first = i - dashes;
    let boundary = first == 0
        || matches!(chars[first - 1].1, c if c.is_whitespace()
            || matches!(c, '[' | '(' | '{' | '|' | '`' | '"' | '\'' | '=' | ','));
    boundary.then(|| chars[first].0)
}

fn run_end(chars: &[(usize, char)], i: usize, class: Class) -> usize {
    let mut j = i + 1;
    while j < chars.len() && classify(chars[j].1) == class {
        j += 1;
    }
    j
}

fn byte_at(chars: &[(usize, char)], idx: usize, len: usize) -> usize {
    chars.get(idx).map_or(len, |c| c.0)
}

/// Emits a primary token and advances the position when it was kept.
fn push_primary(
    emit: &mut impl FnMut(Token),
    text: &str,
    from: usize,
    to: usize,
    position: &mut usize,
) {
    if push(
        emit,
        text.to_lowercase(),
        from,
        to,
        *position,
        TokenKind::Primary,
    ) {
        *position += 1;
    }
}

fn push(
    emit: &mut impl FnMut(Token),
    text: String,
    from: usize,
    to: usize,
    position: usize,
    kind: TokenKind,
) -> bool {
    if text.is_empty() || text.len() > MAX_TOKEN_BYTES {
        return false;
    }
    emit(Token {
        text,
        from,
        to,
        position,
        kind,
    });
    true
}

/// Byte spans of jieba's search-mode words in `run`.
fn jieba_spans(run: &str) -> Vec<(usize, usize)> {
    jieba()
        .cut_for_search(run, true)
        .into_iter()
        .filter(|t| !t.word.trim().is_empty())
        .map(|t| (t.byte_start, t.byte_end))
        .collect()
}

/// Emits Han word spans: a span not inside the previous primary word is primary (next
/// position); one inside it is a sub-word at the primary's position. Returns the next position.
fn emit_han(
    run: &str,
    mut spans: Vec<(usize, usize)>,
    base: usize,
    mut position: usize,
    emit: &mut impl FnMut(Token),
) -> usize {
    // Order by start, longest first, so every word precedes the sub-words it contains.
    spans.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
    spans.dedup();
    let mut primary_end = 0usize;
    let mut primary_pos = position;
    for (from, to) in spans {
        let word = run[from..to].to_lowercase();
        if from >= primary_end {
            primary_end = to;
            primary_pos = position;
            if push(
                emit,
                word,
                base + from,
                base + to,
                position,
                TokenKind::Primary,
            ) {
                position += 1;
            }
        } else {
            push(
                emit,
                word,
                base + from,
                base + to,
                primary_pos,
                TokenKind::Sub,
            );
        }
    }
    position
}

/// Convenience: all tokens of `text`.
pub fn tokens(text: &str) -> Vec<Token> {
    let mut out = Vec::new();
    analyze(text, |t| out.push(t));
    out
}

/// The tantivy side of [`analyze`]: [`QuarryTokenizer::words`] (registered as `quarry`)
/// gives every token but the exact forms, [`QuarryTokenizer::exact_forms`] (`quarry-exact`)
/// only those, each for a field of its own.
#[derive(Clone, Default)]
pub struct QuarryTokenizer {
    exact_forms: bool,
}

impl QuarryTokenizer {
    /// Words, stems, compounds and sub-words: everything but the exact forms.
    pub fn words() -> QuarryTokenizer {
        QuarryTokenizer { exact_forms: false }
    }

    /// The exact forms only.
    pub fn exact_forms() -> QuarryTokenizer {
        QuarryTokenizer { exact_forms: true }
    }
}

/// The tokens of one text, as tantivy reads them.
pub struct QuarryTokenStream {
    tokens: Vec<tantivy::tokenizer::Token>,
    next: usize,
}

impl tantivy::tokenizer::Tokenizer for QuarryTokenizer {
    type TokenStream<'a> = QuarryTokenStream;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> QuarryTokenStream {
        let mut tokens = Vec::new();
        let exact_forms = self.exact_forms;
        analyze(text, |t| {
            if (t.kind == TokenKind::Exact) != exact_forms {
                return;
            }
            tokens.push(tantivy::tokenizer::Token {
                offset_from: t.from,
                offset_to: t.to,
                position: t.position,
                text: t.text,
                position_length: 1,
            })
        });
        QuarryTokenStream { tokens, next: 0 }
    }
}

impl tantivy::tokenizer::TokenStream for QuarryTokenStream {
    fn advance(&mut self) -> bool {
        self.next += 1;
        self.next <= self.tokens.len()
    }

    fn token(&self) -> &tantivy::tokenizer::Token {
        &self.tokens[self.next - 1]
    }

    fn token_mut(&mut self) -> &mut tantivy::tokenizer::Token {
        &mut self.tokens[self.next - 1]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tokens without exact forms (tested on their own).
    fn texts(s: &str) -> Vec<(String, TokenKind)> {
        tokens(s)
            .into_iter()
            .filter(|t| t.kind != TokenKind::Exact)
            .map(|t| (t.text, t.kind))
            .collect()
    }

    fn words(s: &str) -> Vec<String> {
        texts(s).into_iter().map(|(w, _)| w).collect()
    }

    #[test]
    fn identifiers_are_kept_whole_and_split() {
        let t = texts("Use gpt-4o with v1.2.3.");
        let words: Vec<&str> = t.iter().map(|(w, _)| w.as_str()).collect();
        assert_eq!(
            words,
            [
                "use", "gpt-4o", "gpt", "4o", "with", "v1.2.3", "v1", "2", "3"
            ]
        );
        assert_eq!(t[1].1, TokenKind::Compound);
    }

    #[test]
    fn a_path_is_found_by_its_file_name_inside_chinese_text() {
        // Issue 41 item 13: the Debian reference writes the path inside Chinese sentences.
        let t: Vec<Token> =
            tokens("编辑“/etc/apt/sources.list.d/debian.sources”和/etc/apt/sources.list文件")
                .into_iter()
                .filter(|t| t.kind != TokenKind::Exact)
                .collect();
        let compounds: Vec<&str> = t
            .iter()
            .filter(|t| t.kind == TokenKind::Compound)
            .map(|t| t.text.as_str())
            .collect();
        assert_eq!(
            compounds,
            [
                "etc/apt/sources.list.d/debian.sources",
                "apt/sources.list.d/debian.sources",
                "sources.list.d/debian.sources",
                "sources.list.d",
                "debian.sources",
                "etc/apt/sources.list",
                "apt/sources.list",
                "sources.list",
            ]
        );
        let positions: Vec<usize> = t.iter().map(|t| t.position).collect();
        assert!(positions.windows(2).all(|w| w[0] <= w[1]), "{positions:?}");
        // Each piece starts where its first part does, so phrases still line up.
        let tail = t.iter().rfind(|t| t.text == "sources.list");
        let part = t.iter().rfind(|t| t.text == "sourc");
        assert_eq!(tail.map(|t| t.position), part.map(|t| t.position));
        // Not a path: nothing more than before.
        assert_eq!(texts("v1.2.3").len(), 4);
    }

    #[test]
    fn languages_named_with_plus_plus_or_sharp_are_words() {
        assert_eq!(words("指定 C++ 语言标准")[..3], ["指定", "c++", "c"]);
        assert_eq!(words("clang++ and C#")[..2], ["clang++", "clang"]);
        assert!(words("clang++ and C#").contains(&"c#".to_owned()));
        // Not a suffix: a sum, a heading mark, an anchor.
        assert!(!words("a++b").iter().any(|w| w.contains('+')));
        assert!(!words("item#3").iter().any(|w| w.contains('#')));
    }

    #[test]
    fn flags_are_kept_whole_with_their_dashes() {
        assert_eq!(words("lsof -p pid"), ["lsof", "-p", "p", "pid"]);
        assert_eq!(
            words("`git push {{[-f|--force]}}`"),
            ["git", "push", "-f", "f", "--force", "forc"]
        );
        assert_eq!(words("tar -xzf"), ["tar", "-xzf", "xzf"]);
        assert_eq!(words("ls -LA"), ["ls", "-LA", "la"]);
        // A hyphenated word, a minus sign inside a word or three dashes make no flag.
        assert_eq!(words("git-rebase"), ["git-rebase", "git", "rebas"]);
        assert_eq!(words("a---b"), ["a", "b"]);
        let flag = tokens("--force")
            .into_iter()
            .next()
            .map(|t| (t.kind, t.from));
        assert_eq!(flag, Some((TokenKind::Compound, 0)));
    }

    #[test]
    fn english_is_stemmed() {
        let all: Vec<String> = tokens("Extracting archives")
            .into_iter()
            .map(|t| t.text)
            .collect();
        assert_eq!(all, ["extract", "=extract", "archiv", "=archiv"]);
    }

    #[test]
    fn exact_forms_keep_words_of_one_stem_apart() {
        let exact = |s: &str| -> Vec<String> {
            tokens(s)
                .into_iter()
                .filter(|t| t.kind == TokenKind::Exact)
                .map(|t| t.text)
                .collect()
        };
        // One stem, two words: the exact forms differ; a word's inflections fold.
        assert_eq!(tokens("customer")[0].text, tokens("custom")[0].text);
        assert_eq!(exact("customer customers"), ["=customer", "=customer"]);
        assert_eq!(exact("custom"), ["=custom"]);
        let same = |words: &str| {
            let forms = exact(words);
            assert!(forms.windows(2).all(|w| w[0] == w[1]), "{words}: {forms:?}");
        };
        for words in [
            "policy policies",
            "box boxes",
            "class classes",
            "limit limits limited limiting",
            "stop stops stopped stopping",
            "run runs running",
            "use uses used using",
            "own owns owned owning",
            "configure configured configures",
            "call called calling",
        ] {
            same(words);
        }
        let apart = |a: &str, b: &str| assert_ne!(exact(a), exact(b), "{a} / {b}");
        apart("customer", "custom");
        apart("configuration", "configure");
        apart("ownership", "own");
        apart("news", "new");
        apart("string", "str");
        apart("status", "statu");
        apart("analysis", "analysi");
        // Numbers, short words and non-ASCII words have no exact form; an exact form shares
        // its stem's position, so phrases are unchanged.
        assert!(exact("2024 4o by größe").is_empty());
        let t = tokens("open files");
        assert_eq!(
            (t[1].kind, t[1].position),
            (TokenKind::Exact, t[0].position)
        );
        assert_eq!(t[2].position, t[0].position + 1);
    }

    #[test]
    fn ampersand_identifiers_are_whole_tokens_and_parts() {
        let compounds = |s: &str| -> Vec<String> {
            tokens(s)
                .into_iter()
                .filter(|t| t.kind == TokenKind::Compound)
                .map(|t| t.text)
                .collect()
        };
        assert_eq!(compounds("AT&T and PP&E, S&P 500"), ["at&t", "pp&e", "s&p"]);
        // A lone ampersand between words joins nothing.
        assert!(compounds("salt & pepper").is_empty());
        assert_eq!(
            compounds("C++ and 10-K for Q2-23"),
            ["c++", "10-k", "q2-23"]
        );
    }

    #[test]
    fn chinese_is_segmented_with_latin_mixed_in() {
        let toks = tokens("用git撤销上一次提交");
        let prim: Vec<&str> = toks
            .iter()
            .filter(|t| t.kind == TokenKind::Primary)
            .map(|t| t.text.as_str())
            .collect();
        assert!(prim.contains(&"git"), "{prim:?}");
        assert!(prim.contains(&"撤销"), "{prim:?}");
        assert!(prim.contains(&"提交"), "{prim:?}");
        // Positions never decrease.
        assert!(toks.windows(2).all(|w| w[0].position <= w[1].position));
    }

    #[test]
    fn thai_is_cut_into_cluster_bigrams_the_same_way_in_text_and_query() {
        // ส วั ส ดี: the vowel marks stay on their letters.
        assert_eq!(words("สวัสดี"), ["สวั", "วัส", "สดี"]);
        // "Hello world" in one unspaced run: the greeting's bigrams are all there, in order,
        // so a phrase query for the greeting matches inside the sentence.
        let sentence = tokens("สวัสดีชาวโลก");
        let hello = tokens("สวัสดี");
        let at = sentence
            .iter()
            .position(|t| t.text == hello[0].text)
            .expect("first bigram");
        for (k, h) in hello.iter().enumerate() {
            assert_eq!(sentence[at + k].text, h.text);
            assert_eq!(sentence[at + k].position, sentence[at].position + k);
        }
        // A single syllable is one token; Thai next to Latin splits at the script change.
        assert_eq!(words("ดี"), ["ดี"]);
        assert_eq!(words("Hello สวัสดี"), ["hello", "สวั", "วัส", "สดี"]);
        // Offsets are char boundaries of the text (tantivy highlights with them).
        let text = "ทดสอบ ภาษาไทย";
        for t in tokens(text) {
            assert_eq!(&text[t.from..t.to], t.text);
        }
    }

    #[test]
    fn kana_bigrams() {
        let words: Vec<String> = tokens("カタカナ").into_iter().map(|t| t.text).collect();
        assert_eq!(words, ["カタ", "タカ", "カナ"]);
    }
}
