//! `quarry search` and `quarry context`, end to end.

use std::collections::BTreeSet;

use crate::common::{Quarry, has_line_prefix, is_docid, s};
use serde_json::Value;

/// A small English corpus with one clearly right answer per question.
fn docs() -> Quarry {
    let q = Quarry::new();
    let root = q.corpus(
        "docs",
        &[
            (
                "archives/tar.md",
                "# Extracting archives with tar\n\n\
                 Use tar to extract files from an archive.\n\
                 To extract a gzip archive: `tar xzf file.tar.gz`.\n\
                 To list an archive's files: `tar tf file.tar`.\n",
            ),
            (
                "shell/files.md",
                "# Copying files\n\nUse cp to copy files and mv to move them.\n",
            ),
            (
                "cooking/bread.md",
                "# Bread\n\nThe quick brown fox jumps over the lazy dog.\nBake brown bread at 220C.\n",
            ),
            (
                "animals/fox.md",
                "# Fox facts\n\nA fox is brown.\nThe dog is quick and lazy.\n",
            ),
            (
                "git/undo.md",
                "# Undo in git\n\nUse git revert to undo a commit.\nUse git reset to move HEAD.\n",
            ),
            (
                "zip.md",
                "# Zip\n\nzip creates compressed archives; unzip opens them.\n",
            ),
        ],
    );
    q.add(&root, "docs");
    q
}

fn files(hits: &[Value]) -> Vec<&str> {
    hits.iter().map(|h| h["file"].as_str().unwrap()).collect()
}

#[test]
fn json_output_has_the_seed_fields() {
    let q = docs();
    let hits = q.search(&["archive"]);
    assert!(!hits.is_empty());
    assert_eq!(hits[0]["file"], "docs/archives/tar.md");
    for h in &hits {
        let obj = h.as_object().unwrap();
        let keys: BTreeSet<&str> = obj.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            BTreeSet::from(["docid", "file", "title", "score", "context", "snippet"]),
            "{h}"
        );
        assert!(is_docid(h["docid"].as_str().unwrap()), "{h}");
        let score = h["score"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&score), "{score}");
        assert!(
            ((score * 100.0).round() - score * 100.0).abs() < 1e-9,
            "score has more than 2 decimals: {score}"
        );
        assert!(h["context"].is_null());
        assert!(h["title"].is_string());
        let snippet = h["snippet"].as_str().unwrap();
        assert!(!snippet.is_empty());
        for line in snippet.lines() {
            assert!(
                has_line_prefix(line).is_some(),
                "snippet line without `N: `: {line:?}"
            );
        }
    }
    // Scores are sorted, best first.
    let scores: Vec<f64> = hits.iter().map(|h| h["score"].as_f64().unwrap()).collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
    // The snippet starts at the best-matching line, numbered as in the file.
    let h = &q.search(&["gzip"])[0];
    assert_eq!(h["title"], "Extracting archives with tar");
    assert!(
        h["snippet"]
            .as_str()
            .unwrap()
            .starts_with("4: To extract a gzip archive: `tar xzf file.tar.gz`."),
        "{h}"
    );
}

#[test]
fn human_output_layout() {
    let q = docs();
    let hits = q.search(&["gzip"]);
    let h = &hits[0];
    let out = q.ok(&["search", "gzip"]);
    let pct = (h["score"].as_f64().unwrap() * 100.0).round();
    let first = format!(
        "{} {}% docs/archives/tar.md - Extracting archives with tar",
        h["docid"].as_str().unwrap(),
        pct
    );
    let mut lines = out.lines();
    assert_eq!(lines.next(), Some(first.as_str()), "{out}");
    let snippet_lines: Vec<&str> = lines.take_while(|l| !l.is_empty()).collect();
    assert!(!snippet_lines.is_empty(), "{out}");
    for l in &snippet_lines {
        let l = l
            .strip_prefix("  ")
            .unwrap_or_else(|| panic!("not indented: {l:?}"));
        assert!(has_line_prefix(l).is_some(), "{l:?}");
    }
    assert!(
        snippet_lines[0].starts_with("  4: To extract a gzip archive"),
        "{out}"
    );
    assert!(!out.contains("Context:"), "no context configured: {out}");
}

#[test]
fn files_output_format() {
    let q = docs();
    let hits = q.search(&["archive"]);
    let out = q.ok(&["search", "--files", "archive"]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), hits.len(), "{out}");
    for (line, h) in lines.iter().zip(&hits) {
        let parts: Vec<&str> = line.splitn(4, ',').collect();
        assert_eq!(parts.len(), 4, "{line}");
        assert_eq!(parts[0], h["docid"].as_str().unwrap());
        assert_eq!(
            parts[1].parse::<f64>().unwrap(),
            h["score"].as_f64().unwrap()
        );
        assert_eq!(parts[2], h["file"].as_str().unwrap());
        assert_eq!(parts[3], "", "no context: {line}");
    }
    q.ok(&["context", "add", "docs/archives", "Archive how-tos"]);
    let out = q.ok(&["search", "--files", "gzip"]);
    let first = out.lines().next().unwrap();
    assert!(
        first.ends_with(",docs/archives/tar.md,Archive how-tos"),
        "{first}"
    );
}

#[test]
fn limit_min_score_and_collection_filter() {
    let q = docs();
    let all = q.search(&["archive files brown git"]);
    assert!(all.len() >= 4, "{all:?}");
    assert_eq!(q.search(&["archive files brown git", "-n", "1"]).len(), 1);
    assert_eq!(
        files(&q.search(&["archive files brown git", "-n", "2"])),
        files(&all)[..2]
    );

    // --min-score drops exactly the hits below it.
    let scores: Vec<f64> = all.iter().map(|h| h["score"].as_f64().unwrap()).collect();
    let top = scores[0];
    let lowest = *scores.last().unwrap();
    assert!(top > lowest, "{scores:?}");
    let filtered = q.search(&["archive files brown git", "--min-score", &top.to_string()]);
    assert!(!filtered.is_empty());
    assert!(filtered.len() < all.len());
    for h in &filtered {
        assert!(h["score"].as_f64().unwrap() >= top);
    }
    assert!(q.search(&["archive", "--min-score", "1"]).is_empty());
    assert_eq!(
        q.ok(&["search", "archive", "--min-score", "1"]),
        "No results found for \"archive\"\n"
    );

    // -c restricts to one collection.
    let other = q.corpus(
        "other",
        &[("o.md", "# Other archive\n\narchive of other things\n")],
    );
    q.add(&other, "other");
    let both = q.search_files(&["archive", "-n", "50"]);
    assert!(both.iter().any(|f| f.starts_with("other/")));
    assert!(both.iter().any(|f| f.starts_with("docs/")));
    assert_eq!(q.search_files(&["archive", "-c", "other"]), ["other/o.md"]);
    assert!(
        q.search_files(&["archive", "-c", "docs"])
            .iter()
            .all(|f| f.starts_with("docs/"))
    );
    let err = q.err(&["search", "archive", "-c", "nope"]);
    assert!(err.contains("collection 'nope' not found"), "{err}");
}

#[test]
fn case_and_stemming_are_normalised() {
    let q = docs();
    assert_eq!(q.search_files(&["GZIP"]), ["docs/archives/tar.md"]);
    assert_eq!(q.search_files(&["reverting"])[0], "docs/git/undo.md");
    assert_eq!(q.search_files(&["Baking"])[0], "docs/cooking/bread.md");
    assert_eq!(q.ok(&["search", "???"]), "No results found for \"???\"\n");
}

#[test]
fn natural_language_question_uses_or_semantics() {
    let q = docs();
    let hits = q.search(&["how do I extract files from an archive"]);
    assert_eq!(hits[0]["file"], "docs/archives/tar.md", "{hits:?}");
    // Unquoted words given as separate arguments are one query.
    let hits = q.search(&["how", "do", "I", "undo", "a", "commit"]);
    assert_eq!(hits[0]["file"], "docs/git/undo.md", "{hits:?}");
    // A question whose words are not all in any document still finds the best one.
    let hits = q.search(&["how can I undo my last commit quickly in mercurial"]);
    assert_eq!(hits[0]["file"], "docs/git/undo.md", "{hits:?}");
}

#[test]
fn phrase_required_and_excluded_terms() {
    let q = docs();
    // Both fox documents have the words; only one has the phrase.
    let mut both = q.search_files(&["quick brown fox"]);
    both.sort();
    assert_eq!(both, ["docs/animals/fox.md", "docs/cooking/bread.md"]);
    assert_eq!(
        q.search_files(&["\"quick brown fox\""]),
        ["docs/cooking/bread.md"]
    );
    assert!(q.search_files(&["\"brown quick fox\""]).is_empty());
    // Excluded: `NOT word` and `-"word"` (a bare `-word` is a flag, see below).
    assert_eq!(q.search_files(&["fox NOT bread"]), ["docs/animals/fox.md"]);
    assert_eq!(q.search_files(&["fox -\"bread\""]), ["docs/animals/fox.md"]);
    assert!(q.search_files(&["fox NOT dog"]).is_empty());
    // Required.
    assert_eq!(q.search_files(&["archive +zip"]), ["docs/zip.md"]);
    assert_eq!(q.search_files(&["archive +gzip"]), ["docs/archives/tar.md"]);
    let with_archive = q.search_files(&["archive"]);
    assert!(with_archive.contains(&"docs/zip.md".to_owned()));
    assert!(
        !q.search_files(&["archive NOT zip"])
            .contains(&"docs/zip.md".to_owned())
    );
    // Phrase combined with exclusion.
    assert_eq!(q.search_files(&["\"lazy dog\""]), ["docs/cooking/bread.md"]);
    assert!(q.search_files(&["\"lazy dog\" NOT bread"]).is_empty());
    assert_eq!(
        q.search_files(&["\"is brown\" -\"bread\""]),
        ["docs/animals/fox.md"]
    );
}

/// Pages that document command-line flags, as tldr writes them.
fn flag_pages() -> Quarry {
    let q = Quarry::new();
    let root = q.corpus(
        "pages",
        &[
            (
                "lsof.md",
                "# lsof\n\n> List open files.\n\n- List files opened by the process with a PID:\n\n`lsof {{[-p|--pid]}} {{pid}}`\n",
            ),
            (
                "ps.md",
                "# ps\n\n> Information about running processes.\n\n- List processes with their pid and user:\n\n`ps aux`\n",
            ),
            (
                "git-push.md",
                "# git push\n\n> Push commits to a remote.\n\n- Force-push, overwriting the remote:\n\n`git push --force`\n",
            ),
            (
                "git-pull.md",
                "# git pull\n\n> Fetch and merge from a remote.\n\n- Pull and force a rebase:\n\n`git pull --rebase`\n",
            ),
        ],
    );
    q.add(&root, "pages");
    q
}

#[test]
fn pasted_flags_search_as_literals() {
    let q = flag_pages();
    // `-p` used to mean "exclude documents containing p", which excluded the lsof page.
    assert_eq!(q.search_files(&["lsof -p pid"])[0], "pages/lsof.md");
    // (A leading space keeps clap from reading a query that starts with a dash as an option.)
    assert_eq!(q.search_files(&[" -p"]), ["pages/lsof.md"]);
    // `--force` finds the page that documents the flag, not the one that says "force".
    assert_eq!(q.search_files(&[" --force"])[0], "pages/git-push.md");
    assert_eq!(q.search_files(&["git --force"])[0], "pages/git-push.md");
    // Exclusion still works, with a syntax no flag collides with.
    assert_eq!(q.search_files(&["pid NOT -p"]), ["pages/ps.md"]);
    assert_eq!(q.search_files(&["pid -\"lsof\""]), ["pages/ps.md"]);
}

#[test]
fn scores_are_calibrated_probabilities() {
    let q = flag_pages();
    // A query the page answers fully scores as relevant; a one-word brush does not.
    let strong = q.search(&["lsof list open files pid"]);
    assert_eq!(strong[0]["file"], "pages/lsof.md");
    let top = strong[0]["score"].as_f64().unwrap();
    assert!(top >= 0.5, "{strong:?}");
    let weak = q.search(&["remote overwriting fetch list processes files"]);
    assert!(
        weak.iter().all(|h| h["score"].as_f64().unwrap() < top),
        "{weak:?}"
    );
    // `--min-score 0.5` (the seeds' threshold) keeps the strong hit only.
    let kept = q.search_files(&["lsof list open files pid", "--min-score", "0.5"]);
    assert_eq!(kept, ["pages/lsof.md"]);
}

fn cjk() -> Quarry {
    let q = Quarry::new();
    let root = q.corpus(
        "cjk",
        &[
            (
                "git.md",
                "# 版本控制笔记\n\n如果提交错了，可以使用 git revert 撤销提交，或者用 git reset 回退到之前的版本。\n",
            ),
            ("db.md", "# 数据库\n\n关系型数据库使用结构化查询语言进行数据检索。\n"),
            ("weather.md", "# 天气\n\n今天北京下雨，明天会放晴。\n"),
            ("jp.md", "# 日本語メモ\n\nこれはテストです。プログラミングの勉強をしています。\n"),
            ("en.md", "# English\n\nUse git log to see history.\n"),
        ],
    );
    q.add(&root, "cjk");
    q
}

#[test]
fn chinese_is_segmented() {
    let q = cjk();
    // "检索数据" is not a substring of the document (which says "数据检索") nor of its title.
    assert_eq!(q.search_files(&["检索数据"])[0], "cjk/db.md");
    assert_eq!(q.search_files(&["北京天气"])[0], "cjk/weather.md");
    // Mixed Chinese and Latin.
    let hits = q.search(&["用 git 撤销提交"]);
    assert_eq!(hits[0]["file"], "cjk/git.md", "{hits:?}");
    let snippet = hits[0]["snippet"].as_str().unwrap();
    assert!(snippet.starts_with("3: "), "{snippet}");
    assert!(snippet.contains("撤销提交"), "{snippet}");
    // A Chinese question.
    assert_eq!(q.search_files(&["如何回退到之前的版本"])[0], "cjk/git.md");
}

#[test]
fn japanese_kana_is_findable() {
    let q = cjk();
    assert_eq!(q.search_files(&["テスト"]), ["cjk/jp.md"]);
    assert_eq!(q.search_files(&["プログラミング"]), ["cjk/jp.md"]);
    assert_eq!(q.search_files(&["勉強"]), ["cjk/jp.md"]);
}

#[test]
fn thai_without_spaces_is_findable() {
    // Thai writes words without spaces: "สวัสดีชาวโลก" is "hello" + "world" in one run.
    let q = Quarry::new();
    let root = q.corpus(
        "th",
        &[
            (
                "hello.md",
                "# Multi-script\n\nThai: สวัสดีชาวโลก\n\nEnglish: Hello World\n",
            ),
            ("food.md", "# อาหาร\n\nร้านอาหารไทยเปิดทุกวันตั้งแต่แปดโมงเช้า\n"),
            ("en.md", "# English\n\nNothing Thai here.\n"),
        ],
    );
    q.add(&root, "th");
    assert_eq!(q.search_files(&["สวัสดี"]), ["th/hello.md"]);
    assert_eq!(q.search_files(&["ชาวโลก"]), ["th/hello.md"]);
    assert_eq!(q.search_files(&["อาหารไทย"])[0], "th/food.md");
    let hits = q.search(&["สวัสดี"]);
    let snippet = hits[0]["snippet"].as_str().unwrap();
    assert!(snippet.contains("สวัสดีชาวโลก"), "{snippet}");
}

#[test]
fn a_file_name_inside_a_chinese_path_is_found_first() {
    // Issue 41 item 13: the Debian reference writes paths inside Chinese sentences; the file
    // name alone must find it ahead of pages that only share its words.
    let q = Quarry::new();
    let root = q.corpus(
        "apt",
        &[
            (
                "reference.md",
                "# 软件源\n\n编辑/etc/apt/sources.list文件，加入新的软件源。\n",
            ),
            (
                "lists.md",
                "# Lists\n\nThe list of sources for this report; list sources first.\n",
            ),
        ],
    );
    q.add(&root, "apt");
    for query in ["sources.list", "apt/sources.list", "/etc/apt/sources.list"] {
        let hits = q.search_files(&[query]);
        assert_eq!(hits[0], "apt/reference.md", "{query}: {hits:?}");
    }
}

#[test]
fn hyphenated_identifiers_and_versions() {
    let q = Quarry::new();
    let root = q.corpus(
        "m",
        &[
            (
                "gpt4o.md",
                "# Model notes\n\nWe evaluated gpt-4o on the benchmark.\n",
            ),
            (
                "release.md",
                "# Release notes\n\nRelease v1.2.3 fixes crashes.\n",
            ),
            (
                "gpt.md",
                "# GPT overview\n\ngpt gpt gpt models are popular; version 1 2 3 and 4 of them.\n",
            ),
            (
                "other.md",
                "# Other\n\nv1 and v2 of the api; release 1.2 was fine.\n",
            ),
        ],
    );
    q.add(&root, "m");
    let hits = q.search_files(&["gpt-4o"]);
    assert_eq!(hits[0], "m/gpt4o.md", "{hits:?}");
    let hits = q.search_files(&["v1.2.3"]);
    assert_eq!(hits[0], "m/release.md", "{hits:?}");
    assert!(!hits.contains(&"m/gpt.md".to_owned()), "{hits:?}");
    // A required identifier matches only documents containing it.
    assert_eq!(q.search_files(&["+gpt-4o"]), ["m/gpt4o.md"]);
    assert_eq!(q.search_files(&["\"v1.2.3\""]), ["m/release.md"]);
}

#[test]
fn invalid_queries_are_refused() {
    let q = docs();
    let before = q.state_with(&["archive"]);
    for (args, expect) in [
        (vec!["search", ""], "query must not be empty"),
        (vec!["search", "   "], "query must not be empty"),
        (
            vec!["search", "archive", "-n", "0"],
            "limit must be between 1 and 1000, got 0",
        ),
        (
            vec!["search", "archive", "-n", "1001"],
            "limit must be between 1 and 1000",
        ),
        (
            vec!["search", "archive", "--min-score", "2"],
            "min score must be between 0 and 1, got 2",
        ),
        (
            vec!["search", "archive", "--min-score=-0.5"],
            "min score must be between 0 and 1",
        ),
        (
            vec!["search", "archive", "--min-score", "NaN"],
            "min score must be between 0 and 1",
        ),
    ] {
        let err = q.err(&args);
        assert!(err.contains(expect), "{args:?}: {err}");
    }
    assert_eq!(q.state_with(&["archive"]), before);
    // Only exclusions: nothing can match, which is not an error.
    assert_eq!(
        q.ok(&["search", "NOT zip"]),
        "No results found for \"NOT zip\"\n"
    );
}

#[test]
fn contexts_are_shown_with_results() {
    let q = docs();
    let other = q.corpus("other", &[("o.md", "# Other\n\ngzip elsewhere\n")]);
    q.add(&other, "other");

    assert_eq!(
        q.ok(&["context", "list"]),
        "No contexts. Add one with: quarry context add PATH \"description\"\n"
    );
    assert_eq!(
        q.ok(&["context", "add", "docs/archives", "Archive how-tos"]),
        "Added context for docs/archives\n"
    );
    let hits = q.search(&["gzip"]);
    let tar = hits
        .iter()
        .find(|h| h["file"] == "docs/archives/tar.md")
        .unwrap();
    assert_eq!(tar["context"], "Archive how-tos");
    let o = hits.iter().find(|h| h["file"] == "other/o.md").unwrap();
    assert!(o["context"].is_null());
    let human = q.ok(&["search", "gzip", "-c", "docs"]);
    let mut lines = human.lines();
    assert!(lines.next().unwrap().contains("docs/archives/tar.md"));
    assert_eq!(lines.next(), Some("  Context: Archive how-tos"), "{human}");

    // Most specific prefix wins; `/` applies everywhere else.
    q.ok(&["context", "add", "docs", "All docs"]);
    q.ok(&["context", "add", "/", "global"]);
    let ctx = |query: &str, file: &str| -> Value {
        q.search(&[query, "-n", "50"])
            .into_iter()
            .find(|h| h["file"] == file)
            .unwrap_or_else(|| panic!("{file} not found for {query}"))["context"]
            .clone()
    };
    assert_eq!(ctx("gzip", "docs/archives/tar.md"), "Archive how-tos");
    assert_eq!(ctx("revert", "docs/git/undo.md"), "All docs");
    assert_eq!(ctx("gzip", "other/o.md"), "global");
    // "docs" does not apply to a sibling whose name merely starts with it.
    assert_eq!(
        q.json(&["context", "list"]),
        serde_json::json!({"contexts": [
            {"path": "/", "text": "global"},
            {"path": "docs", "text": "All docs"},
            {"path": "docs/archives", "text": "Archive how-tos"},
        ]})
    );
    assert_eq!(
        q.ok(&["context", "ls"]),
        "/: global\ndocs: All docs\ndocs/archives: Archive how-tos\n"
    );
    // Re-adding replaces the text.
    q.ok(&["context", "add", "docs", "Every doc"]);
    assert_eq!(ctx("revert", "docs/git/undo.md"), "Every doc");
    let v = q.json(&["context", "add", "qmd://docs/git", "Git notes"]);
    assert_eq!(
        v,
        serde_json::json!({"status": "added", "path": "docs/git", "text": "Git notes"})
    );
    assert_eq!(ctx("revert", "docs/git/undo.md"), "Git notes");
    // A folder on disk inside a collection.
    let cooking = other.parent().unwrap().join("docs/cooking");
    assert_eq!(
        q.ok(&["context", "add", s(&cooking), "Recipes"]),
        "Added context for docs/cooking\n"
    );
    assert_eq!(ctx("bread", "docs/cooking/bread.md"), "Recipes");

    // No PATH: the working directory, when it is inside a collection.
    let git_dir = other.parent().unwrap().join("docs/git");
    let out = q
        .cmd(&["context", "add", "Git folder"])
        .current_dir(&git_dir)
        .output()
        .unwrap();
    crate::common::assert_success(&["context", "add"], &out);
    assert_eq!(crate::common::stdout(&out), "Added context for docs/git\n");
    assert_eq!(ctx("revert", "docs/git/undo.md"), "Git folder");

    // rm: falls back to the next most specific.
    assert_eq!(
        q.ok(&["context", "rm", "docs/archives"]),
        "Removed context for docs/archives\n"
    );
    assert_eq!(ctx("gzip", "docs/archives/tar.md"), "Every doc");
    let v = q.json(&["context", "remove", "/"]);
    assert_eq!(v, serde_json::json!({"status": "removed", "path": "/"}));
    assert!(ctx("gzip", "other/o.md").is_null());
}

#[test]
fn bad_contexts_are_refused() {
    let q = docs();
    q.ok(&["context", "add", "docs/git", "Git notes"]);
    let outside = q.corpus("elsewhere", &[("e.md", "# E\n")]);
    let before = q.state_with(&["revert"]);
    for (args, expect) in [
        (
            vec!["context", "add", "nope/dir", "text"],
            "is not inside any collection",
        ),
        (
            vec!["context", "add", s(&outside), "text"],
            "is not inside any collection",
        ),
        (
            vec!["context", "add", "/etc", "text"],
            "is not inside any collection",
        ),
        (
            vec!["context", "add", "docs/../etc", "text"],
            "must not contain '.' or '..'",
        ),
        (
            vec!["context", "add", "docs/git", "   "],
            "context text must not be empty",
        ),
        (
            vec!["context", "add", "", "text"],
            "context path must not be empty",
        ),
        (
            vec!["context", "rm", "docs/cooking"],
            "no context for 'docs/cooking'",
        ),
        (
            vec!["context", "rm", "nope"],
            "is not inside any collection",
        ),
    ] {
        let err = q.err(&args);
        assert!(err.contains(expect), "{args:?}: {err}");
    }
    assert_eq!(q.state_with(&["revert"]), before);
}

#[test]
fn context_display_path_names_its_collection() {
    // Two collections over the same folder with different masks (a common QMD setup).
    let q = Quarry::new();
    let root = q.corpus(
        "notes",
        &[
            ("sub/a.md", "# A\n\nmarkdown okapi\n"),
            ("sub/b.txt", "text okapi\n"),
        ],
    );
    q.json(&["collection", "add", s(&root), "--name", "notes"]);
    q.json(&[
        "collection",
        "add",
        s(&root),
        "--name",
        "aaa-text",
        "--mask",
        "**/*.txt",
    ]);
    // The working directory contains `notes/sub` on disk; the user means the display path.
    let v = q.json(&["context", "add", "notes/sub", "Markdown notes"]);
    assert_eq!(v["path"], "notes/sub", "{v}");
    let hits = q.search(&["okapi"]);
    let md = hits.iter().find(|h| h["file"] == "notes/sub/a.md").unwrap();
    assert_eq!(md["context"], "Markdown notes");
}

#[test]
fn snippet_line_numbers_exist_in_the_document() {
    let q = Quarry::new();
    let root = q.corpus("c", &[("a.md", "# Tar guide\n\nextract with tar\n")]);
    q.add(&root, "c");
    let h = &q.search(&["tar"])[0];
    let total = q.json(&["get", "c/a.md"])["total_lines"].as_u64().unwrap() as usize;
    assert_eq!(total, 3);
    for line in h["snippet"].as_str().unwrap().lines() {
        let n = has_line_prefix(line).unwrap();
        assert!(
            n <= total,
            "snippet line {n} of a {total}-line document: {h}"
        );
    }
}
