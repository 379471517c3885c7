//! Real-valued functions that cannot fail: `sqrt`, `ln`, `power`, `acos`…
//! computed with Rust's IEEE 754 functions (NaN or ±∞ where the value is
//! undefined), as `dpkit_<name>`.
//!
//! DataFusion follows PostgreSQL here and raises an error for
//! `sqrt(-1)` or `power(0, -1)`: an error on one person's value is an exact
//! bit about it. Every accepted query computes these functions with this
//! module instead (see [`crate::Totaliser`]).

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, BooleanArray, Float64Array};
use datafusion::arrow::datatypes::{DataType, Float64Type};
use datafusion::common::{DataFusionError, Result};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

/// The name, arity and whether the result is a boolean, of each function.
const FUNCTIONS: &[(&str, usize, bool)] = &[
    ("sqrt", 1, false),
    ("cbrt", 1, false),
    ("exp", 1, false),
    ("ln", 1, false),
    ("log", 1, false),
    ("log2", 1, false),
    ("log10", 1, false),
    ("floor", 1, false),
    ("ceil", 1, false),
    ("round", 1, false),
    ("trunc", 1, false),
    ("signum", 1, false),
    ("sin", 1, false),
    ("cos", 1, false),
    ("tan", 1, false),
    ("asin", 1, false),
    ("acos", 1, false),
    ("atan", 1, false),
    ("sinh", 1, false),
    ("cosh", 1, false),
    ("tanh", 1, false),
    ("asinh", 1, false),
    ("acosh", 1, false),
    ("atanh", 1, false),
    ("degrees", 1, false),
    ("radians", 1, false),
    ("abs", 1, false),
    ("isnan", 1, true),
    ("iszero", 1, true),
    ("power", 2, false),
    ("pow", 2, false),
    ("atan2", 2, false),
    ("nanvl", 2, false),
];

/// The arity and boolean-ness of a function this module computes.
pub(crate) fn shape_of(name: &str) -> Option<(usize, bool)> {
    FUNCTIONS
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|&(_, arity, boolean)| (arity, boolean))
}

fn unary(name: &str, x: f64) -> f64 {
    match name {
        "sqrt" => x.sqrt(),
        "cbrt" => x.cbrt(),
        "exp" => x.exp(),
        "ln" => x.ln(),
        "log" | "log10" => x.log10(),
        "log2" => x.log2(),
        "floor" => x.floor(),
        "ceil" => x.ceil(),
        "round" => x.round(),
        "trunc" => x.trunc(),
        "signum" if x == 0.0 => 0.0,
        "signum" => x.signum(),
        "sin" => x.sin(),
        "cos" => x.cos(),
        "tan" => x.tan(),
        "asin" => x.asin(),
        "acos" => x.acos(),
        "atan" => x.atan(),
        "sinh" => x.sinh(),
        "cosh" => x.cosh(),
        "tanh" => x.tanh(),
        "asinh" => x.asinh(),
        "acosh" => x.acosh(),
        "atanh" => x.atanh(),
        "degrees" => x.to_degrees(),
        "radians" => x.to_radians(),
        _ => x.abs(),
    }
}

fn binary(name: &str, x: f64, y: f64) -> f64 {
    match name {
        "power" | "pow" => x.powf(y),
        "atan2" => x.atan2(y),
        _ if x.is_nan() => y,
        _ => x,
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct TotalMath {
    name: &'static str,
    full_name: String,
    arity: usize,
    boolean: bool,
    signature: Signature,
}

impl ScalarUDFImpl for TotalMath {
    fn name(&self) -> &str {
        &self.full_name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(if self.boolean {
            DataType::Boolean
        } else {
            DataType::Float64
        })
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        if arrays.len() != self.arity {
            return Err(DataFusionError::Plan(format!(
                "{} takes {} argument(s)",
                self.full_name, self.arity
            )));
        }
        let x = arrays[0].as_primitive::<Float64Type>();
        let result: ArrayRef = if self.boolean {
            let is_nan = self.name == "isnan";
            let values: BooleanArray = x
                .iter()
                .map(|v| v.map(|v| if is_nan { v.is_nan() } else { v == 0.0 }))
                .collect();
            Arc::new(values)
        } else if self.arity == 1 {
            let values: Float64Array = x.iter().map(|v| v.map(|v| unary(self.name, v))).collect();
            Arc::new(values)
        } else {
            let y = arrays[1].as_primitive::<Float64Type>();
            let values: Float64Array = (0..x.len())
                .map(|i| {
                    (x.is_valid(i) && y.is_valid(i))
                        .then(|| binary(self.name, x.value(i), y.value(i)))
                })
                .collect();
            Arc::new(values)
        };
        Ok(ColumnarValue::Array(result))
    }
}

/// `name(arguments)` on Float64 arguments, if this module computes `name`.
pub(crate) fn total_math(name: &str, arguments: Vec<Expr>) -> Option<Expr> {
    let &(name, arity, boolean) = FUNCTIONS.iter().find(|(n, _, _)| *n == name)?;
    let function = ScalarUDF::from(TotalMath {
        name,
        full_name: format!("dpkit_{name}"),
        arity,
        boolean,
        signature: Signature::exact(vec![DataType::Float64; arity], Volatility::Immutable),
    });
    Some(function.call(arguments))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn undefined_values_are_nan_not_errors() {
        assert!(unary("sqrt", -1.0).is_nan());
        assert!(unary("ln", -1.0).is_nan());
        assert_eq!(unary("ln", 0.0), f64::NEG_INFINITY);
        assert!(unary("acos", 2.0).is_nan());
        assert_eq!(binary("power", 0.0, -1.0), f64::INFINITY);
        assert_eq!(binary("nanvl", f64::NAN, 3.0), 3.0);
        assert_eq!(unary("signum", -0.0), 0.0);
    }
}
