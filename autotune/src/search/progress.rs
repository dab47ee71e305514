//! The progress bar of a tuning run (indicatif, feature `progress`): position, ETA and best so far;
//! hidden when standard error is not a terminal or when turned off. Without the feature (a
//! library user's build) there is no bar.

#[cfg(feature = "progress")]
use std::io::IsTerminal;

#[cfg(feature = "progress")]
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A progress bar that may be hidden.
#[cfg(feature = "progress")]
pub(crate) struct Progress {
    bar: ProgressBar,
}

/// No progress bar (this build has no feature `progress`).
#[cfg(not(feature = "progress"))]
pub(crate) struct Progress;

#[cfg(not(feature = "progress"))]
impl Progress {
    /// Nothing to draw.
    pub(crate) fn new(_len: u64, _enabled: bool) -> Progress {
        Progress
    }

    /// Nothing to draw.
    pub(crate) fn step_by(&self, _n: usize, _best_ns: Option<u64>) {}

    /// Nothing to remove.
    pub(crate) fn finish(&self) {}
}

#[cfg(feature = "progress")]
impl Progress {
    /// A bar of `len` steps, drawn on standard error only if `enabled` and it is a terminal.
    pub(crate) fn new(len: u64, enabled: bool) -> Progress {
        let target = if enabled && std::io::stderr().is_terminal() {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        let bar = ProgressBar::with_draw_target(Some(len), target);
        if let Ok(style) =
            ProgressStyle::with_template("tuning [{elapsed_precise}] {bar:30} {pos}/{len} ETA {eta} best: {msg}")
        {
            bar.set_style(style);
        }
        bar.set_message("-");
        Progress { bar }
    }

    /// `n` more trials finished; `best_ns` is the best time so far.
    pub(crate) fn step_by(&self, n: usize, best_ns: Option<u64>) {
        self.bar.inc(n as u64);
        if let Some(ns) = best_ns {
            self.bar.set_message(format!("{:.3} us", ns as f64 / 1e3));
        }
    }

    /// Removes the bar.
    pub(crate) fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
