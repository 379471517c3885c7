//! `dpkit_exact_sum(x)`: a sum with no rounding error, so that one person
//! moves it by exactly what the sensitivity says.
//!
//! A floating-point sum rounds after every addition, and the rounding
//! depends on the other values and on the order: crafted magnitudes near
//! 2^40 can move a computed sum by several grid steps more than one clamped
//! value could. Here every (already clamped) value is first rounded to a
//! public grid of spacing `g = 2^k` (exact: a power-of-two scaling), and the
//! grid indices are added in 128-bit integers, which is exact and does not
//! depend on the order. The bounds are multiples of `g` (see
//! [`summation_grid`]), so a rounded value stays within them and one row
//! moves the sum by at most `max(|L|, |U|)`.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray};
use datafusion::arrow::datatypes::{DataType, Decimal128Type, Field, FieldRef, Float64Type};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Expr, Signature, Volatility,
};

/// Grid steps per bound: 2^30 (the bound itself is rounded out to the grid).
const RESOLUTION_BITS: i32 = 30;
/// Sums are kept within ±2^53 grid steps, where every integer is a double.
const MAX_STEPS: i128 = 1 << 53;

/// The exponent `k` of the summation grid `2^k` for values within
/// `[-magnitude, magnitude]`: at least 2^30 steps per magnitude, and never
/// coarser than 1 (whole numbers sum exactly).
pub(crate) fn summation_grid(magnitude: f64) -> i32 {
    let exponent = if magnitude > 0.0 && magnitude.is_finite() {
        magnitude.log2().floor() as i32 - RESOLUTION_BITS
    } else {
        0
    };
    exponent.clamp(-1000, 0)
}

/// `value` rounded outwards to the grid `2^exponent` (away from zero).
pub(crate) fn round_out_to_grid(value: f64, exponent: i32) -> f64 {
    let scale = 2f64.powi(exponent);
    let steps = value / scale;
    let rounded = if steps >= 0.0 {
        steps.ceil()
    } else {
        steps.floor()
    };
    rounded * scale
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct ExactSum {
    exponent: i32,
    signature: Signature,
}

impl AggregateUDFImpl for ExactSum {
    fn name(&self) -> &str {
        "dpkit_exact_sum"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }

    fn accumulator(&self, _args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(ExactSumAccumulator {
            exponent: self.exponent,
            steps: 0,
        }))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(vec![Arc::new(Field::new(
            format!("{}[steps]", args.name),
            DataType::Decimal128(38, 0),
            true,
        ))])
    }
}

#[derive(Debug)]
struct ExactSumAccumulator {
    exponent: i32,
    steps: i128,
}

impl Accumulator for ExactSumAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let inverse = 2f64.powi(-self.exponent);
        let values = values[0].as_primitive::<Float64Type>();
        for value in values.iter().flatten() {
            // Values are clamped to bounds below 2^62 steps; NaN is not
            // summed (the clamp before this never lets one through).
            let scaled = value * inverse;
            if scaled.is_finite() {
                self.steps += (scaled + 0.5).floor() as i64 as i128;
            }
        }
        Ok(())
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let partial = states[0].as_primitive::<Decimal128Type>();
        for i in 0..partial.len() {
            if partial.is_valid(i) {
                self.steps = self.steps.saturating_add(partial.value(i));
            }
        }
        Ok(())
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![ScalarValue::Decimal128(Some(self.steps), 38, 0)])
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        // Clamping the step count is a fixed 1-Lipschitz map: it never moves
        // two sums further apart. Within it, the product is exact.
        let steps = self.steps.clamp(-MAX_STEPS, MAX_STEPS) as f64;
        Ok(ScalarValue::Float64(Some(steps * 2f64.powi(self.exponent))))
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
    }
}

/// `dpkit_exact_sum(value)` on the grid `2^exponent`; `value` is Float64.
pub(crate) fn exact_sum(value: Expr, exponent: i32) -> Expr {
    let function = AggregateUDF::from(ExactSum {
        exponent,
        signature: Signature::exact(vec![DataType::Float64], Volatility::Immutable),
    });
    function.call(vec![value])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_round_out_and_grids_are_fine_enough() {
        assert_eq!(summation_grid(99999.0), 16 - 30);
        assert_eq!(summation_grid(0.5), -31);
        assert_eq!(summation_grid(1e300), 0);
        assert_eq!(round_out_to_grid(90.0, summation_grid(90.0)), 90.0);
        let exponent = summation_grid(0.3);
        let out = round_out_to_grid(0.3, exponent);
        assert!(out >= 0.3 && out - 0.3 <= 2f64.powi(exponent));
        assert_eq!(round_out_to_grid(-0.3, exponent), -out);
    }

    #[test]
    fn sums_are_exact_whatever_the_order() {
        let exponent = summation_grid(2f64.powi(40));
        let values = [2f64.powi(40), 1.0, -2f64.powi(40), 1.0, 0.25];
        let mut forward = ExactSumAccumulator { exponent, steps: 0 };
        let mut backward = ExactSumAccumulator { exponent, steps: 0 };
        let array =
            |v: Vec<f64>| -> ArrayRef { Arc::new(datafusion::arrow::array::Float64Array::from(v)) };
        forward.update_batch(&[array(values.to_vec())]).unwrap();
        backward
            .update_batch(&[array(values.iter().rev().copied().collect())])
            .unwrap();
        assert_eq!(forward.evaluate().unwrap(), backward.evaluate().unwrap());
        assert_eq!(forward.evaluate().unwrap(), ScalarValue::Float64(Some(2.0)));
    }
}
