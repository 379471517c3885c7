//! Comma joins written as the joins they mean: `FROM a, b WHERE a.x = b.y`
//! is planned by DataFusion as a cross join under a filter, which the
//! planner would refuse (a cross join pairs every row with every row).
//! DataFusion's own rule moves the equalities of the filter into the join,
//! as `FROM a JOIN b ON a.x = b.y` would have them; the result means the
//! same, and is checked like any other plan (a join of private tables
//! still needs the two persons' equality).

use datafusion::common::tree_node::TreeNode;
use datafusion::logical_expr::LogicalPlan;
use datafusion::optimizer::eliminate_cross_join::EliminateCrossJoin;
use datafusion::optimizer::{OptimizerContext, OptimizerRule};

/// `plan` with its cross joins turned into inner joins on the equalities
/// of the filters above them; `plan` itself when it has no cross join (or
/// the rule fails: the planner then refuses the cross join as before).
pub(super) fn as_equijoins(plan: LogicalPlan) -> LogicalPlan {
    let crossed = plan
        .exists(|node| {
            Ok(matches!(node, LogicalPlan::Join(join) if join.on.is_empty() && join.filter.is_none()))
        })
        .unwrap_or(false);
    if !crossed {
        return plan;
    }
    match EliminateCrossJoin::new().rewrite(plan.clone(), &OptimizerContext::new()) {
        Ok(rewritten) => rewritten.data,
        Err(_) => plan,
    }
}
