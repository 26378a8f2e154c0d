//! Reading user input files with a size bound, and quoting input in one-line messages.
//!
//! Scripts (`pgbench -f`) and specs (`lockstack isolation`) are read whole before they are
//! parsed; a file that never ends (`/dev/zero`, a FIFO fed forever) or is simply huge must be
//! refused after a bounded read, never buffered until memory runs out. PostgreSQL's pgbench and
//! isolation tester have no such bound (they read until EOF); ours are stated with each reader
//! ([`crate::pgbench::script::MAX_SCRIPT_BYTES`], [`crate::isolation::MAX_SPEC_BYTES`]).

use std::io::Read;

/// Reads all of `r`, at most `limit` bytes.
///
/// # Errors
/// `"NAME: larger than LIMIT bytes"` when the input has more than `limit` bytes (only
/// `limit + 1` of them are read), or `"NAME: ERROR"` for a read error; `name` labels the input
/// (a file name, "standard input").
pub fn read_limited(r: impl Read, limit: u64, name: &str) -> Result<Vec<u8>, String> {
    let mut buf = Vec::new();
    r.take(limit.saturating_add(1)).read_to_end(&mut buf).map_err(|e| format!("{}: {e}", one_line(name)))?;
    if buf.len() as u64 > limit {
        return Err(format!("{}: larger than {limit} bytes, the most accepted", one_line(name)));
    }
    Ok(buf)
}

/// Reads the file at `path` (at most `limit` bytes) as UTF-8 text.
///
/// # Errors
/// The file cannot be opened or read (`"PATH: ERROR"`), is larger than `limit` bytes, or is not
/// UTF-8 (`"PATH: not valid UTF-8 text (invalid byte at offset N)"`); one line each.
pub fn read_text_file(path: &std::path::Path, limit: u64) -> Result<String, String> {
    let name = path.display().to_string();
    let f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", one_line(&name)))?;
    text(read_limited(f, limit, &name)?, &name)
}

/// `bytes` as UTF-8 text; `name` labels the input in the error.
///
/// # Errors
/// `"NAME: not valid UTF-8 text (invalid byte at offset N)"`.
pub fn text(bytes: Vec<u8>, name: &str) -> Result<String, String> {
    String::from_utf8(bytes).map_err(|e| {
        format!(
            "{}: not valid UTF-8 text (invalid byte at offset {})",
            one_line(name),
            e.utf8_error().valid_up_to()
        )
    })
}

/// `s` with control characters (newlines, carriage returns, tabs, escapes...) written as Rust
/// escapes (`\n`, `\u{1b}`), so that a message quoting user input stays one line; every other
/// character, non-ASCII text included, is kept as it is.
pub fn one_line(s: &str) -> String {
    if !s.chars().any(char::is_control) {
        return s.to_string();
    }
    s.chars().map(|c| if c.is_control() { c.escape_default().to_string() } else { c.to_string() }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_bounded_and_messages_one_line() {
        assert_eq!(read_limited(&b"abc"[..], 3, "f").unwrap(), b"abc");
        assert_eq!(
            read_limited(&b"abcd"[..], 3, "f").unwrap_err(),
            "f: larger than 3 bytes, the most accepted"
        );
        // An endless input is refused after limit + 1 bytes.
        assert!(read_limited(std::io::repeat(0), 1 << 20, "zero").unwrap_err().contains("larger than"));
        assert_eq!(one_line("a\nb\r\tc é"), "a\\nb\\r\\tc é");
        assert_eq!(
            text(vec![b'a', 0xff], "x\ny").unwrap_err(),
            "x\\ny: not valid UTF-8 text (invalid byte at offset 1)"
        );
    }
}
