//! The private plan for PostgreSQL and Spark, in forms that cannot fail.
//!
//! Both raise errors where DataFusion's total functions give NULL (`bigint`
//! overflow, division by zero, `float8` overflow; Spark in its default ANSI
//! mode), and an error on one person's row is an exact bit. So only
//! expressions with a spelling that cannot fail on any value are sent:
//! - integer arithmetic is computed in `numeric` (PostgreSQL: exact,
//!   unbounded) or with `try_add` and its kin (Spark: NULL on overflow) and
//!   kept only within `bigint`'s range (NULL otherwise), as
//!   `dpkit_total`'s total arithmetic does; a zero divisor gives NULL;
//! - `dpkit_clamp` is a `CASE` that sends NULL to NULL and NaN to the low
//!   bound (both order NaN above every number);
//! - the exact sum adds each value's grid steps as `bigint` in `numeric` or
//!   `DECIMAL(38,0)` (exact) and returns the whole number of steps, as
//!   [`dpkit_functions::exact_sum`] does;
//! - comparisons, AND/OR/NOT, IS NULL, IN, BETWEEN, CASE, LIKE, COALESCE,
//!   NULLIF, GREATEST, LEAST and lengths are the database's own, which do
//!   not fail;
//! - arithmetic on reals follows IEEE 754 on Spark (a zero divisor is
//!   guarded, as it gives NULL in dpkit); PostgreSQL raises errors when a
//!   double overflows or underflows, so there only the planner's own
//!   arithmetic on clamped values is sent (see [`super::planned`]);
//! - anything else (arithmetic on reals on PostgreSQL, math and text
//!   functions, regular expressions, casts from text) is refused at
//!   planning, which spends nothing, with a line saying so.

use datafusion::arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::common::tree_node::Transformed;
use datafusion::logical_expr::{BinaryExpr, Expr, Operator};

use super::exprs::{call, float_literal};
use super::flavour::{Flavour, unavailable};
use crate::error::Result;

/// Functions both databases compute as DataFusion does, without failing.
const NATIVE: &[&str] = &[
    "coalesce",
    "nullif",
    "greatest",
    "least",
    "length",
    "char_length",
    "character_length",
];

/// Step 1 of `sql` for PostgreSQL and Spark: keeps, renames or
/// refuses `expr`.
pub(crate) fn expr(
    expr: Expr,
    type_of: &dyn Fn(&Expr) -> Result<DataType>,
    flavour: Flavour,
) -> Result<Transformed<Expr>> {
    let unavailable = |what: &str| unavailable(flavour, what);
    match &expr {
        Expr::ScalarFunction(function) => {
            let name = function.name().to_string();
            let args = &function.args;
            match name.as_str() {
                "dpkit_clamp" => check_clamp(args, flavour).map(|()| Transformed::no(expr)),
                // Named by `planned` from the planner's own shapes.
                "dpkit_cut_text" | "dpkit_cell" | "dpkit_square" => Ok(Transformed::no(expr)),
                // Patterns run as bounded automata by dpkit (see
                // `dpkit_total`'s matcher); a database's own matcher could take
                // time that grows with the pattern.
                "dpkit_regex" => Err(unavailable("a regular expression")),
                "dpkit_like" => Err(unavailable(
                    "ILIKE, or a LIKE pattern with `_` or an inner `%`",
                )),
                "dpkit_add" | "dpkit_sub" | "dpkit_mul" | "dpkit_div" | "dpkit_mod"
                | "dpkit_abs" => arithmetic(&name, args, type_of, flavour),
                native if NATIVE.contains(&native) => Ok(Transformed::no(expr)),
                other => Err(unavailable(&format!(
                    "the function {}",
                    other.trim_start_matches("dpkit_")
                ))),
            }
        }
        Expr::Cast(cast) => {
            cast_allowed(&type_of(&cast.expr)?, cast.field.data_type(), flavour)?;
            Ok(Transformed::no(expr))
        }
        Expr::TryCast(cast) => {
            cast_allowed(&type_of(&cast.expr)?, cast.field.data_type(), flavour)?;
            let inner = cast.expr.as_ref().clone();
            Ok(Transformed::yes(inner.cast_to_type(cast.field.data_type())))
        }
        Expr::BinaryExpr(BinaryExpr { op, .. }) if !comparison(*op) => {
            Err(unavailable(&format!("the operator {op}")))
        }
        // PostgreSQL raises an error on a pattern that ends in its escape
        // character; DataFusion does not. Patterns are literals (see
        // `dpkit_total`), so one without a backslash is safe.
        Expr::Like(like) if like.escape_char.is_some() || !plain_pattern(&like.pattern) => {
            Err(unavailable("a LIKE pattern with ESCAPE or a backslash"))
        }
        // Negating a double never fails (integers are `dpkit_sub(0, x)`).
        Expr::Negative(inner) if type_of(inner)? == DataType::Float64 => Ok(Transformed::no(expr)),
        Expr::Negative(_) => Err(unavailable("unary minus on a column")),
        Expr::Literal(ScalarValue::Float64(Some(x)), _) if !x.is_finite() => {
            Err(unavailable("a NaN or infinite literal"))
        }
        _ => Ok(Transformed::no(expr)),
    }
}

/// dpkit's total arithmetic, renamed for its spelling: on integers
/// `dpkit_int_*` everywhere; on reals `dpkit_real_*` on Spark, whose
/// doubles follow IEEE 754 (only a zero divisor raises an error, and is
/// guarded), but not on PostgreSQL, which raises errors when a double
/// overflows or underflows.
fn arithmetic(
    name: &str,
    args: &[Expr],
    type_of: &dyn Fn(&Expr) -> Result<DataType>,
    flavour: Flavour,
) -> Result<Transformed<Expr>> {
    let types = args.iter().map(type_of).collect::<Result<Vec<_>>>()?;
    let (kind, returns) = if types.iter().all(|t| *t == DataType::Int64) {
        ("int", DataType::Int64)
    } else if flavour == Flavour::Spark && types.iter().all(|t| *t == DataType::Float64) {
        ("real", DataType::Float64)
    } else {
        return Err(unavailable(flavour, "arithmetic on real numbers"));
    };
    let renamed = name.replace("dpkit_", &format!("dpkit_{kind}_"));
    Ok(Transformed::yes(call(renamed, returns, args.to_vec())))
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

/// Operators every database computes as DataFusion does, without failing.
pub(crate) fn comparison(op: Operator) -> bool {
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

/// Casts that cannot fail in either database and print as in DataFusion.
fn cast_allowed(from: &DataType, to: &DataType, flavour: Flavour) -> Result<()> {
    use DataType::*;
    match (from, to) {
        (Int64, Float64) | (Int64 | Utf8 | Boolean | Null, Utf8) | (Null, _) => Ok(()),
        _ => Err(unavailable(
            flavour,
            &format!("a conversion from {from} to {to}"),
        )),
    }
}

/// A clamp whose centred value cannot overflow a double (PostgreSQL raises
/// an error where DataFusion gives infinity).
fn check_clamp(args: &[Expr], flavour: Flavour) -> Result<()> {
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
        Err(unavailable(flavour, "a clamp to bounds this wide"))
    }
}
