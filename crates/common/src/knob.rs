//! Knobs: the run-time design choices of a crate's configuration, each declared once.
//!
//! A [`Knob<C>`] names one choice of a config struct `C` (`procarray.layout` of
//! `ProcArrayConfig`): its key, the values it accepts in words, what it selects (with the
//! PostgreSQL GUC or release it stands for), its default, and how a value is applied to a `C`.
//! Each subsystem crate lists its knobs next to its config; a program composes them into one
//! [`Registry`] over its own top-level config (the engine's `EngineConfig`), each list with the
//! place its config lives there ([`Nested`]). Command lines (`--set key=value`), release
//! presets, help text and the docs table all read that registry.
//!
//! Errors are [`KnobError`]s, one line each: an unknown key lists every valid key, a bad value
//! names the key and the values it accepts.

use std::fmt;
use std::str::FromStr;

/// One knob of config type `C`.
///
/// `apply` gets the value text trimmed and returns `None` when the text is not one of the
/// accepted `values` (the caller turns that into [`KnobError::BadValue`]); it changes `C` only
/// when it returns `Some`.
pub struct Knob<C> {
    /// `crate.knob`, as given to `--set` (`lmgr.fast_path`).
    pub key: &'static str,
    /// The values accepted, in words, for help and errors (`pgproc|pgxact|dense`,
    /// `1..=1024`, `off or a power of two 1..=1024`).
    pub values: &'static str,
    /// What the knob selects, with the PostgreSQL GUC name or release it stands for.
    pub doc: &'static str,
    /// The value of the crate's default config, spelt as `values` accepts it.
    pub default: &'static str,
    /// Parses `value` and sets it in the config; `None` for a value not accepted.
    pub apply: fn(&mut C, &str) -> Option<()>,
}

impl<C> Knob<C> {
    /// The knob's description without its config type, for listings.
    pub fn info(&self) -> KnobInfo {
        KnobInfo { key: self.key, values: self.values, doc: self.doc, default: self.default }
    }

    /// Applies `value` (trimmed) to `cfg`.
    ///
    /// # Errors
    /// [`KnobError::BadValue`] naming the key and its accepted values; `cfg` is unchanged then.
    pub fn set(&self, cfg: &mut C, value: &str) -> Result<(), KnobError> {
        (self.apply)(cfg, value.trim()).ok_or_else(|| KnobError::BadValue {
            key: self.key,
            value: value.trim().to_string(),
            accepted: self.values,
        })
    }
}

impl<C> fmt::Debug for Knob<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.info().fmt(f)
    }
}

/// A knob's key, accepted values, meaning and default: [`Knob`] without its config type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KnobInfo {
    /// `crate.knob`.
    pub key: &'static str,
    /// Accepted values, in words.
    pub values: &'static str,
    /// What it selects.
    pub doc: &'static str,
    /// The crate's default.
    pub default: &'static str,
}

/// Why a knob assignment was refused. Each displays as one line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KnobError {
    /// The text has no `=`: `keys` lists every valid key, comma-separated.
    NotAnAssignment {
        /// The text given.
        text: String,
        /// Every valid key.
        keys: String,
    },
    /// No knob has this key: `keys` lists every valid key, comma-separated.
    UnknownKey {
        /// The key given.
        key: String,
        /// Every valid key.
        keys: String,
    },
    /// The knob does not accept this value.
    BadValue {
        /// The knob.
        key: &'static str,
        /// The value given.
        value: String,
        /// The values it accepts ([`Knob::values`]).
        accepted: &'static str,
    },
}

impl fmt::Display for KnobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KnobError::NotAnAssignment { text, keys } => {
                write!(f, "invalid --set \"{text}\": expected crate.knob=value (keys: {keys})")
            }
            KnobError::UnknownKey { key, keys } => write!(f, "unknown --set key \"{key}\" (valid: {keys})"),
            KnobError::BadValue { key, value, accepted } => {
                write!(f, "invalid value \"{value}\" for --set {key} (valid: {accepted})")
            }
        }
    }
}

impl std::error::Error for KnobError {}

/// A list of knobs that applies to a top-level config `R`: a crate's [`Knob`] list with the
/// place its config lives in `R` ([`Nested`]), or knobs of `R` itself (a `&'static [Knob<R>]`,
/// referenced as `&LIST` in a [`Registry`]).
pub trait KnobList<R>: Sync {
    /// The knobs, in listing order.
    fn infos(&self) -> Vec<KnobInfo>;

    /// Applies `value` to the knob `key` of `root`: `None` when this list has no such key.
    fn set(&self, root: &mut R, key: &str, value: &str) -> Option<Result<(), KnobError>>;
}

impl<R> KnobList<R> for &'static [Knob<R>] {
    fn infos(&self) -> Vec<KnobInfo> {
        self.iter().map(Knob::info).collect()
    }

    fn set(&self, root: &mut R, key: &str, value: &str) -> Option<Result<(), KnobError>> {
        self.iter().find(|k| k.key == key).map(|k| k.set(root, value))
    }
}

/// A crate's knob list over config `C`, with where `C` lives in the top-level config `R`:
/// `get` reads a copy, `put` stores it back (and may fan it out, as `lwlock.kind` does).
pub struct Nested<R, C: 'static> {
    /// The crate's knobs.
    pub knobs: &'static [Knob<C>],
    /// Reads the crate's config out of `R`.
    pub get: fn(&R) -> C,
    /// Stores it back.
    pub put: fn(&mut R, C),
}

impl<R, C: 'static> KnobList<R> for Nested<R, C> {
    fn infos(&self) -> Vec<KnobInfo> {
        self.knobs.infos()
    }

    fn set(&self, root: &mut R, key: &str, value: &str) -> Option<Result<(), KnobError>> {
        let knob = self.knobs.iter().find(|k| k.key == key)?;
        let mut c = (self.get)(root);
        Some(knob.set(&mut c, value).map(|()| (self.put)(root, c)))
    }
}

/// Another layer's whole [`Registry`] over a part `C` of the top-level config `R`: a program
/// that owns knobs of its own composes the registry of the config it builds on (the workloads'
/// run configuration holds the engine's, whose lists stay where the engine declares them).
pub struct Part<R, C: 'static> {
    /// The part's registry.
    pub registry: &'static Registry<C>,
    /// Where the part lives in `R`.
    pub part: fn(&mut R) -> &mut C,
}

impl<R, C: 'static> KnobList<R> for Part<R, C> {
    fn infos(&self) -> Vec<KnobInfo> {
        self.registry.infos()
    }

    fn set(&self, root: &mut R, key: &str, value: &str) -> Option<Result<(), KnobError>> {
        let part = (self.part)(root);
        self.registry.lists.iter().find_map(|l| l.set(part, key, value))
    }
}

/// Every knob of a top-level config `R`, composed from [`KnobList`]s in listing order.
pub struct Registry<R: 'static> {
    /// The lists, in the order help and docs list them.
    pub lists: &'static [&'static dyn KnobList<R>],
}

impl<R> Registry<R> {
    /// Every knob, in listing order.
    pub fn infos(&self) -> Vec<KnobInfo> {
        self.lists.iter().flat_map(|l| l.infos()).collect()
    }

    /// The knob named `key`, if any.
    pub fn info(&self, key: &str) -> Option<KnobInfo> {
        self.infos().into_iter().find(|k| k.key == key)
    }

    /// Every key, comma-separated (for errors).
    pub fn keys(&self) -> String {
        self.infos().iter().map(|k| k.key).collect::<Vec<_>>().join(", ")
    }

    /// Sets knob `key` of `root` to `value` (both trimmed).
    ///
    /// # Errors
    /// [`KnobError::UnknownKey`] or [`KnobError::BadValue`]; `root` is unchanged then.
    pub fn set(&self, root: &mut R, key: &str, value: &str) -> Result<(), KnobError> {
        let key = key.trim();
        self.lists
            .iter()
            .find_map(|l| l.set(root, key, value))
            .unwrap_or_else(|| Err(KnobError::UnknownKey { key: key.to_string(), keys: self.keys() }))
    }

    /// Applies one `key=value` assignment.
    ///
    /// # Errors
    /// [`KnobError::NotAnAssignment`] without `=`, else as [`Registry::set`].
    pub fn assign(&self, root: &mut R, assignment: &str) -> Result<(), KnobError> {
        let Some((key, value)) = assignment.split_once('=') else {
            return Err(KnobError::NotAnAssignment { text: assignment.to_string(), keys: self.keys() });
        };
        self.set(root, key, value)
    }
}

/// The Markdown table of `knobs` (key, values, default, what it selects; `|` escaped), as the
/// docs print a registry's [`Registry::infos`].
pub fn markdown_table(knobs: &[KnobInfo]) -> String {
    let cell = |s: &str| s.replace('|', "\\|");
    let mut t = String::from("| knob | values | default | selects |\n|---|---|---|---|\n");
    for k in knobs {
        t += &format!("| `{}` | `{}` | `{}` | {} |\n", k.key, cell(k.values), k.default, cell(k.doc));
    }
    t
}

/// The key of a `key=value` assignment, trimmed (the whole text when there is no `=`).
pub fn key_of(assignment: &str) -> &str {
    assignment.split_once('=').map_or(assignment, |(k, _)| k).trim()
}

/// `on`/`true`/`yes`/`1` or `off`/`false`/`no`/`0`, any case: PostgreSQL's boolean GUC spellings.
pub fn on_off(v: &str) -> Option<bool> {
    match v.to_ascii_lowercase().as_str() {
        "on" | "true" | "yes" | "1" => Some(true),
        "off" | "false" | "no" | "0" => Some(false),
        _ => None,
    }
}

/// A number in `lo..=hi`.
pub fn in_range<T: FromStr + PartialOrd>(v: &str, lo: T, hi: T) -> Option<T> {
    v.parse::<T>().ok().filter(|n| *n >= lo && *n <= hi)
}

/// Any value `T` parses (its `FromStr`), the error dropped: the knob's `values` say what is
/// accepted.
pub fn parsed<T: FromStr>(v: &str) -> Option<T> {
    v.parse::<T>().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Debug, Default, PartialEq)]
    struct Sub {
        n: u32,
        on: bool,
    }

    #[derive(Debug, Default, PartialEq)]
    struct Root {
        sub: Sub,
        name: String,
    }

    const SUB: &[Knob<Sub>] = &[
        Knob {
            key: "sub.n",
            values: "1..=9",
            doc: "a number",
            default: "0",
            apply: |c, v| {
                c.n = in_range(v, 1, 9)?;
                Some(())
            },
        },
        Knob {
            key: "sub.on",
            values: "on|off",
            doc: "a switch",
            default: "off",
            apply: |c, v| {
                c.on = on_off(v)?;
                Some(())
            },
        },
    ];
    const ROOT: &[Knob<Root>] = &[Knob {
        key: "root.name",
        values: "a word",
        doc: "a name",
        default: "",
        apply: |c, v| {
            c.name = v.to_string();
            Some(())
        },
    }];
    static NESTED: Nested<Root, Sub> = Nested { knobs: SUB, get: |r| r.sub.clone(), put: |r, s| r.sub = s };
    static REGISTRY: Registry<Root> = Registry { lists: &[&NESTED, &ROOT] };

    #[derive(Debug, Default, PartialEq)]
    struct Top {
        root: Root,
        extra: u32,
    }
    const TOP: &[Knob<Top>] = &[Knob {
        key: "top.extra",
        values: "0..=5",
        doc: "a | b",
        default: "0",
        apply: |c, v| {
            c.extra = in_range(v, 0, 5)?;
            Some(())
        },
    }];
    static PART: Part<Top, Root> = Part { registry: &REGISTRY, part: |t| &mut t.root };
    static COMPOSED: Registry<Top> = Registry { lists: &[&PART, &TOP] };

    #[test]
    fn a_composed_registry_reaches_its_parts_and_lists_them_first() {
        let mut t = Top::default();
        COMPOSED.assign(&mut t, "sub.n=3").unwrap();
        COMPOSED.assign(&mut t, "top.extra=5").unwrap();
        assert_eq!((t.root.sub.n, t.extra), (3, 5));
        assert_eq!(COMPOSED.keys(), "sub.n, sub.on, root.name, top.extra");
        let e = COMPOSED.assign(&mut t, "nosuch=1").unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown --set key \"nosuch\" (valid: sub.n, sub.on, root.name, top.extra)"
        );
        let table = markdown_table(&COMPOSED.infos());
        assert!(table.ends_with("| `top.extra` | `0..=5` | `0` | a \\| b |\n"), "{table}");
        assert!(
            table.starts_with(&markdown_table(&REGISTRY.infos())),
            "a part's table is the composed table's head"
        );
    }

    #[test]
    fn assignments_reach_the_nested_config_and_errors_are_one_line() {
        let mut r = Root::default();
        REGISTRY.assign(&mut r, " sub.n = 7 ").unwrap();
        REGISTRY.assign(&mut r, "sub.on=ON").unwrap();
        REGISTRY.assign(&mut r, "root.name=x").unwrap();
        assert_eq!(r, Root { sub: Sub { n: 7, on: true }, name: "x".into() });
        let before = format!("{r:?}");
        let e = REGISTRY.assign(&mut r, "sub.n=10").unwrap_err();
        assert_eq!(e.to_string(), "invalid value \"10\" for --set sub.n (valid: 1..=9)");
        let e = REGISTRY.assign(&mut r, "nosuch=1").unwrap_err();
        assert_eq!(e.to_string(), "unknown --set key \"nosuch\" (valid: sub.n, sub.on, root.name)");
        let e = REGISTRY.assign(&mut r, "sub.n").unwrap_err();
        assert!(matches!(e, KnobError::NotAnAssignment { .. }), "{e}");
        assert_eq!(format!("{r:?}"), before, "refused assignments change nothing");
        assert_eq!(REGISTRY.info("sub.on").unwrap().default, "off");
        assert_eq!(key_of(" sub.on = off"), "sub.on");
    }
}
