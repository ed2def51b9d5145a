//! Progress on stderr: a bar on a terminal; elsewhere (a pipe, `| tee log`, systemd) lines
//! for work that lasts — the first after [`FIRST_LINE_AFTER`], then every [`LINE_EVERY`],
//! and one when it ends — with counts, rate and time left over the whole run so far
//! (steadier than a bar's recent rate); quick work prints nothing, except a download, which
//! always gets its first and last line. Warnings always go to stderr.

use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use quarry_engine::Progress;

/// How long work runs before its first progress line when stderr is not a terminal.
const FIRST_LINE_AFTER: Duration = Duration::from_secs(2);

/// How often a progress line is written after the first.
const LINE_EVERY: Duration = Duration::from_secs(10);

pub(crate) struct CliProgress {
    tty: bool,
    bar: Mutex<Option<ProgressBar>>,
    lines: Mutex<Option<Lines>>,
}

/// Progress written as lines (stderr not a terminal).
struct Lines {
    label: String,
    total: u64,
    done: u64,
    /// The counts are bytes (a download): written in MB.
    bytes: bool,
    /// What the caller says of the work after the counts ([`CliProgress::update`]), written
    /// instead of a rate and time left of this process's own counting.
    detail: Option<String>,
    started: Instant,
    /// When the last line was written; `None` before the first.
    written: Option<Instant>,
}

impl Lines {
    fn line(&self) -> String {
        let secs = self.started.elapsed().as_secs_f64();
        let rate = if secs > 0.0 {
            self.done as f64 / secs
        } else {
            0.0
        };
        let n = |v: u64| self.count_text(v);
        let mut line = if self.total > 0 {
            format!("{}: {}/{}", self.label, n(self.done), n(self.total))
        } else {
            format!("{}: {}", self.label, n(self.done))
        };
        if let Some(detail) = &self.detail {
            line.push_str(detail);
            return line;
        }
        if self.done > 0 && secs >= 1.0 {
            if self.bytes {
                line.push_str(&format!(" ({:.1} MB/s", rate / 1e6));
            } else {
                line.push_str(&format!(" ({rate:.1}/s"));
            }
            if self.total > self.done && rate > 0.0 {
                let left = (self.total - self.done) as f64 / rate;
                line.push_str(&format!(", about {} left", duration_text(left)));
            }
            line.push(')');
        }
        line
    }

    fn count_text(&self, v: u64) -> String {
        if self.bytes {
            format!("{:.1} MB", v as f64 / 1e6)
        } else {
            v.to_string()
        }
    }
}

/// `42 s`, `3 min 5 s`, `2 h 10 min`.
pub(crate) fn duration_text(secs: f64) -> String {
    let s = secs.round() as u64;
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min {} s", s / 60, s % 60),
        _ => format!("{} h {} min", s / 3600, s % 3600 / 60),
    }
}

impl CliProgress {
    pub(crate) fn new() -> Self {
        CliProgress {
            tty: std::io::stderr().is_terminal(),
            bar: Mutex::new(None),
            lines: Mutex::new(None),
        }
    }

    fn bar(&self) -> std::sync::MutexGuard<'_, Option<ProgressBar>> {
        self.bar.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lines(&self) -> std::sync::MutexGuard<'_, Option<Lines>> {
        self.lines.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn start(&self, label: &str, total: u64, bytes: bool) {
        if !self.tty {
            let lines = Lines {
                label: label.to_owned(),
                total,
                done: 0,
                bytes,
                detail: None,
                started: Instant::now(),
                // A download is rare and may be large: always said, however quick.
                written: bytes.then(Instant::now),
            };
            if bytes {
                eprintln!("{}", lines.line());
            }
            *self.lines() = Some(lines);
            return;
        }
        // Unknown totals get a spinner with a count; known ones a bar with rate and ETA.
        let (bar, template) = match (total, bytes) {
            (0, false) => (
                ProgressBar::new_spinner(),
                "{spinner} {msg} {human_pos} {elapsed}",
            ),
            (0, true) => (
                ProgressBar::new_spinner(),
                "{spinner} {msg} {bytes} ({bytes_per_sec}) {elapsed}",
            ),
            (_, false) => (
                ProgressBar::new(total),
                "{msg} [{bar:30}] {human_pos}/{human_len} ({per_sec}), ETA {eta}",
            ),
            (_, true) => (
                ProgressBar::new(total),
                "{msg} [{bar:30}] {bytes}/{total_bytes} ({bytes_per_sec}), ETA {eta}",
            ),
        };
        let style = ProgressStyle::with_template(template)
            .map(|s| s.progress_chars("=> "))
            .unwrap_or_else(|_| ProgressStyle::default_bar());
        if total == 0 {
            bar.enable_steady_tick(std::time::Duration::from_millis(120));
        }
        bar.set_style(style);
        bar.set_message(label.to_owned());
        *self.bar() = Some(bar);
    }
}

impl CliProgress {
    /// Starts a phase of `total` steps whose rate and time left the caller knows better than
    /// this process's own counting could (a wait for uploads another process may process):
    /// its line says what [`CliProgress::update`] gives.
    pub(crate) fn begin_detailed(&self, label: &str, total: u64) {
        if !self.tty {
            self.start(label, total, false);
            if let Some(l) = self.lines().as_mut() {
                l.detail = Some(String::new());
            }
            return;
        }
        let bar = ProgressBar::new(total);
        let style =
            ProgressStyle::with_template("{prefix} [{bar:30}] {human_pos}/{human_len}{msg}")
                .map(|s| s.progress_chars("=> "))
                .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        bar.set_prefix(label.to_owned());
        *self.bar() = Some(bar);
    }

    /// `done` steps of a [`CliProgress::begin_detailed`] phase are done, and `detail` says
    /// the rest (written after the counts, e.g. `; 1234 chunks to embed (12.8/s, about
    /// 1 min 36 s left)`). Lines are written as for [`Progress::advance`].
    pub(crate) fn update(&self, done: u64, detail: &str) {
        if let Some(b) = self.bar().as_ref() {
            b.set_position(done);
            b.set_message(detail.to_owned());
        }
        if let Some(l) = self.lines().as_mut() {
            l.done = done;
            l.detail = Some(detail.to_owned());
            let due = match l.written {
                None => l.started.elapsed() >= FIRST_LINE_AFTER,
                Some(at) => at.elapsed() >= LINE_EVERY,
            };
            if due {
                l.written = Some(Instant::now());
                eprintln!("{}", l.line());
            }
        }
    }
}

impl Progress for CliProgress {
    fn begin(&self, label: &str, total: u64) {
        self.start(label, total, false);
    }

    fn begin_bytes(&self, label: &str, total: u64) {
        self.start(label, total, true);
    }

    fn advance(&self, n: u64) {
        if let Some(b) = self.bar().as_ref() {
            b.inc(n);
        }
        if let Some(l) = self.lines().as_mut() {
            l.done += n;
            let due = match l.written {
                None => l.started.elapsed() >= FIRST_LINE_AFTER,
                Some(at) => at.elapsed() >= LINE_EVERY,
            };
            if due {
                l.written = Some(Instant::now());
                eprintln!("{}", l.line());
            }
        }
    }

    fn end(&self) {
        if let Some(b) = self.bar().take() {
            b.finish_and_clear();
        }
        if let Some(l) = self.lines().take().filter(|l| l.written.is_some()) {
            eprintln!(
                "{}: {} done in {}",
                l.label,
                l.count_text(l.done),
                duration_text(l.started.elapsed().as_secs_f64())
            );
        }
    }

    fn warn(&self, message: &str) {
        match self.bar().as_ref() {
            Some(b) => b.println(format!("warning: {message}")),
            None => eprintln!("warning: {message}"),
        }
    }

    fn waiting(&self, message: &str) {
        match self.bar().as_ref() {
            Some(b) => b.println(message),
            None => eprintln!("{message}"),
        }
    }
}
