//! The one error type of an experiment's files: writing, drawing, re-reading and checking them.
//! No locks.

use std::path::{Path, PathBuf};

/// What went wrong with an experiment's files; each displays as one line naming the file.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// Reading, writing or parsing `path` failed (the I/O, CSV or JSON error's text).
    #[error("{}: {message}", path.display())]
    File {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error's text.
        message: String,
    },
    /// `path` is well formed but wrong (a count, a missing legend entry, a bad value).
    #[error("{}: {what}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        what: String,
    },
    /// Encoding the result as JSON failed.
    #[error("encoding JSON: {0}")]
    Encode(String),
    /// Plotters refused to draw (its error's text).
    #[error("{0}")]
    Draw(String),
    /// Writing the sensitivity table failed (the error names the file).
    #[error("{0}")]
    Sensitivity(crate::experiments::sensitivity::WriteCsvError),
}

impl OutputError {
    /// An I/O, CSV or JSON error `e` on `path`.
    pub fn file(path: &Path, e: impl std::fmt::Display) -> OutputError {
        OutputError::File { path: path.to_path_buf(), message: e.to_string() }
    }

    /// `path` is wrong: `what`.
    pub fn invalid(path: &Path, what: impl Into<String>) -> OutputError {
        OutputError::Invalid { path: path.to_path_buf(), what: what.into() }
    }
}

/// The message, for callers that report errors as text (the CLI's failures).
impl From<OutputError> for String {
    fn from(e: OutputError) -> String {
        e.to_string()
    }
}
