//! AVG, VAR and STDDEV: moments measured as exact sums of the values'
//! distances from the middle of their bounds (and of their squares), and
//! a count. Centring halves what one value can add to the sum, and the
//! count's error then weighs only by how far the mean lies from the middle.

use datafusion::functions_aggregate::expr_fn::count;
use datafusion::logical_expr::Expr;

use super::bounds::Range;
use super::grid::summation_grid;
use super::measuring::{Bounded, Measured, add_sum};
use super::{AggregateKind, Dispersion, Measurement};
use crate::error::Result;
use dpkit_functions::clamp::clamp_and_centre;

/// The middle of `range`, on its summation grid (a whole number for whole
/// numbers), so that every centred value is exact: `x − c` of two grid
/// multiples within the bounds needs no rounding. A constant is not
/// centred: its sum moves by the constant per row, which is not zero.
fn centre_of(range: Range) -> f64 {
    if range.low == range.high {
        return 0.0;
    }
    let middle = range.low / 2.0 + range.high / 2.0;
    if range.integer {
        return middle.floor();
    }
    let exponent = summation_grid(range.low.abs().max(range.high.abs()), false);
    let scale = 2f64.powi(exponent);
    ((middle / scale).round() * scale).clamp(range.low, range.high)
}

/// The centred value `clamp(x) − c`, its range and `c`. Rounding is
/// monotone, so the computed difference stays within the computed bounds.
fn centred(argument: &Bounded) -> (Expr, Range, f64) {
    let range = argument.range;
    let centre = centre_of(range);
    let value = clamp_and_centre(argument.value.clone(), range.low, range.high, centre);
    let centred = Range {
        low: range.low - centre,
        high: range.high - centre,
        integer: range.integer,
    };
    (value, centred, centre)
}

/// `AVG(x)`: a centred sum and a count.
pub(super) fn average(
    argument: Bounded,
    measured: &mut Measured,
) -> Result<(AggregateKind, Vec<usize>)> {
    let (value, range, centre) = centred(&argument);
    let sum = add_sum(value, range, measured);
    let count_of = measured.add(Measurement::Count, count(argument.total));
    let kind = AggregateKind::Avg {
        column: argument.column,
        bounds: (argument.range.low, argument.range.high),
        centre,
    };
    Ok((kind, vec![sum, count_of]))
}

/// `VAR(x)`, `STDDEV(x)` and their population forms: a centred sum of
/// squares, a centred sum and a count.
pub(super) fn dispersion_of(
    dispersion: Dispersion,
    argument: Bounded,
    measured: &mut Measured,
) -> Result<(AggregateKind, Vec<usize>)> {
    let (value, range, centre) = centred(&argument);
    let reach = range.high.max(-range.low);
    let squares = Range {
        low: 0.0,
        high: reach * reach,
        integer: range.integer,
    };
    let squared = add_sum(value.clone() * value.clone(), squares, measured);
    let sum = add_sum(value, range, measured);
    let count_of = measured.add(Measurement::Count, count(argument.total));
    let kind = AggregateKind::Dispersion {
        column: argument.column,
        bounds: (argument.range.low, argument.range.high),
        centre,
        dispersion,
    };
    Ok((kind, vec![squared, sum, count_of]))
}
