//! Small expression helpers the translation steps share: dpkit's
//! placeholder calls, literal reading and a clamp's reach.

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::Expr;
use datafusion::logical_expr::expr::ScalarFunction;

use super::placeholder::Placeholder;

/// A placeholder call `name(arguments)` of type `returns`.
pub(crate) fn call(name: String, returns: DataType, arguments: Vec<Expr>) -> Expr {
    Expr::ScalarFunction(ScalarFunction::new_udf(
        Arc::new(Placeholder::new(name, returns).into()),
        arguments,
    ))
}

/// The `f64` in a literal argument, if it is one.
pub(crate) fn float_literal(expr: &Expr) -> Option<f64> {
    match expr {
        Expr::Literal(ScalarValue::Float64(Some(x)), _) => Some(*x),
        _ => None,
    }
}

/// The largest magnitude of `dpkit_clamp(v, low, high[, centre])`.
pub(crate) fn clamp_reach(clamp: &Expr) -> Option<f64> {
    let Expr::ScalarFunction(function) = clamp else {
        return None;
    };
    if function.name() != "dpkit_clamp" {
        return None;
    }
    let literals: Option<Vec<f64>> = function.args[1..].iter().map(float_literal).collect();
    match literals.as_deref() {
        Some([low, high]) => Some(low.abs().max(high.abs())),
        Some([low, high, centre]) => Some((low - centre).abs().max((high - centre).abs())),
        _ => None,
    }
}
