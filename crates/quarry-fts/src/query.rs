//! The keyword query language.
//!
//! Words are optional (OR) and ranked by BM25, so a natural-language question returns the
//! documents sharing the most informative words. `"a phrase"` must appear as written,
//! `+word` is required; `NOT word` and `-"word or phrase"` exclude. A bare `-word` is *not* an
//! exclusion: agents paste command lines (`lsof -p pid`, `tar -xzf`), so `-p` and `--force`
//! search as the literal flags. Stop words are dropped from optional words unless nothing
//! else is left.

use crate::analyzer::{Token, TokenKind, analyze, tokens};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
/// How a clause takes part in a query.
pub enum Occur {
    /// Ranks documents that match it (words are OR-ed).
    Should,
    /// Required (`+word`).
    Must,
    /// Excluded (`NOT word`, `-"phrase"`).
    MustNot,
}

/// One clause of a parsed query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Clause {
    /// How the clause takes part.
    pub occur: Occur,
    /// True when written in quotes: all primary tokens in order.
    pub phrase: bool,
    /// The analysed tokens of the clause.
    pub tokens: Vec<Token>,
    /// The text as the user wrote it (for snippets).
    pub surface: String,
}

/// A parsed keyword query.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParsedQuery {
    /// The clauses, in the order written.
    pub clauses: Vec<Clause>,
}

/// Function words dropped from optional words. Deliberately short: many of the words
/// other lists drop (`who`, `which`, `at`, `time`, `more`) are names of things people look for.
const STOP_WORDS: &[&str] = &[
    // English (stemmed forms, since the analyzer stems before comparing).
    "a",
    "an",
    "and",
    "are",
    "be",
    "by",
    "can",
    "could",
    "do",
    "doe",
    "did",
    "for",
    "from",
    "how",
    "i",
    "in",
    "is",
    "it",
    "me",
    "my",
    "of",
    "on",
    "or",
    "pleas",
    "should",
    "that",
    "the",
    "this",
    "to",
    "want",
    "what",
    "would",
    "you",
    "your",
    // Chinese function words and question words.
    "的",
    "了",
    "是",
    "在",
    "和",
    "与",
    "吗",
    "呢",
    "吧",
    "啊",
    "我",
    "你",
    "如何",
    "怎么",
    "怎样",
    "怎么样",
    "什么",
    "哪些",
    "一个",
    "可以",
    "能",
    "把",
    "被",
    // Places, directions and fillers people type around what they want ("在 mac 上",
    // "一堆文档里", "搬过来", "某个词"): issue 41 item 14.
    "上",
    "下",
    "里",
    "来",
    "去",
    "给",
    "地",
    "得",
    "着",
    "过",
    "这",
    "那",
    "个",
    "些",
    "很",
    "就",
    "都",
    "也",
    "还",
    "又",
    "呀",
    "嘛",
    "么",
    "之",
    "其",
    "以",
    "于",
    "一下",
    "这个",
    "那个",
    "某个",
    "哪个",
];

/// `NOT word` (upper case, followed by a word): the rest after `NOT `, else `None`.
fn strip_not(s: &str) -> Option<&str> {
    let after = s.strip_prefix("NOT")?;
    let trimmed = after.trim_start();
    (after.len() > trimmed.len() && !trimmed.is_empty()).then_some(trimmed)
}

/// Stop words, and single Latin letters (the `s` of `user's`, the `m` of `I'm`).
fn is_stop(t: &Token) -> bool {
    is_stop_word(&t.text)
}

/// Whether an analysed word (as [`crate::analyzer::tokens`] gives it) is a function word or a
/// single Latin letter, which say nothing about what a text is about.
pub fn is_stop_word(text: &str) -> bool {
    STOP_WORDS.contains(&text) || (text.len() == 1 && text.is_ascii())
}

impl ParsedQuery {
    /// Parses `input`, Han text cut by jieba as the index's is. Never fails: unbalanced
    /// quotes close at the end of the input.
    pub fn parse(input: &str) -> ParsedQuery {
        let mut clauses = Vec::new();
        let mut rest = input.trim();
        while !rest.is_empty() {
            let (occur, after_sign) = match rest.as_bytes()[0] {
                b'+' if rest.len() > 1 && !rest.as_bytes()[1].is_ascii_whitespace() => {
                    (Occur::Must, &rest[1..])
                }
                // `-"…"` excludes; `-word` is a flag (see the module docs).
                b'-' if rest[1..].starts_with('"') => (Occur::MustNot, &rest[1..]),
                _ => match strip_not(rest) {
                    Some(after) => (Occur::MustNot, after),
                    None => (Occur::Should, rest),
                },
            };
            let (surface, phrase, next) = if let Some(body) = after_sign.strip_prefix('"') {
                match body.find('"') {
                    Some(end) => (&body[..end], true, &body[end + 1..]),
                    None => (body, true, ""),
                }
            } else {
                let end = after_sign
                    .find(char::is_whitespace)
                    .unwrap_or(after_sign.len());
                (&after_sign[..end], false, &after_sign[end..])
            };
            let toks = if phrase {
                tokens(surface)
            } else {
                let mut v = Vec::new();
                analyze(surface, |t| v.push(t));
                v
            };
            if !toks.is_empty() {
                clauses.push(Clause {
                    occur,
                    phrase,
                    tokens: toks,
                    surface: surface.to_owned(),
                });
            }
            rest = next.trim_start();
        }
        let mut q = ParsedQuery { clauses };
        q.drop_stop_words();
        q
    }

    fn drop_stop_words(&mut self) {
        let informative = self.clauses.iter().any(|c| {
            c.occur != Occur::MustNot
                && (c.phrase
                    || c.tokens
                        .iter()
                        .any(|t| t.kind != TokenKind::Exact && !is_stop(t)))
        });
        if !informative {
            return;
        }
        for c in &mut self.clauses {
            if c.occur == Occur::Should && !c.phrase {
                // A stop word's exact form goes with it (same place in the text).
                let stops: Vec<(usize, usize)> = c
                    .tokens
                    .iter()
                    .filter(|t| t.kind == TokenKind::Primary && is_stop(t))
                    .map(|t| (t.from, t.to))
                    .collect();
                c.tokens.retain(|t| {
                    let exact_of_stop =
                        t.kind == TokenKind::Exact && stops.contains(&(t.from, t.to));
                    !(is_stop(t) || exact_of_stop)
                });
            }
        }
        self.clauses.retain(|c| !c.tokens.is_empty());
    }

    /// True when nothing could match positively (empty, or only exclusions).
    pub fn is_empty(&self) -> bool {
        !self.clauses.iter().any(|c| c.occur != Occur::MustNot)
    }

    /// Lower-cased terms to locate in text for snippets: stems and CJK words of every
    /// clause that is not excluded, longest first.
    pub fn highlight_terms(&self) -> Vec<String> {
        let mut terms: Vec<String> = self
            .clauses
            .iter()
            .filter(|c| c.occur != Occur::MustNot)
            .flat_map(|c| c.tokens.iter())
            .filter(|t| t.kind != TokenKind::Exact)
            .filter(|t| t.kind != TokenKind::Sub || t.text.chars().count() >= 2)
            .map(|t| t.text.clone())
            .filter(|t| t.chars().count() >= 2 || !t.is_ascii())
            .collect();
        terms.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
        terms.dedup();
        terms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(q: &str) -> Vec<(Occur, bool, Vec<String>)> {
        ParsedQuery::parse(q)
            .clauses
            .into_iter()
            .map(|c| {
                (
                    c.occur,
                    c.phrase,
                    c.tokens
                        .into_iter()
                        .filter(|t| t.kind != TokenKind::Exact)
                        .map(|t| t.text)
                        .collect(),
                )
            })
            .collect()
    }

    #[test]
    fn exact_forms_follow_their_words() {
        let exact = |q: &str| -> Vec<String> {
            ParsedQuery::parse(q)
                .clauses
                .into_iter()
                .flat_map(|c| c.tokens)
                .filter(|t| t.kind == TokenKind::Exact)
                .map(|t| t.text)
                .collect()
        };
        // A dropped stop word takes its exact form along; a kept one keeps it.
        assert_eq!(exact("the customers of AT&T"), ["=customer"]);
        assert_eq!(exact("the a"), ["=th"]);
        assert!(ParsedQuery::parse("customer").highlight_terms() == ["custom"]);
    }

    #[test]
    fn han_query_words_are_jiebas_not_single_characters() {
        // Issue 41 item 14: 一堆 and 几页 were queried as 一, 堆 and 页 (rare, heavily
        // weighted single characters that found the "heap" page); fillers are stop words.
        let terms = ParsedQuery::parse("在一堆 PDF 文档里找出包含某个词的那几页").highlight_terms();
        for single in ["一", "堆", "页", "里", "某个"] {
            assert!(!terms.iter().any(|t| t == single), "{single}: {terms:?}");
        }
        assert!(terms.iter().any(|t| t == "文档"), "{terms:?}");
    }

    #[test]
    fn syntax() {
        assert_eq!(
            shape(r#"+tar "extract files" NOT zip -"rar file" archive"#),
            vec![
                (Occur::Must, false, vec!["tar".to_string()]),
                (Occur::Should, true, vec!["extract".into(), "file".into()]),
                (Occur::MustNot, false, vec!["zip".into()]),
                (Occur::MustNot, true, vec!["rar".into(), "file".into()]),
                (Occur::Should, false, vec!["archiv".into()]),
            ]
        );
        // `NOT` alone, lower-case `not` and `NOTHING` are words.
        assert!(
            shape("not NOTHING NOT")
                .iter()
                .all(|c| c.0 == Occur::Should)
        );
    }

    #[test]
    fn flags_and_hyphens_are_words_not_operators() {
        let s = shape("git rebase --interactive gpt-4o");
        assert_eq!(s.len(), 4);
        assert!(s.iter().all(|c| c.0 == Occur::Should));
        // Pasted command lines: every flag is a literal to look for, never an exclusion.
        for q in [
            "lsof -p pid",
            "tar -xzf",
            "git log -p",
            "ls -la",
            "rm -rf --no-preserve-root",
        ] {
            assert!(shape(q).iter().all(|c| c.0 == Occur::Should), "{q}");
        }
        let flag = shape("lsof -p");
        assert_eq!(flag[1].2, ["-p".to_string()]);
    }

    #[test]
    fn stop_words_dropped_unless_all_stop() {
        assert_eq!(shape("how do I extract the archive").len(), 2);
        assert_eq!(shape("the a").len(), 2);
        assert_eq!(shape("the who").len(), 1);
        assert!(ParsedQuery::parse("  ").is_empty());
        assert!(ParsedQuery::parse("NOT foo").is_empty());
        assert!(
            !ParsedQuery::parse("-foo").is_empty(),
            "a flag, not an exclusion"
        );
    }

    #[test]
    fn unbalanced_quote_is_a_phrase_to_the_end() {
        assert_eq!(
            shape(r#""open file"#),
            vec![(Occur::Should, true, vec!["open".to_string(), "file".into()])]
        );
    }
}
