//! The measurements a rewritten aggregate computes, as the planner adds
//! them: each one's exact expression and what it measures, and the exact
//! sums of bounded arguments.

use datafusion::functions_aggregate::expr_fn::count;
use datafusion::logical_expr::{Expr, lit};

use super::bounds::Range;
use super::{AggregateKind, AggregateRequest, Measurement};
use dpkit_functions::exact_sum::exact_sum;

use super::grid::{round_out_to_grid, summation_grid};

/// The planned aggregates and what they measure.
pub(super) struct Measured {
    pub(super) aggregates: Vec<AggregateRequest>,
    pub(super) measurements: Vec<Measurement>,
    /// One expression per measurement, for the rewritten aggregate.
    pub(super) exprs: Vec<Expr>,
    /// Which measurements each aggregate uses.
    pub(super) measurement_of: Vec<Vec<usize>>,
    /// The aggregates' arguments' work per row (see `dpkit_total::MAX_WORK`).
    pub(super) work: u64,
}

impl Measured {
    pub(super) fn add(&mut self, measurement: Measurement, expr: Expr) -> usize {
        let index = self.measurements.len();
        self.exprs
            .push(expr.alias(format!("__dpkit_measure_{index}")));
        self.measurements.push(measurement);
        index
    }

    /// The noisy row count thresholded keys need: the query's own COUNT(*)
    /// if it has one (released and thresholded, both post-processing of one
    /// noisy value), else a count of its own.
    pub(super) fn threshold_count(&mut self) -> usize {
        let own = self
            .aggregates
            .iter()
            .position(|a| a.kind == AggregateKind::CountRows);
        match own {
            Some(a) => self.measurement_of[a][0],
            None => self.add(Measurement::Count, count(lit(1i64))),
        }
    }
}

/// An argument of SUM, AVG, VAR or STDDEV: its public range, its value as a
/// float, how it is shown and the total expression (for counting it).
pub(super) struct Bounded {
    pub(super) range: Range,
    pub(super) value: Expr,
    pub(super) column: String,
    pub(super) total: Expr,
}

/// Adds the exact sum of `value`, whose values lie within `range`: the
/// range rounded out to the summation grid is what the privacy map sees.
pub(super) fn add_sum(value: Expr, range: Range, measured: &mut Measured) -> usize {
    let (bounds, exponent) = summation_bounds(range);
    let integer = range.integer;
    measured.add(
        Measurement::Sum {
            bounds,
            integer,
            exponent,
        },
        summed(value, exponent),
    )
}

/// The bounds rounded out to the summation grid, and the grid's exponent.
pub(super) fn summation_bounds(range: Range) -> ((f64, f64), i32) {
    let exponent = summation_grid(range.low.abs().max(range.high.abs()), range.integer);
    (
        (
            round_out_to_grid(range.low, exponent),
            round_out_to_grid(range.high, exponent),
        ),
        exponent,
    )
}

/// The exact sum (or, with the planted hole, DataFusion's floating-point one).
fn summed(value: Expr, exponent: i32) -> Expr {
    #[cfg(feature = "planted-holes")]
    if dpkit_planted::is_planted(dpkit_planted::Hole::FloatingPointSums) {
        return datafusion::functions_aggregate::expr_fn::sum(value);
    }
    exact_sum(value, exponent)
}
