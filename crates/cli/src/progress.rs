//! Progress of the long-running commands (`experiment NAME`, `machine sweep`, `machine
//! segments`), always on stderr so that stdout keeps only reports and `--json`.
//!
//! On a terminal it is an indicatif bar. When stderr is not a terminal (a batch job, a log
//! file, a pipe) it is one plain line per finished point, at most one every
//! [`PLAIN_EVERY`] plus always the last:
//!
//! ```text
//! experiment fastpath: point 7 of 36 done, 0:41 elapsed, about 2:50 left
//! ```
//!
//! The estimate is the mean wall time per finished point times the points left. A parent
//! that runs points in child processes sets [`QUIET_ENV`] on them, so that only the parent
//! reports progress.

use std::io::IsTerminal as _;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// Set (to anything) in a child's environment: that process shows no progress at all.
pub(crate) const QUIET_ENV: &str = "LOCKSTACK_NO_PROGRESS";

/// The least time between two plain lines (the last point's line is always printed).
pub(crate) const PLAIN_EVERY: Duration = Duration::from_secs(2);

/// How progress is shown.
enum Mode {
    /// An indicatif bar (stderr is a terminal).
    Bar(ProgressBar),
    /// Plain periodic lines (stderr is not a terminal).
    Plain {
        /// When the last line was printed, `None` before the first.
        last: Option<Instant>,
    },
    /// Nothing ([`QUIET_ENV`] is set).
    Quiet,
}

/// Progress over `total` points named `what` ("experiment fastpath", "sweep").
pub(crate) struct Progress {
    what: String,
    total: u64,
    done: u64,
    start: Instant,
    mode: Mode,
}

impl Progress {
    /// Starts the clock for `total` points; the mode follows stderr and [`QUIET_ENV`].
    pub(crate) fn new(what: impl Into<String>, total: usize) -> Self {
        let what = what.into();
        let total = total as u64;
        let mode = if std::env::var_os(QUIET_ENV).is_some() {
            Mode::Quiet
        } else if std::io::stderr().is_terminal() {
            let bar = ProgressBar::new(total);
            if let Ok(style) =
                ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} points, eta {eta} {msg}")
            {
                bar.set_style(style.progress_chars("=> "));
            }
            bar.set_prefix(what.clone());
            Mode::Bar(bar)
        } else {
            Mode::Plain { last: None }
        };
        Self { what, total, done: 0, start: Instant::now(), mode }
    }

    /// Names the point(s) now running: the bar's message; plain lines leave it out.
    pub(crate) fn set_message(&self, msg: impl Into<String>) {
        if let Mode::Bar(bar) = &self.mode {
            bar.set_message(msg.into());
        }
    }

    /// A line of its own on stderr (above the bar on a terminal); not printed under
    /// [`QUIET_ENV`].
    pub(crate) fn println(&self, line: impl AsRef<str>) {
        match &self.mode {
            Mode::Bar(bar) => bar.println(line.as_ref()),
            Mode::Plain { .. } => errln!("{}", line.as_ref()),
            Mode::Quiet => {}
        }
    }

    /// `done` points of the total have finished.
    pub(crate) fn set_done(&mut self, done: usize) {
        self.done = (done as u64).min(self.total);
        match &mut self.mode {
            Mode::Bar(bar) => bar.set_position(self.done),
            Mode::Plain { last } => {
                let now = Instant::now();
                let due = last.is_none_or(|t| now.duration_since(t) >= PLAIN_EVERY);
                if due || self.done == self.total {
                    *last = Some(now);
                    errln!("{}", plain_line(&self.what, self.done, self.total, now - self.start));
                }
            }
            Mode::Quiet => {}
        }
    }

    /// One more point has finished.
    pub(crate) fn inc(&mut self) {
        self.set_done(self.done as usize + 1);
    }

    /// Clears the bar (plain lines stay where they are).
    pub(crate) fn finish(&self) {
        if let Mode::Bar(bar) = &self.mode {
            bar.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    /// A run that ends early (an error) leaves no bar behind either.
    fn drop(&mut self) {
        self.finish();
    }
}

/// `WHAT: point K of N done, M:SS elapsed, about M:SS left` (no estimate once K is N).
pub(crate) fn plain_line(what: &str, done: u64, total: u64, elapsed: Duration) -> String {
    let mut s = format!("{what}: point {done} of {total} done, {} elapsed", clock(elapsed));
    if done > 0 && done < total {
        let left = elapsed.mul_f64((total - done) as f64 / done as f64);
        s.push_str(&format!(", about {} left", clock(left)));
    }
    s
}

/// `M:SS`, or `H:MM:SS` from an hour on.
fn clock(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_lines_give_elapsed_and_the_mean_based_estimate() {
        let l = plain_line("experiment fastpath", 7, 36, Duration::from_secs(41));
        // 41 s / 7 points * 29 points left = 169.9 s.
        assert_eq!(l, "experiment fastpath: point 7 of 36 done, 0:41 elapsed, about 2:49 left");
        let l = plain_line("sweep", 3, 3, Duration::from_secs(3725));
        assert_eq!(l, "sweep: point 3 of 3 done, 1:02:05 elapsed");
    }
}
