//! Reading user input files with a size bound, and quoting input in one-line messages.
//!
//! Every file a user names (a pgbench script, an isolation spec or its expected output, a
//! machine profile, a segment table, an experiment's point files) is read whole before it is
//! parsed; a file that never ends (`/dev/zero`, a FIFO fed forever) or is simply huge must be
//! refused after a bounded read, never buffered until memory runs out. The bound holds for
//! devices and FIFOs too: at most `limit + 1` bytes are ever read, whatever the file's kind or
//! claimed size. PostgreSQL's pgbench and isolation tester have no such bound (they read until
//! EOF); ours are stated with each reader (pgbench's `MAX_SCRIPT_BYTES`, the isolation runner's
//! `MAX_SPEC_BYTES`, the simulated machine's `MAX_PROFILE_BYTES`, ...).
//!
//! This module lives in the lowest crate so that every reader, `lockstack-sim` included (which
//! depends on no workload crate), goes through the same bound and the same messages.

use std::io::Read;
use std::path::Path;

/// Why a bounded read failed; displayed without the input's name (the caller adds it, or
/// [`NamedReadError`] does).
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The input could not be opened or read.
    #[error("{0}")]
    Io(std::io::Error),
    /// The input has more than this many bytes (only `limit + 1` of them were read).
    #[error("larger than {limit} bytes, the most accepted")]
    TooLarge {
        /// The most accepted, bytes.
        limit: u64,
    },
    /// The input is not UTF-8 text.
    #[error("not valid UTF-8 text (invalid byte at offset {offset})")]
    NotUtf8 {
        /// Byte offset of the first invalid byte.
        offset: usize,
    },
}

impl ReadError {
    /// Whether the input does not exist (an open that failed with `NotFound`).
    pub fn is_not_found(&self) -> bool {
        matches!(self, ReadError::Io(e) if e.kind() == std::io::ErrorKind::NotFound)
    }
}

/// A [`ReadError`] with the input it is about: displayed `"NAME: ERROR"` on one line, the name
/// quoted with [`one_line`].
#[derive(Debug, thiserror::Error)]
#[error("{}: {error}", one_line(name))]
pub struct NamedReadError {
    /// The input: a file's path as given, or "standard input".
    pub name: String,
    /// What went wrong.
    #[source]
    pub error: ReadError,
}

/// The one-line message, for callers whose errors are still messages.
impl From<NamedReadError> for String {
    fn from(e: NamedReadError) -> String {
        e.to_string()
    }
}

/// Reads all of `r`, at most `limit` bytes.
///
/// # Errors
/// [`ReadError::TooLarge`] when the input has more than `limit` bytes (only `limit + 1` of
/// them are read), [`ReadError::Io`] for a read error.
pub fn read_bounded(r: impl Read, limit: u64) -> Result<Vec<u8>, ReadError> {
    let mut buf = Vec::new();
    r.take(limit.saturating_add(1)).read_to_end(&mut buf).map_err(ReadError::Io)?;
    if buf.len() as u64 > limit {
        return Err(ReadError::TooLarge { limit });
    }
    Ok(buf)
}

/// Reads the file at `path` (a regular file, a device or a FIFO), at most `limit` bytes.
///
/// # Errors
/// [`ReadError::Io`] when it cannot be opened or read, [`ReadError::TooLarge`] beyond `limit`.
pub fn read_file_bounded(path: &Path, limit: u64) -> Result<Vec<u8>, ReadError> {
    let f = std::fs::File::open(path).map_err(ReadError::Io)?;
    read_bounded(f, limit)
}

/// Reads the file at `path`, at most `limit` bytes, as UTF-8 text.
///
/// # Errors
/// As [`read_file_bounded`], and [`ReadError::NotUtf8`].
pub fn read_text_bounded(path: &Path, limit: u64) -> Result<String, ReadError> {
    let bytes = read_file_bounded(path, limit)?;
    String::from_utf8(bytes).map_err(|e| ReadError::NotUtf8 { offset: e.utf8_error().valid_up_to() })
}

/// Reads all of `r`, at most `limit` bytes; `name` labels the input in the error.
///
/// # Errors
/// `"NAME: larger than LIMIT bytes, the most accepted"` when the input has more than `limit`
/// bytes (only `limit + 1` of them are read), or `"NAME: ERROR"` for a read error; `name` labels
/// the input (a file name, "standard input") and is quoted with [`one_line`].
pub fn read_limited(r: impl Read, limit: u64, name: &str) -> Result<Vec<u8>, NamedReadError> {
    read_bounded(r, limit).map_err(|error| NamedReadError { name: name.to_string(), error })
}

/// Reads the file at `path` (at most `limit` bytes) as UTF-8 text.
///
/// # Errors
/// The file cannot be opened or read (`"PATH: ERROR"`), is larger than `limit` bytes
/// (`"PATH: larger than LIMIT bytes, the most accepted"`), or is not UTF-8 (`"PATH: not valid
/// UTF-8 text (invalid byte at offset N)"`); one line each, the path quoted with [`one_line`].
pub fn read_text_file(path: &Path, limit: u64) -> Result<String, NamedReadError> {
    read_text_bounded(path, limit).map_err(|error| NamedReadError { name: path.display().to_string(), error })
}

/// `bytes` as UTF-8 text; `name` labels the input in the error.
///
/// # Errors
/// `"NAME: not valid UTF-8 text (invalid byte at offset N)"`.
pub fn text(bytes: Vec<u8>, name: &str) -> Result<String, NamedReadError> {
    String::from_utf8(bytes).map_err(|e| NamedReadError {
        name: name.to_string(),
        error: ReadError::NotUtf8 { offset: e.utf8_error().valid_up_to() },
    })
}

/// Whether `c` must be escaped when input is quoted in a one-line message: C0 and C1 control
/// characters and DEL (newlines, carriage returns, tabs, escapes, U+0085 NEXT LINE), the line
/// and paragraph separators U+2028 and U+2029 (which terminals, editors and log viewers may
/// break a line at), and the bidirectional embedding, override and isolate controls (U+202A to
/// U+202E, U+2066 to U+2069), which can make a line display as something other than it is.
pub fn needs_escape(c: char) -> bool {
    c.is_control() || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// `s` with the characters of [`needs_escape`] written as Rust escapes (`\n`, `\t`, `\u{1b}`,
/// `\u{2028}`), so that a message quoting user input stays one line and reads as what it is;
/// every other character, other non-ASCII text and backslashes included, is kept as it is.
pub fn one_line(s: &str) -> String {
    if !s.chars().any(needs_escape) {
        return s.to_string();
    }
    s.chars()
        .map(|c| {
            if !needs_escape(c) {
                c.to_string()
            } else if c.is_ascii() {
                // `\n`, `\r`, `\t`, `\0`-style escapes for ASCII, `\u{..}` for the rest.
                c.escape_default().to_string()
            } else {
                format!("\\u{{{:x}}}", c as u32)
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_bounded_and_messages_one_line() {
        assert_eq!(read_limited(&b"abc"[..], 3, "f").unwrap(), b"abc");
        assert_eq!(
            read_limited(&b"abcd"[..], 3, "f").unwrap_err().to_string(),
            "f: larger than 3 bytes, the most accepted"
        );
        // An endless input is refused after limit + 1 bytes.
        assert!(
            read_limited(std::io::repeat(0), 1 << 20, "zero")
                .unwrap_err()
                .to_string()
                .contains("larger than")
        );
        assert_eq!(one_line("a\nb\r\tc é"), "a\\nb\\r\\tc é");
        assert_eq!(
            text(vec![b'a', 0xff], "x\ny").unwrap_err().to_string(),
            "x\\ny: not valid UTF-8 text (invalid byte at offset 1)"
        );
    }

    #[test]
    fn devices_are_bounded_too() {
        let zero = Path::new("/dev/zero");
        if zero.exists() {
            let e = read_text_bounded(zero, 4096).unwrap_err();
            assert!(matches!(e, ReadError::TooLarge { limit: 4096 }), "{e}");
            assert_eq!(
                read_text_file(zero, 4096).unwrap_err().to_string(),
                "/dev/zero: larger than 4096 bytes, the most accepted"
            );
        }
        let e = read_file_bounded(Path::new("/nonexistent/lockstack-input"), 10).unwrap_err();
        assert!(e.is_not_found());
    }

    #[test]
    fn separators_and_controls_are_escaped() {
        // C1 controls (U+0085 NEXT LINE), DEL, the Unicode line and paragraph separators and
        // bidirectional overrides become escapes; other non-ASCII text stays.
        assert_eq!(one_line("a\u{2028}b\u{2029}c"), "a\\u{2028}b\\u{2029}c");
        assert_eq!(one_line("x\u{85}y\u{7f}z\u{9b}"), "x\\u{85}y\\u{7f}z\\u{9b}");
        assert_eq!(one_line("\u{202e}txt.exe\u{2066}"), "\\u{202e}txt.exe\\u{2066}");
        assert_eq!(one_line("\u{1b}[31m"), "\\u{1b}[31m");
        assert_eq!(one_line("naïve 日本 \u{a0}\\n"), "naïve 日本 \u{a0}\\n");
        for s in ["a\u{2028}b", "\u{85}", "x\ny\rz", "\u{2029}"] {
            assert_eq!(one_line(s).lines().count(), 1, "{s:?}");
            assert!(!one_line(s).chars().any(needs_escape));
        }
    }
}
