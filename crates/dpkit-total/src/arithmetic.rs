//! Arithmetic that cannot fail: `dpkit_add`, `dpkit_sub`, `dpkit_mul`,
//! `dpkit_div`, `dpkit_mod` and `dpkit_abs` on Int64 or Float64.
//!
//! DataFusion's own operators raise errors on some values (integer division
//! or modulo by zero, `i64::MIN / -1`, `abs(i64::MIN)`), and an error that
//! happens only on one person's row is an exact bit about that row. These
//! functions give NULL instead: integer overflow and division or modulo by
//! zero are NULL, floating-point results follow IEEE 754 except that a zero
//! divisor gives NULL. Every accepted query computes with them (see
//! [`crate::Totaliser`]).

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Float64Array, Int64Array};
use datafusion::arrow::datatypes::{DataType, Float64Type, Int64Type};
use datafusion::common::{DataFusionError, Result};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, TypeSignature,
    Volatility,
};

/// One total arithmetic operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum ArithmeticOp {
    Add,
    Subtract,
    Multiply,
    Divide,
    Modulo,
    Abs,
}

impl ArithmeticOp {
    fn name(self) -> &'static str {
        match self {
            Self::Add => "dpkit_add",
            Self::Subtract => "dpkit_sub",
            Self::Multiply => "dpkit_mul",
            Self::Divide => "dpkit_div",
            Self::Modulo => "dpkit_mod",
            Self::Abs => "dpkit_abs",
        }
    }

    fn arity(self) -> usize {
        if self == Self::Abs { 1 } else { 2 }
    }

    /// Integers: `None` where DataFusion would raise an error.
    fn integer(self, x: i64, y: i64) -> Option<i64> {
        match self {
            Self::Add => x.checked_add(y),
            Self::Subtract => x.checked_sub(y),
            Self::Multiply => x.checked_mul(y),
            Self::Divide => x.checked_div(y),
            // The remainder by −1 is 0 for every x, i64::MIN included
            // (whose quotient alone overflows), as in PostgreSQL and Java.
            Self::Modulo if y == 0 => None,
            Self::Modulo => Some(x.wrapping_rem(y)),
            Self::Abs => x.checked_abs(),
        }
    }

    /// Reals: IEEE 754, except that a zero divisor gives `None`.
    fn real(self, x: f64, y: f64) -> Option<f64> {
        match self {
            Self::Add => Some(x + y),
            Self::Subtract => Some(x - y),
            Self::Multiply => Some(x * y),
            Self::Divide | Self::Modulo if y == 0.0 => None,
            Self::Divide => Some(x / y),
            Self::Modulo => Some(x % y),
            Self::Abs => Some(x.abs()),
        }
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct TotalArithmetic {
    op: ArithmeticOp,
    signature: Signature,
}

impl ScalarUDFImpl for TotalArithmetic {
    fn name(&self) -> &str {
        self.op.name()
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(arg_types.first().cloned().unwrap_or(DataType::Float64))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        if arrays.len() != self.op.arity() {
            return Err(DataFusionError::Plan(format!(
                "{} takes {} argument(s)",
                self.op.name(),
                self.op.arity()
            )));
        }
        let first = &arrays[0];
        let second = arrays.get(1).unwrap_or(first);
        let result: ArrayRef = match first.data_type() {
            DataType::Int64 => Arc::new(self.integers(first, second)),
            _ => Arc::new(self.reals(first, second)),
        };
        Ok(ColumnarValue::Array(result))
    }
}

impl TotalArithmetic {
    fn integers(&self, first: &ArrayRef, second: &ArrayRef) -> Int64Array {
        let (x, y) = (
            first.as_primitive::<Int64Type>(),
            second.as_primitive::<Int64Type>(),
        );
        (0..x.len())
            .map(|i| {
                (x.is_valid(i) && y.is_valid(i))
                    .then(|| self.op.integer(x.value(i), y.value(i)))
                    .flatten()
            })
            .collect()
    }

    fn reals(&self, first: &ArrayRef, second: &ArrayRef) -> Float64Array {
        let (x, y) = (
            first.as_primitive::<Float64Type>(),
            second.as_primitive::<Float64Type>(),
        );
        (0..x.len())
            .map(|i| {
                (x.is_valid(i) && y.is_valid(i))
                    .then(|| self.op.real(x.value(i), y.value(i)))
                    .flatten()
            })
            .collect()
    }
}

/// `op(arguments)`; the arguments must all be Int64 or all Float64.
pub(crate) fn total_arithmetic(op: ArithmeticOp, arguments: Vec<Expr>) -> Expr {
    let exact = |t: DataType| TypeSignature::Exact(vec![t; op.arity()]);
    let function = ScalarUDF::from(TotalArithmetic {
        op,
        signature: Signature::one_of(
            vec![exact(DataType::Int64), exact(DataType::Float64)],
            Volatility::Immutable,
        ),
    });
    function.call(arguments)
}

#[cfg(test)]
mod tests {
    use super::ArithmeticOp::*;

    #[test]
    fn integer_failures_become_null() {
        assert_eq!(Divide.integer(7, 0), None);
        assert_eq!(Modulo.integer(7, 0), None);
        assert_eq!(Divide.integer(i64::MIN, -1), None);
        assert_eq!(Modulo.integer(i64::MIN, -1), Some(0));
        assert_eq!(Add.integer(i64::MAX, 1), None);
        assert_eq!(Subtract.integer(i64::MIN, 1), None);
        assert_eq!(Multiply.integer(i64::MAX, 2), None);
        assert_eq!(Abs.integer(i64::MIN, 0), None);
        assert_eq!(Divide.integer(-7, 2), Some(-3));
        assert_eq!(Modulo.integer(-7, 2), Some(-1));
    }

    #[test]
    fn real_division_by_zero_is_null() {
        assert_eq!(Divide.real(1.0, 0.0), None);
        assert_eq!(Divide.real(1.0, -0.0), None);
        assert_eq!(Modulo.real(1.0, 0.0), None);
        assert_eq!(Divide.real(1.0, 4.0), Some(0.25));
        assert!(Add.real(f64::INFINITY, f64::NEG_INFINITY).unwrap().is_nan());
    }
}
