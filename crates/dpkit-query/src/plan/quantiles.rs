//! MEDIAN, PERCENTILE_CONT, APPROX_PERCENTILE_CONT, MIN and MAX: per group,
//! how many values fall in each cell of a public grid over the bounds, from
//! which dpkit-core's [`QuantileSelection`](dpkit_core::mechanism::QuantileSelection)
//! chooses three cells: the quantile, and the ends of its interval.
//!
//! MIN and MAX are the quantiles 0 and 1 (as Tumult Analytics plans them):
//! one person can move the exact minimum anywhere, but not which cell a
//! private selection by rank favours. The answer is a cell below which few
//! values lie (for MIN), not the smallest value, and its interval says so.

use datafusion::arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::functions::math::expr_fn::floor;
use datafusion::functions_aggregate::expr_fn::{array_agg, count};
use datafusion::logical_expr::{Expr, lit, try_cast};

use super::measuring::{Bounded, Measured};
use super::{AggregateKind, Grid, Measurement, QuantileRole, not_private, unalias};
use crate::error::Result;
use dpkit_functions::clamp::clamp_to_bounds;

/// Each value's cell of `grid`, as an Int64 (NULL stays NULL; NaN is the lowest).
fn cell_of(grid: &Grid, value: Expr) -> Expr {
    let clamped = clamp_to_bounds(value, grid.low, grid.high);
    let scaled = floor((clamped - lit(grid.low)) / lit(grid.width));
    let last = (grid.cells - 1) as f64;
    try_cast(clamp_to_bounds(scaled, 0.0, last), DataType::Int64)
}

/// The quantile an aggregate asks for, and its argument: `MEDIAN(x)`,
/// `MIN(x)`, `MAX(x)`, or `PERCENTILE_CONT(p) WITHIN GROUP (ORDER BY x)`
/// and its approximate form.
pub(super) fn requested<'a>(
    name: &str,
    args: &'a [Expr],
    order_by: &[datafusion::logical_expr::SortExpr],
) -> Option<Result<(f64, &'a Expr)>> {
    let p = match (name, args) {
        ("median" | "approx_median", [argument]) if order_by.is_empty() => {
            return Some(Ok((0.5, argument)));
        }
        ("min", [argument]) if order_by.is_empty() => return Some(Ok((0.0, argument))),
        ("max", [argument]) if order_by.is_empty() => return Some(Ok((1.0, argument))),
        ("percentile_cont" | "quantile_cont" | "approx_percentile_cont", [_, p, ..]) => p,
        _ => return None,
    };
    if order_by.iter().any(|sort| !sort.asc) {
        return Some(Err(not_private(
            "percentiles take an ascending ORDER BY: ask for 1 − p instead of DESC",
        )));
    }
    let p = match unalias(p) {
        Expr::Literal(value, _) => match value.cast_to(&DataType::Float64) {
            Ok(ScalarValue::Float64(Some(p))) if (0.0..=1.0).contains(&p) => p,
            _ => return Some(Err(not_private("a percentile must be a number in [0, 1]"))),
        },
        _ => return Some(Err(not_private("a percentile must be a number in [0, 1]"))),
    };
    Some(Ok((p, &args[0])))
}

/// What an answer with MIN or MAX says of them (from the query alone).
pub(super) fn extremes_note(aggregate: &datafusion::logical_expr::Aggregate) -> Option<String> {
    let extreme = aggregate.aggr_expr.iter().any(|expr| {
        matches!(unalias(expr), Expr::AggregateFunction(f)
            if matches!(f.func.name().to_ascii_lowercase().as_str(), "min" | "max"))
    });
    extreme.then(|| {
        "MIN and MAX are the quantiles 0 and 1: one person can move an exact extreme \
         anywhere, so at a small ε the answer may land anywhere between it and the bound \
         (its interval says how far); PERCENTILE_CONT(0.05) or (0.95) is far steadier"
            .to_string()
    })
}

/// The quantile `p` of a bounded argument: three measurements of the same
/// per-group cell counts (the quantile, the interval's lower and upper end),
/// added in that order.
pub(super) fn quantile(
    p: f64,
    argument: Bounded,
    measured: &mut Measured,
) -> (AggregateKind, Vec<usize>) {
    let range = argument.range;
    let grid = Grid::over(range.low, range.high, range.integer);
    // The ends read the point's cell counts (the engine passes them on), so
    // their own columns are a cheap count, not two more lists of every value.
    let cells = array_agg(cell_of(&grid, argument.value));
    let mut add = |role, expr| measured.add(Measurement::Quantile { grid, p, role }, expr);
    let mine = vec![
        add(QuantileRole::Point, cells),
        add(QuantileRole::Lower, count(lit(1i64))),
        add(QuantileRole::Upper, count(lit(1i64))),
    ];
    let kind = AggregateKind::Quantile {
        column: argument.column,
        p,
        grid,
    };
    (kind, mine)
}
