//! The aggregates: COUNT(*), COUNT(expression), COUNT(DISTINCT id),
//! SUM(expression) and AVG(expression), each measured as exact counts and
//! exact clamped sums of total expressions; VAR and STDDEV are planned in
//! `moments`, MEDIAN and the percentiles in `quantiles`.

use datafusion::arrow::datatypes::DataType;
use datafusion::common::DFSchema;
use datafusion::functions_aggregate::expr_fn::{count, count_distinct};
use datafusion::logical_expr::{Aggregate, Expr, lit, try_cast};

use super::bounds::range_of;
use super::lineage::Lineage;
use super::measuring::{Bounded, Measured, add_sum, summation_bounds};
use super::moments::{average, dispersion_of};
use super::quantiles;
use super::{AggregateKind, AggregateRequest, Dispersion, Measurement, not_private, unalias};

use crate::error::Result;
use dpkit_functions::clamp::clamp_to_bounds;
use dpkit_total::{Sizes, Totaliser, Ty};

fn is_supported(name: &str) -> bool {
    matches!(
        name,
        "count"
            | "sum"
            | "avg"
            | "median"
            | "percentile_cont"
            | "approx_percentile_cont"
            | "min"
            | "max"
    ) || Dispersion::of(name).is_some()
}

/// Plans the aggregates of `aggregate` over an input with `schema`.
pub(super) fn plan(
    aggregate: &Aggregate,
    schema: &DFSchema,
    sizes: &Sizes,
    lineage: &Lineage<'_>,
) -> Result<Measured> {
    let mut measured = Measured {
        aggregates: Vec::new(),
        measurements: Vec::new(),
        exprs: Vec::new(),
        measurement_of: Vec::new(),
        work: 0,
    };
    let mut totaliser = Totaliser::new(schema, sizes);
    for (index, expr) in aggregate.aggr_expr.iter().enumerate() {
        let name = aggregate
            .schema
            .field(aggregate.group_expr.len() + index)
            .name()
            .clone();
        let (kind, mine) = one(expr, &name, &mut totaliser, lineage, &mut measured)?;
        measured.measurement_of.push(mine);
        measured.aggregates.push(AggregateRequest { name, kind });
    }
    measured.work = totaliser.work();
    Ok(measured)
}

/// How an aggregate's argument is shown in `--explain`.
fn shown(expr: &Expr) -> String {
    match unalias(expr) {
        Expr::Column(column) => column.name.clone(),
        other => other.to_string(),
    }
}

fn one(
    expr: &Expr,
    name: &str,
    totaliser: &mut Totaliser<'_>,
    lineage: &Lineage<'_>,
    measured: &mut Measured,
) -> Result<(AggregateKind, Vec<usize>)> {
    let Expr::AggregateFunction(function) = unalias(expr) else {
        return Err(not_private(format!(
            "'{name}' is not an aggregate dpkit supports"
        )));
    };
    let params = &function.params;
    if params.distinct && (params.filter.is_some() || !params.order_by.is_empty()) {
        return Err(not_private(
            "FILTER and ORDER BY inside COUNT(DISTINCT …) are not supported: use CASE WHEN",
        ));
    }
    if params.distinct {
        let function_name = function.func.name().to_ascii_lowercase();
        return match (function_name.as_str(), params.args.as_slice()) {
            ("count", [argument]) if is_person(argument, lineage) => {
                Ok(count_people(argument, measured))
            }
            ("count", [argument]) => count_values(argument, totaliser, measured),
            _ => Err(not_private(
                "the DISTINCT aggregate dpkit answers is COUNT(DISTINCT expression)",
            )),
        };
    }
    let function_name = function.func.name().to_ascii_lowercase();
    if params.filter.is_none()
        && let Some(request) = quantiles::requested(&function_name, &params.args, &params.order_by)
    {
        let (p, argument) = request?;
        let argument = bounded(&function_name, unalias(argument), totaliser, lineage)?;
        return Ok(quantiles::quantile(p, argument, measured));
    }
    if params.filter.is_some() || !params.order_by.is_empty() {
        return Err(not_private(
            "FILTER and ORDER BY inside aggregates are not supported (but in percentiles' \
             WITHIN GROUP): use CASE WHEN",
        ));
    }
    let argument = params.args.first().map(unalias);
    if let (Some(dispersion), Some(argument), 1) =
        (Dispersion::of(&function_name), argument, params.args.len())
    {
        let argument = bounded(&function_name, argument, totaliser, lineage)?;
        return dispersion_of(dispersion, argument, measured);
    }
    match (function_name.as_str(), argument, params.args.len()) {
        ("count", None, 0) => Ok(count_rows(measured)),
        ("count", Some(Expr::Literal(value, _)), 1) if !value.is_null() => Ok(count_rows(measured)),
        ("count", Some(argument), 1) => {
            let total = totaliser.total(argument)?.expr;
            let m = measured.add(Measurement::Count, count(total));
            Ok((AggregateKind::CountColumn(shown(argument)), vec![m]))
        }
        ("sum", Some(argument), 1) => {
            let argument = bounded(&function_name, argument, totaliser, lineage)?;
            Ok(sum(argument, measured))
        }
        ("avg", Some(argument), 1) => {
            let argument = bounded(&function_name, argument, totaliser, lineage)?;
            average(argument, measured)
        }
        (name, _, _) if is_supported(name) => Err(not_private(format!(
            "{}() takes one argument",
            function_name.to_uppercase()
        ))),
        (other, _, _) => Err(not_private(format!(
            "{}() is not supported: use COUNT, SUM, AVG, VAR, STDDEV, MIN, MAX, MEDIAN or \
             PERCENTILE_CONT",
            other.to_uppercase()
        ))),
    }
}

fn count_rows(measured: &mut Measured) -> (AggregateKind, Vec<usize>) {
    let m = measured.add(Measurement::Count, count(lit(1i64)));
    (AggregateKind::CountRows, vec![m])
}

/// Checks and totalises a bounded numeric argument of `function_name`.
pub(super) fn bounded(
    function_name: &str,
    argument: &Expr,
    totaliser: &mut Totaliser<'_>,
    lineage: &Lineage<'_>,
) -> Result<Bounded> {
    let upper = function_name.to_uppercase();
    let column = shown(argument);
    let range = match range_of(argument, lineage) {
        Ok(Some(range)) => range,
        Ok(None) => return Err(not_private(format!("{upper}() of NULL: nothing to add up"))),
        Err(()) => {
            return Err(not_private(format!(
                "{upper}() needs a column with public bounds in the data description, or a \
                 CASE whose results are such columns or numbers (for '{column}')"
            )));
        }
    };
    let total = totaliser.total(argument)?;
    if !matches!(total.ty, Ty::Int | Ty::Real) {
        return Err(not_private(format!("{upper}() needs numbers")));
    }
    if range.low == 0.0 && range.high == 0.0 {
        return Err(not_private(format!(
            "the bounds of '{column}' are [0, 0]: nothing to add up"
        )));
    }
    Ok(Bounded {
        range,
        value: try_cast(total.expr.clone(), DataType::Float64),
        column,
        total: total.expr,
    })
}

fn sum(argument: Bounded, measured: &mut Measured) -> (AggregateKind, Vec<usize>) {
    let (bounds, _) = summation_bounds(argument.range);
    let value = clamp_to_bounds(argument.value, bounds.0, bounds.1);
    let sum = add_sum(value, argument.range, measured);
    let kind = AggregateKind::Sum {
        column: argument.column,
        bounds,
        integer: argument.range.integer,
    };
    (kind, vec![sum])
}

/// Whether `argument` is a private table's own person column.
fn is_person(argument: &Expr, lineage: &Lineage<'_>) -> bool {
    matches!(unalias(argument), Expr::Column(c) if lineage.is_person(c))
}

/// `COUNT(DISTINCT person)` under the id privacy unit, over a private
/// table's own person column (the id, or a `[private]` table's person),
/// traced through aliases, subqueries and joins (never a computed column):
/// how many people. Each person's rows carry their own value there, so
/// they add at most 1 to each group they reach, however many rows a join
/// made of them (and a row an outer join pads adds none).
fn count_people(argument: &Expr, measured: &mut Measured) -> (AggregateKind, Vec<usize>) {
    let m = measured.add(Measurement::People, count_distinct(argument.clone()));
    (AggregateKind::CountPeople, vec![m])
}

/// `COUNT(DISTINCT expression)`: each row adds at most one value to its
/// group's set, so a person's rows move the count as much as they move a
/// count of rows, and it is measured as one (`Measurement::Count`). Each
/// row's value is hashed into its group's set: text costs its bytes.
fn count_values(
    argument: &Expr,
    totaliser: &mut Totaliser<'_>,
    measured: &mut Measured,
) -> Result<(AggregateKind, Vec<usize>)> {
    let total = totaliser.total(argument)?;
    if total.ty == Ty::Text {
        totaliser.charge(total.bytes)?;
    }
    let m = measured.add(Measurement::Count, count_distinct(total.expr));
    Ok((AggregateKind::CountDistinct(shown(argument)), vec![m]))
}
