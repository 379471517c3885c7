//! An exact sum that also counts the values it sums, in the same pass:
//! an average's sum and count from one aggregate instead of two.
//!
//! A private average releases a noisy sum and a noisy count of its value;
//! the engine computed them as two aggregates, each a pass over every
//! batch's rows by group (with the count made by the sum, the private
//! query of `crates/dpkit-query/benches/dp_overhead.rs` went from 1.144
//! to 1.125 of the plain one's time, AMD EPYC, 2026-11-29; see the book's
//! `speed/queries.md`). Here the
//! sum's own loop adds one to the row's group where it adds the row's
//! steps, and the aggregate returns both as a struct of two fields,
//! [`crate::exact_sum::STEPS`] and [`crate::exact_sum::COUNT`], which
//! [`parts`] reads back.
//!
//! What the count counts is what `count(x)` counts: the rows whose value
//! is not NULL (and that a FILTER keeps). [`with_count`] pairs a sum with
//! a count only where its argument is NULL exactly when the count's is.

use datafusion::arrow::array::{ArrayRef, AsArray};
use datafusion::arrow::datatypes::{DataType, FieldRef};
use datafusion::common::{DFSchema, DataFusionError, Result, ScalarValue};
use datafusion::logical_expr::expr::{Cast, TryCast};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ExprSchemable, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF,
    ScalarUDFImpl, Signature, Volatility,
};

use crate::exact_sum::{ExactSum, pair_fields, plain};

/// The sum of `sum` made to count its values too, if `count` is a plain
/// `count(x)` (no DISTINCT, FILTER or ordering) and `sum` a plain exact
/// sum (clamped in its own pass or not) of `x` or of a cast of `x` that
/// is NULL only where `x` is: `x`'s type in `input` is a number, and a
/// number cast to a double is never NULL. `None` otherwise.
///
/// ```
/// use datafusion::arrow::datatypes::{DataType, Field, Schema};
/// use datafusion::common::DFSchema;
/// use datafusion::functions_aggregate::expr_fn::count;
/// use datafusion::prelude::{cast, col};
/// use dpkit_functions::exact_sum::exact_sum;
/// use dpkit_functions::sum_and_count::with_count;
/// let schema = Schema::new(vec![Field::new("age", DataType::Int64, true)]);
/// let input = DFSchema::try_from(schema).unwrap();
/// let sum = exact_sum(cast(col("age"), DataType::Float64), 0);
/// let both = with_count(&sum, &count(col("age")), &input).unwrap();
/// assert_eq!(both.to_string(), "dpkit_exact_sum_and_count(CAST(age AS Float64))");
/// assert!(with_count(&sum, &count(col("other")), &input).is_none());
/// ```
pub fn with_count(sum: &Expr, count: &Expr, input: &DFSchema) -> Option<Expr> {
    let counted = counted_argument(count)?;
    let Expr::AggregateFunction(sum) = sum else {
        return None;
    };
    let exact = sum.func.inner().downcast_ref::<ExactSum>()?;
    if !plain(sum) || exact.counts() {
        return None;
    }
    let [argument] = sum.params.args.as_slice() else {
        return None;
    };
    let same_nulls = argument == counted || uncast(argument, input) == Some(counted);
    same_nulls.then(|| exact.counting().call(vec![argument.clone()]))
}

/// The sum and the count that `pair` (a column holding what
/// [`with_count`]'s aggregate returned) holds: `dpkit_steps_of(pair)` and
/// `dpkit_count_of(pair)`.
///
/// DataFusion's own `get_field` would do, but its optimiser moves field
/// reads towards the scan, and with the sums of squares of a variance
/// (common subexpressions) that rule fails on DataFusion 55.2
/// ("duplicate unqualified field `__common_expr_4`"). These two read the
/// field where they stand.
///
/// ```
/// use datafusion::prelude::col;
/// let (sum, count) = dpkit_functions::sum_and_count::parts(col("m"));
/// assert_eq!(sum.to_string(), "dpkit_steps_of(m)");
/// assert_eq!(count.to_string(), "dpkit_count_of(m)");
/// ```
pub fn parts(pair: Expr) -> (Expr, Expr) {
    let part = |index, name| {
        let signature = Signature::any(1, Volatility::Immutable);
        ScalarUDF::from(Part {
            index,
            name,
            signature,
        })
    };
    let steps = part(0, "dpkit_steps_of").call(vec![pair.clone()]);
    (steps, part(1, "dpkit_count_of").call(vec![pair]))
}

/// Reads field `index` of the struct a sum with its count returned.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Part {
    index: usize,
    name: &'static str,
    signature: Signature,
}

impl ScalarUDFImpl for Part {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(pair_fields()[self.index].data_type().clone())
    }

    /// The field as the struct holds it: the count is never NULL, as
    /// `count`'s own column is not.
    fn return_field_from_args(&self, _args: ReturnFieldArgs) -> Result<FieldRef> {
        Ok(pair_fields()[self.index].clone())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let part = |pair: &ArrayRef| -> Result<ArrayRef> {
            let pair = pair.as_struct_opt().ok_or_else(|| {
                DataFusionError::Internal(format!("{} reads a struct", self.name))
            })?;
            Ok(pair.column(self.index).clone())
        };
        match args.args.as_slice() {
            [ColumnarValue::Array(pair)] => part(pair).map(ColumnarValue::Array),
            [ColumnarValue::Scalar(pair)] => {
                let array = part(&pair.to_array()?)?;
                ScalarValue::try_from_array(&array, 0).map(ColumnarValue::Scalar)
            }
            _ => Err(DataFusionError::Internal(format!(
                "{} takes one argument",
                self.name
            ))),
        }
    }
}

/// `x` of a plain `count(x)`.
fn counted_argument(expr: &Expr) -> Option<&Expr> {
    let Expr::AggregateFunction(count) = expr else {
        return None;
    };
    match count.params.args.as_slice() {
        [x] if count.func.name() == "count" && plain(count) => Some(x),
        _ => None,
    }
}

/// `x` of `CAST(x AS DOUBLE)` or `TRY_CAST(x AS DOUBLE)` where `x` is a
/// number in `input`: every integer and every float has a double (the
/// nearest), so the cast is NULL exactly when `x` is.
fn uncast<'a>(argument: &'a Expr, input: &DFSchema) -> Option<&'a Expr> {
    let (x, to) = match argument {
        Expr::Cast(Cast { expr, field }) | Expr::TryCast(TryCast { expr, field }) => {
            (expr.as_ref(), field.data_type())
        }
        _ => return None,
    };
    let from = x.get_type(input).ok()?;
    let number = from.is_integer() || matches!(from, DataType::Float32 | DataType::Float64);
    (number && *to == DataType::Float64).then_some(x)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clamp::clamp_and_centre;
    use crate::exact_sum::{exact_sum, fused};
    use datafusion::arrow::datatypes::{Field, Schema};
    use datafusion::functions_aggregate::expr_fn::{count, count_distinct};
    use datafusion::prelude::{cast, col, lit, try_cast};

    fn input() -> DFSchema {
        let schema = Schema::new(vec![
            Field::new("age", DataType::Int64, true),
            Field::new("score", DataType::Float64, true),
            Field::new("name", DataType::Utf8, true),
        ]);
        DFSchema::try_from(schema).unwrap()
    }

    /// Pairs only where the sum's argument is NULL exactly when the
    /// count's is: a text cast to a double is NULL where the text is not
    /// a number, so its count is not the sum's.
    #[test]
    fn a_sum_counts_only_what_the_count_would() {
        let input = input();
        let clamped = |x: Expr| fused(&exact_sum(clamp_and_centre(x, 0.0, 10.0, 5.0), -20));
        let age = try_cast(col("age"), DataType::Float64);
        let paired = |sum: &Expr, count: &Expr| with_count(sum, count, &input).is_some();
        let sum_of_age = clamped(age.clone()).unwrap();
        assert!(paired(&sum_of_age, &count(col("age"))));
        assert!(paired(&exact_sum(col("score"), 0), &count(col("score"))));
        let sum_of_score = exact_sum(cast(col("score"), DataType::Float64), 0);
        assert!(paired(&sum_of_score, &count(col("score"))));
        for (sum, count) in [
            (
                exact_sum(try_cast(col("name"), DataType::Float64), 0),
                count(col("name")),
            ),
            (sum_of_age.clone(), count(col("score"))),
            (sum_of_age.clone(), count_distinct(col("age"))),
            (sum_of_age.clone(), count(lit(1))),
            (exact_sum(col("score") * lit(2.0), 0), count(col("score"))),
            (
                exact_sum(try_cast(col("age"), DataType::Float32), 0),
                count(col("age")),
            ),
        ] {
            assert!(!paired(&sum, &count), "{sum} with {count}");
        }
        let twice = with_count(&sum_of_age, &count(col("age")), &input).unwrap();
        assert!(!paired(&twice, &count(col("age"))), "a sum counts once");
    }
}
