//! Progress on a terminal: a bar on stderr when stderr is a TTY, nothing when piped.
//! Warnings always go to stderr.

use std::io::IsTerminal;
use std::sync::Mutex;

use indicatif::{ProgressBar, ProgressStyle};
use quarry_engine::Progress;

pub(crate) struct CliProgress {
    tty: bool,
    bar: Mutex<Option<ProgressBar>>,
}

impl CliProgress {
    pub(crate) fn new() -> Self {
        CliProgress {
            tty: std::io::stderr().is_terminal(),
            bar: Mutex::new(None),
        }
    }

    fn bar(&self) -> std::sync::MutexGuard<'_, Option<ProgressBar>> {
        self.bar.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Progress for CliProgress {
    fn begin(&self, label: &str, total: u64) {
        if !self.tty {
            return;
        }
        // Unknown totals get a spinner with a count; known ones a bar with rate and ETA.
        let (bar, template) = if total == 0 {
            (
                ProgressBar::new_spinner(),
                "{spinner} {msg} {human_pos} {elapsed}",
            )
        } else {
            (
                ProgressBar::new(total),
                "{msg} [{bar:30}] {human_pos}/{human_len} ({per_sec}), ETA {eta}",
            )
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

    fn advance(&self, n: u64) {
        if let Some(b) = self.bar().as_ref() {
            b.inc(n);
        }
    }

    fn end(&self) {
        if let Some(b) = self.bar().take() {
            b.finish_and_clear();
        }
    }

    fn warn(&self, message: &str) {
        match self.bar().as_ref() {
            Some(b) => b.println(format!("warning: {message}")),
            None => eprintln!("warning: {message}"),
        }
    }

    fn waiting(&self, message: &str) {
        eprintln!("{message}");
    }
}
