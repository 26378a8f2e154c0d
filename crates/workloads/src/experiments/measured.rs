//! `--measured FILE.csv`: the user's own throughput figures for an experiment, read from a CSV
//! file, drawn and tabled next to the seed's published points as one more series, and usable
//! as the calibration figure instead of the published one. Locks: none.
//!
//! The file has a header row naming its columns, in any order; lines starting with `#` are
//! comments:
//!
//! | column | required | what |
//! |---|---|---|
//! | `variant` | yes | one of the experiment's variants (`pgproc`, `no-fastpath`, ...) |
//! | `clients` | yes | pgbench's `-c`, a whole number from 1 |
//! | `tps` | yes | the measured throughput, a positive number (transactions per second) |
//! | `machine` | no | the profile the figure stands for; an empty cell: any machine |
//! | `workload` | no | the experiment's workload; empty or absent: its first workload |
//!
//! Any other column is refused ("unsupported"), as are duplicate rows of one (workload,
//! variant, clients, machine).

use std::path::{Path, PathBuf};

use super::{Experiment, Published};

/// The largest measured CSV file read, bytes (4 MiB).
pub const MAX_MEASURED_BYTES: u64 = 4 << 20;

/// The columns a measured file may have.
pub const COLUMNS: [&str; 5] = ["variant", "clients", "tps", "machine", "workload"];

/// A measured file that cannot be used: each names the file, and the line and field where
/// there is one.
#[derive(Debug, thiserror::Error)]
pub enum MeasuredError {
    /// The file cannot be read (missing, too large, not UTF-8).
    #[error("--measured {path}: {message}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// The header lacks a required column or has one that is not supported.
    #[error("--measured {path}: line {line}: {message}")]
    Header {
        /// The file.
        path: PathBuf,
        /// The header's line (1-based).
        line: u64,
        /// What is wrong.
        message: String,
    },
    /// A field of a row is malformed (or the row itself: too many fields, a duplicate).
    #[error("--measured {path}: line {line}: field {field}: {message}")]
    Field {
        /// The file.
        path: PathBuf,
        /// The row's line (1-based).
        line: u64,
        /// The column.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// The file holds no row.
    #[error("--measured {path}: no data row (the header and at least one row of {columns})", columns = COLUMNS[..3].join(","))]
    Empty {
        /// The file.
        path: PathBuf,
    },
}

/// One figure of the user's file.
#[derive(Clone, Debug, PartialEq)]
pub struct MeasuredPoint {
    /// The experiment's workload it belongs to.
    pub workload: String,
    /// The experiment's variant.
    pub variant: String,
    /// Clients.
    pub clients: u32,
    /// Transactions per second.
    pub tps: f64,
    /// The profile it stands for, when the file says.
    pub machine: Option<String>,
    /// Whether the file gave the workload (false: the cell was empty or the column absent,
    /// and `workload` is the experiment's first).
    pub workload_given: bool,
    /// The file's line (1-based), for messages.
    pub line: u64,
}

/// The user's figures of one file.
#[derive(Clone, Debug)]
pub struct Measured {
    /// The file they come from.
    pub path: PathBuf,
    /// Its rows, in file order.
    pub points: Vec<MeasuredPoint>,
}

impl Measured {
    /// Reads and checks `path` against experiment `e`.
    ///
    /// # Errors
    /// One [`MeasuredError`] naming the file, and the line and field where there is one.
    pub fn read(path: &Path, e: &Experiment) -> Result<Self, MeasuredError> {
        let text = lockstack_common::input::read_text_file(path, MAX_MEASURED_BYTES)
            .map_err(|e| MeasuredError::Read { path: path.to_path_buf(), message: e.error.to_string() })?;
        Self::parse(&text, path, e)
    }

    /// Parses the text of a measured file; `path` names it in errors.
    ///
    /// # Errors
    /// As [`Measured::read`].
    pub fn parse(text: &str, path: &Path, e: &Experiment) -> Result<Self, MeasuredError> {
        let variants: Vec<&str> = e.variants.iter().map(|v| v.name).collect();
        let workloads: Vec<&str> = e.workloads.iter().map(|w| w.name).collect();
        Self::parse_for(text, path, e.name, &variants, &workloads)
    }

    /// Reads and checks `path` for a caller that is not an experiment: `what` names it in
    /// messages ("machine sweep"), `variants` are the values the `variant` column may hold
    /// (the sweep's presets) and `workloads` those of `workload` (the first when empty).
    ///
    /// # Errors
    /// As [`Measured::read`].
    pub fn read_for(
        path: &Path,
        what: &str,
        variants: &[&str],
        workloads: &[&str],
    ) -> Result<Self, MeasuredError> {
        let text = lockstack_common::input::read_text_file(path, MAX_MEASURED_BYTES)
            .map_err(|e| MeasuredError::Read { path: path.to_path_buf(), message: e.error.to_string() })?;
        Self::parse_for(&text, path, what, variants, workloads)
    }

    /// [`Measured::parse`] against explicit lists, as [`Measured::read_for`] describes.
    ///
    /// # Errors
    /// As [`Measured::read`].
    pub fn parse_for(
        text: &str,
        path: &Path,
        what: &str,
        variants: &[&str],
        workloads: &[&str],
    ) -> Result<Self, MeasuredError> {
        let mut rdr = csv::ReaderBuilder::new()
            .comment(Some(b'#'))
            .trim(csv::Trim::All)
            .flexible(true)
            .from_reader(text.as_bytes());
        let field_err = |line: u64, field: &str, message: String| MeasuredError::Field {
            path: path.to_path_buf(),
            line,
            field: field.to_string(),
            message,
        };
        let header_rec = rdr.headers().map_err(|err| MeasuredError::Header {
            path: path.to_path_buf(),
            line: err.position().map_or(1, |p| p.line()),
            message: format!("not a CSV header: {err}"),
        })?;
        let header_line = header_rec.position().map_or(1, |p| p.line());
        let headers: Vec<String> = header_rec.iter().map(str::to_string).collect();
        let header_err =
            |message: String| MeasuredError::Header { path: path.to_path_buf(), line: header_line, message };
        let mut index = [None; COLUMNS.len()];
        for (i, h) in headers.iter().enumerate() {
            let Some(c) = COLUMNS.iter().position(|c| c == h) else {
                return Err(header_err(format!(
                    "column {h:?} is unsupported (the columns are {})",
                    COLUMNS.join(", ")
                )));
            };
            if index[c].replace(i).is_some() {
                return Err(header_err(format!("column {h:?} appears twice")));
            }
        }
        for (c, name) in COLUMNS[..3].iter().enumerate() {
            if index[c].is_none() {
                return Err(header_err(format!(
                    "no {name:?} column (the header must name {}; optional: machine, workload)",
                    COLUMNS[..3].join(", ")
                )));
            }
        }
        let mut points: Vec<MeasuredPoint> = Vec::new();
        for rec in rdr.records() {
            let rec = rec.map_err(|err| {
                let line = err.position().map_or(0, |p| p.line());
                field_err(line, "-", format!("not CSV: {err}"))
            })?;
            let line = rec.position().map_or(0, |p| p.line());
            if rec.len() != headers.len() {
                return Err(field_err(
                    line,
                    "-",
                    format!("{} fields where the header has {}", rec.len(), headers.len()),
                ));
            }
            let get = |c: usize| index[c].and_then(|i| rec.get(i)).unwrap_or("");
            let variant = get(0);
            if !variants.contains(&variant) {
                return Err(field_err(
                    line,
                    "variant",
                    format!("{variant:?} is not a variant of {what} ({})", variants.join(", ")),
                ));
            }
            let clients = get(1).parse::<u32>().ok().filter(|&c| c >= 1).ok_or_else(|| {
                field_err(line, "clients", format!("{:?} is not a whole number from 1", get(1)))
            })?;
            let tps =
                get(2).parse::<f64>().ok().filter(|t| t.is_finite() && *t > 0.0).ok_or_else(|| {
                    field_err(line, "tps", format!("{:?} is not a positive number", get(2)))
                })?;
            let machine = Some(get(3)).filter(|m| !m.is_empty()).map(str::to_string);
            let workload_given = !get(4).is_empty();
            let workload = match get(4) {
                "" => workloads.first().copied().unwrap_or_default(),
                w if workloads.contains(&w) => w,
                w => {
                    return Err(field_err(
                        line,
                        "workload",
                        format!("{w:?} is not a workload of {what} ({})", workloads.join(", ")),
                    ));
                }
            };
            let p = MeasuredPoint {
                workload: workload.to_string(),
                variant: variant.to_string(),
                clients,
                tps,
                machine,
                workload_given,
                line,
            };
            if let Some(q) = points.iter().find(|q| {
                (&q.workload, &q.variant, q.clients, &q.machine)
                    == (&p.workload, &p.variant, p.clients, &p.machine)
            }) {
                return Err(field_err(
                    line,
                    "clients",
                    format!(
                        "{} {} at {} clients again (first on line {})",
                        p.workload, p.variant, p.clients, q.line
                    ),
                ));
            }
            points.push(p);
        }
        if points.is_empty() {
            return Err(MeasuredError::Empty { path: path.to_path_buf() });
        }
        Ok(Self { path: path.to_path_buf(), points })
    }

    /// The series name the tables and plots give these figures: `measured (FILE)`, or
    /// `measured on MACHINE (FILE)` for a machine's rows.
    pub fn series(&self, machine: Option<&str>) -> String {
        let file = self
            .path
            .file_name()
            .map_or_else(|| self.path.display().to_string(), |f| f.to_string_lossy().into_owned());
        match machine {
            Some(m) => format!("measured on {m} ({file})"),
            None => format!("measured ({file})"),
        }
    }

    /// The rows that apply on `machine` (`None`: a native run): those without a machine, and
    /// those naming it.
    pub fn on(&self, machine: Option<&str>) -> impl Iterator<Item = &MeasuredPoint> {
        let machine = machine.map(str::to_string);
        self.points.iter().filter(move |p| p.machine.is_none() || p.machine == machine)
    }

    /// Why rows of the file apply to no panel or series of a run on `machine` (`None`: a
    /// native run) of `workloads`: one line per reason with its row count, e.g.
    /// `--measured mine.csv: 3 rows not drawn: machine "nosuchbox" is not this run's machine
    /// (xeon-32)`. A row whose workload is not run is counted there, not under its machine.
    pub fn not_drawn(&self, machine: Option<&str>, workloads: &[&str]) -> Vec<String> {
        let mut reasons: Vec<(String, usize)> = Vec::new();
        for p in &self.points {
            let reason = if !workloads.contains(&p.workload.as_str()) {
                let hint = if p.workload_given { "" } else { "; give a workload column" };
                format!("workload {:?} is not run (--workload {}){hint}", p.workload, workloads.join(","))
            } else {
                match (&p.machine, machine) {
                    (Some(m), Some(run)) if m != run => {
                        format!("machine {m:?} is not this run's machine ({run})")
                    }
                    (Some(m), None) => {
                        format!("machine {m:?} is not this run's machine (a native run, no --machine)")
                    }
                    _ => continue,
                }
            };
            match reasons.iter_mut().find(|(r, _)| *r == reason) {
                Some((_, n)) => *n += 1,
                None => reasons.push((reason, 1)),
            }
        }
        reasons
            .into_iter()
            .map(|(reason, n)| {
                let rows = if n == 1 { "row" } else { "rows" };
                format!("--measured {}: {n} {rows} not drawn: {reason}", self.path.display())
            })
            .collect()
    }

    /// The rows that apply on `machine` as [`Published`] points (series from
    /// [`Measured::series`]), for the tables, plots and calibration. The strings are leaked:
    /// a file is read once per process.
    pub fn as_published(&self, machine: Option<&str>) -> Vec<Published> {
        let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
        let mut out = Vec::new();
        let mut names: Vec<(Option<String>, &'static str)> = Vec::new();
        for p in self.on(machine) {
            let series = match names.iter().find(|(m, _)| *m == p.machine) {
                Some((_, s)) => *s,
                None => {
                    let s = leak(self.series(p.machine.as_deref()));
                    names.push((p.machine.clone(), s));
                    s
                }
            };
            out.push(Published {
                workload: leak(p.workload.clone()),
                series,
                clients: p.clients,
                variant: leak(p.variant.clone()),
                low: None,
                tps: p.tps,
                high: None,
            });
        }
        out
    }
}

/// Whether `series` names the user's measured figures rather than a thread's.
pub fn is_measured_series(series: &str) -> bool {
    series.starts_with("measured (") || series.starts_with("measured on ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pgxact() -> &'static Experiment {
        crate::experiments::find("pgxact").unwrap()
    }

    #[test]
    fn a_written_file_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mine.csv");
        let mut w = csv::Writer::from_path(&path).unwrap();
        w.write_record(["variant", "clients", "tps", "machine", "workload"]).unwrap();
        let rows = [
            ("pgproc", 1u32, 4100.5f64, "", "select-only"),
            ("pgxact", 32, 160000.0, "xeon-32", "select-only"),
            ("pgproc", 8, 2500.25, "", "tpcb-like"),
        ];
        for (v, c, t, m, wl) in rows {
            w.write_record([v.to_string(), c.to_string(), t.to_string(), m.to_string(), wl.to_string()])
                .unwrap();
        }
        w.flush().unwrap();
        let m = Measured::read(&path, pgxact()).unwrap();
        assert_eq!(m.points.len(), 3);
        for (p, (v, c, t, mach, wl)) in m.points.iter().zip(rows) {
            assert_eq!((p.variant.as_str(), p.clients, p.tps, p.workload.as_str()), (v, c, t, wl));
            assert_eq!(p.machine.as_deref(), Some(mach).filter(|s| !s.is_empty()));
        }
        assert_eq!(m.points[1].line, 3);
        // On xeon-32 every row applies; natively the xeon-32 row does not.
        assert_eq!(m.as_published(Some("xeon-32")).len(), 3);
        let native = m.as_published(None);
        assert_eq!(native.len(), 2);
        assert_eq!(native[0].series, "measured (mine.csv)");
        assert!(is_measured_series(native[0].series));
        assert!(m.as_published(Some("xeon-32")).iter().any(|p| p.series == "measured on xeon-32 (mine.csv)"));
    }

    #[test]
    fn the_optional_columns_may_be_absent_and_comments_are_skipped() {
        let text = "# from my laptop\nclients,tps,variant\n1,900,pgproc\n4,3000,pgxact\n";
        let m = Measured::parse(text, Path::new("a.csv"), pgxact()).unwrap();
        assert_eq!(m.points.len(), 2);
        assert_eq!(m.points[0].workload, pgxact().workloads[0].name);
        assert_eq!(m.points[1].line, 4);
    }

    /// Rows of another machine or of a workload the run leaves out are said, one line a reason.
    #[test]
    fn rows_no_panel_shows_are_said() {
        let text = "variant,clients,tps,machine\npgproc,1,900,\npgproc,2,1800,\npgxact,1,950,nosuchbox\n";
        let m = Measured::parse(text, Path::new("mine.csv"), pgxact()).unwrap();
        assert_eq!(
            m.not_drawn(Some("xeon-32"), &["select-only"]),
            vec![
                "--measured mine.csv: 3 rows not drawn: workload \"simple-update\" is not run (--workload select-only); give a workload column"
            ]
        );
        assert_eq!(
            m.not_drawn(Some("xeon-32"), &["simple-update", "select-only"]),
            vec![
                "--measured mine.csv: 1 row not drawn: machine \"nosuchbox\" is not this run's machine (xeon-32)"
            ]
        );
        assert!(m.not_drawn(Some("nosuchbox"), &["simple-update"]).is_empty());
    }

    /// Each malformed file is one error naming the file, the line and the field.
    #[test]
    fn malformed_files_name_file_line_and_field() {
        let e = pgxact();
        let err = |text: &str| Measured::parse(text, Path::new("bad.csv"), e).unwrap_err().to_string();
        assert_eq!(
            err("variant,clients,tps\npgproc,1,100\npgproc,two,200\n"),
            "--measured bad.csv: line 3: field clients: \"two\" is not a whole number from 1"
        );
        assert_eq!(
            err("variant,clients,tps\npgproc,1,-5\n"),
            "--measured bad.csv: line 2: field tps: \"-5\" is not a positive number"
        );
        assert!(
            err("variant,clients,tps\nnope,1,5\n")
                .starts_with("--measured bad.csv: line 2: field variant: \"nope\"")
        );
        assert!(
            err("variant,clients,tps,workload\npgproc,1,5,scan\n")
                .starts_with("--measured bad.csv: line 2: field workload: \"scan\"")
        );
        assert!(
            err("variant,clients,tps\npgproc,1,5\npgproc,1,6\n")
                .contains("line 3: field clients: simple-update pgproc at 1 clients again (first on line 2)")
        );
        assert!(
            err("variant,clients,tps\npgproc,1\n")
                .starts_with("--measured bad.csv: line 2: field -: 2 fields")
        );
        assert!(
            err("variant,clients,speed\npgproc,1,5\n")
                .starts_with("--measured bad.csv: line 1: column \"speed\" is unsupported")
        );
        assert!(
            err("variant,tps\npgproc,5\n").starts_with("--measured bad.csv: line 1: no \"clients\" column")
        );
        assert!(err("variant,clients,tps\n").starts_with("--measured bad.csv: no data row"));
    }
}
