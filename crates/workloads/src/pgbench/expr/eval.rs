//! Evaluation (`evaluateExpr` and `evalFunc` in `pgbench.c`, PostgreSQL 15): variables
//! ([`Vars`]), the per-client random generator ([`ClientRng`]), the random distributions,
//! operators with pgbench's overflow and division errors, and constant folding.

use std::collections::HashMap;

use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use super::ast::*;
use super::error::ExprError;
use super::limits::{MAX_ZIPFIAN_PARAM, MIN_GAUSSIAN_PARAM, MIN_ZIPFIAN_PARAM};

impl Expr {
    /// This expression with every `:name` replaced by what `var(name)` returns: an
    /// [`Expr::Slot`] of a runner's variable table (built when the script is prepared), or a
    /// constant for a variable no command assigns (`:scale`).
    pub fn resolve(&self, var: &mut dyn FnMut(&str) -> Expr) -> Expr {
        let mut r = |e: &Expr| Box::new(e.resolve(var));
        match self {
            Expr::Const(v) => Expr::Const(*v),
            Expr::Var(n) => var(n),
            Expr::Slot(i, n) => Expr::Slot(*i, n.clone()),
            Expr::Neg(x) => Expr::Neg(r(x)),
            Expr::Not(x) => Expr::Not(r(x)),
            Expr::BitNot(x) => Expr::BitNot(r(x)),
            Expr::Binary(op, a, b) => {
                let a = r(a);
                Expr::Binary(*op, a, r(b))
            }
            Expr::Call(f, args) => Expr::Call(*f, args.iter().map(|a| a.resolve(var)).collect()),
        }
    }

    /// This expression with its constant operators evaluated (`100000 * 10` becomes
    /// `1000000`): operators whose operands are all constants and that evaluate without an
    /// error (an overflow stays, to fail when the command runs, as pgbench reports it).
    /// Function calls stay (the random functions draw from the client's generator).
    pub fn fold_constants(&self) -> Expr {
        let konst = |e: &Expr| match e {
            Expr::Const(v) => Some(*v),
            _ => None,
        };
        match self {
            Expr::Neg(x) => {
                let x = x.fold_constants();
                let folded = konst(&x).and_then(|v| match v {
                    Value::Double(d) => Some(Value::Double(-d)),
                    v => v.to_int().ok()?.checked_neg().map(Value::Int),
                });
                folded.map_or_else(|| Expr::Neg(Box::new(x)), Expr::Const)
            }
            Expr::Not(x) => {
                let x = x.fold_constants();
                konst(&x).map_or_else(|| Expr::Not(Box::new(x)), |v| Expr::Const(Value::Bool(!v.as_bool())))
            }
            Expr::BitNot(x) => {
                let x = x.fold_constants();
                match konst(&x).map(Value::to_int) {
                    Some(Ok(i)) => Expr::Const(Value::Int(!i)),
                    _ => Expr::BitNot(Box::new(x)),
                }
            }
            Expr::Binary(op, a, b) => {
                let (a, b) = (a.fold_constants(), b.fold_constants());
                let folded = match (konst(&a), konst(&b)) {
                    (Some(x), Some(y)) => match op {
                        BinOp::And => Some(Value::Bool(x.as_bool() && y.as_bool())),
                        BinOp::Or => Some(Value::Bool(x.as_bool() || y.as_bool())),
                        _ => binary(*op, x, y).ok(),
                    },
                    _ => None,
                };
                folded.map_or_else(|| Expr::Binary(*op, Box::new(a), Box::new(b)), Expr::Const)
            }
            Expr::Call(f, args) => Expr::Call(*f, args.iter().map(Expr::fold_constants).collect()),
            e => e.clone(),
        }
    }
}

/// A client's random number generator (one per client, seeded from `--random-seed`).
pub type ClientRng = Xoshiro256PlusPlus;

/// A generator for client `client` from the run's seed.
pub fn client_rng(seed: u64, client: u64) -> ClientRng {
    Xoshiro256PlusPlus::seed_from_u64(seed ^ client.wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// Variable lookup during evaluation.
pub trait Vars {
    /// The value of `:name`, if set.
    fn get(&self, name: &str) -> Option<Value>;

    /// The value in slot `index` ([`Expr::Slot`]), if set; tables without slots have none.
    fn slot(&self, index: usize) -> Option<Value> {
        let _ = index;
        None
    }
}

impl Vars for HashMap<String, Value> {
    fn get(&self, name: &str) -> Option<Value> {
        HashMap::get(self, name).copied()
    }
}

pub(super) fn checked(r: Option<i64>) -> Result<Value, ExprError> {
    r.map(Value::Int).ok_or(ExprError::BigintOutOfRange)
}

/// Uniform integer in `[lb, ub]` (`getrand`).
pub(super) fn uniform(rng: &mut ClientRng, lb: i64, ub: i64) -> Result<i64, ExprError> {
    if ub < lb {
        return Err(ExprError::EmptyRange { func: "random", lb, ub });
    }
    if ub.checked_sub(lb).is_none() {
        return Err(ExprError::RandomRangeTooLarge);
    }
    Ok(rng.random_range(lb..=ub))
}

/// `random_exponential`: inverse-transform of an exponential distribution truncated to the
/// range, `parameter > 0` (`getExponentialRand`).
pub(super) fn exponential(rng: &mut ClientRng, lb: i64, ub: i64, param: f64) -> Result<i64, ExprError> {
    if ub < lb {
        return Err(ExprError::EmptyRange { func: "random_exponential", lb, ub });
    }
    if param <= 0.0 {
        return Err(ExprError::ExponentialParameter(param));
    }
    let cut = (-param).exp();
    let u: f64 = 1.0 - rng.random::<f64>();
    let r = -(cut + (1.0 - cut) * u).ln() / param;
    let span = (ub - lb) as f64 + 1.0;
    Ok(lb + ((span * r) as i64).min(ub - lb))
}

/// `random_gaussian`: Box-Muller normal draws rejected outside `±parameter` standard
/// deviations, mapped onto the range; `parameter >= 2.0` (`getGaussianRand`).
pub(super) fn gaussian(rng: &mut ClientRng, lb: i64, ub: i64, param: f64) -> Result<i64, ExprError> {
    if ub < lb {
        return Err(ExprError::EmptyRange { func: "random_gaussian", lb, ub });
    }
    if param < MIN_GAUSSIAN_PARAM {
        return Err(ExprError::GaussianParameter(param));
    }
    let stdev = loop {
        let r1: f64 = 1.0 - rng.random::<f64>();
        let r2: f64 = rng.random::<f64>();
        let z = (-2.0 * r1.ln()).sqrt() * (2.0 * std::f64::consts::PI * r2).sin();
        if z >= -param && z < param {
            break z;
        }
    };
    let r = (stdev + param) / (param * 2.0);
    let span = (ub - lb) as f64 + 1.0;
    Ok(lb + ((span * r) as i64).min(ub - lb))
}

/// `random_zipfian`: rank `k` in `1..=n` with probability proportional to `k^-s`, by
/// rejection (L. Devroye, *Non-Uniform Random Variate Generation*, 1986, X.6), the method
/// pgbench 13+ uses for every `s`.
pub(super) fn zipfian(rng: &mut ClientRng, lb: i64, ub: i64, s: f64) -> Result<i64, ExprError> {
    if ub < lb {
        return Err(ExprError::EmptyRange { func: "random_zipfian", lb, ub });
    }
    if !(MIN_ZIPFIAN_PARAM..=MAX_ZIPFIAN_PARAM).contains(&s) {
        return Err(ExprError::ZipfianParameter(s));
    }
    let n = (ub - lb + 1) as f64;
    let b = 2f64.powf(s - 1.0);
    loop {
        let u: f64 = 1.0 - rng.random::<f64>();
        let v: f64 = rng.random::<f64>();
        let x = u.powf(-1.0 / (s - 1.0)).floor();
        let t = (1.0 + 1.0 / x).powf(s - 1.0);
        if v * x * (t - 1.0) / (b - 1.0) <= t / b && x <= n {
            return Ok(lb + x as i64 - 1);
        }
    }
}

/// Evaluates `e` with `vars` and the client's generator.
///
/// # Errors
/// An [`ExprError`](super::ExprError): undefined variables, overflow, division by zero, bad random-function arguments, displayed as the
/// message pgbench would print.
pub fn eval(e: &Expr, vars: &dyn Vars, rng: &mut ClientRng) -> Result<Value, ExprError> {
    Ok(match e {
        Expr::Const(v) => *v,
        Expr::Var(name) => vars.get(name).ok_or_else(|| ExprError::UndefinedVariable(name.to_string()))?,
        Expr::Slot(i, name) => vars.slot(*i).ok_or_else(|| ExprError::UndefinedVariable(name.to_string()))?,
        Expr::Neg(x) => match eval(x, vars, rng)? {
            Value::Double(d) => Value::Double(-d),
            v => checked(v.to_int()?.checked_neg())?,
        },
        Expr::Not(x) => Value::Bool(!eval(x, vars, rng)?.as_bool()),
        Expr::BitNot(x) => Value::Int(!eval(x, vars, rng)?.to_int()?),
        Expr::Binary(op, a, b) => {
            if *op == BinOp::And {
                return Ok(Value::Bool(eval(a, vars, rng)?.as_bool() && eval(b, vars, rng)?.as_bool()));
            }
            if *op == BinOp::Or {
                return Ok(Value::Bool(eval(a, vars, rng)?.as_bool() || eval(b, vars, rng)?.as_bool()));
            }
            let (x, y) = (operand(a, vars, rng)?, operand(b, vars, rng)?);
            binary(*op, x, y)?
        }
        Expr::Call(f, args) => {
            // Arguments on the stack: every function but the variadic greatest/least takes at
            // most three, so a call allocates nothing unless it has more than four.
            const INLINE: usize = 4;
            if args.len() <= INLINE {
                let mut v = [Value::Int(0); INLINE];
                for (slot, a) in v.iter_mut().zip(args) {
                    *slot = operand(a, vars, rng)?;
                }
                call(*f, &v[..args.len()], rng)?
            } else {
                let v = args.iter().map(|a| eval(a, vars, rng)).collect::<Result<Vec<_>, _>>()?;
                call(*f, &v, rng)?
            }
        }
    })
}

/// [`eval`] of an operand, with constants (most operands in pgbench scripts) taken without
/// the recursive call.
#[inline(always)]
pub(super) fn operand(e: &Expr, vars: &dyn Vars, rng: &mut ClientRng) -> Result<Value, ExprError> {
    match e {
        Expr::Const(v) => Ok(*v),
        _ => eval(e, vars, rng),
    }
}

pub(super) fn binary(op: BinOp, x: Value, y: Value) -> Result<Value, ExprError> {
    let doubles = matches!(x, Value::Double(_)) || matches!(y, Value::Double(_));
    match op {
        BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div if doubles => {
            let (a, b) = (x.as_double(), y.as_double());
            Ok(Value::Double(match op {
                BinOp::Add => a + b,
                BinOp::Sub => a - b,
                BinOp::Mul => a * b,
                _ => {
                    if b == 0.0 {
                        return Err(ExprError::DivisionByZero);
                    }
                    a / b
                }
            }))
        }
        BinOp::Add => checked(x.to_int()?.checked_add(y.to_int()?)),
        BinOp::Sub => checked(x.to_int()?.checked_sub(y.to_int()?)),
        BinOp::Mul => checked(x.to_int()?.checked_mul(y.to_int()?)),
        BinOp::Div | BinOp::Mod => {
            let (a, b) = (x.to_int()?, y.to_int()?);
            if b == 0 {
                return Err(ExprError::DivisionByZero);
            }
            if b == -1 {
                // i64::MIN / -1 overflows; i64::MIN % -1 is 0.
                return if op == BinOp::Div { checked(a.checked_neg()) } else { Ok(Value::Int(0)) };
            }
            Ok(Value::Int(if op == BinOp::Div { a / b } else { a % b }))
        }
        BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
            let ord = if doubles {
                x.as_double().partial_cmp(&y.as_double())
            } else {
                Some(x.to_int()?.cmp(&y.to_int()?))
            };
            let Some(ord) = ord else { return Ok(Value::Bool(op == BinOp::Ne)) };
            use std::cmp::Ordering::*;
            Ok(Value::Bool(match op {
                BinOp::Eq => ord == Equal,
                BinOp::Ne => ord != Equal,
                BinOp::Lt => ord == Less,
                BinOp::Le => ord != Greater,
                BinOp::Gt => ord == Greater,
                _ => ord != Less,
            }))
        }
        BinOp::BitAnd => Ok(Value::Int(x.to_int()? & y.to_int()?)),
        BinOp::BitOr => Ok(Value::Int(x.to_int()? | y.to_int()?)),
        BinOp::BitXor => Ok(Value::Int(x.to_int()? ^ y.to_int()?)),
        BinOp::Shl => Ok(Value::Int(x.to_int()?.wrapping_shl((y.to_int()? & 63) as u32))),
        BinOp::Shr => Ok(Value::Int(x.to_int()?.wrapping_shr((y.to_int()? & 63) as u32))),
        BinOp::And | BinOp::Or => unreachable!("short-circuited in eval"),
    }
}

pub(super) fn call(f: Func, v: &[Value], rng: &mut ClientRng) -> Result<Value, ExprError> {
    let any_double = v.iter().any(|x| matches!(x, Value::Double(_)));
    Ok(match f {
        Func::Abs => match v[0] {
            Value::Double(d) => Value::Double(d.abs()),
            x => checked(x.to_int()?.checked_abs())?,
        },
        Func::Double => Value::Double(v[0].as_double()),
        Func::Int => Value::Int(v[0].to_int()?),
        Func::Exp => Value::Double(v[0].as_double().exp()),
        Func::Ln => {
            let d = v[0].as_double();
            if d <= 0.0 {
                return Err(ExprError::LogOfNonPositive);
            }
            Value::Double(d.ln())
        }
        Func::Sqrt => Value::Double(v[0].as_double().sqrt()),
        Func::Pi => Value::Double(std::f64::consts::PI),
        Func::Pow => Value::Double(v[0].as_double().powf(v[1].as_double())),
        Func::Mod => binary(BinOp::Mod, v[0], v[1])?,
        Func::Greatest | Func::Least => {
            let greatest = f == Func::Greatest;
            if any_double {
                let it = v.iter().map(|x| x.as_double());
                Value::Double(if greatest {
                    it.fold(f64::MIN, f64::max)
                } else {
                    it.fold(f64::MAX, f64::min)
                })
            } else {
                let mut acc = v[0].to_int()?;
                for x in &v[1..] {
                    let x = x.to_int()?;
                    acc = if greatest { acc.max(x) } else { acc.min(x) };
                }
                Value::Int(acc)
            }
        }
        Func::Random => Value::Int(uniform(rng, v[0].to_int()?, v[1].to_int()?)?),
        Func::RandomExponential => {
            Value::Int(exponential(rng, v[0].to_int()?, v[1].to_int()?, v[2].as_double())?)
        }
        Func::RandomGaussian => Value::Int(gaussian(rng, v[0].to_int()?, v[1].to_int()?, v[2].as_double())?),
        Func::RandomZipfian => Value::Int(zipfian(rng, v[0].to_int()?, v[1].to_int()?, v[2].as_double())?),
    })
}
