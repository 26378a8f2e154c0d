//! The one colour table of every plot: a fixed colour per wait class, lock tranche and time
//! category (the stacked bars of `NAME-time.svg`), and a fixed colour, marker and dash per
//! series position (the variants of an experiment, the presets of `lockstack machine sweep`).
//! No locks: constant tables.
//!
//! A class keeps its colour in every plot because the colour comes from its name, never from
//! its rank in one run. The table's order is also the stacking order of the time plot (first
//! at the bottom). Names follow PostgreSQL's `pg_stat_activity.wait_event_type:wait_event`
//! (PostgreSQL 15's names; `LWLock:` + the tranche names of `lockstack_common::tranche`), plus
//! the lock stack's own named waits that have no PostgreSQL event (`ProcStructLock`, a
//! spinlock registry; `FreePageList`; the harness's `Harness:*` gates) and the time that is
//! no wait at all (`running`, `runnable (no core)`, `sleep`, `no wait event`, `joining`).

use plotters::style::RGBColor;

/// `running`: a backend on a core, doing work.
pub const RUNNING: &str = "running";
/// Runnable, but no core free (the simulated machine's scheduler queue).
pub const RUNNABLE: &str = "runnable (no core)";
/// A sleep that publishes no wait event (a timed back-off outside any named wait).
pub const SLEEP: &str = "sleep";
/// A wait that named no class (the simulator's `unclassified`).
pub const NO_WAIT_EVENT: &str = "no wait event";
/// A task joining the tasks it started (the end of a phase).
pub const JOINING: &str = "joining";

/// Every named time category and its colour, in stacking order (bottom first). Colours are
/// matplotlib's tab10 / tab20 / tab20b / tab20c hues (readable on white), picked so that the
/// classes that share a plot in the seeds' runs differ.
pub const WAIT_COLOURS: &[(&str, RGBColor)] = &[
    (RUNNING, RGBColor(44, 160, 44)),
    ("LWLock:ProcArray", RGBColor(214, 39, 40)),
    ("LWLock:XidGen", RGBColor(227, 119, 194)),
    ("LWLock:WALInsert", RGBColor(255, 127, 14)),
    ("LWLock:WALWrite", RGBColor(255, 187, 120)),
    ("LWLock:WALBufMapping", RGBColor(173, 73, 74)),
    ("LWLock:XactSLRU", RGBColor(188, 189, 34)),
    ("LWLock:XactBuffer", RGBColor(219, 219, 141)),
    ("LWLock:XactSLRUBank", RGBColor(140, 109, 49)),
    ("LWLock:SubtransSLRU", RGBColor(231, 203, 148)),
    ("LWLock:SubtransBuffer", RGBColor(189, 158, 57)),
    ("LWLock:OldSnapshotTimeMap", RGBColor(123, 65, 115)),
    ("LWLock:MultiXactGen", RGBColor(206, 109, 189)),
    ("LWLock:BufFreelist", RGBColor(152, 223, 138)),
    ("LWLock:BufferMapping", RGBColor(23, 190, 207)),
    ("LWLock:BufferContent", RGBColor(174, 199, 232)),
    ("LWLock:BufferIO", RGBColor(57, 59, 121)),
    ("LWLock:LockManager", RGBColor(31, 119, 180)),
    ("LWLock:LockFastPath", RGBColor(107, 110, 207)),
    ("LWLock:PredicateLockManager", RGBColor(156, 158, 222)),
    ("LWLock:ControlFile", RGBColor(82, 84, 163)),
    ("LWLock:OidGen", RGBColor(165, 81, 148)),
    ("LWLock:extension", RGBColor(99, 99, 99)),
    ("LWLock:BtreeSplit", RGBColor(255, 127, 80)),
    ("LWLock:XactTruncation", RGBColor(128, 128, 0)),
    ("LWLock:SubtransSLRUBank", RGBColor(0, 128, 128)),
    ("LWLock:LwLockBench", RGBColor(70, 130, 180)),
    ("ProcStructLock", RGBColor(140, 86, 75)),
    ("FreePageList", RGBColor(196, 156, 148)),
    ("Lock:relation", RGBColor(132, 60, 57)),
    ("Lock:extend", RGBColor(140, 81, 10)),
    ("Lock:frozenid", RGBColor(206, 219, 156)),
    ("Lock:page", RGBColor(214, 97, 107)),
    ("Lock:tuple", RGBColor(165, 15, 21)),
    ("Lock:transactionid", RGBColor(255, 152, 150)),
    ("Lock:virtualxid", RGBColor(251, 106, 74)),
    ("Lock:spectoken", RGBColor(252, 187, 161)),
    ("Lock:object", RGBColor(103, 0, 13)),
    ("Lock:userlock", RGBColor(203, 24, 29)),
    ("Lock:advisory", RGBColor(254, 224, 210)),
    ("BufferPin:BufferPin", RGBColor(49, 130, 189)),
    ("IPC:ProcArrayGroupUpdate", RGBColor(148, 103, 189)),
    ("IPC:XactGroupUpdate", RGBColor(197, 176, 213)),
    ("IPC:BufferIO", RGBColor(107, 174, 214)),
    ("IPC:LockFlexQueue", RGBColor(255, 215, 0)),
    ("IPC:SLRUIO", RGBColor(158, 154, 200)),
    ("IO:WALWrite", RGBColor(116, 196, 118)),
    ("IO:WALSync", RGBColor(99, 121, 57)),
    ("IO:WALRead", RGBColor(161, 217, 155)),
    ("IO:DataFileRead", RGBColor(0, 109, 44)),
    ("IO:DataFileWrite", RGBColor(65, 171, 93)),
    ("IO:DataFileExtend", RGBColor(181, 207, 107)),
    ("IO:DataFileSync", RGBColor(35, 139, 69)),
    ("IO:SLRURead", RGBColor(199, 233, 192)),
    ("IO:SLRUWrite", RGBColor(49, 163, 84)),
    ("IO:SLRUSync", RGBColor(186, 228, 179)),
    ("Timeout:SpinDelay", RGBColor(240, 2, 127)),
    ("Timeout:PgSleep", RGBColor(253, 141, 60)),
    ("Timeout:CommitDelay", RGBColor(230, 85, 13)),
    ("Activity:WalWriterMain", RGBColor(102, 194, 165)),
    ("Activity:CheckpointerMain", RGBColor(198, 219, 239)),
    ("Client:ClientRead", RGBColor(189, 189, 189)),
    ("Harness:start", RGBColor(253, 208, 162)),
    ("Harness:end", RGBColor(218, 218, 235)),
    ("Harness:idle", RGBColor(239, 237, 245)),
    (NO_WAIT_EVENT, RGBColor(150, 150, 150)),
    (SLEEP, RGBColor(158, 218, 229)),
    (JOINING, RGBColor(230, 230, 230)),
    (RUNNABLE, RGBColor(82, 82, 82)),
];

/// Colours of names the table does not hold (a tranche an extension registered, a wait event
/// added later): picked by a hash of the name, so that such a class, too, keeps its colour
/// from plot to plot.
const FALLBACK: [RGBColor; 8] = [
    RGBColor(128, 177, 211),
    RGBColor(251, 128, 114),
    RGBColor(179, 222, 105),
    RGBColor(252, 205, 229),
    RGBColor(188, 128, 189),
    RGBColor(204, 235, 197),
    RGBColor(255, 237, 111),
    RGBColor(141, 211, 199),
];

/// The colour of time category `name` (a wait class as [`super::time_shares`] names it):
/// the table's, or for a name it does not hold one picked by the name's FNV-1a hash.
pub fn wait_colour(name: &str) -> RGBColor {
    if let Some((_, c)) = WAIT_COLOURS.iter().find(|(n, _)| *n == name) {
        return *c;
    }
    let h =
        name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    FALLBACK[(h % FALLBACK.len() as u64) as usize]
}

/// Where `name` stacks: its index in [`WAIT_COLOURS`], names outside the table after all of
/// them (the caller orders those by name).
pub fn wait_rank(name: &str) -> usize {
    WAIT_COLOURS.iter().position(|(n, _)| *n == name).unwrap_or(WAIT_COLOURS.len())
}

/// Line colours, one per series position (tab10): variant 0 (the baseline) is always blue,
/// variant 1 red, and so on, in every experiment's plot and `machine sweep`'s.
pub const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(140, 86, 75),
];

/// A point marker's shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Marker {
    /// A disc.
    Circle,
    /// A square.
    Square,
    /// A triangle pointing up.
    Triangle,
    /// A diamond.
    Diamond,
    /// A triangle pointing down.
    TriangleDown,
    /// An X.
    Cross,
}

/// Markers, one per series position: equal curves stay visible because their markers differ.
pub const MARKERS: [Marker; 6] =
    [Marker::Circle, Marker::Square, Marker::Triangle, Marker::Diamond, Marker::TriangleDown, Marker::Cross];

/// Dash patterns, one per series position, `(dash, gap)` pixels; `None` is solid. Equal curves
/// drawn over each other still show each one's dashes.
pub const DASHES: [Option<(u32, u32)>; 6] =
    [None, Some((10, 5)), Some((3, 4)), Some((16, 4)), Some((6, 3)), Some((2, 7))];

/// The look of one series: colour, marker and dash.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Style {
    /// Line and marker colour.
    pub colour: RGBColor,
    /// Marker shape.
    pub marker: Marker,
    /// Line dashes (`None`: solid).
    pub dash: Option<(u32, u32)>,
}

/// The style of the series at position `i` (a variant's index in its experiment, a preset's in
/// the sweep): colour, marker and dash from the three tables, cycling.
pub fn series_style(i: usize) -> Style {
    Style {
        colour: COLORS[i % COLORS.len()],
        marker: MARKERS[i % MARKERS.len()],
        dash: DASHES[i % DASHES.len()],
    }
}

/// `#rrggbb` of a colour, as the SVG writes it.
pub fn hex(c: RGBColor) -> String {
    format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_wait_class_has_one_colour_and_the_names_are_distinct() {
        for (i, (n, c)) in WAIT_COLOURS.iter().enumerate() {
            assert!(WAIT_COLOURS[..i].iter().all(|(m, _)| m != n), "{n} twice");
            assert!(WAIT_COLOURS[..i].iter().all(|(_, d)| d != c), "{n}: colour {} taken", hex(*c));
        }
        // Every built-in tranche has its entry.
        for t in lockstack_common::tranche::TrancheId::all_named() {
            let name = format!("LWLock:{}", t.name());
            assert!(wait_rank(&name) < WAIT_COLOURS.len(), "{name}");
        }
        assert_eq!(wait_colour("Timeout:SpinDelay"), RGBColor(240, 2, 127));
        // A name outside the table keeps its colour from call to call.
        assert_eq!(wait_colour("LWLock:MyExtension"), wait_colour("LWLock:MyExtension"));
        assert_eq!(wait_rank("LWLock:MyExtension"), WAIT_COLOURS.len());
    }
}
