//! A profile's scalar constants by name: the keys `--machine-set` overrides and
//! `experiment --sensitivity` perturbs, and the profile's `assumed` list of them.
//!
//! A constant is named by its TOML path, `costs.owner_grace_ns` or `pgbench.wal_flush_us`: every
//! number directly under `[costs]` or `[pgbench]` (not the `costs.remote` table entries, not the
//! topology's counts). The keys are read from the profile's own serialized form, so a field
//! added to [`Costs`](crate::profile::Costs) or [`ClientCosts`](crate::profile::ClientCosts) is
//! a constant without a list to update here.

use crate::profile::{InvalidProfile, MachineProfile};

/// A constant's error where a profile's is expected (`MachineProfile::validate`'s callers).
impl From<ConstantError> for InvalidProfile {
    fn from(e: ConstantError) -> Self {
        InvalidProfile { message: e.to_string() }
    }
}

/// Why a constant could not be named or set, or an `assumed` list is wrong (each one line).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConstantError {
    /// `name` is no constant of the profile (neither a full key nor an unambiguous last part).
    #[error("{name:?} is no constant of machine profile {profile}; its constants: {}", keys.join(", "))]
    Unknown {
        /// The name as given.
        name: String,
        /// The profile's name.
        profile: String,
        /// Its constants, `section.key`.
        keys: Vec<String>,
    },
    /// The overridden values make the profile unreadable or invalid (a negative latency).
    #[error("machine profile {profile}: {message}")]
    Invalid {
        /// The profile's name.
        profile: String,
        /// What is wrong (the parser's or the validation's message).
        message: String,
    },
    /// An `assumed` entry is no constant of the profile.
    #[error("assumed: {entry:?} is no constant of the profile; its constants: {}", keys.join(", "))]
    AssumedUnknown {
        /// The entry.
        entry: String,
        /// The profile's constants.
        keys: Vec<String>,
    },
    /// An `assumed` entry appears twice.
    #[error("assumed: {entry:?} is listed twice")]
    AssumedTwice {
        /// The entry.
        entry: String,
    },
}

/// The sections whose numbers are constants, in the order [`MachineProfile::constant_keys`]
/// lists them.
pub const CONSTANT_SECTIONS: &[&str] = &["costs", "pgbench"];

impl MachineProfile {
    /// Every scalar constant of the profile, as `section.key` (`costs.atomic_rmw_ns`), in
    /// section order, keys in alphabetical order within a section.
    pub fn constant_keys(&self) -> Vec<String> {
        let value = toml::Value::try_from(self)
            .expect("a profile serializes: its fields are strings, numbers and tables of them");
        let mut keys = Vec::new();
        for section in CONSTANT_SECTIONS {
            let Some(table) = value.get(section).and_then(|v| v.as_table()) else { continue };
            for (k, v) in table {
                if v.is_float() || v.is_integer() {
                    keys.push(format!("{section}.{k}"));
                }
            }
        }
        keys
    }

    /// The value of constant `key` (`costs.owner_grace_ns`), or `None` when the profile has no
    /// such constant.
    pub fn constant(&self, key: &str) -> Option<f64> {
        let (section, name) = key.split_once('.')?;
        if !CONSTANT_SECTIONS.contains(&section) {
            return None;
        }
        let value = toml::Value::try_from(self)
            .expect("a profile serializes: its fields are strings, numbers and tables of them");
        let v = value.get(section)?.get(name)?;
        v.as_float().or_else(|| v.as_integer().map(|i| i as f64))
    }

    /// Resolves a constant's name as a user typed it: the full key (`costs.owner_grace_ns`) or
    /// its last part alone (`owner_grace_ns`, when one section has it).
    ///
    /// # Errors
    /// [`ConstantError::Unknown`]: one line naming `name` and listing the profile's constants.
    pub fn constant_key(&self, name: &str) -> Result<String, ConstantError> {
        let keys = self.constant_keys();
        if keys.iter().any(|k| k == name) {
            return Ok(name.to_string());
        }
        let short: Vec<&String> =
            keys.iter().filter(|k| k.split_once('.').is_some_and(|(_, n)| n == name)).collect();
        match short.as_slice() {
            [one] => Ok((*one).clone()),
            _ => Err(ConstantError::Unknown { name: name.to_string(), profile: self.name.clone(), keys }),
        }
    }

    /// A copy with each `(key, value)` of `overrides` set (keys as [`MachineProfile::constant_key`]
    /// takes them), validated again; `name` and `description` are kept.
    ///
    /// # Errors
    /// [`ConstantError::Unknown`] for an unknown key (with the valid ones),
    /// [`ConstantError::Invalid`] for the profile the values make invalid (a negative latency).
    pub fn with_constants(&self, overrides: &[(String, f64)]) -> Result<Self, ConstantError> {
        let mut value = toml::Value::try_from(self)
            .expect("a profile serializes: its fields are strings, numbers and tables of them");
        for (name, v) in overrides {
            let key = self.constant_key(name)?;
            let (section, field) = key.split_once('.').expect("constant_key returns section.key");
            let table = value
                .get_mut(section)
                .and_then(|t| t.as_table_mut())
                .expect("constant_key returns keys of the profile's own sections, which are tables");
            table.insert(field.to_string(), toml::Value::Float(*v));
        }
        let invalid = |message: String| ConstantError::Invalid { profile: self.name.clone(), message };
        let p: MachineProfile = value.try_into().map_err(|e: toml::de::Error| invalid(e.to_string()))?;
        p.validate().map_err(|e: InvalidProfile| invalid(e.to_string()))?;
        Ok(p)
    }

    /// Checks the `assumed` list: each entry one of [`MachineProfile::constant_keys`], none twice.
    ///
    /// # Errors
    /// [`ConstantError::AssumedUnknown`] or [`ConstantError::AssumedTwice`] for the first bad
    /// entry.
    pub fn validate_assumed(&self) -> Result<(), ConstantError> {
        if self.assumed.is_empty() {
            return Ok(());
        }
        let keys = self.constant_keys();
        for (i, a) in self.assumed.iter().enumerate() {
            if !keys.contains(a) {
                return Err(ConstantError::AssumedUnknown { entry: a.clone(), keys });
            }
            if self.assumed[..i].contains(a) {
                return Err(ConstantError::AssumedTwice { entry: a.clone() });
            }
        }
        Ok(())
    }
}

/// The constants whose line in the profile source `text` carries a comment that opens with
/// "assumed" (the rule `lockstack machine show` counts by), and the constants of `profile`
/// that have no line at all (their defaults are assumed figures), as `section.key`.
pub fn assumed_by_comment(profile: &MachineProfile, text: &str) -> Vec<String> {
    let mut section = String::new();
    let mut found: Vec<String> = Vec::new();
    let mut present: Vec<String> = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if let Some(s) = line.strip_prefix('[').and_then(|s| s.strip_suffix(']'))
            && s.trim().chars().all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c))
        {
            section = s.trim().to_string();
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        let (code, comment) = line.split_once('#').unwrap_or((line, ""));
        let Some((key, _)) = code.split_once('=') else { continue };
        let key = format!("{section}.{}", key.trim());
        present.push(key.clone());
        if comment.trim().to_lowercase().starts_with("assumed") {
            found.push(key);
        }
    }
    profile.constant_keys().into_iter().filter(|k| found.contains(k) || !present.contains(k)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::BUILTIN;

    #[test]
    fn keys_cover_costs_and_pgbench_scalars() {
        let p = MachineProfile::builtin("xeon-32").unwrap();
        let keys = p.constant_keys();
        assert!(keys.contains(&"costs.owner_grace_ns".to_string()));
        assert!(keys.contains(&"pgbench.wal_flush_us".to_string()));
        assert!(!keys.iter().any(|k| k.contains("remote")), "{keys:?}");
        // 20 scalar costs (remote and the arbitration's name excluded) and the 3 client costs.
        assert_eq!(keys.len(), 23, "{keys:?}");
        assert!(!keys.contains(&"costs.arbitration".to_string()), "{keys:?}");
        assert_eq!(p.constant("costs.owner_grace_ns"), Some(20.0));
        assert_eq!(p.constant("topology.sockets"), None);
    }

    #[test]
    fn overrides_set_one_constant_and_refuse_unknown_ones() {
        let p = MachineProfile::builtin("opteron-24").unwrap();
        let q = p.with_constants(&[("owner_grace_ns".to_string(), 40.0)]).unwrap();
        assert_eq!(q.costs.owner_grace_ns, 40.0);
        assert_eq!(q.costs.atomic_rmw_ns, p.costs.atomic_rmw_ns);
        let q = p.with_constants(&[("pgbench.client_rtt_us".to_string(), 5.0)]).unwrap();
        assert_eq!(q.pgbench.client_rtt_us, 5.0);
        let e = p.with_constants(&[("costs.owner_grace".to_string(), 1.0)]).unwrap_err().to_string();
        assert!(e.contains("costs.owner_grace_ns") && !e.contains('\n'), "{e}");
        let e = p.with_constants(&[("atomic_rmw_ns".to_string(), -1.0)]).unwrap_err().to_string();
        assert!(e.contains("atomic_rmw_ns"), "{e}");
    }

    #[test]
    fn every_builtin_lists_exactly_its_assumed_comments() {
        for (name, text) in BUILTIN {
            let p = MachineProfile::builtin(name).unwrap();
            let mut listed = p.assumed.clone();
            listed.sort();
            let mut commented = assumed_by_comment(&p, text);
            commented.sort();
            assert!(!listed.is_empty(), "{name}: no assumed list");
            assert_eq!(listed, commented, "{name}: the assumed list and the `# assumed` comments differ");
        }
    }

    #[test]
    fn bad_assumed_entries_are_refused() {
        let text = MachineProfile::builtin_source("xeon-32").unwrap();
        let bad = text.replacen("assumed = [", "assumed = [\"costs.nonesuch_ns\", ", 1);
        let e = MachineProfile::from_toml(&bad, "bad").unwrap_err().to_string();
        assert!(e.contains("costs.nonesuch_ns") && e.contains("costs.owner_grace_ns"), "{e}");
        let twice = text.replacen("assumed = [", "assumed = [\"costs.owner_grace_ns\", ", 1);
        let e = MachineProfile::from_toml(&twice, "twice").unwrap_err().to_string();
        assert!(e.contains("twice"), "{e}");
    }
}
