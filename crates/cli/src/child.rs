//! Running this binary again as a child process, for the commands that fan their runs out
//! (`machine segments`, `machine layout`, `machine sweep`, `experiment --jobs`): finding the
//! binary, a command for it with the progress bar off and no standard input, and the one
//! line that names a failed child's error. Takes no lock.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::Failure;

/// This binary's path, to run it again as a child.
///
/// # Errors
/// [`Failure::run`] (exit 2) reading `"{context}: {error}"` when the platform cannot say.
pub(crate) fn this_binary(context: &str) -> Result<PathBuf, Failure> {
    std::env::current_exe().map_err(|e| Failure::run(format!("{context}: {e}")))
}

/// A command that runs `exe` with its progress bar off ([`crate::progress::QUIET_ENV`]) and
/// standard input closed; the caller adds the arguments and where the output goes.
pub(crate) fn command(exe: &Path) -> Command {
    let mut cmd = Command::new(exe);
    cmd.env(crate::progress::QUIET_ENV, "1").stdin(Stdio::null());
    cmd
}

/// The last non-empty line of a failed child's standard error, `"no message"` if it wrote
/// nothing.
pub(crate) fn last_line(stderr: &str) -> &str {
    stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("no message")
}

/// [`last_line`] of the file a child's standard error went to (`"no message"` if it cannot be
/// read).
pub(crate) fn last_line_of(path: &Path) -> String {
    std::fs::read_to_string(path).map(|t| last_line(&t).to_string()).unwrap_or_else(|_| "no message".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_line_skips_trailing_blank_lines_and_says_when_there_is_none() {
        assert_eq!(last_line("warning\nerror: bad\n\n  \n"), "error: bad");
        assert_eq!(last_line(""), "no message");
        assert_eq!(last_line("\n \n"), "no message");
    }
}
