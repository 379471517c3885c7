//! What is below the aggregate: scans of private tables, joined with each
//! other on the person and with public tables, with filters and subqueries
//! whose every expression is rewritten into total form.

use datafusion::logical_expr::{Expr, LogicalPlan, LogicalPlanBuilder};

use super::reach::{Reach, Reads, Rewritten, Scope, merge_size};
use super::tables::PrivateView;
use super::{not_private, sql_error};
use crate::error::{QueryError, Result};
use dpkit_total::{Sizes, Totaliser};

/// `plan` rebuilt with total expressions, or a refusal. Only private
/// tables' views (each inlined by the planner under its table's name),
/// public tables, joins (see `joins`), filters, projections and aliases are
/// accepted.
pub(super) fn rewrite(plan: &LogicalPlan, scope: &mut Scope<'_, '_>) -> Result<Rewritten> {
    if let Some(table) = scope.tables.iter().find(|table| table.is(plan)) {
        return Ok(private(plan, table));
    }
    match plan {
        LogicalPlan::TableScan(scan) => {
            if !scan.filters.is_empty() || scan.fetch.is_some() {
                return Err(not_private(
                    "the table scan carries filters dpkit did not check",
                ));
            }
            let name = scan.table_name.table();
            if let Some(table) = scope.tables.iter().find(|table| table.name == name) {
                return Ok(private(plan, table));
            }
            let Some(public) = scope.public.get(name) else {
                return Err(QueryError::Sql(format!(
                    "unknown table '{}'",
                    scan.table_name
                )));
            };
            Ok(Rewritten {
                plan: plan.clone(),
                sizes: public.sizes.clone(),
                work: 0,
                reads: Reads::Public,
            })
        }
        LogicalPlan::Filter(filter) => {
            let below = rewrite(&filter.input, scope)?;
            let mut totaliser = Totaliser::new(below.plan.schema(), &below.sizes);
            let predicate = totaliser.predicate(&filter.predicate)?;
            let nodes = super::reach::nodes_of([&predicate]) + 1;
            let work = below.above(totaliser.work(), nodes)?;
            let plan = LogicalPlanBuilder::from(below.plan)
                .filter(predicate)
                .and_then(LogicalPlanBuilder::build)
                .map_err(sql_error)?;
            Ok(Rewritten {
                plan,
                work,
                ..below
            })
        }
        LogicalPlan::Projection(projection) => {
            let below = rewrite(&projection.input, scope)?;
            // Its columns' work is charged where they are used (their
            // sizes carry it), as DataFusion inlines them there.
            let (exprs, sizes) = projected(projection, &below)?;
            let work = below.work;
            let plan = LogicalPlanBuilder::from(below.plan)
                .project(exprs)
                .and_then(LogicalPlanBuilder::build)
                .map_err(sql_error)?;
            Ok(Rewritten {
                plan,
                sizes,
                work,
                reads: below.reads,
            })
        }
        LogicalPlan::SubqueryAlias(alias) => {
            let below = rewrite(&alias.input, scope)?;
            let plan = LogicalPlanBuilder::from(below.plan)
                .alias(alias.alias.clone())
                .and_then(LogicalPlanBuilder::build)
                .map_err(sql_error)?;
            Ok(Rewritten { plan, ..below })
        }
        LogicalPlan::Join(join) => {
            let join = super::joins::equalities_as_keys(join)?;
            let left = rewrite(&join.left, scope)?;
            let right = rewrite(&join.right, scope)?;
            match (&left.reads, &right.reads) {
                (Reads::Private(_), Reads::Private(_)) => {
                    super::person_joins::joined(&join, (left, right), scope)
                }
                _ => super::joins::joined(&join, (left, right), scope),
            }
        }
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

/// A private table's view (or scan), as it is.
fn private(plan: &LogicalPlan, table: &PrivateView<'_>) -> Rewritten {
    Rewritten {
        plan: plan.clone(),
        sizes: table.sizes.clone(),
        work: 0,
        reads: Reads::Private(Reach {
            rows_per_person: table.facts.rows_per_person,
            batches: super::reach::SCANNED_BATCHES,
            joins: Vec::new(),
            notes: Vec::new(),
        }),
    }
}

/// A projection's total expressions and their sizes.
fn projected(
    projection: &datafusion::logical_expr::Projection,
    below: &Rewritten,
) -> Result<(Vec<Expr>, Sizes)> {
    let mut totaliser = Totaliser::new(below.plan.schema(), &below.sizes);
    let mut exprs = Vec::with_capacity(projection.expr.len());
    let mut computed = Sizes::new();
    for (index, expr) in projection.expr.iter().enumerate() {
        let (qualifier, field) = projection.schema.qualified_field(index);
        let (total, size) = totaliser.total_with_size(expr)?;
        let total = total.expr;
        merge_size(&mut computed, field.name(), size);
        exprs.push(match &total {
            Expr::Column(c) if c.relation.as_ref() == qualifier && &c.name == field.name() => total,
            _ => total
                .unalias()
                .alias_qualified(qualifier.cloned(), field.name()),
        });
    }
    Ok((exprs, computed))
}
