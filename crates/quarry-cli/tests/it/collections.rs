//! `quarry collection add|list|rename|remove`, end to end.

use crate::common::{Quarry, s, write_files};
use serde_json::Value;

fn notes_corpus(q: &Quarry, rel: &str) -> std::path::PathBuf {
    q.corpus(
        rel,
        &[
            (
                "tar.md",
                "# Tar guide\n\nExtract an archive with tar xf. marmalade\n",
            ),
            (
                "sub/deep.md",
                "# Deep note\n\nNested document about quokkas.\n",
            ),
            (
                "sub/more/deeper.md",
                "# Deeper\n\nEven deeper: pangolin facts.\n",
            ),
            ("readme.txt", "not markdown: wombat\n"),
        ],
    )
}

#[test]
fn add_indexes_documents_and_reports_json() {
    let q = Quarry::new();
    let root = notes_corpus(&q, "notes");
    let v = q.json(&[
        "collection",
        "add",
        s(&root),
        "--name",
        "notes",
        "--mask",
        "**/*.md",
    ]);
    assert_eq!(v["status"], "added");
    assert_eq!(v["name"], "notes");
    assert_eq!(v["path"], s(&root));
    assert_eq!(v["pattern"], "**/*.md");
    assert_eq!(v["documents"], 3);
    let r = &v["report"];
    assert_eq!(r["name"], "notes");
    assert_eq!(r["scanned"], 3);
    assert_eq!(r["added"], 3);
    assert_eq!(r["updated"], 0);
    assert_eq!(r["unchanged"], 0);
    assert_eq!(r["removed"], 0);
    assert_eq!(r["skipped"], serde_json::json!([]));
    assert_eq!(r["documents"], 3);

    // list, JSON and human.
    let list = q.json(&["collection", "list"]);
    assert_eq!(
        list,
        serde_json::json!({"collections": [{
            "name": "notes", "kind": "folder", "path": s(&root),
            "pattern": "**/*.md", "documents": 3
        }]})
    );
    let human = q.ok(&["collection", "list"]);
    assert_eq!(
        human,
        format!("Collections: 1\n- notes (3 docs) {} [**/*.md]\n", s(&root))
    );
    assert_eq!(
        q.ok(&["collection", "ls"]),
        human,
        "`ls` is an alias of `list`"
    );

    // Indexed and searchable: nested files too, the .txt file not.
    assert_eq!(q.search_files(&["quokkas"]), ["notes/sub/deep.md"]);
    assert_eq!(q.search_files(&["pangolin"]), ["notes/sub/more/deeper.md"]);
    assert!(q.search_files(&["wombat"]).is_empty());
    assert_eq!(q.total_documents(), 3);
}

#[test]
fn add_human_output_and_default_name_from_folder() {
    let q = Quarry::new();
    let root = notes_corpus(&q, "my-wiki_2");
    let out = q.ok(&["collection", "add", s(&root)]);
    assert_eq!(
        out,
        format!(
            "Added collection 'my-wiki_2' with 3 documents ({})\n",
            s(&root)
        )
    );
    let list = q.json(&["collection", "list"]);
    assert_eq!(list["collections"][0]["name"], "my-wiki_2");
    assert_eq!(list["collections"][0]["pattern"], "**/*.md", "default mask");
    assert_eq!(q.search_files(&["marmalade"]), ["my-wiki_2/tar.md"]);

    // A relative path (against the working directory) and a trailing slash work too.
    let q2 = Quarry::new();
    notes_corpus(&q2, "rel-notes");
    let v = q2.json(&["collection", "add", "rel-notes/"]);
    assert_eq!(v["name"], "rel-notes");
    assert_eq!(v["documents"], 3);
}

#[test]
fn mask_selects_files() {
    let q = Quarry::new();
    let root = notes_corpus(&q, "notes");
    let v = q.json(&[
        "collection",
        "add",
        s(&root),
        "--name",
        "top",
        "--mask",
        "*.md",
    ]);
    assert_eq!(v["documents"], 1, "`*` stays in the top folder: {v}");
    let v = q.json(&[
        "collection",
        "add",
        s(&root),
        "--name",
        "txt",
        "--mask",
        "**/*.txt",
    ]);
    assert_eq!(v["documents"], 1);
    assert_eq!(q.search_files(&["wombat"]), ["txt/readme.txt"]);
    assert_eq!(q.search_files(&["marmalade"]), ["top/tar.md"]);
    assert!(q.search_files(&["quokkas"]).is_empty());
}

#[test]
fn rename_changes_display_paths_and_moves_contexts() {
    let q = Quarry::new();
    let root = notes_corpus(&q, "notes");
    q.add(&root, "old");
    q.ok(&["context", "add", "old/sub", "Nested notes"]);
    q.ok(&["context", "add", "old", "All old notes"]);
    let hits = q.search(&["quokkas"]);
    assert_eq!(hits[0]["file"], "old/sub/deep.md");
    assert_eq!(hits[0]["context"], "Nested notes");
    let docid = hits[0]["docid"].clone();

    assert_eq!(
        q.ok(&["collection", "rename", "old", "new"]),
        "Renamed 'old' to 'new'\n"
    );

    let hits = q.search(&["quokkas"]);
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0]["file"], "new/sub/deep.md");
    assert_eq!(
        hits[0]["context"], "Nested notes",
        "contexts move with the collection"
    );
    assert_eq!(hits[0]["docid"], docid, "renaming does not change docids");
    assert_eq!(q.search(&["marmalade"])[0]["context"], "All old notes");
    assert_eq!(
        q.json(&["context", "list"]),
        serde_json::json!({"contexts": [
            {"path": "new", "text": "All old notes"},
            {"path": "new/sub", "text": "Nested notes"},
        ]})
    );
    // The document is reachable under the new name only.
    let doc = q.ok(&["get", "new/sub/deep.md"]);
    assert!(doc.contains("Nested document about quokkas."), "{doc}");
    assert!(doc.starts_with("<!-- Context: Nested notes -->"), "{doc}");
    let err = q.err(&["get", "old/sub/deep.md"]);
    assert!(err.contains("Document not found: old/sub/deep.md"), "{err}");
    let st = q.json(&["status"]);
    assert_eq!(st["collections"][0]["name"], "new");
    assert_eq!(st["total_documents"], 3);

    // JSON output of rename.
    let v = q.json(&["collection", "mv", "new", "newer"]);
    assert_eq!(
        v,
        serde_json::json!({"status": "renamed", "old_name": "new", "new_name": "newer"})
    );
    assert_eq!(q.search_files(&["pangolin"]), ["newer/sub/more/deeper.md"]);
}

#[test]
fn remove_drops_documents_from_search() {
    let q = Quarry::new();
    let a = notes_corpus(&q, "a");
    let b = q.corpus("b", &[("b.md", "# B\n\nmarmalade in b too\n")]);
    q.add(&a, "a");
    q.add(&b, "b");
    q.ok(&["context", "add", "a/sub", "gone soon"]);
    assert_eq!(q.search_files(&["marmalade"]).len(), 2);
    assert_eq!(q.total_documents(), 4);

    assert_eq!(
        q.ok(&["collection", "remove", "a"]),
        "Removed collection 'a' (3 documents)\n"
    );
    assert_eq!(q.search_files(&["marmalade"]), ["b/b.md"]);
    assert!(q.search_files(&["quokkas"]).is_empty());
    assert!(q.search_files(&["pangolin"]).is_empty());
    assert_eq!(q.total_documents(), 1);
    let list = q.json(&["collection", "list"]);
    assert_eq!(list["collections"].as_array().unwrap().len(), 1);
    assert_eq!(list["collections"][0]["name"], "b");
    assert_eq!(
        q.json(&["context", "list"]),
        serde_json::json!({"contexts": []}),
        "contexts of a removed collection go with it"
    );
    assert!(q.err(&["get", "a/tar.md"]).contains("Document not found"));
    // Files on disk are untouched.
    assert!(a.join("tar.md").exists());

    // Re-adding works and finds everything again; JSON form of remove.
    q.add(&a, "a");
    assert_eq!(q.search_files(&["quokkas"]), ["a/sub/deep.md"]);
    assert_eq!(
        q.json(&["collection", "rm", "a"]),
        serde_json::json!({"status": "removed", "name": "a", "documents": 3})
    );
    assert!(q.search_files(&["quokkas"]).is_empty());
}

#[test]
fn gitignored_hidden_and_node_modules_files_are_not_indexed() {
    let q = Quarry::new();
    let root = q.corpus(
        "repo",
        &[
            (".gitignore", "ignored.md\nbuild/\n"),
            ("kept.md", "# Kept\n\nvisible aardvark\n"),
            ("docs/also.md", "# Also\n\nvisible aardvark two\n"),
            ("ignored.md", "# Ignored\n\nsecret axolotl\n"),
            ("build/out.md", "# Build\n\nsecret axolotl build\n"),
            (".hidden/c.md", "# Hidden\n\nsecret axolotl hidden\n"),
            (".dotfile.md", "# Dot\n\nsecret axolotl dotfile\n"),
            (
                "node_modules/pkg/readme.md",
                "# Pkg\n\nsecret axolotl pkg\n",
            ),
        ],
    );
    let v = q.add(&root, "repo");
    assert_eq!(v["documents"], 2, "{v}");
    assert!(q.search_files(&["axolotl"]).is_empty());
    let mut files = q.search_files(&["aardvark"]);
    files.sort();
    assert_eq!(files, ["repo/docs/also.md", "repo/kept.md"]);
}

// ---------------------------------------------------------------------------------------
// Bad input: a clear error, and nothing changes.

/// An installation with one indexed collection, `notes`.
fn with_notes() -> (Quarry, std::path::PathBuf) {
    let q = Quarry::new();
    let root = notes_corpus(&q, "notes");
    q.add(&root, "notes");
    q.ok(&["context", "add", "notes/sub", "Nested"]);
    (q, root)
}

const PROBES: &[&str] = &["quokkas", "marmalade", "wombat", "zebu"];

#[test]
fn missing_path_is_refused() {
    let (q, _) = with_notes();
    let before = q.state_with(PROBES);
    let err = q.err(&["collection", "add", "does-not-exist", "--name", "x"]);
    assert!(err.contains("does-not-exist"), "{err}");
    assert!(err.contains("No such file or directory"), "{err}");
    assert_eq!(q.state_with(PROBES), before);
}

#[test]
fn path_that_is_a_file_is_refused() {
    let (q, root) = with_notes();
    let before = q.state_with(PROBES);
    let file = root.join("tar.md");
    let err = q.err(&["collection", "add", s(&file), "--name", "f"]);
    assert!(err.contains("is not a directory"), "{err}");
    assert!(err.contains("tar.md"), "{err}");
    assert_eq!(q.state_with(PROBES), before);
}

#[test]
fn unreadable_directory_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let (q, _) = with_notes();
    let locked = q.corpus("locked", &[("x.md", "# X\n\nzebu\n")]);
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
    let readable_anyway = std::fs::read_dir(&locked).is_ok();
    if readable_anyway {
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755)).unwrap();
        eprintln!("skipping: this user (root?) can read a chmod 000 directory");
        return;
    }
    let before = q.state_with(PROBES);
    let out = q.run(&["collection", "add", s(&locked), "--name", "locked"]);
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755)).unwrap();
    crate::common::assert_failure(&["collection", "add"], &out);
    let err = crate::common::stderr(&out);
    assert!(err.contains("Permission denied"), "{err}");
    assert_eq!(q.state_with(PROBES), before);
}

#[test]
fn name_clash_is_refused_and_first_collection_stays_intact() {
    let (q, root) = with_notes();
    let other = q.corpus("other", &[("z.md", "# Z\n\nzebu grazing\n")]);
    let before = q.state_with(PROBES);
    let err = q.err(&["collection", "add", s(&other), "--name", "notes"]);
    assert!(err.contains("collection 'notes' already exists"), "{err}");
    assert_eq!(q.state_with(PROBES), before);
    assert!(
        q.search_files(&["zebu"]).is_empty(),
        "the clashing folder was not indexed"
    );
    // Same folder again under its default name ("notes") is the same clash.
    let err = q.err(&["collection", "add", s(&root)]);
    assert!(err.contains("already exists"), "{err}");
    assert_eq!(q.state_with(PROBES), before);
}

#[test]
fn invalid_names_are_refused() {
    let (q, root) = with_notes();
    let before = q.state_with(PROBES);
    for bad in ["a/b", ".x", "", "-x", "a b", "..", "x\\y", &"n".repeat(65)] {
        let name_arg = format!("--name={bad}");
        let err = q.err(&["collection", "add", s(&root), &name_arg]);
        assert!(err.contains("invalid collection name"), "{bad:?}: {err}");
    }
    // The same rules apply to rename.
    for bad in ["a/b", ".x", ""] {
        let err = q.err(&["collection", "rename", "notes", bad]);
        assert!(err.contains("invalid collection name"), "{bad:?}: {err}");
    }
    // A folder whose name is not a valid collection name needs --name.
    let dotted = q.corpus(".dotted", &[("d.md", "# D\n\nzebu\n")]);
    let err = q.err(&["collection", "add", s(&dotted)]);
    assert!(err.contains("invalid collection name \".dotted\""), "{err}");
    assert_eq!(q.state_with(PROBES), before);
}

#[test]
fn mask_matching_nothing_is_refused_unless_allow_empty() {
    let (q, root) = with_notes();
    let before = q.state_with(PROBES);
    let err = q.err(&[
        "collection",
        "add",
        s(&root),
        "--name",
        "pdfs",
        "--mask",
        "**/*.pdf",
    ]);
    assert!(err.contains("no files match '**/*.pdf'"), "{err}");
    assert!(err.contains("nothing was added"), "{err}");
    assert_eq!(q.state_with(PROBES), before);

    let v = q.json(&[
        "collection",
        "add",
        s(&root),
        "--name",
        "pdfs",
        "--mask",
        "**/*.pdf",
        "--allow-empty",
    ]);
    assert_eq!(v["status"], "added");
    assert_eq!(v["documents"], 0);
    let list = q.json(&["collection", "list"]);
    let names: Vec<&str> = list["collections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["notes", "pdfs"]);
    assert_eq!(q.total_documents(), 3);
}

#[test]
fn invalid_masks_are_refused() {
    let (q, root) = with_notes();
    let before = q.state_with(PROBES);
    for (mask, expect) in [
        ("../*.md", "must not contain '..'"),
        ("docs/../../*.md", "must not contain '..'"),
        ("/etc/*", "must be relative"),
        ("a[", "invalid glob mask"),
        ("{a,b", "invalid glob mask"),
        ("", "glob mask is empty"),
    ] {
        let arg = format!("--mask={mask}");
        let err = q.err(&["collection", "add", s(&root), "--name", "m", &arg]);
        assert!(err.contains(expect), "mask {mask:?}: {err}");
    }
    assert_eq!(q.state_with(PROBES), before);
}

#[test]
fn rename_to_existing_name_is_refused() {
    let (q, _) = with_notes();
    let other = q.corpus("other", &[("z.md", "# Z\n\nzebu\n")]);
    q.add(&other, "other");
    let before = q.state_with(PROBES);
    let err = q.err(&["collection", "rename", "notes", "other"]);
    assert!(err.contains("collection 'other' already exists"), "{err}");
    assert_eq!(q.state_with(PROBES), before);
    assert_eq!(q.search_files(&["zebu"]), ["other/z.md"]);
    assert_eq!(q.search_files(&["quokkas"]), ["notes/sub/deep.md"]);
}

#[test]
fn remove_or_rename_unknown_collection_is_refused() {
    let (q, _) = with_notes();
    let before = q.state_with(PROBES);
    let err = q.err(&["collection", "remove", "nope"]);
    assert!(err.contains("collection 'nope' not found"), "{err}");
    let err = q.err(&["collection", "rename", "nope", "fresh"]);
    assert!(err.contains("collection 'nope' not found"), "{err}");
    assert_eq!(q.state_with(PROBES), before);
    // Collection names are case-sensitive: `Notes` is not `notes`.
    let err = q.err(&["collection", "remove", "Notes"]);
    assert!(err.contains("not found"), "{err}");
    assert_eq!(q.state_with(PROBES), before);
}

#[test]
fn list_on_a_fresh_home_is_empty() {
    let q = Quarry::new();
    assert_eq!(q.ok(&["collection", "list"]), "Collections: 0\n");
    assert_eq!(
        q.json(&["collection", "list"]),
        serde_json::json!({"collections": []})
    );
    let st = q.json(&["status"]);
    assert_eq!(st["total_documents"], 0);
    assert_eq!(st["collections"], Value::Array(vec![]));
}

#[test]
fn io_error_message_names_the_cause_once() {
    let q = Quarry::new();
    let err = q.err(&["collection", "add", "does-not-exist"]);
    assert_eq!(
        err.matches("No such file or directory").count(),
        1,
        "the cause is repeated:\n{err}"
    );
}

#[test]
fn adding_files_later_and_updating_picks_them_up() {
    // `collection add` followed by new files on disk: `update` indexes them.
    let q = Quarry::new();
    let root = notes_corpus(&q, "notes");
    q.add(&root, "notes");
    write_files(&root, &[("new.md", "# New\n\nfreshly added narwhal\n")]);
    assert!(q.search_files(&["narwhal"]).is_empty());
    q.ok(&["update"]);
    assert_eq!(q.search_files(&["narwhal"]), ["notes/new.md"]);
    assert_eq!(
        q.json(&["collection", "list"])["collections"][0]["documents"],
        4
    );
}

#[test]
fn named_indexes_are_isolated() {
    let q = Quarry::new();
    let root = notes_corpus(&q, "notes");
    q.json(&[
        "--index",
        "work",
        "collection",
        "add",
        s(&root),
        "--name",
        "notes",
    ]);
    assert_eq!(q.json(&["--index", "work", "status"])["total_documents"], 3);
    assert_eq!(q.total_documents(), 0, "the default index is separate");
    assert!(q.search_files(&["quokkas"]).is_empty());
    assert!(q.home().join("work").is_dir());
    for bad in ["../evil", ".hidden", "a/b", ""] {
        let arg = format!("--index={bad}");
        let err = q.err(&[&arg, "status"]);
        assert!(err.contains("invalid index name"), "{bad:?}: {err}");
    }
    assert!(!q.home().parent().unwrap().join("evil").exists());
}
