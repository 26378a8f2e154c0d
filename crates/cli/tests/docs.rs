//! What the docs and the help texts promise a reader of a fresh clone: `experiment NAME --help`
//! names the thread NAME reruns (title, authors, date), docs/ARCHITECTURE.md's dependency graph
//! is the one the Cargo.toml files declare, nothing sends a reader to the project's shared
//! directory beside the repository (a clone does not have it), docs/*.md hold no dated
//! session headings (those live in docs/measurements/), and no source file or top-level doc
//! cites the project's tracker by number (comments explain the code, not its tracker).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// (experiment, a phrase of its thread's title, an author, the year).
const THREADS: [(&str, &str, &str, &str); 5] = [
    ("pgxact", "Storing hot members of PGPROC out of the band", "Pavan Deolasee", "2011"),
    ("old-snapshot", "Avoid extra locks in GetSnapshotData", "Amit Kapila", "2016"),
    ("flexlock", "testing ProcArrayLock patches", "Kevin Grittner", "2011"),
    ("fastpath", "reducing the overhead of frequent table locks", "Robert Haas", "2011"),
    ("vm-pin", "Do we need so many hint bits?", "Jeff Davis", "2012"),
];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

#[test]
fn experiment_help_names_its_thread() {
    for (name, title, author, year) in THREADS {
        for args in [vec!["experiment", name, "--help"], vec!["experiment", "--help", name]] {
            let o = Command::new(env!("CARGO_BIN_EXE_lockstack")).args(&args).output().unwrap();
            let stdout = String::from_utf8_lossy(&o.stdout);
            assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
            let thread = stdout
                .lines()
                .find(|l| l.starts_with("thread:"))
                .unwrap_or_else(|| panic!("{args:?}: {stdout}"));
            assert!(thread.contains(title), "{name}: {thread}");
            let authors = stdout.lines().find(|l| l.starts_with("authors:")).unwrap_or("");
            assert!(authors.contains(author), "{name}: {stdout}");
            let date = stdout.lines().find(|l| l.starts_with("date:")).unwrap_or("");
            assert!(date.contains(year), "{name}: {stdout}");
            // clap's help for the options follows.
            assert!(stdout.contains("--clients"), "{name}: {stdout}");
        }
    }
    // The plain `experiment --help` names no thread.
    let o = Command::new(env!("CARGO_BIN_EXE_lockstack")).args(["experiment", "--help"]).output().unwrap();
    assert!(o.status.success());
    assert!(!String::from_utf8_lossy(&o.stdout).contains("thread:"));
}

/// The lockstack crates `manifest` lists under `[dependencies]` (short names: `lwlock`).
fn cargo_deps(manifest: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(manifest).unwrap();
    let mut deps = BTreeSet::new();
    let mut in_deps = false;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_deps = line == "[dependencies]";
        } else if in_deps && let Some(rest) = line.strip_prefix("lockstack-") {
            let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric()).collect();
            deps.insert(name);
        }
    }
    deps
}

/// The graph in ARCHITECTURE.md: the fenced block after "dependency graph", one line per
/// crate, `crate -> dep, dep` (`crate -> (none)` for a leaf).
fn documented_graph() -> BTreeMap<String, BTreeSet<String>> {
    let text = std::fs::read_to_string(workspace().join("docs/ARCHITECTURE.md")).unwrap();
    let start = text.find("dependency graph").expect("ARCHITECTURE.md names its dependency graph");
    let block = text[start..].split("```").nth(1).expect("a fenced block after it");
    let mut graph = BTreeMap::new();
    for line in block.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (from, to) = line.split_once("->").unwrap_or_else(|| panic!("not `crate -> deps`: {line}"));
        let to = to.trim();
        let deps = if to == "(none)" {
            BTreeSet::new()
        } else {
            to.split(',').map(|d| d.trim().to_string()).collect()
        };
        assert!(graph.insert(from.trim().to_string(), deps).is_none(), "{line}: listed twice");
    }
    graph
}

#[test]
fn architecture_graph_matches_the_manifests() {
    let root = workspace();
    let mut actual = BTreeMap::new();
    for entry in std::fs::read_dir(root.join("crates")).unwrap() {
        let dir = entry.unwrap().path();
        if dir.join("Cargo.toml").exists() {
            let name = dir.file_name().unwrap().to_string_lossy().into_owned();
            actual.insert(name, cargo_deps(&dir.join("Cargo.toml")));
        }
    }
    actual.insert("benches".to_string(), cargo_deps(&root.join("benches/Cargo.toml")));
    assert_eq!(documented_graph(), actual, "docs/ARCHITECTURE.md's graph differs from the Cargo.toml files");
}

/// Every file under `dir` with one of `exts`, recursively (`target` directories skipped).
fn files(dir: &Path, exts: &[&str], out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            if !path.ends_with("target") {
                files(&path, exts, out);
            }
        } else if path.extension().is_some_and(|e| exts.iter().any(|x| e == *x)) {
            out.push(path);
        }
    }
}

#[test]
fn nothing_points_outside_the_repository() {
    let root = workspace();
    let mut all = vec![root.join("README.md")];
    files(&root.join("docs"), &["md"], &mut all);
    files(&root.join("crates"), &["rs", "md", "toml"], &mut all);
    files(&root.join("benches"), &["rs", "toml"], &mut all);
    let needle = ["..", "/", "shared", "/"].concat();
    let pg15 = ["pg15-lock-traffic", ".md"].concat();
    for f in &all {
        let text = std::fs::read_to_string(f).unwrap();
        for (i, line) in text.lines().enumerate() {
            assert!(
                !line.contains(&needle) && !line.contains(&pg15),
                "{}:{}: points outside the repository: {line}",
                f.display(),
                i + 1
            );
        }
    }
}

#[test]
fn docs_hold_no_dated_session_headings() {
    let root = workspace();
    let mut docs = Vec::new();
    for entry in std::fs::read_dir(root.join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            docs.push(path);
        }
    }
    for f in docs {
        let text = std::fs::read_to_string(&f).unwrap();
        for line in text.lines().filter(|l| l.starts_with('#')) {
            let heading = line.trim_start_matches('#');
            if !heading.starts_with(' ') {
                continue;
            }
            let session = heading
                .to_lowercase()
                .split("session ")
                .skip(1)
                .any(|r| r.starts_with(|c: char| c.is_ascii_digit()));
            let dated = heading.as_bytes().windows(10).any(|w| {
                w[0] == b'2'
                    && w[1] == b'0'
                    && w[4] == b'-'
                    && w[7] == b'-'
                    && [2, 3, 5, 6, 8, 9].iter().all(|&i| w[i].is_ascii_digit())
            });
            assert!(
                !session && !dated,
                "{}: a dated or session heading belongs in docs/measurements/: {line}",
                f.display()
            );
        }
    }
}

/// Where `text` cites a tracker entry by number: the word (built at run time, so this file
/// does not cite itself), an optional plural `s`, then any spaces, line breaks, `#`, `-`, `_`
/// or comment markers, then a digit. Returns the 1-based line of each citation.
fn tracker_citations(text: &str) -> Vec<usize> {
    let word = ["iss", "ue"].concat();
    let lower = text.to_lowercase();
    let bytes = lower.as_bytes();
    let mut lines = Vec::new();
    let mut from = 0;
    while let Some(at) = lower[from..].find(&word) {
        let start = from + at;
        let mut i = start + word.len();
        if bytes.get(i) == Some(&b's') {
            i += 1;
        }
        while bytes.get(i).is_some_and(|b| b.is_ascii_whitespace() || b"#-_/!*".contains(b)) {
            i += 1;
        }
        if bytes.get(i).is_some_and(u8::is_ascii_digit) {
            lines.push(lower[..start].matches('\n').count() + 1);
        }
        from = start + word.len();
    }
    lines
}

#[test]
fn tracker_citation_check_finds_its_forms() {
    let word = ["Iss", "ue"].concat();
    for cited in [
        format!("(see {word} 17)"),
        format!("{word} #17"),
        format!("{word}s 4 and 5"),
        format!("({} 18, item 1)", word.to_lowercase()),
        format!("{word} 17's flag"),
        format!("the {}-2 targets", word.to_lowercase()),
        format!("//! a simulation ({}\n//! 17)", word.to_lowercase()),
    ] {
        assert_eq!(tracker_citations(&cited).len(), 1, "{cited}");
    }
    for plain in ["a flush was issued", "issue_xlog_fsync in xlog.c", "issues a SeqCst fence"] {
        assert!(tracker_citations(plain).is_empty(), "{plain}");
    }
}

#[test]
fn sources_and_docs_cite_no_tracker_numbers() {
    let root = workspace();
    let mut all = vec![root.join("README.md"), root.join("justfile"), root.join(".ci/run")];
    files(&root.join("crates"), &["rs"], &mut all);
    files(&root.join("benches"), &["rs"], &mut all);
    files(&root.join("tools"), &["py", "sh", "md"], &mut all);
    for entry in std::fs::read_dir(root.join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            all.push(path);
        }
    }
    let mut found = Vec::new();
    for f in all.iter().filter(|f| f.exists()) {
        let text = std::fs::read_to_string(f).unwrap();
        found.extend(tracker_citations(&text).into_iter().map(|l| format!("{}:{l}", f.display())));
    }
    assert!(
        found.is_empty(),
        "tracker numbers in code or docs (say what the code does or why; dated history belongs in \
         docs/measurements/): {}",
        found.join(", ")
    );
}
