//! Functions that stand in the plan for something a database computes: they
//! carry a name and a type for the unparser, and never run in DataFusion.

use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::{DataFusionError, Result};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    Accumulator, AggregateUDFImpl, ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature,
    Volatility,
};

fn never_runs(name: &str) -> DataFusionError {
    DataFusionError::Internal(format!("{name} runs in the database, not here"))
}

/// A scalar function the database computes.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(crate) struct Placeholder {
    name: String,
    returns: DataType,
    signature: Signature,
}

impl Placeholder {
    /// `name(…)` returning `returns`.
    pub(crate) fn new(name: String, returns: DataType) -> Self {
        Self {
            name,
            returns,
            signature: Signature::variadic_any(Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for Placeholder {
    fn name(&self) -> &str {
        &self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(self.returns.clone())
    }

    fn invoke_with_args(&self, _args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        Err(never_runs(&self.name))
    }
}

/// An aggregate the database computes.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(crate) struct PlaceholderAggregate {
    name: String,
    returns: DataType,
    signature: Signature,
}

impl PlaceholderAggregate {
    /// The exact sum on the grid `2^exponent`, named by its grid
    /// (`dpkit_exact_sum_m30` for 2^-30), as whole steps. `bounded`: every
    /// value's grid steps are known to lie within ±2^32, so a database need
    /// not saturate them row by row (`dpkit_bounded_sum_m30`).
    pub(crate) fn exact_sum(exponent: i32, bounded: bool) -> Self {
        Self {
            name: exact_sum_name(exponent, bounded),
            returns: dpkit_functions::exact_sum::STEPS_TYPE,
            signature: Signature::any(1, Volatility::Immutable),
        }
    }

    /// An exact sum a SQLite connection registers as `name`.
    pub(crate) fn sum_named(name: String) -> Self {
        Self {
            name,
            returns: dpkit_functions::exact_sum::STEPS_TYPE,
            signature: Signature::any(1, Volatility::Immutable),
        }
    }

    /// A group's quantile cells, as `cell:count` pairs: `dpkit_cells` on
    /// SQLite (counted in dpkit's code); on PostgreSQL and Spark,
    /// `dpkit_cell_count` (the cell is a group key, see `sql`).
    pub(crate) fn cells(name: &str) -> Self {
        Self {
            name: name.into(),
            returns: DataType::List(std::sync::Arc::new(Field::new_list_field(
                DataType::Int64,
                true,
            ))),
            signature: Signature::any(1, Volatility::Immutable),
        }
    }
}

/// The name of the exact sum on the grid `2^exponent` (`m` before the
/// exponent's magnitude when it is 0 or below, `p` above).
pub(crate) fn exact_sum_name(exponent: i32, bounded: bool) -> String {
    let kind = if bounded { "bounded" } else { "exact" };
    let sign = if exponent > 0 { 'p' } else { 'm' };
    format!("dpkit_{kind}_sum_{sign}{}", exponent.unsigned_abs())
}

/// The grid exponent a name from [`exact_sum_name`] stands for, and
/// whether its values' steps are bounded.
pub(crate) fn exact_sum_exponent(name: &str) -> Option<(i32, bool)> {
    let (signed, bounded) = match name.strip_prefix("dpkit_bounded_sum_") {
        Some(signed) => (signed, true),
        None => (name.strip_prefix("dpkit_exact_sum_")?, false),
    };
    let (sign, digits) = match signed.split_at_checked(1)? {
        ("m", digits) => (-1, digits),
        ("p", digits) => (1, digits),
        _ => return None,
    };
    digits.parse::<i32>().ok().map(|k| (sign * k, bounded))
}

impl AggregateUDFImpl for PlaceholderAggregate {
    fn name(&self) -> &str {
        &self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(self.returns.clone())
    }

    fn accumulator(&self, _args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Err(never_runs(&self.name))
    }

    fn state_fields(&self, _args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Err(never_runs(&self.name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_sum_names_carry_their_grid() {
        for k in [0, -1, -30, -1000, 1, 966] {
            for bounded in [false, true] {
                assert_eq!(
                    exact_sum_exponent(&exact_sum_name(k, bounded)),
                    Some((k, bounded))
                );
            }
        }
        assert_eq!(exact_sum_exponent("sum"), None);
    }
}
