//! The line-name registry of `hook::name_line` is bounded: past `LINE_NAMES_MAX` lines the
//! oldest-named line loses its name, and the newest names are all kept. Its own test binary,
//! since it fills the process-global registry.

#![cfg(not(loom))]

use lockstack_common::sync::hook::{LINE_BYTES, LINE_NAMES_MAX, line_name, line_names_dropped, name_line};

#[test]
fn the_oldest_names_are_evicted_at_the_bound() {
    // Fake addresses, never dereferenced: the registry only keys by line.
    let base = 1usize << 44;
    let line = |i: usize| base + i * LINE_BYTES;
    let extra = 10;
    for i in 0..LINE_NAMES_MAX + extra {
        name_line(line(i) as *const u8, || format!("line {i}"));
    }
    assert_eq!(line_names_dropped(), extra as u64);
    for i in 0..extra {
        assert_eq!(line_name(line(i)), None, "line {i} was evicted");
    }
    assert_eq!(line_name(line(extra)).as_deref(), Some(format!("line {extra}").as_str()));
    let last = LINE_NAMES_MAX + extra - 1;
    assert_eq!(line_name(line(last) + 63), Some(format!("line {last}")));
    // Renaming a named line neither evicts nor reorders.
    name_line(line(last) as *const u8, || "renamed".to_string());
    assert_eq!(line_names_dropped(), extra as u64);
    assert_eq!(line_name(line(last)).as_deref(), Some("renamed"));
}
