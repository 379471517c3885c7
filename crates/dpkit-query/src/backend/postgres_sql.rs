//! The private plan in PostgreSQL's SQL, in forms that cannot fail.
//!
//! PostgreSQL raises an error where DataFusion's total functions give NULL
//! (`bigint` overflow, division by zero, `float8` overflow), and an error
//! on one person's row is an exact bit. So only expressions with a spelling
//! that cannot fail on any value are sent:
//! - integer arithmetic is computed in `numeric` (exact, unbounded) and
//!   kept only within `bigint`'s range (NULL otherwise), as
//!   [`crate::total_arithmetic`] does; a zero divisor gives NULL;
//! - `dpkit_clamp` is a `CASE` that sends NULL to NULL and NaN to the low
//!   bound (PostgreSQL orders NaN above every number);
//! - the exact sum adds each value's grid steps as `bigint` in `numeric`
//!   (exact), keeps the total within ±2^53 steps and scales it by the grid,
//!   as [`crate::exact_sum`] does;
//! - comparisons, AND/OR/NOT, IS NULL, IN, BETWEEN, CASE, LIKE, COALESCE,
//!   NULLIF, GREATEST, LEAST and lengths are PostgreSQL's own, which do not
//!   fail;
//! - anything else (arithmetic on reals, math and text functions, regular
//!   expressions, casts from text) is refused at planning, which spends
//!   nothing, with a line saying so.

use datafusion::arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::common::tree_node::Transformed;
use datafusion::logical_expr::{BinaryExpr, Expr, Operator};
use datafusion::sql::sqlparser::ast;
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;

use super::sql::{Flavour, call, float_literal};
use crate::error::{QueryError, Result};

fn unavailable(what: &str) -> QueryError {
    QueryError::NotPrivate(format!(
        "{what} is not available on {} yet (the embedded engine and SQLite run it)",
        Flavour::Postgres.name()
    ))
}

/// Functions PostgreSQL computes as DataFusion does, without failing.
const NATIVE: &[&str] = &[
    "coalesce",
    "nullif",
    "greatest",
    "least",
    "length",
    "char_length",
    "character_length",
];

/// Step 1 of `backend::sql` for PostgreSQL: keeps, renames or refuses `expr`.
pub(crate) fn expr(
    expr: Expr,
    type_of: &dyn Fn(&Expr) -> Result<DataType>,
) -> Result<Transformed<Expr>> {
    match &expr {
        Expr::ScalarFunction(function) => {
            let name = function.name().to_string();
            let args = &function.args;
            match name.as_str() {
                "dpkit_clamp" => check_clamp(args).map(|()| Transformed::no(expr)),
                "dpkit_cut_text" => Ok(Transformed::no(expr)),
                "dpkit_add" | "dpkit_sub" | "dpkit_mul" | "dpkit_div" | "dpkit_mod"
                | "dpkit_abs" => {
                    let integers = args
                        .iter()
                        .map(type_of)
                        .collect::<Result<Vec<_>>>()?
                        .iter()
                        .all(|t| *t == DataType::Int64);
                    if !integers {
                        return Err(unavailable("arithmetic on real numbers"));
                    }
                    let renamed = name.replace("dpkit_", "dpkit_int_");
                    Ok(Transformed::yes(call(
                        renamed,
                        DataType::Int64,
                        args.clone(),
                    )))
                }
                native if NATIVE.contains(&native) => Ok(Transformed::no(expr)),
                other => Err(unavailable(&format!(
                    "the function {}",
                    other.trim_start_matches("dpkit_")
                ))),
            }
        }
        Expr::Cast(cast) => {
            cast_allowed(&type_of(&cast.expr)?, cast.field.data_type())?;
            Ok(Transformed::no(expr))
        }
        Expr::TryCast(cast) => {
            cast_allowed(&type_of(&cast.expr)?, cast.field.data_type())?;
            let inner = cast.expr.as_ref().clone();
            Ok(Transformed::yes(inner.cast_to_type(cast.field.data_type())))
        }
        Expr::BinaryExpr(BinaryExpr { op, .. }) if !comparison(*op) => {
            Err(unavailable(&format!("the operator {op}")))
        }
        // PostgreSQL raises an error on a pattern that ends in its escape
        // character; DataFusion does not. Patterns are literals (see
        // `total`), so one without a backslash is safe.
        Expr::Like(like) if like.escape_char.is_some() || !plain_pattern(&like.pattern) => {
            Err(unavailable("a LIKE pattern with ESCAPE or a backslash"))
        }
        Expr::Negative(_) => Err(unavailable("unary minus on a column")),
        Expr::Literal(ScalarValue::Float64(Some(x)), _) if !x.is_finite() => {
            Err(unavailable("a NaN or infinite literal"))
        }
        _ => Ok(Transformed::no(expr)),
    }
}

/// A literal text pattern without a backslash.
fn plain_pattern(pattern: &Expr) -> bool {
    match pattern {
        Expr::Literal(ScalarValue::Utf8(Some(text)), _) => !text.contains('\\'),
        Expr::Cast(cast) => plain_pattern(&cast.expr),
        Expr::TryCast(cast) => plain_pattern(&cast.expr),
        _ => false,
    }
}

trait CastTo {
    fn cast_to_type(self, to: &DataType) -> Expr;
}

impl CastTo for Expr {
    fn cast_to_type(self, to: &DataType) -> Expr {
        Expr::Cast(datafusion::logical_expr::Cast::new(
            Box::new(self),
            to.clone(),
        ))
    }
}

fn comparison(op: Operator) -> bool {
    matches!(
        op,
        Operator::And
            | Operator::Or
            | Operator::Eq
            | Operator::NotEq
            | Operator::Lt
            | Operator::LtEq
            | Operator::Gt
            | Operator::GtEq
            | Operator::IsDistinctFrom
            | Operator::IsNotDistinctFrom
    )
}

/// Casts that cannot fail in PostgreSQL and print as in DataFusion.
fn cast_allowed(from: &DataType, to: &DataType) -> Result<()> {
    use DataType::*;
    match (from, to) {
        (Int64, Float64) | (Int64 | Utf8 | Boolean | Null, Utf8) | (Null, _) => Ok(()),
        _ => Err(unavailable(&format!("a conversion from {from} to {to}"))),
    }
}

/// A clamp whose centred value cannot overflow a `float8` (PostgreSQL
/// raises an error where DataFusion gives infinity).
fn check_clamp(args: &[Expr]) -> Result<()> {
    let literals: Vec<Option<f64>> = args[1..].iter().map(float_literal).collect();
    let finite = match literals.as_slice() {
        [Some(low), Some(high)] => low.is_finite() && high.is_finite(),
        [Some(low), Some(high), Some(centre)] => {
            (low - centre).is_finite() && (high - centre).is_finite()
        }
        _ => false,
    };
    if finite {
        Ok(())
    } else {
        Err(unavailable("a clamp to bounds this wide"))
    }
}

/// Steps per row saturate here (the largest `float8` below 2^63, a valid
/// `bigint`), as the embedded engine saturates at the ends of `i64`.
const MAX_ROW_STEPS: &str = "9223372036854774784";
/// The total is kept within ±2^53 steps, as in [`crate::exact_sum`].
const MAX_STEPS: &str = "9007199254740992";
/// `bigint`'s range.
const BIGINT: (&str, &str) = ("-9223372036854775808", "9223372036854775807");

/// Step 3: dpkit's functions spelled in PostgreSQL's SQL, on the tree.
pub(crate) fn spell(statement: &mut ast::Statement) -> Result<()> {
    let mut failure = None;
    let _ = ast::visit_expressions_mut(statement, |expr| {
        if let ast::Expr::Function(function) = expr
            && let Some(text) = spelling(function)
        {
            match parse(&text) {
                Ok(spelled) => *expr = spelled,
                Err(error) => {
                    failure = Some(error);
                    return std::ops::ControlFlow::Break(());
                }
            }
        }
        std::ops::ControlFlow::Continue(())
    });
    failure.map_or(Ok(()), Err)
}

fn parse(text: &str) -> Result<ast::Expr> {
    Parser::new(&PostgreSqlDialect {})
        .with_recursion_limit(100_000)
        .try_with_sql(text)
        .and_then(|mut parser| parser.parse_expr())
        .map_err(|e| QueryError::Sql(format!("cannot write the plan for PostgreSQL: {e}")))
}

/// The PostgreSQL text of a call of one of dpkit's functions, if it is one.
fn spelling(function: &ast::Function) -> Option<String> {
    let name = function.name.0.last()?.as_ident()?.value.clone();
    if name == "array_agg" {
        // Quantile cells come back as `1,2,3` text, as from SQLite.
        return Some(format!("array_to_string({function}, ',')"));
    }
    let ast::FunctionArguments::List(list) = &function.args else {
        return None;
    };
    let args: Vec<String> = list.args.iter().map(|a| format!("({a})")).collect();
    let a = |i: usize| args.get(i).cloned().unwrap_or_default();
    let in_bigint = |r: String| {
        format!(
            "CASE WHEN {r} BETWEEN {} AND {} THEN CAST({r} AS BIGINT) END",
            BIGINT.0, BIGINT.1
        )
    };
    let numeric = |x: String| format!("CAST({x} AS NUMERIC)");
    Some(match name.as_str() {
        "dpkit_clamp" => clamp(&a(0), &a(1), &a(2), args.get(3)),
        "dpkit_cut_text" => format!("SUBSTR({}, 1, {})", a(0), crate::source::MAX_TEXT_CHARS),
        "dpkit_int_add" => in_bigint(format!("({} + {})", numeric(a(0)), a(1))),
        "dpkit_int_sub" => in_bigint(format!("({} - {})", numeric(a(0)), a(1))),
        "dpkit_int_mul" => in_bigint(format!("({} * {})", numeric(a(0)), a(1))),
        "dpkit_int_div" => format!(
            "CASE WHEN {} = 0 THEN NULL ELSE {} END",
            a(1),
            in_bigint(format!("DIV({}, {})", numeric(a(0)), numeric(a(1))))
        ),
        "dpkit_int_mod" => format!(
            "CASE WHEN {b} = 0 OR ({x} = {min} AND {b} = -1) THEN NULL ELSE MOD({x}, {b}) END",
            x = a(0),
            b = a(1),
            min = BIGINT.0
        ),
        "dpkit_int_abs" => format!(
            "CASE WHEN {x} = {min} THEN NULL ELSE ABS({x}) END",
            x = a(0),
            min = BIGINT.0
        ),
        other => exact_sum(other, &a(0))?,
    })
}

/// `dpkit_clamp`: NULL stays NULL, NaN goes to `low`, then `- centre`.
fn clamp(v: &str, low: &str, high: &str, centre: Option<&String>) -> String {
    let clamped = format!(
        "CASE WHEN {v} IS NULL THEN NULL WHEN {v} < {low} THEN CAST({low} AS DOUBLE PRECISION) \
         WHEN {v} <= {high} THEN {v} WHEN {v} <= CAST('Infinity' AS DOUBLE PRECISION) \
         THEN CAST({high} AS DOUBLE PRECISION) ELSE CAST({low} AS DOUBLE PRECISION) END"
    );
    match centre {
        Some(centre) => format!("(({clamped}) - CAST({centre} AS DOUBLE PRECISION))"),
        None => clamped,
    }
}

/// `dpkit_exact_sum_m<k>(v)`: grid steps summed exactly, as the engine does.
fn exact_sum(name: &str, v: &str) -> Option<String> {
    let exponent = super::placeholder::exact_sum_exponent(name)?;
    // Powers of two print as the shortest decimal that reads back exactly.
    let inverse = 2f64.powi(-exponent);
    let grid = 2f64.powi(exponent);
    let steps = format!(
        "CAST(LEAST(GREATEST(FLOOR({v} * CAST('{inverse:e}' AS DOUBLE PRECISION) + 0.5), \
         -{MAX_ROW_STEPS}), {MAX_ROW_STEPS}) AS BIGINT)"
    );
    Some(format!(
        "(CAST(LEAST(GREATEST(SUM({steps}), -{MAX_STEPS}), {MAX_STEPS}) AS DOUBLE PRECISION) \
         * CAST('{grid:e}' AS DOUBLE PRECISION))"
    ))
}
