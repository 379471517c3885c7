//! What the embedded engine runs differently from a database: each exact
//! sum of a clamped value clamps in its own pass
//! (`dpkit_functions::exact_sum::fused`), with the same steps. A database
//! is sent the plan as the planner wrote it.

use datafusion::logical_expr::{Aggregate, Expr, LogicalPlan};
use dpkit_functions::exact_sum::fused;

use super::sql_error;
use crate::error::Result;

/// `plan` (the planner's: an aggregate at its root) with its sums fused.
pub(crate) fn for_the_embedded_engine(plan: LogicalPlan) -> Result<LogicalPlan> {
    let LogicalPlan::Aggregate(aggregate) = &plan else {
        return Ok(plan);
    };
    let fused_measure = |measure: &Expr| match measure {
        Expr::Alias(alias) => fused(&alias.expr).map(|sum| {
            let mut alias = alias.clone();
            alias.expr = Box::new(sum);
            Expr::Alias(alias)
        }),
        other => fused(other),
    };
    let fused: Vec<Option<Expr>> = aggregate.aggr_expr.iter().map(fused_measure).collect();
    if fused.iter().all(Option::is_none) {
        return Ok(plan);
    }
    let measures = fused
        .into_iter()
        .zip(&aggregate.aggr_expr)
        .map(|(fused, measure)| fused.unwrap_or_else(|| measure.clone()))
        .collect();
    let group = aggregate.group_expr.clone();
    Aggregate::try_new(aggregate.input.clone(), group, measures)
        .map(LogicalPlan::Aggregate)
        .map_err(sql_error)
}
