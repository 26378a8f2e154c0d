//! The scanner and parser (`exprscan.l`, `exprparse.y` in `src/bin/pgbench`, PostgreSQL 15):
//! text to an [`Expr`], with bounds on its length and nesting depth.

use super::ast::*;
use super::error::ExprError;
use super::limits::{MAX_EXPR_DEPTH, MAX_EXPR_LEN};

#[derive(Clone, Debug, PartialEq)]
pub(super) enum Tok {
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
pub(super) fn parse_double(text: &str) -> Result<f64, ExprError> {
    let bad = || ExprError::DoubleConstantOutOfRange(text.to_string());
    let d: f64 = text.parse().map_err(|_| ExprError::InvalidNumber(text.to_string()))?;
    let mantissa = text.split(['e', 'E']).next().unwrap_or("");
    let nonzero = mantissa.bytes().any(|b| (b'1'..=b'9').contains(&b));
    if d.is_infinite() || (nonzero && !d.is_normal()) { Err(bad()) } else { Ok(d) }
}

pub(super) fn tokenize(s: &str) -> Result<Vec<Tok>, ExprError> {
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
                out.push(Tok::Int(
                    text.parse().map_err(|_| ExprError::BigintConstantOutOfRange(text.to_string()))?,
                ));
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
                return Err(ExprError::ExpectedVariableName);
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
            _ => return Err(ExprError::UnexpectedCharacter(c)),
        };
        out.push(tok);
        i += 1;
    }
    Ok(out)
}

pub(super) struct Parser {
    toks: Vec<Tok>,
    pos: usize,
    /// Parser recursion depth (nested parentheses, unary operators, calls).
    nesting: usize,
}

pub(super) fn binop_info(t: &Tok) -> Option<(BinOp, u8)> {
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
pub(super) type Parsed = (Expr, usize);

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
    fn enter(&mut self) -> Result<(), ExprError> {
        self.nesting += 1;
        if self.nesting > MAX_EXPR_DEPTH { Err(ExprError::TooDeep) } else { Ok(()) }
    }

    /// A node over children of depth `child`: fails when the tree gets too deep.
    fn node(e: Expr, child: usize) -> Result<Parsed, ExprError> {
        if child + 1 > MAX_EXPR_DEPTH { Err(ExprError::TooDeep) } else { Ok((e, child + 1)) }
    }

    fn expr(&mut self, min_prec: u8) -> Result<Parsed, ExprError> {
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
                return Err(ExprError::ChainedComparison);
            }
        }
        self.nesting -= 1;
        Ok((lhs, depth))
    }

    fn unary(&mut self) -> Result<Parsed, ExprError> {
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

    fn primary_or_not(&mut self) -> Result<Parsed, ExprError> {
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

    fn primary(&mut self) -> Result<Parsed, ExprError> {
        match self.next() {
            Some(Tok::Int(i)) => Ok((Expr::Const(Value::Int(i)), 1)),
            Some(Tok::Double(d)) => Ok((Expr::Const(Value::Double(d)), 1)),
            Some(Tok::Var(v)) => Ok((Expr::Var(v), 1)),
            Some(Tok::LParen) => {
                let e = self.expr(0)?;
                match self.next() {
                    Some(Tok::RParen) => Ok(e),
                    _ => Err(ExprError::ExpectedCloseParen),
                }
            }
            Some(Tok::Ident(name)) => self.ident(&name),
            Some(Tok::MaxIntPlusOne) => {
                Err(ExprError::BigintConstantOutOfRange("9223372036854775808".into()))
            }
            Some(t) => Err(ExprError::SyntaxError(format!("{t:?}"))),
            None => Err(ExprError::UnexpectedEnd),
        }
    }

    /// `true`, `false` or a function call: out of [`Parser::primary`], so that the frames of
    /// the parenthesis recursion stay small (unoptimised builds give every temporary its own
    /// stack slot).
    #[inline(never)]
    fn ident(&mut self, name: &str) -> Result<Parsed, ExprError> {
        if name.eq_ignore_ascii_case("true") {
            return Ok((Expr::Const(Value::Bool(true)), 1));
        }
        if name.eq_ignore_ascii_case("false") {
            return Ok((Expr::Const(Value::Bool(false)), 1));
        }
        let (f, min, max) = Func::lookup(name).ok_or_else(|| ExprError::UnknownFunction(name.to_string()))?;
        if self.next() != Some(Tok::LParen) {
            return Err(ExprError::ExpectedOpenParen(name.to_string()));
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
                    _ => return Err(ExprError::ExpectedCommaOrParen(name.to_string())),
                }
            }
        }
        if args.len() < min || max.is_some_and(|m| args.len() > m) {
            return Err(ExprError::WrongArgumentCount { count: args.len(), name: name.to_string() });
        }
        Self::node(Expr::Call(f, args), depth)
    }
}

/// Parses one expression.
///
/// # Errors
/// An [`ExprError`](super::ExprError) naming what was wrong (unknown function, bad token, wrong argument count, an
/// expression longer than [`MAX_EXPR_LEN`] bytes or deeper than [`MAX_EXPR_DEPTH`] levels).
pub fn parse(text: &str) -> Result<Expr, ExprError> {
    if text.len() > MAX_EXPR_LEN {
        return Err(ExprError::TooLong(text.len()));
    }
    let toks = tokenize(text)?;
    if toks.is_empty() {
        return Err(ExprError::MissingExpression);
    }
    let mut p = Parser { toks, pos: 0, nesting: 0 };
    let (e, _) = p.expr(0)?;
    if p.pos != p.toks.len() {
        return Err(ExprError::TrailingToken(format!("{:?}", p.toks[p.pos])));
    }
    Ok(e)
}
