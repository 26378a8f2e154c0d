use super::*;
use std::collections::HashMap;

/// [`super::parse`] with the error as its message, which these tests compare.
fn parse(s: &str) -> Result<Expr, String> {
    super::parse(s).map_err(String::from)
}

fn ev(s: &str) -> Result<Value, String> {
    let mut vars = HashMap::new();
    vars.insert("scale".to_string(), Value::Int(10));
    vars.insert("x".to_string(), Value::Double(1.5));
    Ok(eval(&parse(s)?, &vars, &mut client_rng(1, 0))?)
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

/// A multi-byte character right after a one-byte token used to be sliced
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

/// Numbers are read as pgbench reads them: `-9223372036854775808` is
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
            let v = eval(&e, &vars, &mut rng).unwrap().to_int().unwrap();
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

#[test]
fn typed_errors_display_the_messages_pgbench_prints() {
    let p = 1.0;
    assert_eq!(
        ExprError::GaussianParameter(p).to_string(),
        format!("gaussian parameter must be at least {MIN_GAUSSIAN_PARAM:.6} (got {p:.6})")
    );
    assert_eq!(
        ExprError::ZipfianParameter(0.5).to_string(),
        format!(
            "zipfian parameter must be in range [{MIN_ZIPFIAN_PARAM:.3}, {MAX_ZIPFIAN_PARAM:.0}] (got 0.5)"
        )
    );
    assert_eq!(ev("random_zipfian(5, 1, 1.5)").unwrap_err(), "empty range given to random_zipfian: 5 > 1");
    assert_eq!(super::parse(&"1+".repeat(MAX_EXPR_LEN)).unwrap_err(), ExprError::TooLong(2 * MAX_EXPR_LEN));
    assert_eq!(
        ExprError::TooDeep.to_string(),
        format!("expression is too deeply nested (more than {MAX_EXPR_DEPTH} levels)")
    );
    assert_eq!(parse("random(1").unwrap_err(), "expected ',' or ')' in call of \"random\"");
}
