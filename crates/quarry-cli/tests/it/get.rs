//! `quarry get`, `multi-get` and `status`, end to end.

use std::collections::BTreeSet;

use crate::common::{Quarry, now_ms, parse_iso8601_millis, s, write_files};
use serde_json::Value;

const SIX_LINES: &str = "# Meeting January\n\nline three\nline four\nline five\nline six\n";

/// Collection `notes` with a handful of documents.
fn notes() -> (Quarry, std::path::PathBuf) {
    let q = Quarry::new();
    let root = q.corpus(
        "notes",
        &[
            ("2025-01.md", SIX_LINES),
            ("2025-02.md", "# Meeting February\n\nalpha\nbeta\n"),
            ("2024-12.md", "# Meeting December\n\nold\n"),
            ("meetings/weekly-sync.md", "# Weekly sync\n\nagenda\n"),
            ("ideas.md", "# Ideas\n\nsome ideas\n"),
        ],
    );
    q.add(&root, "notes");
    (q, root)
}

#[test]
fn get_by_path_docid_suffix_and_absolute_path() {
    let (q, root) = notes();
    let expected = SIX_LINES;
    assert_eq!(q.ok(&["get", "notes/2025-01.md"]), expected);
    let docid = q.json(&["get", "notes/2025-01.md"])["docid"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(q.ok(&["get", &docid]), expected);
    // Unique suffixes.
    assert_eq!(q.ok(&["get", "2025-01.md"]), expected);
    assert_eq!(
        q.ok(&["get", "weekly-sync.md"]),
        "# Weekly sync\n\nagenda\n"
    );
    assert_eq!(
        q.ok(&["get", "meetings/weekly-sync.md"]),
        "# Weekly sync\n\nagenda\n"
    );
    assert_eq!(q.ok(&["get", "./notes/2025-01.md"]), expected);
    // Absolute path of the file on disk.
    assert_eq!(q.ok(&["get", s(&root.join("2025-01.md"))]), expected);
    assert_eq!(
        q.ok(&["get", s(&root.join("meetings/weekly-sync.md"))]),
        "# Weekly sync\n\nagenda\n"
    );
    // qmd:// URI of a plain name.
    assert_eq!(q.ok(&["get", "qmd://notes/2025-01.md"]), expected);
}

#[test]
fn ambiguous_suffix_lists_the_candidates() {
    let q = Quarry::new();
    let a = q.corpus("a", &[("readme.md", "# A readme\n")]);
    let b = q.corpus("b", &[("readme.md", "# B readme\n")]);
    q.add(&a, "a");
    q.add(&b, "b");
    let err = q.err(&["get", "readme.md"]);
    assert!(err.contains("'readme.md' matches 2 documents"), "{err}");
    assert!(
        err.contains("  - a/readme.md") && err.contains("  - b/readme.md"),
        "{err}"
    );
    assert_eq!(q.ok(&["get", "b/readme.md"]), "# B readme\n");
}

#[test]
fn line_ranges() {
    let (q, _) = notes();
    // file:LINE starts at that line.
    assert_eq!(
        q.ok(&["get", "notes/2025-01.md:3"]),
        "line three\nline four\nline five\nline six\n"
    );
    assert_eq!(
        q.ok(&["get", "notes/2025-01.md", "--from", "4"]),
        "line four\nline five\nline six\n"
    );
    assert_eq!(
        q.ok(&["get", "notes/2025-01.md", "--from", "3", "-l", "2"]),
        "line three\nline four\n"
    );
    assert_eq!(
        q.ok(&["get", "notes/2025-01.md", "-l", "1"]),
        "# Meeting January\n"
    );
    assert_eq!(q.ok(&["get", "notes/2025-01.md:6"]), "line six\n");
    // `file:LINE` takes precedence over --from.
    assert_eq!(
        q.ok(&["get", "notes/2025-01.md:5", "--from", "2"]),
        "line five\nline six\n"
    );
    // -l larger than what is left is fine.
    assert_eq!(
        q.ok(&["get", "notes/2025-01.md:5", "-l", "100"]),
        "line five\nline six\n"
    );
    // Line numbers start at --from.
    assert_eq!(
        q.ok(&[
            "get",
            "notes/2025-01.md",
            "--from",
            "3",
            "-l",
            "2",
            "--line-numbers"
        ]),
        "3: line three\n4: line four\n"
    );
    assert_eq!(
        q.ok(&["get", "notes/2025-01.md", "--line-numbers"]),
        "1: # Meeting January\n2: \n3: line three\n4: line four\n5: line five\n6: line six\n"
    );
    assert_eq!(
        q.ok(&["get", "notes/2025-01.md:6", "--line-numbers"]),
        "6: line six\n"
    );
    let v = q.json(&["get", "notes/2025-01.md:3", "-l", "2"]);
    assert_eq!(v["from_line"], 3);
    assert_eq!(v["total_lines"], 6);
    assert_eq!(v["text"], "line three\nline four");
}

#[test]
fn bad_line_ranges_are_refused() {
    let (q, _) = notes();
    let before = q.state();
    for (args, expect) in [
        (
            vec!["get", "notes/2025-01.md", "--from", "7"],
            "line 7 is past the end of notes/2025-01.md (6 lines)",
        ),
        (
            vec!["get", "notes/2025-01.md:99"],
            "line 99 is past the end of notes/2025-01.md (6 lines)",
        ),
        (
            vec!["get", "notes/2025-01.md", "--from", "0"],
            "line numbers start at 1",
        ),
        (
            vec!["get", "notes/2025-01.md", "-l", "0"],
            "max lines must be at least 1",
        ),
        (vec!["get", ""], "file must not be empty"),
    ] {
        let err = q.err(&args);
        assert!(err.contains(expect), "{args:?}: {err}");
    }
    assert_eq!(q.state(), before);
}

#[test]
fn context_header_and_json_view() {
    let q = Quarry::new();
    let root = q.corpus(
        "src",
        &[
            (
                "my notes/File with spaces.md",
                "# Spaced\n\nbody one\nbody two\n",
            ),
            ("plain.md", "plain body\n"),
        ],
    );
    q.add(&root, "docs");
    q.ok(&["context", "add", "docs/my notes", "Personal notes"]);
    assert_eq!(
        q.ok(&["get", "docs/my notes/File with spaces.md"]),
        "<!-- Context: Personal notes -->\n\n# Spaced\n\nbody one\nbody two\n"
    );
    assert_eq!(
        q.ok(&[
            "get",
            "docs/my notes/File with spaces.md:3",
            "--line-numbers"
        ]),
        "<!-- Context: Personal notes -->\n\n3: body one\n4: body two\n"
    );
    assert_eq!(
        q.ok(&["get", "docs/plain.md"]),
        "plain body\n",
        "no context, no header"
    );

    let v = q.json(&["get", "docs/my notes/File with spaces.md"]);
    let keys: BTreeSet<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        BTreeSet::from([
            "uri",
            "name",
            "title",
            "docid",
            "mimeType",
            "text",
            "context",
            "from_line",
            "total_lines"
        ])
    );
    assert_eq!(v["uri"], "qmd://docs/my%20notes/File%20with%20spaces.md");
    assert_eq!(v["name"], "docs/my notes/File with spaces.md");
    assert_eq!(v["title"], "Spaced");
    assert_eq!(v["mimeType"], "text/markdown");
    assert_eq!(v["context"], "Personal notes");
    assert_eq!(
        v["text"],
        "<!-- Context: Personal notes -->\n\n# Spaced\n\nbody one\nbody two"
    );
    let plain = q.json(&["get", "docs/plain.md"]);
    assert_eq!(plain["title"], "plain", "title falls back to the file name");
    assert!(plain["context"].is_null());

    // Every segment is percent-encoded like encodeURIComponent, separators kept.
    let q2 = Quarry::new();
    let root2 = q2.corpus("zh", &[("会议/a+b (1).md", "# 会议\n\n内容\n")]);
    q2.add(&root2, "笔记");
    let v = q2.json(&["get", "笔记/会议/a+b (1).md"]);
    assert_eq!(
        v["uri"],
        "qmd://%E7%AC%94%E8%AE%B0/%E4%BC%9A%E8%AE%AE/a%2Bb%20(1).md"
    );
    assert_eq!(v["name"], "笔记/会议/a+b (1).md");
}

#[test]
fn get_accepts_the_uri_it_returns() {
    let q = Quarry::new();
    let root = q.corpus("src", &[("my notes/File with spaces.md", "# Spaced\n")]);
    q.add(&root, "docs");
    let uri = q.json(&["get", "docs/my notes/File with spaces.md"])["uri"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(uri, "qmd://docs/my%20notes/File%20with%20spaces.md");
    assert_eq!(q.ok(&["get", &uri]), "# Spaced\n");
}

#[test]
fn not_found_suggests_the_three_closest_paths() {
    let (q, _) = notes();
    let before = q.state();
    let out = q.run(&["get", "notes/2025-O1.md"]);
    crate::common::assert_failure(&["get"], &out);
    assert_eq!(out.status.code(), Some(1));
    let err = crate::common::stderr(&out);
    let mut lines = err.lines();
    assert_eq!(
        lines.next(),
        Some("error: Document not found: notes/2025-O1.md")
    );
    assert_eq!(lines.next(), Some(""));
    assert_eq!(lines.next(), Some("Did you mean one of these?"));
    let suggestions: Vec<&str> = lines.collect();
    assert_eq!(suggestions.len(), 3, "{err}");
    for l in &suggestions {
        assert!(l.starts_with("  - notes/"), "{l:?}");
    }
    assert_eq!(
        suggestions[0], "  - notes/2025-01.md",
        "closest first: {err}"
    );
    let names: BTreeSet<&str> = suggestions.iter().map(|l| &l[4..]).collect();
    assert_eq!(names.len(), 3, "distinct suggestions: {err}");
    assert!(
        names.contains("notes/2025-02.md") && names.contains("notes/2024-12.md"),
        "{err}"
    );

    let err = q.err(&["get", "weekly-synk.md"]);
    assert!(
        err.starts_with("error: Document not found: weekly-synk.md\n"),
        "{err}"
    );
    assert!(
        err.contains("Did you mean one of these?\n  - notes/meetings/weekly-sync.md\n"),
        "{err}"
    );
    assert_eq!(q.state(), before);
}

#[test]
fn unknown_docid_is_not_found() {
    let (q, _) = notes();
    for id in ["#000000", "#ffffff", "#zzzzzz", "#"] {
        let err = q.err(&["get", id]);
        assert!(
            err.contains(&format!("Document not found: {id}")),
            "{id}: {err}"
        );
    }
}

#[test]
fn path_traversal_is_refused_and_leaks_nothing() {
    let (q, _) = notes();
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let first_line = passwd.lines().next().unwrap_or("root:x:0:0").to_owned();
    let before = q.state();
    for target in [
        "../../etc/passwd",
        "/etc/passwd",
        "notes/../../etc/passwd",
        "notes/../../../../../../etc/passwd",
        "qmd://../../etc/passwd",
        "qmd:///etc/passwd",
        "notes/..%2F..%2Fetc/passwd",
        "notes/./../notes/2025-01.md",
        "..\\..\\etc\\passwd",
        "/etc/passwd:1",
    ] {
        let out = q.run(&["get", target]);
        crate::common::assert_failure(&["get", target], &out);
        let all = format!(
            "{}{}",
            crate::common::stdout(&out),
            crate::common::stderr(&out)
        );
        assert!(
            !all.contains("root:"),
            "{target}: leaked /etc/passwd:\n{all}"
        );
        if !first_line.is_empty() {
            assert!(
                !all.contains(&first_line),
                "{target}: leaked /etc/passwd:\n{all}"
            );
        }
        let err = crate::common::stderr(&out);
        assert!(
            err.contains("must not contain '..'")
                || err.contains("must be a collection/relative/path")
                || err.contains("Document not found"),
            "{target}: unclear error: {err}"
        );
    }
    // The three canonical ones give a specific message.
    assert!(
        q.err(&["get", "../../etc/passwd"])
            .contains("must not contain '..'")
    );
    assert!(
        q.err(&["get", "notes/../../etc/passwd"])
            .contains("must not contain '..'")
    );
    assert!(
        q.err(&["get", "/etc/passwd"])
            .contains("outside every collection")
    );
    assert_eq!(q.state(), before);
}

#[test]
fn multi_get_glob_and_comma_list() {
    let (q, _) = notes();
    let out = q.ok(&["multi-get", "notes/2025-*.md"]);
    let j1 = q.json(&["get", "notes/2025-01.md"]);
    let j2 = q.json(&["get", "notes/2025-02.md"]);
    assert_eq!(
        out,
        format!(
            "=== notes/2025-01.md ({}) ===\n# Meeting January\n\nline three\nline four\nline five\nline six\n\n\
             === notes/2025-02.md ({}) ===\n# Meeting February\n\nalpha\nbeta\n\n",
            j1["docid"].as_str().unwrap(),
            j2["docid"].as_str().unwrap()
        )
    );
    let v = q.json(&["multi-get", "notes/2025-*.md"]);
    assert_eq!(v["errors"], Value::Array(vec![]));
    let items = v["items"].as_array().unwrap();
    let names: Vec<&str> = items.iter().map(|i| i["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["notes/2025-01.md", "notes/2025-02.md"]);
    for i in items {
        assert_eq!(i["type"], "document");
        assert_eq!(i["mimeType"], "text/markdown");
    }
    // `*` does not cross folders; `**` does.
    let v = q.json(&["multi-get", "notes/*.md"]);
    assert_eq!(v["items"].as_array().unwrap().len(), 4);
    let v = q.json(&["multi-get", "notes/**/*.md"]);
    assert_eq!(v["items"].as_array().unwrap().len(), 5);

    // Comma list with an unknown name: a warning, the others returned.
    let (out, err) = q.ok_both(&["multi-get", "notes/ideas.md, nope.md ,weekly-sync.md"]);
    assert!(err.contains("warning: File not found: nope.md"), "{err}");
    assert!(out.contains("=== notes/ideas.md ("), "{out}");
    assert!(out.contains("=== notes/meetings/weekly-sync.md ("), "{out}");
    assert!(!out.contains("nope"), "{out}");
    let v = q.json(&["multi-get", "notes/ideas.md,nope.md"]);
    assert_eq!(v["errors"], serde_json::json!(["File not found: nope.md"]));
    assert_eq!(v["items"].as_array().unwrap().len(), 1);
    // Docids in a comma list.
    let docid = j1["docid"].as_str().unwrap();
    let v = q.json(&["multi-get", &format!("{docid},notes/ideas.md")]);
    let names: Vec<&str> = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["notes/2025-01.md", "notes/ideas.md"]);
}

#[test]
fn multi_get_glob_relative_to_a_collection() {
    // The seed's own example, `journals/2025-05*.md`, names a folder inside a collection.
    let q = Quarry::new();
    let root = q.corpus(
        "logseq",
        &[
            ("journals/2025-05-01.md", "# May first\n\nmay\n"),
            ("journals/2025-05-02.md", "# May second\n\nmay\n"),
            ("journals/2025-06-01.md", "# June\n\njune\n"),
            ("pages/2025-05-03.md", "# Not a journal\n\npage\n"),
        ],
    );
    q.add(&root, "logseq");
    let names = |v: &Value| -> Vec<String> {
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let want = [
        "logseq/journals/2025-05-01.md",
        "logseq/journals/2025-05-02.md",
    ];
    assert_eq!(names(&q.json(&["multi-get", "journals/2025-05*.md"])), want);
    // The display-path form still works, and both forms agree.
    assert_eq!(
        names(&q.json(&["multi-get", "logseq/journals/2025-05*.md"])),
        want
    );
    // `*` still does not cross folders: `2025-05*.md` matches no top-level file here.
    let err = q.err(&["multi-get", "2025-05*.md"]);
    assert!(
        err.contains("No files matched pattern: 2025-05*.md"),
        "{err}"
    );
    // A relative glob matches in every collection that has such a path.
    let other = q.corpus(
        "work",
        &[("journals/2025-05-09.md", "# Work journal\n\nwork\n")],
    );
    q.add(&other, "work");
    assert_eq!(
        names(&q.json(&["multi-get", "journals/2025-05*.md"])),
        [
            "logseq/journals/2025-05-01.md",
            "logseq/journals/2025-05-02.md",
            "work/journals/2025-05-09.md"
        ]
    );
    // Bad relative globs are still refused.
    for (pattern, expect) in [
        ("journals/../*.md", "must not contain '..'"),
        ("/journals/*.md", "must be a collection/relative/path"),
        ("journals/[", "invalid glob pattern"),
        ("journals/2030-*.md", "No files matched pattern"),
    ] {
        let err = q.err(&["multi-get", pattern]);
        assert!(err.contains(expect), "{pattern:?}: {err}");
    }
}

#[test]
fn multi_get_skips_large_files_with_the_seed_notice() {
    let (q, root) = notes();
    let big = format!("# Big\n{}", "x".repeat(15 * 1024 - "# Big\n".len()));
    assert_eq!(big.len(), 15 * 1024);
    write_files(&root, &[("big.md", &big)]);
    q.ok(&["update"]);
    let out = q.ok(&["multi-get", "notes/big.md,notes/ideas.md"]);
    assert!(
        out.contains(
            "[SKIPPED: notes/big.md - File too large (15KB). Use 'quarry get' with file=\"notes/big.md\" to retrieve.]"
        ),
        "{out}"
    );
    assert!(out.contains("=== notes/ideas.md ("), "{out}");
    assert!(!out.contains("xxxxxxxxxx"), "{out}");
    let v = q.json(&["multi-get", "notes/big.md"]);
    let item = &v["items"][0];
    assert_eq!(item["type"], "skipped");
    assert_eq!(item["file"], "notes/big.md");
    assert_eq!(item["bytes"], 15 * 1024);
    // A larger --max-bytes includes it; `get` always works.
    let v = q.json(&["multi-get", "notes/big.md", "--max-bytes", "20000"]);
    assert_eq!(v["items"][0]["type"], "document");
    assert_eq!(q.json(&["get", "notes/big.md"])["text"], big);
    // A smaller one skips the small files too.
    let v = q.json(&["multi-get", "notes/2025-*.md", "--max-bytes", "10"]);
    assert!(
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["type"] == "skipped")
    );
}

#[test]
fn multi_get_truncates_with_a_marker() {
    let (q, _) = notes();
    let v = q.json(&["multi-get", "notes/2025-*.md", "-l", "2"]);
    let items = v["items"].as_array().unwrap();
    assert_eq!(
        items[0]["text"],
        "# Meeting January\n\n\n[... truncated 4 more lines]"
    );
    assert_eq!(
        items[1]["text"],
        "# Meeting February\n\n\n[... truncated 2 more lines]"
    );
    // Exactly at the limit: no marker.
    let v = q.json(&["multi-get", "notes/2025-02.md,notes/2024-12.md", "-l", "3"]);
    let items = v["items"].as_array().unwrap();
    assert_eq!(
        items[0]["text"],
        "# Meeting February\n\nalpha\n\n[... truncated 1 more lines]"
    );
    assert_eq!(items[1]["text"], "# Meeting December\n\nold");
    // With line numbers.
    let v = q.json(&[
        "multi-get",
        "notes/2025-01.md,notes/ideas.md",
        "-l",
        "1",
        "--line-numbers",
    ]);
    assert_eq!(
        v["items"][0]["text"],
        "1: # Meeting January\n\n[... truncated 5 more lines]"
    );
}

#[test]
fn multi_get_bad_patterns_are_refused() {
    let (q, _) = notes();
    let before = q.state();
    for (pattern, expect) in [
        ("zzz/*.md", "No files matched pattern: zzz/*.md"),
        (
            "notes/2030-*.md",
            "No files matched pattern: notes/2030-*.md",
        ),
        ("../*.md", "must not contain '..'"),
        ("notes/../../etc/*", "must not contain '..'"),
        ("/etc/*", "must be a collection/relative/path"),
        ("notes/[", "invalid glob pattern"),
        ("nope1.md,nope2.md", "No files matched pattern"),
        ("", "pattern must not be empty"),
    ] {
        let err = q.err(&["multi-get", pattern]);
        assert!(err.contains(expect), "{pattern:?}: {err}");
        assert!(!err.contains("root:"), "{err}");
    }
    assert_eq!(q.state(), before);
}

#[test]
fn status_human_and_json() {
    let q = Quarry::new();
    let t0 = now_ms();
    let root = q.corpus(
        "notes",
        &[("a.md", "# A\n"), ("b.md", "# B\n"), ("c/d.md", "# D\n")],
    );
    q.add(&root, "notes");
    let empty = q.dir("empty");
    q.json(&["collection", "add", s(&empty), "--allow-empty"]);
    let t1 = now_ms();

    let v = q.json(&["status"]);
    assert_eq!(v["total_documents"], 3);
    assert_eq!(v["needs_embedding"], 3);
    assert_eq!(v["has_vector_index"], false);
    let cs = v["collections"].as_array().unwrap();
    assert_eq!(cs.len(), 2);
    assert_eq!(cs[0]["name"], "empty");
    assert_eq!(cs[0]["documents"], 0);
    assert_eq!(cs[1]["name"], "notes");
    assert_eq!(cs[1]["path"], s(&root));
    assert_eq!(cs[1]["pattern"], "**/*.md");
    assert_eq!(cs[1]["documents"], 3);
    for c in cs {
        let ts = c["last_updated"].as_str().unwrap();
        let ms = parse_iso8601_millis(ts)
            .unwrap_or_else(|| panic!("last_updated {ts:?} is not like 2025-06-18T12:34:56.789Z"));
        assert!(
            t0 - 1000 <= ms && ms <= t1 + 1000,
            "{ts} not between {t0} and {t1}"
        );
    }

    let human = q.ok(&["status"]);
    let expected_head = format!(
        "Quarry Index Status:\n  Total documents: 3\n  Needs embedding: 3\n  Vector index: no\n  Collections: 2\n    - {} (0 docs)\n    - {} (3 docs)\n  Data: {}\n",
        s(&empty.canonicalize().unwrap()),
        s(&root),
        s(&q.home().join("index"))
    );
    assert!(human.starts_with(&expected_head), "{human}");
    assert!(
        human.contains(&format!(
            "  notes: {} [**/*.md], last updated {}\n",
            s(&root),
            cs[1]["last_updated"].as_str().unwrap()
        )),
        "{human}"
    );

    // last_updated moves forward on update.
    std::thread::sleep(std::time::Duration::from_millis(20));
    q.ok(&["update", "notes"]);
    let v2 = q.json(&["status"]);
    let before = parse_iso8601_millis(cs[1]["last_updated"].as_str().unwrap()).unwrap();
    let after =
        parse_iso8601_millis(v2["collections"][1]["last_updated"].as_str().unwrap()).unwrap();
    assert!(after > before, "{before} -> {after}");
    assert_eq!(
        v2["collections"][0]["last_updated"], cs[0]["last_updated"],
        "not updated"
    );
}

#[test]
fn iso8601_parser_self_check() {
    assert_eq!(parse_iso8601_millis("1970-01-01T00:00:00.000Z"), Some(0));
    assert_eq!(
        parse_iso8601_millis("2025-06-18T12:34:56.789Z"),
        Some(1_750_250_096_789)
    );
    assert_eq!(
        parse_iso8601_millis("2000-02-29T00:00:00.000Z"),
        Some(951_782_400_000)
    );
    assert_eq!(parse_iso8601_millis("2025-06-18 12:34:56.789Z"), None);
    assert_eq!(parse_iso8601_millis("2025-06-18T12:34:56Z"), None);
}
