//! `lockstack isolation`: PostgreSQL's isolation tester (`src/test/isolation/`, output format
//! of release 14+) over the lockstack lock manager.
//!
//! A spec ([`spec`]) names sessions and their steps; each permutation launches the steps in
//! order, each session being a backend thread of one [`lockstack_lmgr::Lmgr`]. A step is
//! reported `<waiting ...>` when the lock manager says its backend is queued behind another
//! backend (queued on a lock, [`lockstack_lmgr::Lmgr::waiting_for`]: `pg_blocking_pids` is
//! then never empty), never after a guessed sleep; completions are reported in `isolationtester.c`'s order, errors as
//! `ERROR:  <primary message>`, advisory-lock results in `PQprint`'s aligned format.
//!
//! The SQL is the lock-only subset of [`sql`]; anything else is refused when the spec is
//! loaded, with the file, line, session and step. [`compare`] checks output against expected
//! files as `pg_regress` does (the expected file or its `_1` .. `_9` alternatives).

mod conn;
mod runner;
pub mod spec;
pub mod sql;

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use lockstack_lmgr::LmgrStats;
pub use lockstack_lmgr::{FastPath, LmgrConfig, VxidLocks};

use spec::{TestSpec, parse_spec};
use sql::{Statement, parse_block};

/// A failure that stops a run: one line naming the input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsolationError(pub String);

impl fmt::Display for IsolationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for IsolationError {}

/// How to run specs.
#[derive(Debug, Clone, Copy)]
pub struct IsolationConfig {
    /// Lock manager settings (`max_backends` is set to sessions + 1 per spec).
    pub lmgr: LmgrConfig,
    /// How long one step may run before the run fails (PostgreSQL's `max_step_wait`, 300 s).
    pub step_timeout: Duration,
    /// Print the permutations instead of running them (`isolationtester -n`).
    pub dry_run: bool,
}

impl Default for IsolationConfig {
    fn default() -> Self {
        IsolationConfig { lmgr: LmgrConfig::default(), step_timeout: Duration::from_secs(60), dry_run: false }
    }
}

/// A parsed spec whose SQL has been checked.
#[derive(Debug, Clone)]
pub struct LoadedSpec {
    /// The spec.
    pub spec: TestSpec,
    setup: Vec<Vec<Statement>>,
    teardown: Option<Vec<Statement>>,
    session_setup: Vec<Option<Vec<Statement>>>,
    session_teardown: Vec<Option<Vec<Statement>>>,
    steps: HashMap<String, Vec<Statement>>,
}

/// Parses `text` (labelled `file` in messages) and checks every SQL block.
///
/// # Errors
/// `file:line: message` for syntax errors, and `file:line: session S, step T: unsupported
/// SQL: ...` (or `setup` / `teardown`) for SQL outside the supported subset.
pub fn load_spec_text(file: &str, text: &str) -> Result<LoadedSpec, IsolationError> {
    let file = &crate::input::one_line(file);
    if text.len() as u64 > MAX_SPEC_BYTES {
        return Err(IsolationError(format!("{file}: larger than {MAX_SPEC_BYTES} bytes, the most accepted")));
    }
    let one_line = crate::input::one_line;
    let spec = parse_spec(file, text).map_err(|e| IsolationError(one_line(&e.to_string())))?;
    let check = |what: &str, b: &spec::SqlBlock| {
        parse_block(&b.sql).map_err(|e| IsolationError(one_line(&format!("{file}:{}: {what}: {e}", b.line))))
    };
    let setup = spec.setup.iter().map(|b| check("setup", b)).collect::<Result<_, _>>()?;
    let teardown = spec.teardown.as_ref().map(|b| check("teardown", b)).transpose()?;
    let mut session_setup = Vec::new();
    let mut session_teardown = Vec::new();
    let mut steps = HashMap::new();
    for s in &spec.sessions {
        session_setup
            .push(s.setup.as_ref().map(|b| check(&format!("session {}, setup", s.name), b)).transpose()?);
        session_teardown.push(
            s.teardown.as_ref().map(|b| check(&format!("session {}, teardown", s.name), b)).transpose()?,
        );
        for st in &s.steps {
            steps.insert(st.name.clone(), check(&format!("session {}, step {}", s.name, st.name), &st.sql)?);
        }
    }
    Ok(LoadedSpec { spec, setup, teardown, session_setup, session_teardown, steps })
}

/// The largest spec [`load_spec`] and [`load_spec_text`] accept, bytes (4 MiB). PostgreSQL's
/// isolation tester reads a spec whatever its size; a bound keeps `isolation /dev/zero` from
/// filling memory. PostgreSQL's largest specs are tens of kilobytes, and a spec of 5,000
/// one-step sessions is about 300 KB.
pub const MAX_SPEC_BYTES: u64 = 4 << 20;

/// Reads (at most [`MAX_SPEC_BYTES`]) and loads a spec file.
///
/// # Errors
/// The file cannot be read, is larger than [`MAX_SPEC_BYTES`] or not UTF-8, or
/// [`load_spec_text`]'s errors.
pub fn load_spec(path: &Path) -> Result<LoadedSpec, IsolationError> {
    let text = crate::input::read_text_file(path, MAX_SPEC_BYTES).map_err(IsolationError)?;
    load_spec_text(&path.display().to_string(), &text)
}

/// The result of running one spec.
#[derive(Debug, Clone)]
pub struct IsolationRun {
    /// What PostgreSQL's isolation tester would print on stdout.
    pub output: String,
    /// What it would print on stderr without failing (teardown failures).
    pub warnings: Vec<String>,
    /// Lock-manager counters of the run.
    pub stats: LmgrStats,
    /// Why the run stopped before its last permutation (a step that never finished, mutually
    /// blocking steps); `output` then holds everything printed up to that point.
    pub aborted: Option<IsolationError>,
}

/// Runs every permutation of `spec`.
///
/// A run that stops part-way (a step that never finishes within `step_timeout`, mutually
/// blocking steps) still returns what it printed, with the reason in
/// [`IsolationRun::aborted`].
///
/// # Errors
/// Failures to set up the sessions; a lock manager left with broken invariants.
pub fn run(spec: &LoadedSpec, cfg: &IsolationConfig) -> Result<IsolationRun, IsolationError> {
    run_with(spec, cfg, &mut |_| {})
}

/// [`run`], passing the output to `emit` as it is produced, as PostgreSQL's tester prints it:
/// everything printed so far has been passed before the runner waits for a step, a setup or a
/// teardown, so a spec that hangs or times out has shown what led there. The pieces passed
/// add up to [`IsolationRun::output`] (a dry run passes its whole output at once).
///
/// # Errors
/// As [`run`].
pub fn run_with(
    spec: &LoadedSpec,
    cfg: &IsolationConfig,
    emit: &mut dyn FnMut(&str),
) -> Result<IsolationRun, IsolationError> {
    let perms = spec.spec.all_permutations();
    if cfg.dry_run {
        let mut output = String::new();
        for p in &perms {
            output.push_str("permutation");
            for s in p {
                output.push_str(&format!(" \"{}\"", s.name));
            }
            output.push('\n');
        }
        emit(&output);
        return Ok(IsolationRun { output, warnings: Vec::new(), stats: LmgrStats::default(), aborted: None });
    }
    let mut r = runner::Runner::new(spec, cfg, emit)?;
    r.out.push_str(&format!("Parsed test spec with {} sessions\n", spec.spec.sessions.len()));
    let mut aborted = None;
    for p in &perms {
        let names: Vec<_> = p.iter().map(|s| (s.name.clone(), s.blockers.clone())).collect();
        if let Err(e) = r.run_permutation(&names) {
            aborted = Some(e);
            break;
        }
    }
    r.flush();
    let stats = r.lmgr().stats();
    let lmgr = r.lmgr().clone();
    let output = std::mem::take(&mut r.out);
    let warnings = std::mem::take(&mut r.warnings);
    drop(r);
    if aborted.is_none() {
        // A run stopped on a stuck step may have left that step's lock request queued.
        lmgr.check_invariants()
            .map_err(|e| IsolationError(format!("{}: lock manager invariant broken: {e}", spec.spec.file)))?;
    }
    Ok(IsolationRun { output, warnings, stats, aborted })
}

/// The expected files to compare a spec's output with: `expected` itself if it is a file;
/// if it is a directory, `NAME.out` and `NAME_1.out` .. `NAME_9.out` that exist in it.
pub fn expected_candidates(spec_path: &Path, expected: &Path) -> Vec<PathBuf> {
    if !expected.is_dir() {
        return vec![expected.to_path_buf()];
    }
    let stem = spec_path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let mut v = vec![expected.join(format!("{stem}.out"))];
    v.extend((1..10).map(|i| expected.join(format!("{stem}_{i}.out"))).filter(|p| p.exists()));
    v
}

/// Outcome of [`compare`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Comparison {
    /// Identical to this expected file.
    Same(PathBuf),
    /// Different from all candidates; the diff is against the closest one.
    Different {
        /// The closest expected file.
        expected: PathBuf,
        /// Line diff (`-` expected, `+` actual), with 3 lines of context.
        diff: String,
    },
}

/// Compares `output` with the candidates as `pg_regress` does: success if any is identical.
///
/// # Errors
/// When no candidate can be read.
pub fn compare(output: &str, candidates: &[PathBuf]) -> Result<Comparison, IsolationError> {
    let mut best: Option<(usize, PathBuf, String)> = None;
    let mut read_any = false;
    for c in candidates {
        let Ok(exp) = std::fs::read_to_string(c) else { continue };
        read_any = true;
        if exp == output {
            return Ok(Comparison::Same(c.clone()));
        }
        let (n, diff) = line_diff(&exp, output);
        if best.as_ref().is_none_or(|b| n < b.0) {
            best = Some((n, c.clone(), diff));
        }
    }
    match best {
        Some((_, expected, diff)) => Ok(Comparison::Different { expected, diff }),
        None if !read_any => Err(IsolationError(format!(
            "cannot read expected output {}",
            candidates.first().map(|p| p.display().to_string()).unwrap_or_default()
        ))),
        None => unreachable!("a readable candidate either matches or is the best"),
    }
}

/// A minimal LCS line diff: (number of differing lines, text with `-`/`+`/` ` prefixes and 3
/// lines of context around changes).
fn line_diff(a: &str, b: &str) -> (usize, String) {
    let a: Vec<&str> = a.lines().collect();
    let b: Vec<&str> = b.lines().collect();
    let (n, m) = (a.len(), b.len());
    let mut lcs = vec![vec![0u32; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if a[i] == b[j] { lcs[i + 1][j + 1] + 1 } else { lcs[i + 1][j].max(lcs[i][j + 1]) };
        }
    }
    let mut ops: Vec<(char, &str)> = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            ops.push((' ', a[i]));
            i += 1;
            j += 1;
        } else if j < m && (i == n || lcs[i][j + 1] >= lcs[i + 1][j]) {
            ops.push(('+', b[j]));
            j += 1;
        } else {
            ops.push(('-', a[i]));
            i += 1;
        }
    }
    let changed: Vec<usize> = ops.iter().enumerate().filter(|(_, o)| o.0 != ' ').map(|(k, _)| k).collect();
    let mut out = String::new();
    let mut last_end = 0usize;
    for (k, op) in ops.iter().enumerate() {
        let near = changed.iter().any(|&c| c.abs_diff(k) <= 3);
        if near {
            if k > last_end && last_end > 0 {
                out.push_str("...\n");
            }
            out.push_str(&format!("{}{}\n", op.0, op.1));
            last_end = k + 1;
        }
    }
    (changed.len() + usize::from(a.len() != b.len() && changed.is_empty()), out)
}
