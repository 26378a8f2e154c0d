//! The isolation-spec language of PostgreSQL 14+'s isolation tester (`specscanner.l`,
//! `specparse.y` in `src/test/isolation/`): global setup blocks and an optional teardown, then
//! sessions with an optional setup, named steps and an optional teardown, then optional
//! permutation lines whose steps may carry blocker annotations `(*)` and `(other_step)`.

use std::fmt;

/// A parse error: file, line and what was wrong, as one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    /// The file name (or label) the spec came from.
    pub file: String,
    /// 1-based line number.
    pub line: usize,
    /// What was wrong.
    pub message: String,
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.file, self.line, self.message)
    }
}

impl std::error::Error for SpecError {}

/// A block of SQL and where it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqlBlock {
    /// The text between the braces, without the blanks right after `{` and right before `}`
    /// (newlines are kept, as PostgreSQL's scanner keeps them).
    pub sql: String,
    /// Line of the opening brace.
    pub line: usize,
}

/// One step: a name unique in the spec and its SQL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// Step name.
    pub name: String,
    /// Its SQL.
    pub sql: SqlBlock,
}

/// One session (one connection, one backend).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// Session name.
    pub name: String,
    /// SQL run on the session's connection before each permutation.
    pub setup: Option<SqlBlock>,
    /// The steps, in spec order.
    pub steps: Vec<Step>,
    /// SQL run on the session's connection after each permutation.
    pub teardown: Option<SqlBlock>,
}

/// A blocker annotation of a permutation step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Blocker {
    /// `(*)`: report the step as waiting when it is launched, whatever happens.
    Once,
    /// `(name)`: do not report completion while step `name` (another session's) is running.
    OtherStep(String),
}

/// A step of a permutation line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermutationStep {
    /// The step's name.
    pub name: String,
    /// Its blocker annotations.
    pub blockers: Vec<Blocker>,
}

/// A whole spec file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestSpec {
    /// File name or label (for messages).
    pub file: String,
    /// Global setup blocks, run in order on the control connection.
    pub setup: Vec<SqlBlock>,
    /// Global teardown.
    pub teardown: Option<SqlBlock>,
    /// Sessions in spec order.
    pub sessions: Vec<Session>,
    /// Permutations listed in the spec (empty: run all).
    pub permutations: Vec<(usize, Vec<PermutationStep>)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Kw(&'static str),
    Ident(String),
    Sql(String),
    Int(u32),
    Punct(char),
}

fn lex(file: &str, text: &str) -> Result<Vec<(Tok, usize)>, SpecError> {
    let err = |line: usize, message: String| SpecError { file: file.to_string(), line, message };
    let b: Vec<char> = text.chars().collect();
    let mut i = 0;
    let mut line = 1;
    let mut out = Vec::new();
    while i < b.len() {
        let c = b[i];
        match c {
            '\n' => {
                line += 1;
                i += 1;
            }
            ' ' | '\t' | '\r' | '\x0c' => i += 1,
            '#' => {
                while i < b.len() && b[i] != '\n' && b[i] != '\r' {
                    i += 1;
                }
            }
            '"' => {
                let start = line;
                let mut s = String::new();
                i += 1;
                loop {
                    match b.get(i) {
                        None => return Err(err(start, "unterminated quoted identifier".into())),
                        Some('\n') => {
                            return Err(err(line, "unexpected newline in quoted identifier".into()));
                        }
                        Some('"') if b.get(i + 1) == Some(&'"') => {
                            s.push('"');
                            i += 2;
                        }
                        Some('"') => {
                            i += 1;
                            break;
                        }
                        Some(&ch) => {
                            s.push(ch);
                            i += 1;
                        }
                    }
                }
                out.push((Tok::Ident(s), start));
            }
            '{' => {
                let start = line;
                i += 1;
                while i < b.len() && matches!(b[i], ' ' | '\t' | '\r' | '\x0c') {
                    i += 1;
                }
                let mut s = String::new();
                loop {
                    match b.get(i) {
                        None => return Err(err(start, "unterminated sql block".into())),
                        Some('}') => {
                            i += 1;
                            break;
                        }
                        Some(&ch) => {
                            if ch == '\n' {
                                line += 1;
                            }
                            s.push(ch);
                            i += 1;
                        }
                    }
                }
                while s.ends_with([' ', '\t', '\r', '\x0c']) {
                    s.pop();
                }
                out.push((Tok::Sql(s), start));
            }
            '(' | ')' | ',' | '*' => {
                out.push((Tok::Punct(c), line));
                i += 1;
            }
            c if c.is_ascii_digit() => {
                let mut n: u64 = 0;
                while i < b.len() && b[i].is_ascii_digit() {
                    n = (n * 10 + u64::from(b[i] as u32 - '0' as u32)).min(u64::from(u32::MAX));
                    i += 1;
                }
                out.push((Tok::Int(n as u32), line));
            }
            c if c.is_ascii_alphabetic() || c == '_' => {
                let mut s = String::new();
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == '_') {
                    s.push(b[i]);
                    i += 1;
                }
                let kw = ["permutation", "session", "setup", "step", "teardown", "notices"]
                    .into_iter()
                    .find(|k| *k == s);
                out.push((kw.map(Tok::Kw).unwrap_or(Tok::Ident(s)), line));
            }
            other => return Err(err(line, format!("syntax error: unexpected character \"{other}\""))),
        }
    }
    Ok(out)
}

struct Parser<'a> {
    file: &'a str,
    toks: Vec<(Tok, usize)>,
    pos: usize,
}

impl Parser<'_> {
    fn line(&self) -> usize {
        self.toks.get(self.pos).or(self.toks.last()).map(|t| t.1).unwrap_or(1)
    }
    fn err(&self, message: impl Into<String>) -> SpecError {
        SpecError { file: self.file.to_string(), line: self.line(), message: message.into() }
    }
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|t| &t.0)
    }
    fn is_kw(&self, k: &str) -> bool {
        matches!(self.peek(), Some(Tok::Kw(x)) if *x == k)
    }
    fn sql(&mut self, what: &str) -> Result<SqlBlock, SpecError> {
        match self.toks.get(self.pos).cloned() {
            Some((Tok::Sql(sql), line)) => {
                self.pos += 1;
                Ok(SqlBlock { sql, line })
            }
            _ => Err(self.err(format!("syntax error: expected a {{ sql block }} after {what}"))),
        }
    }
    fn ident(&mut self, what: &str) -> Result<String, SpecError> {
        match self.peek().cloned() {
            Some(Tok::Ident(s)) => {
                self.pos += 1;
                Ok(s)
            }
            _ => Err(self.err(format!("syntax error: expected {what}"))),
        }
    }
}

/// Parses a spec; `file` labels error messages.
///
/// # Errors
/// Syntax errors, duplicate session or step names, permutations naming unknown steps, and
/// blockers that name a step of the same session, each as `file:line: message`.
pub fn parse_spec(file: &str, text: &str) -> Result<TestSpec, SpecError> {
    let mut p = Parser { file, toks: lex(file, text)?, pos: 0 };
    let mut spec = TestSpec {
        file: file.to_string(),
        setup: Vec::new(),
        teardown: None,
        sessions: Vec::new(),
        permutations: Vec::new(),
    };
    while p.is_kw("setup") {
        p.pos += 1;
        spec.setup.push(p.sql("setup")?);
    }
    if p.is_kw("teardown") {
        p.pos += 1;
        spec.teardown = Some(p.sql("teardown")?);
    }
    while p.is_kw("session") {
        p.pos += 1;
        let line = p.line();
        let name = p.ident("a session name")?;
        if spec.sessions.iter().any(|s| s.name == name) {
            return Err(SpecError {
                file: file.into(),
                line,
                message: format!("duplicate session name \"{name}\""),
            });
        }
        let mut sess = Session { name, setup: None, steps: Vec::new(), teardown: None };
        if p.is_kw("setup") {
            p.pos += 1;
            sess.setup = Some(p.sql("setup")?);
        }
        while p.is_kw("step") {
            p.pos += 1;
            let line = p.line();
            let name = p.ident("a step name")?;
            let dup = spec.sessions.iter().flat_map(|s| &s.steps).chain(&sess.steps).any(|s| s.name == name);
            if dup {
                return Err(SpecError {
                    file: file.into(),
                    line,
                    message: format!("duplicate step name \"{name}\""),
                });
            }
            let sql = p.sql("step")?;
            sess.steps.push(Step { name, sql });
        }
        if sess.steps.is_empty() {
            return Err(p.err(format!("syntax error: session \"{}\" has no steps", sess.name)));
        }
        if p.is_kw("teardown") {
            p.pos += 1;
            sess.teardown = Some(p.sql("teardown")?);
        }
        spec.sessions.push(sess);
    }
    if spec.sessions.is_empty() {
        return Err(p.err("syntax error: a spec needs at least one session"));
    }
    let step_session =
        |name: &str| spec.sessions.iter().position(|s| s.steps.iter().any(|st| st.name == name));
    let mut perms = Vec::new();
    while p.is_kw("permutation") {
        let pline = p.line();
        p.pos += 1;
        let mut steps = Vec::new();
        while let Some(Tok::Ident(_)) = p.peek() {
            let line = p.line();
            let name = p.ident("a step name")?;
            let Some(own) = step_session(&name) else {
                return Err(SpecError {
                    file: file.into(),
                    line,
                    message: format!("undefined step \"{name}\" specified in permutation"),
                });
            };
            let mut blockers = Vec::new();
            if p.peek() == Some(&Tok::Punct('(')) {
                p.pos += 1;
                loop {
                    match p.peek().cloned() {
                        Some(Tok::Punct('*')) => {
                            p.pos += 1;
                            blockers.push(Blocker::Once);
                        }
                        Some(Tok::Ident(b)) => {
                            p.pos += 1;
                            if p.is_kw("notices") {
                                return Err(p.err("notices blocker conditions are not supported"));
                            }
                            match step_session(&b) {
                                None => {
                                    return Err(p.err(format!("undefined blocking step \"{b}\" referenced in permutation step \"{name}\"")));
                                }
                                Some(s) if s == own => {
                                    return Err(p.err(format!(
                                        "permutation step \"{name}\" cannot block on its own session"
                                    )));
                                }
                                Some(_) => blockers.push(Blocker::OtherStep(b)),
                            }
                        }
                        _ => return Err(p.err("syntax error in blocker list")),
                    }
                    match p.peek() {
                        Some(Tok::Punct(',')) => p.pos += 1,
                        Some(Tok::Punct(')')) => {
                            p.pos += 1;
                            break;
                        }
                        _ => return Err(p.err("syntax error: expected , or ) in blocker list")),
                    }
                }
            }
            steps.push(PermutationStep { name, blockers });
        }
        if steps.is_empty() {
            return Err(SpecError {
                file: file.into(),
                line: pline,
                message: "syntax error: empty permutation".into(),
            });
        }
        perms.push((pline, steps));
    }
    if p.pos < p.toks.len() {
        return Err(p.err("syntax error: unexpected input"));
    }
    spec.permutations = perms;
    Ok(spec)
}

impl TestSpec {
    /// Every permutation to run: the listed ones, or all interleavings of the sessions' steps
    /// (in the order PostgreSQL's `run_all_permutations` generates them).
    pub fn all_permutations(&self) -> Vec<Vec<PermutationStep>> {
        if !self.permutations.is_empty() {
            return self.permutations.iter().map(|(_, p)| p.clone()).collect();
        }
        let total: usize = self.sessions.iter().map(|s| s.steps.len()).sum();
        let mut piles = vec![0usize; self.sessions.len()];
        let mut cur = Vec::with_capacity(total);
        let mut out = Vec::new();
        fn rec(
            spec: &TestSpec,
            piles: &mut [usize],
            cur: &mut Vec<PermutationStep>,
            out: &mut Vec<Vec<PermutationStep>>,
        ) {
            let mut found = false;
            for i in 0..spec.sessions.len() {
                if piles[i] < spec.sessions[i].steps.len() {
                    cur.push(PermutationStep {
                        name: spec.sessions[i].steps[piles[i]].name.clone(),
                        blockers: Vec::new(),
                    });
                    piles[i] += 1;
                    rec(spec, piles, cur, out);
                    piles[i] -= 1;
                    cur.pop();
                    found = true;
                }
            }
            if !found {
                out.push(cur.clone());
            }
        }
        rec(self, &mut piles, &mut cur, &mut out);
        out
    }

    /// (session index, step) of the step called `name`.
    pub fn step(&self, name: &str) -> Option<(usize, &Step)> {
        self.sessions
            .iter()
            .enumerate()
            .find_map(|(i, s)| s.steps.iter().find(|st| st.name == name).map(|st| (i, st)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_blocks_sessions_and_blockers() {
        let text = "# comment\nsetup { CREATE TABLE t (); }\nsetup\n{\n  SELECT 1;\n}\nteardown { DROP TABLE t; }\n\
                    session s1\nsetup { BEGIN; }\nstep a { LOCK t; }\nstep \"b c\" { COMMIT; }\n\
                    session \"s2\"\nstep x { LOCK t; }\nteardown { }\n\
                    permutation a x(*) \"b c\"(x)\npermutation x a \"b c\"\n";
        let s = parse_spec("t.spec", text).unwrap();
        assert_eq!(s.setup.len(), 2);
        assert_eq!(s.setup[1].sql, "\n  SELECT 1;\n");
        assert_eq!(s.setup[0].sql, "CREATE TABLE t ();");
        assert_eq!(s.sessions[0].steps[1].name, "b c");
        assert_eq!(s.sessions[1].teardown.as_ref().unwrap().sql, "");
        assert_eq!(s.permutations[0].1[1].blockers, vec![Blocker::Once]);
        assert_eq!(s.permutations[0].1[2].blockers, vec![Blocker::OtherStep("x".into())]);
        assert_eq!(s.permutations[0].0, 15);
    }

    #[test]
    fn all_permutations_interleave_sessions() {
        let s = parse_spec("t", "session a step a1 {x} step a2 {x} session b step b1 {x}").unwrap();
        let names: Vec<String> = s
            .all_permutations()
            .iter()
            .map(|p| p.iter().map(|x| x.name.as_str()).collect::<Vec<_>>().join(" "))
            .collect();
        assert_eq!(names, ["a1 a2 b1", "a1 b1 a2", "b1 a1 a2"]);
    }

    #[test]
    fn errors_name_file_and_line() {
        let e = parse_spec("x.spec", "session s\nstep a { }\npermutation a\n  b\n").unwrap_err();
        assert_eq!(e.to_string(), "x.spec:4: undefined step \"b\" specified in permutation");
        let e = parse_spec("x.spec", "session s\nstep a { \n").unwrap_err();
        assert_eq!(e.to_string(), "x.spec:2: unterminated sql block");
        let e = parse_spec("x.spec", "session s step a {} step a {}").unwrap_err();
        assert!(e.message.contains("duplicate step"));
        let e = parse_spec("x.spec", "session s step a {} step b {} permutation a(b)").unwrap_err();
        assert!(e.message.contains("cannot block on its own session"), "{e}");
    }
}
