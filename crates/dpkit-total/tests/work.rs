//! The work model, pinned: every node of every kind costs its units per
//! row, numbers and booleans included, and libm's calls cost more. Each
//! expectation fails when a node kind's cost is taken out of the model
//! (the hole a timing attack used: numeric CASE branches were free, and a
//! join's fan-out multiplied nothing).

use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::common::DFSchema;
use datafusion::functions::math::expr_fn::{abs, atan2, power};
use datafusion::logical_expr::{Expr, cast, col, lit, when};
use dpkit_total::{MATH_CALL_WORK, NODE_WORK, Sizes, Totaliser};

fn schema() -> DFSchema {
    DFSchema::try_from(Schema::new(vec![
        Field::new("x", DataType::Float64, true),
        Field::new("n", DataType::Int64, true),
        Field::new("b", DataType::Boolean, true),
    ]))
    .unwrap()
}

/// The units per row of `expr` in total form.
fn work(expr: Expr) -> u64 {
    let (schema, sizes) = (schema(), Sizes::new());
    let mut totaliser = Totaliser::new(&schema, &sizes);
    totaliser.total(&expr).unwrap();
    totaliser.work()
}

#[test]
fn every_node_of_every_kind_costs_its_units() {
    let n = NODE_WORK;
    let cases: Vec<(&str, Expr, u64)> = vec![
        ("a column", col("x"), n),
        ("a literal", lit(1.5), n),
        ("arithmetic", col("x") + lit(1.0), 3 * n),
        ("integer arithmetic", col("n") * lit(3i64), 3 * n),
        ("a comparison", col("n").gt(lit(3i64)), 3 * n),
        ("AND", col("b").and(col("b")), 3 * n),
        ("NOT", Expr::Not(Box::new(col("b"))), 2 * n),
        ("IS NULL", col("x").is_null(), 2 * n),
        ("IS TRUE", col("b").is_true(), 2 * n),
        ("unary minus", Expr::Negative(Box::new(col("x"))), 2 * n),
        ("BETWEEN", col("x").between(lit(1.0), lit(2.0)), 4 * n),
        (
            "IN",
            col("n").in_list(vec![lit(1i64), lit(2i64), lit(3i64)], false),
            5 * n,
        ),
        (
            "CASE",
            when(col("b"), lit(1i64)).otherwise(lit(2i64)).unwrap(),
            4 * n,
        ),
        ("CAST", cast(col("n"), DataType::Float64), 2 * n),
        ("abs", abs(col("x")), 2 * n),
        ("atan2", atan2(col("x"), lit(1.001)), 3 * n + MATH_CALL_WORK),
        ("power", power(col("x"), lit(2.0)), 3 * n + MATH_CALL_WORK),
    ];
    for (kind, expr, expected) in cases {
        assert_eq!(work(expr), expected, "{kind}");
    }
}

/// The attack's branch: `CASE WHEN atan2(x, 1.001) BETWEEN 0.5 AND 0.6
/// THEN 1 …`, a few hundred times. Each branch costs its nodes and its
/// call; before, all of it cost nothing.
#[test]
fn a_numeric_case_costs_every_branch() {
    let branches: u32 = 280;
    let mut case = when(
        atan2(col("x"), lit(1.001)).between(lit(0.5), lit(0.6)),
        lit(1i64),
    );
    for i in 1..branches {
        let low = 0.5 + f64::from(i) * 1e-3;
        case = case.when(
            atan2(col("x"), lit(1.001)).between(lit(low), lit(low + 1e-3)),
            lit(1i64),
        );
    }
    let expr = case.otherwise(lit(0i64)).unwrap().lt(lit(0i64));
    let branch = 7 * NODE_WORK + MATH_CALL_WORK;
    let expected = u64::from(branches) * branch + 4 * NODE_WORK;
    assert_eq!(work(expr), expected);
    assert!(expected > 10_000, "{expected}");
}
