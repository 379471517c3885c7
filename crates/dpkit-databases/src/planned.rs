//! The real arithmetic dpkit's planner writes itself (never an analyst's
//! expression, which the total rewrite turns into `dpkit_add` and its kin),
//! named for PostgreSQL and Spark so that it can be spelled there without
//! an error on any value:
//! - a quantile's cell, the Int64 `TRY_CAST` of
//!   `dpkit_clamp(floor((dpkit_clamp(x, lo, hi) − lo) / w), 0, last)`,
//!   becomes `dpkit_cell(x, lo, hi, w, last, tiny)`;
//! - a dispersion's square, `c * c` for a clamp `c`, becomes `dpkit_square(c)`.
//!
//! Both are found from the top of each expression before the expression
//! mapping of [`super::sql`] runs from its leaves, so the parts (a raw `-`,
//! `/`, `floor`, `*`) are never seen alone; anything else of that form is
//! refused there as before.

use datafusion::arrow::datatypes::DataType;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::logical_expr::{BinaryExpr, Expr, Operator, lit};

use super::exprs::{call, clamp_reach, float_literal};

/// Replaces the planner's cells and squares in `expr` by their names.
pub(crate) fn name_planned(expr: Expr) -> datafusion::error::Result<Transformed<Expr>> {
    expr.transform_down(|e| {
        if let Some(named) = cell(&e).or_else(|| square(&e)) {
            return Ok(Transformed::yes(named));
        }
        Ok(Transformed::no(e))
    })
}

/// `dpkit_clamp(value, low, high)` with finite literal bounds.
fn finite_clamp(expr: &Expr) -> Option<(&Expr, f64, f64)> {
    let Expr::ScalarFunction(function) = expr else {
        return None;
    };
    match (function.name(), function.args.as_slice()) {
        ("dpkit_clamp", [value, low, high]) => {
            let (low, high) = (float_literal(low)?, float_literal(high)?);
            (low.is_finite() && high.is_finite() && (high - low).is_finite())
                .then_some((value, low, high))
        }
        _ => None,
    }
}

/// The quantile cell of `Grid::cell_of` (see `plan::quantiles`).
fn cell(expr: &Expr) -> Option<Expr> {
    let Expr::TryCast(cast) = expr else {
        return None;
    };
    if cast.field.data_type() != &DataType::Int64 {
        return None;
    }
    let (floored, first, last) = finite_clamp(&cast.expr)?;
    let Expr::ScalarFunction(floor) = floored else {
        return None;
    };
    let [scaled] = floor.args.as_slice() else {
        return None;
    };
    let Expr::BinaryExpr(BinaryExpr {
        left: offset,
        op: Operator::Divide,
        right: width,
    }) = scaled
    else {
        return None;
    };
    let Expr::BinaryExpr(BinaryExpr {
        left: clamped,
        op: Operator::Minus,
        right: origin,
    }) = offset.as_ref()
    else {
        return None;
    };
    let (value, low, high) = finite_clamp(clamped)?;
    let width = float_literal(width)?;
    let whole = |x: f64| x.fract() == 0.0 && x.abs() <= 2f64.powi(53);
    let fits = floor.name() == "floor"
        && float_literal(origin) == Some(low)
        && width > 0.0
        && width.is_finite()
        && first == 0.0
        && whole(last);
    // Below `tiny`, a distance's quotient is under 2^-1000 and its floor 0
    // (PostgreSQL would raise an underflow error for some of them).
    let tiny = width * 2f64.powi(-1000);
    fits.then(|| {
        call(
            "dpkit_cell".into(),
            DataType::Int64,
            vec![
                value.clone(),
                lit(low),
                lit(high),
                lit(width),
                lit(last),
                lit(tiny),
            ],
        )
    })
}

/// The square of a clamp whose square is finite (see `plan::moments`).
fn square(expr: &Expr) -> Option<Expr> {
    let Expr::BinaryExpr(BinaryExpr {
        left,
        op: Operator::Multiply,
        right,
    }) = expr
    else {
        return None;
    };
    let reach = clamp_reach(left)?;
    let fits = left == right && (reach * reach).is_finite();
    fits.then(|| {
        call(
            "dpkit_square".into(),
            DataType::Float64,
            vec![*left.clone()],
        )
    })
}
