//! The sweep's one table load: `lockstack pgbench -i -s S --data-dir image` run once in
//! `DIR/points/` before the points, each point then starting from a copy of it
//! (`pgbench --load-from image`, lockstack_engine's `datadir::load_image`) instead of loading
//! the tables again. Takes no lock.

use std::path::{Path, PathBuf};

use lockstack_common::sync::Instant;

use crate::Failure;
use crate::child;

/// The load image's directory name inside `DIR/points/`, as the points' `--load-from` names it.
pub(super) const IMAGE_DIR: &str = "image";

/// A load image written for this sweep.
pub(super) struct Image {
    /// Its directory, `DIR/points/image`.
    pub(super) path: PathBuf,
    /// Host seconds the load took (the child's whole run: load and shutdown checkpoint).
    pub(super) load_s: f64,
    /// Bytes of its relation files.
    pub(super) bytes: u64,
}

/// Loads the tables at `scale` once into `dir/image` (a data directory a previous sweep kept
/// there is reinitialized).
///
/// # Errors
/// The child cannot start, or fails (its last line: a scale too large for the memory, a full
/// disk): exit 2, the partial image removed; the sweep was interrupted: exit 130, the child
/// killed and the partial image removed.
pub(super) fn load(exe: &Path, scale: u64, dir: &Path) -> Result<Image, Failure> {
    let path = dir.join(IMAGE_DIR);
    // On stdout, the sweep's report, so that a failure stays the one line on stderr.
    outln!("loading the tables once (scale {scale}) into {}", path.display());
    let t0 = Instant::now();
    let err_file = dir.join("image-load.err");
    let stderr = std::fs::File::create(&err_file)
        .map_err(|e| Failure::output(format!("--out: {}: {e}", err_file.display())))?;
    let mut child = child::command(exe)
        .current_dir(dir)
        .args(["pgbench", "-i", "-s", &scale.to_string(), "--data-dir", IMAGE_DIR])
        .stdout(std::process::Stdio::null())
        .stderr(stderr)
        .spawn()
        .map_err(|e| Failure::run(format!("loading the tables: could not start {}: {e}", exe.display())))?;
    let status = loop {
        if super::stopped() {
            let _ = child.kill();
            let _ = child.wait();
            let _ = std::fs::remove_file(&err_file);
            let _ = std::fs::remove_dir_all(&path);
            return Err(super::interrupted());
        }
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) => lockstack_common::sync::sleep(lockstack_common::sync::Duration::from_millis(10)),
            Err(e) => return Err(Failure::run(format!("loading the tables: waiting for the child: {e}"))),
        }
    };
    let load_s = t0.elapsed().as_secs_f64();
    if !status.success() {
        let last = child::last_line_of(&err_file);
        let _ = std::fs::remove_file(&err_file);
        let _ = std::fs::remove_dir_all(&path);
        return Err(Failure::run(format!(
            "loading the tables (lockstack pgbench -i -s {scale} --data-dir {}) failed: {last}",
            path.display(),
        )));
    }
    let _ = std::fs::remove_file(&err_file);
    let bytes = std::fs::read_dir(path.join("base"))
        .map(|rd| rd.flatten().filter_map(|e| e.metadata().ok()).map(|m| m.len()).sum())
        .unwrap_or(0);
    Ok(Image { path, load_s, bytes })
}

impl Image {
    /// Removes the image's directory; a failure is a warning, not an error (the sweep's
    /// results are written by then).
    pub(super) fn remove(&self) {
        if let Err(e) = std::fs::remove_dir_all(&self.path) {
            errln!("machine sweep: warning: could not remove {}: {e}", self.path.display());
        }
    }
}
