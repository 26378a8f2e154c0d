//! Fuzz targets, one per parser, run as bounded proptests in the normal `cargo test`: byte
//! mutations (insert, delete, overwrite, duplicate, multi-byte characters) of valid inputs,
//! asserting that no input panics, that every error is one line, and that the valid inputs
//! themselves still parse. Fuzzing found a panic (`\set x (é`) and two-line messages this
//! way; these keep the parsers under the same treatment. Each target runs a few hundred cases
//! (well under a second each in a release build); `PROPTEST_CASES` runs more.

use std::collections::HashMap;
use std::path::Path;

use lockstack_workloads::isolation::{self, sql};
use lockstack_workloads::pgbench::expr::{self, Value};
use lockstack_workloads::pgbench::script::{BUILTINS, parse_script};
use proptest::prelude::*;

/// One mutation: (kind, position as a fraction of the length, byte).
type Mutation = (u8, u16, u8);

/// Characters worth inserting: multi-byte UTF-8, control characters, and the punctuation the
/// parsers split on.
const SPICE: [&str; 14] = ["é", "€", "😀", "\u{85}", "\n", "\r", "\t", "\0", "(", ")", "'", "\"", ";", ":"];

fn mutate(seed: &str, muts: &[Mutation]) -> String {
    let mut b = seed.as_bytes().to_vec();
    for &(kind, at, byte) in muts {
        let pos = if b.is_empty() { 0 } else { usize::from(at) * b.len() / usize::from(u16::MAX) };
        match kind % 6 {
            0 => b.insert(pos.min(b.len()), byte),
            1 if pos < b.len() => {
                b.remove(pos);
            }
            2 if pos < b.len() => b[pos] = byte,
            3 => {
                let s = SPICE[usize::from(byte) % SPICE.len()].as_bytes();
                let pos = pos.min(b.len());
                b.splice(pos..pos, s.iter().copied());
            }
            4 if pos < b.len() => {
                let end = (pos + usize::from(byte) % 16 + 1).min(b.len());
                let piece = b[pos..end].to_vec();
                b.splice(end..end, piece);
            }
            _ if pos < b.len() => b.truncate(pos),
            _ => {}
        }
    }
    String::from_utf8_lossy(&b).into_owned()
}

fn mutations() -> impl Strategy<Value = Vec<Mutation>> {
    prop::collection::vec((any::<u8>(), any::<u16>(), any::<u8>()), 1..6)
}

fn one_line(e: &str) -> Result<(), TestCaseError> {
    prop_assert!(!e.contains('\n') && !e.contains('\r'), "a message of more than one line: {e:?}");
    Ok(())
}

/// `cases` unless `PROPTEST_CASES` says otherwise.
fn config(cases: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(cases);
    ProptestConfig { cases, failure_persistence: None, ..ProptestConfig::default() }
}

const SCRIPTS: [&str; 2] = [
    "\\set a random_zipfian(1, 100, 1.5)\n\\sleep 2 ms\nBEGIN;\nSELECT abalance, bid\n  FROM pgbench_accounts WHERE :a = aid FOR UPDATE;\n\
     UPDATE pgbench_tellers SET tbalance = tbalance - :a WHERE tid = 3; COMMIT;\nABORT;\n",
    "-- c\n\\set x -9223372036854775808 + 1e308 * :scale\nINSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (1, 2, 3, -4, now());\n",
];

const EXPRS: [&str; 8] = [
    "random(1, 100000 * :scale)",
    "greatest(1, 2.5, :x) + least(4, 2) - -9223372036854775808",
    "(1 + 2) * 3 % 4 / 2 << 1 >> 1 & 7 | 8 # 9",
    "not (1 < 2) or 3 >= 3 and 4 <> 5 and 1 != 2",
    "random_gaussian(1, 10, 2.5) + random_exponential(1, 10, 2.0)",
    "abs(-4) + mod(10, 3) + int(2.9) + double(3) + pi() + sqrt(4) + ln(2) + exp(1) + pow(2, 10)",
    "random_zipfian(1, 10, 1.5) + ~5",
    "1.5e10 + .5 + 2. + 0e999",
];

const SQL: [&str; 6] = [
    "BEGIN ISOLATION LEVEL READ COMMITTED; SET deadlock_timeout = '100s'; LOCK TABLE a, \"B\" IN SHARE ROW EXCLUSIVE MODE NOWAIT;",
    "SELECT pg_try_advisory_xact_lock_shared(1, -2), pg_advisory_unlock(5) AS u, pg_advisory_lock(-9223372036854775808)",
    "CREATE TABLE t (id int, v text); DROP TABLE IF EXISTS a, b",
    "set lock_timeout to 10; RESET lock_timeout; SET SESSION deadlock_timeout = 5 -- c\n; COMMIT",
    "START TRANSACTION READ WRITE, NOT DEFERRABLE; ROLLBACK WORK; END; ABORT",
    "SELECT pg_advisory_unlock_all()",
];

fn specs() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/isolation/specs");
    let mut v: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect();
    v.sort();
    assert!(!v.is_empty());
    v
}

fn vars() -> HashMap<String, Value> {
    HashMap::from([("scale".to_string(), Value::Int(10)), ("x".to_string(), Value::Double(1.5))])
}

#[test]
fn the_seeds_are_valid() {
    for s in SCRIPTS.iter().copied().chain(BUILTINS.iter().map(|b| b.text)) {
        parse_script("seed.sql", s).unwrap_or_else(|e| panic!("{e}"));
    }
    for e in EXPRS {
        let parsed = expr::parse(e).unwrap_or_else(|m| panic!("{e}: {m}"));
        expr::eval(&parsed, &vars(), &mut expr::client_rng(1, 0)).unwrap_or_else(|m| panic!("{e}: {m}"));
    }
    for s in SQL {
        sql::parse_block(s).unwrap_or_else(|e| panic!("{s}: {e}"));
    }
    for s in specs() {
        isolation::load_spec_text("seed.spec", &s).unwrap_or_else(|e| panic!("{e}"));
    }
}

proptest! {
    #![proptest_config(config(300))]

    #[test]
    fn pgbench_scripts(seed in 0..SCRIPTS.len() + BUILTINS.len(), muts in mutations()) {
        let text = SCRIPTS.get(seed).copied().unwrap_or_else(|| BUILTINS[seed - SCRIPTS.len()].text);
        if let Err(e) = parse_script("fuzz.sql", &mutate(text, &muts)) {
            one_line(&e.to_string())?;
            prop_assert!(e.to_string().starts_with("fuzz.sql:"), "{e}");
        }
    }

    #[test]
    fn pgbench_expressions(seed in 0..EXPRS.len(), muts in mutations()) {
        match expr::parse(&mutate(EXPRS[seed], &muts)) {
            Ok(e) => {
                let vars = vars();
                let mut rng = expr::client_rng(1, 0);
                if let Err(m) = expr::eval(&e, &vars, &mut rng) {
                    one_line(&m.to_string())?;
                }
                if let Err(m) = expr::eval(&e.fold_constants(), &vars, &mut rng) {
                    one_line(&m.to_string())?;
                }
            }
            Err(m) => one_line(&m.to_string())?,
        }
    }

    #[test]
    fn isolation_sql(seed in 0..SQL.len(), muts in mutations()) {
        if let Err(e) = sql::parse_block(&mutate(SQL[seed], &muts)) {
            one_line(&e.to_string())?;
        }
    }
}

proptest! {
    #![proptest_config(config(200))]

    #[test]
    fn isolation_specs(seed in 0..6usize, muts in mutations()) {
        let specs = specs();
        let text = &specs[seed % specs.len()];
        if let Err(e) = isolation::load_spec_text("fuzz.spec", &mutate(text, &muts)) {
            one_line(&e.0)?;
            prop_assert!(e.0.starts_with("fuzz.spec"), "{}", e.0);
        }
    }
}
