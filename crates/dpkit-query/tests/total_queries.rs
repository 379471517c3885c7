//! The promise behind total expressions, tested as a property: every query
//! the planner accepts runs to an answer on every table, however
//! adversarial its values (zeros, NULLs, extremes of every type, empty,
//! long and unicode strings, NaN, ±∞, text where numbers are declared).
//! A failure while running would be a bit about the data released
//! without noise.

#[path = "support/fixture.rs"]
mod fixture;

use dpkit_core::rng::InsecureSeededRng;
use dpkit_query::QueryError;
use dpkit_release::{plan_noise, release};
use fixture::{Fixture, settings};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

const DESCRIPTION: &str = "[table]\nname = \"t\"\nfile = \"t.csv\"\n[privacy_unit]\nkind = \"id\"\n\
    column = \"id\"\nmax_rows_per_person = 2\n[budget]\nepsilon = 10.0\n\
    [columns.id]\ntype = \"integer\"\n\
    [columns.age]\ntype = \"integer\"\nbounds = [0, 120]\n\
    [columns.salary]\ntype = \"integer\"\nbounds = [-1000, 100000]\n\
    [columns.score]\ntype = \"real\"\nbounds = [-1e300, 1e300]\n\
    [columns.name]\ntype = \"text\"\n\
    [columns.sex]\ntype = \"text\"\ndomain = [\"F\", \"M\"]\n";

/// Rows whose every field is an extreme of its type, or not of its type.
fn adversarial_csv() -> String {
    let ints = [
        "0",
        "-1",
        "1",
        "120",
        "121",
        "9223372036854775807",
        "-9223372036854775808",
        "99999999999999999999",
        "",
        "x",
        "1e3",
        "NaN",
        " 7",
    ];
    let reals = [
        "0",
        "-0",
        "NaN",
        "-NaN",
        "inf",
        "-inf",
        "1e308",
        "-1e308",
        "5e-324",
        "",
        "abc",
        "1.7976931348623157e308",
    ];
    let long = "y".repeat(10_000);
    let texts = [
        "",
        "ann",
        "dan",
        "%",
        "\\",
        "\"\"\"\"",
        "名前😀",
        "NULL",
        long.as_str(),
        "a,b",
        "F",
        "M",
    ];
    let mut csv = String::from("id,age,salary,score,name,sex\n");
    for i in 0..40 {
        let id = if i % 9 == 0 { "" } else { ints[i % 4] };
        let quoted = |t: &str| format!("\"{}\"", t.replace('"', "\"\""));
        csv.push_str(&format!(
            "{id},{},{},{},{},{}\n",
            ints[i % ints.len()],
            ints[(i * 7 + 3) % ints.len()],
            reals[i % reals.len()],
            quoted(texts[i % texts.len()]),
            quoted(texts[(i * 5 + 1) % texts.len()]),
        ));
    }
    csv
}

fn leaf<const N: usize>(items: [&'static str; N]) -> BoxedStrategy<String> {
    proptest::sample::select(items.to_vec())
        .prop_map(String::from)
        .boxed()
}

fn int_leaf() -> BoxedStrategy<String> {
    leaf([
        "age",
        "salary",
        "id",
        "0",
        "-1",
        "7",
        "9223372036854775807",
        "(-9223372036854775807 - 1)",
    ])
}

fn real_leaf() -> BoxedStrategy<String> {
    leaf([
        "score",
        "0.0",
        "-0.0",
        "1e308",
        "CAST('NaN' AS DOUBLE)",
        "CAST('-inf' AS DOUBLE)",
        "0.5",
    ])
}

fn text_leaf() -> BoxedStrategy<String> {
    leaf([
        "name", "sex", "''", "'dan'", "'%'", "'名前'", "'1e3'", "'-5'",
    ])
}

fn int_expr(depth: u32) -> BoxedStrategy<String> {
    if depth == 0 {
        return int_leaf();
    }
    let (i, r, t, b) = (
        int_expr(depth - 1),
        real_expr(depth - 1),
        text_expr(depth - 1),
        bool_expr(depth - 1),
    );
    prop_oneof![
        int_leaf(),
        (i.clone(), leaf(["+", "-", "*", "/", "%"]), i.clone())
            .prop_map(|(a, op, b)| format!("({a} {op} {b})")),
        i.clone().prop_map(|a| format!("(-{a})")),
        i.clone().prop_map(|a| format!("abs({a})")),
        t.clone().prop_map(|a| format!("CAST({a} AS BIGINT)")),
        r.clone().prop_map(|a| format!("CAST({a} AS INT)")),
        t.clone().prop_map(|a| format!("length({a})")),
        (t.clone(), t).prop_map(|(a, b)| format!("strpos({a}, {b})")),
        (b, i.clone(), i.clone())
            .prop_map(|(c, a, b)| format!("CASE WHEN {c} THEN {a} ELSE {b} END")),
        (i.clone(), i).prop_map(|(a, b)| format!("coalesce({a}, {b})")),
    ]
    .boxed()
}

fn real_expr(depth: u32) -> BoxedStrategy<String> {
    if depth == 0 {
        return real_leaf();
    }
    let (i, r) = (int_expr(depth - 1), real_expr(depth - 1));
    prop_oneof![
        real_leaf(),
        (r.clone(), leaf(["+", "-", "*", "/", "%"]), r.clone())
            .prop_map(|(a, op, b)| format!("({a} {op} {b})")),
        (
            leaf([
                "sqrt", "ln", "exp", "acos", "log10", "round", "floor", "signum", "tan"
            ]),
            r.clone()
        )
            .prop_map(|(f, a)| format!("{f}({a})")),
        (r.clone(), r.clone()).prop_map(|(a, b)| format!("power({a}, {b})")),
        (r.clone(), r).prop_map(|(a, b)| format!("nanvl({a}, {b})")),
        i.prop_map(|a| format!("CAST({a} AS DOUBLE)")),
    ]
    .boxed()
}

fn text_expr(depth: u32) -> BoxedStrategy<String> {
    if depth == 0 {
        return text_leaf();
    }
    let (i, t) = (int_expr(depth - 1), text_expr(depth - 1));
    prop_oneof![
        text_leaf(),
        (
            leaf(["lower", "upper", "trim", "reverse", "initcap"]),
            t.clone()
        )
            .prop_map(|(f, a)| format!("{f}({a})")),
        (t.clone(), t.clone()).prop_map(|(a, b)| format!("({a} || {b})")),
        (t.clone(), t.clone()).prop_map(|(a, b)| format!("concat({a}, {b})")),
        (t.clone(), -5i64..20, 0i64..20).prop_map(|(a, s, l)| format!("substr({a}, {s}, {l})")),
        (t.clone(), -5i64..20).prop_map(|(a, n)| format!("left({a}, {n})")),
        i.prop_map(|a| format!("CAST({a} AS VARCHAR)")),
        (t.clone(), t).prop_map(|(a, b)| format!("nullif({a}, {b})")),
    ]
    .boxed()
}

fn bool_expr(depth: u32) -> BoxedStrategy<String> {
    let compare = leaf(["=", "<>", "<", "<=", ">", ">="]);
    if depth == 0 {
        return (int_leaf(), compare, int_leaf())
            .prop_map(|(a, op, b)| format!("{a} {op} {b}"))
            .boxed();
    }
    let (i, r, t, b) = (
        int_expr(depth - 1),
        real_expr(depth - 1),
        text_expr(depth - 1),
        bool_expr(depth - 1),
    );
    prop_oneof![
        (i.clone(), compare.clone(), i.clone()).prop_map(|(a, op, b)| format!("{a} {op} {b}")),
        (r.clone(), compare.clone(), r.clone()).prop_map(|(a, op, b)| format!("{a} {op} {b}")),
        (t.clone(), compare.clone(), t.clone()).prop_map(|(a, op, b)| format!("{a} {op} {b}")),
        (t.clone(), compare, i.clone()).prop_map(|(a, op, b)| format!("{a} {op} {b}")),
        (t.clone(), leaf(["'%a%'", "'_'", "'\\%'", "'['", "''"]))
            .prop_map(|(a, p)| format!("{a} LIKE {p}")),
        (
            t.clone(),
            leaf(["'^d.n$'", "'('", "'[a-'", "'a{1000}'", "'(?i)D'"])
        )
            .prop_map(|(a, p)| format!("{a} ~ {p}")),
        b.clone().prop_map(|a| format!("NOT ({a})")),
        (b.clone(), leaf(["AND", "OR"]), b).prop_map(|(a, op, b)| format!("({a}) {op} ({b})")),
        r.clone().prop_map(|a| format!("isnan({a})")),
        i.clone().prop_map(|a| format!("{a} IS NULL")),
        (i.clone(), i.clone(), i.clone()).prop_map(|(a, l, h)| format!("{a} BETWEEN {l} AND {h}")),
        i.prop_map(|a| format!("{a} IN (0, 1, 9223372036854775807)")),
        (t.clone(), t).prop_map(|(a, b)| format!("starts_with({a}, {b})")),
        r.prop_map(|a| format!("{a} IN (0.5, 1e308)")),
    ]
    .boxed()
}

fn query() -> BoxedStrategy<String> {
    let age_only = leaf([
        "age",
        "(age / 10)",
        "(age % 7)",
        "(age - 200) * age",
        "sqrt(age)",
    ]);
    prop_oneof![
        bool_expr(3).prop_map(|w| format!("SELECT COUNT(*) FROM t WHERE {w}")),
        (int_expr(2), bool_expr(2))
            .prop_map(|(e, w)| format!("SELECT COUNT({e}), AVG(age) FROM t WHERE {w}")),
        bool_expr(2).prop_map(|c| format!(
            "SELECT sex, SUM(CASE WHEN {c} THEN salary ELSE 0 END) FROM t GROUP BY sex"
        )),
        (text_expr(2), bool_expr(2)).prop_map(|(e, w)| format!(
            "SELECT COUNT(*) FROM (SELECT {e} AS x, age FROM t WHERE {w}) s WHERE x <> ''"
        )),
        (age_only, bool_expr(1))
            .prop_map(|(k, w)| format!("SELECT {k} AS k, COUNT(*) FROM t WHERE {w} GROUP BY {k}")),
        bool_expr(2).prop_map(|w| format!("SELECT name, COUNT(*) FROM t WHERE {w} GROUP BY name")),
        (real_expr(2), bool_expr(1))
            .prop_map(|(e, w)| format!("SELECT COUNT(*), SUM(score) FROM t WHERE {e} > 0 AND {w}")),
    ]
    .boxed()
}

#[test]
fn every_accepted_query_runs_on_every_table() {
    let tables = [
        Fixture::new(
            "total-adversarial",
            "t.csv",
            &adversarial_csv(),
            DESCRIPTION,
            10.0,
        ),
        Fixture::new(
            "total-empty",
            "t.csv",
            "id,age,salary,score,name,sex\n",
            DESCRIPTION,
            10.0,
        ),
    ];
    let config = Config {
        cases: 1_500,
        failure_persistence: None,
        ..Config::default()
    };
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]);
    let mut runner = TestRunner::new_with_rng(config, rng);
    let answered = std::cell::Cell::new(0usize);
    runner
        .run(&query(), |sql| {
            for table in &tables {
                let query = match table.engine.plan(&sql) {
                    Ok(query) => query,
                    Err(QueryError::NotPrivate(_) | QueryError::Sql(_)) => return Ok(()),
                    Err(other) => panic!("{sql}: planning failed oddly: {other}"),
                };
                let noise = plan_noise(&query.measured, &settings(1.0, 1e-6)).unwrap();
                let exact = dpkit_query::internals::exact(&table.engine, &query)
                    .unwrap_or_else(|e| panic!("{sql}: failed while running: {e}"));
                let mut rng = InsecureSeededRng::from_seed_for_testing(1);
                release(&query.measured, &noise, &exact, 0.95, &mut rng)
                    .unwrap_or_else(|e| panic!("{sql}: failed while releasing: {e}"));
                answered.set(answered.get() + 1);
            }
            Ok(())
        })
        .unwrap();
    let answered = answered.get();
    assert!(
        answered > 1_000,
        "only {answered} runs: the grammar is mostly refused"
    );
}
