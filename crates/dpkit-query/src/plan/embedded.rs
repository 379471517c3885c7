//! What the embedded engine runs differently from a database:
//!
//! * each exact sum of a clamped value clamps in its own pass
//!   (`dpkit_functions::exact_sum::fused`), with the same steps;
//! * a count of the value an exact sum adds (an average's count) is made
//!   by the sum, in the same pass (`dpkit_functions::sum_and_count`): the
//!   aggregate returns both, and a projection above it gives back the two
//!   columns the planner wrote, under their names, in their places.
//!
//! A database is sent the plan as the planner wrote it.

use std::sync::Arc;

use datafusion::common::{Column, DFSchema};
use datafusion::logical_expr::{Aggregate, Expr, LogicalPlan, Projection};
use dpkit_functions::exact_sum::fused;
use dpkit_functions::sum_and_count::{parts, with_count};

use super::sql_error;
use crate::error::Result;

/// `plan` (the planner's: an aggregate at its root) with its sums fused,
/// and its counts made by the sums where they can be.
pub(crate) fn for_the_embedded_engine(plan: LogicalPlan) -> Result<LogicalPlan> {
    let LogicalPlan::Aggregate(aggregate) = &plan else {
        return Ok(plan);
    };
    let measures: Vec<Expr> = aggregate
        .aggr_expr
        .iter()
        .map(|m| renamed(m, fused).unwrap_or_else(|| m.clone()))
        .collect();
    let makers = count_makers(&measures, aggregate.input.schema());
    let pairs = makers.iter().any(Option::is_some);
    if measures == aggregate.aggr_expr && !pairs {
        return Ok(plan);
    }
    let (measures, places) = paired(&measures, &makers);
    let group = aggregate.group_expr.clone();
    let below = Aggregate::try_new(aggregate.input.clone(), group, measures)
        .map(LogicalPlan::Aggregate)
        .map_err(sql_error)?;
    match pairs {
        false => Ok(below),
        true => back_in_place(Arc::new(below), &places, plan.schema()),
    }
}

/// Where each of the planner's measures is in the aggregate that pairs
/// sums with counts.
#[derive(Debug, Clone, Copy)]
enum Place {
    /// As it was, at this measure.
    Kept(usize),
    /// The sum of this measure's pair.
    Sum(usize),
    /// The count of this measure's pair.
    Count(usize),
}

/// For each measure that is a count an exact sum of the same value can
/// make: that sum's measure, and the sum made to count. A sum makes one
/// count at most, and is not itself a count.
fn count_makers(measures: &[Expr], input: &DFSchema) -> Vec<Option<(usize, Expr)>> {
    let mut makers: Vec<Option<(usize, Expr)>> = vec![None; measures.len()];
    for (c, count) in measures.iter().enumerate() {
        let taken =
            |s: usize| makers[s].is_some() || makers.iter().flatten().any(|(sum, _)| *sum == s);
        makers[c] = (0..measures.len()).filter(|&s| !taken(s)).find_map(|s| {
            let pair = with_count(unaliased(&measures[s]), unaliased(count), input)?;
            Some((s, pair))
        });
    }
    makers
}

/// The measures with each count that `makers` names dropped and its sum
/// made to count, and where every measure of `measures` went.
fn paired(measures: &[Expr], makers: &[Option<(usize, Expr)>]) -> (Vec<Expr>, Vec<Place>) {
    let maker_of = |m: usize| makers[m].as_ref().map(|(sum, _)| *sum);
    let counting = |m: usize| makers.iter().flatten().find(|(sum, _)| *sum == m);
    let mut kept = Vec::new();
    let mut at = vec![0; measures.len()];
    for (m, measure) in measures.iter().enumerate() {
        if maker_of(m).is_none() {
            at[m] = kept.len();
            kept.push(match counting(m) {
                Some((_, pair)) => named_as(measure, pair.clone()),
                None => measure.clone(),
            });
        }
    }
    let places = (0..measures.len()).map(|m| match (maker_of(m), counting(m)) {
        (Some(sum), _) => Place::Count(at[sum]),
        (None, Some(_)) => Place::Sum(at[m]),
        (None, None) => Place::Kept(at[m]),
    });
    (kept, places.collect())
}

/// The planner's columns over `below`: its keys, then each measure from
/// its place, under the name and qualifier it had in `schema`.
fn back_in_place(
    below: Arc<LogicalPlan>,
    places: &[Place],
    schema: &DFSchema,
) -> Result<LogicalPlan> {
    let measures = places
        .iter()
        .filter(|p| !matches!(p, Place::Count(_)))
        .count();
    let keys = below.schema().fields().len() - measures;
    let column = |i: usize| Expr::Column(Column::from(below.schema().qualified_field(i)));
    let mut columns: Vec<Expr> = (0..keys).map(column).collect();
    for place in places {
        columns.push(match *place {
            Place::Kept(m) => column(keys + m),
            Place::Sum(m) => parts(column(keys + m)).0,
            Place::Count(m) => parts(column(keys + m)).1,
        });
    }
    let named = columns.into_iter().enumerate().map(|(i, expr)| {
        let (qualifier, field) = schema.qualified_field(i);
        match &expr {
            Expr::Column(c) if c.name == *field.name() && c.relation.as_ref() == qualifier => expr,
            _ => expr.alias_qualified(qualifier.cloned(), field.name()),
        }
    });
    Projection::try_new(named.collect(), below)
        .map(LogicalPlan::Projection)
        .map_err(sql_error)
}

/// `change` of a measure, under the measure's alias if it has one.
fn renamed(measure: &Expr, change: impl Fn(&Expr) -> Option<Expr>) -> Option<Expr> {
    change(unaliased(measure)).map(|changed| named_as(measure, changed))
}

/// `expr` under `measure`'s alias, if it has one.
fn named_as(measure: &Expr, expr: Expr) -> Expr {
    match measure {
        Expr::Alias(alias) => {
            let mut alias = alias.clone();
            alias.expr = Box::new(expr);
            Expr::Alias(alias)
        }
        _ => expr,
    }
}

/// `measure` without its alias.
fn unaliased(measure: &Expr) -> &Expr {
    match measure {
        Expr::Alias(alias) => &alias.expr,
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Float64Array, Int64Array, RecordBatch, StringArray};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::arrow::util::pretty::pretty_format_batches;
    use datafusion::functions_aggregate::expr_fn::count;
    use datafusion::prelude::{SessionContext, col, lit, try_cast};
    use dpkit_functions::clamp::clamp_and_centre;
    use dpkit_functions::exact_sum::exact_sum;

    /// Rows with NULLs in both measured columns, in three groups.
    fn table() -> RecordBatch {
        let schema = Schema::new(vec![
            Field::new("region", DataType::Utf8, true),
            Field::new("age", DataType::Int64, true),
            Field::new("score", DataType::Float64, true),
        ]);
        let rows = 40;
        let region = StringArray::from_iter((0..rows).map(|i| Some(["a", "b", "c"][i % 3])));
        let age = Int64Array::from_iter((0..rows).map(|i| (i % 4 != 0).then_some(i as i64)));
        let score =
            Float64Array::from_iter((0..rows).map(|i| (i % 5 != 1).then_some(i as f64 / 3.0)));
        let columns: Vec<Arc<dyn datafusion::arrow::array::Array>> =
            vec![Arc::new(region), Arc::new(age), Arc::new(score)];
        RecordBatch::try_new(Arc::new(schema), columns).unwrap()
    }

    fn sum_of(column: &str) -> Expr {
        let value = try_cast(col(column), DataType::Float64);
        exact_sum(clamp_and_centre(value, 0.0, 30.0, 15.0), -20)
    }

    /// A count before its sum, a second count of the same value (the sum
    /// makes one), a count of another column's sum and a count of rows:
    /// the rewritten plan counts in the sums, and gives the planner's
    /// columns (names, qualifiers, types, nullability, order) and values.
    #[test]
    fn counts_made_by_sums_give_the_planners_columns_and_values() {
        let context = SessionContext::new();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let measures = [
            count(col("age")),
            sum_of("age"),
            count(col("age")),
            sum_of("score"),
            count(col("score")),
            count(lit(1)),
        ];
        let named = measures
            .into_iter()
            .enumerate()
            .map(|(i, m)| m.alias(format!("__dpkit_measure_{i}")));
        let planner = context
            .read_batch(table())
            .unwrap()
            .aggregate(vec![col("region").alias("__dpkit_key_0")], named.collect())
            .unwrap()
            .logical_plan()
            .clone();
        let rewritten = for_the_embedded_engine(planner.clone()).unwrap();
        let LogicalPlan::Projection(projection) = &rewritten else {
            panic!("a projection over the aggregate: {rewritten}")
        };
        let LogicalPlan::Aggregate(below) = projection.input.as_ref() else {
            panic!("the aggregate under the projection")
        };
        let shown: Vec<String> = below.aggr_expr.iter().map(ToString::to_string).collect();
        assert_eq!(shown.len(), 4, "{shown:?}");
        let start = |i: usize, call: &str| {
            let plain = shown[i].replace("?table?.", "");
            assert!(plain.starts_with(call), "{plain} is not {call}…");
        };
        start(0, "dpkit_clamped_sum_and_count(TRY_CAST(age");
        start(1, "count(age)");
        start(2, "dpkit_clamped_sum_and_count(TRY_CAST(score");
        start(3, "count(Int32(1))");
        let fields = |plan: &LogicalPlan| -> Vec<_> {
            let schema = plan.schema();
            (0..schema.fields().len())
                .map(|i| schema.qualified_field(i))
                .map(|(q, f)| (q.cloned(), f.as_ref().clone()))
                .collect()
        };
        assert_eq!(fields(&rewritten), fields(&planner));
        let sorted = |plan: LogicalPlan| {
            let frame = runtime
                .block_on(context.execute_logical_plan(plan))
                .unwrap();
            let frame = frame.sort_by(vec![col("__dpkit_key_0")]).unwrap();
            let batches = runtime.block_on(frame.collect()).unwrap();
            pretty_format_batches(&batches).unwrap().to_string()
        };
        assert_eq!(sorted(rewritten), sorted(planner));
    }
}
