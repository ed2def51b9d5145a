//! The index's health report.

use serde::Serialize;

/// Per-collection line of [`StatusReport`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CollectionStatus {
    /// The collection's name.
    pub name: String,
    /// Its root folder (empty for knowledge bases).
    pub path: String,
    /// Its glob mask.
    pub pattern: String,
    /// Documents it holds.
    pub documents: u64,
    /// ISO 8601 with milliseconds, or `None` when never indexed.
    pub last_updated: Option<String>,
}

/// How far embedding has got in one space (a line of [`StatusReport::spaces`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpaceEmbedding {
    /// The space's name.
    pub space: String,
    /// Documents it holds.
    pub documents: u64,
    /// Documents whose vectors are missing or outdated.
    pub needs_embedding: u64,
    /// Chunks cut but not embedded yet.
    pub chunks_needing_embedding: u64,
}

/// The index's health, the seed's `StatusResult`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StatusReport {
    /// Documents in the space.
    pub total_documents: u64,
    /// Documents whose vectors are missing or outdated.
    pub needs_embedding: u64,
    /// Chunks of this space cut but not embedded yet (uploads wait for them to be `ready`).
    pub chunks_needing_embedding: u64,
    /// Seconds those chunks take at the rate the last embedding round measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embedding_eta_seconds: Option<u64>,
    /// Whether a vector index exists.
    pub has_vector_index: bool,
    /// The space's collections.
    pub collections: Vec<CollectionStatus>,
    /// Every space, for the machine's owner of a server with more than one (the others'
    /// embedding is not in the counts above).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub spaces: Vec<SpaceEmbedding>,
}

/// `42 s`, `7 min`, `2 h 5 min`: an estimate, so no finer than it is.
fn human_duration(secs: u64) -> String {
    match secs {
        0..=89 => format!("{secs} s"),
        90..=5399 => format!("{} min", secs.div_ceil(60)),
        _ => format!("{} h {} min", secs / 3600, (secs % 3600) / 60),
    }
}

impl StatusReport {
    /// The seed's human summary (`QMD Index Status:` layout, named for Quarry).
    pub fn summary(&self) -> String {
        let mut out = format!(
            "Quarry Index Status:\n  Total documents: {}\n  Needs embedding: {}\n  Vector index: {}\n  Collections: {}",
            self.total_documents,
            self.needs_embedding,
            if self.has_vector_index { "yes" } else { "no" },
            self.collections.len()
        );
        for c in &self.collections {
            // A knowledge base has no folder: show its name.
            let place = if c.path.is_empty() { &c.name } else { &c.path };
            out.push_str(&format!("\n    - {place} ({} docs)", c.documents));
        }
        // Chunks are cut with keyword indexing, so they "wait" even where nothing embeds:
        // the line is for indexes that have vectors (seed 001's text otherwise).
        if self.chunks_needing_embedding > 0 && self.has_vector_index {
            out.push_str(&format!(
                "\n  Chunks waiting for embedding: {}",
                self.chunks_needing_embedding
            ));
            if let Some(eta) = self.embedding_eta_seconds {
                out.push_str(&format!(" (about {} left)", human_duration(eta)));
            }
        }
        if !self.spaces.is_empty() {
            out.push_str("\n  Spaces (needs embedding: documents / chunks):");
            for s in &self.spaces {
                out.push_str(&format!(
                    "\n    - {} ({} docs): {} / {}",
                    s.space, s.documents, s.needs_embedding, s.chunks_needing_embedding
                ));
            }
        }
        out
    }
}
