//! The segment-cost table: the mean host cost of the local work between two synchronization
//! operations, keyed by their call sites. One concept, no lock: a plain value the executor
//! reads (deterministic clock) or fills (measured clock), and the statistics return.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The largest segment table file (`--sim-segments FILE`) read, bytes (16 MiB). The built-in
/// table, every segment of every workload, is about 130 KB; the bound keeps
/// `--sim-segments /dev/zero` from filling memory.
pub const MAX_SEGMENT_TABLE_BYTES: u64 = 16 << 20;

/// Mean host cost of each segment, keyed by `"from_site -> to_site"` (`file:line:col`, or
/// `<start>`/`<exit>` for a task's first and last segment). Serializable, so a calibration can
/// be saved and reused.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SegmentTable {
    /// Segment key to its mean host cost.
    pub segments: BTreeMap<String, SegmentCost>,
}

impl SegmentTable {
    /// The table built into this crate: crates/sim/segments/builtin.json, written by
    /// `lockstack machine segments` (the native calibration pass over the workloads the
    /// simulated machine runs). A key whose lines moved since costs the mean of the table's
    /// segments between the same two files, else the table's median
    /// ([`SegmentTable::median_ns`]); the report says how many segments were found each way.
    ///
    /// # Panics
    /// If the embedded file is not a valid table (a test parses it).
    pub fn builtin() -> &'static SegmentTable {
        static TABLE: std::sync::OnceLock<SegmentTable> = std::sync::OnceLock::new();
        TABLE.get_or_init(|| {
            serde_json::from_str(include_str!("../segments/builtin.json"))
                .expect("the built-in segment table parses (a test parses it)")
        })
    }

    /// The sample-weighted mean host ns of a segment (0 for an empty table).
    pub fn mean_ns(&self) -> f64 {
        let n: u64 = self.segments.values().map(|c| c.samples).sum();
        let total: f64 = self.segments.values().map(|c| c.ns * c.samples as f64).sum();
        if n == 0 { 0.0 } else { total / n as f64 }
    }

    /// The median over the table's segments of their mean host ns (each call-site pair counts
    /// once, however often it ran): what a segment the table does not know is charged
    /// (0 for an empty table).
    pub fn median_ns(&self) -> f64 {
        let mut v: Vec<f64> = self.segments.values().map(|c| c.ns).collect();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(0.0)
    }

    /// Adds `other`'s samples to this table (sample-weighted means per key).
    pub fn merge(&mut self, other: &SegmentTable) {
        for (k, v) in &other.segments {
            let e = self.segments.entry(k.clone()).or_insert(SegmentCost { ns: 0.0, samples: 0 });
            let total = e.ns * e.samples as f64 + v.ns * v.samples as f64;
            e.samples += v.samples;
            e.ns = if e.samples == 0 { 0.0 } else { total / e.samples as f64 };
        }
    }
}

/// A segment key's two files without lines and columns (`"a.rs:1:2 -> b.rs:3:4"` gives
/// `"a.rs -> b.rs"`): what survives edits that move code within a file.
pub(crate) fn file_pair(key: &str) -> String {
    let strip = |site: &str| match site.split_once(':') {
        Some((file, _)) => file.to_string(),
        None => site.to_string(),
    };
    match key.split_once(" -> ") {
        Some((a, b)) => format!("{} -> {}", strip(a), strip(b)),
        None => key.to_string(),
    }
}

/// The sample-weighted mean host ns of each file pair of `table`.
pub(crate) fn file_pair_means(table: &SegmentTable) -> BTreeMap<String, f64> {
    let mut sums: BTreeMap<String, (f64, u64)> = BTreeMap::new();
    for (k, c) in &table.segments {
        let e = sums.entry(file_pair(k)).or_insert((0.0, 0));
        e.0 += c.ns * c.samples as f64;
        e.1 += c.samples;
    }
    sums.into_iter().filter(|(_, (_, n))| *n > 0).map(|(k, (t, n))| (k, t / n as f64)).collect()
}

/// Where a deterministic segment's cost came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SegmentSource {
    /// The table's entry for its two call sites.
    Exact,
    /// The mean of the table's segments between the same two files ([`file_pair`]).
    FilePair,
    /// Neither: the table's median.
    Default,
}

/// One segment's calibrated cost.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SegmentCost {
    /// Mean host nanoseconds.
    pub ns: f64,
    /// Samples the mean is over.
    pub samples: u64,
}
