//! `lockstack experiment plot DIR`: redraws a run's plots from its NAME.json byte for byte,
//! writes the shared wait-class legend, and refuses anything but DIR and --out.

use std::process::{Command, Output};

fn lockstack(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lockstack")).args(args).output().expect("run lockstack")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn plot_redraws_a_run_and_refuses_other_options() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let run_s = run.to_str().unwrap();
    let o = lockstack(&["experiment", "fastpath", "--smoke", "--out", run_s]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let again = dir.path().join("again");
    let o = lockstack(&["experiment", "plot", run_s, "--out", again.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let stdout = text(&o.stdout);
    assert!(stdout.contains("fastpath.svg") && stdout.contains("wait-colours.svg"), "{stdout}");
    // The same plot as the run drew; no time plot for a native run.
    let a = std::fs::read_to_string(run.join("fastpath.svg")).unwrap();
    let b = std::fs::read_to_string(again.join("fastpath.svg")).unwrap();
    assert_eq!(a, b);
    assert!(!again.join("fastpath-time.svg").exists());
    let legend = std::fs::read_to_string(again.join("wait-colours.svg")).unwrap();
    assert!(legend.contains("Timeout:SpinDelay") && legend.contains("LWLock:ProcArray"));

    // Bad input: one line on stderr, exit 1.
    let empty = dir.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let cases: [(&[&str], &str); 4] = [
        (&["experiment", "plot"], "needs DIR"),
        (&["experiment", "plot", run_s, "--clients", "4"], "DIR and --out only"),
        (&["experiment", "plot", empty.to_str().unwrap()], "no NAME.json"),
        (&["experiment", "plot", run_s, "--runs", "2"], "DIR and --out only"),
    ];
    for (args, want) in cases {
        let o = lockstack(args);
        let stderr = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
    }
    // A damaged NAME.json names the file.
    std::fs::write(run.join("fastpath.json"), "{\"plan\": 1}").unwrap();
    let o = lockstack(&["experiment", "plot", run_s]);
    let stderr = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("fastpath.json"), "{stderr}");
}
