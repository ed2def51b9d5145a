//! People curate chunks through the engine (issue 44, item 6): an edit or a disabled chunk
//! changes what every search finds at once, holds across a re-sync that leaves the chunk's
//! text alone, lapses with a text that changed, and survives a re-cut that yields its chunk
//! again; bad changes are refused and change nothing.

use quarry_core::Error;

use crate::engine::Engine;
use crate::kb::curation::{ChunkChange, ChunkingFrom, EmbeddingNow};
use crate::kb::sources::AddSource;
use crate::progress::NoProgress;
use crate::test_support::{drain, engine, keyword_passages};
use quarry_sources::Location;

const OWNER: &str = "test-node:curation";

/// Three sections of about 200 characters: one chunk each in a knowledge base cut at 300
/// characters without overlap.
fn manual(second: &str) -> String {
    format!(
        "# Harbour manual\n\n## Moorings\n\nThe mooring buoys are checked every spring by the \
         harbourmaster, who replaces worn shackles and chains, records each buoy's position, and \
         posts the list of free moorings at the office.\n\n## Signals\n\n{second} Signals are \
         raised on the mast at the harbour entrance and repeated on the radio every hour while \
         they stand.\n\n## Fuel\n\nDiesel is sold at the north quay from six until noon; \
         boats queue along the wall in the order they arrive, and payment is by card only.\n"
    )
}

/// The passages' texts found for `word` by keyword (every score, no reranking).
fn found(e: &Engine, word: &str) -> Vec<String> {
    keyword_passages(e, word)
        .into_iter()
        .map(|h| h.content)
        .collect()
}

/// A folder source over `dir` in the knowledge base `manuals`, synced once.
fn synced(e: &Engine, dir: &std::path::Path) -> String {
    e.create_knowledge_base(&crate::kb::knowledge::CreateKnowledgeBase {
        name: "manuals".into(),
        description: String::new(),
        chunk_size: Some(300),
        chunk_overlap: Some(0),
    })
    .unwrap();
    let s = e
        .add_source(
            "manuals",
            &AddSource {
                location: Location::folder(dir).unwrap(),
                mask: Some("**/*.md".into()),
                interval: None,
                secret: None,
                watch: false,
                readers: None,
                allow_net: Vec::new(),
            },
        )
        .unwrap();
    e.sync_source(&s.id, OWNER, &NoProgress).unwrap();
    drain(e);
    s.id
}

fn small_cut() -> (Option<u32>, Option<u32>) {
    (Some(100), Some(10))
}

#[test]
fn an_edit_holds_across_a_resync_of_unchanged_text_and_lapses_with_a_changed_one() {
    let home = tempfile::tempdir().unwrap();
    let folder = tempfile::tempdir().unwrap();
    let file = folder.path().join("harbour.md");
    std::fs::write(&file, manual("A red flag means the harbour is closed.")).unwrap();
    let e = engine(home.path());
    let source = synced(&e, folder.path());

    let listed = e.kb_document_chunks("manuals", "harbour.md").unwrap();
    assert_eq!(listed.chunking.from, ChunkingFrom::KnowledgeBase);
    assert_eq!(listed.chunks.len(), 3, "{listed:?}");
    let fuel = listed
        .chunks
        .iter()
        .find(|c| c.content.contains("Diesel"))
        .unwrap()
        .clone();
    assert!(fuel.enabled && !fuel.edited && fuel.original_content.is_none());

    // Edit: the new text is what keyword search finds, the old one is gone.
    let change = ChunkChange {
        content: Some(Some(
            "## Fuel\n\nDiesel and petrol are sold at the south quay around the clock.".into(),
        )),
        enabled: None,
    };
    let (view, embedding) = e
        .edit_kb_chunk("manuals", "harbour.md", &fuel.id, &change, "ann")
        .unwrap();
    assert_eq!(embedding, EmbeddingNow::Off); // no model in unit tests
    assert!(view.edited && view.enabled);
    assert_eq!(view.edited_by.as_deref(), Some("ann"));
    assert_eq!(
        view.original_content.as_deref(),
        Some(fuel.content.as_str())
    );
    assert_eq!(view.id, fuel.id, "the key names the chunk as cut");
    assert!(found(&e, "petrol").iter().any(|t| t.contains("south quay")));
    assert!(
        found(&e, "noon").is_empty(),
        "the text as cut is no longer searched"
    );

    // Disable the signals chunk: nothing finds it, the list still shows it.
    let signals = listed
        .chunks
        .iter()
        .find(|c| c.content.contains("red flag"))
        .unwrap()
        .id
        .clone();
    let (off, _) = e
        .edit_kb_chunk(
            "manuals",
            "harbour.md",
            &signals,
            &ChunkChange {
                content: None,
                enabled: Some(false),
            },
            "ann",
        )
        .unwrap();
    assert!(!off.enabled);
    assert!(found(&e, "flag").is_empty());

    // A re-sync that changes another section: the edit and the disabled chunk hold.
    std::fs::write(
        &file,
        manual("A red flag means the harbour is closed.").replace("every spring", "every autumn"),
    )
    .unwrap();
    let report = e.sync_source(&source, OWNER, &NoProgress).unwrap().report;
    assert_eq!(report.counts.changed, 1, "{report:?}");
    drain(&e);
    assert!(found(&e, "autumn").iter().any(|t| t.contains("mooring")));
    assert!(found(&e, "petrol").iter().any(|t| t.contains("south quay")));
    assert!(found(&e, "noon").is_empty());
    assert!(found(&e, "flag").is_empty());
    let after = e
        .kb_document_chunks("manuals", "harbour.md")
        .unwrap()
        .chunks;
    assert!(after.iter().any(|c| c.id == fuel.id && c.edited));
    assert!(after.iter().any(|c| c.id == signals && !c.enabled));

    // A re-sync that changes the disabled chunk's own text: that chunk is back, as cut.
    std::fs::write(
        &file,
        manual("A blue flag means the harbour is open.").replace("every spring", "every autumn"),
    )
    .unwrap();
    e.sync_source(&source, OWNER, &NoProgress).unwrap();
    drain(&e);
    assert!(found(&e, "blue").iter().any(|t| t.contains("blue flag")));
    assert!(found(&e, "petrol").iter().any(|t| t.contains("south quay")));

    // Restore the edit: the text as cut is back.
    let (restored, _) = e
        .edit_kb_chunk(
            "manuals",
            "harbour.md",
            &fuel.id,
            &ChunkChange {
                content: Some(None),
                enabled: None,
            },
            "bo",
        )
        .unwrap();
    assert!(!restored.edited && restored.enabled && restored.edited_by.is_none());
    assert!(found(&e, "petrol").is_empty());
    assert!(found(&e, "noon").iter().any(|t| t.contains("north quay")));
}

#[test]
fn a_recut_keeps_the_edits_its_chunks_match_and_bad_changes_change_nothing() {
    let home = tempfile::tempdir().unwrap();
    let folder = tempfile::tempdir().unwrap();
    std::fs::write(
        folder.path().join("harbour.md"),
        manual("A red flag means the harbour is closed."),
    )
    .unwrap();
    let e = engine(home.path());
    synced(&e, folder.path());
    let before = e.kb_document_chunks("manuals", "harbour.md").unwrap();
    let first = before.chunks[0].clone();

    // Bad changes: refused, nothing stored.
    let bad = [
        ChunkChange::default(),
        ChunkChange {
            content: Some(Some("   ".into())),
            enabled: None,
        },
        ChunkChange {
            content: Some(Some(
                "x".repeat(crate::kb::curation::MAX_CHUNK_EDIT_CHARS + 1),
            )),
            enabled: None,
        },
    ];
    for change in &bad {
        let r = e.edit_kb_chunk("manuals", "harbour.md", &first.id, change, "ann");
        assert!(matches!(r, Err(Error::InvalidInput(_))), "{r:?}");
    }
    let r = e.edit_kb_chunk(
        "manuals",
        "harbour.md",
        "0000000000000000",
        &ChunkChange {
            content: None,
            enabled: Some(false),
        },
        "ann",
    );
    assert!(matches!(r, Err(Error::NotFound(_))), "{r:?}");
    let (size, _) = small_cut();
    for (size, overlap) in [(Some(50), None), (size, Some(60)), (None, Some(10))] {
        let r = e.recut_kb_document("manuals", "harbour.md", size, overlap);
        assert!(matches!(r, Err(Error::InvalidInput(_))), "{r:?}");
    }
    let unchanged = e.kb_document_chunks("manuals", "harbour.md").unwrap();
    assert_eq!(unchanged.chunks.len(), before.chunks.len());
    assert!(unchanged.chunks.iter().all(|c| c.enabled && !c.edited));
    assert_eq!(unchanged.chunking.from, ChunkingFrom::KnowledgeBase);

    // Disable the fuel chunk, then re-cut small: more chunks; an edit whose chunk the new
    // cut does not yield is kept aside, and applies again when the old settings return.
    let fuel = before
        .chunks
        .iter()
        .find(|c| c.content.contains("Diesel"))
        .unwrap()
        .id
        .clone();
    e.edit_kb_chunk(
        "manuals",
        "harbour.md",
        &fuel,
        &ChunkChange {
            content: None,
            enabled: Some(false),
        },
        "ann",
    )
    .unwrap();
    assert!(found(&e, "diesel").is_empty());
    let (size, overlap) = small_cut();
    let recut = e
        .recut_kb_document("manuals", "harbour.md", size, overlap)
        .unwrap();
    assert!(recut.chunks > before.chunks.len(), "{recut:?}");
    assert_eq!(recut.chunking.from, ChunkingFrom::Document);
    assert_eq!(recut.chunking.chunk_size, 100);
    assert_eq!(recut.edits_kept + recut.edits_unmatched, 1);
    let small = e.kb_document_chunks("manuals", "harbour.md").unwrap();
    assert_eq!(small.chunks.len(), recut.chunks);
    assert!(
        small
            .chunks
            .iter()
            .all(|c| c.content.chars().count() <= 100)
    );
    if recut.edits_unmatched == 1 {
        assert!(
            !found(&e, "diesel").is_empty(),
            "an edit aside disables nothing"
        );
    }
    let back = e
        .recut_kb_document("manuals", "harbour.md", None, None)
        .unwrap();
    assert_eq!(back.chunks, before.chunks.len());
    assert_eq!(
        (back.edits_kept, back.chunking.from),
        (1, ChunkingFrom::KnowledgeBase)
    );
    assert!(
        found(&e, "diesel").is_empty(),
        "the disabled chunk is disabled again"
    );
}

#[test]
fn a_reader_may_not_curate() {
    let home = tempfile::tempdir().unwrap();
    let folder = tempfile::tempdir().unwrap();
    std::fs::write(folder.path().join("harbour.md"), manual("A red flag.")).unwrap();
    let e = engine(home.path());
    synced(&e, folder.path());
    let id = e
        .kb_document_chunks("manuals", "harbour.md")
        .unwrap()
        .chunks[0]
        .id
        .clone();
    let reader = e.scoped(quarry_core::Scope {
        access: quarry_core::Access::Read,
        ..quarry_core::Scope::owner(quarry_core::DEFAULT_SPACE)
    });
    assert_eq!(
        reader
            .kb_document_chunks("manuals", "harbour.md")
            .unwrap()
            .chunks
            .len(),
        e.kb_document_chunks("manuals", "harbour.md")
            .unwrap()
            .chunks
            .len()
    );
    let r = reader.edit_kb_chunk(
        "manuals",
        "harbour.md",
        &id,
        &ChunkChange {
            content: None,
            enabled: Some(false),
        },
        "eve",
    );
    assert!(matches!(r, Err(Error::Forbidden(_))), "{r:?}");
    let r = reader.recut_kb_document("manuals", "harbour.md", Some(200), None);
    assert!(matches!(r, Err(Error::Forbidden(_))), "{r:?}");
    assert!(
        e.kb_document_chunks("manuals", "harbour.md")
            .unwrap()
            .chunks
            .iter()
            .all(|c| c.enabled)
    );
}
