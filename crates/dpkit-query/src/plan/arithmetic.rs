//! Arithmetic over a row's aggregates (`SUM(a) / COUNT(*)`), in the
//! SELECT list and in HAVING: read into a [`Combination`] that the release
//! computes from the released values (see [`dpkit_release::combined`]).

use datafusion::arrow::datatypes::DataType;
use datafusion::logical_expr::{Aggregate, BinaryExpr, Expr, Operator};
use dpkit_release::combined::{Arithmetic, Combination};

use super::{OutputColumn, not_private, number_of, output_of, unalias};
use crate::error::Result;

pub(super) const WHAT_A_COLUMN_IS: &str = "each column of the SELECT list is a GROUP BY key, an aggregate, \
     or arithmetic (+, -, *, /) over aggregates and numbers, such as SUM(a) / COUNT(*)";

/// Arithmetic over the aggregates of one row, read from `expr`; it must
/// use at least one aggregate. A CAST to a float type is kept out (the
/// arithmetic is real-valued already); one to an integer would truncate,
/// and is refused.
pub(super) fn combined(expr: &Expr, aggregate: &Aggregate) -> Result<Combination> {
    let combination = combination(expr, aggregate)?;
    if combination.aggregates().is_empty() {
        return Err(not_private(WHAT_A_COLUMN_IS));
    }
    Ok(combination)
}

pub(super) fn combination(expr: &Expr, aggregate: &Aggregate) -> Result<Combination> {
    let inner = |e: &Expr| combination(e, aggregate).map(Box::new);
    match unalias(expr) {
        Expr::Column(column) => match output_of(aggregate, column)? {
            OutputColumn::Aggregate(a) => Ok(Combination::Aggregate(a)),
            _ => Err(not_private(
                "arithmetic in the SELECT list takes aggregates and numbers, not GROUP BY keys",
            )),
        },
        Expr::Literal(value, _) => number_of(value)
            .map(Combination::Number)
            .ok_or_else(|| not_private(WHAT_A_COLUMN_IS)),
        Expr::Negative(e) => Ok(Combination::Negate(inner(e)?)),
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            let op = match op {
                Operator::Plus => Arithmetic::Add,
                Operator::Minus => Arithmetic::Subtract,
                Operator::Multiply => Arithmetic::Multiply,
                Operator::Divide => Arithmetic::Divide,
                _ => return Err(not_private(WHAT_A_COLUMN_IS)),
            };
            if op == Arithmetic::Divide && is_zero(right) {
                return Err(not_private(
                    "a division by 0 in the SELECT list or HAVING: it has no value",
                ));
            }
            Ok(Combination::Binary(inner(left)?, op, inner(right)?))
        }
        Expr::Cast(cast) if is_real(cast.field.data_type()) => combination(&cast.expr, aggregate),
        Expr::TryCast(cast) if is_real(cast.field.data_type()) => {
            combination(&cast.expr, aggregate)
        }
        Expr::Cast(_) | Expr::TryCast(_) => Err(not_private(
            "a CAST of an aggregate to anything but DOUBLE or REAL would round its released \
             value: CAST to DOUBLE, and round the answer yourself",
        )),
        _ => Err(not_private(WHAT_A_COLUMN_IS)),
    }
}

/// A float: a CAST to it changes no released value. A CAST to a decimal or
/// an integer would round, which arithmetic on released values does not.
fn is_real(data_type: &DataType) -> bool {
    data_type.is_floating()
}

/// Whether `expr` is a numeric literal 0 (a division by it has no value).
fn is_zero(expr: &Expr) -> bool {
    match unalias(expr) {
        Expr::Literal(value, _) => number_of(value) == Some(0.0),
        Expr::Cast(cast) => is_zero(&cast.expr),
        Expr::TryCast(cast) => is_zero(&cast.expr),
        _ => false,
    }
}
