//! The user's directory: where `--calibrate` stores its calibrations (`calibrations.toml`) and
//! where `--machine NAME` finds a user's profile (`machines/NAME.toml`) after the built-ins.
//! Locks: none (a process-wide override set once at start-up, and files).
//!
//! The directory is, first found: `--home DIR` ([`set`]), `$LOCKSTACK_HOME`,
//! `$XDG_CONFIG_HOME/lockstack`, `$HOME/.config/lockstack`.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::error::{CalibrationsError, NoUserDir};
use super::{Calibrated, parse_calibrations};
use crate::sim_knobs::POSTGRES_IPC_RANGE;

pub use super::limits::ENV;

/// The calibrations file's name inside the directory.
pub const CALIBRATIONS: &str = "calibrations.toml";

/// The subdirectory of the user's machine profiles.
pub const MACHINES: &str = "machines";

/// The largest user calibrations file read, bytes (1 MiB).
pub const MAX_CALIBRATIONS_BYTES: u64 = 1 << 20;

static OVERRIDE: OnceLock<PathBuf> = OnceLock::new();

/// Makes `dir` the user's directory for this process (`--home DIR`); a second call is
/// ignored (the first wins: it is the command line's).
pub fn set(dir: PathBuf) {
    let _ = OVERRIDE.set(dir);
}

/// The `--home` override, when given.
pub fn overridden() -> Option<&'static Path> {
    OVERRIDE.get().map(PathBuf::as_path)
}

/// The user's directory (it need not exist yet).
///
/// # Errors
/// [`NoUserDir`] when none of `--home`, `$LOCKSTACK_HOME`, `$XDG_CONFIG_HOME` and `$HOME` is
/// set (its message says which to set).
pub fn dir() -> Result<PathBuf, NoUserDir> {
    if let Some(d) = OVERRIDE.get() {
        return Ok(d.clone());
    }
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(d) = var(ENV) {
        return Ok(d);
    }
    if let Some(d) = var("XDG_CONFIG_HOME") {
        return Ok(d.join("lockstack"));
    }
    if let Some(d) = var("HOME") {
        return Ok(d.join(".config").join("lockstack"));
    }
    Err(NoUserDir)
}

/// The user's profile file for `name` (`DIR/machines/NAME.toml`), when `name` is a plain name
/// (no path separator, no `.toml`) and the file exists.
pub fn profile_path(name: &str) -> Option<PathBuf> {
    if name.is_empty() || name.contains(['/', '\\']) || name.ends_with(".toml") {
        return None;
    }
    let p = dir().ok()?.join(MACHINES).join(format!("{name}.toml"));
    p.is_file().then_some(p)
}

/// The user's calibrations, read once per process from `DIR/calibrations.toml` (none when the
/// file does not exist).
///
/// # Errors
/// The file exists but cannot be read or parsed: one line naming it.
pub fn calibrations() -> Result<&'static [Calibrated], &'static CalibrationsError> {
    static ALL: OnceLock<Result<Vec<Calibrated>, CalibrationsError>> = OnceLock::new();
    ALL.get_or_init(|| {
        let Ok(d) = dir() else { return Ok(Vec::new()) };
        read_calibrations(&d.join(CALIBRATIONS))
    })
    .as_deref()
}

/// The calibrations of the file at `path`; none when it does not exist.
///
/// # Errors
/// Unreadable or malformed: one line naming the file.
pub fn read_calibrations(path: &Path) -> Result<Vec<Calibrated>, CalibrationsError> {
    if !path.exists() {
        return Ok(Vec::new());
    }
    let text = lockstack_common::input::read_text_file(path, MAX_CALIBRATIONS_BYTES)?;
    let rows = parse_calibrations(&text).map_err(|e| CalibrationsError::Malformed {
        path: path.to_path_buf(),
        message: one_line(&e, &text),
    })?;
    for (i, r) in rows.iter().enumerate() {
        let bad = if !(r.postgres_ipc.is_finite() && POSTGRES_IPC_RANGE.contains(&r.postgres_ipc)) {
            Some(("postgres_ipc", r.postgres_ipc, "0.01..=10 instructions per cycle"))
        } else if !(r.tps.is_finite() && r.tps > 0.0) {
            Some(("tps", r.tps, "a positive number"))
        } else if r.clients == 0 {
            Some(("clients", 0.0, "1 or more"))
        } else {
            None
        };
        if let Some((field, value, valid)) = bad {
            return Err(CalibrationsError::OutOfRange {
                path: path.to_path_buf(),
                row: i + 1,
                key: format!("{}, {}, {}", r.experiment, r.machine, r.workload),
                field,
                value,
                valid,
            });
        }
    }
    Ok(rows)
}

/// The TOML parser's error on one line: its message and, when it has a place, the line and
/// column (1-based) in `text`, without the quoted source snippet.
fn one_line(e: &toml::de::Error, text: &str) -> String {
    let message = e.message().split_whitespace().collect::<Vec<_>>().join(" ");
    match e.span() {
        Some(span) => {
            let before = text.get(..span.start).unwrap_or(text);
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            format!("line {line}, column {column}: {message}")
        }
        None => message,
    }
}

/// Stores `rows` in `DIR/calibrations.toml` (creating the directory), replacing the file's
/// rows of the same experiment, machine and workload, and returns the file's path.
///
/// # Errors
/// No user directory, an existing file that does not parse, or a write that fails: one line
/// naming the file and what to do.
pub fn store_calibrations(rows: &[Calibrated]) -> Result<PathBuf, CalibrationsError> {
    let d = dir()?;
    store_calibrations_in(&d, rows)
}

/// [`store_calibrations`] into the directory `d`.
///
/// # Errors
/// As [`store_calibrations`].
pub fn store_calibrations_in(d: &Path, rows: &[Calibrated]) -> Result<PathBuf, CalibrationsError> {
    let path = d.join(CALIBRATIONS);
    let mut all = read_calibrations(&path)?;
    all.retain(|c| {
        !rows.iter().any(|r| (r.experiment, r.machine, r.workload) == (c.experiment, c.machine, c.workload))
    });
    all.extend_from_slice(rows);
    let mut text = String::from(
        "# Calibrations stored by `lockstack experiment NAME --machine P --calibrate`, read by every\n\
         # later run of NAME on P (before the built-in ones). Each row fits sim.postgres_ipc to one\n\
         # figure: the thread's published one, or the user's own (`--measured FILE`).\n",
    );
    for c in &all {
        text.push_str(&c.toml());
    }
    std::fs::create_dir_all(d)
        .map_err(|source| CalibrationsError::CreateDir { dir: d.to_path_buf(), source })?;
    let tmp = d.join(format!(".{CALIBRATIONS}.{}", std::process::id()));
    std::fs::write(&tmp, text).map_err(|source| CalibrationsError::Write { path: tmp.clone(), source })?;
    std::fs::rename(&tmp, &path).map_err(|source| CalibrationsError::Write { path: path.clone(), source })?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_rows_replace_their_key_and_keep_the_others() {
        let d = tempfile::tempdir().unwrap();
        let row = |machine: &'static str, ipc: f64| Calibrated {
            experiment: "pgxact",
            machine,
            workload: "select-only",
            series: "measured (mine.csv)",
            clients: 1,
            tps: 1000.0,
            postgres_ipc: ipc,
        };
        store_calibrations_in(d.path(), &[row("a", 0.5), row("b", 0.25)]).unwrap();
        let path = store_calibrations_in(d.path(), &[row("a", 0.75)]).unwrap();
        let back = read_calibrations(&path).unwrap();
        assert_eq!(back, vec![row("b", 0.25), row("a", 0.75)]);
        std::fs::write(&path, "[[calibration]]\nexperiment = 3\n").unwrap();
        let e = store_calibrations_in(d.path(), &[row("a", 0.5)]).unwrap_err().to_string();
        assert!(
            e.contains("calibrations.toml: not a calibrations file") && e.contains("fix or delete it"),
            "{e}"
        );
        assert!(!e.contains('\n') && e.contains("line 2, column 14: invalid type"), "{e}");
        std::fs::write(&path, format!("{}{}", row("b", 0.25).toml(), row("a", 99.0).toml())).unwrap();
        let e = read_calibrations(&path).unwrap_err().to_string();
        assert!(
            e.contains("calibrations.toml: [[calibration]] row 2 (pgxact, a, select-only): postgres_ipc = 99 is out of range (valid: 0.01..=10"),
            "{e}"
        );
    }
}
