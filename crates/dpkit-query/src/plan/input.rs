//! What is below the aggregate: one scan of the table, with filters and
//! subqueries whose every expression is rewritten into total form.

use datafusion::logical_expr::{Expr, LogicalPlan, LogicalPlanBuilder};

use super::{not_private, sql_error};
use crate::error::{QueryError, Result};
use dpkit_total::{Size, Sizes, Totaliser, check_work};

/// `plan` rebuilt with total expressions, or a refusal. Only scans of
/// `table` (the typed, capped view), filters, projections and aliases are
/// accepted. The planner inlines the view: it arrives as `view` under the
/// alias `table`, and is kept as it is.
/// Also returns the [`Sizes`] of its output columns (`base` gives the
/// table's own), and the work per row of its filters.
pub(super) fn rewrite(
    plan: &LogicalPlan,
    table: &str,
    view: &LogicalPlan,
    base: &Sizes,
) -> Result<(LogicalPlan, Sizes, u64)> {
    match plan {
        LogicalPlan::SubqueryAlias(alias)
            if alias.alias.table() == table && alias.input.as_ref() == view =>
        {
            Ok((plan.clone(), base.clone(), 0))
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
            Ok((plan.clone(), base.clone(), 0))
        }
        LogicalPlan::Filter(filter) => {
            let (input, sizes, work) = rewrite(&filter.input, table, view, base)?;
            let mut totaliser = Totaliser::new(input.schema(), &sizes);
            let predicate = totaliser.predicate(&filter.predicate)?;
            let work = work.saturating_add(totaliser.work());
            check_work(work)?;
            let plan = LogicalPlanBuilder::from(input)
                .filter(predicate)
                .and_then(LogicalPlanBuilder::build)
                .map_err(sql_error)?;
            Ok((plan, sizes, work))
        }
        LogicalPlan::Projection(projection) => {
            let (input, sizes, work) = rewrite(&projection.input, table, view, base)?;
            let mut totaliser = Totaliser::new(input.schema(), &sizes);
            let mut exprs = Vec::with_capacity(projection.expr.len());
            let mut computed = Sizes::new();
            for (index, expr) in projection.expr.iter().enumerate() {
                let (qualifier, field) = projection.schema.qualified_field(index);
                let (total, size) = totaliser.total_with_size(expr)?;
                let total = total.expr;
                // Two columns of one name: the larger of each measure.
                let merged = match computed.get(field.name()) {
                    Some(known) => Size {
                        nodes: known.nodes.max(size.nodes),
                        depth: known.depth.max(size.depth),
                        bytes: known.bytes.max(size.bytes),
                        work: known.work.max(size.work),
                    },
                    None => size,
                };
                computed.insert(field.name().clone(), merged);
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
            let plan = LogicalPlanBuilder::from(input)
                .project(exprs)
                .and_then(LogicalPlanBuilder::build)
                .map_err(sql_error)?;
            Ok((plan, computed, work))
        }
        LogicalPlan::SubqueryAlias(alias) => {
            let (input, sizes, work) = rewrite(&alias.input, table, view, base)?;
            let plan = LogicalPlanBuilder::from(input)
                .alias(alias.alias.clone())
                .and_then(LogicalPlanBuilder::build)
                .map_err(sql_error)?;
            Ok((plan, sizes, work))
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

/// Whether `plan` reads the table's own columns: scans of it, or filters
/// and aliases over them, with no subquery that could rename a column.
pub(super) fn reads_table_directly(plan: &LogicalPlan, table: &str, view: &LogicalPlan) -> bool {
    match plan {
        LogicalPlan::SubqueryAlias(alias)
            if alias.alias.table() == table && alias.input.as_ref() == view =>
        {
            true
        }
        LogicalPlan::TableScan(scan) => scan.table_name.table() == table,
        LogicalPlan::Filter(filter) => reads_table_directly(&filter.input, table, view),
        LogicalPlan::SubqueryAlias(alias) => reads_table_directly(&alias.input, table, view),
        _ => false,
    }
}
