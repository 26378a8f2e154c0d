//! Reading user input files with a size bound, and quoting input in one-line messages: the
//! workspace's one implementation, [`lockstack_common::input`], re-exported here for the
//! workloads' readers (scripts, specs, expected files, point files) and their callers.

pub use lockstack_common::input::*;
