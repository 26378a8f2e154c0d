//! Names of cache lines for a simulation's statistics: the process-global registry that
//! [`name_line`], [`name_fields`], [`name_elements`] and [`name_range`] fill and [`line_name`]
//! reads. Takes the registry's host mutex only (briefly, with no facade operation inside).

// Under loom the facade does not dispatch to a backend, so most of this module is unused there.
#![cfg_attr(loom, allow(dead_code))]

#[cfg(feature = "sim")]
use std::collections::{HashMap, VecDeque};
#[cfg(feature = "sim")]
use std::sync::atomic::Ordering;

#[cfg(feature = "sim")]
use super::seam::{EVER_INSTALLED, with_current_slow};

/// Bytes per cache line as the registry of [`name_line`] keys them (the simulated machine's
/// line size: an address's line is `addr >> 6`).
pub const LINE_BYTES: usize = 64;

/// At most this many lines carry a name in the registry of [`name_line`]; naming one more line
/// evicts the oldest-named line's name (counted by [`line_names_dropped`]), so that the
/// structures made last (the ones a simulation runs on) keep theirs. Names are for lock words,
/// state words and hot counters (a few per buffer at most), never per tuple or per page entry.
pub const LINE_NAMES_MAX: usize = 1 << 18;

/// The process-global registry of line names: line index (`addr >> 6`) to name, the lines in
/// the order they were first named (for eviction at the bound), and the count of names
/// evicted. A host lock: taken briefly, with no facade operation inside.
#[cfg(feature = "sim")]
struct LineNames {
    names: HashMap<usize, String>,
    order: VecDeque<usize>,
    dropped: u64,
    /// Named ranges ([`name_range`]): first byte, length, namer of an offset.
    ranges: Vec<NamedRange>,
}

/// A range [`name_range`] named: first byte, length, namer of a line's offset.
#[cfg(feature = "sim")]
type NamedRange = (usize, usize, fn(usize) -> String);

#[cfg(feature = "sim")]
fn line_names() -> &'static parking_lot::Mutex<LineNames> {
    static NAMES: std::sync::OnceLock<parking_lot::Mutex<LineNames>> = std::sync::OnceLock::new();
    NAMES.get_or_init(|| {
        parking_lot::Mutex::new(LineNames {
            names: HashMap::new(),
            order: VecDeque::new(),
            dropped: 0,
            ranges: Vec::new(),
        })
    })
}

/// Names the 64-byte cache line holding `addr` for a simulation's statistics (its
/// hottest-lines table: `"LockManager 3"`, `"buffer 17 state"`).
///
/// With the `sim` feature the name is recorded in a process-global registry whether or
/// not a simulation is installed (the lock stack's shared structures are made before the
/// simulated clients run), where [`line_name`] finds it, and it is also forwarded to the
/// simulation installed on this thread, if any. A later name for the same line replaces the
/// earlier one; past [`LINE_NAMES_MAX`] lines, the oldest-named line loses its name. Without the
/// feature this compiles to nothing and `name` is never called.
#[inline(always)]
pub fn name_line<F: FnOnce() -> String>(addr: *const u8, name: F) {
    #[cfg(feature = "sim")]
    name_line_slow(addr as usize, name());
    #[cfg(not(feature = "sim"))]
    {
        let _ = (addr, name);
    }
}

#[cfg(feature = "sim")]
#[cold]
#[inline(never)]
fn name_line_slow(addr: usize, name: String) {
    {
        let mut reg = line_names().lock();
        let line = addr / LINE_BYTES;
        if reg.names.insert(line, name.clone()).is_none() {
            reg.order.push_back(line);
            if reg.order.len() > LINE_NAMES_MAX
                && let Some(old) = reg.order.pop_front()
            {
                reg.names.remove(&old);
                reg.dropped += 1;
            }
        }
    }
    if EVER_INSTALLED.load(Ordering::Relaxed) {
        with_current_slow(|s| s.backend.name_line(addr, &name));
    }
}

/// Names the lines a structure's fields sit on: each line holding one or more of `fields`
/// (a field's name and address) is named `"<what> <field> + <field>"`, in the order given,
/// through [`name_line`] (for structures whose fields are neither padded nor an array: the
/// line layout is the compiler's, so the names follow it). Nothing without the `sim`
/// feature.
pub fn name_fields(what: &str, fields: &[(&str, *const u8)]) {
    #[cfg(feature = "sim")]
    {
        let mut lines: Vec<(usize, Vec<&str>)> = Vec::new();
        for &(name, addr) in fields {
            let line = addr as usize / LINE_BYTES;
            match lines.iter_mut().find(|(l, _)| *l == line) {
                Some((_, names)) => {
                    if !names.contains(&name) {
                        names.push(name);
                    }
                }
                None => lines.push((line, vec![name])),
            }
        }
        for (line, names) in lines {
            name_line((line * LINE_BYTES) as *const u8, || format!("{what} {}", names.join(" + ")));
        }
    }
    #[cfg(not(feature = "sim"))]
    {
        let _ = (what, fields);
    }
}

/// Names the lines of an array's elements as `"<what> <i>"`, or `"<what> <i>-<j>"` for a line
/// that holds elements `i..=j` (twelve-byte `PgXact`s share lines, padded ones do not), through
/// [`name_line`]. Nothing without the `sim` feature.
pub fn name_elements<T>(s: &[T], what: &str) {
    #[cfg(feature = "sim")]
    {
        let addr = |k: usize| s.as_ptr() as usize + k * size_of::<T>();
        let mut i = 0;
        while i < s.len() {
            let line = addr(i) / LINE_BYTES;
            let mut j = i;
            while j + 1 < s.len() && addr(j + 1) / LINE_BYTES == line {
                j += 1;
            }
            name_line(addr(i) as *const u8, || {
                if i == j { format!("{what} {i}") } else { format!("{what} {i}-{j}") }
            });
            i = j + 1;
        }
    }
    #[cfg(not(feature = "sim"))]
    {
        let _ = (s, what);
    }
}

/// The name [`name_line`] last gave the 64-byte line holding `addr` (any address in the line),
/// or `None` (never named, evicted at the bound, or the `sim` feature is off). For a
/// simulation backend's or a report's hottest-lines table.
pub fn line_name(addr: usize) -> Option<String> {
    #[cfg(feature = "sim")]
    {
        let reg = line_names().lock();
        if let Some(n) = reg.names.get(&(addr / LINE_BYTES)) {
            return Some(n.clone());
        }
        // The most recently named range holding the line's first byte.
        let line = addr / LINE_BYTES * LINE_BYTES;
        reg.ranges.iter().rev().find(|(a, len, _)| line >= *a && line < a + len).map(|(a, _, f)| f(line - a))
    }
    #[cfg(not(feature = "sim"))]
    {
        let _ = addr;
        None
    }
}

/// Names every line of `[addr, addr + len)` that [`name_line`] did not name, lazily: `namer`
/// gets the line's offset from `addr` and returns its name (`"buffer 17 page +0"` for a page
/// header). For large arrays of structures nobody names one by one (the buffer pool's pages):
/// one registration, no per-line string. A later range wins where two overlap. Without the
/// `sim` feature it does nothing.
pub fn name_range(addr: *const u8, len: usize, namer: fn(usize) -> String) {
    #[cfg(feature = "sim")]
    line_names().lock().ranges.push((addr as usize, len, namer));
    #[cfg(not(feature = "sim"))]
    {
        let _ = (addr, len, namer);
    }
}

/// How many names [`name_line`] evicted because the registry held [`LINE_NAMES_MAX`] lines
/// (zero without the `sim` feature).
pub fn line_names_dropped() -> u64 {
    #[cfg(feature = "sim")]
    {
        line_names().lock().dropped
    }
    #[cfg(not(feature = "sim"))]
    {
        0
    }
}
