//! The isolation runner's SQL lexer: tokens (words folded to lower case, quoted names and
//! strings, numbers, punctuation), the split of a step into statements at top-level
//! semicolons, and the token cursor the parser (`sql.rs`) reads. Touches no lock.

use crate::isolation::SqlError;

#[derive(Debug, Clone, PartialEq)]
pub(super) enum T {
    Word(String),
    Quoted(String),
    Str(String),
    Num(String),
    P(char),
}

pub(super) fn tokens(sql: &str) -> Result<Vec<T>, SqlError> {
    let c: Vec<char> = sql.chars().collect();
    let mut i = 0;
    let mut out = Vec::new();
    while i < c.len() {
        let ch = c[i];
        if ch.is_whitespace() {
            i += 1;
        } else if ch == '-' && c.get(i + 1) == Some(&'-') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch.is_ascii_alphabetic() || ch == '_' {
            let s: String =
                c[i..].iter().take_while(|x| x.is_ascii_alphanumeric() || **x == '_' || **x == '$').collect();
            i += s.chars().count();
            out.push(T::Word(s.to_ascii_lowercase()));
        } else if ch.is_ascii_digit() {
            let s: String = c[i..].iter().take_while(|x| x.is_ascii_digit()).collect();
            i += s.len();
            out.push(T::Num(s));
        } else if ch == '\'' || ch == '"' {
            let mut s = String::new();
            i += 1;
            loop {
                match c.get(i) {
                    None => return Err(SqlError::UnterminatedQuote(ch)),
                    Some(&q) if q == ch && c.get(i + 1) == Some(&ch) => {
                        s.push(ch);
                        i += 2;
                    }
                    Some(&q) if q == ch => {
                        i += 1;
                        break;
                    }
                    Some(&x) => {
                        s.push(x);
                        i += 1;
                    }
                }
            }
            out.push(if ch == '\'' { T::Str(s) } else { T::Quoted(s) });
        } else if "(),;=-:*+".contains(ch) {
            out.push(T::P(ch));
            i += 1;
        } else if (ch == '<' && c.get(i + 1) == Some(&'>')) || (ch == '!' && c.get(i + 1) == Some(&'=')) {
            // Both spellings of "not equal".
            out.push(T::P('!'));
            i += 2;
        } else {
            return Err(SqlError::UnexpectedCharacter(ch));
        }
    }
    Ok(out)
}

/// Splits a step's SQL into statements at top-level semicolons (outside quotes and comments);
/// empty statements are dropped.
pub fn split_statements(sql: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut chars = sql.chars().peekable();
    while let Some(ch) = chars.next() {
        match quote {
            Some(q) => {
                cur.push(ch);
                if ch == q {
                    quote = None;
                }
            }
            None => match ch {
                '\'' | '"' => {
                    quote = Some(ch);
                    cur.push(ch);
                }
                '-' if chars.peek() == Some(&'-') => {
                    for x in chars.by_ref() {
                        if x == '\n' {
                            cur.push('\n');
                            break;
                        }
                    }
                }
                ';' => {
                    if !cur.trim().is_empty() {
                        out.push(cur.trim().to_string());
                    }
                    cur.clear();
                }
                _ => cur.push(ch),
            },
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

pub(super) struct P {
    pub(super) t: Vec<T>,
    pub(super) i: usize,
}

impl P {
    pub(super) fn word(&self) -> Option<&str> {
        match self.t.get(self.i) {
            Some(T::Word(w)) => Some(w),
            _ => None,
        }
    }
    pub(super) fn eat(&mut self, w: &str) -> bool {
        if self.word() == Some(w) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    pub(super) fn eat_p(&mut self, c: char) -> bool {
        if self.t.get(self.i) == Some(&T::P(c)) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    pub(super) fn done(&self) -> bool {
        self.i >= self.t.len()
    }
    pub(super) fn name(&mut self) -> Result<String, SqlError> {
        match self.t.get(self.i).cloned() {
            Some(T::Word(w)) => {
                self.i += 1;
                Ok(w)
            }
            Some(T::Quoted(q)) => {
                self.i += 1;
                Ok(q)
            }
            _ => Err(SqlError::Expected("a table name")),
        }
    }
    pub(super) fn names(&mut self) -> Result<Vec<String>, SqlError> {
        let mut v = vec![self.name()?];
        while self.eat_p(',') {
            v.push(self.name()?);
        }
        Ok(v)
    }
    pub(super) fn int(&mut self) -> Result<i64, SqlError> {
        let neg = self.eat_p('-');
        match self.t.get(self.i).cloned() {
            Some(T::Num(n)) => {
                self.i += 1;
                // Parse with the sign so that i64::MIN (whose magnitude is no i64) is accepted.
                let text = if neg { format!("-{n}") } else { n.clone() };
                text.parse().map_err(|_| SqlError::IntegerOutOfRange(text))
            }
            _ => Err(SqlError::Expected("an integer argument")),
        }
    }
}
