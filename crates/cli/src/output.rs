//! Output: human text or JSON on stdout, progress bars on stderr.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;
use std::io::{IsTerminal, Write};

/// Options every command sees.
#[derive(Clone, Copy, Debug, Default)]
pub struct Global {
    /// Print JSON on stdout instead of text.
    pub json: bool,
    /// No progress bars and no notes on stderr.
    pub quiet: bool,
}

impl Global {
    /// Prints a note for a human on stderr (not with `--quiet` or `--json`).
    pub fn note(&self, text: &str) {
        if !self.quiet && !self.json {
            let _ = writeln!(std::io::stderr(), "bam: {text}");
        }
    }

    /// A progress display of a stream of unknown length (bytes so far, decimal rate), on
    /// stderr under the same conditions as [`Global::progress`].
    pub fn progress_stream(&self, label: &str) -> ProgressBar {
        let bar = ProgressBar::with_draw_target(None, self.draw_target());
        let style = ProgressStyle::with_template(
            "{msg:9} [{elapsed_precise}] {spinner} {decimal_bytes} {decimal_bytes_per_sec}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_spinner());
        bar.set_style(style);
        bar.set_message(label.to_string());
        bar
    }

    fn draw_target(&self) -> ProgressDrawTarget {
        if !self.json && !self.quiet && std::io::stderr().is_terminal() {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        }
    }

    /// A progress bar of `total` bytes on stderr, hidden when stderr is not a terminal
    /// or with `--json` / `--quiet`.
    pub fn progress(&self, total: u64, label: &str) -> ProgressBar {
        let bar = ProgressBar::with_draw_target(Some(total), self.draw_target());
        let style = ProgressStyle::with_template(
            "{msg:9} [{elapsed_precise}] [{wide_bar}] {decimal_bytes}/{decimal_total_bytes} \
             {decimal_bytes_per_sec} ETA {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
        bar.set_style(style);
        bar.set_message(label.to_string());
        bar
    }
}

/// Writes text to stdout; a closed pipe is not an error worth a panic.
pub fn print(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

/// Writes `value` as pretty JSON and a newline to stdout.
pub fn print_json<T: Serialize>(value: &T) {
    match serde_json::to_string_pretty(value) {
        Ok(s) => print(&(s + "\n")),
        Err(e) => tracing::error!("cannot serialize the result: {e}"),
    }
}
