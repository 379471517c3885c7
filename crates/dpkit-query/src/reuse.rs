//! Plans kept for queries asked again: whole private plans by scope and
//! SQL text ([`PlanCache`]), and in each plan the outcome of DataFusion's
//! logical optimiser, which costs more than running a small query.
//!
//! Neither depends on anyone's data: a private plan is made from the SQL,
//! the description and the public tables only (planning reads no private
//! row), so a kept plan is the plan that would be made again, and whether
//! it was kept shows nothing about the data. A [`PlanCache`] keeps each
//! scope's plans apart, so that how fast a query is planned tells one
//! analyst nothing about the SQL another one asked.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::error::Result as DataFusionResult;
use datafusion::logical_expr::{Expr, LogicalPlan, Volatility};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionContext;

use crate::error::Result;
use crate::plan::PrivateQuery;

/// The physical plan of `query`'s rewritten plan in `context`. The
/// optimiser's outcome is kept in the query after its first run, unless
/// the plan calls a function whose value may change between runs (`now()`
/// is folded to a constant by the optimiser): such a plan is optimised
/// anew for every run.
pub(crate) async fn physical_plan(
    context: &SessionContext,
    query: &PrivateQuery,
) -> DataFusionResult<Arc<dyn ExecutionPlan>> {
    let state = context.state();
    let optimised = match query.optimised.get() {
        Some(kept) => kept.clone(),
        None => {
            let optimised = state.optimize(&query.plan)?;
            if same_every_run(&query.plan) {
                let _ = query.optimised.set(optimised.clone());
            }
            optimised
        }
    };
    state
        .query_planner()
        .create_physical_plan(&optimised, &state)
        .await
}

/// Whether every function `plan` calls (in subqueries too) is immutable:
/// the same arguments give the same value at every run.
fn same_every_run(plan: &LogicalPlan) -> bool {
    let mut same = true;
    let _ = plan.apply_with_subqueries(|node| {
        node.apply_expressions(|expr| {
            expr.apply(|e| {
                if let Expr::ScalarFunction(call) = e
                    && call.func.signature().volatility != Volatility::Immutable
                {
                    same = false;
                    return Ok(TreeNodeRecursion::Stop);
                }
                Ok(TreeNodeRecursion::Continue)
            })
        })?;
        Ok(match same {
            true => TreeNodeRecursion::Continue,
            false => TreeNodeRecursion::Stop,
        })
    });
    same
}

/// Private plans of one engine, kept by scope and SQL text: a query asked
/// again in the same scope is not planned again. Each scope keeps at most
/// `per_scope` plans and drops its own when full, so one scope's queries
/// never push out another's plans (nor show in its timing).
///
/// ```
/// use dpkit_query::{Description, QueryEngine, reuse::PlanCache};
/// let folder = std::env::temp_dir().join(format!("doc-reuse-{}", std::process::id()));
/// std::fs::create_dir_all(&folder).unwrap();
/// std::fs::write(folder.join("p.csv"), "mass\n3750\n").unwrap();
/// let description = Description::from_toml(
///     "[table]\nname = \"p\"\nfile = \"p.csv\"\n[privacy_unit]\nkind = \"row\"\n\
///      [budget]\nepsilon = 1.0\n[columns.mass]\ntype = \"integer\"\nbounds = [2000, 7000]\n",
///     &folder,
/// )
/// .unwrap();
/// let engine = QueryEngine::open(description).unwrap();
/// let cache = PlanCache::new(1);
/// let sql = "SELECT COUNT(*) FROM p";
/// let first = cache.plan("ann", sql, || engine.plan(sql)).unwrap();
/// let again = cache.plan("ann", sql, || engine.plan(sql)).unwrap();
/// assert!(std::sync::Arc::ptr_eq(&first, &again));
/// let bobs = cache.plan("bob", sql, || engine.plan(sql)).unwrap();
/// assert!(!std::sync::Arc::ptr_eq(&first, &bobs));
/// // Bob's plan did not push out Ann's; her second query pushes out her first.
/// assert!(std::sync::Arc::ptr_eq(&first, &cache.plan("ann", sql, || engine.plan(sql)).unwrap()));
/// let other = "SELECT COUNT(*) AS n FROM p";
/// cache.plan("ann", other, || engine.plan(other)).unwrap();
/// assert!(!std::sync::Arc::ptr_eq(&first, &cache.plan("ann", sql, || engine.plan(sql)).unwrap()));
/// # std::fs::remove_dir_all(&folder).unwrap();
/// ```
pub struct PlanCache {
    per_scope: usize,
    kept: Mutex<HashMap<String, HashMap<String, Arc<PrivateQuery>>>>,
}

impl PlanCache {
    /// A cache of at most `per_scope` plans in each scope (none with 0).
    pub fn new(per_scope: usize) -> Self {
        Self {
            per_scope,
            kept: Mutex::default(),
        }
    }

    /// The private plan of `sql` in `scope`: kept, or made by `make` (the
    /// engine's [`plan`](crate::QueryEngine::plan) of `sql`) and kept. A
    /// query that cannot be planned is refused as `make` refuses it, and
    /// nothing is kept.
    pub fn plan(
        &self,
        scope: &str,
        sql: &str,
        make: impl FnOnce() -> Result<PrivateQuery>,
    ) -> Result<Arc<PrivateQuery>> {
        let found = self
            .kept
            .lock()
            .ok()
            .and_then(|kept| kept.get(scope)?.get(sql).cloned());
        if let Some(kept) = found {
            return Ok(kept);
        }
        let planned = Arc::new(make()?);
        if let Ok(mut kept) = self.kept.lock()
            && self.per_scope > 0
        {
            let own = kept.entry(scope.to_string()).or_default();
            if own.len() >= self.per_scope && !own.contains_key(sql) {
                own.clear();
            }
            own.insert(sql.to_string(), planned.clone());
        }
        Ok(planned)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(sql: &str) -> LogicalPlan {
        let context = SessionContext::new();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime
            .block_on(context.state().create_logical_plan(sql))
            .unwrap()
    }

    #[test]
    fn only_plans_of_immutable_functions_keep_their_optimised_form() {
        assert!(same_every_run(&plan("SELECT abs(-1) + 2 AS x")));
        for sql in [
            "SELECT now() AS x",
            "SELECT random() AS x",
            "SELECT 1 AS x WHERE EXISTS (SELECT 1 WHERE now() > to_timestamp(0))",
        ] {
            assert!(!same_every_run(&plan(sql)), "{sql}");
        }
    }
}
