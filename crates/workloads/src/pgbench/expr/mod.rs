//! pgbench's expression language (the right-hand side of `\set`), parsed and evaluated.
//!
//! Follows the grammar and semantics of `src/bin/pgbench/exprparse.y` and `evalFunc` in
//! `pgbench.c` (PostgreSQL 15): 64-bit integers and doubles, `:variables`, the operators
//! `+ - * / %`, comparisons, `AND OR NOT`, bitwise `& | # << >> ~`, `CASE`-free, and the
//! functions `abs`, `double`, `exp`, `greatest`, `int`, `least`, `ln`, `mod`, `pi`, `pow` /
//! `power`, `sqrt`, `random`, `random_exponential`, `random_gaussian`, `random_zipfian`. Integer
//! overflow and division by zero are errors, as in pgbench.

use std::collections::HashMap;
use std::fmt;

use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// A value: pgbench evaluates to a 64-bit integer, a double, or a boolean.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Value {
    /// A 64-bit integer.
    Int(i64),
    /// A double.
    Double(f64),
    /// A boolean (comparisons, `AND`/`OR`/`NOT`).
    Bool(bool),
}

impl Value {
    /// The value as an integer (doubles are truncated toward zero, booleans are 0/1), as
    /// pgbench's `coerceToInt`.
    ///
    /// # Errors
    /// A double outside the 64-bit range, or NaN.
    pub fn as_int(self) -> Result<i64, String> {
        match self {
            Value::Int(i) => Ok(i),
            Value::Bool(b) => Ok(i64::from(b)),
            Value::Double(d) => {
                if d.is_nan() || d < i64::MIN as f64 || d >= i64::MAX as f64 {
                    Err(format!("double to int overflow for {d}"))
                } else {
                    Ok(d as i64)
                }
            }
        }
    }

    /// The value as a double.
    pub fn as_double(self) -> f64 {
        match self {
            Value::Int(i) => i as f64,
            Value::Double(d) => d,
            Value::Bool(b) => f64::from(u8::from(b)),
        }
    }

    fn as_bool(self) -> bool {
        match self {
            Value::Bool(b) => b,
            Value::Int(i) => i != 0,
            Value::Double(d) => d != 0.0,
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Int(i) => write!(f, "{i}"),
            Value::Double(d) => write!(f, "{d}"),
            Value::Bool(b) => write!(f, "{b}"),
        }
    }
}

/// Binary operators.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum BinOp {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/` (integer division truncates toward zero)
    Div,
    /// `%`
    Mod,
    /// `=`
    Eq,
    /// `<>` or `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `AND`
    And,
    /// `OR`
    Or,
    /// `&`
    BitAnd,
    /// `|`
    BitOr,
    /// `#` (xor)
    BitXor,
    /// `<<`
    Shl,
    /// `>>`
    Shr,
}

/// The built-in functions.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Func {
    /// `abs(x)`
    Abs,
    /// `double(x)`
    Double,
    /// `exp(x)`
    Exp,
    /// `greatest(a, ...)`
    Greatest,
    /// `int(x)`
    Int,
    /// `least(a, ...)`
    Least,
    /// `ln(x)`
    Ln,
    /// `mod(a, b)`
    Mod,
    /// `pi()`
    Pi,
    /// `pow(a, b)` / `power(a, b)`
    Pow,
    /// `sqrt(x)`
    Sqrt,
    /// `random(lb, ub)`: uniform integer in `[lb, ub]`.
    Random,
    /// `random_exponential(lb, ub, parameter)`.
    RandomExponential,
    /// `random_gaussian(lb, ub, parameter)`.
    RandomGaussian,
    /// `random_zipfian(lb, ub, parameter)`.
    RandomZipfian,
}

impl Func {
    fn lookup(name: &str) -> Option<(Func, usize, Option<usize>)> {
        // (function, min args, max args; None = variadic)
        Some(match name.to_ascii_lowercase().as_str() {
            "abs" => (Func::Abs, 1, Some(1)),
            "double" => (Func::Double, 1, Some(1)),
            "exp" => (Func::Exp, 1, Some(1)),
            "greatest" => (Func::Greatest, 1, None),
            "int" => (Func::Int, 1, Some(1)),
            "least" => (Func::Least, 1, None),
            "ln" => (Func::Ln, 1, Some(1)),
            "mod" => (Func::Mod, 2, Some(2)),
            "pi" => (Func::Pi, 0, Some(0)),
            "pow" | "power" => (Func::Pow, 2, Some(2)),
            "sqrt" => (Func::Sqrt, 1, Some(1)),
            "random" => (Func::Random, 2, Some(2)),
            "random_exponential" => (Func::RandomExponential, 3, Some(3)),
            "random_gaussian" => (Func::RandomGaussian, 3, Some(3)),
            "random_zipfian" => (Func::RandomZipfian, 3, Some(3)),
            _ => return None,
        })
    }
}

/// A parsed expression.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// A constant.
    Const(Value),
    /// `:name`.
    Var(String),
    /// `:name` resolved to index `.0` of a client's variable table ([`Expr::resolve`]; the
    /// parser never produces it). pgbench 15 looks variables up by name (a binary search of
    /// the client's sorted array); a slot index gives the same value without the search.
    Slot(usize, Box<str>),
    /// Unary minus.
    Neg(Box<Expr>),
    /// `NOT x`.
    Not(Box<Expr>),
    /// `~x` (bitwise not).
    BitNot(Box<Expr>),
    /// `a op b`.
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// `f(args)`.
    Call(Func, Vec<Expr>),
}

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
                    v => v.as_int().ok()?.checked_neg().map(Value::Int),
                });
                folded.map_or_else(|| Expr::Neg(Box::new(x)), Expr::Const)
            }
            Expr::Not(x) => {
                let x = x.fold_constants();
                konst(&x).map_or_else(|| Expr::Not(Box::new(x)), |v| Expr::Const(Value::Bool(!v.as_bool())))
            }
            Expr::BitNot(x) => {
                let x = x.fold_constants();
                match konst(&x).map(Value::as_int) {
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

/// pgbench's limits for the random functions (`pgbench.c`): gaussian parameter at least 2.0,
/// zipfian parameter in [1.001, 1000].
pub const MIN_GAUSSIAN_PARAM: f64 = 2.0;
/// Smallest zipfian parameter pgbench accepts.
pub const MIN_ZIPFIAN_PARAM: f64 = 1.001;
/// Largest zipfian parameter pgbench accepts.
pub const MAX_ZIPFIAN_PARAM: f64 = 1000.0;

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Int(i64),
    /// `9223372036854775808`, legal only right after a unary minus.
    MaxIntPlusOne,
    Double(f64),
    Var(String),
    Ident(String),
    Op(&'static str),
    LParen,
    RParen,
    Comma,
}

/// A double constant as pgbench's scanner reads it (`strtodouble` over `strtod`, PostgreSQL 15
/// `exprscan.l`): a value that overflows to infinity or underflows (to zero or a subnormal from
/// a nonzero mantissa), where C's `strtod` sets `ERANGE`, is refused.
fn parse_double(text: &str) -> Result<f64, String> {
    let bad = || format!("double constant out of range: \"{text}\"");
    let d: f64 = text.parse().map_err(|_| format!("invalid number \"{text}\""))?;
    let mantissa = text.split(['e', 'E']).next().unwrap_or("");
    let nonzero = mantissa.bytes().any(|b| (b'1'..=b'9').contains(&b));
    if d.is_infinite() || (nonzero && !d.is_normal()) { Err(bad()) } else { Ok(d) }
}

fn tokenize(s: &str) -> Result<Vec<Tok>, String> {
    let b = s.as_bytes();
    let mut i = 0;
    let mut out = Vec::new();
    while i < b.len() {
        // `i` is always at a char boundary: every branch below advances over ASCII bytes or
        // over whole chars, so slicing `s` at `i` never splits a UTF-8 sequence.
        let Some(c) = s[i..].chars().next() else { break };
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if c.is_ascii_digit() || (c == '.' && i + 1 < b.len() && (b[i + 1] as char).is_ascii_digit()) {
            let start = i;
            while i < b.len() && ((b[i] as char).is_ascii_digit()) {
                i += 1;
            }
            let mut is_double = false;
            if i < b.len() && b[i] == b'.' {
                is_double = true;
                i += 1;
                while i < b.len() && (b[i] as char).is_ascii_digit() {
                    i += 1;
                }
            }
            if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
                is_double = true;
                i += 1;
                if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
                    i += 1;
                }
                while i < b.len() && (b[i] as char).is_ascii_digit() {
                    i += 1;
                }
            }
            let text = &s[start..i];
            if is_double {
                out.push(Tok::Double(parse_double(text)?));
            } else if text == "9223372036854775808" {
                // 2^63: only valid after a unary minus (pgbench's MAXINT_PLUS_ONE_CONST).
                out.push(Tok::MaxIntPlusOne);
            } else {
                out.push(Tok::Int(text.parse().map_err(|_| format!("bigint out of range: \"{text}\""))?));
            }
            continue;
        }
        if c == ':' {
            let start = i + 1;
            i += 1;
            while i < b.len() && ((b[i] as char).is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            if i == start {
                return Err("expected a variable name after ':'".into());
            }
            out.push(Tok::Var(s[start..i].to_string()));
            continue;
        }
        if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < b.len() && ((b[i] as char).is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push(Tok::Ident(s[start..i].to_string()));
            continue;
        }
        let two = s.get(i..i + 2).unwrap_or("");
        let op2 = match two {
            "<=" => Some("<="),
            ">=" => Some(">="),
            "<>" => Some("<>"),
            "!=" => Some("<>"),
            "<<" => Some("<<"),
            ">>" => Some(">>"),
            _ => None,
        };
        if let Some(op) = op2 {
            out.push(Tok::Op(op));
            i += 2;
            continue;
        }
        let tok = match c {
            '(' => Tok::LParen,
            ')' => Tok::RParen,
            ',' => Tok::Comma,
            '+' => Tok::Op("+"),
            '-' => Tok::Op("-"),
            '*' => Tok::Op("*"),
            '/' => Tok::Op("/"),
            '%' => Tok::Op("%"),
            '=' => Tok::Op("="),
            '<' => Tok::Op("<"),
            '>' => Tok::Op(">"),
            '&' => Tok::Op("&"),
            '|' => Tok::Op("|"),
            '#' => Tok::Op("#"),
            '~' => Tok::Op("~"),
            _ => return Err(format!("unexpected character '{}'", c.escape_debug())),
        };
        out.push(tok);
        i += 1;
    }
    Ok(out)
}

struct Parser {
    toks: Vec<Tok>,
    pos: usize,
    /// Parser recursion depth (nested parentheses, unary operators, calls).
    nesting: usize,
}

/// The deepest expression tree [`parse`] accepts (nested parentheses, unary operators, calls,
/// and operator chains such as a sum of many terms all count). Parsing, folding, evaluating and
/// dropping an expression recurse once per level; at this depth each takes under 1 MiB of stack
/// even in an unoptimised build (measured: a 256-level parse and evaluation fit in 1 MiB there,
/// in well under 512 KiB optimised), so they stay inside a client thread's default 2 MiB.
/// pgbench's bison parser allows deeper nesting (`YYMAXDEPTH`, 10000 states) but pgbench
/// scripts use a handful of levels.
pub const MAX_EXPR_DEPTH: usize = 256;

/// The longest expression text [`parse`] accepts, bytes.
pub const MAX_EXPR_LEN: usize = 100_000;

fn too_deep() -> String {
    format!("expression is too deeply nested (more than {MAX_EXPR_DEPTH} levels)")
}

fn binop_info(t: &Tok) -> Option<(BinOp, u8)> {
    // Higher binds tighter (exprparse.y's precedence list, bottom = tightest).
    Some(match t {
        Tok::Ident(w) if w.eq_ignore_ascii_case("or") => (BinOp::Or, 1),
        Tok::Ident(w) if w.eq_ignore_ascii_case("and") => (BinOp::And, 2),
        Tok::Op("=") => (BinOp::Eq, 4),
        Tok::Op("<>") => (BinOp::Ne, 4),
        Tok::Op("<") => (BinOp::Lt, 4),
        Tok::Op("<=") => (BinOp::Le, 4),
        Tok::Op(">") => (BinOp::Gt, 4),
        Tok::Op(">=") => (BinOp::Ge, 4),
        Tok::Op("&") => (BinOp::BitAnd, 5),
        Tok::Op("|") => (BinOp::BitOr, 5),
        Tok::Op("#") => (BinOp::BitXor, 5),
        Tok::Op("<<") => (BinOp::Shl, 5),
        Tok::Op(">>") => (BinOp::Shr, 5),
        Tok::Op("+") => (BinOp::Add, 6),
        Tok::Op("-") => (BinOp::Sub, 6),
        Tok::Op("*") => (BinOp::Mul, 7),
        Tok::Op("/") => (BinOp::Div, 7),
        Tok::Op("%") => (BinOp::Mod, 7),
        _ => return None,
    })
}

/// An expression with the depth of its tree (a leaf is 1).
type Parsed = (Expr, usize);

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }

    fn next(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.pos).cloned();
        self.pos += 1;
        t
    }

    /// Enters one level of parser recursion; fails beyond [`MAX_EXPR_DEPTH`], before the
    /// recursion itself could exhaust the stack.
    fn enter(&mut self) -> Result<(), String> {
        self.nesting += 1;
        if self.nesting > MAX_EXPR_DEPTH { Err(too_deep()) } else { Ok(()) }
    }

    /// A node over children of depth `child`: fails when the tree gets too deep.
    fn node(e: Expr, child: usize) -> Result<Parsed, String> {
        if child + 1 > MAX_EXPR_DEPTH { Err(too_deep()) } else { Ok((e, child + 1)) }
    }

    fn expr(&mut self, min_prec: u8) -> Result<Parsed, String> {
        self.enter()?;
        let (mut lhs, mut depth) = self.unary()?;
        while let Some((op, prec)) = self.peek().and_then(binop_info) {
            if prec < min_prec {
                break;
            }
            self.pos += 1;
            // Comparisons are non-associative; everything else is left-associative.
            let (rhs, rd) = self.expr(prec + 1)?;
            (lhs, depth) = Self::node(Expr::Binary(op, Box::new(lhs), Box::new(rhs)), depth.max(rd))?;
            if prec == 4 && matches!(self.peek().and_then(binop_info), Some((_, 4))) {
                return Err("comparison operators cannot be chained".into());
            }
        }
        self.nesting -= 1;
        Ok((lhs, depth))
    }

    fn unary(&mut self) -> Result<Parsed, String> {
        if !matches!(self.peek(), Some(Tok::Op("-" | "+" | "~"))) {
            return self.primary_or_not();
        }
        self.enter()?;
        let r = match self.peek() {
            Some(Tok::Op("-")) => {
                self.pos += 1;
                if self.peek() == Some(&Tok::MaxIntPlusOne) {
                    self.pos += 1;
                    self.nesting -= 1;
                    return Ok((Expr::Const(Value::Int(i64::MIN)), 1));
                }
                let (x, d) = self.unary()?;
                Self::node(Expr::Neg(Box::new(x)), d)
            }
            Some(Tok::Op("+")) => {
                self.pos += 1;
                self.unary()
            }
            Some(Tok::Op("~")) => {
                self.pos += 1;
                let (x, d) = self.unary()?;
                Self::node(Expr::BitNot(Box::new(x)), d)
            }
            _ => self.primary_or_not(),
        }?;
        self.nesting -= 1;
        Ok(r)
    }

    fn primary_or_not(&mut self) -> Result<Parsed, String> {
        match self.peek() {
            Some(Tok::Ident(w)) if w.eq_ignore_ascii_case("not") => {
                self.pos += 1;
                // NOT binds looser than comparisons (and recurses through `expr`, which counts
                // the level).
                let (x, d) = self.expr(3)?;
                Self::node(Expr::Not(Box::new(x)), d)
            }
            _ => self.primary(),
        }
    }

    fn primary(&mut self) -> Result<Parsed, String> {
        match self.next() {
            Some(Tok::Int(i)) => Ok((Expr::Const(Value::Int(i)), 1)),
            Some(Tok::Double(d)) => Ok((Expr::Const(Value::Double(d)), 1)),
            Some(Tok::Var(v)) => Ok((Expr::Var(v), 1)),
            Some(Tok::LParen) => {
                let e = self.expr(0)?;
                match self.next() {
                    Some(Tok::RParen) => Ok(e),
                    _ => Err("expected ')'".into()),
                }
            }
            Some(Tok::Ident(name)) => self.ident(&name),
            Some(Tok::MaxIntPlusOne) => Err("bigint out of range: \"9223372036854775808\"".into()),
            Some(t) => Err(format!("syntax error at {t:?}")),
            None => Err("unexpected end of expression".into()),
        }
    }

    /// `true`, `false` or a function call: out of [`Parser::primary`], so that the frames of
    /// the parenthesis recursion stay small (unoptimised builds give every temporary its own
    /// stack slot).
    #[inline(never)]
    fn ident(&mut self, name: &str) -> Result<Parsed, String> {
        if name.eq_ignore_ascii_case("true") {
            return Ok((Expr::Const(Value::Bool(true)), 1));
        }
        if name.eq_ignore_ascii_case("false") {
            return Ok((Expr::Const(Value::Bool(false)), 1));
        }
        let (f, min, max) =
            Func::lookup(name).ok_or_else(|| format!("unexpected function name \"{name}\""))?;
        if self.next() != Some(Tok::LParen) {
            return Err(format!("expected '(' after function name \"{name}\""));
        }
        let mut args = Vec::new();
        let mut depth = 0;
        if self.peek() == Some(&Tok::RParen) {
            self.pos += 1;
        } else {
            loop {
                let (a, d) = self.expr(0)?;
                args.push(a);
                depth = depth.max(d);
                match self.next() {
                    Some(Tok::Comma) => continue,
                    Some(Tok::RParen) => break,
                    _ => return Err(format!("expected ',' or ')' in call of \"{name}\"")),
                }
            }
        }
        if args.len() < min || max.is_some_and(|m| args.len() > m) {
            return Err(format!("wrong number of arguments ({}) for function \"{name}\"", args.len()));
        }
        Self::node(Expr::Call(f, args), depth)
    }
}

/// Parses one expression.
///
/// # Errors
/// A message naming what was wrong (unknown function, bad token, wrong argument count, an
/// expression longer than [`MAX_EXPR_LEN`] bytes or deeper than [`MAX_EXPR_DEPTH`] levels).
pub fn parse(text: &str) -> Result<Expr, String> {
    if text.len() > MAX_EXPR_LEN {
        return Err(format!("expression is too long ({} bytes, at most {MAX_EXPR_LEN})", text.len()));
    }
    let toks = tokenize(text)?;
    if toks.is_empty() {
        return Err("missing expression".into());
    }
    let mut p = Parser { toks, pos: 0, nesting: 0 };
    let (e, _) = p.expr(0)?;
    if p.pos != p.toks.len() {
        return Err(format!("unexpected {:?} after expression", p.toks[p.pos]));
    }
    Ok(e)
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

fn checked(r: Option<i64>) -> Result<Value, String> {
    r.map(Value::Int).ok_or_else(|| "bigint out of range".to_string())
}

/// Uniform integer in `[lb, ub]` (`getrand`).
fn uniform(rng: &mut ClientRng, lb: i64, ub: i64) -> Result<i64, String> {
    if ub < lb {
        return Err(format!("empty range given to random: {lb} > {ub}"));
    }
    if ub.checked_sub(lb).is_none() {
        return Err("random range is too large".into());
    }
    Ok(rng.random_range(lb..=ub))
}

/// `random_exponential`: inverse-transform of an exponential distribution truncated to the
/// range, `parameter > 0` (`getExponentialRand`).
fn exponential(rng: &mut ClientRng, lb: i64, ub: i64, param: f64) -> Result<i64, String> {
    if ub < lb {
        return Err(format!("empty range given to random_exponential: {lb} > {ub}"));
    }
    if param <= 0.0 {
        return Err(format!("exponential parameter must be greater than zero (got {param})"));
    }
    let cut = (-param).exp();
    let u: f64 = 1.0 - rng.random::<f64>();
    let r = -(cut + (1.0 - cut) * u).ln() / param;
    let span = (ub - lb) as f64 + 1.0;
    Ok(lb + ((span * r) as i64).min(ub - lb))
}

/// `random_gaussian`: Box-Muller normal draws rejected outside `±parameter` standard
/// deviations, mapped onto the range; `parameter >= 2.0` (`getGaussianRand`).
fn gaussian(rng: &mut ClientRng, lb: i64, ub: i64, param: f64) -> Result<i64, String> {
    if ub < lb {
        return Err(format!("empty range given to random_gaussian: {lb} > {ub}"));
    }
    if param < MIN_GAUSSIAN_PARAM {
        return Err(format!("gaussian parameter must be at least {MIN_GAUSSIAN_PARAM:.6} (got {param:.6})"));
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
fn zipfian(rng: &mut ClientRng, lb: i64, ub: i64, s: f64) -> Result<i64, String> {
    if ub < lb {
        return Err(format!("empty range given to random_zipfian: {lb} > {ub}"));
    }
    if !(MIN_ZIPFIAN_PARAM..=MAX_ZIPFIAN_PARAM).contains(&s) {
        return Err(format!(
            "zipfian parameter must be in range [{MIN_ZIPFIAN_PARAM:.3}, {MAX_ZIPFIAN_PARAM:.0}] (got {s})"
        ));
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
/// Undefined variables, overflow, division by zero, bad random-function arguments: the
/// message pgbench would print.
pub fn eval(e: &Expr, vars: &dyn Vars, rng: &mut ClientRng) -> Result<Value, String> {
    Ok(match e {
        Expr::Const(v) => *v,
        Expr::Var(name) => vars.get(name).ok_or_else(|| format!("undefined variable \"{name}\""))?,
        Expr::Slot(i, name) => vars.slot(*i).ok_or_else(|| format!("undefined variable \"{name}\""))?,
        Expr::Neg(x) => match eval(x, vars, rng)? {
            Value::Double(d) => Value::Double(-d),
            v => checked(v.as_int()?.checked_neg())?,
        },
        Expr::Not(x) => Value::Bool(!eval(x, vars, rng)?.as_bool()),
        Expr::BitNot(x) => Value::Int(!eval(x, vars, rng)?.as_int()?),
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
fn operand(e: &Expr, vars: &dyn Vars, rng: &mut ClientRng) -> Result<Value, String> {
    match e {
        Expr::Const(v) => Ok(*v),
        _ => eval(e, vars, rng),
    }
}

fn binary(op: BinOp, x: Value, y: Value) -> Result<Value, String> {
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
                        return Err("division by zero".into());
                    }
                    a / b
                }
            }))
        }
        BinOp::Add => checked(x.as_int()?.checked_add(y.as_int()?)),
        BinOp::Sub => checked(x.as_int()?.checked_sub(y.as_int()?)),
        BinOp::Mul => checked(x.as_int()?.checked_mul(y.as_int()?)),
        BinOp::Div | BinOp::Mod => {
            let (a, b) = (x.as_int()?, y.as_int()?);
            if b == 0 {
                return Err("division by zero".into());
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
                Some(x.as_int()?.cmp(&y.as_int()?))
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
        BinOp::BitAnd => Ok(Value::Int(x.as_int()? & y.as_int()?)),
        BinOp::BitOr => Ok(Value::Int(x.as_int()? | y.as_int()?)),
        BinOp::BitXor => Ok(Value::Int(x.as_int()? ^ y.as_int()?)),
        BinOp::Shl => Ok(Value::Int(x.as_int()?.wrapping_shl((y.as_int()? & 63) as u32))),
        BinOp::Shr => Ok(Value::Int(x.as_int()?.wrapping_shr((y.as_int()? & 63) as u32))),
        BinOp::And | BinOp::Or => unreachable!("short-circuited in eval"),
    }
}

fn call(f: Func, v: &[Value], rng: &mut ClientRng) -> Result<Value, String> {
    let any_double = v.iter().any(|x| matches!(x, Value::Double(_)));
    Ok(match f {
        Func::Abs => match v[0] {
            Value::Double(d) => Value::Double(d.abs()),
            x => checked(x.as_int()?.checked_abs())?,
        },
        Func::Double => Value::Double(v[0].as_double()),
        Func::Int => Value::Int(v[0].as_int()?),
        Func::Exp => Value::Double(v[0].as_double().exp()),
        Func::Ln => {
            let d = v[0].as_double();
            if d <= 0.0 {
                return Err("cannot take logarithm of a non-positive number".into());
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
                let mut acc = v[0].as_int()?;
                for x in &v[1..] {
                    let x = x.as_int()?;
                    acc = if greatest { acc.max(x) } else { acc.min(x) };
                }
                Value::Int(acc)
            }
        }
        Func::Random => Value::Int(uniform(rng, v[0].as_int()?, v[1].as_int()?)?),
        Func::RandomExponential => {
            Value::Int(exponential(rng, v[0].as_int()?, v[1].as_int()?, v[2].as_double())?)
        }
        Func::RandomGaussian => Value::Int(gaussian(rng, v[0].as_int()?, v[1].as_int()?, v[2].as_double())?),
        Func::RandomZipfian => Value::Int(zipfian(rng, v[0].as_int()?, v[1].as_int()?, v[2].as_double())?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(s: &str) -> Result<Value, String> {
        let mut vars = HashMap::new();
        vars.insert("scale".to_string(), Value::Int(10));
        vars.insert("x".to_string(), Value::Double(1.5));
        eval(&parse(s)?, &vars, &mut client_rng(1, 0))
    }

    #[test]
    fn arithmetic_and_precedence() {
        assert_eq!(ev("100000 * :scale").unwrap(), Value::Int(1_000_000));
        assert_eq!(ev("1 + 2 * 3").unwrap(), Value::Int(7));
        assert_eq!(ev("(1 + 2) * 3").unwrap(), Value::Int(9));
        assert_eq!(ev("-7 / 2").unwrap(), Value::Int(-3));
        assert_eq!(ev("-7 % 3").unwrap(), Value::Int(-1));
        assert_eq!(ev(":x * 2").unwrap(), Value::Double(3.0));
        assert_eq!(ev("1 < 2 and 3 >= 3").unwrap(), Value::Bool(true));
        assert_eq!(ev("not 1 = 2").unwrap(), Value::Bool(true));
        assert_eq!(ev("5 & 3 | 8").unwrap(), Value::Int(9));
        assert_eq!(ev("1 << 4").unwrap(), Value::Int(16));
        assert_eq!(ev("greatest(1, 7, 3) + least(4, 2)").unwrap(), Value::Int(9));
        assert_eq!(ev("abs(-4) + mod(10, 3)").unwrap(), Value::Int(5));
        assert_eq!(ev("int(2.9)").unwrap(), Value::Int(2));
    }

    #[test]
    fn errors_are_reported() {
        assert!(ev("1 / 0").unwrap_err().contains("division by zero"));
        assert!(ev("9223372036854775807 + 1").unwrap_err().contains("out of range"));
        assert!(ev(":nope").unwrap_err().contains("undefined variable"));
        assert!(parse("frobnicate(1)").unwrap_err().contains("unexpected function name"));
        assert!(parse("random(1)").unwrap_err().contains("wrong number of arguments"));
        assert!(parse("1 +").is_err());
        assert!(parse("1 < 2 < 3").is_err());
        assert!(ev("random(5, 1)").unwrap_err().contains("empty range"));
        assert!(ev("random_gaussian(1, 10, 1.0)").unwrap_err().contains("at least"));
        assert!(ev("random_zipfian(1, 10, 0.5)").unwrap_err().contains("zipfian parameter"));
        assert!(ev("random_exponential(1, 10, 0)").unwrap_err().contains("greater than zero"));
    }

    /// Issue 19 item 7: a multi-byte character right after a one-byte token used to be sliced
    /// through its middle (a panic); it is an error quoting the character as written.
    #[test]
    fn non_ascii_text_is_an_error_not_a_panic() {
        for text in ["(é", "<é", "1 é", "é", ":x<€", "1 +\u{1F600}"] {
            let e = parse(text).unwrap_err();
            assert!(e.contains("unexpected character"), "{text}: {e}");
            assert!(!e.contains('Ã'), "{text}: mojibake in {e}");
        }
        assert_eq!(parse("(é").unwrap_err(), "unexpected character 'é'");
        assert_eq!(parse("1 <\n").unwrap_err(), "unexpected end of expression");
        assert!(parse("1 \u{7}").unwrap_err().contains("'\\u{7}'"), "control characters are escaped");
    }

    /// Issue 19 item 12: numbers are read as pgbench reads them: `-9223372036854775808` is
    /// `i64::MIN` (2^63 is legal only after a unary minus), and doubles that overflow or
    /// underflow `strtod` are refused.
    #[test]
    fn number_limits_follow_pgbench() {
        assert_eq!(ev("-9223372036854775808").unwrap(), Value::Int(i64::MIN));
        assert_eq!(ev("1 + -9223372036854775808").unwrap(), Value::Int(i64::MIN + 1));
        assert!(parse("9223372036854775808").unwrap_err().contains("bigint out of range"));
        assert!(parse("-9223372036854775809").unwrap_err().contains("bigint out of range"));
        assert!(ev("- -9223372036854775808").unwrap_err().contains("out of range"));
        for bad in ["1e309", "1e-400", "1e-310", "-1.5e400"] {
            assert!(parse(bad).unwrap_err().contains("double constant out of range"), "{bad}");
        }
        assert_eq!(ev("1e308").unwrap(), Value::Double(1e308));
        assert_eq!(ev("0e999").unwrap(), Value::Double(0.0));
        assert_eq!(ev("2.2250738585072014e-308").unwrap(), Value::Double(f64::MIN_POSITIVE));
    }

    #[test]
    fn deep_and_long_expressions_are_refused_not_a_stack_overflow() {
        let nested = |n: usize| format!("{}1{}", "(".repeat(n), ")".repeat(n));
        let sum = |n: usize| vec!["1"; n].join(" + ");
        let negs = |n: usize| format!("{}1", "-".repeat(n));
        let nots = |n: usize| format!("{}true", "not ".repeat(n));
        let calls = |n: usize| format!("{}1{}", "abs(".repeat(n), ")".repeat(n));
        for deep in
            [nested(20_000), sum(20_000), negs(20_000), nots(20_000), calls(5_000), sum(MAX_EXPR_DEPTH + 1)]
        {
            let e = parse(&deep).unwrap_err();
            assert!(e.contains("too deeply nested"), "{e}");
        }
        assert!(parse(&"1".repeat(MAX_EXPR_LEN + 1)).unwrap_err().contains("too long"));
        // The deepest accepted trees evaluate (and fold, resolve and drop) on a test
        // thread's stack.
        assert_eq!(ev(&sum(MAX_EXPR_DEPTH)).unwrap(), Value::Int(MAX_EXPR_DEPTH as i64));
        assert_eq!(ev(&nested(MAX_EXPR_DEPTH - 1)).unwrap(), Value::Int(1));
        assert_eq!(ev(&negs(MAX_EXPR_DEPTH - 2)).unwrap(), Value::Int(1));
        assert_eq!(ev(&calls(MAX_EXPR_DEPTH - 1)).unwrap(), Value::Int(1));
        let deep_var = vec![":scale"; MAX_EXPR_DEPTH].join(" + ");
        let e = parse(&deep_var).unwrap();
        let folded = e.resolve(&mut |n| Expr::Var(n.into())).fold_constants();
        let mut vars = HashMap::new();
        vars.insert("scale".to_string(), Value::Int(1));
        assert_eq!(eval(&folded, &vars, &mut client_rng(1, 0)).unwrap(), Value::Int(MAX_EXPR_DEPTH as i64));
    }

    #[test]
    fn random_functions_stay_in_range_and_have_their_shape() {
        let mut rng = client_rng(7, 3);
        let vars: HashMap<String, Value> = HashMap::new();
        let n = 20_000;
        let mut counts = [[0u32; 10]; 4];
        for (k, f) in [
            "random(1, 10)",
            "random_exponential(1, 10, 2.0)",
            "random_gaussian(1, 10, 2.5)",
            "random_zipfian(1, 10, 1.5)",
        ]
        .iter()
        .enumerate()
        {
            let e = parse(f).unwrap();
            for _ in 0..n {
                let v = eval(&e, &vars, &mut rng).unwrap().as_int().unwrap();
                assert!((1..=10).contains(&v), "{f} gave {v}");
                counts[k][(v - 1) as usize] += 1;
            }
        }
        // Uniform: every value near n/10.
        assert!(counts[0].iter().all(|&c| c > 1600 && c < 2400), "{:?}", counts[0]);
        // Exponential and zipfian: decreasing from the low end.
        assert!(counts[1][0] > counts[1][5] && counts[1][5] > 0);
        assert!(counts[3][0] > 2 * counts[3][1] / 2 && counts[3][0] > counts[3][9] * 5);
        // Gaussian: the middle beats the edges.
        assert!(counts[2][4] + counts[2][5] > 3 * (counts[2][0] + counts[2][9]));
    }

    #[test]
    fn constant_folding_keeps_values_and_errors() {
        let mut rng = client_rng(1, 0);
        let vars: HashMap<String, Value> = HashMap::new();
        let scale10 = |e: &str| {
            parse(e).unwrap().resolve(&mut |n| {
                if n == "scale" { Expr::Const(Value::Int(10)) } else { Expr::Var(n.into()) }
            })
        };
        let e = scale10("random(1, 100000 * :scale)").fold_constants();
        assert_eq!(
            e,
            Expr::Call(Func::Random, vec![Expr::Const(Value::Int(1)), Expr::Const(Value::Int(1_000_000))])
        );
        for text in
            ["1 + 2 * -3", "-(2.5 * 2)", "not (1 < 2) or 3 = 3", "~5 & 7", "10 % 4 / 2", "(:scale + 1) * 2"]
        {
            let plain = eval(&scale10(text), &vars, &mut rng).unwrap();
            let folded = scale10(text).fold_constants();
            assert!(matches!(folded, Expr::Const(_)), "{text}: {folded:?}");
            assert_eq!(eval(&folded, &vars, &mut rng).unwrap(), plain, "{text}");
        }
        // Errors stay for run time; variables and calls stay.
        for text in ["9223372036854775807 + 1", "1 / 0", ":x + 1", "abs(-1)"] {
            assert!(!matches!(parse(text).unwrap().fold_constants(), Expr::Const(_)), "{text}");
        }
        assert!(eval(&parse("9223372036854775807 + 1").unwrap().fold_constants(), &vars, &mut rng).is_err());
    }
}
