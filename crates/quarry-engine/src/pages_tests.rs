//! Wiki pages (issue 68): pages cite passages of a knowledge base's documents; a page turns
//! stale exactly when a passage it cites changes or its document goes (a moved passage does
//! not), a rewrite that cites the passages as they are clears it; writes refuse a stale base,
//! unknown sources and bad input and change nothing; a page is read only by those who may
//! read all it cites.

use std::path::Path;

use quarry_core::{Access, Error, Scope};

use crate::engine::Engine;
use crate::kb::pages::{Citation, CitedLines, PageStatus, PageView, PageWrite, WikiIndexRequest};
use crate::kb::sources::AddSource;
use crate::progress::NoProgress;
use crate::retrieval::search::SearchRequest;
use crate::test_support::{create_kb, drain, engine, keyword_passages};
use quarry_sources::{Location, ReaderMapping};
use quarry_store::FileFilter;

const KB: &str = "wiki";

const LAUNCH: &str = "# Launch plan\n\nThe launch plan covers the spring release of the harbour app.\n\n## Date\n\nThe launch is on 4 May, at the harbour office.\nPress is invited for ten o'clock.\n\n## Risks\n\nThe app store review may take a week.\n";
const BUDGET: &str =
    "# Budget\n\nThe budget for the release is 40,000 EUR.\nIt was approved in March.\n";
const TEAM: &str = "# Team\n\nAnn leads the release; Bob runs support.\n";
const PAY: &str = "# Pay\n\nSupport staff are paid on the 25th.\n";

/// The engine of `home`, with the knowledge base `wiki` synced from `folder` (`hr/` read
/// by `group:hr` only).
fn synced(home: &Path, folder: &Path) -> (Engine, String) {
    std::fs::create_dir_all(folder.join("hr")).unwrap();
    for (name, text) in [
        ("launch.md", LAUNCH),
        ("budget.md", BUDGET),
        ("team.md", TEAM),
        ("hr/pay.md", PAY),
    ] {
        std::fs::write(folder.join(name), text).unwrap();
    }
    let e = engine(home);
    create_kb(&e, KB);
    let source = e
        .add_source(
            KB,
            &AddSource {
                location: Location::folder(folder).unwrap(),
                mask: Some("**/*.md".into()),
                interval: None,
                secret: None,
                watch: false,
                readers: Some(
                    ReaderMapping::from_json(
                        r#"{"rules":[{"paths":"hr/**","readers":["group:hr"]},
                                    {"paths":"**","readers":["everyone"]}]}"#,
                    )
                    .unwrap(),
                ),
                allow_net: Vec::new(),
            },
        )
        .unwrap();
    resync(&e, &source.id);
    (e, source.id)
}

fn resync(e: &Engine, source: &str) {
    e.sync_source(source, "test-node:pages", &NoProgress)
        .unwrap();
    drain(e);
}

/// The document id of the synced file `name`.
fn id_of(e: &Engine, name: &str) -> String {
    e.kb_documents(KB, &FileFilter::default())
        .unwrap()
        .into_iter()
        .find(|f| f.file_name == name)
        .unwrap_or_else(|| panic!("no file {name}"))
        .id
}

fn cite(e: &Engine, name: &str, from: u32, to: u32) -> Citation {
    Citation {
        document: id_of(e, name),
        lines: CitedLines::Range(from, to),
    }
}

fn page(slug: &str, body: &str, sources: Vec<Citation>) -> PageWrite {
    PageWrite {
        slug: slug.into(),
        title: format!("About {slug}"),
        page_type: "summary".into(),
        body: body.into(),
        status: PageStatus::Published,
        tags: vec!["release".into()],
        sources,
        base_version: None,
        provenance: serde_json::json!({"user": "ann", "client": "test"})
            .as_object()
            .cloned()
            .unwrap(),
    }
}

fn stale_slugs(e: &Engine) -> Vec<String> {
    let index = e
        .wiki_index(
            KB,
            &WikiIndexRequest {
                limit: 100,
                ..Default::default()
            },
        )
        .unwrap();
    index
        .pages
        .into_iter()
        .filter(|p| p.head.stale)
        .map(|p| p.head.slug)
        .collect()
}

fn reader(e: &Engine, keys: &[&str]) -> Engine {
    e.scoped(Scope {
        access: Access::Read,
        machine_owner: false,
        readers: Some(keys.iter().map(|k| (*k).to_owned()).collect()),
        ..Scope::owner(quarry_core::DEFAULT_SPACE)
    })
}

#[test]
fn a_page_turns_stale_exactly_when_a_passage_it_cites_changes_or_goes() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("docs");
    let (e, source) = synced(&dir.path().join("home"), &folder);
    // Lines 7-8 of launch.md: the date; 3: the intro; budget 3-4; team 3.
    let launch = e
        .write_page(
            KB,
            page(
                "launch",
                "The launch is on 4 May. See [[budget]].",
                vec![cite(&e, "launch.md", 7, 8)],
            ),
        )
        .unwrap();
    assert!(!launch.head.stale, "{launch:?}");
    assert_eq!(
        launch.sources[0].text,
        "The launch is on 4 May, at the harbour office.\nPress is invited for ten o'clock."
    );
    e.write_page(
        KB,
        page(
            "budget",
            "40,000 EUR, approved in March.",
            vec![cite(&e, "budget.md", 3, 4)],
        ),
    )
    .unwrap();
    e.write_page(
        KB,
        page(
            "release",
            "The spring release, paid from the budget.",
            vec![cite(&e, "launch.md", 3, 3), cite(&e, "budget.md", 3, 3)],
        ),
    )
    .unwrap();
    e.write_page(
        KB,
        page("team", "Ann leads.", vec![cite(&e, "team.md", 3, 3)]),
    )
    .unwrap();
    let mut index = page(
        "index",
        "[[launch]] [[budget]] [[release]] [[team]] [[missing]]",
        Vec::new(),
    );
    index.page_type = "index".into();
    e.write_page(KB, index).unwrap();
    assert!(stale_slugs(&e).is_empty());
    let read = e.read_page(KB, "budget").unwrap();
    assert_eq!(read.backlinks, ["index", "launch"]);
    assert_eq!(read.links, Vec::<String>::new());

    // An edit inside the launch date (and text added at the end) turns only "launch" stale.
    std::fs::write(
        folder.join("launch.md"),
        LAUNCH.replace("4 May", "11 May") + "\n## Later\n\nA second release in autumn.\n",
    )
    .unwrap();
    // A paragraph added before the budget moves its lines: still current.
    std::fs::write(
        folder.join("budget.md"),
        BUDGET.replace("# Budget\n\n", "# Budget\n\nFigures are in euros.\n\n"),
    )
    .unwrap();
    std::fs::remove_file(folder.join("team.md")).unwrap();
    resync(&e, &source);
    assert_eq!(stale_slugs(&e), ["launch", "team"]);
    let launch: PageView = e.read_page(KB, "launch").unwrap();
    assert!(launch.head.stale);
    assert_eq!(launch.sources[0].state, "changed");
    assert_eq!(
        launch.sources[0].text,
        "The launch is on 11 May, at the harbour office.\nPress is invited for ten o'clock."
    );
    assert!(
        launch.stale_reasons[0].contains("11 May") && launch.stale_reasons[0].contains("4 May")
    );
    let budget = e.read_page(KB, "budget").unwrap();
    assert_eq!(
        (budget.head.stale, budget.sources[0].state),
        (false, "moved")
    );
    assert_eq!(budget.sources[0].moved_to, Some([5, 6]));
    let team = e.read_page(KB, "team").unwrap();
    assert_eq!((team.head.stale, team.sources[0].state), (true, "deleted"));
    // A search hit on a page says which page and whether it is stale; a document's says
    // nothing of pages.
    drain(&e);
    let hits = keyword_passages(&e, "launch");
    let on_launch = hits
        .iter()
        .find(|h| h.wiki_page.as_ref().is_some_and(|m| m.slug == "launch"))
        .expect("the launch page is found");
    let mark = on_launch.wiki_page.as_ref().unwrap();
    assert_eq!((mark.slug.as_str(), mark.stale), ("launch", true));
    assert!(mark.stale_reasons[0].contains("11 May"), "{mark:?}");
    assert!(
        hits.iter().any(|h| h.page.is_none()),
        "documents are found too"
    );
    let on_budget = keyword_passages(&e, "40,000 EUR approved")
        .into_iter()
        .find(|h| h.wiki_page.is_some())
        .expect("the budget page is found");
    assert!(!on_budget.wiki_page.unwrap().stale);
    // QMD's search and query mark them the same way (and a document's hit carries no mark).
    let mut req = SearchRequest::new("launch harbour");
    req.min_score = 0.0;
    for hits in [e.search(&req).unwrap(), e.query(&req).unwrap().results] {
        let page = hits
            .iter()
            .find(|h| h.file.contains("pages/launch.md"))
            .unwrap_or_else(|| panic!("the launch page is found: {hits:?}"));
        let mark = page.wiki_page.as_ref().expect("marked as a page");
        assert!(
            mark.stale && mark.stale_reasons[0].contains("11 May"),
            "{mark:?}"
        );
        let document = hits
            .iter()
            .find(|h| h.file.ends_with("/launch.md") && !h.file.contains("pages/"))
            .expect("the launch document is found");
        assert_eq!(document.wiki_page, None);
    }
    assert!(
        team.stale_reasons[0].contains("deleted"),
        "{:?}",
        team.stale_reasons
    );

    let lint = e.lint_wiki(KB).unwrap();
    let kinds: Vec<(&str, &str)> = lint.iter().map(|f| (f.kind, f.page.as_str())).collect();
    assert!(
        kinds.contains(&("stale", "launch")) && kinds.contains(&("stale", "team")),
        "{kinds:?}"
    );
    assert!(kinds.contains(&("broken_link", "index")), "{kinds:?}");
    assert!(
        !kinds.iter().any(|(k, p)| *k == "stale" && *p == "budget"),
        "{kinds:?}"
    );
    assert!(!kinds.iter().any(|(k, _)| *k == "orphan"), "{kinds:?}");

    // A rewrite citing the passage as it is now is current again.
    let mut again = page(
        "launch",
        "The launch is on 11 May.",
        vec![cite(&e, "launch.md", 7, 8)],
    );
    again.base_version = Some(launch.head.version.clone());
    let again = e.write_page(KB, again).unwrap();
    assert!(!again.head.stale && again.head.version != launch.head.version);
    assert_eq!(stale_slugs(&e), ["team"]);
    // The page's versions are the entry's history: who wrote each, the old one kept.
    let versions = e
        .store()
        .entry_versions(e.knowledge_base(KB).unwrap().collection_id, "page:launch")
        .unwrap();
    assert_eq!(versions.len(), 2);
}

#[test]
fn writes_refuse_a_stale_base_unknown_sources_and_bad_input_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (e, _) = synced(&dir.path().join("home"), &dir.path().join("docs"));
    let first = e
        .write_page(KB, page("plan", "v1", vec![cite(&e, "launch.md", 7, 7)]))
        .unwrap();
    // The slug exists: the answer names the version to build on.
    match e.write_page(KB, page("plan", "mine", Vec::new())) {
        Err(Error::Conflict(m)) => assert!(m.contains(&first.head.version), "{m}"),
        other => panic!("expected a conflict, got {other:?}"),
    }
    let mut second = page("plan", "v2", vec![cite(&e, "launch.md", 7, 7)]);
    second.base_version = Some(first.head.version.clone());
    let second = e.write_page(KB, second).unwrap();
    // Written on the first version after the second: refused, naming the second.
    let mut late = page("plan", "v2 by someone else", Vec::new());
    late.base_version = Some(first.head.version.clone());
    match e.write_page(KB, late) {
        Err(Error::Conflict(m)) => assert!(m.contains(&second.head.version), "{m}"),
        other => panic!("expected a conflict, got {other:?}"),
    }
    let mut ghost = page("ghost", "x", Vec::new());
    ghost.base_version = Some(first.head.version.clone());
    assert!(matches!(e.write_page(KB, ghost), Err(Error::Conflict(_))));
    let bad_citations = [
        Citation::parse("no-such-document:1-2").unwrap(),
        Citation::parse("#ffffff:3").unwrap(),
        cite(&e, "launch.md", 7, 900),
        cite(&e, "launch.md", 8, 7),
        cite(&e, "launch.md", 2, 2),
    ];
    for (i, c) in bad_citations.into_iter().enumerate() {
        let mut w = page("plan", "bad", vec![c]);
        w.base_version = Some(second.head.version.clone());
        match e.write_page(KB, w) {
            Err(Error::NotFound(m)) if i < 2 => assert!(m.starts_with("source 1: "), "{m}"),
            Err(Error::InvalidInput(m)) if i >= 2 => assert!(m.starts_with("source 1: "), "{m}"),
            other => panic!("citation {i}: expected a refusal, got {other:?}"),
        }
    }
    let mut bad = Vec::new();
    let mut w = page("Not A Slug", "x", Vec::new());
    bad.push(w.clone());
    w.slug = "ok".into();
    w.page_type = "Summary!".into();
    bad.push(w.clone());
    w.page_type = "summary".into();
    w.title = "  ".into();
    bad.push(w);
    for w in bad {
        assert!(matches!(e.write_page(KB, w), Err(Error::InvalidInput(_))));
    }
    assert!(PageStatus::parse("stale").is_err());
    // Nothing of it changed the wiki: one page, at its second version.
    let index = e
        .wiki_index(
            KB,
            &WikiIndexRequest {
                limit: 10,
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(index.total, 1);
    assert_eq!(index.pages[0].head.version, second.head.version);
    assert_eq!(e.read_page(KB, "plan").unwrap().body, "v2");
    // A read-only caller may not write.
    assert!(matches!(
        reader(&e, &["user:bob"]).write_page(KB, page("x", "y", Vec::new())),
        Err(Error::Forbidden(_))
    ));
}

#[test]
fn a_page_is_seen_only_by_those_who_may_read_all_it_cites() {
    let dir = tempfile::tempdir().unwrap();
    let (e, source) = synced(&dir.path().join("home"), &dir.path().join("docs"));
    e.write_page(
        KB,
        page(
            "support-pay",
            "Support zebrapay is paid on the 25th.",
            vec![cite(&e, "hr/pay.md", 3, 3), cite(&e, "team.md", 3, 3)],
        ),
    )
    .unwrap();
    e.write_page(
        KB,
        page(
            "public",
            "Ann leads zebrapay support.",
            vec![cite(&e, "team.md", 3, 3)],
        ),
    )
    .unwrap();
    let bob = reader(&e, &["user:bob"]);
    let hr = reader(&e, &["user:cy", "group:hr"]);
    assert!(matches!(
        bob.read_page(KB, "support-pay"),
        Err(Error::NotFound(_))
    ));
    assert_eq!(hr.read_page(KB, "support-pay").unwrap().sources.len(), 2);
    let slugs = |e: &Engine| -> Vec<String> {
        e.wiki_index(
            KB,
            &WikiIndexRequest {
                limit: 10,
                ..Default::default()
            },
        )
        .unwrap()
        .pages
        .into_iter()
        .map(|p| p.head.slug)
        .collect()
    };
    assert_eq!(slugs(&bob), ["public"]);
    assert_eq!(slugs(&hr), ["public", "support-pay"]);
    // Search: the page stands beside documents, and keeps to its readers.
    drain(&e);
    let found = |e: &Engine| -> Vec<String> {
        keyword_passages(e, "zebrapay")
            .into_iter()
            .map(|h| h.knowledge_filename)
            .collect()
    };
    assert_eq!(found(&bob), ["public.md"]);
    let mut seen = found(&hr);
    seen.sort();
    assert_eq!(seen, ["public.md", "support-pay.md"]);
    // The source narrows team.md to the HR group after the pages were written: "public"
    // (whose own readers were set for everyone) leaves Bob's index and search at once.
    e.set_source_readers(
        &source,
        Some(
            &ReaderMapping::from_json(
                r#"{"rules":[{"paths":"hr/**","readers":["group:hr"]},
                             {"paths":"team.md","readers":["group:hr"]},
                             {"paths":"**","readers":["everyone"]}]}"#,
            )
            .unwrap(),
        ),
    )
    .unwrap();
    resync(&e, &source);
    assert!(slugs(&bob).is_empty());
    assert!(matches!(
        bob.read_page(KB, "public"),
        Err(Error::NotFound(_))
    ));
    assert!(found(&bob).is_empty(), "{:?}", found(&bob));
    assert_eq!(slugs(&hr), ["public", "support-pay"]);
    // Bob cannot cite what he cannot read, and learns nothing of it.
    let writer = e.scoped(Scope {
        readers: Some(vec!["user:bob".to_owned()].into()),
        machine_owner: false,
        ..Scope::owner(quarry_core::DEFAULT_SPACE)
    });
    match writer.write_page(KB, page("leak", "x", vec![cite(&e, "hr/pay.md", 3, 3)])) {
        Err(Error::NotFound(m)) => assert!(!m.contains("pay"), "{m}"),
        other => panic!("expected not found, got {other:?}"),
    }
}

#[test]
fn the_index_pages_through_by_slug_with_its_filters() {
    let dir = tempfile::tempdir().unwrap();
    let (e, _) = synced(&dir.path().join("home"), &dir.path().join("docs"));
    for i in 0..7 {
        let mut w = page(&format!("p{i}"), &format!("Page {i}. More."), Vec::new());
        if i % 2 == 1 {
            w.page_type = "concept".into();
            w.tags = vec!["odd".into()];
        }
        e.write_page(KB, w).unwrap();
    }
    let mut req = WikiIndexRequest {
        limit: 3,
        ..Default::default()
    };
    let mut seen = Vec::new();
    loop {
        let part = e.wiki_index(KB, &req).unwrap();
        assert_eq!(part.total, 7);
        seen.extend(part.pages.iter().map(|p| p.head.slug.clone()));
        match part.next {
            Some(next) => req.after = Some(next),
            None => break,
        }
    }
    assert_eq!(seen, ["p0", "p1", "p2", "p3", "p4", "p5", "p6"]);
    let listed = |req: WikiIndexRequest| e.wiki_index(KB, &req).unwrap();
    let concepts = listed(WikiIndexRequest {
        page_type: Some("concept".into()),
        limit: 10,
        ..Default::default()
    });
    assert_eq!(concepts.total, 3);
    assert_eq!(concepts.pages[0].summary, "Page 1.");
    let tagged = listed(WikiIndexRequest {
        tag: Some("odd".into()),
        limit: 10,
        ..Default::default()
    });
    assert_eq!(tagged.total, 3);
}

#[test]
fn a_pages_history_lists_its_versions_newest_first_to_those_who_may_read_them() {
    let dir = tempfile::tempdir().unwrap();
    let (e, _) = synced(&dir.path().join("home"), &dir.path().join("docs"));
    // Version 1 cites the HR-only pay file; versions 2 and 3 only what everyone reads.
    let first = e
        .write_page(
            KB,
            page(
                "support",
                "Support is paid on the 25th.",
                vec![cite(&e, "hr/pay.md", 3, 3), cite(&e, "team.md", 3, 3)],
            ),
        )
        .unwrap();
    let mut w = page(
        "support",
        "Bob runs support.",
        vec![cite(&e, "team.md", 3, 3)],
    );
    w.base_version = Some(first.head.version.clone());
    let second = e.write_page(KB, w).unwrap();
    let mut w = page(
        "support",
        "Bob runs support.\n\nAnn leads.",
        vec![cite(&e, "team.md", 3, 3)],
    );
    w.base_version = Some(second.head.version.clone());
    w.title = "Support".into();
    w.status = PageStatus::Draft;
    w.provenance = serde_json::json!({"user": "bob", "client": "ui"})
        .as_object()
        .cloned()
        .unwrap();
    let third = e.write_page(KB, w).unwrap();

    let all = e.page_history(KB, "support").unwrap();
    let ids: Vec<&str> = all.iter().map(|v| v.version.as_str()).collect();
    assert_eq!(
        ids,
        [
            &third.head.version,
            &second.head.version,
            &first.head.version
        ]
    );
    assert_eq!(all[0].body, "Bob runs support.\n\nAnn leads.");
    assert_eq!(all[0].title, "Support");
    assert_eq!(all[0].status, PageStatus::Draft);
    assert_eq!(all[0].written_by["user"], "bob");
    assert!(all[0].current && !all[1].current && !all[2].current);
    assert_eq!(all[1].body, "Bob runs support.");
    assert_eq!(all[1].written_by["user"], "ann");
    assert_eq!(all[2].body, "Support is paid on the 25th.");
    assert_eq!(all[2].sources.len(), 2);
    assert_eq!(all[2].sources[1], format!("{}:3-3", id_of(&e, "team.md")));
    assert!(all.windows(2).all(|p| p[0].updated_at >= p[1].updated_at));

    // HR reads every version; Bob, who may not read the pay file, not the one citing it.
    let hr = reader(&e, &["user:cy", "group:hr"]);
    assert_eq!(hr.page_history(KB, "support").unwrap().len(), 3);
    let bob = reader(&e, &["user:bob"]);
    let seen: Vec<String> = bob
        .page_history(KB, "support")
        .unwrap()
        .into_iter()
        .map(|v| v.version)
        .collect();
    assert_eq!(
        seen,
        [third.head.version.clone(), second.head.version.clone()]
    );
    // A page Bob may not read has no history for him, as read_page finds none.
    e.write_page(
        KB,
        page(
            "pay",
            "Paid on the 25th.",
            vec![cite(&e, "hr/pay.md", 3, 3)],
        ),
    )
    .unwrap();
    assert!(matches!(
        bob.page_history(KB, "pay"),
        Err(Error::NotFound(_))
    ));
    assert_eq!(hr.page_history(KB, "pay").unwrap().len(), 1);
    assert!(matches!(
        e.page_history(KB, "nope"),
        Err(Error::NotFound(_))
    ));
    assert!(matches!(
        e.page_history(KB, "Not A Slug"),
        Err(Error::InvalidInput(_))
    ));
}

/// A page's slug for the tldr page `name`.
fn slug_of(name: &str) -> String {
    format!("p-{}", name.trim_end_matches(".md"))
}

/// One labelled kind of source edit: what it does to a tldr page's raw text (`None`: the file
/// is deleted), and whether a page citing the page's second example must turn stale.
struct EditKind {
    name: &'static str,
    stale: bool,
    apply: fn(&str) -> Option<String>,
}

/// The index of the `n`th (0-based) example line (`- …`) of a tldr page.
fn example_line(lines: &[&str], n: usize) -> Option<usize> {
    lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.starts_with("- "))
        .nth(n)
        .map(|(i, _)| i)
}

fn edited(raw: &str, f: impl Fn(&mut Vec<String>, &[&str])) -> Option<String> {
    let lines: Vec<&str> = raw.lines().collect();
    let mut out: Vec<String> = lines.iter().map(|l| (*l).to_owned()).collect();
    f(&mut out, &lines);
    Some(out.join("\n") + "\n")
}

const EDIT_KINDS: [EditKind; 7] = [
    EditKind {
        name: "a word of the cited description",
        stale: true,
        apply: |raw| {
            edited(raw, |out, lines| {
                if let Some(i) = example_line(lines, 1) {
                    out[i] = out[i].replacen("- ", "- Quickly ", 1);
                }
            })
        },
    },
    EditKind {
        name: "the cited command",
        stale: true,
        apply: |raw| {
            edited(raw, |out, lines| {
                if let Some(i) = example_line(lines, 1) {
                    out[i + 2] = out[i + 2].replacen('`', "`sudo ", 1);
                }
            })
        },
    },
    EditKind {
        name: "the cited example removed",
        stale: true,
        apply: |raw| {
            edited(raw, |out, lines| {
                if let Some(i) = example_line(lines, 1) {
                    out.drain(i..i + 4);
                }
            })
        },
    },
    EditKind {
        name: "the document deleted",
        stale: true,
        apply: |_| None,
    },
    EditKind {
        name: "another example changed",
        stale: false,
        apply: |raw| {
            edited(raw, |out, lines| {
                if let Some(i) = example_line(lines, 3) {
                    out[i] = format!("{} (see also the manual)", out[i]);
                }
            })
        },
    },
    EditKind {
        name: "a paragraph inserted above (the passage moves)",
        stale: false,
        apply: |raw| {
            edited(raw, |out, _| {
                out.insert(1, String::new());
                out.insert(2, "> Reviewed by the documentation team.".into());
            })
        },
    },
    EditKind {
        name: "an example appended",
        stale: false,
        apply: |raw| Some(format!("{raw}\n- Show the version:\n\n`tool --version`\n")),
    },
];

/// Stale detection on real documents (issue 68): 30 tldr pages, each cited by a page (its
/// second example), edited in labelled ways a sync brings in — 210 edits in all: 120 of the
/// cited passage or its document, 90 elsewhere (another example, a paragraph above that moves
/// the passage, an example appended). Every edit of a cited passage must be caught (recall
/// 1.0) and at most 5 % of the pages called stale may be wrong (precision ≥ 0.95).
#[test]
fn stale_detection_on_real_pages_catches_every_cited_change_and_little_else() {
    let corpus =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpora/tldr/pages/common");
    // The shared corpora sit beside the clone, in CI as on every development machine.
    let entries = std::fs::read_dir(&corpus).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (the shared corpora, ../shared beside the clone)",
            corpus.display()
        )
    });
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        // Names that are slugs as they are (not `!.md`, `[.md`, …), so each page is one.
        .filter(|n| {
            n.strip_suffix(".md").is_some_and(|stem| {
                stem.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            })
        })
        .collect();
    names.sort();
    let originals: Vec<(String, String)> = names
        .into_iter()
        .filter_map(|n| {
            let raw = std::fs::read_to_string(corpus.join(&n)).ok()?;
            let lines: Vec<&str> = raw.lines().collect();
            // Four examples, each a description, a blank line and a command.
            let fourth = example_line(&lines, 3)?;
            (fourth + 2 < lines.len()).then_some((n, raw))
        })
        .take(30)
        .collect();
    assert_eq!(originals.len(), 30);
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("tldr");
    std::fs::create_dir_all(&folder).unwrap();
    let (e, source) = synced(&dir.path().join("home"), &dir.path().join("docs"));
    for (n, raw) in &originals {
        std::fs::write(folder.join(n), raw).unwrap();
    }
    let tldr = e
        .add_source(
            KB,
            &AddSource {
                location: Location::folder(&folder).unwrap(),
                mask: Some("*.md".into()),
                interval: None,
                secret: None,
                watch: false,
                readers: None,
                allow_net: Vec::new(),
            },
        )
        .unwrap();
    resync(&e, &tldr.id);
    let _ = source;
    let write_pages = |e: &Engine| {
        let versions: std::collections::HashMap<String, String> = e
            .wiki_index(
                KB,
                &WikiIndexRequest {
                    limit: 200,
                    ..Default::default()
                },
            )
            .unwrap()
            .pages
            .into_iter()
            .map(|p| (p.head.slug, p.head.version))
            .collect();
        for (n, _) in &originals {
            let file = e
                .kb_documents(KB, &FileFilter::default())
                .unwrap()
                .into_iter()
                .find(|f| f.file_name == *n)
                .unwrap();
            let body = e.converted_document(&file).unwrap().body;
            let lines: Vec<&str> = body.lines().collect();
            let i = example_line(&lines, 1).unwrap() as u32 + 1;
            let slug = slug_of(n);
            let base = versions.get(&slug).cloned();
            let mut w = page(
                &slug,
                &format!("How to use {n}."),
                vec![Citation {
                    document: file.id.clone(),
                    lines: CitedLines::Range(i, i + 2),
                }],
            );
            w.base_version = base;
            let written = e.write_page(KB, w).unwrap();
            assert!(!written.head.stale, "{written:?}");
        }
    };
    write_pages(&e);
    let (mut tp, mut fp, mut fn_, mut tn) = (0, 0, 0, 0);
    let mut misses = Vec::new();
    // Round r gives document d the kind (d + r) % 7: every kind on every sixth or seventh
    // document, each round; deletions come back as new documents, so pages are written
    // again after each round.
    for round in 0..7 {
        for (d, (n, raw)) in originals.iter().enumerate() {
            let kind = &EDIT_KINDS[(d + round) % EDIT_KINDS.len()];
            match (kind.apply)(raw) {
                Some(text) => std::fs::write(folder.join(n), text).unwrap(),
                None => std::fs::remove_file(folder.join(n)).unwrap(),
            }
        }
        resync(&e, &tldr.id);
        let stale: std::collections::HashSet<String> = e
            .wiki_index(
                KB,
                &WikiIndexRequest {
                    limit: 200,
                    ..Default::default()
                },
            )
            .unwrap()
            .pages
            .into_iter()
            .filter(|p| p.head.stale)
            .map(|p| p.head.slug)
            .collect();
        for (d, (n, _)) in originals.iter().enumerate() {
            let kind = &EDIT_KINDS[(d + round) % EDIT_KINDS.len()];
            let slug = slug_of(n);
            match (kind.stale, stale.contains(&slug)) {
                (true, true) => tp += 1,
                (false, false) => tn += 1,
                (true, false) => {
                    fn_ += 1;
                    misses.push(format!("missed: {n}, {}", kind.name));
                }
                (false, true) => {
                    fp += 1;
                    misses.push(format!("false alarm: {n}, {}", kind.name));
                }
            }
        }
        // Back to the originals, and every page written again on them.
        for (n, raw) in &originals {
            std::fs::write(folder.join(n), raw).unwrap();
        }
        resync(&e, &tldr.id);
        write_pages(&e);
    }
    let (precision, recall) = (
        tp as f64 / (tp + fp).max(1) as f64,
        tp as f64 / (tp + fn_).max(1) as f64,
    );
    eprintln!(
        "stale detection on {} edits: TP {tp}, FP {fp}, FN {fn_}, TN {tn}; precision {precision:.3}, recall {recall:.3}",
        tp + fp + fn_ + tn
    );
    assert_eq!(tp + fp + fn_ + tn, 210);
    assert!(recall == 1.0 && precision >= 0.95, "{misses:#?}");
}

#[test]
fn browsing_lists_finds_greps_and_reads_only_what_the_caller_may_read() {
    let dir = tempfile::tempdir().unwrap();
    let (e, _) = synced(&dir.path().join("home"), &dir.path().join("docs"));
    let first = e
        .write_page(
            KB,
            page(
                "launch",
                "Launch on 4 May.",
                vec![cite(&e, "launch.md", 7, 7)],
            ),
        )
        .unwrap();
    let mut again = page(
        "launch",
        "Launch on 4 May; press at ten.",
        vec![cite(&e, "launch.md", 7, 8)],
    );
    again.base_version = Some(first.head.version.clone());
    e.write_page(KB, again).unwrap();
    e.write_page(
        KB,
        page(
            "pay",
            "Paid on the 25th.",
            vec![cite(&e, "hr/pay.md", 3, 3)],
        ),
    )
    .unwrap();
    drain(&e);
    let bob = reader(&e, &["user:bob"]);
    let hr = reader(&e, &["user:cy", "group:hr"]);
    let paths = |entries: Vec<crate::BrowseEntry>| -> Vec<String> {
        entries.into_iter().map(|x| x.path).collect()
    };

    // ls: the knowledge base, its folders with counts, its documents; hr/ only for hr, and
    // one version of a page (the superseded one is not current).
    let top = e.ls("").unwrap();
    assert!(
        top.iter()
            .any(|x| x.path == "wiki/" && x.kind == "collection"),
        "{top:?}"
    );
    assert_eq!(
        paths(bob.ls("wiki").unwrap()),
        [
            "wiki/pages/",
            "wiki/budget.md",
            "wiki/launch.md",
            "wiki/team.md"
        ]
    );
    let listed = hr.ls("wiki/").unwrap();
    assert_eq!(
        paths(listed.clone()),
        [
            "wiki/hr/",
            "wiki/pages/",
            "wiki/budget.md",
            "wiki/launch.md",
            "wiki/team.md"
        ]
    );
    assert_eq!(listed[0].documents, Some(1));
    assert_eq!(listed[1].documents, Some(2));
    assert_eq!(
        paths(bob.ls("wiki/pages").unwrap()),
        ["wiki/pages/launch.md"]
    );
    let pages = hr.ls("wiki/pages").unwrap();
    assert_eq!(
        paths(pages.clone()),
        ["wiki/pages/launch.md", "wiki/pages/pay.md"]
    );
    assert!(pages.iter().all(|x| x.kind == "page"), "{pages:?}");
    for hidden in ["wiki/hr", "wiki/hr/pay.md", "wiki/pages/pay.md", "nowhere"] {
        assert!(
            matches!(bob.ls(hidden), Err(Error::NotFound(_))),
            "{hidden}"
        );
    }
    assert!(matches!(bob.ls("wiki/../x"), Err(Error::InvalidInput(_))));

    // find: by glob, counted as the caller sees them.
    let found = bob.find("wiki/**/*.md", 0).unwrap();
    assert_eq!(found.total, 4, "{found:?}");
    assert_eq!(hr.find("wiki/**/*.md", 2).unwrap().entries.len(), 2);
    assert_eq!(hr.find("**/pay.md", 0).unwrap().total, 2);
    assert_eq!(bob.find("**/pay.md", 0).unwrap().total, 0);
    assert!(matches!(bob.find("wiki/[", 0), Err(Error::InvalidInput(_))));

    // grep: lines and numbers as `get` counts them, bounded, context, never hidden text.
    let req = |pattern: &str, path: Option<&str>| crate::GrepRequest {
        pattern: pattern.into(),
        path: path.map(str::to_owned),
        ..Default::default()
    };
    let found = bob.grep(&req("25th", None)).unwrap();
    assert!(found.matches.is_empty(), "{found:?}");
    let found = hr.grep(&req("25th", None)).unwrap();
    assert_eq!(
        found
            .matches
            .iter()
            .map(|m| (m.path.as_str(), m.line))
            .collect::<Vec<_>>(),
        [("wiki/hr/pay.md", 3), ("wiki/pages/pay.md", 1)]
    );
    let dated = bob
        .grep(&crate::GrepRequest {
            context: 1,
            ignore_case: true,
            ..req("LAUNCH IS ON", Some("wiki/launch.md"))
        })
        .unwrap();
    assert_eq!(dated.matches.len(), 1);
    assert_eq!(dated.matches[0].line, 7);
    assert_eq!(dated.matches[0].before, [""]);
    assert_eq!(
        dated.matches[0].after,
        ["Press is invited for ten o'clock."]
    );
    let view = bob
        .get(&crate::GetRequest {
            file: "wiki/launch.md".into(),
            from_line: Some(7),
            max_lines: Some(1),
            line_numbers: false,
        })
        .unwrap();
    assert_eq!(view.text, "The launch is on 4 May, at the harbour office.");
    let capped = hr
        .grep(&crate::GrepRequest {
            limit: 2,
            ..req("e", None)
        })
        .unwrap();
    assert!(capped.truncated && capped.matches.len() == 2, "{capped:?}");
    assert!(matches!(
        bob.grep(&req("(", None)),
        Err(Error::InvalidInput(_))
    ));
    assert!(matches!(
        bob.grep(&req("x", Some("wiki/hr"))),
        Err(Error::NotFound(_))
    ));
}

#[test]
fn a_wiki_exports_as_a_tree_that_imports_back_and_as_an_agent_skill() {
    use crate::{WikiExport, WikiFile};
    let dir = tempfile::tempdir().unwrap();
    let (e, _) = synced(&dir.path().join("a"), &dir.path().join("docs"));
    let mut launch = page(
        "launch",
        "# Launch\n\nThe launch is on 4 May. See [[budget]].",
        vec![cite(&e, "launch.md", 7, 8)],
    );
    launch.tags = vec!["dates".into()];
    launch.status = PageStatus::Draft;
    e.write_page(KB, launch).unwrap();
    e.write_page(
        KB,
        page("budget", "40,000 EUR.", vec![cite(&e, "budget.md", 3, 4)]),
    )
    .unwrap();
    let tree = e.export_wiki(KB, WikiExport::Tree).unwrap();
    let paths: Vec<&str> = tree.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        paths,
        ["index.md", "log.md", "pages/budget.md", "pages/launch.md"]
    );
    assert!(
        tree[0].content.contains("(pages/launch.md)"),
        "{}",
        tree[0].content
    );
    assert_eq!(
        tree[1].content.matches("[[").count(),
        2,
        "{}",
        tree[1].content
    );
    let launch_file = &tree[3].content;
    assert!(
        launch_file.starts_with("---\nslug: \"launch\"\n"),
        "{launch_file}"
    );
    assert!(
        launch_file.contains("\"lines\":[7,8],\"name\":\"launch.md\""),
        "{launch_file}"
    );

    // Another home with the same documents (other ids): the pages come back as they were.
    let (b, _) = synced(&dir.path().join("b"), &dir.path().join("docs"));
    let who = serde_json::Map::new();
    let report = b.import_wiki(KB, &tree, false, &who).unwrap();
    assert_eq!(
        (report.written.len(), report.refused.len()),
        (2, 0),
        "{report:?}"
    );
    for slug in ["launch", "budget"] {
        let (was, now) = (
            e.read_page(KB, slug).unwrap(),
            b.read_page(KB, slug).unwrap(),
        );
        assert_eq!(
            (&was.body, &was.head.title, &was.head.tags),
            (&now.body, &now.head.title, &now.head.tags)
        );
        assert_eq!(was.head.status, now.head.status);
        assert_eq!(was.sources[0].lines, now.sources[0].lines);
        assert_ne!(was.sources[0].document, now.sources[0].document);
        assert!(!now.head.stale);
    }
    assert_eq!(
        b.read_page(KB, "launch").unwrap().backlinks,
        Vec::<String>::new()
    );
    assert_eq!(b.read_page(KB, "budget").unwrap().backlinks, ["launch"]);
    // Again: nothing to write. An edited page: one new version.
    let again = b.import_wiki(KB, &tree, false, &who).unwrap();
    assert_eq!(
        (again.written.len(), again.unchanged.len()),
        (0, 2),
        "{again:?}"
    );
    let mut edited = tree.clone();
    edited[2].content = edited[2]
        .content
        .replace("40,000 EUR.", "40,000 EUR, approved.");
    let report = b.import_wiki(KB, &edited, false, &who).unwrap();
    assert_eq!(report.written, ["budget"]);
    assert_eq!(b.page_history(KB, "budget").unwrap().len(), 2);

    // A cited passage that changed since the export is refused (the page would claim a
    // passage that is gone), unless told to cite the lines as they are now; bad files are
    // refused one by one.
    let folder = dir.path().join("docs");
    let (c, source) = synced(&dir.path().join("c"), &folder);
    std::fs::write(folder.join("budget.md"), BUDGET.replace("40,000", "55,000")).unwrap();
    resync(&c, &source);
    let broken = vec![
        WikiFile {
            path: "pages/other-name.md".into(),
            content: tree[2].content.clone(),
        },
        WikiFile {
            path: "pages/x.md".into(),
            content: "no front matter".into(),
        },
    ];
    let report = c
        .import_wiki(KB, &[tree.clone(), broken].concat(), false, &who)
        .unwrap();
    assert_eq!(report.written, ["launch"], "{report:?}");
    let reasons: Vec<&str> = report.refused.iter().map(|r| r.reason.as_str()).collect();
    assert_eq!(reasons.len(), 3, "{reasons:?}");
    assert!(
        reasons[0].contains("changed since") && reasons[0].contains("--recite"),
        "{reasons:?}"
    );
    assert!(reasons[1].contains("pages/budget.md"), "{reasons:?}");
    assert!(reasons[2].contains("front matter"), "{reasons:?}");
    let report = c.import_wiki(KB, &tree, true, &who).unwrap();
    assert_eq!(report.written, ["budget"]);
    assert!(
        c.read_page(KB, "budget").unwrap().sources[0]
            .text
            .contains("55,000")
    );

    // As an Agent Skill: SKILL.md with its name and description, the pages as references.
    let skill = e.export_wiki(KB, WikiExport::Skill).unwrap();
    let paths: Vec<&str> = skill.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        paths,
        ["SKILL.md", "references/budget.md", "references/launch.md"]
    );
    assert!(
        skill[0]
            .content
            .starts_with("---\nname: \"wiki\"\ndescription: \""),
        "{}",
        skill[0].content
    );
    assert!(
        skill[0].content.contains("(references/launch.md)"),
        "{}",
        skill[0].content
    );
    // A reader who may not read a cited document gets no page citing it.
    e.write_page(
        KB,
        page(
            "pay",
            "Paid on the 25th.",
            vec![cite(&e, "hr/pay.md", 3, 3)],
        ),
    )
    .unwrap();
    let bob = reader(&e, &["user:bob"]);
    assert_eq!(bob.export_wiki(KB, WikiExport::Tree).unwrap().len(), 4);
    assert_eq!(e.export_wiki(KB, WikiExport::Tree).unwrap().len(), 5);
}

#[test]
fn instructions_log_and_contradicting_facts() {
    let dir = tempfile::tempdir().unwrap();
    let (e, _) = synced(&dir.path().join("home"), &dir.path().join("docs"));
    let all = || WikiIndexRequest {
        limit: 50,
        ..Default::default()
    };
    assert_eq!(e.wiki_index(KB, &all()).unwrap().instructions, None);
    let mut rules = page(
        crate::INSTRUCTIONS_SLUG,
        "# How this wiki is written\n\nOne page per release; cite the plan.",
        Vec::new(),
    );
    rules.page_type = "instructions".into();
    e.write_page(KB, rules).unwrap();
    let index = e.wiki_index(KB, &all()).unwrap();
    assert!(
        index
            .instructions
            .as_deref()
            .is_some_and(|t| t.contains("One page per release")),
        "{index:?}"
    );

    // Keyed facts: two pages disagreeing on a key are both reported, with what the other
    // says; the same value written differently is no contradiction.
    e.write_page(
        KB,
        page(
            "launch",
            "Launch-Date:: 4 May\nbudget:: 40,000 EUR\nSee [[budget]].",
            vec![cite(&e, "launch.md", 7, 7)],
        ),
    )
    .unwrap();
    e.write_page(
        KB,
        page(
            "budget",
            "- **launch-date**:: 11 May\n- budget::  40,000   eur\n[[launch]]",
            vec![cite(&e, "budget.md", 3, 3)],
        ),
    )
    .unwrap();
    let findings = e.lint_wiki(KB).unwrap();
    let contradictions: Vec<_> = findings
        .iter()
        .filter(|f| f.kind == "contradiction")
        .collect();
    assert_eq!(contradictions.len(), 2, "{findings:?}");
    assert!(
        contradictions
            .iter()
            .any(|f| f.page == "launch" && f.detail.contains("budget says \"11 May\"")),
        "{contradictions:?}"
    );
    // The instructions page needs neither sources nor links.
    assert!(
        !findings.iter().any(|f| f.page == crate::INSTRUCTIONS_SLUG),
        "{findings:?}"
    );

    // The log: appends land in order, each a version; bad entries are refused.
    let who = serde_json::json!({"user": "ann"})
        .as_object()
        .cloned()
        .unwrap();
    e.append_log(KB, "Ingested the spring plan.", &who).unwrap();
    let log = e
        .append_log(KB, "Wrote [[launch]]\nand [[budget]].", &who)
        .unwrap();
    assert_eq!(log.head.page_type, "log");
    let lines: Vec<&str> = log.body.lines().filter(|l| l.starts_with("- ")).collect();
    assert_eq!(lines.len(), 2, "{}", log.body);
    assert!(
        lines[0].ends_with("ann: Ingested the spring plan."),
        "{lines:?}"
    );
    assert!(
        lines[1].ends_with("ann: Wrote [[launch]] and [[budget]]."),
        "{lines:?}"
    );
    assert_eq!(e.page_history(KB, crate::LOG_SLUG).unwrap().len(), 2);
    assert!(matches!(
        e.append_log(KB, "  ", &who),
        Err(Error::InvalidInput(_))
    ));
    let long = "x".repeat(crate::MAX_LOG_ENTRY_CHARS + 1);
    assert!(matches!(
        e.append_log(KB, &long, &who),
        Err(Error::InvalidInput(_))
    ));
    assert!(
        !e.lint_wiki(KB)
            .unwrap()
            .iter()
            .any(|f| f.page == crate::LOG_SLUG),
        "the log needs no sources or links"
    );
}
