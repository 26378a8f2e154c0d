//! `lockstack isolation`: PostgreSQL's isolation tester (`src/test/isolation/`, output format
//! of release 14+) over the lockstack engine: one engine per spec without pgbench's tables,
//! one engine session per connection, the spec's tables as user tables.
//!
//! A spec ([`spec`]) names sessions and their steps; each permutation launches the steps in
//! order, each session being a backend thread of one [`lockstack_lmgr::Lmgr`]. A step is
//! reported `<waiting ...>` when the lock manager says its backend is queued behind another
//! backend (queued on a lock, [`lockstack_lmgr::Lmgr::waiting_for`]: `pg_blocking_pids` is
//! then never empty), never after a guessed sleep; completions are reported in `isolationtester.c`'s order, errors as
//! `ERROR:  <primary message>`, result sets in `PQprint`'s aligned format.
//!
//! The SQL is the subset of [`sql`] (transaction control, table, advisory and row locks, and
//! small tables); anything else is refused when the spec is loaded, with the file, line,
//! session and step. [`compare`] checks output against expected
//! files as `pg_regress` does (the expected file or its `_1` .. `_9` alternatives).

mod conn;
mod error;
mod runner;
pub mod spec;
pub mod sql;
mod statement_error;

pub use error::SqlError;

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
    /// [`DEFAULT_PRESET`]'s lock manager, a 60 s step timeout.
    fn default() -> Self {
        IsolationConfig::for_preset(DEFAULT_PRESET)
            .expect("DEFAULT_PRESET names one of the engine's presets (a test loads it)")
    }
}

/// The release the runner behaves as unless told otherwise, and the one a spec's `NAME.out`
/// is for (see [`expected_candidates_for`]).
pub const DEFAULT_PRESET: &str = "pg17";

impl IsolationConfig {
    /// The lock manager of release preset `name` (`lockstack_engine::engine::PRESETS`: its
    /// `lmgr.*` knobs, such as 17's NOWAIT queue jump; the runner's other subsystems keep
    /// their defaults), a 60 s step timeout.
    ///
    /// # Errors
    /// An unknown preset, one line listing the valid ones.
    pub fn for_preset(name: &str) -> Result<IsolationConfig, lockstack_engine::settings::SettingsError> {
        let engine = lockstack_engine::engine::EngineConfig::preset(name, 2, 16)?;
        Ok(IsolationConfig { lmgr: engine.lmgr, step_timeout: Duration::from_secs(60), dry_run: false })
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
    let text = crate::input::read_text_file(path, MAX_SPEC_BYTES).map_err(|e| IsolationError(e.into()))?;
    load_spec_text(&path.display().to_string(), &text)
}

/// The largest expected-output file [`read_expected`] reads, bytes (16 MiB). PostgreSQL's
/// expected files are at most tens of kilobytes; the bound keeps `--expected /dev/zero` from
/// filling memory, and with it the output kept for the comparison ([`OutputKeeper`]).
pub const MAX_EXPECTED_BYTES: u64 = 16 << 20;

/// The result of running one spec.
#[derive(Debug, Clone)]
pub struct IsolationRun {
    /// What PostgreSQL's isolation tester would print on stdout, from [`run`]; empty from
    /// [`run_with`], which passes it on as it is produced and keeps none of it.
    pub output: String,
    /// What it would print on stderr without failing (teardown failures): the first 100,
    /// then one line counting the rest.
    pub warnings: Vec<String>,
    /// Lock-manager counters of the run.
    pub stats: LmgrStats,
    /// Why the run stopped before its last permutation (a step that never finished, mutually
    /// blocking steps); `output` then holds everything printed up to that point.
    pub aborted: Option<IsolationError>,
}

/// Runs every permutation of `spec`, keeping the whole output in [`IsolationRun::output`]
/// (use [`run_with`] for a spec whose output may be large).
///
/// A run that stops part-way (a step that never finishes within `step_timeout`, mutually
/// blocking steps) still returns what it printed, with the reason in
/// [`IsolationRun::aborted`].
///
/// # Errors
/// Failures to set up the sessions; a lock manager left with broken invariants.
pub fn run(spec: &LoadedSpec, cfg: &IsolationConfig) -> Result<IsolationRun, IsolationError> {
    let mut output = String::new();
    let mut r = run_with(spec, cfg, &mut |s| output.push_str(s))?;
    r.output = output;
    Ok(r)
}

/// [`run`], passing the output to `emit` as it is produced, as PostgreSQL's tester prints it:
/// everything printed so far has been passed before the runner waits for a step, a setup or a
/// teardown, so a spec that hangs or times out has shown what led there. Nothing passed is
/// kept ([`IsolationRun::output`] is empty), and the permutations are made one at a time
/// ([`spec::TestSpec::permutations`]), so a spec of millions of permutations runs in constant
/// memory. A dry run passes one line per permutation.
///
/// # Errors
/// As [`run`].
pub fn run_with(
    spec: &LoadedSpec,
    cfg: &IsolationConfig,
    emit: &mut dyn FnMut(&str),
) -> Result<IsolationRun, IsolationError> {
    if cfg.dry_run {
        for p in spec.spec.permutations() {
            let mut line = String::from("permutation");
            for s in &p {
                line.push_str(&format!(" \"{}\"", s.name));
            }
            line.push('\n');
            emit(&line);
        }
        return Ok(IsolationRun {
            output: String::new(),
            warnings: Vec::new(),
            stats: LmgrStats::default(),
            aborted: None,
        });
    }
    let mut r = runner::Runner::new(spec, cfg, emit)?;
    r.out.push_str(&format!("Parsed test spec with {} sessions\n", spec.spec.sessions.len()));
    let mut aborted = None;
    for p in spec.spec.permutations() {
        let names: Vec<_> = p.into_iter().map(|s| (s.name, s.blockers)).collect();
        if let Err(e) = r.run_permutation(&names) {
            aborted = Some(e);
            break;
        }
    }
    r.flush();
    let stats = r.lmgr().stats();
    let lmgr = r.lmgr().clone();
    let mut warnings = std::mem::take(&mut r.warnings);
    if r.more_warnings > 0 {
        warnings.push(format!("... and {} more teardown failures", r.more_warnings));
    }
    drop(r);
    if aborted.is_none() {
        // A run stopped on a stuck step may have left that step's lock request queued.
        lmgr.check_invariants()
            .map_err(|e| IsolationError(format!("{}: lock manager invariant broken: {e}", spec.spec.file)))?;
    }
    Ok(IsolationRun { output: String::new(), warnings, stats, aborted })
}

/// What a spec's run prints on stderr before it starts, for a spec without permutation lines
/// whose sessions' steps interleave in more than one way: how many permutations will run,
/// exactly when the count fits in a `u128`. `None` for a spec that lists its permutations, or
/// whose only permutation is its steps in order (at most one session has steps).
///
/// The count grows as a multinomial coefficient (three sessions of seven steps: 399,072,960
/// permutations); such a spec still starts, as PostgreSQL's tester starts it, and runs in
/// constant memory until it ends or is stopped, and this line says what was asked for.
pub fn permutation_note(spec: &LoadedSpec) -> Option<String> {
    let t = &spec.spec;
    if !t.permutations.is_empty() {
        return None;
    }
    let steps: Vec<String> = t.sessions.iter().map(|s| s.steps.len().to_string()).collect();
    let what = format!("every interleaving of {} sessions' steps ({})", t.sessions.len(), steps.join(" + "));
    Some(match t.permutation_count() {
        Some(1) => return None,
        Some(n) => format!("{}: {} permutations ({what})", t.file, group_digits(n)),
        None => format!(
            "{}: more than {} permutations ({what}; too many to count)",
            t.file,
            group_digits(u128::MAX)
        ),
    })
}

/// `n` with its digits in groups of three (`399,072,960`).
fn group_digits(n: u128) -> String {
    let d = n.to_string();
    let mut out = String::with_capacity(d.len() + d.len() / 3);
    for (i, c) in d.chars().enumerate() {
        if i > 0 && (d.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Keeps a run's output for comparing with expected files, at most one byte more than the
/// longest of them: output longer than every expected file differs from all of them, and
/// what is past that byte cannot change which it is closest to by much. A spec that runs
/// millions of permutations is so compared in bounded memory.
#[derive(Debug, Clone)]
pub struct OutputKeeper {
    kept: String,
    limit: usize,
    total: u64,
}

impl OutputKeeper {
    /// A keeper for comparison with `expected` ([`read_expected`]).
    pub fn new(expected: &[(PathBuf, String)]) -> Self {
        let limit = expected.iter().map(|(_, t)| t.len()).max().unwrap_or(0) + 1;
        OutputKeeper { kept: String::new(), limit, total: 0 }
    }

    /// Takes the next piece of output.
    pub fn push(&mut self, s: &str) {
        self.total += s.len() as u64;
        let room = self.limit.saturating_sub(self.kept.len());
        if room >= s.len() {
            self.kept.push_str(s);
        } else if room > 0 {
            let cut = (0..=room).rev().find(|&i| s.is_char_boundary(i)).unwrap_or(0);
            self.kept.push_str(&s[..cut]);
        }
    }

    /// The output kept (all of it when [`OutputKeeper::complete`]).
    pub fn kept(&self) -> &str {
        &self.kept
    }

    /// Whether all of the output was kept.
    pub fn complete(&self) -> bool {
        self.total == self.kept.len() as u64
    }

    /// Bytes of output taken, kept or not.
    pub fn total(&self) -> u64 {
        self.total
    }
}

/// The expected files to compare a spec's output with under [`DEFAULT_PRESET`]
/// ([`expected_candidates_for`]).
pub fn expected_candidates(spec_path: &Path, expected: &Path) -> Vec<PathBuf> {
    expected_candidates_for(spec_path, expected, DEFAULT_PRESET)
}

/// The expected files to compare a spec's output with when it runs as release `preset`:
/// `expected` itself if it is a file. In a directory, `NAME.out` is what [`DEFAULT_PRESET`]
/// (the newest release) prints, and `NAME_<preset>.out` (`nowait_pg14.out`) what that preset
/// and the older ones print where they differ: the first of `NAME_<preset>.out`,
/// `NAME_<next newer preset>.out`, ..., `NAME.out` that exists is the base file, and the
/// base name's alternatives `_1` .. `_9` (`nowait_pg14_1.out`, as PostgreSQL's
/// `pg_isolation_regress` accepts `NAME_1.out`) that exist follow it. An unknown preset is
/// looked up as [`DEFAULT_PRESET`].
pub fn expected_candidates_for(spec_path: &Path, expected: &Path, preset: &str) -> Vec<PathBuf> {
    if !expected.is_dir() {
        return vec![expected.to_path_buf()];
    }
    let stem = spec_path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let presets = lockstack_engine::engine::PRESETS;
    let from = presets.iter().position(|p| *p == preset).unwrap_or(presets.len());
    let base = presets[from.min(presets.len())..]
        .iter()
        .filter(|p| **p != DEFAULT_PRESET)
        .map(|p| format!("{stem}_{p}"))
        .find(|b| expected.join(format!("{b}.out")).exists())
        .unwrap_or(stem);
    let mut v = vec![expected.join(format!("{base}.out"))];
    v.extend((1..10).map(|i| expected.join(format!("{base}_{i}.out"))).filter(|p| p.exists()));
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

/// Reads the expected files among `candidates` ([`expected_candidates`]), each through
/// [`MAX_EXPECTED_BYTES`]; a candidate that does not exist is skipped.
///
/// # Errors
/// One line naming the file: a candidate that exists but cannot be read, is larger than
/// [`MAX_EXPECTED_BYTES`] or not UTF-8; no candidate exists (`cannot read expected output
/// FILE: ...`, naming the first).
pub fn read_expected(candidates: &[PathBuf]) -> Result<Vec<(PathBuf, String)>, IsolationError> {
    use crate::input::{one_line, read_text_bounded};
    let mut read = Vec::new();
    let mut first_missing = None;
    for c in candidates {
        match read_text_bounded(c, MAX_EXPECTED_BYTES) {
            Ok(t) => read.push((c.clone(), t)),
            Err(e) if e.is_not_found() => {
                first_missing.get_or_insert(format!("{}: {e}", one_line(&c.display().to_string())));
            }
            Err(e) => return Err(IsolationError(format!("{}: {e}", one_line(&c.display().to_string())))),
        }
    }
    if read.is_empty() {
        return Err(IsolationError(format!(
            "cannot read expected output {}",
            first_missing.unwrap_or_else(|| "(no candidate file)".to_string())
        )));
    }
    Ok(read)
}

/// Compares `output` with the candidates as `pg_regress` does: success if any is identical.
///
/// # Errors
/// As [`read_expected`].
pub fn compare(output: &str, candidates: &[PathBuf]) -> Result<Comparison, IsolationError> {
    Ok(compare_output(output, true, &read_expected(candidates)?))
}

/// Compares `output` with expected texts ([`read_expected`], at least one): the first
/// identical one, or the diff against the closest. `complete` is false when `output` is only
/// the start of the output ([`OutputKeeper`]), which then matches none.
pub fn compare_output(output: &str, complete: bool, expected: &[(PathBuf, String)]) -> Comparison {
    let mut best: Option<(usize, &PathBuf, String)> = None;
    for (path, exp) in expected {
        if complete && exp == output {
            return Comparison::Same(path.clone());
        }
        let (n, diff) = line_diff(exp, output);
        if best.as_ref().is_none_or(|b| n < b.0) {
            best = Some((n, path, diff));
        }
    }
    let (_, expected, diff) = best.expect("read_expected returns at least one expected file");
    Comparison::Different { expected: expected.clone(), diff }
}

/// The most cells of the LCS table [`line_diff`] fills (16 MB of `u32`); past it the lines
/// between the common start and end are shown as all removed and all added.
const MAX_DIFF_CELLS: usize = 4 << 20;

/// A minimal LCS line diff: (number of differing lines, text with `-`/`+`/` ` prefixes and 3
/// lines of context around changes). The common first and last lines are set aside first;
/// the LCS table covers only the lines between, up to [`MAX_DIFF_CELLS`].
fn line_diff(a: &str, b: &str) -> (usize, String) {
    let a: Vec<&str> = a.lines().collect();
    let b: Vec<&str> = b.lines().collect();
    let head = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let tail = a[head..].iter().rev().zip(b[head..].iter().rev()).take_while(|(x, y)| x == y).count();
    let (am, bm) = (&a[head..a.len() - tail], &b[head..b.len() - tail]);
    let (n, m) = (am.len(), bm.len());
    let mut ops: Vec<(char, &str)> = a[..head].iter().map(|l| (' ', *l)).collect();
    if n.saturating_mul(m) <= MAX_DIFF_CELLS {
        let w = m + 1;
        let mut lcs = vec![0u32; (n + 1) * w];
        for i in (0..n).rev() {
            for j in (0..m).rev() {
                lcs[i * w + j] = if am[i] == bm[j] {
                    lcs[(i + 1) * w + j + 1] + 1
                } else {
                    lcs[(i + 1) * w + j].max(lcs[i * w + j + 1])
                };
            }
        }
        let (mut i, mut j) = (0, 0);
        while i < n || j < m {
            if i < n && j < m && am[i] == bm[j] {
                ops.push((' ', am[i]));
                i += 1;
                j += 1;
            } else if j < m && (i == n || lcs[i * w + j + 1] >= lcs[(i + 1) * w + j]) {
                ops.push(('+', bm[j]));
                j += 1;
            } else {
                ops.push(('-', am[i]));
                i += 1;
            }
        }
    } else {
        ops.extend(am.iter().map(|l| ('-', *l)));
        ops.extend(bm.iter().map(|l| ('+', *l)));
    }
    ops.extend(a[a.len() - tail..].iter().map(|l| (' ', *l)));
    // Lines within 3 of a change are shown.
    let mut near = vec![false; ops.len()];
    let mut changed = 0;
    for (k, op) in ops.iter().enumerate() {
        if op.0 != ' ' {
            changed += 1;
            near[k.saturating_sub(3)..(k + 4).min(ops.len())].iter_mut().for_each(|x| *x = true);
        }
    }
    let mut out = String::new();
    let mut last_end = 0usize;
    for (k, op) in ops.iter().enumerate() {
        if near[k] {
            if k > last_end && last_end > 0 {
                out.push_str("...\n");
            }
            out.push_str(&format!("{}{}\n", op.0, op.1));
            last_end = k + 1;
        }
    }
    (changed + usize::from(a.len() != b.len() && changed == 0), out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_output_is_bounded_and_never_matches_when_cut() {
        let expected = vec![(PathBuf::from("a.out"), "x\ny\n".to_string())];
        let mut k = OutputKeeper::new(&expected);
        k.push("x\n");
        k.push("y\n");
        assert!(k.complete());
        assert!(matches!(compare_output(k.kept(), k.complete(), &expected), Comparison::Same(_)));
        // Past the longest expected file (4 bytes) only one more byte is kept.
        for _ in 0..1000 {
            k.push("y\n");
        }
        assert_eq!(k.kept(), "x\ny\ny");
        assert_eq!(k.total(), 2004);
        assert!(!k.complete());
        assert!(matches!(compare_output(k.kept(), k.complete(), &expected), Comparison::Different { .. }));
        // A multi-byte character across the cut is dropped whole; the cut output, equal to the
        // expected text, still does not match it.
        let mut k = OutputKeeper::new(&expected);
        k.push("x\ny\n\u{e9}");
        assert_eq!(k.kept(), "x\ny\n");
        assert!(!k.complete());
        assert!(matches!(compare_output(k.kept(), k.complete(), &expected), Comparison::Different { .. }));
    }

    #[test]
    fn diffs_of_large_texts_are_bounded() {
        let (n, d) = line_diff("a\nb\nc\nd\ne\nf\ng\nh\n", "a\nb\nc\nd\nX\nf\ng\nh\n");
        assert_eq!(n, 2);
        assert_eq!(d, " b\n c\n d\n+X\n-e\n f\n g\n h\n");
        // 200,000 lines against 200,000 others: no 4e10-cell table, every line shown changed.
        let a: String = (0..200_000).map(|i| format!("a{i}\n")).collect();
        let b: String = (0..200_000).map(|i| format!("b{i}\n")).collect();
        let (n, d) = line_diff(&format!("same\n{a}same\n"), &format!("same\n{b}same\n"));
        assert_eq!(n, 400_000);
        assert_eq!(d.lines().count(), 400_002);
    }

    #[test]
    fn expected_files_are_read_bounded() {
        let dir = std::env::temp_dir().join(format!("lockstack-expected-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let missing = dir.join("missing.out");
        let e = read_expected(std::slice::from_ref(&missing)).unwrap_err().0;
        assert!(e.starts_with("cannot read expected output ") && e.contains("missing.out"), "{e}");
        if Path::new("/dev/zero").exists() {
            let e = read_expected(&[missing, PathBuf::from("/dev/zero")]).unwrap_err().0;
            assert_eq!(e, "/dev/zero: larger than 16777216 bytes, the most accepted");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
