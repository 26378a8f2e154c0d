//! The built-in profiles parse and validate; bad profiles are refused with a clear message.

use lockstack_sim::profile::BUILTIN;
use lockstack_sim::{MachineProfile, ProfileError};

#[test]
fn every_builtin_profile_is_valid_and_named_as_listed() {
    for (name, text) in BUILTIN {
        let p = MachineProfile::from_toml(text, name).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(&p.name, name);
        // Every number carries a citation or "assumed" in a comment.
        for line in text.lines().filter(|l| l.contains("_ns =") || l.contains("speed_factor =")) {
            assert!(line.contains('#'), "{name}: uncommented figure: {line}");
        }
    }
    let p8 = MachineProfile::builtin("power8-192").unwrap();
    assert_eq!((p8.topology.sockets, p8.topology.cores_per_socket, p8.topology.threads_per_core), (24, 1, 8));
    assert_eq!(p8.hw_threads(), 192);
    assert_eq!(p8.topology.numa_nodes, 4);
    assert_eq!(MachineProfile::builtin("opteron-24").unwrap().cores(), 24);
    assert_eq!(MachineProfile::builtin("xeon-32").unwrap().hw_threads(), 32);
    assert_eq!(MachineProfile::builtin("xeon-12").unwrap().hw_threads(), 24);
}

#[test]
fn unknown_names_bad_toml_and_inconsistent_profiles_are_refused() {
    let e = MachineProfile::resolve("no-such-machine").unwrap_err();
    assert!(matches!(e, ProfileError::Unknown { .. }));
    assert!(e.to_string().contains("opteron-24"), "{e}");
    let text = MachineProfile::builtin_source("xeon-12").unwrap();
    let e = MachineProfile::from_toml(&text.replace("sockets = 2", "sockets = 0"), "x").unwrap_err();
    assert!(e.to_string().contains("topology.sockets must be at least 1"), "{e}");
    let e = MachineProfile::from_toml(&text.replace("distance = 20,", "distance = 21,"), "x").unwrap_err();
    assert!(e.to_string().contains("NUMA distance 20 has no entry"), "{e}");
    let e = MachineProfile::from_toml(&text.replace("pause_ns", "paws_ns"), "x").unwrap_err();
    assert!(matches!(e, ProfileError::Parse { .. }), "{e}");
    let dir = std::env::temp_dir().join(format!("lockstack-sim-profile-{}", std::process::id()));
    std::fs::write(&dir, text.replace("name = \"xeon-12\"", "name = \"mine\"")).unwrap();
    let p = MachineProfile::resolve(dir.to_str().unwrap()).unwrap();
    assert_eq!(p.name, "mine");
    std::fs::remove_file(&dir).unwrap();
}

/// A profile file is read through a bound ([`lockstack_sim::MAX_PROFILE_BYTES`]): an endless
/// device is refused after 1 MiB, naming it, as is a file that is not UTF-8.
#[test]
fn profile_files_are_read_bounded() {
    if std::path::Path::new("/dev/zero").exists() {
        let e = MachineProfile::resolve("/dev/zero").unwrap_err();
        assert!(matches!(e, ProfileError::Unreadable { .. }), "{e}");
        assert_eq!(
            e.to_string(),
            "machine profile \"/dev/zero\": larger than 1048576 bytes, the most accepted"
        );
    }
    let path = std::env::temp_dir().join(format!("lockstack-sim-profile-utf8-{}", std::process::id()));
    std::fs::write(&path, b"name = \"\xff\"\n").unwrap();
    let e = MachineProfile::resolve(path.to_str().unwrap()).unwrap_err();
    assert!(e.to_string().ends_with(": not valid UTF-8 text (invalid byte at offset 8)"), "{e}");
    let _ = std::fs::remove_file(&path);
}
