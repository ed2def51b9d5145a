//! How much each part of an entry and each word of a query weighs.

use crate::analyzer::{Token, TokenKind};

/// Field weights, BM25F-style: the title is indexed this many times, the path that many,
/// the body once, all into one field. Term frequencies then combine *before* BM25's
/// saturation, so a word in a one-word title helps without drowning the body evidence (summing
/// separate per-field BM25 scores over-rewards short fields: a page titled "now" would top
/// every question containing "now"). One field also keeps OR queries a flat disjunction,
/// which tantivy answers with block-max WAND.
pub const TITLE_WEIGHT: usize = 3;
/// How many times the relative path is indexed (see [`TITLE_WEIGHT`]).
pub const PATH_WEIGHT: usize = 2;
/// tantivy's BM25 `k1`.
pub(crate) const BM25_K1: f32 = 1.2;

/// Share of a query word's weight that its exact form ([`TokenKind::Exact`])
/// carries, the stem the rest: a text with the word as written scores it in full, one with
/// another word of its stem (`custom` for "customer", `configuration` for "configure") at
/// 1 − this. A word weighs what it weighed before either way, so English words in a mixed
/// query do not outweigh its Chinese ones.
pub const EXACT_SHARE: f32 = 0.3;

/// The weight of each of `tokens` (one clause) in a query, relative to its IDF: a stem with
/// an exact form beside it shares its weight with it ([`EXACT_SHARE`]).
pub(crate) fn token_weights(tokens: &[Token]) -> Vec<f32> {
    tokens
        .iter()
        .map(|t| match t.kind {
            TokenKind::Exact => EXACT_SHARE,
            TokenKind::Primary
                if tokens
                    .iter()
                    .any(|e| e.kind == TokenKind::Exact && (e.from, e.to) == (t.from, t.to)) =>
            {
                1.0 - EXACT_SHARE
            }
            _ => 1.0,
        })
        .collect()
}

/// Weight of a passage's heading path (and its document's title) in a passage index: the
/// words of the section a passage sits under describe it, as a title describes a document.
pub const HEADING_WEIGHT: usize = 2;
