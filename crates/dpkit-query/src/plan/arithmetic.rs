//! Arithmetic over a row's aggregates (`SUM(a) / COUNT(*)`), in the
//! SELECT list and in HAVING: read into a [`Combination`] that the release
//! computes from the released values (see [`dpkit_release::combined`]).

use datafusion::arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::{Aggregate, BinaryExpr, Expr, Operator};
use dpkit_release::combined::{Arithmetic, Combination};

use super::{OutputColumn, not_private, output_of, unalias};
use crate::error::Result;

pub(super) const WHAT_A_COLUMN_IS: &str = "each column of the SELECT list is a GROUP BY key, an aggregate, \
     or arithmetic (+, -, *, /) over aggregates and numbers, such as SUM(a) / COUNT(*)";

/// Arithmetic over the aggregates of one row, read from `expr`; it must
/// use at least one aggregate. A CAST to a real type is kept out (the
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
        Expr::Literal(value, _) => match value.cast_to(&DataType::Float64) {
            Ok(ScalarValue::Float64(Some(n))) if value.data_type().is_numeric() => {
                Ok(Combination::Number(n))
            }
            _ => Err(not_private(WHAT_A_COLUMN_IS)),
        },
        Expr::Negative(e) => Ok(Combination::Negate(inner(e)?)),
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            let op = match op {
                Operator::Plus => Arithmetic::Add,
                Operator::Minus => Arithmetic::Subtract,
                Operator::Multiply => Arithmetic::Multiply,
                Operator::Divide => Arithmetic::Divide,
                _ => return Err(not_private(WHAT_A_COLUMN_IS)),
            };
            Ok(Combination::Binary(inner(left)?, op, inner(right)?))
        }
        Expr::Cast(cast) if is_real(cast.field.data_type()) => combination(&cast.expr, aggregate),
        Expr::TryCast(cast) if is_real(cast.field.data_type()) => {
            combination(&cast.expr, aggregate)
        }
        _ => Err(not_private(WHAT_A_COLUMN_IS)),
    }
}

fn is_real(data_type: &DataType) -> bool {
    data_type.is_floating()
        || matches!(
            data_type,
            DataType::Decimal128(..) | DataType::Decimal256(..)
        )
}
