//! A folder watched through the operating system's file notifications (inotify on Linux,
//! FSEvents on macOS, `ReadDirectoryChangesW` on Windows, through the `notify` crate), for
//! folder sources that sync on change.
//!
//! [`FolderWatcher::start`] watches every folder of the tree the folder source would list
//! — hidden folders, `node_modules` and what `.gitignore`/`.ignore` exclude are not watched
//! — and reports, through its callback, [`WatchEvent`]s:
//!
//! - [`WatchEvent::Changed`]: the paths (relative to the root, `/`-separated) that were
//!   created, written, renamed (both names) or deleted, debounced: a path is reported once
//!   the folder has been quiet for [`WatchOptions::quiet`] (or at the latest
//!   [`WatchOptions::max_delay`] after its first event), so an editor's save — written to a
//!   temporary file then renamed over the original, or the original renamed to a backup
//!   first — arrives as one batch that holds the file's final state, and a burst of changes
//!   as a few batches. A folder in a batch stands for everything under it (created, moved
//!   in or out, deleted: the files inside were not seen one by one). Paths the source does
//!   not sync (the mask, hidden entries, ignore rules) are left out, except a path that is
//!   gone and may have been a file the mask admits or a watched folder: what it was is the
//!   store's to say. A changed `.gitignore` or `.ignore` reports its folder.
//! - [`WatchEvent::Rescan`]: events were lost, or cannot be told apart — the kernel's queue
//!   overflowed, a watch could not be added (the system's limit on watches), the root itself
//!   was moved or deleted, the ignore rules at the root changed, or a batch grew past
//!   [`WatchOptions::max_paths`]. The caller syncs the whole folder (a reconciliation scan),
//!   which it also does once when it starts watching: events before the watch existed were
//!   never seen.
//!
//! The callback runs on the watcher's own thread; events that arrive meanwhile wait in a
//! queue. Dropping the watcher stops it.

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use notify::{EventKind, RecursiveMode, Watcher};
use quarry_ingest::IgnoreRules;

use crate::error::SourceError;
use crate::mask::FileMask;

/// How a watcher debounces.
#[derive(Debug, Clone)]
pub struct WatchOptions {
    /// A batch is reported once no event came for this long.
    pub quiet: Duration,
    /// ... or at the latest this long after its first event (a folder that never goes
    /// quiet still syncs).
    pub max_delay: Duration,
    /// A batch with more paths than this is reported as a [`WatchEvent::Rescan`]: one
    /// listing of the folder costs less than looking at each path.
    pub max_paths: usize,
}

impl Default for WatchOptions {
    fn default() -> WatchOptions {
        WatchOptions {
            quiet: Duration::from_millis(150),
            max_delay: Duration::from_secs(1),
            max_paths: 10_000,
        }
    }
}

/// What a watcher reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchEvent {
    /// Paths that changed (relative to the root, `/`-separated, sorted; a folder stands for
    /// everything under it).
    Changed(Vec<String>),
    /// Changes were lost or are too many to list: sync the whole folder. Why, in words.
    Rescan(String),
}

/// What the watcher's thread receives.
enum Message {
    Event(notify::Result<notify::Event>),
    Stop,
}

/// A watched folder; dropping it stops the watch.
pub struct FolderWatcher {
    tx: Sender<Message>,
    thread: Option<JoinHandle<()>>,
}

impl FolderWatcher {
    /// Watches the folder at `root` (absolute) for the paths `mask` admits, calling
    /// `on_event` with each batch. The watches are in place when this returns: a change made
    /// after it is reported (a scan begun after it sees everything before).
    pub fn start(
        root: &Path,
        mask: FileMask,
        options: WatchOptions,
        on_event: Box<dyn FnMut(WatchEvent) + Send>,
    ) -> Result<FolderWatcher, SourceError> {
        if !root.is_absolute() {
            return Err(SourceError::Invalid(format!(
                "the folder {} must be given as an absolute path",
                root.display()
            )));
        }
        if !root.is_dir() {
            return Err(SourceError::NotFound(format!(
                "the folder {} does not exist (or is not a directory)",
                root.display()
            )));
        }
        let (tx, rx) = channel();
        let events = tx.clone();
        let watcher = notify::recommended_watcher(move |e: notify::Result<notify::Event>| {
            // Reads (our own syncs open every file they fetch) change nothing.
            if let Ok(ev) = &e
                && matches!(ev.kind, EventKind::Access(_))
            {
                return;
            }
            let _ = events.send(Message::Event(e));
        })
        .map_err(|e| watch_error(root, e))?;
        let mut state = State {
            root: root.to_path_buf(),
            mask,
            options,
            watcher,
            watched: HashSet::new(),
            pending: BTreeSet::new(),
            rescan: None,
            first: None,
            last: None,
            rules: None,
            on_event,
        };
        // Watch problems now (a limit reached) are the caller's to know of at once.
        if let Some(problem) = state.watch_tree(root) {
            return Err(SourceError::Unavailable(problem));
        }
        let thread = std::thread::Builder::new()
            .name("quarry-folder-watch".into())
            .spawn(move || state.run(&rx))
            .map_err(|e| SourceError::Unavailable(format!("cannot start a watcher: {e}")))?;
        Ok(FolderWatcher {
            tx,
            thread: Some(thread),
        })
    }
}

impl Drop for FolderWatcher {
    fn drop(&mut self) {
        let _ = self.tx.send(Message::Stop);
        if let Some(t) = self.thread.take() {
            // Not from the watcher's own callback (it would wait for itself).
            if t.thread().id() != std::thread::current().id() {
                let _ = t.join();
            }
        }
    }
}

fn watch_error(root: &Path, e: notify::Error) -> SourceError {
    SourceError::Unavailable(format!("cannot watch {} for changes: {e}", root.display()))
}

/// The watcher's thread: the watches, and the batch being debounced.
struct State {
    root: PathBuf,
    mask: FileMask,
    options: WatchOptions,
    watcher: notify::RecommendedWatcher,
    /// Folders watched (absolute).
    watched: HashSet<PathBuf>,
    /// Paths changed since the last batch.
    pending: BTreeSet<String>,
    /// Why the next batch is a rescan.
    rescan: Option<String>,
    /// When the batch's first and latest events came.
    first: Option<Instant>,
    last: Option<Instant>,
    /// The ignore rules as this batch read them.
    rules: Option<IgnoreRules>,
    on_event: Box<dyn FnMut(WatchEvent) + Send>,
}

impl State {
    fn run(mut self, rx: &Receiver<Message>) {
        loop {
            let wait = match (self.first, self.last) {
                (Some(first), Some(last)) => {
                    let due = (last + self.options.quiet).min(first + self.options.max_delay);
                    due.saturating_duration_since(Instant::now())
                }
                _ => Duration::from_secs(3600),
            };
            match rx.recv_timeout(wait) {
                Ok(Message::Stop) | Err(RecvTimeoutError::Disconnected) => return,
                Ok(Message::Event(e)) => {
                    self.take(e);
                    let now = Instant::now();
                    if self.rescan.is_some() || !self.pending.is_empty() {
                        self.first.get_or_insert(now);
                        self.last = Some(now);
                    }
                }
                Err(RecvTimeoutError::Timeout) => self.flush(),
            }
        }
    }

    /// Reports the batch.
    fn flush(&mut self) {
        self.first = None;
        self.last = None;
        self.rules = None;
        if self.pending.len() > self.options.max_paths && self.rescan.is_none() {
            self.rescan = Some(format!(
                "more than {} paths changed at once",
                self.options.max_paths
            ));
        }
        if let Some(why) = self.rescan.take() {
            self.pending.clear();
            // Folders made while events were lost have no watch yet.
            if let Some(problem) = self.watch_tree(&self.root.clone()) {
                (self.on_event)(WatchEvent::Rescan(problem));
            }
            (self.on_event)(WatchEvent::Rescan(why));
        } else if !self.pending.is_empty() {
            let paths = std::mem::take(&mut self.pending).into_iter().collect();
            (self.on_event)(WatchEvent::Changed(paths));
        }
    }

    /// Takes one event into the batch.
    fn take(&mut self, event: notify::Result<notify::Event>) {
        let event = match event {
            Ok(e) => e,
            Err(e) => {
                self.rescan = Some(match e.kind {
                    notify::ErrorKind::MaxFilesWatch => limit_reached(),
                    _ => format!("the file notifications failed: {e}"),
                });
                return;
            }
        };
        if event.need_rescan() {
            self.rescan = Some("the kernel's queue of file notifications overflowed".into());
            return;
        }
        if matches!(event.kind, EventKind::Access(_)) {
            return;
        }
        let mut rules = self
            .rules
            .take()
            .unwrap_or_else(|| IgnoreRules::new(&self.root));
        for path in &event.paths {
            if path == &self.root {
                if !self.root.is_dir() {
                    self.rescan = Some("the folder was moved or deleted".into());
                }
                continue;
            }
            let Some(rel) = path
                .strip_prefix(&self.root)
                .ok()
                .and_then(|r| r.to_str())
                .map(|r| quarry_ingest::nfc(&r.replace(std::path::MAIN_SEPARATOR, "/")))
            else {
                continue;
            };
            self.take_path(path, &rel, &mut rules);
        }
        self.rules = Some(rules);
    }

    fn take_path(&mut self, path: &Path, rel: &str, rules: &mut IgnoreRules) {
        let (parent, name) = match rel.rsplit_once('/') {
            Some((p, n)) => (p, n),
            None => ("", rel),
        };
        // The rules changed: what the folder holds may have changed everywhere under it.
        if name == ".gitignore" || name == ".ignore" {
            *rules = IgnoreRules::new(&self.root);
            if parent.is_empty() {
                self.rescan = Some(format!("{name} changed at the root"));
            } else if !rules.excludes(parent, true) {
                self.pending.insert(parent.to_owned());
            }
            return;
        }
        let was_watched = self.watched.contains(path);
        match std::fs::symlink_metadata(path) {
            Ok(m) if m.is_dir() => {
                if rules.excludes(rel, true) {
                    return;
                }
                // Moved here from elsewhere, or made: watch it (and what it holds) now.
                if !was_watched && let Some(problem) = self.watch_tree(path) {
                    self.rescan = Some(problem);
                }
                self.pending.insert(rel.to_owned());
            }
            Ok(m) => {
                // A file now, or a link: what was watched under this name is gone.
                if was_watched {
                    self.unwatch_tree(path);
                    self.pending.insert(rel.to_owned());
                } else if m.is_file() && self.mask.admits(rel) && !rules.excludes(rel, false) {
                    self.pending.insert(rel.to_owned());
                }
            }
            Err(_) => {
                // Gone (moved away or deleted): a watched folder is, and so is a file the
                // source may have synced.
                if was_watched {
                    self.unwatch_tree(path);
                    self.pending.insert(rel.to_owned());
                } else if self.mask.admits(rel) && !rules.excludes(rel, false) {
                    self.pending.insert(rel.to_owned());
                }
            }
        }
    }

    /// Watches `dir` and the folders under it the source lists; the problem that loses
    /// events everywhere (the limit on watches), in words. A folder that cannot be watched
    /// otherwise (unreadable) is left out: the full sync reports it.
    fn watch_tree(&mut self, dir: &Path) -> Option<String> {
        let mut rules = IgnoreRules::new(&self.root);
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            if !self.watched.contains(&d) {
                match self.watcher.watch(&d, RecursiveMode::NonRecursive) {
                    Ok(()) => {
                        self.watched.insert(d.clone());
                    }
                    Err(e) => match e.kind {
                        notify::ErrorKind::MaxFilesWatch => return Some(limit_reached()),
                        // Gone already (its parent's event says so), or unreadable.
                        _ => continue,
                    },
                }
            }
            let Ok(entries) = std::fs::read_dir(&d) else {
                continue;
            };
            for entry in entries.flatten() {
                if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                    continue;
                }
                let sub = entry.path();
                let Some(rel) = sub
                    .strip_prefix(&self.root)
                    .ok()
                    .and_then(|r| r.to_str())
                    .map(|r| r.replace(std::path::MAIN_SEPARATOR, "/"))
                else {
                    continue;
                };
                if !rules.excludes(&rel, true) {
                    stack.push(sub);
                }
            }
        }
        None
    }

    /// Stops watching `dir` and the folders under it (moved away or deleted: a watch that
    /// followed a moved folder would report its new contents under the old name).
    fn unwatch_tree(&mut self, dir: &Path) {
        let gone: Vec<PathBuf> = self
            .watched
            .iter()
            .filter(|w| w.starts_with(dir))
            .cloned()
            .collect();
        for w in gone {
            let _ = self.watcher.unwatch(&w);
            self.watched.remove(&w);
        }
    }
}

fn limit_reached() -> String {
    "the system's limit on watched folders was reached (raise fs.inotify.max_user_watches): \
     changes may be missed until the next full sync"
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// A watcher over a fresh folder, its events on a channel.
    struct Harness {
        dir: tempfile::TempDir,
        rx: mpsc::Receiver<WatchEvent>,
        _watcher: FolderWatcher,
    }

    impl Harness {
        fn new(mask: &str, setup: impl FnOnce(&Path)) -> Harness {
            let dir = tempfile::tempdir().unwrap();
            setup(dir.path());
            let (tx, rx) = mpsc::channel();
            let watcher = FolderWatcher::start(
                dir.path(),
                FileMask::parse(mask).unwrap(),
                WatchOptions {
                    quiet: Duration::from_millis(100),
                    max_delay: Duration::from_millis(800),
                    max_paths: 1000,
                },
                Box::new(move |e| {
                    let _ = tx.send(e);
                }),
            )
            .unwrap();
            Harness {
                dir,
                rx,
                _watcher: watcher,
            }
        }

        fn path(&self, rel: &str) -> PathBuf {
            self.dir.path().join(rel)
        }

        fn write(&self, rel: &str, text: &str) {
            let p = self.path(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }

        /// The events of the next `within`, changed paths merged.
        fn collect(&self, within: Duration) -> (BTreeSet<String>, Vec<String>, usize) {
            let deadline = Instant::now() + within;
            let (mut paths, mut rescans, mut batches) = (BTreeSet::new(), Vec::new(), 0);
            while let Some(left) = deadline.checked_duration_since(Instant::now()) {
                match self.rx.recv_timeout(left) {
                    Ok(WatchEvent::Changed(p)) => {
                        batches += 1;
                        paths.extend(p);
                    }
                    Ok(WatchEvent::Rescan(why)) => rescans.push(why),
                    Err(_) => break,
                }
            }
            (paths, rescans, batches)
        }

        /// Waits until the changed paths reported include `want` (or a few seconds pass);
        /// returns everything reported meanwhile.
        fn until(&self, want: &[&str]) -> BTreeSet<String> {
            let deadline = Instant::now() + Duration::from_secs(10);
            let mut seen = BTreeSet::new();
            while !want.iter().all(|w| seen.contains(*w)) {
                let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                    panic!("waited for {want:?}, saw {seen:?}");
                };
                match self.rx.recv_timeout(left) {
                    Ok(WatchEvent::Changed(p)) => seen.extend(p),
                    Ok(WatchEvent::Rescan(why)) => panic!("unexpected rescan: {why}"),
                    Err(_) => panic!("waited for {want:?}, saw {seen:?}"),
                }
            }
            seen
        }
    }

    fn set(paths: &[&str]) -> BTreeSet<String> {
        paths.iter().map(|p| p.to_string()).collect()
    }

    #[test]
    fn creations_writes_and_deletions_are_reported() {
        let h = Harness::new("**", |r| {
            std::fs::write(r.join("old.md"), "old").unwrap();
        });
        h.write("new.md", "# New");
        assert_eq!(h.until(&["new.md"]), set(&["new.md"]));
        // Appending (several writes) is one change.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(h.path("new.md"))
            .unwrap();
        for _ in 0..5 {
            std::io::Write::write_all(&mut f, b"\nmore").unwrap();
        }
        drop(f);
        assert_eq!(h.until(&["new.md"]), set(&["new.md"]));
        std::fs::remove_file(h.path("old.md")).unwrap();
        assert_eq!(h.until(&["old.md"]), set(&["old.md"]));
        let (rest, rescans, _) = h.collect(Duration::from_millis(400));
        assert!(
            rest.is_empty() && rescans.is_empty(),
            "{rest:?} {rescans:?}"
        );
    }

    #[test]
    fn an_editor_saving_through_a_temporary_file_is_one_batch() {
        let h = Harness::new("**/*.md", |r| {
            std::fs::write(r.join("note.md"), "v1").unwrap();
        });
        // VS Code, gedit, Emacs: write a temporary file beside it, rename it over.
        h.write(".note.md.tmp~", "v2");
        std::fs::rename(h.path(".note.md.tmp~"), h.path("note.md")).unwrap();
        let (paths, rescans, batches) = h.collect(Duration::from_millis(700));
        assert_eq!(
            paths,
            set(&["note.md"]),
            "the hidden temporary file is left out"
        );
        assert_eq!((batches, rescans.len()), (1, 0));
        // vim (backupcopy=no): the original renamed to a backup, a new file written, the
        // backup deleted — the same path, changed, in one batch.
        std::fs::rename(h.path("note.md"), h.path("note.md~")).unwrap();
        h.write("note.md", "v3");
        std::fs::remove_file(h.path("note.md~")).unwrap();
        let (paths, _, batches) = h.collect(Duration::from_millis(700));
        assert_eq!(paths, set(&["note.md"]), "note.md~ is not a Markdown file");
        assert_eq!(batches, 1);
        // An editor's temporary file in the mask, written and renamed away: both names come
        // in one batch and the sync finds the temporary one gone.
        h.write("4913.md", "");
        std::fs::rename(h.path("4913.md"), h.path("other.md")).unwrap();
        let (paths, _, batches) = h.collect(Duration::from_millis(700));
        assert_eq!(paths, set(&["4913.md", "other.md"]));
        assert_eq!(batches, 1);
    }

    #[test]
    fn renames_report_both_names_and_folders_stand_for_their_files() {
        let h = Harness::new("**/*.md", |r| {
            std::fs::create_dir_all(r.join("a/sub")).unwrap();
            std::fs::write(r.join("a/sub/x.md"), "x").unwrap();
            std::fs::write(r.join("one.md"), "1").unwrap();
        });
        std::fs::rename(h.path("one.md"), h.path("two.md")).unwrap();
        assert_eq!(h.until(&["one.md", "two.md"]), set(&["one.md", "two.md"]));
        // A folder moved: its old and new names (everything under them).
        std::fs::rename(h.path("a"), h.path("b")).unwrap();
        assert_eq!(h.until(&["a", "b"]), set(&["a", "b"]));
        // The moved folder is watched under its new name, and not under the old one.
        h.write("b/sub/y.md", "y");
        assert_eq!(h.until(&["b/sub/y.md"]), set(&["b/sub/y.md"]));
        // A folder made with files in it at once: the folder (its files may predate its
        // watch), then what is written in it later.
        std::fs::create_dir_all(h.path("c/d")).unwrap();
        std::fs::write(h.path("c/d/z.md"), "z").unwrap();
        let seen = h.until(&["c"]);
        assert!(seen.iter().all(|p| p.starts_with('c')), "{seen:?}");
        h.write("c/d/later.md", "later");
        h.until(&["c/d/later.md"]);
        std::fs::remove_dir_all(h.path("b")).unwrap();
        let seen = h.until(&["b"]);
        assert!(seen.iter().all(|p| p.starts_with('b')), "{seen:?}");
    }

    #[test]
    fn what_the_source_does_not_sync_is_left_out() {
        let h = Harness::new("**/*.md", |r| {
            std::fs::write(r.join(".gitignore"), "drafts/\n*.tmp.md\n").unwrap();
            std::fs::create_dir_all(r.join("drafts")).unwrap();
            std::fs::create_dir_all(r.join("node_modules/pkg")).unwrap();
            std::fs::create_dir_all(r.join(".git")).unwrap();
        });
        h.write("image.png", "png");
        h.write("drafts/d.md", "d");
        h.write("x.tmp.md", "x");
        h.write("node_modules/pkg/readme.md", "m");
        h.write(".git/index.md", "g");
        h.write(".hidden.md", "h");
        h.write("kept.md", "k");
        let (paths, rescans, _) = h.collect(Duration::from_millis(900));
        assert_eq!(paths, set(&["kept.md"]));
        assert!(rescans.is_empty(), "{rescans:?}");
        // Ignore rules changing in a folder: that folder is looked at again; at the root,
        // everything.
        h.write("sub/.gitignore", "*.md\n");
        assert!(h.until(&["sub"]).contains("sub"));
        h.write(".gitignore", "");
        let (_, rescans, _) = h.collect(Duration::from_millis(900));
        assert_eq!(rescans.len(), 1, "{rescans:?}");
    }

    #[test]
    fn a_burst_is_a_few_batches_and_too_many_paths_a_rescan() {
        let h = Harness::new("**", |_| {});
        for i in 0..300 {
            h.write(&format!("burst/{i:03}.md"), "x");
        }
        let (paths, rescans, batches) = h.collect(Duration::from_millis(1500));
        assert!(rescans.is_empty(), "{rescans:?}");
        // The folder may be seen before its watch (then it stands for its files).
        assert!(
            paths.contains("burst") || paths.len() == 300,
            "{} paths",
            paths.len()
        );
        assert!(batches <= 3, "{batches} batches");
        for i in 0..1200 {
            h.write(&format!("burst/many-{i:04}.md"), "x");
        }
        // Usually one batch past the limit, answered by a rescan; on a loaded machine the
        // events may trickle in as smaller batches, which must then name every file.
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut seen = BTreeSet::new();
        let mut rescans = Vec::new();
        while rescans.is_empty() && seen.len() < 1200 && Instant::now() < deadline {
            let (paths, more, _) = h.collect(Duration::from_millis(500));
            seen.extend(paths.into_iter().filter(|p| p.contains("many-")));
            rescans.extend(more);
        }
        assert!(
            rescans.iter().any(|r| r.contains("more than 1000")) || seen.len() == 1200,
            "rescans {rescans:?}, {} of 1200 paths",
            seen.len()
        );
    }

    #[test]
    fn the_root_going_away_is_a_rescan() {
        let h = Harness::new("**", |r| std::fs::create_dir_all(r.join("x")).unwrap());
        let moved = tempfile::tempdir().unwrap();
        std::fs::rename(h.dir.path(), moved.path().join("away")).unwrap();
        let (_, rescans, _) = h.collect(Duration::from_millis(900));
        assert!(
            rescans.iter().any(|r| r.contains("moved or deleted")),
            "{rescans:?}"
        );
        // Put back for the temporary folder's own cleanup.
        let _ = std::fs::rename(moved.path().join("away"), h.dir.path());
    }

    #[test]
    fn a_missing_or_relative_folder_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let nothing = || -> Box<dyn FnMut(WatchEvent) + Send> { Box::new(|_| {}) };
        assert!(matches!(
            FolderWatcher::start(
                &dir.path().join("gone"),
                FileMask::default(),
                WatchOptions::default(),
                nothing()
            ),
            Err(SourceError::NotFound(_))
        ));
        assert!(matches!(
            FolderWatcher::start(
                Path::new("rel"),
                FileMask::default(),
                WatchOptions::default(),
                nothing()
            ),
            Err(SourceError::Invalid(_))
        ));
    }

    #[test]
    fn an_overflow_is_a_rescan() {
        // The kernel's overflow arrives as an event flagged for a rescan.
        let dir = tempfile::tempdir().unwrap();
        let (tx, rx) = mpsc::channel();
        let watcher = notify::recommended_watcher(|_: notify::Result<notify::Event>| {}).unwrap();
        let mut state = State {
            root: dir.path().to_path_buf(),
            mask: FileMask::default(),
            options: WatchOptions::default(),
            watcher,
            watched: HashSet::new(),
            pending: set(&["a.md"]),
            rescan: None,
            first: None,
            last: None,
            rules: None,
            on_event: Box::new(move |e| {
                let _ = tx.send(e);
            }),
        };
        state.take(Ok(
            notify::Event::new(EventKind::Other).set_flag(notify::event::Flag::Rescan)
        ));
        state.flush();
        let got: Vec<WatchEvent> = rx.try_iter().collect();
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(matches!(&got[0], WatchEvent::Rescan(w) if w.contains("overflowed")));
        assert!(state.pending.is_empty(), "a rescan covers what was pending");
    }
}
