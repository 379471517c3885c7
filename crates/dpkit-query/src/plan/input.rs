//! What is below the aggregate: one scan of the table, with filters and
//! subqueries whose every expression is rewritten into total form.

use datafusion::logical_expr::{Expr, LogicalPlan, LogicalPlanBuilder};

use super::{not_private, sql_error};
use crate::error::{QueryError, Result};
use crate::total::Totaliser;

/// `plan` rebuilt with total expressions, or a refusal. Only scans of
/// `table` (the typed, capped view), filters, projections and aliases are
/// accepted. The planner inlines the view: it arrives as `view` under the
/// alias `table`, and is kept as it is.
pub(super) fn rewrite(plan: &LogicalPlan, table: &str, view: &LogicalPlan) -> Result<LogicalPlan> {
    match plan {
        LogicalPlan::SubqueryAlias(alias)
            if alias.alias.table() == table && alias.input.as_ref() == view =>
        {
            Ok(plan.clone())
        }
        LogicalPlan::TableScan(scan) => {
            if scan.table_name.table() != table {
                return Err(QueryError::Sql(format!(
                    "unknown table '{}'",
                    scan.table_name
                )));
            }
            if !scan.filters.is_empty() || scan.fetch.is_some() {
                return Err(not_private(
                    "the table scan carries filters dpkit did not check",
                ));
            }
            Ok(plan.clone())
        }
        LogicalPlan::Filter(filter) => {
            let input = rewrite(&filter.input, table, view)?;
            let predicate = Totaliser::new(input.schema()).predicate(&filter.predicate)?;
            LogicalPlanBuilder::from(input)
                .filter(predicate)
                .and_then(LogicalPlanBuilder::build)
                .map_err(sql_error)
        }
        LogicalPlan::Projection(projection) => {
            let input = rewrite(&projection.input, table, view)?;
            let mut totaliser = Totaliser::new(input.schema());
            let mut exprs = Vec::with_capacity(projection.expr.len());
            for (index, expr) in projection.expr.iter().enumerate() {
                let (qualifier, field) = projection.schema.qualified_field(index);
                let total = totaliser.total(expr)?.expr;
                exprs.push(match &total {
                    Expr::Column(c)
                        if c.relation.as_ref() == qualifier && &c.name == field.name() =>
                    {
                        total
                    }
                    _ => total
                        .unalias()
                        .alias_qualified(qualifier.cloned(), field.name()),
                });
            }
            LogicalPlanBuilder::from(input)
                .project(exprs)
                .and_then(LogicalPlanBuilder::build)
                .map_err(sql_error)
        }
        LogicalPlan::SubqueryAlias(alias) => {
            let input = rewrite(&alias.input, table, view)?;
            LogicalPlanBuilder::from(input)
                .alias(alias.alias.clone())
                .and_then(LogicalPlanBuilder::build)
                .map_err(sql_error)
        }
        LogicalPlan::Join(_) => Err(not_private("joins are not supported")),
        LogicalPlan::Union(_) => Err(not_private("UNION is not supported")),
        LogicalPlan::Window(_) => Err(not_private("window functions are not supported")),
        LogicalPlan::Aggregate(_) | LogicalPlan::Distinct(_) => Err(not_private(
            "nested aggregation and DISTINCT subqueries are not supported",
        )),
        LogicalPlan::Limit(_) | LogicalPlan::Sort(_) => Err(not_private(
            "ORDER BY and LIMIT are only supported on the answer",
        )),
        _ => Err(not_private(
            "subqueries and table functions are not supported",
        )),
    }
}
