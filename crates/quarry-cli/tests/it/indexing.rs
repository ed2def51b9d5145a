//! `quarry update` / `index`: incremental re-indexing, skipped files, big files, git pull,
//! docids.

use std::collections::HashSet;
use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime};

use crate::common::{Quarry, is_docid, rewrite, s, touch, write_file, write_files};
use serde_json::Value;

fn report(v: &Value, name: &str) -> Value {
    v["collections"]
        .as_array()
        .expect("collections")
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no report for {name}: {v}"))
        .clone()
}

fn counts(r: &Value) -> (u64, u64, u64, u64) {
    (
        r["added"].as_u64().unwrap(),
        r["updated"].as_u64().unwrap(),
        r["removed"].as_u64().unwrap(),
        r["unchanged"].as_u64().unwrap(),
    )
}

#[test]
fn update_is_incremental() {
    let q = Quarry::new();
    let root = q.corpus(
        "c",
        &[
            ("a.md", "# A\n\nalpha oldword\n"),
            ("b.md", "# B\n\nbeta bravado\n"),
            ("c.md", "# C\n\ngamma cormorant\n"),
        ],
    );
    q.add(&root, "c");
    let docid_c = q.search(&["cormorant"])[0]["docid"].clone();

    // Nothing changed.
    let v = q.json(&["update"]);
    assert_eq!(counts(&report(&v, "c")), (0, 0, 0, 3));
    assert_eq!(v["total_documents"], 3);
    assert_eq!(
        q.ok(&["update"]),
        "c: 0 added, 0 updated, 0 removed, 3 unchanged\nUpdated 1 collection: 3 documents\n"
    );

    // Modify a file: updated; the new word is found, the old one is gone.
    rewrite(&root.join("a.md"), "# A\n\nalpha newword zebrafish\n");
    let v = q.json(&["update"]);
    assert_eq!(counts(&report(&v, "c")), (0, 1, 0, 2));
    assert_eq!(q.search_files(&["zebrafish"]), ["c/a.md"]);
    assert!(q.search_files(&["oldword"]).is_empty());
    assert!(q.ok(&["get", "c/a.md"]).contains("newword zebrafish"));

    // Delete a file: removed from search and get.
    std::fs::remove_file(root.join("b.md")).unwrap();
    let v = q.json(&["update"]);
    assert_eq!(counts(&report(&v, "c")), (0, 0, 1, 2));
    assert!(q.search_files(&["bravado"]).is_empty());
    assert!(q.err(&["get", "c/b.md"]).contains("Document not found"));
    assert_eq!(q.total_documents(), 2);

    // touch without a content change: unchanged, same docid (not re-indexed as new).
    touch(&root.join("c.md"));
    let v = q.json(&["update"]);
    assert_eq!(counts(&report(&v, "c")), (0, 0, 0, 2));
    let hits = q.search(&["cormorant"]);
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0]["docid"], docid_c);

    // A new file: added.
    write_files(&root, &[("d.md", "# D\n\ndelta dugong\n")]);
    let out = q.ok(&["update"]);
    assert_eq!(
        out,
        "c: 1 added, 0 updated, 0 removed, 2 unchanged\nUpdated 1 collection: 3 documents\n"
    );
    assert_eq!(q.search_files(&["dugong"]), ["c/d.md"]);

    // `index` is the same operation with its own verb.
    assert_eq!(
        q.ok(&["index"]),
        "c: 0 added, 0 updated, 0 removed, 3 unchanged\nIndexed 1 collection: 3 documents\n"
    );
}

#[test]
fn same_size_rewrite_is_detected() {
    // Same length, different bytes: the mtime moved, so the content is re-read and re-hashed.
    let q = Quarry::new();
    let root = q.corpus("c", &[("a.md", "# A\n\nword1 aaaa\n")]);
    q.add(&root, "c");
    rewrite(&root.join("a.md"), "# A\n\nword1 bbbb\n");
    let v = q.json(&["update"]);
    assert_eq!(counts(&report(&v, "c")), (0, 1, 0, 0));
    assert_eq!(q.search_files(&["bbbb"]), ["c/a.md"]);
    assert!(q.search_files(&["aaaa"]).is_empty());
}

#[test]
fn update_named_collections_only() {
    let q = Quarry::new();
    let a = q.corpus("a", &[("a.md", "# A\n\napple\n")]);
    let b = q.corpus("b", &[("b.md", "# B\n\nbanana\n")]);
    q.add(&a, "a");
    q.add(&b, "b");
    write_files(&a, &[("a2.md", "# A2\n\napricot\n")]);
    write_files(&b, &[("b2.md", "# B2\n\nblueberry\n")]);
    let v = q.json(&["update", "b"]);
    assert_eq!(v["collections"].as_array().unwrap().len(), 1);
    assert_eq!(counts(&report(&v, "b")), (1, 0, 0, 1));
    assert_eq!(q.search_files(&["blueberry"]), ["b/b2.md"]);
    assert!(q.search_files(&["apricot"]).is_empty(), "a was not updated");

    // Unknown collection: error, nothing indexed.
    let before = q.state_with(&["apricot", "apple", "banana"]);
    let err = q.err(&["update", "a", "zz"]);
    assert!(err.contains("collection 'zz' not found"), "{err}");
    assert_eq!(q.state_with(&["apricot", "apple", "banana"]), before);
}

#[test]
fn binary_and_invalid_utf8_files_are_skipped_with_a_warning() {
    let q = Quarry::new();
    let root = q.corpus(
        "c",
        &[
            ("good.md", "# Good\n\nperfectly fine walrus\n"),
            ("other.md", "# Other\n\nwalrus two\n"),
        ],
    );
    write_file(&root.join("bin.md"), b"# Bin\n\nwalrus\0\x01\x02 binary\n");
    write_file(
        &root.join("bad.md"),
        b"# Bad\n\nwalrus \xff\xfe latin1 caf\xe9\n",
    );

    let out = q.run(&["collection", "add", s(&root), "--name", "c"]);
    crate::common::assert_success(&["collection", "add"], &out);
    let stdout = crate::common::stdout(&out);
    let stderr = crate::common::stderr(&out);
    assert!(
        stdout.starts_with("Added collection 'c' with 2 documents"),
        "{stdout}"
    );
    assert!(stdout.contains("2 files skipped"), "{stdout}");
    assert!(
        stderr.contains("warning: c/bin.md: skipped: binary file (contains NUL bytes)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("warning: c/bad.md: skipped: not valid UTF-8 (invalid byte at offset"),
        "{stderr}"
    );
    let mut files = q.search_files(&["walrus"]);
    files.sort();
    assert_eq!(files, ["c/good.md", "c/other.md"]);
    assert_eq!(q.total_documents(), 2);

    // `update` keeps skipping them, still exit 0, and says so in JSON.
    let out = q.run(&["update", "--json"]);
    crate::common::assert_success(&["update", "--json"], &out);
    assert!(crate::common::stderr(&out).contains("c/bin.md"));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut skipped: Vec<(String, String)> = report(&v, "c")["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["path"].as_str().unwrap().to_owned(),
                x["reason"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    skipped.sort();
    assert_eq!(skipped.len(), 2, "{skipped:?}");
    assert_eq!(skipped[0].0, "bad.md");
    assert!(skipped[0].1.contains("UTF-8"));
    assert_eq!(skipped[1].0, "bin.md");
    assert!(skipped[1].1.contains("binary"));
    assert!(q.err(&["get", "c/bin.md"]).contains("Document not found"));

    // A UTF-8 BOM and CRLF line endings are fine.
    write_file(
        &root.join("bom.md"),
        b"\xEF\xBB\xBF# Bom title\r\n\r\nwindows walrus\r\n",
    );
    q.ok(&["update"]);
    let hits = q.search(&["windows"]);
    assert_eq!(hits[0]["file"], "c/bom.md");
    assert_eq!(hits[0]["title"], "Bom title");
    assert_eq!(
        q.ok(&["get", "c/bom.md"]),
        "# Bom title\n\nwindows walrus\n"
    );
}

#[test]
fn fifty_megabyte_file_is_indexed_and_readable() {
    let q = Quarry::new();
    let root = q.dir("big");
    let path = root.join("big.md");
    {
        let f = std::fs::File::create(&path).unwrap();
        let mut w = std::io::BufWriter::new(f);
        w.write_all(b"# Big file\n\nfirst body line\n").unwrap();
        let line = b"lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod\n";
        let mut n = 0usize;
        while n < 50 * 1024 * 1024 {
            w.write_all(line).unwrap();
            n += line.len();
        }
        w.write_all(b"the very end: zyxwvuniqueword\n").unwrap();
    }
    write_files(&root, &[("small.md", "# Small\n\nlorem ipsum\n")]);
    let v = q.add(&root, "big");
    assert_eq!(v["documents"], 2, "{v}");

    let hits = q.search(&["zyxwvuniqueword"]);
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert_eq!(hits[0]["file"], "big/big.md");
    assert!(
        hits[0]["snippet"]
            .as_str()
            .unwrap()
            .contains("zyxwvuniqueword")
    );

    assert_eq!(
        q.ok(&["get", "big/big.md", "-l", "3"]),
        "# Big file\n\nfirst body line\n"
    );
    let view = q.json(&["get", "big/big.md", "-l", "3", "--line-numbers"]);
    assert_eq!(view["text"], "1: # Big file\n2: \n3: first body line");
    let total = view["total_lines"].as_u64().unwrap();
    assert!(total > 700_000, "{total}");
    // The last line, addressed by number.
    let last = q.ok(&["get", &format!("big/big.md:{total}")]);
    assert_eq!(last, "the very end: zyxwvuniqueword\n");
}

#[test]
fn files_over_the_size_limit_are_skipped_with_a_message() {
    let mut q = Quarry::new();
    q.set_env("QUARRY_MAX_FILE_BYTES", "1000");
    let root = q.corpus("c", &[("small.md", "# Small\n\ntiny tapir\n")]);
    let big = format!(
        "# Large\n\n{}\nlarge llama\n",
        "filler words here ".repeat(150)
    );
    assert!(big.len() > 1000);
    write_files(&root, &[("large.md", &big)]);

    let out = q.run(&["collection", "add", s(&root), "--name", "c"]);
    crate::common::assert_success(&["collection", "add"], &out);
    let err = crate::common::stderr(&out);
    assert!(err.contains("c/large.md"), "{err}");
    assert!(err.contains("over the 1000-byte limit"), "{err}");
    assert!(err.contains("QUARRY_MAX_FILE_BYTES"), "{err}");
    assert_eq!(q.search_files(&["tapir"]), ["c/small.md"]);
    assert!(q.search_files(&["llama"]).is_empty());

    // Without the limit it is indexed.
    let q2 = Quarry::new();
    q2.add(&root, "c");
    assert_eq!(q2.search_files(&["llama"]), ["c/large.md"]);

    // A limit that is not a number is a clear error.
    let err = q.err_env(&["status"], &[("QUARRY_MAX_FILE_BYTES", "ten")]);
    assert!(err.contains("QUARRY_MAX_FILE_BYTES"), "{err}");
    assert!(err.contains("is not a number of bytes"), "{err}");
}

#[test]
fn empty_collection_searches_to_no_results() {
    let q = Quarry::new();
    let empty = q.dir("empty");
    let v = q.json(&["collection", "add", s(&empty), "--allow-empty"]);
    assert_eq!(v["name"], "empty");
    assert_eq!(v["documents"], 0);
    assert_eq!(q.ok(&["search", "q"]), "No results found for \"q\"\n");
    assert_eq!(
        q.ok(&["search", "q", "-c", "empty"]),
        "No results found for \"q\"\n"
    );
    assert_eq!(q.json(&["search", "q"]), Value::Array(vec![]));
    assert_eq!(q.ok(&["search", "--files", "q"]), "");
    assert_eq!(q.total_documents(), 0);
    // A file appears later: update finds it.
    write_files(&empty, &[("late.md", "# Late\n\nq is here\n")]);
    q.ok(&["update"]);
    assert_eq!(q.search_files(&["q"]), ["empty/late.md"]);
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "Test")
        .env("GIT_AUTHOR_EMAIL", "test@example.com")
        .env("GIT_COMMITTER_NAME", "Test")
        .env("GIT_COMMITTER_EMAIL", "test@example.com")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .expect("git");
    assert!(
        out.status.success(),
        "git {args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn have_git() -> bool {
    Command::new("git")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn update_pull_fetches_new_commits() {
    if !have_git() {
        eprintln!("skipping: git is not installed");
        return;
    }
    let mut q = Quarry::new();
    // The pull that quarry runs must not read the developer's git config either.
    q.set_env("GIT_CONFIG_NOSYSTEM", "1");
    q.set_env("GIT_CONFIG_GLOBAL", "/dev/null");
    let origin = q.corpus("origin", &[("first.md", "# First\n\nfirst flamingo\n")]);
    git(&origin, &["init", "-q", "-b", "main"]);
    git(&origin, &["add", "."]);
    git(&origin, &["commit", "-q", "-m", "first"]);
    let clone = q.work().join("clone");
    git(q.work(), &["clone", "-q", s(&origin), s(&clone)]);
    q.add(&clone, "wiki");
    assert_eq!(q.search_files(&["flamingo"]), ["wiki/first.md"]);

    write_files(
        &origin,
        &[("second.md", "# Second\n\nsecond seahorse arrives\n")],
    );
    git(&origin, &["add", "."]);
    git(&origin, &["commit", "-q", "-m", "second"]);

    // Plain update does not pull.
    q.ok(&["update"]);
    assert!(q.search_files(&["seahorse"]).is_empty());

    let out = q.ok(&["update", "--pull"]);
    assert!(
        out.contains("wiki: 1 added, 0 updated, 0 removed, 1 unchanged"),
        "{out}"
    );
    assert!(out.contains("  git pull: "), "{out}");
    assert_eq!(q.search_files(&["seahorse"]), ["wiki/second.md"]);
    assert!(clone.join("second.md").exists());
    // The .git folder itself is never indexed.
    assert_eq!(q.total_documents(), 2);

    // Nothing new: pull succeeds, JSON carries its output.
    let v = q.json(&["update", "--pull"]);
    let r = report(&v, "wiki");
    assert_eq!(counts(&r), (0, 0, 0, 2));
    assert!(
        r["pulled"].as_str().unwrap().contains("Already up to date"),
        "{r}"
    );
}

#[test]
fn update_pull_on_a_plain_folder_still_updates() {
    let q = Quarry::new();
    let root = q.corpus("plain", &[("a.md", "# A\n\nplain pelican\n")]);
    q.add(&root, "plain");
    write_files(&root, &[("b.md", "# B\n\nplain puffin\n")]);
    let out = q.ok(&["update", "--pull"]);
    assert_eq!(
        out,
        "plain: 1 added, 0 updated, 0 removed, 1 unchanged\nUpdated 1 collection: 2 documents\n"
    );
    assert_eq!(q.search_files(&["puffin"]), ["plain/b.md"]);
    let v = q.json(&["update", "--pull"]);
    assert!(report(&v, "plain").get("pulled").is_none(), "{v}");
}

#[test]
fn docids_are_short_unique_and_retrievable() {
    let q = Quarry::new();
    let same = "# Twin\n\nidentical content twin-marker\n";
    let root = q.corpus(
        "c",
        &[
            ("one.md", "# One\n\nfirst\n"),
            ("two.md", "# Two\n\nsecond\n"),
            ("three.md", "# Three\n\nthird\n"),
            ("twin-a.md", same),
            ("dir/twin-b.md", same),
        ],
    );
    q.add(&root, "c");
    let all = q.json(&["multi-get", "c/**", "--max-bytes", "100000"]);
    let items = all["items"].as_array().unwrap();
    assert_eq!(items.len(), 5, "{all}");
    let mut seen = HashSet::new();
    let mut twins = Vec::new();
    for it in items {
        let docid = it["docid"].as_str().unwrap().to_owned();
        let name = it["name"].as_str().unwrap().to_owned();
        assert!(is_docid(&docid), "{name}: {docid}");
        assert!(seen.insert(docid.clone()), "docid {docid} is not unique");
        if name.contains("twin") {
            twins.push((name, docid));
        } else {
            assert_eq!(docid.len(), 7, "`#` + 6 hex: {docid}");
        }
    }
    // Identical content, distinct docids sharing the 6-hex prefix; one is the plain 6-hex id.
    assert_eq!(twins.len(), 2);
    assert_ne!(twins[0].1, twins[1].1);
    assert_eq!(twins[0].1[..7], twins[1].1[..7]);
    assert!(twins.iter().any(|(_, d)| d.len() == 7), "{twins:?}");
    for (name, docid) in &twins {
        let view = q.json(&["get", docid]);
        assert_eq!(&view["name"], name.as_str());
        assert_eq!(&view["docid"], docid.as_str());
        assert_eq!(view["text"], same.trim_end());
    }
    // Docids are case-insensitive on input.
    let (name, docid) = &twins[0];
    assert_eq!(
        q.json(&["get", &docid.to_uppercase()])["name"],
        name.as_str()
    );
    // Search reports the same docids.
    let hits = q.search(&["twin-marker"]);
    let found: HashSet<&str> = hits.iter().map(|h| h["docid"].as_str().unwrap()).collect();
    let expected: HashSet<&str> = twins.iter().map(|(_, d)| d.as_str()).collect();
    assert_eq!(found, expected);
}

#[test]
fn vanished_folder_keeps_its_documents() {
    // An unmounted disk or a moved folder must not wipe the index, nor block the others.
    let q = Quarry::new();
    let a = q.corpus("a", &[("a.md", "# A\n\nantelope\n")]);
    let b = q.corpus("b", &[("b.md", "# B\n\nbison\n")]);
    q.add(&a, "a");
    q.add(&b, "b");
    let moved = q.work().join("a-moved");
    std::fs::rename(&a, &moved).unwrap();
    write_files(&b, &[("b2.md", "# B2\n\nbuffalo\n")]);

    let out = q.run(&["update"]);
    assert!(!out.status.success(), "a missing folder is an error");
    let err = crate::common::stderr(&out);
    assert!(err.contains(s(&a)), "names the folder: {err}");
    assert!(err.contains("No such file or directory"), "{err}");
    assert_eq!(q.search_files(&["antelope"]), ["a/a.md"], "documents kept");
    assert!(q.ok(&["get", "a/a.md"]).contains("antelope"));
    assert_eq!(
        q.search_files(&["buffalo"]),
        ["b/b2.md"],
        "other collections still updated"
    );
    assert_eq!(q.total_documents(), 3);

    // Back in place: update works again and nothing was lost.
    std::fs::rename(&moved, &a).unwrap();
    let v = q.json(&["update"]);
    assert_eq!(counts(&report(&v, "a")), (0, 0, 0, 1));
    assert_eq!(v["total_documents"], 3);
}

#[test]
fn names_with_colons_and_empty_files() {
    let q = Quarry::new();
    let root = q.corpus(
        "c",
        &[
            ("12:30.md", "# Time\n\nat half past twelve\n"),
            ("empty.md", ""),
        ],
    );
    q.add(&root, "c");
    // `name:LINE` is tried first, then the whole name.
    assert_eq!(
        q.ok(&["get", "c/12:30.md"]),
        "# Time\n\nat half past twelve\n"
    );
    assert_eq!(q.ok(&["get", "c/12:30.md:3"]), "at half past twelve\n");
    let v = q.json(&["get", "c/empty.md"]);
    assert_eq!(v["text"], "");
    assert_eq!(v["title"], "empty");
}

#[test]
fn same_size_rewrite_within_the_same_clock_tick_is_detected() {
    // No mtime bump: the rewrite may land in the same filesystem timestamp tick as the scan
    // that indexed the first version ("racily clean" in git's terms).
    let q = Quarry::new();
    let root = q.corpus("c", &[("a.md", "# A\n\nword1 aaaa\n")]);
    q.add(&root, "c");
    std::fs::write(root.join("a.md"), "# A\n\nword1 cccc\n").unwrap();
    q.ok(&["update"]);
    assert_eq!(q.search_files(&["cccc"]), ["c/a.md"]);
    assert!(q.search_files(&["aaaa"]).is_empty());
}

#[test]
fn same_size_rewrite_that_restores_the_old_mtime_is_detected() {
    // What `cp -p` or `tar x` do: new bytes, old mtime. The inode change time still moves.
    let q = Quarry::new();
    let root = q.corpus("c", &[("a.md", "# A\n\nword1 aaaa\n")]);
    let path = root.join("a.md");
    let old = SystemTime::now() - Duration::from_secs(3600);
    let set_mtime = |t: SystemTime| {
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(t)
            .unwrap()
    };
    set_mtime(old);
    q.add(&root, "c");
    std::fs::write(&path, "# A\n\nword1 dddd\n").unwrap();
    set_mtime(old);
    q.ok(&["update"]);
    assert_eq!(q.search_files(&["dddd"]), ["c/a.md"]);
    assert!(q.search_files(&["aaaa"]).is_empty());
}
