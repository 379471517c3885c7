//! Public bounds of what SUM and AVG add up: a described column's bounds, a
//! number, or a CASE (or COALESCE, or NULLIF) whose results are those. The
//! bounds come only from the description and the query's own literals, and
//! a column has the description's facts only if it is the table's own (see
//! `lineage`): a subquery's computed column has the range of its expression.

use datafusion::common::ScalarValue;
use datafusion::logical_expr::Expr;

use super::lineage::{Lineage, Origin};
use super::unalias;
use dpkit_description::ColumnKind;

/// Bounds `[low, high]` and whether every value is a whole number.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Range {
    pub(super) low: f64,
    pub(super) high: f64,
    pub(super) integer: bool,
}

impl Range {
    fn union(self, other: Self) -> Self {
        Self {
            low: self.low.min(other.low),
            high: self.high.max(other.high),
            integer: self.integer && other.integer,
        }
    }

    fn point(value: f64, integer: bool) -> Option<Self> {
        value.is_finite().then_some(Self {
            low: value,
            high: value,
            integer,
        })
    }
}

/// The public range of `expr`, if dpkit can derive one (`None` for NULL,
/// which adds nothing; an error-free `Err(())` when it cannot).
pub(super) fn range_of(expr: &Expr, lineage: &Lineage<'_>) -> Result<Option<Range>, ()> {
    match unalias(expr) {
        Expr::Column(column) => match lineage.origin(column).ok_or(())? {
            Origin::Table(..) | Origin::Public(..) => {
                let facts = lineage.facts(column).ok_or(())?;
                let (low, high) = facts.bounds.ok_or(())?;
                let integer =
                    facts.kind == ColumnKind::Integer && low.fract() == 0.0 && high.fract() == 0.0;
                Ok(Some(Range { low, high, integer }))
            }
            Origin::Computed(computed, input) => range_of(computed, &lineage.below(input)),
        },
        Expr::Literal(value, _) => literal_range(value),
        Expr::Negative(inner) => Ok(range_of(inner, lineage)?.map(|r| Range {
            low: -r.high,
            high: -r.low,
            integer: r.integer,
        })),
        Expr::Cast(cast) if cast.field.data_type().is_numeric() => range_of(&cast.expr, lineage),
        Expr::TryCast(cast) if cast.field.data_type().is_numeric() => range_of(&cast.expr, lineage),
        Expr::Case(case) => {
            let results = case.when_then_expr.iter().map(|(_, then)| then.as_ref());
            union_of(results.chain(case.else_expr.as_deref()), lineage)
        }
        Expr::ScalarFunction(function) => match function.name() {
            "coalesce" => union_of(function.args.iter(), lineage),
            "nullif" => match function.args.first() {
                Some(first) => range_of(first, lineage),
                None => Err(()),
            },
            _ => Err(()),
        },
        _ => Err(()),
    }
}

fn union_of<'a>(
    exprs: impl Iterator<Item = &'a Expr>,
    lineage: &Lineage<'_>,
) -> Result<Option<Range>, ()> {
    let mut range: Option<Range> = None;
    for expr in exprs {
        if let Some(next) = range_of(expr, lineage)? {
            range = Some(range.map_or(next, |r| r.union(next)));
        }
    }
    Ok(range)
}

fn literal_range(value: &ScalarValue) -> Result<Option<Range>, ()> {
    if value.is_null() {
        return Ok(None);
    }
    let data_type = value.data_type();
    if !data_type.is_numeric() {
        return Err(());
    }
    let number = match value.cast_to(&datafusion::arrow::datatypes::DataType::Float64) {
        Ok(ScalarValue::Float64(Some(v))) => v,
        _ => return Err(()),
    };
    let integer = data_type.is_integer() && number.abs() < 2f64.powi(53);
    Range::point(number, integer).map(Some).ok_or(())
}
