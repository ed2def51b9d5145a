//! QMD habits, end to end: the binary installed under the name `qmd`, `server` as a
//! spelling of `serve`, and collection names that REST routes own.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::common::{BIN, Quarry, s, stderr, stdout};
use serde_json::{Value, json};

/// A symlink named `qmd` to the binary under test, in a folder of its own.
fn qmd_link(q: &Quarry) -> PathBuf {
    let dir = q.dir("bin");
    let link = dir.join("qmd");
    std::os::unix::fs::symlink(Path::new(BIN), &link).expect("symlink qmd");
    link
}

#[test]
fn the_binary_answers_to_the_name_qmd() {
    let q = Quarry::new();
    let root = q.corpus("notes", &[("a.md", "# Apple\n\napple pie\n")]);
    q.add(&root, "notes");
    let qmd = qmd_link(&q);

    // Same commands, same index, same output.
    let out = q.cmd_as(&qmd, &["status"]).output().expect("run qmd");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), q.ok(&["status"]));
    let out = q
        .cmd_as(&qmd, &["search", "apple", "--json"])
        .output()
        .expect("run qmd");
    assert!(out.status.success(), "{}", stderr(&out));
    let hits: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    assert_eq!(hits[0]["file"], "notes/a.md");

    // Help and usage show the name it was called by.
    let out = q.cmd_as(&qmd, &["--help"]).output().expect("run qmd");
    assert!(out.status.success());
    let help = stdout(&out);
    assert!(help.contains("Usage: qmd "), "{help}");
    assert!(!help.contains("Usage: quarry"), "{help}");
    assert!(help.contains("[alias: server]"), "{help}");
    // The commands the help text tells the reader to run are spelled under that name too.
    assert!(help.contains("needs `qmd embed`"), "{help}");
    assert!(!help.contains("`quarry "), "{help}");
    let out = q
        .cmd_as(&qmd, &["source", "--help"])
        .output()
        .expect("run qmd");
    let sub = stdout(&out);
    assert!(!sub.contains("`quarry "), "{sub}");
    assert!(sub.contains("`qmd source sync ID`"), "{sub}");
    let help = q.ok(&["--help"]);
    assert!(help.contains("Usage: quarry "), "{help}");
    assert!(help.contains("needs `quarry embed`"), "{help}");

    // `qmd server --help` (QMD's spelling of `serve`).
    let out = q
        .cmd_as(&qmd, &["server", "--help"])
        .output()
        .expect("run qmd");
    assert!(out.status.success(), "{}", stderr(&out));
    let help = stdout(&out);
    assert!(help.contains("Usage: qmd serve"), "{help}");
    assert!(help.contains("--transport"), "{help}");
    assert_eq!(help, q.ok(&["serve", "--help"]).replace("quarry", "qmd"));

    // Bad input: usage errors (exit 2) name the binary as called.
    for (args, expect) in [
        (
            &["server", "--transport", "carrier-pigeon"][..],
            "carrier-pigeon",
        ),
        (&["serverr"][..], "unrecognized subcommand 'serverr'"),
    ] {
        let out = q.cmd_as(&qmd, args).output().expect("run qmd");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = stderr(&out);
        assert!(err.contains(expect), "{args:?}: {err}");
        // clap shows usage for an unknown subcommand, only a `--help` hint for a bad value.
        assert!(
            err.contains("Usage: qmd") || !expect.starts_with("unrecognized"),
            "{args:?}: {err}"
        );
        assert!(!err.contains("quarry"), "{args:?}: {err}");
        assert!(stdout(&out).is_empty());
    }
    let out = q.run(&["server", "--port", "not-a-port"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("not-a-port"), "{}", stderr(&out));
}

#[test]
fn qmd_mcp_over_stdio_works() {
    // What `claude mcp add qmd -- qmd mcp` runs.
    let q = Quarry::new();
    let root = q.corpus("notes", &[("a.md", "# Apple\n\napple pie\n")]);
    q.add(&root, "notes");
    let qmd = qmd_link(&q);
    let mut child = q
        .cmd_as(&qmd, &["mcp"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn qmd mcp");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "compat-test", "version": "1"}}});
    writeln!(stdin, "{init}").expect("write");
    let reply: Value =
        serde_json::from_str(&lines.next().expect("a reply").expect("read")).expect("JSON reply");
    assert_eq!(reply["id"], 1);
    assert_eq!(reply["result"]["protocolVersion"], "2025-06-18");
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
    )
    .expect("write");
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "status", "arguments": {}}});
    writeln!(stdin, "{call}").expect("write");
    let reply: Value =
        serde_json::from_str(&lines.next().expect("a reply").expect("read")).expect("JSON reply");
    assert_eq!(reply["id"], 2);
    assert_eq!(reply["result"]["structuredContent"]["totalDocuments"], 1);
    drop(stdin);
    let status = child.wait().expect("wait");
    assert!(status.success());
}

/// Renames a collection behind the engine's back, as an index made before a name was
/// reserved would have it.
fn rename_in_db(q: &Quarry, old: &str, new: &str) {
    let db = rusqlite::Connection::open(q.home().join("index").join("quarry.db")).expect("db");
    let n = db
        .execute(
            "UPDATE collections SET name = ?2 WHERE name = ?1",
            [old, new],
        )
        .expect("rename");
    assert_eq!(n, 1);
}

#[test]
fn reserved_collection_names_are_refused_for_new_collections() {
    let q = Quarry::new();
    let root = q.corpus("add", &[("a.md", "# Apple\n\napple pie\n")]);
    let before = q.state();
    // Explicit and derived from the folder's name (`add/`): both refused, nothing added.
    for args in [
        vec!["collection", "add", s(&root), "--name", "add"],
        vec!["collection", "add", s(&root)],
    ] {
        let err = q.err(&args);
        assert!(err.contains("invalid collection name \"add\""), "{err}");
        assert!(err.contains("reserved"), "{err}");
    }
    assert_eq!(q.state(), before);
    // Names that merely contain it are fine.
    q.json(&["collection", "add", s(&root), "--name", "add-ons"]);
    let err = q.err(&["collection", "rename", "add-ons", "add"]);
    assert!(err.contains("reserved"), "{err}");
    assert_eq!(
        q.json(&["collection", "list"])["collections"][0]["name"],
        "add-ons"
    );
}

#[test]
fn an_existing_collection_named_add_stays_usable() {
    let q = Quarry::new();
    let root = q.corpus("legacy", &[("a.md", "# Apple\n\napple pie\n")]);
    q.add(&root, "legacy");
    rename_in_db(&q, "legacy", "add");

    assert_eq!(
        q.json(&["collection", "list"])["collections"][0]["name"],
        "add"
    );
    assert_eq!(q.search_files(&["apple", "-c", "add"]), ["add/a.md"]);
    assert_eq!(q.json(&["get", "add/a.md"])["title"], "Apple");
    let v = q.json(&["multi-get", "add/*.md"]);
    assert_eq!(v["items"][0]["name"], "add/a.md");
    q.ok(&["context", "add", "add", "legacy notes"]);
    assert_eq!(q.json(&["get", "add/a.md"])["context"], "legacy notes");
    q.ok(&["context", "rm", "add"]);
    q.ok(&["update", "add"]);
    // It can be renamed away from the reserved name, not back to it.
    q.ok(&["collection", "rename", "add", "fruit"]);
    assert_eq!(q.search_files(&["apple"]), ["fruit/a.md"]);
    let err = q.err(&["collection", "rename", "fruit", "add"]);
    assert!(err.contains("reserved"), "{err}");
    // And removed.
    rename_in_db(&q, "fruit", "add");
    q.ok(&["collection", "remove", "add"]);
    assert_eq!(q.total_documents(), 0);
}

#[test]
fn absolute_context_paths_are_folders_on_disk() {
    let q = Quarry::new();
    let root = q.corpus("notes", &[("sub/a.md", "# Apple\n\napple pie\n")]);
    q.add(&root, "notes");
    let sub = root.join("sub");
    let abs = s(&sub);
    // A collection named like the absolute path's first segment (`tmp`, `home`) must not
    // capture it: `/tmp/…/notes/sub` is a folder on disk, not `tmp/…`.
    let first = abs
        .trim_start_matches('/')
        .split('/')
        .next()
        .unwrap_or_default();
    let decoy = q.dir("decoy");
    q.json(&[
        "collection",
        "add",
        s(&decoy),
        "--name",
        first,
        "--allow-empty",
    ]);
    assert_eq!(
        q.json(&["context", "add", abs, "fruit"])["path"],
        "notes/sub"
    );
    assert_eq!(q.json(&["get", "notes/sub/a.md"])["context"], "fruit");
    assert_eq!(q.json(&["context", "rm", abs])["path"], "notes/sub");
    // The global context is `/` alone.
    assert_eq!(q.json(&["context", "add", "/", "everything"])["path"], "/");
    assert_eq!(q.json(&["context", "rm", "/"])["path"], "/");
    let err = q.err(&["context", "rm", "/"]);
    assert!(err.contains("no context for '/'"), "{err}");
    // A context outlives its folder: it can still be removed by the absolute path, but a
    // missing folder cannot get a new one.
    q.ok(&["context", "add", abs, "soon gone"]);
    std::fs::remove_dir_all(&sub).expect("rm sub");
    let err = q.err(&["context", "add", abs, "again"]);
    assert!(err.contains("is not inside any collection"), "{err}");
    assert_eq!(q.json(&["context", "rm", abs])["path"], "notes/sub");
    assert_eq!(q.json(&["context", "list"])["contexts"], json!([]));
    // Relative display paths are unchanged, and `..` is still refused.
    q.ok(&["context", "add", "notes/sub", "display path"]);
    assert_eq!(q.json(&["context", "rm", "notes/sub"])["path"], "notes/sub");
    q.ok(&["context", "add", "notes", "kept"]);
    let before = q.state();
    for bad in [
        format!("{}/../notes", s(&sub)),
        format!("{}/../x", s(&root)),
    ] {
        let err = q.err(&["context", "rm", &bad]);
        assert!(
            err.contains("not inside any collection") || err.contains("'..'"),
            "{bad}: {err}"
        );
    }
    assert_eq!(q.state(), before);
}
