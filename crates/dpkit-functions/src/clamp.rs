//! `dpkit_clamp(value, low, high[, centre])`: clamps a Float64 column to
//! public bounds in one vectorised pass (NULL stays NULL, NaN becomes
//! `low`), and subtracts `centre` in the same pass when given (what
//! `dpkit_clamp(value, low, high) - centre` computes, without a second array).
//!
//! DataFusion's `CASE WHEN v < low THEN low WHEN v > high THEN high ELSE v
//! END` gives the same result, but it builds two masks and merges arrays.
//! On the 10-million-row benchmark (`crates/dpkit-query/benches/dp_overhead.rs`) that made the
//! private query 1.5× slower than the non-private one. This scalar function
//! is pure and deterministic, like a built-in, so the rewritten plan can
//! still be shipped to another engine that registers it.

use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray, Float64Array};
use datafusion::arrow::datatypes::{DataType, Float64Type};
use datafusion::common::{DataFusionError, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, TypeSignature,
    Volatility, lit,
};

/// The clamp function.
#[derive(Debug, PartialEq, Eq, Hash)]
struct ClampToBounds {
    signature: Signature,
}

/// `x` within `[low, high]`; NaN goes to `low` (it compares false).
/// Written as two strict comparisons and selects, which is exactly what
/// x86's `maxpd` and `minpd` compute (the second operand on a tie or a
/// NaN), so the compiler makes one instruction of each; `x.max(low)`
/// also looks for NaN in each operand, and `>=` needs a compare and three
/// logic operations per select (the sum's clamp and steps took twice the
/// plain `AVG`'s samples that way, `perf`, 2026-11-29). The only values
/// this gives differently from `>=` and `<=` are zeros: a zero equal to a
/// bound of zero (of either sign, at either end) becomes the bound. Every
/// sum, square, grid step and quantile cell of the two is the same.
#[inline]
pub(crate) fn clamp_value(x: f64, low: f64, high: f64) -> f64 {
    let above_low = if x > low { x } else { low };
    if above_low < high { above_low } else { high }
}

fn bound(argument: &ColumnarValue, name: &str) -> datafusion::common::Result<f64> {
    match argument {
        ColumnarValue::Scalar(ScalarValue::Float64(Some(value))) => Ok(*value),
        _ => Err(DataFusionError::Plan(format!(
            "dpkit_clamp: the {name} bound must be a Float64 literal"
        ))),
    }
}

impl ScalarUDFImpl for ClampToBounds {
    fn name(&self) -> &str {
        "dpkit_clamp"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> datafusion::common::Result<DataType> {
        Ok(DataType::Float64)
    }

    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::common::Result<ColumnarValue> {
        let (value, low, high, centre) = match args.args.as_slice() {
            [value, low, high] => (value, low, high, 0.0),
            [value, low, high, centre] => (value, low, high, bound(centre, "centre")?),
            _ => {
                return Err(DataFusionError::Plan(
                    "dpkit_clamp takes (value, low, high[, centre])".into(),
                ));
            }
        };
        let (low, high) = (bound(low, "low")?, bound(high, "high")?);
        let clamp = Clamp { low, high, centre };
        let map = |x: f64| clamp.apply(x);
        Ok(match value {
            ColumnarValue::Array(array) => {
                let values = array.as_primitive::<Float64Type>();
                let clamped: Float64Array = values.unary(map);
                debug_assert_eq!(clamped.null_count(), values.null_count());
                ColumnarValue::Array(Arc::new(clamped))
            }
            ColumnarValue::Scalar(ScalarValue::Float64(x)) => {
                ColumnarValue::Scalar(ScalarValue::Float64(x.map(map)))
            }
            ColumnarValue::Scalar(other) => {
                return Err(DataFusionError::Plan(format!(
                    "dpkit_clamp needs a Float64 value, got {}",
                    other.data_type()
                )));
            }
        })
    }
}

/// What `dpkit_clamp(value, low, high[, centre])` does to one value, for
/// code that clamps inside its own pass (the exact sum, SQLite's rows).
///
/// ```
/// use dpkit_functions::clamp::Clamp;
/// let clamp = Clamp { low: 0.0, high: 10.0, centre: 5.0 };
/// assert_eq!(clamp.apply(12.0), 5.0);
/// assert_eq!(clamp.apply(f64::NAN), -5.0);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Clamp {
    /// The lower bound.
    pub low: f64,
    /// The upper bound.
    pub high: f64,
    /// Subtracted after the clamp (0 for a clamp of three arguments).
    pub centre: f64,
}

impl Clamp {
    /// `value` clamped, then less the centre, as the function computes it.
    #[inline]
    pub fn apply(&self, value: f64) -> f64 {
        clamp_value(value, self.low, self.high) - self.centre
    }

    /// The clamp and its value's expression, when `expr` is a call of
    /// `dpkit_clamp` with finite literal bounds, in order, and a finite
    /// centre (the planner's are; a NaN bound would make the clamp NaN).
    pub fn of(expr: &Expr) -> Option<(Expr, Self)> {
        let Expr::ScalarFunction(call) = expr else {
            return None;
        };
        if call.name() != "dpkit_clamp" {
            return None;
        }
        let literal = |e: &Expr| match e {
            Expr::Literal(ScalarValue::Float64(Some(x)), _) => Some(*x),
            _ => None,
        };
        let (value, low, high, centre) = match call.args.as_slice() {
            [value, low, high] => (value, literal(low)?, literal(high)?, 0.0),
            [value, low, high, centre] => (value, literal(low)?, literal(high)?, literal(centre)?),
            _ => return None,
        };
        let finite = [low, high, centre].iter().all(|x| x.is_finite());
        (finite && low <= high).then(|| (value.clone(), Self { low, high, centre }))
    }

    /// The largest `|apply(v)|`: `max(|low − c|, |high − c|)`, as computed
    /// (rounding is monotone, so no clamped value lands beyond it).
    pub fn reach(&self) -> f64 {
        (self.low - self.centre)
            .abs()
            .max((self.high - self.centre).abs())
    }

    /// The bounds and the centre as bits, to compare and hash.
    pub(crate) fn bits(&self) -> [u64; 3] {
        [self.low, self.high, self.centre].map(f64::to_bits)
    }
}

/// The function, for three arguments or four.
fn clamp_function() -> ScalarUDF {
    let three = vec![DataType::Float64; 3];
    let four = vec![DataType::Float64; 4];
    ScalarUDF::from(ClampToBounds {
        signature: Signature::one_of(
            vec![TypeSignature::Exact(three), TypeSignature::Exact(four)],
            Volatility::Immutable,
        ),
    })
}

/// `dpkit_clamp(value, low, high)` as an expression; `value` must be Float64.
///
/// ```
/// use datafusion::prelude::col;
/// let clamped = dpkit_functions::clamp::clamp_to_bounds(col("age"), 0.0, 125.0);
/// assert_eq!(clamped.to_string(), "dpkit_clamp(age, Float64(0), Float64(125))");
/// ```
pub fn clamp_to_bounds(value: Expr, low: f64, high: f64) -> Expr {
    clamp_function().call(vec![value, lit(low), lit(high)])
}

/// `dpkit_clamp(value, low, high, centre)`: the clamped value minus
/// `centre`, exactly as the `f64` subtraction after the clamp rounds it.
///
/// ```
/// use datafusion::prelude::col;
/// let centred = dpkit_functions::clamp::clamp_and_centre(col("age"), 0.0, 125.0, 62.5);
/// assert!(centred.to_string().ends_with("Float64(62.5))"));
/// ```
pub fn clamp_and_centre(value: Expr, low: f64, high: f64, centre: f64) -> Expr {
    clamp_function().call(vec![value, lit(low), lit(high), lit(centre)])
}

#[cfg(test)]
mod tests {
    use super::clamp_value;

    #[test]
    fn values_land_within_the_bounds() {
        assert_eq!(clamp_value(-3.0, 0.0, 10.0), 0.0);
        assert_eq!(clamp_value(30.0, 0.0, 10.0), 10.0);
        assert_eq!(clamp_value(4.5, 0.0, 10.0), 4.5);
        assert_eq!(clamp_value(f64::INFINITY, 0.0, 10.0), 10.0);
        assert_eq!(clamp_value(f64::NAN, 0.0, 10.0), 0.0);
    }

    /// The strict comparisons give the clamp of `>=` and `<=` but for the
    /// sign of a zero, and the same grid steps once centred, whatever the
    /// centre and the grid.
    #[test]
    fn the_strict_clamp_is_the_usual_one_up_to_the_sign_of_zero() {
        let values = [-0.0, 0.0, 1e-300, -1e-300, 5.0, -5.0, 7.5, 10.0, f64::NAN];
        let bounds = [
            (-0.0, 0.0),
            (0.0, -0.0),
            (0.0, 10.0),
            (-0.0, 10.0),
            (-5.0, -0.0),
        ];
        for (low, high) in bounds {
            for x in values.into_iter().chain([f64::INFINITY, f64::NEG_INFINITY]) {
                let usual = if x >= low { x } else { low };
                let usual = if usual <= high { usual } else { high };
                let strict = clamp_value(x, low, high);
                assert_eq!(strict, usual, "{x} in [{low}, {high}]");
                for (centre, exponent) in [(0.0, 0), (-0.0, -3), (2.5, 4), (-0.0, 1)] {
                    let clamp = super::Clamp { low, high, centre };
                    let steps = crate::exact_sum::Steps::clamped(exponent, clamp).of(x);
                    let usual = ((usual - centre) * 2f64.powi(-exponent) + 0.5).floor();
                    assert_eq!(steps, usual as i128, "{x} in [{low}, {high}] − {centre}");
                }
            }
        }
    }
}
