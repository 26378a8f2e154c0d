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

/// The permutations of a spec, one at a time ([`TestSpec::permutations`]).
#[derive(Debug, Clone)]
pub struct Permutations<'a> {
    spec: &'a TestSpec,
    state: PermState,
}

#[derive(Debug, Clone)]
enum PermState {
    /// The index of the next listed permutation.
    Listed(usize),
    /// The next interleaving, as the session of each position (ascending at the start), or
    /// `done` after the last one (the sequence in descending order).
    Generated { seq: Vec<usize>, done: bool },
}

impl Iterator for Permutations<'_> {
    type Item = Vec<PermutationStep>;

    fn next(&mut self) -> Option<Vec<PermutationStep>> {
        match &mut self.state {
            PermState::Listed(i) => {
                let p = self.spec.permutations.get(*i)?;
                *i += 1;
                Some(p.1.clone())
            }
            PermState::Generated { seq, done } => {
                if *done {
                    return None;
                }
                // Position by position, the next step of that position's session.
                let mut taken = vec![0usize; self.spec.sessions.len()];
                let perm = seq
                    .iter()
                    .map(|&s| {
                        let step = &self.spec.sessions[s].steps[taken[s]];
                        taken[s] += 1;
                        PermutationStep { name: step.name.clone(), blockers: Vec::new() }
                    })
                    .collect();
                // The tester's depth-first search tries the lowest session first at each
                // position, so it visits the sequences in lexicographic order: the next one
                // is the next lexicographic permutation of the multiset.
                *done = !next_lexicographic(seq);
                Some(perm)
            }
        }
    }
}

/// Rearranges `seq` into its next lexicographic permutation (equal elements not told apart);
/// returns false, leaving it as it was, when it is already the last (non-increasing).
fn next_lexicographic(seq: &mut [usize]) -> bool {
    let Some(i) = (1..seq.len()).rev().find(|&i| seq[i - 1] < seq[i]) else {
        return false;
    };
    let pivot = i - 1;
    let j = (i..seq.len()).rev().find(|&j| seq[j] > seq[pivot]).expect("seq[i] is larger than the pivot");
    seq.swap(pivot, j);
    seq[i..].reverse();
    true
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
    /// Every permutation to run, one at a time: the listed ones, or else every interleaving of
    /// the sessions' steps in the order PostgreSQL's `run_all_permutations`
    /// (`src/test/isolation/isolationtester.c`) generates them. The interleavings are made as
    /// they are taken, so a spec of many sessions and steps is run in constant memory, as the
    /// tester runs it: only the current permutation is held.
    pub fn permutations(&self) -> Permutations<'_> {
        let state = if self.permutations.is_empty() {
            // The first interleaving runs every step of session 0, then of session 1, ...
            let seq =
                self.sessions.iter().enumerate().flat_map(|(i, s)| std::iter::repeat_n(i, s.steps.len()));
            PermState::Generated { seq: seq.collect(), done: false }
        } else {
            PermState::Listed(0)
        };
        Permutations { spec: self, state }
    }

    /// How many permutations [`TestSpec::permutations`] yields: the listed ones, or the number
    /// of interleavings, the multinomial coefficient (n1 + n2 + ...)! / (n1! n2! ...) of the
    /// sessions' step counts. `None` when that does not fit in a `u128` (more than about
    /// 3.4e38: 14 sessions of 10 steps have 1.3e153 interleavings).
    pub fn permutation_count(&self) -> Option<u128> {
        if !self.permutations.is_empty() {
            return Some(self.permutations.len() as u128);
        }
        // The product of C(n1 + .. + nk, nk) over k. Each binomial is built as C(m, i) for
        // i = 1..=k, where C(m - k + i, i) = C(m - k + i - 1, i - 1) * (m - k + i) / i; dividing
        // by the gcd first keeps every partial value exact, and no partial value (of a
        // binomial or of the product) exceeds the final one, so an overflow means the count
        // itself does not fit.
        fn gcd(mut a: u128, mut b: u128) -> u128 {
            while b != 0 {
                (a, b) = (b, a % b);
            }
            a
        }
        let mut total: u128 = 1;
        let mut m: u128 = 0;
        for sess in &self.sessions {
            let k = sess.steps.len() as u128;
            m += k;
            let mut c: u128 = 1;
            for i in 1..=k {
                let top = m - k + i;
                let g = gcd(c, i);
                let (c_g, i_g) = (c / g, i / g);
                // i_g divides top, as C(top, i) is whole and gcd(c_g, i_g) = 1.
                c = c_g.checked_mul(top / i_g)?;
            }
            total = total.checked_mul(c)?;
        }
        Some(total)
    }

    /// (session index, step) of the step called `name`.    /// (session index, step) of the step called `name`.
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

    /// The interleavings in the order of the tester's depth-first search, made here by the
    /// reference recursion the iterator replaced.
    fn reference_order(spec: &TestSpec) -> Vec<String> {
        fn rec(spec: &TestSpec, piles: &mut [usize], cur: &mut Vec<String>, out: &mut Vec<String>) {
            let mut found = false;
            for i in 0..spec.sessions.len() {
                if piles[i] < spec.sessions[i].steps.len() {
                    cur.push(spec.sessions[i].steps[piles[i]].name.clone());
                    piles[i] += 1;
                    rec(spec, piles, cur, out);
                    piles[i] -= 1;
                    cur.pop();
                    found = true;
                }
            }
            if !found {
                out.push(cur.join(" "));
            }
        }
        let mut out = Vec::new();
        rec(spec, &mut vec![0; spec.sessions.len()], &mut Vec::new(), &mut out);
        out
    }

    fn names(spec: &TestSpec) -> Vec<String> {
        spec.permutations().map(|p| p.iter().map(|x| x.name.as_str()).collect::<Vec<_>>().join(" ")).collect()
    }

    #[test]
    fn all_permutations_interleave_sessions() {
        let s = parse_spec("t", "session a step a1 {x} step a2 {x} session b step b1 {x}").unwrap();
        assert_eq!(names(&s), ["a1 a2 b1", "a1 b1 a2", "b1 a1 a2"]);
        assert_eq!(s.permutation_count(), Some(3));
        // Three sessions of 3, 1 and 2 steps: 6! / (3! 1! 2!) = 60, in the tester's order.
        let s = parse_spec(
            "t",
            "session a step a1 {x} step a2 {x} step a3 {x} session b step b1 {x} \
             session c step c1 {x} step c2 {x}",
        )
        .unwrap();
        let got = names(&s);
        assert_eq!(got.len(), 60);
        assert_eq!(s.permutation_count(), Some(60));
        assert_eq!(got, reference_order(&s));
        // Listed permutations are run as listed.
        let s = parse_spec("t", "session a step a1 {x} session b step b1 {x} permutation b1 a1").unwrap();
        assert_eq!(names(&s), ["b1 a1"]);
        assert_eq!(s.permutation_count(), Some(1));
    }

    /// A spec of n sessions of k steps each, without permutation lines.
    fn grid(n: usize, k: usize) -> TestSpec {
        let mut text = String::new();
        for i in 0..n {
            text.push_str(&format!("session s{i}\n"));
            for j in 0..k {
                text.push_str(&format!("step s{i}_{j} {{ }}\n"));
            }
        }
        parse_spec("grid.spec", &text).unwrap()
    }

    #[test]
    fn permutation_counts_are_exact_or_none() {
        // 21! / (7!)^3 = 399072960.
        assert_eq!(grid(3, 7).permutation_count(), Some(399_072_960));
        // 40! / (20!)^2 = C(40, 20).
        assert_eq!(grid(2, 20).permutation_count(), Some(137_846_528_820));
        // C(130, 65) = 9.5e37 fits in a u128 (whose partial products in a naive evaluation
        // would not); C(132, 66) = 3.8e38 does not.
        assert_eq!(grid(2, 65).permutation_count(), Some(95_067_625_827_960_698_145_584_333_020_095_113_100));
        assert_eq!(grid(2, 66).permutation_count(), None);
        assert_eq!(grid(14, 10).permutation_count(), None);
        assert_eq!(grid(1, 50).permutation_count(), Some(1));
    }

    #[test]
    fn permutations_are_made_as_they_are_taken() {
        // 399 million interleavings: taking the first few costs what one does (the former
        // implementation built them all first and ran out of memory).
        let s = grid(3, 7);
        let mut it = s.permutations();
        let first = it.next().unwrap();
        assert_eq!(first.len(), 21);
        assert_eq!(first[0].name, "s0_0");
        assert_eq!(first[20].name, "s2_6");
        let fourth = it.nth(2).unwrap();
        let fourth: Vec<&str> = fourth.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(fourth[12..17], ["s1_5", "s2_0", "s2_1", "s2_2", "s1_6"]);
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
