//! The run's scripts compiled once before the clients start ([`Program`]): every `:name`
//! becomes a slot in the client's variable table, every SQL command an op on an engine table;
//! and how one op runs against a session ([`run_command`]).

use lockstack_common::sync::{AtomicBool, Ordering};
use std::time::Duration;

use lockstack_common::sync::Instant;

use crate::pgbench::expr::{self, ClientRng, Expr, Value, Vars};
use crate::pgbench::script::{Command, Script, SleepArg, SqlCommand, SqlValue, Table};
use lockstack_engine::engine::EngineError;
use lockstack_engine::session::{LockClauseStrength, Session, WaitPolicy};

/// A SQL value with its variables resolved to slots.
#[derive(Clone, Debug)]
pub(super) enum Val {
    Const(i64),
    Slot(usize),
    Now,
    Neg(Box<Val>),
    Arith(char, Box<Val>, Box<Val>),
}

/// A script command with its variables resolved to slots ([`Program`]).
#[derive(Clone, Debug)]
pub(super) enum Op {
    Set { slot: usize, expr: Expr },
    Sleep { amount: Val, unit_us: u64 },
    Begin,
    Commit,
    Rollback,
    Select { table: Table, key: Val, lock: LockClauseStrength, wait: WaitPolicy },
    Update { table: Table, column: usize, delta: Val, key: Val },
    InsertHistory { values: [Option<Val>; 5] },
}

/// The run's scripts prepared once before the clients start: every `:name` becomes an
/// index into the client's variable table, so a command evaluates without hashing or
/// comparing names (pgbench 15 binary-searches a sorted array by name).
pub(super) struct Program {
    /// Variable names by slot (`scale` and `client_id` first).
    pub(super) names: Vec<String>,
    /// Per script, its commands.
    pub(super) scripts: Vec<Vec<Op>>,
}

pub(super) const SLOT_SCALE: usize = 0;

pub(super) const SLOT_CLIENT_ID: usize = 1;

impl Program {
    /// Resolves `scripts`' variables for a run at `scale`: `:scale` is a constant unless a
    /// `\set scale` assigns it (pgbench sets it once per client and never changes it), and
    /// constant subexpressions are folded (`100000 * :scale`).
    pub(super) fn new(scripts: &[Script], scale: i64) -> Program {
        let assigned = |name: &str| {
            scripts.iter().any(|sc| {
                sc.commands.iter().any(|(_, c)| matches!(c, Command::Set { var, .. } if var == name))
            })
        };
        let scale_const = (!assigned("scale")).then_some(scale);
        let mut names = vec!["scale".to_string(), "client_id".to_string()];
        let mut slot_of = |n: &str| match names.iter().position(|x| x == n) {
            Some(i) => i,
            None => {
                names.push(n.to_string());
                names.len() - 1
            }
        };
        fn val(v: &SqlValue, slot_of: &mut dyn FnMut(&str) -> usize, scale: Option<i64>) -> Val {
            match v {
                SqlValue::Const(c) => Val::Const(*c),
                SqlValue::Var(n) => match scale {
                    Some(s) if n == "scale" => Val::Const(s),
                    _ => Val::Slot(slot_of(n)),
                },
                SqlValue::Now => Val::Now,
                SqlValue::Neg(x) => Val::Neg(Box::new(val(x, slot_of, scale))),
                SqlValue::Arith(op, a, b) => {
                    let a = val(a, slot_of, scale);
                    Val::Arith(*op, Box::new(a), Box::new(val(b, slot_of, scale)))
                }
            }
        }
        let scripts = scripts
            .iter()
            .map(|sc| {
                sc.commands
                    .iter()
                    .map(|(_, c)| match c {
                        Command::Set { var, expr } => {
                            let expr = expr
                                .resolve(&mut |n| match scale_const {
                                    Some(s) if n == "scale" => Expr::Const(Value::Int(s)),
                                    _ => Expr::Slot(slot_of(n), n.into()),
                                })
                                .fold_constants();
                            Op::Set { slot: slot_of(var), expr }
                        }
                        Command::Sleep { amount, unit_us } => Op::Sleep {
                            amount: match amount {
                                SleepArg::Const(n) => Val::Const(*n),
                                SleepArg::Var(v) => Val::Slot(slot_of(v)),
                            },
                            unit_us: *unit_us,
                        },
                        Command::Sql { cmd, .. } => match cmd {
                            SqlCommand::Begin => Op::Begin,
                            SqlCommand::Commit => Op::Commit,
                            SqlCommand::Rollback => Op::Rollback,
                            SqlCommand::Select { table, key, lock, wait, .. } => Op::Select {
                                table: *table,
                                key: val(key, &mut slot_of, scale_const),
                                lock: *lock,
                                wait: *wait,
                            },
                            SqlCommand::Update { table, column, delta, key } => Op::Update {
                                table: *table,
                                column: *column,
                                delta: val(delta, &mut slot_of, scale_const),
                                key: val(key, &mut slot_of, scale_const),
                            },
                            SqlCommand::InsertHistory { values } => Op::InsertHistory {
                                values: std::array::from_fn(|i| {
                                    values[i].as_ref().map(|v| val(v, &mut slot_of, scale_const))
                                }),
                            },
                        },
                    })
                    .collect()
            })
            .collect();
        Program { names, scripts }
    }
}

/// A client's variables, by slot of [`Program::names`].
pub(super) struct ClientVars<'a> {
    pub(super) names: &'a [String],
    pub(super) values: Vec<Option<Value>>,
}

impl Vars for ClientVars<'_> {
    fn get(&self, name: &str) -> Option<Value> {
        self.names.iter().position(|n| n == name).and_then(|i| self.values[i])
    }
    #[inline]
    fn slot(&self, index: usize) -> Option<Value> {
        self.values[index]
    }
}

impl ClientVars<'_> {
    pub(super) fn int(&self, slot: usize) -> Result<i64, EngineError> {
        self.values[slot]
            .ok_or_else(|| EngineError::Usage(format!("undefined variable \"{}\"", self.names[slot])))?
            .to_int()
            .map_err(|e| EngineError::Usage(e.to_string()))
    }
}

pub(super) fn sql_value(v: &Val, vars: &ClientVars<'_>) -> Result<i64, EngineError> {
    Ok(match v {
        Val::Const(c) => *c,
        Val::Slot(i) => vars.int(*i)?,
        Val::Now => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_micros() as i64)
            .unwrap_or(0),
        Val::Neg(x) => sql_value(x, vars)?.wrapping_neg(),
        Val::Arith(op, a, b) => {
            let (a, b) = (sql_value(a, vars)?, sql_value(b, vars)?);
            match op {
                '+' => a.wrapping_add(b),
                '-' => a.wrapping_sub(b),
                _ => a.wrapping_mul(b),
            }
        }
    })
}

/// A key compared with an integer column (`WHERE aid = :a`): `None` when the value is a
/// non-integral double (`\set a 1.5`), which in PostgreSQL compares as numeric and matches no
/// row, rather than being truncated to a key that exists.
pub(super) fn sql_key(v: &Val, vars: &ClientVars<'_>) -> Result<Option<i64>, EngineError> {
    if let Val::Slot(i) = v
        && let Some(Value::Double(d)) = vars.values[*i]
        && d.fract() != 0.0
    {
        return Ok(None);
    }
    sql_value(v, vars).map(Some)
}

/// Runs one command; `Ok(false)` means the transaction failed (deadlock, lock timeout). A
/// `\sleep` ends early once `stop` is set (the end of a `-T` run), as pgbench's clients stop
/// sleeping when the run's time is up.
pub(super) fn run_command(
    s: &mut Session,
    op: &Op,
    vars: &mut ClientVars<'_>,
    rng: &mut ClientRng,
    stop: &AtomicBool,
) -> Result<bool, EngineError> {
    let r = match op {
        Op::Set { slot, expr } => {
            let v = expr::eval(expr, vars, rng)
                .map_err(|e| EngineError::Usage(format!("\\set {}: {e}", vars.names[*slot])))?;
            vars.values[*slot] = Some(v);
            return Ok(true);
        }
        Op::Sleep { amount, unit_us } => {
            let n = sql_value(amount, vars)?;
            let _w = lockstack_common::WaitEventScope::new(lockstack_common::WaitEvent::PG_SLEEP);
            let until =
                Instant::now().checked_add(Duration::from_micros((n.max(0) as u64).saturating_mul(*unit_us)));
            // In steps of at most 10 ms, so that the end of the run is noticed.
            while !stop.load(Ordering::Relaxed) {
                let now = Instant::now();
                let left = until.map_or(Duration::from_millis(10), |u| u.saturating_duration_since(now));
                if left.is_zero() {
                    break;
                }
                lockstack_common::sync::sleep(left.min(Duration::from_millis(10)));
            }
            return Ok(true);
        }
        Op::Begin => {
            s.begin();
            Ok(())
        }
        Op::Commit => s.commit(),
        Op::Rollback => s.rollback(),
        Op::Select { table, key, lock, wait } => match sql_key(key, vars)? {
            Some(k) => s.select_with(table.rel(), k, *lock, *wait).map(|_| ()),
            None => Ok(()),
        },
        Op::Update { table, column, delta, key } => match sql_key(key, vars)? {
            Some(k) => s.update_add(table.rel(), k, *column, sql_value(delta, vars)?).map(|_| ()),
            None => Ok(()),
        },
        Op::InsertHistory { values } => {
            let mut v = [0i64; 5];
            for (i, x) in values.iter().enumerate() {
                if let Some(x) = x {
                    v[i] = sql_value(x, vars)?;
                }
            }
            s.insert_history(v)
        }
    };
    match r {
        Ok(()) => Ok(true),
        Err(EngineError::Lock(_)) => {
            s.rollback()?;
            Ok(false)
        }
        Err(e) => Err(e),
    }
}
